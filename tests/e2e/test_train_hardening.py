#!/usr/bin/env python3
"""test_train_hardening.py -- icpp-train must not change what the program experiences, and must say
precisely what it could not learn (issue #28, items 3, 13, 14; docs/train.md):

- trapper.c installs its own SIGTRAP handler (sigaction, then signal) and calls a function the agent
  hooks with int3: its handler sees exactly its own traps (raise, an int3 of its own) with their
  siginfo, sigaction reports its handler, its output and exit status are unchanged, and the map holds
  its documented paths with the trap entries counted;
- under RLIMIT_FSIZE and RLIMIT_NOFILE (sh -c 'ulimit -f 16; exec ls -la /usr/lib'; limits.c with a
  thread and a fork child) the program runs as without the agent (no SIGXFSZ, same stdout and status,
  its limits and descriptors as it set them), and icpp-train names each thread whose training could
  not be written and why, without claiming a kill;
- a tree memory too small (ICPP_TRAIN_MAX_MB) is reported in the summary with the entries and paths
  lost and what to do; --stats' entries are the whole run's (every thread's), checked against the
  map's own path counts of a multi-threaded corpus program; --help and the man page document it."""
import os
import re
import shutil
import tempfile

from e2e import SOURCE, Checker, built, map_paths, run, tool

c = Checker("e2e-train-hardening")
TRAIN = tool("icpp-train")
tmp = tempfile.mkdtemp(prefix="icpp-train-hardening-")


def prog(rel):
    """A test program of this build; of this source tree's build when ICPP_BUILD is an older build
    without it (to run this test against an older icpp-train)."""
    p = built(rel)
    return p if os.path.exists(p) else os.path.join(SOURCE, "build", rel)


def train(args, env=None, fresh=True, out=None, opts=()):
    out = out or os.path.join(tmp, "m.icppmap")
    if fresh and os.path.exists(out):
        os.unlink(out)
    e = dict(os.environ)
    e.update(env or {})
    r = run([TRAIN] + list(opts) + (["--fresh"] if fresh else []) + ["-o", out, "--"] + args, env=e)
    return r, out


def ends_with(paths, tail):
    """Count of the paths whose names end with tail."""
    return sum(cnt for cnt, _, names, _ in paths if names[-len(tail):] == tuple(tail))


# ---- item 13: a program with its own SIGTRAP handler -------------------------------------------
TRAPPER = prog("tests/e2e/trapper")
plain = run([TRAPPER])
c.check(plain.returncode == 0 and "ok" in plain.stdout, f"trapper alone: {plain.returncode} {plain.stdout}")
r = run([TRAIN, "-v", "--fresh", "-o", os.path.join(tmp, "trap.icppmap"), "--", TRAPPER])
c.check(r.returncode == plain.returncode and r.stdout == plain.stdout,
        f"trapper under icpp-train: status {r.returncode}, stdout {r.stdout!r}; alone: {plain.returncode}, "
        f"{plain.stdout!r}; stderr: {r.stderr[-2000:]}")
c.check(re.search(r"trap_me at \+0x[0-9a-f]+ size \d+: int3", r.stderr),
        f"trap_me is not int3-hooked (the test would prove nothing): {r.stderr[-2000:]}")
c.check(re.search(r"int3: trap_me \(.*\): 150 entries through the trap", r.stderr),
        f"trap_me's 150 calls through a pointer did not all go through the agent's trap: {r.stderr[-2000:]}")
if os.path.exists(os.path.join(tmp, "trap.icppmap")):
    ps = map_paths(os.path.join(tmp, "trap.icppmap"))
    c.check(ends_with(ps, ["main", "trap_me"]) == 150, f"main;trap_me: {ends_with(ps, ['main', 'trap_me'])} != 150")
    c.check(ends_with(ps, ["main", "own_int3"]) == 2, f"main;own_int3: {ends_with(ps, ['main', 'own_int3'])} != 2")
else:
    c.check(False, f"trapper: no map: {r.stderr[-2000:]}")
