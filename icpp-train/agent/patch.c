/* patch.c -- decides how each function entry is hooked, builds stubs near the module, writes the jmp/int3. */
#include "internal.h"
#include "lde.h"
#include "reloc.h"
#include "sys.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* One patch_module call:
 *   1. classify each function: executable?  size?  relocate its first
 *      >= 5 bytes (reloc.c) -> jmp candidate, or int3 candidate with reason;
 *   2. scan every listed function's body for relative branches (and other
 *      functions' starts) into bytes 1..4 of a jmp candidate -> int3;
 *   3. place all stubs in one mapping within +-2 GiB of everything they
 *      reach, emit them, make it RX;
 *   4. publish the site table (for the SIGTRAP handler), then write the
 *      entries with only raw syscalls and plain stores, so a half-written
 *      libc function is never called.
 *
 * Stub for a jmp site (16-byte aligned):
 *     41 53            push %r11
 *     41 BB imm32      mov  $index, %r11d
 *     FF 15 disp32     call *tramp_slot(%rip)      (tramp.S)
 *     41 5B            pop  %r11
 *     <relocated instructions> ; E9 jmp back ; literals
 * r11 is saved although the ABI makes it a scratch register: for static
 * functions gcc's -fipa-ra lets a caller keep values in registers the callee
 * is known not to touch, r11 included (a stub that clobbered it corrupted
 * glibc's printf through its static read_int).
 * Stub for an int3 site: the same prefix, then the relocated first
 * instruction and jmp back; the SIGTRAP handler records and resumes after
 * the prefix.  The module's direct calls of the function (call/jmp/jcc
 * rel32 to its byte 0: find_redirects) enter at the prefix instead, and do
 * not trap.
 *
 * Writes: before other threads exist (the LD_PRELOAD constructor) the 5
 * bytes are simply stored.  With other threads (LIVE; automatic when
 * /proc/self/task has more than one entry):
 *     int3 at byte 0 of every site; sync
 *     evacuate: signal every other thread; its handler moves an RIP that
 *               lies inside bytes 1..len of a site to the same instruction
 *               in the stub's relocated copy (trap.c)
 *     bytes 1..4; sync; E9 at byte 0; sync
 * where sync = membarrier(PRIVATE_EXPEDITED_SYNC_CORE) (every core running
 * the process serializes its instruction stream).  After the int3, no
 * thread can newly enter bytes 1..4 (byte 0 traps and the handler sends it
 * to the stub; branches into 1..4 were refused), and evacuation moves the
 * ones already there, so no thread ever decodes a torn jmp or the middle of
 * the new bytes.  tests/test_live.c shows a thread blocked in a syscall
 * inside bytes 1..4: it crashes without evacuation and not with it.
 * Evacuation costs one signal per thread per patch call: blocking system
 * calls that are never restarted (poll, epoll_wait, nanosleep, ...) return
 * EINTR in those threads.  ICPP_AGENT_PATCH_NO_EVACUATE skips it; threads
 * that block the signal do not answer (counted, patching goes on after 2 s).
 *
 * CET: the jmp may overwrite an endbr64 (which is relocated into the stub);
 * indirect calls still land on the jmp.  Linux does not enforce IBT for user
 * space on this kernel; under enforced IBT the stub would need an endbr64 at
 * the original entry (a 4-byte endbr64 + the jmp = 9 bytes). */

#define STUB_PREFIX 16    /* push r11; mov $index, r11d; call *slot; pop r11 */
#define SLOT_BYTES  16           /* tramp pointer at the region start */
#define REACH       ((1ull << 31) - (1ull << 20))

/* What the patcher keeps of a relocation until it emits the stub (the
 * whole icpp_agent_reloc per function made the work array ~1.3 MB for
 * libc, and page faults are slow in VMs). */
typedef struct relsum {
    uint32_t size, src_len, flow_end;
    uint64_t ref_lo, ref_hi;
} relsum;

static int relocate_sum(const uint8_t *src, size_t avail, uint64_t addr, size_t min_len, relsum *out)
{
    icpp_agent_reloc r;
    int rc = icpp_agent_relocate(src, avail, addr, min_len, addr, &r, NULL);
    if (rc == 0)
        *out = (relsum){ r.size, r.src_len, r.flow_end, r.ref_lo, r.ref_hi };
    return rc;
}

typedef struct work {
    icpp_agent_func  *f;
    uint64_t          addr, size;
    uint64_t          avail;          /* readable bytes of the function */
    uint8_t           how, reason;
    uint8_t           padded;         /* jmp took alignment padding after the function */
    uint8_t           inferred;       /* size 0: extent taken up to the next function */
    uint8_t           min_in;         /* lowest offset in 1..4 that another function starts
                                         at or a branch targets; 0 = none */
    uint8_t           ends_flow;      /* its last instruction ends at `size` and never
                                         falls through (ret, jmp, ud2, hlt, int3) */
    uint64_t          island;         /* short jmp: its 5-byte jmp's address */
    uint32_t          redirected;     /* of which rewritten to reach the stub (int3 sites) */
    uint32_t          stub_size;
    uint32_t          code_end;       /* end of the relocated instructions after the prefix */
    uint64_t          stub;
    relsum            rel;            /* of the relocation chosen (redone at the stub) */
} work;

static icpp_agent_patch_stats totals;
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static int inited, membarrier_ok = -1;

void icpp_agent_fork_prepare(void) ICPP_AGENT_HIDDEN;
void icpp_agent_fork_parent(void) ICPP_AGENT_HIDDEN;
void icpp_agent_fork_child(void) ICPP_AGENT_HIDDEN;

/* The pthread_atfork child handler: the child counts its own int3 entries
 * (the sites belong to the patcher and the trap handler, trap.c), then the
 * recorder gives it its own trees (recorder.c).  Composed here, where the
 * handlers are registered, so that the recorder never calls the trap
 * handler's module (which calls the recorder). */
static void fork_child(void)
{
    icpp_agent_int3_reset();
    icpp_agent_fork_child();
}

static const char *const reason_names[ICPP_AGENT_R_COUNT + 1] = {
    "ok", "too_short", "no_size", "branch_in", "overlap", "unrelocatable", "duplicate",
    "not_exec", "bad_index", "no_stub_mem", "self", "?",
};

const char *icpp_agent_reason_name(int r)
{
    return r >= 0 && r < ICPP_AGENT_R_COUNT ? reason_names[r] : "?";
}

const char *icpp_agent_how_name(int how)
{
    return how == ICPP_AGENT_HOW_JMP ? "jmp" : how == ICPP_AGENT_HOW_INT3 ? "int3" : "none";
}

