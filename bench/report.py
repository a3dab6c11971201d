#!/usr/bin/env python3
"""report.py -- write bench/RESULTS.md from a measure.py results JSON.

Usage: report.py --results JSON --out FILE --command CMD --mode MODE
                 --started EPOCH --repo DIR --cache DIR [--check]
--check (bench/run --smoke): also verify that every figure came out as
well-formed numbers; exit 1 naming what is not.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stats import fmt_ratio, geomean, ratio_summary  # noqa: E402
import statsfig  # noqa: E402

PAPER = {"offline": 88.0, "online": 74.0, "raw": 68.0}
TRAIN_VARIANTS = [("icpp-train", "icpp-train"), ("icpp-train-main", "icpp-train --modules main"),
                  ("hooks-only", "hooks only (records nothing)"), ("uftrace", "uftrace record -P .")]
SAMPLE_VARIANTS = [("icpp-sample", "icpp-sample"), ("perf-flat", "perf flat"), ("perf-g", "perf -g"),
                   ("perf-dwarf", "perf --call-graph dwarf")]
# icpp-sample's learn rates (issue #11): the default for software events is --learn=2 ("icpp-sample" above)
LEARN_VARIANTS = [("icpp-sample-nolearn", "--no-learn"), ("icpp-sample", "--learn=2 (default)"),
                  ("icpp-sample-learn3", "--learn=3"), ("icpp-sample-learn4", "--learn=4"),
                  ("icpp-sample-learn8", "--learn=8"), ("icpp-sample-learn16", "--learn=16"),
                  ("icpp-sample-learn64", "--learn=64")]
# --check's ambiguous_by_reason keys, in section 6's column order (docs/resolve.md)
REASONS = ("same-call-edges", "same-functions", "library-functions", "refused-functions", "separable")
# section 6's entries per build, in table order (measure.py REWRITE_KEYS)
REWRITE_KEYS = (("fp", "programs"), ("nofp", "programs_nofp"), ("distro", "programs_distro"))
CHECK_MODES = [("trained", "map only"), ("learned", "+ learned"), ("completed", "+ completed")]

# Kept from earlier versions of this file: CFI measurements not repeated by bench/run.
CFI_HISTORY = """Earlier runs of the same benchmark (2026-11-22, before bench/run existed), command
`build/bench/cfi_lookup /lib/x86_64-linux-gnu/libc.so.6 /usr/bin/python3 build/tests/unit/cfi_fp_subject`:

| machine state | binary | rows | table KiB | build ms | table lookups/s | libdw lookups/s | speedup |
|---|---|---|---|---|---|---|---|
| shared with five concurrent builds | libc.so.6 | 28190 | 221 | 34.7 | 31.5 M | 1.53 M | 21x |
| shared with five concurrent builds | /usr/bin/python3 | 63665 | 500 | 93.8 | 39.8 M | 1.96 M | 20x |
| shared with five concurrent builds | cfi_fp_subject | 812 | 6 | 0.3 | 26.6 M | 2.61 M | 10x |
| idle | libc.so.6 | 28190 | 221 | 10.0 | 82.0 M | 5.33 M | 15x |
| idle | /usr/bin/python3 | 63665 | 500 | 25.4 | 69.6 M | 3.24 M | 22x |

