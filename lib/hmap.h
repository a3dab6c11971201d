/* hmap.h -- open-addressing hash map from a pair of u64 keys to a u64 value. */
#ifndef ICPP_HMAP_H
#define ICPP_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct icpp_hmap_slot {
    uint64_t k1, k2, val;
    uint8_t  used;
} icpp_hmap_slot;

typedef struct icpp_hmap {
    icpp_hmap_slot *slots;
    size_t          cap;    /* power of two, or 0 */
    size_t          n;
} icpp_hmap;

void icpp_hmap_init(icpp_hmap *h);
void icpp_hmap_free(icpp_hmap *h);
/* Pointer to the value for (k1,k2), or NULL. */
uint64_t *icpp_hmap_get(const icpp_hmap *h, uint64_t k1, uint64_t k2);
/* Insert or overwrite; returns 0, or -ENOMEM (the map is unchanged). */
int icpp_hmap_put(icpp_hmap *h, uint64_t k1, uint64_t k2, uint64_t val);

static inline uint64_t icpp_hash2(uint64_t a, uint64_t b)
{
    uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2));
    x ^= x >> 31;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    return x;
}

#endif
