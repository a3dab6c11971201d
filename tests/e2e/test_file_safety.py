#!/usr/bin/env python3
"""test_file_safety.py -- how the four tools treat files (docs/file-safety.md): no writing through a
symbolic link, no replacing another user's file in a sticky directory (as root and as nobody), sample
files 0600, every FIFO refused at once with one line, names from crafted maps escaped in every text
format, output linear on a 300k-deep crafted chain, option values checked, a killed sampler and a full
disk reported as they are.  Needs root (setpriv to nobody, RLIMIT_FSIZE, fs.protected_symlinks)."""
import os
import re
import resource
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

from e2e import Checker, built, run, tool

c = Checker("e2e-file-safety")
if os.geteuid() != 0:
    # CI runs as root; the other-user checks cannot be made otherwise.
    print("FAIL: test_file_safety needs root (setpriv to nobody, sticky-directory ownership)")
    sys.exit(1)

SAMPLE, TRAIN, RESOLVE, REWRITE = tool("icpp-sample"), tool("icpp-train"), tool("icpp-resolve"), tool("icpp-rewrite")
CRAFT = built("tests/e2e/craftmap")
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
tmp = tempfile.mkdtemp(prefix="icpp-fsafe-")
os.chmod(tmp, 0o755)
os.umask(0o022)
# Programs nobody can run too (the build tree may sit in a 0700 directory).
prog = os.path.join(tmp, "orders")
shutil.copy(built("tests/programs/orders.O2-nofp-pie"), prog)
rprog = os.path.join(tmp, "recurse")
shutil.copy(built("tests/programs/recurse.O2-nofp-pie"), rprog)
for p in (prog, rprog):
    os.chmod(p, 0o755)


def T(name):
    return os.path.join(tmp, name)


def one_line(r, words, label, rc=None):
    lines = r.stderr.strip().splitlines()
    ok = (r.returncode != 0 if rc is None else r.returncode == rc) and len(lines) == 1 and \
        all(w in r.stderr for w in words)
    c.check(ok, f"{label}: rc={r.returncode} stderr={r.stderr[-400:]!r}")


def mode(p):
    return stat.S_IMODE(os.lstat(p).st_mode)


omap, osmp = T("orders.icppmap"), T("orders.samples")
r = run([TRAIN, "-q", "--fresh", "--modules", "main", "-o", omap, "--", prog])
c.check(r.returncode == 0, f"train orders: {r.stderr}")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", osmp, "--", prog, "10"])
c.check(r.returncode == 0, f"sample orders: {r.stderr}")

# ---- 1. a symbolic link as output: refused by all four tools, its target untouched ----
victim = T("victim")
SECRET = b"root's secret, do not overwrite\n" * 4


def fresh_victim():
    with open(victim, "wb") as f:
        f.write(SECRET)
    os.chmod(victim, 0o600)


def victim_intact(label):
    c.check(open(victim, "rb").read() == SECRET and mode(victim) == 0o600,
            f"{label}: the link's target was changed (mode {mode(victim):o})")


link = T("link")
cases = {
    "icpp-sample -o LINK": [SAMPLE, "-q", "-o", link, "--", prog],
    "icpp-train --fresh -o LINK": [TRAIN, "-q", "--fresh", "-o", link, "--", prog],
    "icpp-rewrite -o LINK": [REWRITE, "-q", "--time-limit", "1", "-m", omap, "-o", link, prog],
    "icpp-resolve -o LINK": [RESOLVE, "-m", omap, "-o", link, osmp],
    "icpp-resolve --check -o LINK": [RESOLVE, "--check", "-m", omap, "-o", link, osmp],
}
for label, cmd in cases.items():
    fresh_victim()
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(victim, link)
    r = run(cmd, timeout=60)
    one_line(r, ["symbolic link"], label)
    victim_intact(label)
    c.check(os.path.islink(link) and not os.path.exists(link + ".old"), f"{label}: the link was moved")
