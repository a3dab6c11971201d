/* fuzz_basevote.c -- libFuzzer harness for lib/basevote.c: a path map's heights and sampled entry SPs from the input, the vote checked against a model.
 *
 * A perf.data has no thread bases; icpp-resolve infers them by voting over
 * the path map's training heights and the samples' entry SPs.  Both come
 * from files the user gives it (or someone else made), so the harness builds
 * both from the input:
 *   - a path map through the pathmap API: up to 11 functions, up to 39
 *     nodes, each with a few heights (small multiples of 8 mostly, and also
 *     negative ones, arbitrary 64-bit ones, counts of 0 and near 2^64, and
 *     nodes with more than ICPP_BV_MAX_HEIGHTS heights);
 *   - samples of up to 48 threads (main threads and others: pid == tid or
 *     not; four exec generations), each in a function of the map, outside it
 *     (-1) or out of range, at an entry SP that is one of a few bases minus
 *     a trained height (so votes agree), minus any height, 0, or anything;
 *   - the minimum support (the default, fractions, 0, > 1, negative, NaN, inf).
 *
 * Properties, checked against a model written from the contract in
 * basevote.h (by sorting, where basevote.c hashes):
 *   - the threads are the distinct (pid, tid, gen) added, sorted, each
 *     found by icpp_basevote_find; samples, voters and recorded as added;
 *   - stage 1 nominates the 8 most voted bases (votes, then the lower base)
 *     among aligned bases above the entry SP from each function's 64 most
 *     frequent heights; the winner and runner-up are the best two nominees
 *     by (support, votes, lower base), with their exact support counts;
 *   - bounds: runner_votes <= votes <= voters <= samples; support and
 *     runner_support in [0, 1] and = votes / voters; bases aligned (16 bytes
 *     for a main thread, a page otherwise); accepted exactly when support >=
 *     the minimum and votes > runner_votes;
 *   - icpp_basevote_describe writes a terminated line into any buffer size;
 *   - icpp_basevote_apply gives a sample without a base its thread's
 *     accepted base, height = base - entry SP, and touches nothing else. */
#include "basevote.h"
#include "fuzz.h"
#include "vec.h"

#include <math.h>

#define MAX_FUNCS   11
#define MAX_NODES   39
#define MAX_SAMPLES 2048
#define NCAND       8       /* basevote.c: nominees per thread */
#define CAP_HEIGHTS 80      /* a "deep" node: more heights than ICPP_BV_MAX_HEIGHTS */

typedef struct hc {
    int64_t  h;
    uint64_t count;
} hc;

/* The model of the map: per function, its distinct heights sorted by height
 * (the trained CIDs), and the voting ones (most frequent first, at most
 * ICPP_BV_MAX_HEIGHTS). */
typedef struct mfunc {
    hc     *all;
    size_t  nall, cap;
    int64_t vote[ICPP_BV_MAX_HEIGHTS];
    size_t  nvote;
} mfunc;

typedef struct msample {
    uint32_t thr;
    int64_t  func;
    uint64_t entry_sp;
} msample;

typedef struct mthread {
    uint32_t pid, tid, gen;
    uint64_t samples, voters, recorded;
} mthread;

static int cmp_h(const void *a, const void *b)
{
    const hc *x = a, *y = b;
    return (x->h > y->h) - (x->h < y->h);
}