print(f"trapper: status {r.returncode}, {r.stdout.strip()}")

# ---- item 3: limits -----------------------------------------------------------------------------
# The brief's case: the shell lowers RLIMIT_FSIZE (hard and soft) and execs ls.
cmd = ["sh", "-c", "ulimit -f 16; exec ls -la /usr/lib"]
plain = run(cmd)
r, m = train(cmd)
c.check(plain.returncode == 0 and r.returncode == plain.returncode and r.stdout == plain.stdout,
        f"ulimit -f 16; exec ls: status {r.returncode} under icpp-train, {plain.returncode} alone; "
        f"stdout same: {r.stdout == plain.stdout}; stderr: {r.stderr[-1500:]}")
c.check("killed" not in r.stderr, f"ulimit -f: icpp-train claims a kill: {r.stderr[-1500:]}")
lost = re.findall(r"^icpp-train: pid (\d+) \((\S+)\): thread (\d+)'s training could not be written: (.*)$",
                  r.stderr, re.M)
c.check(all(w.startswith("file size limit (RLIMIT_FSIZE)") for *_, w in lost),
        f"ulimit -f: reasons {lost}")
c.check(any(p == "ls" for _, p, _, _ in lost), f"ulimit -f: ls's lost training not named: {r.stderr[-1500:]}")
print(f"ulimit -f 16; exec ls: status {r.returncode}; lost {lost}")

LIMITS = prog("tests/e2e/limits")
for mode in ("nofile", "nofile-soft", "fsize"):
    plain = run([LIMITS, mode])
    r, m = train([LIMITS, mode])
    c.check(plain.returncode == 5 and "child exit 7" in plain.stdout, f"limits {mode} alone: {plain.stdout}")
    c.check(r.returncode == plain.returncode and r.stdout == plain.stdout,
            f"limits {mode}: status {r.returncode} vs {plain.returncode}, stdout {r.stdout!r} vs {plain.stdout!r}")
    c.check("killed" not in r.stderr, f"limits {mode}: icpp-train claims a kill: {r.stderr}")
    lost = re.findall(r"^icpp-train: pid (\d+) \(limits\): thread (\d+)'s training could not be written: (.*)$",
                      r.stderr, re.M)
    ps = map_paths(m) if os.path.exists(m) else []
    why = "open file limit (RLIMIT_NOFILE)" if mode == "nofile" else "file size limit (RLIMIT_FSIZE)"
    c.check(all(w.startswith(why) for *_, w in lost), f"limits {mode}: reasons {lost}")
    pid = {int(t): int(p) for p, t, _ in lost}
    # each of the three threads (main, its thread, the fork child's) is in the map, or named as
    # lost: the main thread (tid == pid, the smallest pid), the thread (tid != pid), the child
    # (another pid, tid == pid)
    main_pid = min(pid.values()) if pid else None
    for what, tail, named in (
            ("main thread", ["main", "main_work"], lambda p, t: p == t == main_pid),
            ("thread", ["thread_main", "thread_work"], lambda p, t: p != t),
            ("child", ["main", "child_work"], lambda p, t: p == t and p != main_pid)):
        here = ends_with(ps, tail)
        said = [(p, t, w) for p, t, w in lost if named(int(p), int(t)) and w.endswith("it is lost")]
        c.check((here == 1) != bool(said), f"limits {mode}: the {what}: {here} in the map, lost lines {said}")
    if mode == "nofile-soft":
        # the hard limit lets the agent raise the soft one for its writes: nothing is lost
        c.check(not lost, f"limits {mode}: lost {lost}")
    if mode == "nofile":
        # no descriptor left: the thread's and the child's parts cannot be written (their live
        # files could not be made either): both are named
        c.check(len(lost) >= 2, f"limits {mode}: {lost}")
    print(f"limits {mode}: status {r.returncode}; lost {lost}")

