/* complete.c -- completion: call paths for a (function, height) the path map lacks, searched backward over the static call graph to the known tree. */
#include "complete.h"

#include "callgraph.h"
#include "cfi.h"
#include "hmap.h"
#include "module.h"
#include "vec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXFRAMES 32            /* hard cap on max_frames */
#define MAXTAIL   4             /* tail calls followed through in a row */
#define MAXNAMES  8             /* exported aliases of a function looked up */

typedef struct cmod {
    icpp_module    *m;
    icpp_cfi       *cfi;
    icpp_callgraph *g;
    uint8_t         tried;
} cmod;

/* An edge training (or learning) saw: caller -> callee at a call site. */
typedef struct medge {
    uint32_t cmod;              /* caller's module */
    uint64_t caller;            /* caller's start */
    uint32_t smod;              /* module of the return address */
    uint64_t ret;               /* return address */
    int32_t  hdelta;            /* child height - parent height if both have one height, else INT32_MIN */
} medge;

typedef struct frame {
    uint32_t mod;
    uint64_t addr;
} frame;

typedef struct result {
    uint32_t anchor;            /* known node */
    uint64_t act;               /* the anchor's learn count at the height it was reached (this recording) */
    uint32_t n;                 /* new frames, root-first in f */
    frame    f[MAXFRAMES];
} result;

struct icpp_completer {
    icpp_pathmap    *pm;
    const icpp_cidx *x;
    icpp_cpl_opts    o;
    cmod            *mods;
    size_t           nmods;
    int              all_loaded;
    icpp_hmap        funcs;     /* (addr, module) -> pm func */
    icpp_hmap        kids;      /* (parent node, func) -> node */
    icpp_hmap        medge_ix;  /* (callee addr, callee module) -> offset << 32 | count into medges */
    medge           *medges;
    size_t           nmedges;
    int64_t          min_root;  /* lowest height of a root node */
    icpp_hmap        ind_at;    /* (height, k) -> k-th known node whose indirect call sites enter a callee at
                                   that height; (height, ~0) -> count */
    int              ind_built;
    icpp_hmap        dead;      /* per search: (module << 48 | addr, height) -> frames to go with which it found nothing */
    icpp_hmap        cache;     /* (module << 48 | addr, height) -> offset << 32 | truncated << 31 | count */
    icpp_cand       *cands;
    size_t           ncands, capcands;
    /* search state */
    frame            stack[MAXFRAMES];
    uint32_t         depth;
    result          *res;
    uint32_t         nres;
    uint64_t         work;
    int              truncated;     /* the work or result bound was hit */
    int              cut;           /* the frame bound cut a branch that had not joined the tree */
    uint32_t         lim;           /* frame limit of this round of iterative deepening */
    uint64_t         hits;          /* anchors reached, duplicates included */
    int              open;          /* an address-taken function was reached: its callers through indirect
                                       calls from unknown functions were not searched */
    icpp_cpl_stats   st;
};

