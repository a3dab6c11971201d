#!/usr/bin/env python3
"""test_reasons.py -- icpp-resolve --check's ambiguous samples by reason (docs/resolve.md, lib/pathsig.h)
on orderpaths.c, whose four paths into work() come in two pairs that no padding separates: one pair
with the same call edges in another order (main;a;b;a;a;work, main;a;a;b;a;work), one with the same
functions and other edges (main;a;b;work, main;b;a;work), each path doing the same work. So every
sample in work is ambiguous and its reason is its pair's: about half of each, none separable; folded,
the first pair is one path (both fold to main;a;b;a;work), so its samples become precise and only the
second pair's stay, as same-functions. Text and json agree."""
import json
import os
import re
import shutil
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-reasons")
tmp = tempfile.mkdtemp(prefix="icpp-reasons-")
KEYS = ("same-call-edges", "same-functions", "separable", "truncated-truth")

for name in ("orderpaths", "orderpaths_fp"):
    binary = built("tests/e2e/" + name)
    mapfile, samples = os.path.join(tmp, name + ".icppmap"), os.path.join(tmp, name + ".samples")
    run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", binary, "2"])
    r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", samples, "--",
             binary, "40"])
    if not c.check(os.path.exists(mapfile) and os.path.exists(samples), f"{name}: training or sampling failed: "
                   f"{r.stderr}"):
        continue
    r = run([tool("icpp-resolve"), "-m", mapfile, "--check", "--format", "json", samples])
    if not c.check(r.returncode == 0, f"{name}: --check: {r.stderr}"):
        continue
    d = json.loads(r.stdout)
    n = d["with_truth"]
    b, f = d["by_samples"], d["by_samples_recursion_folded"]
    why, fwhy = d["ambiguous_by_reason"], d["ambiguous_by_reason_recursion_folded"]
    c.check(sorted(why) == sorted(KEYS) and sorted(fwhy) == sorted(KEYS), f"{name}: keys {why} {fwhy}")
    c.check(n >= 500, f"{name}: only {n} samples with a true stack")
    # the reasons account for every ambiguous sample, folded or not
    c.check(sum(why.values()) == b["ambiguous-containing-truth"], f"{name}: reasons {why} vs {b}")
    c.check(sum(fwhy.values()) == f["ambiguous-containing-truth"], f"{name}: folded reasons {fwhy} vs {f}")
    # the truth: nearly all samples are in work under one of the two pairs, half each (binomial sd < 2.3%
    # of n at n >= 500: 10% is more than 4 sd); none separable, none truncated (a shallow stack)
    c.check(b["precise"] + b["incorrect"] <= 0.01 * n, f"{name}: not ambiguous: {b}")
    for k in ("same-call-edges", "same-functions"):
        c.check(abs(why[k] - n / 2) <= 0.1 * n, f"{name}: {k} {why[k]} of {n}, want about half: {why}")
    c.check(why["separable"] <= 0.01 * n and why["truncated-truth"] == 0, f"{name}: {why}")
    # folded: the same-edges pair folds to one path
    c.check(abs(f["precise"] - why["same-call-edges"]) <= 0.01 * n, f"{name}: folded precise {f} vs {why}")
    c.check(fwhy["same-call-edges"] == 0 and fwhy["same-functions"] == why["same-functions"],
            f"{name}: folded reasons {fwhy} vs {why}")
    # the text report says the same
    r = run([tool("icpp-resolve"), "-m", mapfile, "--check", samples])
    for prefix, w in (("", why), ("recursion folded, ", fwhy)):
        m = re.search(r"^%sambiguous by reason: same call edges in another order ([\d.]+)%%, same functions in "
                      r"another order ([\d.]+)%%, separable ([\d.]+)%%" % re.escape(prefix), r.stdout, re.M)
        want = [100.0 * w[k] / n for k in KEYS[:3]]
        c.check(m and all(abs(float(m.group(i + 1)) - want[i]) < 0.01 for i in range(3)),
                f"{name}: text {m and m.groups()} vs json {want}")
    print(f"{name}: {n} samples; by reason {why}; folded {fwhy}")

if c.failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
