/* search.c -- choose frame paddings that make the most (weighted) context ids unique under a stack budget. */
#include "search.h"

#include "arr.h"
#include "cli.h"
#include "hmap.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model (docs/rewrite.md): a context is a (path, original height) pair
 * of the map; its CID after padding is (leaf function, height + shift),
 * where shift = sum over the candidate functions f above the leaf of
 * mult(path, f) * pad(f).  Only contexts whose leaf function has two or more
 * contexts can ever collide ("tracked"); only paddable functions above a
 * tracked context matter ("candidates").
 *
 * State: a hash table from CID to how many contexts have it (and their
 * weight), and the score -- weight and number of contexts alone in their
 * CID -- both updated incrementally.  Changing pad(f) moves exactly the
 * contexts below f (an inverted index lists them with their multiplicity),
 * so evaluating a padding costs two table updates per context below f, not
 * a recount: what makes a 200k-path map take seconds, not the paper's
 * minutes.
 *
 * Search: iterated best response.  In random order, every candidate that
 * has a colliding context below it takes the padding (0..256 bytes, within
 * its encoding's room and the stack budget) that scores best with all
 * others fixed; ties keep the current value or take the smaller.  A round
 * that improves nothing is followed by a random kick (one to three
 * candidates get random paddings) to leave the local optimum; the best
 * state seen is kept.  The search ends after --time-limit seconds of CPU or
 * 100 rounds without a new best.  Finally every padding is lowered as far as
 * the score stays, to spend as little stack as possible. */

#define NONE UINT32_MAX

typedef struct ctx {
    int64_t  h0;            /* height in the map */
    uint64_t w;             /* training count */
    uint32_t node, leaf;
} ctx;

typedef struct slot {
    int64_t  h;
    uint64_t wsum;          /* weight of the contexts having this CID */
    uint32_t leaf, n;       /* n == 0: empty slot */
} slot;

typedef struct S {
    const icpp_pathmap *pm;
    size_t    nn;
    /* candidates */
    uint32_t  ncand;
    uint32_t *cand_func, *cand_max, *pad;
    /* per node: candidates above it with multiplicity (CSR, sorted by candidate) */
    uint64_t *vstart;
    uint32_t *vcand, *vmult;
    /* per candidate: nodes below it with multiplicity (CSR) */
    uint64_t *istart;
    uint32_t *inode, *imult;
    /* per node */
    int64_t  *shift, *maxh0;
    uint32_t *cfirst;       /* first context of a tracked node, NONE if untracked */
    /* contexts and the CID table */
    ctx      *c;
    size_t    nc;
    slot     *t;
    size_t    mask;
    /* score */
    uint64_t  U;            /* weight on unique contexts (tracked ones) */
    uint64_t  UC;           /* unique tracked contexts */
    int64_t   hmax;
    int       hmax_exact;
    int64_t   budget;
    uint64_t  rng;
} S;

static uint64_t rnd(S *s)
{
    uint64_t x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* ---- the CID table (linear probing, backward-shift deletion) ---- */

static size_t home(const S *s, uint32_t leaf, int64_t h)
{
    return icpp_hash2(leaf, (uint64_t)h) & s->mask;
}

static size_t find(const S *s, uint32_t leaf, int64_t h)
{
    for (size_t i = home(s, leaf, h);; i = (i + 1) & s->mask) {
        if (!s->t[i].n)
            return i;
        if (s->t[i].leaf == leaf && s->t[i].h == h)
            return i;
    }
}

static void slot_delete(S *s, size_t i)
{
    s->t[i].n = 0;
    for (size_t j = (i + 1) & s->mask; s->t[j].n; j = (j + 1) & s->mask) {
        size_t k = home(s, s->t[j].leaf, s->t[j].h);
        /* Move j back into the hole at i unless its home lies cyclically in (i, j]. */
        int stay = i <= j ? (k > i && k <= j) : (k > i || k <= j);
        if (!stay) {
            s->t[i] = s->t[j];
            s->t[j].n = 0;
            i = j;
        }
    }
}

static void ctx_add(S *s, uint32_t ci)
{
    const ctx *x = &s->c[ci];
    int64_t h = x->h0 + s->shift[x->node];
    slot *b = &s->t[find(s, x->leaf, h)];
    if (!b->n) {
        *b = (slot){h, x->w, x->leaf, 1};
        s->U += x->w;
        s->UC++;
        return;
    }
    if (b->n == 1) {            /* the one there is no longer alone */
        s->U -= b->wsum;
        s->UC--;
    }
    b->n++;
    b->wsum += x->w;
}

static void ctx_del(S *s, uint32_t ci)
{
    const ctx *x = &s->c[ci];
    size_t i = find(s, x->leaf, x->h0 + s->shift[x->node]);
    slot *b = &s->t[i];
    if (b->n == 1) {
        s->U -= x->w;
        s->UC--;
        slot_delete(s, i);
        return;
    }
    b->n--;
    b->wsum -= x->w;
    if (b->n == 1) {            /* the one left is alone now */
        s->U += b->wsum;
        s->UC++;
    }
}

/* ---- moves ---- */

static void node_contexts(const S *s, uint32_t node, uint32_t *first, uint32_t *n)
{
    *first = s->cfirst[node];
    *n = *first == NONE ? 0 : icpp_pathmap_node(s->pm, node)->nheights;
}

/* pad[k] += delta, moving every context below candidate k. */
static void apply(S *s, uint32_t k, int32_t delta)
{
    for (uint64_t e = s->istart[k]; e < s->istart[k + 1]; e++) {
        uint32_t node = s->inode[e], first, n;
        node_contexts(s, node, &first, &n);
        for (uint32_t j = 0; j < n; j++)
            ctx_del(s, first + j);
        s->shift[node] += (int64_t)s->imult[e] * delta;
        for (uint32_t j = 0; j < n; j++)
            ctx_add(s, first + j);
    }
    s->pad[k] = (uint32_t)((int64_t)s->pad[k] + delta);
}

static int64_t exact_hmax(const S *s)
{
    int64_t m = INT64_MIN;
    for (size_t i = 1; i < s->nn; i++)
        if (s->maxh0[i] != INT64_MIN && icpp_height_add(s->maxh0[i], s->shift[i]) > m)
            m = icpp_height_add(s->maxh0[i], s->shift[i]);
    return m;
}

/* Highest height among the nodes below k if pad[k] grew by delta > 0. */
static int64_t moved_max(const S *s, uint32_t k, int32_t delta)
{
    int64_t m = INT64_MIN;
    for (uint64_t e = s->istart[k]; e < s->istart[k + 1]; e++) {
        uint32_t node = s->inode[e];
        if (s->maxh0[node] == INT64_MIN)
            continue;
        int64_t h = icpp_height_add(icpp_height_add(s->maxh0[node], s->shift[node]), (int64_t)s->imult[e] * delta);
        if (h > m)
            m = h;
    }
    return m;
}

static int within_budget(S *s, uint32_t k, int32_t delta, int64_t *newmax)
{
    if (delta <= 0) {
        *newmax = s->hmax;
        return 1;
    }
    int64_t m = moved_max(s, k, delta);
    *newmax = m > s->hmax ? m : s->hmax;
    if (*newmax <= s->budget)
        return 1;
    if (!s->hmax_exact) {
        s->hmax = exact_hmax(s);
        s->hmax_exact = 1;
        *newmax = m > s->hmax ? m : s->hmax;
    }
    return *newmax <= s->budget;
}

static void commit_hmax(S *s, int32_t delta, int64_t newmax)
{
    if (delta > 0)
        s->hmax = newmax;
    else if (delta < 0)
        s->hmax_exact = 0;
}

/* ---- set-up ---- */

/* The tracked nodes (s->cfirst: their leaf function has two or more
 * contexts), each node's largest height (s->maxh0), and the candidates:
 * paddable functions (maxpad >= 16) above some tracked context; f2c[f]:
 * function f's candidate, NONE if none.  *nc: the tracked contexts.
 * 0 or -ENOMEM. */
static int setup_candidates(S *s, const uint32_t *caller, const uint32_t *maxpad, uint32_t *f2c, size_t *nc_out)
{
    const icpp_pathmap *pm = s->pm;
    size_t nn = s->nn, nf = icpp_pathmap_nfuncs(pm);
    uint32_t *fctx = calloc(nf + 1, sizeof *fctx);
    uint8_t *below = calloc(nn, 1);       /* node has a tracked node strictly below it */
    uint8_t *fmark = calloc(nf + 1, 1);
    int rc = -ENOMEM;
    if (!fctx || !below || !fmark)
        goto out;
    /* Tracked nodes: their leaf function has two or more contexts. */
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
        fctx[n->func] += n->nheights;
    }
    s->maxh0[0] = INT64_MIN;
    s->cfirst[0] = NONE;
    size_t nc = 0;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
        int64_t m = INT64_MIN;
        for (uint32_t k = 0; k < n->nheights; k++)
            if (n->heights[k].height > m)
                m = n->heights[k].height;
        s->maxh0[i] = m;
        s->cfirst[i] = NONE;
        if (n->nheights && fctx[n->func] >= 2) {
            s->cfirst[i] = (uint32_t)nc;
            nc += n->nheights;
        }
    }
    for (size_t i = nn - 1; i >= 1; i--)    /* descendants after ancestors: bottom-up */
        if (caller[i] && (below[i] || s->cfirst[i] != NONE))
            below[caller[i]] = 1;
    /* Candidates: paddable functions above some tracked context. */
    for (size_t i = 1; i < nn; i++)
        if (below[i])
            fmark[icpp_pathmap_node(pm, (uint32_t)i)->func] = 1;
    s->cand_func = malloc((nf + 1) * sizeof *s->cand_func);
    s->cand_max = malloc((nf + 1) * sizeof *s->cand_max);
    s->pad = calloc(nf + 1, sizeof *s->pad);
    if (!s->cand_func || !s->cand_max || !s->pad)
        goto out;
    for (size_t f = 0; f < nf; f++) {
        f2c[f] = NONE;
        if (fmark[f] && maxpad[f] >= 16) {
            f2c[f] = s->ncand;
            s->cand_func[s->ncand] = (uint32_t)f;
            s->cand_max[s->ncand++] = maxpad[f] & ~15u;
        }
    }
    *nc_out = nc;
    rc = 0;
out:
    free(fctx);
    free(below);
    free(fmark);
    return rc;
}

