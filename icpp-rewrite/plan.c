/* plan.c -- icpp-rewrite's plan: which of the map's functions may be enlarged, by how much, and why not. */
#include "plan.h"
#include "sites.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void count_reason(rw_plan *p, const char *why, const char *name)
{
    size_t i;
    for (i = 0; i < p->nreasons; i++)
        if (p->reasons[i].why == why || !strcmp(p->reasons[i].why, why))
            break;
    if (i == p->nreasons) {
        if (p->nreasons == RW_PLAN_MAX_REASONS)
            return;
        p->reasons[p->nreasons++] = (rw_reason){why, 0, {NULL, NULL, NULL}};
    }
    if (p->reasons[i].n < 3)
        p->reasons[i].eg[p->reasons[i].n] = name;
    p->reasons[i].n++;
}

static int reason_cmp(const void *a, const void *b)
{
    const rw_reason *x = a, *y = b;
    return x->n > y->n ? -1 : x->n < y->n;
}

/* Each of the program's functions: its largest padding, and for the
 * callers on the map's paths, why not (the reasons, most callers first). */
static void judge(rw_plan *p, const icpp_pathmap *pm, rw_verdict_fn verdict, const void *ctx)
{
    size_t nf = icpp_pathmap_nfuncs(pm);
    uint32_t main_mod = icpp_pathmap_main(pm);
    p->ncallers = p->ncallers_ok = p->nreasons = 0;
    for (uint32_t f = 0; f < nf; f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        if (pf->module != main_mod)
            continue;
        const rw_frame *fr = verdict(ctx, pf->addr);
        const char *why = !fr ? "not a function start of the program (or a .cold part)"
                          : fr->why ? fr->why
                          : p->conflict[f] ? "the training saw it both live and returned below the same path "
                                             "(calls with stack arguments after it returned)"
                                           : NULL;
        if (!why)
            p->maxpad[f] = fr->maxpad;
        else if (p->bywrap && p->bywrap[f])
            p->maxpad[f] = RW_PLAN_WRAP_MAXPAD;
        if (!p->is_caller[f])
            continue;
        p->ncallers++;
        if (!why || (p->bywrap && p->bywrap[f]))
            p->ncallers_ok++;
        else
            count_reason(p, why, pf->name);
    }
    qsort(p->reasons, p->nreasons, sizeof *p->reasons, reason_cmp);
}

long rw_plan_wrap_frames(rw_plan *p, const icpp_pathmap *pm, const rw_sites *s, rw_verdict_fn verdict,
                         const void *ctx, icpp_err *err)
{
    size_t nf = icpp_pathmap_nfuncs(pm), nn = icpp_pathmap_nnodes(pm);
    uint32_t main_mod = icpp_pathmap_main(pm);
    uint8_t *bad = calloc(nf + 1, 1);
    uint64_t *owner = malloc((s->ncls + 1) * sizeof *owner);    /* per class: its sites' function, or ~0 */
    free(p->bywrap);
    p->bywrap = calloc(nf + 1, 1);
    if (!bad || !owner || !p->bywrap) {
        free(bad);
        free(owner);
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < s->ncls; k++)
        owner[k] = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint64_t *o = &owner[s->v[i].cls];
        *o = (*o == 0 || *o == s->v[i].owner) && s->v[i].owner ? s->v[i].owner : ~0ull;
    }
    /* Every path called from f's frame must go through a wrappable class of f's own sites. */
    for (uint32_t i = 1; i < nn; i++) {
        uint32_t c = p->caller[i];
        if (!c)
            continue;
        uint32_t f = icpp_pathmap_node(pm, c)->func;
        int32_t k = s->node_cls ? s->node_cls[i] : -1;
        if (k < 0 || !s->cls_ok[k] || owner[k] != icpp_pathmap_func(pm, f)->addr)
            bad[f] = 1;
    }
    long n = 0;
    for (uint32_t f = 0; f < nf; f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        if (pf->module != main_mod || !p->is_caller[f] || bad[f] || p->conflict[f])
            continue;
        const rw_frame *fr = verdict(ctx, pf->addr);
        if (fr && fr->why) {
            p->bywrap[f] = 1;
            n++;
        }
    }
    free(bad);
    free(owner);
    judge(p, pm, verdict, ctx);
    return n;
}

