/* search.h -- choose frame paddings that make the most (weighted) context ids unique under a stack budget. */
#ifndef RW_SEARCH_H
#define RW_SEARCH_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"
#include "err.h"
#include "pathmap.h"

typedef struct rw_search_opts {
    uint64_t seed;              /* PRNG seed: same seed, same map, same result (unless the time limit cut it) */
    double   time_limit;        /* seconds of CPU time */
    int64_t  max_height;        /* no path's height may exceed this after padding */
    uint64_t max_stale;         /* stop after this many rounds without a new best (0: default 100) */
    icpp_cli_progress *progress; /* a line on a terminal every second (NULL: none) */
} rw_search_opts;

typedef struct rw_search_result {
    uint32_t *pad;              /* per map function index: the chosen padding (bytes) */
    double    seconds;
    uint64_t  iterations;       /* best responses computed (one function each) */
    uint64_t  evaluations;      /* paddings evaluated */
    int       hit_time_limit;
    int64_t   max_height;       /* the largest height after padding */
    size_t    candidates;       /* functions the search may pad (callers on colliding paths) */
    size_t    tracked;          /* contexts whose leaf function has more than one context */
} rw_search_result;

/* Search paddings for pm's main-module functions: maxpad[i] (per map
 * function index) is how much function i may be padded (0: not at all);
 * caller[] is icpp_arr_callers' answer (the frame each node was called from).
 * Objective, in this order: calls on unique contexts (training-count
 * weight), unique contexts, less stack.  Fills *r (free with
 * rw_search_result_free).  Fails only when out of memory. */
int  rw_search_run(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *maxpad, const rw_search_opts *o,
                   rw_search_result *r, icpp_err *err);
void rw_search_result_free(rw_search_result *r);

/* Why the contexts that still share a CID do: every ambiguous context falls
 * into one class. */
typedef enum rw_amb_class {
    RW_AMB_SAME_CALLERS = 0,    /* another path with the same leaf and original height has the same multiset of
                                   (live) callers above the leaf: no padding can ever separate them */
    RW_AMB_UNPATCHABLE,         /* ... has the same multiset of *paddable* callers: only functions that cannot be
                                   patched (refused, other modules) differ */
    RW_AMB_OPEN,                /* separable in principle; the budget, conflicts or time left it */
    RW_AMB_NCLASSES
} rw_amb_class;

typedef struct rw_amb_group {
    uint8_t   cls;              /* rw_amb_class */
    uint32_t  leaf;             /* map function index */
    int64_t   height;           /* height after padding */
    uint64_t  weight;           /* training count of the group's contexts */
    uint32_t *nodes;            /* the paths sharing it */
    uint32_t  nnodes;
} rw_amb_group;

typedef struct rw_amb_report {
    size_t        contexts[RW_AMB_NCLASSES];    /* ambiguous contexts by class */
    uint64_t      weight[RW_AMB_NCLASSES];
    rw_amb_group *groups;       /* CIDs shared by several paths, heaviest first */
    size_t        ngroups;
} rw_amb_report;

/* Classify the ambiguity left in pm under paddings pad[] (per map function)
 * and the wrapped call sites' wrap[] (per node, icpp_arr_node_wraps; NULL:
 * none), where maxpad[] says which functions could be padded at all. */
int  rw_ambiguity(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *pad, const uint32_t *wrap,
                  const uint32_t *maxpad, rw_amb_report *out, icpp_err *err);
void rw_amb_report_free(rw_amb_report *r);

/* Node's path for people: function names root first, ';'-joined, the last
 * 12 only (then "...;" first), into buf. */
void rw_path_name(const icpp_pathmap *pm, uint32_t node, char *buf, size_t sz);

#endif