/* Per node the candidates above it and how many times each (its caller's
 * plus its caller's function), inverted: per candidate the nodes below it
 * (s->istart, s->inode, s->imult).  0 or -ENOMEM. */
static int setup_index(S *s, const uint32_t *caller, const uint32_t *f2c)
{
    const icpp_pathmap *pm = s->pm;
    size_t nn = s->nn;
    /* Per-node candidate vectors: the caller's plus the caller's function. */
    size_t total = 0, cap = 1024;
    s->vcand = malloc(cap * sizeof *s->vcand);
    s->vmult = malloc(cap * sizeof *s->vmult);
    if (!s->vcand || !s->vmult)
        return -ENOMEM;
    s->vstart[0] = 0;
    s->vstart[1] = 0;
    for (size_t i = 1; i < nn; i++) {
        uint32_t cn = caller[i];
        uint64_t ps = s->vstart[cn], pe = cn ? s->vstart[cn + 1] : 0;
        uint32_t add = cn ? f2c[icpp_pathmap_node(pm, cn)->func] : NONE;
        size_t need = total + (pe - ps) + 1;
        size_t capc = cap;      /* two arrays of one capacity: cap grows when both have */
        if (icpp_vec_reserve((void **)&s->vcand, &capc, need, sizeof *s->vcand, 0) < 0 ||
            icpp_vec_reserve((void **)&s->vmult, &cap, need, sizeof *s->vmult, 0) < 0)
            return -ENOMEM;
        int done = add == NONE;
        for (uint64_t e = ps; e < pe; e++) {
            if (!done && add < s->vcand[e]) {
                s->vcand[total] = add;
                s->vmult[total++] = 1;
                done = 1;
            }
            s->vcand[total] = s->vcand[e];
            s->vmult[total] = s->vmult[e] + (s->vcand[e] == add);
            if (s->vcand[e] == add)
                done = 1;
            total++;
        }
        if (!done) {
            s->vcand[total] = add;
            s->vmult[total++] = 1;
        }
        s->vstart[i + 1] = total;
    }
    /* Inverted index. */
    s->istart = calloc(s->ncand + 2, sizeof *s->istart);
    s->inode = malloc((total + 1) * sizeof *s->inode);
    s->imult = malloc((total + 1) * sizeof *s->imult);
    if (!s->istart || !s->inode || !s->imult)
        return -ENOMEM;
    for (uint64_t e = 0; e < total; e++)
        s->istart[s->vcand[e] + 1]++;
    for (uint32_t k = 0; k < s->ncand; k++)
        s->istart[k + 1] += s->istart[k];
    uint64_t *fill = malloc((s->ncand + 1) * sizeof *fill);
    if (!fill)
        return -ENOMEM;
    memcpy(fill, s->istart, (s->ncand + 1) * sizeof *fill);
    for (size_t i = 1; i < nn; i++)
        for (uint64_t e = s->vstart[i]; e < s->vstart[i + 1]; e++) {
            uint64_t at = fill[s->vcand[e]]++;
            s->inode[at] = (uint32_t)i;
            s->imult[at] = s->vmult[e];
        }
    free(fill);
    free(s->vcand);
    free(s->vmult);
    free(s->vstart);
    s->vcand = s->vmult = NULL;
    s->vstart = NULL;
    return 0;
}

