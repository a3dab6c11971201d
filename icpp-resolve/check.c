/* check.c -- icpp-resolve --check: resolved paths against the true stacks of a --validate recording. */
#include "check.h"

#include "escape.h"
#include "complete.h"
#include "fold.h"
#include "hmap.h"
#include "arr.h"
#include "mapset.h"
#include "pathsig.h"
#include "output.h"
#include "replay.h"
#include "resolve.h"
#include "run.h"
#include "unwind.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAXF 4096

/* Per-sample verdicts (the paper's categories, figures 5.7-5.10). */
enum {
    V_PRECISE = 0,      /* one candidate, and it is the true path */
    V_AMBIG_OK,         /* several candidates, the true path among them */
    V_INCORRECT,        /* the candidates do not include the true path */
    V_MISSING,          /* (function, height) not in the map */
    V_UNRESOLVED,       /* no CID could be formed (no CFI, vdso, ...) */
    V_UNCERTAIN_OK,     /* reported uncertain (lib/resolve.h), the true path among the candidates */
    V_UNCERTAIN_BAD,    /* reported uncertain, and rightly: the true path is not a candidate */
    V_INF_OK,           /* missing CID, one inferred path (search within its bounds), the true one */
    V_INF_BAD,          /* ... one inferred path, not the true one */
    V_INF_AMB_OK,       /* several inferred paths (or a bounded search), the true one among them */
    V_INF_AMB_BAD,      /* ... the true one not among them */
    V_MAX
};
/* Why an ambiguous sample's other candidates stay with the truth, as far as
 * padding goes (lib/pathsig.h), the most binding reason over the candidates. */
enum {
    R_SEPARABLE = 0,    /* every other candidate has other functions: a padding could separate them */
    R_REFUSED,          /* (a rewritten binary's map) one differs only in functions icpp-rewrite refused to pad
                           or of other modules: no padding of this binary's resizable functions can */
    R_LIBRARY,          /* ... only in functions of other modules: no padding of the program's functions can */
    R_SAME_FUNCS,       /* one has the truth's functions in another order: no function padding can */
    R_SAME_EDGES,       /* one has the truth's call edges in another order: no call-edge padding either */
    R_TRUNCATED,        /* the true stack was cut by the stack copy: not classified */
    R_MAX
};
static const char *rname[R_MAX] = {"separable",      "refused-functions", "library-functions",
                                   "same-functions", "same-call-edges",   "truncated-truth"};

/* Why a sample's context was not in the map (missing, and the inferred
 * verdicts: completion ran because it was not): the true path is none of
 * the map's, or it is but was trained at other heights only (a rewritten
 * binary's prediction that did not hold, an alignment, a frame of another
 * size), or the sample is in a PLT stub none of whose callers gave a
 * context (lib/plt.h), or the truth was cut (not classified). */
enum { M_PATH = 0, M_HEIGHT, M_PLT, M_TRUNCATED, M_MAX };
static const char *mname[M_MAX] = {"untrained-path", "untrained-height", "plt-stub", "truncated-truth"};

/* The map's trained paths (count > 0: not the contexts completion or
 * learning add while the check runs) by a hash of their functions, built
 * when a missing sample first asks. */
typedef struct pathidx {
    icpp_hmap h;
    uint64_t *nh;       /* per node: its path's hash */
    size_t    n;        /* nodes indexed (0: not built) */
} pathidx;

static uint64_t path_step(uint64_t h, uint64_t func)
{
    return icpp_hash2(h ^ 0x9e3779b97f4a7c15ull, func + 1);
}

/* Is q[0..nq) (map function ids, root first) one of pm's trained paths? -1: out of memory. */
static int path_known(pathidx *ix, const icpp_pathmap *pm, const int64_t *q, int nq)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    if (!ix->n) {
        uint64_t *nh = realloc(ix->nh, nn * sizeof *nh);
        if (!nh)
            return -1;
        ix->nh = nh;
        icpp_hmap_free(&ix->h);
        icpp_hmap_init(&ix->h);
        nh[0] = 0;
        for (size_t i = 1; i < nn; i++) {   /* a parent precedes its children */
            const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
            nh[i] = path_step(nh[n->parent], n->func);
            if (n->count && icpp_hmap_put(&ix->h, nh[i], n->depth, i) < 0) {
                ix->n = 0;
                return -1;
            }
        }
        ix->n = nn;
    }
    uint64_t h = 0;
    for (int i = 0; i < nq; i++)
        h = path_step(h, (uint64_t)q[i]);
    uint64_t *v = icpp_hmap_get(&ix->h, h, (uint64_t)nq);
    if (!v)
        return 0;
    /* confirm (hash collisions): compare the functions */
    uint32_t p[MAXF];
    uint32_t d = icpp_pathmap_path(pm, (uint32_t)*v, p, MAXF);
    if ((int)d != nq)
        return 0;
    for (int i = 0; i < nq; i++)
        if ((int64_t)p[i] != q[i])
            return 0;
    return 1;
}

/* A map's unpaddable functions (lib/arr.h icpp_arr_unpaddable: 1 refused,
 * 2 another module's), for R_REFUSED and R_LIBRARY; n == 0: not a
 * rewritten binary's map, those reasons are not told apart. */
typedef struct unpad {
    uint8_t *mask;
    size_t   n;
} unpad;

/* Refresh u for pm (completion may add functions while the check runs);
 * 0, or -1 out of memory. */
static int unpad_update(unpad *u, const icpp_pathmap *pm)
{
    size_t nf = icpp_pathmap_nfuncs(pm);
    if (nf == u->n || !icpp_pathmap_meta(pm, "arr-unpaddable"))
        return 0;
    icpp_err err;
    uint8_t *m = realloc(u->mask, nf ? nf : 1);
    if (!m)
        return -1;
    u->mask = m;
    u->n = icpp_arr_unpaddable(pm, m, &err) == 1 ? nf : 0;
    return 0;
}

