/* cfi.c -- per-module CFA table: for every PC the CFA rule, built once from .eh_frame/.debug_frame. */
#include "cfi.h"
#include "fde.h"
#include "vec.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One row: the rule from `start` up to the next row's start.  8 bytes, as
 * docs/background.md section 3 gives; a u32 index per 4 KiB page narrows the
 * search to the rows of one page. */
typedef struct row {
    uint32_t start;     /* pc - base */
    int32_t  w;         /* off << 8 | reg << 3 | kind */
} row;

/* The unwinding rules of a row (rbp, return address) live in a parallel
 * byte array, so the 8-byte rows that passive samples search stay as they
 * are: bits 0-5 rbp (0 same value, 1..62 saved at CFA - 8k, 63 unknown),
 * bits 6-7 the return address (icpp_ra_kind). */
#define X_RBP(x)      ((uint8_t)((x) & 63))
#define X_RA(x)       ((uint8_t)((x) >> 6))
#define X_RBP_UNKNOWN 63

#define W_KIND(w) ((uint8_t)((w) & 7))
#define W_REG(w)  ((uint8_t)(((w) >> 3) & 31))
#define W_OFF(w)  ((int32_t)(w) >> 8)
#define OFF_MAX   ((1 << 23) - 1)
#define PAGE_SHIFT 12

struct icpp_cfi {
    uint64_t  base;     /* address of rows[0], page aligned */
    row      *rows;     /* sorted; last row is an ICPP_CFA_NOFDE sentinel */
    uint8_t  *regs;     /* regs[i]: rbp and return-address rules of rows[i] */
    size_t    nrows;
    uint32_t *page;     /* page[p] = last row with start <= p's first byte */
    size_t    npages;
    size_t    fdes_eh, fdes_debug;
};

/* ---- FDE enumeration through libelf (the parser itself is in fde.c) ---- */

static Elf_Scn *find_section(Elf *elf, const char *want, GElf_Shdr *sh)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        if (!gelf_getshdr(scn, sh) || sh->sh_type == SHT_NOBITS)
            continue;
        const char *n = elf_strptr(elf, shstrndx, sh->sh_name);
        if (n && strcmp(n, want) == 0)
            return scn;
    }
    return NULL;
}

int icpp_fde_list(Elf *elf, int which, icpp_fde **out, size_t *nout, icpp_err *err)
{
    *out = NULL;
    *nout = 0;
    const char *name = which == 0 ? ".eh_frame" : ".debug_frame";
    GElf_Shdr sh;
    Elf_Scn *scn = find_section(elf, name, &sh);
    if (!scn)
        return 0;
    if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0)
        return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot decompress: %s", name, elf_errmsg(-1));
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || !d->d_buf)
        return 0;
    return icpp_fde_parse(d->d_buf, d->d_size, sh.sh_addr, which == 0, out, nout, err);
}

/* ---- table construction ---- */

typedef struct seg {
    uint64_t lo, hi;
    int32_t  w;
    uint8_t  x;         /* X_RBP / X_RA */
} seg;

typedef struct segv {
    seg   *v;
    size_t n, cap;
} segv;

static int segv_push(segv *s, uint64_t lo, uint64_t hi, int32_t w, uint8_t x)
{
    if (s->n && s->v[s->n - 1].hi == lo && s->v[s->n - 1].w == w && s->v[s->n - 1].x == x) {
        s->v[s->n - 1].hi = hi;
        return 0;
    }
    if (icpp_vec_reserve((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v, 4096) < 0)
        return -1;
    s->v[s->n++] = (seg){lo, hi, w, x};
    return 0;
}

static int32_t pack(icpp_cfa_kind kind, unsigned reg, int64_t off)
{
    if (kind == ICPP_CFA_REG || kind == ICPP_CFA_RSP || kind == ICPP_CFA_RBP) {
        if (off > OFF_MAX || off < -OFF_MAX || reg > 31)
            kind = ICPP_CFA_EXPR, reg = 0, off = 0;
    } else {
        reg = 0, off = 0;
    }
    return (int32_t)((uint32_t)off << 8 | reg << 3 | (uint32_t)kind);
}

static int32_t classify(Dwarf_Frame *fr)
{
    Dwarf_Op *ops;
    size_t nops;
    if (dwarf_frame_cfa(fr, &ops, &nops) != 0)
        return pack(ICPP_CFA_EXPR, 0, 0);
    if (nops == 0)
        return pack(ICPP_CFA_UNDEF, 0, 0);
    if (nops == 1 && ops[0].atom == DW_OP_bregx) {
        uint64_t reg = ops[0].number;
        int64_t off = (int64_t)ops[0].number2;
        if (reg == 7)
            return pack(ICPP_CFA_RSP, 7, off);
        if (reg == 6)
            return pack(ICPP_CFA_RBP, 6, off);
        return pack(ICPP_CFA_REG, (unsigned)reg, off);
    }
    return pack(ICPP_CFA_EXPR, 0, 0);
}

/* Where register reg is saved: 0 same value, 1 in memory at CFA + *off,
 * 2 undefined, 3 anything else (another register, an expression, a value). */
static int saved_at(Dwarf_Frame *fr, int reg, int64_t *off)
{
    Dwarf_Op buf[3], *ops = NULL;
    size_t nops = 0;
    int r = dwarf_frame_register(fr, reg, buf, &ops, &nops);
    if (r < 0)
        return 3;
    if (nops == 0)
        return ops == buf ? 2 : 0;
    if (r != 0 || ops[0].atom != DW_OP_call_frame_cfa)
        return 3;
    if (nops == 1) {
        *off = 0;
        return 1;
    }
    if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
        *off = (int64_t)ops[1].number;
        return 1;
    }
    if (nops == 3 && (ops[1].atom == DW_OP_consts || ops[1].atom == DW_OP_constu) && ops[2].atom == DW_OP_plus) {
        *off = (int64_t)ops[1].number;
        return 1;
    }
    return 3;
}

