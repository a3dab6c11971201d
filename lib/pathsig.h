/* pathsig.h -- order-free signatures of call paths: can any padding tell two paths with one context id apart (docs/resolve.md). */
#ifndef ICPP_PATHSIG_H
#define ICPP_PATHSIG_H

#include <stddef.h>
#include <stdint.h>

/* A path's height is the sum of its frames: a padding per function (ARR,
 * docs/rewrite.md) adds the same to two paths with the same multiset of
 * functions, and a padding per call edge (a wrapped call site) the same to
 * two paths with the same multiset of call edges, whatever their order.
 * The signature holds hashes of both multisets (sums of 64-bit mixes: equal
 * multisets, equal hashes; different ones collide with probability about
 * 2^-64). */
typedef struct icpp_pathsig {
    uint64_t funcs;             /* multiset of the path's functions */
    uint64_t edges;             /* multiset of its (caller, callee) pairs, the root's entry as (-1, root) */
} icpp_pathsig;

/* Signature of the path p[0..n) (function ids, root first). */
icpp_pathsig icpp_pathsig_of(const int64_t *p, size_t n);

/* The multiset hash of the functions of p[0..n) with mask[f] < limit (f <
 * nmask; a function at or beyond nmask counts as mask[f] = beyond): the
 * signature's `funcs` over only the functions that some padding can move
 * (icpp_arr_unpaddable's mask: limit 1 keeps the paddable ones, limit 2
 * the main module's). */
uint64_t icpp_pathsig_funcs_below(const int64_t *p, size_t n, const uint8_t *mask, size_t nmask, uint8_t beyond,
                                  uint8_t limit);

/* Why two different paths that share a context id stay together, as far as
 * padding goes, the most binding reason first. */
typedef enum icpp_sep {
    ICPP_SEP_OPEN = 0,          /* their functions differ: some function padding separates them */
    ICPP_SEP_SAME_FUNCS,        /* same functions, other call edges: no function padding does; padding a call edge can */
    ICPP_SEP_SAME_EDGES,        /* same call edges in another order: neither does */
    ICPP_SEP_MAX
} icpp_sep;

/* The reason for two paths given by their signatures. */
icpp_sep icpp_pathsig_sep(const icpp_pathsig *a, const icpp_pathsig *b);

#endif
