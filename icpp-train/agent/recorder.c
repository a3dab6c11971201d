/* recorder.c -- per-thread calling-context trees fed by function entries (signal-safe, no libc). */
#include "internal.h"
#include "sys.h"
#include "defs.h"           /* lib/defs.h: ICPP_MAIN_STACK_SPAN */

#include <sys/mman.h>

/* This file is compiled with -mgeneral-regs-only -fno-builtin
 * -fno-tree-loop-distribute-patterns -fno-stack-protector: it runs between
 * a function's first instruction and its prologue, with the caller's vector
 * registers live and possibly inside libc, so it calls nothing outside
 * itself and sys.c (checked by tests/run.sh with nm -u).
 *
 * Per entry at SP s (icpp_agent_record):
 *   1. pop shadow frames that have returned: entry SP <= s (covers
 *      longjmp, exceptions, tail calls), or whose return-address slot no
 *      longer holds the address seen at their entry (they returned into
 *      unpatched code, which later called deeper) -- unless the frame
 *      is the caller's, found by the return address;
 *   2. find or create the child of the top frame's node keyed by the
 *      function index (last-hit cache, then a per-thread hash table);
 *   3. count it, its height (base - s) and its call site (*s);
 *   4. push (s, *s, child).
 * Each result that depends on nothing but (caller node, return address,
 * height, function) goes into a per-thread hit cache with pointers to the
 * counts it incremented; tramp.S repeats steps 1-4 in assembly when the
 * cache has the entry: keep the two in step (offsets in asm_offsets.h are
 * asserted below).
 * Memory comes from mmap in growing chunks and is never freed, so walkers
 * may read a tree while its thread still runs. */

#define RA_CHECK_SPAN ((uint64_t)ICPP_RA_CHECK_SPAN) /* frames farther above s: another stack, not read */
#define HASH_INIT     1024u
#define IN_RECORDER   ((uint32_t)ICPP_IN_RECORDER) /* tls.busy bit: the recorder itself (critical sections count below it) */

#include <stddef.h>
#define OFF(t, f, v) _Static_assert(offsetof(t, f) == (v), #t "." #f " != " #v " (asm_offsets.h)")
OFF(icpp_agent_tls, thr, ICPP_TLS_THR);
OFF(icpp_agent_tls, busy, ICPP_TLS_BUSY);
OFF(icpp_agent_thread, top, ICPP_T_TOP);
OFF(icpp_agent_thread, frames, ICPP_T_FRAMES);
OFF(icpp_agent_thread, limit, ICPP_T_LIMIT);
OFF(icpp_agent_thread, base, ICPP_T_BASE);
OFF(icpp_agent_thread, max_top, ICPP_T_MAX_TOP);
OFF(icpp_agent_frame, sp, ICPP_F_SP);
OFF(icpp_agent_frame, ra, ICPP_F_RA);
OFF(icpp_agent_frame, node, ICPP_F_NODE);
_Static_assert(sizeof(icpp_agent_frame) == ICPP_F_SIZE, "frame size (asm_offsets.h)");
OFF(icpp_agent_node, func, ICPP_N_FUNC);
OFF(icpp_agent_node, count, ICPP_N_COUNT);
OFF(icpp_agent_node, last_hit, ICPP_N_LAST_HIT);
OFF(icpp_agent_node, hits, ICPP_N_HITS);
OFF(icpp_agent_hit, ra, ICPP_H_RA);
OFF(icpp_agent_hit, key, ICPP_H_KEY);
OFF(icpp_agent_hit, child, ICPP_H_CHILD);
OFF(icpp_agent_hit, hcount, ICPP_H_HCOUNT);
OFF(icpp_agent_hit, scount, ICPP_H_SCOUNT);
_Static_assert(sizeof(icpp_agent_hit) == ICPP_H_SIZE, "hit size (asm_offsets.h)");
_Static_assert(ICPP_AGENT_NODE_HITS == ICPP_N_HITS_COUNT, "hits per node (asm_offsets.h)");
OFF(icpp_agent_thread, hits, ICPP_T_HITS);
OFF(icpp_agent_thread, hit_mask, ICPP_T_HIT_MASK);
OFF(icpp_agent_hit2, parent, ICPP_T2_PARENT);
OFF(icpp_agent_hit2, hit, ICPP_T2_HIT);
_Static_assert(sizeof(icpp_agent_hit2) == 1u << ICPP_T2_SIZE_LOG2, "hit2 size (asm_offsets.h)");

__thread icpp_agent_tls icpp_agent_tls_ __attribute__((tls_model("initial-exec")));
icpp_agent_settings icpp_agent_cfg = {
    .max_depth = 1u << 20,
    .max_cct_bytes = 1ull << 30,
    .prefault = 64u << 10,
};

static icpp_agent_thread *volatile threads;   /* newest first */
static void (*fork_hook)(void);

/* ---- memory ------------------------------------------------------------- */

#define barrier() __atomic_signal_fence(__ATOMIC_SEQ_CST)

static void *map_anon(uint64_t size, int populate)
{
    long p = icpp_sys_mmap(0, size, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : MAP_NORESERVE));
    return icpp_sys_failed(p) ? 0 : (void *)p;
}

