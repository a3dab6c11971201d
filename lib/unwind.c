/* unwind.c -- a sample's true call stack from its registers and user stack copy (libdw CFI), for accuracy checks. */
#include "unwind.h"

#include <asm/perf_regs.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

#define NREG 17             /* DWARF x86-64: 0-15 GPRs, 16 return address (rip) */
#define RSP 7
#define RIP 16

typedef struct ucfi {
    int        tried;
    Dwarf_CFI *eh;          /* .eh_frame */
    Dwarf     *dw;
    Dwarf_CFI *dbg;         /* .debug_frame */
} ucfi;

struct icpp_unwinder {
    const icpp_replay *rp;
    ucfi              *c;
    size_t             nc;
};

const char *icpp_uw_status_name(int s)
{
    static const char *n[ICPP_UW_MAX] = {"root", "truncated", "no module", "no CFI", "bad CFI", "loop", "depth",
                                         "no registers"};
    return s >= 0 && s < ICPP_UW_MAX ? n[s] : "?";
}

icpp_unwinder *icpp_unwinder_new(const icpp_replay *rp)
{
    icpp_unwinder *u = calloc(1, sizeof *u);
    if (u)
        u->rp = rp;
    return u;
}

void icpp_unwinder_free(icpp_unwinder *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->nc; i++) {
        if (u->c[i].eh)
            dwarf_cfi_end(u->c[i].eh);
        if (u->c[i].dw)
            dwarf_end(u->c[i].dw);
    }
    free(u->c);
    free(u);
}

static ucfi *cfi_of(icpp_unwinder *u, int32_t mi)
{
    if (mi < 0)
        return NULL;
    if ((size_t)mi >= u->nc) {
        size_t nc = (size_t)mi + 16;
        ucfi *n = realloc(u->c, nc * sizeof *n);
        if (!n)
            return NULL;
        memset(n + u->nc, 0, (nc - u->nc) * sizeof *n);
        u->c = n;
        u->nc = nc;
    }
    ucfi *c = &u->c[mi];
    if (!c->tried) {
        c->tried = 1;
        const icpp_rmodule *rm = icpp_replay_module(u->rp, (uint32_t)mi);
        if (rm && rm->mod) {
            Elf *elf = icpp_module_elf(rm->mod);
            c->eh = dwarf_getcfi_elf(elf);
            c->dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
            c->dbg = c->dw ? dwarf_getcfi(c->dw) : NULL;
        }
    }
    return c;
}

typedef struct state {
    uint64_t r[NREG];
    uint32_t valid;
} state;

typedef struct mem {
    uint64_t       base;    /* address of bytes[0] */
    uint32_t       size;
    const uint8_t *bytes;
} mem;

static int rd64(const mem *m, uint64_t addr, uint64_t *out)
{
    /* Not addr - base + 8 > size: for a base below 8 and an address near
     * 2^64 (both from the sample file) that sum wraps to a small number. */
    if (addr < m->base || m->size < 8 || addr - m->base > m->size - 8)
        return -1;
    memcpy(out, m->bytes + (addr - m->base), 8);
    return 0;
}

