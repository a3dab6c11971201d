#!/usr/bin/env python3
"""tools.py -- the fuzzers' seed corpora through the tools (meson test 'fuzz-seeds-tools').

Usage: tools.py MKSEEDS BUILD
The harnesses (fuzz_*.c) reach the parsers; this feeds the same inputs -- the
seeds mkseeds writes and the committed tests/fuzz/seeds/ -- to the tools of
BUILD, whose code around the parsers (completion, the rewrite searches, the
outputs) the harnesses do not run: path maps to icpp-train --stats/--paths,
icpp-resolve -m and icpp-rewrite -m, sample files and perf.data files to
icpp-resolve in several formats.  A refusal is fine (exit 1 or 2 with a
message); a signal, any other exit status or a sanitizer report on stderr is a
failure.  In build-san/ (scripts/test) the tools run under ASan+UBSan.
Ends with 'N passed, N failed'."""
import glob
import os
import subprocess
import sys
import tempfile

REPORT = ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "AddressSanitizer:DEADLYSIGNAL")


def main(mkseeds, build):
    here = os.path.dirname(os.path.abspath(__file__))
    tool = lambda n: os.path.join(build, n, n)  # noqa: E731
    tmp = tempfile.mkdtemp(prefix="icpp-fuzz-tools-")
    gen = os.path.join(tmp, "gen")
    subprocess.run([mkseeds, gen, "/usr/bin/true", mkseeds], check=True, stdout=subprocess.DEVNULL)

    def seeds(*subs):
        out = []
        for s in subs:
            out += sorted(glob.glob(os.path.join(gen, s, "*"))) + sorted(glob.glob(os.path.join(here, "seeds", s, "*")))
        return [p for p in out if os.path.isfile(p)]

    maps, samples, perf = seeds("pathmap"), seeds("samples"), seeds("perfdata")
    rec = next((s for s in samples if s.endswith("all.icpps")), samples[0] if samples else None)
    prog = os.path.join(tmp, "prog")
    with open(mkseeds, "rb") as f, open(prog, "wb") as g:
        g.write(f.read())
    os.chmod(prog, 0o755)
    out = os.path.join(tmp, "out")
    cmds = []
    for m in maps:
        cmds += [[tool("icpp-train"), "--stats", m], [tool("icpp-train"), "--paths", m],
                 [tool("icpp-rewrite"), "-q", "--time-limit", "0.5", "-m", m, "-o", out, prog]]
        if rec:
            cmds += [[tool("icpp-resolve"), "-m", m, rec], [tool("icpp-resolve"), "-m", m, "--format", "tree", rec]]
    for s in samples + perf:
        cmds += [[tool("icpp-resolve"), s], [tool("icpp-resolve"), "--script", s],
                 [tool("icpp-resolve"), "--format", "json", "-o", out, s],
                 [tool("icpp-resolve"), "--format", "pprof", "-o", out, s]]
    passed = failed = 0
    for cmd in cmds:
        try:
            r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, errors="replace", timeout=120, cwd=tmp)
            bad = r.returncode not in (0, 1, 2) or any(x in r.stderr for x in REPORT)
            why = f"exit {r.returncode}: {r.stderr[-3000:]}"
        except subprocess.TimeoutExpired:
            bad, why = True, "not done in 120 s"
        if bad:
            failed += 1
            print(f"FAIL: {' '.join(cmd)}: {why}")
        else:
            passed += 1
    print(f"fuzz-seeds-tools: {len(maps)} maps, {len(samples)} sample files, {len(perf)} perf.data files")
    print(f"{passed} passed, {failed} failed")
    if not failed:
        import shutil
        shutil.rmtree(tmp)
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])))
