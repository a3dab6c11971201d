#!/usr/bin/env python3
"""test_foreign.py -- samples and training on foreign stacks (docs/definitions.md, "foreign stack"): a signal
handler working on a sigaltstack (altstack.c) and makecontext/swapcontext coroutines on
malloc'd stacks (coroutine.c).  Their samples must never be `missing` with a height
measured from startstack: every sample in the functions that run on the foreign stack is
`unresolved: foreign stack`, every other sample keeps its true path (--check: nothing incorrect in the program's own
functions; incorrect + missing at most 2%, in libc code whose path depends on timing or that
training cannot see), and training records no height outside the thread's own stack."""
import json
import os
import shutil
import sys
import tempfile

from e2e import SCRIPT_RE, Checker, built, run, tool

c = Checker("e2e-foreign")
tmp = tempfile.mkdtemp(prefix="icpp-foreign-")
FOREIGN = {"altstack": {"on_usr1", "alt_leaf"}, "coroutine": {"co_body", "co_leaf"}}
MAIN_STACK_SPAN = 1 << 30        # lib/defs.h ICPP_MAIN_STACK_SPAN
for prog, extra in (("altstack", []), ("coroutine", []), ("coroutine", ["thread"])):
    for cfg in ("fp", "nofp"):
        binary = built(f"tests/e2e/{prog}-{cfg}")
        label = f"{prog}-{cfg}" + "".join("-" + e for e in extra)
        mapfile, samples = os.path.join(tmp, label + ".icppmap"), os.path.join(tmp, label + ".samples")
        r = run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", binary, "2"] + extra)
        if not c.check(r.returncode == 0, f"{label}: training failed: {r.stderr}"):
            continue
        # Training: no height off the thread's own stack, no path through the foreign code.
        r = run([tool("icpp-train"), "--paths", mapfile])
        bad_h, foreign_paths, npaths = [], [], 0
        for line in r.stdout.splitlines():
            if line.startswith("#"):
                continue
            cols = line.split("\t")
            npaths += 1
            for hc in cols[1].split(","):
                h = int(hc.split(":")[0])
                if not 0 <= h < MAIN_STACK_SPAN:
                    bad_h.append((h, cols[2]))
            if FOREIGN[prog] & set(cols[2].split(";")):
                foreign_paths.append(cols[2])
        c.check(npaths > 10, f"{label}: only {npaths} paths trained")
        c.check(not bad_h, f"{label}: nonsense heights in the map: {bad_h[:5]}")
        c.check(not foreign_paths, f"{label}: paths on the foreign stack were recorded: {foreign_paths[:5]}")
        # Sampling: foreign-stack samples are named so, never missing.
        r = run([tool("icpp-sample"), "-q", "--validate", "-e", "cpu-clock", "-F", "2000", "-o", samples, "--",
                 binary, "2"] + extra)
        if not c.check(r.returncode == 0, f"{label}: sampling failed: {r.stderr}"):
            continue
        # --script with the map: threads' own stacks chosen as the profile chooses them
        r = run([tool("icpp-resolve"), "--script", "-m", mapfile, samples])
        c.check(r.returncode == 0, f"{label}: --script failed: {r.stderr}")
        ss = []
        for line in r.stdout.splitlines():
            m = SCRIPT_RE.match(line)
            if c.check(m, f"{label}: unparsable --script line {line}"):
                g = m.groups()
                ss.append(dict(pid=int(g[0]), tid=int(g[1]), base_kind=g[8], status=g[10], func=g[13]))
        on_foreign = [s for s in ss if s["func"] in FOREIGN[prog]]
        c.check(len(on_foreign) >= 20, f"{label}: only {len(on_foreign)} samples in the foreign-stack code")
        wrong = [s for s in on_foreign if s["status"] != "foreign stack"]
        c.check(not wrong, f"{label}: {len(wrong)} foreign-stack samples not reported so: {wrong[:3]}")
        main_ok = [s for s in ss if s["func"] == "main_leaf" and s["status"] == "ok"]
        if extra:   # the work ran in a second thread: heights against its stack mapping
            c.check(all(s["tid"] != s["pid"] and s["base_kind"] == "maptop" for s in main_ok),
                    f"{label}: main_leaf samples not of the second thread")
        c.check(len(main_ok) >= 20, f"{label}: only {len(main_ok)} main_leaf samples resolved")
        r = run([tool("icpp-resolve"), "-m", mapfile, "--format", "json", samples])
        if c.check(r.returncode == 0, f"{label}: resolve failed: {r.stderr}"):
            d = json.loads(r.stdout)
            miss = [u for u in d["unattributed"] if u["kind"] == "missing" and
                    any(f in u["label"] for f in FOREIGN[prog])]
            c.check(not miss, f"{label}: foreign-stack code reported missing: {miss}")
            # (libc's swapcontext/raise can be sampled on the foreign stack too)
            c.check(d["unresolved_by_reason"].get("foreign stack", 0) >= len(on_foreign),
                    f"{label}: json foreign stack count {d['unresolved_by_reason']} < {len(on_foreign)}")
        r = run([tool("icpp-resolve"), "-m", mapfile, "--check", "--format", "json", samples])
        if c.check(r.returncode == 0, f"{label}: --check failed: {r.stderr}"):
            d = json.loads(r.stdout)
            b, judged = d["by_samples"], d["with_truth"]
            # missing and incorrect: only code whose path depends on timing or
            # that training cannot see (libc's thread exit and join, the exit
            # tail after the agent wrote, docs/train.md) -- never the program's
            # own functions, on either stack
            own = FOREIGN[prog] | {"main_leaf", "resume", "make_co", "run_all", "trigger"}
            bad = [x for x in d["incorrect_samples"] if own & set(x["truth"].split(";"))]
            c.check(not bad, f"{label}: --check: incorrect samples in the program's code: {bad}")
            c.check(b["incorrect"] + b["missing"] <= max(1, judged // 50),
                    f"{label}: --check: {b}; incorrect: {d['incorrect_samples']}")
            # every judged sample not on the foreign stack (unresolved) resolves to its true path
            # (learn samples, one in 4, are in --script but never judged)
            ok = b["precise"] + b["ambiguous-containing-truth"]
            c.check(ok >= 20 and ok >= 0.95 * (judged - b["unresolved"]), f"{label}: --check: {b}")
shutil.rmtree(tmp, ignore_errors=True)
c.done()
