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
#include "unwind.h"

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

/* Refresh u for pm (completion may add functions while the check runs). */
static void unpad_update(unpad *u, const icpp_pathmap *pm)
{
    size_t nf = icpp_pathmap_nfuncs(pm);
    if (nf == u->n || !icpp_pathmap_meta(pm, "arr-unpaddable"))
        return;
    icpp_err err;
    uint8_t *m = realloc(u->mask, nf ? nf : 1);
    if (!m)
        return;     /* keeps the old mask: functions past it count as paddable */
    u->mask = m;
    u->n = icpp_arr_unpaddable(pm, m, &err) == 1 ? nf : 0;
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

int check_run(const char *samples, mapset *ms, FILE *out, int json)
{
    icpp_err err;
    char map_path[4096];
    mapset_names(ms, map_path, sizeof map_path);
    const icpp_learn_stats *ls = ms->learn ? &ms->ls : NULL;
    icpp_replay *rp = mapset_replay_open(ms, samples, &err);
    if (rp)
        icpp_replay_select(rp, ICPP_REPLAY_NO_FRAMES);     /* learning is done: their frames are not needed */
    if (!rp || mapset_apply_stacks(ms, rp) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", rp ? "out of memory" : err.msg);
        icpp_replay_close(rp);
        return 1;
    }
    uint64_t (*vbin)[V_MAX] = calloc(ms->nbins + 1, sizeof *vbin);     /* verdicts per binary */
    size_t nvbin = ms->nbins + 1;
    if (!vbin) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        icpp_replay_close(rp);
        return 1;
    }
    /* a perf.data: the same inferred thread bases as its profile */
    icpp_basevote *bv = mapset_infer_bases(ms, samples, stderr, &err);
    if (!bv) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        free(vbin);
        icpp_replay_close(rp);
        return 1;
    }
    icpp_unwinder *u = icpp_unwinder_new(rp);
    icpp_folder *folders = calloc(ms->nmaps + 1, sizeof *folders);
    unpad *unpads = calloc(ms->nmaps + 1, sizeof *unpads);
    pathidx *pidx = calloc(ms->nmaps + 1, sizeof *pidx);
    int any_unpad = 0;
    if (!folders || !unpads || !pidx) {
        free(folders);
        free(unpads);
        free(pidx);
        fprintf(stderr, "icpp-resolve: out of memory\n");
        free(vbin);
        icpp_replay_close(rp);
        return 1;
    }
    for (size_t i = 0; i < ms->nmaps; i++) {
        icpp_folder_init(&folders[i], ms->maps[i].pm);
        icpp_hmap_init(&pidx[i].h);
        unpad_update(&unpads[i], ms->maps[i].pm);
        any_unpad |= unpads[i].n != 0;
    }
    tally t;
    memset(&t, 0, sizeof t);
    icpp_hmap paths;            /* hash of the true path -> index into dps */
    icpp_hmap_init(&paths);
    dpath *dps = NULL;
    size_t ndps = 0, capdps = 0;
    static icpp_uframe fr[MAXF];
    static shown shownv[MAX_SHOWN], otherv[MAX_SHOWN];
    size_t nshown = 0, nother = 0;
    static int64_t tp[MAXF];
    static const char *tpn[MAXF];   /* the binary's names of tp's frames */
    icpp_rsample s;
    icpp_resolution r;
    int rc, any_regs = 0;
    while ((rc = icpp_replay_next(rp, &s, &err)) > 0) {
        if (s.learn)
            continue;       /* learning input: never judged */
        icpp_basevote_apply(bv, &s);
        t.total++;
        if (s.x.nregs)
            any_regs = 1;
        int nf = 0;
        int st = icpp_unwind(u, &s, fr, MAXF, &nf);
        int complete = st == ICPP_UW_ROOT;
        if (only_func) {
            int in = 0;
            for (int i = 0; i < nf && !in; i++)
                in = fr[i].func && fr[i].func->name && !strcmp(fr[i].func->name, only_func);
            if (!in) {
                t.total--;      /* not a sample of the part judged */
                continue;
            }
        }
        int in_plt = (s.func && s.func->plt) || (nf > 0 && fr[0].func && fr[0].func->plt), in_cold = 0;
        for (int i = 0; i < nf && !in_cold; i++)
            in_cold = fr[i].func && fr[i].func->owner != fr[i].func->addr;
        if (nf == 0 || (!complete && st != ICPP_UW_TRUNCATED)) {
            t.no_truth++;
            t.no_truth_by[st < ICPP_UW_MAX ? st : 0]++;
            t.plt[V_MAX] += in_plt;
            t.cold[V_MAX] += in_cold;
            continue;
        }
        t.truncated += !complete;
        icpp_resolution rown;
        int32_t k = mapset_resolve(ms, rp, &s, &rown, &r);     /* r: the map's own nodes */
        int32_t b = mapset_bin_of(ms, rp, &s);
        if (b >= 0 && (size_t)b + 1 >= nvbin) {
            uint64_t (*nv)[V_MAX] = realloc(vbin, (size_t)(b + 2) * sizeof *nv);
            if (nv) {
                memset(nv + nvbin, 0, ((size_t)(b + 2) - nvbin) * sizeof *nv);
                vbin = nv;
                nvbin = (size_t)b + 2;
            }
        }
        if (k < 0) {        /* no map for this process's executable */
            t.fn[V_UNRESOLVED]++;
            t.plt[V_UNRESOLVED] += in_plt;
            t.cold[V_UNRESOLVED] += in_cold;
            if (b >= 0 && (size_t)b < nvbin)
                vbin[b][V_UNRESOLVED]++;
            continue;
        }
        const icpp_pathmap *pm = ms->maps[k].pm;
        icpp_cidx *x = ms->maps[k].x;
        /* after resolving: completion may have added functions of the truth (to this map) */
        int nt = truth_path(x, r.kind == ICPP_RES_INFERRED ? ms->maps[k].cpl : NULL, rp, fr, nf, tp, tpn);
        int v;
        uint32_t hit = 0, hit_i = 0;
        if (r.kind == ICPP_RES_INFERRED) {
            int found = 0;
            for (uint32_t i = 0; i < r.ncand && !found; i++)
                found = matches(pm, r.cand[i].node, tp, nt, complete);
            v = r.ncand == 1 && !r.bounded ? (found ? V_INF_OK : V_INF_BAD) : (found ? V_INF_AMB_OK : V_INF_AMB_BAD);
        } else if (r.kind == ICPP_RES_UNRESOLVED) {
            v = V_UNRESOLVED;
        } else if (r.kind == ICPP_RES_MISSING) {
            v = V_MISSING;
        } else {
            int found = 0;
            for (uint32_t i = 0; i < r.ncand && !found; i++)
                if (matches(pm, r.cand[i].node, tp, nt, complete)) {
                    found = 1;
                    hit = r.cand[i].node;
                    hit_i = i;
                }
            if (r.kind == ICPP_RES_UNCERTAIN)
                v = found ? V_UNCERTAIN_OK : V_UNCERTAIN_BAD;
            else
                v = !found ? V_INCORRECT : r.kind == ICPP_RES_PRECISE ? V_PRECISE : V_AMBIG_OK;
            if (icpp_cand_learned_only(&r.cand[found ? hit_i : 0]))
                t.by_learned[v]++;
            t.voted[v] += r.voted;
            t.pruned[v] += r.pruned > 0;
            t.by_alt[v] += r.alternative;
        }
        t.fn[v]++;
        int fv = fold_verdict(&folders[k], &r, tp, nt, complete, v);
        t.folded[fv]++;
        static int64_t tk[MAXF]; /* the truth as the map's functions (matches' projection) */
        int ntk = known_funcs(tp, nt, tk);
        if (v == V_AMBIG_OK || fv == V_AMBIG_OK) {
            if (unpads[k].n)
                unpad_update(&unpads[k], pm);
            if (v == V_AMBIG_OK)
                t.why[0][amb_reason(pm, NULL, &unpads[k], &r, tk, ntk, 0, complete)]++;
            if (fv == V_AMBIG_OK) {
                uint64_t qh = 0;
                if (complete) {
                    static int64_t qf[MAXF];
                    memcpy(qf, tk, (size_t)ntk * sizeof *qf);
                    qh = icpp_fold_hash(qf, icpp_fold_path(qf, (size_t)ntk));
                }
                t.why[1][amb_reason(pm, &folders[k], &unpads[k], &r, tk, ntk, qh, complete)]++;
            }
        }
        if (v == V_MISSING || v == V_INF_OK || v == V_INF_BAD || v == V_INF_AMB_OK || v == V_INF_AMB_BAD) {
            int known = complete && !in_plt ? path_known(&pidx[k], pm, tk, ntk) : 0;
            if (known >= 0)
                t.miss[in_plt ? M_PLT : !complete ? M_TRUNCATED : known ? M_HEIGHT : M_PATH]++;
        }
        t.plt[v] += in_plt;
        t.cold[v] += in_cold;
        if (b >= 0 && (size_t)b < nvbin)
            vbin[b][v]++;
        t.aligned += r.aligned;
        shown *sh = NULL;
        if ((v == V_INCORRECT || v == V_INF_BAD) && nshown < MAX_SHOWN)
            sh = &shownv[nshown++];
        else if (v != V_PRECISE && v != V_INCORRECT && v != V_INF_BAD && nother < MAX_SHOWN)
            sh = &otherv[nother++];
        if (sh) {
            names_of(pm, tp, tpn, nt, sh->truth, sizeof sh->truth);
            sh->height = s.height;
            sh->verdict = v;
            size_t o = 0;
            sh->cand[0] = 0;
            for (uint32_t c = 0; c < r.ncand && o + 4 < sizeof sh->cand; c++) {
                uint32_t p[MAXF];
                uint32_t d = icpp_pathmap_path(pm, r.cand[c].node, p, MAXF);
                int64_t q[MAXF];
                for (uint32_t j = 0; j < d && j < MAXF; j++)
                    q[j] = p[j];
                char tmp[2048];
                names_of(pm, q, NULL, (int)(d < MAXF ? d : MAXF), tmp, sizeof tmp);
                o += (size_t)snprintf(sh->cand + o, sizeof sh->cand - o, "%s%s", c ? " | " : "", tmp);
            }
        }
        if (v == V_PRECISE || v == V_AMBIG_OK) {
            int so = sites_ok(x, pm, rp, hit, fr, nf);
            t.site_contains += so >= 1;
            t.site_precise += so == 2 && v == V_PRECISE;
        }
        /* distinct true paths, keyed by a hash of the function sequence */
        uint64_t h1 = 1469598103934665603ull, h2 = (uint64_t)nt;
        for (int i = 0; i < nt; i++) {
            h1 = (h1 ^ (uint64_t)(tp[i] + 2)) * 1099511628211ull;
            h2 = h2 * 31 + (uint64_t)(tp[i] + 2);
        }
        uint64_t *ix = icpp_hmap_get(&paths, h1, h2);
        if (!ix) {
            if (ndps == capdps) {
                capdps = capdps ? 2 * capdps : 256;
                dpath *nd = realloc(dps, capdps * sizeof *nd);
                if (!nd)
                    break;
                dps = nd;
            }
            memset(&dps[ndps], 0, sizeof *dps);
            icpp_hmap_put(&paths, h1, h2, ndps);
            ix = icpp_hmap_get(&paths, h1, h2);
            ndps++;
        }
        dps[*ix].n++;
        dps[*ix].v[v]++;
    }
    if (rc < 0) {
        fprintf(stderr, "icpp-resolve: %s: %s\n", samples, err.msg);
        return 1;
    }
    prof_warn_incomplete(stderr, samples, icpp_replay_info_get(rp));
    if (!any_regs) {
        fprintf(stderr, "icpp-resolve: %s has no true stacks: record it with `icpp-sample --validate` to use --check\n",
                samples);
        return 1;
    }
    /* A distinct path is precise if all its samples were, contains-truth if
     * all were precise or ambiguous-with-truth, else by its worst sample. */
    uint64_t pv[V_MAX] = {0};
    for (size_t i = 0; i < ndps; i++) {
        const dpath *d = &dps[i];
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
        pv[v]++;
    }
    uint64_t judged = t.total - t.no_truth;
    if (json) {
        fprintf(out, "{\"format\": \"icpp-resolve-check\", \"version\": 1, \"samples\": %" PRIu64
                     ", \"with_truth\": %" PRIu64 ", \"truncated_truth\": %" PRIu64 ", \"distinct_paths\": %zu,\n",
                t.total, judged, t.truncated, ndps);
        fprintf(out, " \"by_samples\": {");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], t.fn[v]);
        fprintf(out, "},\n \"by_paths\": {");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], pv[v]);
        fprintf(out, "},\n \"by_samples_recursion_folded\": {");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], t.folded[v]);
        for (int w = 0; w < 2; w++) {
            fprintf(out, "},\n \"ambiguous_by_reason%s\": {", w ? "_recursion_folded" : "");
            for (int k = 0, first = 1; k < R_MAX; k++)
                if (any_unpad || (k != R_REFUSED && k != R_LIBRARY)) {
                    fprintf(out, "%s\"%s\": %" PRIu64, first ? "" : ", ", rname[k], t.why[w][k]);
                    first = 0;
                }
        }
        fprintf(out, "},\n \"missing_by_cause\": {");
        for (int k = 0; k < M_MAX; k++)
            fprintf(out, "%s\"%s\": %" PRIu64, k ? ", " : "", mname[k], t.miss[k]);
        fprintf(out, "},\n \"call_sites\": {\"precise\": %" PRIu64 ", \"containing_truth\": %" PRIu64 "},\n",
                t.site_precise, t.site_contains);
        fprintf(out, " \"aligned_matches\": %" PRIu64 ",\n", t.aligned);
        for (int w = 0; w < 2; w++) {
            const uint64_t *g = w ? t.cold : t.plt;
            fprintf(out, " \"%s\": {", w ? "cold_part_samples" : "plt_samples");
            for (int v = 0; v < V_MAX; v++)
                fprintf(out, "\"%s\": %" PRIu64 ", ", vname[v], g[v]);
            fprintf(out, "\"no_truth\": %" PRIu64 "},\n", g[V_MAX]);
        }
        fprintf(out, " \"by_learned_contexts\": {");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], t.by_learned[v]);
        fprintf(out, "},\n \"by_learn_votes\": {");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], t.voted[v]);
        fprintf(out, "},\n \"by_evidence\": {\"on\": %d, \"sparse\": %d, \"missing_mass\": %.4f, \"pruned\": {",
                ms->evidence_on, icpp_learn_trail_sparse(ms->trail), icpp_learn_trail_missing(ms->trail));
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], t.pruned[v]);
        fprintf(out, "}, \"uncertain_by_alternative\": {");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%s\"%s\": %" PRIu64, v ? ", " : "", vname[v], t.by_alt[v]);
        fprintf(out, "}},\n");
        if (ls)
            fprintf(out, " \"learning\": {\"learn_samples\": %" PRIu64 ", \"learned\": %" PRIu64
                         ", \"anchored\": %" PRIu64 ", \"not_rooted\": %" PRIu64 ", \"foreign\": %" PRIu64
                         ", \"new_contexts\": %" PRIu64 ", \"new_paths\": %" PRIu64 "},\n",
                    ls->samples, ls->learned, ls->anchored, ls->not_rooted, ls->foreign, ls->new_contexts,
                    ls->new_paths);
        fprintf(out, " \"binaries\": [");
        for (size_t i = 0; i < ms->nbins && i < nvbin; i++) {
            fprintf(out, "%s\n  {\"binary\": ", i ? "," : "");
            json_str(out, ms->bins[i].path);
            fprintf(out, ", \"map\": ");
            if (ms->bins[i].map >= 0)
                json_str(out, ms->maps[ms->bins[i].map].path);
            else
                fprintf(out, "null");
            for (int v = 0; v < V_MAX; v++)
                fprintf(out, ", \"%s\": %" PRIu64, vname[v], vbin[i][v]);
            fprintf(out, ", \"no_map_reason\": ");
            json_str(out, ms->bins[i].map >= 0 ? "" : ms->bins[i].why);
            fprintf(out, "}");
        }
        fprintf(out, "],\n");
        fprintf(out, " \"incorrect_samples\": [");
        for (size_t i = 0; i < nshown; i++) {
            fprintf(out, "%s\n  {\"height\": %" PRId64 ", \"truth\": ", i ? "," : "", shownv[i].height);
            json_str(out, shownv[i].truth);
            fprintf(out, ", \"candidates\": ");
            json_str(out, shownv[i].cand);
            fprintf(out, "}");
        }
        fprintf(out, "],\n");
        fprintf(out, " \"other_samples\": [");
        for (size_t i = 0; i < nother; i++) {
            fprintf(out, "%s\n  {\"verdict\": \"%s\", \"height\": %" PRId64 ", \"truth\": ", i ? "," : "",
                    vname[otherv[i].verdict], otherv[i].height);
            json_str(out, otherv[i].truth);
            fprintf(out, ", \"candidates\": ");
            json_str(out, otherv[i].cand);
            fprintf(out, "}");
        }
        fprintf(out, "],\n");
        fprintf(out, " \"no_truth\": {");
        int first = 1;
        for (int k = 0; k < ICPP_UW_MAX; k++)
            if (t.no_truth_by[k]) {
                fprintf(out, "%s\"%s\": %" PRIu64, first ? "" : ", ", icpp_uw_status_name(k), t.no_truth_by[k]);
                first = 0;
            }
        fprintf(out, "}}\n");
    } else {
        for (size_t i = 0; i < nshown; i++)
        {
            fprintf(out, "# incorrect: height %" PRId64 " truth ", shownv[i].height);
            icpp_escape_fputs(shownv[i].truth, out);
            fputs("\n#            resolved as ", out);
            icpp_escape_fputs(shownv[i].cand, out);
            fputc('\n', out);
        }
        fputs("# accuracy of ", out);
        icpp_escape_fputs(map_path, out);
        fputs(" against the true stacks in ", out);
        icpp_escape_fputs(samples, out);
        fputc('\n', out);
        fprintf(out, "# %" PRIu64 " samples, %" PRIu64 " with a true stack (%" PRIu64 " of them truncated by the "
                     "stack copy), %zu distinct true paths\n", t.total, judged, t.truncated, ndps);
        if (t.no_truth) {
            fprintf(out, "# no true stack for %" PRIu64 ":", t.no_truth);
            for (int k = 0; k < ICPP_UW_MAX; k++)
                if (t.no_truth_by[k])
                    fprintf(out, " %s %" PRIu64, icpp_uw_status_name(k), t.no_truth_by[k]);
            fputc('\n', out);
        }
        fprintf(out, "%-36s %12s %8s %12s %8s\n", "function-path level", "samples", "%", "paths", "%");
        for (int v = 0; v < V_MAX; v++)
            fprintf(out, "%-36s %12" PRIu64 " %7.2f%% %12" PRIu64 " %7.2f%%\n", vname[v], t.fn[v], pc(t.fn[v], judged),
                    pv[v], pc(pv[v], ndps));
        fprintf(out, "%-36s %12" PRIu64 " %7.2f%%\n", "correct (precise+ambiguous)", t.fn[0] + t.fn[1],
                pc(t.fn[0] + t.fn[1], judged));
        fprintf(out, "recursion folded: precise %.2f%%, ambiguous-containing-truth %.2f%%, incorrect %.2f%% of samples\n",
                pc(t.folded[V_PRECISE], judged), pc(t.folded[V_AMBIG_OK], judged), pc(t.folded[V_INCORRECT], judged));
        for (int w = 0; w < 2; w++) {
            if (!(w ? t.folded[V_AMBIG_OK] : t.fn[V_AMBIG_OK]))
                continue;
            fprintf(out, "%sambiguous by reason: same call edges in another order %.2f%%, same functions in another "
                         "order %.2f%%, separable %.2f%%", w ? "recursion folded, " : "", pc(t.why[w][R_SAME_EDGES], judged),
                    pc(t.why[w][R_SAME_FUNCS], judged), pc(t.why[w][R_SEPARABLE], judged));
            if (any_unpad)
                fprintf(out, ", only functions of other modules differ %.2f%%, only functions icpp-rewrite refused to "
                             "pad differ %.2f%%", pc(t.why[w][R_LIBRARY], judged), pc(t.why[w][R_REFUSED], judged));
            if (t.why[w][R_TRUNCATED])
                fprintf(out, ", truncated truth %.2f%%", pc(t.why[w][R_TRUNCATED], judged));
            fputs(" of samples\n", out);
        }
        uint64_t nmiss = t.miss[M_PATH] + t.miss[M_HEIGHT] + t.miss[M_PLT] + t.miss[M_TRUNCATED];
        if (nmiss)
            fprintf(out, "missing or inferred by cause: path never trained %.2f%%, path trained at other heights "
                         "%.2f%%, in a PLT stub %.2f%%, truncated truth %.2f%% of samples\n",
                    pc(t.miss[M_PATH], judged), pc(t.miss[M_HEIGHT], judged), pc(t.miss[M_PLT], judged),
                    pc(t.miss[M_TRUNCATED], judged));
        fprintf(out, "call-site level: precise %.2f%%, containing the truth %.2f%% of samples\n",
                pc(t.site_precise, judged), pc(t.site_contains, judged));
        for (size_t i = 0; ms->nbins > 1 && i < ms->nbins && i < nvbin; i++) {
            fputs("binary ", out);
            icpp_escape_fputs(ms->bins[i].path, out);
            fputs(" (map ", out);
            icpp_escape_fputs(ms->bins[i].map >= 0 ? ms->maps[ms->bins[i].map].path : "none", out);
            fputs("):", out);
            for (int v = 0; v < V_MAX; v++)
                fprintf(out, " %s %" PRIu64, vname[v], vbin[i][v]);
            fputc('\n', out);
        }
        for (int w = 0; w < 2; w++) {
            const uint64_t *g = w ? t.cold : t.plt;
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
        if (t.aligned)
            fprintf(out, "%" PRIu64 " samples under a signal frame matched their context modulo the frame's "
                         "64-byte alignment\n", t.aligned);
        if (ls)
            fprintf(out, "learning: %" PRIu64 " learn samples, %" PRIu64 " learned (%" PRIu64 " new contexts); "
                         "samples resolved through learned-only contexts: precise %" PRIu64 ", ambiguous %" PRIu64
                         ", incorrect %" PRIu64 "\n", ls->samples, ls->learned, ls->new_contexts,
                    t.by_learned[V_PRECISE], t.by_learned[V_AMBIG_OK], t.by_learned[V_INCORRECT]);
        if (ms->evidence_on) {
            uint64_t np = 0;
            for (int v = 0; v < V_MAX; v++)
                np += t.pruned[v];
            fprintf(out, "evidence (the run does what training did not): %" PRIu64 " samples lost candidates no learn "
                         "sample saw the region of (then precise %" PRIu64 ", ambiguous %" PRIu64 ", incorrect %" PRIu64
                         "); %" PRIu64 " uncertain for an untrained path through a context learn samples saw (%" PRIu64
                         " of them indeed wrong)\n", np, t.pruned[V_PRECISE], t.pruned[V_AMBIG_OK], t.pruned[V_INCORRECT],
                    t.by_alt[V_UNCERTAIN_OK] + t.by_alt[V_UNCERTAIN_BAD], t.by_alt[V_UNCERTAIN_BAD]);
        }
        if (ms->evidence_on && ms->trail)
            fprintf(out, "learn samples on a path no other learn sample took: %.1f%%%s\n",
                    100.0 * icpp_learn_trail_missing(ms->trail),
                    icpp_learn_trail_sparse(ms->trail)
                        ? " (a sparse recording: one learn sample is not enough to be precise; sample faster or "
                          "longer; docs/resolve.md, \"Recording size\")" : "");
        if (t.voted[V_PRECISE] || t.voted[V_INCORRECT])
            fprintf(out, "learn votes singled out one of several known paths for %" PRIu64 " samples: %" PRIu64
                         " precise, %" PRIu64 " incorrect\n", t.voted[V_PRECISE] + t.voted[V_INCORRECT],
                    t.voted[V_PRECISE], t.voted[V_INCORRECT]);
    }
    for (size_t i = 0; i < ms->nmaps; i++) {
        icpp_folder_free(&folders[i]);
        free(unpads[i].mask);
        icpp_hmap_free(&pidx[i].h);
        free(pidx[i].nh);
    }
    free(pidx);
    free(folders);
    free(unpads);
    free(dps);
    free(vbin);
    icpp_hmap_free(&paths);
    icpp_unwinder_free(u);
    icpp_basevote_free(bv);
    icpp_replay_close(rp);
    return 0;
}
