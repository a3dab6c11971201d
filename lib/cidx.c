/* cidx.c -- the CID index of a path map: (function, height) to candidate nodes, functions and modules by build-id, learn counts, routes. */
#include "cidx.h"

#include "hmap.h"
#include "module.h"
#include "vec.h"

#include <errno.h>
#include <stdlib.h>

/* A context below a signal frame (icpp_cidx_lookup_aligned). */
typedef struct sigctx {
    uint32_t func, node;
    int64_t  height;
    uint64_t count, learned;
    uint8_t  depth;         /* signal frames on the path */
} sigctx;

struct icpp_cidx {
    icpp_cidx_hot hot;      /* first: cidx.h's inline accessors read it (cid, cands, funcs, modcache, novel, policy) */
    const icpp_pathmap *pm;
    sigctx    *sig;         /* sorted by func */
    size_t     nsig;
    icpp_hmap  sigfunc;     /* (func, 0) -> offset << 32 | count into sig */
    icpp_cand *fz;          /* scratch: candidates of an aligned match */
    size_t     fzcap;
    size_t     ncands;
    uint64_t  *act;         /* per node: learn samples through it, at any height */
    size_t     nact;
    icpp_hmap  routes;      /* (func, height) -> 1 + routes to the CID through known contexts (capped) */
};

static int sig_cmp(const void *a, const void *b)
{
    const sigctx *x = a, *y = b;
    return x->func < y->func ? -1 : x->func > y->func;
}

static int index_signal_contexts(icpp_cidx *x)
{
    const icpp_pathmap *pm = x->pm;
    size_t nn = icpp_pathmap_nnodes(pm), nm = icpp_pathmap_nmodules(pm);
    uint8_t *depth = calloc(nn, 1);
    icpp_module **mods = calloc(nm + 1, sizeof *mods);
    uint8_t *tried = calloc(nm + 1, 1);
    int rc = -1;
    if (!depth || !mods || !tried)
        goto out;
    size_t nsig = 0;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        int root = 0;
        for (uint32_t k = 0; k < n->nsites && !root; k++) {
            uint32_t m = n->sites[k].module;
            if (m >= nm)
                continue;
            if (!tried[m]) {
                tried[m] = 1;
                const icpp_pm_module *pmm = icpp_pathmap_module(pm, m);
                mods[m] = icpp_module_open(pmm->path, NULL);
                const icpp_build_id *b = mods[m] ? icpp_module_build_id(mods[m]) : NULL;
                if (b && !icpp_build_id_match(b, pmm->path, &pmm->build_id, pmm->path)) {
                    icpp_module_close(mods[m]);     /* the file changed since training */
                    mods[m] = NULL;
                }
            }
            root = mods[m] && icpp_module_is_sigreturn(mods[m], n->sites[k].addr);
        }
        depth[i] = (uint8_t)(depth[n->parent] + root < 255 ? depth[n->parent] + root : 255);
        if (depth[i])
            nsig += n->nheights;
    }
    x->sig = malloc((nsig + 1) * sizeof *x->sig);
    if (!x->sig)
        goto out;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; depth[i] && k < n->nheights; k++)
            x->sig[x->nsig++] = (sigctx){n->func, i, n->heights[k].height, n->heights[k].count,
                                         n->heights[k].learned, depth[i]};
    }
    if (x->nsig)
        qsort(x->sig, x->nsig, sizeof *x->sig, sig_cmp);
    for (size_t i = 0; i < x->nsig;) {
        size_t j = i;
        while (j < x->nsig && x->sig[j].func == x->sig[i].func)
            j++;
        if (icpp_hmap_put(&x->sigfunc, x->sig[i].func, 0, (uint64_t)i << 32 | (j - i)) < 0)
            goto out;
        i = j;
    }
    rc = 0;
out:
    for (size_t m = 0; mods && m < nm; m++)
        icpp_module_close(mods[m]);
    free(mods);
    free(tried);
    free(depth);
    return rc;
}

