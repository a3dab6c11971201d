/* cidx.h -- the CID index of a path map: (function, height) to candidate nodes, functions and modules by build-id, learn counts, routes. */
#ifndef ICPP_CIDX_H
#define ICPP_CIDX_H

#include <stdint.h>

#include "defs.h"
#include "err.h"
#include "hmap.h"
#include "pathmap.h"

/* The index answers questions about the map and this recording's learn
 * counts in it; what a sample resolves to -- the policy that weighs
 * candidates, votes, prunes and doubts -- is lib/resolve.h, built on this
 * index, on completion (lib/complete.h) and on PLT stubs (lib/plt.h), which
 * use only this index. */
typedef struct icpp_cidx icpp_cidx;

/* One candidate path for a CID, with its training count at that height and
 * the learn samples that saw it there (lib/learn.h). */
typedef struct icpp_cand {
    uint32_t node;
    uint64_t count;
    uint64_t learned;
} icpp_cand;

/* The candidate is known only from learn samples (never trained). */
static inline int icpp_cand_learned_only(const icpp_cand *c)
{
    return c->learned && !c->count;
}

/* Build the index of a path map: (function, height) -> candidate nodes. */
icpp_cidx *icpp_cidx_build(const icpp_pathmap *pm, icpp_err *err);
void       icpp_cidx_free(icpp_cidx *x);

/* The path map x indexes. */
const icpp_pathmap *icpp_cidx_pathmap(const icpp_cidx *x);

/* Candidates for path-map function `func` entered at `height`; returns the
 * count (0 if the CID is not in the map) and points *out at them. */
/*   uint32_t icpp_cidx_lookup(const icpp_cidx *x, uint32_t func, int64_t height, const icpp_cand **out) -- inline, at the end of this header */

/* Contexts under a signal frame.  The kernel puts a signal frame at a
 * 64-byte aligned address below the interrupted SP, while thread bases are
 * only 16-byte aligned (startstack moves with ASLR): a handler's height, and
 * every height above it, differs between runs by one of 0, 16, 32, 48.  So
 * the contexts of func below a handler (a node whose call site is the
 * signal-return trampoline) within 64 bytes per signal frame of `height`,
 * in steps of 16 -- for a CID icpp_cidx_lookup does not have.  Returns
 * their count and points *out at them (valid until the next call). */
uint32_t icpp_cidx_lookup_aligned(icpp_cidx *x, uint32_t func, int64_t height, const icpp_cand **out);

/* Path-map function index of (module build-id, link-time start address), or
 * -1.  Module build-ids are matched once per module and cached by `mkey`
 * (any small integer the caller uses for the module, e.g. the replay's). */
/*   int64_t icpp_cidx_func(icpp_cidx *x, uint32_t mkey, const icpp_build_id *bid, uint64_t addr) -- inline, at the end of this header */

/* Path-map module index of a replay module (matched by build-id), or -1. */
int32_t icpp_cidx_module(icpp_cidx *x, uint32_t mkey, const icpp_build_id *bid);

/* Learn samples of this recording through map node `node`, at any of its
 * heights (0 for nodes added after the index was built, e.g. by completion). */
uint64_t icpp_cidx_node_learned(const icpp_cidx *x, uint32_t node);

/* novel[f] != 0 (f < n, a map function): learning found contexts of f the
 * map did not have (lib/resolve.h says what the policy does with it; so
 * does lib/plt.h).  The array must outlive x. */
void icpp_cidx_set_novel(icpp_cidx *x, const uint8_t *novel, size_t n);
/* Whether map function func is novel (icpp_cidx_set_novel). */
/*   int icpp_cidx_novel(const icpp_cidx *x, uint32_t func) -- inline, at the end of this header */

/* Routes from a root to CID (func, height) through known contexts (trained
 * or learned) that this recording's learn samples passed through, counting
 * a context's routes as the sum of those of the distinct contexts its known
 * paths' parents are at; capped at 2^20.
 * More routes than known paths at the CID: the known paths recombine -- a
 * path the map lacks (part of one known path, the rest of another) reaches
 * the same CID.  Memoized per CID. */
uint64_t icpp_cidx_routes(icpp_cidx *x, uint32_t func, int64_t height);