static const char *vname[V_MAX] = {"precise", "ambiguous-containing-truth", "incorrect", "missing", "unresolved",
                                   "uncertain-containing-truth", "uncertain-not-containing-truth",
                                   "inferred-correct", "inferred-incorrect", "inferred-ambiguous-containing-truth",
                                   "inferred-ambiguous-without-truth"};

typedef struct tally {
    uint64_t fn[V_MAX];         /* function-path level */
    uint64_t site_precise;      /* path correct and every call site unique and right */
    uint64_t site_contains;     /* path correct and every true call site among the recorded ones */
    uint64_t total, no_truth, truncated;
    uint64_t aligned;           /* matched modulo a signal frame's alignment (lib/resolve.c) */
    uint64_t by_learned[V_MAX]; /* samples whose true (or only) candidate was a learned-only context */
    uint64_t voted[V_MAX];      /* samples made precise by the recording's learn votes */
    uint64_t pruned[V_MAX];     /* samples that lost candidates to the recording's evidence */
    uint64_t by_alt[V_MAX];     /* samples made uncertain by an untrained path through an active context */
    uint64_t no_truth_by[ICPP_UW_MAX];
    uint64_t folded[V_MAX];     /* the same samples judged on recursion-folded paths (fold_verdict) */
    uint64_t why[2][R_MAX];     /* ambiguous samples by reason (amb_reason); [1]: on folded paths */
    uint64_t miss[M_MAX];       /* missing and inferred samples by cause (path_known) */
    uint64_t plt[V_MAX + 1];    /* samples whose pc is in a PLT stub, by verdict ([V_MAX]: no truth) */
    uint64_t cold[V_MAX + 1];   /* samples with a frame in a cold part (docs/definitions.md) */
} tally;

/* The first incorrect samples, and the first of the other verdicts but
 * precise, shown for auditing. */
#define MAX_SHOWN 20
typedef struct shown {
    char truth[2048], cand[4096];
    int64_t height;
    int verdict;
} shown;

/* Names of path-map functions t[0..nt); where t[i] < 0 (a function the map
 * does not know) the binary's own name, tn[i], if tn is given. */
static void names_of(const icpp_pathmap *pm, const int64_t *t, const char *const *tn, int nt, char *buf, size_t sz)
{
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < nt && o + 2 < sz; i++)
        o += (size_t)snprintf(buf + o, sz - o, "%s%s", i ? ";" : "",
                              t[i] >= 0 ? icpp_pathmap_func(pm, (uint32_t)t[i])->name : tn && tn[i] ? tn[i] : "?");
}

/* A distinct true path: its samples and how they fared. */
typedef struct dpath {
    uint64_t n, v[V_MAX];
} dpath;

/* True path of a sample as path-map function indices, root first; -1 for a
 * function the map does not know, whose name from the binary (its owner's,
 * for a cold part) goes to names[] (NULL: none).  Returns the length. */
static int truth_path(icpp_cidx *x, const icpp_completer *c, const icpp_replay *rp, const icpp_uframe *fr, int n,
                      int64_t *out, const char **names)
{
    int k = 0;
    for (int i = n - 1; i >= 0; i--) {
        const icpp_uframe *f = &fr[i];
        if (f->sigframe)
            continue;       /* the kernel's signal frame: not a call, not on any path */
        const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)f->module);
        out[k] = (rm && f->func) ? icpp_cidx_func(x, (uint32_t)f->module, &rm->build_id, f->func->owner) : -1;
        if (out[k] < 0 && c && rm && f->func) {
            /* for inferred paths: functions completion added to the map count too */
            int32_t m = icpp_cidx_module(x, (uint32_t)f->module, &rm->build_id);
            out[k] = m >= 0 ? icpp_complete_func(c, (uint32_t)m, f->func->owner) : -1;
        }
        const icpp_func *of = rm && rm->mod && f->func ? icpp_module_func_start(rm->mod, f->func->owner) : NULL;
        names[k] = of ? of->name : f->func ? f->func->name : NULL;
        k++;
    }
    return k;
}

/* The functions of the true path t[0..nt) the map knows, in order, into
 * q (MAXF entries): what a map path is compared with.  Returns how many. */
static int known_funcs(const int64_t *t, int nt, int64_t *q)
{
    int len = 0;
    for (int i = 0; i < nt; i++)
        if (t[i] >= 0)
            q[len++] = t[i];
    return len;
}

/* Is candidate node's path the truth?  Paths hold only functions the map
 * knows (trained modules): the truth is compared with its untrained frames
 * (ld.so's, say) elided, as training never saw them.  Complete truth: the
 * whole projection must equal the path; truncated truth (the stack copy
 * ended): it must be a suffix of the path. */
static int matches(const icpp_pathmap *pm, uint32_t node, const int64_t *t, int nt, int complete)
{
    uint32_t p[MAXF];
    uint32_t d = icpp_pathmap_path(pm, node, p, MAXF);
    if (d > MAXF)
        return 0;
    int64_t q[MAXF];
    int len = known_funcs(t, nt, q);
    if (complete ? (uint32_t)len != d : (uint32_t)len > d)
        return 0;
    for (int i = 0; i < len; i++)
        if ((int64_t)p[d - len + i] != q[i])
            return 0;
    return 1;
}

/* Call sites along the node's path against the true return addresses:
 * 2 = all right and unique, 1 = all among the recorded ones, 0 = no. */
