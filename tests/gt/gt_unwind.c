/* gt_unwind.c -- DWARF CFI unwinder over a sampled register set and stack copy. */
#include "gt_unwind.h"

#include <dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *gt_status_name(gt_status s)
{
    static const char *const names[] = {
        [GT_ROOT] = "root",     [GT_RA0] = "ra0",     [GT_NOREGS] = "noregs",
        [GT_NOMAP] = "nomap",   [GT_NOMOD] = "nomod", [GT_NOCFI] = "nocfi",
        [GT_NOCFA] = "nocfa",   [GT_EXPR] = "expr",   [GT_MEM] = "mem",
        [GT_UNDEF] = "undef",   [GT_LOOP] = "loop",   [GT_DEPTH] = "depth",
    };
    return names[s];
}

static bool mem_read(const gt_stack *st, uint64_t addr, unsigned size,
                     uint64_t *out)
{
    if (addr < st->sp || addr - st->sp > st->size || st->size - (addr - st->sp) < size)
        return false;
    uint64_t v = 0;
    memcpy(&v, st->data + (addr - st->sp), size);
    *out = v;
    return true;
}

/* Evaluate a CFI expression.  CFA is pushed by DW_OP_call_frame_cfa (libdw
 * starts register rules with it).  *is_value: the expression ended with
 * DW_OP_stack_value, so the result is the value, not its address. */
