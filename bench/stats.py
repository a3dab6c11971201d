"""stats.py -- the statistics every overhead figure uses (Python stdlib only).

Per randomized setup the bench takes a ratio (tool's wall time / the
baseline's wall time in the same setup).  Over the setups it reports:
  - the median ratio;
  - a 95% confidence interval: a t-interval on the logarithms of the ratios
    (i.e. for the geometric mean ratio), the test the paper's measurement
    chapter uses (seed 002, ch. 4) -- ratios are multiplicative, so logs;
  - "no significant difference" when that interval contains 1.0.
"""
import math
import statistics

# two-sided 95% Student t quantiles t(0.975, df) for df = 1..30
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def t975(df):
    if df < 1:
        return float("nan")
    if df <= 30:
        return _T975[df - 1]
    return 1.960 + 2.4 / df          # close to the table beyond 30


def ratio_summary(ratios):
    """dict(n, median, lo, hi, gmean, significant) for a list of positive ratios."""
    rs = [r for r in ratios if r is not None and r > 0 and math.isfinite(r)]
    n = len(rs)
    if n == 0:
        return {"n": 0}
    logs = [math.log(r) for r in rs]
    m = statistics.fmean(logs)
    out = {"n": n, "median": statistics.median(rs), "gmean": math.exp(m),
           "min": min(rs), "max": max(rs)}
    if n >= 2:
        half = t975(n - 1) * statistics.stdev(logs) / math.sqrt(n)
        out["lo"], out["hi"] = math.exp(m - half), math.exp(m + half)
        out["significant"] = not (out["lo"] <= 1.0 <= out["hi"])
    return out


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(statistics.fmean(math.log(x) for x in xs)) if xs else None


def fmt_ratio(s, digits=2):
    """'1.23x [1.10, 1.40]' or '1.01x [0.97, 1.05] no significant difference'."""
    if not s or s.get("n", 0) == 0:
        return "n/a"
    f = "%%.%df" % digits
    txt = (f + "x") % s["median"]
    if "lo" in s:
        txt += (" [" + f + ", " + f + "]") % (s["lo"], s["hi"])
        if not s["significant"]:
            txt += " no significant difference"
    return txt
