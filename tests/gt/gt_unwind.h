/* gt_unwind.h -- DWARF CFI unwinder over a sampled register set and stack copy.
 *
 * A small unwinder on libdw's dwarf_cfi_addrframe / dwarf_frame_cfa /
 * dwarf_frame_register, so that every frame's CFA is explicit and every stop
 * has a stated reason (libdwfl hides the CFA and silently falls back to
 * frame-pointer guessing when CFI is missing). */
#ifndef GT_UNWIND_H
#define GT_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt_module.h"

/* DWARF register numbers on x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15,
 * 16 = return address (rip). */
enum { GT_NREGS = 17, GT_RBP = 6, GT_RSP = 7, GT_RIP = 16 };

typedef struct gt_regs {
    uint64_t r[GT_NREGS];
    uint32_t valid;             /* bit i: r[i] is known */
} gt_regs;

/* A copy of user stack memory [sp, sp + size). */
typedef struct gt_stack {
    uint64_t       sp;
    const uint8_t *data;
    size_t         size;
} gt_stack;

typedef struct gt_frame {
    uint64_t    pc;             /* runtime pc: the sampled ip for frame 0,
                                   else the return address (exact pc after a
                                   signal frame) */
    uint64_t    cfa;            /* 0 = unknown (the frame where unwinding stopped) */
    gt_module  *mod;            /* NULL if pc is in no file/vdso mapping */
    uint64_t    func;           /* link-time start of the function */
    bool        func_known;
    const char *name;           /* NULL if no symbol covers pc */
    const char *cfa_rule;       /* "rsp", "rbp", "r<N>", "expr" or "-" */
} gt_frame;

/* Why unwinding stopped.  GT_ROOT and GT_RA0 mean the outermost frame was
 * reached (return address undefined in CFI, or zero). */
typedef enum gt_status {
    GT_ROOT, GT_RA0, GT_NOREGS, GT_NOMAP, GT_NOMOD, GT_NOCFI, GT_NOCFA,
    GT_EXPR, GT_MEM, GT_UNDEF, GT_LOOP, GT_DEPTH,
} gt_status;

const char *gt_status_name(gt_status s);

/* Find the module mapped at runtime address ADDR in the sampled process and
 * its load bias; NULL if ADDR is in no module. */
typedef gt_module *(*gt_lookup_fn)(void *ctx, uint64_t addr, uint64_t *bias);

/* Unwind from REGS (leaf first).  FRAMES receives up to MAX frames, leaf
 * first; the frame at which an unwind fails is included with cfa == 0 when
 * its pc is known.  Returns the status; *nframes the count filled. */
gt_status gt_unwind(const gt_regs *regs, const gt_stack *stack,
                    gt_lookup_fn lookup, void *ctx,
                    gt_frame *frames, int max, int *nframes);

#endif
