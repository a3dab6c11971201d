#!/usr/bin/env python3
"""test_perfdata.py -- perf's own recordings end to end: `perf record --user-regs=sp,bp,ip` of corpus
programs read exactly (lib/perfdata.c), thread bases inferred by voting (lib/basevote.c) equal to the
true ones (icpp-sample's startstack and mapping tops, and perf -d's own mapping tops), icpp-resolve's
profile of a perf.data matching the icpp-sample recording's within sampling noise, and bad perf.data
files refused with one clear line.

Exits 77 (skipped) only when perf record cannot sample on this kernel; a missing perf (scripts/deps
installs it) fails."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from e2e import SOURCE, Checker, built, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

PERF = shutil.which("perf")
if not PERF:
    # scripts/deps installs it: its absence is a broken setup, not a reason to pass.
    print("FAIL: perf is not installed (Debian package linux-perf, in scripts/deps)")
    sys.exit(1)
tmp = tempfile.mkdtemp(prefix="icpp-perfdata-")
probe = run([PERF, "record", "-q", "-e", "cpu-clock", "--user-regs=sp,bp,ip", "-o", os.path.join(tmp, "probe.data"),
             "--", "true"])
if probe.returncode != 0:
    print(f"SKIP: perf record cannot sample here: {probe.stderr.strip()[:300]}")
    sys.exit(77)

c = Checker("e2e-perfdata")
PROBE = built("tests/e2e/perfdata_probe")
RESOLVE = tool("icpp-resolve")
SCALE = "20"
MIN_VOTERS = 20         # threads with fewer voting samples are not judged


def perf_record(binary, out, *extra, args=(SCALE,)):
    return run([PERF, "record", "-q", "-e", "cpu-clock", "--user-regs=sp,bp,ip", "-F", "4000", *extra, "-o", out,
                "--", binary, *args])


def dump(path):
    """perfdata_probe --dump: (return code, stdout lines, stderr)."""
    r = run([PROBE, "--dump", path])
    return r.returncode, r.stdout.splitlines(), r.stderr


def votes(samples, mapfile, override=False):
    """perfdata_probe --vote: list of thread dicts, and the describe lines."""
    r = run([PROBE, "--vote"] + (["--override"] if override else []) + [samples, mapfile])
    if r.returncode != 0:
        raise RuntimeError(f"perfdata_probe --vote {samples}: {r.stderr}")
    out = []
    for line in r.stdout.splitlines():
        if line.startswith("#"):
            continue
        f = line.split("\t")
        out.append(dict(pid=int(f[0]), tid=int(f[1]), gen=int(f[2]), samples=int(f[3]), voters=int(f[4]),
                        base=int(f[5], 16), votes=int(f[6]), runner=int(f[7], 16), runner_votes=int(f[8]),
                        accepted=f[9] == "1", recorded=int(f[10], 16)))
    return out, r.stderr.splitlines()


def build_id(binary):
    r = run(["readelf", "-n", binary])
    m = re.search(r"Build ID: ([0-9a-f]+)", r.stdout)
    return m.group(1) if m else ""


def profile(samples, mapfile):
    """icpp-resolve --format json: (json, stderr) or (None, stderr)."""
    r = run([RESOLVE, "-m", mapfile, "--format", "json", samples])
    if r.returncode != 0:
        return None, r.stderr
    return json.loads(r.stdout), r.stderr


def self_shares(prof):
    total = prof["samples"] or 1
    return {tuple(p["path"]): p["self"][0] / total for p in prof["paths"] if p["self"][0]}


entries = {(e.prog, e.config): e for e in corpus.load_list(built("tests/programs/corpus-list.txt"))}
cases = [("recurse", "O2-fp-pie"), ("threads", "O2-nofp-pie"), ("forkexec", "O2-fp-pie")]

for prog, config in cases:
    e = entries[(prog, config)]
    label = f"{prog}.{config}"
    mapfile, smp, pdata = (os.path.join(tmp, label + ext) for ext in (".icppmap", ".samples", ".perf.data"))
    r = run([tool("icpp-train"), "-q", "--fresh", "--modules", "main", "-o", mapfile, "--", e.binary, "5"])
    c.check(os.path.exists(mapfile), f"{label}: training failed: {r.stderr}")
    r = run([tool("icpp-sample"), "-e", "cpu-clock", "-F", "4000", "-o", smp, "--", e.binary, SCALE])
    c.check(os.path.exists(smp), f"{label}: icpp-sample failed: {r.stderr}")
    r = perf_record(e.binary, pdata)
    if not c.check(r.returncode == 0 and os.path.exists(pdata), f"{label}: perf record failed: {r.stderr}"):
        continue

    # ---- the reader: every sample perf recorded, the executable and its build-id ----
    rc, lines, err = dump(pdata)
    c.check(rc == 0, f"{label}: reading the perf.data failed: {err}")
    c.check("INFO tool=perf" in lines and "INFO startstack=unknown" in lines, f"{label}: INFO records")
    c.check(any(l.startswith("EVENT 0 cpu-clock type=1 config=0 period=4000 freq=1") for l in lines),
            f"{label}: EVENT record")
    procs = [l.split() for l in lines if l.startswith("PROC ")]
    execs = [p for p in procs if p[4] == "flags=1"]
    c.check(execs and execs[0][3] == "startstack=0" and execs[0][5] == e.binary,
            f"{label}: first exec PROC names {e.binary}: {procs[:2]}")
    bid = build_id(e.binary)
    c.check(any(l.startswith("MMAP ") and l.split()[5] == e.binary and l.endswith("bid=" + bid) and "prot=5" in l
                for l in lines), f"{label}: executable MMAP with build-id {bid}")
    stats = dict(kv.split("=") for kv in lines[-1].split()[1:]) if lines and lines[-1].startswith("STATS") else {}
    c.check(stats.get("clean") == "1" and stats.get("truncated") == "0", f"{label}: clean end: {stats}")
    nsamples = sum(l.startswith("SAMPLE ") for l in lines)
    perf_count = len(run([PERF, "script", "-i", pdata, "-F", "tid"]).stdout.splitlines())
    c.check(nsamples + int(stats.get("noregs", -1)) == perf_count and int(stats.get("noregs", -1)) <= nsamples // 100,
            f"{label}: {nsamples} samples (+{stats.get('noregs')} without registers), perf script has {perf_count}")
    times = [int(re.search(r" t=(\d+)", l).group(1)) for l in lines if l.startswith("SAMPLE ")]
    c.check(times == sorted(times), f"{label}: samples in time order")

    # ---- the inference, against a recording's true bases ----
    truth, desc = votes(smp, mapfile, override=True)
    judged = [t for t in truth if t["voters"] >= MIN_VOTERS and t["recorded"]]
    c.check(judged, f"{label}: no thread of the icpp-sample recording to judge: {truth}")
    for t in judged:
        c.check(t["accepted"] and t["base"] == t["recorded"],
                f"{label}: icpp-sample thread {t['pid']}/{t['tid']}: inferred {t['base']:#x}, true {t['recorded']:#x} "
                f"({t['votes']}/{t['voters']} votes)")
    inferred, desc = votes(pdata, mapfile)
    busy = [t for t in inferred if t["voters"] >= MIN_VOTERS]
    nthreads = len([t for t in truth if t["voters"] >= MIN_VOTERS])
    c.check(len(busy) == nthreads, f"{label}: {len(busy)} threads in perf.data, {nthreads} in the icpp-sample one")
    for t in busy:
        c.check(t["accepted"] and t["votes"] >= 0.9 * t["voters"] and t["votes"] > t["runner_votes"],
                f"{label}: perf thread {t['pid']}/{t['tid']}: support {t['votes']}/{t['voters']}, runner-up "
                f"{t['runner_votes']}")
    c.check(all("inferred from" in d or "no thread base inferred" in d for d in desc), f"{label}: describe lines {desc}")

    # ---- icpp-resolve on the perf.data vs on the icpp-sample recording ----
    ps, ps_err = profile(pdata, mapfile)
    ss, ss_err = profile(smp, mapfile)
    if not c.check(ps is not None and ss is not None, f"{label}: icpp-resolve failed: {ps_err} {ss_err}"):
        continue
    lines_inf = [l for l in ps_err.splitlines() if "inferred from" in l]
    c.check(len(lines_inf) >= len(busy), f"{label}: icpp-resolve says what it inferred: {ps_err}")
    for l in lines_inf:
        m = re.search(r"support ([\d.]+)%", l)
        c.check(m and float(m.group(1)) >= 90, f"{label}: low support: {l}")
    shares = ps["shares"]
    c.check(shares["precise"] + shares["ambiguous"] > 0.95, f"{label}: perf.data resolved {shares}")
    if prog == "forkexec":
        continue        # processes come and go at other times in the two runs
    a, b = self_shares(ps), self_shares(ss)
    top = sorted(b, key=b.get, reverse=True)[:10]
    worst = max(abs(a.get(p, 0) - b[p]) for p in top)
    # Two runs, not one: under the suite's load on 2 cores a thread's leaves slow
    # unevenly (threads.c's mix_leaf 18% of one run, 24% of the other); a wrong
    # base or thread misplaces a whole thread's paths (each worker: ~20%).
    c.check(worst < 0.08, f"{label}: top paths' shares differ by up to {100 * worst:.1f} points between perf.data and "
                          f"icpp-sample: " + "; ".join(f"{'>'.join(p[-2:])} {100 * a.get(p, 0):.1f}/{100 * b[p]:.1f}"
                                                       for p in top))

# ---- perf record -d: non-main threads' bases from perf's own data mappings ----
e = entries[("threads", "O2-nofp-pie")]
mapfile = os.path.join(tmp, "threads.O2-nofp-pie.icppmap")
pd_d = os.path.join(tmp, "threads-d.perf.data")
r = perf_record(e.binary, pd_d, "-d")
if c.check(r.returncode == 0, f"perf record -d failed: {r.stderr}"):
    rc, lines, err = dump(pd_d)
    c.check(rc == 0 and any(l.startswith("MMAP ") and " prot=3 " in l for l in lines),
            f"perf -d: anonymous data mappings read: {err}")
    truth, _ = votes(pd_d, mapfile, override=True)
    others = [t for t in truth if t["tid"] != t["pid"] and t["voters"] >= MIN_VOTERS]
    c.check(len(others) >= 4, f"perf -d: {len(others)} worker threads")
    for t in others:
        c.check(t["recorded"] and t["base"] == t["recorded"],
                f"perf -d: thread {t['tid']}: inferred {t['base']:#x}, mapping top {t['recorded']:#x}")

# ---- --check on perf record --call-graph dwarf: its stack copies are the truth, its bases are inferred ----
# (--check once judged every such sample unresolved: it never inferred the bases the profile does)
e = entries[("recurse", "O2-fp-pie")]
mapfile = os.path.join(tmp, "recurse.O2-fp-pie.icppmap")
pd_dw = os.path.join(tmp, "recurse-dwarf.perf.data")
r = perf_record(e.binary, pd_dw, "--call-graph", "dwarf")
if c.check(r.returncode == 0, f"perf record --call-graph dwarf failed: {r.stderr}"):
    r = run([RESOLVE, "-m", mapfile, "--check", "--format", "json", pd_dw])
    prof, _ = profile(pd_dw, mapfile)
    if c.check(r.returncode == 0 and prof is not None, f"--check on a dwarf perf.data failed: {r.stderr}"):
        d = json.loads(r.stdout)
        v = d["by_samples"]
        judged = d["with_truth"]
        c.check(judged >= 0.95 * d["samples"] and judged > 100,
                f"dwarf perf.data: {judged} of {d['samples']} samples have a true stack: {d['no_truth']}")
        c.check(v["incorrect"] == 0, f"dwarf perf.data: {v['incorrect']} incorrect: {d['incorrect_samples']}")
        ok = v["precise"] + v["ambiguous-containing-truth"]
        c.check(ok >= 0.95 * judged, f"dwarf perf.data: only {ok} of {judged} correct: {v}")
        # the judged samples resolve as the profile of the same file does
        unres = prof["shares"]["unresolved"]
        c.check(v["unresolved"] <= unres * prof["samples"] + 0.01 * judged,
                f"dwarf perf.data: --check unresolved {v['unresolved']} of {judged}, the profile {100 * unres:.2f}%")

# ---- refused with one clear line ----
e = entries[("recurse", "O2-fp-pie")]


def refused(path, want, what):
    r = run([RESOLVE, "--script", path])
    c.check(r.returncode == 1 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1,
            f"{what}: rc {r.returncode}, {r.stderr!r} (want {want!r})")


noregs = os.path.join(tmp, "noregs.perf.data")
run([PERF, "record", "-q", "-e", "cpu-clock", "-o", noregs, "--", e.binary, "2"])
refused(noregs, "samples carry no user registers: record with --user-regs=sp,bp,ip", "no --user-regs")
pipe = os.path.join(tmp, "pipe.perf.data")
with open(pipe, "wb") as f:
    subprocess.run([PERF, "record", "-q", "-e", "cpu-clock", "--user-regs=sp,bp,ip", "-o", "-", "--", e.binary, "2"],
                   stdout=f, stderr=subprocess.DEVNULL, timeout=120)
refused(pipe, "written to a pipe", "pipe mode")
whole = os.path.join(tmp, "recurse.O2-fp-pie.perf.data")
if c.check(os.path.exists(whole), f"{whole} was not recorded: the cut-file check cannot run"):
    data = open(whole, "rb").read()
    cut = os.path.join(tmp, "cut.perf.data")
    with open(cut, "wb") as f:
        f.write(data[:len(data) // 2])
    refused(cut, "truncated at offset", "cut in half")

# ---- a killed perf (header not finished): read what is there ----
killed = os.path.join(tmp, "killed.perf.data")
p = subprocess.Popen([PERF, "record", "-q", "-e", "cpu-clock", "--user-regs=sp,bp,ip", "-F", "4000", "-o", killed,
                      "--", e.binary, "2000"], start_new_session=True, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
time.sleep(2)
os.killpg(p.pid, signal.SIGKILL)
p.wait()
rc, lines, err = dump(killed)
c.check(rc == 0 and lines and "clean=0" in lines[-1], f"killed perf: rc {rc} {err} {lines[-1:]}")

shutil.rmtree(tmp, ignore_errors=True)
c.done()
