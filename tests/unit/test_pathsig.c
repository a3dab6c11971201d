/* test_pathsig.c -- lib/pathsig.c against exact multiset comparison (sorted copies) on every pair of paths
 * of up to 5 functions over 3 names, on random permutations of long paths, and on the documented cases. */
#include "check.h"
#include "pathsig.h"

#include <stdlib.h>
#include <string.h>

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Reference: sorted functions and sorted (caller, callee) pairs, encoded as caller * 1000 + callee
 * (ids < 999), the root's entry with caller -1. */
static int same_funcs(const int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    int64_t x[64], y[64];
    if (na != nb)
        return 0;
    memcpy(x, a, na * sizeof *x);
    memcpy(y, b, nb * sizeof *y);
    qsort(x, na, sizeof *x, cmp64);
    qsort(y, nb, sizeof *y, cmp64);
    return !memcmp(x, y, na * sizeof *x);
}

static int same_edges(const int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    int64_t x[64], y[64];
    if (na != nb)
        return 0;
    for (size_t i = 0; i < na; i++) {
        x[i] = (i ? a[i - 1] : -1) * 1000 + a[i];
        y[i] = (i ? b[i - 1] : -1) * 1000 + b[i];
    }
    return same_funcs(x, na, y, nb);
}

static icpp_sep ref_sep(const int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    return same_edges(a, na, b, nb) ? ICPP_SEP_SAME_EDGES : same_funcs(a, na, b, nb) ? ICPP_SEP_SAME_FUNCS
                                                                                       : ICPP_SEP_OPEN;
}

static icpp_sep sep(const int64_t *a, size_t na, const int64_t *b, size_t nb)
{
    icpp_pathsig x = icpp_pathsig_of(a, na), y = icpp_pathsig_of(b, nb);
    return icpp_pathsig_sep(&x, &y);
}

static void unpack(size_t c, size_t n, int64_t *p)
{
    for (size_t i = 0; i < n; i++, c /= 3)
        p[i] = (int64_t)(c % 3);
}

int main(void)
{
    /* Every pair of paths of length 1..5 over 3 functions. */
    size_t pairs = 0, by[ICPP_SEP_MAX] = {0};
    for (size_t n = 1; n <= 5; n++) {
        size_t total = 1;
        for (size_t i = 0; i < n; i++)
            total *= 3;
        for (size_t m = 1; m <= 5; m++) {
            size_t total2 = 1;
            for (size_t i = 0; i < m; i++)
                total2 *= 3;
            for (size_t c = 0; c < total; c++)
                for (size_t d = 0; d < total2; d++) {
                    int64_t a[5], b[5];
                    unpack(c, n, a);
                    unpack(d, m, b);
                    icpp_sep want = ref_sep(a, n, b, m), got = sep(a, n, b, m);
                    CHECK(got == want, "n %zu m %zu c %zu d %zu: %d, want %d", n, m, c, d, got, want);
                    by[want]++;
                    pairs++;
                }
        }
    }
    CHECK(by[ICPP_SEP_SAME_EDGES] > 0 && by[ICPP_SEP_SAME_FUNCS] > 0 && by[ICPP_SEP_OPEN] > 0,
          "the exhaustive pairs lack a class: %zu %zu %zu", by[0], by[1], by[2]);

    /* Long paths against a random permutation of themselves (same functions; same edges only by
     * chance, which the reference decides) and against a copy with one function changed. */
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < 20000; t++) {
        int64_t a[64], b[64];
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t n = 2 + s % 60;
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            a[i] = (int64_t)(s % (2 + t % 6));
        }
        memcpy(b, a, n * sizeof *b);
        for (size_t i = n - 1; i > 0; i--) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            size_t j = s % (i + 1);
            int64_t x = b[i];
            b[i] = b[j];
            b[j] = x;
        }
        CHECK(sep(a, n, b, n) == ref_sep(a, n, b, n), "permutation %d", t);
        CHECK(sep(a, n, b, n) != ICPP_SEP_OPEN, "permutation %d: functions differ", t);
        b[s % n] += 100;
        CHECK(sep(a, n, b, n) == ICPP_SEP_OPEN, "changed function %d", t);
    }

    /* The documented cases (docs/resolve.md): orders.c's main;a;b;d vs main;b;a;d have the same functions
     * but other call edges; a;b;a;a;d vs a;a;b;a;d the same call edges; main;b;a;d vs main;b;e;d differ. */
    enum { MAIN, A, B, D, E };
    int64_t abd[] = {MAIN, A, B, D}, bad[] = {MAIN, B, A, D}, bed[] = {MAIN, B, E, D};
    CHECK(sep(abd, 4, bad, 4) == ICPP_SEP_SAME_FUNCS, "main;a;b;d vs main;b;a;d");
    CHECK(sep(bad, 4, bed, 4) == ICPP_SEP_OPEN, "main;b;a;d vs main;b;e;d");
    int64_t e1[] = {MAIN, A, B, A, A, D}, e2[] = {MAIN, A, A, B, A, D};
    CHECK(sep(e1, 6, e2, 6) == ICPP_SEP_SAME_EDGES, "a;b;a;a;d vs a;a;b;a;d");
    /* tcc's expression recursion: unary;expr_eq;expr_cond (X) and the same with expr_infix (Y), X;Y vs Y;X
     * entered from block, leaf next: same functions, other edges (which cycle called next) */
    enum { BLOCK = 10, UNARY, EQ, COND, INFIX, NEXT };
    int64_t xy[] = {BLOCK, UNARY, EQ, COND, UNARY, EQ, COND, INFIX, NEXT},
            yx[] = {BLOCK, UNARY, EQ, COND, INFIX, UNARY, EQ, COND, NEXT};
    CHECK(sep(xy, 9, yx, 9) == ICPP_SEP_SAME_FUNCS, "X;Y vs Y;X");
    /* icpp_pathsig_funcs_below: only the functions with mask < limit count */
    {
        static const uint8_t mask[6] = {0, 0, 1, 1, 2, 2};     /* 2, 3 refused; 4, 5 another module's */
        int64_t a[] = {0, 2, 1}, b[] = {0, 3, 1}, c[] = {0, 4, 1}, d[] = {0, 5, 1}, e[] = {1, 0, 1}, g[] = {0, 9, 1};
        CHECK(icpp_pathsig_funcs_below(a, 3, mask, 6, 0, 1) == icpp_pathsig_funcs_below(b, 3, mask, 6, 0, 1),
              "refused functions differ: equal below 1");
        CHECK(icpp_pathsig_funcs_below(a, 3, mask, 6, 0, 2) != icpp_pathsig_funcs_below(b, 3, mask, 6, 0, 2),
              "... not below 2 (they are the program's)");
        CHECK(icpp_pathsig_funcs_below(c, 3, mask, 6, 0, 2) == icpp_pathsig_funcs_below(d, 3, mask, 6, 0, 2),
              "library functions differ: equal below 2");
        CHECK(icpp_pathsig_funcs_below(a, 3, mask, 6, 0, 1) != icpp_pathsig_funcs_below(e, 3, mask, 6, 0, 1),
              "other paddable functions: different");
        CHECK(icpp_pathsig_funcs_below(g, 3, mask, 6, 2, 2) == icpp_pathsig_funcs_below(c, 3, mask, 6, 0, 2) &&
                  icpp_pathsig_funcs_below(g, 3, mask, 6, 0, 2) != icpp_pathsig_funcs_below(c, 3, mask, 6, 0, 2),
              "a function past the mask counts as `beyond`");
    }
    return check_done("pathsig");
}
