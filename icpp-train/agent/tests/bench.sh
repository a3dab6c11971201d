#!/bin/sh
# bench.sh -- per-call cost of the agent on fib(30): plain vs agent (executable patched), PAIRS
# alternating process pairs, each timing fib(30) 10 times in-process (median kept), environment
# size varied per pair (docs/background.md section 5).  The agent keeps its trees in live files (MAP_SHARED, in
# OUTDIR/bench/live), as under icpp-train.  usage: bench.sh OUTDIR AGENT_SO [PAIRS]
set -eu
O=$1; AGENT=$2; PAIRS=${3:-11}
B="$O/bench"; mkdir -p "$B"; : > "$B/plain"; : > "$B/agent"
rm -rf "$B/live"; mkdir -p "$B/live"
i=0
while [ $i -lt "$PAIRS" ]; do
    pad=$(head -c $((i * 97 + 1)) /dev/zero | tr '\0' x)
    env ICPP_PAD="$pad" "$O/bench_fib" 30 10 >> "$B/plain"
    env ICPP_PAD="$pad" ICPP_AGENT_TEST_OUT="$B/dump" ICPP_AGENT_TEST_LIVE_DIR="$B/live" LD_PRELOAD="$AGENT" \
        "$O/bench_fib" 30 10 >> "$B/agent"
    i=$((i + 1))
done
python3 - "$B" <<'PY'
import statistics, sys
b = sys.argv[1]
def load(f):   # per process: median of its 10 in-process timings
    return [int(l.split()[1]) for l in open(f"{b}/{f}")]
p, a = load("plain"), load("agent")
reps = int(open(f"{b}/agent").readline().split()[3])
calls = sum(int(l.split()[2]) for l in open(f"{b}/dump")
            if l.startswith("P ") and l.split()[1].endswith(";fib")) // reps
d = sorted((x - y) / calls for x, y in zip(a, p))
mp, ma = statistics.median(p), statistics.median(a)
print(f"  fib(30): {calls} calls per run (counted by the agent), {len(p)} process pairs x {reps} runs")
print(f"  plain  median {mp/1e6:.2f} ms = {mp/calls:.2f} ns/call   range [{min(p)/1e6:.2f}, {max(p)/1e6:.2f}] ms")
print(f"  agent  median {ma/1e6:.2f} ms = {ma/calls:.2f} ns/call   range [{min(a)/1e6:.2f}, {max(a)/1e6:.2f}] ms")
print(f"  added: {statistics.median(d):.2f} ns/call (median of per-pair differences; "
      f"middle half {d[len(d)//4]:.2f}..{d[(3*len(d))//4]:.2f}, all {d[0]:.2f}..{d[-1]:.2f}); "
      f"slowdown {ma/mp:.2f}x")
PY
