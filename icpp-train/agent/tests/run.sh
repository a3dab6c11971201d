#!/bin/sh
# run.sh -- build the agent by hand and run its tests: relocation units, end-to-end (exe, exe+libc),
# live patching under running threads, and the per-call cost benchmark.
# usage: tests/run.sh [OUTDIR [ICPP_TRAIN]]   (default: $TMPDIR/icpp-agent-tests; nothing is written in the repo;
#        with ICPP_TRAIN, the built icpp-train also trains the e2e program: its int3 counts end to end)
#        BENCH=0 tests/run.sh       skip the benchmark
set -eu
A=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$(cd "$A/../.." && pwd)
O=${1:-${TMPDIR:-/tmp}/icpp-agent-tests}
mkdir -p "$O"
CC=${CC:-gcc}

# Flags: see BUILD.md.  REC_FLAGS for code that runs inside a patched entry.
COMMON="-O2 -g -fPIC -Wall -Wextra -D_GNU_SOURCE -fvisibility=hidden -I$ROOT/lib"
REC_FLAGS="$COMMON -mgeneral-regs-only -fno-builtin -fno-tree-loop-distribute-patterns -fno-stack-protector -fcf-protection=none -fno-plt"

echo "== build"
for f in recorder sys trap; do $CC -c $REC_FLAGS "$A/$f.c" -o "$O/$f.o"; done
$CC -c -I"$A" "$A/tramp.S" -o "$O/tramp.o"
for f in patch reloc; do $CC -c $COMMON "$A/$f.c" -o "$O/$f.o"; done
$CC -c $COMMON "$ROOT/lib/lde.c" -o "$O/lde.o"      # lib/lde.c: shared with the function table
$CC -c $COMMON "$ROOT/lib/x86stack.c" -o "$O/x86stack.o"   # lib/x86stack.c: the shared Zydis decoder
$CC -c $COMMON "$ROOT/lib/err.c" -o "$O/err.o"
$CC -c $COMMON "$A/tests/testpreload.c" -o "$O/testpreload.o"
AGENT_OBJS="$O/recorder.o $O/sys.o $O/trap.o $O/tramp.o $O/patch.o $O/reloc.o $O/lde.o $O/x86stack.o $O/err.o"
$CC -shared -o "$O/libicpp_agent_test.so" $AGENT_OBJS "$O/testpreload.o" \
    -lZydis -lelf -lpthread -ldl -Wl,-z,noexecstack -Wl,-z,now
AGENT="$O/libicpp_agent_test.so"
# the agent alone (what the integrator builds), for test_live
$CC -shared -o "$O/libicpp_agent.so" $AGENT_OBJS -lZydis -lpthread -Wl,-z,noexecstack -Wl,-z,now

echo "== the recorder calls nothing outside itself"
# Only cross-references among recorder.o/sys.o/trap.o/tramp.o are allowed.
UNDEF=$(nm -u "$O/recorder.o" "$O/sys.o" "$O/trap.o" "$O/tramp.o" | awk 'NF==2{print $2}' | sort -u |
        grep -v -x -e _GLOBAL_OFFSET_TABLE_ -e icpp_agent_maps_find -e icpp_agent_list_threads -e icpp_agent_record -e icpp_agent_tls_ \
                   -e icpp_agent_restore_rt -e icpp_agent_utoa || true)
if [ -n "$UNDEF" ]; then echo "FAIL: recorder objects reference: $UNDEF"; exit 1; fi
# The length decoder (lib/lde.c) is plain C: no libc, nothing outside itself.
UNDEF=$(nm -u "$O/lde.o" | awk 'NF==2{print $2}' | grep -v -x _GLOBAL_OFFSET_TABLE_ || true)
if [ -n "$UNDEF" ]; then echo "FAIL: lde.o references: $UNDEF"; exit 1; fi
echo "  ok"

echo "== relocation unit tests"
$CC -O1 -g -Wall -D_GNU_SOURCE -I"$ROOT/lib" "$A/tests/test_reloc.c" "$A/reloc.c" "$ROOT/lib/lde.c" "$ROOT/lib/x86stack.c" -lZydis -o "$O/test_reloc"
"$O/test_reloc"