/* The X_ byte of a frame row. */
static uint8_t classify_regs(Dwarf_Frame *fr)
{
    int64_t off = 0;
    uint8_t rbp = X_RBP_UNKNOWN, ra = ICPP_RA_OTHER;
    switch (saved_at(fr, 6, &off)) {
    case 0:
        rbp = 0;
        break;
    case 1:
        if (off < 0 && off % 8 == 0 && -off / 8 < X_RBP_UNKNOWN)
            rbp = (uint8_t)(-off / 8);
        break;
    }
    switch (saved_at(fr, 16, &off)) {
    case 1:
        if (off == -8)
            ra = ICPP_RA_CFA8;
        break;
    case 2:
        ra = ICPP_RA_UNDEF;
        break;
    }
    return (uint8_t)(ra << 6 | rbp);
}

/* A CFA expression that needs no memory and no register but %rsp and %rip
 * -- binutils' PLT rule, CFA = rsp + 8 + ((rip & 15) >= 11) << 3 (the
 * stub's push moves rsp) -- evaluated at rsp and rip.  0 and *out, or -1
 * for anything a passive sample cannot evaluate.  (lib/unwind.c, the truth,
 * has its own evaluator on purpose.) */
static int eval_regs(const Dwarf_Op *ops, size_t nops, uint64_t rsp, uint64_t rip, uint64_t *out)
{
    uint64_t st[16];
    int n = 0;
#define PUSH(v) do { if (n == 16) return -1; st[n++] = (v); } while (0)
#define BIN(expr) do { if (n < 2) return -1; uint64_t a = st[n - 2], b = st[n - 1]; (void)a; (void)b; \
                       st[n - 2] = (expr); n--; } while (0)
    for (size_t i = 0; i < nops; i++) {
        unsigned op = ops[i].atom;
        if (op >= DW_OP_lit0 && op <= DW_OP_lit31) {
            PUSH((uint64_t)(op - DW_OP_lit0));
            continue;
        }
        if (op == DW_OP_breg7 || op == DW_OP_breg16 || op == DW_OP_bregx) {
            uint64_t reg = op == DW_OP_bregx ? ops[i].number : op - DW_OP_breg0;
            uint64_t off = op == DW_OP_bregx ? ops[i].number2 : ops[i].number;
            if (reg != 7 && reg != 16)
                return -1;
            PUSH((reg == 7 ? rsp : rip) + off);
            continue;
        }
        switch (op) {
        case DW_OP_const1u: case DW_OP_const1s: case DW_OP_const2u: case DW_OP_const2s:
        case DW_OP_const4u: case DW_OP_const4s: case DW_OP_const8u: case DW_OP_const8s:
        case DW_OP_constu: case DW_OP_consts:
            PUSH(ops[i].number);
            break;
        case DW_OP_plus_uconst: if (n < 1) return -1; st[n - 1] += ops[i].number; break;
        case DW_OP_plus: BIN(a + b); break;
        case DW_OP_minus: BIN(a - b); break;
        case DW_OP_mul: BIN(a * b); break;
        case DW_OP_and: BIN(a & b); break;
        case DW_OP_or: BIN(a | b); break;
        case DW_OP_xor: BIN(a ^ b); break;
        case DW_OP_shl: BIN(b < 64 ? a << b : 0); break;
        case DW_OP_shr: BIN(b < 64 ? a >> b : 0); break;
        case DW_OP_shra: BIN(b < 64 ? (uint64_t)((int64_t)a >> b) : (uint64_t)((int64_t)a >> 63)); break;
        case DW_OP_ge: BIN((int64_t)a >= (int64_t)b); break;
        case DW_OP_gt: BIN((int64_t)a > (int64_t)b); break;
        case DW_OP_le: BIN((int64_t)a <= (int64_t)b); break;
        case DW_OP_lt: BIN((int64_t)a < (int64_t)b); break;
        case DW_OP_eq: BIN(a == b); break;
        case DW_OP_ne: BIN(a != b); break;
        case DW_OP_dup: {
            if (n < 1) return -1;
            uint64_t t = st[n - 1];
            PUSH(t);
            break;
        }
        case DW_OP_drop: if (n < 1) return -1; n--; break;
        case DW_OP_swap: {
            if (n < 2) return -1;
            uint64_t t = st[n - 1];
            st[n - 1] = st[n - 2];
            st[n - 2] = t;
            break;
        }
        case DW_OP_neg: if (n < 1) return -1; st[n - 1] = -st[n - 1]; break;
        case DW_OP_not: if (n < 1) return -1; st[n - 1] = ~st[n - 1]; break;
        case DW_OP_nop: break;
        default: return -1;     /* memory, other registers, control flow */
        }
    }
