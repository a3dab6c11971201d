#!/usr/bin/env python3
"""test_inline.py -- inlined frames in icpp-resolve's outputs, against binutils' addr2line (a
DWARF reader that shares no code with libdw): inliner.c (-O2 -g, hot loops in always-inline
functions, one of which calls a noipa leaf) is trained and sampled.  Every sample's inline
chain must be addr2line's at its address; the profile's leaf weights per (function, chain)
must be those samples' counts; the frames inlined at the call into leaf must be addr2line's
at that call; every format must show the same stacks (pprof as several lines in one
location); --no-inline, and a binary without debug info, must give the function-level
profile; --check must not change."""
import collections
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from e2e import SOURCE, Checker, addr2line, built, run, script, textproto, tool

c = Checker("e2e-inline")
TRAIN, SAMPLE, RESOLVE = tool("icpp-train"), tool("icpp-sample"), tool("icpp-resolve")
MARK = " [inlined]"
INFERRED = " [inferred]"
tmp = tempfile.mkdtemp(prefix="icpp-inline-")
BIN = os.path.join(tmp, "inliner")
shutil.copy(built("tests/e2e/inliner"), BIN)
MAP, SAMPLES = BIN + ".icppmap", os.path.join(tmp, "inliner.samples")
for t in ("addr2line", "objdump", "objcopy", "protoc"):
    if not c.check(shutil.which(t), f"no {t} on PATH (Debian packages binutils, protobuf-compiler)"):
        c.done()

r = run([TRAIN, "-q", "--fresh", "-o", MAP, "--", BIN, "1"])
if not c.check(r.returncode == 0, f"icpp-train: exit {r.returncode}: {r.stderr}"):
    c.done()
r = run([SAMPLE, "-q", "--validate", "-e", "cpu-clock", "-F", "4000", "-o", SAMPLES, "--", BIN, "10"])
if not c.check(r.returncode == 0, f"icpp-sample: exit {r.returncode}: {r.stderr}"):
    c.done()


def resolve(fmt, *extra, samples=SAMPLES, mapfile=MAP):
    out = os.path.join(tmp, f"out.{fmt}{''.join(extra)}")
    r = run([RESOLVE, "-m", mapfile, "--format", fmt, "-o", out] + list(extra) + [samples])
    c.check(r.returncode == 0, f"--format {fmt} {extra}: exit {r.returncode}: {r.stderr}")
    return out


def folded_of(path):
    w = collections.Counter()
    for line in open(path):
        m = re.match(r"^(.+) (\d+(?:\.\d+)?)$", line.rstrip("\n"))
        if c.check(m, f"folded: unparsable line {line!r}"):
            w[m.group(1)] += float(m.group(2))
    return w


def same(a, b, tol):
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= tol for k in a)


def ends(k, *frames):
    return k.split(";")[-len(frames):] == list(frames)


# ---------------------------------------------------------------- every sample's leaf chain

rows = [s for s in script(SAMPLES) if s["module"] == BIN]
truth = addr2line(BIN, sorted({s["addr"] for s in rows}))
wrong = [(hex(s["addr"]), s["inlined"], truth[s["addr"]]) for s in rows
         if s["inlined"] != list(reversed(truth[s["addr"]][:-1]))]
c.check(not wrong, f"--script: {len(wrong)} of {len(rows)} samples' inline chains are not addr2line's: {wrong[:3]}")
n_inl = sum(1 for s in rows if s["inlined"])
c.check(len(rows) >= 1000 and n_inl >= 0.4 * len(rows), f"{len(rows)} samples in inliner, {n_inl} in inlined code")
print(f"{len(rows)} samples in inliner ({n_inl} in inlined code), {len(truth)} addresses: chains agree with addr2line")

# ---------------------------------------------------------------- json: the leaf weights and the interior frames

js = json.load(open(resolve("json")))
TOTAL = js["samples"]
got = collections.Counter()
labelled = collections.Counter()
for pe in js["paths"]:
    names, inl = pe["path"], pe["inlined"]
    c.check(len(inl) == len(names) == len(pe["call_sites"]), f"json: inlined/call_sites not one per frame: {pe}")
    c.check(not inl[0], f"json: a path starts with an inlined frame: {names}")
    k = max(i for i in range(len(names)) if not inl[i])
    if pe["self"][0] > 0:
        got[(names[k], tuple(names[k + 1:]))] += pe["self"][0]
        # the other formats name frames only completion placed NAME [inferred] (a sample in libc's malloc
        # whose context training lacked, say); json flags them in inferred_frames
        labelled[";".join(n + (MARK if f else INFERRED if g else "")
                          for n, f, g in zip(names, inl, pe["inferred_frames"]))] += pe["self"][0]
    c.check(all(pe["call_sites"][i] == "" for i in range(len(names)) if inl[i]), f"json: an inlined frame's call site: {pe}")
