"""e2e.py -- shared helpers for the end-to-end tests: paths, running tools, parsing their output."""
import codecs
import os
import re
import subprocess
import sys

BUILD = os.environ.get("ICPP_BUILD") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "build"))
SOURCE = os.environ.get("ICPP_SOURCE") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def tool(name):
    return os.path.join(BUILD, name, name)


def built(rel):
    return os.path.join(BUILD, rel)


# In build-san/ (ICPP_SANITIZED=1) the tests run for their commands: every tool under
# ASan+UBSan, where any report fails the test (run() below; scripts/test also fails on
# the report files).  Their assertions are judged in build/: under ASan the sampler's
# reader is 2-3x slower and loses samples at the tests' rates (orders.c at 4 kHz: 166 of
# ~2,400 lost, none in build/), so checks of counts, shares and precision there would
# judge the sanitizer's speed.  A failed check is printed as not judged and counted.
SANITIZED = os.environ.get("ICPP_SANITIZED") == "1"


class Checker:
    """Counts checks; prints failures; exit status at the end."""

    def __init__(self, name):
        self.name, self.n, self.failed, self.unjudged = name, 0, 0, 0

    def check(self, cond, msg):
        self.n += 1
        if not cond:
            if SANITIZED:
                self.unjudged += 1
                print(f"NOT JUDGED (sanitized tools; judged in build/): {msg}", file=sys.stderr)
            else:
                self.failed += 1
                print(f"FAIL: {msg}", file=sys.stderr)
        return cond

    def done(self):
        extra = f", {self.unjudged} not judged (sanitized tools)" if self.unjudged else ""
        print(f"{self.name}: {self.n} checks, {self.failed} failed{extra}")
        sys.exit(1 if self.failed else 0)


# What ASan, LSan and UBSan print on a report.  A tool of a sanitizer build
# (ICPP_BUILD=build-san) that reports fails the test whatever the test checks:
# an expected refusal (exit 1) must not hide one.  scripts/test also sends the
# reports to files (log_path) and fails on any.
SANITIZER_REPORT = re.compile(r"runtime error:|ERROR: (?:AddressSanitizer|LeakSanitizer)|AddressSanitizer:DEADLYSIGNAL")


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    r = subprocess.run(cmd, **kw)
    err = r.stderr if isinstance(r.stderr, str) else (r.stderr or b"").decode("utf-8", "replace")
    if SANITIZER_REPORT.search(err):
        raise RuntimeError(f"sanitizer report from {cmd}:\n{err[-4000:]}")
    return r


SCRIPT_RE = re.compile(
    r"^(\d+)/(\d+) (\d+) (\S+) ip=(\S+) sp=(\S+) bp=(\S+) base=(\S+)\((\w+)\) height=(-?\d+) (.+?) (\S+)\+(\S+) (\S+)"
    r"(?: inlined=(.+))?$")


def script(samples):
    """Samples of a file, through `icpp-resolve --script`, as dicts ("inlined": the
    functions inlined at the address, outermost first)."""
    r = run([tool("icpp-resolve"), "--script", samples])
    if r.returncode != 0:
        raise RuntimeError(f"icpp-resolve --script failed: {r.stderr}")
    out = []
    for line in r.stdout.splitlines():
        m = SCRIPT_RE.match(line)
        if not m:
            raise RuntimeError(f"unparsable script line: {line}")
        g = m.groups()
        out.append(dict(pid=int(g[0]), tid=int(g[1]), time=int(g[2]), event=g[3], ip=int(g[4], 16),
                        sp=int(g[5], 16), bp=int(g[6], 16), base=int(g[7], 16), base_kind=g[8],
                        height=int(g[9]), status=g[10], module=g[11], addr=int(g[12], 16), func=g[13],
                        inlined=g[14].split(";") if g[14] else []))
    return out


def addr2line(binary, addrs):
    """{address: [function, ...]} innermost first, the containing function last
    (binutils' addr2line: a DWARF reader that shares no code with libdw)."""
    r = run(["addr2line", "-a", "-i", "-f", "-C", "-e", binary] + [f"{a:#x}" for a in addrs])
    out, cur, k = {}, None, 0
    for line in r.stdout.splitlines():
        if re.fullmatch(r"0x[0-9a-f]+", line):
            cur, k = int(line, 16), 0
            out[cur] = []
        else:
            if k % 2 == 0:
                out[cur].append(line)
            k += 1
    return out


def map_paths(mapfile):
    """`icpp-train --paths MAP`: one (count, {height: count}, names, ids) per call path,
    names and ids (module@address) as tuples, root first."""
    r = run([tool("icpp-train"), "--paths", mapfile])
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    out = []
    for line in r.stdout.splitlines():
        if line.startswith("#"):
            continue
        cnt, hs, names, ids = line.split("\t")
        h = {int(a): int(b) for a, b in (x.split(":") for x in hs.split(",") if x)}
        out.append((int(cnt), h, tuple(names.split(";")), tuple(ids.split(";"))))
    return out


def map_modules(mapfile):
    """`icpp-train --paths MAP`'s '# module' lines: {name in the functions column: build-id}.
    The name is the path the program loaded (libstdc++.so.6), which may be a link to
    a file of another name (libstdc++.so.6.0.30, as /proc/PID/maps says): compare
    modules by build-id."""
    r = run([tool("icpp-train"), "--paths", mapfile])
    if r.returncode != 0:
        raise RuntimeError(r.stderr)
    out = {}
    for line in r.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "# module" and len(f) == 4 and f[1:] != ["name", "build-id", "path"]:
            if f[1] in out and out[f[1]] != f[2]:
                raise RuntimeError(f"{mapfile}: two modules named {f[1]}")
            out[f[1]] = f[2]
    return out


def textproto(text):
    """`protoc --decode` output -> nested dicts of lists (strings, ints, bools)."""
    root, stack = {}, []
    stack.append(root)
    for line in text.splitlines():
        line = line.strip()
        if line.endswith("{"):
            d = {}
            stack[-1].setdefault(line[:-1].strip(), []).append(d)
            stack.append(d)
        elif line == "}":
            stack.pop()
        elif line:
            k, v = line.split(":", 1)
            v = v.strip()
            if v.startswith('"'):
                v = codecs.escape_decode(v[1:-1].encode())[0].decode("utf-8", "replace")
            elif v in ("true", "false"):
                v = v == "true"
            else:
                v = int(v)
            stack[-1].setdefault(k, []).append(v)
    return root
