/* samples.c -- the ICPP sample file: streaming writer and checked reader (docs/samples-format.md). */
#include "samples.h"

#include "codec.h"
#include "fmap.h"
#include "fsafe.h"
#include "hmap.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char MAGIC[8] = {'I', 'C', 'P', 'P', 'S', 'M', 'P', '\n'};
#define HDR_LEN     16
#define BLOCK_SOFT  (64 * 1024)         /* flush when a block reaches this */
#define BLOCK_MAX   (1024 * 1024)       /* no block may be larger */
#define MAX_STR     4096
#define FDICT_MAX   (1u << 20)          /* LSAMPLE frame dictionary entries (version 3) */

/* The frames of a thread's last learn sample: the next one of the thread
 * usually shares its outer frames (main ... the interpreter loop), which
 * an LSAMPLE record then names by count instead of repeating them. */
typedef struct lchain {
    uint64_t *pc, *esp;
    uint32_t  n, cap;
} lchain;

typedef struct tstate {
    uint64_t ip, sp, bp;
    lchain   last;
} tstate;

static int lchain_set(lchain *c, const uint64_t *pc, const uint64_t *esp, uint32_t n)
{
    if (n > c->cap) {
        uint32_t nc = n < 64 ? 64 : n;
        uint64_t *a = realloc(c->pc, nc * sizeof *a), *b = a ? realloc(c->esp, nc * sizeof *b) : NULL;
        if (a)
            c->pc = a;
        if (!b)
            return -1;
        c->esp = b;
        c->cap = nc;
    }
    if (n) {
        memmove(c->pc, pc, n * sizeof *pc);
        memmove(c->esp, esp, n * sizeof *esp);
    }
    c->n = n;
    return 0;
}

/* Outer frames chain (pc, esp, n) shares with c, counted from the root end. */
static uint32_t lchain_common(const lchain *c, const uint64_t *pc, const uint64_t *esp, uint32_t n)
{
    uint32_t k = 0;
    while (k < n && k < c->n && pc[n - 1 - k] == c->pc[c->n - 1 - k] && esp[n - 1 - k] == c->esp[c->n - 1 - k])
        k++;
    return k;
}

struct icpp_swriter {
    int        fd;
    int        created;         /* we created path as a regular file */
    char      *path;
    icpp_wbuf  blk;
    icpp_hmap  threads;         /* (pid, tid) -> index */
    tstate    *ts;
    size_t     nts, capts;
    tstate    *cur;             /* the thread of the record being written */
    uint64_t   last_time;
    uint64_t   bytes, dropped;  /* bytes: in the file (whole blocks) */
    uint64_t   blk_samples;     /* samples in the unflushed block */
    uint64_t   file_samples;    /* samples in the file */
    icpp_hmap  fdict;           /* LSAMPLE caller frames: (pc, entry-SP delta) -> dictionary index */
    int        finished;        /* END written (or tried) and synced */
    icpp_err   err;             /* first error, latched */
};

static void put_header(uint8_t *h)
{
    memcpy(h, MAGIC, 8);
    for (int i = 0; i < 4; i++) {
        h[8 + i] = (uint8_t)(ICPP_SAMPLES_VERSION >> (8 * i));
        h[12 + i] = 0;
    }
}

icpp_swriter *icpp_swriter_open(const char *path, icpp_err *err)
{
    icpp_swriter *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        icpp_err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    /* Created in place (never a temporary renamed at the end), so that a
     * killed sampler leaves a readable file; mode 0600: --validate samples
     * hold copies of the user stack (docs/file-safety.md). */
    int kind;
    w->fd = icpp_fs_create_stream(path, ICPP_FS_MODE_MEMORY, &kind, err);
    if (w->fd < 0)
        goto fail;
    int regular = kind != ICPP_FS_CHARDEV;
    w->created = regular;
    uint8_t h[HDR_LEN];
    put_header(h);
    int e = icpp_fs_write_all(w->fd, h, sizeof h);
    if (e) {
        icpp_err_set(err, e, "%s: cannot write: %s", path, strerror(e));
        close(w->fd);
        if (regular)
            unlink(path);
        goto fail;
    }
    w->bytes = HDR_LEN;
    icpp_wbuf_bytes(&w->blk, "\0\0\0\0\0\0\0\0", 8);     /* room for len + crc */
    return w;
fail:
    free(w->path);
    free(w);
    return NULL;
}

int icpp_swriter_flush(icpp_swriter *w, icpp_err *err)
{
    if (w->err.code)
        return icpp_swriter_error(w, err);
    if (w->blk.oom) {
        icpp_err_set(&w->err, ENOMEM, "%s: out of memory buffering samples", w->path);
        return icpp_swriter_error(w, err);
    }
    size_t payload = w->blk.len - 8;
    if (payload == 0)
        return 0;
    uint32_t crc = icpp_crc32(0, w->blk.p + 8, payload);
    for (int i = 0; i < 4; i++) {
        w->blk.p[i] = (uint8_t)(payload >> (8 * i));
        w->blk.p[4 + i] = (uint8_t)(crc >> (8 * i));
    }
    int e = icpp_fs_write_all(w->fd, w->blk.p, w->blk.len);
    if (e) {
        /* Cut back to the last whole block so the file stays valid. */
        if (ftruncate(w->fd, (off_t)w->bytes) == 0)
            lseek(w->fd, (off_t)w->bytes, SEEK_SET);
        icpp_err_set(&w->err, e, "%s: write failed after %llu bytes: %s; the file is valid up to there", w->path,
                     (unsigned long long)w->bytes, strerror(e));
        return icpp_swriter_error(w, err);
    }
    w->bytes += w->blk.len;
    w->file_samples += w->blk_samples;
    w->blk_samples = 0;
    w->blk.len = 8;
    return 0;
}

