/* greedy.c -- the greedy choice of call-site classes that wrapping and cloning share: CIDs scored by the contexts a change moves, the nodes a class moves, the training agent's order rule, one round of trials. */
#include "greedy.h"

#include "arr.h"
#include "cli.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

/* The training agent pops a frame only when a later entry is at or above
 * it (docs/rewrite.md, "Returned frames"), so which returned frames a path
 * records depends on the order of entry heights.  A wrap must keep that
 * order, or a training of OUT would record other paths than OUT's map
 * (orders.c: main calls strtol, then a; wrapping main's call of a would
 * enter a below strtol's returned frame, recorded as main;strtol;a).  For
 * every node N whose shift moved relative to a frame the agent compares it
 * with -- the returned frames on its path below its caller, and the
 * children of those and of its caller (frames its entry may pop) -- the
 * order of their heights under `shift` must be the one under `base`.
 * Except a child Q of N's caller C when N is called from C's own frame (C
 * its parent) and no frame of C's function lies in Q's subtree: the agent
 * takes a call from C's code or from a stub of C (a cold part of C) as
 * C's, and drops every frame above C's topmost frame at N's entry whatever
 * its height (the caller check, docs/train.md "The record"), so Q's height
 * against N's does not matter.  (A returned frame of C's function above N
 * -- recursion, sqlite3's walkers -- would be taken for C: there the rule
 * holds.)
 * Without this exception no call after a sibling at the same height could
 * be wrapped (sqlite3 without frame pointers: 48 of the 50 wrappable
 * classes that would have separated paths were refused for it). */
static int order_kept(const rw_greedy *e, const uint32_t *first, const uint32_t *next, const int64_t *base,
                      const int64_t *shift)
{
    size_t nn = icpp_pathmap_nnodes(e->pm);
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(e->pm, (uint32_t)i);
        int64_t dn = shift[i] - base[i];
        uint32_t stop = e->caller[i], on = (uint32_t)i;
        for (uint32_t a = n->parent;; on = a, a = icpp_pathmap_node(e->pm, a)->parent) {
            const icpp_pm_node *an = icpp_pathmap_node(e->pm, a);
            if (a != stop && a && shift[a] - base[a] != dn) {   /* a returned frame on the path: stays above */
                for (uint32_t x = 0; x < an->nheights; x++)
                    for (uint32_t y = 0; y < n->nheights; y++)
                        if ((an->heights[x].height + base[a] < n->heights[y].height + base[i]) !=
                            (an->heights[x].height + shift[a] < n->heights[y].height + shift[i]))
                            return 0;
            }
            int own_call = a && a == stop && a == n->parent;
            for (uint32_t q = a ? first[a] : 0; q; q = next[q]) {
                if (q == on || shift[q] - base[q] == dn || (own_call && !e->rec[q]))
                    continue;
                const icpp_pm_node *qn = icpp_pathmap_node(e->pm, q);
                for (uint32_t x = 0; x < qn->nheights; x++)
                    for (uint32_t y = 0; y < n->nheights; y++)
                        if ((qn->heights[x].height + base[q] >= n->heights[y].height + base[i]) !=
                            (qn->heights[x].height + shift[q] >= n->heights[y].height + shift[i]))
                            return 0;
            }
            if (!a || a == stop)
                break;
        }
    }
    return 1;
}

/* order_kept for the nodes vis[0..nvis) moved by delta from base (trial:
 * scratch, one per node). */
static int moved_order_kept(const rw_greedy *e, const uint32_t *first, const uint32_t *next, const int64_t *base,
                            const int64_t *delta, const uint32_t *vis, size_t nvis, int64_t *trial)
{
    memcpy(trial, base, icpp_pathmap_nnodes(e->pm) * sizeof *trial);
    for (size_t v = 0; v < nvis; v++)
        trial[vis[v]] += delta[vis[v]];
    return order_kept(e, first, next, base, trial);
}

