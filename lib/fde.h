/* fde.h -- FDE enumeration from raw .eh_frame/.debug_frame bytes: untrusted input, no library needed. */
#ifndef ICPP_FDE_H
#define ICPP_FDE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* What the CFA rule at an FDE's first address says about that address. */
typedef enum icpp_fde_entry {
    ICPP_FDE_ENTRY_UNKNOWN = 0, /* an expression, or instructions not read */
    ICPP_FDE_ENTRY_CALL,        /* CFA = rsp + 8: the shape of a function entered by a call */
    ICPP_FDE_ENTRY_FRAME,       /* any other register rule: code inside a frame (a cold part) */
} icpp_fde_entry;

/* The code range of one FDE. */
typedef struct icpp_fde {
    uint64_t lo, hi;        /* [lo, hi) link-time addresses */
    uint8_t  signal;        /* its CIE says 'S': signal-return trampoline code */
    uint8_t  entry;         /* icpp_fde_entry: the CFA rule at lo */
    uint8_t  fde_enc;       /* DW_EH_PE encoding of its addresses (DW_CFA_set_loc) */
    int8_t   data_align;    /* its CIE's data alignment factor (both 0 if outside -128..127 / 1..255) */
    uint8_t  code_align;    /* its CIE's code alignment factor */
    uint32_t cie_ins, cie_end;  /* section offsets of its CIE's initial instructions [cie_ins, cie_end) */
    uint32_t ins, end;      /* section offsets of its own instructions [ins, end) (lib/cfaprog.h) */
} icpp_fde;

/* All FDEs of a .eh_frame (eh = 1) or .debug_frame (eh = 0) section whose
 * bytes are data[0..size) and whose link-time address is sh_addr, in file
 * order; *out is malloc'd.  Everything is bounds-checked: a corrupt section
 * is an error, never a crash.  Used by the CFI table, the function table
 * and the training agent (which links no ELF library).  A section of 4 GiB
 * or more is refused (the instruction offsets are 32-bit). */
int icpp_fde_parse(const void *data, size_t size, uint64_t sh_addr, int eh, icpp_fde **out, size_t *n,
                   icpp_err *err);

#endif
