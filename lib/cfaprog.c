/* cfaprog.c -- an FDE's call frame program read for patching: the CFA rule over each code range, and where each CFA offset is encoded. */
#include "cfaprog.h"
#include "dwread.h"
#include "vec.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NEST 64

typedef icpp_rd rd;
#define rd_u icpp_rd_u
#define rd_leb icpp_rd_leb

static void skip_block(rd *r)
{
    uint64_t n = rd_leb(r, 0, NULL);
    if (r->bad || n > (uint64_t)(r->end - r->p)) {
        r->bad = 1;
        return;
    }
    r->p += n;
}

typedef struct rule {
    uint8_t reg, expr;
    int64_t off;
    int32_t operand;
} rule;

typedef struct walk {
    const uint8_t *sec;
    icpp_cfaprog  *out;
    size_t         capspans, capops;
    int            oom;
} walk;

static int32_t add_op(walk *w, const uint8_t *at, uint8_t len, int sf, int in_cie, int8_t da, int64_t value)
{
    if (icpp_vec_reserve((void **)&w->out->ops, &w->capops, (size_t)w->out->nops + 1, sizeof *w->out->ops, 8) < 0) {
        w->oom = 1;
        return -1;
    }
    w->out->ops[w->out->nops] = (icpp_cfa_operand){(uint32_t)(at - w->sec), len, (uint8_t)sf, (uint8_t)in_cie,
                                                    sf ? da : 0, value};
    return (int32_t)w->out->nops++;
}

static void add_span(walk *w, uint64_t lo, uint64_t hi, const rule *r)
{
    if (lo >= hi || w->oom)
        return;
    icpp_cfaprog *o = w->out;
    if (o->nspans && o->spans[o->nspans - 1].hi == lo) {
        icpp_cfa_span *l = &o->spans[o->nspans - 1];
        if (l->reg == r->reg && l->expr == r->expr && l->off == r->off && l->operand == r->operand) {
            l->hi = hi;
            return;
        }
    }
    if (icpp_vec_reserve((void **)&o->spans, &w->capspans, (size_t)o->nspans + 1, sizeof *o->spans, 16) < 0) {
        w->oom = 1;
        return;
    }
    o->spans[o->nspans++] = (icpp_cfa_span){lo, hi, r->reg, r->expr, r->off, r->operand};
}

/* Run one program [p, end).  in_cie: the CIE's initial instructions (no
 * locations there).  *loc, *cur: the running location and rule. */
static int run(walk *w, const icpp_fde *f, const uint8_t *p, const uint8_t *end, int in_cie, uint64_t *loc,
               rule *cur, rule *stack, int *depth)
{
    rd r = {p, end, 0};
    while (r.p < r.end && !r.bad && !w->oom) {
        uint8_t opc = *r.p++;
        uint64_t delta = UINT64_MAX;
        const uint8_t *at;
        uint8_t len;
        switch (opc & 0xc0) {
        case DW_CFA_advance_loc:
            delta = opc & 0x3f;
            break;
        case DW_CFA_offset:
            rd_leb(&r, 0, NULL);
            continue;
        case DW_CFA_restore:
            continue;
        default:
            break;
        }
        if (delta == UINT64_MAX) {
            switch (opc) {
            case DW_CFA_nop:
            case DW_CFA_GNU_window_save:
                continue;
            case DW_CFA_advance_loc1: delta = rd_u(&r, 1); break;
            case DW_CFA_advance_loc2: delta = rd_u(&r, 2); break;
            case DW_CFA_advance_loc4: delta = rd_u(&r, 4); break;
            case DW_CFA_offset_extended:
            case DW_CFA_register:
            case DW_CFA_val_offset:
            case DW_CFA_GNU_negative_offset_extended:
                rd_leb(&r, 0, NULL);
                rd_leb(&r, 0, NULL);
                continue;
            case DW_CFA_offset_extended_sf:
            case DW_CFA_val_offset_sf:
                rd_leb(&r, 0, NULL);
                rd_leb(&r, 1, NULL);
                continue;
            case DW_CFA_restore_extended:
            case DW_CFA_undefined:
            case DW_CFA_same_value:
            case DW_CFA_GNU_args_size:
                rd_leb(&r, 0, NULL);
                continue;
            case DW_CFA_expression:
            case DW_CFA_val_expression:
                rd_leb(&r, 0, NULL);
                skip_block(&r);
                continue;
            case DW_CFA_remember_state:
                if (*depth >= MAX_NEST)
                    return -1;
                stack[(*depth)++] = *cur;
                continue;
            case DW_CFA_restore_state:
                if (*depth <= 0)
                    return -1;
                *cur = stack[--*depth];
                continue;
            case DW_CFA_def_cfa:
            case DW_CFA_def_cfa_sf: {
                int sf = opc == DW_CFA_def_cfa_sf;
                uint64_t reg = rd_leb(&r, 0, NULL);
                at = r.p;
                int64_t v = (int64_t)rd_leb(&r, sf, &len);
                if (r.bad || reg > 255)
                    return -1;
                if (sf && __builtin_mul_overflow(v, (int64_t)f->data_align, &v))
                    return -1;
                cur->reg = (uint8_t)reg;
                cur->expr = 0;
                cur->off = v;
                cur->operand = add_op(w, at, len, sf, in_cie, f->data_align, v);
                continue;
            }
            case DW_CFA_def_cfa_register: {
                uint64_t reg = rd_leb(&r, 0, NULL);
                if (r.bad || reg > 255)
                    return -1;
                cur->reg = (uint8_t)reg;
                cur->expr = 0;
                continue;
            }
            case DW_CFA_def_cfa_offset:
            case DW_CFA_def_cfa_offset_sf: {
                int sf = opc == DW_CFA_def_cfa_offset_sf;
                at = r.p;
                int64_t v = (int64_t)rd_leb(&r, sf, &len);
                if (r.bad)
                    return -1;
                if (sf && __builtin_mul_overflow(v, (int64_t)f->data_align, &v))
                    return -1;
                cur->off = v;
                cur->operand = add_op(w, at, len, sf, in_cie, f->data_align, v);
                continue;
            }
            case DW_CFA_def_cfa_expression:
                skip_block(&r);
                cur->expr = 1;
                cur->operand = -1;
                continue;
            default:
                return -1;      /* DW_CFA_set_loc, unknown or vendor opcodes */
            }
        }
        if (r.bad || in_cie)
            return -1;
        uint64_t next = *loc + delta * f->code_align;
        if (next < *loc || delta > UINT32_MAX)
            return -1;
        add_span(w, *loc, next < f->hi ? next : f->hi, cur);
        *loc = next;
    }
    return r.bad ? -1 : 0;
}

