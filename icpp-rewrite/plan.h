/* plan.h -- icpp-rewrite's plan: which of the map's functions may be enlarged, by how much, and why not. */
#ifndef RW_PLAN_H
#define RW_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "arr.h"
#include "err.h"
#include "frame.h"
#include "module.h"
#include "pathmap.h"

/* The verdict on the function of the program starting at addr (rw_frames_find
 * in the tool; a table in the unit test), or NULL if it has none. */
typedef const rw_frame *(*rw_verdict_fn)(const void *ctx, uint64_t addr);

#define RW_PLAN_MAX_REASONS 64

/* A reason callers were refused, with a few of them for the report. */
typedef struct rw_reason {
    const char *why;                /* static text (rw_frame.why, or the plan's own) */
    size_t      n;                  /* callers refused for it */
    const char *eg[3];              /* the first three of them (the map's names) */
} rw_reason;

/* What rw_plan_build finds; arrays indexed by the map's nodes or functions. */
typedef struct rw_plan {
    icpp_arr_range *ranges;         /* the program's code: one per function with a size, cold parts with their owner */
    size_t          nranges;
    uint32_t       *caller;         /* per node: the node whose frame it was called from (icpp_arr_callers) */
    uint32_t       *far;            /* per node: the farthest such, where its call sites disagree, else 0 */
    long            moved;          /* nodes whose caller is not their parent */
    uint32_t       *maxpad;         /* per function: largest padding it may get (0: refused, or not the program's) */
    uint8_t        *conflict;       /* per function: live on some entries below a path and returned on others */
    uint8_t        *is_caller;      /* per function: calls others on the map's paths */
    uint8_t        *bywrap;         /* per function: enlarged by wrapping its calls (rw_plan_wrap_frames), or NULL */
    size_t          ncallers;       /* the program's functions that call others on the map's paths */
    size_t          ncallers_ok;    /* of them, the ones that can be enlarged */
    rw_reason       reasons[RW_PLAN_MAX_REASONS];  /* why the others were refused, most callers first */
    size_t          nreasons;
} rw_plan;

/* Plan the rewrite of the program whose functions are funcs[0..nfuncs)
 * (icpp_module_funcs) with its training pm: the frame each path was called
 * from, the functions that must keep their frames, and each function's
 * largest padding (its verdict's maxpad, unless refused).  On failure
 * (-ENOMEM) p holds nothing to free; on success free it with rw_plan_free. */
int  rw_plan_build(rw_plan *p, const icpp_pathmap *pm, const icpp_func *funcs, size_t nfuncs, rw_verdict_fn verdict,
                   const void *ctx, icpp_err *err);
void rw_plan_free(rw_plan *p);

/* Functions whose frame cannot be enlarged (no sub to grow, no room in
 * its encodings, ...) but all of whose calls on the map's paths can be
 * wrapped (docs/rewrite.md, "Resizing by wrapping"): every path called from
 * f's frame goes through wrappable call sites whose classes hold sites of
 * f alone, and f's frame is not in conflict.  Padding f by P then equals
 * wrapping each of those sites by P.  Marks them in p->bywrap, gives them
 * maxpad RW_PLAN_WRAP_MAXPAD and re-counts the reasons; returns how many,
 * or -ENOMEM.  s: rw_sites_find over the same map and p->ranges. */
#define RW_PLAN_WRAP_MAXPAD 256
struct rw_sites;
long rw_plan_wrap_frames(rw_plan *p, const icpp_pathmap *pm, const struct rw_sites *s, rw_verdict_fn verdict,
                         const void *ctx, icpp_err *err);

/* After the searches: each function enlarged by wrapping (p->bywrap and
 * pad[f] > 0) has its padding moved out of pad[] into the class paddings
 * cpad[] of its call sites in s (added to what the wrap search chose for
 * them).  *out (malloc'd, *n entries, sorted by address) lists those
 * functions with their paddings.  0, or -ENOMEM. */
int rw_plan_wrap_pads(const rw_plan *p, const icpp_pathmap *pm, const struct rw_sites *s, uint32_t *pad,
                      uint32_t *cpad, icpp_arr_pad **out, size_t *n, icpp_err *err);

/* The paddings a search chose (pad[f] per map function, 0: none) as a list
 * in function order; *nsub and *nenter count the functions enlarged by each
 * mode.  Returns 0 with *pads malloc'd (free it), -ENOMEM, or -EINVAL for a
 * padding of a function without a verdict (the search's bug). */
int rw_plan_pads(const icpp_pathmap *pm, const uint32_t *pad, rw_verdict_fn verdict, const void *ctx,
                 icpp_arr_pad **pads, size_t *npads, size_t *nsub, size_t *nenter, icpp_err *err);

#endif