# ---- item 14: tree memory and the run's counters ------------------------------------------------
RECURSE = built("tests/programs/recurse.O2-nofp-pie")
r, m = train([RECURSE], env={"ICPP_TRAIN_MAX_MB": "0.1"})
st = run([TRAIN, "--stats", m]).stdout if os.path.exists(m) else ""
meta = dict(re.findall(r"^([a-z-]+) +(\d+)", st, re.M))
w = re.search(r"^icpp-train: warning: the tree memory of 1 thread was full \(ICPP_TRAIN_MAX_MB=0\.1 MiB per "
              r"thread\): (\d+) of (\d+) entries \([\d.]+%\) were not recorded, on (?:more than )?(\d+) call paths"
              r".*; set ICPP_TRAIN_MAX_MB higher \(e\.g\. ICPP_TRAIN_MAX_MB=\d+\) and train again$", r.stderr, re.M)
c.check(w is not None, f"ICPP_TRAIN_MAX_MB=0.1: no overflow warning: {r.stderr}")
if w:
    c.check(int(meta.get("node-overflow", -1)) == int(w.group(1)) > 0 and int(meta.get("entries", -1)) ==
            int(w.group(2)), f"warning {w.groups()} vs --stats {meta}")
    # the entries the map holds are what the run recorded less what was lost; the map lacks some of
    # recurse's documented paths (128 descend levels, 41 ping/pong levels, 18 fib levels)
    ps = map_paths(m)
    held = sum(cnt for cnt, _, _, _ in ps)
    c.check(held + int(w.group(1)) == int(w.group(2)), f"map holds {held} entries, {w.groups()} lost")
    c.check(int(w.group(3)) > 0 and ends_with(ps, ["descend"] * 128 + ["descend_work"]) == 0,
            f"lost paths {w.group(3)}; the deepest descend is in the map")
print(f"ICPP_TRAIN_MAX_MB=0.1: {w and w.group(0)}")

THREADS = built("tests/programs/threads.O2-nofp-pie")
r, m = train([THREADS], opts=["--modules", "main"])
st = run([TRAIN, "--stats", m]).stdout if os.path.exists(m) else ""
meta = dict(re.findall(r"^([a-z-]+) +(\d+)", st, re.M))
ps = map_paths(m) if os.path.exists(m) else []
total = sum(cnt for cnt, _, _, _ in ps)
# every entry the run recorded is in some path's count: the paths' sum is the whole run's
c.check(int(meta.get("threads", 0)) == 6 and int(meta.get("entries", -1)) == total,
        f"threads: --stats entries {meta.get('entries')} vs the paths' counts {total} ({meta})")
c.check(re.search(r"^entries +\d+ \(all threads of all runs\)$", st, re.M), f"--stats does not say whose: {st}")
# the documented calls: 4 workers x 5 calls, helper 2, main_work 1 (plus what main itself calls)
c.check(ends_with(ps, ["worker"]) == 4 and ends_with(ps, ["helper", "helper_leaf"]) == 1,
        f"threads: worker {ends_with(ps, ['worker'])}, helper_leaf {ends_with(ps, ['helper', 'helper_leaf'])}")
# a second run: the counters add up over runs, as threads and processes do
r2, _ = train([THREADS], fresh=False, out=m, opts=["--modules", "main"])
st2 = run([TRAIN, "--stats", m]).stdout
meta2 = dict(re.findall(r"^([a-z-]+) +(\d+)", st2, re.M))
c.check(int(meta2.get("entries", -1)) == 2 * total, f"two runs: entries {meta2.get('entries')} vs {2 * total}")
print(f"threads: entries {meta.get('entries')} = paths' counts {total}")

h = run([TRAIN, "--help"]).stdout
c.check("ICPP_TRAIN_MAX_MB" in h and "node-overflow" in h, "--help does not document ICPP_TRAIN_MAX_MB")
man = open(os.path.join(SOURCE, "docs", "man", "icpp-train.1.scd")).read()
c.check("ICPP_TRAIN_MAX_MB" in man and "node-overflow" in man, "the man page does not document ICPP_TRAIN_MAX_MB")

if c.failed == 0:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