/* Begin a record: flush first if the block is full.  Returns 0 to go on. */
static int rec_begin(icpp_swriter *w, int type, size_t expect)
{
    if (w->err.code) {
        w->dropped++;
        return -1;
    }
    if (w->blk.len - 8 + expect > BLOCK_SOFT && w->blk.len > 8)
        icpp_swriter_flush(w, NULL);
    uint8_t t = (uint8_t)type;
    icpp_wbuf_bytes(&w->blk, &t, 1);
    return 0;
}

void icpp_swriter_info(icpp_swriter *w, const char *key, const char *val)
{
    if (rec_begin(w, ICPP_SREC_INFO, strlen(key) + strlen(val) + 8) < 0)
        return;
    icpp_wbuf_str(&w->blk, key);
    icpp_wbuf_str(&w->blk, val);
}

void icpp_swriter_event(icpp_swriter *w, uint32_t id, const char *name, uint32_t type, uint64_t config,
                        uint64_t period, int freq, int precise, uint32_t role, uint32_t of)
{
    if (rec_begin(w, ICPP_SREC_EVENT, strlen(name) + 40) < 0)
        return;
    icpp_wbuf_uv(&w->blk, id);
    icpp_wbuf_str(&w->blk, name);
    icpp_wbuf_uv(&w->blk, type);
    icpp_wbuf_uv(&w->blk, config);
    icpp_wbuf_uv(&w->blk, period);
    icpp_wbuf_uv(&w->blk, (uint64_t)!!freq);
    icpp_wbuf_uv(&w->blk, (uint64_t)precise);
    icpp_wbuf_uv(&w->blk, role);
    icpp_wbuf_uv(&w->blk, of);
}

void icpp_swriter_proc(icpp_swriter *w, uint32_t pid, uint32_t ppid, uint64_t startstack, const char *path,
                       uint32_t flags)
{
    if (rec_begin(w, ICPP_SREC_PROC, (path ? strlen(path) : 0) + 32) < 0)
        return;
    icpp_wbuf_uv(&w->blk, pid);
    icpp_wbuf_uv(&w->blk, ppid);
    icpp_wbuf_uv(&w->blk, startstack);
    icpp_wbuf_str(&w->blk, path ? path : "");
    icpp_wbuf_uv(&w->blk, flags);
}

void icpp_swriter_mmap(icpp_swriter *w, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                       const char *path, const icpp_build_id *bid)
{
    if (rec_begin(w, ICPP_SREC_MMAP, (path ? strlen(path) : 0) + 120) < 0)
        return;
    icpp_wbuf_uv(&w->blk, pid);
    icpp_wbuf_uv(&w->blk, start);
    icpp_wbuf_uv(&w->blk, len);
    icpp_wbuf_uv(&w->blk, pgoff);
    icpp_wbuf_uv(&w->blk, prot);
    icpp_wbuf_str(&w->blk, path ? path : "");
    uint8_t bl = bid ? bid->len : 0;
    icpp_wbuf_uv(&w->blk, bl);
    if (bl)
        icpp_wbuf_bytes(&w->blk, bid->bytes, bl);
}

#define THREAD_EXITED UINT64_MAX     /* w->threads: an EXIT record was written */

/* The writer's index of thread (pid, tid), announced by a THREAD record
 * the first time; -1 after an error. */
static ssize_t thread_index(icpp_swriter *w, uint32_t pid, uint32_t tid)
{
    uint64_t *ix = icpp_hmap_get(&w->threads, pid, tid);
    if (ix && *ix != THREAD_EXITED)
        return (ssize_t)*ix;
    if (icpp_vec_reserve((void **)&w->ts, &w->capts, w->nts + 1, sizeof *w->ts, 64) < 0) {
        icpp_err_set(&w->err, ENOMEM, "out of memory");
        return -1;
    }
    if (icpp_hmap_put(&w->threads, pid, tid, w->nts) < 0) {
        icpp_err_set(&w->err, ENOMEM, "out of memory");
        return -1;
    }
    w->ts[w->nts] = (tstate){0, 0, 0, {NULL, NULL, 0, 0}};
    rec_begin(w, ICPP_SREC_THREAD, 16);
    icpp_wbuf_uv(&w->blk, pid);
    icpp_wbuf_uv(&w->blk, tid);
    return (ssize_t)w->nts++;
}

