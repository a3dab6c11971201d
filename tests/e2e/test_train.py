#!/usr/bin/env python3
"""test_train.py -- icpp-train end to end on the corpus: the recorded path set equals
each program's documented paths, every sampled context's height (from the ground-truth
unwinder) is in the map, the program behaves identically, every way of ending keeps
the data, maps merge exactly, and bad input fails cleanly."""
import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from e2e import BUILD, SOURCE, Checker, built, map_modules, map_paths, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
sys.path.insert(0, os.path.join(SOURCE, "tests", "gt"))
import corpus  # noqa: E402
import gt  # noqa: E402

c = Checker("e2e-train")
TRAIN = tool("icpp-train")
GT = built("tests/gt/icpp-gt")
tmp = tempfile.mkdtemp(prefix="icpp-train-")
only = sys.argv[1:]   # optional program names to restrict to


paths_of = map_paths     # node list of (count, {height: count}, names tuple, ids tuple)


def train(binary, mapfile, args=(), modules="main", **kw):
    return run([TRAIN, "-q", "--fresh", "--modules", modules, "-o", mapfile, "--", binary] + list(args), **kw)


_plt = {}


def in_plt(module, addr):
    """Is link-time addr in a PLT section of module?  A PLT stub is no function
    (docs/definitions.md): its frame is left out of a path."""
    if module not in _plt:
        out = subprocess.run(["readelf", "-SW", module], capture_output=True, text=True).stdout
        _plt[module] = [(int(f[3], 16), int(f[3], 16) + int(f[5], 16))
                        for f in (l.replace("[ ", "[").split() for l in out.splitlines())
                        if len(f) > 5 and f[1] in (".plt", ".plt.sec", ".plt.got", ".plt.bnd")]
    return any(lo <= addr < hi for lo, hi in _plt[module])


def cold_free(name):
    """gcc's foo.cold runs in foo's frame: name it foo."""
    return name.split(".cold")[0] if name else name


def traced_training(binary, mapfile, modules, args):
    """Train under the ground-truth sampler, so heights are compared within one
    run (a signal frame's position depends on the stack's alignment, which
    changes from run to run).  Returns (run result, samples of the trained
    program)."""
    gtout = mapfile + ".gt"
    r = run([GT, "-F", "5000", "-o", gtout, "--", TRAIN, "-q", "--fresh", "--modules", modules, "-o", mapfile,
             "--", binary] + list(args))
    return r, gt.load(gtout)


entries = [e for e in corpus.load_list(built("tests/programs/corpus-list.txt")) if not only or e.prog in only]
c.check(only or len(entries) >= 50, f"only {len(entries)} corpus binaries")
summary = collections.Counter()
for e in entries:
    label = f"{e.prog}.{e.config}"
    mapfile = os.path.join(tmp, label + ".icppmap")
    if "static" in e.tags:
        r = train(e.binary, mapfile)
        c.check(r.returncode == 1 and "statically linked" in r.stderr and len(r.stderr.strip().splitlines()) == 1
                and not os.path.exists(mapfile), f"{label}: static binary: rc={r.returncode} {r.stderr!r}")
        continue
    # A plugin is a module of its own: train it with the program.
    modules = "main,plugin." if e.prog == "dlopen" else "main"
    plain = run([e.binary, "8"])
    r, trace = traced_training(e.binary, mapfile, modules, ["8"])
    # Behaviour is unchanged.
    c.check(r.returncode == plain.returncode, f"{label}: exit {r.returncode} trained, {plain.returncode} plain")
    c.check(r.stdout == plain.stdout, f"{label}: output differs when trained")
    if not c.check(os.path.exists(mapfile), f"{label}: no map: {r.stderr}"):
        continue
    # The path set, projected onto the program's own functions, is the documented one.
    required, optional = corpus.paths_for(e)
    own = corpus.functions(e)
    dem = corpus.demangle(own) if e.source.endswith(".cpp") else {f: f for f in own}
    inv = {v: k for k, v in dem.items()}
    got = set()
    heights = collections.defaultdict(set)
    for cnt, hs, names, ids in paths_of(mapfile):
        proj = tuple(inv[n] for n in names if n in inv)
        if not proj or names[-1] not in inv:
            continue
        got.add(proj)
        heights[proj] |= set(hs)
    missing = required - got
    extra = got - required - optional
    c.check(not missing, f"{label}: documented paths not recorded: {sorted(missing)[:5]}")
    c.check(not extra, f"{label}: recorded paths not documented: {sorted(extra)[:5]}")
    summary["binaries"] += 1
    summary["paths"] += len(got)
    # Heights: every context the ground-truth unwinder saw in the same run is in the map.
    # icpp-gt learns an exec'd image's base from /proc when it handles the exec; a
    # short run can be gone by then (no base: nothing to compare), so a run with too
    # few comparable samples is repeated, longer.
    mods = {os.path.realpath(m) for m in corpus.modules(e)}
    for scale in ("16", "32", None):
        checked = bad = 0
        for smp in trace.samples:
            if not smp.complete or smp.base is None or not smp.frames:
                continue
            leaf = smp.leaf
            if leaf.module is None or os.path.realpath(leaf.module) not in mods or cold_free(leaf.name) not in own:
                continue
            proj = tuple(cold_free(f.name) for f in smp.frames if cold_free(f.name) in own)
            h = smp.leaf_height
            checked += 1
            if h not in heights.get(proj, ()):
                bad += 1
                if bad <= 3:
                    print(f"  {label}: sampled {';'.join(proj)} at height {h}; map has {sorted(heights.get(proj, ()))}")
        if checked >= 10 or scale is None:
            break
        print(f"  {label}: {checked} comparable samples, again at scale {scale}")
        r, trace = traced_training(e.binary, mapfile, modules, [scale])
        heights = collections.defaultdict(set)
        for cnt, hs, names, ids in paths_of(mapfile):
            proj = tuple(inv[n] for n in names if n in inv)
            if proj and names[-1] in inv:
                heights[proj] |= set(hs)
    summary["contexts"] += checked
    c.check(checked >= 10, f"{label}: only {checked} ground-truth samples to compare")
    c.check(bad == 0, f"{label}: {bad} of {checked} sampled contexts are not in the map with their height")

