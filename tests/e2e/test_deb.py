#!/usr/bin/env python3
"""test_deb.py -- the Debian package built from the tree (debian/): a copy of
the tracked files in a temporary directory, `dpkg-buildpackage -b -us -uc`
there (DEB_BUILD_OPTIONS=nocheck: the unit suite runs elsewhere), then:
  - the .deb holds the four tools in /usr/bin and nothing else there, the
    training agent once under /usr/lib, a man page for every docs/ scdoc
    source NAME.N.scd (usr/share/man/manN/NAME.N.gz), the copyright file
    (GPL-3+), and no test or bench program;
  - lintian reports no error;
  - the tools of the package, extracted with `dpkg-deb -x` into a temporary
    root, answer --version with the upstream version of debian/changelog,
    which is meson.build's project version (--help where a tool has no
    --version yet), and run the demo: train, rewrite, sample and resolve the
    corpus program orders.c; the profile holds its documented paths;
  - as root with ICPP_DEB_INSTALL=1: `dpkg -i` (this changes the machine:
    the package stays installed) and the same demo with /usr/bin's tools.
Nothing is written outside the temporary directory (dpkg-buildpackage writes
the .deb into the parent of the tree it builds: the copy's parent)."""
import glob
import os
import re
import shutil
import tempfile

from e2e import SOURCE, Checker, built, run

c = Checker("deb")
TOOLS = ["icpp-train", "icpp-rewrite", "icpp-sample", "icpp-resolve"]
for t in ("dpkg-buildpackage", "dpkg-deb", "dpkg-parsechangelog", "dh", "lintian", "git"):
    if not c.check(shutil.which(t), f"no {t} on PATH (scripts/deps installs dpkg-dev, debhelper, lintian, git)"):
        c.done()

