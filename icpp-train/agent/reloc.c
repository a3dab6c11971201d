/* reloc.c -- move a function's first instructions elsewhere (Zydis): rip-relative fix-ups, branches re-encoded. */
#include "reloc.h"

#include <string.h>

#include <Zydis/Zydis.h>

#include "agent.h"
#include "lde.h"
#include "x86stack.h"

/* Branches are emitted by hand, always in their rel32 form (E9, 0F 8x, E8),
 * instead of through ZydisEncoderEncodeInstructionAbsolute: the emitted
 * size then does not depend on the destination (one sizing pass), and the
 * encoder's branch_type/branch_width pitfall (a rel8 request that no longer
 * reaches fails to encode) cannot arise.  Everything else is copied
 * byte-for-byte with only the rip-relative disp32 rewritten, which keeps
 * prefixes, VEX/EVEX and immediates exactly as compiled. */

enum kind {
    K_COPY,       /* copy as is */
    K_RIPMEM,     /* copy, rewrite disp32 */
    K_JMP,        /* E9 rel32 */
    K_JCC,        /* 0F 80+cc rel32 */
    K_LOOP,       /* loop/jrcxz rel8: op +2; EB 05; E9 rel32 */
    K_CALL,       /* FF 35 lit (push [rip+lit]); E9 rel32 */
};

typedef struct insn {
    enum kind kind;
    uint8_t   len;          /* original length */
    uint8_t   off;          /* offset in the original */
    uint8_t   out;          /* emitted length */
    uint8_t   cc;           /* K_JCC condition */
    uint8_t   disp_off;     /* K_RIPMEM: offset of disp32 */
    uint64_t  target;       /* absolute branch target or memory address */
} insn;

static int fits32(int64_t v)
{
    return v >= INT32_MIN && v <= INT32_MAX;
}

static void put32(uint8_t *p, int32_t v)
{
    memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static int fail(const char **why, const char *msg, int reason)
{
    if (why)
        *why = msg;
    return reason;
}

/* Classify one decoded instruction at runtime address ip. */
static int classify(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *ops,
                    uint64_t ip, insn *x, const char **why)
{
    x->kind = K_COPY;
    x->len = in->length;
    x->out = in->length;
    int rel_imm = -1;
    for (int i = 0; i < 2; i++)
        if (in->raw.imm[i].size && in->raw.imm[i].is_relative)
            rel_imm = i;

    if (rel_imm >= 0) {
        x->target = ip + in->length + (uint64_t)in->raw.imm[rel_imm].value.s;
        switch (in->mnemonic) {
        case ZYDIS_MNEMONIC_JMP:
            x->kind = K_JMP;
            x->out = 5;
            return 0;
        case ZYDIS_MNEMONIC_CALL:
            x->kind = K_CALL;
            x->out = 6 + 5;
            return 0;
        case ZYDIS_MNEMONIC_JRCXZ:
        case ZYDIS_MNEMONIC_JECXZ:
        case ZYDIS_MNEMONIC_LOOP:
        case ZYDIS_MNEMONIC_LOOPE:
        case ZYDIS_MNEMONIC_LOOPNE:
            if (in->raw.imm[rel_imm].size != 8)
                return fail(why, "loop/jrcxz with a wide displacement", ICPP_AGENT_R_UNRELOCATABLE);
            x->kind = K_LOOP;
            x->out = (uint8_t)(in->length + 2 + 5);
            return 0;
        default:
            /* Jcc only: 70-7F rel8 or 0F 80-8F rel32 (xbegin is COND_BR too) */
            if ((in->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT && (in->opcode & 0xf0) == 0x70) ||
                (in->opcode_map == ZYDIS_OPCODE_MAP_0F && (in->opcode & 0xf0) == 0x80)) {
                x->kind = K_JCC;
                x->cc = in->opcode & 0x0f;
                x->out = 6;
                return 0;
            }
            return fail(why, "relative operand (xbegin or similar)", ICPP_AGENT_R_UNRELOCATABLE);
        }
    }
    if (in->meta.category == ZYDIS_CATEGORY_CALL)
        return fail(why, "indirect call in the patched bytes", ICPP_AGENT_R_UNRELOCATABLE);
    for (int i = 0; i < in->operand_count; i++) {
        const ZydisDecodedOperand *o = &ops[i];
        if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.base == ZYDIS_REGISTER_RIP) {
            if (in->raw.disp.size != 32)
                return fail(why, "rip-relative operand without disp32", ICPP_AGENT_R_UNRELOCATABLE);
            x->kind = K_RIPMEM;
            x->disp_off = in->raw.disp.offset;
            x->target = ip + in->length + (uint64_t)in->raw.disp.value;
            return 0;
        }
    }
    if (in->attributes & ZYDIS_ATTRIB_IS_RELATIVE)
        return fail(why, "relative operand of an unknown kind", ICPP_AGENT_R_UNRELOCATABLE);
    return 0;
}