void icpp_cpl_opts_default(icpp_cpl_opts *o)
{
    o->max_frames = 8;
    o->max_work = 30000;
    o->max_results = 32;
    o->any_indirect = 1;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* The call graph of map module i, built on first use; NULL if the file is
 * gone or another build now. */
static const icpp_callgraph *graph(icpp_completer *c, uint32_t i)
{
    if (i >= c->nmods)
        return NULL;
    cmod *cm = &c->mods[i];
    if (cm->tried)
        return cm->g;
    cm->tried = 1;
    const icpp_pm_module *pmm = icpp_pathmap_module(c->pm, i);
    double t0 = now_us();
    cm->m = icpp_module_open(pmm->path, NULL);
    const icpp_build_id *b = cm->m ? icpp_module_build_id(cm->m) : NULL;
    if (!b || !icpp_build_id_match(b, pmm->path, &pmm->build_id, pmm->path)) {   /* the file changed since training */
        icpp_module_close(cm->m);
        cm->m = NULL;
        return NULL;
    }
    cm->cfi = icpp_cfi_build(cm->m, NULL);
    cm->g = cm->cfi ? icpp_callgraph_build(cm->m, cm->cfi, NULL) : NULL;
    c->st.graph_ms += (now_us() - t0) / 1e3;
    c->st.graphs += cm->g != NULL;
    return cm->g;
}

static void load_all(icpp_completer *c)
{
    if (c->all_loaded)
        return;
    c->all_loaded = 1;
    for (uint32_t i = 0; i < c->nmods; i++)
        graph(c, i);
}

icpp_completer *icpp_completer_new(icpp_pathmap *pm, const icpp_cidx *x, const icpp_cpl_opts *o, icpp_err *err)
{
    icpp_completer *c = calloc(1, sizeof *c);
    if (!c)
        goto oom;
    c->pm = pm;
    c->x = x;
    if (o)
        c->o = *o;
    else
        icpp_cpl_opts_default(&c->o);
    if (c->o.max_frames > MAXFRAMES)
        c->o.max_frames = MAXFRAMES;
    if (c->o.max_frames < 1)
        c->o.max_frames = 1;
    c->nmods = icpp_pathmap_nmodules(pm);
    c->mods = calloc(c->nmods + 1, sizeof *c->mods);
    c->res = malloc((c->o.max_results + 1) * sizeof *c->res);
    if (!c->mods || !c->res)
        goto oom;
    for (uint32_t f = 0; f < icpp_pathmap_nfuncs(pm); f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        if (icpp_hmap_put(&c->funcs, pf->addr, pf->module, f) < 0)
            goto oom;
    }
    /* edges of the map, grouped by callee: count, place */
    size_t nn = icpp_pathmap_nnodes(pm), total = 0;
    c->min_root = INT64_MAX;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        if (icpp_hmap_put(&c->kids, n->parent, n->func, i) < 0)
            goto oom;
        if (!n->parent) {
            for (uint32_t k = 0; k < n->nheights; k++)
                if (n->heights[k].height < c->min_root)
                    c->min_root = n->heights[k].height;
            continue;
        }
        total += n->nsites;
    }
    if (c->min_root == INT64_MAX)
        c->min_root = 0;
    c->medges = malloc((total + 1) * sizeof *c->medges);
    if (!c->medges)
        goto oom;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        if (!n->parent)
            continue;
        const icpp_pm_func *cf = icpp_pathmap_func(pm, n->func);
        uint64_t *v = icpp_hmap_get(&c->medge_ix, cf->addr, cf->module);
        if (v)
            *v += n->nsites;
        else if (icpp_hmap_put(&c->medge_ix, cf->addr, cf->module, n->nsites) < 0)
            goto oom;
    }
    size_t off = 0;
    for (size_t i = 0; i < c->medge_ix.cap; i++) {
        icpp_hmap_slot *sl = &c->medge_ix.slots[i];
        if (!sl->used)
            continue;
        uint64_t cnt = sl->val;
        sl->val = (uint64_t)off << 32;
        off += cnt;
    }
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        if (!n->parent)
            continue;
        const icpp_pm_node *p = icpp_pathmap_node(pm, n->parent);
        const icpp_pm_func *cf = icpp_pathmap_func(pm, n->func), *pf = icpp_pathmap_func(pm, p->func);
        int32_t hd = INT32_MIN;
        if (n->nheights == 1 && p->nheights == 1) {
            /* Learned heights come from a recording, not through the map
             * reader's bound (ICPP_HEIGHT_MAX): an overflowing difference is
             * no frame size either. */
            int64_t d;
            if (!__builtin_sub_overflow(n->heights[0].height, p->heights[0].height, &d) && d >= 0 && d < INT32_MAX)
                hd = (int32_t)d;
        }
        uint64_t *v = icpp_hmap_get(&c->medge_ix, cf->addr, cf->module);
        for (uint32_t k = 0; k < n->nsites; k++) {
            uint32_t o2 = (uint32_t)(*v >> 32), cnt = (uint32_t)*v;
            c->medges[o2 + cnt] = (medge){pf->module, pf->addr, n->sites[k].module, n->sites[k].addr, hd};
            *v = (uint64_t)o2 << 32 | (cnt + 1);
        }
    }
    c->nmedges = total;
    return c;
oom:
    icpp_completer_free(c);
    icpp_err_set(err, ENOMEM, "out of memory preparing completion");
    return NULL;
}

void icpp_completer_free(icpp_completer *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->mods && i < c->nmods; i++) {
        icpp_callgraph_free(c->mods[i].g);
        icpp_cfi_free(c->mods[i].cfi);
        icpp_module_close(c->mods[i].m);
    }
    free(c->mods);
    icpp_hmap_free(&c->funcs);
    icpp_hmap_free(&c->kids);
    icpp_hmap_free(&c->medge_ix);
    icpp_hmap_free(&c->cache);
    icpp_hmap_free(&c->ind_at);
    icpp_hmap_free(&c->dead);
    free(c->medges);
    free(c->cands);
    free(c->res);
    free(c);
}

