/* basevote.c -- thread bases inferred by voting from samples and training heights, for recordings without them. */
#include "basevote.h"

#include "hmap.h"
#include "perfdata.h"
#include "resolve.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A voting sample, kept for the second stage. */
typedef struct bv_sample {
    uint32_t thr, func;
    uint64_t entry_sp;
} bv_sample;

/* Candidates per thread that the second stage counts exactly. */
#define NCAND 8

typedef struct bv_cand {
    uint64_t base, votes, exact;
} bv_cand;

struct icpp_basevote {
    const icpp_pathmap *pm;
    icpp_cidx      *x;          /* (module, address) -> path-map function, for icpp_basevote_infer */
    int             flags;
    double          min_support;
    uint32_t        nfuncs;
    uint32_t       *hoff;       /* function f's voting heights: h[hoff[f] .. hoff[f+1]) */
    int64_t        *h;
    icpp_hmap       cids;       /* (func, height) -> training count: every trained CID */
    icpp_hmap       tmap;       /* (pid << 32 | tid, gen) -> thread index */
    icpp_bv_thread *thr;
    size_t          nthr, capthr;
    icpp_hmap       votes;      /* (thread index, base) -> votes */
    bv_sample      *smp;        /* the voting samples, for the exact count */
    size_t          nsmp, capsmp;
};

typedef struct hc {
    int64_t  h;
    uint64_t count;
} hc;

static int cmp_hc(const void *a, const void *b)
{
    const hc *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (x->h > y->h) - (x->h < y->h);
}

/* Each function's distinct training heights, the most frequent first, at
 * most ICPP_BV_MAX_HEIGHTS of them. */
static int index_heights(icpp_basevote *bv)
{
    const icpp_pathmap *pm = bv->pm;
    icpp_hmap *fh = &bv->cids;
    size_t nn = icpp_pathmap_nnodes(pm);
    bv->nfuncs = (uint32_t)icpp_pathmap_nfuncs(pm);
    uint32_t *cnt = calloc((size_t)bv->nfuncs + 1, sizeof *cnt);
    hc *all = NULL;
    int rc = -ENOMEM;
    if (!cnt)
        goto out;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        if (n->func >= bv->nfuncs)
            continue;
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t *v = icpp_hmap_get(fh, n->func, (uint64_t)n->heights[k].height);
            if (v) {
                *v += n->heights[k].count;
            } else {
                if (icpp_hmap_put(fh, n->func, (uint64_t)n->heights[k].height, n->heights[k].count) < 0)
                    goto out;
                cnt[n->func]++;
            }
        }
    }
    /* Group by function: offsets, then fill, then keep the top heights. */
    uint32_t *start = calloc((size_t)bv->nfuncs + 1, sizeof *start);
    all = malloc((fh->n ? fh->n : 1) * sizeof *all);
    bv->hoff = calloc((size_t)bv->nfuncs + 1, sizeof *bv->hoff);
    bv->h = malloc((fh->n ? fh->n : 1) * sizeof *bv->h);
    if (!start || !all || !bv->hoff || !bv->h) {
        free(start);
        goto out;
    }
    for (uint32_t f = 0; f < bv->nfuncs; f++)
        start[f + 1] = start[f] + cnt[f];
    memset(cnt, 0, (size_t)bv->nfuncs * sizeof *cnt);
    for (size_t i = 0; i < fh->cap; i++) {
        const icpp_hmap_slot *sl = &fh->slots[i];
        if (sl->used)
            all[start[sl->k1] + cnt[sl->k1]++] = (hc){(int64_t)sl->k2, sl->val};
    }
    uint32_t k = 0;
    for (uint32_t f = 0; f < bv->nfuncs; f++) {
        qsort(all + start[f], cnt[f], sizeof *all, cmp_hc);
        bv->hoff[f] = k;
        for (uint32_t j = 0; j < cnt[f] && j < ICPP_BV_MAX_HEIGHTS; j++)
            bv->h[k++] = all[start[f] + j].h;
    }
    bv->hoff[bv->nfuncs] = k;
    free(start);
    rc = 0;