The branch-free search inside a page is what makes the difference: the first, branchy
version measured 21.4 M (libc) and 20.8 M (python3) lookups/s on the idle machine."""


def sh(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, shell=True,
                              timeout=20).stdout.decode(errors="replace").strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(repo):
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            cpu = m.group(1) if m else ""
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"MemTotal:\s*(\d+)", f.read())
            mem = "%.1f GiB" % (int(m.group(1)) / 2**20) if m else ""
    except OSError:
        pass
    osr = ""
    try:
        with open("/etc/os-release") as f:
            m = re.search(r'PRETTY_NAME="?([^"\n]*)', f.read())
            osr = m.group(1) if m else ""
    except OSError:
        pass
    pmu = os.path.exists("/sys/bus/event_source/devices/cpu") or \
        os.path.exists("/sys/bus/event_source/devices/cpu_core")
    head = sh("git -C '%s' rev-parse --short HEAD" % repo)
    dirty = sh("git -C '%s' status --porcelain --untracked-files=no" % repo)
    return {"cpu": cpu, "cores": os.cpu_count(), "mem": mem, "kernel": platform.release(),
            "os": osr, "host": platform.node(), "gcc": sh("gcc --version | head -1"),
            "perf": sh("perf --version"), "uftrace": sh("uftrace --version | head -1"),
            "pmu": pmu, "commit": head + (" with uncommitted changes" if dirty else "")}


def pct(x, digits=1):
    return "n/a" if x is None else ("%%.%df%%%%" % digits) % x


def num(x, fmt="%.3g"):
    return "n/a" if x is None else fmt % x


def si(x):
    if x is None:
        return "n/a"
    for div, suf in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= div:
            return "%.2f%s" % (x / div, suf)
    return "%.0f" % x


def walls(runs, v, key="wall"):
    return [r[v][key] for r in runs if v in r and r[v].get(key)]


def ratios(runs, v, base="plain", key="wall"):
    """Per setup, v's time over base's (key: "wall", or "cpu" where measure.py recorded it)."""
    out = []
    for r in runs:
        a, b = r.get(v, {}).get(key), r.get(base, {}).get(key)
        if a and b:
            out.append(a / b)
    return out


class Report:
    def __init__(self, res, a):
        self.r = res
        self.a = a
        self.lines = []
        self.problems = []
        self.order = res.get("order", [])

    def w(self, s=""):
        self.lines.append(s)

    def bad(self, what):
        self.problems.append(what)

    # -------------------------------------------------------------- header
    def header(self, m):
        meta = self.r["meta"]
        took = int(time.time() - self.a.started)
        self.w("# ICPP benchmark results")
        self.w()
        self.w("Written by `%s` (mode %s) on %s in %d min %d s; commit %s." % (
            self.a.command, self.a.mode, time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(meta["start"])),
            took // 60, took % 60, m["commit"]))
        self.w("Regenerate with the same command from the repository root; it installs what it needs, keeps")
        self.w("sources, builds and inputs in `%s`, and rewrites this file." %
               self.a.cache.replace(os.path.expanduser("~"), "~"))
        self.w("Figures move between machines and with load: compare only within one run (every ratio")
        self.w("here was measured side by side in the same run).")
        self.w()
        self.w("## Machine")
        self.w()
        self.w("| | |")
        self.w("|---|---|")
        self.w("| CPU | %s, %s cores, %s |" % (m["cpu"], m["cores"], m["mem"]))
        self.w("| kernel | Linux %s (%s) |" % (m["kernel"], m["os"]))
        self.w("| hardware PMU | %s |" % ("exposed" if m["pmu"] else
                                          "none exposed: every sampler uses the `cpu-clock` software event"))
        self.w("| compiler | %s |" % m["gcc"])
        self.w("| tools | %s; %s |" % (m["perf"] or "perf missing", m["uftrace"] or "uftrace missing"))
        la0, la1 = meta.get("loadavg_start", [0] * 3), meta.get("loadavg_end", [0] * 3)
        self.w("| load average (1 min) | %.2f at the start, %.2f at the end of the measurements |" % (la0[0], la1[0]))
        self.w()
        if la0[0] > 1.5 or la1[0] > 1.5:
            self.w("The machine was shared with other work during this run (load above 1.5 on 2 cores): absolute")
            self.w("times are inflated and noisy; ratios taken within a setup are the figures to read.")
            self.w()

    def programs(self):
        self.w("## Programs and input sets")
        self.w()
        self.w("Built from Debian source packages (`apt-get source`) by `bench/programs.sh`, each twice:")
        self.w("`-O2 -g -fno-omit-frame-pointer` (fp, used by every figure) and `-O2 -g -fomit-frame-pointer`")
        self.w("(nofp: map statistics, offline precision, CFI). Inputs are generated deterministically by")
        self.w("`bench/gen_inputs.py` (fixed seeds). The first input set of each program is its \"A\" set: the")
        self.w("overhead figures run it (training overhead on a smaller copy, see there).")
        distro = [n for n in self.order if self.r["programs"][n].get("distro")]
        if distro:
            self.w("Programs marked *distro* are not built: the binary Debian installs is measured as shipped")
            self.w("(stripped: `.dynsym` only; `-O2` without frame pointers; gcc's split cold parts), with its")
            self.w("debug package where Debian's main archive has one (bench/programs.sh). Their one build is")
            self.w("called *distro* in every table; they are not in the fp summaries.")
        self.w()
        self.w("| program | source package | input set | bytes | command |")
        self.w("|---|---|---|---|---|")
        for n in self.order:
            p = self.r["programs"][n]
            if p.get("distro"):
                self.w("| %s (distro) | %s %s; debug package: %s | `%s` | | |" % (
                    n, p["pkg"], p["version"], p.get("debug_package") or "none in the archive",
                    p["bins"]["distro"]))
            for i, inp in enumerate(p["inputs"]):
                args = " ".join(os.path.basename(x) if x == inp["file"] else x for x in inp["args"])
                if inp["stdin"]:
                    args += " < " + os.path.basename(inp["file"])
                self.w("| %s | %s | %s | %s | `%s %s` |" % (
                    n if i == 0 else "", ("%s %s" % (p["pkg"], p["version"])) if i == 0 else "",
                    inp["id"], si(inp["size"]).strip(), n, args))
        self.w()

    def method(self):
        meta = self.r["meta"]
        self.w("## How the overhead figures are measured")
        self.w()
        self.w("Each figure runs several randomized setups (docs/background.md section 5): a setup sets an")
        self.w("environment variable of random size (0-%d bytes, which moves the initial stack and" % meta["pad_max"])
        self.w("everything below it) and runs every variant of a program once, in random order. A ratio is a")
        self.w("variant's wall time over the uninstrumented run's in the same setup. Tables give the median")
        self.w("ratio and a 95% interval (t-interval of the mean log ratio, i.e. of the geometric mean, over")
        self.w("the setups); \"no significant difference\" means the interval contains 1.0. Wall time is the")
        self.w("whole command as a user runs it (tool start-up, the program, writing the output).")
        self.w("Setups: %d for training, %d for sampling; seed %d." % (
            meta["setups_train"], meta["setups_sample"], meta["seed"]))
        self.w()

    # -------------------------------------------------------------- figure 1
    def train(self):
        self.w("## 1. Training overhead")
        self.w()
        cmds = self.r.get("commands", {}).get("train", {})
        self.w("Commands (OUT is a fresh file or directory each run):")
        self.w()
        for v, label in [("plain", "uninstrumented")] + TRAIN_VARIANTS + [("uftrace-estimate-return", "")]:
            if v in cmds:
                self.w("- %s: `%s`" % (v, self.rel(cmds[v])))
        self.w()
        self.w("icpp-train hooks every function entry of the program and of every library it loads, in the")
        self.w("unmodified binary; `--modules main` hooks only the program's own functions. uftrace uses its")
        self.w("dynamic patching (`-P .`, no recompilation) of the same binary: every function of the")
        self.w("program, entry and exit, plus its library calls through the PLT (uftrace's default).")
        self.w("\"Hooks only\" is the floor of icpp-train's method: the program run with")
        self.w("`LD_PRELOAD=build/icpp-train/libicpp-agent-hooks-only.so ICPP_TRAIN_DIR=DIR`, the same agent")
        self.w("built with a trampoline that returns at once -- every entry of every module hooked and")
        self.w("patched the same way, nothing recorded, no front end.")
        self.w()
        data = self.r.get("train", {})
        if not data:
            self.w("Not measured in this run.")
            self.w()
            return
        self.w("Training runs the A input set (bytes below; `--quick` and `--smoke` use smaller copies, where")
        self.w("tool start-up weighs more). The last row is each command on /bin/true: the fixed cost.")
        self.w()
        self.w("| program | input (bytes) | uninstrumented s | %s |" % " | ".join(l for _, l in TRAIN_VARIANTS))
        self.w("|---|---|---|%s" % ("---|" * len(TRAIN_VARIANTS)))
        med = {v: [] for v, _ in TRAIN_VARIANTS}
        for n in self.order:
            d = data.get(n)
            if not d:
                continue
            runs = d["runs"]
            pw = walls(runs, "plain")
            cells = []
            for v, _ in TRAIN_VARIANTS:
                s = ratio_summary(ratios(runs, v))
                if s.get("n"):
                    med[v].append(s["median"])
                cell = fmt_ratio(s)
                if v == "uftrace" and d.get("uftrace_mode"):
                    cell += " (%s)" % d["uftrace_mode"]
                fails = sum(1 for r in runs if v in r and r[v].get("wall") is None)
                if fails:
                    cell += " (%d of %d runs failed)" % (fails, len(runs))
                cells.append(cell)
                if v == "icpp-train" and self.a.check and not s.get("n"):
                    self.bad("training overhead of %s: no icpp-train ratio" % n)
            if self.a.check and not pw:
                self.bad("training overhead of %s: no uninstrumented time" % n)
            self.w("| %s | %s (%s) | %s | %s |" % (n, d.get("input"), si(d.get("input_bytes")).strip(),
                                                   num(statistics.median(pw) if pw else None, "%.3f"),
                                                   " | ".join(cells)))
        gm = {v: geomean(med[v]) for v, _ in TRAIN_VARIANTS}
        self.w("| **geomean of medians** | | | %s |" % " | ".join(
            ("%.2fx" % gm[v]) if gm[v] else "n/a" for v, _ in TRAIN_VARIANTS))
        self.fixed_cost(data, TRAIN_VARIANTS)
        self.w()
        g = gm.get("icpp-train")
        if g:
            self.w("Issue target: icpp-train <= 2x geomean. Measured %.2fx: %s. (The paper's training, a" % (
                g, "met" if g <= 2 else "**not met**"))
            self.w("-finstrument-functions rebuild, was 2.9x geomean on SPEC CPU2006.)")
            h = gm.get("hooks-only")
            if h:
                self.w("The hooks alone cost %.2fx geomean; recording the calling-context tree the rest." % h)
            self.w()
        self.train_nofp(data)

    def train_nofp(self, data):
        """The no-frame-pointer builds, run in the same setups as the fp builds."""
        rows = [n for n in self.order if any("plain-nofp" in r for r in data.get(n, {}).get("runs", []))]
        if not rows:
            return
        self.w("No-frame-pointer builds (the same program built without frame pointers, run in the same")
        self.w("setups: every variant of both builds in one random order). nofp / fp is, per setup, the nofp")
        self.w("build's overhead over the fp build's; issue #12's target is <= 1.2x for icpp-train.")
        self.w()
        vs = [("icpp-train", "icpp-train"), ("icpp-train-main", "icpp-train --modules main")]
        self.w("| program | uninstrumented s (nofp) | %s |" % " | ".join(
            "%s: fp | nofp | nofp / fp" % l for _, l in vs))
        self.w("|---|---|%s" % ("---|---|---|" * len(vs)))
        worst = None
        for n in rows:
            runs = data[n]["runs"]
            pw = walls(runs, "plain-nofp")
            cells = []
            for v, _ in vs:
                rel = []
                for r in runs:
                    a, b = r.get(v + "-nofp", {}).get("wall"), r.get("plain-nofp", {}).get("wall")
                    c, d = r.get(v, {}).get("wall"), r.get("plain", {}).get("wall")
                    if a and b and c and d:
                        rel.append((a / b) / (c / d))
                srel = ratio_summary(rel)
                cells += [fmt_ratio(ratio_summary(ratios(runs, v))),
                          fmt_ratio(ratio_summary(ratios(runs, v + "-nofp", "plain-nofp"))), fmt_ratio(srel)]
                if v == "icpp-train" and srel.get("n"):
                    worst = max(worst or 0, srel["median"])
                if v == "icpp-train" and self.a.check and not srel.get("n"):
                    self.bad("training overhead of %s nofp: no ratio" % n)
            self.w("| %s | %s | %s |" % (n, num(statistics.median(pw) if pw else None, "%.3f"), " | ".join(cells)))
        self.w()
        if worst is not None:
            self.w("Issue #12 target (icpp-train's nofp / fp <= 1.2x on every program): worst median %.2fx: %s." % (
                worst, "met" if worst <= 1.2 else "**not met**"))
            self.w()

    # -------------------------------------------------------------- figure 2
    def sample(self):
        meta = self.r["meta"]
        self.w("## 2. Sampling overhead and sample size")
        self.w()
        cmds = self.r.get("commands", {}).get("sample", {})
        self.w("Every sampler at the same period: `cpu-clock` every %d ns (%d Hz of CPU time), user space" % (
            meta["period_ns"], round(1e9 / meta["period_ns"])))
        self.w("only (icpp-sample always excludes the kernel; perf gets `cpu-clock:u` to match). Commands:")
        self.w()
        for v in ["plain"] + [v for v, _ in SAMPLE_VARIANTS]:
            if v in cmds:
                self.w("- %s: `%s`" % (v, self.rel(cmds[v])))
        self.w()
        self.w("(`--no-bpf-event`: perf 6.1 otherwise waits out a 1 s poll of its side-band thread when")
        self.w("the program exits, a cost of perf's packaging rather than of sampling.)")
        self.w()
        data = self.r.get("sample", {})
        if not data:
            self.w("Not measured in this run.")
            self.w()
            return
        present = [(v, l) for v, l in SAMPLE_VARIANTS if v in cmds]
        self.w("Wall time over the unprofiled run:")
        self.w()
        self.w("| program | input | unprofiled s | %s |" % " | ".join(l for _, l in present))
        self.w("|---|---|---|%s" % ("---|" * len(present)))
        for n in self.order:
            d = data.get(n)
            if not d:
                continue
            runs = d["runs"]
            pw = walls(runs, "plain")
            cells = []
            for v, _ in present:
                s = ratio_summary(ratios(runs, v))
                cells.append(fmt_ratio(s, 3))
                if self.a.check and v == "icpp-sample" and not s.get("n"):
                    self.bad("sampling overhead of %s: no icpp-sample ratio" % n)
            self.w("| %s | %s | %s | %s |" % (n, d.get("input"), num(statistics.median(pw) if pw else None, "%.3f"),
                                              " | ".join(cells)))
        self.fixed_cost(data, present)
        self.w()
        others = [(v, l) for v, l in present if v != "icpp-sample"]
        if others:
            self.w("icpp-sample's wall time over each perf mode's, same setup (below 1.0 = icpp-sample faster):")
            self.w()
            self.w("| program | %s |" % " | ".join("vs " + l for _, l in others))
            self.w("|---|%s" % ("---|" * len(others)))
            verdict = {v: [] for v, _ in others}
            for n in self.order:
                d = data.get(n)
                if not d:
                    continue
                cells = []
                for v, _ in others:
                    s = ratio_summary(ratios(d["runs"], "icpp-sample", base=v))
                    verdict[v].append(s)
                    cells.append(fmt_ratio(s, 3))
                self.w("| %s | %s |" % (n, " | ".join(cells)))
            self.w()
            self.w("Issue target: icpp-sample within 2% of flat perf, and below both callchain modes.")
            for v, l in others:
                ss = [s for s in verdict[v] if s.get("n")]
                if not ss:
                    continue
                if v == "perf-flat":
                    ok = sum(1 for s in ss if s.get("hi", s["median"]) <= 1.02)
                    med_ok = sum(1 for s in ss if s["median"] <= 1.02)
                    self.w("- vs %s: median within +2%% for %d of %d programs; whole interval within +2%% for %d." % (
                        l, med_ok, len(ss), ok))
                else:
                    below = sum(1 for s in ss if s["median"] < 1)
                    sig = sum(1 for s in ss if s.get("hi", 2) < 1)
                    self.w("- vs %s: median below for %d of %d programs, significantly below for %d." % (
                        l, below, len(ss), sig))
            self.w()
        self.w("Bytes per sample (output file size / samples, median over setups) and samples per run:")
        self.w()
        self.w("| program | %s |" % " | ".join(l for _, l in present))
        self.w("|---|%s" % ("---|" * len(present)))
        for n in self.order:
            d = data.get(n)
            if not d:
                continue
            cells = []
            for v, _ in present:
                bps = [r[v]["bytes"] / r[v]["samples"] for r in d["runs"]
                       if r.get(v, {}).get("samples") and r[v].get("bytes")]
                ns = [r[v]["samples"] for r in d["runs"] if r.get(v, {}).get("samples")]
                if bps:
                    cells.append("%s B (%d samples)" % (si(statistics.median(bps)).strip(), statistics.median(ns)))
                else:
                    cells.append("n/a")
                if self.a.check and v == "icpp-sample" and not bps:
                    self.bad("bytes per sample of %s: no icpp-sample figure" % n)
            self.w("| %s | %s |" % (n, " | ".join(cells)))
        self.w()
        self.learncost(data, cmds)

    def learncost(self, data, cmds):
        lv = [(v, l) for v, l in LEARN_VARIANTS if v in cmds and v != "icpp-sample-nolearn"]
        if "icpp-sample-nolearn" not in cmds or not lv:
            return
        self.w("Learning's cost (issue #11): each learn rate against `icpp-sample --no-learn` in the same setup --")
        self.w("wall time ratio (median [95% interval]) and file size ratio (median). Target at the default rate:")
        self.w("wall time within 3%, file at most 2x.")
        self.w()
        self.w("| program | %s |" % " | ".join("%s: time, size" % l for _, l in lv))
        self.w("|---|%s" % ("---|" * len(lv)))
        for n in self.order:
            d = data.get(n)
            if not d:
                continue
            cells = []
            for v, _ in lv:
                s = ratio_summary(ratios(d["runs"], v, base="icpp-sample-nolearn"))
                sz = [r[v]["bytes"] / r["icpp-sample-nolearn"]["bytes"] for r in d["runs"]
                      if r.get(v, {}).get("bytes") and r.get("icpp-sample-nolearn", {}).get("bytes")]
                cells.append("%s, %s" % (fmt_ratio(s, 3), "%.2fx" % statistics.median(sz) if sz else "n/a"))
            self.w("| %s | %s |" % (n, " | ".join(cells)))
        self.w()

    # -------------------------------------------------------------- figure 3
    @staticmethod
    def figures_of(c):
        """Shares (%) of the judged samples from one --check JSON, or None."""
        if not c or "error" in c or "pending" in c or "unknown-option" in c:
            return None
        bs, bp = c.get("by_samples") or {}, c.get("by_paths") or {}
        judged = c.get("with_truth") or 0
        npaths = c.get("distinct_paths") or 0
        if not judged:
            return None
        f = {"judged": judged,
             "precise": 100.0 * bs.get("precise", 0) / judged,
             "correct": 100.0 * (bs.get("precise", 0) + bs.get("ambiguous-containing-truth", 0)) / judged,
             "incorrect": 100.0 * bs.get("incorrect", 0) / judged,
             "missing": 100.0 * bs.get("missing", 0) / judged,
             "paths": 100.0 * bp.get("precise", 0) / npaths if npaths else None,
             "known": (100.0 * bs.get("precise", 0) / (judged - bs.get("missing", 0))
                       if judged - bs.get("missing", 0) else None)}
        f["uncertain"] = 100.0 * (bs.get("uncertain-containing-truth", 0) +
                                  bs.get("uncertain-not-containing-truth", 0)) / judged
        f["uncertain_wrong"] = 100.0 * bs.get("uncertain-not-containing-truth", 0) / judged
        f["inferred"] = 100.0 * sum(v for k, v in bs.items() if k.startswith("inferred")) / judged
        f["inferred_wrong"] = 100.0 * (bs.get("inferred-incorrect", 0) + bs.get("inferred-ambiguous-without-truth", 0)) \
            / judged
        return f

    def precision(self):
        self.w("## 3. Precision against the true stacks")
        self.w()
        self.w("Each input set is trained (`icpp-train`) and recorded with `icpp-sample --validate` at 2.5x the")
        self.w("overhead figures' rate (`-c` period x 0.4), or faster, so that every recording holds at least")
        self.w("~5,000 samples (period = plain run's time / 5,000, at least 10 us; tcc on nested code runs 0.09 s):")
        self.w("a recording's shares then move less from run to run, and learning has enough learn samples (see")
        self.w("\"Recording size and precision\" below); --validate also copies each sample's user stack, and takes one")
        self.w("learn sample in 2 as every cpu-clock recording does by")
        self.w("default); `icpp-resolve -m MAP --check --format json RECORDING` then unwinds every sample with")
        self.w("DWARF CFI and compares the true call path with what the map resolves it to. Offline: trained and")
        self.w("measured on the same input set; online: trained on one, measured on another. *precise*: exactly")
        self.w("one candidate path and it is the true one; *correct*: the true path is among the candidates;")
        self.w("*incorrect*: precise or ambiguous, and the true path is not among the candidates; *uncertain*:")
        self.w("reported as not sure (docs/resolve.md), counted apart from both; by distinct")
        self.w("paths, a path counts as precise if all its samples were. Percentages are of the samples that")
        self.w("have a true stack. Each figure is given three ways (issue #11): with the map alone")
        self.w("(`--no-learn --no-complete`), after learning from the recording's learn samples (`--no-complete`),")
        self.w("and with static completion as well (the default) where icpp-resolve has it.")
        self.w()
        data = self.r.get("precision", {})
        if not data:
            self.w("Not measured in this run.")
            self.w()
            return
        modes = [(m, l) for m, l in CHECK_MODES
                 if any(m in row.get("checks", {}) for rows in data.values() for row in rows)]
        if not modes:
            modes = [("check", "map only")]
        heads = " / ".join(l for _, l in modes)
        self.w("| program | build | trained on -> measured | kind | samples | precise (%s) | incorrect (%s) "
               "| missing (%s) | correct, precise (distinct paths) |" % (heads, heads, heads))
        self.w("|---|---|---|---|---|---|---|---|---|")
        agg = {}
        examples = []
        for n in self.order:
            for row in data.get(n, []):
                checks = row.get("checks") or {"check": row.get("check")}
                lab = "%s -> %s" % (row["train"], row["measure"])
                figs = {m: self.figures_of(checks.get(m)) for m, _ in modes}
                last = next((figs[m] for m, _ in reversed(modes) if figs[m]), None)
                if not last:
                    c = checks.get(modes[0][0]) or {}
                    why = (c.get("error") or c.get("pending") or "no judged samples").replace("\n", " ")
                    self.w("| %s | %s | %s | %s | --check: %s | | | | |" % (n, row["build"], lab, row["kind"],
                                                                          why.replace("|", "/")[:150]))
                    if self.a.check:
                        self.bad("--check failed for %s %s" % (n, lab))
                    continue
                cell = lambda k: " / ".join(pct(figs[m][k]) if figs[m] else "n/a" for m, _ in modes)  # noqa: E731
                self.w("| %s | %s | %s | %s | %d | %s | %s | %s | %s, %s |" % (
                    n, row["build"], lab, row["kind"], last["judged"], cell("precise"), cell("incorrect"),
                    cell("missing"), pct(last["correct"]), pct(last["paths"])))
                if row["build"] == "fp":
                    for m, _ in modes:
                        if figs[m]:
                            for k in ("precise", "incorrect", "missing", "paths", "known", "uncertain",
                                      "uncertain_wrong", "inferred", "inferred_wrong"):
                                if figs[m][k] is not None:
                                    agg.setdefault((row["kind"], m, k), []).append((n, figs[m][k]))
                c = checks.get(modes[-1][0]) or {}
                for ex in c.get("incorrect_examples", [])[:1]:
                    if not any(e[0] == n for e in examples):     # one per program
                        examples.append((n, row["build"], lab, ex))
                if self.a.check and not (0 <= last["precise"] <= 100):
                    self.bad("precision of %s %s out of range" % (n, lab))
        self.w()

        def mean(xs):   # mean over programs of each program's mean over its rows
            per = {}
            for n, x in xs:
                per.setdefault(n, []).append(x)
            return statistics.fmean(statistics.fmean(v) for v in per.values()) if per else None
        self.w("| summary (fp build; mean over programs of each program's mean) | %s | paper (SPEC CPU2006, "
               "after ARR) |" % " | ".join(l for _, l in modes))
        self.w("|---|%s---|" % ("---|" * len(modes)))

        def srow(label, kind, k, paper=""):
            self.w("| %s | %s | %s |" % (label, " | ".join(pct(mean(agg.get((kind, m, k), []))) for m, _ in modes),
                                         paper))
        srow("offline, precise by samples", "offline", "precise")
        srow("offline, precise by distinct paths", "offline", "paths", "%.0f%%" % PAPER["offline"])
        srow("offline, incorrect by samples", "offline", "incorrect")
        srow("online, precise by samples", "online", "precise")
        srow("online, precise by distinct paths", "online", "paths", "%.0f%%" % PAPER["online"])
        srow("online, incorrect by samples", "online", "incorrect")
        srow("online, missing by samples", "online", "missing")
        srow("online, uncertain by samples (not counted as precise or incorrect)", "online", "uncertain")
        srow("online, uncertain and indeed wrong, by samples", "online", "uncertain_wrong")
        srow("offline, uncertain by samples", "offline", "uncertain")
        srow("online, inferred by completion, by samples (its own status)", "online", "inferred")
        srow("online, inferred without the true path among the candidates", "online", "inferred_wrong")
        srow("online, precise by samples, of the samples whose context the map knows", "online", "known")
        raw = [(n, e["stats"]["unique_paths"]) for n in self.order
               for e in self.r.get("maps", {}).get(n, {}).get("fp", {}).values()
               if "stats" in e and "unique_paths" in e["stats"]]
        self.w()
        self.w("Raw CID uniqueness (share of a map's paths whose CID is unique; section 4): %s here, %.0f%% in "
               "the paper." % (pct(mean(raw)), PAPER["raw"]))
        self.w()
        self.w("These figures are before rewriting (section 6 has them after ARR); the paper's 88%/74% are")
        self.w("after ARR. The input sets of a program differ on purpose (compress vs decompress, flat vs nested")
        self.w("C, objects vs strings, OLTP vs analytics), so online the map alone misses most of what the")
        self.w("other input runs; learning fills it from the recording itself.")
        if examples:
            self.w()
            self.w("An incorrect resolution per row, if any (true path / what was resolved), in the last mode:")
            self.w()
            for n, b, lab, (truth, cand) in examples[:8]:
                cands = (cand or "").split(" | ")
                more = " (and %d more candidates)" % (len(cands) - 1) if len(cands) > 1 else ""
                self.w("- %s %s %s:<br>true `%s`<br>resolved `%s`%s" % (
                    n, b, lab, self.short(truth), self.short(cands[0]), more))
        self.gaps(data, modes)
        self.w()
        self.learnrate(modes)
        self.recsize()
        self.incorrect_explained(data)
        self.names()
        self.w("Without ground truth, how the samples resolved (`icpp-resolve --format json`, shares of all")
        self.w("samples: one candidate / several / CID not in the map / no CID could be formed):")
        self.w()
        self.w("| program | build | trained on -> measured | samples | precise | ambiguous | missing | unresolved |")
        self.w("|---|---|---|---|---|---|---|---|")
        for n in self.order:
            for row in data.get(n, []):
                rs = row.get("resolve", {})
                sh_ = rs.get("shares") or {}
                lab = "%s -> %s" % (row["train"], row["measure"])
                if "error" in rs or not sh_:
                    self.w("| %s | %s | %s | failed: %s | | | | |" % (n, row["build"], lab,
                                                                      str(rs.get("error", "?"))[:120]))
                    if self.a.check:
                        self.bad("icpp-resolve failed for %s %s" % (n, lab))
                    continue
                self.w("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    n, row["build"], lab, rs.get("samples"),
                    *(pct(100 * (sh_.get(k) or 0)) for k in ("precise", "ambiguous", "missing", "unresolved"))))
                if self.a.check and not all(0 <= (sh_.get(k) or 0) <= 1 for k in sh_):
                    self.bad("resolve shares of %s %s out of range" % (n, lab))
        self.w()

    def incorrect_explained(self, data):
        rows = [(n, row) for n in self.order if self.r["programs"][n].get("distro")
                for row in data.get(n, []) if row.get("kind") == "offline"]
        if not rows:
            return
        self.w("### Incorrect samples of the distro programs, offline")
        self.w()
        self.w("Offline (trained and measured on the same input) nothing should be incorrect. The samples")
        self.w("`--check` lists (its first 20) are classified: a true path with a `foo.cold` frame (a split")
        self.w("cold part that the rule of docs/definitions.md leaves a function of its own: stripped, frameless")
        self.w("and entered only at its first byte), and the rest, listed. The one class known to remain from the")
        self.w("map alone (a jump into another function's middle: glibc's mempcpy into memmove) is explained in")
        self.w("docs/resolve.md; learning resolves it.")
        self.w()
        self.w("| program | input | incorrect samples | shown | with a cold part in the true path | other |")
        self.w("|---|---|---|---|---|---|")
        other = []
        for n, row in rows:
            c = row.get("check") or {}
            bs = c.get("by_samples") or {}
            shown = c.get("incorrect_shown")
            cold = c.get("incorrect_cold")
            self.w("| %s | %s | %s | %s | %s | %s |" % (n, row["train"], bs.get("incorrect", "n/a"),
                                                     "n/a" if shown is None else shown,
                                                     "n/a" if cold is None else cold,
                                                     "n/a" if shown is None else shown - cold))
            for ex in c.get("incorrect_other") or []:
                other.append((n, row["train"], ex))
        self.w()
        for n, iid, (truth, cand) in other[:6]:
            self.w("- %s %s, not a cold part:<br>true `%s`<br>resolved `%s`" % (
                n, iid, self.short(truth), self.short((cand or "").split(" | ")[0])))
        if other:
            self.w()

    def gaps(self, data, modes):
        """Samples in PLT stubs and with a cold-part frame (issue #12), offline rows, last mode."""
        rows = []
        for n in self.order:
            for row in data.get(n, []):
                c = (row.get("checks") or {}).get(modes[-1][0]) or {}
                if row["kind"] == "offline" and (c.get("plt_samples") or c.get("cold_part_samples")):
                    rows.append((n, row, c))
        if not rows:
            return
        self.w()
        self.w("Samples whose pc is in a PLT stub, and samples with a frame in a split-off cold part (`foo.cold`),")
        self.w("as `--check` judged them (offline rows, last mode; correct: the true path among the candidates,")
        self.w("whatever the status; incorrect: not among them; docs/definitions.md says whose these samples are):")
        self.w()
        self.w("| program | build | in a PLT stub | correct | incorrect | missing | unresolved | no truth "
               "| with a cold-part frame | correct | incorrect | missing | unresolved | no truth |")
        self.w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

        def cells(g):
            g = g or {}
            tot = sum(v for v in g.values() if isinstance(v, int))
            ok = g.get("precise", 0) + g.get("ambiguous-containing-truth", 0)
            bad = g.get("incorrect", 0) + g.get("uncertain-not-containing-truth", 0) + \
                g.get("inferred-incorrect", 0) + g.get("inferred-ambiguous-without-truth", 0)
            rest = tot - ok - bad - g.get("missing", 0) - g.get("unresolved", 0) - g.get("no_truth", 0)
            return [str(tot), str(ok + rest), str(bad), str(g.get("missing", 0)), str(g.get("unresolved", 0)),
                    str(g.get("no_truth", 0))]
        for n, row, c in rows:
            self.w("| %s | %s | %s |" % (n, row["build"], " | ".join(cells(c.get("plt_samples")) +
                                                                   cells(c.get("cold_part_samples")))))

    def learnrate(self, modes):
        data = self.r.get("learnrate", {})
        if not data:
            return
        self.w("### Learn rate and precision")
        self.w()
        self.w("One online pair per program (fp build), recorded again with `icpp-sample --validate --learn=N`;")
        self.w("figures in the last mode (%s). The cost of each rate is in section 2." % modes[-1][1])
        self.w()
        self.w("| program | trained on -> measured | N | learn samples | learned | precise | incorrect | missing |")
        self.w("|---|---|---|---|---|---|---|---|")
        for n in self.order:
            for row in sorted(data.get(n, []), key=lambda r: r.get("every", 0)):
                ch = row.get("checks", {})
                c = next((ch[m] for m, _ in reversed(modes) if m in ch), None)
                f = self.figures_of(c)
                lr = (c or {}).get("learning") or {}
                if not f:
                    self.w("| %s | %s -> %s | %d | failed | | | | |" % (n, row["train"], row["measure"], row["every"]))
                    continue
                self.w("| %s | %s -> %s | %d | %s | %s | %s | %s | %s |" % (
                    n, row["train"], row["measure"], row["every"], lr.get("learn_samples", "n/a"),
                    lr.get("learned", "n/a"), pct(f["precise"]), pct(f["incorrect"]), pct(f["missing"])))
        self.w()

    def recsize(self):
        data = self.r.get("recsize", {})
        if not data:
            return
        self.w("### Recording size and precision")
        self.w()
        self.w("Learning needs learn samples, and a short run gives few. One pair per program (fp build: trained")
        self.w("on its second input set, measured on its first), recorded with `icpp-sample --validate -e cpu-clock")
        self.w("-c P` at the periods P that give the plain run ~500, ~2,500 and ~10,000 samples (at least 10 us),")
        self.w("and judged online (the other input's map) and offline (the measured input's own map), default")
        self.w("modes. The precision recordings above hold >= ~5,000 samples (a short run is sampled faster).")
        self.w()
        self.w("| program | trained on -> measured | -c P (ns) | judged samples | learn samples | online precise | online incorrect | offline precise | online - offline |")
        self.w("|---|---|---|---|---|---|---|---|---|")
        for n in self.order:
            for row in sorted(data.get(n, []), key=lambda r: r.get("target", 0)):
                on, off = self.figures_of(row.get("online")), self.figures_of(row.get("offline"))
                if not on or not off:
                    self.w("| %s | %s -> %s | %d | failed | | | | | |" % (n, row["train"], row["measure"], row["period"]))
                    continue
                lr = (row.get("online") or {}).get("learning") or {}
                self.w("| %s | %s -> %s | %d | %s | %s | %s | %s | %s | %+.1f |" % (
                    n, row["train"], row["measure"], row["period"], row["online"].get("with_truth", "n/a"),
                    lr.get("learn_samples", "n/a"), pct(on["precise"]), pct(on["incorrect"]), pct(off["precise"]),
                    on["precise"] - off["precise"]))
        self.w()

    def names(self):
        data = self.r.get("names", {})
        if not data:
            return
        self.w("### Names resolved")
        self.w()
        self.w("Share of the sample frames (weighted by samples, inlined frames included) that carry a real")
        self.w("name rather than `fn_ADDR` or `?`, in `icpp-resolve -m MAP --format folded RECORDING` of each")
        self.w("recording with its own map (section 3's recordings). Stripped functions get their names from")
        self.w("separate debug files (docs/debuginfo.md); distro programs are also resolved with")
        self.w("`ICPP_DEBUG_DIRS=/nonexistent`, i.e. with no debug file at all (libc's included), with a map")
        self.w("trained the same way (a map keeps the names it was trained with).")
        self.w()
        self.w("| program | build | input | sample frames | named, with debug files | named, without |")
        self.w("|---|---|---|---|---|---|")
        for n in self.order:
            for row in data.get(n, []):
                def share(k):
                    d = row.get(k)
                    return pct(100.0 * d["named"] / d["frames"]) if d and d["frames"] else "n/a"
                d = row.get("debug files") or {}
                self.w("| %s | %s | %s | %s | %s | %s |" % (n, row["build"], row["input"], num(d.get("frames"), "%.0f"),
                                                         share("debug files"),
                                                         share("no debug files") if "no debug files" in row else ""))
                if self.a.check and not d.get("frames"):
                    self.bad("names of %s %s: no frames" % (n, row["input"]))
        self.w()

    # -------------------------------------------------------------- figure 4
    def maps(self):
        self.w("## 4. Path maps")
        self.w()
        self.w("`icpp-train --fresh -o MAP -- PROG ARGS`, one run per input set, then `icpp-train --stats MAP`.")
        self.w("Unique: share of the map's call paths (and of the calls made) whose CID (function, height) no")
        self.w("other path shares. Training time is that single run's wall time (section 1 has the overhead")
        self.w("over randomized setups).")
        self.w()
        data = self.r.get("maps", {})
        self.w("| program | build | input | functions | call paths (deepest) | CIDs | unique: paths | unique: calls "
               "| hooked jmp / int3 | uninstrumented s | training s | map KiB |")
        self.w("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for n in self.order:
            for b in ("fp", "nofp", "distro"):
                for iid, e in data.get(n, {}).get(b, {}).items():
                    st = e.get("stats")
                    if not st:
                        self.w("| %s | %s | %s | training failed | | | | | | %s | | |" % (
                            n, b, iid, num(e.get("plain_s"), "%.3f")))
                        if self.a.check:
                            self.bad("no map statistics for %s %s %s" % (n, b, iid))
                        continue
                    self.w("| %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s / %s | %s | %s | %s |" % (
                        n, b, iid, st.get("functions"), st.get("paths"), st.get("deepest"), st.get("cids"),
                        pct(st.get("unique_paths")), pct(st.get("unique_calls")), st.get("patched_jmp"),
                        st.get("patched_int3"), num(e.get("plain_s"), "%.3f"), num(e.get("train_s"), "%.2f"),
                        num(e.get("map_bytes", 0) / 1024, "%.0f")))
                    if self.a.check and not st.get("paths"):
                        self.bad("map of %s %s %s has no paths" % (n, b, iid))
        self.w()
        self.int3_fallbacks(data)

    def int3_fallbacks(self, data):
        """Every function hooked by int3 in each map's run, with its entries through the trap."""
        lines = []
        for n in self.order:
            for b in ("fp", "nofp", "distro"):
                for iid, e in data.get(n, {}).get(b, {}).items():
                    st = e.get("stats") or {}
                    if "int3" not in st:
                        continue
                    fs = ", ".join("%s %s" % (f, si(c).strip()) for f, c in st["int3"]) or "none"
                    lines.append("| %s | %s | %s | %s | %s | %s |" % (
                        n, b, iid, fs, st.get("redirected_calls", "n/a"), si(st.get("int3_entries")).strip()))
        if not lines:
            return
        self.w("int3 fallbacks: every function hooked by int3 (its entry bytes could take no jmp), with how")
        self.w("often it was entered through the trap (`icpp-train --stats`). Direct calls (call/jmp/jcc rel32")
        self.w("in the module) of such a function are pointed at its hook and do not trap; calls through")
        self.w("pointers, rel8 branches and calls from other modules do (docs/train.md).")
        self.w()
        self.w("| program | build | input | int3-hooked functions: trap entries | direct calls rewritten | "
               "trap entries, total |")
        self.w("|---|---|---|---|---|---|")
        for line in lines:
            self.w(line)
        self.w()

    # -------------------------------------------------------------- figure 5
    def cfi(self):
        self.w("## 5. CFI lookups and resolve throughput")
        self.w()
        c = self.r.get("cfi")
        self.w("### CFI table lookups (issue #2: target >= 20 M lookups/s on one core)")
        self.w()
        if c:
            self.w("Command: `%s`" % self.rel(c["cmd"]))
            self.w("(`icpp_cfi_entry_sp` on PCs drawn uniformly over each module's functions, then uniformly")
            self.w("inside the function; 7 rounds of 4 Mi lookups, median; libdw = `dwarf_cfi_addrframe` +")
            self.w("`dwarf_frame_cfa` on a 1/32 subset.)")
            self.w()
            for line in c.get("table", "").splitlines():
                if line.startswith("|"):
                    self.w(self.rel(line))
            if c.get("error"):
                self.w()
                self.w("cfi_lookup failed: %s" % c["error"])
            if self.a.check and len([x for x in c.get("table", "").splitlines() if x.startswith("|")]) < 3:
                self.bad("cfi_lookup produced no table rows")
        else:
            self.w("Not measured in this run.")
        self.w()
        self.w(CFI_HISTORY)
        self.w()
        self.w("### icpp-resolve throughput (issue goal: >= 5 M samples/s for the CID lookup)")
        self.w()
        rs = self.r.get("resolve", {})
        if not rs:
            self.w("Not measured in this run.")
            self.w()
            return
        any_cmd = self.rel(next(iter(rs.values())).get("cmd", ""))
        self.w("A real recording of the A input set (`icpp-sample -e cpu-clock -c %d`) is repeated by" %
               self.r["meta"]["period_ns"])
        self.w("`bench/samplefile.py` until it holds N samples; `%s` is timed on both (median of 3)." % any_cmd)
        self.w("Overall = N / time on the big file (includes loading the map and building CFI tables);")
        self.w("marginal = extra samples / extra time between the two files (the per-sample cost alone).")
        self.w()
        rate_cmd = next((e["rate"]["cmd"] for e in rs.values() if "rate" in e), None)
        if rate_cmd:
            self.w("`%s` (bench/resolve_rate.c) times the same big file in-process, best of 5: the replay" %
                   self.rel(rate_cmd))
            self.w("and resolution of every sample, and the CID lookup alone on the replayed samples.")
            self.w()
        self.w("| program | recorded samples | N | big file MB | icpp-resolve on recording s | on N s "
               "| icpp-resolve overall samples/s | marginal samples/s | replay + resolve samples/s "
               "| CID lookup alone samples/s |")
        self.w("|---|---|---|---|---|---|---|---|---|---|")
        for n in self.order:
            e = rs.get(n)
            if not e:
                continue
            rt = e.get("rate", {})
            self.w("| %s | %d | %d | %.1f | %s | %s | %s | %s | %s | %s |" % (
                n, e["recorded_samples"], e["samples"], e["big_bytes"] / 1e6, num(e.get("small_s"), "%.3f"),
                num(e.get("big_s"), "%.3f"), si(e.get("per_s")), si(e.get("marginal_per_s")),
                si(rt.get("replay_per_s")), si(rt.get("cid_per_s"))))
            if self.a.check and not e.get("per_s"):
                self.bad("no resolve throughput for %s" % n)
        self.w()

    def large(self):
        self.w("### Recordings larger than memory (issue #17 item 11: a 2 GB recording in < 300 MB RSS at >= 2 M samples/s; perf.data no slower than perf report)")
        self.w()
        lg = self.r.get("large", {})
        if not lg:
            self.w("Not measured in this run.")
            self.w()
            return

        def med(runs, k):
            v = sorted(x[k] for x in runs if x.get(k) is not None)
            return v[len(v) // 2] if v else None
        sm = lg.get("samples")
        if sm:
            self.w("The %s recording of the resolve figure above repeated by `bench/samplefile.py` (`repeat(REC, OUT, "
                   "n_bytes=...)`: its samples again and again with advancing times) into a %.2f GB file, then `%s`, "
                   "%d runs; wall and CPU (user + system) time and peak RSS from GNU time (/usr/bin/time), medians." % (
                       sm["program"], sm["bytes"] / 1e9, self.rel(sm.get("cmd", "")), len(sm["runs"])))
            self.w()
            self.w("| program | samples | file GB | wall s | CPU s | samples/s (wall) | samples/s (CPU) | peak RSS MB | RSS of each run MB |")
            self.w("|---|---|---|---|---|---|---|---|---|")
            w, c, r = med(sm["runs"], "wall"), med(sm["runs"], "cpu"), med(sm["runs"], "rss_kb")
            self.w("| %s | %d | %.2f | %s | %s | %s | %s | %s | %s |" % (
                sm["program"], sm["samples"], sm["bytes"] / 1e9, num(w, "%.1f"), num(c, "%.1f"),
                si(sm["samples"] / w if w else None), si(sm["samples"] / c if c else None),
                num(r / 1024 if r else None, "%.0f"), ", ".join("%.0f" % (x["rss_kb"] / 1024) for x in sm["runs"])))
            self.w()
            if self.a.check and not sm["runs"]:
                self.bad("no run of icpp-resolve on the large sample file")
        pe = lg.get("perf")
        if pe:
            self.w("`%s` on %s's A input repeated %d times (%.2f GB, %s samples), then `%s` and `%s` on the same "
                   "file, interleaved, %d runs each, medians:" % (
                       self.rel(pe.get("record_cmd", "")).replace(" -- ", " -- ", 1), pe["program"], pe["repeat"],
                       pe["bytes"] / 1e9, pe.get("samples", "n/a"), self.rel(pe.get("icpp_cmd", "")), pe.get("perf_cmd", ""),
                       max(len(pe["icpp"]), len(pe["perf"]))))
            self.w()
            self.w("| tool | wall s | CPU s | peak RSS MB | wall of each run s |")
            self.w("|---|---|---|---|---|")
            for key, label in (("icpp", "icpp-resolve"), ("perf", "perf report --stdio")):
                runs = pe.get(key, [])
                r = med(runs, "rss_kb")
                self.w("| %s | %s | %s | %s | %s |" % (label, num(med(runs, "wall"), "%.2f"), num(med(runs, "cpu"), "%.2f"),
                                                        num(r / 1024 if r else None, "%.0f"),
                                                        ", ".join("%.2f" % x["wall"] for x in runs)))
            self.w()
            if self.a.check and not pe.get("icpp"):
                self.bad("no run of icpp-resolve on the large perf.data")
        self.w("Both readers map the file and release the pages behind the cursor; perf.data records wait in a")
        self.w("bounded window for their time order (docs/perfdata.md, docs/samples-format.md: \"How the file is read\").")
        self.w()

    def rewrite(self):
        self.w("## 6. Rewriting (ARR)")
        self.w()
        rw = self.r.get("rewrite", {})
        if rw.get("present"):
            progs = {n: e for _, key in REWRITE_KEYS for n, e in rw.get(key, {}).items()}
            cmd = next((e["cmd"] for e in progs.values() if "cmd" in e), "icpp-rewrite -m MAP -o OUT PROG")
            self.w("`%s` with MAP the build's own map of the A input set (section 4), defaults otherwise," %
                   self.rel(cmd))
            self.w("for the frame-pointer (fp) and the no-frame-pointer (nofp) build, and a distro program's binary as")
            self.w("shipped (stripped, no frame pointers); uniqueness before/after and")
            self.w("the stack growth (largest height after / before) are what icpp-rewrite reports. \"same output\"")
            self.w("counts the input sets on which OUT gave PROG's standard output (sha256) and exit status.")
            self.w("Then OUT runs every input set under `icpp-sample --validate` (section 3's period: ~5,000 samples")
            self.w("or more a recording) and `icpp-resolve -m OUT.icppmap")
            self.w("--check` judges it as in section 3 (offline: the A set; online: the others, with the map")
            self.w("trained on A); \"folded\" is the offline figure on recursion-folded paths (`--check`'s")
            self.w("`by_samples_recursion_folded`, docs/resolve.md).")
            self.w()
            self.w("| program | build | rewrite s | unique paths before -> after | unique call weight before -> after "
                   "| stack growth | functions resized / sites wrapped / functions cloned | same output "
                   "| offline precise (samples / paths) "
                   "| offline precise, folded (samples) | online precise (samples / paths) |")
            self.w("|---|---|---|---|---|---|---|---|---|---|---|")
            off_all, on_all = [], []
            for build, key in REWRITE_KEYS:
                for n in self.order:
                    e = rw.get(key, {}).get(n)
                    if not e:
                        continue
                    if "error" in e:
                        self.w("| %s | %s | failed: %s | | | | | | | | |" % (n, build, e["error"].replace("\n", " ")[:200]))
                        continue
                    cells = {}
                    folded = []
                    for kind in ("offline", "online"):
                        ps, pp = [], []
                        for row in e.get("precision", []):
                            c = row.get("check", {})
                            if row["kind"] != kind or not c.get("with_truth"):
                                continue
                            ps.append(100.0 * (c.get("by_samples") or {}).get("precise", 0) / c["with_truth"])
                            if kind == "offline" and "by_samples_recursion_folded" in c:
                                folded.append(100.0 * c["by_samples_recursion_folded"].get("precise", 0) /
                                              c["with_truth"])
                            if c.get("distinct_paths"):
                                pp.append(100.0 * (c.get("by_paths") or {}).get("precise", 0) / c["distinct_paths"])
                        cells[kind] = "%s / %s" % (pct(statistics.fmean(ps)) if ps else "n/a",
                                                   pct(statistics.fmean(pp)) if pp else "n/a")
                        if pp and build == "fp":
                            (off_all if kind == "offline" else on_all).append(statistics.fmean(pp))
                    so = e.get("same_output")
                    same = ("%d of %d" % (sum(1 for x in so if x.get("same")), len(so))) if so else "n/a"
                    if self.a.check and so and not all(x.get("same") for x in so):
                        self.bad("rewritten %s (%s) changed the output of an input set" % (n, build))
                    up, uc = e.get("unique_paths"), e.get("unique_calls")
                    self.w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                        n, build, num(e.get("rewrite_s"), "%.1f"),
                        ("%.1f%% -> %.1f%%" % tuple(up)) if up else "n/a",
                        ("%.1f%% -> %.1f%%" % tuple(uc)) if uc else "n/a",
                        ("x%.2f" % e["growth"]) if "growth" in e else "n/a",
                        "%s / %s / %s" % (e.get("resized", "n/a"),
                                          ("%d (%.1f%% of calls)" % (e["wrapped"], e.get("wrapped_calls_pct", 0)))
                                          if "wrapped" in e else "n/a",
                                          ("%d (%d sites)" % tuple(e["cloned"])) if "cloned" in e else "n/a"), same,
                        cells["offline"], pct(statistics.fmean(folded)) if folded else "n/a", cells["online"]))
            self.w()
            if off_all or on_all:
                self.w("Mean over programs (fp builds), precise by distinct paths after ARR: offline %s (paper 88%%), "
                       "online %s (paper 74%%)." % (pct(statistics.fmean(off_all)) if off_all else "n/a",
                                                    pct(statistics.fmean(on_all)) if on_all else "n/a"))
                self.w()
            self.rewrite_overhead(rw)
            self.rewrite_large(rw.get("large"))
        else:
            self.w("Pending: `icpp-rewrite` does not exist yet (issue #6). When it does, this section gets CID")
            self.w("uniqueness after ARR (paper: 88% offline, 74% online), search time and stack growth")
            self.w("(paper: 1.13x geomean, 2.54x max).")
            self.w()

    def rewrite_overhead(self, rw):
        """Run time of OUT beside PROG's (measure.py rewrite_overhead): one row per build and input set."""
        data = self.r.get("rewrite_overhead", {})
        self.w("Run time of the rewritten binaries: every OUT above beside its PROG on every input set, in")
        self.w("randomized setups as in sections 1 and 2 (%d setups: per setup one stack pad and one random" %
               self.r["meta"].get("setups_sample", 0))
        self.w("order over all runs of the program, both builds); the ratio is OUT's time over PROG's in the")
        self.w("same setup, median and 95% interval over the setups: wall time, and CPU time (user + system,")
        self.w("from the kernel's accounting of the child), which other work on a shared machine disturbs less.")
        self.w()
        rows = []
        for build, key in REWRITE_KEYS:
            for n in self.order:
                e = rw.get(key, {}).get(n)
                if not e or "error" in e:
                    continue
                runs = data.get(n, {}).get("runs", [])
                for inp in self.r["programs"][n]["inputs"]:
                    k = "%s:%s:" % (build, inp["id"])
                    s = {key: ratio_summary(ratios(runs, k + "out", k + "prog", key)) for key in ("wall", "cpu")}
                    if self.a.check and not s["wall"].get("n"):
                        self.bad("run time of rewritten %s (%s) on %s: no ratio" % (n, build, inp["id"]))
                    rows.append({"what": "%s %s %s" % (n, build, inp["id"]), "s": s, "cells": [
                        n, build, e.get("resized", "n/a"), inp["id"],
                        num(statistics.median(walls(runs, k + "prog")) if walls(runs, k + "prog") else None, "%.3f"),
                        fmt_ratio(s["wall"], 3), fmt_ratio(s["cpu"], 3)]})
        if not rows:
            self.w("Not measured in this run.")
            self.w()
            return
        self.w("| program | build | functions resized | input | PROG wall s | OUT / PROG, wall | OUT / PROG, CPU |")
        self.w("|---|---|---|---|---|---|---|")
        for row in rows:
            self.w("| %s |" % " | ".join(str(c) for c in row["cells"]))
        self.w()
        for key, label in (("wall", "Wall time"), ("cpu", "CPU time")):
            ss = [(row["what"], row["s"][key]) for row in rows if row["s"][key].get("n")]
            if not ss:
                continue
            slower = ["%s %s" % (w, fmt_ratio(s, 3)) for w, s in ss if s.get("significant") and s["lo"] > 1.0]
            faster = ["%s %s" % (w, fmt_ratio(s, 3)) for w, s in ss if s.get("significant") and s["hi"] < 1.0]
            self.w("%s: geomean of the median ratios %.3fx over %d rows; significantly slower (95%% interval "
                   "above 1.0): %s%s." % (label, geomean([s["median"] for _, s in ss]), len(ss),
                                         "; ".join(slower) if slower else "none",
                                         ("; significantly faster: " + "; ".join(faster)) if faster else ""))
        self.w("(At 95%%, about one interval in 20 excludes 1.0 by chance alone: ~%.1f of each kind's %d rows.)" %
               (0.05 * len(rows), len(rows)))
        self.w()

    def rewrite_large(self, le):
        """icpp-rewrite's time on a large map (measure.py rewrite_large)."""
        if not le:
            return
        target = le.get("target_paths", 200000)
        st = le.get("stats", {})
        self.w("Rewriting time on a large map (issue #13: under 10 s for a map of %d k paths): %s (%s) trained once" %
               (target // 1000, le.get("program"), le.get("build")))
        self.w("on `bench/gen_inputs.py OUTDIR %s 1` (%s bytes of C: a deep expression of random operators per" %
               (le.get("generator"), si(le.get("input_bytes")).strip()))
        self.w("function), `%s`; then `%s`, 3 runs." % (self.rel(le.get("train_cmd", "")), self.rel(le.get("cmd", ""))))
        self.w()
        runs = le.get("runs", [])
        if "paths" not in st or not runs:
            self.w("No figure: see the failures below.")
            self.w()
            return
        med = lambda k: statistics.median(x[k] for x in runs)  # noqa: E731
        ph = le.get("cpu_phases", {})
        up = le.get("unique_paths")
        self.w("| call paths | contexts | distinct CIDs | map KiB | wall s (median; runs) | CPU s | peak RSS MiB "
               "| unique paths before -> after | stack growth |")
        self.w("|---|---|---|---|---|---|---|---|---|")
        self.w("| %d | %s | %s | %.0f | %.2f (%s) | %.2f | %.0f | %s | %s |" % (
            st["paths"], st.get("contexts", "n/a"), st.get("cids", "n/a"), le.get("map_bytes", 0) / 1024,
            med("wall"), ", ".join("%.2f" % x["wall"] for x in runs), med("cpu"), med("rss_kb") / 1024,
            ("%.1f%% -> %.1f%%" % tuple(up)) if up else "n/a", ("x%.2f" % le["growth"]) if "growth" in le else "n/a"))
        self.w()
        if ph:
            self.w("CPU by phase (first run, icpp-rewrite's own `time:` line): %s; the search stops at `--time-limit`"
                   % ", ".join("%s %.2f s" % (k, v) for k, v in ph.items() if k != "total"))
            self.w("(6 s of CPU by default)%s." % (": it was reached" if le.get("hit_time_limit") else
                                                   ", not reached here"))
        big = st["paths"] >= target
        if big and med("wall") < 10:
            verdict = "met"
        elif big and med("cpu") < 10:
            verdict = "**not met** in wall time, met in CPU time (%.2f s): wall time counts the load" % med("cpu")
        else:
            verdict = "**not met**" + ("" if big else " (the map is smaller than the target)")
        self.w("Target (%d k paths or more in < 10 s): %d paths, %.2f s wall (median): %s." % (
            target // 1000, st["paths"], med("wall"), verdict))
        if "same_output" in le:
            self.w("OUT compiles that input with PROG's exit status and output: %s." % (
                "yes" if le["same_output"] else "**no**"))
        self.w()

    def rewrite_offline(self, rw, need):
        """(program, build, --check result) of section 6's offline recordings whose result has key `need`."""
        for build, key in REWRITE_KEYS:
            for n in self.order:
                e = rw.get(key, {}).get(n) or {}
                for row in e.get("precision", []):
                    c = row.get("check", {})
                    if row["kind"] == "offline" and c.get("with_truth") and c.get(need) is not None:
                        yield n, build, c

    def table(self, head, rows):
        """A markdown table: header cells, then rows of cells."""
        self.w("| %s |" % " | ".join(head))
        self.w("|%s" % ("---|" * len(head)))
        for cells in rows:
            self.w("| %s |" % " | ".join(cells))
        self.w()

    def rewrite_reasons(self):
        """Section 6's offline samples that stay ambiguous after rewriting, by why no padding separates
        them (--check's ambiguous_by_reason, docs/resolve.md), unfolded and recursion-folded."""
        rw = self.r.get("rewrite") or {}
        rows = []
        for n, build, c in self.rewrite_offline(rw, "ambiguous_by_reason"):
            cells = [n, build]
            for k in ("ambiguous_by_reason", "ambiguous_by_reason_recursion_folded"):
                r = c.get(k) or {}
                share = [100.0 * r.get(x, 0) / c["with_truth"] for x in REASONS]
                cells += [pct(x) if x or REASONS[i] in r else "n/a" for i, x in enumerate(share)]
                cells += [pct(100.0 - share[0] - share[1])]
            rows.append(cells)
        if not rows:
            return
        self.w("Offline samples still ambiguous after rewriting, by reason (`--check`'s `ambiguous_by_reason`,")
        self.w("docs/resolve.md), in % of the judged samples: a candidate other than the truth has the truth's")
        self.w("call edges in another order (no padding of functions or call edges separates them), its functions")
        self.w("in another order (no padding of functions does), other functions but the same ones of the program")
        self.w("(\"library\": only a shared library's differ), other functions but only ones icpp-rewrite refused")
        self.w("to pad or a library's (\"refused\"; call-site wrapping was tried for them), or other functions")
        self.w("icpp-rewrite could pad (\"separable\": its budget, time limit or conflicts left them); \"ceiling\" is")
        self.w("the precision no resizing can exceed on that recording (100% minus the first two).")
        self.w()
        self.table(["program", "build", "same edges", "same functions", "library", "refused", "separable", "ceiling",
                    "folded: same edges", "same functions", "library", "refused", "separable", "ceiling"], rows)
        self.rewrite_losses(rw)

    def rewrite_losses(self, rw):
        """Section 6's offline samples that are not precise, every verdict: ambiguous (the reasons above),
        missing or inferred by cause (--check's missing_by_cause), uncertain, unresolved, incorrect."""
        rows = []
        for n, build, c in self.rewrite_offline(rw, "missing_by_cause"):
            b, m, t = c.get("by_samples") or {}, c["missing_by_cause"], c["with_truth"]
            pc_ = lambda x: pct(100.0 * x / t, 2)  # noqa: E731
            unc = b.get("uncertain-containing-truth", 0) + b.get("uncertain-not-containing-truth", 0)
            rows.append([n, build, str(t), pc_(b.get("precise", 0)), pc_(b.get("ambiguous-containing-truth", 0)),
                         pc_(m.get("untrained-path", 0)), pc_(m.get("untrained-height", 0)), pc_(m.get("plt-stub", 0)),
                         pc_(unc), pc_(b.get("unresolved", 0)), pc_(b.get("incorrect", 0))])
        if not rows:
            return
        self.w("Where every offline sample went (% of the judged samples, `--check`): precise; ambiguous (the")
        self.w("table above); missing or inferred because the true path was never trained, was trained at other")
        self.w("heights only, or the sample is in a PLT stub none of whose callers gave a context")
        self.w("(`missing_by_cause`, docs/resolve.md); uncertain (the recording's learn samples showed a path")
        self.w("training did not have through the sample's context); unresolved (no CFI); incorrect.")
        self.w()
        self.table(["program", "build", "judged", "precise", "ambiguous", "missing: untrained path", "other height",
                    "PLT stub", "uncertain", "unresolved", "incorrect"], rows)

    def trend(self):
        tr = self.r.get("trend")
        if tr is None:
            return
        self.w("## 8. Per-path growth across input sizes (`icpp-resolve --trend`, issue #14)")
        self.w()
        self.w("Each program runs 8 inputs of one generator (scales below, two orders of magnitude), trained on the")
        self.w("4th; each run sampled with cpu-clock; the feature is the input's size as icpp-sample records it by")
        self.w("default (`bytes=`, from the file argument or standard input). Per call path: the chosen model, the")
        self.w("power-law exponent with its 95% bootstrap interval, the cost predicted at 10x the largest input")
        self.w("(cpu-clock ns), in how many runs the path had samples, and `worse` when its exponent is")
        self.w("significantly (> 0.1) above the program total's (docs/trend.md). One row per group of paths whose")
        self.w("costs follow each other.")
        self.w()
        for n in self.order:
            e = tr.get(n)
            if not e:
                continue
            self.w("### %s (%s)" % (n, e.get("generator")))
            self.w()
            self.w("`%s`, `%s`; scales %s; %s s for the trend of the 8 runs." % (
                self.rel(e.get("sample_cmd", "")), e.get("trend_cmd", ""),
                ", ".join("%g" % x for x in e.get("scales", [])), num(e.get("trend_s"), "%.1f")))
            if "program" not in e:
                self.w()
                self.w("No trend: see the failures below.")
                self.w()
                if self.a.check:
                    self.bad("trend: no result for %s" % n)
                continue
            runs = e.get("runs", [])
            if runs:
                self.w("Inputs: %s .. %s bytes." % (si(runs[0]["bytes"]), si(runs[-1]["bytes"])))
            p = e["program"]
            ci = p.get("exponent_ci") or [None, None]
            self.w("Program total: %s, exponent %s [%s, %s]; %d paths fitted in %d groups, %d scale worse than "
                   "the program." % (p.get("model"), num(p.get("exponent"), "%.2f"), num(ci[0], "%.2f"),
                                     num(ci[1], "%.2f"), e.get("paths", 0), e.get("groups", 0), e.get("worse", 0)))
            self.w()
            for key, title in (("top_10x", "by the cost predicted at 10x"),
                               ("top_exponent", "by exponent (paths with samples in at least half the runs)")):
                self.w("Top groups %s:" % title)
                self.w()
                self.w("| path (leaf end) | model | exponent [95%% CI] | predicted at 10x (%s) | runs | |" %
                       e.get("unit", ""))
                self.w("|---|---|---|---|---|---|")
                for t in e.get(key, []):
                    ci = t.get("exponent_ci") or [None, None]
                    path = t.get("path") or []
                    shown = " -> ".join(path[-3:]) if len(path) <= 3 else "... -> " + " -> ".join(path[-3:])
                    self.w("| `%s` | %s | %s [%s, %s] | %s | %s/%s | %s |" % (
                        shown, t.get("model"), num(t.get("exponent"), "%.2f"), num(ci[0], "%.2f"),
                        num(ci[1], "%.2f"), num(t.get("predicted_10x")), t.get("runs", 0) - t.get("zero_runs", 0),
                        t.get("runs", 0), "worse" if t.get("scales_worse") else ""))
                self.w()

    def errors(self):
        errs = self.r.get("errors", [])
        if not errs:
            return
        self.w("## Failures during this run")
        self.w()
        self.w("Every command that failed, with the end of its standard error (a failed run has no ratio):")
        self.w()
        for e in errs[:25]:
            self.w("- %s: %s<br>`%s`" % (e["where"], e["what"], self.rel(e["cmd"])[:400]))
            if e.get("stderr"):
                self.w("  ```")
                for line in e["stderr"].splitlines()[-4:]:
                    self.w("  " + line[:300])
                self.w("  ```")
        if len(errs) > 25:
            self.w("- ... and %d more (see the run's results.json)" % (len(errs) - 25))
        self.w()

    def fixed_cost(self, data, variants):
        """A last row: each command on /bin/true (the tool's fixed cost per run, median seconds)."""
        d = data.get("(true)")
        if not d:
            return
        pw = walls(d["runs"], "plain")
        cells = []
        for v, _ in variants:
            ws = walls(d["runs"], v)
            cells.append("%.3f s" % statistics.median(ws) if ws else "n/a")
        self.w("| *fixed cost: on /bin/true* | | %s | %s |" % (
            "%.3f" % statistics.median(pw) if pw else "n/a", " | ".join(cells)))

    @staticmethod
    def short(path, keep=4):
        """root;...;leaf with only the last `keep` frames: examples stay readable."""
        fs = (path or "").split(";")
        return path if len(fs) <= keep + 1 else "%s;...(%d frames);%s" % (fs[0], len(fs) - keep - 1,
                                                                         ";".join(fs[-keep:]))

    def rel(self, s):
        s = re.sub(r"(^|[ `])/usr/bin/(perf|uftrace) ", r"\1\2 ", s)
        s = s.replace(self.a.repo + "/", "")
        return s.replace(self.a.cache, "$CACHE")

    def render(self):
        m = machine(self.a.repo)
        self.header(m)
        self.programs()
        self.method()
        self.train()
        self.sample()
        self.precision()
        self.maps()
        self.cfi()
        self.large()
        self.rewrite()
        self.rewrite_reasons()
        statsfig.render(self)
        self.trend()
        self.errors()
        meta = self.r["meta"]
        fs = meta.get("figure_s", {})
        self.w("## Time taken")
        self.w()
        self.w("Measurements %d s (%s); the whole command %d s including installs, source fetches, builds and" % (
            meta.get("measure_s", 0), ", ".join("%s %d s" % (k, v) for k, v in fs.items()),
            time.time() - self.a.started))
        self.w("input generation (cached after the first run). `$CACHE` = `%s`." %
               self.a.cache.replace(os.path.expanduser("~"), "~"))
        return "\n".join(self.lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--command", default="bench/run")
    ap.add_argument("--mode", default="full")
    ap.add_argument("--started", type=float, default=time.time())
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--cache", default="")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    with open(a.results) as f:
        res = json.load(f)
    rep = Report(res, a)
    text = rep.render()
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, a.out)
    if a.check:
        for k in ("train", "sample", "maps", "precision", "resolve", "cfi", "stats"):
            if not res.get(k):
                rep.bad("figure '%s' missing from the results" % k)
        if re.search(r"\bnan\b|\binf\b", text):
            rep.bad("NaN or inf in the report")
        for p in rep.problems:
            print("bench: malformed: " + p, file=sys.stderr)
        return 1 if rep.problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
