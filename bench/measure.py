#!/usr/bin/env python3
"""measure.py -- run the bench experiments and write their results as JSON.

Called by bench/run, which builds the programs, generates their inputs and
writes the manifest.  report.py turns the JSON into bench/RESULTS.md.

Manifest (tab-separated, one record a line):
  P  NAME  SOURCE-PACKAGE  VERSION  BINARY-FP  BINARY-NOFP
  P  NAME  BINARY-PACKAGE  VERSION  -  -  BINARY  DEBUG-PACKAGE-AND-VERSION|-
     (a program as the distribution ships it: its one build is "distro")
  I  NAME  SET  ID  FILE  STDIN(0|1)  ARG...       SET: main | ovh
ARGS already have the input file substituted; STDIN 1 means FILE is fed on
standard input.  SET 'ovh' is the (smaller) copy of the first input set that
the training-overhead figure runs, since training runs are the slow ones.

Figures (--figures, comma list; default all):
  maps       train every input set (fp and nofp builds): map statistics and
             training time; record each input with icpp-sample --validate
  precision  resolve every recording with every map of the same build:
             CID resolution shares, and accuracy against the true stacks
             with icpp-resolve --check where that works
  names      share of the sample frames of each recording that have a real name
             (not fn_ADDR or ?), from icpp-resolve --format folded; distro
             programs also without debug files (ICPP_DEBUG_DIRS=/nonexistent,
             a map trained so: a map keeps the names it was trained with)
  sample     sampling overhead: icpp-sample vs perf record (flat, -g,
             --call-graph dwarf), equal period, over randomized setups
  train      training overhead: icpp-train vs uftrace record, over setups
  cfi        build/bench/cfi_lookup on libc and the bench binaries
  resolve    icpp-resolve throughput on a recording repeated to N samples
  large      recordings larger than memory: a >= 2 GB sample file (a recording
             repeated with advancing times) and a --call-graph dwarf perf.data
             of ~1-2 GB, resolved with peak RSS; perf report on the same file
  rewrite    icpp-rewrite on every build with its A map (needs maps): uniqueness,
             growth, same output, precision of OUT; OUT's run time beside
             PROG's over randomized setups (as many as sample's); and the
             rewriting time on a >= 200 k-path map of tcc (gen_inputs.tcc_paths,
             needs no other figure)
  stats      how far a profile can be trusted (bench/statsfig.py): the
             actionability slope on tests/programs/inject.c beside perf -g,
             --auto-period on the first program, interval coverage over runs
  trend      per-path growth (icpp-resolve --trend): sqlite3 (oltp.sql on
             standard input) and bzip2 (text) at 8 input sizes spanning two
             orders of magnitude, trained on one size, sampled (cpu-clock,
             the input's size recorded as the default feature bytes=)

A randomized setup = an environment variable ICPP_BENCH_PAD of random size
(0-4095 bytes, which moves the initial stack and everything below it) and a
random order of the variants; every variant of a program runs once per
setup, and ratios are taken within the setup.  See stats.py.
"""
import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_inputs  # noqa: E402
import samplefile  # noqa: E402
import stats  # noqa: E402
import statsfig  # noqa: E402

PAD_MAX = 4096


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def run(cmd, stdin=None, env=None, timeout=600, cwd=None, stdout=None):
    """Run cmd, stdout to /dev/null (or to the file stdout); return dict(wall, cpu, rc, err): wall
    and CPU (user + system, of cmd and the descendants it waited for) seconds.  The bench runs
    one command at a time, so the growth of this process's children's usage is cmd's."""
    fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
    fout = open(stdout, "wb") if stdout else subprocess.DEVNULL
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=subprocess.PIPE,
                             env=env, cwd=cwd, start_new_session=True)
    except OSError as e:
        return {"wall": None, "rc": None, "err": "%s: %s" % (cmd[0], e)}
    finally:
        if stdin:
            fin.close()
        if stdout:
            fout.close()
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.communicate()
        return {"wall": None, "rc": None, "err": "timed out after %d s" % timeout}
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    return {"wall": wall, "cpu": cpu, "rc": p.returncode, "err": err.decode(errors="replace")}


def run_usage(cmd, env=None, timeout=600, stdout=None):
    """Run cmd, stdout to /dev/null (or to the file stdout); return dict(wall, cpu, rss_kb, rc, err): wall and CPU
    (user + system) seconds and peak RSS of the process.  Measured by GNU time
    (/usr/bin/time, package 'time'): a child forked from python starts with
    python's pages, and Linux keeps that peak across exec in ru_maxrss."""
    import tempfile
    fd, tf = tempfile.mkstemp(prefix="icpp-bench-time-")
    os.close(fd)
    try:
        r = run(["/usr/bin/time", "-o", tf, "-f", "%e %U %S %M"] + list(cmd), None, env, timeout, stdout=stdout)
        with open(tf) as f:
            last = f.read().strip().splitlines()
    finally:
        os.unlink(tf)
    m = re.fullmatch(r"([\d.]+) ([\d.]+) ([\d.]+) (\d+)", last[-1]) if last else None
    if r["rc"] is None or not m:
        return dict(r, rc=r["rc"] if r["rc"] else 1, err=(r.get("err") or "") + "\n/usr/bin/time: %s" % last)
    r.update(wall=float(m.group(1)), cpu=float(m.group(2)) + float(m.group(3)), rss_kb=int(m.group(4)))
    return r


def shq(words):
    out = []
    for w in words:
        w = str(w)
        out.append(w if re.fullmatch(r"[-\w./:=@%+,]+", w) else "'" + w.replace("'", "'\\''") + "'")
    return " ".join(out)


