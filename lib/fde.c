/* fde.c -- FDE enumeration from raw .eh_frame/.debug_frame bytes: untrusted input, no library needed. */
#include "fde.h"
#include "dwread.h"
#include "vec.h"

#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>


typedef icpp_rd rd;
#define rd_u icpp_rd_u

static uint64_t rd_uleb(rd *r)
{
    return icpp_rd_leb(r, 0, NULL);
}

static int64_t rd_sleb(rd *r)
{
    return (int64_t)icpp_rd_leb(r, 1, NULL);
}

/* Read a DW_EH_PE-encoded value; `field` is the link-time address of the
 * bytes being read (for pcrel). */
static uint64_t rd_enc(rd *r, uint8_t enc, uint64_t field, int apply)
{
    uint64_t v;
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr: v = rd_u(r, 8); break;
    case DW_EH_PE_uleb128: v = rd_uleb(r); break;
    case DW_EH_PE_udata2: v = rd_u(r, 2); break;
    case DW_EH_PE_udata4: v = rd_u(r, 4); break;
    case DW_EH_PE_udata8: v = rd_u(r, 8); break;
    case DW_EH_PE_sleb128: v = (uint64_t)rd_sleb(r); break;
    case DW_EH_PE_sdata2: v = (uint64_t)(int64_t)(int16_t)rd_u(r, 2); break;
    case DW_EH_PE_sdata4: v = (uint64_t)(int64_t)(int32_t)rd_u(r, 4); break;
    case DW_EH_PE_sdata8: v = rd_u(r, 8); break;
    default: r->bad = 1; return 0;
    }
    if (!apply)
        return v;
    switch (enc & 0x70) {
    case DW_EH_PE_absptr: return v;
    case DW_EH_PE_pcrel: return v + field;
    default: r->bad = 1; return 0;   /* textrel/datarel/funcrel: not used for FDE starts */
    }
}

typedef struct cie_info {
    uint64_t off;
    uint8_t  fde_enc;
    uint8_t  addr_size;
    uint8_t  signal;        /* augmentation 'S': a signal-return trampoline */
    uint64_t code_align;
    int64_t  data_align;
    size_t   ins, end;      /* its initial instructions, offsets from the section start */
    uint8_t  z;             /* augmentation "z...": FDEs carry augmentation data */
} cie_info;

/* The CFA rule at the start of an FDE: run its CIE's initial instructions,
 * then its own up to the first row change (advance_loc, set_loc).
 * state: reg/off of the rule, or reg = -1 once it is an expression or
 * unknown.  Returns 0, or -1 for an instruction it cannot skip. */
typedef struct cfa_state {
    int64_t reg, off;
} cfa_state;

static int run_cfa(rd r, int64_t data_align, cfa_state *st)
{
    while (r.p < r.end && !r.bad) {
        uint8_t op = (uint8_t)rd_u(&r, 1);
        switch (op >> 6) {
        case 1: return 0;                           /* advance_loc: the first row ends */
        case 2: rd_uleb(&r); continue;              /* offset */
        case 3: continue;                           /* restore */
        }
        switch (op) {
        case DW_CFA_nop: case DW_CFA_remember_state: case DW_CFA_restore_state: break;
        case DW_CFA_set_loc: case DW_CFA_advance_loc1: case DW_CFA_advance_loc2: case DW_CFA_advance_loc4:
            return 0;
        case DW_CFA_offset_extended: case DW_CFA_register: case DW_CFA_val_offset:
        case DW_CFA_GNU_negative_offset_extended:
            rd_uleb(&r);
            rd_uleb(&r);
            break;
        case DW_CFA_offset_extended_sf: case DW_CFA_val_offset_sf:
            rd_uleb(&r);
            rd_sleb(&r);
            break;
        case DW_CFA_restore_extended: case DW_CFA_undefined: case DW_CFA_same_value: case DW_CFA_GNU_args_size:
            rd_uleb(&r);
            break;
        case DW_CFA_def_cfa:
            st->reg = (int64_t)rd_uleb(&r);
            st->off = (int64_t)rd_uleb(&r);
            break;
        case DW_CFA_def_cfa_sf:
            st->reg = (int64_t)rd_uleb(&r);
            st->off = (int64_t)((uint64_t)rd_sleb(&r) * (uint64_t)data_align);   /* untrusted: wraps, never UB */
            break;
        case DW_CFA_def_cfa_register: st->reg = (int64_t)rd_uleb(&r); break;
        case DW_CFA_def_cfa_offset: st->off = (int64_t)rd_uleb(&r); break;
        case DW_CFA_def_cfa_offset_sf: st->off = (int64_t)((uint64_t)rd_sleb(&r) * (uint64_t)data_align); break;
        case DW_CFA_def_cfa_expression: {
            uint64_t n = rd_uleb(&r);
            st->reg = -1;
            if (n > (uint64_t)(r.end - r.p))
                return -1;
            r.p += n;
            break;
        }
        case DW_CFA_expression: case DW_CFA_val_expression: {
            rd_uleb(&r);
            uint64_t n = rd_uleb(&r);
            if (n > (uint64_t)(r.end - r.p))
                return -1;
            r.p += n;
            break;
        }
        default:
            return -1;
        }
    }
    return r.bad ? -1 : 0;
}