print(f"corpus: {summary['binaries']} binaries, {summary['paths']} documented paths recorded, "
      f"{summary['contexts']} sampled contexts matched")

def rewritten_return(fr):
    """Index of the _Unwind_* frame of frames fr (root -> leaf) whose return address
    libgcc has just overwritten, else None.  Before it jumps to a landing pad, the
    unwinder copies the handler frame's registers into its own frame's save slots
    (uw_install_context), the return-address column too: from then until its
    epilogue, the memory icpp-gt unwinds says _Unwind_RaiseException returns into
    the handler, and the frames above it repeat the handler's frame.  Only the frames
    from the _Unwind_* frame to the leaf are then known (docs/train.md).  The
    repeated frame is matched by function (or name: the landing pad may be in the
    function's split-off cold part, another start), not pc: while the registers
    are being copied, the return address can already be the landing pad's (seen:
    1 sample in ~800, ..._Z3topm;..._Z4leafm;_Z3topm;_Unwind_RaiseException)."""
    for i in range(1, len(fr)):
        if (fr[i].name or "").startswith("_Unwind_") and \
                any(g.module == fr[i - 1].module and (g.func == fr[i - 1].func or (g.name and g.name == fr[i - 1].name))
                    for g in fr[:i - 1]):
            return i
    return None


def whole_process(label, binary, args, min_checked=20, min_unwinder=0):
    """Train binary with every module under icpp-gt: behaviour unchanged, libc paths
    present, and every complete sample's context (its identity path through the
    trained modules, functions named by build-id and address) in the map with its
    height.  icpp-gt learns the exec'd image's base from /proc when it handles the
    exec, and a run can be past that point by then (seen once in CI: 0 samples to
    compare); such a run is repeated once, as the per-binary runs above are."""
    plain = run([binary] + args)
    for again in (False, True):
        bad, checked, in_unwinder = whole_process_once(label, binary, args, plain)
        if checked >= min_checked or again:
            break
        print(f"  {label} (all modules): {checked} sampled contexts, again")
    c.check(checked >= min_checked and in_unwinder >= min_unwinder,
            f"{label} (all modules): only {checked} sampled contexts, {in_unwinder} in the unwinder")
    return bad, checked