/* Evaluate a CFI expression; is_value: DW_OP_stack_value ended it. */
static int eval(const Dwarf_Op *ops, size_t nops, const state *st, const mem *m, uint64_t cfa, int push_cfa,
                uint64_t *out, int *is_value)
{
    uint64_t stk[16];
    int sp = 0;
    *is_value = 0;
    if (push_cfa)
        stk[sp++] = cfa;
#define PUSH(v) do { if (sp == 16) return ICPP_UW_BADCFI; stk[sp++] = (v); } while (0)
#define NEED(k) do { if (sp < (k)) return ICPP_UW_BADCFI; } while (0)
    for (size_t i = 0; i < nops; i++) {
        unsigned a = ops[i].atom;
        if (a >= DW_OP_lit0 && a <= DW_OP_lit31) {
            PUSH((uint64_t)(a - DW_OP_lit0));
            continue;
        }
        if ((a >= DW_OP_breg0 && a <= DW_OP_breg0 + 16) || a == DW_OP_bregx) {
            unsigned r = a == DW_OP_bregx ? (unsigned)ops[i].number : a - DW_OP_breg0;
            int64_t off = a == DW_OP_bregx ? (int64_t)ops[i].number2 : (int64_t)ops[i].number;
            if (r >= NREG || !(st->valid & (1u << r)))
                return ICPP_UW_BADCFI;
            PUSH(st->r[r] + (uint64_t)off);
            continue;
        }
        switch (a) {
        case DW_OP_call_frame_cfa: PUSH(cfa); break;
        case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u: case DW_OP_const2s:
        case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u: case DW_OP_const8s:
        case DW_OP_constu: case DW_OP_consts:
            PUSH(ops[i].number);
            break;
        case DW_OP_plus_uconst: NEED(1); stk[sp - 1] += ops[i].number; break;
        case DW_OP_plus: NEED(2); stk[sp - 2] += stk[sp - 1]; sp--; break;
        case DW_OP_minus: NEED(2); stk[sp - 2] -= stk[sp - 1]; sp--; break;
        case DW_OP_and: NEED(2); stk[sp - 2] &= stk[sp - 1]; sp--; break;
        case DW_OP_or: NEED(2); stk[sp - 2] |= stk[sp - 1]; sp--; break;
        case DW_OP_xor: NEED(2); stk[sp - 2] ^= stk[sp - 1]; sp--; break;
        case DW_OP_mul: NEED(2); stk[sp - 2] *= stk[sp - 1]; sp--; break;
        /* shifts and comparisons: binutils' PLT rule (rsp + 8, plus 8 past the stub's push) */
        case DW_OP_shl: NEED(2); stk[sp - 2] = stk[sp - 1] < 64 ? stk[sp - 2] << stk[sp - 1] : 0; sp--; break;
        case DW_OP_shr: NEED(2); stk[sp - 2] = stk[sp - 1] < 64 ? stk[sp - 2] >> stk[sp - 1] : 0; sp--; break;
        case DW_OP_shra:
            NEED(2);
            stk[sp - 2] = (uint64_t)((int64_t)stk[sp - 2] >> (stk[sp - 1] < 64 ? stk[sp - 1] : 63));
            sp--;
            break;
        case DW_OP_ge: NEED(2); stk[sp - 2] = (int64_t)stk[sp - 2] >= (int64_t)stk[sp - 1]; sp--; break;
        case DW_OP_gt: NEED(2); stk[sp - 2] = (int64_t)stk[sp - 2] > (int64_t)stk[sp - 1]; sp--; break;
        case DW_OP_le: NEED(2); stk[sp - 2] = (int64_t)stk[sp - 2] <= (int64_t)stk[sp - 1]; sp--; break;
        case DW_OP_lt: NEED(2); stk[sp - 2] = (int64_t)stk[sp - 2] < (int64_t)stk[sp - 1]; sp--; break;
        case DW_OP_eq: NEED(2); stk[sp - 2] = stk[sp - 2] == stk[sp - 1]; sp--; break;
        case DW_OP_ne: NEED(2); stk[sp - 2] = stk[sp - 2] != stk[sp - 1]; sp--; break;
        case DW_OP_neg: NEED(1); stk[sp - 1] = -stk[sp - 1]; break;
        case DW_OP_not: NEED(1); stk[sp - 1] = ~stk[sp - 1]; break;
        case DW_OP_drop: NEED(1); sp--; break;
        case DW_OP_swap: {
            NEED(2);
            uint64_t t = stk[sp - 1];
            stk[sp - 1] = stk[sp - 2];
            stk[sp - 2] = t;
            break;
        }
        case DW_OP_over: {
            NEED(2);
            uint64_t t = stk[sp - 2];
            PUSH(t);
            break;
        }
        case DW_OP_dup: {
            NEED(1);
            uint64_t t = stk[sp - 1];
            PUSH(t);
            break;
        }
        case DW_OP_deref: {
            NEED(1);
            uint64_t v;
            if (rd64(m, stk[sp - 1], &v) < 0)
                return ICPP_UW_TRUNCATED;
            stk[sp - 1] = v;
            break;
        }
        case DW_OP_stack_value:
            *is_value = 1;
            i = nops;
            break;
        case DW_OP_nop: break;
        default:
            return ICPP_UW_BADCFI;
        }
    }
#undef PUSH
#undef NEED
    if (sp < 1)
        return ICPP_UW_BADCFI;
    *out = stk[sp - 1];
    return ICPP_UW_ROOT;
}

/* The caller's value of DWARF register reg; 1 = undefined. */
static int caller_reg(Dwarf_Frame *fr, int reg, const state *st, const mem *m, uint64_t cfa, uint64_t *out)
{
    Dwarf_Op buf[3], *ops;
    size_t nops;
    if (dwarf_frame_register(fr, reg, buf, &ops, &nops) != 0)
        return ICPP_UW_BADCFI;
    if (nops == 0) {
        if (ops == buf)
            return -1;                  /* undefined */
        if (!(st->valid & (1u << reg)))
            return -1;                  /* same value of something unknown */
        *out = st->r[reg];
        return ICPP_UW_ROOT;
    }
    uint64_t v;
    int isval;
    int r = eval(ops, nops, st, m, cfa, 1, &v, &isval);
    if (r != ICPP_UW_ROOT)
        return r;
    if (isval) {
        *out = v;
        return ICPP_UW_ROOT;
    }
    return rd64(m, v, out) < 0 ? ICPP_UW_TRUNCATED : ICPP_UW_ROOT;
}

