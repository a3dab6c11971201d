/* clone.c -- function cloning: a copy of a function in OUT's new segment, called instead of it from chosen call sites, with a frame padding of its own. */
#include "clone.h"
#include <Zydis/Zydis.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cfaprog.h"
#include "cli.h"
#include "ehwrite.h"
#include "fde.h"
#include "greedy.h"
#include "sites.h"

struct rw_cloner {
    const icpp_module *m;
    const rw_image    *img;
    uint8_t           *orig;        /* PROG's bytes as loaded (the image is patched later) */
    icpp_fde          *fde;         /* .eh_frame's FDEs, sorted by lo */
    size_t             nfde;
    icpp_ehw_fde      *lsda;        /* the same with their LSDAs, sorted by lo */
    size_t             nlsda;
};

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
        if (c->nfde)    /* none: c->fde is NULL, which qsort must not get (UBSan nonnull-attribute) */
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

static int fde_lo_cmp(const void *k, const void *e)
{
    uint64_t a = *(const uint64_t *)k, b = ((const icpp_fde *)e)->lo;
    return a < b ? -1 : a > b;
}

static int ehw_lo_cmp(const void *k, const void *e)
{
    uint64_t a = *(const uint64_t *)k, b = ((const icpp_ehw_fde *)e)->lo;
    return a < b ? -1 : a > b;
}

/* The FDE starting at lo, as lib/fde.h and lib/ehwrite.h read it. */
static const icpp_fde *fde_at(const rw_cloner *c, uint64_t lo)
{
    return c->nfde ? bsearch(&lo, c->fde, c->nfde, sizeof *c->fde, fde_lo_cmp) : NULL;
}

static const icpp_ehw_fde *ehw_at(const rw_cloner *c, uint64_t lo)
{
    return c->nlsda ? bsearch(&lo, c->lsda, c->nlsda, sizeof *c->lsda, ehw_lo_cmp) : NULL;
}

static uint64_t uleb(const uint8_t **p, const uint8_t *end, int *bad)
{
    uint64_t v = 0;
    for (int sh = 0; *p < end && sh < 64; sh += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80))
            return v;
    }
    *bad = 1;
    return 0;
}

/* The FDE of the function at lo as a copy needs it: the section offset of
 * its CIE, and whether its augmentation data is the 4-byte LSDA pointer of
 * a "zPLR" CIE (1) or empty ("zR": 0).  NULL, or why not: the copy's FDE is
 * written under the same CIE (lib/ehwrite.h: pointers pc-relative sdata4). */
static const char *fde_shape(const rw_cloner *c, const icpp_fde *e, const icpp_ehw_fde *x, size_t *cie_off,
                             int *with_lsda)
{
    const rw_cfisec *sec = &c->img->eh_frame;
    const uint8_t *base = c->orig + sec->off, *end = base + sec->size;
    if (e->fde_enc != 0x1b || x->off + 17 > sec->size)
        return "its FDE's pointers are not pc-relative sdata4";
    uint32_t ptr;
    memcpy(&ptr, base + x->off + 4, 4);
    if (ptr > x->off + 4)
        return "its FDE's CIE pointer is out of its section";
    *cie_off = x->off + 4 - ptr;
    const uint8_t *p = base + *cie_off + 8;     /* length, id */
    if (p >= end || (*p != 1 && *p != 3))
        return "its CIE has an unknown version";
    int v3 = *p++ == 3, bad = 0;
    const char *aug = (const char *)p;
    while (p < end && *p)
        p++;
    if (p++ >= end)
        return "its CIE is truncated";
    uleb(&p, end, &bad);                        /* code alignment */
    uleb(&p, end, &bad);                        /* data alignment (SLEB, only skipped) */
    if (v3)
        uleb(&p, end, &bad);
    else
        p++;
    int has_l = 0;
    if (!strcmp(aug, "zPLR")) {
        uleb(&p, end, &bad);
        if (p + 7 > end || (p[0] != 0x9b && p[0] != 0x1b) || p[5] != 0x1b || p[6] != 0x1b)
            return "its CIE's personality or LSDA encoding is not gcc's";
        has_l = 1;
    } else if (strcmp(aug, "zR")) {
        return "its CIE's augmentation is neither zR nor zPLR";
    }
    if (bad)
        return "its CIE is truncated";
    const uint8_t *q = base + x->off + 16;
    uint64_t naug = uleb(&q, end, &bad);
    if (bad || naug != (has_l ? 4u : 0u) || (size_t)(q - base) + naug != e->ins)
        return "its FDE's augmentation data is not an LSDA pointer";
    *with_lsda = has_l;
    if (!x->lsda)
        return NULL;
    /* The landing pads are relative to the function's start (LPStart
     * omitted): the copy's are in the copy. */
    for (size_t i = 0; i < c->img->nsegs; i++) {
        const rw_seg *sg = &c->img->segs[i];
        if (x->lsda >= sg->vaddr && x->lsda < sg->vaddr + sg->filesz)
            return c->orig[sg->off + (x->lsda - sg->vaddr)] == 0xff ? NULL
                                                                     : "its exception table sets its own LPStart";
    }
    return "its exception table is not in the file";
}