/* e->rec (see rw_greedy) in one walk of the tree: on entering node d, the nearest
 * ancestor A of d's function (its depth kept per function) makes A's child
 * on the path recursive; a farther one is marked by the nearest node of its
 * function below it, which lies in the same subtree. */
static int mark_recursion(rw_greedy *e, const uint32_t *first, const uint32_t *next)
{
    const icpp_pathmap *pm = e->pm;
    size_t nn = icpp_pathmap_nnodes(pm), nf = icpp_pathmap_nfuncs(pm);
    uint32_t *path = malloc((nn + 1) * sizeof *path), *it = malloc((nn + 1) * sizeof *it);
    int64_t *near = malloc((nf + 1) * sizeof *near), *prev = malloc((nn + 1) * sizeof *prev);
    if (!path || !it || !near || !prev) {
        free(path), free(it), free(near), free(prev);
        return -1;
    }
    memset(e->rec, 0, nn);
    for (size_t f = 0; f <= nf; f++)
        near[f] = -1;
    size_t k = 0;           /* path[0..k]: the nodes from the virtual root; it[j]: path[j]'s next child */
    path[0] = 0;
    it[0] = first[0];
    while (1) {
        uint32_t d = it[k];
        if (!d) {           /* path[k] done: leave it */
            if (!k)
                break;
            uint32_t u = path[k];
            near[icpp_pathmap_node(pm, u)->func] = prev[u];
            k--;
            continue;
        }
        it[k] = next[d];
        uint32_t f = icpp_pathmap_node(pm, d)->func;
        path[++k] = d;
        it[k] = first[d];
        if (near[f] >= 0)
            e->rec[path[near[f] + 1]] = 1;
        prev[d] = near[f];
        near[f] = (int64_t)k;
    }
    free(path), free(it), free(near), free(prev);
    return 0;
}

int rw_cid_move(rw_cidtab *t, uint32_t f, int64_t h, int dir, uint64_t w)
{
    uint64_t *v = icpp_hmap_get(&t->h, f, (uint64_t)h);
    size_t i;
    if (v) {
        i = (size_t)*v - 1;
    } else {
        size_t capc = t->cap;   /* two arrays of one capacity: t->cap grows when both have */
        if (icpp_vec_reserve((void **)&t->cnt, &capc, t->n + 1, sizeof *t->cnt, 1024) < 0 ||
            icpp_vec_reserve((void **)&t->ws, &t->cap, t->n + 1, sizeof *t->ws, 1024) < 0)
            return -1;
        i = t->n++;
        t->cnt[i] = t->ws[i] = 0;
        if (icpp_hmap_put(&t->h, f, (uint64_t)h, i + 1) < 0)
            return -1;
    }
    if (t->cnt[i] == 1)
        t->u -= t->ws[i], t->c--;
    t->cnt[i] += (uint64_t)(int64_t)dir;
    t->ws[i] += dir > 0 ? w : -w;
    if (t->cnt[i] == 1)
        t->u += t->ws[i], t->c++;
    return 0;
}

/* Move every context of the nodes vis[0..nvis) by delta[node] (dir 1), or
 * back (dir -1); *hmax gets the largest moved height. */
