#!/usr/bin/env python3
"""test_outputs.py ITEM -- how the tools replace their outputs (docs/file-safety.md), one ITEM per run:

  pair       icpp-rewrite's OUT and OUT.icppmap are replaced both or neither: on a full disk (a tmpfs
             with room for the new binary but not for its map) both previous files stay, byte for byte,
             and the message says so (before: OUT was removed, the old map kept, and the message said
             both "kept" and "removed").
  same-file  an output that is the same file (device and inode) as an input is refused by every tool,
             with one line naming both, and every file is unchanged afterwards, byte for byte.
  signal     SIGTERM/SIGINT arriving while a new file is complete but not yet renamed (an LD_PRELOAD
             shim sends it from fsync) remove the new file, in every tool that writes through one; the
             previous file stays.  SIGKILL leaves PATH.tmp.XXXXXX (and the previous file), as documented.

Needs root (mounts a tmpfs) for `pair`."""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

from e2e import SOURCE, Checker, built, run, tool

ITEM = sys.argv[1] if len(sys.argv) > 1 else ""
if ITEM not in ("pair", "same-file", "signal"):
    print("usage: test_outputs.py pair|same-file|signal")
    sys.exit(2)
c = Checker(f"e2e-outputs-{ITEM}")
SAMPLE, TRAIN, RESOLVE, REWRITE = tool("icpp-sample"), tool("icpp-train"), tool("icpp-resolve"), tool("icpp-rewrite")
tmp = tempfile.mkdtemp(prefix="icpp-outputs-")
os.chmod(tmp, 0o755)



def asan_runtime():
    """The ASan runtime a sanitized tool (build-san/) links, which must come first in
    LD_PRELOAD before the shim; [] for a plain build."""
    r = run(["ldd", tool("icpp-resolve")])
    return [m.group(1) for m in re.finditer(r"(/\S*libasan\.so\S*)", r.stdout)][:1]

def T(name):
    return os.path.join(tmp, name)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def put(p, data):
    with open(p, "wb") as f:
        f.write(data)


def temporaries(d=None):
    return sorted(glob.glob(os.path.join(d or tmp, "*.tmp.*")))


def one_line(r, words, label):
    lines = r.stderr.strip().splitlines()
    c.check(r.returncode == 1 and len(lines) == 1 and all(w in r.stderr for w in words),
            f"{label}: rc={r.returncode} stderr={r.stderr[-400:]!r}")


prog = T("orders")
shutil.copy(built("tests/programs/orders.O2-nofp-pie"), prog)
os.chmod(prog, 0o755)
omap, osmp = T("orders.icppmap"), T("orders.samples")
RW = ["-q", "--seed", "1", "--time-limit", "1"]
r = run([TRAIN, "-q", "--fresh", "--modules", "main", "-o", omap, "--", prog])
c.check(r.returncode == 0, f"train orders: {r.stderr}")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", osmp, "--", prog, "10"])
c.check(r.returncode == 0, f"sample orders: {r.stderr}")