#undef PUSH
#undef BIN
    if (n < 1)
        return -1;
    *out = st[n - 1];
    return 0;
}

/* The longest row whose expression is evaluated pc by pc (a PLT of 64K
 * stubs); longer ones stay "expression". */
#define EXPR_SPAN_MAX (1u << 20)

/* Rows for [pc, next) whose CFA is an expression: where, at each pc, it is
 * rsp plus a constant, rsp-based rows (merged where equal). */
static int expr_rows(Dwarf_Frame *fr, uint64_t pc, uint64_t next, uint8_t x, segv *out)
{
    Dwarf_Op *ops;
    size_t nops;
    int32_t expr = pack(ICPP_CFA_EXPR, 0, 0);
    if (next - pc > EXPR_SPAN_MAX || dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops == 0)
        return segv_push(out, pc, next, expr, x);
    for (uint64_t a = pc; a < next; a++) {
        /* two values of rsp tell "rsp + constant" from anything else */
        uint64_t v0, v1, r0 = 0x7ff000000000, r1 = 0x7ff000100000;
        int32_t w = expr;
        if (eval_regs(ops, nops, r0, a, &v0) == 0 && eval_regs(ops, nops, r1, a, &v1) == 0 && v1 - v0 == r1 - r0)
            w = pack(ICPP_CFA_RSP, 7, (int64_t)(v0 - r0));
        if (segv_push(out, a, a + 1, w, x) < 0)
            return -1;
    }
    return 0;
}

/* Walk the CFI rows of [lo, hi) with libdw and append segments. */
static int walk_rows(Dwarf_CFI *cfi, uint64_t lo, uint64_t hi, segv *out)
{
    uint64_t pc = lo;
    while (pc < hi) {
        Dwarf_Frame *fr = NULL;
        uint64_t next = pc + 1;
        int32_t w;
        uint8_t x = 0;
        if (dwarf_cfi_addrframe(cfi, pc, &fr) != 0) {
            /* [lo, hi) is one FDE's range: where libdw cannot read its row
             * here, the rest is no better (a corrupt FDE of a huge range was
             * walked byte by byte: hours). */
            w = pack(ICPP_CFA_NOFDE, 0, 0);
            next = hi;
        } else {
            Dwarf_Addr s, e;
            bool signal = false;
            if (dwarf_frame_info(fr, &s, &e, &signal) >= 0 && e > pc)
                next = e;
            w = classify(fr);
            x = classify_regs(fr);
            if (signal)
                x = (uint8_t)((x & 63) | ICPP_RA_SIGFRAME << 6);
            if (next > hi)
                next = hi;
            int r = W_KIND(w) == ICPP_CFA_EXPR ? expr_rows(fr, pc, next, x, out) : segv_push(out, pc, next, w, x);
            free(fr);
            if (r < 0)
                return -1;
            pc = next;
            continue;
        }
        if (next > hi)
            next = hi;
        if (segv_push(out, pc, next, w, x) < 0)
            return -1;
        pc = next;
    }
    return 0;
}

