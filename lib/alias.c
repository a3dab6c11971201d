/* alias.c -- entry points that share another function's body: a few instructions, then a jump into its middle. */
#include "alias.h"

#include <stdlib.h>
#include <string.h>

#include "lde.h"

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
        if (x->n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            pair *v = realloc(x->v, nc * sizeof *v);
            if (!v) {
                icpp_alias_index_free(x);
                return NULL;
            }
            x->v = v;
            cap = nc;
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
