/* x86stack.h -- the x86-64 stack model: one decoder, instruction classes and each instruction's effect on rsp and rbp. */
#ifndef ICPP_X86STACK_H
#define ICPP_X86STACK_H

#include <stddef.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

/* Two analyses walk machine code and follow the stack pointer: the call
 * graph (lib/callgraph.h: the stack each call adds) and icpp-rewrite's frame
 * analysis (icpp-rewrite/frame.h: which frames can grow).  Both classify each
 * instruction here and take its effect on rsp and rbp from
 * icpp_x86_effect(), so a change to how an instruction moves the stack is
 * made once.  What each analysis does with the result (merging paths,
 * refusing a function, following branches) stays with it. */

/* The x86-64 decoder (64-bit mode, 64-bit stack), set up on first use.  Not
 * thread-safe on that first call; the tools decode from one thread, the
 * training agent under its patching lock. */
const ZydisDecoder *icpp_x86_decoder(void);

/* rsp / rbp or a part of them (esp, sp, spl / ebp, bp, bpl).  (Inline: asked of
 * every operand the classification looks at.) */
static inline int icpp_x86_is_rsp(ZydisRegister r)
{
    return r == ZYDIS_REGISTER_RSP || r == ZYDIS_REGISTER_ESP || r == ZYDIS_REGISTER_SP || r == ZYDIS_REGISTER_SPL;
}

static inline int icpp_x86_is_rbp(ZydisRegister r)
{
    return r == ZYDIS_REGISTER_RBP || r == ZYDIS_REGISTER_EBP || r == ZYDIS_REGISTER_BP || r == ZYDIS_REGISTER_BPL;
}

/* What an instruction does to the stack and to control flow. */
typedef enum icpp_x86_kind {
    ICPP_X86_OTHER = 0,     /* falls through; rsp untouched (rbp too unless ICPP_X86_F_RBP_W) */
    ICPP_X86_PAD,           /* nop, int3: padding between code (never with ICPP_X86_NO_PAD) */
    ICPP_X86_PUSH,          /* a 64-bit push: rsp -= 8 (delta 8) */
    ICPP_X86_POP,           /* a 64-bit pop: rsp += 8 (delta -8); into rbp: ICPP_X86_F_POP_RBP */
    ICPP_X86_ADJ,           /* add/sub $imm,%rsp (with ICPP_X86_LEA_ADJ also lea d(%rsp),%rsp): rsp -= delta */
    ICPP_X86_LEAVE,         /* rsp = rbp + 8, rbp = the caller's */
    ICPP_X86_RSP_FROM_RBP,  /* mov %rbp,%rsp / lea rdisp(%rbp),%rsp: rsp = rbp + rdisp */
    ICPP_X86_RBP_FROM_RSP,  /* mov %rsp,%rbp / lea rdisp(%rsp),%rbp: rbp = rsp + rdisp */
    ICPP_X86_RSP_BAD,       /* any other write to rsp (alloca, realignment, a 16-bit push, enter) */
    ICPP_X86_CALL,          /* direct (ICPP_X86_F_DIRECT: target) or indirect (target: the slot, if any) */
    ICPP_X86_RET,
    ICPP_X86_JMP,           /* jmp to an immediate (ICPP_X86_F_DIRECT unless its target cannot be computed) */
    ICPP_X86_JMP_IND,       /* jmp *reg / jmp *mem (target: the slot, if any) */
    ICPP_X86_JCC,           /* conditional (ICPP_X86_F_DIRECT when its operand is a computable immediate) */
    ICPP_X86_STOP,          /* ud2, hlt (and int3 with ICPP_X86_NO_PAD): no way on */
} icpp_x86_kind;

/* Flags of a classified instruction.  The F_RSP_* and F_RBP_REF / F_RBP_VAL
 * ones (the frame references) come from icpp_x86_details(), which only the
 * frame analysis asks. */
enum {
    ICPP_X86_F_RBP_W   = 1 << 0,    /* writes rbp other than by the kinds above (with RSP_BAD: see icpp_x86_effect) */
    ICPP_X86_F_POP_RBP = 1 << 1,    /* ICPP_X86_POP into rbp: rbp becomes the caller's */
    ICPP_X86_F_RSP_MEM = 1 << 2,    /* a memory operand based on (or indexed by) rsp: sdisp, ssize, disp_size */
    ICPP_X86_F_RSP_IDX = 1 << 3,    /* ... with an index register */
    ICPP_X86_F_RSP_PTR = 1 << 4,    /* rsp's value (or an rsp-based address) goes into a register */
    ICPP_X86_F_RBP_REF = 1 << 5,    /* a memory operand or address based on rbp: bdisp */
    ICPP_X86_F_DIRECT  = 1 << 6,    /* a branch or call whose target is valid */
    ICPP_X86_F_ENDBR   = 1 << 7,    /* endbr64 in Zydis's NOP category (it is in CET: never set, x86stack.c) */
    ICPP_X86_F_RBP_VAL = 1 << 8,    /* rbp's value read into something else (a frame pointer's copy escapes) */
};

/* One instruction, classified: what the walks over a function keep for each
 * of its instructions, so small (24 bytes) and read in address order. */
typedef struct icpp_x86_insn {
    uint64_t addr;          /* its address */
    uint64_t target;        /* ICPP_X86_F_DIRECT: the branch target; an indirect call or jmp through
                               *disp(%rip): the slot's address; else 0 */
    union {
        int32_t delta;      /* PUSH, POP, ADJ: bytes rsp moves down (negative: up) */
        int32_t rdisp;      /* RSP_FROM_RBP, RBP_FROM_RSP: the displacement (0 for mov) */
    };
    uint16_t flags;         /* ICPP_X86_F_* */
    uint8_t  len;           /* bytes */
    uint8_t  kind;          /* icpp_x86_kind */
} icpp_x86_insn;
_Static_assert(sizeof(icpp_x86_insn) == 24, "icpp_x86_insn: keep the walks' arrays small");

