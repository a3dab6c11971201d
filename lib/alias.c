/* alias.c -- entry points that share another function's body: a few instructions, then a jump into its middle. */
#include "alias.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lde.h"
#include "vec.h"

typedef struct pair {
    uint64_t g, f;          /* f is an entry alias of g */
} pair;

struct icpp_alias_index {
    pair     *v;            /* sorted by (g, f) */
    uint64_t *f;            /* v[i].f, contiguous per g */
    size_t    n;
};

static int pair_cmp(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->g != y->g)
        return x->g < y->g ? -1 : 1;
    return x->f < y->f ? -1 : x->f > y->f;
}

/* Whether an instruction may write rsp (conservatively): push, pop, enter,
 * leave, pushf/popf, and anything with rsp as a ModRM register operand. */
static int moves_rsp(const icpp_lde_insn *in)
{
    if (in->enc == ICPP_LDE_LEGACY && in->map == 0 &&
        ((in->opcode >= 0x50 && in->opcode <= 0x5f) || in->opcode == 0x68 || in->opcode == 0x6a ||
         in->opcode == 0x8f || in->opcode == 0x9c || in->opcode == 0x9d || in->opcode == 0xc8 || in->opcode == 0xc9))
        return 1;
    if (!in->has_modrm)
        return 0;
    unsigned mod = in->modrm >> 6, reg = (in->modrm >> 3) & 7, rm = in->modrm & 7;
    int rex_r = in->enc == ICPP_LDE_LEGACY ? (in->rex >> 2) & 1 : 0;
    int rex_b = in->enc == ICPP_LDE_LEGACY ? in->rex & 1 : 0;
    return (reg == 4 && !rex_r) || (mod == 3 && rm == 4 && !rex_b);
}

/* The function f's code enters, past its first byte, or 0. */
static uint64_t entered(const icpp_module *m, const icpp_func *f)
{
    uint8_t buf[ICPP_ALIAS_MAX_INSNS * ICPP_LDE_MAX_LEN];
    size_t have = sizeof buf;
    while (have && icpp_module_read(m, f->addr, buf, have) < 0)
        have /= 2;          /* near the end of a segment */
    uint64_t at = f->addr;
    for (size_t off = 0, k = 0; k < ICPP_ALIAS_MAX_INSNS && off < have; k++) {
        icpp_lde_insn in;
        size_t len = icpp_lde_decode(buf + off, have - off, &in);
        if (!len)
            return 0;
        int jmp = in.enc == ICPP_LDE_LEGACY && in.map == 0 && (in.opcode == 0xe9 || in.opcode == 0xeb);
        if (jmp && in.rel_size) {
            uint64_t t = at + len + (uint64_t)(int64_t)in.rel;
            const icpp_func *g = icpp_module_func_at(m, t);
            if (!g || g->plt)
                return 0;
            const icpp_func *o = g->owner != g->addr ? icpp_module_func_start(m, g->owner) : g;
            if (!o || o->addr == f->addr || t == g->addr || t == o->addr)
                return 0;   /* a tail call (to an entry), or into itself */
            return o->addr;
        }
        if (in.rel_size || (in.enc == ICPP_LDE_LEGACY && in.map == 0 &&
                            (in.opcode == 0xc3 || in.opcode == 0xc2 || in.opcode == 0xff || in.opcode == 0xcc)))
            return 0;       /* a branch, call or return first: not an entry into a shared body */
        if (moves_rsp(&in))
            return 0;       /* not the same frame: the body's CFI would not give f's entry SP */
        off += len;
        at += len;
    }
    return 0;
}

icpp_alias_index *icpp_alias_index_build(const icpp_module *m)
{
    icpp_alias_index *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    size_t cap = 0;
    const icpp_func *fs = icpp_module_funcs(m);
    for (size_t i = 0, n = icpp_module_nfuncs(m); i < n; i++) {
        const icpp_func *f = &fs[i];
        if (f->plt || f->owner != f->addr)
            continue;
        uint64_t g = entered(m, f);
        if (!g)
            continue;
        if (icpp_vec_reserve((void **)&x->v, &cap, x->n + 1, sizeof *x->v, 16) < 0) {
            icpp_alias_index_free(x);
            return NULL;
        }
        x->v[x->n++] = (pair){g, f->addr};
    }
    if (x->n)
        qsort(x->v, x->n, sizeof *x->v, pair_cmp);
    if (!(x->f = malloc((x->n + 1) * sizeof *x->f))) {
        icpp_alias_index_free(x);
        return NULL;
    }
    for (size_t i = 0; i < x->n; i++)
        x->f[i] = x->v[i].f;
    return x;
}