/* Pass 1 of icpp_agent_relocate: decode and classify whole instructions
 * from src until at least min_len bytes are covered (xs gets them, *n
 * their count, *nlit the literals their calls need, *src_len the bytes;
 * out->flow_end is set as soon as one ends the flow).  Returns 0 or the
 * reason of a refusal. */
static int decode_range(const uint8_t *src, size_t avail, uint64_t src_addr, size_t min_len,
                        insn xs[ICPP_RELOC_MAX_INSN], size_t *n, size_t *nlit, size_t *src_len,
                        icpp_agent_reloc *out, const char **why)
{
    size_t off = 0;
    while (off < min_len) {
        if (*n == ICPP_RELOC_MAX_INSN)
            return fail(why, "too many instructions", ICPP_AGENT_R_UNRELOCATABLE);
        ZydisDecodedInstruction in;
        ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
        size_t left = avail > off ? avail - off : 0;
        if (left == 0)
            return fail(why, "instruction runs past the function's end", ICPP_AGENT_R_TOO_SHORT);
        ZyanStatus st = ZydisDecoderDecodeFull(icpp_x86_decoder(), src + off, left < 15 ? left : 15, &in, ops);
        if (st == ZYDIS_STATUS_NO_MORE_DATA)
            return fail(why, "instruction runs past the function's end", ICPP_AGENT_R_TOO_SHORT);
        if (!ZYAN_SUCCESS(st))
            return fail(why, "undecodable bytes", ICPP_AGENT_R_UNRELOCATABLE);
        insn *x = &xs[*n];
        int r = classify(&in, ops, src_addr + off, x, why);
        if (r)
            return r;
        x->off = (uint8_t)off;
        if (x->kind == K_CALL) {
            /* The callee returns to the original code after the call; that
             * must not be inside the bytes the jmp overwrites. */
            if (off + in.length < min_len)
                return fail(why, "call returns into the patched bytes", ICPP_AGENT_R_UNRELOCATABLE);
            (*nlit)++;
        }
        off += in.length;
        (*n)++;
        if (!out->flow_end &&
            (in.meta.category == ZYDIS_CATEGORY_RET || in.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
             in.mnemonic == ZYDIS_MNEMONIC_UD2 || in.mnemonic == ZYDIS_MNEMONIC_HLT ||
             in.mnemonic == ZYDIS_MNEMONIC_INT3))
            out->flow_end = (uint32_t)off;
    }
    *src_len = off;
    return 0;
}

/* Emit x (its copy at out->code + dst, runtime address ip) with its
 * branch or memory target tgt; a call's return address goes to the
 * literal at out->code + *lit (dst_addr + *lit at run time), and *lit
 * moves past it.  Returns 0 or the reason of a refusal (a rel32 that
 * cannot reach). */
static int emit_insn(const insn *x, const uint8_t *src, icpp_agent_reloc *out, size_t dst, uint64_t ip,
                     uint64_t tgt, uint64_t src_addr, uint64_t dst_addr, size_t *lit, const char **why)
{
    uint8_t *p = out->code + dst;
    int64_t rel;
    switch (x->kind) {
    case K_COPY:
        memcpy(p, src + x->off, x->len);
        break;
    case K_RIPMEM:
        memcpy(p, src + x->off, x->len);
        rel = (int64_t)(tgt - (ip + x->len));
        if (!fits32(rel))
            return fail(why, "rip-relative target out of reach", ICPP_AGENT_R_UNRELOCATABLE);
        put32(p + x->disp_off, (int32_t)rel);
        break;
    case K_JMP:
        rel = (int64_t)(tgt - (ip + 5));
        if (!fits32(rel))
            return fail(why, "jmp target out of reach", ICPP_AGENT_R_UNRELOCATABLE);
        p[0] = 0xe9;
        put32(p + 1, (int32_t)rel);
        break;
    case K_JCC:
        rel = (int64_t)(tgt - (ip + 6));
        if (!fits32(rel))
            return fail(why, "jcc target out of reach", ICPP_AGENT_R_UNRELOCATABLE);
        p[0] = 0x0f;
        p[1] = (uint8_t)(0x80 | x->cc);
        put32(p + 2, (int32_t)rel);
        break;
    case K_LOOP: {
        /* op(+2) -> taken path lands on the jmp rel32; fall through skips it */
        memcpy(p, src + x->off, x->len - 1u);
        p[x->len - 1] = 2;
        p[x->len] = 0xeb;
        p[x->len + 1] = 5;
        uint64_t jip = ip + x->len + 2;
        rel = (int64_t)(tgt - (jip + 5));
        if (!fits32(rel))
            return fail(why, "loop target out of reach", ICPP_AGENT_R_UNRELOCATABLE);
        p[x->len + 2] = 0xe9;
        put32(p + x->len + 3, (int32_t)rel);
        break;
    }
    case K_CALL: {
        uint64_t ret = src_addr + x->off + x->len;
        p[0] = 0xff;
        p[1] = 0x35;
        put32(p + 2, (int32_t)((int64_t)(dst_addr + *lit) - (int64_t)(ip + 6)));
        put64(out->code + *lit, ret);
        *lit += 8;
        rel = (int64_t)(tgt - (ip + 11));
        if (!fits32(rel))
            return fail(why, "call target out of reach", ICPP_AGENT_R_UNRELOCATABLE);
        p[6] = 0xe9;
        put32(p + 7, (int32_t)rel);
        break;
    }
    }
    return 0;
}