# icpp-rewrite's second output (OUT.icppmap) follows the same rule, checked before the search.
fresh_victim()
os.unlink(link)
os.symlink(victim, T("rw.out.icppmap"))
r = run([REWRITE, "-q", "--time-limit", "1", "-m", omap, "-o", T("rw.out"), prog], timeout=60)
one_line(r, ["symbolic link", "rw.out.icppmap"], "icpp-rewrite: OUT.icppmap a link")
victim_intact("icpp-rewrite: OUT.icppmap a link")
c.check(not os.path.exists(T("rw.out")), "icpp-rewrite wrote OUT although OUT.icppmap is refused")
# The default output name in the current directory.
os.symlink(victim, T("icpp.samples"))
r = run([SAMPLE, "-q", "--", prog], cwd=tmp)
one_line(r, ["icpp.samples", "symbolic link"], "icpp-sample default output a link")
victim_intact("icpp-sample default output a link")
os.unlink(T("icpp.samples"))
# Reading through a link is fine: it is writing that is refused.
os.symlink(omap, T("map-link"))
r = run([RESOLVE, "-m", T("map-link"), osmp])
c.check(r.returncode == 0 and "samples:" in r.stdout, f"a link as input map: rc={r.returncode} {r.stderr!r}")

# ---- 1b. sticky directories: another user's link or file is never written, as root or as nobody ----
sticky = T("sticky")
os.mkdir(sticky)
os.chmod(sticky, 0o1777)
c.check(run(NOBODY + ["true"]).returncode == 0, "setpriv to nobody does not work")
PS = "/proc/sys/fs/protected_symlinks"
saved = open(PS).read().strip()
try:
    open(PS, "w").write("0\n")       # the kernel would otherwise stop root from following the link itself
except OSError as e:
    c.check(False, f"cannot set fs.protected_symlinks=0 ({e})")
try:
    fresh_victim()
    r = run(NOBODY + ["ln", "-s", victim, os.path.join(sticky, "icpp.samples")])
    c.check(r.returncode == 0, f"nobody cannot make a link in the sticky directory: {r.stderr}")
    r = run([SAMPLE, "-q", "--", prog], cwd=sticky)
    one_line(r, ["symbolic link"], "root, default output = nobody's link in a sticky directory")
    victim_intact("root, default output = nobody's link in a sticky directory")
    r = run([TRAIN, "-q", "--fresh", "--", prog], cwd=sticky)    # orders.icppmap: absent, created
    c.check(r.returncode == 0 and mode(os.path.join(sticky, "orders.icppmap")) == 0o644,
            f"root, new map in a sticky directory: rc={r.returncode} {r.stderr!r}")
finally:
    open(PS, "w").write(saved + "\n")
c.check(open(PS).read().strip() == saved, "fs.protected_symlinks not restored")
# nobody's regular files there: root refuses to replace them.
theirs = os.path.join(sticky, "theirs")
run(NOBODY + ["sh", "-c", f"echo nobody-data > {theirs}"])
c.check(os.stat(theirs).st_uid == 65534, "nobody could not create a file in the sticky directory")
for label, cmd in {"icpp-train": [TRAIN, "-q", "--fresh", "-o", theirs, "--", prog],
                   "icpp-sample": [SAMPLE, "-q", "-o", theirs, "--", prog],
                   "icpp-resolve": [RESOLVE, "-m", omap, "-o", theirs, osmp],
                   "icpp-rewrite": [REWRITE, "-q", "--time-limit", "1", "-m", omap, "-o", theirs, prog]}.items():
    r = run(cmd, timeout=60)
    one_line(r, ["another user", "sticky"], f"root, {label} -o nobody's file in a sticky directory")
    c.check(open(theirs).read() == "nobody-data\n" and os.stat(theirs).st_uid == 65534,
            f"root, {label}: nobody's file was changed")