int icpp_cfaprog_read(const uint8_t *sec, size_t size, const icpp_fde *f, icpp_cfaprog *out, icpp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!f->code_align || f->cie_ins > f->cie_end || f->cie_end > size || f->ins > f->end || f->end > size ||
        f->lo >= f->hi)
        return icpp_err_set(err, ICPP_EFORMAT, "FDE for 0x%llx: its call frame program is out of bounds",
                            (unsigned long long)f->lo);
    walk w = {sec, out, 0, 0, 0};
    rule stack[MAX_NEST];
    int depth = 0;
    rule cur = {0, 1, 0, -1};   /* no CFA rule until the CIE gives one */
    uint64_t loc = f->lo;
    int rc = run(&w, f, sec + f->cie_ins, sec + f->cie_end, 1, &loc, &cur, stack, &depth);
    depth = 0;                  /* the FDE's own program starts with an empty state stack */
    if (rc == 0)
        rc = run(&w, f, sec + f->ins, sec + f->end, 0, &loc, &cur, stack, &depth);
    if (rc == 0 && loc < f->hi)
        add_span(&w, loc, f->hi, &cur);
    if (w.oom || rc < 0) {
        icpp_cfaprog_free(out);
        if (w.oom)
            return icpp_err_set(err, ENOMEM, "out of memory reading a call frame program");
        return icpp_err_set(err, ICPP_EFORMAT, "FDE for 0x%llx: its call frame program cannot be read",
                            (unsigned long long)f->lo);
    }
    return 0;
}

void icpp_cfaprog_free(icpp_cfaprog *p)
{
    free(p->spans);
    free(p->ops);
    memset(p, 0, sizeof *p);
}

int icpp_cfaprog_fits(const icpp_cfa_operand *op, int64_t value)
{
    unsigned bits = 7u * op->len;
    if (!op->sf) {
        if (value < 0)
            return 0;
        return bits >= 63 || (uint64_t)value < (uint64_t)1 << bits;
    }
    if (!op->data_align || (op->data_align == -1 && value == INT64_MIN) || value % op->data_align)
        return 0;
    int64_t enc = value / op->data_align;
    if (bits >= 64)
        return 1;
    int64_t lim = (int64_t)1 << (bits - 1);
    return enc >= -lim && enc < lim;
}

int icpp_cfaprog_write(uint8_t *sec, size_t size, const icpp_cfa_operand *op, int64_t value, icpp_err *err)
{
    if (op->len == 0 || op->len > 10 || op->at > size || op->len > size - op->at)
        return icpp_err_set(err, EINVAL, "CFA operand at 0x%x is outside the section", op->at);
    rd r = {sec + op->at, sec + op->at + op->len, 0};
    uint8_t len = 0;
    int64_t now = (int64_t)rd_leb(&r, op->sf, &len);
    if (op->sf && __builtin_mul_overflow(now, (int64_t)op->data_align, &now))
        r.bad = 1;
    if (r.bad || len != op->len || now != op->value)
        return icpp_err_set(err, EINVAL, "CFA operand at 0x%x no longer encodes %lld", op->at,
                            (long long)op->value);
    if (!icpp_cfaprog_fits(op, value))
        return icpp_err_set(err, ERANGE, "CFA offset %lld does not fit the %u bytes at 0x%x", (long long)value,
                            op->len, op->at);
    uint64_t enc = op->sf ? (uint64_t)(value / op->data_align) : (uint64_t)value;
    for (uint8_t i = 0; i < op->len; i++) {
        uint8_t b = (uint8_t)(enc & 0x7f);
        enc = op->sf ? (uint64_t)((int64_t)enc >> 7) : enc >> 7;
        sec[op->at + i] = (uint8_t)(b | (i + 1 < op->len ? 0x80 : 0));
    }
    return 0;
}
