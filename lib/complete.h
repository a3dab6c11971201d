/* complete.h -- completion: call paths for a (function, height) the path map lacks, searched backward over the static call graph to the known tree. */
#ifndef ICPP_COMPLETE_H
#define ICPP_COMPLETE_H

#include <stdint.h>

#include "err.h"
#include "pathmap.h"
#include "cidx.h"

/* A sample whose CID (function, height) is not in the path map may still
 * have a call path the map can explain: walking backward from the leaf over
 * the callers the binary allows (lib/callgraph.h: direct calls, tail calls,
 * calls through the PLT, indirect calls seen in training, and an indirect
 * call from a known context to any address-taken function), each caller
 * entered `delta` bytes lower,
 * until a (function, height) the map knows -- an *anchor*.  A completion is
 * the anchor's path plus the new frames.  Several completions: the sample is
 * inferred-ambiguous; one: inferred-unique.  Completions are never trained
 * paths: they are reported as *inferred*.
 *
 * The search is bounded: at most `max_frames` new frames, `max_work` units
 * of work (callers looked at, frames expanded) and `max_results` completions
 * per query; it deepens iteratively (1, 2, ... max_frames new frames), so
 * the shortest completions come first.  A search that hits
 * a bound -- including a branch cut at `max_frames` before it joined the
 * tree, which a longer path might have -- says so (`truncated`), and its
 * completions are never unique.  Neither are those of a search whose
 * completions have an address-taken function among their new frames (with
 * any_indirect): an indirect call from a function the map does not know
 * may have entered it, and that branch is not searched.  (Known limit: the
 * same holds for an address-taken function on a branch that found nothing;
 * it is not counted -- tests/unit/test_complete.c and the e2e test measure
 * how often a unique completion is wrong: never so far.)  Results
 * are cached per (module, function, height).
 *
 * Lifetimes: the completer adds the functions and nodes of completions to
 * `pm` (so that outputs show them as nodes: icpp_pathmap_add_func,
 * icpp_pathmap_child); `pm` and the index `x` (built before, so the new
 * nodes are never candidates of a CID lookup) must outlive it.  Modules are
 * opened by the map's paths and used only if their build-id matches. */

typedef struct icpp_completer icpp_completer;

typedef struct icpp_cpl_opts {
    uint32_t max_frames;    /* new frames per completion (default 8) */
    uint32_t max_work;      /* callers looked at plus expansions per query (default 30000) */
    uint32_t max_results;   /* completions per query (default 32) */
    int      any_indirect;  /* 1 (default): an indirect call made from a known context may call any
                               address-taken function; 0: only the indirect edges training saw */
} icpp_cpl_opts;

void icpp_cpl_opts_default(icpp_cpl_opts *o);

/* NULL only when out of memory. */
icpp_completer *icpp_completer_new(icpp_pathmap *pm, const icpp_cidx *x, const icpp_cpl_opts *o, icpp_err *err);
void            icpp_completer_free(icpp_completer *c);

/* Completions of function `addr` (link-time start; need not be in the map)
 * of path-map module `module` entered at `height`: fills *out with ncand
 * leaf nodes (count 1 each, added to the map as needed), valid until the
 * next call.  Returns ncand (0: none within the bounds), or -ENOMEM.
 * *truncated: the search hit a bound. */
int icpp_complete(icpp_completer *c, uint32_t module, uint64_t addr, int64_t height, const icpp_cand **out,
                  int *truncated);

/* For part 3's uncertainty: how many call paths NOT in the map explain the
 * known CID (module, addr, height) too -- an anchor at a lower height plus
 * >= 1 new frames, within the same bounds (not added to the map).  active:
 * count only those whose anchor this recording's learn samples passed
 * through at the height it was reached (the run was seen in that context).
 * Returns the count (capped at max_results), or -ENOMEM. */
int icpp_complete_alternatives(icpp_completer *c, uint32_t module, uint64_t addr, int64_t height, int active,
                               int *truncated);

/* The path-map function of (module, addr), those completion added
 * included, or -1. */
int64_t icpp_complete_func(const icpp_completer *c, uint32_t module, uint64_t addr);

typedef struct icpp_cpl_stats {
    uint64_t queries;       /* searches run (cache misses) */
    uint64_t found, unique;
    uint64_t truncated;     /* searches that hit the work or result bound */
    uint64_t cut;           /* searches (not truncated) where the frame bound cut a branch */
    uint64_t open;          /* searches (neither) with an address-taken function among the new frames:
                               untrained indirect callers are possible, so not unique */
    uint64_t expansions;
    double   total_us, max_us;   /* search time over queries, and the worst one */
    double   graph_ms;      /* time spent building call graphs */
    uint32_t graphs;
} icpp_cpl_stats;
void icpp_completer_get_stats(const icpp_completer *c, icpp_cpl_stats *s);

#endif