static int sites_ok(icpp_cidx *x, const icpp_pathmap *pm, const icpp_replay *rp, uint32_t node, const icpp_uframe *fr,
                    int n)
{
    int uniq = 1;
    /* leaf-first: frame i (i >= 1) holds the return address of the call
     * into frame i-1, i.e. the call site of node depth-(i-1).  A PLT stub's
     * frame is no node: the path's leaf is its caller, frame 1. */
    uint32_t cur = node;
    int skip = n > 0 && fr[0].func && fr[0].func->plt;
    for (int i = 1 + skip; i < n && cur; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, cur);
        const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)fr[i].module);
        int32_t pmod = rm ? icpp_cidx_module(x, (uint32_t)fr[i].module, &rm->build_id) : -1;
        uint64_t ra = fr[i].addr + 1;   /* addr is the return address - 1 */
        int found = 0;
        for (uint32_t k = 0; k < nd->nsites; k++)
            if ((int32_t)nd->sites[k].module == pmod && nd->sites[k].addr == ra)
                found = 1;
        if (!found)
            return 0;
        if (nd->nsites != 1)
            uniq = 0;
        cur = nd->parent;
    }
    return uniq ? 2 : 1;
}

/* A sample's verdict on recursion-folded paths (lib/fold.h): precise when
 * every candidate folds to the path the truth folds to; ambiguous when the
 * candidates fold to several paths, the truth's among them.  Only samples
 * resolved to known candidates (precise, ambiguous, incorrect) change. */
static int fold_verdict(icpp_folder *fo, const icpp_resolution *r, const int64_t *t, int nt, int complete, int v)
{
    if (v != V_AMBIG_OK && v != V_INCORRECT)
        return v;
    uint64_t h0 = icpp_folder_hash(fo, r->cand[0].node);
    int same = h0 != 0;
    for (uint32_t i = 1; i < r->ncand && same; i++)
        same = icpp_folder_hash(fo, r->cand[i].node) == h0;
    if (v == V_AMBIG_OK)
        return same ? V_PRECISE : V_AMBIG_OK;
    if (!same || !complete)
        return V_INCORRECT;
    /* incorrect unfolded: the truth may still fold to the candidates' path */
    int64_t q[MAXF];
    int len = known_funcs(t, nt, q);
    return icpp_fold_hash(q, icpp_fold_path(q, (size_t)len)) == h0 ? V_PRECISE : V_INCORRECT;
}

/* The reason (R_*) of a sample whose candidates r hold the truth q[0..nq)
 * and others: over the candidates that are not the truth (fo: whose folded
 * path is not the truth's, whose folded hash is qh), the most binding
 * icpp_pathsig_sep. */
static int amb_reason(const icpp_pathmap *pm, icpp_folder *fo, const unpad *up, const icpp_resolution *r,
                      const int64_t *q, int nq, uint64_t qh, int complete)
{
    if (!complete)
        return R_TRUNCATED;
    icpp_pathsig ts = icpp_pathsig_of(q, (size_t)nq);
    uint64_t tmain = 0, tpad = 0;
    if (up->n) {
        tmain = icpp_pathsig_funcs_below(q, (size_t)nq, up->mask, up->n, 0, 2);
        tpad = icpp_pathsig_funcs_below(q, (size_t)nq, up->mask, up->n, 0, 1);
    }
    int why = R_SEPARABLE;
    for (uint32_t i = 0; i < r->ncand; i++) {
        if (fo && icpp_folder_hash(fo, r->cand[i].node) == qh)
            continue;
        uint32_t p[MAXF];
        uint32_t d = icpp_pathmap_path(pm, r->cand[i].node, p, MAXF);
        if (d > MAXF)
            continue;
        int64_t c[MAXF];
        int same = (int)d == nq;
        for (uint32_t j = 0; j < d; j++) {
            c[j] = p[j];
            same = same && c[j] == q[j];
        }
        if (same)
            continue;   /* the truth itself */
        icpp_pathsig cs = icpp_pathsig_of(c, d);
        int k = icpp_pathsig_sep(&ts, &cs) == ICPP_SEP_SAME_EDGES  ? R_SAME_EDGES
              : icpp_pathsig_sep(&ts, &cs) == ICPP_SEP_SAME_FUNCS ? R_SAME_FUNCS
                                                                  : R_SEPARABLE;
        if (k == R_SEPARABLE && up->n)
            k = icpp_pathsig_funcs_below(c, d, up->mask, up->n, 0, 2) == tmain  ? R_LIBRARY
              : icpp_pathsig_funcs_below(c, d, up->mask, up->n, 0, 1) == tpad ? R_REFUSED
                                                                              : R_SEPARABLE;
        if (k > why)
            why = k;
    }
    return why;
}