static int cmp_count(const void *a, const void *b)
{
    const hc *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return cmp_h(a, b);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int trained(const mfunc *mf, int64_t h)
{
    hc key = {h, 0};
    return mf->nall && bsearch(&key, mf->all, mf->nall, sizeof key, cmp_h) != NULL;
}

/* The model's functions from the map as built (heights of a function summed over its nodes). */
static void model_map(const icpp_pathmap *pm, mfunc *mf, uint32_t nf)
{
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(pm); i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        FUZZ_CHECK(n->func < nf, "node %u: function %u", i, n->func);
        mfunc *f = &mf[n->func];
        for (uint32_t k = 0; k < n->nheights; k++) {
            FUZZ_CHECK(icpp_vec_reserve((void **)&f->all, &f->cap, f->nall + 1, sizeof *f->all, 16) == 0,
                       "out of memory");
            f->all[f->nall++] = (hc){n->heights[k].height, n->heights[k].count};
        }
    }
    for (uint32_t i = 0; i < nf; i++) {
        mfunc *f = &mf[i];
        if (!f->nall)
            continue;
        qsort(f->all, f->nall, sizeof *f->all, cmp_h);
        size_t w = 0;
        for (size_t k = 0; k < f->nall; k++) {
            if (w && f->all[w - 1].h == f->all[k].h)
                f->all[w - 1].count += f->all[k].count;
            else
                f->all[w++] = f->all[k];
        }
        f->nall = w;
        hc *byc = (hc *)fuzz_dup((const uint8_t *)f->all, w * sizeof *byc);
        qsort(byc, w, sizeof *byc, cmp_count);
        for (size_t k = 0; k < w && k < ICPP_BV_MAX_HEIGHTS; k++)
            f->vote[f->nvote++] = byc[k].h;
        free(byc);
    }
}

typedef struct cand {
    uint64_t base, votes, exact;
} cand;

/* basevote.c's candidate order: support, then votes, then the lower base. */
static int beats(const cand *a, const cand *b)
{
    if (a->exact != b->exact)
        return a->exact > b->exact;
    if (a->votes != b->votes)
        return a->votes > b->votes;
    return a->base < b->base;
}

static int cmp_votes(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->votes != y->votes)
        return x->votes > y->votes ? -1 : 1;
    return (x->base > y->base) - (x->base < y->base);
}

/* The winner and runner-up of thread t by the contract: w, r (base 0: none). */
static void model_vote(const mfunc *mf, uint32_t nf, const msample *s, size_t ns, uint32_t t, const mthread *th,
                       cand *w, cand *r)
{
    uint64_t align = th->pid == th->tid ? 16 : 4096;
    uint64_t *b = NULL;
    size_t nb = 0, cap = 0;
    for (size_t i = 0; i < ns; i++) {
        if (s[i].thr != t || s[i].func < 0 || (uint64_t)s[i].func >= nf || !s[i].entry_sp)
            continue;
        const mfunc *f = &mf[s[i].func];
        for (size_t k = 0; k < f->nvote; k++) {
            uint64_t base = s[i].entry_sp + (uint64_t)f->vote[k];
            if (base % align || base <= s[i].entry_sp)
                continue;
            FUZZ_CHECK(icpp_vec_reserve((void **)&b, &cap, nb + 1, sizeof *b, 64) == 0, "out of memory");
            b[nb++] = base;
        }
    }
    if (nb)
        qsort(b, nb, sizeof *b, cmp_u64);
    cand *c = malloc((nb ? nb : 1) * sizeof *c);
    FUZZ_CHECK(c != NULL, "out of memory");
    size_t nc = 0;
    for (size_t i = 0; i < nb; i++) {
        if (nc && c[nc - 1].base == b[i])
            c[nc - 1].votes++;
        else
            c[nc++] = (cand){b[i], 1, 0};
    }
    free(b);
    if (nc)
        qsort(c, nc, sizeof *c, cmp_votes);
    if (nc > NCAND)
        nc = NCAND;
    for (size_t k = 0; k < nc; k++)
        for (size_t i = 0; i < ns; i++)
            if (s[i].thr == t && s[i].func >= 0 && (uint64_t)s[i].func < nf && s[i].entry_sp &&
                trained(&mf[s[i].func], (int64_t)(c[k].base - s[i].entry_sp)))
                c[k].exact++;
    *w = *r = (cand){0, 0, 0};
    for (size_t k = 0; k < nc; k++) {
        if (!w->base || beats(&c[k], w)) {
            *r = *w;
            *w = c[k];
        } else if (!r->base || beats(&c[k], r)) {
            *r = c[k];
        }
    }
    free(c);
}

static const uint64_t bases[8] = {
    0x7ffc00001230ull,      /* a main thread's startstack: 16-byte aligned */
    0x7f0000200000ull,      /* another thread's mapping top: a page */
    0x1000ull,              /* low: entry SPs wrap below 0 */
    0xfffffffffffff000ull,  /* high: bases wrap past 2^64 */
    0x7ffc00001238ull,      /* aligned to 8 only: never a candidate */
    0x7f0000210000ull,
    0x7ffc00011230ull,
    0x400ull,
};

