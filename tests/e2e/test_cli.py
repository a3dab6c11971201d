#!/usr/bin/env python3
"""test_cli.py -- what the four tools' command lines promise alike: --version, man
pages that render cleanly and list exactly the options --help lists, and a
progress line only on a terminal (lib/cli.h)."""
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from e2e import BUILD, SOURCE, Checker, run, tool  # noqa: E402

c = Checker("cli")
VERSION = os.environ["ICPP_VERSION"]
TOOLS = ["icpp-train", "icpp-sample", "icpp-resolve", "icpp-rewrite"]
MANDIR = os.path.join(BUILD, "docs", "man")
SCD = os.path.join(SOURCE, "docs", "man")
tmp = tempfile.mkdtemp(prefix="icpp-cli-")

# ---------------------------------------------------------------- --version

for t in TOOLS:
    r = run([tool(t), "--version"])
    c.check(r.returncode == 0 and r.stdout == f"{t} {VERSION}\n" and r.stderr == "",
            f"{t} --version: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
r = run([tool("icpp-resolve"), "--trend", "--version"])
c.check(r.returncode == 0 and r.stdout == f"icpp-resolve {VERSION}\n", f"icpp-resolve --trend --version: {r.stdout!r}")

# ---------------------------------------------------------------- man pages render

man_env = dict(os.environ, LC_ALL="C.UTF-8", MANWIDTH="80")
PAGES = {"icpp.7": None, **{f"{t}.1": t for t in TOOLS}}
for page in PAGES:
    path = os.path.join(MANDIR, page)
    if not c.check(os.path.exists(path), f"{path}: not built"):
        continue
    # man-db with groff's warnings on: a macro scdoc got wrong, a line that cannot be broken, ...
    r = run(["man", "--warnings", "-E", "UTF-8", "-l", path], env=man_env)
    c.check(r.returncode == 0 and r.stderr == "", f"man -l {page}: exit {r.returncode}, warnings: {r.stderr}")
    text = re.sub(r".\x08", "", r.stdout)          # overstrike (bold, underline) off
    heads = set(re.findall(r"^([A-Z][A-Z ]+)$", text, re.M))
    want = {"NAME", "DESCRIPTION", "SEE ALSO"} | ({"SYNOPSIS", "OPTIONS", "EXIT STATUS", "EXAMPLES"} if PAGES[page] else set())
    c.check(want <= heads, f"{page}: sections {sorted(want - heads)} missing (has {sorted(heads)})")
    wide = [ln for ln in text.splitlines() if len(ln) > 80]
    c.check(not wide, f"{page}: lines wider than 80 columns: {wide[:3]}")
    # whatis/apropos read the NAME line
    r = run(["lexgrog", path])
    name = page.rsplit(".", 1)[0]
    c.check(r.returncode == 0 and f'"{name} - ' in r.stdout, f"lexgrog {page}: {r.stdout!r} {r.stderr!r}")

# ---------------------------------------------------------------- options: --help == man page

OPT_RE = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def help_options(text):
    """Options defined in a --help text: its option lines are indented by at most
    7 columns and start with '-'; the names are in the part before the first run of
    two spaces (the description)."""
    out = set()
    for line in text.splitlines():
        m = re.match(r"^( {1,7})(-.*)$", line)
        if m:
            out |= set(OPT_RE.findall(re.split(r"\s{2,}", m.group(2))[0]))
    return out


def man_options(scd):
    """Options defined in a man page's source: the item lines ('*-o*, *--output* _MAP_')
    of its sections named ... OPTIONS."""
    out, sec = set(), ""
    for line in open(scd):
        if line.startswith("# "):
            sec = line[2:].strip()
        elif sec.endswith("OPTIONS") and line.startswith("*-"):
            out |= set(OPT_RE.findall(re.sub(r"[*_]", "", line.split("\t")[0])))
    return out


for t in TOOLS:
    r = run([tool(t), "--help"])
    c.check(r.returncode == 0, f"{t} --help: exit {r.returncode}")
    hopts = help_options(r.stdout)
    modes = [([], hopts)]
    if t == "icpp-resolve":
        r = run([tool(t), "--trend", "--help"])
        c.check(r.returncode == 0, f"icpp-resolve --trend --help: exit {r.returncode}")
        topts = help_options(r.stdout)
        modes.append((["--trend"], topts))
        hopts = hopts | topts | {"--trend"}
    mopts = man_options(os.path.join(SCD, f"{t}.1.scd"))
    c.check(len(hopts) >= 8, f"{t}: only {sorted(hopts)} parsed from --help")
    c.check(not hopts - mopts, f"{t}: in --help, not in {t}(1): {sorted(hopts - mopts)}")
    c.check(not mopts - hopts, f"{t}: in {t}(1), not in --help: {sorted(mopts - hopts)}")
    # and each one is an option the tool takes (getopt_long names an unknown one);
    # "--help" after it is its argument or ends the parse, so nothing runs
    for mode, opts in modes:
        for o in sorted(opts):
            if o.startswith("--") and o not in ("--help", "--version"):
                r = run([tool(t)] + mode + [o, "--help"], timeout=30, cwd=tmp)
                c.check("unrecognized option" not in r.stderr and "invalid option" not in r.stderr,
                        f"{t} {' '.join(mode)} does not take {o}: {r.stderr.strip()[:200]}")

# The same names for the same things across tools (issue #16).
for t, opts in [("icpp-train", ["-o", "--output", "-q", "--quiet", "-v", "--verbose"]),
                ("icpp-sample", ["-o", "--output", "-e", "--event", "-c", "--count", "-F", "--freq", "-p", "--pid",
                                 "-q", "--quiet"]),
                ("icpp-resolve", ["-o", "--output", "-m", "--map", "-q", "--quiet"]),
                ("icpp-rewrite", ["-o", "--output", "-m", "--map", "-q", "--quiet", "-v", "--verbose"])]:
    hopts = help_options(run([tool(t), "--help"]).stdout)
    c.check(set(opts) <= hopts, f"{t}: lacks {sorted(set(opts) - hopts)}")

# ---------------------------------------------------------------- progress only on a terminal

SLEEP = "/bin/sleep"
PROGRESS = re.compile(r"\ricpp-train: \d+s, training: \d+ process(es)?, \d+ threads?, trees [\d.]+ MiB\x1b\[K")


def on_pty(cmd):
    """Run cmd with stderr on a new pseudo-terminal (stdin, stdout not): its exit
    status and everything it wrote to the terminal."""
    m, s = pty.openpty()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=s, cwd=tmp)
    os.close(s)
    out, end = b"", time.time() + 120
    while time.time() < end:
        rd, _, _ = select.select([m], [], [], 1)
        if rd:
            try:
                d = os.read(m, 4096)
            except OSError:     # EIO: the last writer closed it
                break
            if not d:
                break
            out += d
        elif p.poll() is not None:
            break
    os.close(m)
    return p.wait(timeout=60), out.decode(errors="replace")


