/* unwind.h -- a sample's true call stack from its registers and user stack copy (libdw CFI), for accuracy checks. */
#ifndef ICPP_UNWIND_H
#define ICPP_UNWIND_H

#include <stdint.h>

#include "err.h"
#include "module.h"
#include "replay.h"

/* Independent of the CFA table (lib/cfi.c) on purpose: this is the truth
 * ICPP's inference is checked against.  It asks libdw for every frame's
 * full row (CFA and register rules) and evaluates them on the sample's
 * registers and the stack copy that `icpp-sample --validate` recorded. */

typedef enum icpp_uw_status {
    ICPP_UW_ROOT = 0,       /* reached the outermost frame (return address undefined or 0) */
    ICPP_UW_TRUNCATED,      /* needed memory beyond the stack copy */
    ICPP_UW_NOMODULE,       /* a pc in no known module (JIT, vdso) */
    ICPP_UW_NOCFI,          /* a pc without CFI */
    ICPP_UW_BADCFI,         /* a CFI expression we cannot evaluate */
    ICPP_UW_LOOP,           /* the stack did not grow upwards */
    ICPP_UW_DEPTH,          /* more frames than the caller's array */
    ICPP_UW_NOREGS,         /* the sample has no register set (not --validate) */
    ICPP_UW_MAX
} icpp_uw_status;

const char *icpp_uw_status_name(int s);

/* The DWARF register number of perf_event register bit `bit` (PERF_REG_X86_*),
 * -1 for flags and segment registers. */
int icpp_uw_dwarf_reg(int bit);

typedef struct icpp_uframe {
    int32_t          module;    /* replay module index */
    uint64_t         pc;        /* runtime: the sample IP (leaf) or a return address */
    uint64_t         addr;      /* link-time address looked up (pc, or pc - 1 for callers) */
    uint64_t         entry_sp;  /* CFA - 8 */
    const icpp_func *func;      /* function holding addr, NULL if none */
    uint8_t          sigframe;  /* a signal-return trampoline's frame (the kernel's, not a call) */
} icpp_uframe;

typedef struct icpp_unwinder icpp_unwinder;

icpp_unwinder *icpp_unwinder_new(const icpp_replay *rp);
void           icpp_unwinder_free(icpp_unwinder *u);

/* Unwind sample s (leaf first into out[0..]); returns the status and sets
 * *n to the frames found (at least the leaf when the module is known). */
int icpp_unwind(icpp_unwinder *u, const icpp_rsample *s, icpp_uframe *out, int max, int *n);

#endif
