#!/usr/bin/env python3
"""test_stats.py -- sampling statistics (docs/statistics.md), on the corpus program inject.c.

1. Actionability (Mytkowicz, section 3.3): injection levels 0..8 add work to
   main;path_a;victim only; the time icpp-resolve attributes to that path (its
   share of the samples times the program's total CPU time, measured
   unprofiled as `time` does), regressed on that total, has slope 1 +- 0.1.
2. Confidence intervals against repeated runs: the true share of each
   documented path (a long run, ~40k samples) falls inside ~95% of the 95%
   intervals of 24 short runs (12 at a fixed period, 12 with --jitter); the
   json intervals are Wilson's, recomputed here.
3. Ranks: at level 1 spin and the path_a victim do equal work, so ranks 1 and
   2 are marked as not statistically ordered ('~', with the samples that would
   order them) while path_b's half share is ordered ('>').
4. --jitter: the recording's intervals repeat (fixed period) without it and do
   not with it (the resolver's "periodic" verdict), and the sampler says how
   many periods it drew; --auto-period prints its inputs, n* recomputed here
   from them (eq. 4.16), and takes about n* samples.
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from e2e import SOURCE, Checker, built, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("e2e-stats")
tmp = tempfile.mkdtemp(prefix="icpp-stats-")
entry = [e for e in corpus.load_list(built("tests/programs/corpus-list.txt"))
         if e.prog == "inject" and e.config == "O2-fp-pie"][0]
prog = entry.binary
required, _ = corpus.paths_for(entry)
LEAVES = [p for p in required if len(p) == 3]          # main;x;y: the paths that do work
c.check(sorted(LEAVES) == [("main", "path_a", "victim"), ("main", "path_b", "victim"), ("main", "steady", "spin")],
        f"inject.c documents {sorted(LEAVES)}")
PERIOD = 250000                                         # ns of cpu-clock per sample
Z = 1.959963984540054

mapf = os.path.join(tmp, "inject.icppmap")
r = run([tool("icpp-train"), "-o", mapf, "--", prog, "1", "1"])
c.check(r.returncode == 0 and os.path.exists(mapf), f"icpp-train inject: {r.stderr}")


def own(path):
    """A json path from main on (the CRT frames before main elided)."""
    return tuple(path[path.index("main"):]) if "main" in path else tuple(path)


def sample(args, out, extra=()):
    r = run([tool("icpp-sample"), "-e", "cpu-clock", "-c", str(PERIOD), "-o", out] + list(extra) + ["--", prog] + args)
    c.check(r.returncode == 0, f"icpp-sample {args} {extra}: {r.returncode} {r.stderr}")
    return r


def profile(rec):
    r = run([tool("icpp-resolve"), "-m", mapf, "--format", "json", rec])
    c.check(r.returncode == 0, f"icpp-resolve {rec}: {r.stderr}")
    d = json.loads(r.stdout)
    total = d["events"][0]["samples"]
    paths = {own(p["path"]): p for p in d["paths"]}
    return d, total, paths


def cpu_time(args):
    """The program's user+system time, unprofiled (what `time` reports)."""
    p = subprocess.Popen([prog] + args, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    c.check(status == 0, f"{prog} {args}: status {status}")
    return ru.ru_utime + ru.ru_stime


def slope(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


# ---------------------------------------------------------------- 1. actionability
SCALE, LEVELS = "8", [0, 2, 4, 6, 8]
xs, ys = [], []
for lv in LEVELS:
    x = statistics.median(cpu_time([SCALE, str(lv)]) for _ in range(3))
    rec = os.path.join(tmp, f"act{lv}.samples")
    sample([SCALE, str(lv)], rec)
    _, total, paths = profile(rec)
    hit = paths.get(("main", "path_a", "victim"))
    # a share times the unprofiled time: sampling's own cost (here ~20 us a
    # sample, 8% of the run) inflates every path alike and does not count
    y = hit["self"][0] / total * x if hit else 0.0
    xs.append(x)
    ys.append(y)
    print(f"level {lv}: total {x:.3f} s, main;path_a;victim {y:.3f} s ({total} samples)")
s = slope(xs, ys)
print(f"actionability: slope {s:.3f} over levels {LEVELS}")
c.check(abs(s - 1) <= 0.1, f"actionability slope {s:.3f}, not 1 +- 0.1 (x {xs}, y {ys})")

# ---------------------------------------------------------------- 2. interval coverage
# The true shares: one long run (~14k samples at 10 kHz; the program's CPU time, and so the count,
# moves with the machine's load: 30 units gave 8.2-12k).
rec = os.path.join(tmp, "long.samples")
r = run([tool("icpp-sample"), "-e", "cpu-clock", "-c", "100000", "-o", rec, "--", prog, "50", "2"])
c.check(r.returncode == 0, f"long run: {r.stderr}")
_, ltotal, lpaths = profile(rec)
truth = {p: lpaths[p]["self"][0] / ltotal for p in LEAVES if p in lpaths}
c.check(len(truth) == 3 and ltotal > 10000, f"long run: {ltotal} samples, shares {truth}")
print("true shares (long run, %d samples): %s" % (ltotal, ", ".join(f"{';'.join(p)} {v:.4f}" for p, v in truth.items())))
inside, intervals, widths, bad_ci = {"fixed": 0, "jitter": 0}, {"fixed": 0, "jitter": 0}, [], []
for i in range(24):
    kind = "jitter" if i % 2 else "fixed"
    rec = os.path.join(tmp, f"short{i}.samples")
    sample(["4", "2"], rec, ["--jitter", "0.2"] if kind == "jitter" else [])
    d, total, paths = profile(rec)
    for p, t in truth.items():
        e = paths.get(p)
        k = e["self"][0] if e else 0
        lo, hi = e["share_ci"][0] if e else (0, 1)
        # Wilson's interval, recomputed
        ph, z2n = k / total, Z * Z / total
        ctr, half = (ph + z2n / 2) / (1 + z2n), Z / (1 + z2n) * math.sqrt(ph * (1 - ph) / total + z2n / (4 * total))
        if abs(lo - max(0, ctr - half)) > 1e-6 or abs(hi - min(1, ctr + half)) > 1e-6:
            bad_ci.append((p, k, total, lo, hi))
        intervals[kind] += 1
        inside[kind] += lo <= t <= hi
        widths.append(hi - lo)
    for u in d["unattributed"]:
        c.check(len(u["share_ci"]) == 1 and u["share_ci"][0][0] <= u["self"][0] / total <= u["share_ci"][0][1],
                f"unattributed share_ci {u}")
c.check(not bad_ci, f"share_ci differs from Wilson's interval: {bad_ci[:3]}")
cov = (inside["fixed"] + inside["jitter"]) / (intervals["fixed"] + intervals["jitter"])
print(f"coverage: {inside['fixed']}/{intervals['fixed']} fixed period, {inside['jitter']}/{intervals['jitter']} "
      f"--jitter 0.2; {100 * cov:.1f}% of {sum(intervals.values())} intervals hold the true share "
      f"(median width {100 * statistics.median(widths):.1f} points)")
# 72 intervals: at a true 95%, fewer than 61 inside has probability < 0.1%
c.check(cov >= 61 / 72, f"only {100 * cov:.1f}% of the 95% intervals hold the true share")

# ---------------------------------------------------------------- 3. ranks
rec = os.path.join(tmp, "tie.samples")
sample(["4", "1"], rec)
r = run([tool("icpp-resolve"), "-m", mapf, rec])
rows = [ln for ln in r.stdout.splitlines() if re.match(r"^\s+\d+\s", ln)]
marks = [re.search(r"\s(\d+%|-) ([>~ ])  ", ln).group(2) if re.search(r"\s(\d+%|-) ([>~ ])  ", ln) else "?"
         for ln in rows]
tops = [ln.split("  ")[-1] for ln in rows[:3]]
c.check(len(rows) >= 3 and {tops[0].split(" -> ")[-1], tops[1].split(" -> ")[-1]} == {"spin", "victim"}
        and "path_b" in tops[2], f"level 1 ranks: {tops}")
c.check(marks[:2] == ["~", ">"], f"rank marks {marks[:3]}: spin and path_a's victim (equal work) must be tied, "
        f"path_b's victim (half) ordered")
foot = [ln for ln in r.stdout.splitlines() if ln.startswith("# o:")]
m = re.search(r"1: \+(\d+)", foot[0]) if foot else None
c.check(m is not None, f"no 'samples that would order them' for rank 1: {foot}")
if m:
    # eq. 3.2 from the exact weights
    _, n, tpaths = profile(rec)
    w = sorted((tpaths[p]["self"][0] for p in LEAVES if p in tpaths), reverse=True)
    p, q = w[0] / n, w[1] / n
    need = Z * Z * (math.sqrt(p * (1 - p)) + math.sqrt(q * (1 - q))) ** 2 / (p - q) ** 2 if p > q else math.inf
    # near a tie (p - q ~ 1/n) need is ~1e9 and ill-conditioned: C's and Python's rounding of the same
    # formula differ by a few parts in 1e7 (seen: 911890876 vs 911890511), so the tolerance is relative there
    c.check(math.isinf(need) or abs(int(m.group(1)) - math.ceil(need - n)) <= max(1.0, 1e-5 * need),
            f"rank 1: +{m.group(1)} samples, eq. 3.2 gives {need - n:.0f}")
# the CI column: the share inside its interval
for ln in rows:
    g = re.search(r"([\d.]+)%\s+([\d.]+)-([\d.]+)%", ln)
    c.check(g and float(g.group(2)) <= float(g.group(1)) <= float(g.group(3)), f"text interval: {ln}")

# ---------------------------------------------------------------- 4. --jitter, --auto-period
verdicts = {}
for kind, extra in (("fixed", []), ("jitter", ["--jitter", "0.3"])):
    rec = os.path.join(tmp, f"j{kind}.samples")
    r = sample(["8", "2"], rec, extra)
    if kind == "jitter":
        m = re.search(r"--jitter 0.3: (\d+) periods drawn, (\d+) refused", r.stderr)
        c.check(m and int(m.group(1)) > 500 and m.group(2) == "0", f"jitter summary: {r.stderr}")
    d, total, _ = profile(rec)
    th = [t for t in d["sampling"]["threads"] if not t["learn"]]
    verdicts[kind] = th[0] if th else {}
print(f"intervals: fixed {verdicts['fixed']}\n           jitter {verdicts['jitter']}")
# A fixed period repeats far more often than a jittered one; how often is the VM's timer's
# business: on the Intel guest most intervals repeated (> 0.5, the periodic verdict), on the
# AMD guest 0.44-0.77 of them in runs of the same command -- so the contrast is judged, and
# the verdict against its definition (half or more repeat: lib/stats.h).
fx, jx = verdicts["fixed"], verdicts["jitter"]
# Under the suite's load the fixed period's share fell to 0.24 (jittered: 0.04); under a
# load of 18 on 2 cores, 0.37-0.46 against 0.09-0.13 -- still twice the jittered one's.
fr, jr = fx.get("repeats", 0), jx.get("repeats", 1)
c.check(fr >= max(2 * jr, jr + 0.1) and fx.get("periodic") == (fr >= 0.5),
        f"a fixed period not far more regular than a jittered one: {fx} / {jx}")
# idle, about 2% of jittered intervals repeat; under the full test suite's load
# up to a quarter did (the sampler late to draw, the timer fired again at the
# old period): the verdict, not a tight figure
c.check(verdicts["jitter"].get("periodic") is False and verdicts["jitter"].get("repeats", 1) < 0.5
        and verdicts["jitter"].get("cv", 0) > 0.1, f"--jitter 0.3 intervals: {verdicts['jitter']}")
r = run([tool("icpp-sample"), "-e", "cpu-clock", "--jitter", "0.2", "-e", "cycles", "-o", os.path.join(tmp, "x"),
         "--", prog])
c.check(r.returncode == 1 and "hardware event" in r.stderr and r.stderr.count("\n") == 1,
        f"--jitter on a hardware event: {r.returncode} {r.stderr}")

rec = os.path.join(tmp, "auto.samples")
r = run([tool("icpp-sample"), "-e", "cpu-clock", "--auto-period", "-o", rec, "--", prog, "8", "2"])
c.check(r.returncode == 0, f"--auto-period: {r.stderr}")
print(r.stderr)
m = re.search(r"T = ([\d.]+) s .*pilots: (\d+) samples at period (\d+) in ([\d.]+) s, (\d+) at (\d+) in ([\d.]+) s; "
              r"p = ([\d.]+) .*o = ([\d.]+) us", r.stderr)
m2 = re.search(r"= (\d+) samples(?: \(clamped\))? -> period (\d+) on cpu-clock = E0 / n\* \+ e "
               r"\(E0 = (\d+) events without sampling, e = (\d+) per sample", r.stderr)
m3 = re.search(r"auto period: (\d+) samples taken \((\d+) planned", r.stderr)
c.check(m and m2 and m3, f"--auto-period output: {r.stderr}")
if m and m2 and m3:
    T, npil, ppil, Ts = float(m.group(1)), int(m.group(2)), int(m.group(3)), float(m.group(4))
    nsp, Tsp, p, o = int(m.group(5)), float(m.group(7)), float(m.group(8)), float(m.group(9)) * 1e-6
    # the times are printed rounded: their half-units, spread over the sample difference, bound the error
    half = sum(0.5 * 10 ** -len(x.split(".")[1]) if "." in x else 0.5 for x in (m.group(4), m.group(7)))
    c.check(abs(o - max((Ts - Tsp) / (npil - nsp), 0.5e-6)) < half / max(1, abs(npil - nsp)) + 0.02e-6 + 0.01 * o,
            f"o {o} from the pilots' figures ({r.stderr.strip()})")
    nstar = (T * Z * math.sqrt(p * (1 - p)) / (2 * o * p)) ** (2 / 3)
    nstar = min(max(nstar, 1000), 1e7)
    c.check(abs(int(m2.group(1)) - nstar) <= 0.01 * nstar + 1, f"n* printed {m2.group(1)}, eq. 4.16 gives {nstar:.0f}")
    # a clock counts what a sample costs: the pilots' event counts differ by
    # e per sample, and the run without sampling counts E0 = dense - samples x e
    psp = int(m.group(6))
    e_o = max((npil * ppil - nsp * psp) / (npil - nsp), 0)
    E0 = npil * ppil - npil * e_o
    if E0 <= 0.1 * npil * ppil:
        E0, e_o = npil * ppil, 0
    c.check(abs(int(m2.group(3)) - E0) <= 1 + 1e-6 * E0 and abs(int(m2.group(4)) - e_o) <= 1,
            f"E0 {m2.group(3)} and e {m2.group(4)} are not the pilots' ({E0:.0f}, {e_o:.0f})")
    period = max(E0 / nstar + e_o, 10000, 10 * o * 1e9)
    c.check(abs(int(m2.group(2)) - period) <= 0.01 * int(m2.group(2)) + 1,
            f"period {m2.group(2)} is not E0 / n* + e, nor the floor ({period:.0f})")
    # the hottest context is victim's: both paths reach it at the same height
    # (path_a and path_b have identical frames), so p is their shares together
    vt = truth.get(("main", "path_a", "victim"), 0.5) + truth.get(("main", "path_b", "victim"), 0.17)
    c.check(abs(p - vt) < 0.05, f"pilot p {p}, true share of victim's context {vt:.3f}")
    taken = int(m3.group(1))
    planned = E0 / (int(m2.group(2)) - e_o)         # n*, or fewer where the period was raised
    c.check(abs(int(m3.group(2)) - planned) <= 1 + 0.001 * planned, f"{m3.group(2)} printed as planned, not {planned:.0f}")
    # the unprofiled run's events vary from run to run (on a loaded VM by 10-20%)
    c.check(0.6 * planned <= taken <= 1.5 * planned, f"{taken} samples taken for {planned:.0f} planned (n* {nstar:.0f})")
r = run([tool("icpp-sample"), "--auto-period", "-c", "1000", "--", prog])
c.check(r.returncode == 2 and "--auto-period" in r.stderr, f"--auto-period with -c: {r.returncode} {r.stderr}")
c.done()