static double min_support_of(uint8_t b)
{
    switch (b % 10) {
    case 0: return 0;           /* the default */
    case 1: return 1;
    case 2: return 0.5;
    case 3: return NAN;
    case 4: return INFINITY;
    case 5: return -1;
    case 6: return 1e-300;
    case 7: return 1.5;
    default: return b / 255.0;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_reader in = {data, size};
    uint32_t nf = (uint32_t)(fuzz_take(&in, 1) % (MAX_FUNCS + 1));
    uint32_t nn = nf ? (uint32_t)(fuzz_take(&in, 1) % (MAX_NODES + 1)) : 0;
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_build_id bid = {20, {0xab}};
    uint32_t mod, fn[MAX_FUNCS];
    FUZZ_CHECK(pm && icpp_pathmap_add_module(pm, "/bin/prog", &bid, 2, &mod) == 0, "map");
    for (uint32_t i = 0; i < nf; i++)
        FUZZ_CHECK(icpp_pathmap_add_func(pm, mod, 0x1000 * (i + 1), "f", &fn[i]) == 0 && fn[i] == i, "func %u", i);
    for (uint32_t i = 0; i < nn; i++) {
        uint32_t parent = (uint32_t)(fuzz_take(&in, 1) % icpp_pathmap_nnodes(pm));
        uint32_t func = (uint32_t)(fuzz_take(&in, 1) % nf);
        uint32_t node;
        FUZZ_CHECK(icpp_pathmap_child(pm, parent, func, &node) == 0, "child");
        uint8_t nh = (uint8_t)fuzz_take(&in, 1);
        if (nh & 0x80) {                /* deep: more heights than a function votes with */
            for (uint32_t k = 0; k < CAP_HEIGHTS; k++)
                icpp_pathmap_add_height(pm, node, 16 * (int64_t)(k + 1), (k * 7919u + nh) % 13);
            continue;
        }
        for (uint32_t k = 0; k < nh % 5u; k++) {
            uint8_t kind = (uint8_t)fuzz_take(&in, 1);
            int64_t h;
            if (kind % 8 == 0)
                h = (int64_t)fuzz_take(&in, 8);
            else if (kind % 8 == 1)
                h = -8 * (int64_t)fuzz_take(&in, 1);
            else
                h = 8 * ((int64_t)fuzz_take(&in, 1) + 1);
            uint8_t cb = (uint8_t)fuzz_take(&in, 1);
            uint64_t count = cb == 255 ? UINT64_MAX - fuzz_take(&in, 1) : cb;
            FUZZ_CHECK(icpp_pathmap_add_height(pm, node, h, count) == 0, "height");
        }
    }
    double min_support = min_support_of((uint8_t)fuzz_take(&in, 1));
    uint8_t flags = (uint8_t)fuzz_take(&in, 1);

    mfunc mf[MAX_FUNCS];
    memset(mf, 0, sizeof mf);
    model_map(pm, mf, nf);
    icpp_err err = {0};
    icpp_basevote *bv = icpp_basevote_new(pm, &err);
    FUZZ_CHECK(bv != NULL, "new: %s", err.msg);

    msample *smp = malloc(MAX_SAMPLES * sizeof *smp);
    mthread th[48];             /* 4 pids x 3 tids x 4 exec generations */
    uint32_t nth = 0;
    size_t ns = 0;
    FUZZ_CHECK(smp != NULL, "out of memory");
    while (in.n && ns < MAX_SAMPLES) {
        uint8_t t = (uint8_t)fuzz_take(&in, 1);
        uint32_t pid = 100 + (t & 3), tid = t & 4 ? pid : pid + 1 + ((t >> 3) & 1), gen = (t >> 4) & 3;
        uint8_t fsel = (uint8_t)fuzz_take(&in, 1);
        int64_t func = fsel == 255 ? INT64_MAX : fsel == 254 ? (int64_t)nf : (int64_t)(fsel % (nf + 1)) - 1;
        uint8_t e = (uint8_t)fuzz_take(&in, 1);
        uint64_t base = bases[e & 7], esp;
        if (e & 0x80) {
            esp = fuzz_take(&in, 8);
        } else if ((e & 0x60) == 0x60) {
            esp = 0;
        } else if (!(e & 0x40) && func >= 0 && (uint64_t)func < nf && mf[func].nall) {
            esp = base - (uint64_t)mf[func].all[fuzz_take(&in, 1) % mf[func].nall].h;
        } else {
            esp = base - 8 * fuzz_take(&in, 1);
        }
        uint64_t recorded = e & 0x20 ? base : 0;
        FUZZ_CHECK(icpp_basevote_add(bv, pid, tid, gen, func, esp, recorded) == 0, "add");
        uint32_t k = 0;
        while (k < nth && !(th[k].pid == pid && th[k].tid == tid && th[k].gen == gen))
            k++;
        if (k == nth)
            th[nth++] = (mthread){pid, tid, gen, 0, 0, 0};
        th[k].samples++;
        if (recorded && !th[k].recorded)
            th[k].recorded = recorded;
        if (func >= 0 && (uint64_t)func < nf && esp)
            th[k].voters++;
        smp[ns++] = (msample){k, func, esp};
    }

    if (!(flags & 1)) {         /* else: freed without a tally */
        FUZZ_CHECK(icpp_basevote_tally(bv, min_support, &err) == 0, "tally: %s", err.msg);
        double min = min_support > 0 ? min_support : ICPP_BV_MIN_SUPPORT;
        FUZZ_CHECK(icpp_basevote_nthreads(bv) == nth, "%zu threads, %u added", icpp_basevote_nthreads(bv), nth);
        for (size_t i = 0; i < nth; i++) {
            const icpp_bv_thread *t = icpp_basevote_thread(bv, i), *p = i ? icpp_basevote_thread(bv, i - 1) : NULL;
            FUZZ_CHECK(t != NULL, "thread %zu", i);
            FUZZ_CHECK(!p || p->pid < t->pid || (p->pid == t->pid && (p->tid < t->tid ||
                                                                     (p->tid == t->tid && p->gen < t->gen))),
                       "threads %zu and %zu out of order", i - 1, i);
            FUZZ_CHECK(icpp_basevote_find(bv, t->pid, t->tid, t->gen) == t, "find thread %zu", i);
            uint32_t k = 0;
            while (k < nth && !(th[k].pid == t->pid && th[k].tid == t->tid && th[k].gen == t->gen))
                k++;
            FUZZ_CHECK(k < nth, "thread %u/%u/%u was never added", t->pid, t->tid, t->gen);
            const mthread *m = &th[k];
            FUZZ_CHECK(t->samples == m->samples && t->voters == m->voters && t->recorded == m->recorded,
                       "thread %u/%u/%u: samples %llu voters %llu recorded %#llx, added %llu %llu %#llx", t->pid,
                       t->tid, t->gen, (unsigned long long)t->samples, (unsigned long long)t->voters,
                       (unsigned long long)t->recorded, (unsigned long long)m->samples,
                       (unsigned long long)m->voters, (unsigned long long)m->recorded);
            /* The documented bounds. */
            FUZZ_CHECK(t->runner_votes <= t->votes && t->votes <= t->voters && t->voters <= t->samples,
                       "thread %zu: runner %llu, votes %llu, voters %llu, samples %llu", i,
                       (unsigned long long)t->runner_votes, (unsigned long long)t->votes,
                       (unsigned long long)t->voters, (unsigned long long)t->samples);
            FUZZ_CHECK(t->support >= 0 && t->support <= 1 && t->runner_support >= 0 &&
                           t->runner_support <= t->support,
                       "thread %zu: support %g, runner %g", i, t->support, t->runner_support);
            FUZZ_CHECK(t->voters ? t->support == (double)t->votes / (double)t->voters : t->support == 0,
                       "thread %zu: support %g is not %llu / %llu", i, t->support, (unsigned long long)t->votes,
                       (unsigned long long)t->voters);
            uint64_t align = t->pid == t->tid ? 16 : 4096;
            FUZZ_CHECK(t->base % align == 0 && t->runner % align == 0 && (!t->runner || t->runner != t->base) &&
                           (t->base || (!t->votes && !t->runner)),
                       "thread %zu: base %#llx, runner-up %#llx", i, (unsigned long long)t->base,
                       (unsigned long long)t->runner);
            FUZZ_CHECK(t->accepted == (t->votes && t->votes > t->runner_votes && t->support >= min),
                       "thread %zu: accepted %d with support %g (minimum %g), votes %llu, runner %llu", i,
                       t->accepted, t->support, min, (unsigned long long)t->votes,
                       (unsigned long long)t->runner_votes);
            /* The vote itself. */
            cand w, r;
            model_vote(mf, nf, smp, ns, k, m, &w, &r);
            FUZZ_CHECK(t->base == w.base && t->votes == w.exact && t->runner == r.base && t->runner_votes == r.exact,
                       "thread %u/%u/%u: winner %#llx (%llu), runner-up %#llx (%llu); the model: %#llx (%llu), "
                       "%#llx (%llu)",
                       t->pid, t->tid, t->gen, (unsigned long long)t->base, (unsigned long long)t->votes,
                       (unsigned long long)t->runner, (unsigned long long)t->runner_votes,
                       (unsigned long long)w.base, (unsigned long long)w.exact, (unsigned long long)r.base,
                       (unsigned long long)r.exact);
            if (getenv("ICPP_FUZZ_VERBOSE")) {      /* to see what an input does */
                char all[512];
                icpp_basevote_describe(bv, i, all, sizeof all);
                fprintf(stderr, "%s\n", all);
            }
            /* A line for people, into a buffer of any size. */
            static const size_t lens[] = {0, 1, 2, 20, 64, 200, 1024};
            size_t len = lens[(flags >> 1) % 7];
            char *line = malloc(len ? len : 1);
            FUZZ_CHECK(line != NULL, "out of memory");
            icpp_basevote_describe(bv, i, line, len);
            FUZZ_CHECK(!len || memchr(line, 0, len), "describe: no terminator in %zu bytes", len);
            free(line);
        }
        FUZZ_CHECK(icpp_basevote_find(bv, 1, 1, 0) == NULL && icpp_basevote_thread(bv, nth) == NULL,
                   "a thread never added");
        char none[8] = "x";
        icpp_basevote_describe(bv, nth, none, sizeof none);
        FUZZ_CHECK(none[0] == 0, "describe of thread %u of %u: \"%s\"", nth, nth, none);
        /* apply, to each sample in turn as a sample without a base and one with. */
        icpp_func fake = {0x1000, 0, "f", "f", 0, 0x1000};
        for (size_t i = 0; i < ns && i < 256; i++) {
            icpp_rsample s;
            memset(&s, 0, sizeof s);
            s.pid = th[smp[i].thr].pid;
            s.tid = th[smp[i].thr].tid;
            s.exec_gen = th[smp[i].thr].gen;
            s.entry_sp = smp[i].entry_sp;
            s.func = i & 1 ? &fake : NULL;
            s.status = i & 2 ? ICPP_RS_OK : ICPP_RS_NOBASE;
            s.base = i & 2 ? 0x1230 : 0;
            icpp_rsample before = s;
            const icpp_bv_thread *t = icpp_basevote_find(bv, s.pid, s.tid, s.exec_gen);
            int got = icpp_basevote_apply(bv, &s);
            if (before.status == ICPP_RS_NOBASE && t && t->accepted) {
                FUZZ_CHECK(got == 1 && s.base == t->base && s.base_kind == ICPP_BASE_INFERRED &&
                               s.height == icpp_height(t->base, s.entry_sp) &&
                               s.status == (s.func ? ICPP_RS_OK : ICPP_RS_NOFUNC),
                           "apply to sample %zu", i);
            } else {
                FUZZ_CHECK(got == 0 && s.base == before.base && s.base_kind == before.base_kind &&
                               s.height == before.height && s.status == before.status,
                           "apply changed sample %zu", i);
            }
        }
    }
    icpp_basevote_free(bv);
    for (uint32_t i = 0; i < nf; i++)
        free(mf[i].all);
    free(smp);
    icpp_pathmap_free(pm);
    return 0;
}