# ---- pair: icpp-rewrite's binary and map, both or neither ----
if ITEM == "pair":
    if os.geteuid() != 0:
        print("FAIL: the pair test needs root (it mounts a tmpfs)")
        sys.exit(1)
    # The sizes of this rewrite's outputs (the search is deterministic for a seed).
    ref = T("ref.arr")
    r = run([REWRITE] + RW + ["-m", omap, "-o", ref, prog])
    c.check(r.returncode == 0, f"reference rewrite: {r.stderr}")

    def pages(n):
        return (n + 4095) // 4096

    nbin, nmap = pages(os.path.getsize(ref)), pages(os.path.getsize(ref + ".icppmap"))
    mnt = T("mnt")
    os.mkdir(mnt)
    r = run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "icpp-outputs", mnt])
    c.check(r.returncode == 0, f"mount a tmpfs: {r.stderr}")
    try:
        out, out_map = os.path.join(mnt, "o.arr"), os.path.join(mnt, "o.arr.icppmap")
        OLD_BIN, OLD_MAP = b"the previous binary\n", b"the previous map\n"
        # The previous files are hard links of files that stay: replacing them frees no room, so the
        # new binary fits and its map, written after it, does not.
        for p, data in ((out, OLD_BIN), (out_map, OLD_MAP)):
            put(p + ".keep", data)
            os.link(p + ".keep", p)
        st = os.statvfs(mnt)
        put(os.path.join(mnt, "filler"), b"\0" * (st.f_bavail * st.f_frsize - nbin * 4096))
        st = os.statvfs(mnt)
        c.check(st.f_bavail * st.f_frsize == nbin * 4096, f"tmpfs: {st.f_bavail} pages free, want {nbin}")
        ino = (os.stat(out).st_ino, os.stat(out_map).st_ino)
        r = run([REWRITE] + RW + ["-m", omap, "-o", out, prog])
        msg = r.stderr.strip()
        print(f"full disk ({nbin} pages free, binary {nbin} pages, map {nmap}): rc={r.returncode} {msg}")
        c.check(r.returncode == 1 and len(msg.splitlines()) == 1 and "No space left" in msg,
                f"full disk: rc={r.returncode} {msg!r}")
        c.check(os.path.exists(out) and read(out) == OLD_BIN, "full disk: OUT is not the previous binary "
                f"({read(out)[:20] if os.path.exists(out) else 'removed'!r})")
        c.check(os.path.exists(out_map) and read(out_map) == OLD_MAP, "full disk: OUT.icppmap is not the previous map")
        c.check(os.path.exists(out) and (os.stat(out).st_ino, os.stat(out_map).st_ino) == ino,
                "full disk: a previous file was replaced (another inode)")
        c.check("removed" not in msg and f"neither {out} nor {out_map} was changed" in msg,
                f"full disk: the message does not say what happened: {msg!r}")
        c.check(temporaries(mnt) == [], f"full disk: temporaries left: {temporaries(mnt)}")
        # With room for both, both are replaced, together.
        os.unlink(os.path.join(mnt, "filler"))
        r = run([REWRITE] + RW + ["-m", omap, "-o", out, prog])
        c.check(r.returncode == 0 and read(out) == read(ref) and read(out_map)[:8] == read(ref + ".icppmap")[:8]
                and temporaries(mnt) == [], f"room for both: rc={r.returncode} {r.stderr!r}")
        c.check(read(out + ".keep") == OLD_BIN and read(out_map + ".keep") == OLD_MAP,
                "room for both: the previous files were written through, not replaced")
    finally:
        run(["umount", mnt])

def trend_runs():
    """The program recorded at three input sizes (n=4, 8, 16), for --trend."""
    runs = []
    for n in (4, 8, 16):
        runs.append(T(f"n{n}.samples"))
        r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "2000", "--feature", f"n={n}", "-o", runs[-1], "--", prog,
                 str(n)])
        c.check(r.returncode == 0, f"sample n={n}: {r.stderr}")
    return runs


