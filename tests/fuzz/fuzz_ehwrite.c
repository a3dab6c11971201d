/* fuzz_ehwrite.c -- libFuzzer harness for lib/ehwrite.c: relocating an .eh_frame, its FDE list and search table.
 *
 * Input: fuzz_fde's (1 byte of flags, 8 bytes of the section's link-time
 * address, the section bytes; the seeds are fuzz_fde's).  The section is
 * moved by an amount taken from the flags byte.  Relocating either fails
 * with a message and nothing kept, or gives a section that lib/fde.c reads
 * with exactly the FDEs of the original, over the same code, in the same
 * order; icpp_ehw_list agrees on their count, and the search table built
 * over the moved section has one entry per FDE, sorted. */
#include "ehwrite.h"
#include "fde.h"
#include "fuzz.h"

#define HDR 9

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HDR)
        return 0;
    uint64_t sh_addr = 0;
    for (int i = 0; i < 8; i++)
        sh_addr |= (uint64_t)data[1 + i] << (8 * i);
    int64_t delta = ((int64_t)(data[0] >> 1) - 64) * 0x1000;
    size_t n = size - HDR;
    uint8_t *sec = fuzz_dup(data + HDR, n);
    icpp_err err = {0};
    icpp_ehw w;
    if (icpp_ehw_relocate(&w, sec, n, sh_addr, sh_addr + (uint64_t)delta, &err) < 0) {
        FUZZ_CHECK(err.code && err.msg[0], "failure must say why");
        free(sec);
        return 0;
    }
    FUZZ_CHECK(w.len <= n, "the copy grew: %zu of %zu", w.len, n);
    if (icpp_ehw_finish(&w, &err) == 0) {
        icpp_fde *f0 = NULL, *f1 = NULL;
        size_t n0 = 0, n1 = 0, nl = 0;
        icpp_ehw_fde *l = NULL;
        /* The original up to the same end (the copy stops at a terminator). */
        int r0 = icpp_fde_parse(sec, w.len - 4, sh_addr, 1, &f0, &n0, &err);
        int r1 = icpp_fde_parse(w.buf, w.len, w.addr, 1, &f1, &n1, &err);
        FUZZ_CHECK(r0 == r1, "original %d, moved %d", r0, r1);
        if (r0 == 0 && r1 == 0) {
            FUZZ_CHECK(n0 == n1, "%zu FDEs became %zu", n0, n1);
            for (size_t i = 0; i < n0 && i < n1; i++)
                FUZZ_CHECK(f0[i].lo == f1[i].lo && f0[i].hi == f1[i].hi, "FDE %zu moved its code", i);
        }
        if (icpp_ehw_list(w.buf, w.len, w.addr, &l, &nl, &err) == 0) {
            uint8_t *hdr = NULL;
            size_t hl = 0;
            if (icpp_ehw_hdr(w.buf, w.len, w.addr, w.addr + w.len, &hdr, &hl, &err) == 0) {
                FUZZ_CHECK(hl == 12 + 8 * nl, "table of %zu bytes for %zu FDEs", hl, nl);
                for (size_t i = 1; i < nl; i++)
                    FUZZ_CHECK(l[i - 1].lo <= l[i].lo, "list not sorted at %zu", i);
                free(hdr);
            }
            free(l);
        }
        free(f0);
        free(f1);
    }
    icpp_ehw_free(&w);
    free(sec);
    return 0;
}
