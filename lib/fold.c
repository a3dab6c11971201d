/* fold.c -- recursion folding of call paths: a cycle repeated back to back is kept once (docs/resolve.md). */
#include "fold.h"

#include <string.h>

/* Remove the leftmost back-to-back repeat of a block of length L, if any:
 * a run of L consecutive positions j with p[j] == p[j + L] starting at i
 * means p[i..i+L) == p[i+L..i+2L).  Returns the new length. */
static size_t fold_len(int64_t *p, size_t n, size_t L, int *changed)
{
    size_t run = 0;
    for (size_t j = 0; j + L < n; j++) {
        if (p[j] != p[j + L]) {
            run = 0;
            continue;
        }
        if (++run < L)
            continue;
        size_t i = j + 1 - L;           /* p[i..i+L) == p[i+L..i+2L): drop the second copy */
        memmove(p + i + L, p + i + 2 * L, (n - (i + 2 * L)) * sizeof *p);
        *changed = 1;
        return n - L;
    }
    return n;
}

size_t icpp_fold_path(int64_t *p, size_t n)
{
    int changed = 1;
    while (changed) {
        changed = 0;
        for (size_t L = 1; 2 * L <= n && !changed; L++)
            n = fold_len(p, n, L, &changed);
    }
    return n;
}