static uint64_t now_ns(void)
{
    struct { long sec, nsec; } ts = {0, 0};
    icpp_sys3(ICPP_SYS_clock_gettime, 1 /* CLOCK_MONOTONIC */, &ts, 0);
    return (uint64_t)ts.sec * 1000000000ull + (uint64_t)ts.nsec;
}

/* Make fd's file at least off + len bytes with blocks allocated, so that a
 * full disk fails here and not as SIGBUS at a later store into the
 * mapping; ftruncate where fallocate is not supported. */
static long file_reserve(long fd, uint64_t off, uint64_t len)
{
    long r = icpp_sys6(ICPP_SYS_fallocate, fd, 0, (long)off, (long)len, 0, 0);
    if (r == -95 /* EOPNOTSUPP */)
        r = icpp_sys3(ICPP_SYS_ftruncate, fd, off + len, 0);
    return r;
}

/* Would a file of `size` bytes exceed the process's RLIMIT_FSIZE?  (Growing
 * past it raises SIGXFSZ, which would kill the program.) */
static int over_fsize_limit(uint64_t size)
{
    struct { uint64_t cur, max; } rl = {~0ull, ~0ull};
    return icpp_sys6(ICPP_SYS_prlimit64, 0, 1 /* RLIMIT_FSIZE */, 0, (long)&rl, 0, 0) == 0 && size > rl.cur;
}

/* Map sz bytes of the live file at a->fsize, MAP_SHARED, pre-faulted; or 0.
 * The file is reopened each time (the program may close descriptors it did
 * not open). */
static char *live_map(icpp_agent_arena *a, uint64_t sz)
{
    if (over_fsize_limit(a->fsize + sz))
        return 0;
    long fd = icpp_sys6(ICPP_SYS_openat, -100 /* AT_FDCWD */, (long)a->path, 02000002 /* O_RDWR|O_CLOEXEC */,
                        0, 0, 0);
    if (fd < 0)
        return 0;
    long r = file_reserve(fd, a->fsize, sz);
    long p = r < 0 ? r : icpp_sys_mmap_fd(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, a->fsize);
    icpp_sys3(ICPP_SYS_close, fd, 0, 0);
    if (r < 0 || icpp_sys_failed(p))
        return 0;
    icpp_sys3(ICPP_SYS_madvise, p, sz, 23 /* MADV_POPULATE_WRITE */);
    return (char *)p;
}

/* The next chunk of a live arena: from the file, or -- when the file
 * cannot grow (no space, size limit) -- anonymous memory, so training goes
 * on and only what lands there is lost at a kill.  Its entry is committed
 * in the header (live.h) before anything can point into it. */
static char *live_chunk(icpp_agent_arena *a, uint64_t sz)
{
    icpp_live_header *h = a->live;
    uint32_t n = h->nchunks;
    char *p = n < h->max_chunks ? live_map(a, sz) : 0;
    uint64_t off = a->fsize;
    if (p)
        a->fsize += sz;
    else if ((p = map_anon(sz, 1)) != 0)
        off = ICPP_LIVE_ANON;
    else
        return 0;
    if (n < h->max_chunks) {
        h->chunk[n].vaddr = (uint64_t)(uintptr_t)p;
        h->chunk[n].len = sz;
        h->chunk[n].off = off;
        __atomic_store_n(&h->nchunks, n + 1, __ATOMIC_RELEASE);
    }
    return p;
}

/* n bytes of zeroed memory, 64-byte aligned (chunks are pages and every
 * size is rounded up to 64), or 0 past the cap. */
static void *arena_alloc(icpp_agent_arena *a, uint64_t n)
{
    n = (n + 63) & ~63ull;
    if ((uint64_t)(a->end - a->cur) < n) {
        uint64_t sz = a->chunk;
        while (sz < n)
            sz *= 2;
        if (a->used + sz > a->cap)
            return 0;
        char *p = a->live ? live_chunk(a, sz) : map_anon(sz, 1);
        if (!p)
            return 0;
        a->cur = p;
        a->end = p + sz;
        a->used += sz;
        if (a->chunk < (4u << 20))
            a->chunk *= 2;
    }
    void *r = a->cur;
    a->cur += n;
    return r;
}

/* Create t's live file (DIR/live.PID.TID.NS) and its header, all but the
 * root and the magic (live_publish); a's chunks then come from it.
 * Returns 0, or -1 (no live directory, name too long, file or mapping
 * refused): the tree then lives in anonymous memory. */