static int move_all(const icpp_pathmap *pm, rw_cidtab *t, const int64_t *base, const int64_t *delta,
                    const uint32_t *vis, size_t nvis, int dir, int64_t *hmax, const uint32_t *func)
{
    for (size_t v = 0; v < nvis; v++) {
        uint32_t i = vis[v];
        if (!delta[i])
            continue;
        const icpp_pm_node *nd = icpp_pathmap_node(pm, i);
        for (uint32_t j = 0; j < nd->nheights; j++) {
            int64_t h0 = icpp_height_add(nd->heights[j].height, base[i]), h1 = icpp_height_add(h0, delta[i]);
            uint64_t w = nd->heights[j].count;
            uint32_t f = func ? func[i] : nd->func;
            if (rw_cid_move(t, f, dir > 0 ? h0 : h1, -1, w) < 0 || rw_cid_move(t, f, dir > 0 ? h1 : h0, 1, w) < 0)
                return -1;
            if (h1 > *hmax)
                *hmax = h1;
        }
    }
    return 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Children lists of every node: by parent (first/next), by the frame it was
 * called from (cfirst/cnext) and by class (kfirst/knext); 0 ends a list. */
static void node_lists(const icpp_pathmap *pm, const uint32_t *caller, const rw_sites *s, uint32_t *first,
                       uint32_t *next, uint32_t *cfirst, uint32_t *cnext, uint32_t *kfirst, uint32_t *knext)
{
    for (size_t i = icpp_pathmap_nnodes(pm); i-- > 1;) {
        uint32_t p = icpp_pathmap_node(pm, (uint32_t)i)->parent;
        next[i] = first[p];
        first[p] = (uint32_t)i;
        cnext[i] = cfirst[caller[i]];
        cfirst[caller[i]] = (uint32_t)i;
        if (s->node_cls[i] >= 0) {
            knext[i] = kfirst[s->node_cls[i]];
            kfirst[s->node_cls[i]] = (uint32_t)i;
        }
    }
}

/* The CID table of every context at height + base[node], of function
 * func[node] (NULL: the node's own); *hmax gets the largest height. */
static int cid_fill(rw_cidtab *t, const icpp_pathmap *pm, const int64_t *base, const uint32_t *func, int64_t *hmax)
{
    icpp_hmap_free(&t->h);
    icpp_hmap_init(&t->h);
    t->n = 0;
    t->u = t->c = 0;
    *hmax = 0;
    for (size_t i = 1; i < icpp_pathmap_nnodes(pm); i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t j = 0; j < nd->nheights; j++) {
            int64_t h = nd->heights[j].height + base[i];
            if (rw_cid_move(t, func ? func[i] : nd->func, h, 1, nd->heights[j].count) < 0)
                return -1;
            *hmax = h > *hmax ? h : *hmax;
        }
    }
    return 0;
}

/* The nodes a change of class k moves, into vis (marked in mark): its own
 * first (*nown of them), then every node called below them, in index order
 * (callers before the nodes they call).  Returns how many. */
static size_t class_reach(uint32_t k, const uint32_t *kfirst, const uint32_t *knext, const uint32_t *cfirst,
                          const uint32_t *cnext, uint8_t *mark, uint32_t *vis, size_t *nown)
{
    size_t nvis = 0;
    for (uint32_t i = kfirst[k]; i; i = knext[i])
        if (!mark[i])
            mark[i] = 1, vis[nvis++] = i;
    *nown = nvis;
    for (size_t v = 0; v < nvis; v++)
        for (uint32_t ch = cfirst[vis[v]]; ch; ch = cnext[ch])
            if (!mark[ch])
                mark[ch] = 1, vis[nvis++] = ch;
    qsort(vis + *nown, nvis - *nown, sizeof *vis, u32_cmp);
    return nvis;
}