/* The index of indirect calls made from known contexts: for every node and
 * height of a function with indirect call sites, the heights its callees
 * are entered at.  Built on the first address-taken callee (every module's
 * graph is needed). */
static int build_indirect(icpp_completer *c)
{
    c->ind_built = 1;
    load_all(c);
    icpp_hmap deltas;           /* (caller, module) -> up to 4 distinct deltas, 16 bits each, +1 */
    icpp_hmap_init(&deltas);
    int rc = -ENOMEM;
    for (uint32_t j = 0; j < c->nmods; j++) {
        const icpp_callgraph *g = c->mods[j].g;
        const icpp_cg_site *const *s;
        uint32_t n = g ? icpp_callgraph_indirect(g, &s) : 0;
        for (uint32_t i = 0; i < n; i++) {
            if (s[i]->tail || s[i]->delta <= 0 || s[i]->delta >= 0xffff)
                continue;
            uint64_t *v = icpp_hmap_get(&deltas, s[i]->caller, j), cur = v ? *v : 0;
            int have = 0, k;
            for (k = 0; k < 4 && (cur >> (16 * k)) & 0xffff; k++)
                have |= (int)((cur >> (16 * k)) & 0xffff) == s[i]->delta + 1;
            if (have || k == 4)
                continue;
            cur |= (uint64_t)(s[i]->delta + 1) << (16 * k);
            if (icpp_hmap_put(&deltas, s[i]->caller, j, cur) < 0)
                goto out;
        }
    }
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(c->pm); i++) {
        const icpp_pm_node *n = icpp_pathmap_node(c->pm, i);
        const icpp_pm_func *f = icpp_pathmap_func(c->pm, n->func);
        uint64_t *v = icpp_hmap_get(&deltas, f->addr, f->module);
        if (!v || !n->nheights)
            continue;
        for (int k = 0; k < 4 && (*v >> (16 * k)) & 0xffff; k++) {
            int64_t d = (int64_t)((*v >> (16 * k)) & 0xffff) - 1;
            for (uint32_t hk = 0; hk < n->nheights; hk++) {
                if (!icpp_height_ok(n->heights[hk].height))
                    continue;   /* a learned height past any stack: no callee there */
                uint64_t h = (uint64_t)(n->heights[hk].height + d);
                uint64_t *cnt = icpp_hmap_get(&c->ind_at, h, UINT64_MAX), m = cnt ? *cnt : 0;
                if (icpp_hmap_put(&c->ind_at, h, m, i) < 0 || icpp_hmap_put(&c->ind_at, h, UINT64_MAX, m + 1) < 0)
                    goto out;
            }
        }
    }
    rc = 0;
out:
    icpp_hmap_free(&deltas);
    return rc;
}

/* ---- the search ---- */

static void expand(icpp_completer *c, uint32_t mod, uint64_t addr, int64_t h);

/* The known nodes of (mod, addr) at h, or 0. */
static uint32_t anchors(icpp_completer *c, uint32_t mod, uint64_t addr, int64_t h, const icpp_cand **out)
{
    uint64_t *f = icpp_hmap_get(&c->funcs, addr, mod);
    if (!f)
        return 0;
    return icpp_cidx_lookup(c->x, (uint32_t)*f, h, out);
}

static void add_result(icpp_completer *c, uint32_t anchor, uint64_t act)
{
    c->hits++;
    if (c->nres >= c->o.max_results) {
        c->truncated = 1;
        return;
    }
    /* A new frame whose address is taken may also have been entered by an
     * indirect call from a function the map does not know: that branch is
     * not searched (every indirect site of every module, recursively, is too
     * much), so a completion through one is never unique. */
    for (uint32_t i = 0; i < c->depth && c->o.any_indirect && !c->open; i++) {
        const icpp_callgraph *g = graph(c, c->stack[i].mod);
        c->open = g && icpp_callgraph_address_taken(g, c->stack[i].addr);
    }
    result *r = &c->res[c->nres];
    r->anchor = anchor;
    r->act = act;
    r->n = c->depth;
    for (uint32_t i = 0; i < c->depth; i++)
        r->f[i] = c->stack[c->depth - 1 - i];   /* root-first */
    for (uint32_t k = 0; k < c->nres; k++)
        if (c->res[k].anchor == anchor && c->res[k].n == r->n && !memcmp(c->res[k].f, r->f, r->n * sizeof *r->f))
            return;     /* the same path by another edge */
    c->nres++;
}

