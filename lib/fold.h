/* fold.h -- recursion folding of call paths: a cycle repeated back to back is kept once (docs/resolve.md). */
#ifndef ICPP_FOLD_H
#define ICPP_FOLD_H

#include <stddef.h>
#include <stdint.h>

/* Fold the path p[0..n) (function ids, root first) in place and return its
 * new length.  Folding removes a repeated block: wherever a block of L
 * functions is immediately followed by the same L functions, the second
 * copy goes; the smallest L first, at the leftmost position, until no
 * block repeats back to back.  So direct recursion f;f;f becomes f, and
 * mutual recursion (a;b)*k;a becomes a;b;a.  The result is a subsequence
 * of the path with the same first and last function, and folding it again
 * changes nothing.  O(n^2) per pass. */
size_t icpp_fold_path(int64_t *p, size_t n);

#endif
