"""samplefile.py -- read an icpp-sample file and write a longer copy of it.

Used by the resolve-throughput figure: a real recording's samples repeated
until the file holds N samples, so icpp-resolve's per-sample cost can be
timed on millions of samples of a real program's mix of contexts.
Format: docs/samples-format.md (reads versions 1 to 3, writes version 3).  Python stdlib only.
"""
import struct
import zlib

MAGIC = b"ICPPSMP\n"
INFO, EVENT, PROC, MMAP, THREAD, SAMPLE, LOST, EXIT, VSAMPLE, END, LSAMPLE = range(1, 12)


class FormatError(Exception):
    pass


def _uv(b, p):
    v = s = 0
    while True:
        if p >= len(b):
            raise FormatError("varint runs past the block")
        c = b[p]
        p += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, p


def _sv(b, p):
    v, p = _uv(b, p)
    return (v >> 1) ^ -(v & 1), p


def _str(b, p):
    n, p = _uv(b, p)
    return b[p:p + n], p + n


def _put_uv(out, v):
    while True:
        c = v & 0x7F
        v >>= 7
        if v:
            out.append(c | 0x80)
        else:
            out.append(c)
            return


def _put_sv(out, v):
    _put_uv(out, (v << 1) ^ (v >> 63) if v < 0 else v << 1)


def records(data):
    """Yield (type, raw record bytes, decoded sample or None) for every record."""
    if data[:8] != MAGIC:
        raise FormatError("not an ICPP sample file")
    ver, = struct.unpack_from("<I", data, 8)
    if ver not in (1, 2, 3):
        raise FormatError("sample file version %d, this script reads 1 to 3" % ver)
    M = 2**64 - 1
    last = {}                               # thread -> its last learn chain [(pc, esp)] (absolute), leaf first
    regs = {}                               # thread -> absolute (ip, sp)
    fdict = []                              # version 3: LSAMPLE caller frames (pc, entry-SP delta)
    pos = 16
    nth = 0
    while pos + 8 <= len(data):
        plen, crc = struct.unpack_from("<II", data, pos)
        blk = data[pos + 8:pos + 8 + plen]
        if len(blk) < plen:
            break                           # truncated tail
        if zlib.crc32(blk) != crc:
            raise FormatError("checksum mismatch in block at %d" % pos)
        pos += 8 + plen
        p = 0
        while p < len(blk):
            start = p
            t = blk[p]
            p += 1
            smp = None
            if t == INFO:
                _, p = _str(blk, p)
                _, p = _str(blk, p)
            elif t == EVENT:
                _, p = _uv(blk, p)
                _, p = _str(blk, p)
                for _ in range(5 if ver == 1 else 7):   # version 2: role, of
                    _, p = _uv(blk, p)
            elif t == PROC:
                for _ in range(3):
                    _, p = _uv(blk, p)
                _, p = _str(blk, p)
                _, p = _uv(blk, p)
            elif t == MMAP:
                for _ in range(5):
                    _, p = _uv(blk, p)
                _, p = _str(blk, p)
                _, p = _str(blk, p)         # build-id: length + bytes
            elif t == THREAD:
                _, p = _uv(blk, p)
                _, p = _uv(blk, p)
                nth += 1
            elif t in (SAMPLE, VSAMPLE, LSAMPLE):
                th, p = _uv(blk, p)
                ev, p = _uv(blk, p)
                dt, p = _sv(blk, p)
                di, p = _sv(blk, p)
                ds, p = _sv(blk, p)
                db, p = _sv(blk, p)
                if t == VSAMPLE:
                    n, p = _uv(blk, p)
                    for _ in range(n):
                        _, p = _sv(blk, p)
                    _, p = _uv(blk, p)
                    n, p = _uv(blk, p)
                    for _ in range(n):
                        _, p = _uv(blk, p)
                    n, p = _uv(blk, p)
                    p += n
                smp = (th, ev, dt, di, ds, db)
                ip, sp = regs.get(th, (0, 0))
                ip, sp = (ip + di) & M, (sp + ds) & M
                regs[th] = (ip, sp)
                if t == LSAMPLE:
                    # frames, absolute, leaf first (docs/samples-format.md)
                    st, p = _uv(blk, p)
                    n, p = _uv(blk, p)
                    k, p = _uv(blk, p)
                    fr = []
                    for i in range(n - k):
                        if i == 0:
                            desp, p = _uv(blk, p)
                            fr.append((ip, (sp + desp) & M))
                            continue
                        if ver >= 3:
                            v, p = _uv(blk, p)
                            if v:
                                pc, desp = fdict[v - 1]
                                fr.append((pc, (fr[-1][1] + desp) & M))
                                continue
                        dpc, p = _sv(blk, p)
                        desp, p = _uv(blk, p)
                        pc = (fr[-1][0] + dpc) & M
                        if ver >= 3 and len(fdict) < (1 << 20):
                            fdict.append((pc, desp))
                        fr.append((pc, (fr[-1][1] + desp) & M))
                    prev = last.get(th, [])
                    fr += prev[len(prev) - k:] if k else []
                    last[th] = fr
                    smp = (th, ev, dt, di, ds, db, st, fr)
            elif t == LOST:
                _, p = _uv(blk, p)
            elif t == EXIT:
                _, p = _uv(blk, p)
                _, p = _uv(blk, p)
            elif t == END:
                _, p = _uv(blk, p)
                _, p = _uv(blk, p)
            else:
                raise FormatError("unknown record type %d" % t)
            yield t, bytes(blk[start:p]), smp


def count_samples(path):
    with open(path, "rb") as f:
        data = f.read()
    return sum(1 for t, _, _ in records(data) if t in (SAMPLE, VSAMPLE, LSAMPLE))