int icpp_agent_relocate(const uint8_t *src, size_t avail, uint64_t src_addr, size_t min_len,
                        uint64_t dst_addr, icpp_agent_reloc *out, const char **why)
{
    insn xs[ICPP_RELOC_MAX_INSN];
    size_t n = 0, outlen = 0, nlit = 0, src_len = 0;
    memset(out, 0, sizeof *out);
    if (min_len == 0)
        min_len = 1;

    /* Pass 1: decode and size. */
    int r = decode_range(src, avail, src_addr, min_len, xs, &n, &nlit, &src_len, out, why);
    if (r)
        return r;
    for (size_t i = 0; i < n; i++) {
        out->src_off[i] = xs[i].off;
        out->dst_off[i] = (uint8_t)outlen;
        outlen += xs[i].out;
    }
    size_t jmp_back = outlen;
    outlen += 5;
    size_t lit0 = (outlen + 7) & ~(size_t)7;
    size_t total = lit0 + 8 * nlit;
    if (total > ICPP_RELOC_MAX_CODE)
        return fail(why, "relocated code too large", ICPP_AGENT_R_UNRELOCATABLE);

    /* Pass 2: emit at dst_addr. */
    uint64_t lo = src_addr + src_len, hi = src_addr + src_len;
    size_t lit = lit0;
    for (size_t i = 0; i < n; i++) {
        const insn *x = &xs[i];
        uint64_t tgt = x->target;
        if (x->kind == K_JMP || x->kind == K_JCC || x->kind == K_LOOP) {
            /* A branch back into the moved bytes goes to their copy. */
            if (tgt >= src_addr && tgt < src_addr + src_len) {
                size_t k;
                for (k = 0; k < n && src_addr + xs[k].off != tgt; k++)
                    ;
                if (k == n)
                    return fail(why, "branch into the middle of a moved instruction",
                                ICPP_AGENT_R_UNRELOCATABLE);
                tgt = dst_addr + out->dst_off[k];
            } else {
                lo = tgt < lo ? tgt : lo;
                hi = tgt > hi ? tgt : hi;
            }
        } else if (x->kind != K_COPY) {
            lo = tgt < lo ? tgt : lo;
            hi = tgt > hi ? tgt : hi;
        }
        r = emit_insn(x, src, out, out->dst_off[i], dst_addr + out->dst_off[i], tgt, src_addr, dst_addr, &lit, why);
        if (r)
            return r;
    }
    int64_t back = (int64_t)(src_addr + src_len - (dst_addr + jmp_back + 5));
    if (!fits32(back))
        return fail(why, "jmp back out of reach", ICPP_AGENT_R_UNRELOCATABLE);
    out->code_end = (uint32_t)jmp_back;
    out->code[jmp_back] = 0xe9;
    put32(out->code + jmp_back + 1, (int32_t)back);
    for (size_t i = jmp_back + 5; i < lit0; i++)
        out->code[i] = 0xcc;            /* never executed: padding before literals */
    out->size = (uint32_t)total;
    out->src_len = (uint32_t)src_len;
    out->ninsn = (uint32_t)n;
    out->ref_lo = lo;
    out->ref_hi = hi;
    return 0;
}

size_t icpp_agent_branch_target(const uint8_t *code, size_t avail, uint64_t addr, uint64_t *target)
{
    icpp_lde_insn in;
    size_t len = icpp_lde_decode(code, avail, &in);
    *target = len && in.rel_size ? addr + len + (uint64_t)(int64_t)in.rel : 0;
    return len;
}

size_t icpp_agent_padding(const uint8_t *code, size_t avail)
{
    size_t off = 0;
    while (off < avail) {
        if (code[off] == 0xcc) {
            off++;
            continue;
        }
        icpp_lde_insn in;
        size_t len = icpp_lde_decode(code + off, avail - off, &in);
        if (!len || !icpp_lde_is_nop(&in))
            break;
        off += len;
    }
    return off;
}
