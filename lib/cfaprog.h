/* cfaprog.h -- an FDE's call frame program read for patching: the CFA rule over each code range, and where each CFA offset is encoded. */
#ifndef ICPP_CFAPROG_H
#define ICPP_CFAPROG_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "fde.h"

/* One encoded CFA offset: the operand of a DW_CFA_def_cfa,
 * DW_CFA_def_cfa_offset or their _sf forms, in the CIE's initial
 * instructions or the FDE's own.  It can be rewritten in place, with the
 * same number of bytes (ULEB/SLEB128 may be encoded with redundant
 * continuation bytes), to any value icpp_cfaprog_fits accepts. */
typedef struct icpp_cfa_operand {
    uint32_t at;            /* section offset of its first byte */
    uint8_t  len;           /* its bytes (1..10) */
    uint8_t  sf;            /* 1: SLEB128 factored by the data alignment; 0: ULEB128, unfactored */
    uint8_t  in_cie;        /* 1: in the CIE's initial instructions (shared by every FDE of that CIE) */
    int8_t   data_align;    /* the factor of an sf operand */
    int64_t  value;         /* the CFA offset it encodes, in bytes */
} icpp_cfa_operand;

/* The CFA rule over [lo, hi). */
typedef struct icpp_cfa_span {
    uint64_t lo, hi;
    uint8_t  reg;           /* DWARF register: 7 rsp, 6 rbp */
    uint8_t  expr;          /* 1: a DWARF expression (reg, off and operand mean nothing) */
    int64_t  off;
    int32_t  operand;       /* index of the icpp_cfa_operand that set off; -1 if none did */
} icpp_cfa_span;

typedef struct icpp_cfaprog {
    icpp_cfa_span    *spans;    /* in address order, covering [fde.lo, fde.hi) without gaps */
    size_t            nspans;
    icpp_cfa_operand *ops;
    size_t            nops;
} icpp_cfaprog;

/* Run the CIE's initial instructions and then fde's own (fde from
 * icpp_fde_parse over the same sec[0..size)) and fill *out (malloc'd
 * arrays; free with icpp_cfaprog_free).  Everything is bounds-checked:
 * an unknown or truncated instruction, a DW_CFA_set_loc or a location
 * going backwards, a restore_state without a remember_state or nesting
 * deeper than 64 is ICPP_EFORMAT, never a crash. */
int icpp_cfaprog_read(const uint8_t *sec, size_t size, const icpp_fde *fde, icpp_cfaprog *out, icpp_err *err);
void icpp_cfaprog_free(icpp_cfaprog *p);

/* Can op hold the CFA offset `value` in its bytes? */
int icpp_cfaprog_fits(const icpp_cfa_operand *op, int64_t value);

/* Rewrite op's bytes in sec (the same section) to encode `value`.  The
 * bytes must still encode op->value; -1 (err set) if not, or if value does
 * not fit. */
int icpp_cfaprog_write(uint8_t *sec, size_t size, const icpp_cfa_operand *op, int64_t value, icpp_err *err);

#endif
