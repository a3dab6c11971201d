#!/usr/bin/env python3
"""test_corpus.py -- checks that the corpus programs do what their sources say.

Usage: test_corpus.py [corpus-list.txt]   (default: corpus.default_list_path())

For every binary in the list (all configurations, "instr" included):
  run       run with no arguments: exit status and stdout must match the
            ICPP-EXPECT block; once more at scale 2 (O2-fp-pie only): same
            exit status
  symbols   every documented function is defined in the binary (or its
            plugin), and gcc made no clones of them (.constprop/.isra/.part)
  tailcalls the jumps from one own function to another (or to libc) in the
            disassembly are exactly the ICPP-TAILCALLS of the source at -O2,
            none otherwise: no accidental tail call changes a path; and a
            function documented as calling itself has a call to itself
For the instr binaries (-O0 -finstrument-functions + tracer.c):
  paths     the paths the tracer saw executed include every required path
            and nothing outside required + optional; the stack stayed under
            48 KiB
Prints one line per check and 'N passed, N failed' at the end; exits 1 if
anything failed.
"""

import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

STACK_LIMIT = 48 * 1024
RUN_TIMEOUT = 60


class Result:
    def __init__(self, name):
        self.name = name
        self.errors = []

    def fail(self, msg):
        self.errors.append(msg)


def run(binary, args=(), env=None):
    """(exit status, stdout, stderr) of one run in a scratch directory."""
    with tempfile.TemporaryDirectory(prefix='icpp-corpus-') as cwd:
        p = subprocess.run([binary] + list(args), cwd=cwd, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=RUN_TIMEOUT)
    return p.returncode, p.stdout, p.stderr


# ------------------------------------------------------------ symbol tables

_nm_cache = {}


def nm(path):
    """{symbol value: [names]} and {name: value} of a module's functions."""
    if path not in _nm_cache:
        out = subprocess.run(['nm', '--defined-only', path], check=True,
                             capture_output=True, text=True).stdout
        by_addr, by_name = {}, {}
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in 'tTwWiI':
                v = int(f[0], 16)
                by_addr.setdefault(v, []).append(f[2])
                by_name[f[2]] = v
        _nm_cache[path] = (by_addr, by_name)
    return _nm_cache[path]


def base_name(sym):
    """foo.cold -> foo (a split part belongs to its function)."""
    return sym[:-5] if sym.endswith('.cold') else sym


def check_symbols(e, res):
    want = corpus.functions(e)
    have = set()
    for mod in corpus.modules(e):
        _, by_name = nm(mod)
        have |= set(by_name)
        for sym in by_name:
            m = re.match(r'(.+?)\.(constprop|isra|part|localalias)\.', sym + '.')
            if m and m.group(1) in want:
                res.fail('%s: gcc cloned %s as %s' % (mod, m.group(1), sym))
    for f in sorted(want - have):
        res.fail('documented function %s not defined in %s'
                 % (f, ' '.join(corpus.modules(e))))


# ------------------------------------------------------------ tail calls

_FUNC = re.compile(r'^[0-9a-f]+ <([^>]+)>:$')
_CALL = re.compile(r'^\s*[0-9a-f]+:\s+(?:bnd )?call\s+[0-9a-f]+\s+<([^>+]+)>')
_JMP = re.compile(r'^\s*[0-9a-f]+:\s+(?:bnd |notrack )?(j[a-z]+)\s+(\S+)(?:\s+<([^>]+)>)?')


def tail_calls(mod, own):
    """(caller, callee) jumps leaving a function of `own` in a module's
    disassembly (callee '*' for an indirect jump), and the set of functions
    of `own` that call themselves."""
    out = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-M', 'att', mod],
                         check=True, capture_output=True, text=True).stdout
    found = set()
    recursive = set()
    cur = None
    for line in out.splitlines():
        m = _FUNC.match(line)
        if m:
            cur = base_name(m.group(1))
            continue
        if cur not in own:
            continue
        m = _JMP.match(line)
        if not m:
            m = _CALL.match(line)
            if m and base_name(m.group(1)) == cur:
                recursive.add(cur)
            continue
        target, sym = m.group(2), m.group(3)
        if target.startswith('*'):
            found.add((cur, '*'))
            continue
        if sym is None:
            continue
        callee = base_name(re.sub(r'\+0x[0-9a-f]+$', '', sym))
        if callee != cur:
            found.add((cur, callee))
    return found, recursive


