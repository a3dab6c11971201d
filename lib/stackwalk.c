/* stackwalk.c -- unwinds a sampled user stack copy with the CFA tables of lib/cfi.h: every frame's pc and entry SP. */
#include "stackwalk.h"

#include <string.h>

const char *icpp_sw_status_name(int s)
{
    static const char *n[ICPP_SW_MAX] = {"root", "truncated", "no module", "no CFI", "CFI not followed",
                                         "no progress", "too deep"};
    return s >= 0 && s < ICPP_SW_MAX ? n[s] : "?";
}

/* The 8 bytes at runtime address addr, if the copy holds them. */
static int word(uint64_t sp, const uint8_t *stack, size_t size, uint64_t addr, uint64_t *out)
{
    if (addr < sp || addr - sp > size || size - (addr - sp) < 8)
        return -1;
    memcpy(out, stack + (addr - sp), 8);
    return 0;
}

int icpp_stackwalk(icpp_sw_lookup lookup, void *ctx, uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
                   size_t size, icpp_sw_frame *out, int max, int *n)
{
    uint64_t pc = ip, rsp = sp, rbp = bp;
    int bp_known = 1;
    *n = 0;
    for (;;) {
        if (*n >= max)
            return ICPP_SW_DEPTH;
        uint64_t link;
        /* A return address is the instruction after the call: the call
         * itself, and so the caller's row, is at ra - 1. */
        const icpp_cfi *cfi = lookup(ctx, *n ? pc - 1 : pc, &link);
        if (!cfi)
            return ICPP_SW_NOMODULE;
        icpp_cfa_rule r = icpp_cfi_lookup(cfi, link);
        uint64_t cfa;
        switch (r.kind) {
        case ICPP_CFA_RSP:
            cfa = rsp + (uint64_t)(int64_t)r.off;
            break;
        case ICPP_CFA_RBP:
            if (!bp_known)
                return ICPP_SW_NOTPASSIVE;
            cfa = rbp + (uint64_t)(int64_t)r.off;
            break;
        case ICPP_CFA_NOFDE:
            return ICPP_SW_NOCFI;
        default:
            return ICPP_SW_NOTPASSIVE;
        }
        if (*n && cfa <= rsp)
            return ICPP_SW_LOOP;
        out[(*n)++] = (icpp_sw_frame){pc, cfa - 8};
        if (r.ra == ICPP_RA_UNDEF)
            return ICPP_SW_ROOT;
        if (r.ra != ICPP_RA_CFA8)
            return ICPP_SW_NOTPASSIVE;
        uint64_t ra;
        if (word(sp, stack, size, cfa - 8, &ra) < 0)
            return ICPP_SW_TRUNCATED;
        if (ra == 0)
            return ICPP_SW_ROOT;
        switch (r.rbp) {
        case ICPP_RBP_SAME:
            break;
        case ICPP_RBP_AT:
            if (word(sp, stack, size, cfa + (uint64_t)(int64_t)r.rbp_off, &rbp) < 0)
                return ICPP_SW_TRUNCATED;
            bp_known = 1;
            break;
        default:
            bp_known = 0;
        }
        rsp = cfa;
        pc = ra;
    }
}
