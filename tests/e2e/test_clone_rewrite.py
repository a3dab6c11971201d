#!/usr/bin/env python3
"""test_clone_rewrite.py -- function cloning (docs/rewrite.md, "Cloning"). clonepaths.c's
main;one;two;work and main;two;one;work have the same functions, so no padding of frames separates them,
and every callee reads stack-passed arguments, so no call can be wrapped. icpp-rewrite must clone a callee
for one of the orders: then every sample of a --validate recording of OUT is precise against its true
stack (against about half ambiguous in PROG, and with --no-clone), --verify finds a training of OUT
exactly as OUT's map predicts, the output is identical, the copy is an ordinary function in OUT (symbol,
FDE: gdb unwinds through it) and gdb's backtraces at the clone and below it are PROG's (the clone's frame
named NAME.icpp_clone), with frame pointers and without; and the same for clonethrow.cpp, whose
functions have exception tables and split-off .cold parts, with exceptions thrown through the copies."""
import json
import os
import re
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-clone-rewrite")
tmp = tempfile.mkdtemp(prefix="icpp-clone-rw-")


def check(prog, pmap, label):
    """--check json of a --validate recording of prog against pmap (None on failure)."""
    samples = os.path.join(tmp, label + ".samples")
    r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", samples, "--",
             prog, "30", "2000000"])
    if not c.check(r.returncode == 0, f"{label}: sampling failed: {r.stderr}"):
        return None
    r = run([tool("icpp-resolve"), "-m", pmap, "--check", "--format", "json", samples])
    if not c.check(r.returncode == 0, f"{label}: --check: {r.stderr}"):
        return None
    return json.loads(r.stdout)


def share(d, key):
    return d["by_samples"][key] / max(1, d["with_truth"])


def gdb_bt(binary, where, args):
    """[(pc or None, function, a clone's frame?)] of gdb's backtrace at the first stop at `where`, up to
    main. gdb names a clone's frame by its symbol: one.icpp_clone () in C, one(long, ...) [clone
    .icpp_clone.0] () in C++ -- the function is what comes before the first space or parenthesis, the
    clone's suffix dropped (gdb drops its number in C)."""
    r = run(["gdb", "-batch", "-nx", "-ex", "break " + where, "-ex", "run", "-ex", "bt", "--args", binary] + args,
            timeout=120)
    out = []
    for m in re.finditer(r"^#\d+\s+(?:(0x[0-9a-f]+) in )?(.*)$", r.stdout, re.M):
        name = re.sub(r"\.icpp_clone(\.\d+)?$", "", re.match(r"[^ (]*", m.group(2)).group(0))
        out.append((int(m.group(1), 16) if m.group(1) else None, name, "icpp_clone" in m.group(2)))
        if name == "main":
            break
    return out


def same_bt(bt0, bt1):
    """The same functions (a clone as its original), at the same return addresses but in clone frames."""
    return len(bt0) == len(bt1) and all(n0 == n1 and not k0 and (pc0 == pc1 or k1)
                                        for (pc0, n0, k0), (pc1, n1, k1) in zip(bt0, bt1))