int icpp_agent_init(const icpp_agent_config *cfg, icpp_err *err)
{
    if (inited)
        return 0;
    if (cfg) {
        if (cfg->max_depth)
            icpp_agent_cfg.max_depth = cfg->max_depth;
        if (cfg->max_cct_bytes)
            icpp_agent_cfg.max_cct_bytes = cfg->max_cct_bytes;
        if (cfg->prefault_bytes)
            icpp_agent_cfg.prefault = (cfg->prefault_bytes + 4095u) & ~4095u;
        if (cfg->live_signal)
            icpp_agent_cfg.live_signal = cfg->live_signal;
        if (cfg->live_dir) {
            static char live_dir[4096];
            size_t n = strlen(cfg->live_dir);
            if (!n || n >= sizeof live_dir - 100)
                return icpp_err_set(err, ENAMETOOLONG, "icpp agent: live directory name too long: %.64s...",
                                    cfg->live_dir);
            memcpy(live_dir, cfg->live_dir, n + 1);
            icpp_agent_cfg.live_dir = live_dir;
        }
    }
    /* Without startstack the main thread's base falls back to the top of
     * its stack mapping (ICPP_AGENT_BASE_MAPTOP): not an error. */
    if (!icpp_agent_cfg.live_signal)
        icpp_agent_cfg.live_signal = SIGRTMAX - 2;
    icpp_agent_cfg.startstack = icpp_agent_startstack();
    int e = pthread_atfork(icpp_agent_fork_prepare, icpp_agent_fork_parent, fork_child);
    if (e)
        return icpp_err_set(err, e, "icpp agent: pthread_atfork failed");
    inited = 1;
    return 0;
}

void icpp_agent_patch_totals(icpp_agent_patch_stats *out)
{
    pthread_mutex_lock(&patch_lock);
    *out = totals;
    pthread_mutex_unlock(&patch_lock);
}

/* ---- the process's mappings ----------------------------------------------- */

typedef struct rows {
    icpp_agent_maprow *v;
    size_t             n, cap;
} rows;

static int rows_cb(const icpp_agent_maprow *r, void *p)
{
    rows *rs = p;
    if (r->start >= 0x800000000000ull)   /* vsyscall */
        return 0;
    if (rs->n == rs->cap) {
        size_t nc = rs->cap ? rs->cap * 2 : 256;
        icpp_agent_maprow *nv = realloc(rs->v, nc * sizeof *nv);
        if (!nv)
            return 1;
        rs->v = nv;
        rs->cap = nc;
    }
    rs->v[rs->n++] = *r;
    return 0;
}

static const icpp_agent_maprow *rows_find(const rows *rs, uint64_t a)
{
    size_t lo = 0, hi = rs->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rs->v[mid].end <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < rs->n && rs->v[lo].start <= a ? &rs->v[lo] : NULL;
}

/* A free, page-aligned range of `size` bytes from which every byte of
 * [lo, hi] is within REACH; 0 if none could be mapped.  Prefers the gap
 * nearest below the module (above an executable lies the brk heap). */
static uint64_t alloc_near(rows *rs, uint64_t lo, uint64_t hi, uint64_t size)
{
    const uint64_t page = 4096, slack_above = 64ull << 20;
    uint64_t min_r = hi > REACH ? hi - REACH : 0, max_end = lo + REACH;
    if (min_r < (1ull << 20))
        min_r = 1ull << 20;
    for (int attempt = 0; attempt < 64; attempt++) {
        uint64_t best = 0, best_d = ~0ull;
        for (size_t i = 0; i <= rs->n; i++) {
            uint64_t g0 = i ? rs->v[i - 1].end : 0;
            uint64_t g1 = i < rs->n ? rs->v[i].start : 0x7ffffffff000ull;
            if (g1 <= g0 || g1 - g0 < size)
                continue;
            uint64_t r, d;
            if (g1 <= lo) {
                r = (g1 - size) & ~(page - 1);
                if (r < g0 || r < min_r)
                    continue;
                d = lo - r;
            } else if (g0 >= hi) {
                r = (g0 + slack_above + page - 1) & ~(page - 1);
                if (r + size > g1 || r + size > max_end)
                    continue;
                d = r - hi + (1ull << 40);     /* below wins */
            } else {
                continue;
            }
            if (d < best_d) {
                best = r;
                best_d = d;
            }
        }
        if (!best)
            return 0;
        long p = icpp_sys_mmap((void *)best, size, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE);
        if (!icpp_sys_failed(p))
            return (uint64_t)p;
        /* Raced with another mapping: re-read and retry. */
        rs->n = 0;
        if (icpp_agent_maps_each(rows_cb, rs) < 0)
            return 0;
    }
    return 0;
}

/* ---- classification ------------------------------------------------------- */