static int live_open(icpp_agent_thread *t, icpp_agent_arena *a)
{
    const char *dir = icpp_agent_cfg.live_dir;
    t->live_path[0] = 0;
    if (!dir)
        return -1;
    char *p = t->live_path;
    uint64_t created = now_ns();
    for (const char *q = dir; *q; q++) {
        if (p - t->live_path >= ICPP_AGENT_LIVE_PATH_MAX - 80)
            return t->live_path[0] = 0, -1;
        *p++ = *q;
    }
    const char *pre = "/live.";
    while (*pre)
        *p++ = *pre++;
    p = icpp_agent_utoa(p, (uint64_t)t->pid);
    *p++ = '.';
    p = icpp_agent_utoa(p, (uint64_t)t->tid);
    *p++ = '.';
    icpp_agent_utoa(p, created);
    /* Chunks double up to 4 MiB, then stay there. */
    uint64_t maxc = a->cap / (4u << 20) + 24;
    uint64_t hs = (sizeof(icpp_live_header) + maxc * sizeof(icpp_live_chunk) + 4095) & ~4095ull;
    if (over_fsize_limit(hs + icpp_agent_cfg.prefault))
        return t->live_path[0] = 0, -1;
    long fd = icpp_sys6(ICPP_SYS_openat, -100, (long)t->live_path, 02000302 /* O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC */,
                        0600, 0, 0);
    if (fd < 0)
        return t->live_path[0] = 0, -1;
    long r = file_reserve(fd, 0, hs);
    long hp = r < 0 ? r : icpp_sys_mmap_fd(0, hs, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, 0);
    icpp_sys3(ICPP_SYS_close, fd, 0, 0);
    if (r < 0 || icpp_sys_failed(hp))
        return t->live_path[0] = 0, -1;   /* an empty file without magic: recovery skips it */
    icpp_live_header *h = (icpp_live_header *)hp;
    h->version = ICPP_LIVE_VERSION;
    h->header_size = (uint32_t)hs;
    h->max_chunks = (uint32_t)maxc;
    h->pid = t->pid;
    h->tid = t->tid;
    h->created_ns = created;
    h->syms_ns = icpp_agent_cfg.syms_ns;
    h->base = t->base;
    h->base_kind = (uint32_t)t->base_kind;
    h->node_size = sizeof(icpp_agent_node);
    h->pairext_size = sizeof(icpp_agent_pairext);
    a->live = h;
    a->path = t->live_path;
    a->fsize = hs;
    return 0;
}

/* The root exists: the header is complete; the magic goes last. */
static void live_publish(icpp_agent_arena *a, icpp_agent_node *root)
{
    icpp_live_header *h = a->live;
    if (!h)
        return;
    h->root = (uint64_t)(uintptr_t)root;
    barrier();
    for (int i = 0; i < 8; i++)
        h->magic[i] = ICPP_LIVE_MAGIC[i];
    barrier();
}

/* ---- pair sets ------------------------------------------------------------ */

/* Slots fill in order and are never freed: the first free slot ends the
 * search.  key is written before count (count != 0 publishes the slot). */
static int slot_add(icpp_agent_pair *p, uint64_t key)
{
    if (p->count == 0) {
        p->key = key;
        __atomic_store_n(&p->count, 1, __ATOMIC_RELEASE);
        return 1;
    }
    if (p->key == key) {
        p->count++;
        return 1;
    }
    return 0;
}

/* Count key; returns where its count lives (slots never move), or 0 if no
 * memory was left for it (counted in ps->overflow). */
static __attribute__((noinline)) uint64_t *pairset_add_slow(icpp_agent_thread *t, icpp_agent_pairset *ps,
                                                            uint64_t key)
{
    for (int i = 0; i < ICPP_AGENT_INLINE_PAIRS; i++)
        if (slot_add(&ps->in[i], key))
            return &ps->in[i].count;
    /* Blocks: newest first; only the newest can have free slots. */
    for (icpp_agent_pairext *b = ps->ext; b; b = b->next)
        for (int i = 0; i < ICPP_AGENT_EXT_PAIRS; i++) {
            if (b->p[i].count == 0) {
                if (b != ps->ext)
                    break;
                b->p[i].key = key;
                __atomic_store_n(&b->p[i].count, 1, __ATOMIC_RELEASE);
                return &b->p[i].count;
            }
            if (b->p[i].key == key) {
                b->p[i].count++;
                return &b->p[i].count;
            }
        }
    icpp_agent_pairext *b = arena_alloc(&t->arena, sizeof *b);
    if (!b) {
        ps->overflow++;
        return 0;
    }
    b->p[0].key = key;
    b->p[0].count = 1;
    b->next = ps->ext;
    __atomic_store_n(&ps->ext, b, __ATOMIC_RELEASE);
    return &b->p[0].count;
}

static inline uint64_t *pairset_add(icpp_agent_thread *t, icpp_agent_pairset *ps, uint64_t key)
{
    if (__builtin_expect(ps->in[0].key == key && ps->in[0].count != 0, 1)) {
        ps->in[0].count++;
        return &ps->in[0].count;
    }
    return pairset_add_slow(t, ps, key);
}

/* ---- hit cache (read by tramp.S) ------------------------------------------- */

/* Remember that parent called child from ra at height (func = child's
 * function).  Entries are written only by their own thread, which cannot
 * be in the fast path meanwhile: plain stores. */
static inline icpp_agent_hit2 *hit2_slot(const icpp_agent_thread *t, const icpp_agent_node *parent,
                                         uint64_t ra, uint64_t key)
{
    uint64_t h = (ra ^ (uint64_t)(uintptr_t)parent ^ key) * (uint64_t)ICPP_HIT_MUL;
    return &t->hits[(h >> ICPP_HIT_SHIFT) & t->hit_mask];
}

/* Called every 2^14 slow entries: if more than half of them were misses
 * of calls recorded before (the caches were too small, not the call new),
 * double the thread's table (up to MAX_BITS), moving what it holds.  Only
 * this thread uses it, and not meanwhile. */