# root's files there: nobody's tools refuse them the same way (before anything runs).
mine = os.path.join(sticky, "roots.samples")
open(mine, "w").write("root-data\n")
os.chmod(mine, 0o666)       # even writable by all: still not replaced
r = run(NOBODY + [SAMPLE, "-q", "-o", mine, "--", prog])
one_line(r, ["another user", "sticky"], "nobody, icpp-sample -o root's file in a sticky directory")
shared = T("shared.samples")       # recordings are 0600: a copy nobody may read
shutil.copy(osmp, shared)
os.chmod(shared, 0o644)
r = run(NOBODY + [RESOLVE, "-m", omap, "-o", mine, shared])
one_line(r, ["another user", "sticky"], "nobody, icpp-resolve -o root's file in a sticky directory")
c.check(open(mine).read() == "root-data\n", "nobody changed root's file in the sticky directory")
# One's own file in a sticky directory is replaced as usual (the old one kept as .old).
own = os.path.join(sticky, "own.samples")
open(own, "w").write("old\n")
r = run([SAMPLE, "-q", "-o", own, "--", prog])
c.check(r.returncode == 0 and open(own + ".old").read() == "old\n" and mode(own) == 0o600,
        f"own file in a sticky directory: rc={r.returncode} {r.stderr!r}")

# ---- 2. recordings hold program memory: 0600, and --help says so ----
vs = T("validate.samples")
r = run([SAMPLE, "-q", "--validate", "-e", "cpu-clock", "-o", vs, "--", prog, "5"])
c.check(r.returncode == 0 and mode(vs) == 0o600, f"--validate recording mode {mode(vs):o} (want 600)")
c.check(mode(osmp) == 0o600, f"plain recording mode {mode(osmp):o} (want 600)")
c.check(mode(omap) == 0o644, f"map mode {mode(omap):o} (want 644)")
h = run([SAMPLE, "--help"]).stdout
c.check("0600" in h and "--validate" in h, "icpp-sample --help does not say recordings are 0600")
rw = T("orders.arr")
r = run([REWRITE, "-q", "--time-limit", "1", "-m", omap, "-o", rw, prog], timeout=120)
c.check(r.returncode == 0 and mode(rw) == 0o755 and mode(rw + ".icppmap") == 0o644,
        f"icpp-rewrite outputs: rc={r.returncode} modes {mode(rw) if os.path.exists(rw) else 0:o} {r.stderr[-300:]!r}")

# ---- 4. FIFOs: every tool returns at once with one line ----
fifo = T("fifo")
os.mkfifo(fifo)
fifo_cases = {
    "icpp-sample -o FIFO": [SAMPLE, "-q", "-o", fifo, "--", prog],
    "icpp-sample -- FIFO": [SAMPLE, "-q", "-o", T("x.samples"), "--", fifo],
    "icpp-train -o FIFO": [TRAIN, "-q", "-o", fifo, "--", prog],
    "icpp-train -- FIFO": [TRAIN, "-q", "-o", T("x.icppmap"), "--", fifo],
    "icpp-train --stats FIFO": [TRAIN, "--stats", fifo],
    "icpp-train --paths FIFO": [TRAIN, "--paths", fifo],
    "icpp-rewrite -m FIFO": [REWRITE, "-q", "-m", fifo, prog],
    "icpp-rewrite PROG=FIFO": [REWRITE, "-q", "-m", omap, fifo],
    "icpp-rewrite -o FIFO": [REWRITE, "-q", "-m", omap, "-o", fifo, prog],
    "icpp-resolve -m FIFO": [RESOLVE, "-m", fifo, osmp],
    "icpp-resolve SAMPLES=FIFO": [RESOLVE, "-m", omap, fifo],
    "icpp-resolve --script FIFO": [RESOLVE, "--script", fifo],
    "icpp-resolve --check FIFO": [RESOLVE, "--check", "-m", omap, fifo],
    "icpp-resolve -o FIFO": [RESOLVE, "-m", omap, "-o", fifo, osmp],
}
for label, cmd in fifo_cases.items():
    t0 = time.time()
    try:
        r = run(cmd, timeout=20)
    except subprocess.TimeoutExpired:
        c.check(False, f"{label}: hung (no answer in 20 s)")
        continue
    one_line(r, ["FIFO"], label)
    c.check(time.time() - t0 < 10, f"{label}: took {time.time() - t0:.1f} s")
try:
    r = run([TRAIN, "-q", "-o", T("x.icppmap"), "--", prog], env=dict(os.environ, ICPP_AGENT=fifo), timeout=20)
    one_line(r, ["FIFO", "ICPP_AGENT"], "ICPP_AGENT=FIFO")
