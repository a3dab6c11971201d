#!/usr/bin/env python3
"""test_gt.py -- checks icpp-gt against programs whose truth is known.

Usage: test_gt.py [-v]                        gt_spin tests (meson test 'gt')
       test_gt.py --corpus [corpus-list.txt]  every corpus binary ('gt-corpus')

Paths of the binaries come from the environment (set by tests/gt/meson.build):
ICPP_GT, GT_SPIN_FP (gt_spin.c at -O0 with frame pointers), GT_SPIN_NOFP
(-O2 without), GT_DENY (LD_PRELOAD shim failing perf_event_open).  Without
them, the first build*/tests/gt/ directory of the repository is used.

gt_spin runs main -> a -> b -> c (threads: gt_thread -> a -> b -> c) and
prints its own startstack and thread stack tops, so the test knows the truth:
paths, bases, and that each function's height never changes.
"""

import collections
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import gt  # noqa: E402

PERIOD_NS = 500000          # 2 kHz of CPU time
# Two or three spinning processes or threads on a 2-core VM leave the reader little CPU:
# 65528-byte copies filled the 16 MiB rings (256 samples each) and lost ~260 of ~700
# samples on the AMD guest; gt_spin's stacks are a few KiB, so 16 KiB copies hold 4x as
# long (0 lost in 3 runs).
SPIN_GT = ["--stack-size", "16384"]
OWN = ("main", "a", "b", "c")
THREAD_OWN = ("gt_thread", "a", "b", "c")


def find(env, name):
    """A built file: $ENV, else build*/tests/gt/NAME under the repository."""
    if os.environ.get(env):
        return os.environ[env]
    for d in sorted(os.listdir(ROOT)):
        cand = os.path.join(ROOT, d, "tests", "gt", name)
        if d.startswith("build") and os.path.exists(cand):
            return cand
    raise unittest.SkipTest("%s not built and $%s not set" % (name, env))


