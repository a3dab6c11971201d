/* resolve.h -- the resolution policy: a sample to its candidate call paths in a path map, and how sure that is. */
#ifndef ICPP_RESOLVE_H
#define ICPP_RESOLVE_H

#include <stdint.h>

#include "cidx.h"
#include "learn.h"
#include "replay.h"

/* The policy takes the index (lib/cidx.h) as its handle: its settings are
 * kept there (icpp_cidx_policy), and icpp_cidx_free frees its scratch.
 * It looks a sample's CID up in the index, in the PLT stubs' calling
 * contexts (lib/plt.h) or by completion (lib/complete.h), then weighs the
 * candidates by this recording's learn samples. */

/* Several known paths share a CID, but the recording's own learn samples
 * at that CID all took one of them, at least `votes` times: the sample is
 * resolved to that one, as precise (`voted` set).  0 turns this off; the
 * default is ICPP_LEARN_VOTES (lib/cidx.h; docs/resolve.md says how it was
 * chosen). */
void icpp_cidx_set_votes(icpp_cidx *x, uint32_t votes);

/* Novel functions (icpp_cidx_set_novel, lib/cidx.h: learning found
 * contexts of f the map did not have).  A sample of such a function whose
 * known candidates this recording's learn samples never confirmed at its
 * CID is reported ICPP_RES_UNCERTAIN instead of precise or ambiguous: the
 * run does with f what training did not, and an untrained path may share
 * the CID (the weight still goes to the candidates); so is one that a
 * single learn sample confirmed where known contexts recombine
 * (ICPP_ROUTE_CONFIRM). */

/* The recording's learn trail (lib/learn.h; NULL: none): with evidence on,
 * a one-candidate CID whose candidate the sample's thread passed through,
 * at the sample's height, in the learn sample just before or just after it
 * is confirmed by a *neighbour*, and the route rule below does not make it
 * uncertain.  In a sparse recording (icpp_learn_trail_sparse) a single
 * candidate needs a neighbour, or ICPP_ROUTE_CONFIRM learn samples and one
 * route, to be precise (docs/resolve.md, "Never precise and wrong").  t
 * must outlive x. */
void icpp_cidx_set_trail(icpp_cidx *x, const icpp_learn_trail *t);

/* With evidence on (icpp_cidx_set_evidence), a one-candidate CID of a novel
 * function (icpp_cidx_set_novel) that fewer
 * than this many of the recording's learn samples confirmed is reported
 * ICPP_RES_UNCERTAIN where icpp_cidx_routes finds more than one route: one
 * learn sample at a CID that deep recursion can reach by other arrangements
 * is not enough (docs/resolve.md, "Never precise and wrong") -- unless a
 * neighbour confirmed it (icpp_cidx_set_trail).  So is a CID of several
 * candidates that more than one route reaches. */
#define ICPP_ROUTE_CONFIRM 2

/* Weigh candidates by this recording's learn samples (docs/resolve.md,
 * "Never precise and wrong"): of several candidates, drop those no learn
 * sample confirmed at the CID whose parent context no learn sample passed
 * through (a region of training this run was never seen in), when others
 * remain; and report a sample UNCERTAIN when none of its candidates was
 * confirmed at the CID and completion (icpp_cidx_set_completer) finds a
 * path the map lacks joining a context learn samples passed through.  Off
 * by default; icpp-resolve turns it on for recordings with learn samples. */
void icpp_cidx_set_evidence(icpp_cidx *x, int on);

/* How one sample resolved. */
typedef enum icpp_res_kind {
    ICPP_RES_PRECISE = 0,   /* one candidate path */
    ICPP_RES_AMBIGUOUS,     /* several: weight shared by training counts */
    ICPP_RES_MISSING,       /* function or CID not in the map */
    ICPP_RES_UNRESOLVED,    /* no CID: see the replay status */
    ICPP_RES_UNCERTAIN,     /* known candidates, none confirmed by this recording's learn samples, for a
                               function this run uses in ways training never saw (icpp_cidx_set_novel) */
    ICPP_RES_INFERRED,      /* the CID is not in the map, but completion (lib/complete.h) found call
                               paths from the static call graph that join the known tree: never trained */
    ICPP_RES_MAX
} icpp_res_kind;

const char *icpp_res_kind_name(int k);

typedef struct icpp_resolution {
    int              kind;
    int              aligned;   /* matched modulo a signal frame's alignment (icpp_cidx_lookup_aligned) */
    int64_t          func;      /* path-map function, -1 if none */
    uint32_t         ncand;
    const icpp_cand *cand;
    uint64_t         cand_total;  /* sum of the candidates' training counts */
    uint64_t         learned_total; /* sum of their learn counts in this recording */
    int              by_learned;  /* learned_total > 0: shares follow this recording's learn counts */
    int              voted;       /* precise because this recording's learn samples at the CID all
                                     took one of several known candidates (icpp_cidx_set_votes) */
    int              bounded;   /* INFERRED: the search hit a bound, so the candidates may not be all */
    uint32_t         pruned;    /* candidates dropped: never seen in this run's region (icpp_cidx_set_evidence) */
    int              alternative; /* UNCERTAIN because completion found an untrained path through an
                                     active context (icpp_cidx_set_evidence) */
} icpp_resolution;

/* Candidate i's share of a sample shared among its candidates.  Where any
 * candidate has learn samples in this recording, those decide (they measure
 * this run's time; training counts measure another run's function entries),
 * with the training shares as a prior worth one learn sample, so a path the
 * learn samples missed keeps a small share instead of none:
 *   (learned_i + count_i / sum count) / (sum learned + 1).
 * Otherwise the training counts alone. */
static inline double icpp_cand_share(const icpp_resolution *r, uint32_t i)
{
    double prior = r->cand_total ? (double)r->cand[i].count / (double)r->cand_total : 1.0 / r->ncand;
    if (!r->by_learned)
        return prior;
    return ((double)r->cand[i].learned + prior) / ((double)r->learned_total + 1.0);
}

/* Complete missing CIDs with c (NULL: off).  c must have been made for
 * this index's map; the index does not own it. */
typedef struct icpp_completer icpp_completer;
void icpp_cidx_set_completer(icpp_cidx *x, icpp_completer *c);

/* Resolve replayed sample s of rp with index x and the policy set on it:
 * fills *out, whose candidates stay valid until the next icpp_resolve_sample
 * on x.  Never
 * fails: out of memory, a sample is resolved less precisely (not pruned,
 * or missing where its PLT stub's contexts could not be searched). */
void icpp_resolve_sample(icpp_cidx *x, const icpp_replay *rp, const icpp_rsample *s, icpp_resolution *out);

#endif