static int parse_cie(rd r, const uint8_t *sec, int eh, cie_info *ci)
{
    uint8_t version = (uint8_t)rd_u(&r, 1);
    const uint8_t *aug = r.p;
    while (r.p < r.end && *r.p)
        r.p++;
    if (r.p >= r.end)
        return -1;
    size_t auglen = (size_t)(r.p - aug);
    r.p++;
    ci->addr_size = 8;
    ci->signal = 0;
    ci->fde_enc = eh ? DW_EH_PE_absptr : DW_EH_PE_udata8;
    if (version >= 4) {
        ci->addr_size = (uint8_t)rd_u(&r, 1);
        rd_u(&r, 1);                    /* segment size */
        if (ci->addr_size != 4 && ci->addr_size != 8)
            return -1;
        if (!eh)
            ci->fde_enc = ci->addr_size == 4 ? DW_EH_PE_udata4 : DW_EH_PE_udata8;
    }
    ci->code_align = rd_uleb(&r);
    ci->data_align = rd_sleb(&r);
    if (version == 1)
        rd_u(&r, 1);
    else
        rd_uleb(&r);                    /* return address register */
    ci->end = (size_t)(r.end - sec);
    ci->z = auglen > 0 && aug[0] == 'z';
    if (!ci->z) {
        ci->ins = (size_t)(r.p - sec);
        return r.bad ? -1 : 0;
    }
    uint64_t alen = rd_uleb(&r);
    if (r.bad || alen > (uint64_t)(r.end - r.p))
        return -1;
    rd a = {r.p, r.p + alen, 0};
    ci->ins = (size_t)(r.p + alen - sec);
    for (size_t i = 1; i < auglen; i++) {
        switch (aug[i]) {
        case 'L': rd_u(&a, 1); break;
        case 'R': ci->fde_enc = (uint8_t)rd_u(&a, 1); break;
        case 'P': {
            uint8_t penc = (uint8_t)rd_u(&a, 1);
            rd_enc(&a, penc & 0x7f, 0, 0);
            break;
        }
        case 'S': ci->signal = 1; break;
        case 'B': case 'G': break;
        default: i = auglen; break;     /* unknown: 'z' lets us skip the rest */
        }
    }
    return a.bad ? -1 : 0;
}