static gt_status eval(const Dwarf_Op *ops, size_t nops, const gt_regs *rg,
                      const gt_stack *st, uint64_t cfa, bool have_cfa,
                      uint64_t *out, bool *is_value)
{
    uint64_t stk[64];
    int sp = 0;
    *is_value = false;
#define NEED(n) do { if (sp < (n)) return GT_EXPR; } while (0)
#define PUSH(v) do { uint64_t v_ = (v); if (sp == 64) return GT_EXPR; stk[sp] = v_; sp++; } while (0)
    for (size_t i = 0; i < nops; i++) {
        const Dwarf_Op *op = &ops[i];
        uint8_t a = op->atom;
        uint64_t x, y;
        if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
            PUSH((uint64_t)(a - DW_OP_lit0));
            continue;
        }
        if (a >= DW_OP_breg0 && a <= DW_OP_breg31) {
            unsigned r = a - DW_OP_breg0;
            if (r >= GT_NREGS || !(rg->valid & (1u << r)))
                return GT_UNDEF;
            PUSH(rg->r[r] + op->number);
            continue;
        }
        switch (a) {
        case DW_OP_bregx:
            if (op->number >= GT_NREGS || !(rg->valid & (1u << op->number)))
                return GT_UNDEF;
            PUSH(rg->r[op->number] + op->number2);
            break;
        case DW_OP_call_frame_cfa:
            if (!have_cfa)
                return GT_EXPR;
            PUSH(cfa);
            break;
        case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u:
        case DW_OP_const2s: case DW_OP_const4u: case DW_OP_const4s:
        case DW_OP_const8u: case DW_OP_const8s: case DW_OP_constu:
        case DW_OP_consts: case DW_OP_addr:
            PUSH(op->number);
            break;
        case DW_OP_dup:  NEED(1); PUSH(stk[sp - 1]); break;
        case DW_OP_drop: NEED(1); sp--; break;
        case DW_OP_over: NEED(2); PUSH(stk[sp - 2]); break;
        case DW_OP_pick:
            if (op->number >= (uint64_t)sp)
                return GT_EXPR;
            PUSH(stk[sp - 1 - op->number]);
            break;
        case DW_OP_swap:
            NEED(2);
            x = stk[sp - 1]; stk[sp - 1] = stk[sp - 2]; stk[sp - 2] = x;
            break;
        case DW_OP_rot:
            NEED(3);
            x = stk[sp - 1]; stk[sp - 1] = stk[sp - 2];
            stk[sp - 2] = stk[sp - 3]; stk[sp - 3] = x;
            break;
        case DW_OP_deref:
            NEED(1);
            if (!mem_read(st, stk[sp - 1], 8, &stk[sp - 1]))
                return GT_MEM;
            break;
        case DW_OP_deref_size:
            NEED(1);
            if (op->number == 0 || op->number > 8 ||
                !mem_read(st, stk[sp - 1], (unsigned)op->number, &stk[sp - 1]))
                return GT_MEM;
            break;
        case DW_OP_plus_uconst: NEED(1); stk[sp - 1] += op->number; break;
        case DW_OP_neg: NEED(1); stk[sp - 1] = -stk[sp - 1]; break;
        case DW_OP_not: NEED(1); stk[sp - 1] = ~stk[sp - 1]; break;
        case DW_OP_abs:
            NEED(1);
            if ((int64_t)stk[sp - 1] < 0)
                stk[sp - 1] = -stk[sp - 1];
            break;
        case DW_OP_plus: case DW_OP_minus: case DW_OP_mul: case DW_OP_and:
        case DW_OP_or: case DW_OP_xor: case DW_OP_shl: case DW_OP_shr:
        case DW_OP_shra: case DW_OP_div: case DW_OP_mod:
        case DW_OP_eq: case DW_OP_ne: case DW_OP_lt: case DW_OP_le:
        case DW_OP_gt: case DW_OP_ge:
            NEED(2);
            y = stk[--sp];
            x = stk[sp - 1];
            switch (a) {
            case DW_OP_plus:  x += y; break;
            case DW_OP_minus: x -= y; break;
            case DW_OP_mul:   x *= y; break;
            case DW_OP_and:   x &= y; break;
            case DW_OP_or:    x |= y; break;
            case DW_OP_xor:   x ^= y; break;
            case DW_OP_shl:   x = y < 64 ? x << y : 0; break;
            case DW_OP_shr:   x = y < 64 ? x >> y : 0; break;
            case DW_OP_shra:  x = (uint64_t)((int64_t)x >> (y < 63 ? y : 63)); break;
            case DW_OP_div:
                if (y == 0) return GT_EXPR;
                x = (uint64_t)((int64_t)x / (int64_t)y);
                break;
            case DW_OP_mod:
                if (y == 0) return GT_EXPR;
                x %= y;
                break;
            case DW_OP_eq: x = (int64_t)x == (int64_t)y; break;
            case DW_OP_ne: x = (int64_t)x != (int64_t)y; break;
            case DW_OP_lt: x = (int64_t)x <  (int64_t)y; break;
            case DW_OP_le: x = (int64_t)x <= (int64_t)y; break;
            case DW_OP_gt: x = (int64_t)x >  (int64_t)y; break;
            case DW_OP_ge: x = (int64_t)x >= (int64_t)y; break;
            }
            stk[sp - 1] = x;
            break;
        case DW_OP_skip: case DW_OP_bra: {
            if (a == DW_OP_bra) {
                NEED(1);
                if (stk[--sp] == 0)
                    break;
            }
            /* Branch target: byte offset after this 3-byte op plus the
             * signed 16-bit operand; find the op that starts there. */
            uint64_t target = op->offset + 3 + (uint64_t)(int64_t)(int16_t)op->number;
            size_t j;
            for (j = 0; j < nops && ops[j].offset != target; j++)
                ;
            i = j - 1;      /* the loop's i++ lands on j (j == nops: end) */
            break;
        }
        case DW_OP_nop:
            break;
        case DW_OP_stack_value:
            *is_value = true;
            i = nops;
            break;
        default:
            return GT_EXPR;
        }
    }
#undef NEED
#undef PUSH
    if (sp < 1)
        return GT_EXPR;
    *out = stk[sp - 1];
    return GT_ROOT;     /* "ok" */
}

/* The caller's value of register REGNO.  Returns GT_ROOT if known (*out),
 * GT_UNDEF if CFI says undefined, else an error status. */
static gt_status caller_reg(Dwarf_Frame *df, int regno, const gt_regs *rg,
                            const gt_stack *st, uint64_t cfa, uint64_t *out)
{
    Dwarf_Op mem[3], *ops;
    size_t nops;
    if (dwarf_frame_register(df, regno, mem, &ops, &nops) != 0)
        return GT_EXPR;
    if (nops == 0) {
        if (ops == mem)
            return GT_UNDEF;    /* "undefined" */
        if (!(rg->valid & (1u << regno)))
            return GT_UNDEF;    /* "same value" of an unknown register */
        *out = rg->r[regno];
        return GT_ROOT;
    }
    uint64_t v;
    bool is_value;
    gt_status s = eval(ops, nops, rg, st, cfa, true, &v, &is_value);
    if (s != GT_ROOT)
        return s;
    if (is_value) {
        *out = v;
        return GT_ROOT;
    }
    return mem_read(st, v, 8, out) ? GT_ROOT : GT_MEM;
}

