/* resolve.c -- context-id lookup: a sample's (function, height) to the candidate call paths of a path map. */
#include "resolve.h"

#include "complete.h"
#include "hmap.h"
#include "module.h"
#include "plt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Contexts under a signal frame.  The kernel puts a signal frame at a
 * 64-byte aligned address below the interrupted SP, while thread bases are
 * only 16-byte aligned (startstack moves with ASLR): a handler's height, and
 * every height above it, differs between runs by one of 0, 16, 32, 48.  So
 * contexts below a handler (a node whose call site is the signal-return
 * trampoline) are also matched within 64 bytes per signal frame, in steps of
 * 16, when the exact CID is not in the map. */
typedef struct sigctx {
    uint32_t func, node;
    int64_t  height;
    uint64_t count, learned;
    uint8_t  depth;         /* signal frames on the path */
} sigctx;

struct icpp_cidx {
    const icpp_pathmap *pm;
    sigctx    *sig;         /* sorted by func */
    size_t     nsig;
    icpp_hmap  sigfunc;     /* (func, 0) -> offset << 32 | count into sig */
    icpp_cand *fz;          /* scratch: candidates of an aligned match */
    size_t     fzcap;
    icpp_hmap  cid;         /* (func, height) -> (offset << 32 | count) into cands */
    icpp_cand *cands;
    size_t     ncands;
    icpp_hmap  funcs;       /* (pm module, addr) -> func */
    int32_t   *modcache;    /* mkey -> pm module (-1 none, -2 not looked up) */
    size_t     nmodcache;
    uint32_t   votes;       /* learn votes that single out one of several candidates; 0 = never */
    const uint8_t *novel;   /* per map function: learning found contexts training lacked */
    size_t     nnovel;
    icpp_completer *cpl;    /* completion of missing CIDs, or NULL */
    int        evidence;    /* weigh candidates by this recording's learn samples (icpp_cidx_set_evidence) */
    uint64_t  *act;         /* per node: learn samples through it, at any height */
    size_t     nact;
    icpp_cand *pz;          /* scratch: the candidates left after pruning */
    size_t     pzcap;
    icpp_hmap  alt;         /* (func, height) -> 1 + active alternatives found by completion */
    icpp_hmap  routes;      /* (func, height) -> 1 + routes to the CID through known contexts (capped) */
    icpp_plt  *plt;         /* samples in PLT stubs (lib/plt.h), made on first use */
    const icpp_learn_trail *trail;  /* the recording's learn samples in time order, or NULL */
};

void icpp_cidx_set_trail(icpp_cidx *x, const icpp_learn_trail *t)
{
    x->trail = t;
}

/* Did the sample's thread pass through node at the sample's height in the
 * learn sample just before it or just after it? */
static int neighbour_saw(const icpp_cidx *x, const icpp_rsample *s, uint32_t node)
{
    return x->trail ? icpp_learn_trail_confirms(x->trail, s->pid, s->tid, s->time, node, s->height) : 0;
}

void icpp_cidx_set_evidence(icpp_cidx *x, int on)
{
    x->evidence = on;
}

void icpp_cidx_set_novel(icpp_cidx *x, const uint8_t *novel, size_t n)
{
    x->novel = novel;
    x->nnovel = n;
}

int icpp_cidx_novel(const icpp_cidx *x, uint32_t func)
{
    return func < x->nnovel && x->novel[func];
}

void icpp_cidx_set_votes(icpp_cidx *x, uint32_t votes)
{
    x->votes = votes;
}

void icpp_cidx_set_completer(icpp_cidx *x, icpp_completer *c)
{
    x->cpl = c;
}