for label in ("fp", "nofp"):
    binary = built("tests/e2e/clonepaths_" + label)
    mapfile = os.path.join(tmp, label + ".icppmap")
    r = run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", binary, "2", "100000"])
    if not c.check(r.returncode == 0 and os.path.exists(mapfile), f"{label}: training failed: {r.stderr}"):
        continue
    d0 = check(binary, mapfile, label + "-prog")
    if d0:
        c.check(share(d0, "ambiguous-containing-truth") >= 0.35,
                f"{label}: PROG should be about half ambiguous: {d0['by_samples']}")
        # the ambiguous samples shown for auditing: the truth among their candidates, the two orders
        amb = [x for x in d0.get("other_samples", []) if x["verdict"] == "ambiguous-containing-truth"]
        c.check(len(amb) >= 5 and all(x["truth"] in x["candidates"].split(" | ") and
                                      x["candidates"].count(" | ") == 1 for x in amb),
                f"{label}: other_samples: {d0.get('other_samples', [])[:3]}")

    # --no-clone: nothing can separate the orders
    out_nc = os.path.join(tmp, label + ".noclone")
    r = run([tool("icpp-rewrite"), "--no-clone", "--explain", "-m", mapfile, "-o", out_nc, binary])
    if c.check(r.returncode == 0, f"{label}: --no-clone: {r.stderr}"):
        c.check(re.search(r"^cloned: +0 functions", r.stdout, re.M) and
                re.search(r"^wrapped: +0 call sites", r.stdout, re.M) and
                re.search(r"\[inseparable\] work at height", r.stdout),
                f"{label}: --no-clone should leave work's pair inseparable:\n{r.stdout}")
        c.check(re.search(r"^0x[0-9a-f]+\tone\ttwo\trefused: .*\tcopy: not tried \(--no-clone\)$", r.stdout, re.M),
                f"{label}: --no-clone --explain should say no copy was tried:\n{r.stdout}")

    out = os.path.join(tmp, label + ".arr")
    r = run([tool("icpp-rewrite"), "--explain", "--verify", "-m", mapfile, "-o", out, binary, "2", "100000"])
    if not c.check(r.returncode == 0, f"{label}: icpp-rewrite --verify failed ({r.returncode}):\n{r.stdout}\n"
                   f"{r.stderr}"):
        continue
    clones = re.findall(r"^ +0x[0-9a-f]+ +\+(\d+) +call (\w+) -> (\w+) \(copy (\S+) at (0x[0-9a-f]+), (\d+) bytes\)$",
                        r.stdout, re.M)
    c.check(len(clones) >= 1 and all(callee in ("one", "two", "work") for _p, _c, callee, _n, _a, _s in clones),
            f"{label}: want a clone of one, two or work:\n{r.stdout}")
    c.check(re.search(r"^cloned: +calls a copy of its callee", r.stdout, re.M) is None and
            re.search(r"\tcloned: calls a copy of its callee, padded \+\d+$", r.stdout, re.M),
            f"{label}: --explain should mark the redirected call site")
    # the other calls between one, two and work: a copy of the callee could take them, not needed
    c.check(len(re.findall(r"^0x[0-9a-f]+\t(one|two|main)\t(one|two|work)\trefused: the callee may read stack-passed "
                           r"arguments.*\tcopy: possible \(up to \+\d+\), not needed$", r.stdout, re.M)) >= 3,
            f"{label}: --explain should say a copy could take the other calls:\n{r.stdout}")
    c.check(re.search(r"^verify: OK$", r.stdout, re.M) and
            re.search(r"^verify: output and exit status \(0\): identical$", r.stdout, re.M),
            f"{label}: --verify:\n{r.stdout}")
    c.check(re.search(r"^still ambiguous: \d+ contexts", r.stdout, re.M) and
            not re.search(r"\] (work|spin) at height", r.stdout),
            f"{label}: work and spin should not stay ambiguous:\n{r.stdout}")
    # the copy: a function symbol of its own with an FDE
    syms = run(["readelf", "-sW", out]).stdout
    for _p, _c, callee, name, addr, size in clones:
        c.check(re.search(r"\b0*%s +%s FUNC +LOCAL .* %s$" % (addr[2:], size, re.escape(name)), syms, re.M),
                f"{label}: no symbol {name} at {addr} ({size} bytes) in OUT")
    d1 = check(out, out + ".icppmap", label + "-out")
    if d1:
        c.check(d1["with_truth"] >= 200 and share(d1, "precise") >= 0.99,
                f"{label}: OUT's samples should be precise: {d1['by_samples']} of {d1['with_truth']}")
        # the profile names the program's functions: the copy as its original
        prof = run([tool("icpp-resolve"), "-m", out + ".icppmap", os.path.join(tmp, label + "-out.samples")]).stdout
        c.check("icpp_clone" not in prof and "main -> one -> two -> work" in prof and
                "main -> two -> one -> work" in prof, f"{label}: the profile of OUT:\n{prof}")
    a0 = run([binary, "3", "5000"]).stdout
    c.check(a0 and run([out, "3", "5000"]).stdout == a0, f"{label}: outputs differ")
    # gdb: at the clone (its first stop is the redirected call's), and in spin below it
    for _p, caller, callee, name, _a, _s in clones[:1]:
        bt0, bt1 = gdb_bt(binary, callee, ["1", "1000"]), gdb_bt(out, name, ["1", "1000"])
        c.check(len(bt0) >= 2 and bt1 and bt1[0][2] and same_bt(bt0, bt1),
                f"{label}: gdb backtraces at {callee} and its clone differ:\n{bt0}\n{bt1}")
        bt0, bt1 = gdb_bt(binary, "spin", ["1", "1000"]), gdb_bt(out, "spin", ["1", "1000"])
        c.check(len(bt0) >= 5 and any(k for _pc, _n, k in bt1) and same_bt(bt0, bt1),
                f"{label}: gdb backtraces at spin differ (or no clone frame):\n{bt0}\n{bt1}")

# C++: the same two orders through functions with exception tables and split-off .cold parts (g++ -O2
# puts the landing pads and the throw there). The copy takes its cold part and its exception tables:
# work's exceptions pass through the copies' cleanups (printed: how many were caught, how many
# destructors ran) to main.
binary = built("tests/e2e/clonethrow")
mapfile = os.path.join(tmp, "throw.icppmap")
r = run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", binary, "20", "100000"])
if c.check(r.returncode == 0 and os.path.exists(mapfile), f"clonethrow: training failed: {r.stderr}"):
    out = os.path.join(tmp, "throw.arr")
    r = run([tool("icpp-rewrite"), "--verify", "-m", mapfile, "-o", out, binary, "20", "100000"])
    clones = re.findall(r"^ +0x[0-9a-f]+ +\+\d+ +call .* -> (one|two|work)\(.*\) \(copy (\S+) at ", r.stdout, re.M)
    if c.check(r.returncode == 0 and re.search(r"^verify: OK$", r.stdout, re.M) and clones,
               f"clonethrow: want a clone of one, two or work and --verify OK ({r.returncode}):\n{r.stdout}\n"
               f"{r.stderr}"):
        syms = run(["readelf", "-sW", out]).stdout
        c.check(all(re.search(r" FUNC +LOCAL .* %s\.cold$" % re.escape(nm), syms, re.M) for _f, nm in clones),
                f"clonethrow: a copy without its .cold part: {clones}")
        a0 = run([binary, "200", "1000"]).stdout
        c.check(re.match(r"\d+ caught 58 cleanups \d+$", a0) and run([out, "200", "1000"]).stdout == a0,
                f"clonethrow: outputs differ (exceptions, cleanups): {a0!r}")
        d1 = check(out, out + ".icppmap", "throw-out")
        if d1:
            c.check(d1["with_truth"] >= 200 and share(d1, "precise") >= 0.99,
                    f"clonethrow: OUT's samples should be precise: {d1['by_samples']} of {d1['with_truth']}")
        # the first exception, from work below a copy (the first throw: i = 3, both orders)
        bt0, bt1 = gdb_bt(binary, "__cxa_throw", ["20", "1000"]), gdb_bt(out, "__cxa_throw", ["20", "1000"])
        c.check(len(bt0) >= 4 and same_bt(bt0, bt1), f"clonethrow: gdb at __cxa_throw:\n{bt0}\n{bt1}")
c.done()
