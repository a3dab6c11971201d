"""statsfig.py -- the `stats` figure (issue #15): how far a profile can be trusted.

measure(bench) -> dict for results.json["stats"]; render(report) writes its
section of RESULTS.md.  Three parts:
  actionability  the corpus program inject.c at injection levels 0..8 (extra
                 work on main;path_a;victim only): the time each profiler
                 attributes to that path (its share times the program's
                 unprofiled CPU time) regressed on that CPU time -- slope 1 is
                 actionable (Mytkowicz, section 3.3).  icpp-sample + icpp-resolve
                 side by side with perf record -g (frame-pointer call chains),
                 same event and period, the same binary.
  auto period    icpp-sample --auto-period on the first bench program: the
                 pilots' inputs, n*, the period, the samples taken and the
                 resulting 95% interval widths, beside the default rate.
  coverage       inject.c: the share of 95% intervals, over N short runs,
                 that hold the true share (a long run), fixed period and
                 --jitter.
"""
import json
import math
import os
import re
import statistics
import subprocess
import time

Z = 1.959963984540054
OWN = {"main", "steady", "spin", "path_a", "path_b", "victim"}     # inject.c's functions
TARGET = ("main", "path_a", "victim")


def _out(cmd, timeout=600, cwd=None):
    """(rc, stdout, stderr) of cmd."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "", str(e)
    return p.returncode, p.stdout, p.stderr


def _cpu(cmd):
    """User + system seconds of cmd, unprofiled (as `time` reports)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime if status == 0 else None