/* The tracked contexts (nc of them) and the CID table of them. */
static int setup_table(S *s, size_t nc)
{
    const icpp_pathmap *pm = s->pm;
    size_t nn = s->nn;
    /* Contexts and the table (never more CIDs than contexts: fixed size). */
    s->nc = nc;
    s->c = malloc((nc + 1) * sizeof *s->c);
    size_t tc = 16;
    while (tc < 2 * nc + 16)
        tc *= 2;
    s->t = calloc(tc, sizeof *s->t);
    s->mask = tc - 1;
    if (!s->c || !s->t)
        return -ENOMEM;
    for (size_t i = 1; i < nn; i++) {
        if (s->cfirst[i] == NONE)
            continue;
        const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t k = 0; k < n->nheights; k++)
            s->c[s->cfirst[i] + k] = (ctx){n->heights[k].height, n->heights[k].count, (uint32_t)i, n->func};
    }
    for (size_t i = 0; i < nc; i++)
        ctx_add(s, (uint32_t)i);
    s->hmax = exact_hmax(s);
    s->hmax_exact = 1;
    return 0;
}

static int setup(S *s, const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *maxpad)
{
    size_t nn = icpp_pathmap_nnodes(pm), nf = icpp_pathmap_nfuncs(pm), nc = 0;
    s->pm = pm;
    s->nn = nn;
    uint32_t *f2c = malloc((nf + 1) * sizeof *f2c);
    s->shift = calloc(nn, sizeof *s->shift);
    s->maxh0 = malloc(nn * sizeof *s->maxh0);
    s->cfirst = malloc(nn * sizeof *s->cfirst);
    s->vstart = calloc(nn + 1, sizeof *s->vstart);
    int rc = -ENOMEM;
    if (f2c && s->shift && s->maxh0 && s->cfirst && s->vstart && setup_candidates(s, caller, maxpad, f2c, &nc) == 0 &&
        setup_index(s, caller, f2c) == 0)
        rc = setup_table(s, nc);
    free(f2c);
    return rc;
}

