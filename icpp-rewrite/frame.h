/* frame.h -- which functions' frames can be enlarged safely, and the bytes that do it (whole-body Zydis analysis, CFI checked). */
#ifndef RW_FRAME_H
#define RW_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "err.h"
#include "image.h"
#include "module.h"

/* How a frame grows. */
typedef enum rw_mode {
    RW_MODE_NONE = 0,
    RW_MODE_SUB,            /* the prologue's `sub $imm,%rsp` and every epilogue that undoes it get +P */
    RW_MODE_ENTER,          /* no sub: `push %rbp; mov %rsp,%rbp` (4 bytes) becomes `enter $P,$0` (4 bytes),
                               and every `pop %rbp` that ends the frame becomes `leave` (1 byte each) */
} rw_mode;

/* One change in the code. */
typedef enum rw_pkind {
    RW_P_IMM8 = 1,          /* a sign-extended 8-bit immediate gets sign*P */
    RW_P_IMM32,             /* a sign-extended 32-bit immediate gets sign*P */
    RW_P_ENTER,             /* 55 48 89 e5 -> c8 Plo Phi 00 */
    RW_P_LEAVE,             /* 5d -> c9 */
    RW_P_DISP8,             /* an rsp-relative reference above the frame: its 8-bit displacement gets +P */
    RW_P_DISP32,            /* ... its 32-bit displacement gets +P */
    RW_P_CFA,               /* a CFA offset in .eh_frame/.debug_frame gets +P (same bytes, lib/cfaprog.h) */
} rw_pkind;

typedef struct rw_patch {
    uint64_t addr;          /* link-time address of the instruction; RW_P_CFA: file offset of the operand */
    uint8_t  kind;          /* rw_pkind */
    int8_t   sign;          /* immediates: +1 the value grows by P, -1 it shrinks by P */
    uint8_t  len, sf;       /* RW_P_CFA: the operand's bytes, 1 if SLEB128 factored by data_align */
    int8_t   data_align;    /* RW_P_CFA */
    int32_t  orig;          /* original immediate, displacement or CFA offset */
} rw_patch;

/* Options of the analysis. */
typedef struct rw_frame_opts {
    int      enter;         /* allow RW_MODE_ENTER for frame-pointer functions without a sub */
    uint32_t cap;           /* never offer more padding than this (bytes) */
} rw_frame_opts;

/* Direct tail calls remembered per function (more: it may read arguments). */
#define RW_MAX_TAILS 8

/* Whether a function reads stack-passed arguments (call-site wrapping
 * moves them: icpp-rewrite/wrap.h). */
typedef enum rw_args {
    RW_ARGS_UNKNOWN = 0,    /* the analysis did not see every instruction */
    RW_ARGS_NONE,           /* no rsp- or frame-pointer-relative reference reaches above its return address,
                               and it jumps out of its code only by direct tail calls at its entry stack
                               pointer to functions of which the same holds (a tail call passes them on) */
    RW_ARGS_READ,           /* it may */
} rw_args;

/* The verdict on one function. */
typedef struct rw_frame {
    uint64_t    addr;       /* link-time start */
    const char *name;
    const char *why;        /* NULL: can be padded; else why not (static text) */
    uint64_t    where;      /* address the refusal is about (0: the function as a whole) */
    uint8_t     mode;       /* rw_mode */
    uint8_t     args;       /* rw_args, whatever the verdict */
    uint32_t    frame;      /* bytes the prologue allocates today (0 for ENTER) */
    uint32_t    maxpad;     /* largest padding the encodings allow, a multiple of 16 (0 if refused) */
    uint32_t    ncfa;       /* of the patches, CFA offsets in the CFI (a frame without frame pointer) */
    uint64_t   *tails;      /* with args RW_ARGS_NONE: the functions it tail-calls (direct jumps out at its
                               entry stack pointer), ntails of them */
    uint32_t    ntails;
    rw_patch   *patches;
    uint32_t    npatches;
} rw_frame;

typedef struct rw_frames rw_frames;

/* Analyse every function of module m (its bytes in img, its CFA table cfi;
 * img's .eh_frame and .debug_frame for the CFA offsets of frames without a
 * frame pointer).
 * Never fails for a function: a function that cannot be proven safe gets a
 * reason instead.  NULL only when out of memory or the CFI cannot be read. */
rw_frames *rw_frames_analyze(const icpp_module *m, const rw_image *img, const icpp_cfi *cfi,
                             const rw_frame_opts *opts, icpp_err *err);
void rw_frames_free(rw_frames *fs);
size_t          rw_frames_count(const rw_frames *fs);
const rw_frame *rw_frames_get(const rw_frames *fs, size_t i);
/* The verdict for the function starting at addr, or NULL if it has none
 * (not a function start, or a split-off .cold part). */
const rw_frame *rw_frames_find(const rw_frames *fs, uint64_t addr);
/* Does the function at `from` reach the one at `to` by tail calls alone
 * (rw_frame.tails, transitively)?  Then `to` runs in `from`'s frame, at its
 * entry stack pointer: a path through a call of `from` may end in `to`. */
int rw_frames_tail_reaches(const rw_frames *fs, uint64_t from, uint64_t to);

/* The x86-64 decoder every icpp-rewrite module uses: lib/x86stack.h's icpp_x86_decoder(). */
struct ZydisDecoder_;
const struct ZydisDecoder_ *rw_decoder(void);
/* Enlarge f's frame by pad bytes (0 < pad <= f->maxpad, multiple of 16) in img. */
int rw_frame_patch(const rw_frame *f, uint32_t pad, rw_image *img, icpp_err *err);
/* The same on a copy of f (function cloning, icpp-rewrite/clone.h): its
 * code in windows code[0..ncode) (lo: the link-time address a buffer was
 * copied from), its FDEs' instructions in windows cfa[0..ncfa) (lo: the
 * file offset in img's .eh_frame); CFA offsets in img's .debug_frame are
 * left alone, any other place is an error. */
typedef struct rw_copy_win {
    uint64_t lo, len;
    uint8_t *buf;
} rw_copy_win;
int rw_frame_patch_copy(const rw_frame *f, uint32_t pad, const rw_copy_win *code, size_t ncode,
                        const rw_copy_win *cfa, size_t ncfa, const rw_image *img, icpp_err *err);

#endif
