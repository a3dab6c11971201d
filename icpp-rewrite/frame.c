/* frame.c -- which functions' frames can be enlarged safely, and the bytes that do it (whole-body Zydis analysis, CFI checked). */
#include "frame.h"

#include "cfaprog.h"
#include "vec.h"
#include "x86stack.h"

#include <assert.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The analysis decodes every byte of a function (and of its split-off .cold
 * parts) with Zydis and runs a data-flow pass over the instructions that
 * tracks, before each instruction:
 *   depth   entry SP - rsp (bytes below the entry SP; 0 at entry),
 *   rbp     whether rbp holds the caller's value, a frame pointer (and then
 *           entry SP - rbp), or something else,
 *   inside  whether the frame allocation (the prologue's `sub $imm,%rsp`, or
 *           for RW_MODE_ENTER the `mov %rsp,%rbp`) is in effect.
 * Padding by P moves rsp down by P at every "inside" instruction and nowhere
 * else.  The function is accepted only if that provably changes nothing but
 * the entry SP of its callees:
 *   - every transition inside -> outside is an `add` back to exactly the depth
 *     before the allocation (patched by the same P), or restores rsp from rbp
 *     (leave, mov %rbp,%rsp, lea -k(%rbp),%rsp: need nothing), or (ENTER) is
 *     the `pop %rbp` at rsp == rbp (becomes `leave`);
 *   - every call happens inside; no ret or jump out of the function inside;
 *     paths that join agree on the state; no other write to rsp (alloca,
 *     realignment) is reached;
 *   - an rsp-relative reference inside to the caller's side of the frame
 *     (saved registers, incoming stack arguments, their addresses) gets +P
 *     in its displacement; one that straddles the boundary, or an address
 *     taken of a saved register or the return address, is refused; no byte
 *     of the allocated area is reached both from rsp (moves with P) and from
 *     rbp (does not);
 *   - the CFA rule (lib/cfi.h) agrees with the decoded rbp or depth at every
 *     instruction.  Where it is rsp-based inside the frame (no frame
 *     pointer), every CFA offset of .eh_frame/.debug_frame that governs an
 *     inside instruction gets +P in place (lib/cfaprog.h); one that also
 *     governs an outside instruction, lives in the CIE or has no room left
 *     is refused;
 *   - no callee-saved register is saved (per CFI) inside the allocated area;
 *   - no branch from another function lands inside it.
 * Anything else is refused with the first reason found. */

enum { RBP_CALLER, RBP_FRAME, RBP_OTHER };

/* The state before an instruction (fn.pre[i] for fn.v[i]). */
typedef struct pre {
    uint8_t  reached, inside, rbpk;
    int32_t  depth, rbp;
    uint64_t weak_from;     /* reached only by falling through a call (at this address) and padding */
} pre;

typedef struct st {
    int32_t depth, rbp;
    uint8_t inside, rbpk;
} st;

typedef struct range {
    uint64_t lo, hi;
} range;

#define MAX_PARTS 16

/* One analysis of one function. */
typedef struct fn {
    icpp_x86_insn *v;           /* its instructions (lib/x86stack.h), sorted by address */
    icpp_x86_detail *d;         /* their frame references and immediates (d[i] for v[i]) */
    pre      *pre;              /* the state before each */
    size_t    n, cap, cappre;
    range     parts[MAX_PARTS]; /* [0] the function, then its .cold parts */
    size_t    nparts;
    size_t   *work;
    size_t    nwork;
    const icpp_cfi *cfi;
    int       mode;             /* RW_MODE_SUB: allocation found on the way; ENTER: at enter_ix */
    size_t    enter_ix;         /* ENTER: index of the mov %rsp,%rbp */
    int       have_frame;
    size_t    frame_ix;
    int32_t   d0, fdepth;       /* depth before / after the allocation */
    int32_t   frame_rbp;
    uint8_t   frame_rbpk;       /* what rbp holds right after the allocation */
    int       have_sw;          /* an indirect jump inside the frame (switch table) */
    st        sw;
    int32_t   rsp_min;          /* shallowest byte reached from rsp inside */
    int32_t   fixed_max;        /* deepest byte reached at a fixed place (rbp, or rsp outside) */
    int       rsp_ptr;          /* an rsp-derived pointer escapes inside */
    int       rsp_cfa;          /* the CFA is rsp-based somewhere inside (no frame pointer) */
    uint64_t  outside_call;     /* a call outside the frame (0: none) */
    uint64_t  blocked[16];      /* calls found not to return (their fall-through is ignored) */
    int       nblocked;
    int       restart;          /* a state built on such a fall-through must go: analyse again */
    int32_t   arg_min;          /* least depth any rsp/frame-pointer reference touches (<= -8: incoming arguments) */
    uint64_t  tails[RW_MAX_TAILS];  /* where it jumps out to at its entry stack pointer (direct tail calls) */
    uint32_t  ntails;
    int       tail_other;       /* it jumps out otherwise (indirectly, with a frame, past RW_MAX_TAILS): whoever
                                   runs next may read its stack-passed arguments */
    int       flow_ok;          /* the data-flow pass gave every instruction a state */
    const char *why;
    uint64_t  where;
    rw_patch *patches;
    uint32_t  npatches;
    size_t    cappatches;
} fn;

const ZydisDecoder *rw_decoder(void)
{
    return icpp_x86_decoder();
}

static void refuse(fn *F, const char *why, uint64_t where)
{
    if (!F->why) {
        F->why = why;
        F->where = where;
    }
}

/* ---- decoding ---- */

static int push_ins(fn *F, const icpp_x86_insn *x, const icpp_x86_detail *d)
{
    if (F->n == F->cap) {       /* two arrays of one capacity: it grows once both have */
        size_t cv = F->cap, cd = F->cap;
        if (icpp_vec_reserve((void **)&F->v, &cv, F->n + 1, sizeof *F->v, 256) < 0 ||
            icpp_vec_reserve((void **)&F->d, &cd, F->n + 1, sizeof *F->d, 256) < 0)
            return -ENOMEM;
        F->cap = cv;
    }
    F->v[F->n] = *x;
    F->d[F->n++] = *d;
    return 0;
}

/* An instruction with its details, for sorting both arrays together. */
typedef struct ins_pair {
    icpp_x86_insn   x;
    icpp_x86_detail d;
} ins_pair;

static int ins_cmp(const void *a, const void *b)
{
    const ins_pair *x = a, *y = b;
    return x->x.addr < y->x.addr ? -1 : x->x.addr > y->x.addr;
}

/* Sort v (and d with it) by address: parts are decoded in their order, which
 * need not be the addresses'. */
static int sort_ins(fn *F)
{
    size_t i = 1;
    while (i < F->n && F->v[i - 1].addr <= F->v[i].addr)
        i++;
    if (i >= F->n)
        return 0;
    ins_pair *t = malloc(F->n * sizeof *t);
    if (!t)
        return -ENOMEM;
    for (i = 0; i < F->n; i++)
        t[i] = (ins_pair){F->v[i], F->d[i]};
    qsort(t, F->n, sizeof *t, ins_cmp);
    for (i = 0; i < F->n; i++) {
        F->v[i] = t[i].x;
        F->d[i] = t[i].d;
    }
    free(t);
    return 0;
}

/* The details of instruction x (one of F->v). */
static const icpp_x86_detail *detail(const fn *F, const icpp_x86_insn *x)
{
    return &F->d[x - F->v];
}

