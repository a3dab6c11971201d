#!/usr/bin/env python3
"""test_heights.py -- path maps with extreme heights (crafted by tests/e2e/craftmap): a height no
stack can have (|height| >= 2^56, lib/defs.h ICPP_HEIGHT_MAX) is refused by every tool with one
line naming the map; the largest heights there can be are rewritten and resolved, with the stack
budget computed without overflow (it was 'budget x1.50 = -9223372036854775808', and signed
overflows in the completion and the rewrite searches under UBSan)."""
import math
import os
import re
import shutil
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-heights")
SAMPLE, TRAIN, RESOLVE, REWRITE = tool("icpp-sample"), tool("icpp-train"), tool("icpp-resolve"), tool("icpp-rewrite")
CRAFT = built("tests/e2e/craftmap")
HMAX = 1 << 56
tmp = tempfile.mkdtemp(prefix="icpp-heights-")
T = lambda n: os.path.join(tmp, n)  # noqa: E731
prog = T("orders")
shutil.copy(built("tests/programs/orders.O2-fp-pie"), prog)

omap, osmp = T("orders.icppmap"), T("orders.samples")
r = run([TRAIN, "-q", "--fresh", "-o", omap, "--", prog])
c.check(r.returncode == 0, f"icpp-train: {r.stderr}")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", osmp, "--", prog])
c.check(r.returncode == 0, f"icpp-sample: {r.stderr}")


def craft(name, *heights):
    out = T(name)
    args = []
    for fn, h in heights:
        args += ["--height", fn, str(h)]
    r = run([CRAFT, omap, out] + args)
    c.check(r.returncode == 0, f"craftmap {args}: {r.stderr}")
    return out


# ---- 1. heights past any stack: refused where the map is read, by every tool ----
for lo, hi in ((-8000000000000000000, 8000000000000000000), (0, HMAX), (-HMAX, 0), (0, (1 << 63) - 1)):
    amap = craft("absurd.icppmap", ("main", lo), ("a", hi))
    bad = lo if lo <= -HMAX else hi
    for label, cmd in (("icpp-rewrite", [REWRITE, "-m", amap, "-o", T("absurd.arr"), prog]),
                       ("icpp-rewrite --max-stack-growth 1000",
                        [REWRITE, "--max-stack-growth", "1000", "-m", amap, "-o", T("absurd.arr"), prog]),
                       ("icpp-resolve", [RESOLVE, "-m", amap, osmp]),
                       ("icpp-train --stats", [TRAIN, "--stats", amap])):
        r = run(cmd)
        err = r.stderr.strip()
        c.check(r.returncode == 1 and len(err.splitlines()) == 1 and amap in err and f"height {bad} " in err
                and "beyond any stack" in err,
                f"{label} on a map with heights {lo}, {hi}: rc={r.returncode} stderr={r.stderr[-300:]!r}")
        c.check("-9223372036854775808" not in r.stdout + r.stderr, f"{label}: an overflowed figure: {r.stdout[-400:]!r}")
    c.check(not os.path.exists(T("absurd.arr")), "icpp-rewrite wrote a program from a refused map")

# ---- 2. the largest heights there are: a budget that does not overflow, paddings found ----
BUDGET_RE = re.compile(r"^max height: +(-?\d+) -> (-?\d+) bytes \(x[\d.]+; budget x([\d.]+) = (-?\d+)\)$", re.M)
UNIQ_RE = re.compile(r"^unique CIDs, by paths .*\((\d+) -> (\d+) of (\d+)\)$", re.M)
top = (1 << 55) + 8
bmap = craft("big.icppmap", ("a", top))
for growth in ("1.5", "1000"):
    out = T(f"big{growth}.arr")
    r = run([REWRITE, "--max-stack-growth", growth, "-m", bmap, "-o", out, prog])
    c.check(r.returncode == 0, f"icpp-rewrite x{growth} on heights up to {top}: rc={r.returncode} {r.stderr[-300:]!r}")
    m, u = BUDGET_RE.search(r.stdout), UNIQ_RE.search(r.stdout)
    if c.check(m and u, f"icpp-rewrite x{growth}: no max height/unique CIDs line in {r.stdout[:600]!r}"):
        h0, h1, budget = int(m.group(1)), int(m.group(2)), int(m.group(4))
        want = min(math.floor(top * float(growth)), HMAX - 1)
        c.check(h0 == top and budget == want and top <= h1 <= budget,
                f"icpp-rewrite x{growth}: max height {h0} -> {h1}, budget {budget} (want {top} -> at most {want})")
        c.check(int(u.group(2)) > int(u.group(1)),
                f"icpp-rewrite x{growth}: no context separated within the budget ({u.group(0)})")
        print(f"x{growth}: {m.group(0)}; {u.group(0)}")
    c.check(os.path.exists(out + ".icppmap"), f"icpp-rewrite x{growth}: no {out}.icppmap")

# ---- 3. completion and learning over the extremes of the bound ----
for name, heights in (("wide.icppmap", (("main", -HMAX + 1), ("a", HMAX - 1), ("b", 0))),
                      ("big.icppmap", ())):
    wmap = craft(name, *heights) if heights else bmap
    r = run([RESOLVE, "-m", wmap, "--complete-stats", osmp])
    c.check(r.returncode == 0 and "# samples:" in r.stdout and "main" in r.stdout,
            f"icpp-resolve -m {name}: rc={r.returncode} {r.stderr[-300:]!r}")
    r = run([RESOLVE, "-m", wmap, "--format", "json", "-o", T("w.json"), osmp])
    c.check(r.returncode == 0 and os.path.getsize(T("w.json")) > 0, f"icpp-resolve --format json -m {name}: {r.stderr[-300:]!r}")

shutil.rmtree(tmp)
c.done()
