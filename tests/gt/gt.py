"""gt.py -- read icpp-gt output (format: tests/gt/README.md). Stdlib only.

    import gt
    trace = gt.load("out.txt")            # or gt.parse(lines)
    for s in trace.samples:
        if s.complete:                    # unwound to the root
            s.path                        # ('_start', '__libc_start_main', '?', 'main', 'a', ...)
            s.own_path(trace.exe)         # names of frames in the main executable
            s.project({'main', 'a'})      # names in a set, root -> leaf
            s.leaf.entry_sp, s.base, s.leaf_height

Frames are ordered root -> leaf.  Heights are base - entry SP (bytes).
Run `python3 gt.py OUT` for a summary of a file.
"""

import collections
import sys

FORMAT_VERSION = 1
ROOT_STATUSES = ("root", "ra0")


class FormatError(ValueError):
    pass


class Obj:
    """One ELF module (O line)."""
    __slots__ = ("index", "build_id", "path")

    def __init__(self, index, build_id, path):
        self.index, self.build_id, self.path = index, build_id, path

    def __repr__(self):
        return "Obj(%d, %s)" % (self.index, self.path)


class Frame:
    """One activation: obj (Obj or None), func (link-time start or None),
    name (str or None), pc (runtime; a return address except for the leaf),
    entry_sp (CFA - 8, or None where unknown), cfa_rule ('rsp', 'rbp',
    'expr', 'r<N>' or '-')."""
    __slots__ = ("obj", "func", "pc", "entry_sp", "cfa_rule", "name")

    def __init__(self, obj, func, pc, entry_sp, cfa_rule, name):
        self.obj, self.func, self.pc = obj, func, pc
        self.entry_sp, self.cfa_rule, self.name = entry_sp, cfa_rule, name

    @property
    def module(self):
        """Path of the frame's module, or None."""
        return self.obj.path if self.obj else None

    @property
    def label(self):
        """The name, or '?' if no symbol covers the pc."""
        return self.name if self.name is not None else "?"

    @property
    def fid(self):
        """Function identity: (build-id or path, link-time start).

        The module part is docs/definitions.md's "same module" rule
        (lib/defs.h icpp_build_id_match), written again here on purpose: the
        ground truth shares no code with lib/.  Equal build-ids are one module
        wherever they lie; without a build-id the path is the identity; a hex
        build-id never equals a path."""
        if self.obj is None:
            return (None, self.func)
        return (self.obj.build_id if self.obj.build_id != "-" else self.obj.path,
                self.func)

    def __repr__(self):
        return "Frame(%s %s pc=%x sp=%s)" % (
            self.module, self.label, self.pc,
            "%x" % self.entry_sp if self.entry_sp is not None else "-")


class Sample:
    """One sample (S line).  frames: root -> leaf.  callchain: the kernel's
    frame-pointer chain, leaf first (ip, then return addresses), at most
    max_stack (kernel.perf_event_max_stack) entries."""
    __slots__ = ("pid", "tid", "time", "ip", "sp", "bp", "base", "base_kind",
                 "status", "stack_bytes", "frames", "callchain", "max_stack")

    @property
    def complete(self):
        """True if the unwind reached the outermost frame."""
        return self.status in ROOT_STATUSES

    @property
    def main_thread(self):
        return self.pid == self.tid

    @property
    def leaf(self):
        return self.frames[-1] if self.frames else None

    @property
    def path(self):
        """Function names root -> leaf ('?' where unknown)."""
        return tuple(f.label for f in self.frames)

    @property
    def fid_path(self):
        """Function identities root -> leaf (see Frame.fid)."""
        return tuple(f.fid for f in self.frames)

    def own_frames(self, module):
        """Frames whose module path is MODULE (e.g. trace.exe)."""
        return [f for f in self.frames if f.module == module]

    def own_path(self, module):
        return tuple(f.label for f in self.own_frames(module))

    def project(self, names):
        """Names of the frames whose name is in NAMES, root -> leaf."""
        return tuple(f.name for f in self.frames if f.name in names)

    def height(self, frame):
        """base - entry SP of FRAME, or None."""
        if self.base is None or frame.entry_sp is None:
            return None
        return self.base - frame.entry_sp

    @property
    def heights(self):
        return [self.height(f) for f in self.frames]

    @property
    def leaf_height(self):
        return self.height(self.leaf) if self.frames else None

    def fp_chain_agrees(self, module, names=None):
        """Compare the kernel's FP chain with the unwind, leaf -> root, up to
        and including the first frame outside MODULE (or, if NAMES is given,
        whose name is not in NAMES): the pcs those frames hold come from
        frames that keep a frame pointer.  Returns None if the sample does
        not qualify (incomplete, leaf outside, or leaf not in an rbp-based
        CFA state, e.g. in a prologue), else True/False."""
        def inside(f):
            return f.module == module and (names is None or f.name in names)
        if not self.complete or not self.frames or not inside(self.leaf):
            return None
        if self.leaf.cfa_rule != "rbp":
            return None
        pcs = []
        for f in reversed(self.frames):
            pcs.append(f.pc)
            if not inside(f):
                break
        if len(self.callchain) < len(pcs) and len(self.callchain) == self.max_stack:
            pcs = pcs[:self.max_stack]      # the kernel stopped at max_stack
        return list(self.callchain[:len(pcs)]) == pcs

    def __repr__(self):
        return "Sample(%d/%d %s %s)" % (self.pid, self.tid, self.status,
                                        ";".join(self.path))