want = collections.Counter((s["func"], tuple(s["inlined"])) for s in rows if s["func"] in ("work", "leaf"))
mine = {k: v for k, v in got.items() if k[0] in ("work", "leaf")}
c.check(same(mine, want, 1e-6), f"json: leaf weights per (function, inline chain) {sorted(mine.items())} "
        f"are not the samples' {sorted(want.items())}")
c.check(not [u for u in js["unattributed"] if re.search(r"\b(work|leaf)$", u["label"])],
        f"json: samples of work or leaf did not resolve: {js['unattributed']}")

# The call into leaf: the frames inlined at it (addr2line at the return address - 1) sit between work and leaf.
dis = run(["objdump", "-d", "--no-show-raw-insn", BIN]).stdout
body = re.search(r"<work>:\n(.*?)\n\n", dis, re.S).group(1).splitlines()
calls = [i for i, ln in enumerate(body) if re.search(r"\bcall\s+[0-9a-f]+ <leaf>", ln)]
if c.check(len(calls) == 1 and calls[0] + 1 < len(body), f"work calls leaf {len(calls)} times (one expected)"):
    ra = int(body[calls[0] + 1].split(":")[0], 16)
    site = list(reversed(addr2line(BIN, [ra - 1])[ra - 1][:-1]))
    c.check(site == ["via_call"], f"addr2line: at the call into leaf, inlined {site} (the program's layout changed?)")
    expect = ["work"] + site + ["leaf"]
    paths = [(pe["path"], pe["inlined"]) for pe in js["paths"] if "leaf" in pe["path"]]
    c.check(paths and all(n[n.index("work"):n.index("leaf") + 1] == expect
                          and f[n.index("work"):n.index("leaf") + 1] == [False] + [True] * len(site) + [False]
                          for n, f in paths), f"json: paths through leaf are not ...;{';'.join(expect)}: {paths[:3]}")

# The program's shape, as inliner.c documents it.
for frames in (("main", "work", "spin" + MARK), ("main", "work", "twice" + MARK, "spin_more" + MARK),
               ("main", "work", "via_call" + MARK, "leaf")):
    w = sum(v for k, v in labelled.items() if ends(k, *frames))
    c.check(w > 0.1 * TOTAL, f"json: {';'.join(frames)} has {w} of {TOTAL} samples")

# ---------------------------------------------------------------- every other format: the same stacks

folded = folded_of(resolve("folded"))
c.check(abs(sum(folded.values()) - TOTAL) < 0.01, f"folded: weights sum to {sum(folded.values())}, not {TOTAL}")
for u in js["unattributed"]:
    labelled[u["label"].replace(";", ",")] += u["self"][0]
c.check(same(+labelled, folded, 1e-4), f"folded and json differ: {sorted((+labelled).keys() ^ folded.keys())[:4]}")

ss = json.load(open(resolve("speedscope")))
frames = [f["name"] for f in ss["shared"]["frames"]]
sw = collections.Counter()
for stack, w in zip(ss["profiles"][0]["samples"], ss["profiles"][0]["weights"]):
    k = ";".join(frames[i] for i in stack)
    sw[k.replace(";", ",") if len(stack) == 1 and k.startswith("[") else k] += w
c.check(same(sw, folded, 1e-4), f"speedscope and folded differ: {sorted(sw.keys() ^ folded.keys())[:4]}")


def pprof(path):
    """(stacks root first, with inlined frames marked -> value; lines of each location)."""
    r = subprocess.run(["protoc", "--decode=perftools.profiles.Profile", "--proto_path=" + os.path.join(SOURCE, "icpp-resolve"),
                        "profile.proto"], input=gzip.open(path).read(), capture_output=True, timeout=60)
    if not c.check(r.returncode == 0, f"pprof: protoc --decode failed: {r.stderr.decode(errors='replace')}"):
        return {}, {}
    pb = textproto(r.stdout.decode())
    st = pb["string_table"]
    fn = {f["id"][0]: st[f["name"][0]] for f in pb["function"]}
    loc = {lc["id"][0]: [fn[ln["function_id"][0]] for ln in lc["line"]] for lc in pb["location"]}
    pw = collections.Counter()
    for s in pb["sample"]:
        names = []
        for i in reversed(s["location_id"]):                   # root first
            lines = loc[i]                                      # innermost first, the function last
            names += [lines[-1]] + [n + MARK for n in reversed(lines[:-1])]
        k = ";".join(names)
        pw[k.replace(";", ",") if k.startswith("[") else k] += sum(s["value"])
    return pw, loc


pw, loc = pprof(resolve("pprof"))
c.check(sum(pw.values()) == TOTAL and same(pw, folded, 1), f"pprof and folded differ: {sorted(pw.keys() ^ folded.keys())[:4]}")
for lines in (["spin", "work"], ["spin_more", "twice", "work"], ["via_call", "work"]):
    c.check(lines in loc.values(), f"pprof: no location with the lines {lines} (innermost first)")

