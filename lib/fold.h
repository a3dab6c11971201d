/* fold.h -- recursion folding of call paths: a cycle repeated back to back is kept once (docs/resolve.md). */
#ifndef ICPP_FOLD_H
#define ICPP_FOLD_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "pathmap.h"

/* Fold the path p[0..n) (function ids, root first) in place and return its
 * new length.  Folding removes a repeated block: wherever a block of L
 * functions is immediately followed by the same L functions, the second
 * copy goes -- the smallest such L first, at its leftmost position, again
 * until no block repeats back to back.  So direct recursion f;f;f becomes
 * f, and mutual recursion (a;b)*k;a becomes a;b;a.  The result is a
 * subsequence of the path with the same first and last function, and
 * folding it again changes nothing.  O(n^2) per removal. */
size_t icpp_fold_path(int64_t *p, size_t n);

/* Folded paths of a path map's nodes, memoized per node (nodes never change;
 * a map that grows, by learning or completion, is fine). */
typedef struct icpp_folder {
    const icpp_pathmap *pm;
    icpp_hmap  memo;            /* node -> hash of its folded path */
    int64_t   *buf;             /* the last folded path (icpp_folder_path) */
    uint32_t  *tmp;
    size_t     cap;
} icpp_folder;

void icpp_folder_init(icpp_folder *f, const icpp_pathmap *pm);
void icpp_folder_free(icpp_folder *f);
/* Node's folded path (function indices, root first) in *out (valid until
 * the next call); its length, or -1 out of memory. */
int64_t icpp_folder_path(icpp_folder *f, uint32_t node, const int64_t **out);
/* A 64-bit hash of node's folded path: equal paths, equal hashes (0 only
 * when out of memory). */
uint64_t icpp_folder_hash(icpp_folder *f, uint32_t node);
/* The same hash of a path p[0..n) that is already folded. */
uint64_t icpp_fold_hash(const int64_t *p, size_t n);

#endif
