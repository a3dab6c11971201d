/* clone.c -- function cloning: a copy of a function in OUT's new segment, called instead of it from chosen call sites, with a frame padding of its own. */
#include "clone.h"
#include <Zydis/Zydis.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfaprog.h"
#include "ehwrite.h"
#include "fde.h"
#include "wrap.h"

struct rw_cloner {
    const icpp_module *m;
    const rw_image    *img;
    uint8_t           *orig;        /* PROG's bytes as loaded (the image is patched later) */
    icpp_fde          *fde;         /* .eh_frame's FDEs, sorted by lo */
    size_t             nfde;
    icpp_ehw_fde      *lsda;        /* the same with their LSDAs, sorted by lo */
    size_t             nlsda;
};

static const ZydisDecoder *decoder(void)
{
    static ZydisDecoder d;
    static int ready;
    if (!ready) {
        ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
        ready = 1;
    }
    return &d;
}

static int fde_cmp(const void *a, const void *b)
{
    const icpp_fde *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

rw_cloner *rw_cloner_new(const icpp_module *m, const rw_image *img, icpp_err *err)
{
    rw_cloner *c = calloc(1, sizeof *c);
    if (!c || !(c->orig = malloc(img->len ? img->len : 1))) {
        free(c);
        icpp_err_set(err, ENOMEM, "out of memory reading the program for cloning");
        return NULL;
    }
    memcpy(c->orig, img->bytes, img->len);
    c->m = m;
    c->img = img;
    const rw_cfisec *eh = &img->eh_frame;
    if (eh->size && !eh->compressed && eh->off + eh->size <= img->len) {
        if (icpp_fde_parse(c->orig + eh->off, eh->size, eh->addr, 1, &c->fde, &c->nfde, err) < 0 ||
            icpp_ehw_list(c->orig + eh->off, eh->size, eh->addr, &c->lsda, &c->nlsda, err) < 0) {
            rw_cloner_free(c);
            return NULL;
        }
        qsort(c->fde, c->nfde, sizeof *c->fde, fde_cmp);
    }
    return c;
}

void rw_cloner_free(rw_cloner *c)
{
    if (!c)
        return;
    free(c->orig);
    free(c->fde);
    free(c->lsda);
    free(c);
}

static const icpp_fde *fde_at(const rw_cloner *c, uint64_t lo)
{
    size_t a = 0, b = c->nfde;
    while (a < b) {
        size_t h = (a + b) / 2;
        if (c->fde[h].lo < lo)
            a = h + 1;
        else
            b = h;
    }
    return a < c->nfde && c->fde[a].lo == lo ? &c->fde[a] : NULL;
}

static const uint8_t *orig_code(const rw_cloner *c, uint64_t addr, size_t *avail)
{
    const uint8_t *p = rw_image_code(c->img, addr, avail);
    return p ? c->orig + (p - c->img->bytes) : NULL;
}

/* One decoded instruction's reference out of [lo, hi): where its rel32 or
 * disp32 is (offset in the instruction) and what it reaches. */
typedef struct ref {
    uint8_t  off;
    uint64_t to;
} ref;

/* Check the instruction at a (len bytes) and find its outward reference:
 * 1 with *r set, 0 without one, or -1 with *why. */
static int judge_ins(const rw_cloner *c, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a,
                     uint64_t lo, uint64_t hi, ref *r, const char **why)
{
    int branch = in->meta.category == ZYDIS_CATEGORY_CALL || in->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
                 in->meta.category == ZYDIS_CATEGORY_COND_BR;
    for (uint8_t i = 0; i < in->operand_count_visible; i++) {
        const ZydisDecodedOperand *o = &op[i];
        uint64_t t;
        if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o->imm.is_relative) {
            if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, o, a, &t)))
                return *why = "a relative operand it cannot follow", -1;
            if (t >= lo && t < hi)
                return 0;
            if (in->raw.imm[0].size != 32)
                return *why = "a short jump out of its code", -1;
            if (in->meta.category != ZYDIS_CATEGORY_CALL) {
                const icpp_func *g = icpp_module_func_start(c->m, t);
                if (!g || g->owner != g->addr)
                    return *why = "a jump out of its code that is not a tail call (a split-off part?)", -1;
            }
            *r = (ref){in->raw.imm[0].offset, t};
            return 1;
        }
        if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.base == ZYDIS_REGISTER_RIP) {
            if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, o, a, &t)) || in->raw.disp.size != 32)
                return *why = "a rip-relative operand it cannot follow", -1;
            if (branch && !(t < lo || t >= hi))
                return *why = "an indirect jump through its own code", -1;
            if (in->meta.category == ZYDIS_CATEGORY_UNCOND_BR)
                return *why = "an indirect jump (a jump table would lead back into PROG's copy)", -1;
            if (t >= lo && t < hi)
                return 0;
            *r = (ref){in->raw.disp.offset, t};
            return 1;
        }
        if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in->raw.imm[0].size >= 32 && o->imm.value.u >= lo &&
            o->imm.value.u < hi)
            return *why = "an absolute address of its own code", -1;
        if (in->meta.category == ZYDIS_CATEGORY_UNCOND_BR && i == 0 && o->type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
            return *why = "an indirect jump (a jump table would lead back into PROG's copy)", -1;
    }
    return 0;
}