static void hit2_maybe_grow(icpp_agent_thread *t)
{
    uint64_t conflicts = t->hit_conflicts;
    t->hit_conflicts = 0;
    if (conflicts * 2 <= 1u << 14 || t->hit_mask + 1 >= (1ull << ICPP_AGENT_HIT2_MAX_BITS))
        return;
    uint64_t n = (t->hit_mask + 1) * 2, omask = t->hit_mask;
    icpp_agent_hit2 *nh = map_anon(n * sizeof *nh, 0), *old = t->hits;
    if (!nh)
        return;
    t->hits = nh;
    t->hit_mask = n - 1;
    for (uint64_t i = 0; i <= omask; i++)
        if (old[i].parent)
            *hit2_slot(t, old[i].parent, old[i].hit.ra, old[i].hit.key) = old[i];
    icpp_sys_munmap(old, (omask + 1) * sizeof *old);
}

static inline void hit_put(icpp_agent_thread *t, icpp_agent_node *parent, uint64_t ra, uint64_t height,
                           uint32_t func, icpp_agent_node *child, uint64_t *hc, uint64_t *sc)
{
    if ((int64_t)height != (int64_t)(int32_t)height)
        return;
    /* Two slots from h = ra * MUL (tramp.S looks in both): an empty one or
     * the first, whose entry moves to the second (the newest stays first). */
    uint64_t h = ra * (uint64_t)ICPP_HIT_MUL;
    icpp_agent_hit *p = &parent->hits[h >> (64 - ICPP_N_HITS_LOG2)];
    icpp_agent_hit *q = &parent->hits[(h >> (64 - 2 * ICPP_N_HITS_LOG2)) & (ICPP_AGENT_NODE_HITS - 1)];
    uint64_t key = (uint64_t)(uint32_t)height << 32 | func;
    icpp_agent_hit *e = p;
    if (p->ra && !(p->ra == ra && p->key == key) && p != q) {
        if (q->ra)
            *q = *p;
        else
            e = q;
    }
    e->ra = ra;
    e->key = key;
    e->child = child;
    e->hcount = hc;
    e->scount = sc;
    icpp_agent_hit2 *e2 = hit2_slot(t, parent, ra, key);
    e2->parent = parent;
    e2->hit = *e;
}

/* ---- child lookup ------------------------------------------------------------ */

static inline uint64_t hash_of(const icpp_agent_node *parent, uint32_t func)
{
    uint64_t h = ((uint64_t)(uintptr_t)parent >> 4) * 0x9e3779b97f4a7c15ull;
    return (h ^ (h >> 29)) + func * 0xc2b2ae3d27d4eb4full;
}

/* Double the table; keeps the old one if memory runs out. */
static void hash_grow(icpp_agent_thread *t)
{
    uint64_t nslots = (t->hash_mask + 1) * 2;
    icpp_agent_node **nh = map_anon(nslots * sizeof *nh, 1);
    if (!nh)
        return;
    for (uint64_t i = 0; i <= t->hash_mask; i++) {
        icpp_agent_node *n = t->hash[i];
        if (!n)
            continue;
        uint64_t j = hash_of(n->parent, n->func) & (nslots - 1);
        while (nh[j])
            j = (j + 1) & (nslots - 1);
        nh[j] = n;
    }
    icpp_sys_munmap(t->hash, (t->hash_mask + 1) * sizeof *nh);
    t->hash = nh;
    t->hash_mask = nslots - 1;
}

/* A call from a recorded node found no memory for its node (the tree
 * memory is full): count the path once (a set of 65536 hashes; when it
 * fills, lost_more says there were more). */
static __attribute__((noinline)) void lost_note(icpp_agent_thread *t, icpp_agent_node *parent, uint32_t func)
{
    if (!t->lost) {
        t->lost = map_anon(ICPP_AGENT_LOST_SLOTS * sizeof *t->lost, 0);
        if (!t->lost) {
            t->lost_more = 1;
            return;
        }
    }
    uint64_t k = hash_of(parent, func) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)parent ^ func;
    k |= 1;
    uint64_t j = k & (ICPP_AGENT_LOST_SLOTS - 1);
    for (uint32_t probe = 0; probe < 64; probe++, j = (j + 1) & (ICPP_AGENT_LOST_SLOTS - 1)) {
        if (t->lost[j] == k)
            return;
        if (!t->lost[j]) {
            if (t->lost_paths * 4 >= ICPP_AGENT_LOST_SLOTS * 3ull) {
                t->lost_more = 1;       /* full enough: stop adding */
                return;
            }
            t->lost[j] = k;
            t->lost_paths++;
            return;
        }
    }
    t->lost_more = 1;
}

static void lost_reset(icpp_agent_thread *t)
{
    if (t->lost)
        icpp_sys_munmap(t->lost, ICPP_AGENT_LOST_SLOTS * sizeof *t->lost);
    t->lost = 0;
    t->lost_paths = 0;
    t->lost_more = 0;
}

