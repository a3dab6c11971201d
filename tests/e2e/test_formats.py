#!/usr/bin/env python3
"""test_formats.py -- every icpp-resolve output format on one real profile (orders.c),
each read back by a reader that shares no code with the writer (json, protoc,
xml.etree, a browser), checked against the others, against the sample count of
`icpp-resolve --script`, and against the program's documented paths."""
import gzip
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

from e2e import SOURCE, Checker, built, run, script, textproto, tool

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("e2e-formats")
TRAIN, SAMPLE, RESOLVE = tool("icpp-train"), tool("icpp-sample"), tool("icpp-resolve")
tmp = tempfile.mkdtemp(prefix="icpp-formats-")
SVGNS = "{http://www.w3.org/2000/svg}"
# Markup characters in the file names reach every format's header (map: ...,
# recorded: ...): the XML and JSON writers must escape them.
MAP = os.path.join(tmp, "orders<&>\"'.icppmap")
SAMPLES = os.path.join(tmp, "orders<&>\"'.samples")
EPS = 3e-3   # x and width are each printed to 3 decimals: a right edge is off by up to 0.001 + 0.001


def near(a, b, tol):
    return abs(a - b) <= tol


# ---------------------------------------------------------------- the profile

entry = next(e for e in corpus.load_list(built("tests/programs/corpus-list.txt"))
             if e.prog == "orders" and e.config == "O2-fp-pie")
required, _ = corpus.paths_for(entry)
documented = sorted(p for p in required if not any(q[:len(p)] == p and q != p for q in required))
r = run([TRAIN, "-q", "-o", MAP, "--", entry.binary])
if not c.check(r.returncode == 0, f"icpp-train: exit {r.returncode}: {r.stderr}"):
    c.done()
r = run([SAMPLE, "-e", "cpu-clock", "-F", "4000", "-o", SAMPLES, "--", entry.binary, "20"])
if not c.check(r.returncode == 0, f"icpp-sample: exit {r.returncode}: {r.stderr}"):
    c.done()
TOTAL = len(script(SAMPLES))          # the truth: one --script line per sample
c.check(TOTAL >= 500, f"only {TOTAL} samples")

out = {}
for fmt, extra in [("text", []), ("text-all", ["-n", "0", "--full-paths"]), ("tree", []), ("tree-all", ["--min", "0"]),
                   ("folded", []), ("json", []), ("speedscope", []), ("pprof", []), ("svg", [])]:
    path = os.path.join(tmp, "out." + fmt)
    # --no-complete: a rare sample training missed would otherwise be completed, and its
    # [inferred] frames are checked by e2e-complete, not here (the readers below compare
    # every format's paths and counts with --script's four statuses)
    r = run([RESOLVE, "-m", MAP, "--no-complete", "--format", fmt.split("-")[0], "-o", path] + extra + [SAMPLES])
    c.check(r.returncode == 0 and r.stderr == "", f"--format {fmt}: exit {r.returncode}: {r.stderr}")
    out[fmt] = path
r = run([RESOLVE, "-m", MAP, "--format", "nonesuch", SAMPLES])
c.check(r.returncode == 2 and "svg" in r.stderr, f"an unknown format is refused, naming the formats: {r.stderr!r}")


def from_main(path):
    """The program's part of a path (documented paths start at main)."""
    return tuple(path[path.index("main"):]) if "main" in path else None


# ---------------------------------------------------------------- folded: the reference

folded = {}
for line in open(out["folded"]):
    m = re.match(r"^(.+) (\d+(?:\.\d+)?)$", line.rstrip("\n"))
    if not c.check(m, f"folded: unparsable line {line!r}"):
        continue
    folded[m.group(1)] = folded.get(m.group(1), 0.0) + float(m.group(2))
c.check(near(sum(folded.values()), TOTAL, 0.01), f"folded: weights sum to {sum(folded.values())}, not {TOTAL} samples")
incl = {}                             # every prefix of a folded line -> inclusive weight
for p, w in folded.items():
    fs = p.split(";")
    for i in range(1, len(fs) + 1):
        incl[";".join(fs[:i])] = incl.get(";".join(fs[:i]), 0.0) + w
