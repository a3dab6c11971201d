#!/usr/bin/env python3
"""test_learn.py -- learning contexts from the recording itself (docs/resolve.md, "Learned contexts").

1. The learn samples' unwinder (lib/stackwalk.c, CFA tables) gives the same frames
   -- return addresses and entry SPs -- as libdw's full CFI (lib/unwind.c, the
   truth) on every sample of --validate recordings of the corpus.
2. Learned paths are in the map's own representation: on every corpus binary,
   trained and recorded on the same input, the paths learned from the recording
   are the trained ones (no new context beyond the few training cannot see) and
   nothing resolves incorrectly.
3. Online, on workloads.c (trained on input "a", sampled on "b", which takes
   paths "a" never runs): the map alone misses and misplaces samples; with
   learning nothing is incorrect and next to nothing is missing; --save-map
   keeps what was learned; with no map at all the recording resolves on its own.
4. Bad input: learn samples of another program are refused; stack copies too
   short to reach the root never produce a wrong path.
"""
import json
import os
import re
import sys
import tempfile

from e2e import SOURCE, Checker, built, map_paths, run, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("e2e-learn")
tmp = tempfile.mkdtemp(prefix="icpp-learn-")
entries = [e for e in corpus.load_list(built("tests/programs/corpus-list.txt")) if "static" not in e.tags]
probe = built("tests/e2e/stackwalk_probe")


def sample(binary, args, out, extra=()):
    r = run([tool("icpp-sample"), "-e", "cpu-clock", "-F", "4000", "-o", out] + list(extra) + ["--", binary] + args)
    # icpp-sample exits with the program's status (longjmp.c ends with 3)
    c.check(0 <= r.returncode < 64 and os.path.exists(out), f"icpp-sample {binary} {args}: {r.returncode} {r.stderr}")
    return r