static int fde_cmp(const void *a, const void *b)
{
    const icpp_fde *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int seg_cmp(const void *a, const void *b)
{
    const seg *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Merge sorted FDE intervals in place; returns the new count. */
static size_t merge_intervals(icpp_fde *f, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w && f[i].lo <= f[w - 1].hi) {
            if (f[i].hi > f[w - 1].hi)
                f[w - 1].hi = f[i].hi;
        } else {
            f[w++] = f[i];
        }
    }
    return w;
}

icpp_cfi *icpp_cfi_build(const icpp_module *m, icpp_err *err)
{
    Elf *elf = icpp_module_elf(m);
    const char *path = icpp_module_path(m);
    icpp_cfi *t = calloc(1, sizeof *t);
    icpp_fde *eh = NULL, *dbg = NULL;
    size_t neh = 0, ndbg = 0;
    segv segs = {0};
    Dwarf *dw = NULL;
    Dwarf_CFI *ehcfi = NULL;
    if (!t) {
        icpp_err_set(err, ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    if (icpp_fde_list(elf, 0, &eh, &neh, err) < 0 || icpp_fde_list(elf, 1, &dbg, &ndbg, err) < 0) {
        icpp_err_prefix(err, "%s", path);
        goto fail;
    }
    t->fdes_eh = neh;
    t->fdes_debug = ndbg;
    if (neh)
        qsort(eh, neh, sizeof *eh, fde_cmp);
    if (ndbg)
        qsort(dbg, ndbg, sizeof *dbg, fde_cmp);

    if (neh) {
        ehcfi = dwarf_getcfi_elf(elf);
        if (!ehcfi) {
            icpp_err_set(err, ICPP_EFORMAT, "%s: libdw cannot read .eh_frame: %s", path,
                         dwarf_errmsg(-1));
            goto fail;
        }
        for (size_t i = 0; i < neh; i++)
            if (walk_rows(ehcfi, eh[i].lo, eh[i].hi, &segs) < 0)
                goto oom;
    }
    size_t nmerged = merge_intervals(eh, neh);
    if (ndbg) {
        dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
        Dwarf_CFI *dcfi = dw ? dwarf_getcfi(dw) : NULL;
        for (size_t i = 0; dcfi && i < ndbg; i++) {
            /* Only the parts of this FDE that no .eh_frame FDE covers. */
            uint64_t lo = dbg[i].lo, hi = dbg[i].hi;
            size_t k = 0, a = 0, b = nmerged;
            while (a < b) {         /* first merged interval ending after lo */
                size_t mid = (a + b) / 2;
                if (eh[mid].hi <= lo)
                    a = mid + 1;
                else
                    b = mid;
            }
            for (k = a; lo < hi; k++) {
                uint64_t cut = (k < nmerged && eh[k].lo < hi) ? eh[k].lo : hi;
                if (cut > lo && walk_rows(dcfi, lo, cut, &segs) < 0)
                    goto oom;
                if (k >= nmerged || eh[k].lo >= hi)
                    break;
                lo = eh[k].hi > lo ? eh[k].hi : lo;
            }
        }
    }
    if (segs.n)
        qsort(segs.v, segs.n, sizeof *segs.v, seg_cmp);

    /* Rows: segments in order, clipped so they do not overlap, with NOFDE
     * rows in the gaps and a NOFDE sentinel at the end. */
    t->rows = malloc((2 * segs.n + 1) * sizeof *t->rows);
    t->regs = malloc(2 * segs.n + 1);
    if (!t->rows || !t->regs)
        goto oom;
    t->base = segs.n ? segs.v[0].lo & ~(uint64_t)((1 << PAGE_SHIFT) - 1) : 0;
    uint64_t cur = t->base;
    int32_t nofde = pack(ICPP_CFA_NOFDE, 0, 0);
    for (size_t i = 0; i < segs.n; i++) {
        uint64_t lo = segs.v[i].lo > cur ? segs.v[i].lo : cur;
        if (lo >= segs.v[i].hi)
            continue;
        if (lo - t->base > UINT32_MAX) {
            icpp_err_set(err, ICPP_EUNSUPPORTED, "%s: code spans more than 4 GiB", path);
            goto fail;
        }
        if (lo > cur && (!t->nrows || t->rows[t->nrows - 1].w != nofde)) {
            t->regs[t->nrows] = 0;
            t->rows[t->nrows++] = (row){(uint32_t)(cur - t->base), nofde};
        }
        if (!t->nrows || t->rows[t->nrows - 1].w != segs.v[i].w || t->regs[t->nrows - 1] != segs.v[i].x) {
            t->regs[t->nrows] = segs.v[i].x;
            t->rows[t->nrows++] = (row){(uint32_t)(lo - t->base), segs.v[i].w};
        }
        cur = segs.v[i].hi;
    }
    if (cur - t->base > UINT32_MAX) {
        icpp_err_set(err, ICPP_EUNSUPPORTED, "%s: code spans more than 4 GiB", path);
        goto fail;
    }
    t->regs[t->nrows] = 0;
    t->rows[t->nrows++] = (row){(uint32_t)(cur - t->base), nofde};

    t->npages = ((uint64_t)t->rows[t->nrows - 1].start >> PAGE_SHIFT) + 2;
    t->page = malloc(t->npages * sizeof *t->page);
    if (!t->page)
        goto oom;
    size_t r = 0;
    for (size_t p = 0; p < t->npages; p++) {
        uint64_t a = (uint64_t)p << PAGE_SHIFT;
        while (r + 1 < t->nrows && t->rows[r + 1].start <= a)
            r++;
        t->page[p] = (uint32_t)r;
    }
    free(segs.v);
    free(eh);
    free(dbg);
    if (ehcfi)
        dwarf_cfi_end(ehcfi);
    if (dw)
        dwarf_end(dw);
    return t;
oom:
    icpp_err_set(err, ENOMEM, "%s: out of memory building the CFI table", path);
fail:
    free(segs.v);
    free(eh);
    free(dbg);
    if (ehcfi)
        dwarf_cfi_end(ehcfi);
    if (dw)
        dwarf_end(dw);
    icpp_cfi_free(t);
    return NULL;
}

void icpp_cfi_free(icpp_cfi *t)
{
    if (!t)
        return;
    free(t->rows);
    free(t->regs);
    free(t->page);
    free(t);
}

static inline const row *lookup_row(const icpp_cfi *t, uint64_t pc)
{
    uint64_t d = pc - t->base;
    if (pc < t->base || d >= t->rows[t->nrows - 1].start)
        return &t->rows[t->nrows - 1];   /* the NOFDE sentinel */
    size_t p = (size_t)(d >> PAGE_SHIFT);
    /* Last row in [page[p], page[p+1]] with start <= d.  Branch-free halving:
     * samples land on random PCs, so a branchy search mispredicts half the time. */
    const row *r = &t->rows[t->page[p]];
    size_t len = (size_t)(t->page[p + 1] - t->page[p]) + 1;
    uint32_t d32 = (uint32_t)d;
    while (len > 1) {
        size_t half = len / 2;
        r = r[half].start <= d32 ? r + half : r;
        len -= half;
    }
    return r;
}

static inline int32_t lookup_w(const icpp_cfi *t, uint64_t pc)
{
    return lookup_row(t, pc)->w;
}

icpp_cfa_rule icpp_cfi_lookup(const icpp_cfi *t, uint64_t pc)
{
    const row *r = lookup_row(t, pc);
    int32_t w = r->w;
    uint8_t x = t->regs[r - t->rows];
    icpp_cfa_rule out = {W_KIND(w), W_REG(w), W_OFF(w), ICPP_RBP_SAME, X_RA(x), 0};
    if (X_RBP(x) == X_RBP_UNKNOWN)
        out.rbp = ICPP_RBP_UNKNOWN;
    else if (X_RBP(x))
        out.rbp = ICPP_RBP_AT, out.rbp_off = (int16_t)(-8 * X_RBP(x));
    return out;
}

int icpp_cfi_entry_sp(const icpp_cfi *t, uint64_t pc, uint64_t sp, uint64_t bp, uint64_t *entry_sp)
{
    int32_t w = lookup_w(t, pc);
    switch (W_KIND(w)) {
    case ICPP_CFA_RSP:
        *entry_sp = icpp_entry_sp_from_cfa(sp + (uint64_t)(int64_t)W_OFF(w));
        return 0;
    case ICPP_CFA_RBP:
        *entry_sp = icpp_entry_sp_from_cfa(bp + (uint64_t)(int64_t)W_OFF(w));
        return 0;
    default:
        return W_KIND(w) ? W_KIND(w) : -1;
    }
}

void icpp_cfi_get_stats(const icpp_cfi *t, icpp_cfi_stats *s)
{
    memset(s, 0, sizeof *s);
    s->rows = t->nrows;
    s->fdes_eh = t->fdes_eh;
    s->fdes_debug = t->fdes_debug;
    s->bytes = sizeof *t + t->nrows * (sizeof *t->rows + 1) + t->npages * sizeof *t->page;
    for (size_t i = 0; i < t->nrows; i++)
        s->by_kind[W_KIND(t->rows[i].w)]++;
}
