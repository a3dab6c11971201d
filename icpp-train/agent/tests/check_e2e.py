#!/usr/bin/env python3
"""check_e2e.py -- assertions on an e2e_prog run under the agent (called by run.sh).

usage: check_e2e.py MODE DIR
  MODE exe   only the executable was patched: the CCT must equal the ground
             truth exactly (paths and counts), plus the crt functions.
  MODE libc  executable and libc patched: with libc functions dropped from
             every path, the counts must again equal the ground truth; libc
             paths (malloc, printf, qsort -> cmp_int) must appear.
DIR holds: plain.out plain.rc agent.out agent.rc gt.err dump dump.child.* stats exe.syms
"""
import glob, re, sys
from collections import Counter, defaultdict

mode, d = sys.argv[1], sys.argv[2]
fails = []

def check(cond, msg):
    if not cond:
        fails.append(msg)

def read(p):
    with open(p) as f:
        return f.read()

def parse_dump(path):
    """-> (paths: Counter path->count, heights: path->Counter, sites: path->Counter, threads)"""
    paths, heights, sites, threads = Counter(), defaultdict(Counter), defaultdict(Counter), []
    for line in read(path).splitlines():
        if line.startswith("T "):
            threads.append(dict(kv.split("=", 1) for kv in line[2:].split()))
        elif line.startswith("P "):
            parts = line.split(" ")
            p, c = parts[1], int(parts[2])
            paths[p] += c
            if len(parts) > 3 and parts[3]:
                for hc in parts[3].split(","):
                    h, n = hc.split(":")
                    heights[p][int(h)] += int(n)
        elif line.startswith("S "):
            parts = line.split(" ")
            if len(parts) > 2 and parts[2]:
                for sc in parts[2].split(","):
                    s, n = sc.rsplit(":", 1)
                    sites[parts[1]][s] += int(n)
    return paths, heights, sites, threads

# 1. output and exit status unchanged
check(read(f"{d}/plain.out") == read(f"{d}/agent.out"), "program output differs with the agent")
check(read(f"{d}/plain.rc").strip() == read(f"{d}/agent.rc").strip() == "3",
      f"exit status: plain {read(f'{d}/plain.rc').strip()} agent {read(f'{d}/agent.rc').strip()} (want 3)")

# 2. expected function-level paths
gt = Counter()
for line in read(f"{d}/gt.err").splitlines():
    if line.startswith("GT "):
        _, p, c = line.split(" ")
        if p.startswith("[main];"):
            p = "[main];_start;" + p[len("[main];"):]
        gt[p] += int(c)
# crt code of the executable, which the GT build cannot see:
#   _start is the first patched entry (height 0); libc's __libc_start_main
#   runs _init and frame_dummy (which tail-jumps to register_tm_clones);
#   at exit, _dl_fini runs __do_global_dtors_aux (-> deregister_tm_clones)
#   and _fini.  main's frame is gone by then: exit's return address
#   overwrote main's return-address slot.
crt = {
    "[main];_start": 1,
    "[main];_start;_init": 1,
    "[main];_start;frame_dummy": 1,
    "[main];_start;register_tm_clones": 1,
    "[main];_start;__do_global_dtors_aux": 1,
    "[main];_start;__do_global_dtors_aux;deregister_tm_clones": 1,
    "[main];_start;_fini": 1,
}
expected = gt + Counter(crt)
exe_funcs = set(read(f"{d}/exe.syms").split())

paths, heights, sites, threads = parse_dump(f"{d}/dump")
if mode == "exe":
    got = paths
else:
    # drop non-executable functions from each path; sum counts of nodes whose
    # leaf is an executable function
    got = Counter()
    for p, c in paths.items():
        fs = p.split(";")
        if fs[-1] not in exe_funcs:
            continue
        got[";".join([fs[0]] + [f for f in fs[1:] if f in exe_funcs])] += c
