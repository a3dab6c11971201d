/* ehwrite.h -- writing .eh_frame and .eh_frame_hdr: a relocated copy of a section with new FDEs appended, and its search table. */
#ifndef ICPP_EHWRITE_H
#define ICPP_EHWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* A rewriter that adds code to a binary (icpp-rewrite's call-site stubs)
 * must give that code FDEs, and libgcc's unwinder, gdb and perf find FDEs
 * through one .eh_frame section and its .eh_frame_hdr table.  So the whole
 * .eh_frame moves to the new code's segment: every pc-relative pointer in it
 * (an FDE's initial location and LSDA pointer, a CIE's personality pointer)
 * is re-encoded for its new address, the CIE pointers (section offsets)
 * stay, and the new records go after the old ones.  Everything else is kept
 * byte for byte, so CFA offsets patched in place before (lib/cfaprog.h)
 * stay patched.  The section layout is the one docs/rewrite.md describes
 * ("The new segment").  Records are read as untrusted input: bounds-checked,
 * and anything this module does not understand (64-bit lengths, absolute
 * or aligned pointer encodings, augmentations other than z, R, P, L, S) is
 * refused with a message, never copied unchanged. */

/* A growing .eh_frame being built at link-time address `addr`. */
typedef struct icpp_ehw {
    uint8_t *buf;
    size_t   len, cap;
    uint64_t addr;          /* where the section will be loaded */
} icpp_ehw;

/* Start *w with a copy of the .eh_frame old[0..n) that was at link-time
 * old_addr, moved to new_addr (its trailing zero terminator, if any, is
 * dropped; icpp_ehw_finish adds one).  On failure *w holds nothing. */
int icpp_ehw_relocate(icpp_ehw *w, const uint8_t *old, size_t n, uint64_t old_addr, uint64_t new_addr,
                      icpp_err *err);

/* Append a CIE (version 1, augmentation "zR", FDE pointers pc-relative
 * sdata4, code alignment 1, data alignment -8, return address column 16)
 * whose initial instructions are ins[0..nins).  *cie_off is its section
 * offset, for icpp_ehw_add_fde. */
int icpp_ehw_add_cie(icpp_ehw *w, const uint8_t *ins, size_t nins, size_t *cie_off, icpp_err *err);

/* Append an FDE of the CIE at cie_off for code [lo, lo + len) with
 * instructions ins[0..nins). */
int icpp_ehw_add_fde(icpp_ehw *w, size_t cie_off, uint64_t lo, uint64_t len, const uint8_t *ins, size_t nins,
                     icpp_err *err);

/* The same for a CIE whose augmentation is "zR" or "zPLR" with pointer
 * encodings pc-relative sdata4 (gcc's): with_lsda 0, no augmentation data;
 * 1, four bytes of it, the LSDA pointer (lsda, 0 for none).  cie_off may be
 * a CIE of the relocated copy (its offset in the old section). */
int icpp_ehw_add_fde_lsda(icpp_ehw *w, size_t cie_off, uint64_t lo, uint64_t len, int with_lsda, uint64_t lsda,
                          const uint8_t *ins, size_t nins, icpp_err *err);
/* Append the zero terminator.  w->buf[0..w->len) is then the section. */
int icpp_ehw_finish(icpp_ehw *w, icpp_err *err);
void icpp_ehw_free(icpp_ehw *w);

/* The .eh_frame_hdr for the .eh_frame eh[0..n) at link-time eh_addr, to be
 * loaded at hdr_addr: version 1, eh_frame_ptr pc-relative sdata4, the FDE
 * count udata4, and the binary search table (datarel sdata4) sorted by
 * initial location.  *out is malloc'd (*outn bytes). */
int icpp_ehw_hdr(const uint8_t *eh, size_t n, uint64_t eh_addr, uint64_t hdr_addr, uint8_t **out, size_t *outn,
                 icpp_err *err);

/* The FDEs of the .eh_frame eh[0..n) at link-time eh_addr, sorted by lo:
 * code [lo, hi), whether it has an LSDA (an exception table: landing pads,
 * or calls that must terminate) and its section offset.  *out is malloc'd. */
typedef struct icpp_ehw_fde {
    uint64_t lo, hi;
    uint64_t lsda;          /* the LSDA's address, 0 if none */
    size_t   off;
} icpp_ehw_fde;
int icpp_ehw_list(const uint8_t *eh, size_t n, uint64_t eh_addr, icpp_ehw_fde **out, size_t *nout, icpp_err *err);

/* DWARF call frame instructions, appended to a byte buffer b[0..*len) of
 * capacity cap (0 on success, -1 if it does not fit). */
int icpp_ehw_cfa_def(uint8_t *b, size_t *len, size_t cap, unsigned reg, uint64_t off);    /* DW_CFA_def_cfa */
int icpp_ehw_cfa_offset(uint8_t *b, size_t *len, size_t cap, uint64_t off);               /* DW_CFA_def_cfa_offset */
int icpp_ehw_cfa_saved(uint8_t *b, size_t *len, size_t cap, unsigned reg, int64_t cfa_off); /* reg at CFA + cfa_off */
int icpp_ehw_cfa_advance(uint8_t *b, size_t *len, size_t cap, uint32_t delta);            /* DW_CFA_advance_loc* */

#endif