def _slope(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else None


def _own(path):
    return tuple(path[path.index("main"):]) if "main" in path else tuple(path)


def _icpp_shares(b, mapf, rec):
    """{own path: self share} and the sample count of a recording, via icpp-resolve json."""
    rc, out, err = _out([b.resolve] + (["-m", mapf] if mapf else []) + ["--format", "json", rec])
    if rc != 0:
        return None, 0, err
    d = json.loads(out)
    n = d["events"][0]["samples"]
    return {_own(p["path"]): (p["self"][0] / n if n else 0, p["share_ci"][0]) for p in d["paths"]}, n, d


def _perf_share(b, rec, path):
    """Share of perf's samples whose call chain, the program's own frames leaf first, is `path`
    (and of those whose leaf is path's leaf, on any path)."""
    rc, out, _ = _out([b.perf, "script", "-i", rec, "-F", "ip,sym"])
    if rc != 0:
        return None, None, 0
    n = hit = leaf = 0
    for block in out.split("\n\n"):
        syms = [ln.split()[1] for ln in block.strip("\n").splitlines() if len(ln.split()) >= 2]
        if not syms:
            continue
        n += 1
        own = [s for s in syms if s in OWN]
        hit += tuple(reversed(own)) == path
        leaf += bool(own) and own[0] == path[-1]
    return (hit / n if n else None), (leaf / n if n else None), n


def actionability(b, prog, scale, levels, period):
    res = {"program": os.path.relpath(prog, b.a.tools) if prog.startswith(b.a.tools) else prog, "scale": scale,
           "levels": levels, "period_ns": period, "path": ";".join(TARGET), "rows": []}
    scratch = os.path.join(b.work, "stats")
    os.makedirs(scratch, exist_ok=True)
    mapf = os.path.join(scratch, "inject.icppmap")
    rc, _, err = _out([b.train, "-o", mapf, "--", prog, "1", "1"])
    if rc != 0:
        b.error("stats train inject", [b.train, prog], {"rc": rc, "err": err})
        return res
    P = str(period)
    res["cmd_icpp"] = "icpp-sample -e cpu-clock -c %s -o REC -- PROG %s L; icpp-resolve -m MAP --format json REC" % (
        P, scale)
    res["cmd_perf"] = "perf record -e cpu-clock:u -c %s -g -o REC -- PROG %s L; perf script -F ip,sym" % (P, scale)
    for lv in levels:
        args = [str(scale), str(lv)]
        xs = [c for c in (_cpu([prog] + args) for _ in range(3)) if c is not None]
        row = {"level": lv, "cpu_s": statistics.median(xs) if xs else None}
        rec = os.path.join(scratch, "act.samples")
        # default (learn samples share an ambiguous CID by this recording's
        # counts) and --no-learn (by the training counts alone)
        for key, extra in (("icpp", []), ("icpp_nolearn", ["--no-learn"])):
            rc, _, err = _out([b.sample, "-e", "cpu-clock", "-c", P] + extra + ["-o", rec, "--", prog] + args)
            sh, n, _ = _icpp_shares(b, mapf, rec) if rc == 0 else (None, 0, err)
            if sh is not None:
                row[key + "_share"], row[key + "_samples"] = sh.get(TARGET, (0.0, None))[0], n
        if b.perf:
            prec = os.path.join(scratch, "act.perf")
            rc, _, err = _out([b.perf, "record", "--no-bpf-event", "-e", "cpu-clock:u", "-c", P, "-g", "-o", prec,
                               "--", prog] + args)
            if rc == 0:
                row["perf_share"], row["perf_leaf_share"], row["perf_samples"] = _perf_share(b, prec, TARGET)
            for f in (prec, prec + ".old"):
                if os.path.exists(f):
                    os.unlink(f)
        res["rows"].append(row)
    for k in ("icpp_share", "icpp_nolearn_share", "perf_share", "perf_leaf_share"):
        pts = [(r["cpu_s"], r[k] * r["cpu_s"]) for r in res["rows"] if r.get(k) is not None and r.get("cpu_s")]
        if len(pts) >= 2:
            res["slope_" + k.replace("_share", "")] = _slope([p[0] for p in pts], [p[1] for p in pts])
    return res


def auto_period(b, name, inp):
    cmd = b.prog_cmd(name, "fp", inp)
    stdin = inp["file"] if inp["stdin"] else None
    scratch = os.path.join(b.work, "stats")
    res = {"program": name, "input": inp["id"]}
    if stdin:
        res["error"] = "reads standard input: --auto-period's pilots give it /dev/null"
        return res
    for kind, extra in (("auto", ["--auto-period"]), ("default", [])):
        rec = os.path.join(scratch, "auto-%s.samples" % kind)
        t0 = time.time()
        rc, _, err = _out([b.sample, "-e", "cpu-clock"] + extra + ["-o", rec, "--"] + cmd, cwd=scratch)
        e = {"wall_s": time.time() - t0, "cmd": "icpp-sample -e cpu-clock %s-o REC -- %s ARGS" % (
            " ".join(extra) + " " if extra else "", name)}
        if rc != 0:
            b.error("stats auto-period %s" % kind, cmd, {"rc": rc, "err": err})
            res[kind] = e
            continue
        e["stderr"] = [ln for ln in err.splitlines() if "auto period" in ln]
        m = re.search(r"(\d+) samples of", err)
        e["samples"] = int(m.group(1)) if m else None
        sh, n, d = _icpp_shares(b, None, rec)
        if sh is not None:
            top = sorted(sh.items(), key=lambda kv: -kv[1][0])[:5]
            e["top"] = [{"path": ";".join(p[-3:]), "share": s, "ci": ci} for p, (s, ci) in top]
        os.unlink(rec)
        res[kind] = e
    return res


def coverage(b, prog, runs):
    scratch = os.path.join(b.work, "stats")
    mapf = os.path.join(scratch, "inject.icppmap")
    rec = os.path.join(scratch, "cov.samples")
    res = {"runs": runs, "cmd": "icpp-sample -e cpu-clock -c 250000 [--jitter 0.2] -- inject 4 2 (short runs); "
                                "-c 100000 -- inject 30 2 (the true shares)"}
    rc, _, err = _out([b.sample, "-e", "cpu-clock", "-c", "100000", "-o", rec, "--", prog, "30", "2"])
    sh, n, _ = _icpp_shares(b, mapf, rec) if rc == 0 else (None, 0, err)
    if not sh:
        return res
    leaves = [p for p in sh if len(p) == 3 and p[-1] in ("spin", "victim")]
    truth = {p: sh[p][0] for p in leaves}
    res["truth"] = {";".join(p): v for p, v in truth.items()}
    res["truth_samples"] = n
    for kind, extra in (("fixed", []), ("jitter", ["--jitter", "0.2"])):
        inside = total = 0
        widths = []
        for _ in range(runs):
            rc, _, err = _out([b.sample, "-e", "cpu-clock", "-c", "250000"] + extra + ["-o", rec, "--", prog, "4", "2"])
            sh, n, _ = _icpp_shares(b, mapf, rec) if rc == 0 else (None, 0, err)
            if not sh:
                continue
            for p, t in truth.items():
                lo, hi = sh[p][1] if p in sh else (0, 1)
                inside += lo <= t <= hi
                total += 1
                widths.append(hi - lo)
        res[kind] = {"intervals": total, "inside": inside, "median_width": statistics.median(widths) if widths else None}
    if os.path.exists(rec):
        os.unlink(rec)
    return res


def measure(b, runs):
    prog = os.path.join(b.a.tools, "tests", "programs", "inject.O2-fp-pie")
    out = {}
    if not os.path.exists(prog):
        out["error"] = "%s not built" % prog
        return out
    smoke = runs < 10
    out["actionability"] = actionability(b, prog, 2 if smoke else 8, [0, 4, 8] if smoke else [0, 2, 4, 6, 8],
                                         b.a.period)
    if b.order and b.programs[b.order[0]]["inputs"]:
        name = b.order[0]
        out["auto"] = auto_period(b, name, b.programs[name]["inputs"][0])
    out["coverage"] = coverage(b, prog, runs)
    return out


def _f(x, fmt="%.3f"):
    return fmt % x if isinstance(x, (int, float)) and not (isinstance(x, float) and math.isnan(x)) else "n/a"


def render(rep):
    w = rep.w
    s = rep.r.get("stats")
    w("## 7. How far a profile can be trusted (issue #15)")
    w()
    if not s:
        w("Not measured in this run.")
        w()
        return
    a = s.get("actionability", {})
    w("### Actionability: injected work, attributed time (Mytkowicz, section 3.3)")
    w()
    if a.get("rows"):
        w("`%s` at scale %s runs injection level L: 2L units of extra work in `victim` when `path_a` called it," % (
            a["program"], a["scale"]))
        w("nothing else changes (same frames, same CIDs).  x = the program's CPU time unprofiled (median of 3, as")
        w("`time` reports it); y = the share a profiler gives `%s` times x.  Commands: `%s`; `%s`." % (
            a["path"], a["cmd_icpp"], a["cmd_perf"]))
        w()
        w("| level | CPU s | icpp share | icpp y s | icpp --no-learn share | perf -g share of the path "
          "| perf -g share of the leaf, any path |")
        w("|---|---|---|---|---|---|---|")
        for r in a["rows"]:
            w("| %d | %s | %s | %s | %s | %s | %s |" % (
                r["level"], _f(r.get("cpu_s")), _f(r.get("icpp_share")),
                _f(r["icpp_share"] * r["cpu_s"]) if r.get("icpp_share") is not None and r.get("cpu_s") else "n/a",
                _f(r.get("icpp_nolearn_share")), _f(r.get("perf_share")), _f(r.get("perf_leaf_share"))))
        w()
        w("Slope of y on x (1 = actionable; the Java profilers in Mytkowicz averaged 0.23-0.28): **icpp %s**, "
          "icpp --no-learn %s, perf -g on the path %s, perf -g on the leaf function over both paths %s." % (
              _f(a.get("slope_icpp"), "%.2f"), _f(a.get("slope_icpp_nolearn"), "%.2f"), _f(a.get("slope_perf"), "%.2f"),
              _f(a.get("slope_perf_leaf"), "%.2f")))
        w("`path_a` and `path_b` have the same frames, so `victim` enters at one height from both: one CID for")
        w("two paths. By default the recording's learn samples share it out by what they saw, and the injected")
        w("work goes where it was done; with --no-learn the training counts (equal calls) split it in half")
        w("whatever the work, and the slope halves. Rewriting (icpp-rewrite) gives the two paths their own CIDs.")
        w("perf -g walks frame pointers: `victim` is a leaf that sets up no frame, so the walk skips its caller and")
        w("every sample lands on `main;victim` -- the path is lost, not misweighted (its leaf share follows the")
        w("work). ICPP takes the path from (function, height) and needs no frame.")
        if rep.a.check and a.get("slope_icpp") is None:
            rep.bad("stats: no actionability slope")
    else:
        w("Not measured (%s)." % s.get("error", "inject.c not built"))
    w()
    au = s.get("auto", {})
    w("### --auto-period on %s (Stoker eq. 4.16)" % au.get("program", "a bench program"))
    w()
    if au.get("auto", {}).get("stderr"):
        w("`%s`, input %s, then `icpp-resolve --format json` (no map: the recording's learn samples):" % (
            au["auto"]["cmd"], au["input"]))
        w()
        w("```")
        for ln in au["auto"]["stderr"]:
            w(rep.rel(ln))
        w("```")
        w()
        w("| rate | samples | hottest paths (last 3 frames): share, 95% interval, width |")
        w("|---|---|---|")
        for kind, label in (("auto", "--auto-period"), ("default", "default (4 kHz)")):
            e = au.get(kind, {})
            cells = "; ".join("%s %.1f%% [%.1f, %.1f] %.1f pt" % (t["path"], 100 * t["share"], 100 * t["ci"][0],
                                                               100 * t["ci"][1], 100 * (t["ci"][1] - t["ci"][0]))
                              for t in e.get("top", [])[:3])
            w("| %s | %s | %s |" % (label, e.get("samples", "n/a"), cells or "n/a"))
        if rep.a.check and not au.get("auto", {}).get("samples"):
            rep.bad("stats: --auto-period took no samples")
    else:
        w("Not measured (%s)." % au.get("error", "no run"))
    w()
    cv = s.get("coverage", {})
    w("### 95% intervals against repeated runs")
    w()
    if cv.get("truth"):
        w("True shares from one long run (%d samples): %s.  Then %d short runs each way (`%s`):" % (
            cv["truth_samples"], ", ".join("%s %.3f" % (k, v) for k, v in cv["truth"].items()), cv["runs"], cv["cmd"]))
        w()
        w("| sampling | intervals | hold the true share | median width |")
        w("|---|---|---|---|")
        for kind in ("fixed", "jitter"):
            e = cv.get(kind, {})
            if e.get("intervals"):
                w("| %s | %d | %d (%.1f%%) | %.1f points |" % (
                    "fixed period" if kind == "fixed" else "--jitter 0.2", e["intervals"], e["inside"],
                    100 * e["inside"] / e["intervals"], 100 * (e.get("median_width") or 0)))
        w()
        w("More than 95% is expected here: the intervals assume independent samples, and a periodic sampler on a")
        w("program of regular phases draws a more even sample than that (systematic sampling).")
        if rep.a.check and not cv.get("fixed", {}).get("intervals"):
            rep.bad("stats: no coverage runs")
    else:
        w("Not measured.")
    w()