/* Decode every part; returns -ENOMEM, or 0 (an undecodable byte refuses). */
static int decode_parts(fn *F, const rw_image *img)
{
    for (size_t p = 0; p < F->nparts; p++) {
        size_t avail;
        const uint8_t *code = rw_image_code(img, F->parts[p].lo, &avail);
        uint64_t len = F->parts[p].hi - F->parts[p].lo;
        if (!code || avail < len) {
            refuse(F, "its code is not in the file", F->parts[p].lo);
            return 0;
        }
        for (uint64_t off = 0; off < len;) {
            ZydisDecodedInstruction in;
            ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
            if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(rw_decoder(), code + off, len - off, &in, op))) {
                refuse(F, "contains bytes that do not decode as x86-64 instructions", F->parts[p].lo + off);
                return 0;
            }
            icpp_x86_insn x;
            icpp_x86_detail d;
            icpp_x86_classify(&in, op, F->parts[p].lo + off, ICPP_X86_RULES_REWRITE, &x);
            icpp_x86_details(&in, op, &x, &d);
            if (push_ins(F, &x, &d) < 0)
                return -ENOMEM;
            off += in.length;
        }
    }
    if (sort_ins(F) < 0)
        return -ENOMEM;
    if (icpp_vec_reserve((void **)&F->pre, &F->cappre, F->n, sizeof *F->pre, 256) < 0)
        return -ENOMEM;
    if (F->n)
        memset(F->pre, 0, F->n * sizeof *F->pre);
    return 0;
}

/* Index of the instruction starting at a, or SIZE_MAX. */
static size_t find_ins(const fn *F, uint64_t a)
{
    return icpp_x86_find(F->v, F->n, a);
}

static int in_parts(const fn *F, uint64_t a)
{
    for (size_t p = 0; p < F->nparts; p++)
        if (a >= F->parts[p].lo && a < F->parts[p].hi)
            return 1;
    return 0;
}

/* ---- data flow ---- */

/* The caller's rbp and any other value are the same to the analysis (only
 * a frame pointer is ever relied on): without a frame pointer rbp is just
 * another register, written on one path and not on another. */
static int same_state(const pre *x, const st *s)
{
    return x->inside == s->inside && x->depth == s->depth && (x->rbpk == RBP_FRAME) == (s->rbpk == RBP_FRAME) &&
           (s->rbpk != RBP_FRAME || x->rbp == s->rbp);
}

/* Does the CFA rule at x agree with state s? */
static int cfi_agrees(const fn *F, const icpp_x86_insn *x, const st *s)
{
    icpp_cfa_rule r = icpp_cfi_lookup(F->cfi, x->addr);
    if (r.kind == ICPP_CFA_RSP)
        return (!s->inside || F->mode == RW_MODE_SUB) && r.off == s->depth + 8;
    if (r.kind == ICPP_CFA_RBP)
        return s->rbpk == RBP_FRAME && r.off == s->rbp + 8;
    return 0;
}

/* Reach instruction i with state s; weak is the call whose fall-through
 * (through padding only) this edge is, or 0.  A call to a function that does
 * not return (abort, a longjmp-ing error handler) is often followed by
 * padding and then unrelated code: where such a fall-through disagrees with
 * another edge and the CFI sides with the other edge, the call is taken not
 * to return. */
static void reach(fn *F, size_t i, st s, uint64_t weak)
{
    const icpp_x86_insn *x = &F->v[i];
    pre *p = &F->pre[i];
    if (p->reached) {
        if (same_state(p, &s)) {
            if (!weak && p->weak_from) {
                p->weak_from = 0;
                if (x->kind == ICPP_X86_PAD)
                    F->work[F->nwork++] = i;   /* its fall-through is not weak either */
            }
            return;
        }
        st sx = {p->depth, p->rbp, p->inside, p->rbpk};
        int agree_x = cfi_agrees(F, x, &sx), agree_e = cfi_agrees(F, x, &s);
        if (weak && agree_x && !agree_e)
            return;
        if (!weak && p->weak_from && agree_e && !agree_x && F->nblocked < 16) {
            F->blocked[F->nblocked++] = p->weak_from;
            F->restart = 1;
            return;
        }
        refuse(F, "paths that join there disagree on the stack depth or frame", x->addr);
        return;
    }
    p->reached = 1;
    p->inside = s.inside;
    p->depth = s.depth;
    p->rbpk = s.rbpk;
    p->rbp = s.rbp;
    p->weak_from = weak;
    F->work[F->nwork++] = i;
}

/* Successor at address a (fall-through or branch target inside the function). */
static void go(fn *F, const icpp_x86_insn *x, uint64_t a, st s, uint64_t weak)
{
    size_t j = find_ins(F, a);
    if (j == SIZE_MAX) {
        if (in_parts(F, a))
            refuse(F, "a branch lands inside an instruction", x->addr);
        return;                 /* fell off the end (after a call that does not return) */
    }
    reach(F, j, s, weak);
}

static void add_patch(fn *F, uint64_t addr, uint8_t kind, int8_t sign, int32_t orig)
{
    for (uint32_t i = 0; i < F->npatches; i++)     /* CFA patches' addr is a file offset: another space */
        if (F->patches[i].addr == addr && (F->patches[i].kind == RW_P_CFA) == (kind == RW_P_CFA))
            return;
    if (icpp_vec_reserve((void **)&F->patches, &F->cappatches, (size_t)F->npatches + 1, sizeof *F->patches, 8) < 0) {
        refuse(F, "out of memory", addr);
        return;
    }
    F->patches[F->npatches++] = (rw_patch){addr, kind, sign, 0, 0, 0, orig};
}

static void check_cfi(fn *F, const icpp_x86_insn *x, const st *s)
{
    icpp_cfa_rule r = icpp_cfi_lookup(F->cfi, x->addr);
    if (s->inside) {
        if (r.kind == ICPP_CFA_RSP && F->mode == RW_MODE_SUB) {
            if (r.off != s->depth + 8)
                refuse(F, "its CFI disagrees with the decoded stack depth", x->addr);
            F->rsp_cfa = 1;     /* its CFA offsets get +P (cfa_patches) */
        } else if (r.kind == ICPP_CFA_RSP) {
            refuse(F, "its CFA is rsp-based inside the frame after its frame pointer is set up", x->addr);
        } else if (r.kind != ICPP_CFA_RBP || s->rbpk != RBP_FRAME || r.off != s->rbp + 8)
            refuse(F, "its CFI disagrees with the decoded frame pointer", x->addr);
        return;
    }
    switch (r.kind) {
    case ICPP_CFA_RSP:
        if (r.off != s->depth + 8)
            refuse(F, "its CFI disagrees with the decoded stack depth", x->addr);
        break;
    case ICPP_CFA_RBP:
        if (s->rbpk != RBP_FRAME || r.off != s->rbp + 8)
            refuse(F, "its CFI disagrees with the decoded frame pointer", x->addr);
        break;
    case ICPP_CFA_NOFDE:
        refuse(F, "no CFI covers it", x->addr);
        break;
    default:
        refuse(F, "its CFA rule is not a plain rsp/rbp offset", x->addr);
        break;
    }
}

/* An rsp-relative reference inside the frame to the caller's side of it
 * (depth <= d0) moves by P: its displacement gets +P. */
