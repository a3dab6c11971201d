#!/usr/bin/env python3
"""test_sample.py -- icpp-sample end to end: thread bases and module mappings against
what the program measured itself, pass-through of output and exit status, unprivileged
use, and clear errors for bad input."""
import collections
import json
import os
import shutil
import subprocess
import tempfile

from e2e import Checker, built, run, script, tool

c = Checker("e2e-sample")
SAMPLE = tool("icpp-sample")
WITNESS = built("tests/e2e/witness")
tmp = tempfile.mkdtemp(prefix="icpp-e2e-")
os.chmod(tmp, 0o777)


def bases_and_mappings(label, prog_prefix=(), witness=WITNESS):
    truth_file = os.path.join(tmp, f"{label}.truth")
    out = os.path.join(tmp, f"{label}.samples")
    r = run(list(prog_prefix) + [SAMPLE, "-F", "2000", "-o", out, "--", witness, truth_file, "2"])
    c.check(r.returncode == 0, f"{label}: icpp-sample exit {r.returncode}: {r.stderr}")
    c.check(r.stdout == "witness ok\n", f"{label}: program output not passed through: {r.stdout!r}")
    if r.returncode != 0:
        return
    truth = {}
    for line in open(truth_file):
        pid, tid, base, kind = line.split()
        truth[int(tid)] = (int(pid), int(base), kind)
    c.check(len(truth) == 5, f"{label}: witness wrote {len(truth)} threads, want 5")
    samples = script(out)
    per_tid = collections.Counter(s["tid"] for s in samples)
    c.check(len(samples) >= 100, f"{label}: only {len(samples)} samples")
    # Every sampled thread of the witness has a truth line; its base must match exactly.
    wrong, checked = 0, 0
    for s in samples:
        if s["tid"] not in truth or s["status"] in ("no CFI", "CFI not passive"):
            continue
        pid, base, kind = truth[s["tid"]]
        checked += 1
        if s["base"] != base or s["base_kind"] != kind or s["pid"] != pid:
            wrong += 1
            if wrong <= 5:
                print(f"  {label}: tid {s['tid']} base {s['base']:#x} ({s['base_kind']}), truth {base:#x} ({kind})")
    c.check(checked > 0 and wrong == 0, f"{label}: {wrong} of {checked} samples have a wrong thread base")
    threads_seen = {t for t in per_tid if t in truth}
    c.check(len(threads_seen) == 5, f"{label}: samples from {len(threads_seen)} of the 5 threads")
    # Module mappings: the executable's samples land in its own functions
    # for the right role; libc's in random/random_r.
    roles = {}
    for tid, (pid, base, kind) in truth.items():
        roles[tid] = "spin_thread" if kind == "maptop" else ("spin_main" if pid == min(p for p, _, _ in truth.values()) else "spin_child")
    exe_ok = exe_bad = libc_ok = libc_bad = 0
    for s in samples:
        if s["status"] != "ok" or s["tid"] not in truth:
            continue
        if s["module"] in (os.path.realpath(witness), witness):
            if s["func"] in ("spin_main", "spin_thread", "spin_child"):
                if s["func"] == roles[s["tid"]]:
                    exe_ok += 1
                else:
                    exe_bad += 1
        elif os.path.basename(s["module"]).startswith("libc.so"):
            if s["func"] in ("random", "random_r"):
                libc_ok += 1
            elif s["func"].startswith("fn_"):
                libc_bad += 1
    c.check(exe_ok >= 50 and exe_bad == 0, f"{label}: PIE mapping: {exe_ok} samples in the thread's own spin function, {exe_bad} in another's")
    c.check(libc_ok >= 20, f"{label}: shared-library mapping: only {libc_ok} libc samples in random/random_r ({libc_bad} unnamed)")


bases_and_mappings("root")

# Unprivileged: a user's own child, user space only (perf_event_paranoid <= 2).
paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read())
if os.geteuid() == 0 and shutil.which("setpriv") and paranoid <= 2:
    drop = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = run(drop + ["true"])
    if c.check(r.returncode == 0, f"setpriv to nobody failed: {r.stderr}"):
        # a copy nobody can reach (the build tree may sit in a 0700 directory)
        wcopy = os.path.join(tmp, "witness")
        shutil.copy(WITNESS, wcopy)
        os.chmod(wcopy, 0o755)
        bases_and_mappings("nobody", drop, wcopy)
        # A permission failure names the cause and the fix: nobody may not sample pid 1.
        r = run(drop + [SAMPLE, "-o", os.path.join(tmp, "p1.samples"), "-p", "1"])
        c.check(r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
                and "permission" in r.stderr and "perf_event_paranoid" in r.stderr,
                f"permission failure message: rc={r.returncode} {r.stderr!r}")
else:
    print("unprivileged part skipped: not root, no setpriv, or perf_event_paranoid > 2")

# Exit status and signals pass through.
r = run([SAMPLE, "-q", "-o", os.path.join(tmp, "x.samples"), "--", "sh", "-c", "exit 7"])
c.check(r.returncode == 7, f"exit status 7 came back as {r.returncode}")
r = run([SAMPLE, "-q", "-o", os.path.join(tmp, "k.samples"), "--", "sh", "-c", "kill -TERM $$"])
c.check(r.returncode == 128 + 15, f"SIGTERM death came back as {r.returncode}")
c.check(os.path.getsize(os.path.join(tmp, "k.samples")) >= 16, "no file after the target was killed")