int rw_greedy_init(rw_greedy *g, const icpp_pathmap *pm, const uint32_t *caller, const rw_sites *s)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    memset(g, 0, sizeof *g);
    g->pm = pm;
    g->caller = caller;
    g->s = s;
    g->first = calloc(nn, sizeof *g->first), g->next = calloc(nn, sizeof *g->next);
    g->cfirst = calloc(nn, sizeof *g->cfirst), g->cnext = calloc(nn, sizeof *g->cnext);
    g->kfirst = calloc(s->ncls + 1, sizeof *g->kfirst), g->knext = calloc(nn, sizeof *g->knext);
    g->rec = malloc(nn + 1), g->amb = calloc(nn, 1), g->cand = calloc(s->ncls + 1, 1), g->mark = calloc(nn, 1);
    g->vis = malloc((nn + 1) * sizeof *g->vis);
    g->base = malloc(nn * sizeof *g->base), g->delta = calloc(nn, sizeof *g->delta);
    g->trial = malloc(nn * sizeof *g->trial);
    icpp_hmap_init(&g->t.h);
    if (!g->first || !g->next || !g->cfirst || !g->cnext || !g->kfirst || !g->knext || !g->rec || !g->amb ||
        !g->cand || !g->mark || !g->vis || !g->base || !g->delta || !g->trial)
        goto oom;
    node_lists(pm, caller, s, g->first, g->next, g->cfirst, g->cnext, g->kfirst, g->knext);
    if (mark_recursion(g, g->first, g->next) < 0)
        goto oom;
    return 0;
oom:
    rw_greedy_free(g);
    return -1;
}

void rw_greedy_free(rw_greedy *g)
{
    icpp_hmap_free(&g->t.h);
    free(g->t.cnt), free(g->t.ws);
    free(g->first), free(g->next), free(g->cfirst), free(g->cnext), free(g->kfirst), free(g->knext), free(g->rec),
        free(g->amb), free(g->cand), free(g->mark), free(g->vis), free(g->base), free(g->delta), free(g->trial);
    memset(g, 0, sizeof *g);
}

int rw_greedy_fill(rw_greedy *g, const uint32_t *func, int64_t *hmax)
{
    return cid_fill(&g->t, g->pm, g->base, func, hmax);
}

int rw_greedy_score(rw_greedy *g, size_t from, const uint32_t *func, rw_trial *tr)
{
    if (move_all(g->pm, &g->t, g->base, g->delta, g->vis + from, g->nvis - from, 1, &tr->hmax, func) < 0)
        return -1;
    tr->w = g->t.u;
    tr->c = g->t.c;
    return move_all(g->pm, &g->t, g->base, g->delta, g->vis + from, g->nvis - from, -1, &tr->hmax, func);
}

int rw_greedy_round(rw_greedy *g, const rw_greedy_rules *r, void *ctx, int64_t hmax, int64_t max_height, double t0,
                    double time_limit, int64_t *best, int32_t *bestp)
{
    const rw_sites *s = g->s;
    uint64_t bw = g->t.u, nbw = bw, nbc = g->t.c;
    *best = -1;
    *bestp = 0;
    for (uint32_t k = 0; k < s->ncls && icpp_cli_cpu_seconds() - t0 < time_limit; k++) {
        if (!g->cand[k])
            continue;
        /* The nodes it moves: its own and those called below them. */
        g->nvis = class_reach(k, g->kfirst, g->knext, g->cfirst, g->cnext, g->mark, g->vis, &g->nown);
        if (r->sort_own)
            qsort(g->vis, g->nvis, sizeof *g->vis, u32_cmp);     /* callers before the nodes they call */
        int32_t most = r->most(ctx, k);
        for (int32_t p = 0; p <= most; p += 16) {
            rw_trial tr = {0, 0, hmax};
            int rc = r->trial(ctx, k, p, &tr);
            if (rc < 0)
                return -1;
            if (!rc || tr.hmax > max_height || tr.w < bw + r->min_gain ||
                !(tr.w > nbw || (tr.w == nbw && tr.c > nbc) ||
                  (r->lighter_first && *best >= 0 && tr.w == nbw && tr.c == nbc &&
                   s->cls_weight[k] < s->cls_weight[*best])))
                continue;
            if (!moved_order_kept(g, g->first, g->next, g->base, g->delta, g->vis, g->nvis, g->trial))
                continue;
            *best = k;
            *bestp = p;
            nbw = tr.w;
            nbc = tr.c;
        }
        for (size_t v = 0; v < g->nvis; v++)
            g->mark[g->vis[v]] = 0, g->delta[g->vis[v]] = 0;
    }
    return 0;
}
