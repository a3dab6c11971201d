/* hmap.c -- open-addressing hash map from a pair of u64 keys to a u64 value. */
#include "hmap.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

void icpp_hmap_init(icpp_hmap *h)
{
    h->slots = NULL;
    h->cap = h->n = 0;
}

void icpp_hmap_free(icpp_hmap *h)
{
    free(h->slots);
    icpp_hmap_init(h);
}

uint64_t *icpp_hmap_get(const icpp_hmap *h, uint64_t k1, uint64_t k2)
{
    if (!h->cap)
        return NULL;
    /* the lookup is the resolver's hot path: its invariant (a power of two,
     * a free slot ending each probe) is asserted where it is made (put) */
    size_t mask = h->cap - 1, i = (size_t)icpp_hash2(k1, k2) & mask;
    for (;;) {
        icpp_hmap_slot *s = &h->slots[i];
        if (!s->used)
            return NULL;
        if (s->k1 == k1 && s->k2 == k2)
            return &s->val;
        i = (i + 1) & mask;
    }
}

static void place(icpp_hmap_slot *slots, size_t cap, uint64_t k1, uint64_t k2, uint64_t val)
{
    size_t mask = cap - 1, i = (size_t)icpp_hash2(k1, k2) & mask;
    while (slots[i].used)
        i = (i + 1) & mask;
    slots[i] = (icpp_hmap_slot){k1, k2, val, 1};
}

int icpp_hmap_put(icpp_hmap *h, uint64_t k1, uint64_t k2, uint64_t val)
{
    uint64_t *v = icpp_hmap_get(h, k1, k2);
    if (v) {
        *v = val;
        return 0;
    }
    if ((h->n + 1) * 4 > h->cap * 3) {      /* keep load <= 3/4 */
        size_t nc = h->cap ? h->cap * 2 : 64;
        icpp_hmap_slot *ns = calloc(nc, sizeof *ns);
        if (!ns)
            return -ENOMEM;
        for (size_t i = 0; i < h->cap; i++)
            if (h->slots[i].used)
                place(ns, nc, h->slots[i].k1, h->slots[i].k2, h->slots[i].val);
        free(h->slots);
        h->slots = ns;
        h->cap = nc;
    }
    assert(h->cap && !(h->cap & (h->cap - 1)) && (h->n + 1) * 4 <= h->cap * 3);   /* hmap.h: power of two */
    place(h->slots, h->cap, k1, k2, val);
    h->n++;
    return 0;
}