/* Walk the function at lo: every instruction decoded and judged; with
 * code != NULL (the copy, at link-time at) every outward reference is
 * re-aimed.  NULL, or why not. */
static const char *walk(const rw_cloner *c, uint64_t lo, uint64_t hi, uint8_t *code, uint64_t at, int *far)
{
    size_t avail;
    const uint8_t *p = orig_code(c, lo, &avail);
    if (!p || avail < hi - lo)
        return "its code is not in the file";
    for (uint64_t off = 0; off < hi - lo;) {
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(decoder(), p + off, hi - lo - off, &in, op)))
            return "bytes that do not decode as x86-64 instructions";
        ref r;
        const char *why = NULL;
        int k = judge_ins(c, &in, op, lo + off, lo, hi, &r, &why);
        if (k < 0)
            return why;
        if (k > 0 && code) {
            int64_t d = (int64_t)(r.to - (at + off + in.length));
            if (d != (int32_t)d) {
                *far = 1;
                return "a reference the copy cannot reach (rel32)";
            }
            int32_t v = (int32_t)d;
            memcpy(code + off + r.off, &v, 4);
        }
        off += in.length;
    }
    return NULL;
}

const char *rw_clone_judge(rw_cloner *c, uint64_t addr)
{
    const icpp_func *f = icpp_module_func_start(c->m, addr);
    if (!f || f->plt || f->owner != f->addr)
        return "not a function of the program";
    if (!f->size)
        return "its size is not known";
    const icpp_func *fs = icpp_module_funcs(c->m);
    for (size_t i = 0, n = icpp_module_nfuncs(c->m); i < n; i++)
        if (fs[i].owner == addr && fs[i].addr != addr)
            return "it has a split-off part (.cold)";
    const icpp_fde *e = fde_at(c, addr);
    if (!e || e->hi != addr + f->size)
        return "its CFI does not cover exactly its code";
    if (e->signal || e->code_align != 1 || e->data_align != -8)
        return "its CFI has another alignment than gcc's (or is a signal frame)";
    for (size_t i = 0; i < c->nlsda; i++)
        if (c->lsda[i].lo == addr && c->lsda[i].lsda)
            return "it has an exception table (LSDA)";
    icpp_cfaprog cp;
    icpp_err err;
    const rw_cfisec *eh = &c->img->eh_frame;
    if (icpp_cfaprog_read(c->orig + eh->off, eh->size, e, &cp, &err) < 0)
        return "its CFA program cannot be read (DW_CFA_set_loc?)";
    icpp_cfaprog_free(&cp);
    int far = 0;
    return walk(c, addr, addr + f->size, NULL, 0, &far);
}

uint64_t rw_clone_size(rw_cloner *c, uint64_t addr)
{
    const icpp_func *f = icpp_module_func_start(c->m, addr);
    return f ? f->size : 0;
}