/* Signal contexts of func within the alignment window of height; fills x->fz. */
uint32_t icpp_cidx_lookup_aligned(icpp_cidx *x, uint32_t func, int64_t height, const icpp_cand **out)
{
    *out = NULL;
    uint64_t *v = icpp_hmap_get(&x->sigfunc, func, 0);
    if (!v)
        return 0;
    size_t off = (size_t)(*v >> 32), cnt = (size_t)(uint32_t)*v;
    uint32_t n = 0;
    for (size_t i = off; i < off + cnt; i++) {
        const sigctx *c = &x->sig[i];
        int64_t d = c->height - height;
        if (d % 16 || d <= -64 * (int64_t)c->depth || d >= 64 * (int64_t)c->depth)
            continue;
        if (icpp_vec_reserve((void **)&x->fz, &x->fzcap, (size_t)n + 1, sizeof *x->fz, 16) < 0)
            break;
        /* one node may match at several of its heights: merge */
        uint32_t k;
        for (k = 0; k < n && x->fz[k].node != c->node; k++)
            ;
        if (k < n) {
            x->fz[k].count += c->count;
            x->fz[k].learned += c->learned;
        } else {
            x->fz[n++] = (icpp_cand){c->node, c->count, c->learned};
        }
    }
    if (n)
        *out = x->fz;
    return n;
}

icpp_cidx *icpp_cidx_build(const icpp_pathmap *pm, icpp_err *err)
{
    icpp_cidx *x = calloc(1, sizeof *x);
    if (!x) {
        icpp_err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    x->pm = pm;
    x->hot.policy.votes = ICPP_LEARN_VOTES;
    size_t nn = icpp_pathmap_nnodes(pm), total = 0;
    /* Pass 1: count candidates per CID.  Pass 2: place them contiguously. */
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t *v = icpp_hmap_get(&x->hot.cid, n->func, (uint64_t)n->heights[k].height);
            if (v)
                (*v)++;
            else if (icpp_hmap_put(&x->hot.cid, n->func, (uint64_t)n->heights[k].height, 1) < 0)
                goto oom;
            total++;
        }
    }
    x->hot.cands = malloc((total ? total : 1) * sizeof *x->hot.cands);
    if (!x->hot.cands)
        goto oom;
    /* prefix offsets */
    size_t off = 0;
    for (size_t i = 0; i < x->hot.cid.cap; i++) {
        icpp_hmap_slot *sl = &x->hot.cid.slots[i];
        if (!sl->used)
            continue;
        uint64_t cnt = sl->val;
        sl->val = (uint64_t)off << 32;      /* count filled in pass 2 */
        off += cnt;
    }
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t *v = icpp_hmap_get(&x->hot.cid, n->func, (uint64_t)n->heights[k].height);
            uint32_t o = (uint32_t)(*v >> 32), c = (uint32_t)*v;
            x->hot.cands[o + c] = (icpp_cand){i, n->heights[k].count, n->heights[k].learned};
            *v = (uint64_t)o << 32 | (c + 1);
        }
    }
    x->ncands = total;
    for (uint32_t f = 0; f < icpp_pathmap_nfuncs(pm); f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        if (icpp_hmap_put(&x->hot.funcs, pf->module, pf->addr, f) < 0)
            goto oom;
    }
    if (index_signal_contexts(x) < 0)
        goto oom;
    x->act = calloc(nn ? nn : 1, sizeof *x->act);
    if (!x->act)
        goto oom;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; k < n->nheights; k++)
            x->act[i] += n->heights[k].learned;
    }
    x->nact = nn;
    return x;
oom:
    icpp_cidx_free(x);
    icpp_err_set(err, ENOMEM, "out of memory indexing the path map");
    return NULL;
}

void icpp_cidx_free(icpp_cidx *x)
{
    if (!x)
        return;
    if (x->hot.policy.release)
        x->hot.policy.release(x->hot.policy.state);
    icpp_hmap_free(&x->hot.cid);
    icpp_hmap_free(&x->hot.funcs);
    icpp_hmap_free(&x->sigfunc);
    icpp_hmap_free(&x->routes);
    free(x->act);
    free(x->sig);
    free(x->fz);
    free(x->hot.cands);
    free(x->hot.modcache);
    free(x);
}