missing = {p: c for p, c in expected.items() if got.get(p) != c}
extra = {p: c for p, c in got.items() if p not in expected}
for p, c in sorted(missing.items())[:10]:
    fails.append(f"path {p[:160]}: expected {c}, got {got.get(p)}")
for p, c in sorted(extra.items())[:10]:
    fails.append(f"unexpected path {p[:160]} count {c}")
print(f"  {mode}: {len(expected)} expected paths ({sum(expected.values())} calls), "
      f"{len(got)} recorded, {len(missing)} wrong, {len(extra)} extra")

# 3. heights against the program's own measurement (PROBE tag height)
probes = defaultdict(Counter)
for line in read(f"{d}/agent.out").splitlines():
    if line.startswith("PROBE "):
        _, tag, h = line.split(" ")
        probes[tag][int(h)] += 1
agent_h = defaultdict(Counter)
for p, hs in heights.items():
    fs = p.split(";")
    if fs[-1] == "probe":
        agent_h[fs[-2]] += hs
for tag, hs in probes.items():
    check(agent_h[tag] == hs, f"heights of probe under {tag}: agent {dict(agent_h[tag])} program {dict(hs)}")
print(f"  {mode}: probe heights agree for {sorted(probes)}: "
      + ", ".join(f"{t}={sorted(probes[t])}" for t in sorted(probes)))
# every node of the same path has one height in this program except
# cmp_int (called at several msort depths)
if mode == "exe":
    for p, hs in heights.items():
        if not p.endswith("cmp_int"):
            check(len(hs) == 1, f"{p[:100]}: several heights {dict(hs)}")
# the thread's start routine sits at mapping top - 4392 (docs/background.md section 1)
check(heights.get("[thread];thread_fn") == Counter({4392: 1}),
      f"thread_fn height {dict(heights.get('[thread];thread_fn', {}))} (want 4392)")

# 4. call sites: a direct call's return address lies in the caller
if mode == "exe":
    nsite = 0
    for p, ss in sites.items():
        fs = p.split(";")
        if len(fs) < 3 or fs[-2] == "_start" or fs[-1] == "cmp_int":
            continue          # called from libc (unpatched here)
        for s, n in ss.items():
            nsite += 1
            check(s.split("+")[0] == fs[-2], f"{p[:100]}: call site {s} is not in {fs[-2]}")
    check(sites["[main];_start;main;asm_call_first;asm_helper"] == Counter({"asm_call_first+0x5": 4}),
          "relocated call: asm_helper must see return address asm_call_first+5")
    check(all(s.startswith("main+") for s in sites["[main];_start;main;tail_callee"]),
          "tail call: tail_callee's return address is in main")
    print(f"  {mode}: {nsite} call sites lie in their callers")

# 5. how each function was hooked
st = read(f"{d}/stats")
refused = {}
for line in st.splitlines():
    m = re.match(r"refused (\S+) (\S+) (\S+) (\S+)", line)
    if m and m.group(1) == "exe":
        refused[m.group(2)] = (m.group(3), m.group(4))
short = {m.group(1) for m in re.finditer(r"^short exe (\S+)$", st, re.M)}
for fn, want in {"asm_nop1": ("int3", "branch_in"), "asm_tiny2": ("int3", "too_short"),
                 "asm_bt": ("int3", "branch_in")}.items():
    check(refused.get(fn) == want, f"{fn}: {refused.get(fn)}, want {want}")
# a branch into byte 2 (asm_loop) or 3 bytes of function (asm_tiny, asm_tiny3):
# a 2-byte jmp to a 5-byte jmp in dead padding (asm_tiny2's padding can run)
check(short == {"asm_loop", "asm_tiny", "asm_tiny3"}, f"short jmps in the executable: {sorted(short)}")
# 1- and 3-byte functions take the jmp over their alignment padding; crt
# functions of size 0 take it with the size up to the next symbol (_fini has
# none after it: int3)
for fn in ["empty_fn", "tiny_zero", "after_longjmp", "asm_jcc", "asm_call_first", "asm_rip",
           "tail_caller", "rec", "probe", "main", "cmp_int", "_start", "frame_dummy",
           "register_tm_clones"]:
    check(fn not in refused, f"{fn} not jmp-patched: {refused.get(fn)}")
