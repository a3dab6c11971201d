/* test_cfi.c -- the CFI table must agree with libdw at every PC of real binaries. */
#include "cfi.h"
#include "check.h"

#include <stdbool.h>
#include "module.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

/* libdw's rule for register reg, read independently of lib/cfi.c:
 * 0 same value, 1 saved at CFA + *off, 2 undefined, 3 other. */
static int ref_reg(Dwarf_Frame *fr, int reg, int64_t *off)
{
    Dwarf_Op mem[3], *ops = NULL;
    size_t n = 0;
    int r = dwarf_frame_register(fr, reg, mem, &ops, &n);
    if (r < 0)
        return 3;
    if (n == 0)
        return ops == mem ? 2 : 0;
    if (r != 0 || ops[0].atom != DW_OP_call_frame_cfa)
        return 3;
    int64_t o = 0;
    for (size_t i = 1; i < n; i++) {
        if (ops[i].atom == DW_OP_plus_uconst)
            o += (int64_t)ops[i].number;
        else if ((ops[i].atom == DW_OP_consts || ops[i].atom == DW_OP_constu) && i + 1 < n &&
                 ops[i + 1].atom == DW_OP_plus)
            o += (int64_t)ops[i++].number;
        else
            return 3;
    }
    *off = o;
    return 1;
}

/* The reference: ask libdw directly, .eh_frame first, then .debug_frame,
 * and classify the CFA expression independently of lib/cfi.c. */
static icpp_cfa_rule reference(Dwarf_CFI *eh, Dwarf_CFI *dbg, uint64_t pc)
{
    Dwarf_Frame *fr = NULL;
    icpp_cfa_rule r = {.kind = ICPP_CFA_NOFDE};
    if ((!eh || dwarf_cfi_addrframe(eh, pc, &fr) != 0) &&
        (!dbg || dwarf_cfi_addrframe(dbg, pc, &fr) != 0))
        return r;
    Dwarf_Op *ops;
    size_t nops;
    if (dwarf_frame_cfa(fr, &ops, &nops) != 0) {
        r.kind = ICPP_CFA_EXPR;
    } else if (nops == 0) {
        r.kind = ICPP_CFA_UNDEF;
    } else if (nops == 1 && ops[0].atom == DW_OP_bregx) {
        int64_t off = (int64_t)ops[0].number2;
        r.reg = (uint8_t)ops[0].number;
        r.off = (int32_t)off;
        r.kind = ops[0].number == 7 ? ICPP_CFA_RSP : ops[0].number == 6 ? ICPP_CFA_RBP : ICPP_CFA_REG;
        if (off > (1 << 23) - 1 || off < -((1 << 23) - 1) || ops[0].number > 31)
            r = (icpp_cfa_rule){.kind = ICPP_CFA_EXPR};
    } else if (nops == 9 && ops[0].atom == DW_OP_breg7 && ops[1].atom == DW_OP_breg16 && ops[1].number == 0 &&
               ops[2].atom == DW_OP_lit15 && ops[3].atom == DW_OP_and && ops[4].atom >= DW_OP_lit0 &&
               ops[4].atom <= DW_OP_lit15 && ops[5].atom == DW_OP_ge && ops[6].atom == DW_OP_lit3 &&
               ops[7].atom == DW_OP_shl && ops[8].atom == DW_OP_plus) {
        /* binutils' PLT rule: rsp + K + 8 once the stub's push ran (pc & 15 >= L) */
        r.kind = ICPP_CFA_RSP;
        r.reg = 7;
        r.off = (int32_t)ops[0].number + ((pc & 15) >= (uint64_t)(ops[4].atom - DW_OP_lit0) ? 8 : 0);
    } else {
        r.kind = ICPP_CFA_EXPR;
    }
    int64_t off = 0;
    switch (ref_reg(fr, 6, &off)) {
    case 0:
        r.rbp = ICPP_RBP_SAME;
        break;
    case 1:
        if (off < 0 && off >= -8 * 62 && off % 8 == 0) {
            r.rbp = ICPP_RBP_AT;
            r.rbp_off = (int16_t)off;
            break;
        }
        /* fall through */
    default:
        r.rbp = ICPP_RBP_UNKNOWN;
    }
    int ra = ref_reg(fr, 16, &off);
    r.ra = ra == 2 ? ICPP_RA_UNDEF : ra == 1 && off == -8 ? ICPP_RA_CFA8 : ICPP_RA_OTHER;
    bool signal = false;
    if (dwarf_frame_info(fr, NULL, NULL, &signal) >= 0 && signal)
        r.ra = ICPP_RA_SIGFRAME;    /* a signal frame's registers come from its ucontext */
    free(fr);
    return r;
}