except subprocess.TimeoutExpired:
    c.check(False, "ICPP_AGENT=FIFO: hung (ld.so waiting on it)")
c.check(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced")
# A crafted map whose module path is a FIFO: the module is unreadable, nothing waits on it.
fmap = T("fifo-module.icppmap")
r = run([CRAFT, omap, fmap, "--module-path", "0", fifo])
c.check(r.returncode == 0, f"craftmap --module-path: {r.stderr}")
for fmt in ("text", "json"):
    try:
        r = run([RESOLVE, "-m", fmap, "--format", fmt, osmp], timeout=20)
        c.check(r.returncode in (0, 1) and len(r.stderr.strip().splitlines()) <= 2,
                f"map with a FIFO module, {fmt}: rc={r.returncode} {r.stderr[-300:]!r}")
    except subprocess.TimeoutExpired:
        c.check(False, f"map with a FIFO module, {fmt}: hung")
# A character device as output is written in place and stays a device.
for label, cmd in {"icpp-sample": [SAMPLE, "-q", "-o", "/dev/null", "--", prog],
                   "icpp-resolve": [RESOLVE, "-m", omap, "-o", "/dev/null", osmp]}.items():
    r = run(cmd)
    c.check(r.returncode == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode), f"{label} -o /dev/null: {r.stderr!r}")

# ---- 3. names from files: escaped in every text format ----
EVIL = "\x1b]0;pwned\x07\x1b[31m\ninjected line;fake 999 4\n\u00fc\u0085\x7f"
emap = T("evil.icppmap")
r = run([CRAFT, omap, emap, "--suffix", EVIL])
c.check(r.returncode == 0, f"craftmap --suffix: {r.stderr}")


def raw(cmd):
    return subprocess.run(cmd, capture_output=True, timeout=120).stdout


def controls(b):
    """Bytes that drive a terminal or forge lines: C0 but \\n, DEL, and UTF-8 C1 (U+0080..U+009F)."""
    bad = [x for x in b if (x < 0x20 and x != 0x0a) or x == 0x7f]
    return bad + re.findall(rb"\xc2[\x80-\x9f]", b)


for fmt in ("text", "tree", "folded"):
    clean, evil = raw([RESOLVE, "-m", omap, "--format", fmt, osmp]), raw([RESOLVE, "-m", emap, "--format", fmt, osmp])
    c.check(not controls(evil), f"{fmt}: control bytes reached the output: {controls(evil)[:5]}")
    c.check(len(evil.splitlines()) == len(clean.splitlines()),
            f"{fmt}: {len(evil.splitlines())} lines with the crafted names, {len(clean.splitlines())} without")
    c.check((b"\\x1b]0,pwned\\x07" if fmt == "folded" else b"\\x1b]0;pwned\\x07") in evil and "\u00fc".encode() in evil and b"\\xc2\\x85" in evil,
            f"{fmt}: escapes not shown as \\xNN (or valid UTF-8 lost)")
    c.check(not any(l.startswith(b"injected line") for l in evil.splitlines()), f"{fmt}: a forged line")
    if fmt == "folded":
        depth = lambda out: sorted(l.rsplit(b" ", 1)[0].count(b";") for l in out.splitlines())  # noqa: E731
        c.check(depth(evil) == depth(clean), f"folded: a ';' in a name added frames")
for label, cmd in {"--script": [RESOLVE, "--script", "-m", emap, osmp],
                   "icpp-train --paths": [TRAIN, "--paths", emap],
                   "icpp-train --stats": [TRAIN, "--stats", emap],
                   "icpp-rewrite": [REWRITE, "--time-limit", "1", "-m", emap, "-o", T("evil.arr"), prog]}.items():
    out = raw(cmd)
    tabs = label == "icpp-train --paths"       # its fields are tab-separated: 3 tabs a line, no more
    c.check(out and not controls(out.replace(b"\t", b" ") if tabs else out),
            f"{label}: control bytes in the output: {controls(out)[:5]}")
    c.check(not tabs or all(l.count(b"\t") == 3 for l in out.splitlines() if not l.startswith(b"#")),
            f"{label}: a name added fields")