# SIGTERM to the sampler: forwarded to the child, file complete.
p = subprocess.Popen([SAMPLE, "-q", "-o", os.path.join(tmp, "t.samples"), "--", WITNESS, os.path.join(tmp, "t.truth"), "40"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
import time
time.sleep(0.7)
p.terminate()
out, err = p.communicate(timeout=60)
c.check(p.returncode == 128 + 15, f"sampler SIGTERM: exit {p.returncode} {err!r}")
rs = run([tool("icpp-resolve"), "--script", os.path.join(tmp, "t.samples")])
c.check(rs.returncode == 0 and rs.stdout.count("\n") > 10 and "incomplete" not in rs.stderr,
        f"file after SIGTERM not complete: {rs.returncode} {rs.stderr!r}")

# Bad input: one line on stderr, non-zero exit, no output file created.
def bad(args, want_rc, words, label):
    out = os.path.join(tmp, f"bad-{label}.samples")
    r = run([SAMPLE, "-o", out] + args)
    lines = r.stderr.strip().splitlines()
    c.check(r.returncode == want_rc and len(lines) == 1 and all(w in r.stderr for w in words),
            f"{label}: rc={r.returncode} stderr={r.stderr!r}")
    c.check(not os.path.exists(out), f"{label}: an output file was created")


bad(["-e", "no-such-event", "--", "true"], 1, ["unknown event", "no-such-event", "--list-events"], "event")
bad(["-c", "0", "--", "true"], 2, ["-c"], "period0")
bad(["-c", "abc", "--", "true"], 2, ["-c", "abc"], "period")
bad(["-F", "-5", "--", "true"], 2, ["-F"], "freq")
bad(["-p", "999999999"], 1, ["no process"], "pid")
bad(["-e", "cycles", "--", "true"], 1, ["cycles", "not available"], "nopmu") if not os.path.exists("/sys/bus/event_source/devices/cpu") else None
bad(["--", "/nonexistent/prog"], 127, ["cannot run", "/nonexistent/prog"], "noprog")
r = run([SAMPLE, "-o", "/nonexistent-dir/x.samples", "--", "true"])
c.check(r.returncode == 1 and "cannot create" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
        f"unwritable output: rc={r.returncode} {r.stderr!r}")

# --auto-period as a user types it, with no -e: where there is no hardware PMU the pilots
# sample cpu-clock as a plain run does (they asked for cycles and failed), and so does the run.
nopmu = not os.path.exists("/sys/bus/event_source/devices/cpu")
out = os.path.join(tmp, "auto.samples")
r = run([SAMPLE, "--auto-period", "-o", out, "--", WITNESS, os.path.join(tmp, "auto.truth"), "1"], timeout=120)
want_ev = "cpu-clock" if nopmu else "cycles"
c.check(r.returncode == 0 and r.stdout == "witness ok\n" and f"-> period" in r.stderr and f"on {want_ev}" in r.stderr,
        f"--auto-period without -e: rc={r.returncode} {r.stderr[-400:]!r}")
if r.returncode == 0:
    rj = run([tool("icpp-resolve"), "--format", "json", out])
    evs = [e["name"] for e in json.loads(rj.stdout)["events"]] if rj.returncode == 0 else []
    c.check(evs == [want_ev], f"--auto-period without -e recorded {evs}, want [{want_ev}]")

# A set-user-ID program run by another user: a traced exec drops its privileges, so
# icpp-sample says so in one line; run as root (who keeps them), nothing is said.
suid_dir = tempfile.mkdtemp(prefix="icpp-suid-")
os.chmod(suid_dir, 0o755)
suid = os.path.join(suid_dir, "witness-suid")
shutil.copy(WITNESS, suid)
os.chown(suid, 0, 0)
os.chmod(suid, 0o4755)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
if os.geteuid() == 0:
    nout = os.path.join(tmp, "nobody-suid.samples")
    r = run(NOBODY + [SAMPLE, "-q", "-e", "cpu-clock", "-o", nout, "--", suid, os.path.join(tmp, "n.truth"), "1"])
    warn = [line for line in r.stderr.splitlines() if "set-user-ID" in line]
    c.check(r.returncode == 0 and len(warn) == 1 and suid in warn[0] and "your privileges" in warn[0],
            f"nobody samples a set-user-ID program: rc={r.returncode} {r.stderr[-400:]!r}")
    r = run([SAMPLE, "-q", "-e", "cpu-clock", "-o", os.path.join(tmp, "root-suid.samples"), "--", suid,
             os.path.join(tmp, "r.truth"), "1"])
    c.check(r.returncode == 0 and "set-user-ID" not in r.stderr and "privileges" not in r.stderr,
            f"root samples a set-user-ID program: rc={r.returncode} {r.stderr[-400:]!r}")
    os.chmod(suid, 0o755)
    r = run(NOBODY + [SAMPLE, "-q", "-e", "cpu-clock", "-o", os.path.join(tmp, "nobody-plain.samples"), "--", suid,
                      os.path.join(tmp, "p.truth"), "1"])
    c.check(r.returncode == 0 and "privileges" not in r.stderr, f"nobody samples a plain program: {r.stderr[-300:]!r}")
else:
    print("SKIP: the set-user-ID checks need root (setpriv to nobody)")
shutil.rmtree(suid_dir, ignore_errors=True)

shutil.rmtree(tmp, ignore_errors=True)
c.done()
