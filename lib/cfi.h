/* cfi.h -- per-module CFA table: for every PC the CFA rule, built once from .eh_frame/.debug_frame. */
#ifndef ICPP_CFI_H
#define ICPP_CFI_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "fde.h"
#include "module.h"

typedef struct icpp_cfi icpp_cfi;

/* What a sample (pc, sp, bp) can do with the CFA rule at pc. */
typedef enum icpp_cfa_kind {
    ICPP_CFA_NOFDE = 0,     /* no FDE covers pc */
    ICPP_CFA_RSP,           /* CFA = rsp + off */
    ICPP_CFA_RBP,           /* CFA = rbp + off */
    ICPP_CFA_REG,           /* CFA = other register + off: not in a sample */
    ICPP_CFA_EXPR,          /* DWARF expression that needs memory or other registers: not passive
                               (one of rsp and rip alone, binutils' PLT rule, is tabulated as RSP rows) */
    ICPP_CFA_UNDEF,         /* CFA undefined: outermost frame */
} icpp_cfa_kind;

/* Where the caller's %rbp and the return address are, for unwinding a
 * stack copy (lib/stackwalk.h).  A passive sample needs only the CFA. */
typedef enum icpp_rbp_kind {
    ICPP_RBP_SAME = 0,      /* the caller's rbp is this frame's rbp (not saved yet, or never) */
    ICPP_RBP_AT,            /* saved in memory at CFA + rbp_off */
    ICPP_RBP_UNKNOWN,       /* undefined, in another register, or an expression */
} icpp_rbp_kind;

typedef enum icpp_ra_kind {
    ICPP_RA_CFA8 = 0,       /* the return address is at CFA - 8 (every call on x86-64) */
    ICPP_RA_UNDEF,          /* undefined: the outermost frame (_start, a thread's clone) */
    ICPP_RA_OTHER,          /* any other rule: not followed */
    ICPP_RA_SIGFRAME,       /* a signal-return trampoline (its FDE's augmentation 'S', glibc's
                               __restore_rt): the interrupted registers are in the ucontext at rsp */
} icpp_ra_kind;

typedef struct icpp_cfa_rule {
    uint8_t kind;           /* icpp_cfa_kind */
    uint8_t reg;            /* DWARF register number for ICPP_CFA_REG (x86-64: 6 rbp, 7 rsp) */
    int32_t off;            /* offset for RSP/RBP/REG */
    uint8_t rbp;            /* icpp_rbp_kind */
    uint8_t ra;             /* icpp_ra_kind */
    int16_t rbp_off;        /* ICPP_RBP_AT: a multiple of 8, -8 * 62 .. -8 */
} icpp_cfa_rule;

/* Build the table for a module from its .eh_frame, then .debug_frame for
 * code no .eh_frame FDE covers (the same precedence as looking up each in
 * turn with libdw).  Offsets outside +-2^26 are stored as ICPP_CFA_EXPR. */
icpp_cfi *icpp_cfi_build(const icpp_module *m, icpp_err *err);
void      icpp_cfi_free(icpp_cfi *t);

/* The rule at link-time address pc. */
icpp_cfa_rule icpp_cfi_lookup(const icpp_cfi *t, uint64_t pc);

/* entry SP = CFA - 8 for a sample at link-time pc with registers sp, bp.
 * Returns 0 and sets *entry_sp; -1 if no FDE covers pc; otherwise the
 * icpp_cfa_kind (REG, EXPR, UNDEF) that a passive sample cannot evaluate. */
int icpp_cfi_entry_sp(const icpp_cfi *t, uint64_t pc, uint64_t sp, uint64_t bp,
                      uint64_t *entry_sp);

typedef struct icpp_cfi_stats {
    size_t rows;            /* table rows */
    size_t fdes_eh, fdes_debug;
    size_t bytes;           /* memory held by the table */
    size_t by_kind[6];      /* rows of each icpp_cfa_kind */
} icpp_cfi_stats;
void icpp_cfi_get_stats(const icpp_cfi *t, icpp_cfi_stats *s);

/* All FDEs of .eh_frame (which = 0) or .debug_frame (which = 1) of an ELF
 * (decompressed if needed), in file order; *out is malloc'd. */
int icpp_fde_list(Elf *elf, int which, icpp_fde **out, size_t *n, icpp_err *err);

#endif