int icpp_uw_dwarf_reg(int bit)
{
    static const int map[] = {[PERF_REG_X86_AX] = 0, [PERF_REG_X86_BX] = 3, [PERF_REG_X86_CX] = 2,
                              [PERF_REG_X86_DX] = 1, [PERF_REG_X86_SI] = 4, [PERF_REG_X86_DI] = 5,
                              [PERF_REG_X86_BP] = 6, [PERF_REG_X86_SP] = 7, [PERF_REG_X86_IP] = 16};
    if (bit <= PERF_REG_X86_IP)
        return map[bit];
    if (bit >= PERF_REG_X86_R8 && bit <= PERF_REG_X86_R15)
        return 8 + (bit - PERF_REG_X86_R8);
    return -1;
}

int icpp_unwind(icpp_unwinder *u, const icpp_rsample *s, icpp_uframe *out, int max, int *n)
{
    *n = 0;
    if (!s->x.nregs || !s->x.regs)
        return ICPP_UW_NOREGS;
    state st = {{0}, 0};
    for (int bit = 0, k = 0; bit < 64 && (uint32_t)k < s->x.nregs; bit++) {
        if (!(s->x.regs_mask & (1ull << bit)))
            continue;
        int d = icpp_uw_dwarf_reg(bit);
        if (d >= 0) {
            st.r[d] = s->x.regs[k];
            st.valid |= 1u << d;
        }
        k++;
    }
    st.r[RIP] = s->ip;
    st.valid |= 1u << RIP;
    if (!(st.valid & (1u << RSP)))
        return ICPP_UW_NOREGS;
    mem m = {st.r[RSP], s->x.stack_size, s->x.stack};
    int exact = 1;
    for (;;) {
        if (*n == max)
            return ICPP_UW_DEPTH;
        uint64_t pc = st.r[RIP], look = exact ? pc : pc - 1;
        int32_t mi;
        uint64_t addr;
        if (icpp_replay_locate(u->rp, s->pid, look, &mi, &addr) < 0)
            return ICPP_UW_NOMODULE;
        const icpp_rmodule *rm = icpp_replay_module(u->rp, (uint32_t)mi);
        icpp_uframe *f = &out[(*n)++];
        f->module = mi;
        f->pc = pc;
        f->addr = addr;
        f->func = rm && rm->mod ? icpp_module_func_at(rm->mod, addr) : NULL;
        f->entry_sp = 0;
        f->sigframe = 0;
        ucfi *c = cfi_of(u, mi);
        Dwarf_Frame *fr = NULL;
        if (!c || ((!c->eh || dwarf_cfi_addrframe(c->eh, addr, &fr) != 0) &&
                   (!c->dbg || dwarf_cfi_addrframe(c->dbg, addr, &fr) != 0)))
            return ICPP_UW_NOCFI;
        Dwarf_Op *ops;
        size_t nops;
        uint64_t cfa, ra, v;
        int isval, r;
        bool signal = false;
        if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops == 0) {
            free(fr);
            return ICPP_UW_BADCFI;
        }
        if ((r = eval(ops, nops, &st, &m, 0, 0, &cfa, &isval)) != ICPP_UW_ROOT) {
            free(fr);
            return r;
        }
        f->entry_sp = cfa - 8;
        dwarf_frame_info(fr, NULL, NULL, &signal);
        f->sigframe = signal;
        r = caller_reg(fr, RIP, &st, &m, cfa, &ra);
        if (r < 0 || (r == ICPP_UW_ROOT && ra == 0)) {
            free(fr);
            return ICPP_UW_ROOT;
        }
        if (r != ICPP_UW_ROOT) {
            free(fr);
            return r;
        }
        state nx = {{0}, 0};
        for (int reg = 0; reg < RIP; reg++)
            if (caller_reg(fr, reg, &st, &m, cfa, &v) == ICPP_UW_ROOT) {
                nx.r[reg] = v;
                nx.valid |= 1u << reg;
            }
        free(fr);
        if (!(nx.valid & (1u << RSP))) {
            nx.r[RSP] = cfa;            /* x86-64: the caller's rsp is the CFA */
            nx.valid |= 1u << RSP;
        }
        nx.r[RIP] = ra;
        nx.valid |= 1u << RIP;
        if (nx.r[RSP] <= st.r[RSP] && !signal)
            return ICPP_UW_LOOP;
        st = nx;
        exact = signal;
    }
}
