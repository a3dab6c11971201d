/* resolve.c -- the resolution policy: a sample to its candidate call paths in a path map, and how sure that is. */
#include "resolve.h"

#include "complete.h"
#include "hmap.h"
#include "plt.h"

#include <stdlib.h>
#include <string.h>

/* The policy's scratch for one index, made on first use and freed with
 * the index (icpp_cidx_policy.state).  Out of memory, there is none: PLT
 * samples are missing, nothing is pruned, alternatives are searched every
 * time -- as when one of its own allocations fails. */
typedef struct policy_state {
    icpp_cand *pz;          /* the candidates left after pruning */
    size_t     pzcap;
    icpp_hmap  alt;         /* (func, height) -> 1 + active alternatives found by completion */
    icpp_plt  *plt;         /* samples in PLT stubs (lib/plt.h), made on first use */
} policy_state;

static void state_free(void *p)
{
    policy_state *st = p;
    if (!st)
        return;
    icpp_hmap_free(&st->alt);
    free(st->pz);
    icpp_plt_free(st->plt);
    free(st);
}

static policy_state *state_of(icpp_cidx *x)
{
    icpp_cidx_policy *p = icpp_cidx_policy_of(x);
    if (!p->state && (p->state = calloc(1, sizeof(policy_state))) != NULL)
        p->release = state_free;
    return p->state;
}

void icpp_cidx_set_trail(icpp_cidx *x, const icpp_learn_trail *t)
{
    icpp_cidx_policy_of(x)->trail = t;
}

/* Did the sample's thread pass through node at the sample's height in the
 * learn sample just before it or just after it? */
static int neighbour_saw(const icpp_cidx_policy *p, const icpp_rsample *s, uint32_t node)
{
    return p->trail ? icpp_learn_trail_confirms(p->trail, s->pid, s->tid, s->time, node, s->height) : 0;
}

void icpp_cidx_set_evidence(icpp_cidx *x, int on)
{
    icpp_cidx_policy_of(x)->evidence = on;
}

void icpp_cidx_set_votes(icpp_cidx *x, uint32_t votes)
{
    icpp_cidx_policy_of(x)->votes = votes;
}

void icpp_cidx_set_completer(icpp_cidx *x, icpp_completer *c)
{
    icpp_cidx_policy_of(x)->cpl = c;
}

const char *icpp_res_kind_name(int k)
{
    static const char *n[] = {"precise", "ambiguous", "missing", "unresolved", "uncertain", "inferred"};
    return k >= 0 && k < ICPP_RES_MAX ? n[k] : "?";
}

/* Evidence from this recording's learn samples (docs/resolve.md, "Never
 * precise and wrong").  A candidate no learn sample confirmed at this CID,
 * whose parent context no learn sample passed through at all, is a path of
 * a region this run was never seen in: where other candidates remain, it
 * is dropped (out->pruned counts them). */
static int cand_active(icpp_cidx *x, const icpp_rsample *s, const icpp_cand *c)
{
    const icpp_learn_trail *trail = icpp_cidx_policy_of(x)->trail;
    uint32_t p = icpp_pathmap_node(icpp_cidx_pathmap(x), c->node)->parent;
    /* a recording of several process images: this one's learn samples */
    int own = icpp_learn_trail_process_saw(trail, s->pid, s->exec_gen, c->node);
    if (own >= 0)
        return own || (p && icpp_learn_trail_process_saw(trail, s->pid, s->exec_gen, p) > 0);
    if (c->learned)
        return 1;
    return p && icpp_cidx_node_learned(x, p);
}

static int any_active(icpp_cidx *x, const icpp_rsample *s, const icpp_resolution *out)
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
    policy_state *st = state_of(x);
    if (!st)
        return;     /* out of memory: not pruned, only less precise */
    if (keep > st->pzcap) {
        size_t nc = keep < 16 ? 16 : 2 * (size_t)keep;
        icpp_cand *n = realloc(st->pz, nc * sizeof *n);
        if (!n)
            return;     /* out of memory: not pruned, only less precise */
        st->pz = n;
        st->pzcap = nc;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < out->ncand; i++)
        if (cand_active(x, s, &out->cand[i]))
            st->pz[k++] = out->cand[i];
    out->pruned = out->ncand - k;
    out->cand = st->pz;
    out->ncand = k;
}