static double pc(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static const char *only_func;

void check_only(const char *func)
{
    only_func = func;
}


/* The check of one recording: what collecting the verdicts fills
 * (check_sample, per sample) and the reports read. */
typedef struct checker {
    mapset        *ms;
    icpp_unwinder *u;
    icpp_folder   *folders;         /* per map: its recursion-folded paths (fold_verdict) */
    unpad         *unpads;          /* per map: its unpaddable functions (amb_reason) */
    pathidx       *pidx;            /* per map: its trained paths (path_known) */
    int            any_unpad;       /* a map with unpaddable functions: R_REFUSED, R_LIBRARY told apart */
    uint64_t     (*vbin)[V_MAX];    /* verdicts per binary (ms->bins) */
    size_t         nvbin;
    tally          t;
    icpp_hmap      paths;           /* hash of the true path -> index into dps */
    dpath         *dps;             /* distinct true paths */
    size_t         ndps, capdps;
    uint64_t       pv[V_MAX];       /* distinct true paths by verdict (by_paths) */
    shown          shownv[MAX_SHOWN], otherv[MAX_SHOWN];   /* incorrect samples; the other verdicts but precise */
    size_t         nshown, nother;
    int            any_regs;        /* a sample had a stack copy (a --validate recording) */
    /* one sample's scratch */
    icpp_uframe    fr[MAXF];        /* its true stack, leaf first */
    int64_t        tp[MAXF];        /* its true path, map functions, root first (truth_path) */
    const char    *tpn[MAXF];       /* the binary's names of tp's frames */
    int64_t        tk[MAXF];        /* the truth as the map's functions (matches' projection) */
    int64_t        qf[MAXF];        /* tk folded */
} checker;

static void checker_free(checker *ck)
{
    if (!ck)
        return;
    for (size_t i = 0; ck->folders && ck->unpads && ck->pidx && i < ck->ms->nmaps; i++) {
        icpp_folder_free(&ck->folders[i]);
        free(ck->unpads[i].mask);
        icpp_hmap_free(&ck->pidx[i].h);
        free(ck->pidx[i].nh);
    }
    free(ck->pidx);
    free(ck->folders);
    free(ck->unpads);
    free(ck->dps);
    free(ck->vbin);
    icpp_hmap_free(&ck->paths);
    icpp_unwinder_free(ck->u);
    free(ck);
}

/* A checker for the pass rp over ms's recording; NULL out of memory. */
static checker *checker_new(mapset *ms, const icpp_replay *rp)
{
    checker *ck = calloc(1, sizeof *ck);
    if (!ck)
        return NULL;
    ck->ms = ms;
    icpp_hmap_init(&ck->paths);
    ck->nvbin = ms->nbins + 1;
    ck->vbin = calloc(ck->nvbin, sizeof *ck->vbin);
    ck->u = icpp_unwinder_new(rp);
    ck->folders = calloc(ms->nmaps + 1, sizeof *ck->folders);
    ck->unpads = calloc(ms->nmaps + 1, sizeof *ck->unpads);
    ck->pidx = calloc(ms->nmaps + 1, sizeof *ck->pidx);
    if (!ck->vbin || !ck->u || !ck->folders || !ck->unpads || !ck->pidx) {
        checker_free(ck);
        return NULL;
    }
    int oom = 0;
    for (size_t i = 0; i < ms->nmaps; i++) {
        icpp_folder_init(&ck->folders[i], ms->maps[i].pm);
        icpp_hmap_init(&ck->pidx[i].h);
        oom |= unpad_update(&ck->unpads[i], ms->maps[i].pm) < 0;
        ck->any_unpad |= ck->unpads[i].n != 0;
    }
    if (oom) {
        checker_free(ck);
        return NULL;
    }
    return ck;
}

/* The verdict (V_*) of a sample of map pm resolved as r (the map's own
 * nodes) against its true path ck->tp[0..nt); *hit: the candidate that is
 * the truth (0 if none).  Counts the learned, voted, pruned, uncertain. */
static int verdict(checker *ck, const icpp_pathmap *pm, const icpp_resolution *r, int nt, int complete, uint32_t *hit)
{
    *hit = 0;
    if (r->kind == ICPP_RES_INFERRED) {
        int found = 0;
        for (uint32_t i = 0; i < r->ncand && !found; i++)
            found = matches(pm, r->cand[i].node, ck->tp, nt, complete);
        return r->ncand == 1 && !r->bounded ? (found ? V_INF_OK : V_INF_BAD) : (found ? V_INF_AMB_OK : V_INF_AMB_BAD);
    }
    if (r->kind == ICPP_RES_UNRESOLVED)
        return V_UNRESOLVED;
    if (r->kind == ICPP_RES_MISSING)
        return V_MISSING;
    int found = 0, v;
    uint32_t hit_i = 0;
    for (uint32_t i = 0; i < r->ncand && !found; i++)
        if (matches(pm, r->cand[i].node, ck->tp, nt, complete)) {
            found = 1;
            *hit = r->cand[i].node;
            hit_i = i;
        }
    if (r->kind == ICPP_RES_UNCERTAIN)
        v = found ? V_UNCERTAIN_OK : V_UNCERTAIN_BAD;
    else
        v = !found ? V_INCORRECT : r->kind == ICPP_RES_PRECISE ? V_PRECISE : V_AMBIG_OK;
    if (icpp_cand_learned_only(&r->cand[found ? hit_i : 0]))
        ck->t.by_learned[v]++;
    ck->t.voted[v] += r->voted;
    ck->t.pruned[v] += r->pruned > 0;
    ck->t.by_alt[v] += r->alternative;
    return v;
}

/* Why a sample of map k with verdict v (fv folded) is ambiguous, or
 * missing (its truth ck->tk[0..ntk)); 0, or -1 out of memory. */
static int count_reasons(checker *ck, int32_t k, const icpp_resolution *r, int v, int fv, int ntk, int complete,
                         int in_plt)
{
    const icpp_pathmap *pm = ck->ms->maps[k].pm;
    tally *t = &ck->t;
    if (v == V_AMBIG_OK || fv == V_AMBIG_OK) {
        if (ck->unpads[k].n && unpad_update(&ck->unpads[k], pm) < 0)
            return -1;
        if (v == V_AMBIG_OK)
            t->why[0][amb_reason(pm, NULL, &ck->unpads[k], r, ck->tk, ntk, 0, complete)]++;
        if (fv == V_AMBIG_OK) {
            uint64_t qh = 0;
            if (complete) {
                memcpy(ck->qf, ck->tk, (size_t)ntk * sizeof *ck->qf);
                qh = icpp_fold_hash(ck->qf, icpp_fold_path(ck->qf, (size_t)ntk));
            }
            t->why[1][amb_reason(pm, &ck->folders[k], &ck->unpads[k], r, ck->tk, ntk, qh, complete)]++;
        }
    }
    if (v == V_MISSING || v == V_INF_OK || v == V_INF_BAD || v == V_INF_AMB_OK || v == V_INF_AMB_BAD) {
        int known = complete && !in_plt ? path_known(&ck->pidx[k], pm, ck->tk, ntk) : 0;
        if (known < 0)
            return -1;
        t->miss[in_plt ? M_PLT : !complete ? M_TRUNCATED : known ? M_HEIGHT : M_PATH]++;
    }
    return 0;
}

/* Keep a sample with verdict v for the report (the first MAX_SHOWN
 * incorrect, and of the others but precise): its truth ck->tp[0..nt) and
 * candidates r in map pm. */
static void show_sample(checker *ck, const icpp_pathmap *pm, const icpp_resolution *r, int v, int nt, int64_t height)
{
    shown *sh = NULL;
    if ((v == V_INCORRECT || v == V_INF_BAD) && ck->nshown < MAX_SHOWN)
        sh = &ck->shownv[ck->nshown++];
    else if (v != V_PRECISE && v != V_INCORRECT && v != V_INF_BAD && ck->nother < MAX_SHOWN)
        sh = &ck->otherv[ck->nother++];
    if (!sh)
        return;
    names_of(pm, ck->tp, ck->tpn, nt, sh->truth, sizeof sh->truth);
    sh->height = height;
    sh->verdict = v;
    size_t o = 0;
    sh->cand[0] = 0;
    for (uint32_t c = 0; c < r->ncand && o + 4 < sizeof sh->cand; c++) {
        uint32_t p[MAXF];
        uint32_t d = icpp_pathmap_path(pm, r->cand[c].node, p, MAXF);
        int64_t q[MAXF];
        for (uint32_t j = 0; j < d && j < MAXF; j++)
            q[j] = p[j];
        char tmp[2048];
        names_of(pm, q, NULL, (int)(d < MAXF ? d : MAXF), tmp, sizeof tmp);
        o += (size_t)snprintf(sh->cand + o, sizeof sh->cand - o, "%s%s", c ? " | " : "", tmp);
    }
}

/* Count verdict v for the distinct true path ck->tp[0..nt), keyed by a
 * hash of the function sequence; 0, or -1 out of memory. */
static int count_path(checker *ck, int v, int nt)
{
    uint64_t h1 = 1469598103934665603ull, h2 = (uint64_t)nt;
    for (int i = 0; i < nt; i++) {
        h1 = (h1 ^ (uint64_t)(ck->tp[i] + 2)) * 1099511628211ull;
        h2 = h2 * 31 + (uint64_t)(ck->tp[i] + 2);
    }
    uint64_t *ix = icpp_hmap_get(&ck->paths, h1, h2);
    if (!ix) {
        if (icpp_vec_reserve((void **)&ck->dps, &ck->capdps, ck->ndps + 1, sizeof *ck->dps, 256) < 0 ||
            icpp_hmap_put(&ck->paths, h1, h2, ck->ndps) < 0)
            return -1;
        memset(&ck->dps[ck->ndps], 0, sizeof *ck->dps);
        ix = icpp_hmap_get(&ck->paths, h1, h2);
        ck->ndps++;
    }
    ck->dps[*ix].n++;
    ck->dps[*ix].v[v]++;
    return 0;
}

/* Grow ck->vbin to hold binary b (ms->bins may grow during the pass); 0, or -1 out of memory. */
static int vbin_reserve(checker *ck, int32_t b)
{
    if (b < 0 || (size_t)b + 1 < ck->nvbin)
        return 0;
    uint64_t (*nv)[V_MAX] = realloc(ck->vbin, (size_t)(b + 2) * sizeof *nv);
    if (!nv)
        return -1;
    memset(nv + ck->nvbin, 0, ((size_t)(b + 2) - ck->nvbin) * sizeof *nv);
    ck->vbin = nv;
    ck->nvbin = (size_t)b + 2;
    return 0;
}

/* run_each's callback: unwind a profile sample's true stack, resolve it
 * and judge it. */
static int check_sample(void *arg, run *rn, icpp_rsample *s, icpp_err *err)
{
    checker *ck = arg;
    tally *t = &ck->t;
    if (s->learn)
        return 0;       /* learning input: never judged */
    t->total++;
    if (s->x.nregs)
        ck->any_regs = 1;
    int nf = 0;
    int st = icpp_unwind(ck->u, s, ck->fr, MAXF, &nf);
    int complete = st == ICPP_UW_ROOT;
    const icpp_uframe *fr = ck->fr;
    if (only_func) {
        int in = 0;
        for (int i = 0; i < nf && !in; i++)
            in = fr[i].func && fr[i].func->name && !strcmp(fr[i].func->name, only_func);
        if (!in) {
            t->total--;     /* not a sample of the part judged */
            return 0;
        }
    }
    int in_plt = (s->func && s->func->plt) || (nf > 0 && fr[0].func && fr[0].func->plt), in_cold = 0;
    for (int i = 0; i < nf && !in_cold; i++)
        in_cold = fr[i].func && fr[i].func->owner != fr[i].func->addr;
    if (nf == 0 || (!complete && st != ICPP_UW_TRUNCATED)) {
        t->no_truth++;
        t->no_truth_by[st < ICPP_UW_MAX ? st : 0]++;
        t->plt[V_MAX] += in_plt;
        t->cold[V_MAX] += in_cold;
        return 0;
    }
    t->truncated += !complete;
    mapset *ms = ck->ms;
    icpp_resolution rown, r;
    int32_t k = mapset_resolve(ms, rn->rp, s, &rown, &r);     /* r: the map's own nodes */
    int32_t b = mapset_bin_of(ms, rn->rp, s);
    if (vbin_reserve(ck, b) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    int v = V_UNRESOLVED;       /* k < 0: no map for this process's executable */
    if (k >= 0) {
        const icpp_pathmap *pm = ms->maps[k].pm;
        icpp_cidx *x = ms->maps[k].x;
        /* after resolving: completion may have added functions of the truth (to this map) */
        int nt = truth_path(x, r.kind == ICPP_RES_INFERRED ? ms->maps[k].cpl : NULL, rn->rp, fr, nf, ck->tp, ck->tpn);
        uint32_t hit;
        v = verdict(ck, pm, &r, nt, complete, &hit);
        t->fn[v]++;
        int fv = fold_verdict(&ck->folders[k], &r, ck->tp, nt, complete, v);
        t->folded[fv]++;
        int ntk = known_funcs(ck->tp, nt, ck->tk);
        if (count_reasons(ck, k, &r, v, fv, ntk, complete, in_plt) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory");
        t->aligned += r.aligned;
        show_sample(ck, pm, &r, v, nt, s->height);
        if (v == V_PRECISE || v == V_AMBIG_OK) {
            int so = sites_ok(x, pm, rn->rp, hit, fr, nf);
            t->site_contains += so >= 1;
            t->site_precise += so == 2 && v == V_PRECISE;
        }
        if (count_path(ck, v, nt) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory");
    } else {
        t->fn[V_UNRESOLVED]++;
    }
    t->plt[v] += in_plt;
    t->cold[v] += in_cold;
    if (b >= 0 && (size_t)b < ck->nvbin)
        ck->vbin[b][v]++;
    return 0;
}

/* A distinct path is precise if all its samples were, contains-truth if
 * all were precise or ambiguous-with-truth, else by its worst sample. */
static void judge_paths(checker *ck)
{
    for (size_t i = 0; i < ck->ndps; i++) {
        const dpath *d = &ck->dps[i];
        int v = d->v[V_INCORRECT] ? V_INCORRECT
              : d->v[V_UNCERTAIN_BAD] ? V_UNCERTAIN_BAD
              : d->v[V_INF_BAD]   ? V_INF_BAD
              : d->v[V_MISSING]   ? V_MISSING
              : d->v[V_INF_AMB_BAD] ? V_INF_AMB_BAD
              : d->v[V_INF_AMB_OK] ? V_INF_AMB_OK
              : d->v[V_INF_OK]    ? V_INF_OK
              : d->v[V_UNRESOLVED] ? V_UNRESOLVED
              : d->v[V_UNCERTAIN_OK] ? V_UNCERTAIN_OK
              : d->v[V_AMBIG_OK]  ? V_AMBIG_OK
                                  : V_PRECISE;
        ck->pv[v]++;
    }
}

/* "name": count, ... over the verdicts (JSON, without braces). */
static void json_verdicts(FILE *out, const uint64_t *c)
{
    for (int v = 0; v < V_MAX; v++)
        fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], c[v]);
}

/* The samples kept for auditing (incorrect, or the others), as a JSON array. */
static void json_shown(FILE *out, const shown *sv, size_t n, int with_verdict)
{
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "%s\n  {", i ? "," : "");
        if (with_verdict)
            fprintf(out, "\"verdict\": \"%s\", ", vname[sv[i].verdict]);
        fprintf(out, "\"height\": %" PRId64 ", \"truth\": ", sv[i].height);
        json_str(out, sv[i].truth);
        fprintf(out, ", \"candidates\": ");
        json_str(out, sv[i].cand);
        fprintf(out, "}");
    }
}