static void teardown(S *s)
{
    free(s->cand_func);
    free(s->cand_max);
    free(s->pad);
    free(s->vstart);
    free(s->vcand);
    free(s->vmult);
    free(s->istart);
    free(s->inode);
    free(s->imult);
    free(s->shift);
    free(s->maxh0);
    free(s->cfirst);
    free(s->c);
    free(s->t);
}

/* ---- the search ---- */

/* Does some context below candidate k share its CID?  (If none does,
 * changing pad[k] cannot make any context unique.) */
static int ambiguous_below(const S *s, uint32_t k)
{
    for (uint64_t e = s->istart[k]; e < s->istart[k + 1]; e++) {
        uint32_t first, n;
        node_contexts(s, s->inode[e], &first, &n);
        for (uint32_t j = 0; j < n; j++) {
            const ctx *x = &s->c[first + j];
            if (s->t[find(s, x->leaf, x->h0 + s->shift[x->node])].n >= 2)
                return 1;
        }
    }
    return 0;
}

static int better(uint64_t u1, uint64_t c1, uint64_t u2, uint64_t c2)
{
    return u1 > u2 || (u1 == u2 && c1 > c2);
}

#define DOMAIN_MAX 256          /* paddings tried per function: 0..256 bytes */
#define FULL_COST  400000        /* context moves allowed for trying a whole domain */
#define MAX_VALUES (DOMAIN_MAX / 16 + 1)

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The paddings worth trying for candidate k (not its current one), ascending. */
static size_t values(S *s, uint32_t k, uint32_t *v)
{
    uint32_t hi = s->cand_max[k] < DOMAIN_MAX ? s->cand_max[k] : DOMAIN_MAX, cur = s->pad[k];
    uint64_t cost = s->istart[k + 1] - s->istart[k];
    size_t n = 0;
    if (cost * (hi / 16 + 1) <= FULL_COST) {
        for (uint32_t x = 0; x <= hi; x += 16)
            if (x != cur)
                v[n++] = x;
        return n;
    }
    /* Larger subtree: a few steps around the current value and one at random. */
    int64_t cand[8] = {0, (int64_t)cur - 16, (int64_t)cur + 16, (int64_t)cur - 32, (int64_t)cur + 32,
                       (int64_t)cur + 64, 16 * (int64_t)(rnd(s) % (hi / 16 + 1)), -1};
    for (int i = 0; i < 7; i++) {
        if (cand[i] < 0 || cand[i] > hi || cand[i] == cur)
            continue;
        int dup = 0;
        for (size_t j = 0; j < n; j++)
            dup |= v[j] == (uint32_t)cand[i];
        if (!dup)
            v[n++] = (uint32_t)cand[i];
    }
    qsort(v, n, sizeof *v, u32_cmp);
    return n;
}