text = open(resolve("text", "-n", "0", "--full-paths")).read()
c.check(re.search(r"main -> work -> twice \[inlined\] -> spin_more \[inlined\]$", text, re.M), "text: no main -> work -> twice [inlined] -> spin_more [inlined]")
tree = []                                   # (column of the name, name) per line
for ln in open(resolve("tree", "--min", "1")):
    m = re.match(r"^\s*[\d.]+%\s+[\d.]+%  ((?:[| ]  )*(?:[|`]- )?)(.*)$", ln.rstrip("\n"))
    if m and not ln.startswith("#"):
        tree.append((len(m.group(1)), m.group(2)))


def tree_parent(i):
    return next((tree[j][1] for j in range(i - 1, -1, -1) if tree[j][0] < tree[i][0]), None)


leafs = [i for i, (_, n) in enumerate(tree) if n == "leaf"]
c.check(len(leafs) == 1 and tree_parent(leafs[0]) == "via_call" + MARK
        and tree_parent(next(j for j in range(leafs[0], -1, -1) if tree[j][1] == "via_call" + MARK)) == "work",
        f"tree: leaf is not the callee of via_call [inlined] under work: {tree}")
svg = ET.parse(resolve("svg")).getroot()
titles = [g.find("{http://www.w3.org/2000/svg}title").text.split("\n")[0] for g in svg.iter("{http://www.w3.org/2000/svg}g")
          if g.get("class") == "f"]
c.check(all(n in titles for n in ("spin" + MARK, "twice" + MARK, "spin_more" + MARK, "via_call" + MARK)),
        f"svg: inlined frames missing from {sorted(set(titles))}")

# ---------------------------------------------------------------- --no-inline and no debug info: function level


def strip_inlined(w):
    out = collections.Counter()
    for k, v in w.items():
        out[";".join(f for f in k.split(";") if not f.endswith(MARK))] += v
    return out


# --fold-recursion keeps the functions inlined at call sites (nothing here recurses: the same profile)
refolded = folded_of(resolve("folded", "--fold-recursion"))
c.check(same(refolded, folded, 1e-4), "--fold-recursion: not the profile of a program without recursion: "
        f"{sorted(refolded.keys() ^ folded.keys())[:4]}")

plain = folded_of(resolve("folded", "--no-inline"))
c.check(same(plain, strip_inlined(folded), 1e-4), "--no-inline: folded is not the inline profile without its inlined frames")
c.check(not any(MARK in k for k in plain), "--no-inline: an inlined frame in folded")
jn = json.load(open(resolve("json", "--no-inline")))
c.check(not any(any(pe["inlined"]) for pe in jn["paths"]), "--no-inline: json says inlined")
pwn, locn = pprof(resolve("pprof", "--no-inline"))
c.check(all(len(v) == 1 for v in locn.values()) and same(pwn, plain, 1), "--no-inline: pprof locations with several lines")
c.check(MARK not in open(resolve("text", "--no-inline", "-n", "0")).read(), "--no-inline: text shows inlined frames")
r = run([RESOLVE, "--script", "--no-inline", SAMPLES])
c.check(r.returncode == 0 and "inlined=" not in r.stdout, "--no-inline: --script shows inline chains")

# The accuracy figures are about the trained (function-level) paths: the same either way.
chk = run([RESOLVE, "-m", MAP, "--check", "--format", "json", SAMPLES])
chk2 = run([RESOLVE, "-m", MAP, "--check", "--format", "json", "--no-inline", SAMPLES])
if c.check(chk.returncode == 0, f"--check: {chk.stderr}"):
    d = json.loads(chk.stdout)
    c.check(chk.stdout == chk2.stdout, "--check: the figures change with --no-inline")
    c.check(d["by_samples"]["incorrect"] == 0 and d["by_samples"]["precise"] >= 0.95 * d["with_truth"],
            f"--check: {d['by_samples']} of {d['with_truth']}")

stripped = os.path.join(tmp, "inliner-nodebug")
run(["objcopy", "--strip-debug", BIN, stripped])
smap, ssamples = stripped + ".icppmap", os.path.join(tmp, "nodebug.samples")
run([TRAIN, "-q", "--fresh", "-o", smap, "--", stripped, "1"])
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "4000", "-o", ssamples, "--", stripped, "3"])
if c.check(r.returncode == 0 and os.path.exists(smap), f"no debug info: training or sampling failed: {r.stderr}"):
    # the program's own stacks (main's callees): libc's frames do have inline
    # chains, from libc6-dbg's separate debug file (a sample in printf once)
    def own(w):
        return {k: v for k, v in w.items() if all(f in ("main", "work", "leaf") for f in k.split(";main;", 1)[-1].split(";"))
                and ";main" in k}
    a = own(folded_of(resolve("folded", samples=ssamples, mapfile=smap)))
    b = own(folded_of(resolve("folded", "--no-inline", samples=ssamples, mapfile=smap)))
    c.check(a == b and a and not any(MARK in k for k in a), "no debug info: the profile is not the function-level one")

if c.failed:
    print(f"the files are in {tmp}")
else:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
