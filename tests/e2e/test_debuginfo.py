"""test_debuginfo.py -- a stripped binary whose names, inlined frames and lines come from its separate
debug file (.gnu_debuglink beside it), through the tools as a user runs them: the map icpp-train
writes names every function as nm names it in the unstripped binary; every sample's function and
inline chain in `icpp-resolve --script` are addr2line's on the unstripped binary; the json profile
(names, inlined flags, call sites' file:line) is the one the unstripped binary itself gives for the
same recording; a debug file with a wrong CRC is refused with a note, and the sample frames fall
back to fn_ADDR; with nothing beside the binary, a local debuginfod server (DEBUGINFOD_URLS) gives
the names, and without DEBUGINFOD_URLS nothing does."""
import json
import os
import re
import shutil
import subprocess
import tempfile

from e2e import Checker, addr2line, built, map_paths, run, tool

c = Checker("e2e-debuginfo")
TRAIN, SAMPLE, RESOLVE = tool("icpp-train"), tool("icpp-sample"), tool("icpp-resolve")
for t in ("addr2line", "nm", "objcopy"):
    if not c.check(shutil.which(t), f"no {t} on PATH (Debian package binutils)"):
        c.done()
os.environ.pop("DEBUGINFOD_URLS", None)
os.environ["ICPP_DEBUG_DIRS"] = "/nonexistent"     # only the debuglink: libc's debug file would add its inlined frames
tmp = tempfile.mkdtemp(prefix="icpp-debuginfo-")
FULL = os.path.join(tmp, "inliner.full")
shutil.copy(built("tests/e2e/inliner"), FULL)
BIN, DBG = os.path.join(tmp, "inliner"), os.path.join(tmp, "inliner.debug")
subprocess.run(["objcopy", "--only-keep-debug", FULL, DBG], check=True)
subprocess.run(["objcopy", "--strip-all", "--add-gnu-debuglink=inliner.debug", FULL, BIN], check=True, cwd=tmp)
STRIPPED = os.path.join(tmp, "inliner.stripped")
shutil.copy(BIN, STRIPPED)
MAP, REC = os.path.join(tmp, "inliner.icppmap"), os.path.join(tmp, "inliner.samples")


def nm_funcs(path):
    """[(start, end, name)] of the function symbols of an (unstripped) binary."""
    out = []
    for line in run(["nm", "-S", "--defined-only", path]).stdout.splitlines():
        w = line.split()
        if len(w) == 4 and w[2] in "tTWi":
            out.append((int(w[0], 16), int(w[0], 16) + int(w[1], 16), w[3]))
    return out


def script(samples):
    r = run([RESOLVE, "--script", samples])
    c.check(r.returncode == 0, f"--script: exit {r.returncode}: {r.stderr}")
    rows = []
    for line in r.stdout.splitlines():
        m = re.search(r" (\S+)\+(0x[0-9a-f]+) (\S+)(?: inlined=(\S+))?$", line)
        if m and os.path.basename(m.group(1)) == "inliner":
            rows.append({"addr": int(m.group(2), 16), "func": m.group(3),
                         "inlined": m.group(4).split(";") if m.group(4) else []})
    return rows, r.stderr


# ---------------------------------------------------------------- training: the map's names
r = run([TRAIN, "--fresh", "-o", MAP, "--", BIN, "1"])
if not c.check(r.returncode == 0, f"icpp-train: exit {r.returncode}: {r.stderr}"):
    c.done()
c.check("note:" not in r.stderr, f"icpp-train noted something: {r.stderr}")
syms = nm_funcs(FULL)
by_addr = {}
for a, _, n in syms:
    by_addr.setdefault(a, set()).add(n)
named = 0
for _, _, names, ids in map_paths(MAP):
    for n, i in zip(names, ids):
        mod, _, addr = i.rpartition("@")
        if os.path.basename(mod) != "inliner":
            continue
        a = int(addr, 16)
        if a not in by_addr:        # no symbol in the unstripped binary either (.plt stubs' FDEs)
            c.check(n == f"fn_{a:x}", f"map: {i} named {n}, the unstripped binary has no symbol there")
            continue
        c.check(n in by_addr[a], f"map: {i} named {n}, nm of the unstripped binary: {by_addr[a]}")
        named += 1
c.check(named >= 4, f"only {named} frames of inliner in the map's paths")

# ---------------------------------------------------------------- samples: function and inline chain
r = run([SAMPLE, "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", REC, "--", BIN, "10"])
if not c.check(r.returncode == 0, f"icpp-sample: exit {r.returncode}: {r.stderr}"):
    c.done()
rows, _ = script(REC)
truth = addr2line(FULL, sorted({s["addr"] for s in rows}))
wrong = [(hex(s["addr"]), s["func"], s["inlined"], truth[s["addr"]]) for s in rows
         if s["func"] != truth[s["addr"]][-1] or s["inlined"] != list(reversed(truth[s["addr"]][:-1]))]
c.check(not wrong, f"{len(wrong)} of {len(rows)} samples' function or inline chain are not addr2line's on the "
        f"unstripped binary: {wrong[:3]}")
n_inl = sum(1 for s in rows if s["inlined"])
c.check(len(rows) >= 1000 and n_inl >= 0.4 * len(rows), f"{len(rows)} samples in inliner, {n_inl} in inlined code")
print(f"{len(rows)} samples in inliner ({n_inl} in inlined code): functions and chains agree with addr2line")


