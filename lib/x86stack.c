/* x86stack.c -- the x86-64 stack model: one decoder, instruction classes and each instruction's effect on rsp and rbp. */
#include "x86stack.h"

#include <string.h>

const ZydisDecoder *icpp_x86_decoder(void)
{
    static ZydisDecoder d;
    static int ready;
    if (!ready) {
        ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        ready = 1;
    }
    return &d;
}

static int is_reg(const ZydisDecodedOperand *o, ZydisRegister r)
{
    return o && o->type == ZYDIS_OPERAND_TYPE_REGISTER && o->reg.value == r;
}

/* Visible operands: memory references and pointers through rsp or rbp. */
static void frame_refs(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, icpp_x86_insn *x,
                       icpp_x86_detail *d)
{
    for (uint8_t i = 0; i < in->operand_count_visible; i++) {
        const ZydisDecodedOperand *o = &op[i];
        int r = o->type == ZYDIS_OPERAND_TYPE_REGISTER && (o->actions & ZYDIS_OPERAND_ACTION_MASK_READ) &&
                !(o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE);
        if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
            int agen = o->mem.type == ZYDIS_MEMOP_TYPE_AGEN;
            if (icpp_x86_is_rsp(o->mem.base) || icpp_x86_is_rsp(o->mem.index)) {
                x->flags |= agen ? ICPP_X86_F_RSP_PTR : ICPP_X86_F_RSP_MEM;
                if (o->mem.index != ZYDIS_REGISTER_NONE || !icpp_x86_is_rsp(o->mem.base))
                    x->flags |= ICPP_X86_F_RSP_IDX;
                d->sdisp = (int32_t)o->mem.disp.value;
                d->ssize = (uint16_t)(o->size / 8 ? o->size / 8 : 1);
                d->disp_size = (uint8_t)(in->raw.disp.size / 8);
            } else if (icpp_x86_is_rbp(o->mem.base)) {
                x->flags |= ICPP_X86_F_RBP_REF;
                d->bdisp = (int32_t)o->mem.disp.value;
            }
        } else if (r && icpp_x86_is_rsp(o->reg.value)) {
            x->flags |= ICPP_X86_F_RSP_PTR;     /* rsp's value read into something else */
            d->sdisp = 0;
        } else if (r && icpp_x86_is_rbp(o->reg.value)) {
            x->flags |= ICPP_X86_F_RBP_VAL;
        }
    }
}

/* A call, branch or return (Zydis's category c). */
static void branch(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a,
                   ZydisInstructionCategory c, icpp_x86_insn *x)
{
    if (c == ZYDIS_CATEGORY_RET) {
        x->kind = ICPP_X86_RET;
        return;
    }
    const ZydisDecodedOperand *o0 = in->operand_count_visible > 0 ? &op[0] : NULL;
    int imm = o0 && o0->type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
    uint64_t t;
    x->kind = c == ZYDIS_CATEGORY_CALL ? ICPP_X86_CALL
            : c == ZYDIS_CATEGORY_COND_BR ? ICPP_X86_JCC
            : imm ? ICPP_X86_JMP : ICPP_X86_JMP_IND;
    if (imm && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, o0, a, &t))) {
        x->flags |= ICPP_X86_F_DIRECT;
        x->target = t;
    } else if (x->kind != ICPP_X86_JCC && !imm && o0 && o0->type == ZYDIS_OPERAND_TYPE_MEMORY &&
               o0->mem.base == ZYDIS_REGISTER_RIP && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, o0, a, &t))) {
        x->target = t;      /* call/jmp *slot(%rip) */
    }
}

/* add/sub $imm,%rsp; 0 if it is not one. */
static int adjust(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *o0, const ZydisDecodedOperand *o1,
                  unsigned rules, icpp_x86_insn *x)
{
    if (!is_reg(o0, ZYDIS_REGISTER_RSP) || !o1 || o1->type != ZYDIS_OPERAND_TYPE_IMMEDIATE || !in->raw.imm[0].size ||
        in->operand_width != 64)
        return 0;
    int64_t v = o1->imm.value.s;
    int ok = rules & ICPP_X86_ADJ_ANY ? v >= INT32_MIN / 2 && v <= INT32_MAX / 2
                                      : v >= INT32_MIN && v <= INT32_MAX && v % 8 == 0;
    if (!ok) {
        x->kind = ICPP_X86_RSP_BAD;
        return 1;
    }
    x->kind = ICPP_X86_ADJ;
    x->delta = (int32_t)(in->mnemonic == ZYDIS_MNEMONIC_SUB ? v : -v);
    return 1;
}

/* mov %rbp,%rsp / mov %rsp,%rbp and the lea forms; 0 if it is none. */
static int move(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *o0, const ZydisDecodedOperand *o1,
                unsigned rules, icpp_x86_insn *x)
{
    if (!o0 || !o1 || o0->type != ZYDIS_OPERAND_TYPE_REGISTER)
        return 0;
    ZydisRegister to = o0->reg.value, from;
    int32_t d = 0;
    if (in->mnemonic == ZYDIS_MNEMONIC_MOV && o1->type == ZYDIS_OPERAND_TYPE_REGISTER) {
        from = o1->reg.value;
    } else if (in->mnemonic == ZYDIS_MNEMONIC_LEA && o1->mem.index == ZYDIS_REGISTER_NONE) {
        from = o1->mem.base;
        d = (int32_t)o1->mem.disp.value;
    } else {
        return 0;
    }
    if (to == ZYDIS_REGISTER_RSP && from == ZYDIS_REGISTER_RBP) {
        x->kind = ICPP_X86_RSP_FROM_RBP;
        x->rdisp = d;
    } else if (to == ZYDIS_REGISTER_RBP && from == ZYDIS_REGISTER_RSP) {
        x->kind = ICPP_X86_RBP_FROM_RSP;
        x->rdisp = d;
    } else if (to == ZYDIS_REGISTER_RSP && from == ZYDIS_REGISTER_RSP && in->mnemonic == ZYDIS_MNEMONIC_LEA &&
               (rules & ICPP_X86_LEA_ADJ)) {
        x->kind = ICPP_X86_ADJ;
        x->delta = (int32_t)-(int64_t)d;
    } else {
        return 0;
    }
    return 1;
}