static int pad_addr_cmp(const void *a, const void *b)
{
    const icpp_arr_pad *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int rw_plan_wrap_pads(const rw_plan *p, const icpp_pathmap *pm, const rw_sites *s, uint32_t *pad, uint32_t *cpad,
                      icpp_arr_pad **out, size_t *n, icpp_err *err)
{
    size_t nf = icpp_pathmap_nfuncs(pm);
    *n = 0;
    *out = calloc(nf + 1, sizeof **out);
    if (!*out)
        return icpp_err_set(err, ENOMEM, "out of memory");
    for (uint32_t f = 0; p->bywrap && f < nf; f++)
        if (p->bywrap[f] && pad[f]) {
            (*out)[(*n)++] = (icpp_arr_pad){icpp_pathmap_func(pm, f)->addr, pad[f]};
            pad[f] = 0;
        }
    if (!*n)
        return 0;
    qsort(*out, *n, sizeof **out, pad_addr_cmp);
    /* a class holds sites of one such function only (rw_plan_wrap_frames): its padding, once a class */
    uint32_t *base = calloc(s->ncls + 1, sizeof *base);
    if (!base) {
        free(*out);
        *out = NULL;
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n; i++) {
        icpp_arr_pad key = {s->v[i].owner, 0};
        const icpp_arr_pad *w = bsearch(&key, *out, *n, sizeof key, pad_addr_cmp);
        if (w)
            base[s->v[i].cls] = w->pad;
    }
    for (uint32_t k = 0; k < s->ncls; k++)
        cpad[k] += base[k];
    free(base);
    return 0;
}

void rw_plan_free(rw_plan *p)
{
    free(p->ranges);
    free(p->caller);
    free(p->far);
    free(p->maxpad);
    free(p->conflict);
    free(p->is_caller);
    free(p->bywrap);
    memset(p, 0, sizeof *p);
}

int rw_plan_build(rw_plan *p, const icpp_pathmap *pm, const icpp_func *funcs, size_t nfuncs, rw_verdict_fn verdict,
                  const void *ctx, icpp_err *err)
{
    memset(p, 0, sizeof *p);
    size_t nf = icpp_pathmap_nfuncs(pm), nn = icpp_pathmap_nnodes(pm);
    uint8_t *is_caller = calloc(nf + 1, 1);
    p->maxpad = calloc(nf + 1, sizeof *p->maxpad);
    p->conflict = calloc(nf + 1, 1);
    p->caller = malloc((nn + 1) * sizeof *p->caller);
    p->far = malloc((nn + 1) * sizeof *p->far);
    p->ranges = malloc((nfuncs + 1) * sizeof *p->ranges);
    if (!is_caller || !p->maxpad || !p->conflict || !p->caller || !p->far || !p->ranges)
        goto oom;
    /* Which frame each path was called from (returned frames in the map). */
    for (size_t i = 0; i < nfuncs; i++)
        if (funcs[i].size)
            p->ranges[p->nranges++] = (icpp_arr_range){funcs[i].addr, funcs[i].addr + funcs[i].size, funcs[i].owner};
    p->moved = icpp_arr_callers(pm, p->ranges, p->nranges, p->caller, p->far);
    if (p->moved < 0)
        goto oom;
    /* A node entered sometimes with, sometimes without the frames between
     * its callers: those frames must keep their size. */
    for (uint32_t i = 1; i < nn; i++) {
        if (!p->far[i])
            continue;
        for (uint32_t a = icpp_pathmap_node(pm, i)->parent; a && a != p->far[i]; a = icpp_pathmap_node(pm, a)->parent)
            p->conflict[icpp_pathmap_node(pm, a)->func] = 1;
    }
    for (uint32_t i = 1; i < nn; i++)
        if (p->caller[i])
            is_caller[icpp_pathmap_node(pm, p->caller[i])->func] = 1;
    p->is_caller = is_caller;
    judge(p, pm, verdict, ctx);
    return 0;
oom:
    if (!p->is_caller)
        free(is_caller);
    rw_plan_free(p);
    return icpp_err_set(err, ENOMEM, "out of memory");
}

int rw_plan_pads(const icpp_pathmap *pm, const uint32_t *pad, rw_verdict_fn verdict, const void *ctx,
                 icpp_arr_pad **pads, size_t *npads, size_t *nsub, size_t *nenter, icpp_err *err)
{
    size_t nf = icpp_pathmap_nfuncs(pm);
    *npads = *nsub = *nenter = 0;
    *pads = calloc(nf + 1, sizeof **pads);
    if (!*pads)
        return icpp_err_set(err, ENOMEM, "out of memory");
    for (uint32_t f = 0; f < nf; f++) {
        if (!pad[f])
            continue;
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        const rw_frame *fr = verdict(ctx, pf->addr);
        if (!fr) {
            free(*pads);
            *pads = NULL;
            *npads = 0;
            return icpp_err_set(err, EINVAL, "internal error: padding chosen for a function without a verdict");
        }
        assert(pad[f] % 16 == 0 && !fr->why);      /* the search pads only what the plan allows */
        (*pads)[(*npads)++] = (icpp_arr_pad){pf->addr, pad[f]};
        if (fr->mode == RW_MODE_ENTER)
            ++*nenter;
        else
            ++*nsub;
    }
    return 0;
}