out:
    free(cnt);
    free(all);
    return rc;
}

icpp_basevote *icpp_basevote_new(const icpp_pathmap *pm, icpp_err *err)
{
    icpp_basevote *bv = calloc(1, sizeof *bv);
    if (!bv || (bv->pm = pm, index_heights(bv) < 0)) {
        icpp_basevote_free(bv);
        icpp_err_set(err, ENOMEM, "out of memory indexing the path map's heights");
        return NULL;
    }
    return bv;
}

void icpp_basevote_free(icpp_basevote *bv)
{
    if (!bv)
        return;
    icpp_cidx_free(bv->x);
    free(bv->hoff);
    free(bv->h);
    free(bv->thr);
    free(bv->smp);
    icpp_hmap_free(&bv->cids);
    icpp_hmap_free(&bv->tmap);
    icpp_hmap_free(&bv->votes);
    free(bv);
}

int icpp_basevote_add(icpp_basevote *bv, uint32_t pid, uint32_t tid, uint32_t gen, int64_t func, uint64_t entry_sp,
                      uint64_t recorded)
{
    uint64_t key = (uint64_t)pid << 32 | tid;
    uint64_t *ti = icpp_hmap_get(&bv->tmap, key, gen);
    if (!ti) {
        if (icpp_vec_reserve((void **)&bv->thr, &bv->capthr, bv->nthr + 1, sizeof *bv->thr, 16) < 0)
            return -ENOMEM;
        if (icpp_hmap_put(&bv->tmap, key, gen, bv->nthr) < 0)
            return -ENOMEM;
        memset(&bv->thr[bv->nthr], 0, sizeof *bv->thr);
        bv->thr[bv->nthr].pid = pid;
        bv->thr[bv->nthr].tid = tid;
        bv->thr[bv->nthr].gen = gen;
        ti = icpp_hmap_get(&bv->tmap, key, gen);
        bv->nthr++;
    }
    uint64_t t = *ti;
    icpp_bv_thread *th = &bv->thr[t];
    th->samples++;
    if (recorded && !th->recorded)
        th->recorded = recorded;
    if (func < 0 || (uint64_t)func >= bv->nfuncs || !entry_sp)
        return 0;
    th->voters++;
    if (icpp_vec_reserve((void **)&bv->smp, &bv->capsmp, bv->nsmp + 1, sizeof *bv->smp, 1024) < 0)
        return -ENOMEM;
    bv->smp[bv->nsmp++] = (bv_sample){(uint32_t)t, (uint32_t)func, entry_sp};
    /* startstack is 16-byte aligned; any other thread's base is the end of a mapping. */
    uint64_t align = pid == tid ? 16 : 4096;
    for (uint32_t k = bv->hoff[func]; k < bv->hoff[func + 1]; k++) {
        uint64_t base = entry_sp + (uint64_t)bv->h[k];
        if (base % align || base <= entry_sp)
            continue;
        uint64_t *v = icpp_hmap_get(&bv->votes, t, base);
        if (v)
            (*v)++;
        else if (icpp_hmap_put(&bv->votes, t, base, 1) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int cmp_thr(const void *a, const void *b)
{
    const icpp_bv_thread *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return (x->gen > y->gen) - (x->gen < y->gen);
}

/* Candidate order: more exact-count support, then more votes, then the lower base. */
static int cand_beats(const bv_cand *a, const bv_cand *b)
{
    if (a->exact != b->exact)
        return a->exact > b->exact;
    if (a->votes != b->votes)
        return a->votes > b->votes;
    return a->base < b->base;
}

/* Stage 1 capped each function's heights (ICPP_BV_MAX_HEIGHTS), so deep
 * recursion under-votes its true base; it only nominates each thread's
 * NCAND most voted bases.  Stage 2 counts, for each nominee, the samples
 * whose (function, nominee - entry SP) is a trained CID at all: the support. */
int icpp_basevote_tally(icpp_basevote *bv, double min_support, icpp_err *err)
{
    bv->min_support = min_support > 0 ? min_support : ICPP_BV_MIN_SUPPORT;
    bv_cand *c = calloc(bv->nthr ? bv->nthr * NCAND : 1, sizeof *c);
    if (!c)
        return icpp_err_set(err, ENOMEM, "out of memory counting base votes");
    for (size_t i = 0; i < bv->votes.cap; i++) {
        const icpp_hmap_slot *sl = &bv->votes.slots[i];
        if (!sl->used)
            continue;
        bv_cand *tc = &c[sl->k1 * NCAND], x = {sl->k2, sl->val, 0};
        /* keep the NCAND best by (votes, lower base), best first */
        int at = NCAND;
        while (at > 0 && (!tc[at - 1].base || cand_beats(&x, &tc[at - 1])))
            at--;
        if (at < NCAND) {
            memmove(&tc[at + 1], &tc[at], (NCAND - 1 - (size_t)at) * sizeof *tc);
            tc[at] = x;
        }
    }
    for (size_t i = 0; i < bv->nsmp; i++) {
        const bv_sample *sm = &bv->smp[i];
        bv_cand *tc = &c[(size_t)sm->thr * NCAND];
        for (int k = 0; k < NCAND && tc[k].base; k++)
            if (icpp_hmap_get(&bv->cids, sm->func, tc[k].base - sm->entry_sp))
                tc[k].exact++;
    }
    for (size_t i = 0; i < bv->nthr; i++) {
        icpp_bv_thread *t = &bv->thr[i];
        bv_cand *tc = &c[i * NCAND];
        int w = -1, r = -1;
        for (int k = 0; k < NCAND && tc[k].base; k++) {
            if (w < 0 || cand_beats(&tc[k], &tc[w])) {
                r = w;
                w = k;
            } else if (r < 0 || cand_beats(&tc[k], &tc[r])) {
                r = k;
            }
        }
        t->base = w >= 0 ? tc[w].base : 0;
        t->votes = w >= 0 ? tc[w].exact : 0;
        t->runner = r >= 0 ? tc[r].base : 0;
        t->runner_votes = r >= 0 ? tc[r].exact : 0;
        t->support = t->voters ? (double)t->votes / (double)t->voters : 0;
        t->runner_support = t->voters ? (double)t->runner_votes / (double)t->voters : 0;
        t->accepted = t->votes && t->votes > t->runner_votes && t->support >= bv->min_support;
    }
    free(c);
    /* Sorted for people and for lookups; the votes are spent. */
    if (bv->nthr)       /* thr is NULL without samples: qsort's argument must not be */
        qsort(bv->thr, bv->nthr, sizeof *bv->thr, cmp_thr);
    icpp_hmap_free(&bv->votes);
    icpp_hmap_free(&bv->tmap);
    free(bv->smp);
    bv->smp = NULL;
    bv->nsmp = bv->capsmp = 0;
    return 0;
}

size_t icpp_basevote_nthreads(const icpp_basevote *bv) { return bv ? bv->nthr : 0; }

const icpp_bv_thread *icpp_basevote_thread(const icpp_basevote *bv, size_t i)
{
    return bv && i < bv->nthr ? &bv->thr[i] : NULL;
}

const icpp_bv_thread *icpp_basevote_find(const icpp_basevote *bv, uint32_t pid, uint32_t tid, uint32_t gen)
{
    if (!bv || !bv->nthr)
        return NULL;
    icpp_bv_thread key = {.pid = pid, .tid = tid, .gen = gen};
    return bsearch(&key, bv->thr, bv->nthr, sizeof *bv->thr, cmp_thr);
}

void icpp_basevote_describe(const icpp_basevote *bv, size_t i, char *buf, size_t len)
{
    const icpp_bv_thread *t = icpp_basevote_thread(bv, i);
    if (!t || !len) {
        if (len)
            buf[0] = 0;
        return;
    }
    char who[64], rec[96] = "", run[80] = "no runner-up";
    if (t->gen > 1)
        snprintf(who, sizeof who, "pid %u tid %u (exec %u)", t->pid, t->tid, t->gen);
    else
        snprintf(who, sizeof who, "pid %u tid %u", t->pid, t->tid);
    if (t->recorded && t->votes)
        snprintf(rec, sizeof rec, "; the recorded base 0x%" PRIx64 " %s", t->recorded,
                 t->recorded == t->base ? "agrees" : "DIFFERS");
    if (t->runner)
        snprintf(run, sizeof run, "runner-up 0x%" PRIx64 " %.1f%%", t->runner, 100 * t->runner_support);
    if (!t->voters)
        snprintf(buf, len, "%s: no thread base inferred: none of its %" PRIu64 " samples is in a function of the map; "
                           "they stay unresolved (no thread base)", who, t->samples);
    else if (t->accepted)
        snprintf(buf, len, "%s: thread base 0x%" PRIx64 " inferred from %" PRIu64 " of %" PRIu64
                           " voting samples (support %.1f%%; %s)%s",
                 who, t->base, t->votes, t->voters, 100 * t->support, run, rec);
    else
        snprintf(buf, len, "%s: no thread base inferred: the best, 0x%" PRIx64 ", has %.1f%% of %" PRIu64
                           " voting samples, %s (needs %.0f%% and a lead); its samples stay unresolved "
                           "(no thread base)%s",
                 who, t->base, 100 * t->support, t->voters, run, 100 * bv->min_support, rec);
}

/* A sample the vote is about: it has an entry SP, and (unless overriding) no base. */
static int eligible(int flags, const icpp_rsample *s)
{
    if (s->status == ICPP_RS_NOBASE)
        return 1;
    return (flags & ICPP_BV_OVERRIDE) && (s->status == ICPP_RS_OK || s->status == ICPP_RS_NOFUNC);
}

icpp_basevote *icpp_basevote_infer(const char *samples, const icpp_pathmap *pm, int flags, double min_support,
                                   icpp_err *err)
{
    icpp_basevote *bv = icpp_basevote_new(pm, err);
    if (!bv)
        return NULL;
    bv->flags = flags;
    bv->min_support = min_support > 0 ? min_support : ICPP_BV_MIN_SUPPORT;
    if (!(flags & (ICPP_BV_ANY_FILE | ICPP_BV_OVERRIDE)) && !icpp_perfdata_file_is(samples))
        return bv;                          /* it carries its bases */
    bv->x = icpp_cidx_build(pm, err);
    icpp_replay *rp = bv->x ? icpp_replay_open(samples, err) : NULL;
    if (!rp) {
        icpp_basevote_free(bv);
        return NULL;
    }
    icpp_rsample s;
    int rc;
    while ((rc = icpp_replay_next(rp, &s, err)) > 0) {
        if (!eligible(flags, &s))
            continue;
        int64_t func = -1;
        const icpp_rmodule *rm = s.module >= 0 ? icpp_replay_module(rp, (uint32_t)s.module) : NULL;
        if (s.func && rm)
            func = icpp_cidx_func(bv->x, (uint32_t)s.module, &rm->build_id, s.func->owner);
        if (icpp_basevote_add(bv, s.pid, s.tid, s.exec_gen, func, s.entry_sp,
                              s.base_kind != ICPP_BASE_NONE ? s.base : 0) < 0) {
            rc = icpp_err_set(err, ENOMEM, "out of memory counting base votes");
            break;
        }
    }
    icpp_replay_close(rp);
    if (rc < 0) {
        icpp_err_prefix(err, "%s", samples);
        icpp_basevote_free(bv);
        return NULL;
    }
    if (icpp_basevote_tally(bv, min_support, err) < 0) {
        icpp_basevote_free(bv);
        return NULL;
    }
    return bv;
}

int icpp_basevote_apply(const icpp_basevote *bv, icpp_rsample *s)
{
    if (!bv || !bv->nthr || !eligible(bv->flags, s))
        return 0;
    const icpp_bv_thread *t = icpp_basevote_find(bv, s->pid, s->tid, s->exec_gen);
    if (!t || !t->accepted)
        return 0;
    s->base = t->base;
    s->base_kind = ICPP_BASE_INFERRED;
    s->height = icpp_height(t->base, s->entry_sp);
    s->status = s->func ? ICPP_RS_OK : ICPP_RS_NOFUNC;
    return 1;
}