static void patch_disp(fn *F, const icpp_x86_insn *x)
{
    const icpp_x86_detail *d = detail(F, x);
    if (d->disp_size != 1 && d->disp_size != 4) {
        refuse(F, "an rsp-relative reference above the frame has no displacement to patch", x->addr);
        return;
    }
    add_patch(F, x->addr, d->disp_size == 1 ? RW_P_DISP8 : RW_P_DISP32, 1, d->sdisp);
}

/* An adjustment that crosses the padding once grows by P (the sign of its
 * immediate says which way). */
static void patch_imm(fn *F, const icpp_x86_insn *x)
{
    const icpp_x86_detail *d = detail(F, x);
    add_patch(F, x->addr, d->imm_size == 8 ? RW_P_IMM8 : RW_P_IMM32, d->imm > 0 ? 1 : -1, d->imm);
}

/* Depths: a byte at depth d is at entry SP - d.  Inside the frame, the
 * allocation spans depths d0+1 .. fdepth (and deeper pushes); depth d0 and
 * above are the saved registers, the return address (0..-7) and the
 * incoming stack arguments (-8 and above). */
static void check_mem(fn *F, const icpp_x86_insn *x, const st *s)
{
    const icpp_x86_detail *d = detail(F, x);
    /* Where it reaches, for wrapping (rw_frame.args): an access's lowest
     * depth, an address's own; rbp-relative accesses taken as 8 bytes. */
    if (x->flags & (ICPP_X86_F_RSP_MEM | ICPP_X86_F_RSP_PTR)) {
        int32_t at = s->depth - d->sdisp, lo = (x->flags & ICPP_X86_F_RSP_MEM) ? at - d->ssize + 1 : at;
        if (lo < F->arg_min)
            F->arg_min = lo;
    }
    if ((x->flags & ICPP_X86_F_RBP_REF) && s->rbpk == RBP_FRAME && s->rbp - d->bdisp - 7 < F->arg_min)
        F->arg_min = s->rbp - d->bdisp - 7;
    if ((x->flags & ICPP_X86_F_RBP_VAL) && s->rbpk == RBP_FRAME && x->kind != ICPP_X86_PUSH)
        F->arg_min = INT32_MIN;     /* a copy of the frame pointer: anything above may be reached */
    if (x->flags & (ICPP_X86_F_RSP_MEM | ICPP_X86_F_RSP_PTR)) {
        int32_t at = s->depth - d->sdisp;   /* depth of the base + displacement */
        int idx = (x->flags & ICPP_X86_F_RSP_IDX) != 0;
        if (!s->inside) {
            if (at > F->fixed_max)
                F->fixed_max = at;
        } else if (idx) {
            /* An indexed access or address stays within the object its
             * displacement points into (or one past its end): a local,
             * or an incoming stack argument.  Its extent is unknown. */
            if (at >= F->d0)
                F->rsp_ptr = 1;
            else if (at <= -8)
                patch_disp(F, x);
            else
                refuse(F, "an indexed rsp-relative reference into the saved registers or return address", x->addr);
        } else if (x->flags & ICPP_X86_F_RSP_MEM) {
            int32_t hi = at, lo = hi - d->ssize + 1;   /* byte depths it touches */
            if (lo > F->d0) {
                if (lo < F->rsp_min)
                    F->rsp_min = lo;
            } else if (hi <= F->d0) {
                patch_disp(F, x);
            } else {
                refuse(F, "an rsp-relative access straddles the frame boundary", x->addr);
            }
        } else {
            /* An address (lea, or rsp's value).  At d0: one past the locals. */
            if (at >= F->d0)
                F->rsp_ptr = 1;
            else if (at <= -8)
                patch_disp(F, x);
            else
                refuse(F, "the address of a saved register or of the return address is taken from rsp", x->addr);
        }
    }
    if ((x->flags & ICPP_X86_F_RBP_REF) && s->rbpk == RBP_FRAME) {
        int32_t at = s->rbp - d->bdisp;
        if (at > F->fixed_max)
            F->fixed_max = at;
    }
}

/* The least depth at which the padding is still in effect: an adjustment
 * may release part of the allocation (gcc folds call-alignment slack into
 * the `add` that pops stack arguments) as long as it stays below the depth
 * the allocation started from.  For ENTER that depth itself is inside. */
static int32_t inside_min(const fn *F)
{
    return F->mode == RW_MODE_SUB ? F->d0 + 1 : F->d0;
}

/* A direct tail call at the entry stack pointer to `to`, remembered once. */
static void add_tail(fn *F, uint64_t to)
{
    for (uint32_t t = 0; t < F->ntails; t++)
        if (F->tails[t] == to)
            return;
    if (F->ntails < RW_MAX_TAILS)
        F->tails[F->ntails++] = to;
    else
        F->tail_other = 1;
}

/* rsp and rbp in state s as offsets from the entry stack pointer
 * (lib/x86stack.h); rbp is known only as a frame pointer. */
static icpp_x86_regs regs_of(const st *s)
{
    return (icpp_x86_regs){-(int64_t)s->depth, -(int64_t)s->rbp, 1, s->rbpk == RBP_FRAME};
}

/* The steps below take an instruction x whose state was s (the model's
 * registers after it: r, its depth after: depth), update *s to the state
 * after it and return 1 if the flow falls through to the next instruction,
 * 0 if it does not (a jump, return or stop, or x refused the function). */

/* pop: the ENTER frame's `pop %rbp` at rsp == rbp becomes `leave`; any
 * other pop out of the frame is refused. */
static int step_pop(fn *F, const icpp_x86_insn *x, st *s, int32_t depth)
{
    if (s->inside && depth < inside_min(F)) {
        if (F->mode == RW_MODE_ENTER && (x->flags & ICPP_X86_F_POP_RBP) && s->rbpk == RBP_FRAME &&
            s->depth == s->rbp) {
            add_patch(F, x->addr, RW_P_LEAVE, 0, 0);
            s->inside = 0;
        } else {
            refuse(F, "a pop crosses the frame boundary", x->addr);
            return 0;
        }
    }
    s->depth = depth;
    if (x->flags & ICPP_X86_F_POP_RBP)
        s->rbpk = RBP_CALLER;
    if (s->depth < 0) {
        refuse(F, "pops above its entry stack pointer", x->addr);
        return 0;
    }
    return 1;
}

/* The SUB frame's allocation (add/sub $imm,%rsp outside it, moving rsp
 * down): one only; the frame starts here. */
static int step_alloc(fn *F, size_t i, const icpp_x86_insn *x, st *s, int32_t depth)
{
    if (F->have_frame && F->frame_ix != i) {
        refuse(F, "more than one stack allocation (sub to rsp) outside the frame", x->addr);
        return 0;
    }
    F->have_frame = 1;
    F->frame_ix = i;
    F->d0 = s->depth;
    F->fdepth = depth;
    F->frame_rbp = s->rbp;
    F->frame_rbpk = s->rbpk;
    patch_imm(F, x);
    s->inside = 1;
    s->depth = depth;
    return 1;
}

/* add/sub $imm,%rsp: the allocation, the adjustment that undoes it, or one
 * that stays on its side of the frame boundary. */