/* Set pad[k] to the value that scores best (ties: the current one, then the
 * smallest); returns 1 if the score improved. */
static int best_response(S *s, uint32_t k, uint64_t *evals)
{
    uint32_t v[MAX_VALUES + 8];
    size_t n = values(s, k, v);
    uint32_t cur = s->pad[k], best = cur;
    uint64_t bu = s->U, bc = s->UC, U0 = s->U, UC0 = s->UC;
    /* Values above the current one must keep every height in the budget;
     * heights grow with the value, so drop the infeasible tail. */
    while (n && v[n - 1] > cur) {
        int64_t nm;
        if (within_budget(s, k, (int32_t)(v[n - 1] - cur), &nm))
            break;
        n--;
    }
    for (size_t i = 0; i < n; i++) {
        apply(s, k, (int32_t)v[i] - (int32_t)s->pad[k]);
        (*evals)++;
        if (better(s->U, s->UC, bu, bc) || (s->U == bu && s->UC == bc && best != cur && v[i] < best) ||
            (s->U == bu && s->UC == bc && best == cur && v[i] < cur)) {
            best = v[i];
            bu = s->U;
            bc = s->UC;
        }
    }
    int32_t delta = (int32_t)best - (int32_t)cur;
    if (delta > 0) {
        int64_t nm;
        within_budget(s, k, delta, &nm);
        apply(s, k, (int32_t)best - (int32_t)s->pad[k]);
        commit_hmax(s, delta, nm);
    } else {
        apply(s, k, (int32_t)best - (int32_t)s->pad[k]);
        commit_hmax(s, delta, 0);
    }
    return better(s->U, s->UC, U0, UC0);
}

