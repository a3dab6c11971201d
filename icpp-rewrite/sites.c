/* sites.c -- the main-module call sites of a map's paths: each judged (may it go through a stub or call a copy?), and their classes (sites that share a path). */
#include "sites.h"

#include "ehwrite.h"
#include "vec.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rw_site_cmp(const void *a, const void *b)
{
    const rw_site *x = a, *y = b;
    return x->ret < y->ret ? -1 : x->ret > y->ret;
}

static int range_cmp(const void *a, const void *b)
{
    const icpp_arr_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

rw_site *rw_sites_at(const rw_sites *s, uint64_t ret)
{
    rw_site key = {.ret = ret};
    return bsearch(&key, s->v, s->n, sizeof *s->v, rw_site_cmp);
}

/* The caller's CFI row at the call (libdw): CFA = rsp/rbp + offset, and
 * registers saved at CFA offsets.  Anything else is refused. */
static const char *cfi_row(Dwarf_CFI *dcfi, uint64_t at, rw_site *st)
{
    Dwarf_Frame *fr = NULL;
    if (!dcfi || dwarf_cfi_addrframe(dcfi, at, &fr) != 0 || !fr)
        return "no CFI covers the call";
    const char *why = NULL;
    Dwarf_Op *ops = NULL;
    size_t nops = 0;
    /* libdw gives a register + offset rule as DW_OP_bregx (reg, offset). */
    if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops != 1 || !ops) {
        why = "the caller's CFA at the call is not rsp or rbp plus an offset";
        goto out;
    }
    if (ops[0].atom == DW_OP_bregx && (ops[0].number == 6 || ops[0].number == 7)) {
        st->cfa_reg = (uint8_t)ops[0].number;
        st->cfa_off = (int64_t)ops[0].number2;
    } else if (ops[0].atom == DW_OP_breg7 || ops[0].atom == DW_OP_breg6) {
        st->cfa_reg = ops[0].atom == DW_OP_breg7 ? 7 : 6;
        st->cfa_off = (int64_t)ops[0].number;
    } else {
        why = "the caller's CFA at the call is not rsp or rbp plus an offset";
        goto out;
    }
    if (st->cfa_off < 16 || st->cfa_off > 1 << 20) {
        why = "the caller's CFA offset at the call is out of range";
        goto out;
    }
    for (int reg = 0; reg <= 16; reg++) {
        if (reg == 7)
            continue;           /* rsp: the CFA */
        Dwarf_Op mem[3];
        ops = NULL;
        nops = 0;
        if (dwarf_frame_register(fr, reg, mem, &ops, &nops) != 0) {
            why = "the caller's CFI at the call cannot be read";
            goto out;
        }
        if (nops == 0)
            continue;           /* undefined or same value: the CIE's default */
        int64_t off;
        if (ops[0].atom == DW_OP_call_frame_cfa && nops == 2 && ops[1].atom == DW_OP_plus_uconst)
            off = (int64_t)ops[1].number;
        else if (ops[0].atom == DW_OP_call_frame_cfa && nops == 3 && ops[1].atom == DW_OP_consts &&
                 ops[2].atom == DW_OP_plus)
            off = (int64_t)ops[1].number;
        else if (ops[0].atom == DW_OP_call_frame_cfa && nops == 1)
            off = 0;
        else {
            why = "a register rule of the caller's CFI at the call is not a save at a CFA offset";
            goto out;
        }
        st->saved |= 1u << reg;
        st->save_off[reg] = off;
    }
    if (!(st->saved & (1u << 16)))
        why = "the caller's CFI at the call does not say where the return address is";
out:
    free(fr);
    return why;
}

/* s->v: the distinct main-module return addresses of pm's nodes, sorted.
 * 0, or -1 out of memory. */
