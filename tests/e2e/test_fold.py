#!/usr/bin/env python3
"""test_fold.py -- icpp-resolve --fold-recursion on tests/programs/recurse.c: the folded
profile's paths are exactly the folds of the documented paths (folded independently here,
by brute force), every sample is kept, and --check's folded figures (text and json) are at
least its unfolded ones and account for every judged sample."""
import collections
import json
import os
import re
import shutil
import sys
import tempfile

from e2e import SOURCE, Checker, built, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("e2e-fold")
tmp = tempfile.mkdtemp(prefix="icpp-fold-")


def fold(path):
    """Reference folding (docs/resolve.md): remove the second copy of the shortest block
    repeated back to back, leftmost first, until none is left -- by brute force."""
    p = list(path)
    while True:
        for L in range(1, len(p) // 2 + 1):
            hit = next((i for i in range(len(p) - 2 * L + 1) if p[i:i + L] == p[i + L:i + 2 * L]), None)
            if hit is not None:
                del p[hit + L:hit + 2 * L]
                break
        else:
            return tuple(p)


def from_main(frames):
    return tuple(frames[frames.index("main"):]) if "main" in frames else None


entries = [e for e in corpus.load_list(built("tests/programs/corpus-list.txt"))
           if e.prog == "recurse" and e.config in ("O2-fp-pie", "O0-nofp-pie", "O2-nofp-pie")]
c.check(len(entries) >= 2, f"recurse builds not found: {[e.config for e in entries]}")
for e in entries:
    label = f"{e.prog}.{e.config}"
    mapfile, samples = os.path.join(tmp, label + ".icppmap"), os.path.join(tmp, label + ".samples")
    run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", e.binary, "4"])
    r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", samples, "--",
             e.binary, "4"])
    if not c.check(os.path.exists(mapfile) and os.path.exists(samples), f"{label}: training or sampling failed"):
        continue
    req, opt = corpus.paths_for(e)
    documented = {fold(p) for p in req | opt}
    leaves = {fold(p) for p in req if not any(q != p and q[:len(p)] == p for q in req)}

    # The folded profile: every path (from main) is the fold of a documented path; the
    # documented leaves' folds all appear; the weights add up to the unfolded profile's.
    prof = {}
    for flag in ([], ["--fold-recursion"]):
        r = run([tool("icpp-resolve"), "-m", mapfile, "--no-learn", "--format", "folded"] + flag + [samples])
        c.check(r.returncode == 0, f"{label} {flag}: {r.stderr}")
        w = collections.Counter()
        for line in r.stdout.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            stack, n = line.rsplit(" ", 1)
            w[from_main(stack.split(";"))] += float(n)
        prof[bool(flag)] = w
    folded = prof[True]
    c.check(abs(sum(folded.values()) - sum(prof[False].values())) < 1e-6,
            f"{label}: folding changed the total weight")
    # a sample in a library the program calls (printf's internals, named since libc6-dbg)
    # is judged by its program part: frames up to the first that no documented path has
    funcs = corpus.functions(e)

    def own_part(p):
        k = next((i for i, f in enumerate(p) if f not in funcs), len(p))
        return p[:k]
    ours = {own_part(p) for p in folded if p and own_part(p)}
    c.check(ours <= documented, f"{label}: folded paths not documented: {sorted(ours - documented)[:5]}")
    seen = {p for p, n in folded.items() if p and n >= 1}
    c.check(leaves <= seen, f"{label}: documented folded leaves missing: {sorted(leaves - seen)}")
    # the unfolded profile folded here gives the same weights
    again = collections.Counter()
    for p, n in prof[False].items():
        again[fold(p) if p else p] += n
    c.check(all(abs(again[p] - folded[p]) < 1e-6 for p in set(again) | set(folded)),
            f"{label}: --fold-recursion differs from folding the profile: "
            f"{sorted((p, again[p], folded[p]) for p in set(again) | set(folded) if abs(again[p] - folded[p]) > 1e-6)[:3]}")

    # --check: folded precision >= unfolded, same number of samples judged, text = json.
    r = run([tool("icpp-resolve"), "-m", mapfile, "--check", "--format", "json", samples])
    if not c.check(r.returncode == 0, f"{label}: --check: {r.stderr}"):
        continue
    d = json.loads(r.stdout)
    b, f = d["by_samples"], d["by_samples_recursion_folded"]
    c.check(sum(f.values()) == sum(b.values()), f"{label}: folded verdicts do not cover the same samples")
    c.check(f["precise"] >= b["precise"] and f["incorrect"] <= b["incorrect"],
            f"{label}: folding lost precision: {b} vs {f}")
    c.check(f["precise"] + f["ambiguous-containing-truth"] >= b["precise"] + b["ambiguous-containing-truth"],
            f"{label}: folding lost correct samples")
    r = run([tool("icpp-resolve"), "-m", mapfile, "--check", samples])
    m = re.search(r"recursion folded: precise ([\d.]+)%", r.stdout)
    want = 100.0 * f["precise"] / d["with_truth"] if d["with_truth"] else 0
    c.check(m and abs(float(m.group(1)) - want) < 0.01, f"{label}: text says {m and m.group(1)}, json {want:.2f}")
    print(f"{label}: precise {b['precise']} -> folded {f['precise']} of {d['with_truth']}; "
          f"{len(ours)} folded paths")

if c.failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
else:
    print(f"kept {tmp} for inspection", file=sys.stderr)
c.done()