/* Begin a SAMPLE, VSAMPLE or LSAMPLE record with the fields they share. */
static int sample_head(icpp_swriter *w, int type, size_t extra, uint32_t pid, uint32_t tid, uint32_t event,
                       uint64_t time, uint64_t ip, uint64_t sp, uint64_t bp)
{
    if (w->err.code) {
        w->dropped++;
        return -1;
    }
    ssize_t t = thread_index(w, pid, tid);
    if (t < 0 || rec_begin(w, type, 48 + extra) < 0)
        return -1;
    w->blk_samples++;
    tstate *s = &w->ts[t];
    w->cur = s;
    icpp_wbuf_uv(&w->blk, (uint64_t)t);
    icpp_wbuf_uv(&w->blk, event);
    icpp_wbuf_sv(&w->blk, (int64_t)(time - w->last_time));
    icpp_wbuf_sv(&w->blk, (int64_t)(ip - s->ip));
    icpp_wbuf_sv(&w->blk, (int64_t)(sp - s->sp));
    icpp_wbuf_sv(&w->blk, (int64_t)(bp - s->bp));
    w->last_time = time;
    s->ip = ip;
    s->sp = sp;
    s->bp = bp;
    return 0;
}

void icpp_swriter_sample(icpp_swriter *w, uint32_t pid, uint32_t tid, uint32_t event, uint64_t time, uint64_t ip,
                         uint64_t sp, uint64_t bp, const icpp_sample_extra *x)
{
    size_t extra = x ? 24 + (size_t)x->nchain * 10 + (size_t)x->nregs * 10 + x->stack_size : 0;
    if (sample_head(w, x ? ICPP_SREC_VSAMPLE : ICPP_SREC_SAMPLE, extra, pid, tid, event, time, ip, sp, bp) < 0)
        return;
    if (!x)
        return;
    icpp_wbuf_uv(&w->blk, x->nchain);
    uint64_t prev = 0;
    for (uint32_t i = 0; i < x->nchain; i++) {
        icpp_wbuf_sv(&w->blk, (int64_t)(x->chain[i] - prev));
        prev = x->chain[i];
    }
    icpp_wbuf_uv(&w->blk, x->regs_mask);
    icpp_wbuf_uv(&w->blk, x->nregs);
    for (uint32_t i = 0; i < x->nregs; i++)
        icpp_wbuf_uv(&w->blk, x->regs[i]);
    icpp_wbuf_uv(&w->blk, x->stack_size);
    icpp_wbuf_bytes(&w->blk, x->stack, x->stack_size);
}

void icpp_swriter_learn(icpp_swriter *w, uint32_t pid, uint32_t tid, uint32_t event, uint64_t time, uint64_t ip,
                        uint64_t sp, uint64_t bp, const icpp_learn_chain *l)
{
    if (l->n > ICPP_LEARN_MAX_FRAMES || (l->n && l->pc[0] != ip) ||
        sample_head(w, ICPP_SREC_LSAMPLE, 24 + (size_t)l->n * 20, pid, tid, event, time, ip, sp, bp) < 0)
        return;
    lchain *last = &w->cur->last;
    uint32_t k = lchain_common(last, l->pc, l->entry_sp, l->n);
    icpp_wbuf_uv(&w->blk, l->status);
    icpp_wbuf_uv(&w->blk, l->n);
    icpp_wbuf_uv(&w->blk, k);
    /* The inner n - k frames: frame 0's pc is ip; callers are deltas from
     * the frame below (return addresses signed, entry SPs grow upwards).
     * The outer k frames are those of the thread's previous learn sample. */
    for (uint32_t i = 0; i < l->n - k; i++) {
        uint64_t d = l->entry_sp[i] - (i ? l->entry_sp[i - 1] : sp);
        if (!i) {
            icpp_wbuf_uv(&w->blk, d);
            continue;
        }
        /* A caller frame (return address, frame size) recurs: the frames of
         * a recursion, the same call chain in other samples.  Seen before,
         * it is its dictionary index + 1; else 0 and the frame itself. */
        uint64_t *ix = icpp_hmap_get(&w->fdict, l->pc[i], d);
        if (ix) {
            icpp_wbuf_uv(&w->blk, *ix + 1);
            continue;
        }
        icpp_wbuf_uv(&w->blk, 0);
        icpp_wbuf_sv(&w->blk, (int64_t)(l->pc[i] - l->pc[i - 1]));
        icpp_wbuf_uv(&w->blk, d);
        if (w->fdict.n < FDICT_MAX && icpp_hmap_put(&w->fdict, l->pc[i], d, w->fdict.n) < 0)
            icpp_err_set(&w->err, ENOMEM, "out of memory");
    }
    if (lchain_set(last, l->pc, l->entry_sp, l->n) < 0)
        icpp_err_set(&w->err, ENOMEM, "out of memory");
}

void icpp_swriter_lost(icpp_swriter *w, uint64_t count)
{
    if (rec_begin(w, ICPP_SREC_LOST, 12) < 0)
        return;
    icpp_wbuf_uv(&w->blk, count);
}

void icpp_swriter_exit(icpp_swriter *w, uint32_t pid, uint32_t tid)
{
    if (rec_begin(w, ICPP_SREC_EXIT, 12) < 0)
        return;
    /* a reader leaves out samples of a thread index after its EXIT: a
     * later sample of this (pid, tid) -- the tid used again, or a sample
     * that arrived late -- is announced as a new thread */
    uint64_t *ix = icpp_hmap_get(&w->threads, pid, tid);
    if (ix)
        *ix = THREAD_EXITED;
    icpp_wbuf_uv(&w->blk, pid);
    icpp_wbuf_uv(&w->blk, tid);
}