train = [tool("icpp-train"), "--modules", "main", "--fresh", "-o", os.path.join(tmp, "sleep.icppmap"), "--",
         SLEEP, "2.5"]
st, out = on_pty(train)
c.check(st == 0, f"icpp-train on a terminal: exit {st}: {out!r}")
lines = PROGRESS.findall(out)
c.check(len(PROGRESS.findall(out)) >= 1 and len(re.findall(r"\ricpp-train: \d+s", out)) >= 2,
        f"a 2.5 s training shows progress lines on a terminal: {out!r}")
c.check("\r\x1b[Kicpp-train: " in out, f"the progress line is cleared before the summary: {out!r}")
st, out = on_pty(train[:1] + ["-q"] + train[1:])
c.check(st == 0 and out == "", f"-q on a terminal: nothing at all: {out!r}")
r = run(train, cwd=tmp)
c.check(r.returncode == 0 and "\r" not in r.stderr and "\x1b" not in r.stderr and "training:" not in r.stderr
        and "icpp-train: " in r.stderr, f"stderr not a terminal: the summary only: {r.stderr!r}")

# icpp-resolve --trend over 20 copies of one recording: a line per second while the
# runs are resolved (each takes a few tens of ms at least: loading the map, DWARF,
# resolving), none when stderr is a pipe or with -q.
sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402
entry = next(e for e in corpus.load_list(os.path.join(BUILD, "tests/programs/corpus-list.txt"))
             if e.prog == "orders" and e.config == "O2-fp-pie")
MAP, SAMPLES = os.path.join(tmp, "orders.icppmap"), os.path.join(tmp, "orders.samples")
r1 = run([tool("icpp-train"), "-q", "-o", MAP, "--", entry.binary], cwd=tmp)
r2 = run([tool("icpp-sample"), "-q", "-e", "cpu-clock", "-o", SAMPLES, "--", entry.binary, "5"], cwd=tmp)
if c.check(r1.returncode == 0 and r2.returncode == 0, f"orders: train/sample failed: {r1.stderr} {r2.stderr}"):
    N = 20
    trend = [tool("icpp-resolve"), "--trend", "-m", MAP, "--no-complete", "--feature",
             "n=" + ",".join(str(i) for i in range(1, N + 1))] + [SAMPLES] * N
    t0 = time.time()
    st, out = on_pty(trend)
    took = time.time() - t0
    c.check(st == 0, f"--trend on a terminal: exit {st}: {out[-300:]!r}")
    lines = re.findall(rf"\ricpp-resolve: \d+s, resolving run (\d+) of {N}\x1b\[K", out)
    if took > 3:
        c.check(lines and all(1 <= int(k) <= N for k in lines),
                f"--trend took {took:.1f} s on a terminal, no progress line: {out[:300]!r}")
    else:
        print(f"note: --trend of {N} runs took {took:.1f} s only: its progress line is not checked")
    c.check(not lines or "\r\x1b[K" in out, f"--trend: the progress line is cleared: {out[:300]!r}")
    st, out = on_pty(trend[:1] + ["-q"] + trend[1:])
    c.check(st == 0 and "resolving run" not in out and "\x1b" not in out, f"--trend -q on a terminal: {out[:300]!r}")
    r = run(trend, cwd=tmp)
    c.check(r.returncode == 0 and "\r" not in r.stderr and "resolving run" not in r.stderr,
            f"--trend, stderr not a terminal: no progress: {r.stderr[:300]!r}")

shutil.rmtree(tmp)
c.done()