static int step_adj(fn *F, size_t i, const icpp_x86_insn *x, st *s, int32_t depth)
{
    if (!s->inside && x->delta > 0 && F->mode == RW_MODE_SUB)
        return step_alloc(F, i, x, s, depth);
    if (s->inside && depth < inside_min(F)) {
        if (depth != F->d0 || F->mode != RW_MODE_SUB) {
            refuse(F, "a stack adjustment crosses the frame boundary without undoing the allocation", x->addr);
            return 0;
        }
        /* Undoes the allocation (and maybe pops outgoing arguments too):
         * it crosses the padding once, so it grows by P. */
        patch_imm(F, x);
        s->inside = 0;
    } else if (!s->inside && x->delta > 0 && F->mode == RW_MODE_ENTER) {
        refuse(F, "a stack allocation outside the frame", x->addr);
        return 0;
    }
    s->depth = depth;
    if (s->depth < 0) {
        refuse(F, "moves rsp above its entry stack pointer", x->addr);
        return 0;
    }
    return 1;
}

/* leave, and rsp set from rbp: the frame is left (never to a point inside
 * it). */
static int step_from_rbp(fn *F, const icpp_x86_insn *x, st *s, int32_t depth)
{
    if (x->kind == ICPP_X86_LEAVE) {
        if (s->rbpk != RBP_FRAME) {
            refuse(F, "leave without a frame pointer", x->addr);
            return 0;
        }
        s->depth = depth;
        s->rbpk = RBP_CALLER;
        s->inside = 0;
        return 1;
    }
    if (s->rbpk != RBP_FRAME) {
        refuse(F, "rsp is set from rbp, which is not a frame pointer there", x->addr);
        return 0;
    }
    s->depth = depth;
    if (s->inside) {
        if (s->depth > F->d0) {
            refuse(F, "rsp is reset from rbp to a point inside the frame (alloca or VLA release)", x->addr);
            return 0;
        }
        s->inside = 0;
    }
    return 1;
}

/* rbp set from rsp: a frame pointer; for ENTER, at enter_ix, the frame
 * starts here. */
static int step_to_rbp(fn *F, size_t i, const icpp_x86_insn *x, st *s, icpp_x86_regs r)
{
    if (s->inside) {
        refuse(F, "the frame pointer is set up after the frame is allocated", x->addr);
        return 0;
    }
    s->rbpk = RBP_FRAME;
    s->rbp = (int32_t)-r.rbp;
    if (F->mode == RW_MODE_ENTER && i == F->enter_ix) {
        F->have_frame = 1;
        F->frame_ix = i;
        F->d0 = F->fdepth = s->depth;
        F->frame_rbp = s->rbp;
        F->frame_rbpk = RBP_FRAME;
        s->inside = 1;
    }
    return 1;
}

/* A direct jump or conditional branch: inside the function it is followed;
 * out of it, it is a tail call, allowed only with no frame. */
static int step_jump(fn *F, const icpp_x86_insn *x, const st *s)
{
    if ((x->flags & ICPP_X86_F_DIRECT) && in_parts(F, x->target)) {
        go(F, x, x->target, *s, 0);
    } else {
        if ((x->flags & ICPP_X86_F_DIRECT) && !s->inside && s->depth == 0)
            add_tail(F, x->target);
        else
            F->tail_other = 1;
        if (s->inside || s->depth != 0) {
            refuse(F, "jumps out of the function with its frame allocated", x->addr);
            return 0;
        }
    }
    return x->kind != ICPP_X86_JMP;
}

/* An indirect jump: a tail call at the entry stack pointer, else a switch
 * table; all of a function's must be at one state (seed_unreached starts
 * the table's targets there).  Never falls through. */
static int step_jmp_ind(fn *F, const icpp_x86_insn *x, const st *s)
{
    if (!s->inside && s->depth == 0) {
        F->tail_other = 1;
        return 0;               /* a tail call */
    }
    if (F->have_sw && memcmp(&F->sw, s, sizeof *s) != 0) {
        refuse(F, "indirect jumps at different stack depths", x->addr);
        return 0;
    }
    F->have_sw = 1;
    F->sw = *s;
    return 0;
}

/* What instruction i (x) does to the frame, by its kind. */
static int step_kind(fn *F, size_t i, const icpp_x86_insn *x, st *s, icpp_x86_regs r)
{
    int32_t depth = (int32_t)-r.rsp;    /* after x (if rsp is known) */
    switch (x->kind) {
    case ICPP_X86_PAD:
    case ICPP_X86_OTHER:
        return 1;
    case ICPP_X86_STOP:
        return 0;
    case ICPP_X86_PUSH:
        s->depth = depth;
        return 1;
    case ICPP_X86_POP:
        return step_pop(F, x, s, depth);
    case ICPP_X86_ADJ:
        return step_adj(F, i, x, s, depth);
    case ICPP_X86_LEAVE:
    case ICPP_X86_RSP_FROM_RBP:
        return step_from_rbp(F, x, s, depth);
    case ICPP_X86_RBP_FROM_RSP:
        return step_to_rbp(F, i, x, s, r);
    case ICPP_X86_CALL:
        if (!s->inside && !F->outside_call)
            F->outside_call = x->addr;
        return 1;
    case ICPP_X86_RET:
        if (s->inside || s->depth != 0)
            refuse(F, "returns with its frame still allocated", x->addr);
        return 0;
    case ICPP_X86_JMP:
    case ICPP_X86_JCC:
        return step_jump(F, x, s);
    case ICPP_X86_JMP_IND:
        return step_jmp_ind(F, x, s);
    case ICPP_X86_RSP_BAD:
        refuse(F, "a dynamic stack adjustment (alloca, VLA or realignment) or other write to rsp", x->addr);
        return 0;
    }
    return 1;
}

/* Process instruction i (its state is set).  Where rsp and rbp go is the
 * stack model's (icpp_x86_effect); what that does to the frame is decided
 * by step_kind. */
static void step(fn *F, size_t i)
{
    const icpp_x86_insn *x = &F->v[i];
    const pre *p = &F->pre[i];
    st s = {p->depth, p->rbp, p->inside, p->rbpk};
    check_cfi(F, x, &s);
    check_mem(F, x, &s);
    icpp_x86_regs r = icpp_x86_effect(x, regs_of(&s));
    if (x->flags & ICPP_X86_F_RBP_W)
        s.rbpk = RBP_OTHER;
    if (!step_kind(F, i, x, &s, r))
        return;
    uint64_t weak = 0;
    if (x->kind == ICPP_X86_CALL) {
        for (int b = 0; b < F->nblocked; b++)
            if (F->blocked[b] == x->addr)
                return;         /* found not to return */
        weak = x->addr;
    } else if (x->kind == ICPP_X86_PAD) {
        weak = p->weak_from;
    }
    /* The frame's view of rsp and rbp is the model's, refined: rbp
     * unknown is the caller's or another value. */
    assert(r.rsp_known && s.depth == (int32_t)-r.rsp && r.rbp_known == (s.rbpk == RBP_FRAME));
    assert(!r.rbp_known || s.rbp == (int32_t)-r.rbp);
    go(F, x, x->addr + x->len, s, weak);
}

static void run(fn *F)
{
    while (F->nwork && !F->why && !F->restart)
        step(F, F->work[--F->nwork]);
}

/* Code no path from the entry reaches (switch-table targets, landing pads)
 * starts with the state of the function's indirect jump, or else the state
 * just after the allocation.  Then it must flow consistently like the rest. */