def repeat(src, dst, n_samples, n_bytes=0):
    """Write dst: src's records (stack copies dropped), then its samples again
    and again, with advancing times, until dst holds n_samples samples (or,
    n_bytes > 0, at least n_bytes bytes); EXIT and END at the end.
    Returns (samples written, samples in src)."""
    with open(src, "rb") as f:
        data = f.read()
    head, tail, samples = [], [], []
    lost = 0
    time = 0
    chains = {}             # sample index -> (status, absolute frames [(pc, esp)] leaf first)
    for t, raw, smp in records(data):
        if smp is not None:
            th, ev, dt, di, ds, db = smp[:6]
            time += dt
            samples.append((th, ev, time, di, ds, db))
            if t == LSAMPLE:
                chains[len(samples) - 1] = smp[6:]
            head.append(("S", len(samples) - 1))
        elif t == EXIT:
            tail.append(raw)
        elif t == LOST:
            r = bytearray(raw)
            lost += _uv(r, 1)[0]
        elif t == END:
            pass
        else:
            head.append(("R", raw))
    if not samples:
        raise FormatError("%s has no samples" % src)
    # absolute ip/sp/bp per sample, from the per-thread deltas
    M = 2**64 - 1
    regs, absval, lastabs = {}, [], {}
    for i, (th, ev, tm, di, ds, db) in enumerate(samples):
        ip, sp, bp = regs.get(th, (0, 0, 0))
        ip, sp, bp = (ip + di) & M, (sp + ds) & M, (bp + db) & M
        regs[th] = (ip, sp, bp)
        lrn = chains.get(i)                 # (status, absolute frames)
        absval.append((th, ev, tm, ip, sp, bp, lrn))
    span = absval[-1][2] - absval[0][2] + 1

    out = open(dst, "wb")
    out.write(MAGIC + struct.pack("<II", 3, 0))
    blk = bytearray()
    size = [16]

    def flush():
        if blk:
            out.write(struct.pack("<II", len(blk), zlib.crc32(blk)))
            out.write(blk)
            size[0] += 8 + len(blk)
            blk.clear()

    state = {"time": 0, "regs": {}, "last": {}, "fdict": {}}

    def put_sample(th, ev, tm, ip, sp, bp, lrn):
        r = blk
        r.append(LSAMPLE if lrn else SAMPLE)
        _put_uv(r, th)
        _put_uv(r, ev)
        _put_sv(r, tm - state["time"])
        state["time"] = tm
        lip, lsp, lbp = state["regs"].get(th, (0, 0, 0))

        def d(a, b):
            x = (a - b) & (2**64 - 1)
            return x - 2**64 if x >= 2**63 else x
        _put_sv(r, d(ip, lip))
        _put_sv(r, d(sp, lsp))
        _put_sv(r, d(bp, lbp))
        state["regs"][th] = (ip, sp, bp)
        if lrn:                             # as icpp-sample writes them (version 3)
            st, frames = lrn
            prev = state["last"].get(th, [])
            n, k = len(frames), 0
            while k < n and k < len(prev) and frames[n - 1 - k] == prev[len(prev) - 1 - k]:
                k += 1
            state["last"][th] = frames
            _put_uv(r, st)
            _put_uv(r, n)
            _put_uv(r, k)
            fd = state["fdict"]
            for j in range(n - k):
                pc, esp = frames[j]
                desp = (esp - (sp if j == 0 else frames[j - 1][1])) & M
                if j == 0:
                    _put_uv(r, desp)
                    continue
                ix = fd.get((pc, desp))
                if ix is not None:
                    _put_uv(r, ix + 1)
                    continue
                _put_uv(r, 0)
                _put_sv(r, d(pc, frames[j - 1][0]))
                _put_uv(r, desp)
                if len(fd) < (1 << 20):
                    fd[(pc, desp)] = len(fd)
        if len(blk) >= 60000:
            flush()

    def done():
        return written >= n_samples or (n_bytes and size[0] >= n_bytes)

    written = 0
    for kind, x in head:
        if kind == "R":
            blk.extend(x)
            if len(blk) >= 60000:
                flush()
        else:
            put_sample(*absval[x])
            written += 1
    flush()
    # Every copy after the first one encodes to the same bytes: the time from
    # one copy's last sample to the next copy's first is `span - (last -
    # first)` each time, and each thread's registers end a copy where they
    # ended the one before.  So copy 2 is encoded once (its own blocks) and
    # written again as often as needed; the tail is encoded sample by sample.
    k = 1
    cycle = None
    while not done():
        if cycle is not None and written + len(absval) <= n_samples:
            m = (n_samples - written) // len(absval)
            if n_bytes:
                m = min(m, (n_bytes - size[0] + len(cycle) - 1) // len(cycle))
            m = max(1, min(m, (64 << 20) // len(cycle) + 1))
            out.write(cycle * m)
            size[0] += len(cycle) * m
            written += len(absval) * m
            k += m
            state["time"] = absval[-1][2] + (k - 1) * span
            continue
        start = out.tell() if k == 2 else None
        for th, ev, tm, ip, sp, bp, lrn in absval:
            if done():
                break
            put_sample(th, ev, tm + k * span, ip, sp, bp, lrn)
            written += 1
        else:
            flush()
            if start is not None:
                out.flush()
                with open(dst, "rb") as f:
                    f.seek(start)
                    cycle = f.read()
        k += 1
    for raw in tail:
        blk.extend(raw)
    end = bytearray([END])
    _put_uv(end, written)
    _put_uv(end, lost)
    blk.extend(end)
    flush()
    out.close()
    return written, len(samples)