void icpp_x86_classify(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a, unsigned rules,
                       icpp_x86_insn *x)
{
    *x = (icpp_x86_insn){.addr = a, .len = in->length, .kind = ICPP_X86_OTHER};
    ZydisMnemonic m = in->mnemonic;
    switch (in->meta.category) {
    case ZYDIS_CATEGORY_CALL:
    case ZYDIS_CATEGORY_UNCOND_BR:
    case ZYDIS_CATEGORY_COND_BR:
    case ZYDIS_CATEGORY_RET:
        branch(in, op, a, in->meta.category, x);
        return;
    case ZYDIS_CATEGORY_NOP:
    case ZYDIS_CATEGORY_WIDENOP:
        if (rules & ICPP_X86_NO_PAD)
            break;
        /* Zydis files endbr64 under ZYDIS_CATEGORY_CET, so it never gets
         * here: ICPP_X86_F_ENDBR is never set today (an endbr64 is OTHER).
         * Setting it would change which functions icpp-rewrite --enter
         * accepts; kept as it was. */
        if (m == ZYDIS_MNEMONIC_ENDBR64)
            x->flags |= ICPP_X86_F_ENDBR;
        else
            x->kind = ICPP_X86_PAD;
        return;
    default:
        break;
    }
    const ZydisDecodedOperand *o0 = in->operand_count_visible > 0 ? &op[0] : NULL;
    const ZydisDecodedOperand *o1 = in->operand_count_visible > 1 ? &op[1] : NULL;
    switch (m) {
    case ZYDIS_MNEMONIC_INT3:
        x->kind = rules & ICPP_X86_NO_PAD ? ICPP_X86_STOP : ICPP_X86_PAD;
        return;
    case ZYDIS_MNEMONIC_UD2:
    case ZYDIS_MNEMONIC_HLT:
        x->kind = ICPP_X86_STOP;
        return;
    case ZYDIS_MNEMONIC_PUSH:
    case ZYDIS_MNEMONIC_PUSHFQ:
        x->kind = in->operand_width == 64 ? ICPP_X86_PUSH : ICPP_X86_RSP_BAD;
        x->delta = 8;
        return;
    case ZYDIS_MNEMONIC_POP:
    case ZYDIS_MNEMONIC_POPFQ:
        if (in->operand_width != 64 || (o0 && o0->type == ZYDIS_OPERAND_TYPE_REGISTER && icpp_x86_is_rsp(o0->reg.value))) {
            x->kind = ICPP_X86_RSP_BAD;
            return;
        }
        x->kind = ICPP_X86_POP;
        x->delta = -8;
        if (o0 && o0->type == ZYDIS_OPERAND_TYPE_REGISTER && icpp_x86_is_rbp(o0->reg.value))
            x->flags |= ICPP_X86_F_POP_RBP;
        return;
    case ZYDIS_MNEMONIC_LEAVE:
        x->kind = ICPP_X86_LEAVE;
        return;
    case ZYDIS_MNEMONIC_ADD:
    case ZYDIS_MNEMONIC_SUB:
        if (adjust(in, o0, o1, rules, x))
            return;
        break;
    case ZYDIS_MNEMONIC_MOV:
    case ZYDIS_MNEMONIC_LEA:
        if (move(in, o0, o1, rules, x))
            return;
        break;
    default:
        break;
    }
    /* Writes to rsp or rbp, visible or not. */
    for (uint8_t i = 0; i < in->operand_count; i++) {
        const ZydisDecodedOperand *o = &op[i];
        if (o->type != ZYDIS_OPERAND_TYPE_REGISTER || !(o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE))
            continue;
        if (icpp_x86_is_rsp(o->reg.value))
            x->kind = ICPP_X86_RSP_BAD;
        if (icpp_x86_is_rbp(o->reg.value))
            x->flags |= ICPP_X86_F_RBP_W;
    }
}

/* An operand that is the class itself is no frame reference: the rsp a
 * call pushes its return address through, the rsp that add/sub adjusts, the
 * rsp that mov/lea copies to rbp, the rbp that lea turns into rsp. */
void icpp_x86_details(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, icpp_x86_insn *x,
                      icpp_x86_detail *d)
{
    memset(d, 0, sizeof *d);
    frame_refs(in, op, x, d);
    ZydisMnemonic m = in->mnemonic;
    switch (x->kind) {
    case ICPP_X86_CALL:
    case ICPP_X86_RBP_FROM_RSP:
        x->flags &= (uint16_t)~ICPP_X86_F_RSP_PTR;
        break;
    case ICPP_X86_ADJ:
        if (m == ZYDIS_MNEMONIC_ADD || m == ZYDIS_MNEMONIC_SUB) {    /* not lea (ICPP_X86_LEA_ADJ) */
            x->flags &= (uint16_t)~ICPP_X86_F_RSP_PTR;
            d->imm = (int32_t)op[1].imm.value.s;
            d->imm_size = in->raw.imm[0].size;
        }
        break;
    case ICPP_X86_RSP_FROM_RBP:
        if (m == ZYDIS_MNEMONIC_LEA)
            x->flags &= (uint16_t)~ICPP_X86_F_RBP_REF;
        break;
    default:
        break;
    }
}