static int sites_collect(rw_sites *s, const icpp_pathmap *pm)
{
    size_t nn = icpp_pathmap_nnodes(pm), cap = 0;
    uint32_t main = icpp_pathmap_main(pm);
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t k = 0; k < nd->nsites; k++) {
            if (nd->sites[k].module != main)
                continue;
            if (icpp_vec_reserve((void **)&s->v, &cap, s->n + 1, sizeof *s->v, 64) < 0)
                return -1;
            s->v[s->n++] = (rw_site){.ret = nd->sites[k].addr};
        }
    }
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, rw_site_cmp);
    size_t u = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!u || s->v[u - 1].ret != s->v[i].ret)
            s->v[u++] = s->v[i];
    s->n = u;
    return 0;
}

/* What the sites are judged with: PROG's code ranges (sorted by lo), its
 * FDEs (sorted, with their LSDAs) and libdw's CFI. */
typedef struct judge_in {
    const icpp_module    *m;
    const rw_image       *img;
    const rw_frames      *fs;
    const icpp_arr_range *r;
    size_t                nranges;
    const icpp_ehw_fde   *fdes;
    size_t                nfdes;
    Dwarf_CFI            *dcfi;
} judge_in;

/* Fill in st's owner, callee and CFI row; NULL if it can be wrapped, else
 * why not (static text). */
static const char *site_judge(rw_site *st, const judge_in *in)
{
    size_t avail;
    const uint8_t *c = st->ret >= 5 ? rw_image_code(in->img, st->ret - 5, &avail) : NULL;
    const icpp_arr_range *own = icpp_arr_range_at(in->r, in->nranges, st->ret - 5);
    if (own) {
        st->owner = own->owner;
        const icpp_func *of = icpp_module_func_start(in->m, own->owner);
        st->owner_name = of ? (of->sym ? of->sym : of->name) : NULL;
    }
    if (!c || avail < 5 || c[0] != 0xe8)
        return "not a direct call (E8 rel32)";
    int32_t rel;
    memcpy(&rel, c + 1, 4);
    st->callee = st->ret + (uint64_t)(int64_t)rel;
    if (!own || !st->owner_name)
        return "the call is in no function of the program";
    const rw_frame *cf = rw_frames_find(in->fs, st->callee);
    if (!cf)
        return "the callee is not a function of the program (a PLT stub, a library)";
    if (cf->args != RW_ARGS_NONE)
        return cf->args == RW_ARGS_READ ? "the callee may read stack-passed arguments (the stub would move them)"
                                        : "the callee could not be analysed for stack-passed arguments";
    /* An exception table of the caller: a landing pad for this call would
     * be entered from the stub's frame at the wrong depth, and a call it
     * does not list must terminate.  Refused. */
    size_t lo = 0, hi = in->nfdes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (in->fdes[mid].lo <= st->ret - 5)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0 && st->ret - 5 < in->fdes[lo - 1].hi && in->fdes[lo - 1].lsda)
        return "the caller has an exception table (LSDA)";
    return cfi_row(in->dcfi, st->ret - 5, st);
}

static uint32_t uf_find(uint32_t *p, uint32_t x)
{
    while (p[x] != x)
        x = p[x] = p[p[x]];
    return x;
}

/* Classes: sites that share a path; a path with sites elsewhere too makes
 * its class unwrappable, as does a site whose paths enter another function
 * than its target.  Fills cls of every site, s->ncls, s->node_cls,
 * s->cls_ok and s->cls_weight.  0, or -1 out of memory. */