echo "== end-to-end program"
$CC -O2 -g -pthread "$A/tests/e2e_prog.c" -o "$O/e2e"
$CC -O2 -g -pthread -DGT "$A/tests/e2e_prog.c" -o "$O/e2e_gt"
nm "$O/e2e" | awk '$2 ~ /^[tTwW]$/ {print $3}' > "$O/exe.syms"
# the build must have what the test relies on
objdump -d --no-show-raw-insn "$O/e2e" > "$O/e2e.dis"
awk '/<tail_caller>:/,/^$/' "$O/e2e.dis" | grep -q 'jmp.*<tail_callee>' ||
    { echo "FAIL: tail_caller does not tail-jump to tail_callee"; exit 1; }
awk '/<probe>:/{getline a; getline b; print a; print b; exit}' "$O/e2e.dis" | tr '\n' ' ' |
    grep -q 'push *%rbp.*mov *%rsp,%rbp' || { echo "FAIL: probe has no frame pointer"; exit 1; }

run_e2e() {   # $1 = mode (exe|libc), $2 = modules
    D="$O/e2e-$1"
    rm -rf "$D"; mkdir -p "$D"
    set +e
    "$O/e2e" > "$D/plain.out"; echo $? > "$D/plain.rc"
    "$O/e2e_gt" > /dev/null 2> "$D/gt.err"
    ICPP_AGENT_TEST_MODULES=$2 ICPP_AGENT_TEST_OUT="$D/dump" ICPP_AGENT_TEST_STATS="$D/stats" \
        LD_PRELOAD="$AGENT" "$O/e2e" > "$D/agent.out"; echo $? > "$D/agent.rc"
    set -e
    cp "$O/exe.syms" "$D/exe.syms"
    python3 "$A/tests/check_e2e.py" "$1" "$D"
    echo "  ok ($1)"
}
run_e2e exe exe
run_e2e libc exe,libc
echo "  refused functions by reason:"
grep '^reason' "$O/e2e-libc/stats" | grep -v ' ok ' | sed 's|^|    |'
grep '^module' "$O/e2e-libc/stats" | sed 's|^|    |'

if [ -n "${2:-}" ]; then
    echo "== icpp-train: int3 trap entries per function, summed over the processes (e2e forks)"
    D="$O/e2e-train"; rm -rf "$D"; mkdir -p "$D"
    "$2" -v --fresh --modules main -o "$D/map" -- "$O/e2e" > "$D/out" 2> "$D/err" || [ $? = 3 ]
    "$2" --stats "$D/map" > "$D/stats"
    python3 - "$D" <<'PY'
import re, sys
d = sys.argv[1]
fails = []
st, err = open(f"{d}/stats").read(), open(f"{d}/err").read()
# asm_bt: pointer and jmp rel8 trap, its 3 direct calls do not; _fini runs
# once in each of the two processes; the fork child counts from zero.
want = {"asm_bt (e2e)": 2, "asm_nop1 (e2e)": 0, "asm_tiny2 (e2e)": 1, "_fini (e2e)": 2}
got = {m.group(1): int(m.group(2)) for m in re.finditer(r"^  int3: (.*): (\d+) entries through the trap$", st, re.M)}
if got != want: fails.append(f"--stats int3 entries {got}, want {want}")
v = {m.group(1): int(m.group(2)) for m in re.finditer(r"^icpp-train: int3: (.*): (\d+) entries through the trap$", err, re.M)}
if v != want: fails.append(f"-v int3 entries {v}, want {want}")
for k, n in {"int3-entries": 5, "patched-int3": 4, "patched-int3-calls": 3}.items():
    m = re.search(r"^%s\s+(\d+)$" % k, st, re.M)
    if not m or int(m.group(1)) != n: fails.append(f"{k}: {m and m.group(1)}, want {n}")
print(f"  int3 entries: {got}")
for f in fails: print("FAIL", f)
sys.exit(1 if fails else 0)
PY
    echo "  ok"
fi