def rm(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        for p in (path, path + ".old"):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def tail(text, n=6):
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


class Bench:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        t = a.tools
        self.train = os.path.join(t, "icpp-train", "icpp-train")
        self.hooks_only = os.path.join(t, "icpp-train", "libicpp-agent-hooks-only.so")
        self.sample = os.path.join(t, "icpp-sample", "icpp-sample")
        self.resolve = os.path.join(t, "icpp-resolve", "icpp-resolve")
        self.rewrite = os.path.join(t, "icpp-rewrite", "icpp-rewrite")
        self.cfi = os.path.join(t, "bench", "cfi_lookup")
        self.perf = shutil.which("perf")
        self.uftrace = shutil.which("uftrace")
        self.work = a.work
        os.makedirs(self.work, exist_ok=True)
        self.env = dict(os.environ)
        self.env.pop("ICPP_BENCH_PAD", None)
        self.env.pop("DEBUGINFOD_URLS", None)     # local debug files only: no network lookups
        self.env["LC_ALL"] = "C"
        self.programs = {}
        self.order = []
        self.read_manifest(a.manifest)
        self.res = {"meta": {"argv": sys.argv[1:], "period_ns": a.period, "setups_train": a.setups_train,
                             "setups_sample": a.setups_sample, "seed": a.seed, "pad_max": PAD_MAX,
                             "loadavg_start": os.getloadavg(), "start": time.time(),
                             "tools": {"perf": self.perf, "uftrace": self.uftrace}},
                    "programs": self.programs, "order": self.order, "errors": []}

    # ------------------------------------------------------------ plumbing
    def read_manifest(self, path):
        with open(path) as f:
            for line in f:
                w = line.rstrip("\n").split("\t")
                if w[0] == "P" and w[4] == "-":
                    self.programs[w[1]] = {"pkg": w[2], "version": w[3], "bins": {"distro": w[6]},
                                           "distro": True, "debug_package": None if w[7] == "-" else w[7],
                                           "inputs": [], "ovh": None}
                    self.order.append(w[1])
                elif w[0] == "P":
                    self.programs[w[1]] = {"pkg": w[2], "version": w[3], "bins": {"fp": w[4], "nofp": w[5]},
                                           "inputs": [], "ovh": None}
                    self.order.append(w[1])
                elif w[0] == "I":
                    inp = {"id": w[3], "file": w[4], "stdin": w[5] == "1", "args": w[6:],
                           "size": os.path.getsize(w[4])}
                    if w[2] == "ovh":
                        self.programs[w[1]]["ovh"] = inp
                    else:
                        self.programs[w[1]]["inputs"].append(inp)
        for p in self.programs.values():
            if p["ovh"] is None and p["inputs"]:
                p["ovh"] = p["inputs"][0]

    def error(self, where, cmd, r):
        msg = r.get("err") if r.get("rc") is None else "exit status %s" % r["rc"]
        e = {"where": where, "cmd": shq(cmd), "what": msg, "stderr": tail(r.get("err"))}
        self.res["errors"].append(e)
        log("FAILED %s: %s\n  %s\n  %s" % (where, msg, e["cmd"], e["stderr"].replace("\n", "\n  ")))

    def prog_cmd(self, name, build, inp):
        return [self.programs[name]["bins"][build]] + inp["args"]

    def env_pad(self, pad):
        e = dict(self.env)
        e["ICPP_BENCH_PAD"] = "x" * pad
        return e

    def save(self):
        self.res["meta"]["end"] = time.time()
        self.res["meta"]["loadavg_end"] = os.getloadavg()
        tmp = self.a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.res, f, indent=1, default=str)
        os.replace(tmp, self.a.out)

    # ------------------------------------------------------------ maps and precision
    @staticmethod
    def parse_stats(text):
        s = {}
        pats = {"functions": r"functions:\s+(\d+)", "paths": r"call paths:\s+(\d+)",
                "deepest": r"deepest (\d+)", "contexts": r"contexts:\s+(\d+)",
                "cids": r"(\d+) distinct CIDs", "unique_paths": r"unique CIDs:\s+([\d.]+)% of paths",
                "unique_contexts": r"([\d.]+)% of contexts", "unique_calls": r"([\d.]+)% of calls",
                "patched_jmp": r"patched-jmp\s+(\d+)", "patched_int3": r"patched-int3\s+(\d+)",
                "patched_none": r"patched-none\s+(\d+)", "dropped_depth": r"dropped-depth\s+(\d+)",
                "int3_entries": r"int3-entries\s+(\d+)", "redirected_calls": r"redirected-calls\s+(\d+)",
                "modules": r"modules:\s+(\d+)"}
        for k, p in pats.items():
            m = re.search(p, text)
            if m:
                s[k] = float(m.group(1)) if "." in m.group(1) else int(m.group(1))
        # every int3-hooked function and its entries through the trap
        s["int3"] = [[m.group(1), int(m.group(2))] for m in
                     re.finditer(r"^  int3: (.*): (\d+) entries through the trap$", text, re.M)]
        m = re.search(r"^  int3: (\d+) more int3-hooked functions", text, re.M)
        if m:
            s["int3"].append(["%s more, never entered" % m.group(1), 0])
        return s

    def fig_maps(self):
        out = self.res.setdefault("maps", {})
        os.makedirs(os.path.join(self.work, "maps"), exist_ok=True)
        os.makedirs(os.path.join(self.work, "rec"), exist_ok=True)
        for name in self.order:
            prog = self.programs[name]
            for build in self.builds(name):
                inputs = prog["inputs"] if build != "nofp" else prog["inputs"][:1]
                for inp in inputs:
                    key = "%s-%s-%s" % (name, build, inp["id"])
                    ent = out.setdefault(name, {}).setdefault(build, {}).setdefault(inp["id"], {})
                    cmd = self.prog_cmd(name, build, inp)
                    stdin = inp["file"] if inp["stdin"] else None
                    r = run(cmd, stdin, self.env, self.a.timeout)
                    if r["rc"] != 0:
                        self.error("plain run " + key, cmd, r)
                        continue
                    ent["plain_s"] = r["wall"]
                    mp = os.path.join(self.work, "maps", key + ".icppmap")
                    rm(mp)
                    tcmd = [self.train, "--fresh", "-o", mp, "--"] + cmd
                    log("training %s: %s" % (key, shq(tcmd)))
                    r = run(tcmd, stdin, self.env, self.a.timeout)
                    ent["train_cmd"] = shq(tcmd)
                    if r["rc"] != 0 or not os.path.exists(mp):
                        self.error("icpp-train " + key, tcmd, r)
                        continue
                    ent["train_s"] = r["wall"]
                    ent["map"] = mp
                    ent["map_bytes"] = os.path.getsize(mp)
                    p = subprocess.run([self.train, "--stats", mp], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=self.env)
                    if p.returncode != 0:
                        self.error("icpp-train --stats " + key, [self.train, "--stats", mp],
                                   {"rc": p.returncode, "err": p.stderr.decode(errors="replace")})
                    else:
                        ent["stats"] = self.parse_stats(p.stdout.decode(errors="replace"))
                    rec = os.path.join(self.work, "rec", key + ".samples")
                    rm(rec)
                    scmd = [self.sample, "--validate", "-e", "cpu-clock", "-c",
                            str(self.precision_period(ent["plain_s"])),
                            "-o", rec, "--"] + cmd
                    log("recording %s (--validate)" % key)
                    r = run(scmd, stdin, self.env, self.a.timeout)
                    ent["record_cmd"] = shq(scmd)
                    if r["rc"] != 0 or not os.path.exists(rec):
                        self.error("icpp-sample --validate " + key, scmd, r)
                        continue
                    ent["recording"] = rec
            self.save()

    PRECISION_SAMPLES = 5000        # a precision recording's samples, at least (plain run's time / period)
    MIN_PERIOD_NS = 10000           # 100 kHz: the kernel's default perf_event_max_sample_rate

    def precision_period(self, plain_s=None):
        """cpu-clock period (ns) of a precision recording: 2.5x the overhead figures' rate, or faster,
        so that every recording holds ~PRECISION_SAMPLES samples or more.  At 2.5x the rate alone tcc
        on nested code (a 0.09 s run) gave ~600 judged samples: too few to learn from (figure
        recsize), and +-2 points of noise on a share; one incorrect sample moved a row by 0.06."""
        p = max(1, self.a.period * 2 // 5)
        if plain_s:
            p = min(p, max(self.MIN_PERIOD_NS, int(plain_s * 1e9 / self.PRECISION_SAMPLES)))
        return p

    def builds(self, name=None):
        if name in self.programs and self.programs[name].get("distro"):
            return ["distro"]
        return ["fp", "nofp"] if self.a.nofp else ["fp"]

    def main_build(self, name):
        """The build the overhead figures run: fp, or a distro program's one build."""
        return self.builds(name)[0]

    # How each recording is resolved for figure 3: what the map alone knows, then
    # with the recording's learn samples (icpp-sample --learn, on by default),
    # then with static completion where icpp-resolve has it (--no-complete).
    CHECK_MODES = [("trained", ["--no-learn", "--no-complete"]), ("learned", ["--no-complete"]),
                   ("completed", [])]

    def check_modes(self, mp, rec):
        out = {}
        for mode, extra in self.CHECK_MODES:
            c = self.check(mp, rec, extra)
            if "unknown-option" in c:
                # an icpp-resolve without that option: without completion, "learned" is
                # --no-complete's figure and there is no "completed" one
                if mode == "completed" or "--no-complete" not in extra:
                    continue
                c = self.check(mp, rec, [e for e in extra if e != "--no-complete"])
                self.no_complete = True
            if mode == "completed" and getattr(self, "no_complete", False):
                continue
            out[mode] = c
        return out

    def fig_precision(self):
        maps = self.res.get("maps", {})
        out = self.res.setdefault("precision", {})
        for name in self.order:
            rows = out.setdefault(name, [])
            for build in self.builds(name):
                ents = maps.get(name, {}).get(build, {})
                for tid, t in ents.items():
                    for mid, m in ents.items():
                        if "map" not in t or "recording" not in m:
                            continue
                        row = {"build": build, "train": tid, "measure": mid,
                               "kind": "offline" if tid == mid else "online"}
                        rcmd = [self.resolve, "-m", t["map"], "--format", "json", m["recording"]]
                        p = subprocess.run(rcmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
                        if p.returncode == 0:
                            try:
                                j = json.loads(p.stdout)
                                row["resolve"] = {"samples": j.get("samples"), "shares": j.get("shares")}
                            except ValueError as e:
                                row["resolve"] = {"error": "unreadable JSON: %s" % e}
                        else:
                            self.error("icpp-resolve %s %s<-%s" % (name, mid, tid), rcmd,
                                       {"rc": p.returncode, "err": p.stderr.decode(errors="replace")})
                            row["resolve"] = {"error": tail(p.stderr.decode(errors="replace"), 2)}
                        row["checks"] = self.check_modes(t["map"], m["recording"])
                        row["check"] = row["checks"].get("completed") or row["checks"].get("learned") or \
                            row["checks"].get("trained") or {"error": "no --check ran"}
                        rows.append(row)
            self.save()

    def record_validate(self, name, inp, opts, rec, what):
        """Record input set inp of program name (fp build) with `icpp-sample --validate -e cpu-clock`
        and opts into rec: the command, or None (the failure noted)."""
        rm(rec)
        scmd = [self.sample, "--validate", "-e", "cpu-clock"] + opts + ["-o", rec, "--"] + self.prog_cmd(name, "fp", inp)
        log("recording %s %s %s" % (name, inp["id"], what))
        r = run(scmd, inp["file"] if inp["stdin"] else None, self.env, self.a.timeout)
        if r["rc"] != 0 or not os.path.exists(rec):
            self.error("icpp-sample %s %s" % (what, name), scmd, r)
            return None
        return scmd

    LEARN_RATES = [2, 3, 4, 8, 16, 64]     # 2 is icpp-sample's default for cpu-clock (first)

    def fig_learnrate(self):
        """Precision online at several learn rates: one train -> measure pair per program (fp)."""
        maps = self.res.get("maps", {})
        out = self.res.setdefault("learnrate", {})
        for name in self.order:
            prog = self.programs[name]
            ents = maps.get(name, {}).get("fp", {})
            if len(prog["inputs"]) < 2:
                continue
            a, b = prog["inputs"][0], prog["inputs"][1]
            if "map" not in ents.get(a["id"], {}):
                continue
            rows = out.setdefault(name, [])
            for n in self.LEARN_RATES:
                rec = os.path.join(self.work, "rec", "%s-fp-%s-learn%d.samples" % (name, b["id"], n))
                scmd = self.record_validate(name, b, ["--learn=%d" % n, "-c", str(self.a.period)], rec,
                                            "--learn=%d" % n)
                if not scmd:
                    continue
                rows.append({"train": a["id"], "measure": b["id"], "every": n,
                             "record_cmd": shq(scmd), "checks": self.check_modes(ents[a["id"]]["map"], rec)})
                if not self.a.keep_recordings:
                    rm(rec)
            self.save()

    RECSIZE_SAMPLES = [500, 2500, 10000]   # samples a recording holds (plain run's time / period)

    def fig_recsize(self):
        """Online and offline precision against the size of the recording: learning needs learn
        samples, so a short run gives fewer.  One pair per program (fp; trained on its second input
        set, measured on its first, so tcc's decls -> nested is among them), recorded at the periods
        that give the plain run ~RECSIZE_SAMPLES samples, judged with both maps (default modes)."""
        maps = self.res.get("maps", {})
        out = self.res.setdefault("recsize", {})
        for name in self.order:
            prog = self.programs[name]
            ents = maps.get(name, {}).get("fp", {})
            if len(prog["inputs"]) < 2:
                continue
            a, b = prog["inputs"][1], prog["inputs"][0]
            if "map" not in ents.get(a["id"], {}) or "map" not in ents.get(b["id"], {}) or \
                    not ents[b["id"]].get("plain_s"):
                continue
            rows = out.setdefault(name, [])
            for target in self.RECSIZE_SAMPLES:
                period = max(self.MIN_PERIOD_NS, int(ents[b["id"]]["plain_s"] * 1e9 / target))
                rec = os.path.join(self.work, "rec", "%s-fp-%s-size%d.samples" % (name, b["id"], target))
                scmd = self.record_validate(name, b, ["-c", str(period)], rec, "at -c %d" % period)
                if not scmd:
                    continue
                rows.append({"train": a["id"], "measure": b["id"], "target": target, "period": period,
                             "record_cmd": shq(scmd), "online": self.check(ents[a["id"]]["map"], rec),
                             "offline": self.check(ents[b["id"]]["map"], rec)})
                if not self.a.keep_recordings:
                    rm(rec)
            self.save()

    def check(self, mp, rec, extra=()):
        ccmd = [self.resolve, "-m", mp, "--check", "--format", "json"] + list(extra) + [rec]
        p = subprocess.run(ccmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        err = p.stderr.decode(errors="replace")
        if p.returncode == 2 and ("unrecognized option" in err or "unknown option" in err):
            return {"unknown-option": tail(err, 1)}
        if p.returncode != 0:
            if "not implemented" in err or "unrecognized option" in err or "invalid option" in err:
                return {"pending": tail(err, 1)}
            return {"error": tail(err, 3), "cmd": shq(ccmd)}
        try:
            j = json.loads(p.stdout)
        except ValueError as e:
            return {"error": "unreadable --check JSON: %s" % e, "cmd": shq(ccmd)}
        c = {k: j.get(k) for k in ("samples", "with_truth", "truncated_truth", "distinct_paths",
                                   "by_samples", "by_paths", "call_sites", "no_truth", "learning",
                                   "by_learned_contexts", "inferred", "uncertain", "by_samples_recursion_folded",
                                   "ambiguous_by_reason", "ambiguous_by_reason_recursion_folded",
                                   "plt_samples", "cold_part_samples", "missing_by_cause")}
        ex = []
        for s in j.get("incorrect_samples") or []:
            pair = (s.get("truth"), s.get("candidates"))
            if pair not in ex:
                ex.append(pair)
            if len(ex) >= 3:
                break
        c["incorrect_examples"] = ex
        shown = j.get("incorrect_samples") or []
        cold = [s for s in shown if re.search(r"\.cold(\.\d+)?(;|$)", s.get("truth") or "")]
        c["incorrect_shown"], c["incorrect_cold"] = len(shown), len(cold)
        c["incorrect_other"] = [(s.get("truth"), s.get("candidates")) for s in shown if s not in cold][:3]
        c["cmd"] = shq(ccmd[:-1] + ["RECORDING"])
        return c

    # ------------------------------------------------------------ names
    @staticmethod
    def named_share(folded):
        """(frames, named frames) of icpp-resolve --format folded, weighted by samples.  A
        frame is a function's name (" [inlined]" and the like after it); pseudo-frames
        ("[missing] ...", "[unresolved: ...]") are no function and are not counted."""
        tot = named = 0.0
        for line in folded.splitlines():
            stack, _, w = line.rpartition(" ")
            try:
                w = float(w)
            except ValueError:
                continue
            for fr in stack.split(";"):
                if fr.startswith("["):
                    continue
                fr = fr.split(" [", 1)[0]
                tot += w
                named += 0 if (fr in ("", "?") or re.fullmatch(r"fn_[0-9a-f]+", fr)) else w
        return tot, named

    def fig_names(self):
        maps = self.res.get("maps", {})
        out = self.res.setdefault("names", {})
        for name in self.order:
            prog = self.programs[name]
            b = self.main_build(name)
            rows = out.setdefault(name, [])
            nodebug = dict(self.env, ICPP_DEBUG_DIRS="/nonexistent")
            for iid, e in maps.get(name, {}).get(b, {}).items():
                if "map" not in e or "recording" not in e:
                    continue
                row = {"build": b, "input": iid}
                runs = [("debug files", self.env, e["map"])]
                if prog.get("distro"):
                    # a map keeps the names it was trained with: train one without debug files
                    inp = next(i for i in prog["inputs"] if i["id"] == iid)
                    mp = e["map"].replace(".icppmap", "-nodebug.icppmap")
                    rm(mp)
                    tcmd = [self.train, "-q", "--fresh", "-o", mp, "--"] + self.prog_cmd(name, b, inp)
                    r = run(tcmd, inp["file"] if inp["stdin"] else None, nodebug, self.a.timeout)
                    if r["rc"] != 0:
                        self.error("icpp-train (no debug files) %s %s" % (name, iid), tcmd, r)
                    else:
                        runs.append(("no debug files", nodebug, mp))
                for label, env, mp in runs:
                    cmd = [self.resolve, "-m", mp, "--format", "folded", e["recording"]]
                    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                    if p.returncode != 0:
                        self.error("icpp-resolve --format folded %s %s" % (name, iid), cmd,
                                   {"rc": p.returncode, "err": p.stderr.decode(errors="replace")})
                        continue
                    tot, named = self.named_share(p.stdout.decode(errors="replace"))
                    row[label] = {"frames": tot, "named": named,
                                  "cmd": shq([self.resolve, "-m", "MAP", "--format", "folded", "RECORDING"])}
                rows.append(row)
            self.save()

    # ------------------------------------------------------------ overhead figures
    def setups(self, n, variants_of, figure):
        """Run n setups; variants_of(name) -> {variant: callable(pad) -> dict(wall, ...)}.
        The pseudo-program "(true)" runs every variant on /bin/true: each tool's fixed cost."""
        out = self.res.setdefault(figure, {})
        for s in range(n):
            for name in self.order + ["(true)"]:
                vs = variants_of(name)
                if not vs:
                    continue
                pad = self.rng.randrange(PAD_MAX)
                order = list(vs)
                self.rng.shuffle(order)
                ent = out.setdefault(name, {"runs": []})
                res = {"setup": s, "pad": pad, "order": order}
                for v in order:
                    res[v] = vs[v](pad)
                ent["runs"].append(res)
            log("%s: setup %d/%d done" % (figure, s + 1, n))
            self.save()

    def variant(self, name, build, inp, tool, figure, v, binary=None, label="PROG"):
        """A callable(pad) running one variant of one program (inp None: /bin/true), with cleanup.
        binary: run this file instead of the build's binary (called label in the command shown)."""
        cmd = self.prog_cmd(name, build, inp) if inp else [shutil.which("true") or "/bin/true"]
        if binary:
            cmd = [binary] + cmd[1:]
        stdin = inp["file"] if inp and inp["stdin"] else None
        scratch = os.path.join(self.work, "scratch")
        os.makedirs(scratch, exist_ok=True)
        outf = os.path.join(scratch, "%s-%s.out" % (re.sub(r"\W", "", name), v))
        full = tool(outf) + cmd
        self.res.setdefault("commands", {}).setdefault(figure, {})[v] = shq(tool("OUT") + [label, "ARGS..."])
        failed = {"n": 0}

        def go(pad):
            rm(outf)
            r = run(full, stdin, self.env_pad(pad), self.a.timeout)
            d = {"wall": r["wall"] if r["rc"] == 0 else None, "cpu": r.get("cpu") if r["rc"] == 0 else None}
            if r["rc"] != 0:
                failed["n"] += 1
                if failed["n"] == 1:
                    self.error("%s %s %s" % (figure, name, v), full, r)
                d["err"] = "exit %s" % r["rc"] if r["rc"] is not None else r["err"]
            elif os.path.exists(outf):
                d["bytes"] = (sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(outf) for f in fs)
                              if os.path.isdir(outf) else os.path.getsize(outf))
            m = re.search(r"(\d+) samples of", r["err"] or "") or re.search(r"\((\d+) samples\)", r["err"] or "")
            if m and r["rc"] == 0:
                d["samples"] = int(m.group(1))
            rm(outf)
            return d
        return go

    def fig_sample(self):
        P = str(self.a.period)
        tools = {"plain": lambda o: [],
                 "icpp-sample": lambda o: [self.sample, "-e", "cpu-clock", "-c", P, "-o", o, "--"],
                 "icpp-sample-nolearn": lambda o: [self.sample, "--no-learn", "-e", "cpu-clock", "-c", P, "-o", o,
                                                   "--"]}
        for n in self.LEARN_RATES[1:]:      # the first is the default: "icpp-sample"
            tools["icpp-sample-learn%d" % n] = (lambda n: lambda o: [self.sample, "--learn=%d" % n, "-e", "cpu-clock",
                                                                     "-c", P, "-o", o, "--"])(n)
        if self.perf:
            # --no-bpf-event: perf 6.1 otherwise waits out a 1 s poll of its side-band
            # thread at exit, which would count as sampling overhead
            base = lambda o: [self.perf, "record", "--no-bpf-event", "-e", "cpu-clock:u", "-c", P,  # noqa: E731
                              "-o", o]
            tools["perf-flat"] = lambda o: base(o) + ["--"]
            tools["perf-g"] = lambda o: base(o) + ["-g", "--"]
            tools["perf-dwarf"] = lambda o: base(o) + ["--call-graph", "dwarf", "--"]
        cache = {}

        def variants(name):
            if name not in cache:
                inp = self.programs[name]["inputs"][0] if name in self.programs else None
                cache[name] = {v: self.variant(name, self.main_build(name), inp, t, "sample", v)
                               for v, t in tools.items()}
                self.res.setdefault("sample", {}).setdefault(name, {"runs": []})["input"] = \
                    inp["id"] if inp else None
            return cache[name]
        self.setups(self.a.setups_sample, variants, "sample")

    def fig_train(self):
        tools = {"plain": lambda o: [],
                 "icpp-train": lambda o: [self.train, "-q", "--fresh", "-o", o, "--"],
                 "icpp-train-main": lambda o: [self.train, "-q", "--modules", "main", "--fresh", "-o", o, "--"]}
        if os.path.exists(self.hooks_only):
            # the floor: every entry hooked as icpp-train does, the trampoline returns at once
            scratch = os.path.join(self.work, "scratch")
            tools["hooks-only"] = lambda o: ["env", "LD_PRELOAD=" + self.hooks_only, "ICPP_TRAIN_DIR=" + scratch]
        if self.uftrace:
            tools["uftrace"] = lambda o: [self.uftrace, "record", "-d", o, "-P", "."]
        # the no-frame-pointer build, in the same setups: its overhead next to the fp build's
        nofp_tools = {"plain": tools["plain"], "icpp-train": tools["icpp-train"],
                      "icpp-train-main": tools["icpp-train-main"]} if "nofp" in self.builds() else {}
        cache = {}

        def variants(name):
            if name not in cache:
                inp = self.programs[name]["ovh"] if name in self.programs else None
                vs = {v: self.variant(name, self.main_build(name), inp, t, "train", v) for v, t in tools.items()}
                if inp and "nofp" in self.builds(name):
                    vs.update({v + "-nofp": self.variant(name, "nofp", inp, t, "train", v + "-nofp")
                               for v, t in nofp_tools.items()})
                ent = self.res.setdefault("train", {}).setdefault(name, {"runs": []})
                ent["input"] = inp["id"] if inp else None
                ent["input_bytes"] = inp["size"] if inp else 0
                if "uftrace" in vs and inp:
                    # uftrace's default (return hooks) can crash programs that longjmp
                    # (lua's error handling): try once, fall back to --estimate-return.
                    r = vs["uftrace"](0)
                    if r.get("wall") is None:
                        self.res["errors"][-1]["what"] += " (retrying with uftrace --estimate-return)"
                        est = lambda o: [self.uftrace, "record", "--estimate-return", "-d", o, "-P", "."]  # noqa
                        vs["uftrace"] = self.variant(name, self.main_build(name), inp, est, "train", "uftrace")
                        ent["uftrace_mode"] = "--estimate-return"
                        self.res["commands"]["train"]["uftrace"] = \
                            shq([self.uftrace, "record", "-d", "OUT", "-P", ".", "PROG", "ARGS..."])
                        self.res["commands"]["train"]["uftrace-estimate-return"] = \
                            shq(est("OUT") + ["PROG", "ARGS..."])
                cache[name] = vs
            return cache[name]
        self.setups(self.a.setups_train, variants, "train")

    # ------------------------------------------------------------ cfi, resolve, rewrite
    def fig_cfi(self):
        libc = "/lib/x86_64-linux-gnu/libc.so.6"
        bins = [libc] + [self.programs[n]["bins"][b] for n in self.order for b in self.builds(n)]
        cmd = [self.cfi] + bins
        log("cfi_lookup: " + shq(cmd))
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        ent = {"cmd": shq(cmd), "table": p.stdout.decode(errors="replace")}
        if p.returncode != 0:
            ent["error"] = tail(p.stderr.decode(errors="replace"), 3)
            self.error("cfi_lookup", cmd, {"rc": p.returncode, "err": p.stderr.decode(errors="replace")})
        self.res["cfi"] = ent
        self.save()

    def fig_resolve(self):
        out = self.res.setdefault("resolve", {})
        maps = self.res.get("maps", {})
        N = self.a.resolve_samples
        for name in self.order:
            m = maps.get(name, {}).get("fp", {})
            inp = self.programs[name]["inputs"][0]
            ent = m.get(inp["id"], {})
            if "map" not in ent:
                continue
            rec = os.path.join(self.work, "rec", name + "-plain.samples")
            big = os.path.join(self.work, "rec", name + "-big.samples")
            rm(rec)
            cmd = [self.sample, "-q", "-e", "cpu-clock", "-c", str(self.a.period), "-o", rec, "--"] \
                + self.prog_cmd(name, "fp", inp)
            r = run(cmd, inp["file"] if inp["stdin"] else None, self.env, self.a.timeout)
            if r["rc"] != 0:
                self.error("icpp-sample (resolve figure) " + name, cmd, r)
                continue
            try:
                n, n0 = samplefile.repeat(rec, big, N)
            except (samplefile.FormatError, OSError) as e:
                self.error("repeat samples " + name, ["samplefile.repeat", rec, big], {"rc": 1, "err": str(e)})
                continue
            res = {"samples": n, "recorded_samples": n0, "big_bytes": os.path.getsize(big),
                   "cmd": shq([self.resolve, "-m", "MAP", "-o", "/dev/null", "RECORDING"])}
            for label, f in (("small", rec), ("big", big)):
                ts = []
                for _ in range(3):
                    rcmd = [self.resolve, "-m", ent["map"], "-o", "/dev/null", f]
                    r = run(rcmd, None, self.env, self.a.timeout)
                    if r["rc"] != 0:
                        self.error("icpp-resolve (throughput) " + name, rcmd, r)
                        break
                    ts.append(r["wall"])
                if ts:
                    res[label + "_s"] = sorted(ts)[len(ts) // 2]
            rate = os.path.join(self.a.tools, "bench", "resolve_rate")
            if os.path.exists(rate):
                # bench/resolve_rate.c: replay + resolve, and the CID lookup alone, best of 5
                p = subprocess.run([rate, ent["map"], big], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=self.env)
                m = re.search(r"\|\s*(\d+)\s*\|\s*([\d.]+) M\s*\|\s*([\d.]+) M\s*\|", p.stdout.decode())
                if p.returncode == 0 and m:
                    res["rate"] = {"samples": int(m.group(1)), "replay_per_s": float(m.group(2)) * 1e6,
                                   "cid_per_s": float(m.group(3)) * 1e6,
                                   "cmd": shq([rate, "MAP", "RECORDING"])}
                else:
                    self.error("resolve_rate " + name, [rate, ent["map"], big],
                               {"rc": p.returncode, "err": p.stderr.decode(errors="replace")})
            if "big_s" in res:
                res["per_s"] = n / res["big_s"]
                if "small_s" in res and res["big_s"] > res["small_s"]:
                    res["marginal_per_s"] = (n - n0) / (res["big_s"] - res["small_s"])
            out[name] = res
            rm(big)
            self.save()

    def fig_large(self):
        """Issue #17 item 11: recordings larger than memory.  The first program
        with a map: its recording (as for figure resolve) repeated with
        advancing times into a file of --large-bytes, and a perf record
        --call-graph dwarf of it on its A input repeated K times (~
        --large-perf-bytes); icpp-resolve on both and perf report --stdio on
        the perf.data, --large-runs runs each (interleaved), wall, CPU and peak
        RSS of every run."""
        if self.a.large_bytes <= 0:
            return
        out = self.res.setdefault("large", {})
        maps = self.res.get("maps", {})
        name = next((n for n in self.order if "map" in maps.get(n, {}).get("fp", {}).get(
            self.programs[n]["inputs"][0]["id"], {})), None)
        if not name:
            self.error("large recordings", ["fig_large"], {"rc": 1, "err": "no program has a map"})
            return
        inp = self.programs[name]["inputs"][0]
        mp = maps[name]["fp"][inp["id"]]["map"]
        os.makedirs(os.path.join(self.work, "rec"), exist_ok=True)
        rec = os.path.join(self.work, "rec", name + "-plain.samples")
        if not os.path.exists(rec):
            cmd = [self.sample, "-q", "-e", "cpu-clock", "-c", str(self.a.period), "-o", rec, "--"] \
                + self.prog_cmd(name, "fp", inp)
            r = run(cmd, inp["file"] if inp["stdin"] else None, self.env, self.a.timeout)
            if r["rc"] != 0:
                self.error("icpp-sample (large figure) " + name, cmd, r)
                return
        big = os.path.join(self.work, "rec", name + "-large.samples")
        rm(big)
        try:
            n, n0 = samplefile.repeat(rec, big, 10**15, self.a.large_bytes)
        except (samplefile.FormatError, OSError) as e:
            self.error("repeat samples (large) " + name, ["samplefile.repeat", rec, big], {"rc": 1, "err": str(e)})
            rm(big)
            return
        ent = out.setdefault("samples", {"program": name, "samples": n, "recorded_samples": n0,
                                         "bytes": os.path.getsize(big), "runs": []})
        rcmd = [self.resolve, "-m", mp, "-o", "/dev/null", big]
        ent["cmd"] = shq([self.resolve, "-m", "MAP", "-o", "/dev/null", "LARGE.samples"])
        log("large: %s (%d samples, %.2f GB)" % (shq(rcmd), n, ent["bytes"] / 1e9))
        for _ in range(self.a.large_runs):
            r = run_usage(rcmd, self.env, max(self.a.timeout, 1800))
            if r["rc"] != 0:
                self.error("icpp-resolve (large sample file) " + name, rcmd, r)
                break
            ent["runs"].append({k: r[k] for k in ("wall", "cpu", "rss_kb")})
            self.save()
        rm(big)
        if not self.perf or self.a.large_perf_bytes <= 0:
            return
        # perf.data: the A input repeated K times, K from a first recording's size.
        pd = os.path.join(self.work, "rec", name + "-large.perf.data")
        period = max(self.a.period // 5, 10000)

        def record(k):
            src = inp["file"]
            f = src
            if k > 1:
                f = os.path.join(self.work, "rec", name + "-large-input")
                with open(src, "rb") as i:
                    data = i.read()
                with open(f, "wb") as o:
                    for _ in range(k):
                        o.write(data)
            args = [f if a == src else a for a in self.prog_cmd(name, "fp", inp)]
            pcmd = [self.perf, "record", "--no-bpf-event", "-q", "-e", "cpu-clock:u", "-c", str(period),
                    "--call-graph", "dwarf", "-o", pd, "--"] + args
            rm(pd)
            r = run(pcmd, f if inp["stdin"] else None, self.env, max(self.a.timeout, 1800))
            return pcmd, r
        pcmd, r = record(1)
        if r["rc"] != 0 or not os.path.exists(pd):
            self.error("perf record (large) " + name, pcmd, r)
            return
        k = max(1, min(2000, -(-self.a.large_perf_bytes // max(os.path.getsize(pd), 1))))
        if k > 1:
            pcmd, r = record(k)
            if r["rc"] != 0 or not os.path.exists(pd):
                self.error("perf record (large) " + name, pcmd, r)
                return
        pe = out.setdefault("perf", {"program": name, "repeat": k, "bytes": os.path.getsize(pd),
                                     "record_cmd": shq(pcmd), "icpp": [], "perf": []})
        icmd = [self.resolve, "-m", mp, "-o", "/dev/null", pd]
        rpcmd = [self.perf, "report", "--stdio", "-i", pd]
        pe["icpp_cmd"] = shq([self.resolve, "-m", "MAP", "-o", "/dev/null", "LARGE.perf.data"])
        pe["perf_cmd"] = shq(["perf", "report", "--stdio", "-i", "LARGE.perf.data"])
        log("large: %s vs %s (%.2f GB)" % (shq(icmd), shq(rpcmd), pe["bytes"] / 1e9))
        for _ in range(self.a.large_runs):
            for key, cmd in (("icpp", icmd), ("perf", rpcmd)):
                r = run_usage(cmd, self.env, max(self.a.timeout, 1800))
                if r["rc"] != 0:
                    self.error("%s (large perf.data) %s" % (key, name), cmd, r)
                    continue
                pe[key].append({k: r[k] for k in ("wall", "cpu", "rss_kb")})
            self.save()
        js = os.path.join(self.work, "rec", name + "-large.json")
        p = subprocess.run([self.resolve, "-m", mp, "--format", "json", "-o", js, pd], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=self.env)
        try:
            with open(js) as f:
                pe["samples"] = json.load(f).get("samples")
        except (OSError, ValueError):
            pass
        self.save()
        rm(js)
        rm(pd)
        rm(os.path.join(self.work, "rec", name + "-large-input"))

    @staticmethod
    def parse_rewrite(text):
        """The summary icpp-rewrite prints (before/after uniqueness, stack growth)."""
        s = {}
        m = re.search(r"unique CIDs, by paths\s+([\d.]+)%\s+([\d.]+)%", text)
        if m:
            s["unique_paths"] = [float(m.group(1)), float(m.group(2))]
        m = re.search(r"unique CIDs, by call weight\s+([\d.]+)%\s+([\d.]+)%", text)
        if m:
            s["unique_calls"] = [float(m.group(1)), float(m.group(2))]
        m = re.search(r"max height:\s+(\d+) -> (\d+) bytes \(x([\d.]+)", text)
        if m:
            s["max_height"] = [int(m.group(1)), int(m.group(2))]
            s["growth"] = float(m.group(3))
        m = re.search(r"resized:\s+(\d+) functions", text)
        if m:
            s["resized"] = int(m.group(1))
        m = re.search(r"^wrapped:\s+(\d+) call sites(?: \(([\d.]+)% of the training's calls)?", text, re.M)
        if m:
            s["wrapped"] = int(m.group(1))
            s["wrapped_calls_pct"] = float(m.group(2)) if m.group(2) else 0.0
        m = re.search(r"^cloned:\s+(\d+) functions for (\d+) call sites", text, re.M)
        if m:
            s["cloned"] = [int(m.group(1)), int(m.group(2))]
        # where the CPU time went: "time: T s CPU: reading R, analysis A, search S, new map M, writing W"
        m = re.search(r"^time:\s+([\d.]+) s CPU: (.*)$", text, re.M)
        if m:
            s["cpu_phases"] = dict([("total", float(m.group(1)))] + [
                (k, float(v)) for k, v in re.findall(r"([a-z][a-z ]*?) ([\d.]+)", m.group(2))])
        m = re.search(r"^search:\s+([\d.]+) s CPU.*", text, re.M)
        if m:
            s["hit_time_limit"] = "(time limit reached)" in m.group(0)
        return s

    def fig_stats(self):
        self.res["stats"] = statsfig.measure(self, self.a.stats_runs)
        self.save()

    @staticmethod
    def outcome(cmd, stdin, env, timeout):
        """(exit status, sha256 of stdout) of cmd, run in a fresh scratch directory."""
        import hashlib
        import tempfile
        d = tempfile.mkdtemp(prefix="icpp-bench-out-")
        fin = open(stdin, "rb") if stdin else subprocess.DEVNULL
        try:
            p = subprocess.run(cmd, stdin=fin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                               cwd=d, timeout=timeout)
            return p.returncode, hashlib.sha256(p.stdout).hexdigest()
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, str(e)
        finally:
            if stdin:
                fin.close()
            shutil.rmtree(d, ignore_errors=True)

    # section 6's entries per build (report.py reads the same keys)
    REWRITE_KEYS = {"fp": "programs", "nofp": "programs_nofp", "distro": "programs_distro"}

    def fig_rewrite(self):
        """Each build (fp, nofp) of each program rewritten with its own map of the A input
        set; OUT must give every input set the original's output and exit status; then OUT
        runs every input set under --validate and --check judges it.  Then OUT's run time
        beside PROG's over randomized setups, and icpp-rewrite's time on a large map."""
        ent = {"present": os.path.exists(self.rewrite), "programs": {}, "programs_nofp": {}, "programs_distro": {}}
        self.res["rewrite"] = ent
        if not ent["present"]:
            self.save()
            return
        os.makedirs(os.path.join(self.work, "rewrite"), exist_ok=True)
        outs = self.rewrite_programs(ent)
        self.rewrite_overhead(outs)
        self.rewrite_large(ent)

    def rewrite_programs(self, ent):
        """The per-program part of fig_rewrite; returns {name: {build: OUT}} of the
        rewrites that succeeded."""
        outs = {}
        maps = self.res.get("maps", {})
        for build in ("fp", "nofp", "distro"):
            for name in self.order:
                if build not in self.builds(name):
                    continue
                prog = self.programs[name]
                a = prog["inputs"][0]
                m = maps.get(name, {}).get(build, {}).get(a["id"], {})
                if "map" not in m:
                    continue
                out = os.path.join(self.work, "rewrite", "%s-%s.arr" % (name, build))
                rm(out)
                cmd = [self.rewrite, "-m", m["map"], "-o", out, prog["bins"][build]]
                log("rewriting %s (%s): %s" % (name, build, shq(cmd)))
                t0 = time.perf_counter()
                try:
                    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env,
                                       timeout=self.a.timeout)
                except subprocess.TimeoutExpired:
                    self.error("icpp-rewrite " + name, cmd, {"rc": None, "err": "timed out"})
                    continue
                wall = time.perf_counter() - t0
                text = p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")
                e = {"cmd": shq([self.rewrite, "-m", "MAP", "-o", "OUT", "PROG"]), "map_input": a["id"]}
                ent[self.REWRITE_KEYS[build]][name] = e
                if p.returncode != 0 or not os.path.exists(out):
                    self.error("icpp-rewrite " + name, cmd, {"rc": p.returncode, "err": text})
                    e["error"] = tail(text, 3)
                    continue
                e["rewrite_s"] = wall
                e.update(self.parse_rewrite(text))
                outs.setdefault(name, {})[build] = out
                same = e["same_output"] = []
                for inp in prog["inputs"]:
                    stdin = inp["file"] if inp["stdin"] else None
                    o0 = self.outcome([prog["bins"][build]] + inp["args"], stdin, self.env, self.a.timeout)
                    o1 = self.outcome([out] + inp["args"], stdin, self.env, self.a.timeout)
                    same.append({"input": inp["id"], "same": o0 == o1 and o0[0] is not None, "rc": o0[0]})
                rows = e["precision"] = []
                for inp in prog["inputs"]:
                    rec = os.path.join(self.work, "rewrite", "%s-%s-%s.samples" % (name, build, inp["id"]))
                    rm(rec)
                    # as section 3's recordings: ~PRECISION_SAMPLES or more (at the overhead rate tcc's
                    # A set gave ~200 judged samples, and one sample moved sqlite3's row by 0.17 points)
                    plain_s = maps.get(name, {}).get(build, {}).get(inp["id"], {}).get("plain_s")
                    scmd = [self.sample, "--validate", "-e", "cpu-clock", "-c", str(self.precision_period(plain_s)),
                            "-o", rec, "--", out] + inp["args"]
                    r = run(scmd, inp["file"] if inp["stdin"] else None, self.env, self.a.timeout)
                    if r["rc"] != 0:
                        self.error("icpp-sample --validate (rewritten) %s %s" % (name, inp["id"]), scmd, r)
                        continue
                    rows.append({"train": a["id"], "measure": inp["id"],
                                 "kind": "offline" if inp is a else "online",
                                 "check": self.check(out + ".icppmap", rec)})
                self.save()
        return outs

    def rewrite_overhead(self, outs):
        """OUT's wall time beside PROG's, every build and input set of every rewritten
        program, in the randomized setups of the overhead figures (as many as figure
        sample's): per setup one pad and one random order over all of a program's runs;
        the ratio OUT / PROG is taken within the setup (report.py)."""
        cache = {}

        def variants(name):
            if name not in cache:
                vs = {}
                for build, out in outs.get(name, {}).items():
                    for inp in self.programs[name]["inputs"]:
                        k = "%s:%s:" % (build, inp["id"])
                        plain = lambda o: []  # noqa: E731
                        vs[k + "prog"] = self.variant(name, build, inp, plain, "rewrite_overhead", k + "prog")
                        vs[k + "out"] = self.variant(name, build, inp, plain, "rewrite_overhead", k + "out",
                                                     binary=out, label="OUT")
                cache[name] = vs
            return cache[name]
        if outs:
            self.setups(self.a.setups_sample, variants, "rewrite_overhead")

    LARGE_MAP_PATHS = 200000     # issue #13: rewriting a map of this many paths takes < 10 s

    def rewrite_large(self, ent):
        """icpp-rewrite on a map of >= LARGE_MAP_PATHS call paths: tcc (fp) trained on
        gen_inputs.tcc_paths (one run, ~270 k paths at scale 1), rewritten 3 times (wall,
        CPU, peak RSS); OUT compiles that input as PROG does (exit status, output)."""
        if "tcc" not in self.programs or self.programs["tcc"].get("distro"):
            return
        prog = self.programs["tcc"]
        tmpl = prog["inputs"][0]
        d = os.path.join(self.work, "rewrite", "large")
        os.makedirs(d, exist_ok=True)
        fname, data = gen_inputs.GENERATORS["tcc_paths"](1.0)
        f = os.path.join(d, fname)
        with open(f, "wb") as fh:
            fh.write(data)
        args = [f if x == tmpl["file"] else x for x in tmpl["args"]]
        binary = prog["bins"]["fp"]
        mp, out = os.path.join(d, "tcc-paths.icppmap"), os.path.join(d, "tcc-paths.arr")
        le = ent["large"] = {"program": "tcc", "build": "fp", "generator": "tcc_paths", "input_bytes": len(data),
                             "target_paths": self.LARGE_MAP_PATHS, "runs": []}
        rm(mp)
        tcmd = [self.train, "-q", "--fresh", "-o", mp, "--", binary] + args
        log("large map: " + shq(tcmd))
        r = run(tcmd, None, self.env, self.a.timeout)
        le["train_cmd"] = shq([self.train, "-q", "--fresh", "-o", "MAP", "--", "tcc"] +
                              [os.path.basename(x) if os.path.isabs(x) else x for x in args])
        if r["rc"] != 0:
            self.error("icpp-train (large map) tcc", tcmd, r)
            return
        le["map_bytes"] = os.path.getsize(mp)
        p = subprocess.run([self.train, "--stats", mp], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env)
        le["stats"] = self.parse_stats(p.stdout.decode(errors="replace"))
        cmd = [self.rewrite, "-m", mp, "-o", out, binary]
        le["cmd"] = shq([self.rewrite, "-m", "MAP", "-o", "OUT", "PROG"])
        summary = os.path.join(d, "summary.txt")
        for k in range(3):
            rm(out)
            log("large map: %s (run %d of 3)" % (shq(cmd), k + 1))
            r = run_usage(cmd, self.env, self.a.timeout, stdout=summary if k == 0 else None)
            if r["rc"] != 0:
                self.error("icpp-rewrite (large map) tcc", cmd, r)
                break
            le["runs"].append({x: r[x] for x in ("wall", "cpu", "rss_kb")})
            if k == 0:
                with open(summary, errors="replace") as fh:
                    text = fh.read()
                le.update(self.parse_rewrite(text))
            self.save()
        if le["runs"]:
            le["same_output"] = self.outcome([binary] + args, None, self.env, self.a.timeout) == \
                self.outcome([out] + args, None, self.env, self.a.timeout)
        self.save()
        for x in (mp, out, out + ".icppmap", f, summary):
            rm(x)


class TrendFigure:
    """Figure trend: icpp-resolve --trend on a bench program at several input sizes."""
    # program, generator, how the program reads the input, scales (8, over two orders of magnitude)
    CASES = [("sqlite3", "sqlite_oltp", "stdin", ":memory:"), ("bzip2", "bzip2_text", "arg", "-c")]
    SCALES = [0.04 * 100 ** (k / 7) for k in range(8)]      # 0.04 .. 4 (times --trend-scale)

    def __init__(self, bench):
        self.b = bench
        self.SCALES = [round(x * bench.a.trend_scale, 4) for x in self.SCALES]

    def run(self):
        b = self.b
        out = b.res.setdefault("trend", {})
        top = os.path.join(b.work, "trend")
        os.makedirs(top, exist_ok=True)
        for name, gen, how, arg in self.CASES:
            if name not in b.programs:
                continue
            binary = b.programs[name]["bins"]["fp"]
            ent = out.setdefault(name, {"generator": gen, "scales": self.SCALES, "runs": []})
            recs, cmds = [], []
            for k, sc in enumerate(self.SCALES):
                d = os.path.join(top, "%s-%d" % (name, k))
                os.makedirs(d, exist_ok=True)
                fname, data = gen_inputs.GENERATORS[gen](sc)
                f = os.path.join(d, fname)
                with open(f, "wb") as fh:
                    fh.write(data)
                cmds.append(([binary, arg] if how == "stdin" else [binary, arg, f], f if how == "stdin" else None, f))
            mp = os.path.join(top, name + ".icppmap")
            rm(mp)
            cmd, stdin, _ = cmds[3]
            tcmd = [b.train, "--fresh", "-o", mp, "--"] + cmd
            r = run(tcmd, stdin, b.env, b.a.timeout)
            ent["train_cmd"] = shq(tcmd) + (" < INPUT" if stdin else "")
            if r["rc"] != 0:
                b.error("trend: icpp-train " + name, tcmd, r)
                continue
            for k, (cmd, stdin, f) in enumerate(cmds):
                rec = os.path.join(top, "%s-%d.samples" % (name, k))
                rm(rec)
                scmd = [b.sample, "-q", "-e", "cpu-clock", "-F", "4000", "-o", rec, "--"] + cmd
                r = run(scmd, stdin, b.env, b.a.timeout)
                if r["rc"] != 0:
                    b.error("trend: icpp-sample %s %d" % (name, k), scmd, r)
                    break
                recs.append(rec)
                ent["runs"].append({"scale": self.SCALES[k], "bytes": os.path.getsize(f), "sample_s": r["wall"]})
            ent["sample_cmd"] = "icpp-sample -q -e cpu-clock -F 4000 -o RUN.samples -- " + \
                ("%s %s < INPUT" % (name, arg) if how == "stdin" else "%s %s INPUT" % (name, arg))
            if len(recs) != len(cmds):
                continue
            rcmd = [b.resolve, "--trend", "-m", mp, "--format", "json", "-n", "0"] + recs
            ent["trend_cmd"] = "icpp-resolve --trend -m MAP --format json -n 0 RUN.samples... (8 runs)"
            t0 = time.perf_counter()
            p = subprocess.run(rcmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=b.env)
            ent["trend_s"] = time.perf_counter() - t0
            if p.returncode != 0:
                b.error("trend: icpp-resolve --trend " + name, rcmd,
                        {"rc": p.returncode, "err": p.stderr.decode(errors="replace")})
                continue
            j = json.loads(p.stdout)
            tr = j["trends"]
            keep = lambda t: {k: t.get(k) for k in ("path", "model", "exponent", "exponent_ci", "predicted_10x",
                                                   "runs", "zero_runs", "group", "scales_worse", "rank_10x",
                                                   "rank_exponent")}
            ent["feature"] = j["feature"]
            ent["unit"] = j["events"][0]["unit"]
            ent["program"] = keep(j["events"][0]["program"])
            ent["paths"] = len(tr)
            ent["groups"] = len({t["group"] for t in tr})
            ent["worse"] = sum(1 for t in tr if t["scales_worse"])
            # the tables: top paths by predicted cost at 10x, and by exponent (paths with
            # samples in at least half the runs), one row per group
            seen, by10 = set(), []
            for t in tr:
                if t["group"] not in seen:
                    seen.add(t["group"])
                    by10.append(keep(t))
            ent["top_10x"] = by10[:8]
            seen, byexp = set(), []
            for t in sorted(tr, key=lambda t: t["rank_exponent"]):
                if t["group"] not in seen and t["runs"] - t["zero_runs"] >= len(recs) // 2:
                    seen.add(t["group"])
                    byexp.append(keep(t))
            ent["top_exponent"] = byexp[:8]
            b.save()
            if not b.a.keep_recordings:
                for f in recs:
                    rm(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--tools", required=True, help="meson build directory holding the icpp tools")
    ap.add_argument("--work", required=True, help="scratch directory (maps, recordings)")
    ap.add_argument("--out", required=True, help="results JSON")
    ap.add_argument("--figures", default="maps,precision,learnrate,recsize,names,cfi,resolve,large,sample,train,rewrite,stats,trend")
    ap.add_argument("--keep-recordings", action="store_true")
    ap.add_argument("--setups-train", type=int, default=8)
    ap.add_argument("--setups-sample", type=int, default=10)
    ap.add_argument("--period", type=int, default=250000, help="sample period, ns of cpu-clock")
    ap.add_argument("--resolve-samples", type=int, default=2000000)
    ap.add_argument("--large-bytes", type=int, default=2100000000,
                    help="size of the large sample file (figure large); 0 skips the figure")
    ap.add_argument("--large-perf-bytes", type=int, default=1200000000,
                    help="about the size of the large perf.data (figure large)")
    ap.add_argument("--large-runs", type=int, default=3, help="runs of each tool on the large files")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per run")
    ap.add_argument("--stats-runs", type=int, default=30, help="short runs each way (figure stats: coverage)")
    ap.add_argument("--trend-scale", type=float, default=1.0, help="input scale of figure trend (largest: 4x it)")
    ap.add_argument("--seed", type=int, default=20091025)
    ap.add_argument("--no-nofp", dest="nofp", action="store_false", help="skip the no-frame-pointer build")
    a = ap.parse_args()
    b = Bench(a)
    figs = a.figures.split(",")
    b.res["meta"]["figures"] = figs
    t0 = time.time()
    for f in ("maps", "precision", "learnrate", "recsize", "names", "cfi", "resolve", "large", "sample", "train", "rewrite", "stats", "trend"):
        if f in figs:
            t = time.time()
            log("figure %s" % f)
            if f == "trend":
                TrendFigure(b).run()
            else:
                getattr(b, "fig_" + f)()
            b.res["meta"].setdefault("figure_s", {})[f] = time.time() - t
    b.res["meta"]["measure_s"] = time.time() - t0
    b.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
