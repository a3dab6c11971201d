/* stackwalk.h -- unwinds a sampled user stack copy with the CFA tables of lib/cfi.h: every frame's pc and entry SP. */
#ifndef ICPP_STACKWALK_H
#define ICPP_STACKWALK_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"

/* The learning path (docs/resolve.md, "Learned contexts"): `icpp-sample --learn` unwinds a few
 * samples' stack copies as they arrive, with the same per-module tables
 * that give a passive sample its entry SP, and keeps only the frames.  It
 * is deliberately not lib/unwind.c (libdw's full rules), which stays the
 * independent truth that `icpp-resolve --check` measures against.
 *
 * Every frame's entry SP is CFA - 8 of that frame (docs/definitions.md), so
 * heights computed from these frames are the ones training records. */

typedef enum icpp_sw_status {
    ICPP_SW_ROOT = 0,       /* reached the outermost frame (return address undefined or 0) */
    ICPP_SW_TRUNCATED,      /* needed a word beyond the stack copy */
    ICPP_SW_NOMODULE,       /* a pc in no known module (JIT, vdso, unmapped) */
    ICPP_SW_NOCFI,          /* a pc no FDE covers */
    ICPP_SW_NOTPASSIVE,     /* a CFA or register rule these tables do not follow (a PLT stub's, ...) */
    ICPP_SW_LOOP,           /* the CFA did not move up the stack */
    ICPP_SW_DEPTH,          /* more frames than the caller's array */
    ICPP_SW_MAX
} icpp_sw_status;

const char *icpp_sw_status_name(int s);

typedef struct icpp_sw_frame {
    uint64_t pc;            /* runtime: the sample's IP (frame 0) or a return address -- for a frame a
                               signal interrupted, its pc + 1: pc - 1 is in the frame's function either way */
    uint64_t entry_sp;      /* CFA - 8 */
} icpp_sw_frame;

/* The CFA table and link-time address for runtime address `addr` (already
 * `return address - 1` for caller frames), or NULL if no module holds it. */
typedef const icpp_cfi *(*icpp_sw_lookup)(void *ctx, uint64_t addr, uint64_t *link_addr);

/* Unwind from registers (ip, sp, bp) over `stack`, the `size` bytes that
 * were at [sp, sp + size) when the sample was taken.  Frames go leaf first
 * into out[0..max-1]; *n is how many.  Returns the icpp_sw_status that
 * ended the walk; only ICPP_SW_ROOT means the chain reaches the root. */
int icpp_stackwalk(icpp_sw_lookup lookup, void *ctx, uint64_t ip, uint64_t sp, uint64_t bp, const uint8_t *stack,
                   size_t size, icpp_sw_frame *out, int max, int *n);

#endif