int32_t icpp_cidx_module(icpp_cidx *x, uint32_t mkey, const icpp_build_id *bid)
{
    if (mkey >= x->hot.nmodcache) {
        size_t nc = mkey + 16;
        int32_t *n = realloc(x->hot.modcache, nc * sizeof *n);
        if (!n)
            return -1;
        for (size_t i = x->hot.nmodcache; i < nc; i++)
            n[i] = -2;
        x->hot.modcache = n;
        x->hot.nmodcache = nc;
    }
    if (x->hot.modcache[mkey] == -2) {
        x->hot.modcache[mkey] = icpp_pathmap_find_module(x->pm, bid);
    }
    return x->hot.modcache[mkey];
}

const icpp_pathmap *icpp_cidx_pathmap(const icpp_cidx *x)
{
    return x->pm;
}

void icpp_cidx_set_novel(icpp_cidx *x, const uint8_t *novel, size_t n)
{
    x->hot.novel = novel;
    x->hot.nnovel = n;
}

uint64_t icpp_cidx_node_learned(const icpp_cidx *x, uint32_t node)
{
    return node < x->nact ? x->act[node] : 0;
}

#define ROUTES_CAP (1u << 20)

/* Has a candidate c[j] (j < i) that routes() counts -- learn samples
 * passed through it -- its parent at CID (func, height)? */
static int parent_before(const icpp_cidx *x, const icpp_cand *c, uint32_t i, uint32_t func, int64_t height)
{
    for (uint32_t j = 0; j < i; j++) {
        const icpp_pm_node *nd = icpp_pathmap_node(x->pm, c[j].node);
        if (!nd->parent || (!c[j].learned && !icpp_cidx_node_learned(x, c[j].node)))
            continue;
        const icpp_pm_node *pn = icpp_pathmap_node(x->pm, nd->parent);
        for (uint32_t m = 0; pn->func == func && m < pn->nheights; m++)
            if (pn->heights[m].height == height)
                return 1;
    }
    return 0;
}

/* Routes from a root to CID (func, height) through contexts this run was
 * seen in: a context's routes are the sum of those of the distinct contexts
 * the parents of its known paths with learn samples are at (a root's
 * parent, or none with learn samples: 1).  More routes than known paths
 * means the known paths recombine -- a path the map does not have (one part
 * of some known path, the rest of another) reaches the same CID.  Memoized
 * per CID; capped at ROUTES_CAP; a cycle counts as 1. */
static uint64_t routes(icpp_cidx *x, uint32_t func, int64_t height, int depth)
{
    uint64_t *v = icpp_hmap_get(&x->routes, func, (uint64_t)height);
    if (v)
        return *v ? *v - 1 : 1;         /* 0: being computed (a cycle) */
    if (depth > 4096 || icpp_hmap_put(&x->routes, func, (uint64_t)height, 0) < 0)
        return 1;
    const icpp_cand *c;
    uint32_t n = icpp_cidx_lookup(x, func, height, &c);
    uint64_t sum = 0;
    int root = 0;
    for (uint32_t i = 0; i < n && sum < ROUTES_CAP; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(x->pm, c[i].node);
        if (!c[i].learned && !icpp_cidx_node_learned(x, c[i].node))
            continue;       /* a context this run's learn samples never passed through */
        if (!nd->parent) {
            root = 1;
            continue;
        }
        /* each distinct parent CID once: few per CID, so a quadratic check */
        const icpp_pm_node *pn = icpp_pathmap_node(x->pm, nd->parent);
        for (uint32_t k = 0; k < pn->nheights && sum < ROUTES_CAP; k++) {
            int64_t ph = pn->heights[k].height;
            int dup = parent_before(x, c, i, pn->func, ph);
            for (uint32_t m = 0; m < k && !dup; m++)
                dup = pn->heights[m].height == ph;
            if (!dup)
                sum += routes(x, pn->func, ph, depth + 1);
        }
    }
    sum += (uint64_t)root;
    if (!sum)
        sum = 1;
    if (sum > ROUTES_CAP)
        sum = ROUTES_CAP;
    v = icpp_hmap_get(&x->routes, func, (uint64_t)height);
    if (v)
        *v = sum + 1;
    return sum;
}

uint64_t icpp_cidx_routes(icpp_cidx *x, uint32_t func, int64_t height)
{
    return routes(x, func, height, 0);
}