/* Caller (mod, addr) entered at h called the frame on top of the stack. */
static void pred(icpp_completer *c, uint32_t mod, uint64_t addr, int64_t h)
{
    if (c->truncated || h <= 0 || h < c->min_root)
        return;
    if (++c->work > c->o.max_work) {    /* every caller looked at is work */
        c->truncated = 1;
        return;
    }
    const icpp_cand *a;
    uint32_t na = anchors(c, mod, addr, h, &a);
    if (na) {
        for (uint32_t i = 0; i < na; i++)
            add_result(c, a[i].node, a[i].learned);
        return;
    }
    if (c->depth >= c->lim) {
        c->cut = 1;     /* a longer path might join the tree here: no completion is unique */
        return;
    }
    /* a state that found nothing with as many frames to go finds nothing now */
    uint64_t key = (uint64_t)mod << 48 | addr, left = c->lim - c->depth;
    uint64_t *dead = icpp_hmap_get(&c->dead, key, (uint64_t)h);
    if (dead && *dead >= left)
        return;
    uint64_t before = c->hits;
    c->stack[c->depth++] = (frame){mod, addr};
    expand(c, mod, addr, h);
    c->depth--;
    if (c->hits == before && !c->truncated)
        icpp_hmap_put(&c->dead, key, (uint64_t)h, left);   /* out of memory: only slower */
}

/* The callers of (mod, addr) entered at h; through tail calls, the callers
 * of the function it replaced (same height). */
static void gather(icpp_completer *c, uint32_t mod, uint64_t addr, int64_t h, int tails)
{
    const icpp_callgraph *g = graph(c, mod);
    const icpp_cg_site *const *s;
    uint32_t n;
    if (g) {
        n = icpp_callgraph_callers(g, addr, &s);
        for (uint32_t i = 0; i < n && !c->truncated; i++) {
            if (s[i]->kind == ICPP_CG_TAIL) {
                if (tails < MAXTAIL && s[i]->caller != addr)
                    gather(c, mod, s[i]->caller, h, tails + 1);
            } else {
                pred(c, mod, s[i]->caller, h - s[i]->delta);
            }
        }
        const char *names[MAXNAMES];
        uint32_t nn = icpp_callgraph_export_names(g, addr, names, MAXNAMES);
        if (nn)
            load_all(c);
        for (uint32_t k = 0; k < nn; k++)
            for (uint32_t j = 0; j < c->nmods && !c->truncated; j++) {
                const icpp_callgraph *gj = c->mods[j].g;
                if (!gj || j == mod)
                    continue;
                n = icpp_callgraph_plt_callers(gj, names[k], &s);
                for (uint32_t i = 0; i < n && !c->truncated; i++) {
                    if (s[i]->tail) {
                        if (tails < MAXTAIL)
                            gather(c, j, s[i]->caller, h, tails + 1);
                    } else {
                        pred(c, j, s[i]->caller, h - s[i]->delta);
                    }
                }
            }
        if (c->o.any_indirect && icpp_callgraph_address_taken(g, addr)) {
            /* an indirect call made from a known context, any address-taken callee */
            if (!c->ind_built && build_indirect(c) < 0) {
                c->truncated = 1;
                return;
            }
            uint64_t *cnt = icpp_hmap_get(&c->ind_at, (uint64_t)h, UINT64_MAX);
            for (uint64_t k = 0; cnt && k < *cnt && !c->truncated; k++) {
                uint32_t node = (uint32_t)*icpp_hmap_get(&c->ind_at, (uint64_t)h, k);
                add_result(c, node, icpp_cidx_node_learned(c->x, node));
            }
        }
    }
    /* edges the map saw: indirect calls, and what the static graph missed */
    uint64_t *v = icpp_hmap_get(&c->medge_ix, addr, mod);
    if (!v)
        return;
    /* Imports training saw resolve to this function (an IFUNC's chosen
     * implementation, memcpy -> __memmove_avx_unaligned_erms, has no export of
     * its own): every PLT site importing that name may call it. */
    const char *seen[MAXNAMES];
    uint32_t nseen = 0;
    for (uint32_t i = (uint32_t)(*v >> 32), e = i + (uint32_t)*v; i < e && nseen < MAXNAMES; i++) {
        if (++c->work > c->o.max_work) {
            c->truncated = 1;
            return;
        }
        const medge *m = &c->medges[i];
        const icpp_callgraph *gs = graph(c, m->smod);
        const icpp_cg_site *site = gs ? icpp_callgraph_site_at(gs, m->ret) : NULL;
        if (!site || site->kind != ICPP_CG_PLT)
            continue;
        uint32_t k;
        for (k = 0; k < nseen && strcmp(seen[k], site->name); k++)
            ;
        if (k == nseen)
            seen[nseen++] = site->name;
    }
    if (nseen)
        load_all(c);
    for (uint32_t k = 0; k < nseen && !c->truncated; k++)
        for (uint32_t j = 0; j < c->nmods && !c->truncated; j++) {
            const icpp_callgraph *gj = c->mods[j].g;
            const icpp_cg_site *const *ps;
            uint32_t np = gj ? icpp_callgraph_plt_callers(gj, seen[k], &ps) : 0;
            for (uint32_t i = 0; i < np && !c->truncated; i++) {
                if (ps[i]->tail) {
                    if (tails < MAXTAIL)
                        gather(c, j, ps[i]->caller, h, tails + 1);
                } else {
                    pred(c, j, ps[i]->caller, h - ps[i]->delta);
                }
            }
        }
    for (uint32_t i = (uint32_t)(*v >> 32), e = i + (uint32_t)*v; i < e && !c->truncated; i++) {
        const medge *m = &c->medges[i];
        const icpp_callgraph *gs = graph(c, m->smod);
        const icpp_cg_site *site = gs ? icpp_callgraph_site_at(gs, m->ret) : NULL;
        int64_t d;
        if (site && site->has_delta && site->kind == ICPP_CG_CALL && site->callee == addr && site->caller == m->caller)
            continue;   /* a static edge: taken above */
        if (site && site->has_delta)
            d = site->delta;    /* indirect, PLT, or a call of a function that tail-called this one */
        else if (m->hdelta != INT32_MIN)
            d = m->hdelta;
        else
            continue;
        pred(c, m->cmod, m->caller, h - d);
    }
}

