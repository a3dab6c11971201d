#!/usr/bin/env python3
"""test_concurrency.py -- several writers of one map at once (docs/file-safety.md, "The concurrency rule for maps").

A map is read, merged into and replaced by rename; without a lock the last
rename wins and the other writers' runs are lost, though every writer exits 0.
Here one map (trained once) gets, all at the same time, several `icpp-train`
runs and several `icpp-resolve --save-map` onto itself.  recurse.c's call
counts are deterministic, so the final map must hold exactly:
  - runs: 1 + the training runs;
  - per call path: its entries in one run x (1 + the training runs) -- node
    counts, which learning never changes;
  - per call path: the entries at its heights x (1 + the training runs), plus
    what one --save-map of the recording adds there x the --save-map writers.
Nothing may be left beside the map (no MAP.lock, no MAP.tmp.*), and a lock
file that is a symbolic link is refused, never followed.
"""
import os
import subprocess
import sys
import tempfile

from e2e import SOURCE, Checker, built, map_paths, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("e2e-concurrency")
tmp = tempfile.mkdtemp(prefix="icpp-concur-")
entries = corpus.load_list(built("tests/programs/corpus-list.txt"))
prog = next(e for e in entries if e.prog == "recurse" and e.config == "O2-fp-pie").binary
SCALE = "8"
TRAINS, SAVES, ROUNDS = 3, 3, 2


def per_path(mapfile):
    """{path (names root first, module@address ids): (node count, sum of its heights' counts)}"""
    return {names + ids: (cnt, sum(h.values())) for cnt, h, names, ids in map_paths(mapfile)}


def runs(mapfile):
    r = run([tool("icpp-train"), "--stats", mapfile])
    for line in r.stdout.splitlines():
        if line.startswith("runs:"):
            return int(line.split()[1])
    return None


def train(mapfile, fresh=False):
    return [tool("icpp-train"), "-q"] + (["--fresh"] if fresh else []) + ["-o", mapfile, "--", prog, SCALE]


def save(mapfile, rec):
    return [tool("icpp-resolve"), "-q", "-m", mapfile, "--save-map", mapfile, "-o", os.devnull, rec]


# Ground truth: one training run, and what one --save-map of the recording adds.
ref, rec = os.path.join(tmp, "ref.icppmap"), os.path.join(tmp, "rec.samples")
r = run(train(ref, fresh=True))
c.check(r.returncode == 0, f"training {prog}: {r.stderr}")
r = run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-F", "4000", "--learn=2", "-o", rec, "--", prog, SCALE])
c.check(r.returncode == 0 and os.path.exists(rec), f"icpp-sample --learn: {r.stderr}")
learned = os.path.join(tmp, "learned.icppmap")
run(["cp", ref, learned])
r = run(save(learned, rec))
c.check(r.returncode == 0, f"--save-map onto a copy: {r.stderr}")
one, plus = per_path(ref), per_path(learned)
added = {p: plus[p][1] - one.get(p, (0, 0))[1] for p in plus}
c.check(sum(added.values()) > 0, f"the recording learned nothing: {sum(added.values())}")
c.check(all(v >= 0 for v in added.values()), "a --save-map took entries away")
print(f"one run: {len(one)} paths, {sum(v[0] for v in one.values())} entries; "
      f"one --save-map adds {sum(added.values())} entries on {sum(1 for v in added.values() if v)} paths")

for rnd in range(ROUNDS):
    d = os.path.join(tmp, f"round{rnd}")
    os.mkdir(d)
    m = os.path.join(d, "m.icppmap")
    r = run(train(m, fresh=True))
    c.check(r.returncode == 0, f"round {rnd}: first training: {r.stderr}")
    # All at once: every writer reads the map before any has written it.
    procs = [subprocess.Popen(train(m), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(TRAINS)]
    procs += [subprocess.Popen(save(m, rec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(SAVES)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        c.check(p.returncode == 0, f"round {rnd}: {' '.join(p.args[:2])}: exit {p.returncode}: {err}")
    n = 1 + TRAINS
    got = per_path(m)
    c.check(runs(m) == n, f"round {rnd}: the map counts {runs(m)} runs, want {n}")
    lost_runs = [p for p in one if got.get(p, (0, 0))[0] != n * one[p][0]]
    c.check(not lost_runs, f"round {rnd}: {len(lost_runs)} of {len(one)} paths lack runs' entries, e.g. "
            + "; ".join(f"{';'.join(p[:len(p) // 2][-3:])}: {got.get(p, (0, 0))[0]}, want {n * one[p][0]}" for p in lost_runs[:2]))
    want_h = {p: n * one.get(p, (0, 0))[1] + SAVES * added.get(p, 0) for p in set(one) | set(added)}
    bad_h = [p for p in want_h if got.get(p, (0, 0))[1] != want_h[p]]
    c.check(not bad_h, f"round {rnd}: {len(bad_h)} paths' entries are not {n} runs' plus {SAVES} --save-maps', e.g. "
            + "; ".join(f"{';'.join(p[:len(p) // 2][-3:])}: {got.get(p, (0, 0))[1]}, want {want_h[p]}" for p in bad_h[:2]))
    c.check(set(got) <= set(want_h), f"round {rnd}: paths from nowhere: {sorted(set(got) - set(want_h))[:2]}")
    tot = sum(v[1] for v in got.values())
    print(f"round {rnd}: {runs(m)} runs, {tot} entries (want {sum(want_h.values())})")
    left = sorted(f for f in os.listdir(d) if f != "m.icppmap")
    c.check(not left, f"round {rnd}: left beside the map: {left}")

# The lock file is created without following links: a link there is refused
# by every writer, and its target never created.
d = os.path.join(tmp, "link")
os.mkdir(d)
m, victim = os.path.join(d, "m.icppmap"), os.path.join(tmp, "victim")
os.symlink(victim, m + ".lock")
r = run(train(m, fresh=True))
c.check(r.returncode != 0 and "m.icppmap.lock" in r.stderr and "link" in r.stderr,
        f"icpp-train locked through a link: exit {r.returncode}: {r.stderr}")
c.check(not os.path.exists(victim), "the lock file's link was followed")
os.unlink(m + ".lock")
run(train(m, fresh=True))
os.symlink(victim, m + ".lock")
before = os.path.getsize(m)
r = run(save(m, rec))
c.check(r.returncode != 0 and "m.icppmap.lock" in r.stderr, f"--save-map locked through a link: {r.stderr}")
c.check(not os.path.exists(victim) and os.path.getsize(m) == before, "--save-map wrote through the lock's link")

c.done()
