"""corpus.py -- the ICPP test corpus: which binaries exist, and their truth.

Reads the list file that meson writes (build/tests/programs/corpus-list.txt)
and the documentation blocks in each program's main source file
(ICPP-PATHS, ICPP-EXPECT, ICPP-TAILCALLS; format in
tests/programs/README.md). Python 3 standard library only.

    import corpus
    for e in corpus.load_list('build/tests/programs/corpus-list.txt'):
        required, optional = corpus.paths_for(e)
        # required: paths every run executes; optional: paths a run may
        # execute. Both are sets of tuples of function names, root first,
        # closed under prefixes (every prefix of a documented path is a
        # path), and disjoint.

A path names only the program's own functions (its sources and its dlopen
plugin), by ELF symbol name (mangled for C++). gcc's hot/cold split parts
(foo.cold) count as foo.
"""

import os
import re
import subprocess
from typing import Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Set, Tuple

Path = Tuple[str, ...]

LIST_ENV = 'ICPP_CORPUS_LIST'


class Entry(NamedTuple):
    """One built corpus binary (one line of corpus-list.txt)."""
    prog: str               # program name, e.g. 'recurse'
    config: str             # configuration, e.g. 'O2-nofp-pie'
    tags: FrozenSet[str]    # e.g. {'O2', 'nofp', 'pie'}
    binary: str             # absolute path of the executable
    source: str             # absolute path of the main source file


class Expect(NamedTuple):
    """ICPP-EXPECT: what a run with no arguments (scale 1) does."""
    exit: int               # exit status
    stdout: List[str]       # stdout lines, in order, without newlines


class PathLine(NamedTuple):
    """One line of an ICPP-PATHS block, before expansion."""
    text: str               # the path expression, e.g. 'main;rec*1..100'
    tags: Tuple[str, ...]   # required tags; '!x' means tag x must be absent
    optional: bool          # line started with '?'
    lineno: int             # 1-based line in the source file


class CorpusError(Exception):
    """A malformed list file or documentation block."""


# ---------------------------------------------------------------- list file

def default_list_path() -> Optional[str]:
    """$ICPP_CORPUS_LIST, else $ICPP_BUILD's tests/programs/corpus-list.txt, else
    the first build*/tests/programs/corpus-list.txt under the repository root,
    else None."""
    env = os.environ.get(LIST_ENV)
    if env:
        return env
    build = os.environ.get('ICPP_BUILD')     # the build the tests run (meson test sets it)
    if build and os.path.isfile(os.path.join(build, 'tests', 'programs', 'corpus-list.txt')):
        return os.path.join(build, 'tests', 'programs', 'corpus-list.txt')
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in sorted(os.listdir(root)):
        cand = os.path.join(root, name, 'tests', 'programs', 'corpus-list.txt')
        if name.startswith('build') and os.path.isfile(cand):
            return cand
    return None


def load_list(path: Optional[str] = None, include_instr: bool = False) -> List[Entry]:
    """Entries of corpus-list.txt (path defaults to default_list_path()).

    The "instr" configuration (-finstrument-functions build used to prove
    the documentation) is left out unless include_instr is true."""
    path = path or default_list_path()
    if path is None:
        raise CorpusError('no corpus list: build the project, or set ' + LIST_ENV)
    entries = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            fields = line.split()
            if len(fields) != 5:
                raise CorpusError('%s:%d: expected 5 fields, got %d'
                                  % (path, lineno, len(fields)))
            prog, config, tags, binary, source = fields
            e = Entry(prog, config, frozenset(tags.split(',')), binary, source)
            if 'instr' in e.tags and not include_instr:
                continue
            entries.append(e)
    return entries


def modules(entry: Entry) -> List[str]:
    """ELF files that hold the program's own functions: the binary, plus
    the plugin plugin.<config>.so beside it for the dlopen program."""
    mods = [entry.binary]
    plugin = os.path.join(os.path.dirname(entry.binary),
                          'plugin.%s.so' % entry.config)
    if entry.prog == 'dlopen' and os.path.exists(plugin):
        mods.append(plugin)
    return mods