/* The JSON report's counts: by samples, paths, reasons, causes, sites. */
static void json_counts(const checker *ck, FILE *out)
{
    const tally *t = &ck->t;
    fprintf(out, " \"by_samples\": {");
    json_verdicts(out, t->fn);
    fprintf(out, "},\n \"by_paths\": {");
    json_verdicts(out, ck->pv);
    fprintf(out, "},\n \"by_samples_recursion_folded\": {");
    json_verdicts(out, t->folded);
    for (int w = 0; w < 2; w++) {
        fprintf(out, "},\n \"ambiguous_by_reason%s\": {", w ? "_recursion_folded" : "");
        for (int k = 0, first = 1; k < R_MAX; k++)
            if (ck->any_unpad || (k != R_REFUSED && k != R_LIBRARY)) {
                fprintf(out, "%s\"%s\": %" PRIu64, first ? "" : ", ", rname[k], t->why[w][k]);
                first = 0;
            }
    }
    fprintf(out, "},\n \"missing_by_cause\": {");
    for (int k = 0; k < M_MAX; k++)
        fprintf(out, "%s\"%s\": %" PRIu64, k ? ", " : "", mname[k], t->miss[k]);
    fprintf(out, "},\n \"call_sites\": {\"precise\": %" PRIu64 ", \"containing_truth\": %" PRIu64 "},\n",
            t->site_precise, t->site_contains);
    fprintf(out, " \"aligned_matches\": %" PRIu64 ",\n", t->aligned);
    for (int w = 0; w < 2; w++) {
        const uint64_t *g = w ? t->cold : t->plt;
        fprintf(out, " \"%s\": {", w ? "cold_part_samples" : "plt_samples");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "\"%s\": %" PRIu64 ", ", vname[v], g[v]);
        fprintf(out, "\"no_truth\": %" PRIu64 "},\n", g[V_MAX]);
    }
}