static void seed_unreached(fn *F)
{
    for (size_t i = 0; i < F->n && !F->why && !F->restart; i++) {
        const icpp_x86_insn *x = &F->v[i];
        if (F->pre[i].reached || x->kind == ICPP_X86_PAD || x->kind == ICPP_X86_STOP)
            continue;
        st s;
        if (F->have_sw)
            s = F->sw;
        else if (F->have_frame)
            s = (st){F->fdepth, F->frame_rbp, 1, F->frame_rbpk};
        else
            return;             /* nothing to enlarge: no need to know */
        reach(F, i, s, 0);
        run(F);
        if (F->restart)
            return;
    }
}

static void reset(fn *F)
{
    for (size_t i = 0; i < F->n; i++)
        F->pre[i].reached = 0;
    F->nwork = 0;
    F->have_frame = 0;
    F->have_sw = 0;
    F->rsp_min = INT32_MAX;
    F->fixed_max = INT32_MIN;
    F->rsp_ptr = 0;
    F->rsp_cfa = 0;
    F->outside_call = 0;
    F->why = NULL;
    F->where = 0;
    F->npatches = 0;
    F->restart = 0;
    F->arg_min = INT32_MAX;
    F->ntails = 0;
    F->tail_other = 0;
    F->flow_ok = 0;
}

static void analyse_pass(fn *F, int mode, size_t enter_ix)
{
    F->nblocked = 0;
    do {
        reset(F);
        F->mode = mode;
        F->enter_ix = enter_ix;
        if (F->n == 0) {
            refuse(F, "empty", F->parts[0].lo);
            return;
        }
        size_t e = find_ins(F, F->parts[0].lo);
        if (e == SIZE_MAX) {
            refuse(F, "cannot decode its first instruction", F->parts[0].lo);
            return;
        }
        reach(F, e, (st){0, 0, 0, RBP_CALLER}, 0);
        run(F);
        if (!F->restart)
            seed_unreached(F);
    } while (F->restart && !F->why);
    F->flow_ok = !F->why;
    for (size_t i = 0; i < F->n && F->flow_ok; i++)
        if (!F->pre[i].reached && F->v[i].kind != ICPP_X86_PAD && F->v[i].kind != ICPP_X86_STOP)
            F->flow_ok = 0;
    if (F->why || !F->have_frame)
        return;
    if (F->outside_call)
        refuse(F, "calls a function outside the enlarged frame (shrink-wrapped prologue)", F->outside_call);
    else if (F->fixed_max > F->d0 && (F->rsp_min <= F->fixed_max || F->rsp_ptr))
        refuse(F, "the frame's locals are reached both through rsp and at fixed places (rbp): padding would split them",
               0);
}

/* ENTER candidates: [endbr64] push %rbp; mov %rsp,%rbp (55 48 89 e5 or 55 48 8b ec). */
static size_t enter_candidate(const fn *F, const rw_image *img)
{
    size_t i = 0;
    if (F->n > 0 && (F->v[0].flags & ICPP_X86_F_ENDBR))
        i = 1;
    if (i + 1 >= F->n || F->v[i].addr != F->parts[0].lo + (i ? 4 : 0))
        return SIZE_MAX;
    size_t avail;
    const uint8_t *c = rw_image_code(img, F->v[i].addr, &avail);
    if (!c || avail < 4 || c[0] != 0x55 || c[1] != 0x48 ||
        !((c[2] == 0x89 && c[3] == 0xe5) || (c[2] == 0x8b && c[3] == 0xec)))
        return SIZE_MAX;
    return i + 1;
}

/* ---- callee-saved registers per CFI ---- */

/* Refuse if CFI says some register is saved in the area the padding moves
 * (depth > d0) at instruction x: its unwind rule would then be wrong. */
static void check_saves(fn *F, Dwarf_CFI *dcfi, const icpp_x86_insn *x)
{
    Dwarf_Frame *fr = NULL;
    if (!dcfi || dwarf_cfi_addrframe(dcfi, x->addr, &fr) != 0 || !fr)
        return;                 /* the CFA check already required an FDE */
    for (int reg = 0; reg <= 16 && !F->why; reg++) {
        Dwarf_Op mem[3], *ops = NULL;
        size_t nops = 0;
        if (dwarf_frame_register(fr, reg, mem, &ops, &nops) != 0 || nops == 0 || !ops)
            continue;
        if (ops[nops - 1].atom == DW_OP_stack_value)
            continue;           /* a value, not a save slot */
        int64_t off = 0;
        if (ops[0].atom != DW_OP_call_frame_cfa) {
            if (ops[0].atom >= DW_OP_reg0 && ops[0].atom <= DW_OP_reg31)
                continue;       /* saved in a register */
            refuse(F, "a register save rule in its CFI is an expression", x->addr);
            break;
        }
        if (nops == 2 && ops[1].atom == DW_OP_plus_uconst)
            off = (int64_t)ops[1].number;
        else if (nops == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus)
            off = (int64_t)ops[1].number;
        else if (nops != 1) {
            refuse(F, "a register save rule in its CFI is an expression", x->addr);
            break;
        }
        int64_t depth = -8 - off;   /* CFA = entry SP + 8 */
        if (depth > F->d0)
            refuse(F, "a callee-saved register is saved inside the area that would move (its CFI rule would be wrong)",
                   x->addr);
    }
    free(fr);
}

/* ---- the module ---- */

struct rw_frames {
    rw_frame *v;
    size_t    n;
};

