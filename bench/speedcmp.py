#!/usr/bin/env python3
"""speedcmp.py -- two builds of ICPP timed side by side on one bench run's maps and recordings.

Usage: bench/speedcmp.py OLD_BUILD NEW_BUILD --run RUN [--setups N] [--programs L] [--out FILE]

A change that must not change speed (issue #30, the redesign) is judged by bench
section 5's resolve throughput and section 6's rewrite times, measured for the old
and the new build in the same run: per setup, every (command, build) pair once, in
a random order, so a load that comes and goes falls on both builds alike.  The
figure is each setup's ratio new/old (CPU time: user+sys of the command; for
resolve_rate, of its whole run: map, index and five replays), its
median over the setups and the range; the medians of each build's CPU seconds
beside it.

RUN is a bench run kept with `bench/run --keep` (RUN/maps, RUN/rec, RUN/manifest.tsv).
Per program: the smallest same-name (map, recording) pair of its fp build (its one
build for a distro program) is resolved offline as section 5 does
(`icpp-resolve -m MAP -o /dev/null REC`) and measured by bench/resolve_rate (replay
and CID lookup rates); each build of the program that has a map is rewritten as
section 6 does (`icpp-rewrite -m MAP -o OUT --seed 1 PROG`).
"""
import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_timed(cmd, cwd):
    """(cpu seconds of the child, wall seconds, exit code, stdout text)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, time.perf_counter() - t0, p.returncode, out.decode(errors="replace")


def manifest(run):
    """{program: {build: binary}} from RUN/manifest.tsv's P lines."""
    bins = {}
    with open(os.path.join(run, "manifest.tsv")) as f:
        for line in f:
            w = line.rstrip("\n").split("\t")
            if w[0] != "P" or len(w) < 6:
                continue
            b = bins.setdefault(w[1], {})
            if w[4] != "-":
                b["fp"] = w[4]
            if w[5] != "-":
                b["nofp"] = w[5]
            if len(w) > 6 and w[6] != "-":
                b["distro"] = w[6]
    return bins


def commands(run, programs):
    """[(label, kind, [argv with {B} for the build directory and {T} for a scratch dir])]."""
    bins = manifest(run)
    maps = sorted(os.listdir(os.path.join(run, "maps")))
    out = []
    for prog in programs or sorted(bins):
        builds = bins.get(prog, {})
        first = "distro" if "distro" in builds else "fp"
        pairs = []
        for m in maps:
            mm = re.match(r"(.+)-(fp|nofp|distro)-(.+)\.icppmap$", m)
            if not mm or mm.group(1) != prog:
                continue
            rec = os.path.join(run, "rec", m[:-len(".icppmap")] + ".samples")
            if mm.group(2) == first and os.path.exists(rec):
                pairs.append((os.path.getsize(rec), m, rec))
        if pairs:
            _, m, rec = min(pairs)
            mp = os.path.join(run, "maps", m)
            out.append(("resolve %s" % m[:-8], "resolve", ["{B}/icpp-resolve/icpp-resolve", "-m", mp,
                                                           "-o", "/dev/null", rec]))
            out.append(("resolve_rate %s" % m[:-8], "rate", ["{B}/bench/resolve_rate", mp, rec]))
        for build in ("fp", "nofp", "distro"):
            if build not in builds:
                continue
            ms = [m for m in maps if m.startswith("%s-%s-" % (prog, build))]
            if not ms:
                continue
            mp = os.path.join(run, "maps", sorted(ms)[0])
            out.append(("rewrite %s-%s" % (prog, build), "rewrite",
                        ["{B}/icpp-rewrite/icpp-rewrite", "-q", "-m", mp, "-o", "{T}/out", "--seed", "1",
                         builds[build]]))
    return out


def rate_of(text):
    m = re.search(r"\|\s*(\d+)\s*\|\s*([\d.]+) M\s*\|\s*([\d.]+) M\s*\|", text)
    return (float(m.group(2)), float(m.group(3))) if m else None


def main():
    ap = argparse.ArgumentParser(description="time two ICPP builds side by side on a kept bench run")
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--run", required=True, help="a bench run kept with bench/run --keep")
    ap.add_argument("--setups", type=int, default=5)
    ap.add_argument("--programs", help="comma list (default: every program of the run)")
    ap.add_argument("--seed", type=int, default=0, help="the random orders' seed (default: from the time)")
    ap.add_argument("--out", help="also write the markdown table there")
    a = ap.parse_args()
    builds = {"old": os.path.abspath(a.old), "new": os.path.abspath(a.new)}
    cmds = commands(a.run, a.programs.split(",") if a.programs else None)
    if not cmds:
        sys.exit("speedcmp: no map with its recording or binary in %s" % a.run)
    rnd = random.Random(a.seed or time.time_ns())
    cpu = {(c[0], b): [] for c in cmds for b in builds}
    rates = {(c[0], b): [] for c in cmds for b in builds}
    ratio = {c[0]: [] for c in cmds}
    scratch = tempfile.mkdtemp(prefix="speedcmp.")
    try:
        for s in range(a.setups):
            jobs = [(c, b) for c in cmds for b in builds]
            rnd.shuffle(jobs)
            got = {}
            for (label, kind, argv), b in jobs:
                cmd = [w.replace("{B}", builds[b]).replace("{T}", scratch) for w in argv]
                c, w, rc, text = run_timed(cmd, scratch)
                if rc != 0:
                    sys.exit("speedcmp: %s exited %d: %s" % (b, rc, " ".join(cmd)))
                if kind == "rate":
                    r = rate_of(text)
                    if not r:
                        sys.exit("speedcmp: no rate in the output of " + " ".join(cmd))
                    rates[(label, b)].append(r)
                got[(label, b)] = c
                cpu[(label, b)].append(c)
            for label, _, _ in cmds:
                ratio[label].append(got[(label, "new")] / got[(label, "old")])
            print("speedcmp: setup %d/%d done" % (s + 1, a.setups), file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    med = statistics.median
    lines = ["| command | old: CPU s (median) | new: CPU s (median) | new/old per setup: median [min, max] |",
             "|---|---|---|---|"]
    for label, kind, _ in cmds:
        rs = ratio[label]
        if kind == "rate":
            o = med(r[0] for r in rates[(label, "old")])
            n = med(r[0] for r in rates[(label, "new")])
            oc = med(r[1] for r in rates[(label, "old")])
            nc = med(r[1] for r in rates[(label, "new")])
            cols = "%.3f (replay %.3f M/s, CID %.1f M/s) | %.3f (replay %.3f M/s, CID %.1f M/s)" % (
                med(cpu[(label, "old")]), o, oc, med(cpu[(label, "new")]), n, nc)
            lines.append("| %s (rates: best of its 5 rounds) | %s | %.3f [%.3f, %.3f] |" % (label, cols, med(rs), min(rs), max(rs)))
        else:
            lines.append("| %s | %.3f | %.3f | %.3f [%.3f, %.3f] |" % (label, med(cpu[(label, "old")]),
                                                                      med(cpu[(label, "new")]), med(rs), min(rs), max(rs)))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
