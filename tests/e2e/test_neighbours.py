#!/usr/bin/env python3
"""test_neighbours.py -- online resolving of deep recursion whose arrangements share
(function, height): docs/resolve.md, "Never precise and wrong" (routes, neighbours in time,
sparse recordings), judged against the true stacks of --validate recordings.

nesting.c trained on shallow bodies (flat), sampled on deep ones:
1. random bodies: nearly every learn sample takes a path no other learn sample takes, so the
   recording is sparse (its missing mass >= 0.5).  Ignoring the recording's evidence
   (--evidence off), most samples resolve to a learned arrangement that is not theirs; by
   default at most 1% are incorrect, the rest of the doubtful ones uncertain.
2. periodic bodies: few paths, each taken often: not sparse, and at most 1% incorrect.
"""
import json
import os
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-neighbours")
tmp = tempfile.mkdtemp(prefix="icpp-neighbours-")
binary = built("tests/e2e/nesting")
mapfile = os.path.join(tmp, "nesting.icppmap")
r = run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", binary, "flat"])
c.check(r.returncode == 0 and os.path.exists(mapfile), f"train: {r.stderr}")


def check(samples, extra=()):
    cmd = [tool("icpp-resolve"), "-m", mapfile, "--check", "--format", "json"] + list(extra) + [samples]
    r = run(cmd)
    if not c.check(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"):
        return None
    return json.loads(r.stdout)


def share(d, k):
    return d["by_samples"][k] / max(d["with_truth"], 1)


for mode in ("random", "periodic"):
    samples = os.path.join(tmp, mode + ".samples")
    r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", samples, "--",
             binary, mode])
    if not c.check(r.returncode == 0 and os.path.exists(samples), f"{mode}: icpp-sample: {r.stderr}"):
        continue
    d, off = check(samples), check(samples, ["--evidence", "off"])
    if d is None or off is None:
        continue
    ev = d["by_evidence"]
    print(f"{mode}: {d['with_truth']} samples, missing mass {ev['missing_mass']:.3f}, sparse {ev['sparse']}; "
          f"precise {share(d, 'precise'):.1%}, incorrect {share(d, 'incorrect'):.2%}, uncertain "
          f"{share(d, 'uncertain-containing-truth') + share(d, 'uncertain-not-containing-truth'):.1%}; "
          f"evidence off: incorrect {share(off, 'incorrect'):.1%}")
    c.check(d["with_truth"] >= 1000, f"{mode}: only {d['with_truth']} samples with a true stack")
    c.check(ev["on"] == 1, f"{mode}: the recording's evidence is off: {ev}")
    c.check(share(d, "incorrect") <= 0.01, f"{mode}: {share(d, 'incorrect'):.2%} incorrect: {d['incorrect_samples'][:2]}")
    # the profile's header says a sparse recording is one, and what to do
    r = run([tool("icpp-resolve"), "-m", mapfile, "-n", "1", samples])
    hint = "took a path no other one took" in r.stdout and "sample faster" in r.stdout
    c.check(r.returncode == 0 and hint == (ev["sparse"] == 1),
            f"{mode}: the header's sparse-recording hint is {'there' if hint else 'missing'}, sparse {ev['sparse']}")
    if mode == "random":
        c.check(ev["sparse"] == 1 and ev["missing_mass"] >= 0.5, f"random: not sparse: {ev}")
        c.check(share(off, "incorrect") >= 0.2,
                f"random: evidence off should misplace most samples (arrangements share CIDs): {off['by_samples']}")
        c.check(d["by_samples"]["precise"] >= 10, f"random: nothing precise: {d['by_samples']}")
    else:
        c.check(ev["sparse"] == 0 and ev["missing_mass"] < 0.5, f"periodic: sparse: {ev}")
        c.check(share(d, "precise") >= 0.1, f"periodic: {share(d, 'precise'):.1%} precise")
c.done()