int rw_clone_emit(rw_cloner *c, uint64_t orig, const rw_frame *fr, uint32_t pad, uint64_t at, uint8_t *code,
                  struct icpp_ehw *eh, icpp_err *err)
{
    const char *why = rw_clone_judge(c, orig);
    const icpp_func *f = icpp_module_func_start(c->m, orig);
    if (why || !f)
        return icpp_err_set(err, EINVAL, "internal error: the function at %#" PRIx64 " cannot be cloned: %s", orig,
                            why ? why : "?");
    size_t avail;
    const uint8_t *p = orig_code(c, orig, &avail);
    memcpy(code, p, f->size);
    int far = 0;
    if ((why = walk(c, orig, orig + f->size, code, at, &far)))
        return icpp_err_set(err, far ? ICPP_EUNSUPPORTED : EINVAL, "the clone of %s: %s", f->name, why);
    const icpp_fde *e = fde_at(c, orig);
    const rw_cfisec *sec = &c->img->eh_frame;
    size_t nins = e->end - e->ins;
    uint8_t *ins = malloc(nins + 1);
    if (!ins)
        return icpp_err_set(err, ENOMEM, "out of memory cloning %s", f->name);
    memcpy(ins, c->orig + sec->off + e->ins, nins);
    if (pad && (!fr || rw_frame_patch_copy(fr, pad, code, orig, f->size, ins, sec->off + e->ins, nins, c->img,
                                           err) < 0)) {
        free(ins);
        return fr ? icpp_err_prefix(err, "the clone of %s", f->name)
                  : icpp_err_set(err, EINVAL, "internal error: clone of %s padded without a verdict", f->name);
    }
    /* A CIE of its own with the function's CIE's initial instructions (a
     * DW_CFA_restore in its FDE means their rules), then its FDE. */
    size_t cie;
    int rc = icpp_ehw_add_cie(eh, c->orig + sec->off + e->cie_ins, e->cie_end - e->cie_ins, &cie, err) < 0 ||
                     icpp_ehw_add_fde(eh, cie, at, f->size, ins, nins, err) < 0
                 ? -1
                 : 0;
    free(ins);
    return rc;
}

int rw_clone_redirect(rw_image *img, uint64_t ret, uint64_t to, icpp_err *err)
{
    size_t avail;
    uint8_t *s = rw_image_code(img, ret - 5, &avail);
    if (!s || avail < 5 || s[0] != 0xe8)
        return icpp_err_set(err, EINVAL, "internal error: no direct call at %#" PRIx64, ret - 5);
    int64_t d = (int64_t)(to - ret);
    if (d != (int32_t)d)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "the clone is out of reach of the call at %#" PRIx64, ret - 5);
    int32_t v = (int32_t)d;
    memcpy(s + 1, &v, 4);
    return 0;
}

