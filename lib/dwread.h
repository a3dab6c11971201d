/* dwread.h -- bounds-checked reading of DWARF bytes (fixed-size little-endian, LEB128) from untrusted sections. */
#ifndef ICPP_DWREAD_H
#define ICPP_DWREAD_H

#include <stddef.h>
#include <stdint.h>

/* A cursor over [p, end); any read past end sets bad and returns 0. */
typedef struct icpp_rd {
    const uint8_t *p, *end;
    int bad;
} icpp_rd;

/* n bytes little-endian (n <= 8). */
static inline uint64_t icpp_rd_u(icpp_rd *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

/* A ULEB128 (sign = 0) or SLEB128 (sign = 1, sign-extended) of at most 10
 * bytes; *len (if not NULL) gets how many it took. */
static inline uint64_t icpp_rd_leb(icpp_rd *r, int sign, uint8_t *len)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b;
    const uint8_t *start = r->p;
    do {
        if (r->bad || r->p >= r->end || shift > 63) {
            r->bad = 1;
            return 0;
        }
        b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (sign && shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;     /* sign-extend; 1 << 63 would overflow int64_t */
    if (len)
        *len = (uint8_t)(r->p - start);
    return v;
}

#endif