static int same(icpp_cfa_rule a, icpp_cfa_rule b)
{
    if (a.kind != b.kind)
        return 0;
    if (a.kind != ICPP_CFA_NOFDE && (a.rbp != b.rbp || a.rbp_off != b.rbp_off || a.ra != b.ra))
        return 0;
    if (a.kind == ICPP_CFA_RSP || a.kind == ICPP_CFA_RBP || a.kind == ICPP_CFA_REG)
        return a.off == b.off && a.reg == b.reg;
    return 1;
}

static void check_binary(const char *path)
{
    icpp_err err = {0};
    icpp_module *m = icpp_module_open(path, &err);
    CHECK(m != NULL, "open %s: %s", path, err.msg);
    if (!m)
        return;
    icpp_cfi *t = icpp_cfi_build(m, &err);
    CHECK(t != NULL, "cfi %s: %s", path, err.msg);
    if (!t) {
        icpp_module_close(m);
        return;
    }
    Elf *elf = icpp_module_elf(m);
    Dwarf_CFI *eh = dwarf_getcfi_elf(elf);
    Dwarf *dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
    Dwarf_CFI *dbg = dw ? dwarf_getcfi(dw) : NULL;

    uint64_t lo, hi, pcs = 0, bad = 0, with_fde = 0;
    icpp_module_text_range(m, &lo, &hi);
    /* Every PC of every executable segment, plus a margin on both sides. */
    lo = lo > 64 ? lo - 64 : 0;
    hi += 64;
    for (uint64_t pc = lo; pc < hi; pc++) {
        icpp_cfa_rule want = reference(eh, dbg, pc), got = icpp_cfi_lookup(t, pc);
        pcs++;
        with_fde += want.kind != ICPP_CFA_NOFDE;
        if (!same(want, got)) {
            if (bad < 10)
                fprintf(stderr, "%s: pc 0x%" PRIx64 ": libdw kind %d reg %d off %d rbp %d/%d ra %d, "
                        "table kind %d reg %d off %d rbp %d/%d ra %d\n", path, pc, want.kind, want.reg, want.off,
                        want.rbp, want.rbp_off, want.ra, got.kind, got.reg, got.off, got.rbp, got.rbp_off, got.ra);
            bad++;
        }
        /* entry_sp must be CFA - 8 with the right register. */
        if (want.kind == ICPP_CFA_RSP || want.kind == ICPP_CFA_RBP) {
            uint64_t sp = 0x7ffe00001000, bp = 0x7ffe00002000, esp = 0;
            int r = icpp_cfi_entry_sp(t, pc, sp, bp, &esp);
            uint64_t want_esp = (want.kind == ICPP_CFA_RSP ? sp : bp) + (uint64_t)(int64_t)want.off - 8;
            if (r != 0 || esp != want_esp) {
                if (bad < 10)
                    fprintf(stderr, "%s: pc 0x%" PRIx64 ": entry_sp %d 0x%" PRIx64 " want 0x%" PRIx64 "\n",
                            path, pc, r, esp, want_esp);
                bad++;
            }
        }
    }
    icpp_cfi_stats st;
    icpp_cfi_get_stats(t, &st);
    printf("%s: %" PRIu64 " pcs (%" PRIu64 " with an FDE), %zu rows (rsp %zu, rbp %zu, reg %zu, expr %zu, undef %zu), "
           "%zu eh + %zu debug FDEs, %zu KiB; mismatches %" PRIu64 "\n",
           path, pcs, with_fde, st.rows, st.by_kind[ICPP_CFA_RSP], st.by_kind[ICPP_CFA_RBP],
           st.by_kind[ICPP_CFA_REG], st.by_kind[ICPP_CFA_EXPR], st.by_kind[ICPP_CFA_UNDEF],
           st.fdes_eh, st.fdes_debug, st.bytes / 1024, bad);
    CHECK(bad == 0, "%s: %" PRIu64 " PCs disagree with libdw", path, bad);
    CHECK(with_fde > pcs / 2, "%s: only %" PRIu64 " of %" PRIu64 " PCs have an FDE: wrong section?", path,
          with_fde, pcs);
    if (eh)
        dwarf_cfi_end(eh);
    if (dw)
        dwarf_end(dw);
    icpp_cfi_free(t);
    icpp_module_close(m);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_cfi BINARY...\n");
        return 2;
    }
    for (int i = 1; i < argc; i++)
        check_binary(argv[i]);
    return check_done("test_cfi");
}