static int cmp_work(const void *a, const void *b)
{
    const work *x = *(work *const *)a, *y = *(work *const *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int self_row(const rows *rs, uint64_t a)
{
    const icpp_agent_maprow *me = rows_find(rs, (uint64_t)(uintptr_t)icpp_agent_tramp);
    const icpp_agent_maprow *it = rows_find(rs, a);
    return me && it == me;
}

static void refuse(work *w, int reason)
{
    w->how = ICPP_AGENT_HOW_INT3;
    if (!w->reason)
        w->reason = (uint8_t)reason;
}

/* next: start of the next listed function (or 0): bounds padding and an
 * unknown size. */
static void classify(work *w, const rows *rs, uint64_t next)
{
    const icpp_agent_maprow *r = rows_find(rs, w->addr);
    if (!r || (r->prot & (PROT_EXEC | PROT_READ)) != (PROT_EXEC | PROT_READ)) {
        w->how = ICPP_AGENT_HOW_NONE;
        w->reason = ICPP_AGENT_R_NOT_EXEC;
        return;
    }
    /* Readable bytes of the function (its body is scanned in step 2 even if
     * it is not patched itself). */
    uint64_t in_row = r->end - w->addr;
    if (next > w->addr && next - w->addr < in_row)
        in_row = next - w->addr;
    w->avail = w->size ? (w->size < in_row ? w->size : in_row) : (in_row < 15 ? in_row : 15);
    if (w->f->index >= ICPP_AGENT_FUNC_MAX) {
        w->how = ICPP_AGENT_HOW_NONE;
        w->reason = ICPP_AGENT_R_BAD_INDEX;
        return;
    }
    if (self_row(rs, w->addr)) {
        w->how = ICPP_AGENT_HOW_NONE;
        w->reason = ICPP_AGENT_R_SELF;
        return;
    }
    if (icpp_agent_site_at(w->addr)) {
        w->how = ICPP_AGENT_HOW_NONE;
        w->reason = ICPP_AGENT_R_DUPLICATE;
        return;
    }
    if (w->size == 0) {
        /* Unknown size: it extends to the next listed function (as the
         * symbol tables' consumers assume); without one, refuse. */
        if (!next || next <= w->addr) {
            refuse(w, ICPP_AGENT_R_NO_SIZE);
            return;
        }
        w->avail = in_row;
        w->inferred = 1;
    }
    int rc = w->avail >= 5 ? relocate_sum((const uint8_t *)(uintptr_t)w->addr, w->avail, w->addr, 5, &w->rel)
                           : ICPP_AGENT_R_TOO_SHORT;
    if (rc == ICPP_AGENT_R_TOO_SHORT && w->size && w->avail == w->size && in_row > w->size) {
        /* Too short, but alignment padding may follow: move it along. */
        /* Only up to the next 16-byte boundary: an unlisted function that
         * starts with a nop could follow. */
        uint64_t e = w->addr + w->size, bound = ((e + 15) & ~15ull) - e;
        size_t pad = icpp_agent_padding((const uint8_t *)(uintptr_t)e,
                                        in_row - w->size < bound ? in_row - w->size : bound);
        if (w->size + pad >= 5) {
            rc = relocate_sum((const uint8_t *)(uintptr_t)w->addr, w->size + pad, w->addr, 5, &w->rel);
            if (rc == 0) {
                w->avail = w->size + pad;
                w->padded = 1;
            }
        }
    }
    if (rc == 0 && w->inferred && w->rel.flow_end && w->rel.flow_end < 5)
        rc = ICPP_AGENT_R_TOO_SHORT;    /* it may end before byte 5: not ours to overwrite */
    if (rc) {
        refuse(w, w->inferred && rc == ICPP_AGENT_R_TOO_SHORT ? ICPP_AGENT_R_NO_SIZE : rc);
        if (w->inferred)
            w->avail = in_row < 15 ? in_row : 15;   /* int3: first instruction only */
        return;
    }
    w->how = ICPP_AGENT_HOW_JMP;
}

/* Whether a decoded instruction never falls through: ret, jmp, ud2, ud1,
 * hlt, int3.  Calls do not count: a call to a function that returns would
 * run what follows. */
static int no_fallthrough(const icpp_lde_insn *in)
{
    if (in->enc != ICPP_LDE_LEGACY)
        return 0;
    if (in->map == 1)
        return in->opcode == 0x0b || in->opcode == 0xb9;            /* ud2, ud1 */
    if (in->map != 0)
        return 0;
    switch (in->opcode) {
    case 0xc3: case 0xc2: case 0xcb: case 0xca:                      /* ret */
    case 0xe9: case 0xeb:                                            /* jmp rel */
    case 0xf4: case 0xcc:                                            /* hlt, int3 */
        return 1;
    case 0xff:                                                       /* jmp r/m (/4, /5) */
        return ((in->modrm >> 3) & 7) == 4 || ((in->modrm >> 3) & 7) == 5;
    default:
        return 0;
    }
}

/* Dead padding between two functions, where a short-jmp site can place the
 * 5-byte jmp to its stub: only nop/int3 bytes, after a function whose last
 * instruction never falls through, outside every listed function's extent,
 * and no branch lands in it. */
typedef struct gap {
    uint64_t lo, hi;          /* [lo, hi) */
    uint64_t up, down;        /* free part: [up, down) */
    work    *prev;            /* the function ending at lo */
    uint8_t  bad;             /* a branch targets it, or prev may fall through */
} gap;

typedef struct gaps {
    gap   *v;
    size_t n;
} gaps;

/* Candidate gaps from the functions' extents (ws sorted by address). */
static void find_gaps(work **ws, size_t n, const rows *rs, gaps *g)
{
    g->v = malloc((n ? n : 1) * sizeof *g->v);
    g->n = 0;
    if (!g->v)
        return;
    uint64_t end = 0;
    work *last = NULL;
    for (size_t i = 0; i + 1 < n; i++) {
        work *w = ws[i];
        if (w->how == ICPP_AGENT_HOW_NONE && w->reason == ICPP_AGENT_R_NOT_EXEC)
            continue;
        uint64_t e = w->size && !w->inferred ? w->addr + w->size : ws[i + 1]->addr;
        if (w->how == ICPP_AGENT_HOW_JMP && w->addr + w->rel.src_len > e)
            e = w->addr + w->rel.src_len;      /* its jmp covers padding after it */
        if (e >= end) {
            end = e;
            last = w;
        }
        uint64_t next = ws[i + 1]->addr;
        if (end >= next || next - end < 5 || !last || !last->size || last->inferred)
            continue;
        const icpp_agent_maprow *r = rows_find(rs, end);
        if (!r || r->end < next || (r->prot & (PROT_EXEC | PROT_READ)) != (PROT_EXEC | PROT_READ))
            continue;
        if (icpp_agent_padding((const uint8_t *)(uintptr_t)end, next - end) != next - end)
            continue;
        g->v[g->n++] = (gap){ end, next, end, next, last, 0 };
    }
}

static gap *gap_holding(gaps *g, uint64_t t)
{
    size_t lo = 0, hi = g->n;
    while (lo < hi) {          /* first gap with lo > t */
        size_t mid = (lo + hi) / 2;
        if (g->v[mid].lo <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && t < g->v[lo - 1].hi ? &g->v[lo - 1] : NULL;
}

/* The first of v[0..n) (sorted by addr) with addr >= t, or n. */
static size_t first_from(work **v, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid]->addr < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The jmp candidate whose bytes 1..4 hold t, or NULL.  cand: sorted. */
static work *cand_holding(work **cand, size_t n, uint64_t t)
{
    size_t lo = first_from(cand, n, t);
    if (lo == 0)
        return NULL;
    work *c = cand[lo - 1];
    return t > c->addr && t < c->addr + 5 ? c : NULL;
}

static void note_in(work *c, uint64_t t)
{
    uint8_t off = (uint8_t)(t - c->addr);
    if (!c->min_in || off < c->min_in)
        c->min_in = off;
}

/* The index in ws of the listed function starting exactly at t, or n (ws
 * sorted). */
static size_t func_index(work **ws, size_t n, uint64_t t)
{
    size_t lo = first_from(ws, n, t);
    return lo < n && ws[lo]->addr == t ? lo : n;
}

static work *func_at(work **ws, size_t n, uint64_t t)
{
    size_t i = func_index(ws, n, t);
    return i < n ? ws[i] : NULL;
}

/* The sweep's direct branches (call/jmp/jcc rel32) to listed functions'
 * starts, so that find_redirects need not decode the module again. */
typedef struct edge {
    uint32_t off;             /* the branch, from the first function's start */
    uint32_t to_len;          /* index in ws of its target << 4 | its length */
} edge;

typedef struct edges {
    edge    *v;
    size_t   n, cap;
    uint64_t base;            /* ws[0]->addr */
    int      failed;          /* out of memory: no redirects */
} edges;

static void edge_add(edges *eg, uint64_t at, size_t to, size_t len)
{
    if (eg->failed || at - eg->base > UINT32_MAX || to >= (1u << 28))
        return;
    if (eg->n == eg->cap) {
        size_t nc = eg->cap ? 2 * eg->cap : 4096;
        edge *nv = realloc(eg->v, nc * sizeof *nv);
        if (!nv) {
            eg->failed = 1;
            return;
        }
        eg->v = nv;
        eg->cap = nc;
    }
    eg->v[eg->n++] = (edge){ (uint32_t)(at - eg->base), (uint32_t)(to << 4 | len) };
}

/* A branch that can be pointed elsewhere by rewriting its rel32: call,
 * jmp, jcc (not xbegin, whose target is an abort handler). */
static int redirectable(const icpp_lde_insn *in)
{
    if (in->enc != ICPP_LDE_LEGACY || in->rel_size != 4)
        return 0;
    return (in->map == 0 && (in->opcode == 0xe8 || in->opcode == 0xe9)) ||
           (in->map == 1 && in->opcode >= 0x80 && in->opcode <= 0x8f);
}

/* Step 2: branches and function starts landing in bytes 1..4 (of jmp
 * candidates and of functions too short for the jmp: min_in, for the short
 * jmp); which functions end without falling through; branches into gaps;
 * direct branches to function starts (eg). */
static void scan_conflicts(work **ws, size_t n, gaps *g, edges *eg)
{
    work **cand = malloc(n * sizeof *cand);
    if (!cand) {
        for (size_t i = 0; i < n; i++)
            if (ws[i]->how == ICPP_AGENT_HOW_JMP)
                refuse(ws[i], ICPP_AGENT_R_BRANCH_IN);   /* cannot check: be safe */
        return;
    }
    size_t nc = 0;
    for (size_t i = 0; i < n; i++)
        if (ws[i]->how == ICPP_AGENT_HOW_JMP ||
            (ws[i]->how == ICPP_AGENT_HOW_INT3 && ws[i]->reason == ICPP_AGENT_R_TOO_SHORT))
            cand[nc++] = ws[i];
    for (size_t i = 0; i < n; i++) {
        work *w = ws[i];
        work *c = cand_holding(cand, nc, w->addr);
        if (c) {
            note_in(c, w->addr);
            if (c->how == ICPP_AGENT_HOW_JMP)
                refuse(c, ICPP_AGENT_R_OVERLAP);
        }
    }
    for (size_t i = 0; i < n; i++) {
        work *w = ws[i];
        if (!w->avail || (!w->size && !w->inferred))
            continue;                  /* unknown extent: not scanned (BUILD.md) */
        const uint8_t *p = (const uint8_t *)(uintptr_t)w->addr;
        for (uint64_t off = 0; off < w->avail;) {
            icpp_lde_insn in;
            size_t len = icpp_lde_decode(p + off, w->avail - off, &in);
            if (!len) {
                off++;                 /* data or padding: resync */
                continue;
            }
            if (in.rel_size) {
                uint64_t t = w->addr + off + len + (uint64_t)(int64_t)in.rel;
                work *c = cand_holding(cand, nc, t);
                uint64_t at = w->addr + off;
                if (c) {
                    note_in(c, t);   /* from anywhere: the short jmp relocates less */
                    if (c->how == ICPP_AGENT_HOW_JMP &&
                        !(at >= c->addr && at < c->addr + c->rel.src_len))
                        refuse(c, ICPP_AGENT_R_BRANCH_IN);
                }
                gap *gp = gap_holding(g, t);
                if (gp)
                    gp->bad = 1;
                size_t ei = redirectable(&in) ? func_index(ws, n, t) : n;
                if (ei < n)
                    edge_add(eg, at, ei, len);
            }
            if (w->size && !w->inferred && off + len == w->size)
                w->ends_flow = (uint8_t)no_fallthrough(&in);
            off += len;
        }
    }
    free(cand);
    for (size_t i = 0; i < g->n; i++)
        if (!g->v[i].prev->ends_flow)
            g->v[i].bad = 1;
}

/* A 5-byte slot in a good gap within reach of a jmp rel8 at `at` (its end
 * is at + 2); 0 if none.  Takes the slot nearest to `at`. */
static uint64_t island_near(gaps *g, uint64_t at)
{
    uint64_t from = at + 2 - 128, to = at + 2 + 127;    /* slot start range */
    size_t lo = 0, hi = g->n;
    while (lo < hi) {          /* first gap ending after `from` */
        size_t mid = (lo + hi) / 2;
        if (g->v[mid].hi <= from)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t best = 0, best_d = ~0ull;
    gap *bg = NULL;
    for (size_t i = lo; i < g->n && g->v[i].lo <= to; i++) {
        gap *x = &g->v[i];
        if (x->bad || x->down - x->up < 5)
            continue;
        uint64_t s = x->hi <= at ? x->down - 5 : x->up;   /* the end nearer to `at` */
        if (s < from || s > to)
            continue;
        uint64_t d = s < at ? at - s : s - at;
        if (d < best_d) {
            best = s;
            best_d = d;
            bg = x;
        }
    }
    if (bg) {
        if (best == bg->up)
            bg->up += 5;
        else
            bg->down -= 5;
    }
    return best;
}

/* Functions refused the jmp because of bytes 2..4 (a branch or another
 * function lands there, or the function is shorter than 5 bytes) can take
 * a 2-byte jmp to an island when their first instructions end at or
 * before that offset.  Returns how many. */
static size_t short_jmps(work **ws, size_t n, gaps *g)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        work *w = ws[i];
        if (w->how != ICPP_AGENT_HOW_INT3 || !w->size || w->inferred ||
            (w->reason != ICPP_AGENT_R_BRANCH_IN && w->reason != ICPP_AGENT_R_OVERLAP &&
             w->reason != ICPP_AGENT_R_TOO_SHORT))
            continue;
        uint64_t limit = w->min_in ? w->min_in : 5;
        if (w->size < limit)
            limit = w->size;
        if (limit < 2)
            continue;
        relsum r;
        if (relocate_sum((const uint8_t *)(uintptr_t)w->addr, limit, w->addr, 2, &r))
            continue;
        uint64_t isl = island_near(g, w->addr);
        if (!isl)
            continue;
        w->rel = r;
        w->island = isl;
        w->how = ICPP_AGENT_HOW_JMP;
        k++;
    }
    return k;
}

/* ---- direct calls of int3 sites ------------------------------------------- */

/* A branch whose rel32 is rewritten to reach an int3 site's stub. */
typedef struct redirect {
    uint64_t at;              /* the instruction; its rel32 is its last 4 bytes */
    uint8_t  len;
    uint8_t  kind;            /* ICPP_AGENT_CALL_* */
    uint8_t  cc;              /* jcc: opcode & 15 */
    uint8_t  first;           /* its byte 0 */
    work    *to;              /* the int3 site */
} redirect;

static int cmp_redirect(const void *a, const void *b)
{
    const redirect *x = a, *y = b;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* Does [at, at + len) overlap bytes that a hook overwrites or relocates
 * (a site's first rel.src_len bytes)?  Such a branch runs from the stub's
 * copy, or not at all. */
static int in_patched(work **ws, size_t n, uint64_t at, uint64_t len)
{
    for (size_t i = first_from(ws, n, at > 16 ? at - 16 : 0); i < n && ws[i]->addr < at + len; i++) {
        const work *x = ws[i];
        if (x->how != ICPP_AGENT_HOW_NONE && x->addr + x->rel.src_len > at)
            return 1;
    }
    return 0;
}

/* Every call, jmp or jcc with a rel32 (in any listed function) that
 * reaches byte 0 of an int3 site: pointed at the site's stub instead, it
 * records the entry as a jmp hook would -- same entry SP, same return
 * address -- without the trap.  Entries through pointers, through rel8
 * branches and from other modules (the PLT) still trap.  Sets *out (NULL
 * if none) and returns how many. */
static size_t find_redirects(work **ws, size_t n, const edges *eg, redirect **out)
{
    size_t want = 0, k = 0;
    *out = NULL;
    for (size_t i = 0; i < eg->n && !eg->failed; i++)
        want += ws[eg->v[i].to_len >> 4]->how == ICPP_AGENT_HOW_INT3;
    redirect *v = want ? malloc(want * sizeof *v) : NULL;
    if (!v)
        return 0;
    for (size_t i = 0; i < eg->n; i++) {
        work *e = ws[eg->v[i].to_len >> 4];
        uint64_t at = eg->base + eg->v[i].off;
        size_t len = eg->v[i].to_len & 15;
        icpp_lde_insn in;
        if (e->how != ICPP_AGENT_HOW_INT3 || in_patched(ws, n, at, len) ||
            icpp_lde_decode((const uint8_t *)(uintptr_t)at, len, &in) != len || !redirectable(&in))
            continue;
        v[k++] = (redirect){ at, (uint8_t)len,
                             in.map == 1 ? ICPP_AGENT_CALL_JCC
                             : in.opcode == 0xe8 ? ICPP_AGENT_CALL_CALL : ICPP_AGENT_CALL_JMP,
                             (uint8_t)(in.opcode & 15), *(const uint8_t *)(uintptr_t)at, e };
    }
    /* Overlapping function bodies decode some bytes twice: keep one copy
     * of each branch, and none of two that overlap (the decodings
     * disagree: not ours to write). */
    qsort(v, k, sizeof *v, cmp_redirect);
    size_t m = 0;
    uint64_t prev_end = 0;            /* end of every branch before v[i] */
    for (size_t i = 0; i < k;) {
        size_t j = i + 1;
        while (j < k && v[j].at == v[i].at && v[j].len == v[i].len)
            j++;
        uint64_t end = v[i].at + v[i].len;
        if (prev_end <= v[i].at && (j == k || end <= v[j].at))
            v[m++] = v[i];
        prev_end = end > prev_end ? end : prev_end;
        i = j;
    }
    for (size_t i = 0; i < m; i++)
        v[i].to->redirected++;
    *out = v;
    return m;
}

/* A branch relocated into a stub (a function whose first instructions
 * call an int3 site: `push %rbp; mov %rsp,%rbp; call f`) runs from the
 * copy: point the copy's rel32 at the site's stub too.  Before the stubs
 * are made executable. */
static void retarget_copies(work **ws, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        work *w = ws[i];
        if (w->how == ICPP_AGENT_HOW_NONE || !w->stub)
            continue;
        uint64_t code = w->stub + STUB_PREFIX;
        for (uint32_t off = 0; off < w->code_end;) {
            icpp_lde_insn in;
            size_t len = icpp_lde_decode((const uint8_t *)(uintptr_t)(code + off), w->code_end - off, &in);
            if (!len)
                break;
            if (redirectable(&in)) {
                uint64_t at = code + off, t = at + len + (uint64_t)(int64_t)in.rel;
                work *e = func_at(ws, n, t);
                if (e && e->how == ICPP_AGENT_HOW_INT3 && e->stub) {
                    int32_t rel = (int32_t)(int64_t)(e->stub - (at + len));
                    memcpy((void *)(uintptr_t)(at + len - 4), &rel, 4);
                    e->redirected++;
                }
            }
            off += (uint32_t)len;
        }
    }
}

/* ---- writing ---------------------------------------------------------------- */

static void store_bytes(uint64_t addr, const uint8_t *b, size_t n)
{
    volatile uint8_t *p = (volatile uint8_t *)(uintptr_t)addr;
    for (size_t i = 0; i < n; i++)
        p[i] = b[i];
}

static void sync_cores(void)
{
    if (membarrier_ok < 0) {
        long r = icpp_sys3(ICPP_SYS_membarrier, 64 /* REGISTER_PRIVATE_EXPEDITED_SYNC_CORE */, 0, 0);
        membarrier_ok = r == 0;
    }
    if (membarrier_ok)
        icpp_sys3(ICPP_SYS_membarrier, 32 /* PRIVATE_EXPEDITED_SYNC_CORE */, 0, 0);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

typedef struct run {
    uint64_t start, end;     /* pages */
    int      prot;           /* original */
} run;

/* Page runs covering the sites' patched bytes (and islands), split by
 * original protection. */
static size_t page_runs(const icpp_agent_site *s, size_t n, const redirect *rd, size_t nrd,
                        const rows *rs, run *out)
{
    size_t k = 0;
    for (size_t j = 0; j < 2 * n + nrd; j++) {
        uint64_t a, len;
        if (j >= 2 * n) {
            a = rd[j - 2 * n].at;
            len = rd[j - 2 * n].len;
        } else {
            const icpp_agent_site *x = &s[j / 2];
            a = x->addr;
            len = x->state == ICPP_AGENT_SITE_INT3 ? 1 : x->island ? 2 : 5;
            if (j % 2) {
                if (!x->island)
                    continue;
                a = x->island;
                len = 5;
            }
        }
        for (uint64_t pg = a & ~4095ull; pg < a + len; pg += 4096) {
            const icpp_agent_maprow *r = rows_find(rs, pg);
            int prot = r ? r->prot : PROT_READ | PROT_EXEC;
            if (k && out[k - 1].start <= pg && out[k - 1].end >= pg && out[k - 1].prot == prot) {
                if (out[k - 1].end < pg + 4096)
                    out[k - 1].end = pg + 4096;
                continue;
            }
            out[k].start = pg;
            out[k].end = pg + 4096;
            out[k].prot = prot;
            k++;
        }
    }
    return k;
}

/* Step 4.  Only raw syscalls and volatile stores from the first mprotect to
 * the last: libc's pages may be writable-not-executable meanwhile. */
typedef struct evac {
    int sig, timeout_ms;    /* in */
    int unacked, moved;     /* out */
} evac;

/* The jmp at a site: E9 rel32 to the stub, or EB rel8 to the island. */
static void site_jmp(const icpp_agent_site *s, uint8_t b[5])
{
    if (s->island) {
        b[0] = 0xeb;
        b[1] = (uint8_t)(int8_t)(int64_t)(s->island - (s->addr + 2));
        return;
    }
    int32_t rel = (int32_t)(int64_t)(s->stub - (s->addr + 5));
    b[0] = 0xe9;
    b[1] = (uint8_t)rel;
    b[2] = (uint8_t)(rel >> 8);
    b[3] = (uint8_t)(rel >> 16);
    b[4] = (uint8_t)(rel >> 24);
}

/* Point a redirected branch at its site's stub. */
static void write_rel32(const redirect *r)
{
    int32_t rel = (int32_t)(int64_t)(r->to->stub - (r->at + r->len));
    uint8_t b[4] = { (uint8_t)rel, (uint8_t)(rel >> 8), (uint8_t)(rel >> 16), (uint8_t)(rel >> 24) };
    store_bytes(r->at + r->len - 4, b, 4);
}

static int write_sites(icpp_agent_site *s, size_t n, const redirect *rd, size_t nrd, run *runs,
                       size_t nr, int live, evac *ev)
{
    int rwx = PROT_READ | PROT_WRITE | PROT_EXEC;
    size_t done;
    for (done = 0; done < nr; done++) {
        long r = icpp_sys_mprotect(runs[done].start, runs[done].end - runs[done].start, rwx);
        if (r == -EACCES && !live)
            r = icpp_sys_mprotect(runs[done].start, runs[done].end - runs[done].start,
                                  PROT_READ | PROT_WRITE);
        if (r < 0)
            break;
    }
    int rc = 0;
    if (done < nr) {
        rc = -EACCES;
        goto restore;
    }
    /* Islands first: dead bytes nobody runs. */
    for (size_t i = 0; i < n; i++)
        if (s[i].island && s[i].state != ICPP_AGENT_SITE_INT3) {
            int32_t rel = (int32_t)(int64_t)(s[i].stub - (s[i].island + 5));
            uint8_t b[5] = { 0xe9, (uint8_t)rel, (uint8_t)(rel >> 8), (uint8_t)(rel >> 16),
                             (uint8_t)(rel >> 24) };
            store_bytes(s[i].island, b, 5);
        }
    if (!live) {
        for (size_t i = 0; i < n; i++) {
            if (s[i].state == ICPP_AGENT_SITE_INT3) {
                store_bytes(s[i].addr, (const uint8_t *)"\xcc", 1);
                continue;
            }
            uint8_t b[5];
            site_jmp(&s[i], b);
            store_bytes(s[i].addr + 1, b + 1, s[i].island ? 1 : 4);
            store_bytes(s[i].addr, b, 1);
        }
        /* Direct calls of int3 sites (never while other threads run). */
        for (size_t i = 0; i < nrd; i++)
            if (rd[i].to->stub)
                write_rel32(&rd[i]);
    } else {
        for (size_t i = 0; i < n; i++)
            store_bytes(s[i].addr, (const uint8_t *)"\xcc", 1);
        sync_cores();
        /* Now no thread can enter bytes 1..4 (byte 0 traps to the stub);
         * move any thread already inside them to the stub's copy. */
        if (ev)
            ev->unacked = icpp_agent_evacuate(s, n, ev->sig, ev->timeout_ms, &ev->moved);
        for (size_t i = 0; i < n; i++) {
            if (s[i].state == ICPP_AGENT_SITE_INT3)
                continue;
            uint8_t b[5];
            site_jmp(&s[i], b);
            store_bytes(s[i].addr + 1, b + 1, s[i].island ? 1 : 4);
        }
        sync_cores();
        for (size_t i = 0; i < n; i++)
            if (s[i].state != ICPP_AGENT_SITE_INT3) {
                uint8_t b[5];
                site_jmp(&s[i], b);
                store_bytes(s[i].addr, b, 1);
            }
        sync_cores();
        for (size_t i = 0; i < n; i++)
            if (s[i].state != ICPP_AGENT_SITE_INT3)
                __atomic_store_n(&s[i].state, ICPP_AGENT_SITE_JMP, __ATOMIC_RELEASE);
        /* Direct calls of int3 sites, bracketed the same way: int3 at the
         * branch's byte 0 (the handler takes the branch to the stub:
         * icpp_agent_callsite), its rel32, its byte 0 again.  No thread is
         * ever inside a branch instruction, so none needs moving. */
        if (nrd) {
            for (size_t i = 0; i < nrd; i++)
                if (rd[i].to->stub)
                    store_bytes(rd[i].at, (const uint8_t *)"\xcc", 1);
            sync_cores();
            for (size_t i = 0; i < nrd; i++)
                if (rd[i].to->stub)
                    write_rel32(&rd[i]);
            sync_cores();
            for (size_t i = 0; i < nrd; i++)
                if (rd[i].to->stub)
                    store_bytes(rd[i].at, &rd[i].first, 1);
            sync_cores();
        }
    }
restore:
    for (size_t i = 0; i < done; i++)
        icpp_sys_mprotect(runs[i].start, runs[i].end - runs[i].start, runs[i].prot);
    return rc;
}

/* ---- patch_module --------------------------------------------------------------- */

static void publish(icpp_agent_modsites *m)
{
    icpp_agent_modsites *old = icpp_agent_mods;
    do
        m->next = old;
    while (!__atomic_compare_exchange_n(&icpp_agent_mods, &old, m, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
}

/* One patch_module call, from the functions listed to the counts: built by
 * plan, place_region, emit_stubs, publish_sites and write_entries in turn
 * (the steps of the comment at the top), read by count_results. */
typedef struct job {
    const char      *name;            /* the module, for messages */
    unsigned         flags;           /* ICPP_AGENT_PATCH_* */
    int              live;            /* other threads may run: the int3-bracketed writes */
    rows             rs;              /* the process's mappings */
    work            *wv;              /* one per function, in the caller's order */
    work           **ws;              /* the same, sorted by address */
    size_t           n;
    redirect        *redir;           /* direct calls of int3 sites, to their stubs */
    size_t           nredir;
    icpp_agent_site *sites;           /* the site table until it is published */
    size_t           nsites;
    run             *runs;            /* page runs made writable for the writes */
    uint64_t         region;          /* the stubs' mapping (0: none) ... */
    uint64_t         region_size;     /* ... and its size */
    int              evac_unacked;    /* live: threads that did not answer evacuation */
    int              evac_moved;      /* live: threads moved out of patched bytes */
    uint64_t         calls_trapped;   /* live: redirected branches the handler took */
} job;

/* Steps 1 and 2: how each function is hooked (ws sorted by address), and
 * which direct calls of int3 sites go to their stubs. */
static void plan(job *j)
{
    work **ws = j->ws;
    size_t n = j->n;
    /* 1. classify */
    for (size_t i = 0; i < n; i++) {
        if (i && ws[i]->addr == ws[i - 1]->addr) {
            ws[i]->how = ICPP_AGENT_HOW_NONE;
            ws[i]->reason = ICPP_AGENT_R_DUPLICATE;
            continue;
        }
        uint64_t next = 0;
        for (size_t k = i + 1; k < n && !next; k++)
            if (ws[k]->addr > ws[i]->addr)
                next = ws[k]->addr;
        classify(ws[i], &j->rs, next);
    }
    /* 2. conflicts, then the short jmp where the jmp did not fit */
    gaps gp = { 0 };
    find_gaps(ws, n, &j->rs, &gp);
    edges eg = { NULL, 0, 0, n ? ws[0]->addr : 0, 0 };
    scan_conflicts(ws, n, &gp, &eg);
    short_jmps(ws, n, &gp);
    free(gp.v);

    /* int3 candidates: relocate the first instruction alone */
    for (size_t i = 0; i < n; i++) {
        work *w = ws[i];
        if (w->how == ICPP_AGENT_HOW_INT3 &&
            ((j->flags & ICPP_AGENT_PATCH_NO_INT3) ||
             relocate_sum((const uint8_t *)(uintptr_t)w->addr, w->avail, w->addr, 1, &w->rel)))
            w->how = ICPP_AGENT_HOW_NONE;
    }
    /* their direct calls: to the stub */
    j->live = (j->flags & ICPP_AGENT_PATCH_LIVE) || icpp_agent_list_threads(NULL, 0) > 1;
    j->nredir = find_redirects(ws, n, &eg, &j->redir);
    free(eg.v);
}

/* Step 3's mapping: sizes every hooked function's stub and maps room for
 * them within reach of everything they refer to (unless a dry run).  When
 * there is none, every function is refused (NO_STUB_MEM) and the error is
 * returned; the call still reports its counts. */
static int place_region(job *j, icpp_err *err)
{
    uint64_t lo = ~0ull, hi = 0, total = SLOT_BYTES;
    j->nsites = 0;
    for (size_t i = 0; i < j->nredir; i++) {
        lo = j->redir[i].at < lo ? j->redir[i].at : lo;
        hi = j->redir[i].at + j->redir[i].len > hi ? j->redir[i].at + j->redir[i].len : hi;
    }
    for (size_t i = 0; i < j->n; i++) {
        work *w = j->ws[i];
        if (w->how == ICPP_AGENT_HOW_NONE)
            continue;
        /* int3 sites get the recording prefix too: their direct calls enter there */
        w->stub_size = STUB_PREFIX + w->rel.size;
        total += (w->stub_size + 15) & ~15u;
        lo = w->addr < lo ? w->addr : lo;
        lo = w->rel.ref_lo < lo ? w->rel.ref_lo : lo;
        hi = w->addr + 5 > hi ? w->addr + 5 : hi;
        hi = w->rel.ref_hi > hi ? w->rel.ref_hi : hi;
        j->nsites++;
    }
    j->region_size = (total + 4095) & ~4095ull;
    if (!j->nsites || (j->flags & ICPP_AGENT_PATCH_DRY_RUN))
        return 0;
    j->region = hi - lo < REACH ? alloc_near(&j->rs, lo, hi, j->region_size) : 0;
    if (j->region)
        return 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->ws[i]->how != ICPP_AGENT_HOW_NONE) {
            j->ws[i]->how = ICPP_AGENT_HOW_NONE;
            j->ws[i]->reason = ICPP_AGENT_R_NO_STUB_MEM;
        }
    j->nsites = 0;
    j->nredir = 0;
    return icpp_err_set(err, ENOMEM,
                        "%s: no free memory within 2 GiB of [%#llx, %#llx] for %llu "
                        "bytes of stubs; the module stays unpatched",
                        j->name, (unsigned long long)lo, (unsigned long long)hi,
                        (unsigned long long)j->region_size);
}

/* The recording prefix of a stub at cur (STUB_PREFIX bytes):
 * push %r11; mov $index,%r11d; call *slot(%rip); pop %r11. */
static void put_prefix(uint8_t *p, uint64_t cur, uint64_t region, uint32_t index)
{
    int32_t disp = (int32_t)(int64_t)(region - (cur + 14));    /* end of the call */
    p[0] = 0x41;
    p[1] = 0x53;
    p[2] = 0x41;
    p[3] = 0xbb;
    memcpy(p + 4, &index, 4);
    p[8] = 0xff;
    p[9] = 0x15;
    memcpy(p + 10, &disp, 4);
    p[14] = 0x41;
    p[15] = 0x5b;
}

/* w's stub at cur: the prefix, then its first instructions relocated there;
 * fills its site (state JMP_PENDING or INT3).  Returns -1, with w refused,
 * if they cannot be relocated there. */
static int emit_stub(work *w, uint64_t region, uint64_t cur, icpp_agent_site *s)
{
    int jmp = w->how == ICPP_AGENT_HOW_JMP;
    uint64_t code = cur + STUB_PREFIX;
    icpp_agent_reloc rel;
    if (icpp_agent_relocate((const uint8_t *)(uintptr_t)w->addr, w->island ? w->rel.src_len : w->avail,
                            w->addr, jmp ? (w->island ? 2 : 5) : 1, code, &rel, NULL)) {
        /* cannot happen: the region is within reach of ref_lo..ref_hi */
        w->how = ICPP_AGENT_HOW_NONE;
        w->reason = ICPP_AGENT_R_UNRELOCATABLE;
        return -1;
    }
    put_prefix((uint8_t *)(uintptr_t)cur, cur, region, w->f->index);
    memcpy((void *)(uintptr_t)code, rel.code, rel.size);
    s->addr = w->addr;
    s->stub = cur;
    s->resume = code;
    s->island = w->island;
    s->index = w->f->index;
    s->len = (uint8_t)rel.src_len;
    s->state = jmp ? ICPP_AGENT_SITE_JMP_PENDING : ICPP_AGENT_SITE_INT3;
    memcpy(s->orig, (const void *)(uintptr_t)w->addr, w->avail < 6 ? w->avail : 6);
    s->ninsn = (uint8_t)(rel.ninsn < 5 ? rel.ninsn : 5);
    for (int k = 0; k < s->ninsn; k++) {
        s->src_off[k] = rel.src_off[k];
        s->dst_off[k] = rel.dst_off[k];
    }
    w->stub = cur;
    w->code_end = rel.code_end;
    return 0;
}

/* Step 3: the site table and every stub, in the region made executable.
 * Returns 0, or an error after which nothing is published (the region is
 * unmapped). */
static int emit_stubs(job *j, icpp_err *err)
{
    j->sites = calloc(j->nsites, sizeof *j->sites);
    j->runs = calloc(j->nsites * 4 + j->nredir * 2, sizeof *j->runs);
    if (!j->sites || !j->runs) {
        icpp_sys_munmap((void *)j->region, j->region_size);
        return icpp_err_set(err, ENOMEM, "%s: out of memory", j->name);
    }
    memcpy((void *)j->region, &(uint64_t){ (uint64_t)(uintptr_t)icpp_agent_tramp }, 8);
    uint64_t cur = j->region + SLOT_BYTES;
    size_t k = 0;
    for (size_t i = 0; i < j->n; i++) {
        work *w = j->ws[i];
        if (w->how == ICPP_AGENT_HOW_NONE || emit_stub(w, j->region, cur, &j->sites[k]) < 0)
            continue;
        k++;
        cur += (w->stub_size + 15) & ~15u;
    }
    j->nsites = k;
    retarget_copies(j->ws, j->n);
    if (icpp_sys_mprotect(j->region, j->region_size, PROT_READ | PROT_EXEC) < 0) {
        icpp_sys_munmap((void *)j->region, j->region_size);
        return icpp_err_set(err, EACCES, "%s: cannot make the stub memory executable", j->name);
    }
    return 0;
}

/* Step 4, first half: the SIGTRAP handler where a site needs it, then the
 * site table published for it -- with, in a live patch, the branches being
 * rewritten (without memory for them they are not rewritten: they keep
 * trapping).  Returns 0, or an error after which nothing is published. */
static int publish_sites(job *j, icpp_err *err)
{
    int any_int3 = 0, rc;
    for (size_t i = 0; i < j->nsites; i++)
        any_int3 |= j->sites[i].state == ICPP_AGENT_SITE_INT3;
    if ((any_int3 || j->live) && (rc = icpp_agent_trap_install()) < 0)
        return icpp_err_set(err, -rc, "%s: cannot install the SIGTRAP handler", j->name);
    icpp_agent_modsites *m = calloc(1, sizeof *m);
    if (!m)
        return icpp_err_set(err, ENOMEM, "%s: out of memory", j->name);
    m->sites = j->sites;
    m->nsites = j->nsites;
    redirect *rd = j->redir;
    if (j->live && j->nredir && (m->calls = calloc(j->nredir, sizeof *m->calls))) {
        /* what the SIGTRAP handler does for a branch being rewritten */
        for (size_t i = 0; i < j->nredir; i++)
            if (rd[i].to->stub)
                m->calls[m->ncalls++] = (icpp_agent_callsite){ rd[i].at, rd[i].to->stub, rd[i].len, rd[i].kind,
                                                               rd[i].cc, rd[i].first };
    } else if (j->live && j->nredir) {
        for (size_t i = 0; i < j->nredir; i++)   /* no table for the handler: they keep trapping */
            rd[i].to->redirected = 0;
        j->nredir = 0;
    }
    m->lo = j->nsites ? j->sites[0].addr : 1;
    m->hi = j->nsites ? j->sites[j->nsites - 1].addr : 0;
    if (!j->live)
        for (size_t i = 0; i < j->nsites; i++)
            if (j->sites[i].state == ICPP_AGENT_SITE_JMP_PENDING)
                j->sites[i].state = ICPP_AGENT_SITE_JMP;
    publish(m);
    return 0;
}

/* Step 4, second half: the entries and the redirected branches written
 * (write_sites), evacuating other threads in a live patch.  Returns 0, or
 * an error with every function counted as unhooked (the published sites
 * keep any int3 already written working). */
static int write_entries(job *j, icpp_err *err)
{
    size_t nr = page_runs(j->sites, j->nsites, j->redir, j->nredir, &j->rs, j->runs);
    evac ev = { icpp_agent_cfg.live_signal, 2000, 0, 0 };
    int use_ev = j->live && !(j->flags & ICPP_AGENT_PATCH_NO_EVACUATE);
    uint64_t emulated = icpp_agent_calls_emulated;
    int wrc = write_sites(j->sites, j->nsites, j->redir, j->nredir, j->runs, nr, j->live, use_ev ? &ev : NULL);
    j->calls_trapped = icpp_agent_calls_emulated - emulated;
    j->evac_unacked = use_ev ? ev.unacked : 0;
    j->evac_moved = use_ev ? ev.moved : 0;
    if (wrc >= 0)
        return 0;
    /* Nothing or only some pages became writable. */
    for (size_t i = 0; i < j->n; i++)
        if (j->ws[i]->how != ICPP_AGENT_HOW_NONE)
            j->ws[i]->how = ICPP_AGENT_HOW_NONE;
    return icpp_err_set(err, EACCES,
                        "%s: mprotect of the code pages failed (W^X policy?); the module "
                        "is unpatched",
                        j->name);
}

/* Each function's outcome into the caller's array, and the call's counts. */
static void count_results(const job *j, icpp_agent_patch_stats *s)
{
    *s = (icpp_agent_patch_stats){ 0 };
    s->nfuncs = (uint32_t)j->n;
    s->live = (uint32_t)j->live;
    s->evac_unacked = j->evac_unacked;
    s->evac_moved = (uint32_t)j->evac_moved;
    s->calls_trapped = j->calls_trapped;
    s->stub_bytes = j->region ? j->region_size : 0;
    for (size_t i = 0; i < j->n; i++) {
        const work *w = &j->wv[i];
        w->f->how = w->how;
        w->f->reason = w->how == ICPP_AGENT_HOW_JMP ? ICPP_AGENT_R_OK : w->reason;
        w->f->short_jmp = w->how == ICPP_AGENT_HOW_JMP && w->island;
        w->f->calls = w->how == ICPP_AGENT_HOW_INT3 ? w->redirected : 0;
        if (w->how == ICPP_AGENT_HOW_INT3 && w->redirected) {
            s->int3_calls++;
            s->calls_redirected += w->redirected;
        }
        if (w->how == ICPP_AGENT_HOW_JMP) {
            s->jmp_padded += w->padded;
            s->jmp_size_inferred += w->inferred;
            s->jmp_short += w->island != 0;
        }
        s->how[w->f->how]++;
        s->reason[w->f->reason]++;
    }
}

static void stats_add(icpp_agent_patch_stats *to, const icpp_agent_patch_stats *s)
{
    to->nfuncs += s->nfuncs;
    for (int i = 0; i < 3; i++)
        to->how[i] += s->how[i];
    for (int i = 0; i < ICPP_AGENT_R_COUNT; i++)
        to->reason[i] += s->reason[i];
    to->live |= s->live;
    to->stub_bytes += s->stub_bytes;
    to->evac_unacked += s->evac_unacked;
    to->jmp_padded += s->jmp_padded;
    to->jmp_size_inferred += s->jmp_size_inferred;
    to->jmp_short += s->jmp_short;
    to->int3_calls += s->int3_calls;
    to->calls_redirected += s->calls_redirected;
    to->calls_trapped += s->calls_trapped;
    to->evac_moved += s->evac_moved;
}

/* One module, under patch_lock.  A failure before anything is published
 * returns its error with funcs and the counts untouched; no stub memory
 * and failed writes return theirs with funcs and the counts filled. */
static int patch_locked(const char *name, icpp_agent_func *funcs, size_t n, unsigned flags,
                        icpp_agent_patch_stats *st, icpp_err *err)
{
    job j = { .name = name, .flags = flags, .n = n };
    j.wv = calloc(n ? n : 1, sizeof *j.wv);
    j.ws = malloc((n ? n : 1) * sizeof *j.ws);
    int rc = 0;
    if (!j.wv || !j.ws) {
        rc = icpp_err_set(err, ENOMEM, "%s: out of memory for %zu functions", name, n);
        goto out;
    }
    if (icpp_agent_maps_each(rows_cb, &j.rs) < 0 || j.rs.n == 0) {
        rc = icpp_err_set(err, EIO, "%s: cannot read /proc/self/maps", name);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        j.wv[i].f = &funcs[i];
        j.wv[i].addr = funcs[i].addr;
        j.wv[i].size = funcs[i].size;
        j.ws[i] = &j.wv[i];
    }
    qsort(j.ws, n, sizeof *j.ws, cmp_work);

    plan(&j);
    rc = place_region(&j, err);
    if (j.region) {
        if ((rc = emit_stubs(&j, err)) < 0 || (rc = publish_sites(&j, err)) < 0)
            goto out;
        rc = write_entries(&j, err);
        j.sites = NULL;           /* owned by the published table */
    }

    icpp_agent_patch_stats s;
    count_results(&j, &s);
    if (st)
        stats_add(st, &s);
    if (!(flags & ICPP_AGENT_PATCH_DRY_RUN))
        stats_add(&totals, &s);
out:
    free(j.sites);
    free(j.runs);
    free(j.redir);
    free(j.ws);
    free(j.wv);
    free(j.rs.v);
    return rc;
}

int icpp_agent_patch_module(const char *name, icpp_agent_func *funcs, size_t n, unsigned flags,
                            icpp_agent_patch_stats *st, icpp_err *err)
{
    if (!inited)
        return icpp_err_set(err, EINVAL, "%s: icpp_agent_init was not called", name);
    icpp_agent_enter_critical();
    pthread_mutex_lock(&patch_lock);
    int rc = patch_locked(name ? name : "?", funcs, n, flags, st, err);
    pthread_mutex_unlock(&patch_lock);
    icpp_agent_leave_critical();
    return rc;
}

int icpp_agent_patch_modules(const icpp_agent_module *mods, size_t nmods, unsigned flags,
                             icpp_agent_patch_stats *stats, icpp_err *err)
{
    for (size_t i = 0; i < nmods; i++) {
        int rc = icpp_agent_patch_module(mods[i].name, mods[i].funcs, mods[i].nfuncs, flags,
                                         stats, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}