def check(mapfile, samples, extra=()):
    cmd = [tool("icpp-resolve"), "--check", "--format", "json"] + (["-m", mapfile] if mapfile else []) + \
        list(extra) + [samples]
    r = run(cmd, cwd=tmp)
    if not c.check(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"):
        return None
    return json.loads(r.stdout)


def shares(d):
    b, n = d["by_samples"], max(d["with_truth"], 1)
    return {k: b[k] / n for k in b}


# ---------------------------------------------------------------- 1. the unwinder
probe_progs = {"recurse", "exceptions", "threads", "signals", "tailcall", "dlopen", "longjmp", "vla", "workloads"}
tot = {"compared": 0, "mismatch": 0, "rooted_truth": 0, "rooted_both": 0}
for e in entries:
    if e.prog not in probe_progs:
        continue
    label = f"{e.prog}.{e.config}"
    rec = os.path.join(tmp, label + ".v.samples")
    sample(e.binary, ["4"], rec, ["-q", "--validate", "--no-learn"])
    r = run([probe, rec])
    if not c.check(r.returncode == 0, f"{label}: stackwalk_probe: {r.stderr}"):
        continue
    f = dict(zip(r.stdout.split()[0::2], map(int, r.stdout.split()[1::2])))
    c.check(f["mismatch"] == 0, f"{label}: stackwalk and libdw disagree on {f['mismatch']} samples: {r.stderr}")
    c.check(f["compared"] >= 50, f"{label}: only {f['compared']} samples compared")
    for k in tot:
        tot[k] += f[k]
    os.unlink(rec)
print(f"stackwalk vs libdw: {tot}")
# Where libdw reaches the root, so does the table walk -- but for signal frames
# (the kernel's frame has an expression CFA, which a table walk does not follow).
c.check(tot["rooted_both"] >= 0.9 * tot["rooted_truth"],
        f"stackwalk reached the root on {tot['rooted_both']} of {tot['rooted_truth']} samples libdw did")

# ---------------------------------------------------------------- 2. representation
new_ctx = learned = 0
for e in entries:
    if e.config not in ("O2-fp-pie", "O2-nofp-pie", "O0-fp-pie"):
        continue
    label = f"{e.prog}.{e.config}"
    mapfile, rec = os.path.join(tmp, label + ".icppmap"), os.path.join(tmp, label + ".samples")
    run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", e.binary, "6"])
    sample(e.binary, ["6"], rec, ["-q", "--validate", "--learn=4"])
    d = check(mapfile, rec)
    if not d:
        continue
    lr = d["learning"]
    c.check(lr["learn_samples"] >= 20, f"{label}: only {lr['learn_samples']} learn samples")
    c.check(lr["foreign"] == 0, f"{label}: learn samples of its own program refused: {lr}")
    # exceptions: samples inside libgcc's unwinder while it installs a landing
    # pad have a truth that is neither stack (see test_check.py)
    eh = [s for s in d["incorrect_samples"] if "_Unwind_" in s["truth"]]
    # offline, the run does what training did: a recording that brought no new
    # context never turns evidence on by itself (a few may, see below; then the
    # incorrect check that follows still holds)
    if lr["new_contexts"] == 0:
        c.check(d["by_evidence"]["on"] == 0, f"{label}: evidence on offline: {lr}")
    c.check(d["by_samples"]["incorrect"] == len(eh),
            f"{label}: {d['by_samples']['incorrect']} incorrect with learning: {d['incorrect_samples'][:2]}")
    learned += lr["learned"]
    new_ctx += lr["new_contexts"]
    # dlopen.c: training runs libc's dlopen under the agent's own dlopen (it
    # patches what was loaded), one 48-byte frame deeper than any other run:
    # learning sees dlopen's contexts at their true heights, as new ones.
    if e.prog == "dlopen":
        continue
    # a few contexts training cannot see (the tail of a process after the agent
    # wrote its trees, a forked child's last moments) may be learned as new
    c.check(lr["new_contexts"] <= max(8, lr["learned"] // 10),
            f"{label}: learning added {lr['new_contexts']} contexts to a map trained on the same input: {lr}")
    for f in (mapfile, rec):
        os.unlink(f)
print(f"offline: {learned} learn samples learned, {new_ctx} contexts new to the trained map")
c.check(new_ctx <= 0.02 * learned, f"learning added {new_ctx} contexts for {learned} learn samples to maps trained "
        "on the same inputs: learned paths are not in the map's representation")

# ---------------------------------------------------------------- 2b. several processes
# forkexec.c's forked child and exec'd image run one binary; both reach malloc's
# first sysmalloc at one height below (malloc, h), a CID training shares between
# child_main's and exec_main's paths -- and which of them training saw take it
# varies.  A learn sample of the child there says nothing of the exec'd image's
# sample at that CID: it must not become precise (lib/resolve.c
# learned_below_shared), nor be pruned to the child's path by the child's learn
# samples (icpp_learn_trail_process_saw).  Seen in about a third of single runs;
# a few recordings at one learn sample in 2 make it likely.
fe = [e for e in entries if e.prog == "forkexec" and e.config in ("O2-nofp-pie", "O2-fp-pie")]
for e in fe:
    label = f"{e.prog}.{e.config}"
    mapfile = os.path.join(tmp, label + ".p.icppmap")
    run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", e.binary, "6"])
    for i in range(4):
        rec = os.path.join(tmp, f"{label}.p{i}.samples")
        sample(e.binary, ["6"], rec, ["-q", "--validate", "--learn=2"])
        for ev in ("auto", "off"):
            d = check(mapfile, rec, ["--evidence", ev])
            if d:
                c.check(d["by_samples"]["incorrect"] == 0,
                        f"{label} run {i} --evidence {ev}: {d['by_samples']['incorrect']} incorrect: "
                        f"{d['incorrect_samples'][:2]}")
        os.unlink(rec)

# ---------------------------------------------------------------- 3. online
for e in entries:
    if e.prog != "workloads" or e.config not in ("O2-fp-pie", "O2-nofp-pie", "O0-fp-pie", "O2-nofp-nopie"):
        continue
    label = f"{e.prog}.{e.config}"
    mapfile, rec = os.path.join(tmp, label + ".a.icppmap"), os.path.join(tmp, label + ".b.samples")
    r = run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", e.binary, "10", "a"])
    c.check(r.returncode == 0, f"{label}: train: {r.stderr}")
    r = sample(e.binary, ["10", "b"], rec, ["--validate", "--learn=4"])
    m = re.search(r"(\d+) samples of .*\((\d+) of them learn samples", r.stderr)
    if c.check(m is not None, f"{label}: no sample summary: {r.stderr}"):
        n, nl = int(m.group(1)), int(m.group(2))
        c.check(0.15 * n <= nl <= 0.35 * n, f"{label}: {nl} learn samples of {n} at --learn=4")
    before = check(mapfile, rec, ["--no-learn", "--no-complete"])
    after = check(mapfile, rec)
    completed = check(mapfile, rec, ["--no-learn"])
    if not before or not after or not completed:
        continue
    sb, sa, sc = shares(before), shares(after), shares(completed)
    print(f"{label}: map only {sb}; learned {sa}; completed without learning {sc}")
    # completion without learning (lib/complete.c): what it reports unique is true, and
    # it never touches what the map resolved
    bc = completed["by_samples"]
    c.check(bc["inferred-incorrect"] == 0, f"{label}: a unique inferred path is wrong: {bc}")
    c.check(bc["missing"] + sum(v for k, v in bc.items() if k.startswith("inferred")) ==
            before["by_samples"]["missing"], f"{label}: completion changed more than the missing samples: {bc}")
    # the online problem, as the map alone sees it
    c.check(sb["missing"] >= 0.10, f"{label}: map alone misses only {sb['missing']:.1%} (expected >= 10%)")
    c.check(sb["incorrect"] >= 0.10, f"{label}: map alone misplaces only {sb['incorrect']:.1%} (op_mul vs op_add)")
    # and with the recording's own learn samples
    c.check(after["by_samples"]["incorrect"] == 0, f"{label}: incorrect with learning: {after['incorrect_samples'][:2]}")
    c.check(sa["missing"] <= 0.02, f"{label}: {sa['missing']:.1%} missing after learning")
    c.check(sa["precise"] + sa["ambiguous-containing-truth"] >= 0.98, f"{label}: correct {sa}")
    # the recording's evidence (docs/resolve.md): on by itself for a run that
    # does what training did not, and never worse than without it
    off = check(mapfile, rec, ["--evidence", "off"])
    if off:
        so = shares(off)
        c.check(after["by_evidence"]["on"] == 1 and off["by_evidence"]["on"] == 0,
                f"{label}: evidence not on by itself online: {after['by_evidence']}")
        c.check(sa["precise"] >= so["precise"] and sa["incorrect"] <= so["incorrect"],
                f"{label}: evidence made it worse: with {sa}, without {so}")
    # --save-map keeps what was learned: b's documented paths are in it, and
    # resolving with it alone no longer misses b's contexts
    saved = os.path.join(tmp, label + ".ab.icppmap")
    r = run([tool("icpp-resolve"), "-m", mapfile, "--save-map", saved, "-o", os.devnull, rec])
    c.check(r.returncode == 0 and os.path.exists(saved), f"{label}: --save-map: {r.stderr}")
    own = {";".join(n for n in names if n in corpus.functions(e))
           for _, _, names, _ in (map_paths(saved) if os.path.exists(saved) else [])}
    for want in ("main;run;op_mul;leaf", "main;run;op_pow;pow_step;leaf"):
        c.check(want in own, f"{label}: the saved map lacks {want}")
    again = check(saved, rec, ["--no-learn"])
    if again:
        c.check(shares(again)["missing"] <= 0.02, f"{label}: the saved map still misses {shares(again)}")
    # no map at all: the recording resolves against what it learned
    alone = check(None, rec)
    if alone:
        s = shares(alone)
        c.check(alone["by_samples"]["incorrect"] == 0, f"{label}: learned alone: incorrect {alone['incorrect_samples'][:2]}")
        c.check(s["precise"] + s["ambiguous-containing-truth"] >= 0.95, f"{label}: learned alone: {s}")

# PLT stubs online (lib/plt.h): plt.c trained with twin's call of rand_r never
# taken, sampled with it taken (argv[2] "twin"): a sample in rand_r's stub
# called from main;twin fits main;spin's call site too, at the same height, and
# only main;spin called through it in training.  The map alone charges it to
# main;spin, wrong; learning finds rand_r called where training never saw it,
# so such samples keep every call site's context, never precise and wrong.
# The stub is one instruction (jmp *GOT): whether a timer sample lands on it
# is the machine's business, not ICPP's -- on an AMD EPYC VM's cpu-clock,
# recordings that copy the stack (--validate, learn samples) got none in most
# runs and none at all under load, though div's stub beside it got ~40 in
# every run.  So the recording is repeated until the truth (--check-only
# twin) holds stub samples called from twin, and the claims are judged on
# exactly those; "never precise and wrong" is judged on every recording.
# A machine whose samples never land in the stub leaves the claims about
# twin's samples unjudged, and says so.
PLT_ATTEMPTS = 8
for e in entries:
    if e.prog != "plt" or e.config not in ("O2-fp-pie", "O2-nofp-nopie"):
        continue
    label = f"{e.prog}.{e.config}"
    mapfile, rec = os.path.join(tmp, label + ".icppmap"), os.path.join(tmp, label + ".twin.samples")
    run([tool("icpp-train"), "-q", "--fresh", "-o", mapfile, "--", e.binary, "8"])
    n_twin, tries, pl, ta = 0, 0, None, None
    while tries < PLT_ATTEMPTS and n_twin == 0:
        tries += 1
        sample(e.binary, ["8", "twin"], rec, ["-q", "--validate", "--learn=4"])
        after, ta = check(mapfile, rec), check(mapfile, rec, ["--no-learn", "--check-only", "twin"])
        if not after or not ta:
            n_twin = -1
            break
        pl = after["plt_samples"]
        c.check(pl["incorrect"] == 0, f"{label}: PLT samples with learning, recording {tries}: {pl}")
        n_twin = sum(v for k, v in ta["plt_samples"].items() if k != "no_truth")
    if n_twin <= 0:
        if n_twin == 0:
            print(f"note: {label}: no sample landed in rand_r's PLT stub called from twin in {tries} recordings "
                  f"(last: PLT samples {pl}): the map alone's and learning's verdicts on them are not judged")
        continue
    alone, tl = check(mapfile, rec, ["--no-learn"]), check(mapfile, rec, ["--check-only", "twin"])
    if not alone or not tl:
        continue
    pa, pta, ptl = alone["plt_samples"], ta["plt_samples"], tl["plt_samples"]
    nz = lambda d: {k: v for k, v in d.items() if v}  # noqa: E731
    print(f"{label} online (recording {tries}): PLT samples, map alone {nz(pa)}; learned {nz(pl)}; "
          f"called from twin: {n_twin}, map alone {nz(pta)}, learned {nz(ptl)}")
    c.check(pta["incorrect"] == n_twin and pa["incorrect"] >= n_twin,
            f"{label}: the map alone did not place every twin stub sample in main;spin: {pta}")
    c.check(ptl["ambiguous-containing-truth"] == n_twin,
            f"{label}: twin's stub samples with learning, want all {n_twin} ambiguous with the truth: {ptl}")
    c.check(pl["incorrect"] == 0 and pl["ambiguous-containing-truth"] >= n_twin and pl["precise"] > 0,
            f"{label}: PLT samples with learning: {pl}")

# The default learn rate follows the event: one in 2 for a software event (docs/resolve.md, "The learn rate").
for e in entries:
    if e.prog == "workloads" and e.config == "O2-fp-pie":
        rec = os.path.join(tmp, "default-rate.samples")
        r = sample(e.binary, ["10", "b"], rec)
        m = re.search(r"(\d+) samples of .*\((\d+) of them learn samples", r.stderr)
        if c.check(m is not None, f"default rate: no sample summary: {r.stderr}"):
            n, nl = int(m.group(1)), int(m.group(2))
            c.check(0.40 * n <= nl <= 0.60 * n, f"default rate (cpu-clock): {nl} learn samples of {n}, want one in 2 (x 17/16, detuned: 47%)")
        break

# ---------------------------------------------------------------- 4. bad input
w = next(e for e in entries if e.prog == "workloads" and e.config == "O2-fp-pie")
o = next(e for e in entries if e.prog == "orders" and e.config == "O2-fp-pie")
wmap, orec = os.path.join(tmp, "w.icppmap"), os.path.join(tmp, "orders.samples")
run([tool("icpp-train"), "-q", "--fresh", "-o", wmap, "--", w.binary, "4", "a"])
sample(o.binary, ["4"], orec, ["-q", "--validate", "--learn=2"])
r = run([tool("icpp-resolve"), "-m", wmap, orec])
c.check(r.returncode != 0, "a recording of another program resolved against the map")
c.check(r.stderr.count("\n") == 1, f"not one line for one error: {r.stderr}")
r = run([tool("icpp-resolve"), "-m", wmap, "--check", "--format", "json", orec])
if c.check(r.returncode == 0, f"--check of another program's recording: {r.stderr}"):
    lr = json.loads(r.stdout)["learning"]
    c.check(lr["foreign"] == lr["learn_samples"] > 0 and lr["learned"] == 0,
            f"learn samples of another program were learned: {lr}")
before = os.path.getsize(wmap)
r = run([tool("icpp-resolve"), "-m", wmap, "--save-map", wmap, orec])
c.check(os.path.getsize(wmap) == before, "learn samples of another program changed the map")
# stack copies too short to reach the root: joined at a known context or not learned, never wrong
short = os.path.join(tmp, "short.samples")
sample(w.binary, ["10", "b"], short, ["-q", "--validate", "--learn=2", "--stack-size", "64"])
d = check(wmap, short)
if d:
    lr = d["learning"]
    c.check(lr["not_rooted"] + lr["anchored"] > 0.5 * lr["learn_samples"],
            f"64-byte stack copies: walks should end early: {lr}")
    c.check(d["by_learned_contexts"]["incorrect"] == 0,
            f"short stack copies: contexts learned from them resolved samples wrongly: {d['by_learned_contexts']}")
r = run([tool("icpp-sample"), "--learn=1", "-o", os.path.join(tmp, "x.samples"), "--", "/bin/true"])
c.check(r.returncode == 2 and "--learn" in r.stderr, f"--learn=1 accepted: {r.returncode} {r.stderr}")

c.done()