static void expand(icpp_completer *c, uint32_t mod, uint64_t addr, int64_t h)
{
    if (++c->work > c->o.max_work) {
        c->truncated = 1;
        return;
    }
    gather(c, mod, addr, h, 0);
}

/* Run a search from leaf (mod, addr) at h; results in c->res. */
static void search(icpp_completer *c, uint32_t mod, uint64_t addr, int64_t h)
{
    c->nres = 0;
    c->work = 0;
    if (c->dead.n) {
        icpp_hmap_free(&c->dead);
        icpp_hmap_init(&c->dead);
    }
    c->truncated = 0;
    c->cut = 0;
    c->open = 0;
    c->hits = 0;
    c->depth = 1;
    c->stack[0] = (frame){mod, addr};
    /* A height past any stack (from a crafted recording) has no path, and
     * the heights searched from a bounded one stay far inside int64_t. */
    if (!icpp_height_ok(h))
        return;
    double t0 = now_us(), g0 = c->st.graph_ms;
    /* Iterative deepening: shorter completions first, so that the result
     * bound keeps the likelier ones; the last round (max_frames) decides
     * whether anything was cut. */
    for (c->lim = 1; c->lim <= c->o.max_frames && !c->truncated; c->lim++) {
        c->cut = 0;
        c->depth = 1;
        expand(c, mod, addr, h);
    }
    double dt = now_us() - t0 - (c->st.graph_ms - g0) * 1e3;     /* a call graph is built once, not per query */
    c->st.queries++;
    c->st.expansions += c->work;
    c->st.total_us += dt;
    if (dt > c->st.max_us)
        c->st.max_us = dt;
    c->st.truncated += c->truncated;
    c->st.cut += c->cut && !c->truncated;
    c->st.open += c->open && !c->cut && !c->truncated;
    c->truncated |= c->cut | c->open;
}