/* Several known paths share a CID, but the recording's own learn samples
 * at that CID all took one of them, at least `votes` times: the default of
 * icpp_cidx_set_votes (lib/resolve.h; docs/resolve.md says how it was
 * chosen).  0 turns this off. */
#define ICPP_LEARN_VOTES 0

/* The resolution policy's settings and scratch (lib/resolve.c), kept with
 * the index they belong to.  The index never reads them: it holds them
 * because the policy's API takes only the index (icpp_cidx_set_votes, ...,
 * icpp_resolve_sample), and frees `state` with `release` in icpp_cidx_free,
 * so that it needs nothing of the policy's modules (lib/plt.h, lib/complete.h
 * call the index: freeing their objects here would make a cycle).  The
 * settings are plain values and borrowed pointers, so setting them cannot
 * fail; the scratch is made on first use. */
typedef struct icpp_cidx_policy {
    uint32_t                       votes;     /* ICPP_LEARN_VOTES unless set */
    int                            evidence;  /* weigh candidates by this recording's learn samples */
    const struct icpp_learn_trail *trail;     /* the recording's learn samples in time order, or NULL */
    struct icpp_completer         *cpl;       /* completion of missing CIDs, or NULL */
    void                          *state;     /* the policy's scratch, or NULL */
    void                         (*release)(void *state);    /* frees state */
} icpp_cidx_policy;

/* The policy's fields of x (lib/resolve.c only). */
/*   icpp_cidx_policy *icpp_cidx_policy_of(icpp_cidx *x) -- inline, at the end of this header */

/* The fields the resolution policy reads for every sample, first in the
 * index so that the accessors below inline into lib/resolve.c: split from
 * the index, the policy paid a call for each of them, and the CID lookup
 * alone ran 3-10% slower (bench/speedcmp.py).  Written by lib/cidx.c only. */
typedef struct icpp_cidx_hot {
    icpp_hmap        cid;         /* (func, height) -> (offset << 32 | count) into cands */
    icpp_cand       *cands;
    icpp_hmap        funcs;       /* (pm module, addr) -> func */
    int32_t         *modcache;    /* mkey -> pm module (-1 none, -2 not looked up) */
    size_t           nmodcache;
    const uint8_t   *novel;       /* per map function: learning found contexts training lacked */
    size_t           nnovel;
    icpp_cidx_policy policy;      /* the resolution policy's settings and scratch (lib/resolve.c) */
} icpp_cidx_hot;

static inline const icpp_cidx_hot *icpp_cidx_hot_of(const icpp_cidx *x)
{
    return (const icpp_cidx_hot *)(const void *)x;     /* the first member of struct icpp_cidx */
}

/* The candidates of CID (func, height), as said above. */
static inline uint32_t icpp_cidx_lookup(const icpp_cidx *x, uint32_t func, int64_t height, const icpp_cand **out)
{
    const icpp_cidx_hot *h = icpp_cidx_hot_of(x);
    uint64_t *v = icpp_hmap_get(&h->cid, func, (uint64_t)height);
    if (!v) {
        *out = NULL;
        return 0;
    }
    *out = &h->cands[*v >> 32];
    return (uint32_t)*v;
}

/* Path-map function index of (module, link-time start address), or -1, as
 * said above; a module not matched yet goes through icpp_cidx_module. */
static inline int64_t icpp_cidx_func(icpp_cidx *x, uint32_t mkey, const icpp_build_id *bid, uint64_t addr)
{
    const icpp_cidx_hot *h = icpp_cidx_hot_of(x);
    int32_t m = mkey < h->nmodcache && h->modcache[mkey] != -2 ? h->modcache[mkey] : icpp_cidx_module(x, mkey, bid);
    if (m < 0)
        return -1;
    uint64_t *v = icpp_hmap_get(&h->funcs, (uint64_t)m, addr);
    return v ? (int64_t)*v : -1;
}

/* Whether map function func is novel (icpp_cidx_set_novel). */
static inline int icpp_cidx_novel(const icpp_cidx *x, uint32_t func)
{
    const icpp_cidx_hot *h = icpp_cidx_hot_of(x);
    return func < h->nnovel && h->novel[func];
}

/* The policy's fields of x (lib/resolve.c only). */
static inline icpp_cidx_policy *icpp_cidx_policy_of(icpp_cidx *x)
{
    return &((icpp_cidx_hot *)(void *)x)->policy;
}

#endif