static const char *cfa_rule_name(const Dwarf_Op *ops, size_t nops)
{
    static const char *const rn[GT_NREGS] = {
        "r0", "r1", "r2", "r3", "r4", "r5", "rbp", "rsp", "r8", "r9", "r10",
        "r11", "r12", "r13", "r14", "r15", "r16",
    };
    if (nops == 1 && ops[0].atom == DW_OP_bregx && ops[0].number < GT_NREGS)
        return rn[ops[0].number];
    if (nops == 1 && ops[0].atom >= DW_OP_breg0 &&
        ops[0].atom < DW_OP_breg0 + GT_NREGS)
        return rn[ops[0].atom - DW_OP_breg0];
    return "expr";
}

gt_status gt_unwind(const gt_regs *regs, const gt_stack *stack,
                    gt_lookup_fn lookup, void *ctx,
                    gt_frame *frames, int max, int *nframes)
{
    gt_regs cur = *regs;
    bool exact = true;      /* pc is exact (leaf, or after a signal frame) */
    *nframes = 0;
    if (!(cur.valid & (1u << GT_RIP)) || !(cur.valid & (1u << GT_RSP)))
        return GT_NOREGS;
    for (;;) {
        if (*nframes == max)
            return GT_DEPTH;
        gt_frame *f = &frames[(*nframes)++];
        memset(f, 0, sizeof *f);
        f->pc = cur.r[GT_RIP];
        f->cfa_rule = "-";
        /* A return address points after the call: look up pc-1, which is
         * inside the call instruction and so inside the caller's function. */
        uint64_t look = exact ? f->pc : f->pc - 1, bias;
        gt_module *m = lookup(ctx, look, &bias);
        if (!m)
            return GT_NOMAP;
        f->mod = m;
        if (!m->ok)
            return GT_NOMOD;
        Dwarf_Frame *df;
        bool have_fde = gt_module_frame(m, look - bias, &df);
        f->func_known = gt_module_func(m, look - bias, have_fde, &f->func, &f->name);
        if (!have_fde) {
            /* The dynamic loader's entry code (_start, _dl_start_user) has
             * no CFI; it is the root of every stack before the program's
             * own _start runs (ld.so calling _dl_start or _dl_init). */
            if (m->entry && look - bias >= m->entry && look - bias < m->entry_end) {
                f->func = m->entry;
                f->func_known = true;
                return GT_ROOT;
            }
            return GT_NOCFI;
        }
        gt_status s;
        Dwarf_Op *ops;
        size_t nops;
        uint64_t cfa, ra, v;
        bool is_value, signal = false;
        if (dwarf_frame_cfa(df, &ops, &nops) != 0 || nops == 0) {
            s = GT_NOCFA;
            goto out;
        }
        f->cfa_rule = cfa_rule_name(ops, nops);
        s = eval(ops, nops, &cur, stack, 0, false, &cfa, &is_value);
        if (s != GT_ROOT)
            goto out;
        f->cfa = cfa;
        dwarf_frame_info(df, NULL, NULL, &signal);

        s = caller_reg(df, GT_RIP, &cur, stack, cfa, &ra);
        if (s == GT_UNDEF) {
            s = GT_ROOT;            /* CFI marks the outermost frame */
            goto out;
        }
        if (s != GT_ROOT)
            goto out;
        if (ra == 0) {
            s = GT_RA0;
            goto out;
        }
        gt_regs next = {.valid = 0};
        for (int r = 0; r < GT_RIP; r++)
            if (caller_reg(df, r, &cur, stack, cfa, &v) == GT_ROOT) {
                next.r[r] = v;
                next.valid |= 1u << r;
            }
        if (!(next.valid & (1u << GT_RSP))) {
            next.r[GT_RSP] = cfa;   /* x86-64 ABI: the caller's rsp is the CFA */
            next.valid |= 1u << GT_RSP;
        }
        next.r[GT_RIP] = ra;
        next.valid |= 1u << GT_RIP;
        free(df);
        /* The stack only grows down: a caller's frame lies above. */
        if (next.r[GT_RSP] <= cur.r[GT_RSP] && !signal)
            return GT_LOOP;
        cur = next;
        exact = signal;
        continue;
    out:
        free(df);
        return s;
    }
}
