/* test_hmap.c -- lib/hmap.c against a plain array: puts, overwrites, growth, absent keys. */
#include "hmap.h"

#include "check.h"

#define N 20000

int main(void)
{
    icpp_hmap h;
    icpp_hmap_init(&h);
    CHECK(icpp_hmap_get(&h, 1, 2) == NULL && h.cap == 0, "an empty map holds nothing and no slots");

    /* keys that share k1 or k2, so that a hash of one half alone would collide */
    static uint64_t want[N];
    int failed = 0;
    for (uint64_t i = 0; i < N; i++) {
        want[i] = i * 7 + 1;
        failed += icpp_hmap_put(&h, i % 100, i / 100, want[i]) != 0;
    }
    CHECK(!failed, "%d puts failed", failed);
    CHECK(h.n == N, "%zu entries, want %d", h.n, N);
    CHECK(h.cap && !(h.cap & (h.cap - 1)), "capacity %zu is a power of two", h.cap);
    CHECK(h.n * 4 <= h.cap * 3, "load %zu/%zu at most 3/4", h.n, h.cap);
    int bad = 0;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t *v = icpp_hmap_get(&h, i % 100, i / 100);
        bad += !v || *v != want[i];
    }
    CHECK(!bad, "%d of %d values wrong or missing after growth", bad, N);

    /* overwrite: the count stays */
    for (uint64_t i = 0; i < N; i += 3)
        icpp_hmap_put(&h, i % 100, i / 100, want[i] = ~i);
    bad = 0;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t *v = icpp_hmap_get(&h, i % 100, i / 100);
        bad += !v || *v != want[i];
    }
    CHECK(!bad && h.n == N, "%d wrong after overwriting; %zu entries", bad, h.n);

    /* absent keys, including swapped halves and extreme values */
    int found = 0;
    for (uint64_t i = 0; i < 1000; i++)
        found += icpp_hmap_get(&h, 100 + i, i) != NULL || icpp_hmap_get(&h, i, 1000 + i) != NULL;
    CHECK(!found, "%d absent keys found", found);
    CHECK(icpp_hmap_get(&h, 5, 1) && !icpp_hmap_get(&h, 1, 5 + 1000), "(5,1) present; swapped (1,1005) absent");
    CHECK(icpp_hmap_put(&h, UINT64_MAX, UINT64_MAX, 42) == 0 && *icpp_hmap_get(&h, UINT64_MAX, UINT64_MAX) == 42,
          "all-ones keys");
    CHECK(icpp_hmap_put(&h, 0, 0, 7) == 0 && *icpp_hmap_get(&h, 0, 0) == 7, "all-zero keys (a used slot, not an empty one)");

    icpp_hmap_free(&h);
    CHECK(h.cap == 0 && h.n == 0 && icpp_hmap_get(&h, 0, 0) == NULL, "freed: empty again");
    return check_done("hmap");
}