# ---------------------------------------------------------------- the profile equals the unstripped binary's
def profile():
    out = os.path.join(tmp, "out.json")
    r = run([RESOLVE, "-m", MAP, "--format", "json", "-o", out, REC])
    c.check(r.returncode == 0, f"--format json: exit {r.returncode}: {r.stderr}")
    with open(out) as f:
        j = json.load(f)
    return [(p["path"], p["inlined"], p["call_sites"], p["self"]) for p in j["paths"]], r.stderr


got, err = profile()
c.check("note:" not in err, f"icpp-resolve noted something: {err}")
shutil.copy(FULL, BIN)              # the same build-id: the recording's binary, unstripped
want, _ = profile()
shutil.copy(STRIPPED, BIN)
c.check(got == want, "the profile of the stripped binary with its debug file differs from the unstripped one's: "
        f"{[g for g in got if g not in want][:2]} vs {[w for w in want if w not in got][:2]}")
sites = [s for p in got for s in p[2] if s]
lines = [s for s in sites if re.fullmatch(r".*inliner\.c:\d+", s)]
c.check(len(lines) >= 3 and any(any(p[1]) for p in got),
        f"call sites with file:line in inliner.c: {len(lines)} of {len(sites)}; inlined frames in the profile: "
        f"{any(any(p[1]) for p in got)}")
names = {n for p in got for n in p[0]}
left = [n for n in names if re.fullmatch(r"fn_[0-9a-f]+", n) and int(n[3:], 16) in by_addr]
c.check(not left and "main" in names, f"inliner's functions left fn_ADDR: {left}; names: {sorted(names)[:8]}")

# ---------------------------------------------------------------- a wrong CRC: refused, noted, not used
with open(DBG, "ab") as f:
    f.write(b"\0")
rows, _ = script(REC)
placeholders = sum(1 for s in rows if re.fullmatch(r"fn_[0-9a-f]+", s["func"]) and not s["inlined"])
c.check(rows and placeholders == len(rows), f"with the debug file refused, {placeholders} of {len(rows)} samples are "
        "fn_ADDR with no inline chain")
got2, _ = profile()


def functions(prof):
    return [[n for n, inl in zip(p[0], p[1]) if not inl] for p in prof]


c.check(not any(any(p[1]) for p in got2), f"inlined frames without DWARF: {[p for p in got2 if any(p[1])][:2]}")
c.check({tuple(f) for f in functions(got2)} == {tuple(f) for f in functions(got)},
        "the map's names (trained with the debug file) were lost")
MAP2 = os.path.join(tmp, "refused.icppmap")
r = run([TRAIN, "--fresh", "-o", MAP2, "--", BIN, "1"])
c.check(r.returncode == 0 and "refused" in r.stderr and "CRC-32" in r.stderr,
        f"icpp-train: no note of the refused debug file: {r.stderr!r}")
unnamed = [n for _, _, names, ids in map_paths(MAP2) for n, i in zip(names, ids)
           if os.path.basename(i.rpartition("@")[0]) == "inliner" and int(i.rpartition("@")[2], 16) in by_addr
           and n != f"fn_{int(i.rpartition('@')[2], 16):x}"]
c.check(not unnamed, f"a map trained with the debug file refused has names for inliner: {unnamed[:4]}")
r = run([RESOLVE, "-m", MAP2, "-o", os.devnull, REC])
c.check("refused" in r.stderr and "CRC-32" in r.stderr, f"icpp-resolve: no note of the refused debug file: {r.stderr!r}")

# ---------------------------------------------------------------- debuginfod: a local server, nothing beside the binary
if c.check(shutil.which("debuginfod"), "no debuginfod on PATH (Debian package debuginfod)"):
    import socket
    import time
    import urllib.request
    srv = os.path.join(tmp, "srv")
    os.makedirs(srv)
    subprocess.run(["objcopy", "--only-keep-debug", FULL, os.path.join(srv, "inliner.debug")], check=True)
    os.unlink(DBG)
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    d = subprocess.Popen(["debuginfod", "-F", "-p", str(port), "-d", os.path.join(tmp, "db.sqlite"), "-t", "1", srv],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        bid = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", FULL]).stdout).group(1)
        url = f"http://127.0.0.1:{port}"
        for _ in range(120):        # until it has scanned the directory
            try:
                with urllib.request.urlopen(f"{url}/buildid/{bid}/debuginfo", timeout=2) as u:
                    if u.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.25)
        env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=os.path.join(tmp, "cache"))
        r = run([RESOLVE, "--script", REC], env=env)
        rows = [m for m in (re.search(r" (\S+)\+(0x[0-9a-f]+) (\S+)(?: inlined=(\S+))?$", ln)
                            for ln in r.stdout.splitlines()) if m and os.path.basename(m.group(1)) == "inliner"]
        wrong = [m.group(0) for m in rows if m.group(3) != truth[int(m.group(2), 16)][-1]]
        c.check(r.returncode == 0 and rows and not wrong, f"through debuginfod: exit {r.returncode}, {len(wrong)} of "
                f"{len(rows)} samples not named as addr2line names them: {wrong[:3]} {r.stderr[-300:]}")
        r = run([RESOLVE, "--script", REC])
        c.check(all(re.fullmatch(r"fn_[0-9a-f]+", m.group(3)) for m in
                    (re.search(r" (\S+)\+(0x[0-9a-f]+) (\S+)(?: inlined=(\S+))?$", ln) for ln in r.stdout.splitlines())
                    if m and os.path.basename(m.group(1)) == "inliner"), "without DEBUGINFOD_URLS, names came from somewhere")
        print(f"debuginfod: {len(rows)} samples named through a local server")
    finally:
        d.terminate()
        d.wait()
shutil.rmtree(tmp)
c.done()
