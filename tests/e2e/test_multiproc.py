#!/usr/bin/env python3
"""test_multiproc.py -- recordings of several programs (docs/resolve.md, "Several programs in one recording"): `timeout 10 PROG`,
a shell script that runs two corpus programs, and forkexec (fork + exec of itself).  Each
process must resolve with the map of its own executable, chosen by build-id -- given as
several -m, found in --map-dir (under misleading names), or found next to the binary -- and
`--check` must show each program's samples correct against their true stacks; the report
(text and json) says per binary how many samples could not be resolved and why."""
import json
import os
import shutil
import sys
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-multiproc")
tmp = tempfile.mkdtemp(prefix="icpp-multiproc-")
P = {n: built(f"tests/programs/{n}.O2-fp-pie") for n in ("recurse", "fnptr", "forkexec")}
maps = {}
for n, b in P.items():
    maps[n] = os.path.join(tmp, n + ".icppmap")
    r = run([tool("icpp-train"), "-q", "--fresh", "-o", maps[n], "--", b, "4"])
    c.check(r.returncode == 0 and os.path.exists(maps[n]), f"train {n}: {r.stderr}")


def sample(name, cmd):
    out = os.path.join(tmp, name + ".samples")
    r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "2000", "-o", out, "--"] + cmd)
    c.check(r.returncode == 0 and os.path.exists(out), f"{name}: sampling failed: {r.stderr}")
    return out


def resolve(args, cwd=None):
    r = run([tool("icpp-resolve")] + args, cwd=cwd)
    c.check(r.returncode == 0, f"icpp-resolve {args}: rc {r.returncode}: {r.stderr}")
    return r


def bins_of(d):
    return {os.path.basename(b["binary"]): b for b in d["binaries"]}


def check_binaries(label, samples, args, expect, cwd=None):
    """--check (json) per binary: every expected program judged against its true stacks
    with no incorrect sample and >= 95% correct; and the profile's per-binary counts."""
    r = resolve(args + ["--check", "--format", "json", samples], cwd)
    if r.returncode:
        return
    bins = bins_of(json.loads(r.stdout))
    for n in expect:
        b = bins.get(os.path.basename(P[n]))
        if not c.check(b is not None and b["map"], f"{label}: {n} has no map in --check: {bins}"):
            continue
        judged = sum(b[k] for k in ("precise", "ambiguous-containing-truth", "incorrect", "missing", "unresolved"))
        ok = b["precise"] + b["ambiguous-containing-truth"]
        c.check(judged >= 20, f"{label}: {n}: only {judged} samples with a true stack")
        c.check(b["incorrect"] == 0, f"{label}: {n}: {b['incorrect']} incorrect samples")
        c.check(ok >= 0.95 * judged, f"{label}: {n}: {ok}/{judged} correct")
    r = resolve(args + ["--format", "json", samples], cwd)
    if r.returncode:
        return None
    d = json.loads(r.stdout)
    bins = bins_of(d)
    for n in expect:
        b = bins.get(os.path.basename(P[n]))
        if c.check(b is not None, f"{label}: {n} not in the report's binaries"):
            c.check(b["map"] and b["samples"] > 0 and b["precise"] + b["ambiguous"] >= 0.9 * b["samples"],
                    f"{label}: {n}: resolved {b}")
    return d


# 1. timeout 10 PROG, one -m: timeout's samples are counted as having no map, by build-id.
s = sample("timeout", ["timeout", "10", P["recurse"], "8"])
d = check_binaries("timeout", s, ["-m", maps["recurse"]], ["recurse"])
if d:
    t = bins_of(d).get("timeout")
    if t and t["samples"]:
        c.check(t["map"] is None and t["unresolved"] == t["samples"] and "build-id" in t["no_map_reason"]
                and t["unresolved_by_reason"], f"timeout: its samples should be 'no map': {t}")
    r = resolve(["-m", maps["recurse"], s])
    c.check("binary " + P["recurse"] in r.stdout, f"timeout: text report lacks the per-binary line: {r.stdout[:800]}")

# 2. a shell script running two programs: several -m, then --map-dir with misleading names.
script = os.path.join(tmp, "two.sh")
with open(script, "w") as f:
    f.write(f"#!/bin/sh\n{P['recurse']} 8\n{P['fnptr']} 8\n")
os.chmod(script, 0o755)
s = sample("script", [script])
check_binaries("script -m -m", s, ["-m", maps["recurse"], "-m", maps["fnptr"]], ["recurse", "fnptr"])
md = os.path.join(tmp, "mapdir")
os.mkdir(md)
# each map under the other program's name: only the build-id may decide
shutil.copy(maps["recurse"], os.path.join(md, os.path.basename(P["fnptr"]) + ".icppmap"))
shutil.copy(maps["fnptr"], os.path.join(md, os.path.basename(P["recurse"]) + ".icppmap"))
d = check_binaries("script --map-dir", s, ["--map-dir", md], ["recurse", "fnptr"])
if d:
    b = bins_of(d)
    c.check(os.path.basename(b.get(os.path.basename(P["recurse"]), {}).get("map") or "").startswith("fnptr"),
            f"--map-dir: recurse should use the file named fnptr...: {b}")