void icpp_swriter_discard(icpp_swriter *w)
{
    char *path = strdup(w->path);
    int created = w->created;
    icpp_swriter_close(w, 0, 0, NULL);
    if (created && path)
        unlink(path);
    free(path);
}

int icpp_swriter_error(const icpp_swriter *w, icpp_err *err)
{
    if (!w->err.code)
        return 0;
    if (err)
        *err = w->err;
    return -w->err.code;
}

uint64_t icpp_swriter_samples(const icpp_swriter *w)
{
    return w->file_samples + w->blk_samples;
}

uint64_t icpp_swriter_bytes(const icpp_swriter *w)
{
    return w->bytes + (w->blk.len > 8 ? w->blk.len : 0);
}

void icpp_swriter_written(const icpp_swriter *w, uint64_t *bytes, uint64_t *samples)
{
    *bytes = w->bytes;
    *samples = w->file_samples;
}

int icpp_swriter_finish(icpp_swriter *w, uint64_t samples, uint64_t lost, icpp_err *err)
{
    if (!w->finished) {
        w->finished = 1;
        if (rec_begin(w, ICPP_SREC_END, 24) == 0) {
            icpp_wbuf_uv(&w->blk, samples);
            icpp_wbuf_uv(&w->blk, lost);
        }
        icpp_swriter_flush(w, NULL);
        if (!w->err.code && fsync(w->fd) < 0 && errno != EINVAL)
            icpp_err_set(&w->err, errno, "%s: fsync: %s", w->path, strerror(errno));
    }
    return icpp_swriter_error(w, err);
}

int icpp_swriter_close(icpp_swriter *w, uint64_t samples, uint64_t lost, icpp_err *err)
{
    icpp_swriter_finish(w, samples, lost, NULL);
    if (close(w->fd) < 0 && !w->err.code)
        icpp_err_set(&w->err, errno, "%s: close: %s", w->path, strerror(errno));
    int r = icpp_swriter_error(w, err);
    icpp_wbuf_free(&w->blk);
    icpp_hmap_free(&w->threads);
    icpp_hmap_free(&w->fdict);
    for (size_t i = 0; i < w->nts; i++) {
        free(w->ts[i].last.pc);
        free(w->ts[i].last.esp);
    }
    free(w->ts);
    free(w->path);
    free(w);
    return r;
}

/* ---- reader ---- */

typedef struct rthread {
    uint32_t pid, tid;
    uint64_t ip, sp, bp;
    lchain   last;          /* frames of its last learn sample */
    int      exited;        /* an EXIT record named it: later samples of this index are left out */
} rthread;

struct icpp_sreader {
    icpp_fmap      map;         /* the file, mapped (or the caller's buffer) */
    const uint8_t *buf;
    size_t         len, pos;    /* pos: next block */
    icpp_rbuf      blk;         /* current block's payload */
    int            in_block;
    rthread       *th;
    size_t         nth, capth;
    uint64_t       time;
    size_t         truncated;
    int            clean_end;
    char          *s1, *s2;     /* strings of the current record */
    uint64_t      *u64;         /* chain/regs of the current record */
    size_t         capu64;
    uint32_t       version;     /* of the file */
    uint64_t      *fd_pc, *fd_d; /* LSAMPLE frame dictionary (version 3) */
    size_t         nfd, capfd;
    int            skim;        /* icpp_sreader_skip_frames: LSAMPLE frames parsed, not kept */
    icpp_hmap      tix;         /* (pid, tid) -> 1 + its latest thread index */
    uint64_t       nsamples;    /* sample records read before the END record */
    uint64_t       end_samples; /* what the END record says */
    uint64_t       after_end, after_exit;   /* sample records left out */
};

/* A version 3 LSAMPLE caller frame: uv index + 1 into the dictionary, or
 * 0 and the frame (sv pc delta from the frame below, uv entry-SP delta),
 * which joins the dictionary while it has room -- as the writer does.  A
 * bad index marks q bad; negative only when out of memory. */
static int fdict_frame(icpp_sreader *r, icpp_rbuf *q, uint64_t below, uint64_t *pc, uint64_t *d)
{
    uint64_t v = icpp_rbuf_uv(q);
    if (v) {
        if (v > r->nfd) {
            q->bad = 1;
            *pc = *d = 0;
            return 0;
        }
        *pc = r->fd_pc[v - 1];
        *d = r->fd_d[v - 1];
        return 0;
    }
    *pc = below + (uint64_t)icpp_rbuf_sv(q);
    *d = icpp_rbuf_uv(q);
    if (q->bad || r->nfd >= FDICT_MAX)
        return 0;
    /* two arrays of one capacity: it grows once both have */
    size_t cpc = r->capfd, cd = r->capfd;
    if (icpp_vec_reserve((void **)&r->fd_pc, &cpc, r->nfd + 1, sizeof *r->fd_pc, 256) < 0 ||
        icpp_vec_reserve((void **)&r->fd_d, &cd, r->nfd + 1, sizeof *r->fd_d, 256) < 0)
        return -1;
    r->capfd = cpc;
    r->fd_pc[r->nfd] = *pc;
    r->fd_d[r->nfd++] = *d;
    return 0;
}