/* A call path the map lacks explains (func, height) too, joining the known
 * tree at a context this recording's learn samples passed through there. */
static int active_alternative(icpp_cidx *x, const icpp_rmodule *rm, const icpp_rsample *s, uint32_t func)
{
    policy_state *st = state_of(x);
    uint64_t *v = st ? icpp_hmap_get(&st->alt, func, (uint64_t)s->height) : NULL;
    if (v)
        return *v > 1;
    int32_t m = icpp_cidx_module(x, (uint32_t)s->module, &rm->build_id);
    int n = m < 0 ? 0 : icpp_complete_alternatives(icpp_cidx_policy_of(x)->cpl, (uint32_t)m, s->func->owner,
                                                    s->height, 1, NULL);
    if (n < 0)
        return 0;
    if (st)     /* out of memory: searched again */
        icpp_hmap_put(&st->alt, func, (uint64_t)s->height, 1 + (uint64_t)n);
    return n > 0;
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
    const icpp_pathmap *pm = icpp_cidx_pathmap(x);
    /* a parent's index is below its child's: the walk ends at a root */
    for (uint32_t a = icpp_pathmap_node(pm, c->node)->parent; a;) {
        const icpp_pm_node *an = icpp_pathmap_node(pm, a);
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
    icpp_completer *cpl = icpp_cidx_policy_of(x)->cpl;
    if (!cpl)
        return;
    int32_t m = icpp_cidx_module(x, (uint32_t)s->module, &rm->build_id);
    if (m < 0)
        return;
    const icpp_cand *c;
    int bounded = 0;
    int n = icpp_complete(cpl, (uint32_t)m, s->func->owner, s->height, &c, &bounded);
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
    const icpp_cidx_policy *pol = icpp_cidx_policy_of(x);
    const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)s->module);
    if (s->func->plt) {         /* a PLT stub: the calling context's paths (lib/plt.h) */
        policy_state *st = state_of(x);
        if (st && !st->plt)
            st->plt = icpp_plt_new();
        out->ncand = st && st->plt ? icpp_plt_contexts(st->plt, x, icpp_cidx_pathmap(x), rp, s, &out->cand, &out->func)
                                   : 0;
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
        if (!out->ncand && (out->ncand = icpp_cidx_lookup_aligned(x, (uint32_t)out->func, s->height, &out->cand)) > 0)
            out->aligned = 1;
        if (!out->ncand) {
            complete_missing(x, rm, s, out);
            return;
        }
    }
    if (pol->evidence && out->ncand > 1)
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
    if (seen == 1 && out->ncand > 1 && pol->votes && out->cand[only].learned >= pol->votes) {
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
               !neighbour_saw(pol, s, out->cand[0].node)) {
        out->kind = ICPP_RES_UNCERTAIN;     /* learned below a CID training shared */
    } else if (novel && pol->evidence) {
        /* Known contexts recombine into this CID (more routes than one):
         * an untrained arrangement may share it.  One learn sample there is
         * not enough, nor, in a sparse recording, is one route; the thread
         * seen on the one candidate a moment before or after is. */
        int few = out->learned_total < ICPP_ROUTE_CONFIRM, doubt;
        if (out->ncand > 1)
            doubt = icpp_cidx_routes(x, (uint32_t)out->func, s->height) > 1;
        else if (icpp_learn_trail_sparse(pol->trail))
            doubt = few || icpp_cidx_routes(x, (uint32_t)out->func, s->height) > 1;
        else
            doubt = few && icpp_cidx_routes(x, (uint32_t)out->func, s->height) > 1;
        if (doubt && (out->ncand > 1 || !neighbour_saw(pol, s, out->cand[0].node)))
            out->kind = ICPP_RES_UNCERTAIN;
    }
    if (out->kind == ICPP_RES_UNCERTAIN)
        return;
    if (!seen && pol->evidence && pol->cpl && !s->func->plt && !any_active(x, s, out) &&
             active_alternative(x, rm, s, (uint32_t)out->func)) {
        out->kind = ICPP_RES_UNCERTAIN;
        out->alternative = 1;
    }
}