/* A random kick: a few candidates with ambiguity below get random values. */
static void perturb(S *s, const uint32_t *order, size_t norder)
{
    if (!norder)
        return;
    int m = 1 + (int)(rnd(s) % 3);
    for (int i = 0; i < m; i++) {
        uint32_t k = order[rnd(s) % norder];
        uint32_t hi = s->cand_max[k] < DOMAIN_MAX ? s->cand_max[k] : DOMAIN_MAX;
        uint32_t v = 16 * (uint32_t)(rnd(s) % (hi / 16 + 1));
        int32_t delta = (int32_t)v - (int32_t)s->pad[k];
        int64_t nm;
        if (!delta || !within_budget(s, k, delta, &nm))
            continue;
        apply(s, k, delta);
        commit_hmax(s, delta, nm);
    }
}

int rw_search_run(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *maxpad, const rw_search_opts *o,
                  rw_search_result *r, icpp_err *err)
{
    memset(r, 0, sizeof *r);
    double t0 = icpp_cli_cpu_seconds();
    S s = {0};
    s.rng = o->seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    if (!s.rng)
        s.rng = 1;
    s.budget = o->max_height;
    size_t nf = icpp_pathmap_nfuncs(pm);
    uint32_t *best = NULL, *order = NULL, *active = NULL;
    r->pad = calloc(nf + 1, sizeof *r->pad);
    if (!r->pad || setup(&s, pm, caller, maxpad) < 0)
        goto oom;
    best = calloc(s.ncand + 1, sizeof *best);
    order = malloc((s.ncand + 1) * sizeof *order);
    active = malloc((s.ncand + 1) * sizeof *active);
    if (!best || !order || !active)
        goto oom;
    r->candidates = s.ncand;
    r->tracked = s.nc;
    for (uint32_t k = 0; k < s.ncand; k++)
        order[k] = k;
    uint64_t bestU = s.U, bestUC = s.UC, stale = 0;
    uint64_t max_stale = o->max_stale ? o->max_stale : 100;
    /* Iterated best response: every candidate in turn takes the padding
     * that scores best given the others; when a round improves nothing,
     * kick a few at random; keep the best state seen. */
    uint64_t rounds = 0;
    while (s.ncand && stale < max_stale) {
        rounds++;
        for (uint32_t k = s.ncand; k > 1; k--) {
            uint32_t j = (uint32_t)(rnd(&s) % k), t = order[k - 1];
            order[k - 1] = order[j];
            order[j] = t;
        }
        int improved = 0;
        size_t nactive = 0;
        for (uint32_t q = 0; q < s.ncand && !r->hit_time_limit; q++) {
            if (icpp_cli_cpu_seconds() - t0 > o->time_limit) {
                r->hit_time_limit = 1;
                break;
            }
            if (icpp_cli_progress_due(o->progress))     /* the clock is read per candidate anyway */
                icpp_cli_progress_show(o->progress,
                                       "searching: round %" PRIu64 ", %" PRIu64 " best responses; best so far %" PRIu64
                                       " unique contexts, %" PRIu64 " calls on them",
                                       rounds, r->iterations, bestUC, bestU);
            uint32_t k = order[q];
            if (!ambiguous_below(&s, k))
                continue;
            active[nactive++] = k;
            r->iterations++;
            improved |= best_response(&s, k, &r->evaluations);
        }
        if (better(s.U, s.UC, bestU, bestUC)) {
            bestU = s.U, bestUC = s.UC;
            memcpy(best, s.pad, s.ncand * sizeof *best);
            stale = 0;
        } else {
            stale++;
        }
        if (r->hit_time_limit || !nactive)
            break;
        if (!improved)
            perturb(&s, active, nactive);
    }
    /* Back to the best state seen. */
    for (uint32_t k = 0; k < s.ncand; k++)
        if (s.pad[k] != best[k])
            apply(&s, k, (int32_t)best[k] - (int32_t)s.pad[k]);
    /* Spend less stack where it buys nothing: lower each padding as far as
     * the score stays. */
    for (uint32_t k = 0; k < s.ncand; k++) {
        while (s.pad[k] > 0) {
            uint64_t U0 = s.U, UC0 = s.UC;
            int32_t delta = -(int32_t)s.pad[k];     /* all the way to 0 first */
            apply(&s, k, delta);
            r->evaluations++;
            if (!better(U0, UC0, s.U, s.UC))
                break;
            apply(&s, k, -delta);
            apply(&s, k, -16);
            r->evaluations++;
            if (!better(U0, UC0, s.U, s.UC))
                continue;
            apply(&s, k, 16);
            break;
        }
    }
    for (uint32_t k = 0; k < s.ncand; k++)
        r->pad[s.cand_func[k]] = s.pad[k];
    r->max_height = exact_hmax(&s);
    r->seconds = icpp_cli_cpu_seconds() - t0;
    free(best);
    free(order);
    free(active);
    teardown(&s);
    return 0;
oom:
    free(best);
    free(order);
    free(active);
    teardown(&s);
    rw_search_result_free(r);
    return icpp_err_set(err, ENOMEM, "out of memory in the padding search");
}