def run_gt(args, gt_args=(), cwd=None, preload=None):
    """Run icpp-gt on ARGS.  Returns (exit status, Trace or None, stderr,
    {'startstack': {pid: v}, 'thread': {tid: top}} from gt_spin --info)."""
    icpp_gt = find("ICPP_GT", "icpp-gt")
    with tempfile.TemporaryDirectory(prefix="icpp-gt-test-") as tmp:
        out = os.path.join(tmp, "gt.out")
        env = dict(os.environ)
        if preload:
            env["LD_PRELOAD"] = preload
        p = subprocess.run([icpp_gt, "-c", str(PERIOD_NS), "-o", out]
                           + list(gt_args) + ["--"] + list(args),
                           cwd=cwd or tmp, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        trace = gt.load(out) if os.path.exists(out) and os.path.getsize(out) else None
    info = {"startstack": {}, "thread": {}}
    for line in p.stderr.splitlines():
        f = line.split()
        if line.startswith("gt_spin startstack "):
            info["startstack"][int(f[2])] = int(f[3], 16)
        elif line.startswith("gt_spin thread "):
            info["thread"][int(f[3])] = int(f[4], 16)
    return p.returncode, trace, p.stderr, info


def is_prefix(p, q):
    return tuple(q[:len(p)]) == tuple(p)


class SpinChecks:
    """Assertions shared by the gt_spin runs."""

    def check_basic(self, trace, min_samples=50):
        self.assertIsNotNone(trace, "no output")
        self.assertIsNotNone(trace.trailer, "no trailer line: output truncated")
        n = len(trace.samples)
        self.assertEqual(trace.trailer["samples"], n)
        self.assertGreaterEqual(n, min_samples, "too few samples")
        self.assertLessEqual(trace.trailer["lost"], n // 10, "many samples lost")
        rate = trace.complete_rate
        self.assertGreaterEqual(rate, 0.95, "only %.1f%% unwound to the root: %s"
                                % (100 * rate, collections.Counter(
                                    s.status for s in trace.samples)))

    def check_paths(self, trace, own, exe):
        """Projected on OWN, every complete sample's path is a prefix of OWN;
        samples whose leaf is OWN[-1] have exactly OWN, and in the executable
        _start;OWN.  Returns the samples with leaf OWN[-1]."""
        leafs = []
        for s in trace.samples:
            if not s.complete:
                continue
            proj = s.project(set(own))
            self.assertTrue(is_prefix(proj, own), "path %s" % (s.path,))
            if s.leaf.name == own[-1] and s.leaf.module == exe:
                self.assertEqual(proj, own)
                if own[0] == "main":
                    self.assertEqual(s.own_path(exe), ("_start",) + own)
                else:
                    self.assertEqual(s.own_path(exe), own)
                leafs.append(s)
        self.assertGreaterEqual(len(leafs), 0.7 * len(trace.samples),
                                "few samples in %s" % own[-1])
        return leafs

    def check_heights(self, samples, own):
        """Every function of OWN has one height (base - entry SP) in all
        samples, and heights grow towards the leaf."""
        heights = collections.defaultdict(set)
        for s in samples:
            self.assertIsNotNone(s.base)
            for f in s.frames:
                if f.name in own:
                    self.assertIsNotNone(f.entry_sp)
                    heights[f.name].add(s.height(f))
        for name in own:
            self.assertEqual(len(heights[name]), 1,
                             "%s has heights %s" % (name, sorted(heights[name])))
        hs = [next(iter(heights[n])) for n in own]
        self.assertEqual(hs, sorted(hs))
        self.assertEqual(len(set(hs)), len(hs))
        self.assertTrue(all(h > 0 and h % 8 == 0 for h in hs), hs)
        return hs


class TestSpin(unittest.TestCase, SpinChecks):

    def test_fp_build(self):
        """-O0 with frame pointers: paths, bases, heights, and the kernel's
        frame-pointer callchain agrees with the CFI unwind."""
        prog = find("GT_SPIN_FP", "gt_spin.O0-fp")
        rc, t, err, info = run_gt([prog, "--info", "--ms", "400"])
        self.assertEqual(rc, 0, err)
        self.check_basic(t)
        self.assertEqual(t.exe, prog)
        leafs = self.check_paths(t, OWN, prog)
        (pid, ss), = info["startstack"].items()
        self.assertEqual(t.pid, pid)
        for s in t.samples:
            self.assertEqual((s.base, s.base_kind), (ss, "startstack"))
        hs = self.check_heights(leafs, OWN)
        # Leaf in its body: CFA = rbp + 16, so entry SP = rbp + 8.
        for s in leafs:
            if s.leaf.cfa_rule == "rbp":
                self.assertEqual(s.leaf.entry_sp, s.bp + 8)
        verdicts = collections.Counter(s.fp_chain_agrees(prog) for s in t.samples)
        self.assertEqual(verdicts[False], 0, "FP chain disagrees")
        self.assertGreaterEqual(verdicts[True], 0.9 * len(t.samples))
        print("\n  fp: %d samples, %.1f%% to root, FP chain agrees on %d/%d, "
              "heights %s" % (len(t.samples), 100 * t.complete_rate,
                              verdicts[True], len(t.samples), hs), file=sys.stderr)

    def test_nofp_build(self):
        """-O2 without frame pointers: the same paths through CFI alone."""
        prog = find("GT_SPIN_NOFP", "gt_spin.O2-nofp")
        rc, t, err, info = run_gt([prog, "--info", "--ms", "400"])
        self.assertEqual(rc, 0, err)
        self.check_basic(t)
        leafs = self.check_paths(t, OWN, prog)
        (pid, ss), = info["startstack"].items()
        self.assertTrue(all(s.base == ss for s in t.samples))
        hs = self.check_heights(leafs, OWN)
        # No frame pointer anywhere on the path: all CFAs are rsp-based.
        for s in leafs:
            self.assertTrue(all(f.cfa_rule == "rsp" for f in s.frames
                                if f.name in OWN), s.frames)
        agree = collections.Counter(s.fp_chain_agrees(prog) for s in t.samples)
        print("\n  nofp: %d samples, %.1f%% to root, heights %s, FP chain "
              "usable on %d" % (len(t.samples), 100 * t.complete_rate, hs,
                                agree[True]), file=sys.stderr)

    def test_threads(self):
        """Thread samples: base = top of the thread's stack mapping (as
        pthread_getattr_np reports it), paths gt_thread;a;b;c."""
        prog = find("GT_SPIN_NOFP", "gt_spin.O2-nofp")
        rc, t, err, info = run_gt([prog, "--info", "--threads", "2", "--ms", "300"], gt_args=SPIN_GT)
        self.assertEqual(rc, 0, err)
        self.check_basic(t)
        tops = info["thread"]
        self.assertEqual(len(tops), 2)
        thr = [s for s in t.samples if not s.main_thread]
        self.assertGreaterEqual(len(thr), 0.9 * len(t.samples))
        for s in thr:
            self.assertEqual((s.base, s.base_kind), (tops[s.tid], "map"))
        self.assertEqual({s.tid for s in thr}, set(tops))
        sub = gt.Trace()
        sub.samples = thr
        leafs = self.check_paths(sub, THREAD_OWN, prog)
        hs = self.check_heights(leafs, THREAD_OWN)
        print("\n  threads: %d samples, heights %s" % (len(thr), hs), file=sys.stderr)

    def test_fork(self):
        """A forked child inherits the parent's startstack and mappings."""
        prog = find("GT_SPIN_FP", "gt_spin.O0-fp")
        rc, t, err, info = run_gt([prog, "--info", "--fork", "--ms", "250"], gt_args=SPIN_GT)
        self.assertEqual(rc, 0, err)
        self.check_basic(t)
        self.check_paths(t, OWN, prog)
        pids = {s.pid for s in t.samples}
        self.assertEqual(pids, set(info["startstack"]))
        child, = pids - {t.pid}
        self.assertIn(child, [e[2] for e in t.events if e[1] == "fork"])
        for s in t.samples:
            self.assertEqual(s.base, info["startstack"][s.pid])
            self.assertEqual(s.base_kind, "fork" if s.pid == child else "startstack")
        self.check_heights([s for s in t.samples if s.leaf.name == "c"], OWN)

    def test_exec(self):
        """After an exec, mappings come from MMAP2 records and the base is
        the new image's startstack."""
        prog = find("GT_SPIN_FP", "gt_spin.O0-fp")
        rc, t, err, info = run_gt([prog, "--info", "--exec", "--ms", "200"], gt_args=SPIN_GT)
        self.assertEqual(rc, 0, err)
        self.check_basic(t)
        self.check_paths(t, OWN, prog)
        self.assertIn("exec", [e[1] for e in t.events])
        bases = {s.base for s in t.samples}
        # Two images of one pid: gt_spin printed its startstack in each.
        printed = [int(l.split()[3], 16) for l in err.splitlines()
                   if l.startswith("gt_spin startstack")]
        self.assertEqual(len(printed), 2)
        self.assertEqual(bases, set(printed))
        kinds = collections.Counter(s.base_kind for s in t.samples)
        self.assertEqual(set(kinds), {"startstack", "exec"})
        self.assertTrue(all(s.base == printed[1] for s in t.samples
                            if s.base_kind == "exec"))

    def test_exit_status(self):
        prog = find("GT_SPIN_FP", "gt_spin.O0-fp")
        rc, t, _, _ = run_gt([prog, "--ms", "20", "--exit", "3"])
        self.assertEqual(rc, 3)
        self.assertEqual(t.trailer["exit"], 3)
        rc, t, _, _ = run_gt([prog, "--ms", "20", "--kill", "15"])
        self.assertEqual(rc, 128 + 15)
        rc, t, err, _ = run_gt(["/nonexistent/program"])
        self.assertEqual(rc, 127)
        self.assertIn("cannot run /nonexistent/program", err)
        self.assertIsNone(t)

    def test_permission_message(self):
        """A refused perf_event_open: exit 125, the cause and the fix."""
        prog = find("GT_SPIN_FP", "gt_spin.O0-fp")
        rc, _, err, _ = run_gt([prog, "--ms", "20"], preload=find("GT_DENY", "gt_deny.so"))
        self.assertEqual(rc, 125, err)
        self.assertIn("Permission denied", err)
        self.assertIn("perf_event_paranoid", err)
        self.assertIn("fix:", err)

    def test_unprivileged(self):
        """As an ordinary user (nobody), icpp-gt samples its own child."""
        if os.geteuid() != 0:
            self.skipTest("not root: the other tests already ran unprivileged")
        setpriv = shutil.which("setpriv")
        if not setpriv:
            self.fail("no setpriv (util-linux): the unprivileged run cannot be checked")
        with tempfile.TemporaryDirectory(prefix="icpp-gt-nobody-") as tmp:
            os.chmod(tmp, 0o777)
            exe = os.path.join(tmp, "gt_spin")
            icpp_gt = os.path.join(tmp, "icpp-gt")
            shutil.copy(find("GT_SPIN_NOFP", "gt_spin.O2-nofp"), exe)
            shutil.copy(find("ICPP_GT", "icpp-gt"), icpp_gt)
            for f in (exe, icpp_gt):
                os.chmod(f, 0o755)
            wrap = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all"]
            # A quarter of the rate, four times as long: as nobody the ring is
            # small (the locked-memory limit), and next to a parallel build
            # 2 kHz of 16 KiB stack copies lost 13% of the samples once.
            p = subprocess.run(wrap + [icpp_gt, "-c", str(4 * PERIOD_NS), "-o",
                                       os.path.join(tmp, "gt.out"), "--", exe,
                                       "--info", "--ms", "1000"],
                               cwd=tmp, capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            t = gt.load(os.path.join(tmp, "gt.out"))
        self.check_basic(t, min_samples=50)
        self.check_paths(t, OWN, exe)
        ss = [int(l.split()[3], 16) for l in p.stderr.splitlines()
              if l.startswith("gt_spin startstack")]
        self.assertTrue(all(s.base == ss[0] for s in t.samples))


# ------------------------------------------------------------------ corpus

def base_name(name):
    """foo.cold -> foo (gcc's split part belongs to its function; icpp-gt
    names such frames by their function already)."""
    return name[:-5] if name and name.endswith(".cold") else name


CORPUS_PERIOD_NS = 250000   # 4 kHz: the programs run for tens of ms


def check_entry(e):
    """Run one corpus binary under icpp-gt; (report line, error messages)."""
    import corpus
    required, optional = corpus.paths_for(e)
    documented = required | optional
    own = {f for p in documented for f in p}
    mods = set(corpus.modules(e))
    expect = corpus.expected(e)
    with tempfile.TemporaryDirectory(prefix="icpp-gt-corpus-") as tmp:
        rc, t, err, _ = run_gt([e.binary], gt_args=["-c", str(CORPUS_PERIOD_NS)],
                               cwd=tmp)
    errors = []
    if rc != expect.exit:
        errors.append("exit %d, documented %d: %s" % (rc, expect.exit, err[-500:]))
    if t is None or t.trailer is None:
        return "%s.%s: no output" % (e.prog, e.config), errors + ["no complete output"]
    n = len(t.samples)
    done = [s for s in t.samples if s.complete]
    bad = collections.Counter()
    seen = set()
    fp = collections.Counter()
    for s in done:
        # Project on the program's own functions; foo.cold counts as foo.
        frames = [f for f in s.frames if f.module in mods and base_name(f.name) in own]
        proj = tuple(base_name(f.name) for f in frames)
        if proj and proj not in documented:
            bad[proj] += 1
        elif proj:
            seen.add(proj)
        if "fp" in e.tags:
            for m in mods:
                v = s.fp_chain_agrees(m, {f.name for f in frames})
                if v is not None:
                    fp[v] += 1
    for p, c in bad.most_common(5):
        errors.append("undocumented path %s (%d samples)" % (corpus.format_path(p), c))
    if n < 20:
        errors.append("only %d samples" % n)
    elif len(done) < 0.9 * n:
        errors.append("only %d of %d samples unwound to the root: %s" % (
            len(done), n, collections.Counter(s.status for s in t.samples)))
    if not seen:
        errors.append("no sample in a documented path")
    if fp[False]:
        errors.append("kernel FP chain disagrees on %d samples" % fp[False])
    line = ("%s.%s: %d samples, %d to the root, %d documented paths seen"
            % (e.prog, e.config, n, len(done), len(seen)))
    if "fp" in e.tags:
        line += ", FP chain agrees %d/%d" % (fp[True], fp[True] + fp[False])
    return line, errors


def check_stripped_cold(e, stripped):
    """cold.c stripped: hot.cold is an FDE without a symbol.  icpp-gt must
    give its frames hot's identity by the code rule (gt_cold.c): named by
    the unstripped twin's symbols, every complete path projects on a
    documented path, main;hot;slow;leaf and main;viaptr;slow;leaf are seen
    (slow called from the cold parts), and some frames' pcs lie in hot.cold."""
    import corpus
    required, optional = corpus.paths_for(e)
    documented = required | optional
    own = {f for p in documented for f in p}
    syms, cold = {}, None
    for line in subprocess.run(["nm", "-S", e.binary], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "tT":
            syms[int(f[0], 16)] = f[3]
            if f[3] == "hot.cold":
                cold = (int(f[0], 16), int(f[0], 16) + int(f[1], 16))
    label = os.path.basename(stripped)
    errors = []
    if cold is None:
        return label, ["%s has no hot.cold symbol: gcc did not split hot" % e.binary]
    with tempfile.TemporaryDirectory(prefix="icpp-gt-cold-") as tmp:
        rc, t, err, _ = run_gt([stripped, "8"], gt_args=["-c", str(CORPUS_PERIOD_NS)], cwd=tmp)
    if rc != 0 or t is None:
        return label, ["icpp-gt failed (%s): %s" % (rc, err[-300:])]
    # runtime = link-time + bias; bias = start - pgoff - (vaddr - offset) of the executable PT_LOAD
    slide = 0
    for line in subprocess.run(["readelf", "-lW", stripped], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD" and "E" in f[6:-1]:
            slide = int(f[2], 16) - int(f[1], 16)
    bias = {m[0]: m[2] - m[4] - slide for m in t.maps if m[6] == stripped and m[5].startswith("r-x")}
    done = [s for s in t.samples if s.complete]
    seen, in_cold = set(), 0
    bad = collections.Counter()
    for s in done:
        frames = [f for f in s.frames if f.module == stripped]
        names = [syms.get(f.func, "?") for f in frames]
        in_cold += sum(1 for f in frames if s.pid in bias and cold[0] <= f.pc - bias[s.pid] - (f is not s.leaf) < cold[1]
                       and syms.get(f.func) == "hot")
        proj = tuple(n for n in names if n in own)
        if any(".cold" in n for n in names) or (proj and proj not in documented):
            bad[tuple(names)] += 1
        elif proj:
            seen.add(proj)
    for p, c in bad.most_common(3):
        errors.append("frames %s (%d samples)" % (";".join(p), c))
    # viaptr (called only through a pointer; viaptr.cold jumps back into it) is a function
    for want in (("main", "hot", "slow", "leaf"), ("main", "viaptr", "slow", "leaf")):
        if want not in seen:
            errors.append("%s not seen: %s" % (";".join(want), sorted(seen)))
    if in_cold < 5:
        errors.append("only %d frames in hot.cold named hot" % in_cold)
    return "%s: %d samples, %d complete, %d frames in hot.cold named hot, %d documented paths" % (
        label, len(t.samples), len(done), in_cold, len(seen)), errors


def check_corpus(list_path):
    """For every corpus binary: exit status as documented, and every sampled
    path that unwound to the root, projected on the program's own functions,
    is a documented path; with frame pointers, the kernel's FP chain agrees
    with the unwind.  Returns the number of failing binaries."""
    import concurrent.futures
    import corpus
    entries = corpus.load_list(list_path)
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for e, (line, errors) in zip(entries, pool.map(check_entry, entries)):
            print("%-4s %s" % ("FAIL" if errors else "ok", line))
            for msg in errors:
                print("       " + msg)
            failures += bool(errors)
    # stripped twins (GT_COLD_PAIRS: "UNSTRIPPED|STRIPPED;...", from meson)
    by_path = {e.binary: e for e in entries}
    for pair in filter(None, os.environ.get("GT_COLD_PAIRS", "").split(";")):
        full, stripped = pair.split("|")
        line, errors = check_stripped_cold(by_path[full], stripped)
        print("%-4s %s" % ("FAIL" if errors else "ok", line))
        for msg in errors:
            print("       " + msg)
        failures += bool(errors)
    print("%d binaries, %d failed" % (len(entries), failures))
    return failures


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--corpus":
        try:
            path = sys.argv[2] if len(sys.argv) > 2 else None
            sys.exit(1 if check_corpus(path) else 0)
        except unittest.SkipTest as e:
            print("SKIP:", e)
            sys.exit(77)
    unittest.main(verbosity=2)