heaviest = max(folded.values())
print(f"{TOTAL} samples, {len(folded)} folded lines, heaviest {heaviest:.2f}")

# The documented paths of orders.c, with names.
by_prog = {}
for p, w in folded.items():
    k = from_main(p.split(";"))
    if k:
        by_prog[k] = by_prog.get(k, 0.0) + w
for p in documented:
    c.check(by_prog.get(p, 0) > 0, f"documented path {';'.join(p)} has no weight in the folded output")
c.check(by_prog.get(("main", "c", "d"), 0) > 0.03 * TOTAL,
        f"main;c;d (resolved precisely) has {by_prog.get(('main', 'c', 'd'), 0):.1f} of {TOTAL} samples")

# ---------------------------------------------------------------- json

js = json.load(open(out["json"]))
c.check(js["map"] == MAP, f"json: map {js['map']!r} (escaping)")
c.check(js["samples"] == TOTAL, f"json: samples {js['samples']}, --script has {TOTAL}")
ev = js["events"][0]
c.check(ev["name"] == "cpu-clock" and ev["samples"] == TOTAL
        and ev["precise"] + ev["ambiguous"] + ev["missing"] + ev["unresolved"] + ev["uncertain"] + ev["inferred"] == TOTAL,
        f"json: event counts {ev} do not add up to {TOTAL}")
jself, jamb = {}, {}
for pe in js["paths"]:
    c.check(len(pe["inlined"]) == len(pe["path"]), f"json: not one inlined flag per frame: {pe}")
    k = ";".join(n + (" [inlined]" if f else "") for n, f in zip(pe["path"], pe["inlined"]))
    if pe["self"][0] > 0:
        jself[k] = jself.get(k, 0.0) + pe["self"][0]
    jamb[k] = jamb.get(k, 0.0) + pe["ambiguous"][0]
    c.check(near(pe["inclusive"][0], incl.get(k, 0.0), 1e-4),
            f"json: inclusive {pe['inclusive'][0]} of {k}, folded says {incl.get(k, 0.0)}")
    c.check(pe["ambiguous"][0] <= pe["self"][0] + 1e-9, f"json: ambiguous part {pe['ambiguous'][0]} > self of {k}")
for u in js["unattributed"]:
    c.check(u["kind"] in ("missing", "unresolved") and u["label"].startswith("[" + u["kind"]),
            f"json: unattributed row {u}")
    if u["self"][0] > 0:
        k = u["label"].replace(";", ",")
        jself[k] = jself.get(k, 0.0) + u["self"][0]
c.check(jself.keys() == folded.keys(), f"json: paths differ from folded: {sorted(jself.keys() ^ folded.keys())[:5]}")
c.check(all(near(jself[k], folded[k], 1e-4) for k in jself.keys() & folded.keys()), "json: weights differ from folded")
# The ambiguous share: main;b;a;d and main;b;e;d share d's context id before rewriting.
c.check(js["shares"]["ambiguous"] > 0 and near(js["shares"]["ambiguous"], ev["ambiguous"] / TOTAL, 1e-6),
        f"json: ambiguous share {js['shares']['ambiguous']}")
for p in (("main", "b", "a", "d"), ("main", "b", "e", "d")):
    amb = sum(v for k, v in jamb.items() if from_main(k.split(";")) == p)
    c.check(amb > 0, f"json: no ambiguous weight on {';'.join(p)} (it shares d's CID with another path)")

# ---------------------------------------------------------------- speedscope

ss = json.load(open(out["speedscope"]))
c.check(ss.get("$schema") == "https://www.speedscope.app/file-format-schema.json", "speedscope: $schema")
frames = ss.get("shared", {}).get("frames", [])
c.check(frames and all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in frames),
        "speedscope: shared.frames are {name}")
