#!/usr/bin/env python3
"""test_resolve_input.py -- icpp-resolve on bad input: every error is one line and a
non-zero exit, never a crash or a hang; a truncated recording (a killed sampler) still
resolves what it holds and says so."""
import os
import random
import shutil
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-resolve-input")
tmp = tempfile.mkdtemp(prefix="icpp-resolve-in-")
RESOLVE = tool("icpp-resolve")
orders, recurse = built("tests/programs/orders.O2-nofp-pie"), built("tests/programs/recurse.O2-nofp-pie")
omap, rmap = os.path.join(tmp, "orders.icppmap"), os.path.join(tmp, "recurse.icppmap")
samples = os.path.join(tmp, "orders.samples")
run([tool("icpp-train"), "-q", "--fresh", "-o", omap, "--", orders])
run([tool("icpp-train"), "-q", "--fresh", "-o", rmap, "--", recurse])
run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-F", "4000", "-o", samples, "--", orders, "10"])
good = run([RESOLVE, "-m", omap, "--format", "json", samples])
c.check(good.returncode == 0, f"baseline resolve failed: {good.stderr}")


def one_line_error(args, words, label, rc=1):
    r = run([RESOLVE] + args, timeout=60)
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == rc and len(lines) == 1 and all(w in r.stderr for w in words)
    c.check(ok, f"{label}: rc={r.returncode} stderr={r.stderr[-300:]!r}")
    return r


one_line_error(["-m", rmap, samples], ["map of", "build-id", "samples are of"], "map of another binary")
one_line_error(["-m", omap, "/nonexistent.samples"], ["/nonexistent.samples", "No such file"], "missing samples")
one_line_error(["-m", "/nonexistent.icppmap", samples], ["/nonexistent.icppmap"], "missing map")
one_line_error(["-m", samples, samples], ["not an ICPP path map"], "samples given as the map")
one_line_error(["-m", omap, omap], ["not an ICPP sample file"], "map given as the samples")
one_line_error(["-m", omap, "--format", "nosuch", samples], ["unknown format"], "bad format", rc=2)

data = open(samples, "rb").read()
# A killed sampler: every cut point resolves what came before, with a warning, rc 0.
cuts = sorted({16, 24, len(data) // 3, len(data) // 2, len(data) - 5})
for cut in cuts:
    p = os.path.join(tmp, f"cut{cut}.samples")
    open(p, "wb").write(data[:cut])
    r = run([RESOLVE, "-m", omap, p], timeout=60)
    c.check(r.returncode == 0 and "incomplete" in r.stdout + r.stderr or cut <= 24 and r.returncode == 0,
            f"cut at {cut}: rc={r.returncode} {r.stderr[-200:]!r}")
# Corruption: bit flips in the body are a checksum error (one line), never a crash.
rng = random.Random(7)
for i in range(40):
    b = bytearray(data)
    pos = rng.randrange(16, len(b))
    b[pos] ^= 1 << rng.randrange(8)
    p = os.path.join(tmp, "flip.samples")
    open(p, "wb").write(bytes(b))
    r = run([RESOLVE, "-m", omap, p], timeout=60)
    crashed = r.returncode < 0 or r.returncode > 2
    c.check(not crashed and (r.returncode == 0 or len(r.stderr.strip().splitlines()) == 1),
            f"flip at {pos}: rc={r.returncode} {r.stderr[-200:]!r}")
# A corrupt map.
mb = bytearray(open(omap, "rb").read())
mb[len(mb) // 2] ^= 0x40
bad = os.path.join(tmp, "bad.icppmap")
open(bad, "wb").write(bytes(mb))
one_line_error(["-m", bad, samples], ["checksum", "corrupt"], "corrupt map")
# Random garbage with each magic.
for magic in (b"ICPPSMP\n\x01\x00\x00\x00\x00\x00\x00\x00", b"ICPPMAP\n\x01\x00\x00\x00", b"PERFILE2"):
    p = os.path.join(tmp, "garbage")
    open(p, "wb").write(magic + bytes(rng.randrange(256) for _ in range(5000)))
    for args in (["-m", omap, p], ["-m", p, samples]):
        r = run([RESOLVE] + args, timeout=60)
        c.check(0 <= r.returncode <= 2 and (r.returncode == 0 or len(r.stderr.strip().splitlines()) == 1),
                f"garbage {magic[:8]!r} as {args}: rc={r.returncode} {r.stderr[-200:]!r}")
# Call sites: where each function on a path was called from, as file:line from DWARF;
# the line must hold a call of that function in the source.
import json  # noqa: E402
import re  # noqa: E402
from e2e import SOURCE  # noqa: E402
src = open(os.path.join(SOURCE, "tests", "programs", "orders.c")).read().splitlines()
d = json.loads(good.stdout)
checked = 0
for p in d["paths"]:
    names, sites = p["path"], p["call_sites"]
    c.check(len(names) == len(sites), f"call_sites not one per function: {names} {sites}")
    for name, site in zip(names, sites):
        m = re.fullmatch(r"orders\.c:(\d+)", site)
        if not m or name not in ("a", "b", "c", "d", "e"):
            continue
        line = src[int(m.group(1)) - 1]
        checked += 1
        c.check(re.search(r"\b" + name + r"\(", line) is not None, f"{name} called at orders.c:{m.group(1)}: {line!r}")
c.check(checked >= 6, f"only {checked} call sites resolved to orders.c lines")
r = run([RESOLVE, "-m", omap, "--call-sites", samples])
c.check(r.returncode == 0 and re.search(r"-> d \(orders\.c:\d+\)", r.stdout) is not None,
        f"--call-sites text output: {r.stdout[-400:]!r}")
shutil.rmtree(tmp, ignore_errors=True)
c.done()
