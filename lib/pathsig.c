/* pathsig.c -- order-free signatures of call paths: can any padding tell two paths with one context id apart (docs/resolve.md). */
#include "pathsig.h"

#include "hmap.h"

/* One element's contribution to a multiset hash: summed, so the order of
 * the elements does not matter (the elements are mixed first, so sums of
 * different multisets do not cancel the way sums of raw ids would). */
static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t x = icpp_hash2(a ^ 0x243f6a8885a308d3ull, b);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

icpp_pathsig icpp_pathsig_of(const int64_t *p, size_t n)
{
    icpp_pathsig s = {0, 0};
    int64_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        s.funcs += mix(0, (uint64_t)p[i]);
        s.edges += mix((uint64_t)prev + 1, (uint64_t)p[i]);
        prev = p[i];
    }
    return s;
}

uint64_t icpp_pathsig_funcs_below(const int64_t *p, size_t n, const uint8_t *mask, size_t nmask, uint8_t beyond,
                                  uint8_t limit)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++)
        if ((p[i] >= 0 && (uint64_t)p[i] < nmask ? mask[p[i]] : beyond) < limit)
            h += mix(0, (uint64_t)p[i]);
    return h;
}

icpp_sep icpp_pathsig_sep(const icpp_pathsig *a, const icpp_pathsig *b)
{
    if (a->edges == b->edges)
        return ICPP_SEP_SAME_EDGES;
    if (a->funcs == b->funcs)
        return ICPP_SEP_SAME_FUNCS;
    return ICPP_SEP_OPEN;
}
