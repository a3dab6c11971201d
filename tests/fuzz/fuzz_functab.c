/* fuzz_functab.c -- libFuzzer harness for icpp_functab_build and icpp_functab_build_id (lib/functab.c) on ELF images.
 *
 * The input is a whole ELF file (seeds: real executables, and small ones
 * cut down to the sections the table reads; tests/fuzz/mkseeds.c).  The
 * table must be sorted by address, one entry per address, names inside the
 * image and NUL-terminated there, owners among the entries, FDE-only
 * entries not wrapping around. */
#include "functab.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* libFuzzer's buffer is a fresh allocation of exactly `size` bytes,
     * aligned as malloc aligns: the same as a mapped file. */
    icpp_ftab_entry *v = NULL;
    size_t n = 0;
    icpp_err err = {0};
    if (icpp_functab_build(data, size, &v, &n, &err) == 0) {
        for (size_t i = 0; i < n; i++) {
            const icpp_ftab_entry *e = &v[i];
            FUZZ_CHECK(i == 0 || v[i - 1].addr < e->addr, "entry %zu not after entry %zu", i, i - 1);
            FUZZ_CHECK(e->source >= ICPP_FSRC_SYMTAB && e->source <= ICPP_FSRC_FDE, "entry %zu: source", i);
            FUZZ_CHECK((e->sym == NULL) == (e->source == ICPP_FSRC_FDE), "entry %zu: name vs source", i);
            if (e->sym) {
                const uint8_t *s = (const uint8_t *)e->sym;
                FUZZ_CHECK(s >= data && s < data + size, "entry %zu: name outside the image", i);
                FUZZ_CHECK(memchr(s, 0, (size_t)(data + size - s)) != NULL, "entry %zu: name not terminated", i);
            } else {
                FUZZ_CHECK(e->size && e->addr + e->size > e->addr, "entry %zu: FDE range wraps or is empty", i);
            }
            if (e->owner != e->addr) {
                size_t lo = 0, hi = n;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (v[mid].addr < e->owner)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                FUZZ_CHECK(lo < n && v[lo].addr == e->owner, "entry %zu: owner is no entry", i);
            }
        }
    } else {
        FUZZ_CHECK(v == NULL && n == 0 && err.msg[0], "failure must return nothing, with a message");
    }
    free(v);

    icpp_build_id bid;
    int rc = icpp_functab_build_id(data, size, &bid);
    FUZZ_CHECK(rc == 0 || rc == -1, "build_id rc %d", rc);
    FUZZ_CHECK(bid.len <= ICPP_BUILD_ID_MAX, "build-id length %u", bid.len);
    return 0;
}