/* The operands that reach the frame, and an adjustment's immediate: what
 * icpp-rewrite's frame analysis checks and patches beside the class (the
 * call graph never asks).  Zero where the instruction has none. */
typedef struct icpp_x86_detail {
    int32_t  imm;           /* ADJ by add/sub: the immediate as encoded (sign-extended) */
    int32_t  sdisp;         /* ICPP_X86_F_RSP_MEM / F_RSP_PTR: the rsp-based operand's displacement */
    int32_t  bdisp;         /* ICPP_X86_F_RBP_REF: the rbp-based operand's displacement */
    uint16_t ssize;         /* ICPP_X86_F_RSP_MEM: bytes accessed */
    uint8_t  disp_size;     /* bytes of the rsp-based operand's displacement (0, 1 or 4) */
    uint8_t  imm_size;      /* ADJ by add/sub: the immediate's size in bits (8 or 32) */
} icpp_x86_detail;

/* Rules of classification.  The call graph and the frame analysis have
 * always decided these cases differently; each keeps its answer.
 *   ICPP_X86_LEA_ADJ   `lea d(%rsp),%rsp` is an ADJ (else RSP_BAD).
 *   ICPP_X86_ADJ_ANY   `add/sub $imm,%rsp` is an ADJ for any |imm| <= 2^30
 *                      (else for a multiple of 8 within 32 bits; other
 *                      immediates are RSP_BAD).
 *   ICPP_X86_NO_PAD    nop is an ordinary instruction and int3 a STOP
 *                      (else both are PAD). */
enum {
    ICPP_X86_LEA_ADJ = 1 << 0,
    ICPP_X86_ADJ_ANY = 1 << 1,
    ICPP_X86_NO_PAD  = 1 << 2,
};
#define ICPP_X86_RULES_CALLGRAPH (ICPP_X86_LEA_ADJ | ICPP_X86_ADJ_ANY | ICPP_X86_NO_PAD)
#define ICPP_X86_RULES_REWRITE   0

/* Classify the instruction `in` (operands `op`, as ZydisDecoderDecodeFull
 * gives them) at address a into *x under `rules` (ICPP_X86_* above).  Its
 * frame references are not looked at: the F_RSP_* / F_RBP_REF / F_RBP_VAL
 * flags stay clear. */
void icpp_x86_classify(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a, unsigned rules,
                       icpp_x86_insn *x);
/* Then, for the frame analysis: the frame references of `in` (classified
 * as x): their flags into x, the numbers (and an adjustment's immediate)
 * into *d. */
void icpp_x86_details(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, icpp_x86_insn *x,
                      icpp_x86_detail *d);

/* Where rsp and rbp are: offsets from one fixed point (the CFA, the entry
 * stack pointer), each known or not.  64 bits: no sum of 32-bit offsets
 * overflows. */
typedef struct icpp_x86_regs {
    int64_t rsp, rbp;       /* valid only when known */
    uint8_t rsp_known, rbp_known;
} icpp_x86_regs;

/* The registers after instruction x, given them before it.  A register an
 * instruction derives from an unknown one is unknown; rbp becomes unknown
 * when restored to the caller's (pop %rbp, leave) or written otherwise
 * (ICPP_X86_F_RBP_W).  RSP_BAD makes rsp unknown and leaves rbp alone even
 * when it writes rbp too (enter, xchg %rsp,%rbp): the call graph has always
 * done so (the CFI resynchronises rbp), the frame analysis refuses RSP_BAD.
 * Branches, calls and every other kind change nothing.  (Inline: the walks
 * call it at every instruction they visit.) */
static inline icpp_x86_regs icpp_x86_effect(const icpp_x86_insn *x, icpp_x86_regs s)
{
    icpp_x86_regs n = s;
    if (x->kind < ICPP_X86_PUSH || x->kind > ICPP_X86_RSP_BAD) {     /* most instructions: rsp stays */
        if (x->flags & ICPP_X86_F_RBP_W)
            n.rbp_known = 0;
    } else switch (x->kind) {
    case ICPP_X86_PUSH:
    case ICPP_X86_POP:
    case ICPP_X86_ADJ:
        n.rsp = s.rsp - x->delta;
        if (x->flags & ICPP_X86_F_POP_RBP)
            n.rbp_known = 0;
        break;
    case ICPP_X86_LEAVE:
        n.rsp = s.rbp + 8;
        n.rsp_known = s.rbp_known;
        n.rbp_known = 0;
        break;
    case ICPP_X86_RSP_FROM_RBP:
        n.rsp = s.rbp + x->rdisp;
        n.rsp_known = s.rbp_known;
        break;
    case ICPP_X86_RBP_FROM_RSP:
        n.rbp = s.rsp + x->rdisp;
        n.rbp_known = s.rsp_known;
        break;
    default:        /* ICPP_X86_RSP_BAD */
        n.rsp_known = 0;
        break;
    }
    if (!n.rsp_known)
        n.rsp = 0;
    if (!n.rbp_known)
        n.rbp = 0;
    return n;
}

/* Index of the instruction starting at addr in v[0..n) (sorted by addr), or SIZE_MAX. */
static inline size_t icpp_x86_find(const icpp_x86_insn *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].addr == addr ? lo : SIZE_MAX;
}

#endif