static __attribute__((noinline)) icpp_agent_node *child_slow(icpp_agent_thread *t,
                                                             icpp_agent_node *parent, uint32_t func)
{
    if (parent == &t->overflow)
        return parent;
    uint64_t j = hash_of(parent, func) & t->hash_mask;
    icpp_agent_node *n;
    while ((n = t->hash[j]) != 0) {
        if (n->parent == parent && n->func == func) {
            parent->last_hit = n;
            return n;
        }
        j = (j + 1) & t->hash_mask;
    }
    if ((t->hash_used + 1) * 2 > t->hash_mask + 1) {
        hash_grow(t);
        if ((t->hash_used + 2) > t->hash_mask)
            return &t->overflow;
        j = hash_of(parent, func) & t->hash_mask;
        while (t->hash[j])
            j = (j + 1) & t->hash_mask;
    }
    n = arena_alloc(&t->arena, sizeof *n);
    if (!n)
        return &t->overflow;
    n->func = func;
    n->parent = parent;
    n->next_sibling = parent->first_child;
    __atomic_store_n(&parent->first_child, n, __ATOMIC_RELEASE);
    t->hash[j] = n;
    t->hash_used++;
    t->nodes++;
    parent->last_hit = n;
    return n;
}

/* ---- threads ----------------------------------------------------------------- */

/* A new tree for t: its arena (a live file when a live directory is set,
 * else anonymous memory) and root node.  Returns 0 or -1 (no memory). */
static int tree_new(icpp_agent_thread *t)
{
    icpp_agent_arena a = {
        .chunk = icpp_agent_cfg.prefault,
        .cap = icpp_agent_cfg.max_cct_bytes,
    };
    if (live_open(t, &a) < 0)
        a.live = 0;
    icpp_agent_node *root = arena_alloc(&a, sizeof *root);
    if (!root)
        return -1;
    root->func = ICPP_AGENT_FUNC_ROOT;
    live_publish(&a, root);
    t->arena = a;
    t->root = root;
    return 0;
}