# ------------------------------------------------------- documentation blocks

_DECOR = re.compile(r'^\s*(?:/\*+|\*+/?|//)?\s?')


def _comment_lines(text: str) -> List[Tuple[int, str]]:
    """(lineno, line without comment decoration) for every source line."""
    out = []
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if line.endswith('*/'):
            line = line[:-2].rstrip() + ' \x00'   # marks the comment's end
        out.append((i, _DECOR.sub('', line, count=1)))
    return out


def _block(text: str, keyword: str) -> List[Tuple[int, str]]:
    """Lines of the block that starts at the line holding `keyword` and ends
    at the first empty line or the end of the comment."""
    lines = _comment_lines(text)
    for k, (_, line) in enumerate(lines):
        if line.startswith(keyword):
            out = []
            for lineno, body in lines[k + 1:]:
                end = '\x00' in body
                body = body.replace('\x00', '').strip()
                if not body:
                    break
                out.append((lineno, body))
                if end:
                    break
            return out
    return []


def _read(source: str) -> str:
    with open(source) as f:
        return f.read()


_LINE = re.compile(r'^(\?|\[[^\]]*\])\s*')


def parse_path_lines(source: str) -> List[PathLine]:
    """The ICPP-PATHS block of a source file, one PathLine per line.

    Syntax of a line: zero or more '[tag,...]' groups and an optional '?'
    (any order), then a path expression; '#' starts a comment."""
    out = []
    for lineno, body in _block(_read(source), 'ICPP-PATHS'):
        body = body.split('#', 1)[0].strip()
        tags: List[str] = []
        optional = False
        while True:
            m = _LINE.match(body)
            if not m:
                break
            tok = m.group(1)
            if tok == '?':
                optional = True
            else:
                tags += [t.strip() for t in tok[1:-1].split(',') if t.strip()]
            body = body[m.end():]
        if body:
            out.append(PathLine(body, tuple(tags), optional, lineno))
    if not out:
        raise CorpusError('%s: no ICPP-PATHS block' % source)
    return out


_NAME = re.compile(r'[A-Za-z_.$][A-Za-z0-9_.$]*')
_REP = re.compile(r'\*(\d+)(?:\.\.(\d+))?')


def expand(expr: str) -> List[Path]:
    """All paths a path expression stands for (no prefixes added).

    expr := elem (';' elem)*;  elem := NAME [rep] | '(' expr ')' rep;
    rep := '*' N | '*' A '..' B  (N copies; A..B: one path per count)."""
    paths, pos = _parse_seq(expr.replace(' ', ''), 0)
    if pos != len(expr.replace(' ', '')):
        raise CorpusError('bad path expression %r at %d' % (expr, pos))
    return sorted(set(paths))


def _parse_seq(s: str, pos: int) -> Tuple[List[Path], int]:
    result: List[Path] = [()]
    while True:
        alts, pos = _parse_elem(s, pos)
        result = [p + a for p in result for a in alts]
        if pos < len(s) and s[pos] == ';':
            pos += 1
            continue
        return result, pos


def _parse_elem(s: str, pos: int) -> Tuple[List[Path], int]:
    if pos < len(s) and s[pos] == '(':
        inner, pos = _parse_seq(s, pos + 1)
        if pos >= len(s) or s[pos] != ')':
            raise CorpusError('missing ) in %r' % s)
        pos += 1
        if not _REP.match(s, pos):
            raise CorpusError('a group needs *N or *A..B in %r' % s)
    else:
        m = _NAME.match(s, pos)
        if not m:
            raise CorpusError('expected a function name at %d in %r' % (pos, s))
        inner, pos = [(m.group(0),)], m.end()
    m = _REP.match(s, pos)
    if not m:
        return inner, pos
    lo = int(m.group(1))
    hi = int(m.group(2)) if m.group(2) is not None else lo
    if hi < lo:
        raise CorpusError('empty range in %r' % s)
    out: List[Path] = []
    for k in range(lo, hi + 1):
        seqs: List[Path] = [()]
        for _ in range(k):
            seqs = [p + q for p in seqs for q in inner]
        out += seqs
    return out, m.end()


