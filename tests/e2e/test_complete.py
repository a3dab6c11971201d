#!/usr/bin/env python3
"""test_complete.py -- completion end to end: train newpaths on one input (mode a), sample
another that takes paths training never saw (modes b, c, d), and judge `icpp-resolve --check`
with completion off and on: with it, samples move from missing to inferred, every inferred
path reported unique is the true one, the twin paths (equal frames) come out ambiguous with
the truth among them; the profile formats show inferred paths as their own status."""
import json
import os
import sys
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-complete")
tmp = tempfile.mkdtemp(prefix="icpp-complete-")
for name in ("newpaths", "newpaths_fp"):
    binary = built(os.path.join("tests/e2e", name))
    mapfile, samples = os.path.join(tmp, name + ".icppmap"), os.path.join(tmp, name + ".samples")
    run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", binary, "a", "1"])
    # learning off: completion alone (learning on is below, and in test_learn.py)
    r = run([tool("icpp-sample"), "-q", "--validate", "--no-learn", "-e", "cpu-clock", "-F", "4000", "-o", samples,
             "--", binary, "bcd", "3"])
    if not c.check(os.path.exists(mapfile) and os.path.exists(samples), f"{name}: training or sampling failed: {r.stderr}"):
        continue
    res, cause = {}, {}
    for opt in ("--no-complete", "--complete"):
        r = run([tool("icpp-resolve"), "-m", mapfile, "--check", "--format", "json", opt, samples])
        if c.check(r.returncode == 0, f"{name} {opt}: --check failed: {r.stderr}"):
            res[opt] = json.loads(r.stdout)["by_samples"]
            cause[opt] = json.loads(r.stdout)["missing_by_cause"]
    if len(res) < 2:
        continue
    # missing_by_cause: every missing or inferred sample has one; modes b, c, d take paths training never
    # saw (mode a's main;alpha;work is trained at its height: its samples are never missing)
    for opt in res:
        nmiss = sum(v for k, v in res[opt].items() if k == "missing" or k.startswith("inferred"))
        c.check(sum(cause[opt].values()) == nmiss and cause[opt]["untrained-path"] >= 0.95 * nmiss,
                f"{name} {opt}: missing by cause {cause[opt]} vs {res[opt]}")
    off, on = res["--no-complete"], res["--complete"]
    print(f"{name}: off {off}\n{name}: on  {on}")
    c.check(off["missing"] >= 100, f"{name}: the new input should give missing samples: {off}")
    c.check(sum(v for k, v in off.items() if k.startswith("inferred")) == 0, f"{name}: inferred without completion: {off}")
    c.check(on["inferred-correct"] >= 50, f"{name}: too few inferred-correct samples: {on}")
    c.check(on["inferred-incorrect"] == 0, f"{name}: an inferred path reported unique is wrong: {on}")
    c.check(on["inferred-ambiguous-containing-truth"] > 0, f"{name}: the twins should be inferred-ambiguous: {on}")
    c.check(on["missing"] < off["missing"] // 4, f"{name}: completion left most samples missing: {on}")
    c.check(on["precise"] == off["precise"] and on["incorrect"] == off["incorrect"],
            f"{name}: completion changed trained results: {off} -> {on}")
    # the profile: own status in json and text, never mixed into precise
    r = run([tool("icpp-resolve"), "-m", mapfile, "--format", "json", samples])
    if c.check(r.returncode == 0, f"{name}: json failed: {r.stderr}"):
        d = json.loads(r.stdout)
        ev = d["events"][0]
        c.check(ev["inferred"] > 0 and d["shares"]["inferred"] > 0, f"{name}: no inferred count in json: {ev}")
        c.check(ev["precise"] + ev["ambiguous"] + ev["missing"] + ev["unresolved"] + ev["inferred"] == ev["samples"],
                f"{name}: kinds do not add up: {ev}")
        beta = [p for p in d["paths"] if p["path"][-1] == "work" and "beta" in p["path"]]
        c.check(beta and all(p["inferred"][0] == p["self"][0] for p in beta),
                f"{name}: main;beta;gamma;work is not all inferred: {beta}")
        c.check(beta and all(p["inferred_frames"][p["path"].index("beta")] for p in beta),
                f"{name}: beta's frame is not marked inferred: {beta}")
    r = run([tool("icpp-resolve"), "-m", mapfile, "--no-complete", "--format", "json", samples])
    if c.check(r.returncode == 0, f"{name}: json --no-complete failed: {r.stderr}"):
        d = json.loads(r.stdout)
        c.check(d["events"][0]["inferred"] == 0 and not any("beta" in p["path"] for p in d["paths"]),
                f"{name}: --no-complete still infers")
    r = run([tool("icpp-resolve"), "-m", mapfile, "-n", "0", samples])
    c.check(r.returncode == 0 and "beta [inferred]" in r.stdout and "inferred" in r.stdout.splitlines()[1],
            f"{name}: text output does not mark inferred paths: {r.stdout[:800]}")
    # pprof: functions only completion placed carry the mark in their names
    pb = os.path.join(tmp, name + ".pb.gz")
    r = run([tool("icpp-resolve"), "-m", mapfile, "--format", "pprof", "-o", pb, samples])
    if c.check(r.returncode == 0, f"{name}: pprof failed: {r.stderr}"):
        import gzip
        with gzip.open(pb) as f:
            c.check(b"beta [inferred]" in f.read(), f"{name}: pprof names beta without the inferred mark")
    # learning on (one sample in 4 learns): completion only adds where learning left gaps
    lrec = os.path.join(tmp, name + ".learn.samples")
    r = run([tool("icpp-sample"), "-q", "--validate", "--learn=4", "-e", "cpu-clock", "-F", "4000", "-o", lrec,
             "--", binary, "bcd", "3"])
    if c.check(os.path.exists(lrec), f"{name}: sampling with learning failed: {r.stderr}"):
        res = {}
        for opt in ("--no-complete", "--complete"):
            r = run([tool("icpp-resolve"), "-m", mapfile, "--check", "--format", "json", opt, lrec])
            if c.check(r.returncode == 0, f"{name} learning {opt}: --check failed: {r.stderr}"):
                res[opt] = json.loads(r.stdout)["by_samples"]
        if len(res) == 2:
            off, on = res["--no-complete"], res["--complete"]
            print(f"{name} learning: off {off}\n{name} learning: on  {on}")
            c.check(on["inferred-incorrect"] == 0 and on["missing"] <= off["missing"],
                    f"{name}: with learning, completion made things worse: {off} -> {on}")
c.done()
