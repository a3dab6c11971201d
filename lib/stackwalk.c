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

/* Where the kernel saves the interrupted registers of a signal handler's
 * caller, from the rsp the handler returns with (x86-64 struct ucontext:
 * uc_flags, uc_link, uc_stack take 40 bytes, then uc_mcontext.gregs in
 * REG_R8 .. REG_RIP order -- glibc's __restore_rt CFI reads rsp at 160). */
#define UC_RBP (40 + 8 * 10)
#define UC_RSP (40 + 8 * 15)
#define UC_RIP (40 + 8 * 16)

int icpp_stackwalk(icpp_sw_lookup lookup, void *ctx, uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
                   size_t size, icpp_sw_frame *out, int max, int *n)
{
    uint64_t pc = ip, rsp = sp, rbp = bp;
    int bp_known = 1, exact = 1;        /* exact: pc is where the frame is, not a return address */
    *n = 0;
    for (;;) {
        if (*n >= max)
            return ICPP_SW_DEPTH;
        uint64_t link;
        /* A return address is the instruction after the call: the call
         * itself, and so the caller's row, is at ra - 1. */
        const icpp_cfi *cfi = lookup(ctx, exact ? pc : pc - 1, &link);
        if (!cfi)
            return ICPP_SW_NOMODULE;
        icpp_cfa_rule r = icpp_cfi_lookup(cfi, link);
        if (r.ra == ICPP_RA_SIGFRAME && *n) {
            /* A handler returned into the signal-return trampoline: the
             * frame below is the interrupted one, with its registers in the
             * ucontext at rsp.  The trampoline is no function (training never
             * sees it): no frame of its own. */
            uint64_t nrsp, nrip, nrbp;
            if (word(sp, stack, size, rsp + UC_RSP, &nrsp) < 0 || word(sp, stack, size, rsp + UC_RIP, &nrip) < 0 ||
                word(sp, stack, size, rsp + UC_RBP, &nrbp) < 0)
                return ICPP_SW_TRUNCATED;
            if (nrsp <= rsp)
                return ICPP_SW_LOOP;    /* a handler on a sigaltstack above the interrupted code */
            rsp = nrsp;
            rbp = nrbp;
            bp_known = 1;
            pc = nrip;
            exact = 1;
            continue;
        }
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
        /* every frame but the leaf as a return address: pc - 1 in its function
         * (the frame a signal interrupted: its pc + 1) */
        out[*n] = (icpp_sw_frame){*n && exact ? pc + 1 : pc, cfa - 8};
        (*n)++;
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
        exact = 0;
    }
}
