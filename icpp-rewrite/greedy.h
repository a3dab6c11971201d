/* greedy.h -- the greedy choice of call-site classes that wrapping and cloning share: CIDs scored by the contexts a change moves, the nodes a class moves, the training agent's order rule, one round of trials. */
#ifndef RW_GREEDY_H
#define RW_GREEDY_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "pathmap.h"
#include "sites.h"

/* The contexts of each CID under the current choice, for scoring a change
 * by the contexts it moves only: per CID how many contexts and their
 * weight; u and c are the weight and number of contexts alone in theirs. */
typedef struct rw_cidtab {
    icpp_hmap h;            /* (function, height) -> index + 1 */
    uint64_t *cnt, *ws;
    size_t    n, cap;
    uint64_t  u, c;
} rw_cidtab;

/* Move one context of weight w of function f at height h into its CID
 * (dir 1) or out of it (dir -1).  0, or -1 out of memory. */
int rw_cid_move(rw_cidtab *t, uint32_t f, int64_t h, int dir, uint64_t w);

/* The state of a greedy search over the classes of s (rw_wrap_search,
 * rw_clone_search): each round tries every candidate class at each of its
 * paddings and keeps the best.  Arrays are per node unless said. */
typedef struct rw_greedy {
    const icpp_pathmap *pm;
    const uint32_t     *caller;     /* the frame each node was called from (icpp_arr_callers) */
    const rw_sites     *s;
    uint32_t *first, *next;         /* children lists by parent; 0 ends a list */
    uint32_t *cfirst, *cnext;       /* ... by the frame they were called from */
    uint32_t *kfirst, *knext;       /* per class (kfirst) its nodes */
    uint8_t  *rec;                  /* its subtree (itself too) holds a node of its parent's function */
    uint8_t  *amb;                  /* scratch of the searches: in a shared CID, or above one */
    uint8_t  *cand;                 /* per class: a candidate of this round (set by the search) */
    uint8_t  *mark;                 /* in vis */
    uint32_t *vis;                  /* the nodes the class on trial moves: its own first, then those below */
    size_t    nvis, nown;
    int64_t  *base;                 /* each node's shift under the current choice (set by the search) */
    int64_t  *delta;                /* the trial's change of it (set by the trial; 0 between trials) */
    int64_t  *trial;                /* scratch of the order rule */
    rw_cidtab t;                    /* the CIDs at base (rw_greedy_fill) */
} rw_greedy;

/* The lists, and rec, of pm's nodes under caller[] and s's classes.  0, or
 * -1 out of memory (g then holds nothing to free). */
int  rw_greedy_init(rw_greedy *g, const icpp_pathmap *pm, const uint32_t *caller, const rw_sites *s);
void rw_greedy_free(rw_greedy *g);

/* g->t: every context at height + base[node], of function func[node]
 * (func NULL: the node's own); *hmax gets the largest height.  0, or -1. */
int rw_greedy_fill(rw_greedy *g, const uint32_t *func, int64_t *hmax);

/* A trial's score: weight and number of contexts alone in their CID, and
 * the largest height (at least the round's). */
typedef struct rw_trial {
    uint64_t w, c;
    int64_t  hmax;
} rw_trial;

/* Score the trial that moves vis[from..nvis) by delta (contexts of
 * function func[node], NULL: the node's own): moved in g->t, read, moved
 * back.  0, or -1 out of memory. */
int rw_greedy_score(rw_greedy *g, size_t from, const uint32_t *func, rw_trial *tr);

/* What makes one search's round: the paddings a class may take (0, 16,
 * ... up to most(k)), a trial of class k at padding p (sets g->delta over
 * g->vis and scores it: 1, 0 when p is no change, -1 out of memory), and
 * which trials win: above the current choice's weight by min_gain at least,
 * more weight, then more contexts, then (lighter_first) the lighter class
 * (cold sites before hot ones). */
typedef struct rw_greedy_rules {
    int32_t  (*most)(void *ctx, uint32_t k);
    int      (*trial)(void *ctx, uint32_t k, int32_t p, rw_trial *tr);
    uint64_t min_gain;
    int      lighter_first;
    int      sort_own;              /* g->vis sorted whole (the class's own nodes move too), else below its own */
} rw_greedy_rules;

/* One round: each class with g->cand[k], while the CPU seconds since t0
 * stay below time_limit, at each padding, scored against the current
 * choice (g->t; hmax its largest height); a winner must stay within
 * max_height and keep the order rule (the training agent's returned
 * frames, docs/rewrite.md).  *best: the class (-1: none), *bestp its
 * padding.  0, or -1 out of memory. */
int rw_greedy_round(rw_greedy *g, const rw_greedy_rules *r, void *ctx, int64_t hmax, int64_t max_height, double t0,
                    double time_limit, int64_t *best, int32_t *bestp);

#endif