int rw_clone_classes(const icpp_pathmap *pm, const rw_sites *s, const uint32_t *cpad, rw_cloner *c,
                     const rw_frames *fs, const uint32_t *maxpad, const uint8_t *bywrap, int32_t *cmax,
                     icpp_err *err)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    uint32_t main = icpp_pathmap_main(pm);
    uint64_t *callee = calloc(s->ncls + 1, sizeof *callee);
    uint8_t *seen = calloc(s->ncls + 1, 1);
    if (!callee || !seen) {
        free(callee), free(seen);
        return icpp_err_set(err, ENOMEM, "out of memory judging clones");
    }
    for (uint32_t k = 0; k <= s->ncls; k++)
        cmax[k] = -1;
    /* one direct call target per class, not wrapped */
    for (size_t i = 0; i < s->n; i++) {
        const rw_site *st = &s->v[i];
        size_t avail;
        const uint8_t *b = orig_code(c, st->ret - 5, &avail);
        const icpp_func *g = icpp_module_func_start(c->m, st->callee);
        int ok = b && avail >= 5 && b[0] == 0xe8 && st->callee == st->ret + (uint64_t)(int64_t)(int32_t)
                 ((uint32_t)b[1] | (uint32_t)b[2] << 8 | (uint32_t)b[3] << 16 | (uint32_t)b[4] << 24) &&
                 g && !g->plt && g->owner == g->addr && !cpad[st->cls];
        if (!seen[st->cls]) {
            seen[st->cls] = 1;
            callee[st->cls] = ok ? st->callee : 0;
        } else if (!ok || callee[st->cls] != st->callee) {
            callee[st->cls] = 0;
        }
    }
    /* a function owning a wrapped site cannot be copied (its copy would
     * call directly) */
    for (size_t i = 0; i < s->n; i++)
        if (cpad[s->v[i].cls])
            for (uint32_t k = 0; k < s->ncls; k++)
                if (callee[k] == s->v[i].owner)
                    callee[k] = 0;
    /* every node through the class enters its callee, all sites in it */
    for (size_t i = 1; i < nn; i++) {
        int32_t k = s->node_cls[i];
        if (k < 0 || !callee[k])
            continue;
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        const icpp_pm_func *f = icpp_pathmap_func(pm, nd->func);
        int ok = f->module == main && f->addr == callee[k] && !(bywrap && bywrap[nd->func]);
        for (uint32_t j = 0; j < nd->nsites && ok; j++)
            ok = nd->sites[j].module == main;
        if (!ok) {
            callee[k] = 0;
            continue;
        }
        if (cmax[k] == -1) {
            if (rw_clone_judge(c, callee[k])) {
                callee[k] = 0;
                continue;
            }
            const rw_frame *fr = rw_frames_find(fs, callee[k]);
            uint32_t q = fr && !fr->why ? maxpad[nd->func] : 0;
            cmax[k] = (int32_t)(q > 256 ? 256 : q / 16 * 16);
        }
    }
    for (uint32_t k = 0; k < s->ncls; k++)
        if (!callee[k])
            cmax[k] = -1;
    free(callee), free(seen);
    return 0;
}

#define NAME_MAX_ 512

int rw_clone_list(const icpp_module *m, const rw_sites *s, const int32_t *cq, size_t nwraps, const rw_image *img,
                  rw_clone_set *out, icpp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t n = 0, nr = 0;
    for (uint32_t k = 0; k < s->ncls; k++)
        n += cq[k] >= 0;
    for (size_t i = 0; i < s->n; i++)
        nr += cq[s->v[i].cls] >= 0;
    if (!n)
        return 0;
    int32_t *slot = malloc((s->ncls + 1) * sizeof *slot);
    out->c = calloc(n, sizeof *out->c);
    out->rets = malloc(nr * sizeof *out->rets);
    out->names = calloc(n, NAME_MAX_);
    if (!slot || !out->c || !out->rets || !out->names) {
        free(slot);
        rw_clone_set_free(out);
        return icpp_err_set(err, ENOMEM, "out of memory listing clones");
    }
    for (uint32_t k = 0; k < s->ncls; k++)
        slot[k] = cq[k] >= 0 ? (int32_t)out->n++ : -1;
    /* rets grouped by clone, each group sorted (s->v is sorted by ret) */
    size_t at = 0;
    for (uint32_t k = 0; k < s->ncls; k++) {
        if (slot[k] < 0)
            continue;
        icpp_arr_clone *c = &out->c[slot[k]];
        c->rets = out->rets + at;
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].cls == k) {
                out->rets[at++] = s->v[i].ret;
                c->orig = s->v[i].callee;
            }
        c->nrets = (size_t)(out->rets + at - c->rets);
        const icpp_func *f = icpp_module_func_start(m, c->orig);
        c->size = f ? f->size : 0;
        c->pad = (uint32_t)cq[k];
        char *nm = out->names + NAME_MAX_ * (size_t)slot[k];
        snprintf(nm, NAME_MAX_, "%.470s.icpp_clone.%d", f && f->sym ? f->sym : "fn", slot[k]);
        c->name = nm;
    }
    out->nrets = at;
    free(slot);
    rw_clone_layout(img, nwraps, out->c, out->n);
    return 0;
}

void rw_clone_set_free(rw_clone_set *cs)
{
    free(cs->c);
    free(cs->rets);
    free(cs->names);
    memset(cs, 0, sizeof *cs);
}