def whole_process_once(label, binary, args, plain):
    mapfile = os.path.join(tmp, label + ".all.icppmap")
    r, trace = traced_training(binary, mapfile, "all", args)
    c.check(r.returncode == plain.returncode and r.stdout == plain.stdout,
            f"{label} (all modules): behaviour differs: rc {r.returncode}/{plain.returncode}")
    nodes = paths_of(mapfile)
    libc = [n for n in nodes if any(i.startswith("libc.so") for i in n[3])]
    c.check(len(libc) > 20, f"{label} (all modules): only {len(libc)} paths through libc")
    # Every tree is the program's: from _start or a thread's start into its code.  The agent's
    # own calls while it patches libraries (malloc, qsort, snprintf, ...) are not recorded --
    # they were, as trees of their own.
    exe = os.path.basename(binary)
    reach = collections.defaultdict(bool)
    for _cnt, _hs, names, ids in nodes:
        reach[names[0]] |= any(i.rsplit("@", 1)[0] == exe for i in ids)
    c.check(all(reach.values()), f"{label} (all modules): trees that never reach the program: "
            f"{sorted(r for r, ok in reach.items() if not ok)}")
    bid = map_modules(mapfile)
    byid = collections.defaultdict(set)
    for cnt, hs, names, ids in nodes:
        byid[tuple(bid[i.rsplit("@", 1)[0]] + "@" + i.rsplit("@", 1)[1] for i in ids)] |= set(hs)
    checked = bad = in_unwinder = rewritten = 0
    for smp in trace.samples:
        if not smp.complete or smp.base is None:
            continue
        # frames of the program and its libraries only (not ld.so, the vdso or the agent;
        # not foo.cold frames, which the map names by their owner; not PLT stubs: a sample
        # in one belongs to the calling context, so its height is the caller's)
        fr = [f for f in smp.frames if not (f.module and f.func is not None and f.module.startswith("/")
                                             and in_plt(f.module, f.func))]
        # only the trained program (icpp-gt also samples icpp-train itself)
        if not fr or not any(f.module and os.path.realpath(f.module) == os.path.realpath(binary) for f in fr):
            continue
        # exit() runs on after the agent wrote its parts (its atexit handler
        # is the last one): the tail of process teardown is not trained.
        if any(f.name == "exit" for f in fr):
            continue
        if any(f.module is None or f.func is None or "ld-linux" in f.module or "icpp-agent" in f.module
               or (f.name or "").count(".cold") or not f.module.startswith("/") for f in fr):
            continue
        ids = tuple(f"{f.obj.build_id}@{f.func:x}" for f in fr)
        h = smp.height(fr[-1])
        cut = rewritten_return(fr)
        if cut is not None:
            # only the unwinder's own frames are known: the map's paths that end with them
            tail = ids[cut:]
            match = [k for k in byid if len(k) >= len(tail) and k[len(k) - len(tail):] == tail]
            rewritten += 1
        else:
            # the map's paths start at the first hooked entry: match a suffix
            match = [k for k in byid if k and k[-1] == ids[-1] and ids[len(ids) - len(k):] == k]
        checked += 1
        in_unwinder += any(f.obj.path.endswith("/libgcc_s.so.1") for f in fr)
        if not any(h in byid[k] for k in match):
            bad += 1
            if bad <= 3:
                print(f"  {label} (all): sampled {';'.join(smp.path)} h={h}: not in the map")
    print(f"  {label} (all modules): {checked} sampled contexts, {in_unwinder} in libgcc_s's unwinder, "
          f"{rewritten} after it rewrote its return address (its own frames compared), {bad} missing")
    return bad, checked, in_unwinder


# Whole-process training (libc too).
if not only:
    for prog in ("fnptr.O2-nofp-pie", "threads.O2-fp-pie", "dlopen.O2-nofp-pie", "exceptions.O2-nofp-pie"):
        bad, checked = whole_process(prog, built("tests/programs/" + prog), ["8"])
        # At most one: under heavy load (a parallel suite next to a benchmark) one
        # sample in a few hundred was missing in 4 of ~20 runs since the live
        # trees landed, never reproduced alone or under a CPU hog; the sample is
        # printed above when it happens.  A real regression misses many.  (One
        # cause of such single misses is gone: exceptions' samples in libstdc++
        # never matched while modules were compared by file name, not build-id.)
        c.check(bad <= 1, f"{prog} (all modules): {bad} of {checked} sampled contexts missing from the map")
    # C++ exceptions most of the time: libgcc_s (stripped) and libstdc++ (loaded by a
    # link name) hold most samples, and libc's string functions that are both called
    # through an IFUNC's choice and jumped into by another variant (strcmp from
    # type_info::__do_catch).  Every context is in the map.
    bad, checked = whole_process("thrower", built("tests/e2e/thrower"), ["60000"], min_checked=100, min_unwinder=50)
    c.check(bad == 0, f"thrower (all modules): {bad} of {checked} sampled contexts missing from the map")
    # __cxa_throw calls into libgcc_s only through _Unwind_RaiseException.  Its last
    # call, _Unwind_DebugHook (stripped: fn_ADDR), comes after the unwinder rewrote
    # its own return slot; the agent once popped its frame for that and recorded
    # __cxa_throw;fn_ADDR (a sample there: 1 in ~10 runs of the check above).
    skipped = sorted({names[i + 1] for _cnt, _hs, names, ids in paths_of(os.path.join(tmp, "thrower.all.icppmap"))
                      for i in range(len(names) - 1) if names[i] == "__cxa_throw"
                      and ids[i + 1].startswith("libgcc_s.") and names[i + 1] != "_Unwind_RaiseException"})
    c.check(not skipped, f"thrower (all modules): __cxa_throw calls {skipped} in libgcc_s directly")

