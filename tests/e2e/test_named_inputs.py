#!/usr/bin/env python3
"""test_named_inputs.py -- root resolving another user's recording reads the files the recording names
with that user's rights (docs/file-safety.md, "Files named inside inputs"): a recording owned by nobody
that names a root-only ELF (0600 in a 0700 directory) gets none of its names; a stripped binary's
.gnu_debuglink followed through a symbolic link to a root-only debug file gives neither its names nor
its CRC-32, and to /etc/shadow no "not an x86-64 ELF file".  Each check has its control: the same
recording owned by root shows the names or the message (so each check can fail).  Needs root."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from e2e import Checker, built, run, tool

c = Checker("e2e-named-inputs")
if os.geteuid() != 0:
    print("FAIL: test_named_inputs needs root (recordings owned by nobody, root-only files)")
    sys.exit(1)
for t in ("nm", "objcopy"):
    if not c.check(shutil.which(t), f"no {t} on PATH (Debian package binutils)"):
        c.done()
SAMPLE, RESOLVE = tool("icpp-sample"), tool("icpp-resolve")
os.environ.pop("DEBUGINFOD_URLS", None)
os.environ["ICPP_DEBUG_DIRS"] = "/nonexistent"
tmp = tempfile.mkdtemp(prefix="icpp-named-")
os.chmod(tmp, 0o755)
NOBODY = 65534
ndir = os.path.join(tmp, "nobody")          # nobody's directory: the recording, a binary, a link
os.mkdir(ndir)
os.chmod(ndir, 0o755)
os.chown(ndir, NOBODY, NOBODY)
sdir = os.path.join(tmp, "secret")          # root's: 0700
os.mkdir(sdir)
os.chmod(sdir, 0o700)


def script_rows(rec, base):
    """(stdout+stderr, [function names of the samples in the module named base]) of --script."""
    r = run([RESOLVE, "--script", rec])
    names = []
    for line in r.stdout.splitlines():
        m = re.search(r" (\S+)\+(0x[0-9a-f]+) (\S+)(?: inlined=(\S+))?$", line)
        if m and os.path.basename(m.group(1)) == base:
            names.append(m.group(3))
    return r, names


def real_names(names):
    return sorted({n for n in names if not re.fullmatch(r"fn_[0-9a-f]+", n)})


def owned(path, uid):
    os.chown(path, uid, uid)
    return path


# ---- 1. a root-only ELF named by nobody's recording ----
sprog = os.path.join(sdir, "orders")
shutil.copy(built("tests/programs/orders.O2-nofp-pie"), sprog)
os.chmod(sprog, 0o700)
rec = os.path.join(ndir, "orders.samples")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", rec, "--", sprog, "10"])
if not c.check(r.returncode == 0, f"icpp-sample: {r.stderr}"):
    c.done()
os.chmod(sprog, 0o600)
own = {w[2] for w in (ln.split() for ln in run(["nm", "--defined-only", sprog]).stdout.splitlines())
       if len(w) == 3 and w[1] in "tT" and not w[2].startswith("_") and len(w[2]) > 3}
r, names = script_rows(owned(rec, 0), "orders")
c.check(real_names(names), f"control: root's own recording names no function of the root-only binary: {r.stderr[-300:]!r}")
r, names = script_rows(owned(rec, NOBODY), "orders")
leaked = real_names(names) + sorted(n for n in own if re.search(rf"\b{re.escape(n)}\b", r.stdout + r.stderr))
c.check(not leaked, f"nobody's recording printed the root-only binary's names: {leaked[:6]}")
print(f"root-only ELF named by nobody's recording: {len(names)} samples in it, names shown: {len(leaked)}")

# A binary nobody may read, in nobody's recording: resolved as before (the normal case).
pprog = os.path.join(ndir, "orders")
shutil.copy(built("tests/programs/orders.O2-nofp-pie"), pprog)
os.chmod(pprog, 0o755)
rec2 = os.path.join(ndir, "pub.samples")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", rec2, "--", pprog, "10"])
c.check(r.returncode == 0, f"icpp-sample {pprog}: {r.stderr}")
r, names = script_rows(owned(rec2, NOBODY), "orders")
# libc is world-readable too: none of its samples is "unreadable" (name "-";
# its internal functions, without a dynsym name, are fn_ADDR) -- when it has
# any: orders.c spends next to no time there, and one run in ten has none
_, libc = script_rows(rec2, "libc.so.6")
c.check(real_names(names) and all(n != "-" for n in libc),
        f"nobody's recording of a world-readable binary lost its names: {sorted(set(libc))[:6]} {r.stderr[-300:]!r}")

# ---- 2. .gnu_debuglink through a link beside the binary ----
full = os.path.join(tmp, "inliner.full")
shutil.copy(built("tests/e2e/inliner"), full)
sdbg = os.path.join(sdir, "inliner.debug")
subprocess.run(["objcopy", "--only-keep-debug", full, sdbg], check=True)
os.chmod(sdbg, 0o600)
shutil.copy(sdbg, os.path.join(ndir, "inliner.debug"))      # the link records this file's CRC-32
bin_ = os.path.join(ndir, "inliner")
subprocess.run(["objcopy", "--strip-all", "--add-gnu-debuglink=inliner.debug", full, bin_], check=True, cwd=ndir)
os.chmod(bin_, 0o755)
link = os.path.join(ndir, "inliner.debug")
os.unlink(link)
os.symlink(sdbg, link)
irec = os.path.join(ndir, "inliner.samples")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", irec, "--", bin_, "10"])
if not c.check(r.returncode == 0, f"icpp-sample inliner: {r.stderr}"):
    c.done()

# 2a. the right CRC: root's recording gets the names, nobody's does not
r, names = script_rows(owned(irec, 0), "inliner")
c.check(real_names(names), f"control: root's recording got no names from the linked debug file: {r.stderr[-300:]!r}")
r, names = script_rows(owned(irec, NOBODY), "inliner")
c.check(names and not real_names(names), f"nobody's recording got names from a root-only debug file: "
        f"{real_names(names)[:6]} ({len(names)} samples in inliner)")


def resolve_note(rec):
    r = run([RESOLVE, "-o", os.devnull, rec])
    return r.stderr


# 2b. a wrong CRC: root is told the CRC; nobody's recording must not reveal it
with open(sdbg, "ab") as f:
    f.write(b"\0")
crc = f"{__import__('zlib').crc32(open(sdbg, 'rb').read()):08x}"
err = resolve_note(owned(irec, 0))
c.check("CRC-32" in err and crc in err, f"control: root's recording is not told the wrong CRC-32 {crc}: {err!r}")
err = resolve_note(owned(irec, NOBODY))
c.check("CRC-32" not in err and crc not in err, f"nobody's recording printed the root-only file's CRC-32: {err!r}")
r, names = script_rows(irec, "inliner")
c.check(not real_names(names), f"nobody's recording got names with the wrong CRC: {real_names(names)[:6]}")

# 2c. a link to /etc/shadow: "not an x86-64 ELF file" tells the user it is there and was read
os.unlink(link)
os.symlink("/etc/shadow", link)
if os.path.exists("/etc/shadow"):
    err = resolve_note(owned(irec, 0))
    c.check("not an x86-64 ELF" in err, f"control: root's recording is not told /etc/shadow is no ELF: {err!r}")
    err = resolve_note(owned(irec, NOBODY))
    c.check("not an x86-64 ELF" not in err and "CRC" not in err,
            f"nobody's recording learned what /etc/shadow is: {err!r}")
    print(f"debuglink to /etc/shadow, nobody's recording: {err.strip()[:200]!r}")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
