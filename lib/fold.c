/* fold.c -- recursion folding of call paths: a cycle repeated back to back is kept once (docs/resolve.md). */
#include "fold.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Remove the leftmost back-to-back repeat of a block of length L, if any:
 * a run of L consecutive positions j with p[j] == p[j + L] starting at i
 * means p[i..i+L) == p[i+L..i+2L).  Returns the new length. */
static size_t fold_len(int64_t *p, size_t n, size_t L, int *changed)
{
    size_t run = 0;
    for (size_t j = 0; j + L < n; j++) {
        if (p[j] != p[j + L]) {
            run = 0;
            continue;
        }
        if (++run < L)
            continue;
        size_t i = j + 1 - L;           /* p[i..i+L) == p[i+L..i+2L): drop the second copy */
        memmove(p + i + L, p + i + 2 * L, (n - (i + 2 * L)) * sizeof *p);
        *changed = 1;
        return n - L;
    }
    return n;
}

size_t icpp_fold_path(int64_t *p, size_t n)
{
    int changed = 1;
    while (changed) {
        changed = 0;
        for (size_t L = 1; 2 * L <= n && !changed; L++)
            n = fold_len(p, n, L, &changed);
    }
    return n;
}

void icpp_folder_init(icpp_folder *f, const icpp_pathmap *pm)
{
    memset(f, 0, sizeof *f);
    f->pm = pm;
    icpp_hmap_init(&f->memo);
}

void icpp_folder_free(icpp_folder *f)
{
    icpp_hmap_free(&f->memo);
    free(f->buf);
    free(f->tmp);
    memset(f, 0, sizeof *f);
}

int64_t icpp_folder_path(icpp_folder *f, uint32_t node, const int64_t **out)
{
    uint32_t d = icpp_pathmap_path(f->pm, node, NULL, 0);
    if (d + 1 > f->cap) {
        size_t nc = (size_t)d + 64;
        int64_t *nb = realloc(f->buf, nc * sizeof *nb);
        if (nb)
            f->buf = nb;
        uint32_t *nt = realloc(f->tmp, nc * sizeof *nt);
        if (nt)
            f->tmp = nt;
        if (!nb || !nt)
            return -1;
        f->cap = nc;
    }
    d = icpp_pathmap_path(f->pm, node, f->tmp, d);
    assert(d < f->cap);
    for (uint32_t i = 0; i < d; i++)
        f->buf[i] = f->tmp[i];
    *out = f->buf;
    return (int64_t)icpp_fold_path(f->buf, d);
}

uint64_t icpp_fold_hash(const int64_t *p, size_t n)
{
    uint64_t h = icpp_hash2(n, 0x51ed270b2f3a9c61ull);
    for (size_t i = 0; i < n; i++)
        h = icpp_hash2(h, (uint64_t)p[i]);
    return h ? h : 1;
}

uint64_t icpp_folder_hash(icpp_folder *f, uint32_t node)
{
    uint64_t *v = icpp_hmap_get(&f->memo, node, 0);
    if (v)
        return *v;
    const int64_t *p;
    int64_t n = icpp_folder_path(f, node, &p);
    if (n < 0)
        return 0;
    uint64_t h = icpp_fold_hash(p, (size_t)n);
    if (icpp_hmap_put(&f->memo, node, 0, h) < 0)
        return 0;
    return h;
}