if not only:
    # Every way of ending keeps the data.
    ENDER = built("tests/e2e/ender")
    for mode, want in (("return", 0), ("exit", 4), ("_exit", 5), ("abort", 128 + 6), ("segv", 128 + 11),
                       ("term", 128 + 15), ("thread-exit", 6)):
        mapfile = os.path.join(tmp, f"ender-{mode}.icppmap")
        r = train(ENDER, mapfile, [mode])
        c.check(r.returncode == want and r.stdout == f"ender {mode}\n", f"ender {mode}: rc {r.returncode}, want {want}")
        names = {n[2] for n in paths_of(mapfile)} if os.path.exists(mapfile) else set()
        c.check(any(p[-3:] == ("main", "work", "leaf") for p in names), f"ender {mode}: main;work;leaf not in the map")
        if mode == "thread-exit":
            c.check(any(p[-3:] == ("worker", "work", "leaf") for p in names), "ender thread-exit: worker path lost")
    for sig in (signal.SIGTERM, signal.SIGINT):
        mapfile = os.path.join(tmp, f"ender-kill-{sig}.icppmap")
        p = subprocess.Popen([TRAIN, "-q", "--fresh", "--modules", "main", "-o", mapfile, "--", ENDER, "wait"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        p.stdout.readline()
        time.sleep(0.3)
        kids = subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True, text=True).stdout.split()
        for k in kids:
            os.kill(int(k), sig)
        p.communicate(timeout=60)
        c.check(p.returncode == 128 + sig, f"ender killed by {sig}: rc {p.returncode}")
        names = {n[2] for n in paths_of(mapfile)} if os.path.exists(mapfile) else set()
        c.check(any(x[-3:] == ("main", "spin", "leaf") for x in names), f"ender killed by {sig}: main;spin;leaf lost")

    # Merging is exact: two runs of a deterministic program double every count.
    binary = built("tests/programs/orders.O2-nofp-pie")
    one, two = os.path.join(tmp, "one.icppmap"), os.path.join(tmp, "two.icppmap")
    train(binary, one)
    train(binary, two)
    r = run([TRAIN, "-q", "--modules", "main", "-o", two, "--", binary])
    a = {n[2]: (n[0], n[1]) for n in paths_of(one)}
    b = {n[2]: (n[0], n[1]) for n in paths_of(two)}
    c.check(a.keys() == b.keys() and all(b[k][0] == 2 * a[k][0] and b[k][1] == {h: 2 * v for h, v in a[k][1].items()}
                                         for k in a), "merging two identical runs did not double every count")
    st = run([TRAIN, "--stats", two])
    c.check(st.returncode == 0 and "runs:         2" in st.stdout, f"--stats does not say 2 runs: {st.stdout[:200]}")

    # Bad input: one line, non-zero, nothing of an existing map destroyed.
    def bad(args, want_rc, words, label, mapfile=None):
        before = open(mapfile, "rb").read() if mapfile and os.path.exists(mapfile) else None
        r = run([TRAIN] + args)
        lines = r.stderr.strip().splitlines()
        c.check(r.returncode == want_rc and len(lines) == 1 and all(w in r.stderr for w in words),
                f"{label}: rc={r.returncode} stderr={r.stderr!r}")
        if before is not None:
            c.check(open(mapfile, "rb").read() == before, f"{label}: the existing map changed")

    bad(["--", "/nonexistent/prog"], 127, ["/nonexistent/prog"], "missing program")
    script = os.path.join(tmp, "script.sh")
    open(script, "w").write("#!/bin/sh\necho hi\n")
    os.chmod(script, 0o755)
    bad(["-o", os.path.join(tmp, "s.icppmap"), "--", script], 1, ["not an ELF file"], "non-ELF program")
    bad(["-o", "/nonexistent-dir/x.icppmap", "--", binary], 1, ["cannot write", "/nonexistent-dir"], "unwritable map")
    corrupt = os.path.join(tmp, "corrupt.icppmap")
    shutil.copy(one, corrupt)
    with open(corrupt, "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xff")
    bad(["-o", corrupt, "--", binary], 1, ["corrupt", "--fresh"], "corrupt map", corrupt)
    other = built("tests/programs/recurse.O2-nofp-pie")
    bad(["-o", one, "--", other], 1, ["not of", "build-id"], "map of another binary", one)
    bad(["--max-depth", "0", "--", binary], 2, ["--max-depth"], "bad depth")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