static int64_t func_of(icpp_completer *c, uint32_t mod, uint64_t addr)
{
    uint64_t *v = icpp_hmap_get(&c->funcs, addr, mod);
    if (v)
        return (int64_t)*v;
    char buf[64];
    const char *name = NULL;
    if (graph(c, mod) && c->mods[mod].m) {
        const icpp_func *f = icpp_module_func_start(c->mods[mod].m, addr);
        name = f ? f->name : NULL;
    }
    if (!name) {
        snprintf(buf, sizeof buf, "fn_%llx", (unsigned long long)addr);
        name = buf;
    }
    uint32_t idx;
    if (icpp_pathmap_add_func(c->pm, mod, addr, name, &idx) < 0 || icpp_hmap_put(&c->funcs, addr, mod, idx) < 0)
        return -ENOMEM;
    return idx;
}

static int64_t node_of(icpp_completer *c, const result *r)
{
    uint32_t node = r->anchor;
    for (uint32_t i = 0; i < r->n; i++) {
        int64_t f = func_of(c, r->f[i].mod, r->f[i].addr);
        if (f < 0)
            return f;
        uint64_t *v = icpp_hmap_get(&c->kids, node, (uint64_t)f);
        if (v) {
            node = (uint32_t)*v;
            continue;
        }
        uint32_t k;
        if (icpp_pathmap_child(c->pm, node, (uint32_t)f, &k) < 0 || icpp_hmap_put(&c->kids, node, (uint64_t)f, k) < 0)
            return -ENOMEM;
        node = k;
    }
    return node;
}

int icpp_complete(icpp_completer *c, uint32_t module, uint64_t addr, int64_t height, const icpp_cand **out,
                  int *truncated)
{
    uint64_t key = (uint64_t)module << 48 | addr;
    uint64_t *v = icpp_hmap_get(&c->cache, key, (uint64_t)height);
    if (!v) {
        search(c, module, addr, height);
        size_t off = c->ncands;
        if (icpp_vec_reserve((void **)&c->cands, &c->capcands, c->ncands + c->nres, sizeof *c->cands, 256) < 0)
            return -ENOMEM;
        uint32_t cnt = 0;
        for (uint32_t i = 0; i < c->nres; i++) {
            int64_t node = node_of(c, &c->res[i]);
            if (node < 0)
                return (int)node;
            uint32_t k;
            for (k = 0; k < cnt && c->cands[off + k].node != (uint32_t)node; k++)
                ;
            if (k == cnt)
                c->cands[off + cnt++] = (icpp_cand){(uint32_t)node, 1, 0};
        }
        c->ncands += cnt;
        c->st.found += cnt > 0;
        c->st.unique += cnt == 1 && !c->truncated;
        if (icpp_hmap_put(&c->cache, key, (uint64_t)height,
                          (uint64_t)off << 32 | (uint64_t)(c->truncated ? 1u : 0u) << 31 | cnt) < 0)
            return -ENOMEM;
        v = icpp_hmap_get(&c->cache, key, (uint64_t)height);
    }
    uint32_t cnt = (uint32_t)*v & 0x7fffffffu;
    *out = cnt ? &c->cands[*v >> 32] : NULL;
    if (truncated)
        *truncated = (int)((*v >> 31) & 1);
    return (int)cnt;
}

int icpp_complete_alternatives(icpp_completer *c, uint32_t module, uint64_t addr, int64_t height, int active,
                               int *truncated)
{
    search(c, module, addr, height);
    int n = 0;
    for (uint32_t i = 0; i < c->nres; i++) {
        /* a path the map has, at this height, is not an alternative */
        const result *r = &c->res[i];
        if (active && !r->act)
            continue;
        uint32_t node = r->anchor;
        int known = 1;
        for (uint32_t k = 0; k < r->n && known; k++) {
            uint64_t *f = icpp_hmap_get(&c->funcs, r->f[k].addr, r->f[k].mod);
            uint64_t *v = f ? icpp_hmap_get(&c->kids, node, *f) : NULL;
            if (!v)
                known = 0;
            else
                node = (uint32_t)*v;
        }
        if (known) {
            const icpp_pm_node *nd = icpp_pathmap_node(c->pm, node);
            known = 0;
            for (uint32_t k = 0; k < nd->nheights; k++)
                known |= nd->heights[k].height == height;
        }
        n += !known;
    }
    if (truncated)
        *truncated = c->truncated;
    return n;
}

int64_t icpp_complete_func(const icpp_completer *c, uint32_t module, uint64_t addr)
{
    uint64_t *v = icpp_hmap_get(&c->funcs, addr, module);
    return v ? (int64_t)*v : -1;
}

void icpp_completer_get_stats(const icpp_completer *c, icpp_cpl_stats *s)
{
    *s = c->st;
}