c.check(len(ss.get("profiles", [])) == 1, f"speedscope: {len(ss.get('profiles', []))} profiles for one event")
for prof in ss.get("profiles", []):
    c.check(prof["type"] == "sampled" and prof["name"] == "cpu-clock" and prof["startValue"] == 0
            and prof["unit"] in ("none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"),
            f"speedscope: profile header {dict((k, v) for k, v in prof.items() if k not in ('samples', 'weights'))}")
    c.check(len(prof["samples"]) == len(prof["weights"]), "speedscope: samples and weights differ in length")
    c.check(near(prof["endValue"], sum(prof["weights"]), 1e-6), "speedscope: endValue is not the sum of the weights")
    c.check(near(sum(prof["weights"]), TOTAL, 0.01), f"speedscope: weights sum to {sum(prof['weights'])}")
    sw = {}
    for stack, w in zip(prof["samples"], prof["weights"]):
        if not c.check(all(isinstance(i, int) and 0 <= i < len(frames) for i in stack),
                       f"speedscope: frame index out of range in {stack}"):
            continue
        k = ";".join(frames[i]["name"] for i in stack)
        if len(stack) == 1 and k.startswith("["):      # an unattributed row: folded has ',' for ';'
            k = k.replace(";", ",")
        sw[k] = sw.get(k, 0.0) + w
    c.check(sw.keys() == folded.keys() and all(near(sw[k], folded[k], 1e-4) for k in sw),
            "speedscope: stacks and weights differ from folded")

# ---------------------------------------------------------------- pprof

raw = gzip.open(out["pprof"]).read()
c.check(shutil.which("protoc"), "pprof: no protoc to decode it (Debian package protobuf-compiler, in scripts/deps)")
r = subprocess.run(["protoc", "--decode=perftools.profiles.Profile", "--proto_path=" + os.path.join(SOURCE, "icpp-resolve"),
                    "profile.proto"], input=raw, capture_output=True, timeout=60) if shutil.which("protoc") else None
if r and c.check(r.returncode == 0, f"pprof: protoc --decode failed: {r.stderr.decode(errors='replace')}"):
    pb = textproto(r.stdout.decode())
    st = pb.get("string_table", [])
    c.check(st and st[0] == "", "pprof: string_table[0] is not \"\"")
    stype = pb.get("sample_type", [{}])
    c.check(len(stype) == 1 and st[stype[0].get("type", [0])[0]] == "cpu-clock"
            and st[stype[0].get("unit", [0])[0]] == "samples", f"pprof: sample_type {stype}")
    maps = {m["id"][0] for m in pb.get("mapping", [])}
    funcs = {f["id"][0]: f for f in pb.get("function", [])}
    locs = {lc["id"][0]: lc for lc in pb.get("location", [])}
    c.check(all(0 < i < len(st) for f in funcs.values() for i in f.get("name", [0])), "pprof: a function without a name")
    c.check(all(lc.get("mapping_id", [0])[0] in maps | {0} for lc in locs.values()), "pprof: unknown mapping_id")
    c.check(all(ln["function_id"][0] in funcs for lc in locs.values() for ln in lc.get("line", [])),
            "pprof: a line names an unknown function")
    pw, bad = {}, 0
    for s in pb.get("sample", []):
        ids = s.get("location_id", [])
        if not all(i in locs for i in ids):
            bad += 1
            continue
        names = []
        for i in reversed(ids):         # root first; a location's lines are innermost first, its function last
            ln = [st[funcs[x["function_id"][0]]["name"][0]] for x in locs[i]["line"]]
            names += [ln[-1]] + [n + " [inlined]" for n in reversed(ln[:-1])]
        k = ";".join(names)
        if k.startswith("["):
            k = k.replace(";", ",")
        pw[k] = pw.get(k, 0) + sum(s.get("value", [0]))
    c.check(bad == 0, f"pprof: {bad} samples name a location_id that does not exist")
    c.check(sum(pw.values()) == TOTAL, f"pprof: values sum to {sum(pw.values())}, not {TOTAL}")
    # Values are integers (largest-remainder rounding of shared samples): within 1 of folded.
    c.check(pw.keys() == folded.keys(), f"pprof: paths differ from folded: {sorted(pw.keys() ^ folded.keys())[:5]}")
    c.check(all(abs(pw[k] - folded[k]) < 1 for k in pw.keys() & folded.keys()), "pprof: per-path values differ from folded")

# ---------------------------------------------------------------- text


