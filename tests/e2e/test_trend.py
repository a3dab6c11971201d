#!/usr/bin/env python3
"""test_trend.py -- icpp-resolve --trend (docs/trend.md): per-path growth recovered from sampled profiles.

The corpus program complexity.c runs four kernels of known complexity
(matmul n^3, insertion_sort n^2, quicksort on sorted input with a fixed pivot
n^2, scan n), each reached through two documented call paths. It is trained
once at a small size, sampled (cpu-clock) at 8 sizes spanning two orders of
magnitude with `icpp-sample --feature n=N`, and `icpp-resolve --trend` must
find each documented kernel path's exponent within +-0.3, and flag the n^3
paths (only those) as scaling worse than the program. Then: the outputs
(table, json, SVG plots parsed back), the default bytes= feature of a
command's input file (gzip, linear), and bad input -- one run, runs of
different binaries or maps, runs without the named feature -- each a
one-line error.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from e2e import SOURCE, Checker, built, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("e2e-trend")
entry = next(e for e in corpus.load_list(built("tests/programs/corpus-list.txt"))
             if e.prog == "complexity" and e.config == "O2-fp-pie")
required, _ = corpus.paths_for(entry)
# The kernels' complexity in n, as complexity.c's header documents it.
EXPONENT = {"matmul": 3.0, "insertion_sort": 2.0, "quicksort": 2.0, "scan": 1.0}
CALLERS = (("via_direct",), ("via_driver", "driver"))
KERNEL_PATHS = {("main",) + cal + (k,): e for k, e in EXPONENT.items() for cal in CALLERS}
for p in KERNEL_PATHS:
    c.check(p in required, f"{';'.join(p)} is a documented path of complexity.c")
SIZES = [round(40 * 100 ** (k / 9)) for k in range(10)]      # 40 .. 4000, two orders of magnitude

tmp = tempfile.mkdtemp(prefix="icpp-trend-")
os.chmod(tmp, 0o755)
prog = os.path.join(tmp, "cx")
shutil.copy(entry.binary, prog)
mapfile = prog + ".icppmap"
r = run([tool("icpp-train"), "-o", mapfile, "--", prog, "1", "200"])
c.check(r.returncode == 0 and os.path.exists(mapfile), f"training: {r.stderr[-300:]}")

runs = []
for n in SIZES:
    out = os.path.join(tmp, f"n{n}.samples")
    r = run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-F", "10000", "--feature", f"n={n}", "-o", out,
             "--", prog, "1", str(n)])
    c.check(r.returncode == 0 and "checksum=0" in r.stdout, f"sampling n={n}: {r.stderr[-300:]}")
    runs.append(out)


def trend(*args, runs=runs):
    return run([tool("icpp-resolve"), "--trend", "--no-inline", *args, *runs])


def from_main(path):
    return tuple(path[path.index("main"):]) if "main" in path else None


# ---- the exponents, per documented path ----
r = trend("-m", mapfile, "--format", "json", "-n", "0")
c.check(r.returncode == 0, f"--trend json: {r.stderr[-500:]}")
doc = json.loads(r.stdout) if r.returncode == 0 else {"trends": [], "runs": [], "events": []}
c.check(doc.get("feature") == "n" and [x["value"] for x in doc["runs"]] == SIZES,
        f"the feature and its values come from the files: {doc.get('feature')} {[x['value'] for x in doc['runs']]}")
by_path = {from_main(t["path"]): t for t in doc["trends"]}
for p, want in sorted(KERNEL_PATHS.items()):
    t = by_path.get(p)
    if not c.check(t is not None, f"{';'.join(p)} has a trend"):
        continue
    lo, hi = t["exponent_ci"]
    print(f"  {';'.join(p):45s} {t['model']:8s} exponent {t['exponent']:.3f} [{lo:.3f}, {hi:.3f}] (want {want}), "
          f"predicted at 10x {t['predicted_10x']:.3g}, runs {t['runs']} ({t['zero_runs']} without a sample), "
          f"group {t['group']}{', scales worse' if t['scales_worse'] else ''}")
    # +-0.3: on the AMD guest the quadratic kernels measured 2.09-2.24 (the Intel guest stayed
    # within 0.1): time, not instructions, grows faster where the data leave the caches; with
    # another suite running beside it, 1.75-1.80 once.  0.3 still tells every documented
    # class (1, 2, 3) apart, with 0.4 between them.
    c.check(abs(t["exponent"] - want) <= 0.3, f"{';'.join(p)}: exponent {t['exponent']:.3f}, want {want} +- 0.3; "
            f"samples per run {t['samples']}, all samples {[x['samples'][0] for x in doc['runs']]}")
    c.check(lo <= t["exponent"] <= hi, f"{';'.join(p)}: the exponent lies in its interval")
    c.check(t["runs"] == len(SIZES) and t["model"] in ("constant", "linear", "power"), f"{';'.join(p)}: fields")
    # the program's total mixes n, n^2 and n^3 (the linear scan dominates the small runs): the n^2 and n^3
    # paths scale worse than it, the linear ones do not
    c.check(t["scales_worse"] == (want > 1), f"{';'.join(p)}: scales_worse {t['scales_worse']}")
    if want >= 2:
        c.check(t["model"] == "power", f"{';'.join(p)}: a power law, got {t['model']}")
prog_fit = doc["events"][0]["program"] if doc["events"] else {}
print(f"  program total: {prog_fit.get('model')} exponent {prog_fit.get('exponent', 0):.3f} {prog_fit.get('exponent_ci')}")
c.check(1.0 < prog_fit.get("exponent", 0) < 3.0, "the program's exponent lies between the kernels'")
c.check(all(t["scales_worse"] == (t["above_program"] > 0.1) for t in doc["trends"]),
        "scales_worse: the lower end of the paired interval of the difference is above 0.1")
# the same kernel through its two paths is one group; kernels of other growth are not
g = {k: {by_path[("main",) + cal + (k,)]["group"] for cal in CALLERS if ("main",) + cal + (k,) in by_path}
     for k in EXPONENT}
# (the n^2 kernels' paths may or may not follow each other within R^2 0.98: sampling noise decides)
c.check(len(g["matmul"]) == 1 and len(g["scan"]) == 1, f"the n^3 and the n kernel's two paths form one group each: {g}")
c.check(len({min(g[k]) for k in ("matmul", "insertion_sort", "scan") if g[k]}) == 3,
        f"n, n^2 and n^3 paths are in different groups: {g}")
# ranks: by the cost predicted at 10x, the n^3 paths come first; the json order is that rank
ranked = [from_main(t["path"]) for t in doc["trends"]]
c.check(all(t["rank_10x"] == i + 1 for i, t in enumerate(doc["trends"])), "json is in rank order")
kernels = [p for p in ranked if p in KERNEL_PATHS]
c.check(kernels and kernels[0][-1] == "matmul" and kernels[1][-1] == "matmul",
        f"of the kernel paths, the two matmul ones cost most at 10x: {kernels[:3]}")
# only paths that hold matmul grow like n^3
for t in doc["trends"]:
    p = from_main(t["path"])
    if p and t["exponent"] > 2.6 and t["runs"] - t["zero_runs"] >= 4:
        c.check(any(q[:len(p)] == p and q[-1] == "matmul" for q in KERNEL_PATHS),
                f"{p}: exponent {t['exponent']:.2f} on a path that holds no matmul")

# ---- the table, --rank exponent, plots; --feature values on the command line ----
plots = os.path.join(tmp, "plots")
r = trend("-m", mapfile, "--rank", "exponent", "-n", "3", "--plots", plots)
rows = [ln for ln in r.stdout.splitlines() if ln and not ln.startswith("#") and not ln.lstrip().startswith("rank")]
c.check(r.returncode == 0 and len(rows) == 3, f"table: 3 rows: {r.stdout[-600:]} {r.stderr[-300:]}")
c.check(all(ln.rstrip(" !").endswith(";matmul") for ln in rows[:2]), f"by exponent, the matmul paths first: {rows[:2]}")
c.check(any(ln.startswith("# event cpu-clock (cost in ns)") for ln in r.stdout.splitlines()), "the unit is said")
files = sorted(os.listdir(plots)) if os.path.isdir(plots) else []
c.check(files == ["trend-01.svg", "trend-02.svg", "trend-03.svg"], f"one plot per row: {files}")
for fn, row in zip(files, rows):
    root = ET.parse(os.path.join(plots, fn)).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    circles = root.findall(f".//{ns}circle")
    texts = "".join("".join(t.itertext()) for t in root.findall(f".//{ns}text"))
    # every run in the top panel; a residual for each run with a sample
    c.check(len(SIZES) + 1 <= len(circles) <= 2 * len(SIZES), f"{fn}: {len(circles)} points")
    c.check(row.rstrip(" !").split()[-1] in texts and "exponent" in texts and root.findall(f".//{ns}polyline"),
            f"{fn}: its row's path, the fit")
r2 = trend("-m", mapfile, "--format", "json", "-n", "0", "--feature", "n=" + ",".join(str(n) for n in SIZES))
c.check(r2.returncode == 0 and json.loads(r2.stdout)["trends"] == doc["trends"],
        "values given on the command line: the same result (and the bootstrap is deterministic)")

# ---- the default feature: the size of the command's one input file (and of standard input) ----
# gzip, not sha256sum: on a CPU with SHA instructions (this AMD guest) sha256sum hashes
# 4 MB in ~2 ms, so a run's start-up weighed as much as its work (exponent 0.80 once);
# gzip on incompressible data (64 KiB of random bytes repeated: longer than its window)
# spends ~0.1 s per 4 MB.
sha = shutil.which("gzip")
data = []
for k, mb in enumerate((4, 8, 16, 32)):
    f = os.path.join(tmp, f"data{k}")
    with open(f, "wb") as fh:
        fh.write(os.urandom(1 << 16) * (mb * 16))
    data.append(f)
sruns = []
for k, f in enumerate(data):
    out = os.path.join(tmp, f"sha{k}.samples")
    quiet = dict(capture_output=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if k % 2:
        with open(f, "rb") as stdin:
            r = run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-F", "4000", "-o", out, "--", sha, "-c"],
                    stdin=stdin, **quiet)
    else:
        r = run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-F", "4000", "-o", out, "--", sha, "-c", f], **quiet)
    c.check(r.returncode == 0, f"sampling gzip: {r.stderr[-300:]}")
    sruns.append(out)
r = run([tool("icpp-resolve"), "--trend", "--format", "json", "-n", "0", *sruns])
c.check(r.returncode == 0, f"--trend of gzip: {r.stderr[-400:]}")
if r.returncode == 0:
    sd = json.loads(r.stdout)
    c.check(sd["feature"] == "bytes" and [x["value"] for x in sd["runs"]] == [os.path.getsize(f) for f in data],
            f"bytes= is each input's size (argument or stdin): {[x['value'] for x in sd['runs']]}")
    e = sd["events"][0]["program"]["exponent"]
    print(f"  gzip total against bytes: exponent {e:.3f}")
    c.check(abs(e - 1) <= 0.15, f"gzip is linear in its input: {e:.3f}")


# ---- bad input: one-line errors ----
def refused(args, want, what, code=None):
    r = run([tool("icpp-resolve"), "--trend", *args])
    # the error is the last line (without a map, resolving says so first: a note, not the error)
    lines = [ln for ln in r.stderr.strip().splitlines() if "no path map: resolving with the contexts" not in ln]
    ok = r.returncode != 0 and (code is None or r.returncode == code) and len(lines) == 1 and want in lines[0]
    c.check(ok, f"{what}: exit {r.returncode}, stderr {r.stderr.strip()!r}, want {want!r}")


refused(["-m", mapfile, runs[0]], "give 3 or more recordings (got 1)", "a single run", 2)
refused(["-m", mapfile, runs[0], runs[0], runs[0]], "needs runs at 3 or more values of n", "one feature value")
refused(["-m", mapfile, "--feature", "size", *runs], "has no feature 'size' (it has: n)", "a feature the runs lack")
refused(["-m", mapfile, "--feature", "n=1,2,3", *runs], f"3 values for {len(runs)} runs", "too few values")
refused(["-m", mapfile, "--feature", "n=1,x,3", *runs[:3]], "is not a finite number", "a value that is no number")
refused([*runs[:2], *sruns[:2]], "share no workload feature", "runs without a common feature")
refused(["--feature", "n=1,2,3,4", *runs[:2], *sruns[:2]], "a trend compares runs of one binary", "two binaries")
refused(["-m", mapfile, "--feature", "n=1,2,3,4", *runs[:2], *sruns[:2]], "gzip", "a map of another binary")
# one binary, two maps: the same executable at two places, each with its own map beside it
other = os.path.join(tmp, "b")
os.mkdir(other)
shutil.copy(prog, other)
shutil.copy(mapfile, other)
orun = os.path.join(tmp, "other.samples")
run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "--feature", "n=700", "-o", orun, "--",
     os.path.join(other, "cx"), "1", "700"])
refused([runs[0], runs[1], orun], "give the one map with -m", "runs resolved with different maps")
r = trend("-m", mapfile, runs=[runs[0], runs[1], orun])
c.check(r.returncode == 0, f"... and with one map given, they are one program: {r.stderr[-300:]}")
# no feature recorded at all: icpp-sample of a command with no file argument
nof = os.path.join(tmp, "nofeature.samples")
run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-o", nof, "--", prog, "1", "100"], stdin=open(os.devnull))
refused(["-m", mapfile, "--feature", "n", runs[0], runs[1], nof], "has no feature 'n' (it has: none)",
        "a run without the named feature")
for bad, want in (("n=abc", "not a finite number"), ("1n=3", "is not NAME=VALUE"), ("n", "is not NAME=VALUE")):
    r = run([tool("icpp-sample"), "--feature", bad, "--", "/bin/true"])
    c.check(r.returncode == 2 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1,
            f"icpp-sample --feature {bad}: {r.returncode} {r.stderr.strip()!r}")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