static const uint8_t *orig_code(const rw_cloner *c, uint64_t addr, size_t *avail)
{
    const uint8_t *p = rw_image_code(c->img, addr, avail);
    return p ? c->orig + (p - c->img->bytes) : NULL;
}

/* A function's code: its own range and its split-off parts (gcc's
 * foo.cold), each copied to `at` (rw_clone_parts lays them out). */
#define MAX_PARTS RW_CLONE_MAX_PARTS
typedef icpp_arr_part part;     /* [lo, hi) in PROG, its copy at addr */

/* Where a reference to t goes in the copy: into the copy of the part that
 * holds t, else t itself (out of the function). */
static int in_parts(const part *p, size_t np, uint64_t t, uint64_t *to)
{
    for (size_t i = 0; i < np; i++)
        if (t >= p[i].lo && t < p[i].hi) {
            *to = t - p[i].lo + p[i].addr;
            return 1;
        }
    *to = t;
    return 0;
}

/* One decoded instruction's reference: where its rel32 or disp32 is
 * (offset in the instruction) and what it reaches in PROG. */
typedef struct ref {
    uint8_t  off;
    uint64_t to;
} ref;

/* Check the instruction at a and find its pc-relative reference: 1 with *r
 * set, 0 without one, or -1 with *why. */
static int judge_ins(const rw_cloner *c, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a,
                     const part *p, size_t np, ref *r, const char **why)
{
    int branch = in->meta.category == ZYDIS_CATEGORY_CALL || in->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
                 in->meta.category == ZYDIS_CATEGORY_COND_BR;
    uint64_t to;
    for (uint8_t i = 0; i < in->operand_count_visible; i++) {
        const ZydisDecodedOperand *o = &op[i];
        uint64_t t;
        if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o->imm.is_relative) {
            if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, o, a, &t)))
                return *why = "a relative operand it cannot follow", -1;
            int inside = in_parts(p, np, t, &to), same = 0;
            for (size_t k = 0; k < np; k++)
                same |= a >= p[k].lo && a < p[k].hi && t >= p[k].lo && t < p[k].hi;
            if (same)
                return 0;               /* within one part: the displacement stays */
            if (in->raw.imm[0].size != 32)
                return *why = "a short jump out of its code", -1;
            if (!inside && in->meta.category != ZYDIS_CATEGORY_CALL) {
                const icpp_func *g = icpp_module_func_start(c->m, t);
                if (!g || g->owner != g->addr)
                    return *why = "a jump into another function's code that is not a tail call", -1;
            }
            *r = (ref){in->raw.imm[0].offset, t};
            return 1;
        }
        if (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.base == ZYDIS_REGISTER_RIP) {
            if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, o, a, &t)) || in->raw.disp.size != 32)
                return *why = "a rip-relative operand it cannot follow", -1;
            if (branch && in_parts(p, np, t, &to))
                return *why = "an indirect jump through its own code", -1;
            if (in->meta.category == ZYDIS_CATEGORY_UNCOND_BR)
                return *why = "an indirect jump (a jump table would lead back into PROG's copy)", -1;
            *r = (ref){in->raw.disp.offset, t};
            return 1;                   /* re-aimed: into the copy if it is the function's own code */
        }
        if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && in->raw.imm[0].size >= 32 && in_parts(p, np, o->imm.value.u, &to))
            return *why = "an absolute address of its own code", -1;
        if (in->meta.category == ZYDIS_CATEGORY_UNCOND_BR && i == 0 && o->type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
            return *why = "an indirect jump (a jump table would lead back into PROG's copy)", -1;
    }
    return 0;
}

