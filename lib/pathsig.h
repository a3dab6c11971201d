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