static uint32_t room(const rw_patch *p)
{
    if (p->kind == RW_P_CFA) {
        icpp_cfa_operand op = {0, p->len, p->sf, 0, p->data_align, p->orig};
        uint32_t a = 0, b = 1u << 24;       /* largest r in [a, b) with value + r encodable */
        if (!icpp_cfaprog_fits(&op, p->orig))
            return 0;
        while (b - a > 1) {
            uint32_t mid = a + (b - a) / 2;
            if (icpp_cfaprog_fits(&op, (int64_t)p->orig + mid))
                a = mid;
            else
                b = mid;
        }
        return a;
    }
    if (p->kind == RW_P_DISP8 || p->kind == RW_P_DISP32)
        return p->kind == RW_P_DISP8 ? (uint32_t)(INT8_MAX - p->orig) : (uint32_t)((int64_t)INT32_MAX - p->orig);
    int64_t lo = p->kind == RW_P_IMM8 ? INT8_MIN : INT32_MIN, hi = p->kind == RW_P_IMM8 ? INT8_MAX : INT32_MAX;
    int64_t r = p->sign > 0 ? hi - p->orig : p->orig - lo;
    return r < 0 ? 0 : r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

/* ---- CFA offsets of frames without a frame pointer ---- */

/* The FDEs of one CFI section of the image. */
typedef struct cfisrc {
    const rw_cfisec *sec;
    const uint8_t   *bytes;     /* the section's bytes in the image */
    icpp_fde        *f;
    size_t           n;
    const char      *bad;       /* why its CFA offsets cannot be patched (NULL: they can) */
} cfisrc;

static void cfisrc_load(cfisrc *c, const rw_image *img, const rw_cfisec *sec, int eh)
{
    memset(c, 0, sizeof *c);
    c->sec = sec;
    if (!sec->size)
        return;
    if (sec->compressed) {
        c->bad = eh ? "its .eh_frame is compressed (cannot be patched in place)"
                    : "its .debug_frame is compressed (cannot be patched in place)";
        return;
    }
    c->bytes = img->bytes + sec->off;
    icpp_err err = {0};
    if (icpp_fde_parse(c->bytes, sec->size, sec->addr, eh, &c->f, &c->n, &err) < 0)
        c->bad = eh ? "its .eh_frame cannot be read" : "its .debug_frame cannot be read";
}

/* Every CFA offset that governs an inside instruction with an rsp-based
 * CFA gets +P; it must govern nothing else (a reached instruction outside,
 * or one whose CFA is not rsp-based), and must not be the CIE's. */
static void cfa_patches(fn *F, const cfisrc *src, size_t nsrc)
{
    for (size_t k = 0; k < nsrc && !F->why; k++) {
        const cfisrc *c = &src[k];
        if (!c->sec->size)
            continue;
        if (c->bad) {
            refuse(F, c->bad, 0);
            return;
        }
        for (size_t i = 0; i < c->n && !F->why; i++) {
            const icpp_fde *fd = &c->f[i];
            int overlaps = 0;
            for (size_t p = 0; p < F->nparts; p++)
                overlaps |= fd->lo < F->parts[p].hi && F->parts[p].lo < fd->hi;
            if (!overlaps)
                continue;
            icpp_cfaprog prog;
            icpp_err err = {0};
            if (icpp_cfaprog_read(c->bytes, c->sec->size, fd, &prog, &err) < 0) {
                refuse(F, "its call frame program cannot be read (CFA offsets cannot be patched)", fd->lo);
                return;
            }
            uint8_t *need = calloc(prog.nops ? prog.nops : 1, 1);   /* 1 +P, 2 unchanged */
            if (!need) {
                icpp_cfaprog_free(&prog);
                refuse(F, "out of memory", fd->lo);
                return;
            }
            size_t sp = 0;
            for (size_t j = 0; j < F->n && !F->why; j++) {
                const icpp_x86_insn *x = &F->v[j];
                if (!F->pre[j].reached || x->addr < fd->lo || x->addr >= fd->hi)
                    continue;
                while (sp < prog.nspans && prog.spans[sp].hi <= x->addr)
                    sp++;
                if (sp == prog.nspans || prog.spans[sp].lo > x->addr) {
                    sp = 0;     /* instructions are sorted per part, parts are not */
                    while (sp < prog.nspans && prog.spans[sp].hi <= x->addr)
                        sp++;
                    if (sp == prog.nspans)
                        continue;
                }
                const icpp_cfa_span *y = &prog.spans[sp];
                int plus = F->pre[j].inside && !y->expr && y->reg == 7;
                if (y->operand < 0) {
                    if (plus)
                        refuse(F, "a CFA rule inside the frame has no offset to patch", x->addr);
                    continue;
                }
                uint8_t want = plus ? 1 : 2;
                if (need[y->operand] && need[y->operand] != want)
                    refuse(F, "a CFA offset in its CFI describes code both inside and outside the frame", x->addr);
                need[y->operand] = want;
            }
            for (size_t o = 0; o < prog.nops && !F->why; o++) {
                const icpp_cfa_operand *op = &prog.ops[o];
                if (need[o] != 1)
                    continue;
                if (op->in_cie) {
                    refuse(F, "a CFA offset inside the frame is its CIE's (shared by other functions)", fd->lo);
                    break;
                }
                if (op->value < INT32_MIN || op->value > INT32_MAX) {
                    refuse(F, "a CFA offset in its CFI is out of range", fd->lo);
                    break;
                }
                uint64_t at = c->sec->off + op->at;
                add_patch(F, at, RW_P_CFA, 1, (int32_t)op->value);
                rw_patch *pt = &F->patches[F->npatches - 1];
                if (!F->why && pt->addr == at && pt->kind == RW_P_CFA) {
                    pt->len = op->len;
                    pt->sf = op->sf;
                    pt->data_align = op->data_align;
                }
            }
            free(need);
            icpp_cfaprog_free(&prog);
        }
    }
}

/* A direct branch out of a function, into another one (maybe its middle). */
typedef struct target {
    uint64_t to, from_owner;
} target;

static int target_cmp(const void *a, const void *b)
{
    const target *x = a, *y = b;
    return x->to < y->to ? -1 : x->to > y->to;
}

/* What the analyses of one module's functions share. */
typedef struct module_run {
    const icpp_module   *m;
    const icpp_func     *funcs;
    size_t               nf;
    const rw_image      *img;
    const rw_frame_opts *opts;
    Dwarf_CFI           *dcfi;      /* for the callee-saved registers (check_saves) */
    cfisrc               src[2];    /* .eh_frame, .debug_frame: CFA offsets (cfa_patches) */
    fn                   F;         /* the function being analysed (its arrays reused) */
    target              *tg;        /* every function's direct branches out of itself */
    size_t               ntg, captg;
} module_run;

/* F's parts: function f, then its .cold parts (at most MAX_PARTS in all). */
static void find_parts(fn *F, const icpp_func *funcs, size_t nf, const icpp_func *f)
{
    F->nparts = 0;
    F->parts[F->nparts++] = (range){f->addr, f->addr + f->size};
    for (size_t j = 0; j < nf; j++)
        if (funcs[j].owner == f->addr && funcs[j].addr != f->addr && funcs[j].size && F->nparts < MAX_PARTS)
            F->parts[F->nparts++] = (range){funcs[j].addr, funcs[j].addr + funcs[j].size};
}

/* F's direct branches out of its parts, for "entered in the middle"
 * (refuse_entered). */
static int note_targets(module_run *R, uint64_t owner)
{
    const fn *F = &R->F;
    for (size_t i = 0; i < F->n; i++) {
        if (!(F->v[i].flags & ICPP_X86_F_DIRECT) || in_parts(F, F->v[i].target))
            continue;
        if (icpp_vec_reserve((void **)&R->tg, &R->captg, R->ntg + 1, sizeof *R->tg, 1024) < 0)
            return -ENOMEM;
        R->tg[R->ntg++] = (target){F->v[i].target, owner};
    }
    return 0;
}

/* Whether F reads stack-passed arguments (rw_frame.args), once the flow
 * reached all of it; tail calls at its entry stack pointer alone leave it
 * to their targets (settle_args). */
static int note_args(const fn *F, rw_frame *out)
{
    if (!F->flow_ok)
        return 0;
    out->args = F->arg_min <= -8 || F->tail_other ? RW_ARGS_READ : RW_ARGS_NONE;
    if (out->args == RW_ARGS_NONE && F->ntails) {
        out->tails = malloc(F->ntails * sizeof *out->tails);
        if (!out->tails)
            return -ENOMEM;
        memcpy(out->tails, F->tails, F->ntails * sizeof *out->tails);
        out->ntails = F->ntails;
    }
    return 0;
}

/* No sub to enlarge: with --enter, the frame pointer set-up at the entry
 * becomes `enter` (RW_MODE_ENTER), analysed again in that mode. */
static void try_enter(fn *F, const rw_image *img, const rw_frame_opts *opts)
{
    size_t ei = enter_candidate(F, img);
    if (ei == SIZE_MAX) {
        refuse(F, "no frame to enlarge (no sub $imm,%rsp, and no push %rbp; mov %rsp,%rbp at its entry)", 0);
        return;
    }
    if (!opts->enter) {
        refuse(F, "no sub $imm,%rsp to enlarge (--enter would turn its push %rbp; mov %rsp,%rbp into enter)", 0);
        return;
    }
    analyse_pass(F, RW_MODE_ENTER, ei);
    for (size_t i = 0; i < F->n && !F->why; i++)
        if (F->pre[i].reached && (F->v[i].flags & ICPP_X86_F_DIRECT) && F->v[i].target == F->v[ei].addr)
            refuse(F, "a branch lands between push %rbp and mov %rsp,%rbp", F->v[i].addr);
    if (!F->why && !F->have_frame)
        refuse(F, "its frame pointer set-up is not reached from the entry", 0);
    if (!F->why)
        add_patch(F, F->v[ei - 1].addr, RW_P_ENTER, 1, 0);
}

/* What an unwinder needs after padding: the CFA offsets of an rsp-based
 * CFA inside the frame patched, and (at every instruction the padding
 * moves rsp at: C++ exceptions at call sites, a debugger anywhere) the
 * saved registers still found. */
static void check_unwind(fn *F, const module_run *R)
{
    if (!F->why && F->rsp_cfa)
        cfa_patches(F, R->src, 2);
    for (size_t i = 0; i < F->n && !F->why; i++)
        if (F->pre[i].reached && F->pre[i].inside)
            check_saves(F, R->dcfi, &F->v[i]);
}

/* The verdict of an accepted F into out: its mode, frame, the largest
 * padding its patches allow, and the patches. */
static int emit(const fn *F, rw_frame *out, const rw_frame_opts *opts)
{
    uint32_t maxpad = opts->cap;
    if (F->mode == RW_MODE_ENTER) {
        if (maxpad > 0xfff0)
            maxpad = 0xfff0;
    } else {
        for (uint32_t p = 0; p < F->npatches; p++)
            if (room(&F->patches[p]) < maxpad)
                maxpad = room(&F->patches[p]);
    }
    maxpad &= ~15u;
    out->mode = (uint8_t)F->mode;
    out->frame = F->mode == RW_MODE_SUB ? (uint32_t)(F->fdepth - F->d0) : 0;
    if (!maxpad) {
        out->why = "its immediates have no room left (imm8 frame already at the limit)";
        return 0;
    }
    out->maxpad = maxpad;
    out->patches = malloc(F->npatches * sizeof *out->patches);
    if (!out->patches)
        return -ENOMEM;
    memcpy(out->patches, F->patches, F->npatches * sizeof *out->patches);
    out->npatches = F->npatches;
    for (uint32_t p = 0; p < F->npatches; p++)
        out->ncfa += F->patches[p].kind == RW_P_CFA;
    return 0;
}

/* Analyse function f (with its .cold parts) into out; -ENOMEM or 0. */
static int analyse_func(module_run *R, const icpp_func *f, rw_frame *out)
{
    fn *F = &R->F;
    out->addr = f->addr;
    out->name = f->name;
    if (!f->size) {
        out->why = "its size is unknown (no symbol size)";
        return 0;
    }
    F->n = 0;
    find_parts(F, R->funcs, R->nf, f);
    F->why = NULL;
    if (decode_parts(F, R->img) < 0)
        return -ENOMEM;
    free(F->work);
    if (!(F->work = malloc((F->n + 1) * sizeof *F->work)) || note_targets(R, f->addr) < 0)
        return -ENOMEM;
    if (!F->why) {
        analyse_pass(F, RW_MODE_SUB, 0);
        if (note_args(F, out) < 0)
            return -ENOMEM;
        if (!F->why && !F->have_frame)
            try_enter(F, R->img, R->opts);
        check_unwind(F, R);
    }
    if (F->why) {
        out->why = F->why;
        out->where = F->where;
        return 0;
    }
    return emit(F, out, R->opts);
}

/* A tail call passes the arguments on: a function whose only ways out
 * besides returning are tail calls reads none only if none of its tail
 * targets does (a target that is no function start, or not analysed,
 * may).  The greatest fixed point: a cycle of tail calls reading none
 * reads none. */
static void settle_args(rw_frames *fs)
{
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t k = 0; k < fs->n; k++) {
            rw_frame *f = &fs->v[k];
            for (uint32_t t = 0; f->args == RW_ARGS_NONE && t < f->ntails; t++) {
                const rw_frame *g = rw_frames_find(fs, f->tails[t]);
                if (!g || g->args != RW_ARGS_NONE) {
                    f->args = RW_ARGS_READ;
                    changed = 1;
                }
            }
        }
    }
}