/* The report as JSON (docs/resolve.md). */
static void check_json(const checker *ck, FILE *out)
{
    const mapset *ms = ck->ms;
    const tally *t = &ck->t;
    const icpp_learn_stats *ls = ms->learn ? &ms->ls : NULL;
    fprintf(out, "{\"format\": \"icpp-resolve-check\", \"version\": 1, \"samples\": %" PRIu64
                 ", \"with_truth\": %" PRIu64 ", \"truncated_truth\": %" PRIu64 ", \"distinct_paths\": %zu,\n",
            t->total, t->total - t->no_truth, t->truncated, ck->ndps);
    json_counts(ck, out);
    fprintf(out, " \"by_learned_contexts\": {");
    json_verdicts(out, t->by_learned);
    fprintf(out, "},\n \"by_learn_votes\": {");
    json_verdicts(out, t->voted);
    fprintf(out, "},\n \"by_evidence\": {\"on\": %d, \"sparse\": %d, \"missing_mass\": %.4f, \"pruned\": {",
            ms->evidence_on, icpp_learn_trail_sparse(ms->trail), icpp_learn_trail_missing(ms->trail));
    json_verdicts(out, t->pruned);
    fprintf(out, "}, \"uncertain_by_alternative\": {");
    json_verdicts(out, t->by_alt);
    fprintf(out, "}},\n");
    if (ls)
        fprintf(out, " \"learning\": {\"learn_samples\": %" PRIu64 ", \"learned\": %" PRIu64
                     ", \"anchored\": %" PRIu64 ", \"not_rooted\": %" PRIu64 ", \"foreign\": %" PRIu64
                     ", \"new_contexts\": %" PRIu64 ", \"new_paths\": %" PRIu64 "},\n",
                ls->samples, ls->learned, ls->anchored, ls->not_rooted, ls->foreign, ls->new_contexts, ls->new_paths);
    fprintf(out, " \"binaries\": [");
    for (size_t i = 0; i < ms->nbins && i < ck->nvbin; i++) {
        fprintf(out, "%s\n  {\"binary\": ", i ? "," : "");
        json_str(out, ms->bins[i].path);
        fprintf(out, ", \"map\": ");
        if (ms->bins[i].map >= 0)
            json_str(out, ms->maps[ms->bins[i].map].path);
        else
            fprintf(out, "null");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, ", \"%s\": %" PRIu64, vname[v], ck->vbin[i][v]);
        fprintf(out, ", \"no_map_reason\": ");
        json_str(out, ms->bins[i].map >= 0 ? "" : ms->bins[i].why);
        fprintf(out, "}");
    }
    fprintf(out, "],\n");
    fprintf(out, " \"incorrect_samples\": [");
    json_shown(out, ck->shownv, ck->nshown, 0);
    fprintf(out, "],\n");
    fprintf(out, " \"other_samples\": [");
    json_shown(out, ck->otherv, ck->nother, 1);
    fprintf(out, "],\n");
    fprintf(out, " \"no_truth\": {");
    int first = 1;
    for (int k = 0; k < ICPP_UW_MAX; k++)
        if (t->no_truth_by[k]) {
            fprintf(out, "%s\"%s\": %" PRIu64, first ? "" : ", ", icpp_uw_status_name(k), t->no_truth_by[k]);
            first = 0;
        }
    fprintf(out, "}}\n");
}