/* Walk part k of p[0..np): every instruction decoded and judged; with
 * code != NULL (the part's copy) every reference out of the part is
 * re-aimed.  NULL, or why not. */
static const char *walk(const rw_cloner *c, const part *p, size_t np, size_t k, uint8_t *code, int *far)
{
    size_t avail;
    uint64_t lo = p[k].lo, hi = p[k].hi;
    const uint8_t *b = orig_code(c, lo, &avail);
    if (!b || avail < hi - lo)
        return "its code is not in the file";
    for (uint64_t off = 0; off < hi - lo;) {
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(rw_decoder(), b + off, hi - lo - off, &in, op)))
            return "bytes that do not decode as x86-64 instructions";
        ref r;
        const char *why = NULL;
        int n = judge_ins(c, &in, op, lo + off, p, np, &r, &why);
        if (n < 0)
            return why;
        if (n > 0 && code) {
            uint64_t to;
            in_parts(p, np, r.to, &to);
            int64_t d = (int64_t)(to - (p[k].addr + off + in.length));
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

/* The parts of the function at addr (its own code first), each checked:
 * an FDE covering exactly it in a shape the copy can repeat.  The copies'
 * addresses follow `at`: each part 16-byte aligned after the previous.
 * Returns the count, or 0 with *why. */
static size_t parts_of(const rw_cloner *c, uint64_t addr, uint64_t at, part *p, const char **why)
{
    const icpp_func *f = icpp_module_func_start(c->m, addr);
    if (!f || f->plt || f->owner != f->addr)
        return *why = "not a function of the program", 0;
    if (!f->size)
        return *why = "its size is not known", 0;
    size_t np = 0;
    p[np++] = (part){addr, addr + f->size, at};
    const icpp_func *fs = icpp_module_funcs(c->m);
    for (size_t i = 0, n = icpp_module_nfuncs(c->m); i < n; i++) {
        if (fs[i].owner != addr || fs[i].addr == addr)
            continue;
        if (np == MAX_PARTS || !fs[i].size)
            return *why = "it has more split-off parts than a copy takes, or one of unknown size", 0;
        uint64_t a = (p[np - 1].addr + (p[np - 1].hi - p[np - 1].lo) + 15) & ~15ull;
        p[np++] = (part){fs[i].addr, fs[i].addr + fs[i].size, a};
    }
    for (size_t k = 0; k < np; k++) {
        const icpp_fde *e = fde_at(c, p[k].lo);
        const icpp_ehw_fde *x = ehw_at(c, p[k].lo);
        size_t cie_off;
        int with_lsda;
        if (!e || !x || e->hi != p[k].hi)
            return *why = "its CFI does not cover exactly its code", 0;
        if (e->signal || e->code_align != 1 || e->data_align != -8)
            return *why = "its CFI has another alignment than gcc's (or is a signal frame)", 0;
        if ((*why = fde_shape(c, e, x, &cie_off, &with_lsda)))
            return 0;
        icpp_cfaprog cp;
        icpp_err err;
        const rw_cfisec *eh = &c->img->eh_frame;
        if (icpp_cfaprog_read(c->orig + eh->off, eh->size, e, &cp, &err) < 0)
            return *why = "its CFA program cannot be read (DW_CFA_set_loc?)", 0;
        icpp_cfaprog_free(&cp);
    }
    return np;
}

const char *rw_clone_judge(rw_cloner *c, uint64_t addr)
{
    part p[MAX_PARTS];
    const char *why = NULL;
    size_t np = parts_of(c, addr, 0, p, &why);
    int far = 0;
    for (size_t k = 0; k < np && !why; k++)
        why = walk(c, p, np, k, NULL, &far);
    return why;
}

size_t rw_clone_parts(rw_cloner *c, uint64_t addr, uint64_t at, icpp_arr_part *out)
{
    const char *why = NULL;
    return parts_of(c, addr, at, out, &why);
}

int rw_clone_emit(rw_cloner *c, uint64_t orig, const rw_frame *fr, uint32_t pad, uint64_t at, uint8_t *code,
                  struct icpp_ehw *eh, icpp_err *err)
{
    part p[MAX_PARTS];
    const char *why = NULL;
    const icpp_func *f = icpp_module_func_start(c->m, orig);
    /* parts_of checks every part's FDE, walk every instruction (as rw_clone_judge) */
    size_t np = parts_of(c, orig, at, p, &why);
    if (!np || !f)
        return icpp_err_set(err, EINVAL, "internal error: the function at %#" PRIx64 " cannot be cloned: %s", orig,
                            why ? why : "?");
    const rw_cfisec *sec = &c->img->eh_frame;
    rw_copy_win cw[MAX_PARTS], iw[MAX_PARTS];
    uint8_t *ins[MAX_PARTS] = {0};
    const icpp_fde *e[MAX_PARTS];
    const icpp_ehw_fde *x[MAX_PARTS];
    size_t cie[MAX_PARTS];
    int with_lsda[MAX_PARTS];
    int rc = -1, far = 0;
    for (size_t k = 0; k < np; k++) {
        size_t avail;
        uint8_t *dst = code + (p[k].addr - at);
        memcpy(dst, orig_code(c, p[k].lo, &avail), p[k].hi - p[k].lo);
        if ((why = walk(c, p, np, k, dst, &far))) {
            icpp_err_set(err, far ? ICPP_EUNSUPPORTED : EINVAL, "the clone of %s: %s", f->name, why);
            goto out;
        }
        e[k] = fde_at(c, p[k].lo);
        x[k] = ehw_at(c, p[k].lo);
        if (!e[k] || !x[k] || fde_shape(c, e[k], x[k], &cie[k], &with_lsda[k])) {   /* parts_of found them */
            icpp_err_set(err, EINVAL, "internal error: the FDE of %s is gone", f->name);
            goto out;
        }
        size_t nins = e[k]->end - e[k]->ins;
        if (!(ins[k] = malloc(nins + 1))) {
            icpp_err_set(err, ENOMEM, "out of memory cloning %s", f->name);
            goto out;
        }
        memcpy(ins[k], c->orig + sec->off + e[k]->ins, nins);
        cw[k] = (rw_copy_win){p[k].lo, p[k].hi - p[k].lo, dst};
        iw[k] = (rw_copy_win){sec->off + e[k]->ins, nins, ins[k]};
    }
    if (pad && (!fr || rw_frame_patch_copy(fr, pad, cw, np, iw, np, c->img, err) < 0)) {
        if (fr)
            icpp_err_prefix(err, "the clone of %s", f->name);
        else
            icpp_err_set(err, EINVAL, "internal error: clone of %s padded without a verdict", f->name);
        goto out;
    }
    /* Each part's FDE under the function's own CIE (kept at its offset in
     * the relocated .eh_frame: personality, initial instructions), pointing
     * at the same exception table, whose call sites and landing pads are
     * offsets from the part's start (gcc gives each part its own). */
    for (size_t k = 0; k < np; k++)
        if (icpp_ehw_add_fde_lsda(eh, cie[k], p[k].addr, p[k].hi - p[k].lo, with_lsda[k], x[k]->lsda, ins[k],
                                  e[k]->end - e[k]->ins, err) < 0)
            goto out;
    rc = 0;
out:
    for (size_t k = 0; k < np; k++)
        free(ins[k]);
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

/* ---- the choice of clones ---- */

/* Shifts with clones: shift[i] = shift[c] + (the padding of c's frame: its
 * clone's if c was cloned, else its function's) + the wrap of i. */
static void clone_shifts(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const uint32_t *nwrap,
                         const int32_t *ncq, int64_t *shift)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    shift[0] = 0;
    for (size_t i = 1; i < nn; i++) {
        uint32_t c = caller[i];
        int64_t p = !c ? 0 : ncq[c] >= 0 ? (int64_t)ncq[c] : (int64_t)fpad[icpp_pathmap_node(pm, c)->func];
        shift[i] = (c ? shift[c] + p : 0) + nwrap[i];
    }
}

/* A trial of the clone search (greedy.h): class k's nodes enter a copy
 * of their callee (function fid) padded by q instead of fpad; the nodes
 * called below them move by the difference where the copy's frame is
 * their caller's. */
typedef struct clone_trial_in {
    rw_greedy      *g;
    const uint32_t *fpad;
    const int32_t  *cmax;
    const uint32_t *func;           /* per node: its function, a clone's (nf + class) if cloned */
    size_t          nf;             /* the map's functions */
} clone_trial_in;

static int32_t clone_most(void *ctx, uint32_t k)
{
    return ((const clone_trial_in *)ctx)->cmax[k];
}

/* Move class k's own nodes (g->vis[0..nown)) from function `from` to `to`
 * in g->t (the copy's function and back). */
static int clone_swap(rw_greedy *g, const uint32_t *from, uint32_t fid, int dir)
{
    for (size_t v = 0; v < g->nown; v++) {
        const icpp_pm_node *nd = icpp_pathmap_node(g->pm, g->vis[v]);
        for (uint32_t j = 0; j < nd->nheights; j++) {
            int64_t h = nd->heights[j].height + g->base[g->vis[v]];
            uint32_t a = dir > 0 ? from[g->vis[v]] : fid, b = dir > 0 ? fid : from[g->vis[v]];
            if (rw_cid_move(&g->t, a, h, -1, nd->heights[j].count) < 0 ||
                rw_cid_move(&g->t, b, h, 1, nd->heights[j].count) < 0)
                return -1;
        }
    }
    return 0;
}

static int clone_trial(void *ctx, uint32_t k, int32_t q, rw_trial *tr)
{
    const clone_trial_in *in = ctx;
    rw_greedy *g = in->g;
    const rw_sites *s = g->s;
    uint32_t f = in->func[g->kfirst[k]];
    uint32_t fid = (uint32_t)(in->nf + k);
    int64_t dq = (int64_t)q - (int64_t)in->fpad[f];
    for (size_t v = g->nown; v < g->nvis; v++) {   /* callers first: delta[cn] is final */
        uint32_t i = g->vis[v], cn = g->caller[i];
        g->delta[i] = !g->mark[cn] ? 0 : g->delta[cn] + (s->node_cls[cn] == (int32_t)k ? dq : 0);
    }
    /* the class's nodes change function, the rest move */
    if (clone_swap(g, in->func, fid, 1) < 0 || rw_greedy_score(g, g->nown, in->func, tr) < 0 ||
        clone_swap(g, in->func, fid, -1) < 0)
        return -1;
    return 1;
}

/* Whether class k's nodes run in PROG's code (not called from a clone,
 * nor from another node of the class: the copy calls the original), and
 * their callees' sites are not in a copy either (they would not be
 * redirected). */
static int clone_runs_in_prog(const rw_greedy *g, uint32_t k, const int32_t *ncq)
{
    int ok = g->kfirst[k] != 0;
    for (uint32_t i = g->kfirst[k]; i && ok; i = g->knext[i]) {
        ok = ncq[g->caller[i]] < 0 && g->s->node_cls[g->caller[i]] != (int32_t)k;
        for (uint32_t ch = g->cfirst[i]; ch && ok; ch = g->cnext[ch])
            ok = ncq[ch] < 0;
    }
    return ok;
}

/* g->amb: the nodes in a CID shared under the current choice (g->t, g->base)
 * and their ancestors; g->cand: the classes that may be cloned on their way. */
static void clone_candidates(rw_greedy *g, const uint32_t *func, const int32_t *cmax, const int32_t *cq,
                             const int32_t *ncq)
{
    size_t nn = icpp_pathmap_nnodes(g->pm);
    const rw_sites *s = g->s;
    memset(g->amb, 0, nn);
    memset(g->cand, 0, s->ncls + 1);
    for (size_t i = nn; i-- > 1;) {
        const icpp_pm_node *nd = icpp_pathmap_node(g->pm, (uint32_t)i);
        for (uint32_t j = 0; j < nd->nheights && !g->amb[i]; j++) {
            uint64_t *v = icpp_hmap_get(&g->t.h, func[i], (uint64_t)(nd->heights[j].height + g->base[i]));
            g->amb[i] = v && g->t.cnt[*v - 1] > 1;
        }
        if (!g->amb[i])
            continue;
        if (nd->parent)
            g->amb[nd->parent] = 1;
        int32_t k = s->node_cls[i];
        if (k >= 0 && cmax[k] >= 0 && cq[k] < 0)
            g->cand[k] = 1;
    }
    for (uint32_t k = 0; k < s->ncls; k++)
        if (g->cand[k] && !clone_runs_in_prog(g, k, ncq))
            g->cand[k] = 0;
}

int rw_clone_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                    const uint32_t *cpad, const int32_t *cmax, int64_t max_height, double time_limit,
                    size_t max_clones, int32_t *cq, icpp_err *err)
{
    size_t nn = icpp_pathmap_nnodes(pm), nf = icpp_pathmap_nfuncs(pm), nclones = 0;
    for (uint32_t k = 0; k <= s->ncls; k++)
        cq[k] = -1;
    if (!s->ncls || !max_clones)
        return 0;
    rw_greedy g;
    uint32_t *nwrap = malloc(nn * sizeof *nwrap), *func = malloc(nn * sizeof *func);
    int32_t *ncq = malloc(nn * sizeof *ncq);            /* per node: its clone's padding, -1 if not cloned */
    int rc = -1;
    if (rw_greedy_init(&g, pm, caller, s) < 0 || !nwrap || !func || !ncq)
        goto oom;
    for (size_t i = 0; i < nn; i++) {
        nwrap[i] = i && s->node_cls[i] >= 0 ? cpad[s->node_cls[i]] : 0;
        ncq[i] = -1;
        func[i] = i ? icpp_pathmap_node(pm, (uint32_t)i)->func : 0;
    }
    /* A copy of a whole function for a gain below 0.01% of the calls is
     * not worth its code (lua: two dozen clones for 5e-6 of them). */
    uint64_t total = 0;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t j = 0; j < nd->nheights; j++)
            total += nd->heights[j].count;
    }
    clone_trial_in in = {&g, fpad, cmax, func, nf};
    rw_greedy_rules rules = {clone_most, clone_trial, total / 10000 ? total / 10000 : 1, 0, 0};
    double t0 = icpp_cli_cpu_seconds();
    while (nclones < max_clones) {
        clone_shifts(pm, caller, fpad, nwrap, ncq, g.base);
        /* The CIDs of the current choice, and the nodes in a shared one. */
        int64_t hm, best;
        int32_t bestq;
        if (rw_greedy_fill(&g, func, &hm) < 0)
            goto oom;
        clone_candidates(&g, func, cmax, cq, ncq);
        if (rw_greedy_round(&g, &rules, &in, hm, max_height, t0, time_limit, &best, &bestq) < 0)
            goto oom;
        if (best < 0)
            break;
        cq[best] = bestq;
        nclones++;
        for (uint32_t i = g.kfirst[best]; i; i = g.knext[i]) {
            ncq[i] = bestq;
            func[i] = (uint32_t)(nf + (size_t)best);
        }
    }
    rc = 0;
    goto out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory choosing functions to clone");