void rw_search_result_free(rw_search_result *r)
{
    free(r->pad);
    r->pad = NULL;
}

/* ---- what is left ---- */

static uint64_t fhash(uint32_t f)
{
    uint64_t x = (uint64_t)f * 0x9e3779b97f4a7c15ull + 0x5bd1e995u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static int group_cmp(const void *a, const void *b)
{
    const rw_amb_group *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return x->weight > y->weight ? -1 : x->weight < y->weight;
}

int rw_ambiguity(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *pad, const uint32_t *wrap,
                 const uint32_t *maxpad, rw_amb_report *out, icpp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t nn = icpp_pathmap_nnodes(pm);
    int64_t *shift = malloc(nn * sizeof *shift);
    uint64_t *hall = calloc(nn, sizeof *hall), *hpad = calloc(nn, sizeof *hpad);
    icpp_hmap cid, same_all, same_pad, gix;
    icpp_hmap_init(&cid);
    icpp_hmap_init(&same_all);
    icpp_hmap_init(&same_pad);
    icpp_hmap_init(&gix);
    size_t capg = 0;
    int rc = -ENOMEM;
    if (!shift || !hall || !hpad)
        goto out;
    icpp_arr_shifts(pm, caller, pad, wrap, shift);
    /* Multiset hashes of the live callers above each leaf: sums commute. */
    for (size_t i = 1; i < nn; i++) {
        uint32_t cn = caller[i];
        if (!cn)
            continue;
        uint32_t pf = icpp_pathmap_node(pm, cn)->func;
        hall[i] = hall[cn] + fhash(pf);
        hpad[i] = hpad[cn] + (maxpad[pf] >= 16 ? fhash(pf) : 0);
    }
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t k = 0; k < n->nheights; k++) {
            int64_t h0 = n->heights[k].height;
            uint64_t *v;
            struct {
                icpp_hmap *m;
                uint64_t k1, k2;
            } keys[3] = {{&cid, n->func, (uint64_t)(h0 + shift[i])},
                         {&same_all, hall[i] * 31 + n->func, (uint64_t)h0},
                         {&same_pad, hpad[i] * 31 + n->func, (uint64_t)h0}};
            for (int q = 0; q < 3; q++) {
                if ((v = icpp_hmap_get(keys[q].m, keys[q].k1, keys[q].k2)))
                    (*v)++;
                else if (icpp_hmap_put(keys[q].m, keys[q].k1, keys[q].k2, 1) < 0)
                    goto out;
            }
        }
    }
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t k = 0; k < n->nheights; k++) {
            int64_t h0 = n->heights[k].height, h = h0 + shift[i];
            if (*icpp_hmap_get(&cid, n->func, (uint64_t)h) < 2)
                continue;
            int cls = *icpp_hmap_get(&same_all, hall[i] * 31 + n->func, (uint64_t)h0) >= 2   ? RW_AMB_SAME_CALLERS
                      : *icpp_hmap_get(&same_pad, hpad[i] * 31 + n->func, (uint64_t)h0) >= 2 ? RW_AMB_UNPATCHABLE
                                                                                             : RW_AMB_OPEN;
            out->contexts[cls]++;
            out->weight[cls] += n->heights[k].count;
            uint64_t *g = icpp_hmap_get(&gix, n->func, (uint64_t)h);
            rw_amb_group *G;
            if (!g) {
                if (icpp_vec_reserve((void **)&out->groups, &capg, out->ngroups + 1, sizeof *out->groups, 64) < 0)
                    goto out;
                if (icpp_hmap_put(&gix, n->func, (uint64_t)h, out->ngroups) < 0)
                    goto out;
                G = &out->groups[out->ngroups++];
                *G = (rw_amb_group){(uint8_t)cls, n->func, h, 0, NULL, 0};
            } else {
                G = &out->groups[*g];
            }
            if (cls < G->cls)
                G->cls = (uint8_t)cls;
            G->weight += n->heights[k].count;
            uint32_t *nv = realloc(G->nodes, (G->nnodes + 1) * sizeof *nv);
            if (!nv)
                goto out;
            G->nodes = nv;
            G->nodes[G->nnodes++] = (uint32_t)i;
        }
    }
    if (out->ngroups)
        qsort(out->groups, out->ngroups, sizeof *out->groups, group_cmp);
    rc = 0;