static int sites_classes(rw_sites *s, const icpp_pathmap *pm, const rw_frames *fs)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    uint32_t main = icpp_pathmap_main(pm);
    uint32_t *uf = malloc((s->n + 1) * sizeof *uf), *cid = NULL;
    uint8_t *mixed = calloc(s->n + 1, 1);
    int rc = -1;
    s->node_cls = malloc(nn * sizeof *s->node_cls);
    if (!uf || !mixed || !s->node_cls)
        goto out;
    for (uint32_t i = 0; i < s->n; i++)
        uf[i] = i;
    for (size_t i = 0; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        int64_t first = -1;
        int other = 0;
        for (uint32_t k = 0; k < nd->nsites; k++) {
            if (nd->sites[k].module != main) {
                other = 1;
                continue;
            }
            uint32_t x = (uint32_t)(rw_sites_at(s, nd->sites[k].addr) - s->v);
            if (first < 0)
                first = x;
            else
                uf[uf_find(uf, x)] = uf_find(uf, (uint32_t)first);
        }
        if (first >= 0 && other)
            mixed[first] = 1;
        /* The path must enter the call's own target: a return address
         * after an indirect call may have E8 five bytes before it by
         * chance, and a call that tail-jumps elsewhere passes its
         * arguments on. */
        const icpp_pm_func *fn = i ? icpp_pathmap_func(pm, nd->func) : NULL;
        for (uint32_t k = 0; fn && k < nd->nsites; k++) {
            if (nd->sites[k].module != main)
                continue;
            rw_site *st = rw_sites_at(s, nd->sites[k].addr);
            if (st && !st->why && (fn->module != main || (fn->addr != st->callee &&
                                                          !rw_frames_tail_reaches(fs, st->callee, fn->addr))))
                st->why = "the paths through it enter another function than the call's target (or its tail calls)";
        }
        s->node_cls[i] = (int32_t)first;   /* a site for now */
    }
    cid = malloc((s->n + 1) * sizeof *cid);
    if (!cid)
        goto out;
    for (uint32_t i = 0; i < s->n; i++)
        cid[i] = UINT32_MAX;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t root = uf_find(uf, i);
        if (cid[root] == UINT32_MAX)
            cid[root] = s->ncls++;
        s->v[i].cls = cid[root];
    }
    s->cls_ok = malloc(s->ncls + 1);
    s->cls_weight = calloc(s->ncls + 1, sizeof *s->cls_weight);
    if (!s->cls_ok || !s->cls_weight)
        goto out;
    memset(s->cls_ok, 1, s->ncls + 1);
    for (uint32_t i = 0; i < s->n; i++)
        if (s->v[i].why || mixed[i])
            s->cls_ok[s->v[i].cls] = 0;
    for (size_t i = 0; i < nn; i++) {
        if (s->node_cls[i] < 0)
            continue;
        s->node_cls[i] = (int32_t)s->v[s->node_cls[i]].cls;
        s->cls_weight[s->node_cls[i]] += icpp_pathmap_node(pm, (uint32_t)i)->count;
    }
    rc = 0;
out:
    free(uf);
    free(mixed);
    free(cid);
    return rc;
}

int rw_sites_find(rw_sites *s, const icpp_pathmap *pm, const icpp_module *m, const rw_image *img,
                  const rw_frames *fs, const icpp_arr_range *ranges, size_t nranges, icpp_err *err)
{
    memset(s, 0, sizeof *s);
    icpp_arr_range *r = malloc((nranges + 1) * sizeof *r);
    icpp_ehw_fde *fdes = NULL;
    size_t nfdes = 0;
    Dwarf_CFI *dcfi = NULL;
    if (!r || sites_collect(s, pm) < 0)
        goto oom;
    memcpy(r, ranges, nranges * sizeof *r);
    qsort(r, nranges, sizeof *r, range_cmp);

    /* Judge each site. */
    if (img->eh_frame.size &&
        icpp_ehw_list(img->bytes + img->eh_frame.off, img->eh_frame.size, img->eh_frame.addr, &fdes, &nfdes, err) < 0)
        goto fail;
    dcfi = dwarf_getcfi_elf(icpp_module_elf(m));
    judge_in in = {m, img, fs, r, nranges, fdes, nfdes, dcfi};
    for (size_t i = 0; i < s->n; i++)
        s->v[i].why = site_judge(&s->v[i], &in);
    if (sites_classes(s, pm, fs) < 0)
        goto oom;
    int rc = 0;
    goto out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory judging call sites");
fail:
    rw_sites_free(s);
    rc = -1;
out:
    free(r);
    free(fdes);
    if (dcfi)
        dwarf_cfi_end(dcfi);
    return rc;
}

void rw_sites_free(rw_sites *s)
{
    free(s->v);
    free(s->cls_ok);
    free(s->cls_weight);
    free(s->node_cls);
    memset(s, 0, sizeof *s);
}
