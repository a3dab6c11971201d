/* fuzz_fde.c -- libFuzzer harness for icpp_fde_parse (lib/fde.c) and icpp_cfaprog_read (lib/cfaprog.c), on .eh_frame and .debug_frame bytes.
 *
 * Input: 1 byte of flags (bit 0: .eh_frame, else .debug_frame), 8 bytes of
 * the section's link-time address (little-endian), then the section bytes.
 * The seeds are real sections (tests/fuzz/mkseeds.c).  Every FDE returned
 * must be a range lo < hi (an FDE of length 0 is skipped by the parser),
 * and there can be no more FDEs than 8-byte units in the section.  Every
 * FDE's call frame program, where it can be read, gives contiguous spans
 * covering exactly the FDE, and operands inside the section. */
#include "cfaprog.h"
#include "fde.h"
#include "fuzz.h"

#define HDR 9

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HDR)
        return 0;
    int eh = data[0] & 1;
    uint64_t sh_addr = 0;
    for (int i = 0; i < 8; i++)
        sh_addr |= (uint64_t)data[1 + i] << (8 * i);
    /* A copy of exactly the section, so ASan flags any read past its end. */
    size_t n = size - HDR;
    uint8_t *sec = fuzz_dup(data + HDR, n);
    icpp_fde *f = NULL;
    size_t nf = 0;
    icpp_err err = {0};
    int rc = icpp_fde_parse(sec, n, sh_addr, eh, &f, &nf, &err);
    if (rc < 0) {
        FUZZ_CHECK(f == NULL && nf == 0 && err.code && err.msg[0], "failure must return nothing, with a message");
    } else {
        FUZZ_CHECK(rc == 0, "rc %d", rc);
        FUZZ_CHECK(nf <= n / 8, "%zu FDEs in %zu bytes", nf, n);
        for (size_t i = 0; i < nf; i++)
            FUZZ_CHECK(f[i].lo < f[i].hi && f[i].entry <= ICPP_FDE_ENTRY_FRAME,
                       "FDE %zu: [%#llx, %#llx) is empty or wraps, or entry %u", i, (unsigned long long)f[i].lo,
                       (unsigned long long)f[i].hi, f[i].entry);
        for (size_t i = 0; i < nf && i < 64; i++) {
            icpp_cfaprog p;
            if (icpp_cfaprog_read(sec, n, &f[i], &p, &err) < 0) {
                FUZZ_CHECK(p.nspans == 0 && p.spans == NULL && p.ops == NULL, "failure must return nothing");
                continue;
            }
            FUZZ_CHECK(p.nspans > 0 && p.spans[0].lo == f[i].lo && p.spans[p.nspans - 1].hi == f[i].hi,
                       "FDE %zu: spans do not cover it", i);
            for (size_t s = 0; s < p.nspans; s++) {
                FUZZ_CHECK(p.spans[s].lo < p.spans[s].hi && (s == 0 || p.spans[s].lo == p.spans[s - 1].hi),
                           "FDE %zu: span %zu is empty or not contiguous", i, s);
                FUZZ_CHECK(p.spans[s].operand < (int32_t)p.nops, "FDE %zu: operand out of range", i);
            }
            for (size_t o = 0; o < p.nops; o++) {
                FUZZ_CHECK(p.ops[o].len >= 1 && p.ops[o].len <= 10 && p.ops[o].at + p.ops[o].len <= n,
                           "FDE %zu: operand %zu outside the section", i, o);
                /* Rewriting an operand in place to its own value must succeed and change nothing. */
                uint8_t keep[10];
                memcpy(keep, sec + p.ops[o].at, p.ops[o].len);
                if (icpp_cfaprog_fits(&p.ops[o], p.ops[o].value)) {
                    FUZZ_CHECK(icpp_cfaprog_write(sec, n, &p.ops[o], p.ops[o].value, &err) == 0,
                               "FDE %zu: rewriting operand %zu to its value failed: %s", i, o, err.msg);
                    memcpy(sec + p.ops[o].at, keep, p.ops[o].len);
                }
            }
            icpp_cfaprog_free(&p);
        }
    }
    free(f);
    free(sec);
    return 0;
}