int icpp_fde_parse(const void *data, size_t size, uint64_t sh_addr, int eh, icpp_fde **out, size_t *nout,
                   icpp_err *err)
{
    *out = NULL;
    *nout = 0;
    const char *name = eh ? ".eh_frame" : ".debug_frame";
    const uint8_t *sec = data, *secend = sec + size;
    if (size > UINT32_MAX)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "%s: section of 4 GiB or more", name);
    icpp_fde *v = NULL;
    size_t n = 0, cap = 0;
    cie_info cache[16];
    size_t ncache = 0, cache_next = 0;
    const uint8_t *p = sec;
    while ((size_t)(secend - p) >= 4) {
        rd r = {p, secend, 0};
        uint64_t len = rd_u(&r, 4);
        int is64 = 0;
        if (len == 0xffffffffu) {
            len = rd_u(&r, 8);
            is64 = 1;
        }
        if (len == 0) {
            if (eh)
                break;                      /* .eh_frame terminator */
            p = r.p;
            continue;
        }
        if (r.bad || len > (uint64_t)(secend - r.p))
            goto corrupt;
        const uint8_t *body = r.p, *next = r.p + len;
        rd b = {body, next, 0};
        uint64_t id = rd_u(&b, is64 ? 8 : 4);
        int is_cie = eh ? id == 0 : (is64 ? id == UINT64_MAX : id == 0xffffffffu);
        if (b.bad)
            goto corrupt;
        if (!is_cie) {
            uint64_t cie_off = eh ? (uint64_t)(body - sec) - id : id;
            if (cie_off >= (uint64_t)(secend - sec))
                goto corrupt;
            cie_info ci;
            size_t k;
            for (k = 0; k < ncache && cache[k].off != cie_off; k++)
                ;
            if (k < ncache) {
                ci = cache[k];
            } else {
                rd c = {sec + cie_off, secend, 0};
                uint64_t clen = rd_u(&c, 4);
                int c64 = 0;
                if (clen == 0xffffffffu) {
                    clen = rd_u(&c, 8);
                    c64 = 1;
                }
                if (c.bad || clen > (uint64_t)(secend - c.p))
                    goto corrupt;
                rd cb = {c.p, c.p + clen, 0};
                rd_u(&cb, c64 ? 8 : 4);
                ci.off = cie_off;
                if (cb.bad || parse_cie(cb, sec, eh, &ci) < 0)
                    goto corrupt;
                cache[cache_next] = ci;
                cache_next = (cache_next + 1) % 16;
                if (ncache < 16)
                    ncache++;
            }
            uint64_t field = sh_addr + (uint64_t)(b.p - sec);
            uint64_t lo = rd_enc(&b, ci.fde_enc, field, 1);
            uint64_t range = rd_enc(&b, ci.fde_enc & 0x0f, 0, 0);
            if (b.bad || lo + range < lo)       /* a range past 2^64 would give hi < lo */
                goto corrupt;
            if (ci.z) {                         /* the FDE's augmentation data, then its instructions */
                uint64_t alen = rd_uleb(&b);
                if (b.bad || alen > (uint64_t)(b.end - b.p))
                    goto corrupt;
                b.p += alen;
            }
            /* the CFA at lo: a function entered by a call has rsp+8 */
            uint8_t entry = ICPP_FDE_ENTRY_UNKNOWN;
            cfa_state cs = {-1, 0};
            if (run_cfa((rd){sec + ci.ins, sec + ci.end, 0}, ci.data_align, &cs) == 0 &&
                run_cfa((rd){b.p, b.end, 0}, ci.data_align, &cs) == 0 && cs.reg >= 0)
                entry = cs.reg == 7 && cs.off == 8 ? ICPP_FDE_ENTRY_CALL : ICPP_FDE_ENTRY_FRAME;
            /* Factors outside 1..255 / -128..127 (never emitted) are stored as 0:
             * lib/cfaprog.h refuses to read such a program. */
            int odd = ci.code_align < 1 || ci.code_align > 255 || ci.data_align < -128 || ci.data_align > 127;
            if (range) {
                if (icpp_vec_reserve((void **)&v, &cap, n + 1, sizeof *v, 256) < 0) {
                    free(v);
                    return icpp_err_set(err, ENOMEM, "%s: out of memory", name);
                }
                v[n++] = (icpp_fde){lo, lo + range, ci.signal, entry, ci.fde_enc, odd ? 0 : (int8_t)ci.data_align,
                                    odd ? 0 : (uint8_t)ci.code_align, (uint32_t)ci.ins, (uint32_t)ci.end,
                                    (uint32_t)(b.p - sec), (uint32_t)(next - sec)};
            }
        }
        p = next;
    }
    *out = v;
    *nout = n;
    return 0;
corrupt:
    free(v);
    return icpp_err_set(err, ICPP_EFORMAT, "%s: corrupt entry at offset 0x%tx", name, p - sec);
}