out:
    free(shift);
    free(hall);
    free(hpad);
    icpp_hmap_free(&cid);
    icpp_hmap_free(&same_all);
    icpp_hmap_free(&same_pad);
    icpp_hmap_free(&gix);
    if (rc < 0) {
        rw_amb_report_free(out);
        return icpp_err_set(err, ENOMEM, "out of memory classifying the remaining ambiguity");
    }
    return 0;
}

void rw_amb_report_free(rw_amb_report *r)
{
    for (size_t i = 0; i < r->ngroups; i++)
        free(r->groups[i].nodes);
    free(r->groups);
    memset(r, 0, sizeof *r);
}

void rw_path_name(const icpp_pathmap *pm, uint32_t node, char *buf, size_t sz)
{
    uint32_t fs[4096];
    uint32_t d = icpp_pathmap_path(pm, node, fs, 4096);
    if (d > 4096)
        d = 4096;
    size_t o = 0;
    buf[0] = 0;
    uint32_t from = d > 12 ? d - 12 : 0;
    if (from)
        o += (size_t)snprintf(buf + o, sz - o, "...;");
    for (uint32_t k = from; k < d && o < sz; k++)
        o += (size_t)snprintf(buf + o, sz - o, "%s%s", k > from ? ";" : "", icpp_pathmap_func(pm, fs[k])->name);
}