c.check(len(raw([TRAIN, "--paths", emap]).splitlines()) == len(raw([TRAIN, "--paths", omap]).splitlines()),
        "--paths: crafted names changed the line count")

# ---- 5. a 300k-deep crafted chain: every output linear; option values checked ----
rmap, rsmp = T("recurse.icppmap"), T("recurse.samples")
run([TRAIN, "-q", "--fresh", "--modules", "main", "-o", rmap, "--", rprog])
run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", rsmp, "--", rprog])
pairs = {}
for line in run([RESOLVE, "--script", "-m", rmap, rsmp]).stdout.splitlines():
    f = line.split()
    if len(f) >= 11 and f[8] == "ok" and f[10] == "fib":
        pairs[f[7]] = pairs.get(f[7], 0) + 1
c.check(pairs, "no precise fib sample in the recurse recording")
if pairs:
    h = max(pairs, key=pairs.get).split("=")[1]
    sizes = {}
    for n in (50000, 100000, 300000):
        dmap = T(f"deep{n}.icppmap")
        r = run([CRAFT, rmap, dmap, "--chain", "fib", h, str(n)], timeout=120)
        c.check(r.returncode == 0, f"craftmap --chain {n}: {r.stderr}")
        if n == 300000:
            for fmt in ("text", "tree", "folded", "json", "speedscope", "svg", "pprof"):
                out = T(f"deep.{fmt}")
                t0 = time.time()
                try:
                    r = run([RESOLVE, "-m", dmap, "--format", fmt, "-n", "0", "--full-paths", "-o", out, rsmp],
                            timeout=60)
                    c.check(r.returncode == 0 and os.path.getsize(out) < 64 << 20,
                            f"deep chain, {fmt}: rc={r.returncode} "
                            f"{os.path.getsize(out) if os.path.exists(out) else -1} bytes {r.stderr[-200:]!r}")
                    print(f"deep chain (300k): {fmt} {os.path.getsize(out)} bytes in {time.time() - t0:.2f} s")
                except subprocess.TimeoutExpired:
                    c.check(False, f"deep chain, {fmt}: not done in 60 s")
        else:
            with open(T("paths.out"), "wb") as f:
                r = subprocess.run([TRAIN, "--paths", dmap], stdout=f, stderr=subprocess.PIPE, timeout=120)
            sizes[n] = os.path.getsize(T("paths.out"))
            c.check(r.returncode == 0, f"--paths on a {n}-deep chain: {r.stderr!r}")
    # Linear: twice the chain, about twice the listing (quadratic would be 4x).
    ratio = sizes[100000] / sizes[50000]
    c.check(1.8 < ratio < 2.2, f"--paths: {sizes} bytes for 50k/100k-deep chains (ratio {ratio:.2f})")
    print(f"--paths: {sizes[50000]} bytes (50k chain), {sizes[100000]} (100k): ratio {ratio:.2f}")
for args, what in ((["--min", "-5"], "--min"), (["--min", "nan"], "--min"), (["--min", "101"], "--min"),
                   (["--min", "1x"], "--min"), (["-n", "-1"], "-n")):
    r = run([RESOLVE, "-m", omap, "--format", "tree"] + args + [osmp])
    one_line(r, [what], f"icpp-resolve {' '.join(args)}", rc=2)
r = run([TRAIN, "--modules", "a,,b", "--", prog])
one_line(r, ["--modules"], "icpp-train --modules a,,b", rc=2)
r = run([TRAIN, "-q", "--modules", "nosuchlib", "-o", T("none.icppmap"), "--", prog])
c.check(r.returncode != 0 and "--modules nosuchlib" in r.stderr and "no module" in r.stderr
        and not os.path.exists(T("none.icppmap")), f"--modules nosuchlib: rc={r.returncode} {r.stderr!r}")
r = run([REWRITE, "-q", "--seed", "-1", "-m", omap, prog])
one_line(r, ["--seed"], "icpp-rewrite --seed -1", rc=2)