void icpp_alias_index_free(icpp_alias_index *x)
{
    if (!x)
        return;
    free(x->v);
    free(x->f);
    free(x);
}

size_t icpp_alias_entries(const icpp_alias_index *x, uint64_t g, const uint64_t **out)
{
    size_t a = 0, b = x->n;
    while (a < b) {
        size_t h = (a + b) / 2;
        if (x->v[h].g < g)
            a = h + 1;
        else
            b = h;
    }
    size_t e = a;
    while (e < x->n && x->v[e].g == g)
        e++;
    *out = a < x->n ? &x->f[a] : NULL;
    return e - a;
}

size_t icpp_alias_count(const icpp_alias_index *x)
{
    return x->n;
}

int icpp_alias_expand(icpp_pathmap *pm, size_t *added)
{
    *added = 0;
    size_t nm = icpp_pathmap_nmodules(pm), nf = icpp_pathmap_nfuncs(pm), nn = icpp_pathmap_nnodes(pm);
    int64_t *to = malloc((nf + 1) * sizeof *to);
    uint8_t *has = calloc(nm + 1, 1);
    int rc = to && has ? 0 : -ENOMEM;
    for (size_t f = 0; rc == 0 && f < nf; f++) {
        to[f] = -1;
        has[icpp_pathmap_func(pm, (uint32_t)f)->module] = 1;
    }
    size_t any = 0;
    for (uint32_t mi = 0; rc == 0 && mi < nm; mi++) {
        const icpp_pm_module *mm = icpp_pathmap_module(pm, mi);
        if (!has[mi] || !mm->path || !mm->path[0])
            continue;
        icpp_module *m = icpp_module_open(mm->path, NULL);
        if (!m)
            continue;       /* gone, or unreadable: its contexts stay as trained */
        if (!icpp_build_id_match(icpp_module_build_id(m), mm->path, &mm->build_id, mm->path)) {
            icpp_module_close(m);
            continue;       /* another file at that path now */
        }
        icpp_alias_index *x = icpp_alias_index_build(m);
        if (!x)
            rc = -ENOMEM;
        for (size_t i = 0; rc == 0 && i < x->n; i++) {
            int64_t fi = icpp_pathmap_find_func(pm, mi, x->v[i].f);
            if (fi < 0)
                continue;   /* an alias no training entered */
            int64_t gi = icpp_pathmap_find_func(pm, mi, x->v[i].g);
            if (gi < 0) {
                const icpp_func *g = icpp_module_func_start(m, x->v[i].g);
                uint32_t u;
                if (icpp_pathmap_add_func(pm, mi, x->v[i].g, g && g->name ? g->name : "", &u) < 0) {
                    rc = -ENOMEM;
                    break;
                }
                gi = u;
            }
            to[fi] = gi;
            any++;
        }
        icpp_alias_index_free(x);
        icpp_module_close(m);
    }
    /* Nodes added below are G's, never an alias's: the first nn suffice. */
    for (uint32_t i = 1; rc == 0 && any && i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        if (n->func >= nf || to[n->func] < 0)
            continue;
        uint32_t parent = n->parent, c;
        if (icpp_pathmap_child(pm, parent, (uint32_t)to[n->func], &c) < 0) {
            rc = -ENOMEM;
            break;
        }
        /* Heights G's node has already (learned, trained directly, or
         * added by an earlier expansion of a saved map) are left alone,
         * so expanding twice adds nothing. */
        int grew = 0;
        for (uint32_t k = 0; rc == 0 && k < icpp_pathmap_node(pm, i)->nheights; k++) {
            icpp_pm_height h = icpp_pathmap_node(pm, i)->heights[k];
            const icpp_pm_node *g = icpp_pathmap_node(pm, c);
            int have = 0;
            for (uint32_t j = 0; j < g->nheights && !have; j++)
                have = g->heights[j].height == h.height;
            if (have || !h.count)
                continue;
            if (icpp_pathmap_add_height(pm, c, h.height, h.count) < 0)
                rc = -ENOMEM;
            icpp_pathmap_add_count(pm, c, h.count);
            grew = 1;
        }
        for (uint32_t k = 0; rc == 0 && grew && k < icpp_pathmap_node(pm, i)->nsites; k++) {
            icpp_pm_site st = icpp_pathmap_node(pm, i)->sites[k];
            if (icpp_pathmap_add_site(pm, c, st.module, st.addr, st.count) < 0)
                rc = -ENOMEM;
        }
        *added += grew;
    }
    free(to);
    free(has);
    return rc;
}
