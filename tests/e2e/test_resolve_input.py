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
# ---- Recordings that do not add up (docs/samples-format.md, "What a reader checks"):
# crafted from the good one by its blocks -- the END record taken off the last block,
# new blocks of hand-encoded records, then an END record.  Each defect is a warning
# that says what is wrong, and the samples it concerns are left out of the counts.
import json  # noqa: E402
import struct  # noqa: E402
import zlib  # noqa: E402


def uv(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def block(payload):
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


blocks, pos = [], 16
while pos + 8 <= len(data):
    ln, _ = struct.unpack_from("<II", data, pos)
    blocks.append(data[pos + 8:pos + 8 + ln])
    pos += 8 + ln
nsamp = json.loads(good.stdout)["samples"]
end_rec = b"\x0a" + uv(nsamp) + uv(0)
c.check(blocks and blocks[-1].endswith(end_rec), f"the good recording does not end with END({nsamp}, 0)")
base = data[:16] + b"".join(block(b) for b in blocks[:-1])
if len(blocks[-1]) > len(end_rec):
    base += block(blocks[-1][:-len(end_rec)])
SAMPLE0 = b"\x06\x00\x00" + b"\x00" * 4            # thread 0, event 0, no deltas: its last sample again


def end(n, lost=0):
    return block(b"\x0a" + uv(n) + uv(lost))


def crafted(name, body):
    p = os.path.join(tmp, name + ".samples")
    open(p, "wb").write(body)
    r = run([RESOLVE, "-m", omap, "--format", "json", p], timeout=60)
    d = json.loads(r.stdout) if r.returncode == 0 and r.stdout.startswith("{") else {}
    return r, d, p


r, d, p = crafted("sameasgood", base + end(nsamp))
c.check(r.returncode == 0 and d.get("samples") == nsamp and "warning" not in r.stderr,
        f"the recording rebuilt from its blocks: rc={r.returncode} samples={d.get('samples')} {r.stderr[-300:]!r}")
# two LOST records of 2^63 each: 2^64 does not wrap to 0
r, d, p = crafted("lost", base + block(b"\x07" + uv(1 << 63) + b"\x07" + uv(1 << 63)) + end(nsamp))
c.check(r.returncode == 0 and "LOST records add up to more than 18446744073709551615" in r.stderr
        and d.get("lost") == (1 << 64) - 1 and d.get("lost_saturated") is True,
        f"LOST 2^63 twice: lost={d.get('lost')} {r.stderr[-300:]!r}")
rt = run([RESOLVE, "-m", omap, p])
c.check("lost: more than 18446744073709551615" in rt.stdout, f"LOST 2^63 twice, text header: {rt.stdout[:300]!r}")
# an END record claiming 999,999 samples
r, d, p = crafted("end999999", base + end(999999))
c.check(r.returncode == 0 and f"closing record counts 999999 samples, the file holds {nsamp}" in r.stderr,
        f"END says 999999: {r.stderr[-300:]!r}")
# a sample after the END record
r, d, p = crafted("afterend", base + end(nsamp) + block(b"\x06\x00\x00" + b"\x00" * 4))
c.check(r.returncode == 0 and d.get("samples") == nsamp and "1 samples after its closing record were left out"
        in r.stderr, f"a sample after END: samples={d.get('samples')} (want {nsamp}) {r.stderr[-300:]!r}")
# a sample of thread 0 after its EXIT record (orders is one thread: pid = tid)
sc = run([RESOLVE, "--script", samples]).stdout.splitlines()
tid = next(int(line.split()[0].split("/")[1]) for line in sc if line and line[0].isdigit())
ex = b"\x08" + uv(tid) + uv(tid)
r, d, p = crafted("afterexit", base + block(ex + SAMPLE0) + end(nsamp + 1))
c.check(r.returncode == 0 and d.get("samples") == nsamp and "1 samples of threads after their exit record were left"
        " out" in r.stderr, f"a sample after its thread's EXIT: samples={d.get('samples')} (want {nsamp}) "
        f"{r.stderr[-300:]!r}")
# a sample of event id 5, which no EVENT record declares (of a new thread: index 1, as orders has one)
r, d, p = crafted("event5", base + block(b"\x05" + uv(tid) + uv(tid + 1) + b"\x06\x01\x05" + b"\x00" * 4)
                  + end(nsamp + 1))
c.check(r.returncode == 0 and d.get("samples") == nsamp and "event no EVENT record declares (id 5)" in r.stderr,
        f"a sample of undeclared event 5: samples={d.get('samples')} (want {nsamp}) {r.stderr[-300:]!r}")
# Another binary at the recorded path: learn samples through it are not learned (they would
# make paths of libc's frames alone, rooted at __libc_start_main), and the warning names it.
prog = os.path.join(tmp, "prog")
shutil.copy(orders, prog)
psmp = os.path.join(tmp, "prog.samples")
r = run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-F", "4000", "-o", psmp, "--", prog, "10"])
c.check(r.returncode == 0, f"sample prog: {r.stderr}")
shutil.copy(recurse, prog)
saved = os.path.join(tmp, "saved.icppmap")
r = run([RESOLVE, "--save-map", saved, psmp], timeout=120)
c.check(f"{prog} is not the file the recording mapped" in r.stderr and "put the recorded build back" in r.stderr,
        f"another binary at the recorded path: {r.stderr[-400:]!r}")
paths = run([tool("icpp-train"), "--paths", saved]).stdout if os.path.exists(saved) else ""
rooted = [line for line in paths.splitlines() if "\t__libc_start_main" in line or ";__libc_start_main" in line]
c.check(not rooted, f"--save-map with another binary at the path learned {len(rooted)} paths through "
        f"__libc_start_main: {rooted[:2]}")

# ---- --map-dir with bad *.icppmap files beside a good one: each skipped with a warning,
# the result that of the good map alone.
import resource  # noqa: E402
import time  # noqa: E402
mdir = os.path.join(tmp, "maps")
os.mkdir(mdir)
shutil.copy(omap, os.path.join(mdir, "orders.icppmap"))
open(os.path.join(mdir, "a-junk.icppmap"), "wb").write(b"junk")
os.mkfifo(os.path.join(mdir, "b-fifo.icppmap"))
os.mkdir(os.path.join(mdir, "c-dir.icppmap"))
r = run([RESOLVE, "--map-dir", mdir, "--format", "json", samples], timeout=60)
warned = [w for w in ("a-junk", "b-fifo", "c-dir") if any(w in line and "skipped" in line
                                                            for line in r.stderr.splitlines())]
c.check(r.returncode == 0 and len(warned) == 3, f"--map-dir with bad maps: rc={r.returncode} warned for {warned} "
        f"{r.stderr[-400:]!r}")
gd = os.path.join(tmp, "goodonly")
os.mkdir(gd)
shutil.copy(omap, os.path.join(gd, "orders.icppmap"))
ref = run([RESOLVE, "--map-dir", gd, "--format", "json", samples], timeout=60)


def paths_of(out):
    try:
        return sorted((tuple(p["path"]), json.dumps(p.get("self"))) for p in json.loads(out)["paths"])
    except (ValueError, KeyError):
        return None


c.check(ref.returncode == 0 and paths_of(r.stdout) == paths_of(ref.stdout) and paths_of(ref.stdout),
        "--map-dir with bad maps: the paths differ from the good map's alone")
# A sparse map (a small header, 3.5 GB apparent, a few KiB on disk), and one whose header
# claims that size: refused at once, without reading it into memory -- for icpp-resolve and
# icpp-train --stats.
for name, blen in (("sparse", 100), ("claims", 3500 * 2**20 - 28)):
    sp = os.path.join(tmp, name + ".icppmap")
    with open(sp, "wb") as f:
        f.write(b"ICPPMAP\n" + struct.pack("<IIQ", 1, 0, blen) + b"\x01" * 4000)
        f.truncate(3500 * 2**20)
    for args, who in (([RESOLVE, "-m", sp, samples], "icpp-resolve"), ([tool("icpp-train"), "--stats", sp],
                                                                        "icpp-train --stats")):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        t0 = time.monotonic()
        rr = run(args, timeout=120)
        dt = time.monotonic() - t0
        maxrss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss      # KiB, the largest child so far
        lines = rr.stderr.strip().splitlines()
        c.check(rr.returncode == 1 and len(lines) == 1 and sp in rr.stderr and ("length field" in rr.stderr
                or "hole" in rr.stderr), f"{who}, {name} map: rc={rr.returncode} {rr.stderr[-300:]!r}")
        c.check(maxrss < 200 * 1024 and dt < 2.0, f"{who}, {name} map: {dt:.2f} s, max RSS {maxrss / 1024:.0f} MB "
                f"(before: {before / 1024:.0f} MB)")
    os.unlink(sp)

# Call sites: where each function on a path was called from, as file:line from DWARF;
# the line must hold a call of that function in the source.
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
