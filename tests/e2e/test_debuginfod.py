#!/usr/bin/env python3
"""test_debuginfod.py -- icpp-resolve asks debuginfod within limits of its own (docs/debuginfo.md):
against a local HTTP server that counts requests, a map naming a stripped binary no sample falls in
makes no query for it (the sampled binary is asked for); a server that sleeps does not hold icpp-resolve
past --debuginfod-timeout (nor past the 30 s default); an answer larger than DEBUGINFOD_MAXSIZE is
stopped at the limit and nothing of it stays in the cache; --no-debuginfod makes no query at all."""
import http.server
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from e2e import Checker, built, run, tool

c = Checker("e2e-debuginfod")
TRAIN, SAMPLE, RESOLVE = tool("icpp-train"), tool("icpp-sample"), tool("icpp-resolve")
CRAFT = built("tests/e2e/craftmap")
for t in ("objcopy", "readelf"):
    if not c.check(shutil.which(t), f"no {t} on PATH (Debian package binutils)"):
        c.done()
if not c.check(os.path.exists("/usr/lib/x86_64-linux-gnu/libdebuginfod.so.1"),
               "no libdebuginfod.so.1 (Debian package libdebuginfod1)"):
    c.done()
os.environ["ICPP_DEBUG_DIRS"] = "/nonexistent"
tmp = tempfile.mkdtemp(prefix="icpp-dfd-")

state = {"mode": "404", "asked": [], "sent": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        m = re.match(r"/buildid/([0-9a-f]+)/debuginfo", self.path)
        state["asked"].append(m.group(1) if m else self.path)
        mode = state["mode"]
        try:
            if mode == "sleep":
                time.sleep(40)
                self.send_error(404)
            elif mode == "huge":             # no Content-Length: read until the server closes
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.end_headers()
                chunk = b"\0" * (1 << 20)
                for _ in range(64):
                    self.wfile.write(chunk)
                    state["sent"] += len(chunk)
            else:
                self.send_error(404)
        except (BrokenPipeError, ConnectionResetError):
            pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
URL = f"http://127.0.0.1:{srv.server_address[1]}"
ncache = [0]


def env(**kw):
    ncache[0] += 1
    e = dict(os.environ, DEBUGINFOD_URLS=URL, DEBUGINFOD_CACHE_PATH=os.path.join(tmp, f"cache{ncache[0]}"))
    e.pop("DEBUGINFOD_MAXSIZE", None)
    e.pop("DEBUGINFOD_TIMEOUT", None)
    e.update(kw)
    return e


def bid(path):
    return re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", path]).stdout).group(1)


# A stripped inliner (no debug file anywhere), its map, a recording; another stripped binary no sample touches.
full = os.path.join(tmp, "inliner.full")
shutil.copy(built("tests/e2e/inliner"), full)
BIN = os.path.join(tmp, "inliner")
subprocess.run(["objcopy", "--strip-all", full, BIN], check=True)
OTHER = os.path.join(tmp, "other")
subprocess.run(["objcopy", "--strip-all", built("tests/programs/orders.O2-nofp-pie"), OTHER], check=True)
MAP, CMAP, REC = os.path.join(tmp, "inliner.icppmap"), os.path.join(tmp, "crafted.icppmap"), os.path.join(tmp, "rec")
r = run([TRAIN, "-q", "--fresh", "-o", MAP, "--", BIN, "1"], env=dict(os.environ, DEBUGINFOD_URLS=""))
c.check(r.returncode == 0, f"icpp-train: {r.stderr}")
r = run([SAMPLE, "-q", "-e", "cpu-clock", "-F", "2000", "-o", REC, "--", BIN, "3"])
c.check(r.returncode == 0, f"icpp-sample: {r.stderr}")
# the map's main module (stripped inliner, functions fn_ADDR) now names OTHER: names would be looked up there
r = run([CRAFT, MAP, CMAP, "--module-path", "0", OTHER])
c.check(r.returncode == 0, f"craftmap: {r.stderr}")
B_BIN, B_OTHER = bid(BIN), bid(OTHER)

# ---- 1. only what samples need: the sampled binary is asked for, the map's untouched one is not ----
state.update(mode="404", asked=[])
r = run([RESOLVE, "-m", CMAP, "-o", os.devnull, REC], env=env())
asked = list(state["asked"])
c.check(B_BIN in asked, f"the sampled binary's debug file was not asked for: asked {asked}; {r.stderr[-300:]!r}")
c.check(B_OTHER not in asked, f"a binary no sample falls in was asked for: {B_OTHER} in {asked}")
c.check(len(asked) == len(set(asked)), f"a build-id was asked for twice: {asked}")
print(f"queries for a recording of inliner with a map naming another stripped binary: {len(asked)}")
state.update(asked=[])
r = run([RESOLVE, "--no-debuginfod", "-m", CMAP, "-o", os.devnull, REC], env=env())
c.check(r.returncode == 0 and not state["asked"], f"--no-debuginfod: rc {r.returncode}, asked {state['asked']}")

# ---- 2. a server that sleeps: the time budget ----
state.update(mode="sleep", asked=[])
t0 = time.monotonic()
r = run([RESOLVE, "--debuginfod-timeout", "2", "--script", REC], env=env())
dt = time.monotonic() - t0
c.check(r.returncode == 0 and dt < 12, f"--debuginfod-timeout 2 against a sleeping server: rc {r.returncode} "
        f"after {dt:.1f} s: {r.stderr[-300:]!r}")
c.check("debuginfod" in r.stderr and "budget" in r.stderr, f"the cut-short queries are not said: {r.stderr!r}")
print(f"sleeping server, --debuginfod-timeout 2: {dt:.1f} s, {len(state['asked'])} queries")
state.update(asked=[])
t0 = time.monotonic()
r = run([RESOLVE, "--script", REC], env=env())
dt = time.monotonic() - t0
c.check(r.returncode == 0 and dt < 38, f"default budget against a server sleeping 40 s: rc {r.returncode} after "
        f"{dt:.1f} s: {r.stderr[-300:]!r}")
print(f"sleeping server, default budget: {dt:.1f} s")

# ---- 3. a huge answer: stopped at DEBUGINFOD_MAXSIZE, nothing of it kept ----
state.update(mode="huge", asked=[], sent=0)
e = env(DEBUGINFOD_MAXSIZE=str(8 << 20))
r = run([RESOLVE, "--script", REC], env=e)
cache = e["DEBUGINFOD_CACHE_PATH"]
sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(cache) for f in fs]
c.check(r.returncode == 0 and max(sizes, default=0) < (9 << 20) and sum(sizes) < (24 << 20),
        f"a 64 MiB answer with DEBUGINFOD_MAXSIZE=8 MiB: rc {r.returncode}, cache files {sorted(sizes)[-3:]}: "
        f"{r.stderr[-300:]!r}")
c.check("size limit" in r.stderr, f"the stopped answer is not said: {r.stderr!r}")
print(f"huge answer: {len(state['asked'])} queries, {state['sent'] >> 20} MiB sent, cache holds {sum(sizes)} bytes")

srv.shutdown()
shutil.rmtree(tmp, ignore_errors=True)
c.done()