/* The text report's table and the shares of samples by reason and cause. */
static void text_table(const checker *ck, FILE *out, uint64_t judged)
{
    const tally *t = &ck->t;
    fprintf(out, "%-36s %12s %8s %12s %8s\n", "function-path level", "samples", "%", "paths", "%");
    for (int v = 0; v < V_MAX; v++)
        fprintf(out, "%-36s %12" PRIu64 " %7.2f%% %12" PRIu64 " %7.2f%%\n", vname[v], t->fn[v], pc(t->fn[v], judged),
                ck->pv[v], pc(ck->pv[v], ck->ndps));
    fprintf(out, "%-36s %12" PRIu64 " %7.2f%%\n", "correct (precise+ambiguous)", t->fn[0] + t->fn[1],
            pc(t->fn[0] + t->fn[1], judged));
    fprintf(out, "recursion folded: precise %.2f%%, ambiguous-containing-truth %.2f%%, incorrect %.2f%% of samples\n",
            pc(t->folded[V_PRECISE], judged), pc(t->folded[V_AMBIG_OK], judged), pc(t->folded[V_INCORRECT], judged));
    for (int w = 0; w < 2; w++) {
        if (!(w ? t->folded[V_AMBIG_OK] : t->fn[V_AMBIG_OK]))
            continue;
        fprintf(out, "%sambiguous by reason: same call edges in another order %.2f%%, same functions in another "
                     "order %.2f%%, separable %.2f%%", w ? "recursion folded, " : "", pc(t->why[w][R_SAME_EDGES], judged),
                pc(t->why[w][R_SAME_FUNCS], judged), pc(t->why[w][R_SEPARABLE], judged));
        if (ck->any_unpad)
            fprintf(out, ", only functions of other modules differ %.2f%%, only functions icpp-rewrite refused to "
                         "pad differ %.2f%%", pc(t->why[w][R_LIBRARY], judged), pc(t->why[w][R_REFUSED], judged));
        if (t->why[w][R_TRUNCATED])
            fprintf(out, ", truncated truth %.2f%%", pc(t->why[w][R_TRUNCATED], judged));
        fputs(" of samples\n", out);
    }
    uint64_t nmiss = t->miss[M_PATH] + t->miss[M_HEIGHT] + t->miss[M_PLT] + t->miss[M_TRUNCATED];
    if (nmiss)
        fprintf(out, "missing or inferred by cause: path never trained %.2f%%, path trained at other heights "
                     "%.2f%%, in a PLT stub %.2f%%, truncated truth %.2f%% of samples\n",
                pc(t->miss[M_PATH], judged), pc(t->miss[M_HEIGHT], judged), pc(t->miss[M_PLT], judged),
                pc(t->miss[M_TRUNCATED], judged));
    fprintf(out, "call-site level: precise %.2f%%, containing the truth %.2f%% of samples\n",
            pc(t->site_precise, judged), pc(t->site_contains, judged));
}

/* The text report's lines per binary, on PLT and cold-part samples, aligned matches. */
static void text_groups(const checker *ck, FILE *out)
{
    const mapset *ms = ck->ms;
    const tally *t = &ck->t;
    for (size_t i = 0; ms->nbins > 1 && i < ms->nbins && i < ck->nvbin; i++) {
        fputs("binary ", out);
        icpp_escape_fputs(ms->bins[i].path, out);
        fputs(" (map ", out);
        icpp_escape_fputs(ms->bins[i].map >= 0 ? ms->maps[ms->bins[i].map].path : "none", out);
        fputs("):", out);
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, " %s %" PRIu64, vname[v], ck->vbin[i][v]);
        fputc('\n', out);
    }
    for (int w = 0; w < 2; w++) {
        const uint64_t *g = w ? t->cold : t->plt;
        uint64_t all = g[V_MAX];
        for (int v = 0; v < V_MAX; v++)
            all += g[v];
        if (!all)
            continue;
        fprintf(out, "%s: %" PRIu64, w ? "samples with a cold-part frame" : "samples in a PLT stub", all);
        for (int v = 0; v < V_MAX; v++)
            if (g[v])
                fprintf(out, ", %s %" PRIu64, vname[v], g[v]);
        if (g[V_MAX])
            fprintf(out, ", no true stack %" PRIu64, g[V_MAX]);
        fputc('\n', out);
    }
    if (t->aligned)
        fprintf(out, "%" PRIu64 " samples under a signal frame matched their context modulo the frame's "
                     "64-byte alignment\n", t->aligned);
}

