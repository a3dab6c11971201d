#!/usr/bin/env python3
"""test_install.py -- `meson install --destdir D` of this build installs the four
tools, the training agent and the man pages (and nothing else), and the installed
tools, run from D, train -> sample -> resolve a corpus program to its documented
call paths with no environment variable pointing at the agent.

D is a relocated install: the agent's configured absolute path (config.h,
ICPP_AGENT_PATH, under --prefix) lies outside D.  icpp-train finds it the way a
package unpacked elsewhere does, relative to its own directory
(bindir/../LIBDIR/icpp/, ICPP_AGENT_FROM_BINDIR); the check at the end removes
D's agent to show that this is the one it used."""
import json
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from e2e import BUILD, SOURCE, Checker, built, run  # noqa: E402

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import corpus  # noqa: E402

c = Checker("install")
VERSION = os.environ["ICPP_VERSION"]
MESON = os.environ.get("MESON", "meson")
TOOLS = ["icpp-train", "icpp-sample", "icpp-resolve", "icpp-rewrite"]
tmp = tempfile.mkdtemp(prefix="icpp-install-")
D = os.path.join(tmp, "destdir")

opts = {o["name"]: o["value"] for o in json.loads(run([MESON, "introspect", "--buildoptions", BUILD]).stdout)}
prefix = opts["prefix"]


def under(d):
    """An install directory option as a path inside D."""
    return os.path.join(D, os.path.join(prefix, opts[d]).lstrip("/"))


BIN, LIB, MAN = under("bindir"), under("libdir"), under("mandir")

# ---------------------------------------------------------------- what is installed

r = run([MESON, "install", "-C", BUILD, "--destdir", D, "--no-rebuild", "--quiet"], timeout=600)
if not c.check(r.returncode == 0, f"meson install --destdir: exit {r.returncode}: {r.stdout}{r.stderr}"):
    c.done()
got = {os.path.relpath(os.path.join(dp, f), D) for dp, _, fs in os.walk(D) for f in fs}
want = {os.path.relpath(p, D) for p in
        [os.path.join(BIN, t) for t in TOOLS] + [os.path.join(LIB, "icpp", "libicpp-agent.so")] +
        [os.path.join(MAN, "man1", t + ".1") for t in TOOLS] + [os.path.join(MAN, "man7", "icpp.7")]}
c.check(got == want, f"installed: missing {sorted(want - got)}, not wanted {sorted(got - want)}")
for t in TOOLS:
    c.check(os.access(os.path.join(BIN, t), os.X_OK), f"{t}: not executable")

env = {k: v for k, v in os.environ.items() if not k.startswith("ICPP_") and k != "LD_PRELOAD"}
env["PATH"] = BIN + ":" + env.get("PATH", "/usr/bin:/bin")
env["LC_ALL"] = "C.UTF-8"
for t in TOOLS:
    r = run([os.path.join(BIN, t), "--version"], env=env)
    c.check(r.returncode == 0 and r.stdout == f"{t} {VERSION}\n", f"installed {t} --version: {r.stdout!r} {r.stderr!r}")
# man finds the installed pages by name in D's manual tree and renders them cleanly
for page, sec in [(t, "1") for t in TOOLS] + [("icpp", "7")]:
    r = run(["man", "-M", MAN, "-w", sec, page], env=env)
    c.check(r.returncode == 0 and r.stdout.strip() == os.path.join(MAN, "man" + sec, f"{page}.{sec}"),
            f"man -M {MAN} -w {sec} {page}: {r.stdout!r} {r.stderr!r}")
    r = run(["man", "--warnings", "-M", MAN, sec, page], env=dict(env, MANWIDTH="80"))
    c.check(r.returncode == 0 and r.stderr == "" and "SEE ALSO" in re.sub(r".\x08", "", r.stdout),
            f"man {sec} {page} from D: exit {r.returncode}: {r.stderr}")

# ---------------------------------------------------------------- the installed tools at work

entry = next(e for e in corpus.load_list(built("tests/programs/corpus-list.txt"))
             if e.prog == "orders" and e.config == "O2-fp-pie")
required, _ = corpus.paths_for(entry)
documented = sorted(p for p in required if not any(q[:len(p)] == p and q != p for q in required))
MAP, SAMPLES = os.path.join(tmp, "orders.icppmap"), os.path.join(tmp, "orders.samples")
r = run(["icpp-train", "-q", "-o", MAP, "--", entry.binary], env=env, cwd=tmp)
if not c.check(r.returncode == 0 and os.path.exists(MAP), f"installed icpp-train: exit {r.returncode}: {r.stderr}"):
    c.done()
r = run(["icpp-sample", "-q", "-e", "cpu-clock", "-F", "4000", "-o", SAMPLES, "--", entry.binary, "20"], env=env, cwd=tmp)
c.check(r.returncode == 0, f"installed icpp-sample: exit {r.returncode}: {r.stderr}")
r = run(["icpp-resolve", "-m", MAP, "--format", "folded", SAMPLES], env=env, cwd=tmp)
c.check(r.returncode == 0, f"installed icpp-resolve: exit {r.returncode}: {r.stderr}")
weight = {}
for line in r.stdout.splitlines():
    m = re.match(r"^(.+) (\d+(?:\.\d+)?)$", line)
    if m and "main" in m.group(1).split(";"):
        fs = m.group(1).split(";")
        k = tuple(fs[fs.index("main"):])
        weight[k] = weight.get(k, 0.0) + float(m.group(2))
for p in documented:
    c.check(weight.get(p, 0) > 0, f"documented path {';'.join(p)} has no weight in the installed icpp-resolve's profile")
r = run(["icpp-resolve", "-m", MAP, SAMPLES], env=env, cwd=tmp)
c.check(r.returncode == 0 and "main -> c -> d" in r.stdout, f"text profile: {r.stdout[:400]!r}")
# icpp-rewrite --verify runs the icpp-train installed beside it
r = run(["icpp-rewrite", "-q", "-m", MAP, "-o", os.path.join(tmp, "orders.arr"), "--verify", entry.binary],
        env=env, cwd=tmp, timeout=600)
c.check(r.returncode == 0 and os.path.exists(os.path.join(tmp, "orders.arr.icppmap")),
        f"installed icpp-rewrite --verify: exit {r.returncode}: {r.stdout[-400:]} {r.stderr[-400:]}")

# ---------------------------------------------------------------- the agent icpp-train used was D's

conf = open(built("lib/config.h")).read()
configured = re.search(r'#define ICPP_AGENT_PATH "(.*)"', conf).group(1)
agent = os.path.join(LIB, "icpp", "libicpp-agent.so")
os.rename(agent, agent + ".away")
r = run(["icpp-train", "-q", "--fresh", "-o", MAP, "--", entry.binary], env=env, cwd=tmp)
if os.path.exists(configured):
    print(f"note: {configured} exists (ICPP installed on this machine): the relocation check is skipped")
else:
    c.check(r.returncode == 1 and "cannot find libicpp-agent.so" in r.stderr,
            f"without D's agent icpp-train finds none: exit {r.returncode}: {r.stderr}")

shutil.rmtree(tmp)
c.done()