check(set(refused) == {"asm_nop1", "asm_tiny2", "asm_bt", "_fini"},
      f"refused in the executable: {sorted(refused)}")

# 5b. int3 sites' direct calls enter their stubs: asm_bt has three (call,
#     jmp and jcc rel32); only the call through a pointer and the jmp rel8
#     trap.  Its five entries share one height: the one the program measured.
calls = {m.group(1): int(m.group(2)) for m in re.finditer(r"^calls exe (\S+) (\d+)$", st, re.M)}
check(calls.get("asm_bt") == 3, f"asm_bt: {calls.get('asm_bt')} direct calls rewritten, want 3")
check(calls.get("asm_nop1", 0) >= 1, f"asm_nop1: {calls.get('asm_nop1')} direct calls rewritten, want >= 1")
traps = {}
for line in read(f"{d}/dump").splitlines():
    if line.startswith("I "):
        _, fn, n = line.split(" ")
        traps[fn] = int(n)
check(traps.get("asm_bt") == 2, f"asm_bt entered {traps.get('asm_bt')} times through int3, want 2")
check(traps.get("asm_nop1") == 0, f"asm_nop1 entered {traps.get('asm_nop1')} times through int3, want 0")
bt = [line.split()[1:] for line in read(f"{d}/agent.out").splitlines() if line.startswith("BT ")]
check(len(bt) == 1 and len(set(bt[0])) == 1, f"asm_bt entry heights as measured by the program: {bt}")
if bt:
    want_h = Counter({int(bt[0][0]): 5})
    got_h = sum((h for p, h in heights.items() if p.endswith(";main;bt_driver;asm_bt")), Counter())
    check(got_h == want_h, f"asm_bt heights {dict(got_h or {})}, want {dict(want_h)}")
print(f"  {mode}: int3 sites: direct calls rewritten {calls}, trap entries {traps}")

# 6. threads: nothing dropped (with libc patched, the test driver's own libc
#    calls inside critical sections are dropped on purpose)
for t in threads:
    for k in ("dropped_reentrant", "dropped_depth", "node_overflow", "pair_overflow") + \
             (("dropped_critical",) if mode == "exe" else ()):
        check(t[k] == "0", f"thread {t['tid']}: {k}={t[k]}")
check(sorted(t["base_kind"] for t in threads) == ["1", "2"], f"threads {threads}")

# 7. fork: the child's dump continues the forking thread's tree
kids = glob.glob(f"{d}/dump.child.*")
check(len(kids) == 1, f"child dumps: {kids}")
if kids:
    cp, _, _, cthreads = parse_dump(kids[0])
    key = [p for p in cp if p.endswith(";main;do_fork;child_work")]
    check(len(key) == 1 and cp[key[0]] == 1, f"child_work in child dump: {key}")
    check(not any(p.endswith("child_work") for p in paths), "child_work in the parent's dump")
    check(sorted(t["inherited"] for t in cthreads) == ["0", "1"], f"child threads {cthreads}")

if mode == "libc":
    def has(rx):
        return any(re.search(rx, p) for p in paths)
    for rx in [r";malloc$", r";main;printf", r";main;sort_driver;qsort$",
               r";main;sort_driver;qsort(_r)?;(.*;)?cmp_int$",
               r"^\[main\];_start;__libc_start_main;main$", r"^\[thread\];thread_fn;"]:
        check(has(rx), f"no path matches {rx}")
    print(f"  libc: {len(paths)} distinct paths recorded")

for f in fails:
    print("FAIL", f)
sys.exit(1 if fails else 0)