static icpp_agent_thread *thread_setup(uint64_t sp)
{
    /* The thread record itself is private memory: only the tree (nodes
     * and pair blocks) goes to the live file, so that a fork child's
     * record cannot write into its parent's file (icpp_agent_fork_child). */
    icpp_agent_thread *t = map_anon((sizeof *t + 4095) & ~4095ul, 1);
    if (!t)
        return 0;
    t->tid = icpp_sys_gettid();
    t->pid = icpp_sys_getpid();
    /* Base: startstack if sp is on the stack that holds it (the main
     * thread, or a forked child of it), else the top of sp's mapping.
     * Span: how far below the base the thread's own stack reaches; an entry
     * outside it runs on a foreign stack (docs/definitions.md) -- the main
     * stack cannot outgrow RLIMIT_STACK, a thread's stack its mapping. */
    icpp_agent_maprow row;
    t->span = ~0ull;
    if (icpp_agent_maps_find(sp, &row) == 0) {
        uint64_t ss = icpp_agent_cfg.startstack;
        if (ss && ss >= row.start && ss < row.end) {
            uint64_t rl[2] = {0, 0};
            t->base = ss;
            t->base_kind = ICPP_AGENT_BASE_STARTSTACK;
            t->span = ICPP_MAIN_STACK_SPAN;
            if (icpp_sys3(97 /* getrlimit */, 3 /* RLIMIT_STACK */, rl, 0) == 0 && rl[0] && rl[0] < t->span)
                t->span = rl[0];
        } else {
            t->base = row.end;
            t->base_kind = ICPP_AGENT_BASE_MAPTOP;
            t->span = row.end - row.start;
        }
    }
    uint64_t nframes = icpp_agent_cfg.max_depth + 1;
    t->frames = map_anon(nframes * sizeof(icpp_agent_frame), 0);
    t->hash = map_anon(HASH_INIT * sizeof *t->hash, 1);
    t->hit_mask = (1u << ICPP_AGENT_HIT2_MIN_BITS) - 1;
    t->hits = map_anon((t->hit_mask + 1) * sizeof *t->hits, 0);
    if (!t->frames || !t->hash || !t->hits || tree_new(t) < 0)
        return 0;   /* leaks a few pages once; the thread is then never recorded */
    uint64_t pf = icpp_agent_cfg.prefault;
    if (pf > nframes * sizeof(icpp_agent_frame))
        pf = nframes * sizeof(icpp_agent_frame);
    icpp_sys3(ICPP_SYS_madvise, t->frames, (pf + 4095) & ~4095ul, 23 /* MADV_POPULATE_WRITE */);
    t->hash_mask = HASH_INIT - 1;
    t->limit = t->frames + nframes;
    t->frames[0].sp = ~0ull;
    t->frames[0].node = t->root;
    t->top = t->frames;
    t->max_top = t->frames;
    t->overflow.func = ICPP_AGENT_FUNC_OVERFLOW;
    icpp_agent_thread *old = threads;
    do
        t->next = old;
    while (!__atomic_compare_exchange_n(&threads, &old, t, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    return t;
}

/* ---- the entry hook ---------------------------------------------------------- */

/* Signal-return trampolines (glibc's __restore_rt): a function whose return
 * address lies in one is a signal handler, and its entry SP points at the
 * kernel's rt_sigframe, whose ucontext holds the interrupted %rsp.  Frames
 * entered below that SP had returned before the signal came, even if their
 * return-address slot (in the red zone the kernel skips) still looks live:
 * without this, raise -> pthread_kill -> getpid (returned) -> tgkill left
 * getpid on the path of every handler it delivered. */
#define MAX_SIGRET 16
#define SIGFRAME_RSP 168    /* pretcode 8 + uc_flags, uc_link, uc_stack 40 + r8..rcx 120 */
static struct { uint64_t lo, hi; } sigret[MAX_SIGRET];
static volatile uint32_t nsigret;

void icpp_agent_add_sigreturn(uint64_t lo, uint64_t hi)
{
    uint32_t n = nsigret;
    if (n < MAX_SIGRET) {
        sigret[n].lo = lo;
        sigret[n].hi = hi;
        __atomic_store_n(&nsigret, n + 1, __ATOMIC_RELEASE);
    }
}

static inline uint64_t interrupted_sp(uint64_t ra, uint64_t s)
{
    uint32_t n = __atomic_load_n(&nsigret, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < n; i++)
        if (ra >= sigret[i].lo && ra < sigret[i].hi)
            return *(const uint64_t *)(s + SIGFRAME_RSP);
    return 0;
}

/* Hooked functions' runtime ranges, sorted (published whole by the front
 * end; a dlopen publishes a new array).  A return address inside a hooked
 * function names the caller: if the top shadow frame is another function,
 * it returned -- its return-address slot can survive when the caller then
 * reserves stack for arguments without writing that slot. */
static const icpp_agent_frange *volatile franges;
static volatile size_t nfranges;

void icpp_agent_set_ranges(const icpp_agent_frange *v, size_t n)
{
    __atomic_store_n(&nfranges, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&franges, v, __ATOMIC_RELEASE);
    __atomic_store_n(&nfranges, n, __ATOMIC_RELEASE);
}

static inline int64_t hooked_at(uint64_t a)
{
    size_t n = __atomic_load_n(&nfranges, __ATOMIC_ACQUIRE);
    const icpp_agent_frange *v = __atomic_load_n(&franges, __ATOMIC_ACQUIRE);
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo && a < v[lo - 1].hi) ? (int64_t)v[lo - 1].index : -1;
}

static inline void record(icpp_agent_thread *t, uint32_t func, uint64_t s)
{
    /* On a foreign stack the height means nothing: record nothing, keep the
     * shadow stack of the thread's own stack for when it switches back.
     * (The trampoline's cache holds only heights recorded here.) */
    if (__builtin_expect(t->base - s >= t->span, 0)) {
        t->dropped_foreign++;
        return;
    }
    uint64_t ra = *(const uint64_t *)s;
    uint64_t isp = interrupted_sp(ra, s);       /* 0 unless a signal handler */
    /* ra - 1: a call to a noreturn function can be its caller's last
     * instruction, so ra is the next function's first byte. */
    int64_t caller = hooked_at(ra - 1);
    /* The result depends on nothing but (node, ra, height, func) -- the
     * hit cache's key -- unless this is a signal handler or a caller
     * check moves the parent. */
    int cacheable = isp == 0;
    icpp_agent_frame *f = t->top;
    while (f != t->frames) {
        if (f->sp > s && f->sp >= isp) {
            if (f->sp - s >= RA_CHECK_SPAN || *(const uint64_t *)f->sp == f->ra)
                break;
            /* The caller's frame is live even when its return slot changed:
             * libgcc's unwinder copies the handler frame's registers into
             * its own save slots, the return address too, and then calls
             * _Unwind_DebugHook -- without this the hook's path skipped
             * _Unwind_RaiseException (tramp.S pops such a frame: a miss). */
            if (caller >= 0 && f->node->func == (uint32_t)caller) {
                cacheable = 0;
                break;
            }
        }
        f--;
    }
    if (f != t->frames) {
        if (caller >= 0 && (uint32_t)caller != f->node->func) {
            cacheable = 0;
            /* Drop the returned frames above the caller's, if it is on the stack. */
            icpp_agent_frame *g = f;
            for (int k = 0; g != t->frames && g->node->func != (uint32_t)caller && k < 64; k++)
                g--;
            if (g != t->frames && g->node->func == (uint32_t)caller)
                f = g;
        }
    }
    if (__builtin_expect(f + 1 == t->limit, 0)) {
        t->top = f;
        t->dropped_depth++;
        return;
    }
    icpp_agent_node *parent = f->node, *c = parent->last_hit;
    if (__builtin_expect(!c || c->func != func, 0))
        c = child_slow(t, parent, func);
    c->count++;
    if (__builtin_expect(c != &t->overflow, 1)) {
        uint64_t *hc = pairset_add(t, &c->heights, t->base - s);
        uint64_t *sc = pairset_add(t, &c->sites, ra);
        if (cacheable && hc && sc) {
            t->hit_conflicts += *hc > 1 && *sc > 1;
            hit_put(t, parent, ra, t->base - s, func, c, hc, sc);
        }
    } else {
        t->node_overflow++;
        if (parent != &t->overflow)
            lost_note(t, parent, func);
    }
    f++;
    f->sp = s;
    f->ra = ra;
    f->node = c;
    t->top = f;
    if (f > t->max_top)
        t->max_top = f;
}

void icpp_agent_record(uint32_t func, uint64_t entry_sp)
{
    icpp_agent_tls *tls = &icpp_agent_tls_;
    icpp_agent_thread *t = tls->thr;
    if (__builtin_expect(tls->busy != 0 || t == 0, 0)) {
        if (tls->busy) {
            if (t) {
                if (tls->busy & IN_RECORDER)
                    t->dropped_reentrant++;
                else
                    t->dropped_critical++;
            }
            return;
        }
        if (tls->failed)
            return;
        tls->busy = IN_RECORDER;
        barrier();
        t = thread_setup(entry_sp);
        barrier();
        tls->busy = 0;
        if (!t) {
            tls->failed = 1;
            return;
        }
        tls->thr = t;
    }
    tls->busy = IN_RECORDER;
    barrier();
    if ((++t->slow & 0x3fff) == 0)
        hit2_maybe_grow(t);
    record(t, func, entry_sp);
    barrier();
    tls->busy = 0;
}

/* ---- API: critical sections, fork ------------------------------------------------ */

void icpp_agent_enter_critical(void)
{
    icpp_agent_tls_.busy++;
    barrier();
}

void icpp_agent_leave_critical(void)
{
    barrier();
    icpp_agent_tls_.busy--;
}

void icpp_agent_set_fork_child_hook(void (*fn)(void))
{
    fork_hook = fn;
}

static void zero_pairs(icpp_agent_pairset *ps)
{
    for (int i = 0; i < ICPP_AGENT_INLINE_PAIRS; i++)
        ps->in[i].count = 0;
    for (icpp_agent_pairext *x = ps->ext; x; x = x->next)
        for (int i = 0; i < ICPP_AGENT_EXT_PAIRS; i++)
            x->p[i].count = 0;
    ps->overflow = 0;
}

void icpp_agent_thread_reset_counts(const icpp_agent_thread *ct)
{
    icpp_agent_thread *t = (icpp_agent_thread *)ct;
    if (!t)
        return;
    /* Preorder walk without a stack: child, else sibling, else climb. */
    icpp_agent_node *n = t->root;
    while (n) {
        n->count = 0;
        zero_pairs(&n->heights);
        zero_pairs(&n->sites);
        /* a zero count marks a free pair slot: no hit may point to one */
        for (int i = 0; i < ICPP_AGENT_NODE_HITS; i++)
            n->hits[i].ra = 0;
        if (n->first_child) {
            n = n->first_child;
            continue;
        }
        while (n && n != t->root && !n->next_sibling)
            n = n->parent;
        n = (n && n != t->root) ? n->next_sibling : NULL;
    }
    icpp_sys3(ICPP_SYS_madvise, t->hits, (t->hit_mask + 1) * sizeof *t->hits, 4 /* MADV_DONTNEED */);
    t->overflow.count = 0;
    t->slow = t->hit_conflicts = 0;
    t->dropped_critical = t->dropped_reentrant = t->dropped_depth = t->node_overflow = 0;
    lost_reset(t);
}

/* Fork child: t (the forking thread) gets a new tree -- a new live file --
 * holding only the path on its shadow stack, with zero counts; the old
 * tree is the parent's (with live files, still shared with it: never
 * written here again).  Caches pointing into the old tree are emptied.
 * Returns 0, or -1 if no memory was left for the new tree. */
static int thread_reroot(icpp_agent_thread *t)
{
    t->pid = icpp_sys_getpid();
    t->tid = icpp_sys_gettid();
    icpp_agent_node **nh = map_anon(HASH_INIT * sizeof *nh, 1);
    if (!nh || tree_new(t) < 0)
        return -1;
    icpp_sys_munmap(t->hash, (t->hash_mask + 1) * sizeof *t->hash);
    t->hash = nh;
    t->hash_mask = HASH_INIT - 1;
    t->hash_used = 0;
    t->nodes = 0;
    icpp_sys3(ICPP_SYS_madvise, t->hits, (t->hit_mask + 1) * sizeof *t->hits, 4 /* MADV_DONTNEED */);
    t->overflow.count = 0;
    t->overflow.last_hit = 0;
    /* Rebuild the live path: frame i's node becomes the new tree's child
     * of frame i-1's for the same function (a node's function never
     * changes once published, so the parent's old nodes read safely). */
    icpp_agent_node *parent = t->root;
    t->frames[0].node = parent;
    for (icpp_agent_frame *f = t->frames + 1; f <= t->top; f++) {
        if (parent == &t->overflow || f->node == &t->overflow)
            parent = &t->overflow;
        else
            parent = child_slow(t, parent, f->node->func);
        f->node = parent;
    }
    t->max_top = t->top;
    t->slow = t->hit_conflicts = 0;
    t->dropped_critical = t->dropped_reentrant = t->dropped_depth = t->node_overflow = 0;
    lost_reset(t);
    return 0;
}

/* pthread_atfork handlers (registered by icpp_agent_init; its child
 * handler first zeroes the int3 sites' trap counts, trap.c, then calls
 * icpp_agent_fork_child).  From prepare to the parent/child handler the
 * forking thread records nothing, so the child's copy of its record is the
 * state at the fork. */
ICPP_AGENT_HIDDEN void icpp_agent_fork_prepare(void)
{
    icpp_agent_enter_critical();
}

ICPP_AGENT_HIDDEN void icpp_agent_fork_parent(void)
{
    icpp_agent_leave_critical();
}

ICPP_AGENT_HIDDEN void icpp_agent_fork_child(void)
{
    icpp_agent_tls *tls = &icpp_agent_tls_;
    icpp_agent_thread *self = tls->thr;
    for (icpp_agent_thread *t = threads; t; t = t->next)
        if (t != self)
            t->inherited = 1;
    if (fork_hook)
        fork_hook();
    if (self && thread_reroot(self) < 0) {
        self->inherited = 1;    /* its tree is the parent's: never written */
        tls->thr = 0;
        tls->failed = 1;
    }
    icpp_agent_leave_critical();
}

void icpp_agent_set_live_tag(uint64_t syms_ns)
{
    icpp_agent_cfg.syms_ns = syms_ns;
}

/* ---- API: walking -------------------------------------------------------------- */

const icpp_agent_thread *icpp_agent_thread_first(void)
{
    return __atomic_load_n(&threads, __ATOMIC_ACQUIRE);
}

const icpp_agent_thread *icpp_agent_thread_next(const icpp_agent_thread *t)
{
    return t->next;
}

const icpp_agent_thread *icpp_agent_thread_self(void)
{
    return icpp_agent_tls_.thr;
}

void icpp_agent_thread_get_info(const icpp_agent_thread *t, icpp_agent_thread_info *o)
{
    o->tid = t->tid;
    o->pid = t->pid;
    o->inherited = t->inherited;
    o->base_kind = t->base_kind;
    o->base = t->base;
    o->dropped_foreign = t->dropped_foreign;
    o->entries_slow = t->slow;
    o->nodes = t->nodes;
    o->cct_bytes = t->arena.used;
    o->max_depth_seen = (uint32_t)(t->max_top - t->frames);
    o->dropped_critical = t->dropped_critical;
    o->dropped_reentrant = t->dropped_reentrant;
    o->dropped_depth = t->dropped_depth;
    o->node_overflow = t->node_overflow;
    o->lost_paths = t->lost_paths;
    o->lost_paths_more = t->lost_more;
    /* Sums need a tree walk (the fast path counts only in the nodes); done
     * here, off the hot path. */
    uint64_t po = 0, en = t->overflow.count + t->dropped_depth;
    const icpp_agent_node *n = t->root->first_child;
    while (n) {
        po += n->heights.overflow + n->sites.overflow;
        en += n->count;
        if (n->first_child) {
            n = n->first_child;
            continue;
        }
        while (n && !n->next_sibling)
            n = n->parent == t->root ? 0 : n->parent;
        if (n)
            n = n->next_sibling;
    }
    o->pair_overflow = po;
    o->entries = en;
    o->live_file = t->live_path;
}

const icpp_agent_node *icpp_agent_thread_root(const icpp_agent_thread *t)
{
    return t->root;
}

uint32_t icpp_agent_node_func(const icpp_agent_node *n) { return n->func; }
uint64_t icpp_agent_node_count(const icpp_agent_node *n) { return n->count; }
const icpp_agent_node *icpp_agent_node_parent(const icpp_agent_node *n) { return n->parent; }

const icpp_agent_node *icpp_agent_node_first_child(const icpp_agent_node *n)
{
    return __atomic_load_n(&n->first_child, __ATOMIC_ACQUIRE);
}

const icpp_agent_node *icpp_agent_node_next_sibling(const icpp_agent_node *n)
{
    return n->next_sibling;
}

static size_t pairs_copy(const icpp_agent_pairset *ps, icpp_agent_pair *out, size_t max,
                         uint64_t *overflow)
{
    size_t k = 0;
    for (int i = 0; i < ICPP_AGENT_INLINE_PAIRS; i++) {
        uint64_t c = __atomic_load_n(&ps->in[i].count, __ATOMIC_ACQUIRE);
        if (!c)
            break;
        if (k < max) {
            out[k].key = ps->in[i].key;
            out[k].count = c;
        }
        k++;
    }
    for (const icpp_agent_pairext *b = __atomic_load_n(&ps->ext, __ATOMIC_ACQUIRE); b; b = b->next)
        for (int i = 0; i < ICPP_AGENT_EXT_PAIRS; i++) {
            uint64_t c = __atomic_load_n(&b->p[i].count, __ATOMIC_ACQUIRE);
            if (!c)
                break;
            if (k < max) {
                out[k].key = b->p[i].key;
                out[k].count = c;
            }
            k++;
        }
    if (overflow)
        *overflow = ps->overflow;
    return k;
}

size_t icpp_agent_node_heights(const icpp_agent_node *n, icpp_agent_pair *out, size_t max,
                               uint64_t *overflow)
{
    return pairs_copy(&n->heights, out, max, overflow);
}

size_t icpp_agent_node_sites(const icpp_agent_node *n, icpp_agent_pair *out, size_t max,
                             uint64_t *overflow)
{
    return pairs_copy(&n->sites, out, max, overflow);
}