# ---- same-file: no output is an input ----
if ITEM == "same-file":
    everything = [prog, omap, osmp]

    def snapshot():
        return {p: (read(p), os.stat(p).st_mode) for p in glob.glob(os.path.join(tmp, "*")) if os.path.isfile(p)}

    def refused(cmd, words, label, cwd=None, env=None):
        before = snapshot()
        r = run(cmd, cwd=cwd, env=env, timeout=120)
        one_line(r, ["is the same file as the input"] + words, label)
        after = snapshot()
        changed = [p for p in set(before) | set(after) if before.get(p) != after.get(p)]
        c.check(not changed, f"{label}: files changed, added or removed: {[os.path.basename(p) for p in changed]}")
        for p in changed:       # put them back, so that the next case starts from the same files
            if p in before:
                put(p, before[p][0])
                os.chmod(p, before[p][1])
            else:
                os.unlink(p)

    refused([RESOLVE, "-m", omap, "-o", osmp, osmp], [osmp], "icpp-resolve -o SAMPLES SAMPLES")
    refused([RESOLVE, "-m", omap, "--format", "folded", "-o", omap, osmp], [omap], "icpp-resolve -m MAP -o MAP")
    # The map found by name (next to the recorded program), not given.
    refused([RESOLVE, "-o", omap, osmp], [omap], "icpp-resolve -o MAP (found by name)", cwd=tmp)
    refused([RESOLVE, "-m", omap, "--save-map", osmp, osmp], [osmp], "icpp-resolve --save-map SAMPLES")
    refused([RESOLVE, "--check", "-m", omap, "-o", osmp, osmp], [osmp], "icpp-resolve --check -o SAMPLES")
    os.link(osmp, T("hardlink.samples"))
    refused([RESOLVE, "-m", omap, "-o", T("hardlink.samples"), osmp], [osmp], "icpp-resolve -o HARDLINK-OF-SAMPLES")
    os.unlink(T("hardlink.samples"))
    # Two outputs of one run that are one file: the profile would overwrite the saved map.
    for both in (T("both.out"),):
        before = read(omap)
        r = run([RESOLVE, "-m", omap, "-o", both, "--save-map", both, osmp], timeout=120)
        one_line(r, ["-o and --save-map name the same file"], f"icpp-resolve -o {os.path.basename(both)} --save-map same")
        c.check(not os.path.exists(T("both.out")) and read(omap) == before,
                f"-o and --save-map the same file: a file was written")
    refused([REWRITE] + RW + ["-m", omap, "-o", omap, prog], [omap], "icpp-rewrite -o MAP")
    shutil.copy(omap, T("mm.icppmap"))
    refused([REWRITE] + RW + ["-m", T("mm.icppmap"), "-o", T("mm"), prog], [T("mm.icppmap")],
            "icpp-rewrite: OUT.icppmap is MAP")
    os.unlink(T("mm.icppmap"))
    refused([TRAIN, "-q", "--fresh", "-o", prog, "--", prog], ["orders"], "icpp-train --fresh -o PROG -- PROG")
    refused([TRAIN, "-q", "-o", prog, "--", prog], ["orders"], "icpp-train -o PROG -- PROG")
    refused([SAMPLE, "-q", "-o", prog, "--", prog, "1"], [prog], "icpp-sample -o PROG -- PROG")
    refused([SAMPLE, "-q", "-o", "orders", "--", "orders", "1"], ["orders"], "icpp-sample -o PROG -- PROG (in PATH)",
            cwd=tmp, env=dict(os.environ, PATH=tmp + ":" + os.environ.get("PATH", "/usr/bin")))
    # An existing OUT would be moved to OUT.old: not when OUT.old is the program.
    shutil.move(prog, prog + ".old")
    put(prog, b"some file\n")
    refused([SAMPLE, "-q", "-o", prog, "--", prog + ".old", "1"], [prog + ".old"], "icpp-sample: OUT.old is PROG")
    os.unlink(prog)
    shutil.move(prog + ".old", prog)
    # --trend: -o is none of the runs.
    runs = trend_runs()
    refused([RESOLVE, "--trend", "-m", omap, "-o", runs[0]] + runs, [runs[0]], "icpp-resolve --trend -o RUN")
    refused([RESOLVE, "--trend", "-m", omap, "-o", omap] + runs, [omap], "icpp-resolve --trend -o MAP")
    # Not refused: new paths, and --save-map adding to the map it read (documented).
    for cmd, label in (([RESOLVE, "-m", omap, "-o", T("p.txt"), osmp], "icpp-resolve -o NEW"),
                       ([RESOLVE, "-m", omap, "--save-map", omap, osmp], "icpp-resolve --save-map MAP -m MAP"),
                       ([REWRITE] + RW + ["-m", omap, "-o", T("new.arr"), prog], "icpp-rewrite -o NEW"),
                       ([TRAIN, "-q", "-o", omap, "--", prog], "icpp-train -o MAP (adds to it)"),
                       ([SAMPLE, "-q", "-o", T("new.samples"), "--", prog, "1"], "icpp-sample -o NEW")):
        r = run(cmd, timeout=120)
        c.check(r.returncode == 0 and "same file" not in r.stderr, f"{label}: rc={r.returncode} {r.stderr!r}")

