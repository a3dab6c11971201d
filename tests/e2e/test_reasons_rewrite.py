#!/usr/bin/env python3
"""test_reasons_rewrite.py -- icpp-resolve --check's reasons on a rewritten binary's map (docs/resolve.md,
"Ambiguous samples by reason"; lib/arr.h "arr-unpaddable"). reasonpaths.c's four paths into work() come in
two pairs at one height each: main;p_one;work / main;p_two;work, whose differing functions icpp-rewrite
refuses to pad, and main;lib_one;work / main;lib_two;work, whose differing functions are a library's.
Rewritten without wrapping, every sample in work is ambiguous: half "refused-functions", half
"library-functions", none "separable". With wrapping, p_one or p_two is enlarged by wrapping its call of
work (or main's calls of them are wrapped apart): their samples become precise, the library pair stays;
--verify confirms the heights. The original binary's map has no such list:
its --check keeps the old keys, and the same samples are "separable"."""
import json
import os
import re
import shutil
import tempfile

from e2e import Checker, built, map_paths, run, tool

c = Checker("e2e-reasons-rewrite")
tmp = tempfile.mkdtemp(prefix="icpp-reasons-rw-")
binary = built("tests/e2e/reasonpaths")
mapfile = os.path.join(tmp, "reasonpaths.icppmap")
# the rewritten copies go to tmp: their $ORIGIN runpath finds the library there
shutil.copy(built("tests/e2e/libreasonlib.so"), tmp)
r = run([tool("icpp-train"), "-q", "--fresh", "--modules", "main,libreasonlib.", "-o", mapfile, "--", binary, "2"])
c.check(r.returncode == 0 and os.path.exists(mapfile), f"training failed: {r.stderr}")


def check(prog, pmap, label):
    """--check json of a --validate recording of prog against pmap (None on failure)."""
    samples = os.path.join(tmp, label + ".samples")
    r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", samples, "--",
             prog, "60"])
    if not c.check(r.returncode == 0, f"{label}: sampling failed: {r.stderr}"):
        return None, None
    r = run([tool("icpp-resolve"), "-m", pmap, "--check", "--format", "json", samples])
    if not c.check(r.returncode == 0, f"{label}: --check: {r.stderr}"):
        return None, None
    text = run([tool("icpp-resolve"), "-m", pmap, "--check", samples]).stdout
    return json.loads(r.stdout), text


# The original: no arr-unpaddable, the old keys; the pairs differ in functions, so "separable".
d, _ = check(binary, mapfile, "original")
if d:
    n, why = d["with_truth"], d["ambiguous_by_reason"]
    c.check("refused-functions" not in why and "library-functions" not in why, f"original: keys {sorted(why)}")
    c.check(n >= 400 and why["separable"] >= 0.9 * n, f"original: {why} of {n}")

for wrap in (False, True):
    label = "wrapped" if wrap else "nowrap"
    out = os.path.join(tmp, "reasonpaths." + label)
    r = run([tool("icpp-rewrite"), "--explain", "-m", mapfile, "-o", out] + ([] if wrap else ["--no-wrap", "--no-clone"]) +
            [binary])
    if not c.check(r.returncode == 0, f"{label}: icpp-rewrite: {r.stderr}"):
        continue
    # both of main's helpers have no frame to enlarge: refused without wrapping; with it, one of them at
    # least is enlarged by wrapping its call of work (docs/rewrite.md, "Resizing by wrapping")
    bywrap = [f for f in ("p_one", "p_two") if re.search(r"^ +0x[0-9a-f]+ +\+\d+ +wrap +1 call \(no frame to enlarge.*"
                                                         r"\b%s$" % f, r.stdout, re.M)]
    m = re.search(r"^resized: .*, (\d+) by wrapping their calls\)", r.stdout, re.M)
    if wrap:
        c.check(bywrap and m and int(m.group(1)) >= len(bywrap), f"{label}: no function enlarged by wrapping:\n"
                f"{r.stdout}")
        # the share of the training's calls through wrapped sites: each (caller, callee) has one call site here
        pairs = re.findall(r"^ +0x[0-9a-f]+ +\+\d+ +call (\S+) -> (\S+) \(stub 0x[0-9a-f]+\)$", r.stdout, re.M)
        mw = re.search(r"^wrapped: +\d+ call sites \(([\d.]+)% of the training's calls went through them\)", r.stdout,
                       re.M)
        paths = map_paths(mapfile)
        total = sum(cnt for cnt, _h, _n, _i in paths)
        through = sum(cnt for cnt, _h, names, _i in paths if len(names) >= 2 and (names[-2], names[-1]) in pairs)
        c.check(pairs and mw and total and abs(float(mw.group(1)) - 100.0 * through / total) < 0.01,
                f"{label}: wrapped share {mw.group(1) if mw else None}%, want {100.0 * through / max(1, total):.2f}% "
                f"({through} of {total} calls through {pairs})")
    else:
        for f in ("p_one", "p_two"):
            c.check(re.search(r"no frame to enlarge.*\b%s\b" % f, r.stdout) or
                    re.search(r"\b%s\b.*no frame to enlarge" % f, r.stdout), f"{label}: {f} not refused:\n{r.stdout}")
        c.check(not bywrap and m and m.group(1) == "0", f"{label}: enlarged by wrapping with --no-wrap:\n{r.stdout}")
    d, text = check(out, out + ".icppmap", label)
    if not d:
        continue
    n, b, why = d["with_truth"], d["by_samples"], d["ambiguous_by_reason"]
    c.check(n >= 400, f"{label}: only {n} samples with a true stack")
    c.check(sum(why.values()) == b["ambiguous-containing-truth"], f"{label}: reasons {why} vs {b}")
    # half each pair (binomial sd < 2.5% of n at n >= 400: 10% is 4 sd)
    c.check(abs(why["library-functions"] - n / 2) <= 0.1 * n, f"{label}: library {why} of {n}")
    c.check(why["separable"] <= 0.02 * n and b["incorrect"] <= 0.01 * n, f"{label}: {why} {b}")
    if wrap:
        c.check(why["refused-functions"] <= 0.02 * n and abs(b["precise"] - n / 2) <= 0.1 * n,
                f"{label}: wrapping did not separate p_one and p_two: {why} {b}")
    else:
        c.check(abs(why["refused-functions"] - n / 2) <= 0.1 * n, f"{label}: refused {why} of {n}")
    m = re.search(r"^ambiguous by reason: .*only functions of other modules differ ([\d.]+)%, only functions "
                  r"icpp-rewrite refused to pad differ ([\d.]+)%", text, re.M)
    c.check(m and abs(float(m.group(1)) - 100.0 * why["library-functions"] / n) < 0.01 and
            abs(float(m.group(2)) - 100.0 * why["refused-functions"] / n) < 0.01,
            f"{label}: text {m and m.groups()} vs json {why}")
    print(f"{label}: {n} samples; {b}; by reason {why}")

# --verify: the heights OUT's own training gives are the predicted ones, with a function enlarged by wrapping
r = run([tool("icpp-rewrite"), "-q", "--verify", "-m", mapfile, "-o", os.path.join(tmp, "reasonpaths.verified"),
         binary, "2"])
c.check(r.returncode == 0 and "verify: FAILED" not in r.stdout, f"--verify: rc {r.returncode}\n{r.stdout}{r.stderr}")
if c.failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