def header(path):
    """(samples, {kind: pct}) from a '# ' report header."""
    text = open(path).read()
    m = re.search(r"samples: (\d+)", text)
    k = dict((a, float(b)) for a, b in re.findall(r"(precise|ambiguous|missing|unresolved) ([\d.]+)%", text))
    return (int(m.group(1)) if m else -1), k


ROW = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)%\s+[\d.]+-[\d.]+%\s+(\d+%|-) [>~ ]  (.*)$")


def text_rows(path):
    rows = []
    for line in open(path):
        m = ROW.match(line.rstrip("\n"))
        if m and not line.startswith("#"):
            path_ = m.group(5)
            rows.append((float(m.group(2)), m.group(4), path_ if path_.startswith("[") else ";".join(path_.split(" -> "))))
    return rows


n, kinds = header(out["text"])
c.check(n == TOTAL, f"text: header says {n} samples, not {TOTAL}")
c.check(near(kinds.get("ambiguous", -1), 100 * ev["ambiguous"] / TOTAL, 0.051), f"text: header shares {kinds}")
c.check(near(sum(kinds.values()), 100, 0.21), f"text: header shares add up to {sum(kinds.values())}%")
rows = text_rows(out["text"])
c.check(rows and rows[0][2] in folded and near(folded[rows[0][2]], heaviest, 0.051) and near(rows[0][0], heaviest, 0.051),
        f"text: top row {rows[0] if rows else None} is not the heaviest folded line ({heaviest:.2f})")
rows = text_rows(out["text-all"])
c.check(len(rows) == len(folded), f"text -n 0: {len(rows)} rows, folded has {len(folded)} lines")
c.check(near(sum(w for w, _, _ in rows), TOTAL, 0.05 * len(rows) + 0.01), "text -n 0: rows do not sum to the samples")
c.check(all(near(w, folded.get(p.replace(";", ",") if p.startswith("[") else p, -1), 0.051) for w, _, p in rows),
        "text -n 0: a row's weight differs from folded")
for p in (("main", "b", "a", "d"), ("main", "b", "e", "d")):
    amb = [a for _, a, q in rows if from_main(q.split(";")) == p]
    c.check(amb and amb[0] != "-" and int(amb[0][:-1]) > 0, f"text: amb% of {';'.join(p)} is {amb}")

# ---------------------------------------------------------------- tree

TREE = re.compile(r"^\s*([\d.]+)%\s+([\d.]+)%  (.*)$")


def tree_rows(path):
    """(incl%, self%, full path) per line, the path rebuilt from the indentation."""
    rows, stack = [], []
    for line in open(path):
        m = TREE.match(line.rstrip("\n"))
        if not m or line.startswith("#"):
            continue
        rest, depth = m.group(3), 0
        while rest[:3] in ("|  ", "   "):
            rest, depth = rest[3:], depth + 1
        if rest[:3] in ("|- ", "`- "):
            rest, depth = rest[3:], depth + 1
        else:
            depth = 0 if depth == 0 else -1
        if not c.check(depth >= 0 and depth <= len(stack), f"tree: bad indentation: {line!r}"):
            continue
        stack = stack[:depth] + [rest]
        rows.append((float(m.group(1)), float(m.group(2)), ";".join(stack), depth))
    return rows


n, _ = header(out["tree"])
c.check(n == TOTAL, f"tree: header says {n} samples")
trows = tree_rows(out["tree-all"])
roots = [r_ for r_ in trows if r_[3] == 0]
c.check(near(sum(r_[0] for r_ in roots), 100, 0.005 * len(roots) + 0.01),
        f"tree --min 0: root-level nodes sum to {sum(r_[0] for r_ in roots):.2f}%")
tbad = [r_ for r_ in trows if not r_[2].startswith("[")
        and not near(r_[0], 100 * incl.get(r_[2], 0) / TOTAL, 0.0051)]
c.check(not tbad, f"tree --min 0: inclusive % differs from folded: {tbad[:3]}")
tpaths = {r_[2] for r_ in trows}
c.check(all(k in tpaths for k in incl if not k.startswith("[")), "tree --min 0: a sampled calling context is no line")
c.check(all(r_[0] >= 0.5 for r_ in tree_rows(out["tree"])), "tree: a node under --min 0.5 is shown")

# ---------------------------------------------------------------- svg