# 3. maps next to the binaries (no -m, no --map-dir), resolved from another directory.
nb = os.path.join(tmp, "nextto")
os.mkdir(nb)
copies = {}
for n in ("recurse", "fnptr"):
    copies[n] = os.path.join(nb, os.path.basename(P[n]))
    shutil.copy(P[n], copies[n])
    shutil.copy(maps[n], copies[n] + ".icppmap")     # same bytes, same build-id
with open(script, "w") as f:
    f.write(f"#!/bin/sh\n{copies['recurse']} 8\n{copies['fnptr']} 8\n")
s = sample("nextto", [script])
elsewhere = os.path.join(tmp, "elsewhere")
os.mkdir(elsewhere)
check_binaries("next to the binary", s, [], ["recurse", "fnptr"], cwd=elsewhere)

# 4. fork + exec of the same binary: parent, child and exec'd image, one map.
s = sample("forkexec", [P["forkexec"], "8"])
check_binaries("forkexec", s, ["-m", maps["forkexec"]], ["forkexec"])

# 5. completion in the second map: newpaths trained on one input, run on another after
# recurse, recurse's map given first -- completion grows newpaths' map (not the first one)
# while samples are resolved, and the union must grow with it (tests/e2e/test_complete.py).
newpaths = built("tests/e2e/newpaths")
maps["newpaths"] = os.path.join(tmp, "newpaths.icppmap")
r = run([tool("icpp-train"), "-q", "--fresh", "-o", maps["newpaths"], "--", newpaths, "a", "1"])
c.check(r.returncode == 0, f"train newpaths: {r.stderr}")
with open(script, "w") as f:
    f.write(f"#!/bin/sh\n{P['recurse']} 4\n{newpaths} bcd 2\n")
s = sample("complete", [script])
args = ["-m", maps["recurse"], "-m", maps["newpaths"]]
r = resolve(args + ["--format", "json", s])
if r.returncode == 0:
    d = json.loads(r.stdout)
    b = bins_of(d).get("newpaths", {})
    c.check(b.get("inferred", 0) > 0.5 * b.get("samples", 0) > 0, f"completion: newpaths not inferred: {b}")
    inf = [p for p in d["paths"] if "beta" in p["path"]]
    c.check(inf and all(p["inferred_frames"][p["path"].index("beta")] for p in inf),
            f"completion: beta's frame is not marked inferred: {inf[:2]}")
    # recurse ran what it was trained on: none of its own code is inferred.  A sample in
    # ld.so's start-up (code training never runs, before any hook) may be, now that learn
    # samples no longer fall just before profile samples (docs/resolve.md, "The learn rate").
    own = {"descend", "descend_work", "ping", "pong", "pp_leaf", "fib"}
    rinf = [p["path"] for p in d["paths"] if any(p["inferred_frames"]) and own & set(p["path"])]
    c.check(not rinf and bins_of(d).get(os.path.basename(P["recurse"]), {}).get("inferred", 99) <= 2,
            f"completion: recurse's samples (all trained) inferred: {rinf[:2]} {bins_of(d)}")
r = resolve(args + ["--check", "--format", "json", s])
if r.returncode == 0:
    b = bins_of(json.loads(r.stdout)).get("newpaths", {})
    c.check(b.get("inferred-correct", 0) > 0 and b.get("inferred-incorrect", 1) == 0,
            f"completion --check: newpaths {b}")

# A map of another build under the binary's own name is never used: refused by build-id.
for n in ("recurse",):
    shutil.copy(maps["fnptr"], copies[n] + ".icppmap")
s2 = os.path.join(tmp, "nextto.samples")
r = run([tool("icpp-resolve"), "--format", "json", s2], cwd=elsewhere)
if c.check(r.returncode == 0, f"decoy map: rc {r.returncode}: {r.stderr}"):
    b = bins_of(json.loads(r.stdout)).get(os.path.basename(P["recurse"]), {})
    c.check(b.get("map") is None and "another build" in b.get("no_map_reason", ""),
            f"a map of another build named after the binary was used: {b}")

# Bad input: a --map-dir that is not there, a corrupt map in it, no map for any binary.
def one_line_error(args, words, label):
    r = run([tool("icpp-resolve")] + args)
    lines = r.stderr.strip().splitlines()
    c.check(r.returncode == 1 and len(lines) == 1 and all(w in r.stderr for w in words),
            f"{label}: want one line with {words}, rc 1; got rc {r.returncode}: {r.stderr}")


one_line_error(["--map-dir", os.path.join(tmp, "nodir"), s2], ["nodir", "--map-dir"], "missing --map-dir")
bad = os.path.join(tmp, "baddir")
os.mkdir(bad)
with open(os.path.join(bad, "x.icppmap"), "wb") as f:
    f.write(b"not a map at all")
# A bad map in --map-dir is skipped with a warning naming it (docs/resolve.md); with no
# other map there, the recording's program then has none: rc 1, that warning and one error.
r = run([tool("icpp-resolve"), "--map-dir", bad, s2])
lines = r.stderr.strip().splitlines()
c.check(r.returncode == 1 and len(lines) == 2 and "warning" in lines[0] and "x.icppmap" in lines[0]
        and "skipped" in lines[0] and "no path map" in lines[1],
        f"corrupt map in --map-dir: want its warning, then no map; got rc {r.returncode}: {r.stderr}")
empty = os.path.join(tmp, "emptydir")
os.mkdir(empty)
one_line_error(["--map-dir", empty, s2], ["no path map", "build-id"], "no map for any binary")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