class Trace:
    """A whole icpp-gt output file."""

    def __init__(self):
        self.header = {}          # H line: key -> value (str)
        self.cmd = ""             # the command line icpp-gt ran
        self.pid = None           # pid of the launched program
        self.objects = {}         # index -> Obj
        self.maps = []            # (pid, time, start, end, pgoff, prot, path)
        self.bases = []           # (pid, time, startstack or None, kind)
        self.events = []          # (time, kind, pid, arg): fork/thread/exec/exit
        self.samples = []
        self.trailer = None       # T line: key -> int, None if truncated

    @property
    def exe(self):
        """Path of the launched program's executable (first exec mapping of
        the launched pid that is a file and not ld.so), or None."""
        for pid, _t, _s, _e, _o, prot, path in self.maps:
            if pid == self.pid and path.startswith("/") and "/ld-linux" not in path:
                return path
        return None

    @property
    def complete_rate(self):
        return (sum(s.complete for s in self.samples) / len(self.samples)
                if self.samples else 0.0)

    def startstack(self, pid):
        """Last known startstack of PID (None if unknown)."""
        v = None
        for p, _t, ss, _k in self.bases:
            if p == pid:
                v = ss
        return v


def _hex(s):
    return None if s == "-" else int(s, 16)


def _frame(text, objects):
    parts = text.split(":", 5)
    if len(parts) != 6:
        raise FormatError("bad frame %r" % text)
    obj, func, pc, esp, rule, name = parts
    return Frame(None if obj == "-" else objects[int(obj)], _hex(func),
                 int(pc, 16), _hex(esp), rule, None if name == "?" else name)


def parse(lines):
    """Parse icpp-gt output from an iterable of lines; returns a Trace."""
    t = Trace()
    seen_version = False
    max_stack = 127
    for no, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        kind = line[0]
        try:
            if kind == "#":
                if line.startswith("# icpp-gt "):
                    v = int(line.split()[2])
                    if v != FORMAT_VERSION:
                        raise FormatError("format version %d, gt.py reads %d"
                                          % (v, FORMAT_VERSION))
                    seen_version = True
                continue
            if not seen_version:
                raise FormatError("not icpp-gt output (no '# icpp-gt N' line)")
            if kind == "S":
                parts = line.split(" | ")
                h = parts[0].split()
                s = Sample()
                s.max_stack = max_stack
                s.pid, s.tid, s.time = int(h[1]), int(h[2]), int(h[3])
                s.ip, s.sp, s.bp = int(h[4], 16), int(h[5], 16), int(h[6], 16)
                s.base, s.base_kind, s.status = _hex(h[7]), h[8], h[9]
                nframes, s.stack_bytes = int(h[10]), int(h[11])
                if not parts[-1].startswith("K"):
                    raise FormatError("no K section")
                s.callchain = [int(x, 16) for x in parts[-1].split()[1:]]
                s.frames = [_frame(x, t.objects) for x in parts[1:-1]]
                if len(s.frames) != nframes:
                    raise FormatError("%d frames, header says %d"
                                      % (len(s.frames), nframes))
                t.samples.append(s)
            elif kind == "O":
                _, idx, bid, path = line.split(" ", 3)
                t.objects[int(idx)] = Obj(int(idx), bid, path)
            elif kind == "M":
                _, pid, time, start, end, pgoff, prot, path = line.split(" ", 7)
                t.maps.append((int(pid), int(time), int(start, 16), int(end, 16),
                               int(pgoff, 16), prot, path))
            elif kind == "B":
                _, pid, time, ss, bkind = line.split()
                t.bases.append((int(pid), int(time), _hex(ss), bkind))
            elif kind == "P":
                _, time, ev, pid, arg = line.split(" ", 4)
                t.events.append((int(time), ev, int(pid), arg))
            elif kind == "H":
                body, _, cmd = line[2:].partition(" cmd=")
                t.header = dict(kv.split("=", 1) for kv in body.split())
                t.cmd = cmd
                t.pid = int(t.header["pid"])
                max_stack = int(t.header.get("max_stack", max_stack))
            elif kind == "T":
                t.trailer = {k: int(v) for k, v in
                             (kv.split("=", 1) for kv in line[2:].split())}
            else:
                raise FormatError("unknown line type %r" % kind)
        except (IndexError, KeyError, ValueError) as e:
            if isinstance(e, FormatError):
                raise FormatError("line %d: %s" % (no, e)) from None
            raise FormatError("line %d: %s: %r" % (no, e, line[:200])) from None
    if not seen_version:
        raise FormatError("not icpp-gt output (empty)")
    return t


def load(path):
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return parse(f)


def summary(t):
    """A few lines describing trace T (for humans)."""
    out = []
    n = len(t.samples)
    out.append("%d samples, %.1f%% unwound to the root; trailer %s"
               % (n, 100 * t.complete_rate, t.trailer))
    st = collections.Counter(s.status for s in t.samples)
    out.append("status: " + ", ".join("%s=%d" % kv for kv in st.most_common()))
    exe = t.exe
    paths = collections.Counter(s.own_path(exe) for s in t.samples if s.complete)
    for p, c in paths.most_common(10):
        out.append("%6d  %s" % (c, ";".join(p)))
    return "\n".join(out)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(arg)
        print(summary(load(arg)))