def check_tailcalls(e, res):
    own = corpus.functions(e)
    found, recursive = set(), set()
    for mod in corpus.modules(e):
        f, r = tail_calls(mod, own)
        found |= f
        recursive |= r
    req, opt = corpus.paths_for(e)
    selfrec = {a for p in req | opt for a, b in zip(p, p[1:]) if a == b}
    for f in sorted(selfrec - recursive):
        res.fail('%s recurses on the documented paths but has no call to '
                 'itself (gcc made a loop of it?)' % f)
    want = corpus.tailcalls(e) if 'O2' in e.tags else set()
    for tc in sorted(found - want):
        res.fail('undocumented tail call %s->%s' % tc)
    for tc in sorted(want - found):
        res.fail('documented tail call %s->%s not in the binary' % tc)


# ------------------------------------------------------------ runs + traces

def check_run(e, res, trace_dir=None):
    exp = corpus.expected(e)
    env = dict(os.environ)
    env.pop('ICPP_TRACE_DIR', None)
    if trace_dir:
        env['ICPP_TRACE_DIR'] = trace_dir
    status, out, err = run(e.binary, env=env)
    if status != exp.exit:
        res.fail('exit status %d, documented %d; stderr: %s'
                 % (status, exp.exit, err.strip()[:300]))
    if out.splitlines() != exp.stdout:
        res.fail('stdout %r, documented %r' % (out.splitlines(), exp.stdout))
    if e.config == 'O2-fp-pie':
        status2, _, err2 = run(e.binary, ['2'], env=env)
        if status2 != exp.exit:
            res.fail('scale 2: exit status %d, documented %d; stderr: %s'
                     % (status2, exp.exit, err2.strip()[:300]))


def read_traces(trace_dir, res):
    """Union of executed paths over the trace files of one run."""
    paths = set()
    files = sorted(os.listdir(trace_dir))
    if not files:
        res.fail('tracer wrote no trace file')
    for name in files:
        nodes = {}
        with open(os.path.join(trace_dir, name)) as f:
            for line in f:
                fields = line.split()
                if fields[0] == 'N':
                    node, parent, mod, off = fields[1:5]
                    by_addr, _ = nm(mod)
                    names = by_addr.get(int(off, 16))
                    fn = names[0] if names else '%s+%s' % (mod, off)
                    nodes[int(node)] = (int(parent), fn)
                elif fields[0] == 'S' and int(fields[1]) > STACK_LIMIT:
                    res.fail('%s: stack use %s bytes > %d'
                             % (name, fields[1], STACK_LIMIT))
                elif fields[0] == 'X' and int(fields[1]) != 0:
                    res.fail('%s: tracer dropped %s entries' % (name, fields[1]))
        for node in nodes:
            path = []
            while node:
                node, fn = nodes[node]
                path.append(fn)
            paths.add(tuple(reversed(path)))
    return paths


def check_paths(e, res, trace_dir):
    seen = read_traces(trace_dir, res)
    req, opt = corpus.paths_for(e)
    for p in sorted(req - seen):
        res.fail('documented path not executed: %s' % corpus.format_path(p))
    for p in sorted(seen - req - opt):
        res.fail('executed path not documented: %s' % corpus.format_path(p))


def check_entry(e):
    results = []
    name = '%s.%s' % (e.prog, e.config)
    r = Result(name + ' run')
    if 'instr' in e.tags:
        with tempfile.TemporaryDirectory(prefix='icpp-trace-') as td:
            try:
                check_run(e, r, td)
            except Exception as ex:  # noqa: BLE001 (report, go on)
                r.fail('run failed: %r' % ex)
            p = Result(name + ' paths')
            try:
                check_paths(e, p, td)
            except Exception as ex:  # noqa: BLE001
                p.fail('trace check failed: %r' % ex)
        results += [r, p]
    else:
        try:
            check_run(e, r)
        except Exception as ex:  # noqa: BLE001
            r.fail('run failed: %r' % ex)
        results.append(r)
    for what, fn in (('symbols', check_symbols), ('tailcalls', check_tailcalls)):
        c = Result('%s %s' % (name, what))
        try:
            fn(e, c)
        except Exception as ex:  # noqa: BLE001
            c.fail('%s check failed: %r' % (what, ex))
        results.append(c)
    return results


def main(argv):
    list_path = argv[1] if len(argv) > 1 else corpus.default_list_path()
    for tool in ('nm', 'objdump'):
        if shutil.which(tool) is None:
            print('test_corpus: %s not found (binutils)' % tool)
            return 1
    entries = corpus.load_list(list_path, include_instr=True)
    if not entries:
        print('test_corpus: %s lists no binaries' % list_path)
        return 1
    # Traced processes and nm lookups share no state across entries except
    # the nm cache (filled per module, same answer from any thread).
    workers = max(2, os.cpu_count() or 2)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        results = [r for rs in pool.map(check_entry, entries) for r in rs]
    passed = failed = 0
    for r in results:
        if r.errors:
            failed += 1
            print('FAIL %s' % r.name)
            for msg in r.errors:
                print('     %s' % msg)
        else:
            passed += 1
            print('ok   %s' % r.name)
    print('%d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