# ---- 7. a killed sampler is reported; a full disk is summarized as the file is ----
r = run([RESOLVE, "-m", omap, osmp])
c.check(r.returncode == 0 and "killed" not in r.stderr + r.stdout, f"a complete recording warned: {r.stderr!r}")
ks = T("killed.samples")
p = subprocess.Popen([SAMPLE, "-q", "-e", "cpu-clock", "-o", ks, "--", prog, "100000"], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(2.5)                 # past the once-a-second flush
os.killpg(p.pid, signal.SIGKILL)
p.wait()
r = run([RESOLVE, "-m", omap, ks])
c.check(r.returncode == 0 and "the sampler was killed?" in r.stderr and "warning:" in r.stdout
        and len(r.stderr.strip().splitlines()) == 1, f"killed sampler: rc={r.returncode} {r.stderr!r}")
r = run([RESOLVE, "-m", omap, "--format", "folded", ks])
c.check("the sampler was killed?" in r.stderr, f"killed sampler, folded: nothing said: {r.stderr!r}")


def small_disk():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # write() then fails with EFBIG, as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (12000, 12000))


fs = T("full.samples")
r = subprocess.run([SAMPLE, "-e", "cpu-clock", "-F", "4000", "-o", fs, "--", prog, "30"], preexec_fn=small_disk,
                   capture_output=True, text=True, timeout=120)
# "(N lost)", or on a busy machine "(N lost: the ring buffer overflowed, try ...)" (seen in CI)
m = re.search(r"icpp-sample: (\d+) samples of \S+ (?:\([^)]*learn samples[^)]*\) )?\(\d+ lost[^)]*\), (\d+) bytes", r.stderr)
errs = [l for l in r.stderr.splitlines() if "write failed" in l]
c.check(r.returncode == 1 and m and len(errs) == 1, f"full disk: rc={r.returncode} {r.stderr!r}")
if m:
    n, size = int(m.group(1)), int(m.group(2))
    got = run([RESOLVE, "--script", fs])
    c.check(size == os.path.getsize(fs), f"full disk: summary says {size} bytes, the file has {os.path.getsize(fs)}")
    c.check(n == len(got.stdout.splitlines()), f"full disk: summary says {n} samples, the file has "
                                               f"{len(got.stdout.splitlines())}")
    c.check("more samples could not be written" in r.stderr, f"full disk: the loss is not said: {r.stderr!r}")
    print(f"full disk: {n} samples, {size} bytes in the file; {r.stderr.strip().splitlines()[-1]}")

# ---- 8. a corrupt .eh_frame: an FDE claiming 4 GiB of code libdw cannot read is not walked byte by byte ----
def corrupt_fde_range(src, dst):
    """dst: src with its first FDE's pc_range set to ~4 GiB and its first CFA instruction an undefined
    opcode (libdw reads no row of it; the build-id, and so the map, still match)."""
    data = bytearray(open(src, "rb").read())
    sec = subprocess.run(["readelf", "-SW", src], capture_output=True, text=True).stdout
    m = re.search(r"\] \.eh_frame +PROGBITS +[0-9a-f]+ ([0-9a-f]+) ([0-9a-f]+)", sec)
    off, size = int(m.group(1), 16), int(m.group(2), 16)
    at = off
    while at + 16 <= off + size:
        length, cid = struct.unpack_from("<II", data, at)
        if length == 0:
            break
        if cid != 0:                    # an FDE: pc_begin (pcrel sdata4), pc_range, augmentation length 0
            struct.pack_into("<I", data, at + 12, 0xf0000000)
            data[at + 17] = 0x3f
            break
        at += 4 + length
    open(dst, "wb").write(data)
    os.chmod(dst, 0o755)


bad_eh = T("orders.badeh")
corrupt_fde_range(prog, bad_eh)
t0 = time.monotonic()
r = run([REWRITE, "-q", "--time-limit", "1", "-m", omap, "-o", T("badeh.arr"), bad_eh], timeout=120)
# (before the fix: ~27 s per GiB of such a range, over a minute here)
c.check((r.returncode == 0 or len(r.stderr.strip().splitlines()) == 1) and time.monotonic() - t0 < 20,
        f"corrupt FDE range: rc={r.returncode} in {time.monotonic() - t0:.1f} s: {r.stderr[-300:]!r}")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