def svg_frames(root):
    """Frames of a flame graph as dicts, each with its path rebuilt from the
    geometry alone: a frame's caller is the frame one row below that spans it."""
    fr = []
    for g in root.iter(SVGNS + "g"):
        if g.get("class", "").split()[:1] != ["f"]:
            continue
        rc, tx, ti = g.find(SVGNS + "rect"), g.find(SVGNS + "text"), g.find(SVGNS + "title")
        lines = ti.text.split("\n")
        fr.append(dict(g=g, name=lines[0], title=lines, x=float(rc.get("x")), y=float(rc.get("y")),
                       w=float(rc.get("width")), h=float(rc.get("height")), fill=rc.get("fill"),
                       label=tx.text or "", cls=g.get("class", "").split()))
    return fr


def svg_paths(fr, key_x="x", key_w="w"):
    rows = sorted({f["y"] for f in fr}, reverse=True)
    for f in fr:
        f["path"] = None
    for f in sorted(fr, key=lambda f: -f["y"]):
        if f["y"] == rows[0]:
            f["path"] = [f["name"]]
            continue
        par = [p for p in fr if near(p["y"], f["y"] + 16, 0.01) and p[key_x] <= f[key_x] + EPS
               and f[key_x] + f[key_w] <= p[key_x] + p[key_w] + EPS]
        if len(par) == 1 and par[0]["path"]:
            f["path"] = par[0]["path"] + [f["name"]]
    return {";".join(f["path"][1:]).replace(";", ",") if f["name"].startswith("[") else ";".join(f["path"][1:]): f
            for f in fr if f["path"] and len(f["path"]) > 1}


svgroot = None
try:
    svgroot = ET.parse(out["svg"]).getroot()
except ET.ParseError as e:
    c.check(False, f"svg: not well-formed XML: {e}")
if svgroot is not None:
    W, XPAD = float(svgroot.get("width")), float(svgroot.get("data-xpad"))
    FULL = W - 2 * XPAD
    c.check(not re.search(r"(href|src)=\"(https?:)?//", open(out["svg"]).read()), "svg: refers to an external resource")
    c.check(svgroot.find(SVGNS + "script") is not None, "svg: no script")
    htext = "\n".join(t.text or "" for t in svgroot.find(SVGNS + "g[@id='header']"))
    c.check(f"samples: {TOTAL}" in htext and f"map: {MAP}" in htext and "lost: 0" in htext,
            f"svg: header does not show samples, map (escaped), lost: {htext!r}")
    hk = dict((a, float(b)) for a, b in re.findall(r"(precise|ambiguous|missing|unresolved) ([\d.]+)%", htext))
    c.check(hk == kinds, f"svg: header shares {hk}, text has {kinds}")
    fr = svg_frames(svgroot)
    allf = [f for f in fr if f["name"] == "all"]
    c.check(len(allf) == 1 and near(allf[0]["w"], FULL, 0.01), "svg: no full-width root frame 'all'")
    c.check(allf and all(f["y"] < allf[0]["y"] for f in fr if f is not allf[0]), "svg: 'all' is not the bottom row")
    sp = svg_paths(fr)
    c.check(len(sp) == len(fr) - 1, f"svg: {len(fr) - 1 - len(sp)} frames sit on no caller")
    scale = FULL / TOTAL
    # Every calling context wide enough to draw is a frame of the right width, and no other.
    want = {k for k, w in incl.items() if w * scale >= 0.1 + EPS}
    c.check(want <= sp.keys(), f"svg: frames missing: {sorted(want - sp.keys())[:5]}")
    c.check(sp.keys() <= incl.keys(), f"svg: frames that are no folded path: {sorted(sp.keys() - incl.keys())[:5]}")
    wbad = [k for k in sp.keys() & incl.keys() if not near(sp[k]["w"], incl[k] * scale, 0.002)]
    c.check(not wbad, f"svg: widths not proportional to inclusive weight: {wbad[:5]}")
    # The heaviest paths: every frame on them, with its title and a label that fits.
    for p in sorted(folded, key=lambda k: -folded[k])[:4]:
        fs = p.split(";")
        for i in range(1, len(fs) + 1):
            f = sp.get(";".join(fs[:i]))
            if not c.check(f is not None, f"svg: no frame for {';'.join(fs[:i])}"):
                break
            m = re.match(r"inclusive: ([\d.]+) cpu-clock samples, ([\d.]+)%", f["title"][1])
            c.check(m and near(float(m.group(1)), incl[";".join(fs[:i])], 0.006)
                    and near(float(m.group(2)), 100 * incl[";".join(fs[:i])] / TOTAL, 0.006),
                    f"svg: title of {fs[i - 1]}: {f['title']}")
            lab = f["label"]
            c.check(lab == f["name"] or (lab.endswith("..") and f["name"].startswith(lab[:-2])) or (lab == "" and f["w"] < 30),
                    f"svg: label {lab!r} of {f['name']} ({f['w']:.1f} px)")
            c.check(len(lab) * float(svgroot.get("data-charw")) <= f["w"] - 6 + EPS or lab == "",
                    f"svg: label {lab!r} wider than its frame ({f['w']:.1f} px)")
    for p in (("main", "b", "a", "d"), ("main", "b", "e", "d")):
        t = [f["title"] for k, f in sp.items() if from_main(k.split(";")) == p]
        m = re.search(r"ambiguous: ([\d.]+)% of self", "\n".join(t[0]) if t else "")
        c.check(m and float(m.group(1)) > 0, f"svg: no ambiguous share in the title of {';'.join(p)}: {t}")
    # Colours: warm for paths, cool (blue or grey) for unattributed rows.
    rgb = {id(f): tuple(int(v) for v in re.findall(r"\d+", f["fill"])) for f in fr}
    paths_warm = all(rgb[id(f)][0] > rgb[id(f)][2] + 60 for k, f in sp.items() if not k.startswith("["))
    extras_cool = all(rgb[id(f)][2] >= rgb[id(f)][0] for k, f in sp.items() if k.startswith("["))
    c.check(paths_warm and extras_cool, "svg: paths are not warm or unattributed rows not cool")
    c.check(any(k.startswith("[") for k in sp) or not any(k.startswith("[") for k in want),
            "svg: unattributed rows are not drawn")