tmp = tempfile.mkdtemp(prefix="icpp-deb-")
tree = os.path.join(tmp, "icpp")
os.mkdir(tree)
# The tracked files only (plus untracked ones not ignored, so an uncommitted
# change is packaged as it would be once committed): never build/, never a
# file the tree's own build left.
r = run(["git", "-C", SOURCE, "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
if not c.check(r.returncode == 0, f"git ls-files: {r.stderr.strip()}"):
    c.done()
for rel in filter(None, r.stdout.split("\0")):
    src = os.path.join(SOURCE, rel)
    if not os.path.lexists(src):          # deleted in the work tree, not yet in the index
        continue
    os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
    shutil.copy2(src, os.path.join(tree, rel), follow_symlinks=False)

# The version: debian/changelog's upstream part must be the project's.
r = run(["dpkg-parsechangelog", "-l", os.path.join(tree, "debian/changelog"), "-S", "Version"])
deb_version = r.stdout.strip()
upstream = re.sub(r"^\d+:", "", deb_version).rsplit("-", 1)[0]
meson_version = os.environ.get("ICPP_VERSION")       # meson.project_version(), from tests/e2e/meson.build
c.check(upstream and upstream == meson_version,
        f"debian/changelog's upstream version {upstream!r} is not meson.build's {meson_version!r}")

env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2", LC_ALL="C.UTF-8")
r = run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=tree, env=env, timeout=1500)
if not c.check(r.returncode == 0, f"dpkg-buildpackage: exit {r.returncode}:\n{(r.stdout + r.stderr)[-4000:]}"):
    c.done()
debs = glob.glob(os.path.join(tmp, f"icpp_{deb_version}_amd64.deb"))
if not c.check(len(debs) == 1, f"no icpp_{deb_version}_amd64.deb next to the tree: {os.listdir(tmp)}"):
    c.done()
deb = debs[0]

# Contents.
r = run(["dpkg-deb", "-c", deb])
files = {}                                # path without the leading "." -> mode string
for line in r.stdout.splitlines():
    f = line.split()
    path = f[-1][1:].rstrip("/")
    if path:                              # "./" itself
        files[path] = f[0]
bins = sorted(os.path.basename(p) for p in files if os.path.dirname(p) == "/usr/bin")
c.check(bins == sorted(TOOLS), f"/usr/bin holds {bins}, not the four tools")
for t in TOOLS:
    c.check(files.get("/usr/bin/" + t, "")[:4] == "-rwx", f"/usr/bin/{t} is not an executable file")
agents = [p for p in files if p.startswith("/usr/lib/") and os.path.basename(p) == "libicpp-agent.so"]
c.check(len(agents) == 1, f"the training agent libicpp-agent.so: {agents or 'absent'}")
sos = [p for p in files if ".so" in os.path.basename(p) and p not in agents]
c.check(not sos, f"libraries other than the agent: {sos} (the bench-only hooks-only agent?)")
outside = [p for p in files if p != "/usr" and not p.startswith("/usr/")]
c.check(not outside, f"files outside /usr: {outside}")
mans = sorted(p for p in files if p.startswith("/usr/share/man/"))
want_mans = []                            # the copy holds only the tree's files: no build output
for scd in sorted(os.path.join(d, f) for d, _, fs in os.walk(tree) for f in fs if f.endswith(".scd")):
    m = re.fullmatch(r"(.+)\.(\d)\.scd", os.path.basename(scd))
    if c.check(m, f"{os.path.relpath(scd, tree)}: a man page source is named NAME.SECTION.scd"):
        want_mans.append(f"/usr/share/man/man{m.group(2)}/{m.group(1)}.{m.group(2)}.gz")
c.check([p for p in mans if p.endswith(".gz")] == sorted(want_mans),
        f"man pages {mans}, expected one per .scd source: {sorted(want_mans)}")
print(f"deb: {os.path.basename(deb)}: {len(files)} entries, agent {agents}, {len(want_mans)} man pages")

# lintian: no error (warnings are printed, not failed on).
r = run(["lintian", "--no-tag-display-limit", deb], timeout=600)
errors = [l for l in r.stdout.splitlines() if l.startswith("E:")]
c.check(not errors, "lintian errors:\n  " + "\n  ".join(errors))
if r.stdout.strip():
    print("lintian:\n  " + "\n  ".join(r.stdout.splitlines()))

root = os.path.join(tmp, "root")
r = run(["dpkg-deb", "-x", deb, root])
if not c.check(r.returncode == 0, f"dpkg-deb -x: {r.stderr}"):
    c.done()
c.check(os.path.isfile(os.path.join(root, "usr/share/doc/icpp/copyright"))
        and "GPL-3+" in open(os.path.join(root, "usr/share/doc/icpp/copyright")).read(),
        "usr/share/doc/icpp/copyright missing or without GPL-3+")


def versions(bindir, where):
    """Each tool's --version is 'TOOL VERSION' with debian/changelog's upstream version."""
    for t in TOOLS:
        exe = os.path.join(bindir, t)
        h = run([exe, "--help"])
        if "--version" in h.stdout + h.stderr:
            v = run([exe, "--version"])
            c.check(v.returncode == 0 and re.search(rf"(^|\s){re.escape(upstream)}(\s|$)", v.stdout),
                    f"{where} {t} --version: exit {v.returncode}, {v.stdout.strip()!r}{v.stderr.strip()!r}, "
                    f"not version {upstream}")
        else:
            print(f"{where} {t}: no --version in --help yet; --help checked instead")
            c.check(h.returncode == 0 and f"usage: {t}" in h.stdout + h.stderr,
                    f"{where} {t} --help: exit {h.returncode}: {h.stderr.strip()[-500:]}")


# orders.c's documented paths (tests/programs/orders.c, ICPP-PATHS).
ORDERS_PATHS = ["main -> a -> b -> d", "main -> b -> a -> d", "main -> b -> e -> d", "main -> c -> d"]


def demo(bindir, where):
    """The demo with the package's tools: every stage exits 0, the profile
    holds orders.c's documented paths and (nearly) every sample resolves."""
    w = tempfile.mkdtemp(prefix="demo-", dir=tmp)
    prog = os.path.join(w, "orders")
    shutil.copy(built("tests/programs/orders.O2-nofp-pie"), prog)
    env = {k: v for k, v in os.environ.items() if k != "ICPP_AGENT"}   # the package's own agent
    m = os.path.join(w, "orders.icppmap")
    steps = [
        ("icpp-train", ["-q", "-o", m, "--", prog, "1"]),
        ("icpp-rewrite", ["-q", "-m", m, "-o", prog + ".arr", prog]),
        ("icpp-sample", ["-q", "-o", os.path.join(w, "s"), "--", prog + ".arr", "10"]),
        ("icpp-resolve", ["-m", prog + ".arr.icppmap", "-n", "10", os.path.join(w, "s")]),
    ]
    for t, args in steps:
        r = run([os.path.join(bindir, t)] + args, cwd=w, env=env)
        if not c.check(r.returncode == 0, f"{where} demo: {t}: exit {r.returncode}: {r.stderr.strip()[-1000:]}"):
            return
    out = r.stdout
    for p in ORDERS_PATHS:
        c.check(p in out, f"{where} demo: documented path {p} not in the profile:\n{out}")
    mm = re.search(r"# precise ([\d.]+)%\s+ambiguous ([\d.]+)%", out)
    c.check(mm and float(mm.group(1)) + float(mm.group(2)) >= 95.0,
            f"{where} demo: under 95% of samples resolved (precise + ambiguous):\n{out[:600]}")
    print(f"{where} demo: {mm.group(0) if mm else '?'}")


versions(os.path.join(root, "usr/bin"), "extracted")
demo(os.path.join(root, "usr/bin"), "extracted")

if os.environ.get("ICPP_DEB_INSTALL") == "1":
    if os.geteuid() != 0:
        print("ICPP_DEB_INSTALL=1 but not root: dpkg -i skipped")
    else:
        r = run(["dpkg", "-i", deb], timeout=600)
        if c.check(r.returncode == 0, f"dpkg -i: exit {r.returncode}: {r.stderr.strip()[-2000:]}"):
            versions("/usr/bin", "installed")
            demo("/usr/bin", "installed")
else:
    print("dpkg -i not tried (set ICPP_DEB_INSTALL=1 as root to install the package and run the demo from /usr/bin)")

if c.failed == 0:
    shutil.rmtree(tmp)
else:
    print(f"deb: kept {tmp} for a look")
c.done()