/* The text report's lines on learning, evidence and votes. */
static void text_learning(const checker *ck, FILE *out)
{
    const mapset *ms = ck->ms;
    const tally *t = &ck->t;
    const icpp_learn_stats *ls = ms->learn ? &ms->ls : NULL;
    if (ls)
        fprintf(out, "learning: %" PRIu64 " learn samples, %" PRIu64 " learned (%" PRIu64 " new contexts); "
                     "samples resolved through learned-only contexts: precise %" PRIu64 ", ambiguous %" PRIu64
                     ", incorrect %" PRIu64 "\n", ls->samples, ls->learned, ls->new_contexts,
                t->by_learned[V_PRECISE], t->by_learned[V_AMBIG_OK], t->by_learned[V_INCORRECT]);
    if (ms->evidence_on) {
        uint64_t np = 0;
        for (int v = 0; v < V_MAX; v++)
            np += t->pruned[v];
        fprintf(out, "evidence (the run does what training did not): %" PRIu64 " samples lost candidates no learn "
                     "sample saw the region of (then precise %" PRIu64 ", ambiguous %" PRIu64 ", incorrect %" PRIu64
                     "); %" PRIu64 " uncertain for an untrained path through a context learn samples saw (%" PRIu64
                     " of them indeed wrong)\n", np, t->pruned[V_PRECISE], t->pruned[V_AMBIG_OK], t->pruned[V_INCORRECT],
                t->by_alt[V_UNCERTAIN_OK] + t->by_alt[V_UNCERTAIN_BAD], t->by_alt[V_UNCERTAIN_BAD]);
    }
    if (ms->evidence_on && ms->trail)
        fprintf(out, "learn samples on a path no other learn sample took: %.1f%%%s\n",
                100.0 * icpp_learn_trail_missing(ms->trail),
                icpp_learn_trail_sparse(ms->trail)
                    ? " (a sparse recording: one learn sample is not enough to be precise; sample faster or "
                      "longer; docs/resolve.md, \"Recording size\")" : "");
    if (t->voted[V_PRECISE] || t->voted[V_INCORRECT])
        fprintf(out, "learn votes singled out one of several known paths for %" PRIu64 " samples: %" PRIu64
                     " precise, %" PRIu64 " incorrect\n", t->voted[V_PRECISE] + t->voted[V_INCORRECT],
                t->voted[V_PRECISE], t->voted[V_INCORRECT]);
}

/* The report as text: the incorrect samples, then the accuracy. */
static void check_text(const checker *ck, FILE *out, const char *samples, const char *map_path)
{
    const tally *t = &ck->t;
    uint64_t judged = t->total - t->no_truth;
    for (size_t i = 0; i < ck->nshown; i++) {
        fprintf(out, "# incorrect: height %" PRId64 " truth ", ck->shownv[i].height);
        icpp_escape_fputs(ck->shownv[i].truth, out);
        fputs("\n#            resolved as ", out);
        icpp_escape_fputs(ck->shownv[i].cand, out);
        fputc('\n', out);
    }
    fputs("# accuracy of ", out);
    icpp_escape_fputs(map_path, out);
    fputs(" against the true stacks in ", out);
    icpp_escape_fputs(samples, out);
    fputc('\n', out);
    fprintf(out, "# %" PRIu64 " samples, %" PRIu64 " with a true stack (%" PRIu64 " of them truncated by the "
                 "stack copy), %zu distinct true paths\n", t->total, judged, t->truncated, ck->ndps);
    if (t->no_truth) {
        fprintf(out, "# no true stack for %" PRIu64 ":", t->no_truth);
        for (int k = 0; k < ICPP_UW_MAX; k++)
            if (t->no_truth_by[k])
                fprintf(out, " %s %" PRIu64, icpp_uw_status_name(k), t->no_truth_by[k]);
        fputc('\n', out);
    }
    text_table(ck, out, judged);
    text_groups(ck, out);
    text_learning(ck, out);
}

int check_run(const char *samples, mapset *ms, FILE *out, int json)
{
    icpp_err err;
    char map_path[4096];
    mapset_names(ms, map_path, sizeof map_path);
    run rn;
    checker *ck = NULL;
    int rc = run_open(&rn, ms, samples, 0, &err);
    if (rc < 0 || !(ck = checker_new(ms, rn.rp))) {
        fprintf(stderr, "icpp-resolve: %s\n", rc < 0 ? err.msg : "out of memory");
        run_close(&rn);
        return 1;
    }
    rc = run_each(&rn, check_sample, ck, &err);
    if (rc == RUN_ERR_READ)
        fprintf(stderr, "icpp-resolve: %s: %s\n", samples, err.msg);
    else if (rc < 0)
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);    /* out of memory: no report of part of the samples */
    else
        prof_warn_incomplete(stderr, samples, icpp_replay_info_get(rn.rp));
    if (rc == 0 && !ck->any_regs)
        fprintf(stderr, "icpp-resolve: %s has no true stacks: record it with `icpp-sample --validate` to use --check\n",
                samples);
    if (rc == 0 && ck->any_regs) {
        judge_paths(ck);
        if (json)
            check_json(ck, out);
        else
            check_text(ck, out, samples, map_path);
    }
    int status = rc == 0 && ck->any_regs ? 0 : 1;
    checker_free(ck);
    run_close(&rn);
    return status;
}