# ---------------------------------------------------------------- svg in a browser


def png_rgb(path):
    """(width, height, rows of RGB(A) bytes) of an 8-bit non-interlaced PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat = 8, b""
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if typ == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif typ == b"IDAT":
            idat += body
        elif typ == b"IEND":
            break
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"PNG depth {depth} colour type {ctype} interlace {interlace}: not decoded here")
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev, i = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp), 0
    for _ in range(h):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, cc = prev[x], prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - cc
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else cc)) & 255
        rows.append(line)
        prev = line
    return w, h, bpp, rows


def browser(args, what):
    """Run headless Chromium in its own process group (killed whole on a timeout)."""
    prof = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
           "--force-device-scale-factor=1", "--user-data-dir=" + prof, "--window-size=1200,800"] + args
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        so, se = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        c.check(False, f"chromium {what}: no result in 90 s")
        return None
    if not c.check(p.returncode == 0, f"chromium {what}: exit {p.returncode}: {se.decode(errors='replace')[-2000:]}"):
        return None
    return so.decode(errors="replace")


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
# scripts/deps installs chromium: without it the rendering checks fail, never pass unseen.
c.check(CHROMIUM, "svg in a browser: no chromium on PATH (Debian package 'chromium', in scripts/deps)")
if svgroot is not None and CHROMIUM:
    url = "file://" + out["svg"].replace("%", "%25")
    png = os.path.join(tmp, "shot.png")
    if browser(["--screenshot=" + png, url], "screenshot") is not None:
        w, h, bpp, px = png_rgb(png)
        nonwhite = sum(1 for row in px for x in range(0, len(row), bpp) if row[x] + row[x + 1] + row[x + 2] < 740)
        c.check(nonwhite > 0.05 * w * h, f"svg screenshot: only {nonwhite} of {w * h} pixels are not white")
        # Each wide frame's top edge has its fill colour where the file puts it.
        checked, wrong = 0, []
        for f in fr:
            x, y = int(f["x"] + f["w"] / 2), int(f["y"])
            if f["w"] < 20 or y >= h:
                continue
            want_rgb = rgb[id(f)]
            got = tuple(px[y][x * bpp:x * bpp + 3])
            checked += 1
            if any(abs(a - b) > 8 for a, b in zip(want_rgb, got)):
                wrong.append((f["name"], want_rgb, got))
        c.check(checked >= 8 and not wrong, f"svg screenshot: {len(wrong)} of {checked} frames not drawn in their colour: {wrong[:3]}")
        print(f"svg screenshot: {nonwhite} non-white pixels, {checked} frames checked for colour")
    # Scripts: search d (?s=) and zoom into main;b (?x=&y=), then read the DOM back.
    zk = max((k for k in sp if from_main(k.split(";")) and len(from_main(k.split(";"))) == 2), key=lambda k: sp[k]["w"])
    z = sp[zk]
    dom = browser(["--dump-dom", f"{url}?s=%5Ed%24&x={z['x'] + z['w'] / 2:.1f}&y={z['y'] + 7:.0f}"], "dump-dom")
    if dom is not None:
        try:
            droot = ET.fromstring(dom)
        except ET.ParseError as e:
            droot = None
            c.check(False, f"svg dump-dom: not XML: {e}: {dom[:300]!r}")
        if droot is not None:
            c.check(droot.get("data-ready") == "1", "svg dump-dom: the script did not run to its end")
            dfr = svg_frames(droot)
            c.check(len(dfr) == len(fr) and [f["name"] for f in dfr] == [f["name"] for f in fr],
                    "svg dump-dom: the frames are not all there after the script ran")
            for f in dfr:
                rc = f["g"].find(SVGNS + "rect")
                f["ox"], f["ow"] = float(rc.get("data-ox", "nan")), float(rc.get("data-ow", "nan"))
            dsp = svg_paths(dfr, "ox", "ow")
            c.check(dsp.keys() == sp.keys(), "svg dump-dom: the original geometry was not kept")
            # search: every d frame magenta, the share of their union printed
            ds = sorted((f["ox"], f["ow"]) for f in dfr if f["name"] == "d")
            union, end = 0.0, -1.0
            for x, w in ds:
                if x >= end - EPS:
                    union, end = union + w, x + w
            m = re.search(r"Matched: ([\d.]+)%", "".join(droot.find(SVGNS + "text[@id='matched']").itertext()))
            c.check(m and near(float(m.group(1)), 100 * union / FULL, 0.051),
                    f"svg dump-dom: search ^d$: {m.group(0) if m else 'no Matched:'}, want {100 * union / FULL:.1f}%")
            c.check(all((f["fill"] == "rgb(230,0,230)") == (f["name"] == "d") for f in dfr),
                    "svg dump-dom: search ^d$ did not highlight exactly the d frames")
            # zoom: the frame spans the width, its callees scale, its callers dim, the rest hides
            ratio = FULL / z["w"]
            for k, f in dsp.items():
                if k == zk:
                    ok = near(f["x"], XPAD, 0.01) and near(f["w"], FULL, 0.01) and "hide" not in f["cls"]
                elif k.startswith(zk + ";"):
                    ok = near(f["w"], sp[k]["w"] * ratio, 0.01) and near(f["x"], XPAD + (sp[k]["x"] - z["x"]) * ratio, 0.01) \
                        and "hide" not in f["cls"] and (f["label"] == f["name"] or f["w"] < 7.4 * (len(f["name"]) + 1))
                elif zk.startswith(k + ";"):
                    ok = "parent" in f["cls"] and near(f["w"], FULL, 0.01)
                else:
                    ok = "hide" in f["cls"]
                c.check(ok, f"svg dump-dom: after zooming into {zk}: {k} at x {f['x']} width {f['w']} class {f['cls']}")
            c.check("parent" in dfr[[f["name"] for f in dfr].index("all")]["cls"], "svg dump-dom: 'all' not dimmed on zoom")
            print(f"svg dump-dom: {len(dfr)} frames after the script; searched ^d$, zoomed into {zk}")

if c.failed:
    print(f"the files are in {tmp}")
else:
    shutil.rmtree(tmp, ignore_errors=True)
c.done()