def prefixes(paths: Iterable[Path]) -> Set[Path]:
    """The paths and all their non-empty prefixes."""
    out: Set[Path] = set()
    for p in paths:
        for i in range(1, len(p) + 1):
            out.add(tuple(p[:i]))
    return out


def line_applies(line: PathLine, tags: Iterable[str]) -> bool:
    """Whether a tagged line holds for a configuration with these tags."""
    tags = set(tags)
    for t in line.tags:
        if t.startswith('!'):
            if t[1:] in tags:
                return False
        elif t not in tags:
            return False
    return True


def paths_for(entry_or_source, tags: Optional[Iterable[str]] = None
              ) -> Tuple[Set[Path], Set[Path]]:
    """(required, optional) paths of a binary: an Entry, or a source file
    and the configuration's tags. Prefixes are included; a prefix of an
    optional path that is also required counts as required only."""
    if isinstance(entry_or_source, Entry):
        source = entry_or_source.source
        tags = entry_or_source.tags if tags is None else tags
    else:
        source = entry_or_source
    tags = set(tags or ())
    req: List[Path] = []
    opt: List[Path] = []
    for line in parse_path_lines(source):
        if line_applies(line, tags):
            (opt if line.optional else req).extend(expand(line.text))
    required = prefixes(req)
    return required, prefixes(opt) - required


def functions(entry_or_source, tags: Optional[Iterable[str]] = None) -> Set[str]:
    """Names of the functions on the documented paths (required or optional)."""
    req, opt = paths_for(entry_or_source, tags)
    return {f for p in req | opt for f in p}


def expected(entry_or_source) -> Expect:
    """ICPP-EXPECT of a program: exit status and stdout lines at scale 1.

    Block lines: 'exit N' once, 'stdout TEXT' per output line."""
    source = entry_or_source.source if isinstance(entry_or_source, Entry) \
        else entry_or_source
    status = None
    out = []
    for lineno, body in _block(_read(source), 'ICPP-EXPECT'):
        word, _, rest = body.partition(' ')
        if word == 'exit':
            status = int(rest)
        elif word == 'stdout':
            out.append(rest)
        else:
            raise CorpusError('%s:%d: unknown ICPP-EXPECT line %r'
                              % (source, lineno, body))
    if status is None:
        raise CorpusError('%s: ICPP-EXPECT has no exit line' % source)
    return Expect(status, out)


def tailcalls(entry_or_source) -> Set[Tuple[str, str]]:
    """(caller, callee) pairs from ICPP-TAILCALLS lines: the tail calls the
    -O2 binaries contain ('*' = indirect). Empty if there are none."""
    source = entry_or_source.source if isinstance(entry_or_source, Entry) \
        else entry_or_source
    out = set()
    for _, line in _comment_lines(_read(source)):
        if line.startswith('ICPP-TAILCALLS'):
            for item in line.replace('\x00', '').split()[1:]:
                caller, sep, callee = item.partition('->')
                if not sep:
                    raise CorpusError('%s: bad ICPP-TAILCALLS item %r'
                                      % (source, item))
                out.add((caller, callee))
    return out


def demangle(names: Iterable[str]) -> Dict[str, str]:
    """Map names to their demangled form (c++filt); unchanged if not C++."""
    names = list(names)
    try:
        res = subprocess.run(['c++filt'], input='\n'.join(names) + '\n',
                             capture_output=True, text=True, check=True)
        out = res.stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        out = names
    return dict(zip(names, out))


def format_path(path: Path) -> str:
    """A path as the documentation writes it: 'main;a;b'."""
    return ';'.join(path)
