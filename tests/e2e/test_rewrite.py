#!/usr/bin/env python3
"""test_rewrite.py -- icpp-rewrite end to end: on the corpus (frame-pointer builds) the
rewritten program behaves identically and a fresh training of it measures exactly the
heights its map predicts; orders.c's separable collision is separated and its inseparable
one reported; a generated program with many collisions gains precision within the stack
budget; only resized functions and the build-id note change; same seed, same result;
bad input fails with one clear line."""
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

from e2e import SOURCE, Checker, built, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgraph  # noqa: E402
import corpus  # noqa: E402

c = Checker("e2e-rewrite")
TRAIN = tool("icpp-train")
REWRITE = tool("icpp-rewrite")
tmp = tempfile.mkdtemp(prefix="icpp-rewrite-")
only = sys.argv[1:]   # optional program names to restrict to


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def train(binary, mapfile, args=()):
    return run([TRAIN, "-q", "--fresh", "-o", mapfile, "--", binary] + list(args))


def paths_of(mapfile):
    """{function ids (module@address;...): (names, {height: count})} of a map."""
    r = run([TRAIN, "--paths", mapfile])
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("#"):
            continue
        _cnt, hs, names, ids = line.split("\t")
        out[ids] = (names, {int(a): int(b) for a, b in (x.split(":") for x in hs.split(",") if x)})
    return out


def report(text):
    """The figures of icpp-rewrite's report."""
    f = {}
    m = re.search(r"unique CIDs, by paths\s+([\d.]+)%\s+([\d.]+)%", text)
    if m:
        f["paths_before"], f["paths_after"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"unique CIDs, by call weight\s+([\d.]+)%\s+([\d.]+)%", text)
    if m:
        f["calls_before"], f["calls_after"] = float(m.group(1)), float(m.group(2))
    m = re.search(r"max height:\s+(\d+) -> (\d+) bytes .*budget x([\d.]+) = (\d+)", text)
    if m:
        f["h_before"], f["h_after"], f["budget"] = int(m.group(1)), int(m.group(2)), int(m.group(4))
    m = re.search(r"resized:\s+(\d+) functions", text)
    if m:
        f["nresized"] = int(m.group(1))
    f["resized"] = [(int(a, 16), int(p), m) for a, p, m in
                    re.findall(r"^\s+(0x[0-9a-f]+)\s+\+(\d+)\s+(sub|enter)\s+frame", text, re.M)]
    m = re.search(r"verify: (\d+) stable paths: (\d+) exactly as PROG's training shifted by the paddings; "
                  r"(\d+) of (\d+) in OUT's map exactly as it predicts", text)
    if m:
        f["stable"], f["stable_ok"], f["map_ok"], f["map_n"] = map(int, m.groups())
    m = re.search(r"verify: (\d+) alignment-dependent paths .*: (\d+) within the predictions", text)
    if m:
        f["aligned"], f["aligned_ok"] = int(m.group(1)), int(m.group(2))
    f["verify_ok"] = "verify: OK" in text
    m = re.search(r"wrapped:\s+(\d+) call sites", text)
    f["nwrapped"] = int(m.group(1)) if m else 0
    f["wrapped"] = [(int(a, 16), int(p), caller, callee) for a, p, caller, callee in
                    re.findall(r"^\s+(0x[0-9a-f]+)\s+\+(\d+)\s+call (.+) -> (.+) \(stub 0x[0-9a-f]+\)$", text, re.M)]
    # redirected calls (docs/rewrite.md, "Cloning"): like a wrapped site, 5 bytes in PROG and a new segment
    f["cloned"] = [(int(a, 16), int(p), caller, callee) for a, p, caller, callee in
                   re.findall(r"^\s+(0x[0-9a-f]+)\s+\+(\d+)\s+call (.+) -> (.+) \(copy \S+ at 0x[0-9a-f]+, \d+ bytes\)$",
                              text, re.M)]
    f["wrapped"] += f["cloned"]
    return f


def rewrite(binary, mapfile, out, *extra, args=()):
    return run([REWRITE, "-m", mapfile, "-o", out] + list(extra) + [binary] + list(args), timeout=600)


def place_out(entry, d):
    """OUT for a corpus binary: d/<its name> with its plugin beside it (dlopen.c
    finds plugin.<config>.so next to /proc/self/exe)."""
    os.makedirs(d, exist_ok=True)
    plugin = os.path.join(os.path.dirname(entry.binary), "plugin.%s.so" % entry.config)
    if os.path.exists(plugin) and not os.path.exists(os.path.join(d, os.path.basename(plugin))):
        os.symlink(plugin, os.path.join(d, os.path.basename(plugin)))
    return os.path.join(d, os.path.basename(entry.binary))