const char *icpp_res_kind_name(int k)
{
    static const char *n[] = {"precise", "ambiguous", "missing", "unresolved", "uncertain", "inferred"};
    return k >= 0 && k < ICPP_RES_MAX ? n[k] : "?";
}

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
static uint32_t aligned_lookup(icpp_cidx *x, uint32_t func, int64_t height)
{
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
        if (n == x->fzcap) {
            size_t nc = x->fzcap ? 2 * x->fzcap : 16;
            icpp_cand *nf = realloc(x->fz, nc * sizeof *nf);
            if (!nf)
                break;
            x->fz = nf;
            x->fzcap = nc;
        }
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
    x->votes = ICPP_LEARN_VOTES;
    size_t nn = icpp_pathmap_nnodes(pm), total = 0;
    /* Pass 1: count candidates per CID.  Pass 2: place them contiguously. */
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t *v = icpp_hmap_get(&x->cid, n->func, (uint64_t)n->heights[k].height);
            if (v)
                (*v)++;
            else if (icpp_hmap_put(&x->cid, n->func, (uint64_t)n->heights[k].height, 1) < 0)
                goto oom;
            total++;
        }
    }
    x->cands = malloc((total ? total : 1) * sizeof *x->cands);
    if (!x->cands)
        goto oom;
    /* prefix offsets */
    size_t off = 0;
    for (size_t i = 0; i < x->cid.cap; i++) {
        icpp_hmap_slot *sl = &x->cid.slots[i];
        if (!sl->used)
            continue;
        uint64_t cnt = sl->val;
        sl->val = (uint64_t)off << 32;      /* count filled in pass 2 */
        off += cnt;
    }
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t *v = icpp_hmap_get(&x->cid, n->func, (uint64_t)n->heights[k].height);
            uint32_t o = (uint32_t)(*v >> 32), c = (uint32_t)*v;
            x->cands[o + c] = (icpp_cand){i, n->heights[k].count, n->heights[k].learned};
            *v = (uint64_t)o << 32 | (c + 1);
        }
    }
    x->ncands = total;
    for (uint32_t f = 0; f < icpp_pathmap_nfuncs(pm); f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        if (icpp_hmap_put(&x->funcs, pf->module, pf->addr, f) < 0)
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
    icpp_hmap_free(&x->cid);
    icpp_hmap_free(&x->funcs);
    icpp_hmap_free(&x->sigfunc);
    icpp_hmap_free(&x->alt);
    icpp_hmap_free(&x->routes);
    free(x->act);
    free(x->pz);
    free(x->sig);
    free(x->fz);
    free(x->cands);
    free(x->modcache);
    icpp_plt_free(x->plt);
    free(x);
}

uint32_t icpp_cidx_lookup(const icpp_cidx *x, uint32_t func, int64_t height, const icpp_cand **out)
{
    uint64_t *v = icpp_hmap_get(&x->cid, func, (uint64_t)height);
    if (!v) {
        *out = NULL;
        return 0;
    }
    *out = &x->cands[*v >> 32];
    return (uint32_t)*v;
}

int32_t icpp_cidx_module(icpp_cidx *x, uint32_t mkey, const icpp_build_id *bid)
{
    if (mkey >= x->nmodcache) {
        size_t nc = mkey + 16;
        int32_t *n = realloc(x->modcache, nc * sizeof *n);
        if (!n)
            return -1;
        for (size_t i = x->nmodcache; i < nc; i++)
            n[i] = -2;
        x->modcache = n;
        x->nmodcache = nc;
    }
    if (x->modcache[mkey] == -2) {
        x->modcache[mkey] = icpp_pathmap_find_module(x->pm, bid);
    }
    return x->modcache[mkey];
}

int64_t icpp_cidx_func(icpp_cidx *x, uint32_t mkey, const icpp_build_id *bid, uint64_t addr)
{
    int32_t m = icpp_cidx_module(x, mkey, bid);
    if (m < 0)
        return -1;
    uint64_t *v = icpp_hmap_get(&x->funcs, (uint64_t)m, addr);
    return v ? (int64_t)*v : -1;
}

/* Evidence from this recording's learn samples (docs/resolve.md, "Never
 * precise and wrong").  A candidate no learn sample confirmed at this CID,
 * whose parent context no learn sample passed through at all, is a path of
 * a region this run was never seen in: where other candidates remain, it
 * is dropped (out->pruned counts them). */
uint64_t icpp_cidx_node_learned(const icpp_cidx *x, uint32_t node)
{
    return node < x->nact ? x->act[node] : 0;
}

static int cand_active(const icpp_cidx *x, const icpp_rsample *s, const icpp_cand *c)
{
    uint32_t p = icpp_pathmap_node(x->pm, c->node)->parent;
    /* a recording of several process images: this one's learn samples */
    int own = icpp_learn_trail_process_saw(x->trail, s->pid, s->exec_gen, c->node);
    if (own >= 0)
        return own || (p && icpp_learn_trail_process_saw(x->trail, s->pid, s->exec_gen, p) > 0);
    if (c->learned)
        return 1;
    return p && icpp_cidx_node_learned(x, p);
}