/* A function another function branches into (not at its start) cannot
 * be changed: that code would run with a state the analysis never saw. */
static void refuse_entered(rw_frames *fs, const module_run *R)
{
    if (R->ntg)
        qsort(R->tg, R->ntg, sizeof *R->tg, target_cmp);
    for (size_t k = 0; k < fs->n; k++) {
        rw_frame *out = &fs->v[k];
        if (out->why)
            continue;
        const icpp_func *f = icpp_module_func_start(R->m, out->addr);
        size_t lo = 0, hi = R->ntg;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (R->tg[mid].to <= out->addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (; lo < R->ntg && R->tg[lo].to < out->addr + f->size; lo++)
            if (R->tg[lo].from_owner != out->addr) {
                out->why = "another function branches into its middle";
                out->where = R->tg[lo].to;
                out->maxpad = 0;
                break;
            }
    }
}

static void module_run_free(module_run *R)
{
    free(R->tg);
    free(R->F.v);
    free(R->F.d);
    free(R->F.pre);
    free(R->F.work);
    free(R->F.patches);
    free(R->src[0].f);
    free(R->src[1].f);
    if (R->dcfi)
        dwarf_cfi_end(R->dcfi);
}

rw_frames *rw_frames_analyze(const icpp_module *m, const rw_image *img, const icpp_cfi *cfi,
                             const rw_frame_opts *opts, icpp_err *err)
{
    module_run R = {.m = m, .funcs = icpp_module_funcs(m), .nf = icpp_module_nfuncs(m), .img = img, .opts = opts};
    R.dcfi = dwarf_getcfi_elf(icpp_module_elf(m));
    cfisrc_load(&R.src[0], img, &img->eh_frame, 1);
    cfisrc_load(&R.src[1], img, &img->debug_frame, 0);
    R.F.cfi = cfi;
    rw_frames *fs = calloc(1, sizeof *fs);
    if (!fs || !(fs->v = calloc(R.nf ? R.nf : 1, sizeof *fs->v)))
        goto oom;
    for (size_t k = 0; k < R.nf; k++) {
        const icpp_func *f = &R.funcs[k];
        if (f->owner != f->addr)
            continue;           /* a .cold part: analysed with its owner */
        if (analyse_func(&R, f, &fs->v[fs->n++]) < 0)
            goto oom;
    }
    settle_args(fs);
    refuse_entered(fs, &R);
    module_run_free(&R);
    return fs;
oom:
    module_run_free(&R);
    rw_frames_free(fs);
    icpp_err_set(err, ENOMEM, "%s: out of memory analysing functions", icpp_module_path(m));
    return NULL;
}

void rw_frames_free(rw_frames *fs)
{
    if (!fs)
        return;
    for (size_t i = 0; fs->v && i < fs->n; i++) {
        free(fs->v[i].patches);
        free(fs->v[i].tails);
    }
    free(fs->v);
    free(fs);
}

size_t rw_frames_count(const rw_frames *fs) { return fs->n; }
const rw_frame *rw_frames_get(const rw_frames *fs, size_t i) { return &fs->v[i]; }

int rw_frames_tail_reaches(const rw_frames *fs, uint64_t from, uint64_t to)
{
    uint64_t q[64];
    size_t nq = 0, head = 0;
    q[nq++] = from;
    while (head < nq) {
        const rw_frame *f = rw_frames_find(fs, q[head++]);
        for (uint32_t t = 0; f && t < f->ntails; t++) {
            if (f->tails[t] == to)
                return 1;
            int seen = 0;
            for (size_t i = 0; i < nq && !seen; i++)
                seen = q[i] == f->tails[t];
            if (!seen && nq < sizeof q / sizeof *q)
                q[nq++] = f->tails[t];
        }
    }
    return 0;
}

const rw_frame *rw_frames_find(const rw_frames *fs, uint64_t addr)
{
    size_t lo = 0, hi = fs->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fs->v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < fs->n && fs->v[lo].addr == addr ? &fs->v[lo] : NULL;
}

/* Where patches go: the code at a link-time address, and the CFA operand
 * at a file offset (*skip set: not wanted there, e.g. .debug_frame for a
 * clone); NULL is an error. */
typedef struct patch_dst {
    uint8_t *(*code)(void *ctx, uint64_t addr, size_t *avail);
    uint8_t *(*cfa)(void *ctx, uint64_t off, size_t *avail, int *skip);
    void    *ctx;
} patch_dst;

static int patch_to(const rw_frame *f, uint32_t pad, const patch_dst *d, icpp_err *err)
{
    if (f->why || pad == 0 || pad > f->maxpad || pad % 16)
        return icpp_err_set(err, EINVAL, "%s: padding %u is not allowed (max %u)", f->name, pad, f->maxpad);
    for (uint32_t i = 0; i < f->npatches; i++) {
        const rw_patch *p = &f->patches[i];
        size_t avail;
        if (p->kind == RW_P_CFA) {
            icpp_cfa_operand op = {0, p->len, p->sf, 0, p->data_align, p->orig};
            int skip = 0;
            uint8_t *at = d->cfa(d->ctx, p->addr, &avail, &skip);
            if (skip)
                continue;
            if (!at)
                return icpp_err_set(err, ICPP_EFORMAT, "%s: CFA offset at file offset 0x%" PRIx64 " is not in the file",
                                    f->name, p->addr);
            if (icpp_cfaprog_write(at, avail, &op, (int64_t)p->orig + pad, err) < 0)
                return icpp_err_prefix(err, "%s", f->name);
            continue;
        }
        uint8_t *c = d->code(d->ctx, p->addr, &avail);
        if (!c)
            return icpp_err_set(err, ICPP_EFORMAT, "%s: 0x%" PRIx64 " is not in the file", f->name, p->addr);
        /* Re-decode: the bytes must still be the instruction analysed. */
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(rw_decoder(), c, avail, &in, op)))
            return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot decode at 0x%" PRIx64, f->name, p->addr);
        switch (p->kind) {
        case RW_P_IMM8:
        case RW_P_IMM32: {
            int64_t v = (int64_t)p->orig + (int64_t)p->sign * pad;
            size_t size = p->kind == RW_P_IMM8 ? 1 : 4;
            if (in.raw.imm[0].size != size * 8 || in.raw.imm[0].value.s != p->orig ||
                (size == 1 ? (v < INT8_MIN || v > INT8_MAX) : (v < INT32_MIN || v > INT32_MAX)))
                return icpp_err_set(err, EINVAL, "%s: immediate at 0x%" PRIx64 " cannot take %u more", f->name,
                                    p->addr, pad);
            int32_t nv = (int32_t)v;
            uint8_t le[4] = {(uint8_t)nv, (uint8_t)(nv >> 8), (uint8_t)(nv >> 16), (uint8_t)(nv >> 24)};
            memcpy(c + in.raw.imm[0].offset, le, size);
            break;
        }
        case RW_P_DISP8:
        case RW_P_DISP32: {
            int64_t v = (int64_t)p->orig + pad;
            size_t size = p->kind == RW_P_DISP8 ? 1 : 4;
            if (in.raw.disp.size != size * 8 || in.raw.disp.value != p->orig ||
                (size == 1 ? v > INT8_MAX : v > INT32_MAX))
                return icpp_err_set(err, EINVAL, "%s: displacement at 0x%" PRIx64 " cannot take %u more", f->name,
                                    p->addr, pad);
            int32_t nv = (int32_t)v;
            uint8_t le[4] = {(uint8_t)nv, (uint8_t)(nv >> 8), (uint8_t)(nv >> 16), (uint8_t)(nv >> 24)};
            memcpy(c + in.raw.disp.offset, le, size);
            break;
        }
        case RW_P_ENTER:
            if (avail < 4 || c[0] != 0x55 || pad > 0xffff)
                return icpp_err_set(err, EINVAL, "%s: no push %%rbp at 0x%" PRIx64, f->name, p->addr);
            c[0] = 0xc8;
            c[1] = (uint8_t)pad;
            c[2] = (uint8_t)(pad >> 8);
            c[3] = 0;
            break;
        case RW_P_LEAVE:
            if (c[0] != 0x5d)
                return icpp_err_set(err, EINVAL, "%s: no pop %%rbp at 0x%" PRIx64, f->name, p->addr);
            c[0] = 0xc9;
            break;
        default:
            return icpp_err_set(err, EINVAL, "%s: unknown patch", f->name);
        }
    }
    return 0;
}