out:
    rw_greedy_free(&g);
    free(nwrap), free(func), free(ncq);
    return rc;
}

#define NAME_MAX_ 512

int rw_clone_list(const icpp_module *m, const icpp_pathmap *pm, const rw_sites *s, const int32_t *cq, rw_cloner *cl,
                  uint64_t at, rw_clone_set *out, icpp_err *err)
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
    out->parts = calloc(n * RW_CLONE_MAX_PARTS, sizeof *out->parts);
    out->names = calloc(n, NAME_MAX_);
    if (!slot || !out->c || !out->rets || !out->parts || !out->names) {
        free(slot);
        rw_clone_set_free(out);
        return icpp_err_set(err, ENOMEM, "out of memory listing clones");
    }
    for (uint32_t k = 0; k < s->ncls; k++)
        slot[k] = cq[k] >= 0 ? (int32_t)out->n++ : -1;
    /* rets grouped by clone, each group sorted (s->v is sorted by ret) */
    size_t r = 0;
    for (uint32_t k = 0; k < s->ncls; k++) {
        if (slot[k] < 0)
            continue;
        icpp_arr_clone *c = &out->c[slot[k]];
        c->rets = out->rets + r;
        for (size_t i = 0; i < s->n; i++)
            if (s->v[i].cls == k) {
                out->rets[r++] = s->v[i].ret;
                c->orig = s->v[i].callee;
            }
        c->nrets = (size_t)(out->rets + r - c->rets);
        c->pad = (uint32_t)cq[k];
        char *nm = out->names + NAME_MAX_ * (size_t)slot[k];
        const icpp_func *f = icpp_module_func_start(m, c->orig);
        snprintf(nm, NAME_MAX_, "%.470s.icpp_clone.%d", f && f->sym ? f->sym : "fn", slot[k]);
        c->sym = nm;
        c->name = f ? f->name : nm;
        for (size_t j = 0; j < icpp_pathmap_nfuncs(pm); j++) {     /* the map's name of it, if it has one */
            const icpp_pm_func *g = icpp_pathmap_func(pm, (uint32_t)j);
            if (g->module == icpp_pathmap_main(pm) && g->addr == c->orig && g->name[0])
                c->name = g->name;
        }
    }
    out->nrets = r;
    for (size_t i = 0; i < out->n; i++) {          /* in order of the classes: the layout */
        icpp_arr_clone *c = &out->c[i];
        icpp_arr_part *pt = out->parts + RW_CLONE_MAX_PARTS * i;
        at = (at + 15) & ~15ull;
        c->nparts = rw_clone_parts(cl, c->orig, at, pt);
        if (!c->nparts) {
            free(slot);
            rw_clone_set_free(out);
            return icpp_err_set(err, EINVAL, "internal error: a chosen clone cannot be laid out");
        }
        c->parts = pt;
        c->addr = at;
        c->size = pt[c->nparts - 1].addr + (pt[c->nparts - 1].hi - pt[c->nparts - 1].lo) - at;
        at += c->size;
    }
    free(slot);
    return 0;
}

void rw_clone_set_free(rw_clone_set *cs)
{
    free(cs->c);
    free(cs->rets);
    free(cs->parts);
    free(cs->names);
    memset(cs, 0, sizeof *cs);
}