static int any_active(const icpp_cidx *x, const icpp_rsample *s, const icpp_resolution *out)
{
    for (uint32_t i = 0; i < out->ncand; i++)
        if (cand_active(x, s, &out->cand[i]))
            return 1;
    return 0;
}

static void prune_inactive(icpp_cidx *x, const icpp_rsample *s, icpp_resolution *out)
{
    uint32_t keep = 0;
    for (uint32_t i = 0; i < out->ncand; i++)
        keep += cand_active(x, s, &out->cand[i]);
    if (!keep || keep == out->ncand)
        return;
    if (keep > x->pzcap) {
        size_t nc = keep < 16 ? 16 : 2 * (size_t)keep;
        icpp_cand *n = realloc(x->pz, nc * sizeof *n);
        if (!n)
            return;     /* out of memory: not pruned, only less precise */
        x->pz = n;
        x->pzcap = nc;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < out->ncand; i++)
        if (cand_active(x, s, &out->cand[i]))
            x->pz[k++] = out->cand[i];
    out->pruned = out->ncand - k;
    out->cand = x->pz;
    out->ncand = k;
}

/* A call path the map lacks explains (func, height) too, joining the known
 * tree at a context this recording's learn samples passed through there. */
static int active_alternative(icpp_cidx *x, const icpp_rmodule *rm, const icpp_rsample *s, uint32_t func)
{
    uint64_t *v = icpp_hmap_get(&x->alt, func, (uint64_t)s->height);
    if (v)
        return *v > 1;
    int32_t m = icpp_cidx_module(x, (uint32_t)s->module, &rm->build_id);
    int n = m < 0 ? 0 : icpp_complete_alternatives(x->cpl, (uint32_t)m, s->func->owner, s->height, 1, NULL);
    if (n < 0)
        return 0;
    icpp_hmap_put(&x->alt, func, (uint64_t)s->height, 1 + (uint64_t)n);     /* out of memory: searched again */
    return n > 0;
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

/* Is c a context only this recording's learn samples showed (training never
 * entered it at this height), below a trained context -- the nearest one on
 * its path -- whose CID training saw shared by several paths?  ICPP's own
 * premise then says the same calls made from the others reach c's CID too,
 * and nothing in the map says which of them this sample's thread made: a
 * forked child's and an exec'd image's first malloc reach sysmalloc at one
 * height below a shared (malloc, height), and the one learn sample that saw
 * it may have been either's (docs/resolve.md, "Never precise and wrong"). */
static int learned_below_shared(const icpp_cidx *x, const icpp_cand *c)
{
    if (c->count || !c->learned)
        return 0;
    /* a parent's index is below its child's: the walk ends at a root */
    for (uint32_t a = icpp_pathmap_node(x->pm, c->node)->parent; a;) {
        const icpp_pm_node *an = icpp_pathmap_node(x->pm, a);
        int trained = 0;
        for (uint32_t k = 0; k < an->nheights; k++) {
            if (!an->heights[k].count)
                continue;
            trained = 1;
            const icpp_cand *cc;
            uint32_t n = icpp_cidx_lookup(x, an->func, an->heights[k].height, &cc), t = 0;
            for (uint32_t i = 0; i < n && t < 2; i++)
                t += cc[i].count > 0;
            if (t > 1)
                return 1;
        }
        if (trained)
            return 0;
        a = an->parent;
    }
    return 0;
}

/* A missing CID: inferred if the completer finds paths, else missing. */
static void complete_missing(icpp_cidx *x, const icpp_rmodule *rm, const icpp_rsample *s, icpp_resolution *out)
{
    out->kind = ICPP_RES_MISSING;
    out->ncand = 0;
    out->cand = NULL;
    if (!x->cpl)
        return;
    int32_t m = icpp_cidx_module(x, (uint32_t)s->module, &rm->build_id);
    if (m < 0)
        return;
    const icpp_cand *c;
    int bounded = 0;
    int n = icpp_complete(x->cpl, (uint32_t)m, s->func->owner, s->height, &c, &bounded);
    if (n <= 0)
        return;     /* none, or out of memory: the sample stays missing */
    out->kind = ICPP_RES_INFERRED;
    out->ncand = (uint32_t)n;
    out->cand = c;
    out->cand_total = (uint64_t)n;
    out->bounded = bounded;
}

void icpp_resolve_sample(icpp_cidx *x, const icpp_replay *rp, const icpp_rsample *s, icpp_resolution *out)
{
    memset(out, 0, sizeof *out);
    out->func = -1;
    if (s->status != ICPP_RS_OK) {
        out->kind = ICPP_RES_UNRESOLVED;
        return;
    }
    const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)s->module);
    if (s->func->plt) {         /* a PLT stub: the calling context's paths (lib/plt.h) */
        if (!x->plt)
            x->plt = icpp_plt_new();
        out->ncand = x->plt ? icpp_plt_contexts(x->plt, x, x->pm, rp, s, &out->cand, &out->func) : 0;
        if (!out->ncand) {
            out->kind = ICPP_RES_MISSING;
            return;
        }
    } else {
        out->func = icpp_cidx_func(x, (uint32_t)s->module, &rm->build_id, s->func->owner);
        if (out->func < 0) {
            complete_missing(x, rm, s, out);
            return;
        }
        out->ncand = icpp_cidx_lookup(x, (uint32_t)out->func, s->height, &out->cand);
        if (!out->ncand && (out->ncand = aligned_lookup(x, (uint32_t)out->func, s->height)) > 0) {
            out->cand = x->fz;
            out->aligned = 1;
        }
        if (!out->ncand) {
            complete_missing(x, rm, s, out);
            return;
        }
    }
    if (x->evidence && out->ncand > 1)
        prune_inactive(x, s, out);
    uint32_t seen = 0, only = 0;
    for (uint32_t i = 0; i < out->ncand; i++)
        if (out->cand[i].learned) {
            seen++;
            only = i;
        }
    out->by_learned = seen > 0;
    /* This recording's learn samples measure this run: where they all took
     * one of the known paths (and often enough), that is the sample's path. */
    if (seen == 1 && out->ncand > 1 && x->votes && out->cand[only].learned >= x->votes) {
        out->cand += only;
        out->ncand = 1;
        out->voted = 1;
    }
    for (uint32_t i = 0; i < out->ncand; i++) {
        out->cand_total += out->cand[i].count;
        out->learned_total += out->cand[i].learned;
    }
    out->kind = out->ncand == 1 ? ICPP_RES_PRECISE : ICPP_RES_AMBIGUOUS;
    /* Never precise and wrong (docs/resolve.md): for a function this run
     * uses in ways training never saw, a CID no learn sample confirmed is
     * not sure.  (Also flagging confirmed CIDs that completion can reach by
     * an untrained path turned 70-80% of lua's online samples uncertain:
     * the static graph lets an interpreter reach almost anything.) */
    int novel = out->func >= 0 && icpp_cidx_novel(x, (uint32_t)out->func);
    if (!seen && novel) {
        out->kind = ICPP_RES_UNCERTAIN;
    } else if (novel && out->ncand == 1 && learned_below_shared(x, &out->cand[0]) &&
               !neighbour_saw(x, s, out->cand[0].node)) {
        out->kind = ICPP_RES_UNCERTAIN;     /* learned below a CID training shared */
    } else if (novel && x->evidence) {
        /* Known contexts recombine into this CID (more routes than one):
         * an untrained arrangement may share it.  One learn sample there is
         * not enough, nor, in a sparse recording, is one route; the thread
         * seen on the one candidate a moment before or after is. */
        int few = out->learned_total < ICPP_ROUTE_CONFIRM, doubt;
        if (out->ncand > 1)
            doubt = icpp_cidx_routes(x, (uint32_t)out->func, s->height) > 1;
        else if (icpp_learn_trail_sparse(x->trail))
            doubt = few || icpp_cidx_routes(x, (uint32_t)out->func, s->height) > 1;
        else
            doubt = few && icpp_cidx_routes(x, (uint32_t)out->func, s->height) > 1;
        if (doubt && (out->ncand > 1 || !neighbour_saw(x, s, out->cand[0].node)))
            out->kind = ICPP_RES_UNCERTAIN;
    }
    if (out->kind == ICPP_RES_UNCERTAIN)
        return;
    if (!seen && x->evidence && x->cpl && !s->func->plt && !any_active(x, s, out) &&
             active_alternative(x, rm, s, (uint32_t)out->func)) {
        out->kind = ICPP_RES_UNCERTAIN;
        out->alternative = 1;
    }
}