echo "== caps: shadow-stack depth 100; CCT memory 64 KiB per thread"
caps_run() {   # $1 = name, then env assignments; checks output, exit status and the counter
    name=$1; shift
    D="$O/e2e-caps-$name"; rm -rf "$D"; mkdir -p "$D"
    set +e
    env "$@" ICPP_AGENT_TEST_OUT="$D/dump" LD_PRELOAD="$AGENT" "$O/e2e" > "$D/agent.out"
    echo $? > "$D/agent.rc"
    set -e
    python3 - "$D" "$O/e2e-exe/plain.out" "$name" <<'PY'
import sys
d, plain, name = sys.argv[1:4]
fails = []
if open(f"{d}/agent.out").read() != open(plain).read(): fails.append("output differs")
if open(f"{d}/agent.rc").read().strip() != "3": fails.append("exit status")
ts = [dict(kv.split("=", 1) for kv in l[2:].split()) for l in open(f"{d}/dump") if l.startswith("T ")]
m = [t for t in ts if t["base_kind"] == "1" and t["inherited"] == "0"][0]
if name == "depth":
    if int(m["dropped_depth"]) == 0: fails.append("depth cap not reached")
    if int(m["max_depth"]) > 100: fails.append(f"max_depth {m['max_depth']} > 100")
else:
    if int(m["node_overflow"]) == 0: fails.append("node cap not reached")
    if int(m["cct_bytes"]) > 65536: fails.append(f"cct_bytes {m['cct_bytes']}")
print(f"  {name}: dropped_depth={m['dropped_depth']} max_depth={m['max_depth']} "
      f"node_overflow={m['node_overflow']} nodes={m['nodes']} cct_bytes={m['cct_bytes']}")
for f in fails: print("FAIL", f)
sys.exit(1 if fails else 0)
PY
}
caps_run depth ICPP_AGENT_TEST_MAX_DEPTH=100
caps_run cct ICPP_AGENT_TEST_MAX_CCT=65536
echo "  ok"

echo "== dlopen'd module patched live (second thread running)"
$CC -O2 -g -fPIC -shared "$A/tests/dl_mod.c" -o "$O/dl_mod.so"
$CC -O2 -g -pthread "$A/tests/dl_prog.c" -ldl -o "$O/dl_prog"
D="$O/dl"; rm -rf "$D"; mkdir -p "$D"
ICPP_AGENT_TEST_DLOPEN=1 ICPP_AGENT_TEST_MODULES=exe,dl_mod.so ICPP_AGENT_TEST_OUT="$D/dump" \
    ICPP_AGENT_TEST_STATS="$D/stats" LD_PRELOAD="$AGENT" "$O/dl_prog" "$O/dl_mod.so" > "$D/out"
python3 - "$D" <<'PY'
import sys
d = sys.argv[1]
fails = []
if open(f"{d}/out").read() != "dl 300\n": fails.append("program output")
p = {}
for l in open(f"{d}/dump"):
    if l.startswith("P "):
        f = l.split()
        p[f[1]] = p.get(f[1], 0) + int(f[2])
want = {"[main];_start;main;dl_driver;mod_entry": 3, "[main];_start;main;dl_driver;mod_entry;mod_leaf": 30,
        "[main];_start;main;dl_driver;mod_entry;mod_loop": 3}
for k, v in want.items():
    if p.get(k) != v: fails.append(f"{k}: {p.get(k)} want {v}")
mods = [l for l in open(f"{d}/stats") if l.startswith("module") and "dl_mod.so" in l]
if not mods or " live 1 " not in mods[0]: fails.append(f"module not patched live: {mods}")
if not any(k.startswith("[thread];spinner;spin_leaf") for k in p): fails.append("spinner thread not recorded")
if not any(l.split()[2:] == ["mod_loop"] for l in open(f"{d}/stats") if l.startswith("short ") and "dl_mod.so" in l):
    fails.append("mod_loop did not take the short jmp")
print("  " + (mods[0].strip() if mods else "no module line"))
for f in fails: print("FAIL", f)
sys.exit(1 if fails else 0)
PY
echo "  ok"

echo "== live patching while threads run"
# (linked against the shared agent: the agent refuses to patch its own module)
$CC -O2 -g -Wall -D_GNU_SOURCE -I"$ROOT/lib" -pthread "$A/tests/test_live.c" -L"$O" -licpp_agent -Wl,-rpath,"$O" \
    -lelf -o "$O/test_live"
"$O/test_live"

if [ "${BENCH:-1}" != 0 ]; then
    echo "== benchmark: fib(30)"
    $CC -O2 -g "$A/tests/bench_fib.c" -o "$O/bench_fib"
    sh "$A/tests/bench.sh" "$O" "$AGENT"
fi
echo "== all agent tests passed"