int icpp_samples_is(const uint8_t *buf, size_t len)
{
    return len >= 8 && !memcmp(buf, MAGIC, 8);
}

icpp_sreader *icpp_sreader_mem(const uint8_t *buf, size_t len, icpp_err *err)
{
    if (!icpp_samples_is(buf, len)) {
        icpp_err_set(err, ICPP_EFORMAT, "not an ICPP sample file (bad magic)");
        return NULL;
    }
    if (len < HDR_LEN) {
        icpp_err_set(err, ICPP_EFORMAT, "truncated header");
        return NULL;
    }
    uint32_t v = (uint32_t)buf[8] | (uint32_t)buf[9] << 8 | (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
    if (v < 1 || v > ICPP_SAMPLES_VERSION) {
        icpp_err_set(err, ICPP_EVERSION, "sample file version %u; this build reads versions 1 to %d", v,
                     ICPP_SAMPLES_VERSION);
        return NULL;
    }
    icpp_sreader *r = calloc(1, sizeof *r);
    if (!r) {
        icpp_err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    r->version = v;
    icpp_hmap_init(&r->tix);
    icpp_fmap_mem(&r->map, buf, len);
    r->buf = buf;
    r->len = len;
    r->pos = HDR_LEN;
    return r;
}

/* The file is mapped, not read: a recording may be larger than memory.  The
 * blocks are read in order and the pages behind the current block are
 * released (lib/fmap.h), so memory holds a window of a few MiB. */
icpp_sreader *icpp_sreader_open(const char *path, icpp_err *err)
{
    icpp_fmap m;
    if (icpp_fmap_open(&m, path, err) < 0)
        return NULL;
    icpp_sreader *r = icpp_sreader_mem(m.p, m.len, err);
    if (!r) {
        icpp_fmap_close(&m);
        icpp_err_prefix(err, "%s", path);
        return NULL;
    }
    r->map = m;
    return r;
}

void icpp_sreader_close(icpp_sreader *r)
{
    if (!r)
        return;
    icpp_fmap_close(&r->map);
    for (size_t i = 0; i < r->nth; i++) {
        free(r->th[i].last.pc);
        free(r->th[i].last.esp);
    }
    free(r->th);
    icpp_hmap_free(&r->tix);
    free(r->fd_pc);
    free(r->fd_d);
    free(r->s1);
    free(r->s2);
    free(r->u64);
    free(r);
}

size_t icpp_sreader_truncated(const icpp_sreader *r) { return r->truncated; }
int icpp_sreader_clean_end(const icpp_sreader *r) { return r->clean_end; }
void icpp_sreader_position(const icpp_sreader *r, size_t *done, size_t *len)
{
    *done = r->pos;
    *len = r->len;
}

static int need_u64(icpp_sreader *r, uint64_t n)
{
    if (n > r->capu64) {
        uint64_t *nv = realloc(r->u64, (size_t)n * sizeof *nv);
        if (!nv)
            return -1;
        r->u64 = nv;
        r->capu64 = (size_t)n;
    }
    return 0;
}

#define BAD(...)                                                              \
    return icpp_err_set(err, ICPP_EFORMAT, "corrupt record at block offset %zu: " __VA_ARGS__)

void icpp_sreader_skip_frames(icpp_sreader *r, int skip)
{
    if (r->pos == HDR_LEN && !r->in_block)     /* no record read yet */
        r->skim = !!skip;
}

/* The n inner frames of a version 1-3 LSAMPLE in skim mode: read as far as
 * the file order needs, which is the number of dictionary entries only (skim
 * mode never reads the dictionary), and checked as the full read checks them
 * except against the frames shared with the thread's previous learn sample,
 * which skim mode does not keep.  (An entry's entry-SP delta was checked when
 * it was given in full.) */
static void skim_frames(icpp_sreader *r, icpp_rbuf *q, uint64_t n)
{
    for (uint64_t i = 0; i < n && !q->bad; i++) {
        if (i && r->version >= 3) {
            uint64_t v = icpp_rbuf_uv(q);
            if (v) {
                if (v > r->nfd)
                    q->bad = 1;
                continue;
            }
            if (r->nfd < FDICT_MAX)
                r->nfd++;
        }
        if (i)
            (void)icpp_rbuf_sv(q);
        if (icpp_rbuf_uv(q) == 0 && i)
            q->bad = 1;     /* callers' frames lie strictly above */
    }
}

/* The next block's payload into r->blk, checked against its checksum: 1,
 * or 0 at the end of the file (an incomplete last block -- writer killed
 * -- is counted in r->truncated), or an error for a corrupt block. */
static int next_block(icpp_sreader *r, icpp_err *err)
{
    size_t left = r->len - r->pos;
    if (left == 0)
        return 0;
    if (left < 8) {
        r->truncated = left;
        r->pos = r->len;
        return 0;
    }
    icpp_fmap_release(&r->map, r->pos);     /* the previous blocks are done */
    const uint8_t *b = r->buf + r->pos;
    uint32_t plen = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    uint32_t crc = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    if (plen == 0 || plen > BLOCK_MAX)
        return icpp_err_set(err, ICPP_EFORMAT, "corrupt block header at offset %zu (length %u)", r->pos, plen);
    if ((size_t)plen > left - 8) {
        r->truncated = left;        /* writer killed mid-block */
        r->pos = r->len;
        return 0;
    }
    if (icpp_crc32(0, b + 8, plen) != crc)
        return icpp_err_set(err, ICPP_EFORMAT, "checksum mismatch in block at offset %zu: the file is corrupt",
                            r->pos);
    icpp_rbuf_init(&r->blk, b + 8, plen);
    r->in_block = 1;
    r->pos += 8 + (size_t)plen;
    return 1;
}

/* The record readers below read one record's fields from q into rec
 * (strings into r->s1, r->s2) and mark q bad for a field cut short or out
 * of range; icpp_sreader_next reports that.  Those that return an int
 * return 0, or an error for what cannot be read past. */

static void read_event(icpp_sreader *r, icpp_rbuf *q, icpp_srec *rec)
{
    uint64_t id = icpp_rbuf_uv(q);
    r->s1 = icpp_rbuf_str(q, MAX_STR);
    uint64_t ty = icpp_rbuf_uv(q), cfg = icpp_rbuf_uv(q), per = icpp_rbuf_uv(q);
    uint64_t fr = icpp_rbuf_uv(q), pr = icpp_rbuf_uv(q);
    uint64_t role = r->version >= 2 ? icpp_rbuf_uv(q) : 0, of = r->version >= 2 ? icpp_rbuf_uv(q) : 0;
    if (id > UINT32_MAX || ty > UINT32_MAX || fr > 1 || pr > 3 || role > ICPP_EVENT_LEARN || of > UINT32_MAX)
        q->bad = 1;
    rec->u.event.role = (uint32_t)role;
    rec->u.event.of = (uint32_t)of;
    rec->u.event.id = (uint32_t)id;
    rec->u.event.name = r->s1;
    rec->u.event.type = (uint32_t)ty;
    rec->u.event.config = cfg;
    rec->u.event.period = per;
    rec->u.event.freq = (uint8_t)fr;
    rec->u.event.precise = (uint8_t)pr;
}

static void read_proc(icpp_sreader *r, icpp_rbuf *q, icpp_srec *rec)
{
    uint64_t pid = icpp_rbuf_uv(q), ppid = icpp_rbuf_uv(q), ss = icpp_rbuf_uv(q);
    r->s1 = icpp_rbuf_str(q, MAX_STR);
    uint64_t fl = icpp_rbuf_uv(q);
    if (pid > UINT32_MAX || ppid > UINT32_MAX || fl > UINT32_MAX)
        q->bad = 1;
    rec->u.proc.pid = (uint32_t)pid;
    rec->u.proc.ppid = (uint32_t)ppid;
    rec->u.proc.startstack = ss;
    rec->u.proc.path = r->s1;
    rec->u.proc.flags = (uint32_t)fl;
}

static void read_mmap(icpp_sreader *r, icpp_rbuf *q, icpp_srec *rec)
{
    uint64_t pid = icpp_rbuf_uv(q);
    rec->u.mmap.start = icpp_rbuf_uv(q);
    rec->u.mmap.len = icpp_rbuf_uv(q);
    rec->u.mmap.pgoff = icpp_rbuf_uv(q);
    uint64_t prot = icpp_rbuf_uv(q);
    r->s1 = icpp_rbuf_str(q, MAX_STR);
    uint64_t bl = icpp_rbuf_uv(q);
    const uint8_t *bb = (!q->bad && bl <= ICPP_BUILD_ID_MAX) ? icpp_rbuf_bytes(q, (size_t)bl) : NULL;
    if (pid > UINT32_MAX || prot > 7 || bl > ICPP_BUILD_ID_MAX || (bl && !bb))
        q->bad = 1;
    rec->u.mmap.pid = (uint32_t)pid;
    rec->u.mmap.prot = (uint32_t)prot;
    rec->u.mmap.path = r->s1;
    rec->u.mmap.build_id.len = (uint8_t)(q->bad ? 0 : bl);
    if (!q->bad && bl)
        memcpy(rec->u.mmap.build_id.bytes, bb, (size_t)bl);
}

/* A THREAD record: the next thread index names (pid, tid). */
static int read_thread(icpp_sreader *r, icpp_rbuf *q, icpp_err *err)
{
    uint64_t pid = icpp_rbuf_uv(q), tid = icpp_rbuf_uv(q);
    if (q->bad || pid > UINT32_MAX || tid > UINT32_MAX)
        BAD("bad thread", icpp_rbuf_pos(q));
    if (icpp_vec_reserve((void **)&r->th, &r->capth, r->nth + 1, sizeof *r->th, 64) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    if (icpp_hmap_put(&r->tix, pid, tid, r->nth + 1) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    r->th[r->nth++] = (rthread){(uint32_t)pid, (uint32_t)tid, 0, 0, 0, {NULL, NULL, 0, 0}, 0};
    return 0;
}

/* An LSAMPLE's frames (after its sample fields, th's values updated) into
 * l, in r->u64: its inner frames as given, its k outer ones the thread's
 * previous learn sample's; th->last becomes these frames.  In skim mode
 * only read and checked (l->n = 0). */
static int read_learn(icpp_sreader *r, icpp_rbuf *q, rthread *th, icpp_learn_chain *l, icpp_err *err)
{
    uint64_t st = icpp_rbuf_uv(q), n = icpp_rbuf_uv(q), k = icpp_rbuf_uv(q);
    /* each inner frame takes at least 2 bytes (1 for frame 0); the
     * k outer ones are the thread's previous learn sample's */
    if (q->bad || st > 255 || n > ICPP_LEARN_MAX_FRAMES || k > n || k > th->last.n || n - k > icpp_rbuf_left(q) ||
        need_u64(r, 2 * n + 2) < 0)
        BAD("bad learn sample", icpp_rbuf_pos(q));
    if (r->skim) {
        skim_frames(r, q, n - k);
        th->last.n = q->bad ? th->last.n : (uint32_t)n;   /* only its length is kept */
        l->status = (uint8_t)st;
        l->n = 0;
        l->pc = l->entry_sp = NULL;
        return 0;
    }
    uint64_t *pc = r->u64, *esp = r->u64 + n;
    for (uint64_t i = 0; i < n - k && !q->bad; i++) {
        uint64_t d;
        if (!i || r->version < 3) {
            pc[i] = i ? pc[i - 1] + (uint64_t)icpp_rbuf_sv(q) : th->ip;
            d = icpp_rbuf_uv(q);
        } else if (fdict_frame(r, q, pc[i - 1], &pc[i], &d) < 0) {
            return icpp_err_set(err, ENOMEM, "out of memory");
        }
        if (i && (d == 0 || esp[i - 1] + d < esp[i - 1]))
            q->bad = 1;     /* callers' frames lie strictly above */
        esp[i] = (i ? esp[i - 1] : th->sp) + d;
    }
    for (uint64_t j = 0; j < k; j++) {
        pc[n - 1 - j] = th->last.pc[th->last.n - 1 - j];
        esp[n - 1 - j] = th->last.esp[th->last.n - 1 - j];
    }
    if (k && k < n && esp[n - k] <= esp[n - k - 1])
        q->bad = 1;
    if (!q->bad && n && pc[0] != th->ip)
        q->bad = 1;         /* frame 0 is the sample itself */
    if (!q->bad && lchain_set(&th->last, pc, esp, (uint32_t)n) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    l->status = (uint8_t)st;
    l->n = (uint32_t)n;
    l->pc = pc;
    l->entry_sp = esp;
    return 0;
}

/* A VSAMPLE's --validate extras (after its sample fields) into x: the
 * callchain and the registers in r->u64, the stack copy in the block. */
static int read_extra(icpp_sreader *r, icpp_rbuf *q, icpp_sample_extra *x, icpp_err *err)
{
    uint64_t nc = icpp_rbuf_uv(q);
    if (q->bad || nc > 4096 || nc > icpp_rbuf_left(q) || need_u64(r, nc + 64) < 0)
        BAD("bad callchain", icpp_rbuf_pos(q));
    uint64_t a = 0;
    for (uint64_t i = 0; i < nc; i++) {
        a += (uint64_t)icpp_rbuf_sv(q);
        r->u64[i] = a;
    }
    x->regs_mask = icpp_rbuf_uv(q);
    uint64_t nr = icpp_rbuf_uv(q);
    if (q->bad || nr > 64 || nr != (uint64_t)__builtin_popcountll(x->regs_mask))
        BAD("bad register set", icpp_rbuf_pos(q));
    for (uint64_t i = 0; i < nr; i++)
        r->u64[nc + i] = icpp_rbuf_uv(q);
    uint64_t sz = icpp_rbuf_uv(q);
    const uint8_t *bytes = (!q->bad && sz <= BLOCK_MAX) ? icpp_rbuf_bytes(q, (size_t)sz) : NULL;
    if (!bytes && sz)
        BAD("bad stack copy", icpp_rbuf_pos(q));
    x->nchain = (uint32_t)nc;
    x->chain = r->u64;
    x->nregs = (uint32_t)nr;
    x->regs = r->u64 + nc;
    x->stack_size = (uint32_t)sz;
    x->stack = bytes;
    return 0;
}

/* A SAMPLE, VSAMPLE or LSAMPLE record (type): its thread's values moved by
 * the deltas, *thread its index. */
static int read_sample(icpp_sreader *r, icpp_rbuf *q, int type, icpp_srec *rec, size_t *thread, icpp_err *err)
{
    uint64_t t = icpp_rbuf_uv(q), ev = icpp_rbuf_uv(q);
    int64_t dt = icpp_rbuf_sv(q), di = icpp_rbuf_sv(q), ds = icpp_rbuf_sv(q), db = icpp_rbuf_sv(q);
    if (q->bad || t >= r->nth || ev > UINT32_MAX)
        BAD("sample of unknown thread %llu", icpp_rbuf_pos(q), (unsigned long long)t);
    rthread *th = &r->th[t];
    *thread = (size_t)t;
    r->time += (uint64_t)dt;
    th->ip += (uint64_t)di;
    th->sp += (uint64_t)ds;
    th->bp += (uint64_t)db;
    rec->type = type == ICPP_SREC_LSAMPLE ? ICPP_SREC_LSAMPLE : ICPP_SREC_SAMPLE;
    rec->u.sample.pid = th->pid;
    rec->u.sample.tid = th->tid;
    rec->u.sample.event = (uint32_t)ev;
    rec->u.sample.time = r->time;
    rec->u.sample.ip = th->ip;
    rec->u.sample.sp = th->sp;
    rec->u.sample.bp = th->bp;
    if (type == ICPP_SREC_SAMPLE)
        return 0;
    if (type == ICPP_SREC_LSAMPLE)
        return read_learn(r, q, th, &rec->u.sample.l, err);
    return read_extra(r, q, &rec->u.sample.x, err);
}

static void read_exit(icpp_sreader *r, icpp_rbuf *q, icpp_srec *rec)
{
    uint64_t pid = icpp_rbuf_uv(q), tid = icpp_rbuf_uv(q);
    if (pid > UINT32_MAX || tid > UINT32_MAX)
        q->bad = 1;
    rec->u.exit.pid = (uint32_t)pid;
    rec->u.exit.tid = (uint32_t)tid;
    /* the thread is gone: a tid used again is a new thread, announced
     * by a new THREAD record (docs/samples-format.md, "Meaning") */
    uint64_t *ix = q->bad ? NULL : icpp_hmap_get(&r->tix, pid, tid);
    if (ix && *ix)
        r->th[*ix - 1].exited = 1;
}

/* The next record of the current block into rec: 1, or 0 for a record
 * consumed here (THREAD), or an error.  A sample's *thread is its thread
 * index. */
static int read_record(icpp_sreader *r, icpp_srec *rec, size_t *thread, icpp_err *err)
{
    icpp_rbuf *q = &r->blk;
    const uint8_t *tp = icpp_rbuf_bytes(q, 1);
    int type = tp ? *tp : 0, rc = 0;
    /* a sample's record is set field by field: zeroing the whole union
     * (the mmap record's build-id makes it 136 bytes) cost 11% of this
     * function */
    if (type == ICPP_SREC_SAMPLE || type == ICPP_SREC_VSAMPLE || type == ICPP_SREC_LSAMPLE) {
        rec->u.sample.x = (icpp_sample_extra){0};
        rec->u.sample.l = (icpp_learn_chain){0};
    } else {
        memset(rec, 0, sizeof *rec);
    }
    rec->type = type;
    free(r->s1);
    free(r->s2);
    r->s1 = r->s2 = NULL;
    switch (type) {
    case ICPP_SREC_INFO:
        r->s1 = icpp_rbuf_str(q, MAX_STR);
        r->s2 = icpp_rbuf_str(q, MAX_STR);
        rec->u.info.key = r->s1;
        rec->u.info.val = r->s2;
        break;
    case ICPP_SREC_EVENT:
        read_event(r, q, rec);
        break;
    case ICPP_SREC_PROC:
        read_proc(r, q, rec);
        break;
    case ICPP_SREC_MMAP:
        read_mmap(r, q, rec);
        break;
    case ICPP_SREC_THREAD:
        rc = read_thread(r, q, err);
        return rc < 0 ? rc : 0;     /* internal */
    case ICPP_SREC_SAMPLE:
    case ICPP_SREC_VSAMPLE:
    case ICPP_SREC_LSAMPLE:
        if ((rc = read_sample(r, q, type, rec, thread, err)) < 0)
            return rc;
        break;
    case ICPP_SREC_LOST:
        rec->u.lost.count = icpp_rbuf_uv(q);
        break;
    case ICPP_SREC_EXIT:
        read_exit(r, q, rec);
        break;
    case ICPP_SREC_END:
        rec->u.end.samples = icpp_rbuf_uv(q);
        rec->u.end.lost = icpp_rbuf_uv(q);
        if (!q->bad && !r->clean_end) {
            r->clean_end = 1;
            r->end_samples = rec->u.end.samples;
        }
        break;
    default:
        BAD("unknown record type %d", icpp_rbuf_pos(q), type);
    }
    if (q->bad)
        BAD("record type %d is cut short or out of range", icpp_rbuf_pos(q), type);
    return 1;
}

int icpp_sreader_next(icpp_sreader *r, icpp_srec *rec, icpp_err *err)
{
    for (;;) {
        if (!r->in_block || icpp_rbuf_left(&r->blk) == 0) {
            int rc = next_block(r, err);
            if (rc <= 0)
                return rc;
        }
        size_t sample_thread = 0;
        int rc = read_record(r, rec, &sample_thread, err);
        if (rc < 0)
            return rc;
        if (rc == 0)
            continue;
        if (rec->type == ICPP_SREC_SAMPLE || rec->type == ICPP_SREC_LSAMPLE) {
            /* read in full above (the deltas and the frame dictionary go on),
             * but no sample follows the END record or its thread's EXIT */
            if (r->clean_end) {
                r->after_end++;
                continue;
            }
            if (r->th[sample_thread].exited) {
                r->after_exit++;
                r->nsamples++;
                continue;
            }
            r->nsamples++;
        }
        return 1;
    }
}

void icpp_sreader_get_tally(const icpp_sreader *r, icpp_sreader_tally *c)
{
    c->end_samples = r->end_samples;
    c->before_end = r->nsamples;
    c->after_end = r->after_end;
    c->after_exit = r->after_exit;
}