# ---- signal: a new file not yet in place is removed ----
if ITEM == "signal":
    shim = T("fsyncsig.so")
    r = run(["cc", "-shared", "-fPIC", "-O2", "-o", shim, os.path.join(SOURCE, "tests", "e2e", "fsyncsig.c"), "-ldl"])
    c.check(r.returncode == 0, f"cannot build the fsync shim: {r.stderr}")

    def with_signal(sig):
        env = dict(os.environ, LD_PRELOAD=" ".join(asan_runtime() + [shim]), ICPP_TEST_FSYNC_SIGNAL=str(int(sig)))
        if asan_runtime():      # icpp-train's program inherits the runtime after the agent: let it be
            env["ASAN_OPTIONS"] = env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0"
        return env

    PREV = b"the previous file\n"
    runs = trend_runs()
    for sig in (signal.SIGTERM, signal.SIGINT):
        cases = [
            ("icpp-resolve -o", [RESOLVE, "-m", omap, "-o", T("out.txt"), osmp], [T("out.txt")]),
            ("icpp-resolve --save-map", [RESOLVE, "-m", omap, "--save-map", T("saved.icppmap"), osmp],
             [T("saved.icppmap")]),
            ("icpp-resolve --trend -o", [RESOLVE, "--trend", "-m", omap, "-o", T("trend.txt")] + runs, [T("trend.txt")]),
            ("icpp-rewrite", [REWRITE] + RW + ["-m", omap, "-o", T("rw.arr"), prog], [T("rw.arr"), T("rw.arr.icppmap")]),
        ]
        for label, cmd, outs in cases:
            label = f"{label}, {sig.name} before the rename"
            for p in outs:
                put(p, PREV)
            r = run(cmd, env=with_signal(sig), timeout=120)
            c.check(r.returncode == -sig, f"{label}: not ended by the signal: rc={r.returncode} {r.stderr[-300:]!r}")
            c.check(all(read(p) == PREV for p in outs), f"{label}: the previous file was not kept")
            c.check(temporaries() == [], f"{label}: temporaries left: {temporaries()}")
            for t in temporaries():
                os.unlink(t)
    # icpp-train passes SIGINT/SIGTERM on to the program; once it has ended, it finishes its map.
    shutil.copy(omap, T("train.icppmap"))
    r = run([TRAIN, "-q", "-o", T("train.icppmap"), "--", prog], env=with_signal(signal.SIGTERM), timeout=120)
    st = run([TRAIN, "--stats", T("train.icppmap")])
    c.check(r.returncode == 0 and st.returncode == 0 and temporaries() == [],
            f"icpp-train, SIGTERM while its map is written: rc={r.returncode} {r.stderr!r} {st.stderr!r} "
            f"{temporaries()}")
    # SIGKILL cannot be caught: the new file stays beside the previous one, which is intact.
    put(T("out.txt"), PREV)
    r = run([RESOLVE, "-m", omap, "-o", T("out.txt"), osmp], env=with_signal(signal.SIGKILL))
    left = temporaries()
    c.check(r.returncode == -signal.SIGKILL and read(T("out.txt")) == PREV and len(left) == 1
            and os.path.basename(left[0]).startswith("out.txt.tmp."),
            f"icpp-resolve -o, SIGKILL: rc={r.returncode} previous kept={read(T('out.txt')) == PREV} left={left}")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
