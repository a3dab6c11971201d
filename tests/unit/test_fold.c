/* test_fold.c -- lib/fold.c against a brute-force reference on every path of up to 9 functions over 3
 * names (and random longer ones), the documented examples, and the folded view of a path map. */
#include "check.h"
#include "fold.h"

#include <string.h>

/* Reference: for L = 1, 2, ...: for i = 0, 1, ...: compare the blocks element by element;
 * remove the first found and start again. */
static size_t ref_fold(int64_t *p, size_t n)
{
again:
    for (size_t L = 1; 2 * L <= n; L++)
        for (size_t i = 0; i + 2 * L <= n; i++) {
            size_t k = 0;
            while (k < L && p[i + k] == p[i + L + k])
                k++;
            if (k == L) {
                for (size_t j = i + L; j + L < n; j++)
                    p[j] = p[j + L];
                n -= L;
                goto again;
            }
        }
    return n;
}

static int square_free(const int64_t *p, size_t n)
{
    for (size_t L = 1; 2 * L <= n; L++)
        for (size_t i = 0; i + 2 * L <= n; i++)
            if (!memcmp(p + i, p + i + L, L * sizeof *p))
                return 0;
    return 1;
}

static void one(const int64_t *in, size_t n)
{
    int64_t a[64], b[64];
    memcpy(a, in, n * sizeof *a);
    memcpy(b, in, n * sizeof *b);
    size_t na = icpp_fold_path(a, n), nb = ref_fold(b, n);
    CHECK(na == nb && !memcmp(a, b, na * sizeof *a), "differs from the reference (n %zu)", n);
    CHECK(square_free(a, na), "not square-free");
    CHECK(na == 0 || (a[0] == in[0] && a[na - 1] == in[n - 1]), "first or last function changed");
    size_t j = 0;                      /* a subsequence of the input */
    for (size_t i = 0; i < n && j < na; i++)
        j += in[i] == a[j];
    CHECK(j == na, "not a subsequence");
    CHECK(icpp_fold_path(a, na) == na, "folding again changed it");
}

static void example(const char *what, const int64_t *in, size_t n, const int64_t *want, size_t nw)
{
    int64_t a[64];
    memcpy(a, in, n * sizeof *a);
    size_t na = icpp_fold_path(a, n);
    CHECK(na == nw && !memcmp(a, want, nw * sizeof *a), "%s: folded to %zu functions", what, na);
}

int main(void)
{
    /* Every path of length <= 9 over 3 functions. */
    for (size_t n = 0; n <= 9; n++) {
        size_t total = 1;
        for (size_t i = 0; i < n; i++)
            total *= 3;
        for (size_t c = 0; c < total; c++) {
            int64_t p[9];
            size_t x = c;
            for (size_t i = 0; i < n; i++, x /= 3)
                p[i] = (int64_t)(x % 3);
            one(p, n);
        }
    }
    /* Random longer ones. */
    uint64_t s = 88172645463325252ull;
    for (int t = 0; t < 20000; t++) {
        int64_t p[64];
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        size_t n = 10 + s % 50;
        for (size_t i = 0; i < n; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            p[i] = (int64_t)(s % (2 + t % 4));
        }
        one(p, n);
    }
    /* recurse.c's documented paths (main 0, descend 1, descend_work 2, ping 3, pong 4, pp_leaf 5, fib 6). */
    int64_t d[] = {0, 1, 1, 1, 1, 1, 2}, dw[] = {0, 1, 2};
    example("main;descend*5;descend_work", d, 7, dw, 3);
    int64_t pp[] = {0, 3, 4, 3, 4, 3, 4, 3, 5}, ppw[] = {0, 3, 4, 3, 5};
    example("main;(ping;pong)*3;ping;pp_leaf", pp, 9, ppw, 5);
    int64_t pq[] = {0, 3, 4, 3, 4, 3, 4, 5}, pqw[] = {0, 3, 4, 5};
    example("main;(ping;pong)*3;pp_leaf", pq, 8, pqw, 4);
    int64_t f[] = {0, 6, 6, 6, 6}, fw[] = {0, 6};
    example("main;fib*4", f, 5, fw, 2);

    /* The folded view of a map: memoized hashes equal exactly for equal folded paths. */
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_build_id bid = {.len = 4, .bytes = {1, 2, 3, 4}};
    uint32_t mod, fmain, fd, fw2, nmain, n, leaf[6];
    CHECK(icpp_pathmap_add_module(pm, "/x", &bid, 0, &mod) == 0, "add module");
    CHECK(icpp_pathmap_add_func(pm, mod, 0x10, "main", &fmain) == 0 &&
          icpp_pathmap_add_func(pm, mod, 0x20, "descend", &fd) == 0 &&
          icpp_pathmap_add_func(pm, mod, 0x30, "work", &fw2) == 0, "add functions");
    CHECK(icpp_pathmap_child(pm, 0, fmain, &nmain) == 0, "child");
    n = nmain;
    for (int k = 0; k < 6; k++) {
        CHECK(icpp_pathmap_child(pm, n, fd, &n) == 0 && icpp_pathmap_child(pm, n, fw2, &leaf[k]) == 0, "child");
    }
    icpp_folder fo;
    icpp_folder_init(&fo, pm);
    for (int k = 1; k < 6; k++)
        CHECK(icpp_folder_hash(&fo, leaf[k]) == icpp_folder_hash(&fo, leaf[0]), "depth %d folds elsewhere", k);
    CHECK(icpp_folder_hash(&fo, leaf[0]) != icpp_folder_hash(&fo, nmain), "different paths, same hash");
    const int64_t *g;
    CHECK(icpp_folder_path(&fo, leaf[5], &g) == 3 && g[0] == (int64_t)fmain && g[1] == (int64_t)fd &&
          g[2] == (int64_t)fw2, "folded path");
    icpp_folder_free(&fo);
    icpp_pathmap_free(pm);
    return check_done("fold");
}