def func_ranges(binary):
    """{start: [(start, end), ...]} of the binary's sized functions (nm), each with
    its split-off foo.cold parts, which run in foo's frame."""
    r = run(["nm", "-S", "--defined-only", binary])
    by_name, by_start = {}, {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 4 and p[2] in "tTwW":
            lo = int(p[0], 16)
            by_name[p[3]] = (lo, lo + int(p[1], 16))
    for name, (lo, hi) in by_name.items():
        if ".cold" not in name:
            by_start[lo] = [(lo, hi)] + [v for n, v in by_name.items() if n.startswith(name + ".cold")]
    return by_start


def file_offsets(binary):
    """[(vaddr, offset, filesz)] of the PT_LOAD segments (readelf)."""
    r = run(["readelf", "-lW", binary])
    segs = []
    for line in r.stdout.splitlines():
        p = line.split()
        if p and p[0] == "LOAD":
            segs.append((int(p[2], 16), int(p[1], 16), int(p[4], 16)))
    return segs


def build_id(binary):
    r = run(["readelf", "-n", binary])
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    return m.group(1) if m else None


def cfi_sections(binary):
    """[(offset, end)] of .eh_frame and .debug_frame in the file (readelf)."""
    r = run(["readelf", "-SW", binary])
    out = []
    for m in re.finditer(r"\]\s+(\.eh_frame|\.debug_frame)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", r.stdout):
        off, size = int(m.group(2), 16), int(m.group(3), 16)
        out.append((off, off + size))
    return out


def changed_only_where_allowed(prog, out, resized, label, cfi=False, wrapped=()):
    """Every byte that differs between PROG and OUT lies in a resized function or
    in the build-id note (or, cfi: in the CFI sections, whose CFA offsets frames
    without a frame pointer patch).  With wrapped call sites, OUT is PROG plus a
    new segment and new section headers after its end; within PROG's bytes only
    the ELF header, the program headers and the 5 bytes of each wrapped call change
    in addition."""
    a, b = open(prog, "rb").read(), open(out, "rb").read()
    if wrapped:
        if not c.check(len(b) > len(a), f"{label}: call sites wrapped but OUT did not grow"):
            return
        b = b[:len(a)]
    elif not c.check(len(a) == len(b), f"{label}: OUT has another size ({len(a)} vs {len(b)})"):
        return
    diff = [i for i in range(len(a)) if a[i] != b[i]] if a != b else []
    bid = bytes.fromhex(build_id(prog) or "")
    bid_at = a.find(bid) if bid else -1
    ranges = func_ranges(prog)
    segs = file_offsets(prog)
    allowed = cfi_sections(prog) if cfi else []
    if wrapped:
        allowed.append((0, 64))     # e_phoff, e_phnum, e_shoff, e_shnum
        phoff, = struct.unpack_from("<Q", a, 32)
        phnum, = struct.unpack_from("<H", a, 56)
        allowed.append((phoff, phoff + 56 * phnum))     # the new PT_LOAD, PT_GNU_EH_FRAME
        for call, _p, _a, _b in wrapped:
            for va, off, sz in segs:
                if va <= call < va + sz:
                    allowed.append((call - va + off, call - va + off + 5))
    for start in resized:
        for lo, hi in ranges.get(start, []):
            for va, off, sz in segs:
                if va <= lo < va + sz:
                    allowed.append((lo - va + off, hi - va + off))
    bad = [i for i in diff if not (bid_at >= 0 and bid_at <= i < bid_at + len(bid))
           and not any(lo <= i < hi for lo, hi in allowed)]
    c.check(not bad, f"{label}: {len(bad)} bytes changed outside resized functions and the build-id, "
                     f"first at file offset {bad[0] if bad else 0:#x}")
    c.check(bid_at >= 0 and a[bid_at:bid_at + len(bid)] != b[bid_at:bid_at + len(bid)],
            f"{label}: the build-id note did not change")


def elf_clean(out, label):
    """readelf -lSW says nothing on stderr and eu-elflint --gnu-ld finds no error."""
    r = run(["readelf", "-lSW", out])
    c.check(r.returncode == 0 and not r.stderr.strip(), f"{label}: readelf -lSW: {r.stderr.strip()[:300]}")
    r = run(["eu-elflint", "--gnu-ld", out])
    c.check(r.returncode == 0, f"{label}: eu-elflint --gnu-ld: {(r.stdout + r.stderr).strip()[:500]}")


figures = []   # (prog, config, report) for the summary

# ---- 1. the corpus, frame-pointer builds: behaviour and heights --------------------

entries = [e for e in corpus.load_list() if "fp" in e.tags and "static" not in e.tags]
for e in entries:
    if only and e.prog not in only:
        continue
    label = f"{e.prog}.{e.config}"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    mapfile = os.path.join(d, "prog.icppmap")
    r = train(e.binary, mapfile)
    if not c.check(os.path.exists(mapfile), f"{label}: training failed: {r.stderr.strip()}"):
        continue
    before = sha(e.binary)
    out = place_out(e, os.path.join(d, "out"))
    extra = ["--enter"] if e.config != "O2-fp-nopie" else []   # both ways of growing a frame
    r = rewrite(e.binary, mapfile, out, "--verify", *extra)
    f = report(r.stdout)
    figures.append((e.prog, e.config, f))
    c.check(r.returncode == 0, f"{label}: icpp-rewrite --verify exit {r.returncode}: "
                               f"{r.stderr.strip()} {[x for x in r.stdout.splitlines() if 'FAIL' in x][:3]}")
    c.check(sha(e.binary) == before, f"{label}: PROG was modified")
    c.check(os.access(out, os.X_OK), f"{label}: OUT is not executable")
    c.check(f.get("verify_ok"), f"{label}: --verify did not say OK")
    # Every stable path exactly as predicted (paths the original training did
    # not take -- thread timing -- are not in OUT's map: map_n counts the rest).
    c.check(f.get("stable") is not None and f["stable"] == f["stable_ok"] and f["map_ok"] == f["map_n"]
            and f["map_n"] > 0.9 * f["stable"],
            f"{label}: stable paths not all as predicted: {f}")
    c.check(f.get("aligned") == f.get("aligned_ok"), f"{label}: alignment-dependent paths outside predictions")
    c.check(f.get("h_after", 0) <= f.get("budget", 0), f"{label}: stack budget exceeded")
    c.check(f.get("paths_after", 0) >= f.get("paths_before", 101), f"{label}: precision went down")
    changed_only_where_allowed(e.binary, out, [a for a, _p, _m in f["resized"]], label, wrapped=f["wrapped"])
    c.check(build_id(out) and build_id(out) != build_id(e.binary), f"{label}: OUT has PROG's build-id")
    if f["wrapped"]:
        elf_clean(out, label)

# ---- 2. orders.c: a separable and an inseparable collision (resizing alone) -------------

for cfg, extra in (("O0-fp-pie", ["--no-wrap", "--no-clone"]), ("O2-fp-pie", ["--enter", "--no-wrap", "--no-clone"])):
    if only and "orders" not in only:
        break
    e = [x for x in entries if x.prog == "orders" and x.config == cfg]
    if not c.check(e, f"orders.{cfg} is not in the corpus list"):
        continue
    e = e[0]
    d = os.path.join(tmp, "orders-" + cfg)
    os.makedirs(d, exist_ok=True)
    m0 = os.path.join(d, "prog.icppmap")
    train(e.binary, m0)
    out = os.path.join(d, "orders.arr")
    r = rewrite(e.binary, m0, out, *extra)
    c.check(r.returncode == 0, f"orders.{cfg}: exit {r.returncode}: {r.stderr}")
    before, after = paths_of(m0), paths_of(out + ".icppmap")

    def leaf_height(paths, tail):
        for ids, (names, hs) in paths.items():
            if names.endswith(tail):
                return set(hs)
        return None
    # main;b;a;d and main;b;e;d collide before; after, they do not.
    ba, be = "main;b;a;d", "main;b;e;d"
    c.check(leaf_height(before, ba) == leaf_height(before, be),
            f"orders.{cfg}: {ba} and {be} do not collide in the training (nothing to test)")
    c.check(leaf_height(after, ba) != leaf_height(after, be),
            f"orders.{cfg}: {ba} and {be} still collide after rewriting:\n{r.stdout}")
    # main;a;b;d and main;b;a;d: same callers in another order: inseparable, and said so.
    c.check(leaf_height(after, "main;a;b;d") == leaf_height(after, ba),
            f"orders.{cfg}: main;a;b;d and {ba} separated?")
    c.check(re.search(r"\[inseparable\] d at height \d+, 2 paths", r.stdout) is not None
            and "main;a;b;d" in r.stdout, f"orders.{cfg}: the inseparable pair is not listed:\n{r.stdout}")
    # and why: each path's own call site into d, wrappable but not wrapped (--no-wrap)
    grp = r.stdout.split("[inseparable] d at height", 1)[-1].split("[inseparable]", 1)[0]
    why = re.findall(r"\(call 0x[0-9a-f]+ into d wrappable, not wrapped: --no-wrap\)", grp)
    c.check(len(why) == 2 and len(set(why)) == 2,
            f"orders.{cfg}: the pair's two call sites into d and why they were not wrapped: {grp}")
    f = report(r.stdout)
    c.check(f.get("paths_after", 0) > f.get("paths_before", 100), f"orders.{cfg}: no gain: {f}")
    # Independently of --verify: a fresh training of OUT, every path, every height.
    m1 = os.path.join(d, "out.icppmap")
    rr = train(out, m1)
    c.check(rr.returncode == 0 and rr.stdout == run([e.binary]).stdout, f"orders.{cfg}: OUT behaves differently")
    pred, got = paths_of(out + ".icppmap"), paths_of(m1)
    c.check(set(pred) == set(got), f"orders.{cfg}: path sets differ: {set(pred) ^ set(got)}")
    wrong = [(pred[k][0], sorted(pred[k][1]), sorted(got[k][1])) for k in set(pred) & set(got)
             if set(pred[k][1]) != set(got[k][1])]
    c.check(not wrong, f"orders.{cfg}: {len(wrong)} paths at other heights than predicted, e.g. {wrong[:2]}")

# ---- 3. a generated program with many collisions --------------------------------------

if not only:
    d = os.path.join(tmp, "callgraph")
    os.makedirs(d)
    src = os.path.join(d, "cg.c")
    children, total = callgraph.make_graph(3000, 7)
    with open(src, "w") as fh:
        callgraph.emit(children, 7, fh)
    for flags, extra in ((["-O0"], []), (["-O2", "-fno-omit-frame-pointer"], ["--enter"])):
        label = "callgraph " + " ".join(flags)
        exe = os.path.join(d, "cg" + flags[0])
        cc = run(["cc", "-g"] + flags + [src, "-o", exe])
        if not c.check(cc.returncode == 0, f"{label}: cc failed: {cc.stderr[:500]}"):
            continue
        m0 = exe + ".icppmap"
        train(exe, m0)
        out = exe + ".arr"
        r = rewrite(exe, m0, out, "--verify", "--max-stack-growth", "1.25", *extra)
        f = report(r.stdout)
        figures.append(("callgraph", " ".join(flags), f))
        c.check(r.returncode == 0 and f.get("verify_ok"), f"{label}: --verify failed: {r.stdout[-2000:]}")
        c.check(f.get("paths_after", 0) >= f.get("paths_before", 100) + 10,
                f"{label}: precision gain under 10 points: {f}")
        c.check(f.get("h_after", 1 << 62) <= f.get("budget", 0), f"{label}: stack budget exceeded: {f}")
        changed_only_where_allowed(exe, out, [a for a, _p, _m in f["resized"]], label, wrapped=f["wrapped"])
        # Same seed, same result (the search ends long before its time limit here).
        if flags == ["-O0"]:
            os.makedirs(os.path.join(d, "again"))
            out2 = os.path.join(d, "again", os.path.basename(out))
            r2 = rewrite(exe, m0, out2, "--max-stack-growth", "1.25", *extra)
            c.check("time limit reached" in r.stdout or sha(out) == sha(out2),
                    f"{label}: the same seed gave another binary")
            c.check(paths_of(out + ".icppmap") == paths_of(out2 + ".icppmap") or "time limit reached" in r.stdout,
                    f"{label}: the same seed gave another map")
            r3 = rewrite(exe, m0, exe + ".seed2", "--seed", "2")
            c.check(r3.returncode == 0, f"{label}: --seed 2 failed")
            # A tighter budget is respected.
            r4 = rewrite(exe, m0, exe + ".tight", "--max-stack-growth", "1.0")
            f4 = report(r4.stdout)
            c.check(r4.returncode == 0 and f4.get("h_after") == f4.get("h_before"),
                    f"{label}: --max-stack-growth 1.0 let the maximum height grow: {f4}")

# ---- 4. hand-written frames: each accepted or refused for its reason ------------------

if not only:
    d = os.path.join(tmp, "frames")
    os.makedirs(d)
    exe = os.path.join(d, "frames")
    cc = run(["cc", "-O0", "-g", os.path.join(SOURCE, "tests", "e2e", "rewrite_frames.c"), "-o", exe])
    if c.check(cc.returncode == 0, f"frames: cc failed: {cc.stderr[:500]}"):
        m0 = exe + ".icppmap"
        train(exe, m0)
        out = exe + ".arr"
        r = rewrite(exe, m0, out, "--enter", "--explain", "--verify")
        verdict, site = {}, {}
        for line in r.stdout.splitlines():
            p = line.split("\t")
            if len(p) == 3:
                verdict[p[0]] = p[2]
            elif len(p) in (4, 5):      # 5: a site neither wrapped nor cloned, with whether a copy could take it
                site[(p[1], p[2])] = p[3]
        # call sites into functions that leave by tail calls: wrappable only if no function they
        # tail-call (transitively) reads stack-passed arguments
        for callee, ok in (("tail_ok", True), ("tail_chain", True), ("tail_bad", False)):
            v = site.get(("wrap_sites", callee), "")
            c.check(v and v.startswith("refused") != ok and (ok or "stack-passed arguments" in v),
                    f"frames: the call from wrap_sites into {callee}: {v!r}")
        # whether a copy of the callee could take a call (docs/rewrite.md, "Cloning")
        for callee, want in (("cl_ok", "copy: possible"),
                             ("cl_jtab", "copy: no: an indirect jump (a jump table would lead back into PROG's copy)"),
                             ("cl_jin", "copy: no: a jump into another function's code that is not a tail call")):
            ln = [x for x in r.stdout.splitlines() if x.split("\t")[1:3] == ["clone_sites", callee]]
            c.check(len(ln) == 1 and ln[0].split("\t")[-1].startswith(want),
                    f"frames: the call from clone_sites into {callee}: {ln}, want {want!r}")
        # and wrapped (those two alone: --no-wrap), the program runs as before: the padding
        # reaches lf through the tail calls
        addrs = [ln.split("\t")[0] for ln in r.stdout.splitlines()
                 if ln.split("\t")[1:3] in (["wrap_sites", "tail_ok"], ["wrap_sites", "tail_chain"])]
        rw = rewrite(exe, m0, exe + ".wrapped", "--enter", "--verify", "--no-wrap",
                     *sum((["--wrap", a] for a in addrs), []))
        fw = report(rw.stdout)
        c.check(len(addrs) == 2 and rw.returncode == 0 and fw.get("verify_ok") and fw.get("nwrapped") == 2,
                f"frames: wrapping the calls into tail_ok and tail_chain ({addrs}): {rw.stdout[-1500:]} {rw.stderr}")
        want = {
            "ok_sub": "ok: sub, frame 32, up to +80 (2 patches)",
            "ok_args": "ok: sub, frame 16",
            "ok_same": "ok: sub, frame 32",
            "ok_enter": "ok: enter",
            "ok_enter2": "ok: enter",
            "ok_above": "ok: sub, frame 16, up to +96 (2 patches)",
            "bad_mixed": "refused: the frame's locals are reached both through rsp and at fixed places",
            "bad_shrink": "refused: calls a function outside the enlarged frame",
            "bad_alloca": "refused: a dynamic stack adjustment",
            "ok_nofp": "ok: sub, frame 32, up to +64 (5 patches, no frame pointer: CFA offsets in the CFI among them)",
            "bad_straddle": "refused: an rsp-relative access straddles the frame boundary",
            "bad_retaddr": "refused: the address of a saved register or of the return address",
            "bad_pop": "refused: a pop crosses the frame boundary",
        }
        for name, text in want.items():
            c.check(verdict.get(name, "").startswith(text), f"frames: {name}: {verdict.get(name)!r}, want {text!r}")
        f = report(r.stdout)
        c.check(r.returncode == 0 and f.get("verify_ok"), f"frames: --verify failed: {r.stdout[-1500:]}")
        padded = {m for _a, _p, m in f["resized"]}
        c.check("sub" in padded and "enter" in padded, f"frames: want both sub and enter paddings, got {f['resized']}")
        changed_only_where_allowed(exe, out, [a for a, _p, _m in f["resized"]], "frames", cfi=True,
                                   wrapped=f["wrapped"])

# ---- 5. without frame pointers: resized, exceptions caught, gdb's backtraces unchanged ----


def gdb_bt(binary, where, args):
    """gdb's backtrace at the first stop at `where`: [(pc or None, function)] (frame #0 has no pc).
    A wrapped call site's stub frame (docs/rewrite.md) is named as gdb shows it: CALLER.cold.icpp_wrap
    (C) or CALLER(ARGS) [clone .cold] [clone .icpp_wrap.N] (C++)."""
    r = run(["gdb", "-batch", "-nx", "-ex", "break " + where, "-ex", "run", "-ex", "bt", "--args", binary] + args,
            timeout=120)
    out = []
    for m in re.finditer(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(.*)$", r.stdout, re.M):
        rest = re.sub(r" (at|from) \S+$", "", m.group(3))
        # the name: up to the argument list, the last balanced "(...)" at the end
        depth, i = 0, len(rest) - 1
        while i >= 0:
            depth += {")": 1, "(": -1}.get(rest[i], 0)
            if depth == 0:
                break
            i -= 1
        out.append((int(m.group(2), 16) if m.group(2) else None, rest[:i].strip()))
    return out


def stub_caller(name):
    """The caller a stub frame's name stands for (the name itself for other frames)."""
    name = re.sub(r"\.cold\.icpp_wrap(\.\d+)?$", "", name)
    return re.sub(r"\(.*\) \[clone \.cold\] \[clone \.icpp_wrap\.\d+\]$", "", name)


def same_bt(bt0, bt1):
    """Backtraces of PROG and OUT agree: the same functions in the same order (a stub frame
    as its caller), at the same return addresses except in stub frames; up to main (gdb does
    not take a stub frame of main for main, so it goes on past it)."""
    def upto_main(bt):
        names = [stub_caller(n) for _pc, n in bt]
        return bt[:names.index("main") + 1] if "main" in names else bt
    a, b = upto_main(bt0), upto_main(bt1)
    return len(a) == len(b) and all(
        stub_caller(n0) == stub_caller(n1) and (pc0 == pc1 or "icpp_wrap" in n1)
        for (pc0, n0), (pc1, n1) in zip(a, b))


for e in corpus.load_list():
    if only and e.prog not in only:
        continue
    if "nofp" not in e.tags or e.prog not in ("recurse", "exceptions", "orders") or "static" in e.tags:
        continue
    label = f"{e.prog}.{e.config}"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    m0 = os.path.join(d, "prog.icppmap")
    train(e.binary, m0)
    out = os.path.join(d, "out")
    r = rewrite(e.binary, m0, out, "--enter", "--verify")
    f = report(r.stdout)
    # --verify: identical output and exit status (exceptions.cpp prints how many it caught), and
    # a training of OUT measures exactly the predicted heights.
    c.check(r.returncode == 0 and f.get("verify_ok"), f"{label}: --verify failed: {r.stdout[-1500:]}")
    changed_only_where_allowed(e.binary, out, [a for a, _p, _m in f["resized"]], label, cfi=True,
                               wrapped=f["wrapped"])
    figures.append((e.prog, e.config, f))
    if e.prog == "recurse":
        continue        # its recursive functions have no sub to enlarge (push-only frames)
    c.check(f.get("nresized", 0) > 0, f"{label}: no function without a frame pointer was resized: {r.stdout[-1500:]}")
    if e.prog != "exceptions" or "O2" not in e.tags:
        continue
    # Exceptions are thrown from fail_leaf through the descend frames: descend must be resized.
    lines = re.findall(r"^\s+0x[0-9a-f]+\s+\+\d+\s+sub\s+frame.*$", r.stdout, re.M)
    c.check(any("exc::descend(" in x for x in lines), f"{label}: descend not resized: {lines}")
    # gdb unwinds the rewritten binary as the original: at fail_leaf (7 resized frames below it), and
    # at the call instruction inside the innermost resized descend.
    leaf = "_ZN3exc9fail_leafEmmb"
    bt0, bt1 = gdb_bt(e.binary, leaf, ["1"]), gdb_bt(out, leaf, ["1"])
    c.check(len(bt0) >= 10 and same_bt(bt0, bt1), f"{label}: gdb backtraces at {leaf} differ:\n{bt0}\n{bt1}")
    if c.check(len(bt0) > 1 and bt0[1][0], f"{label}: gdb gave no return address in frame #1: {bt0}"):
        at = "*%#x" % (bt0[1][0] - 5)     # the call rel32 before frame #1's return address
        bt0, bt1 = gdb_bt(e.binary, at, ["1"]), gdb_bt(out, at, ["1"])
        c.check(len(bt0) >= 9 and "descend" in bt0[0][1] and same_bt(bt0, bt1),
                f"{label}: gdb backtraces inside descend differ:\n{bt0}\n{bt1}")

# ---- 5b. call-site wrapping: orders fully precise, exceptions through stubs, gdb ---------


def check_precision(binary, mapfile, label):
    """icpp-sample --validate + icpp-resolve --check: (precise samples, ambiguous samples,
    precise paths, true paths, samples with a true stack) of the function-path level."""
    samples = os.path.join(tmp, label + ".samples")
    r = run([tool("icpp-sample"), "--validate", "-q", "-o", samples, "--", binary, "10"], timeout=300)
    if not c.check(r.returncode == 0, f"{label}: icpp-sample failed: {r.stderr.strip()[-300:]}"):
        return None
    r = run([tool("icpp-resolve"), "-m", mapfile, "--check", samples], timeout=300)
    t = re.search(r"(\d+) distinct true paths", r.stdout)
    p = re.search(r"^precise\s+(\d+)\s+[\d.]+%\s+(\d+)", r.stdout, re.M)
    a = re.search(r"^ambiguous-containing-truth\s+(\d+)", r.stdout, re.M)
    i = re.search(r"^incorrect\s+(\d+)", r.stdout, re.M)
    w = re.search(r"(\d+) with a true stack", r.stdout)
    if not c.check(t and p and a and i and w, f"{label}: no --check figures: {r.stdout[-800:]} {r.stderr[-300:]}"):
        return None
    return int(p.group(1)), int(a.group(1)) + int(i.group(1)), int(p.group(2)), int(t.group(1)), int(w.group(1))


def all_precise(q):
    """orders' 4 paths precise and nothing ambiguous or incorrect; a path that is not precise may
    only be a sample or two of start-up code training never ran (ld.so), missing or inferred --
    learn samples do not fall next to profile samples (docs/resolve.md, "The learn rate")."""
    return q and q[2] >= 4 and q[1] == 0 and q[0] > 0 and q[4] - q[0] <= max(2, q[4] // 100)


for e in corpus.load_list():
    if only and e.prog not in only:
        continue
    if e.prog != "orders" or e.config not in ("O2-nofp-pie", "O2-fp-pie"):
        continue
    # main;a;b;d and main;b;a;d: the same callers in another order.  Resizing alone leaves them
    # sharing a CID; wrapping a call site on one of them separates them, and all four documented
    # paths of orders.c resolve precisely against the true stacks.
    label = f"wrap-{e.prog}.{e.config}"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    m0 = os.path.join(d, "prog.icppmap")
    train(e.binary, m0)
    out = os.path.join(d, "orders.arr")
    r = rewrite(e.binary, m0, out, "--verify")
    f = report(r.stdout)
    c.check(r.returncode == 0 and f.get("verify_ok"), f"{label}: --verify failed: {r.stdout[-1500:]}")
    c.check(f["nwrapped"] >= 1 and "[inseparable]" not in r.stdout,
            f"{label}: the inseparable pair is still there: {r.stdout[-1500:]}")
    after = paths_of(out + ".icppmap")
    hs = {names.split(";", 3)[-1]: set(h) for names, h in after.values()
          if names.endswith(("main;a;b;d", "main;b;a;d", "main;b;e;d", "main;c;d"))}
    c.check(len(hs) == 4 and len({frozenset(v) for v in hs.values()}) == 4,
            f"{label}: d's four paths do not have four heights in OUT's map: {hs}")
    changed_only_where_allowed(e.binary, out, [a for a, _p, _m in f["resized"]], label, cfi=True,
                               wrapped=f["wrapped"])
    elf_clean(out, label)
    # binutils' strip keeps OUT working (the program headers stayed in the first segment)
    stripped = out + ".stripped"
    rs = run(["strip", "-o", stripped, out])
    c.check(rs.returncode == 0 and run([stripped, "1"]).stdout == run([e.binary, "1"]).stdout,
            f"{label}: OUT stripped by strip does not run as PROG: {rs.stderr.strip()[:300]}")
    elf_clean(stripped, label + " stripped")
    q0, q1 = check_precision(e.binary, m0, label + "-prog"), check_precision(out, out + ".icppmap", label)
    if q0 and q1:
        c.check(q0[1] > 0, f"{label}: PROG was not ambiguous (nothing to test): {q0}")
        # orders' 4 paths, and any other the samples hit (start-up), all precise
        c.check(all_precise(q1),
                f"{label}: after rewriting not all true paths precise (precise, ambiguous+incorrect samples, "
                f"precise paths, true paths) = {q1}")
        print(f"{label}: precise samples {q0[0]}/{q0[0] + q0[1]} -> {q1[0]}/{q1[0] + q1[1]}, "
              f"paths {q0[2]}/{q0[3]} -> {q1[2]}/{q1[3]}")
    # gdb in a callee below the wrapped site: the same functions as in PROG.
    for where in ("b", "d"):
        bt0, bt1 = gdb_bt(e.binary, where, ["1"]), gdb_bt(out, where, ["1"])
        c.check(len(bt0) >= 3 and same_bt(bt0, bt1), f"{label}: gdb backtraces at {where} differ:\n{bt0}\n{bt1}")
    # at the first wrapped callee (orders' first call of it goes through its wrapped site), a stub frame
    callee = f["wrapped"][0][3] if f["wrapped"] else "d"
    bt1 = gdb_bt(out, callee, ["1"])
    c.check(any("icpp_wrap" in n for _pc, n in bt1) and same_bt(gdb_bt(e.binary, callee, ["1"]), bt1),
            f"{label}: no stub frame in gdb's backtrace at {callee}, or other functions: {bt1}")

# Stripped: the stub has no symbol; its FDE (starting inside a frame, jumped to only from its
# caller) makes it the caller's cold part (docs/definitions.md), and the result is the same.
e = [x for x in corpus.load_list() if x.prog == "orders" and x.config == "O2-nofp-pie"]
if e and (not only or "orders" in only):
    label = "wrap-orders.O2-nofp-pie-stripped"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    prog = os.path.join(d, "orders")
    run(["strip", "-o", prog, e[0].binary])
    m0 = os.path.join(d, "prog.icppmap")
    train(prog, m0)
    out = os.path.join(d, "orders.arr")
    r = rewrite(prog, m0, out, "--verify")
    f = report(r.stdout)
    c.check(r.returncode == 0 and f.get("verify_ok") and f["nwrapped"] >= 1 and "[inseparable]" not in r.stdout,
            f"{label}: {r.stdout[-1500:]}")
    elf_clean(out, label)
    q1 = check_precision(out, out + ".icppmap", label)
    c.check(all_precise(q1), f"{label}: not all true paths precise: {q1}")

# No PT_GNU_PROPERTY (so no PT_NOTE to reuse): the program header table moves into the new
# segment, PT_PHDR with it; the kernel and ld.so still load OUT, and --verify passes.
e = [x for x in corpus.load_list() if x.prog == "orders" and x.config == "O2-nofp-pie"]
if e and (not only or "orders" in only):
    label = "wrap-orders.O2-nofp-pie-phdr-moved"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    prog = os.path.join(d, "orders")
    b = bytearray(open(e[0].binary, "rb").read())
    phoff, = struct.unpack_from("<Q", b, 32)
    phnum, = struct.unpack_from("<H", b, 56)
    for i in range(phnum):
        if struct.unpack_from("<I", b, phoff + 56 * i)[0] == 0x6474e553:     # PT_GNU_PROPERTY -> PT_NULL
            struct.pack_into("<I", b, phoff + 56 * i, 0)
    with open(prog, "wb") as fh:
        fh.write(b)
    os.chmod(prog, 0o755)
    m0 = os.path.join(d, "prog.icppmap")
    train(prog, m0)
    out = os.path.join(d, "orders.arr")
    r = rewrite(prog, m0, out, "--verify")
    f = report(r.stdout)
    c.check(r.returncode == 0 and f.get("verify_ok") and f["nwrapped"] >= 1, f"{label}: {r.stdout[-1500:]}")
    hdr = run(["readelf", "-hlW", out]).stdout
    m = re.search(r"Start of program headers:\s+(\d+)", hdr)
    c.check(m and int(m.group(1)) > len(b) and re.search(r"^\s+PHDR\s+0x0*%x " % int(m.group(1)), hdr, re.M),
            f"{label}: the program headers did not move, or PT_PHDR does not follow them:\n{hdr[:1500]}")
    elf_clean(out, label)

for e in corpus.load_list():
    if only and e.prog not in only:
        continue
    if e.prog != "exceptions" or e.config not in ("O2-nofp-pie", "O2-fp-pie"):
        continue
    # Both calls in descend wrapped (--wrap): fail_leaf's exceptions unwind through 8 stubs; the
    # output (how many were caught) is identical, and gdb shows the same functions.
    label = f"wrap-{e.prog}.{e.config}"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    m0 = os.path.join(d, "prog.icppmap")
    train(e.binary, m0)
    start = [int(x.split()[0], 16) for x in run(["nm", e.binary]).stdout.splitlines()
             if x.endswith(" _ZN3exc7descendEimmb")]
    if not c.check(len(start) == 1, f"{label}: no symbol of descend"):
        continue
    lo, hi = func_ranges(e.binary)[start[0]][0]
    dis = run(["objdump", "-d", "--start-address=%#x" % lo, "--stop-address=%#x" % hi, e.binary]).stdout
    calls = re.findall(r"^\s*([0-9a-f]+):\s+e8 .*call", dis, re.M)
    if not c.check(len(calls) == 2, f"{label}: descend has not 2 direct calls: {calls}"):
        continue
    out = os.path.join(d, "out")
    r = rewrite(e.binary, m0, out, "--verify", "--enter", *sum((["--wrap", "0x" + a] for a in calls), []), args=["1"])
    f = report(r.stdout)
    c.check(r.returncode == 0 and f.get("verify_ok") and f["nwrapped"] == 2,
            f"{label}: --verify with 2 wrapped calls failed: {r.stdout[-1500:]} {r.stderr[-300:]}")
    o0, o1 = run([e.binary, "1"]), run([out, "1"])
    c.check(o0.stdout == o1.stdout and o0.returncode == o1.returncode and "caught=" in o1.stdout,
            f"{label}: exceptions through stubs: {o0.stdout!r} vs {o1.stdout!r}")
    elf_clean(out, label)
    leaf = "_ZN3exc9fail_leafEmmb"
    bt0, bt1 = gdb_bt(e.binary, leaf, ["1"]), gdb_bt(out, leaf, ["1"])
    c.check(len(bt0) >= 10 and same_bt(bt0, bt1) and sum("icpp_wrap" in n for _pc, n in bt1) == 7,
            f"{label}: gdb backtraces at {leaf} differ:\n{bt0}\n{bt1}")

# ---- 5c. call-site wrapping after a sibling call at the same height ---------------------

# wrapsiblings.c: main;a;b;work and main;b;a;work, and every call that could separate them follows
# a call of tick() from the same frame, at the height of the call.  A wrapped call enters below
# tick's returned frame; the training agent takes the stub for its caller's code and drops
# tick's frame all the same (docs/rewrite.md, "The training of OUT"), so the search may wrap
# such a call: the pair is separated, a fresh training of OUT records exactly OUT's map (no
# main;tick;a;... path), and every sample in work resolves precisely against its true stack.
for cfg, flags in (("O2-nofp", []), ("O2-fp", ["-fno-omit-frame-pointer"])):
    if only and "wrapsiblings" not in only:
        break
    label = f"wrapsiblings.{cfg}"
    d = os.path.join(tmp, label)
    os.makedirs(d, exist_ok=True)
    exe = os.path.join(d, "wrapsiblings")
    cc = run(["cc", "-O2", "-g"] + flags + [os.path.join(SOURCE, "tests", "e2e", "wrapsiblings.c"), "-o", exe])
    if not c.check(cc.returncode == 0, f"{label}: cc failed: {cc.stderr[:500]}"):
        continue
    m0 = exe + ".icppmap"
    train(exe, m0, ["1"])
    pair = ("main;a;b;work", "main;b;a;work")
    before = {n.split(";", 3)[-1]: set(h) for n, h in paths_of(m0).values() if n.endswith(pair)}
    if not c.check(len(before) == 2 and len(set.union(*before.values())) == 1,
                   f"{label}: the pair does not share work's height in the training (nothing to test): {before}"):
        continue
    out = exe + ".arr"
    r = rewrite(exe, m0, out, "--verify", args=["1"])
    f = report(r.stdout)
    c.check(r.returncode == 0 and f.get("verify_ok") and f["nwrapped"] >= 1 and "[inseparable]" not in r.stdout,
            f"{label}: the pair was not separated by a wrapped call, or --verify failed: {r.stdout[-1500:]}")
    after = {n.split(";", 3)[-1]: set(h) for n, h in paths_of(out + ".icppmap").values() if n.endswith(pair)}
    c.check(len(after) == 2 and not after[pair[0]] & after[pair[1]], f"{label}: the pair still collides: {after}")
    # the ground truth of the agent: a fresh training of OUT has OUT's map's paths at its heights
    m1 = os.path.join(d, "out-trained.icppmap")
    train(out, m1, ["1"])
    pred = {n: h for n, h in paths_of(out + ".icppmap").values() if ";main;" in n and ";printf" not in n}
    got = {n: h for n, h in paths_of(m1).values() if ";main;" in n and ";printf" not in n}
    c.check(pred == got, f"{label}: OUT's training differs from OUT's map: "
            f"{ {n: (pred.get(n), got.get(n)) for n in set(pred) | set(got) if pred.get(n) != got.get(n)} }")
    q0, q1 = check_precision(exe, m0, label + "-prog"), check_precision(out, out + ".icppmap", label)
    if q0 and q1:
        c.check(q0[1] > 0, f"{label}: PROG was not ambiguous (nothing to test): {q0}")
        c.check(q1[0] > 0 and q1[1] == 0, f"{label}: after rewriting, samples ambiguous or incorrect: {q1}")
        print(f"{label}: precise samples {q0[0]}/{q0[0] + q0[1]} -> {q1[0]}/{q1[0] + q1[1]}")

# ---- 6. bad input -----------------------------------------------------------------------

if not only:
    e = [x for x in entries if x.prog == "orders" and x.config == "O0-fp-pie"][0]
    d = os.path.join(tmp, "bad")
    os.makedirs(d)
    m0 = os.path.join(d, "orders.icppmap")
    train(e.binary, m0)
    other = [x for x in entries if x.prog == "recurse" and x.config == "O0-fp-pie"][0]
    notelf = os.path.join(d, "notelf")
    with open(notelf, "w") as fh:
        fh.write("#!/bin/sh\necho hi\n")
    arm = os.path.join(d, "arm")
    shutil.copy(e.binary, arm)
    with open(arm, "r+b") as fh:      # e_machine = EM_AARCH64
        fh.seek(18)
        fh.write(bytes([183, 0]))
    adir = os.path.join(d, "adir")
    os.makedirs(adir)
    prog_sum = sha(e.binary)
    cases = [
        ("non-ELF program", [REWRITE, "-m", m0, "-o", os.path.join(d, "o1"), notelf], "not an ELF"),
        ("non-x86-64 program", [REWRITE, "-m", m0, "-o", os.path.join(d, "o2"), arm], "x86-64"),
        ("map of another binary", [REWRITE, "-m", m0, "-o", os.path.join(d, "o3"), other.binary], "is a map of"),
        ("not a map", [REWRITE, "-m", notelf, "-o", os.path.join(d, "o4"), e.binary], "not an ICPP path map"),
        ("OUT in a missing directory", [REWRITE, "-m", m0, "-o", os.path.join(d, "nodir", "x"), e.binary],
         "cannot write"),
        ("OUT is a directory", [REWRITE, "-m", m0, "-o", adir, e.binary], "not a regular file"),
        ("OUT is PROG", [REWRITE, "-m", m0, "-o", e.binary, e.binary], "never modifies"),
        ("no map", [REWRITE, e.binary], "-m MAP"),
        ("bad budget", [REWRITE, "-m", m0, "--max-stack-growth", "0.5", e.binary], "max-stack-growth"),
    ]
    for what, cmd, needle in cases:
        r = run(cmd)
        lines = r.stderr.strip().splitlines()
        c.check(r.returncode in (1, 2) and len(lines) == 1 and lines[0].startswith("icpp-rewrite: ")
                and needle in lines[0], f"{what}: exit {r.returncode}, stderr {r.stderr!r}")
    c.check(sha(e.binary) == prog_sum, "a failed run modified PROG")
    c.check(not any(os.path.exists(os.path.join(d, n)) for n in ("o1", "o2", "o3", "o4")),
            "a failed run left an output file")

# ---- summary: the figures for bench/RESULTS.md --------------------------------------------

print("%-12s %-28s %8s %8s %8s %8s %6s %8s" % ("program", "config", "paths<", "paths>", "calls<", "calls>",
                                               "sized", "height"))
for prog, cfg, f in figures:
    print("%-12s %-28s %7.1f%% %7.1f%% %7.1f%% %7.1f%% %6d %8s" % (
        prog, cfg, f.get("paths_before", 0), f.get("paths_after", 0), f.get("calls_before", 0),
        f.get("calls_after", 0), f.get("nresized", 0), "%d->%d" % (f.get("h_before", 0), f.get("h_after", 0))))

if c.failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
else:
    print(f"kept {tmp} for inspection", file=sys.stderr)
c.done()