static uint8_t *img_code(void *ctx, uint64_t addr, size_t *avail)
{
    return rw_image_code(ctx, addr, avail);
}

static uint8_t *img_cfa(void *ctx, uint64_t off, size_t *avail, int *skip)
{
    rw_image *img = ctx;
    (void)skip;
    if (off > img->len)
        return NULL;
    *avail = img->len - off;
    return img->bytes + off;
}

int rw_frame_patch(const rw_frame *f, uint32_t pad, rw_image *img, icpp_err *err)
{
    patch_dst d = {img_code, img_cfa, img};
    return patch_to(f, pad, &d, err);
}

typedef struct copy_dst {
    const rw_copy_win *code, *cfa;
    size_t             ncode, ncfa;
    const rw_image    *img;
} copy_dst;

static uint8_t *in_win(const rw_copy_win *w, size_t n, uint64_t at, size_t *avail)
{
    for (size_t i = 0; i < n; i++)
        if (at >= w[i].lo && at < w[i].lo + w[i].len) {
            *avail = (size_t)(w[i].lo + w[i].len - at);
            return w[i].buf + (at - w[i].lo);
        }
    return NULL;
}

static uint8_t *copy_code(void *ctx, uint64_t addr, size_t *avail)
{
    copy_dst *c = ctx;
    return in_win(c->code, c->ncode, addr, avail);
}

static uint8_t *copy_cfa(void *ctx, uint64_t off, size_t *avail, int *skip)
{
    copy_dst *c = ctx;
    const rw_cfisec *dbg = &c->img->debug_frame;
    if (dbg->size && off >= dbg->off && off < dbg->off + dbg->size) {
        *skip = 1;                  /* the clone's CFI is its .eh_frame FDEs only */
        return NULL;
    }
    return in_win(c->cfa, c->ncfa, off, avail);
}

int rw_frame_patch_copy(const rw_frame *f, uint32_t pad, const rw_copy_win *code, size_t ncode,
                        const rw_copy_win *cfa, size_t ncfa, const rw_image *img, icpp_err *err)
{
    copy_dst c = {code, cfa, ncode, ncfa, img};
    patch_dst d = {copy_code, copy_cfa, &c};
    return patch_to(f, pad, &d, err);
}
