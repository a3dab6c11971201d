/* ehwrite.c -- writing .eh_frame and .eh_frame_hdr: a relocated copy of a section with new FDEs appended, and its search table. */
#include "ehwrite.h"
#include "vec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    PE_OMIT = 0xff,
    PE_PCREL = 0x10,
    PE_UDATA4 = 0x03,
    PE_SDATA4 = 0x0b,
    PE_DATAREL = 0x30,
};

/* What a CIE says about the pointers of its FDEs. */
typedef struct cie {
    size_t  off;
    uint8_t fde_enc, lsda_enc, z;
} cie;

/* One walk over a section: records in order, pointers located. */
typedef struct walker {
    uint8_t *p;             /* the section's bytes (patched by relocate) */
    size_t   n;
    uint64_t addr;          /* its link-time address */
    cie     *cies;
    size_t   ncies, capcies;
    icpp_err *err;
} walker;

static uint64_t get(const uint8_t *p, int sz)
{
    uint64_t v = 0;
    for (int i = sz - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void put(uint8_t *p, int sz, uint64_t v)
{
    for (int i = 0; i < sz; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

/* A ULEB128/SLEB128 at *at < end; -1 if truncated. */
static int leb(const uint8_t *p, size_t end, size_t *at, uint64_t *v, int sign)
{
    uint64_t r = 0;
    unsigned sh = 0;
    uint8_t b;
    do {
        if (*at >= end || sh >= 64)
            return -1;
        b = p[(*at)++];
        r |= (uint64_t)(b & 0x7f) << sh;
        sh += 7;
    } while (b & 0x80);
    if (sign && sh < 64 && (b & 0x40))
        r |= ~0ull << sh;
    *v = r;
    return 0;
}

/* Bytes of a fixed-size pointer encoding; 0 for LEB128, -1 unknown. */
static int enc_size(uint8_t enc)
{
    switch (enc & 0x0f) {
    case 0x00: return 8;
    case 0x02: case 0x0a: return 2;
    case 0x03: case 0x0b: return 4;
    case 0x04: case 0x0c: return 8;
    case 0x01: case 0x09: return 0;
    default: return -1;
    }
}

/* The pointer encoded with `enc` at *at: its value, its size and whether it
 * is pc-relative.  Only fixed-size pointers, absolute ones only as a size
 * (relocate refuses them). */
static int ptr(walker *w, size_t end, size_t *at, uint8_t enc, uint64_t *val, int *sz, const char *what)
{
    int s = enc_size(enc);
    uint8_t app = enc & 0x70;
    if (s <= 0 || (app != 0 && app != PE_PCREL))
        return icpp_err_set(w->err, ICPP_EUNSUPPORTED, ".eh_frame at %#zx: the %s's pointer encoding %#x is not "
                            "supported (only fixed-size absolute or pc-relative)", *at, what, enc);
    if (*at + (size_t)s > end)
        return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: truncated %s", *at, what);
    uint64_t v = get(w->p + *at, s);
    if ((enc & 0x0f) >= 0x09 && s < 8 && (v >> (8 * s - 1)))
        v |= ~0ull << (8 * s);  /* signed */
    *val = app == PE_PCREL ? w->addr + *at + v : v;
    *sz = s;
    *at += (size_t)s;
    return 0;
}

static const cie *find_cie(const walker *w, size_t off)
{
    for (size_t i = w->ncies; i-- > 0;)
        if (w->cies[i].off == off)
            return &w->cies[i];
    return NULL;
}

/* What the walk reports per pointer and per FDE. */
typedef struct visit {
    int (*pointer)(walker *w, size_t at, int sz, uint8_t enc, void *ctx);    /* a pc-relative or absolute pointer */
    int (*fde)(walker *w, size_t off, uint64_t lo, uint64_t range, uint64_t lsda, void *ctx);
    void *ctx;
} visit;

static int walk(walker *w, const visit *v, size_t *end_out)
{
    size_t off = 0;
    while (off + 4 <= w->n) {
        uint64_t len = get(w->p + off, 4);
        if (len == 0) {                     /* terminator */
            *end_out = off;
            return 0;
        }
        if (len == 0xffffffffu)
            return icpp_err_set(w->err, ICPP_EUNSUPPORTED, ".eh_frame at %#zx: a 64-bit record length", off);
        if (len < 4 || len > w->n - off - 4)
            return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: a record runs past the section", off);
        size_t end = off + 4 + (size_t)len, at = off + 8;
        uint32_t id = (uint32_t)get(w->p + off + 4, 4);
        if (id == 0) {
            cie c = {off, 0, PE_OMIT, 0};
            if (at >= end || (w->p[at] != 1 && w->p[at] != 3))
                return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: CIE version not 1 or 3", off);
            int ver = w->p[at++];
            const char *aug = (const char *)w->p + at;
            size_t al = strnlen(aug, end - at);
            if (at + al >= end)
                return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: CIE augmentation unterminated", off);
            at += al + 1;
            uint64_t x;
            if (leb(w->p, end, &at, &x, 0) < 0 || leb(w->p, end, &at, &x, 1) < 0)
                return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: truncated CIE", off);
            if (ver == 1)
                at++;
            else if (leb(w->p, end, &at, &x, 0) < 0)
                return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: truncated CIE", off);
            if (al && aug[0] == 'z') {
                c.z = 1;
                if (leb(w->p, end, &at, &x, 0) < 0)
                    return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: truncated CIE", off);
                for (size_t i = 1; i < al; i++) {
                    if (at >= end)
                        return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: truncated CIE", off);
                    if (aug[i] == 'R') {
                        c.fde_enc = w->p[at++];
                    } else if (aug[i] == 'L') {
                        c.lsda_enc = w->p[at++];
                    } else if (aug[i] == 'P') {
                        uint8_t enc = w->p[at++];
                        uint64_t val;
                        int sz;
                        size_t pa = at;
                        if (ptr(w, end, &at, enc, &val, &sz, "personality") < 0 ||
                            (v->pointer && v->pointer(w, pa, sz, enc, v->ctx) < 0))
                            return -1;
                    } else if (aug[i] != 'S') {
                        return icpp_err_set(w->err, ICPP_EUNSUPPORTED,
                                            ".eh_frame at %#zx: CIE augmentation '%c' is not supported", off, aug[i]);
                    }
                }
            } else if (al) {
                return icpp_err_set(w->err, ICPP_EUNSUPPORTED, ".eh_frame at %#zx: CIE augmentation \"%s\" is not "
                                    "supported", off, aug);
            }
            if (icpp_vec_reserve((void **)&w->cies, &w->capcies, w->ncies + 1, sizeof *w->cies, 16) < 0)
                return icpp_err_set(w->err, ENOMEM, "out of memory reading .eh_frame");
            w->cies[w->ncies++] = c;
        } else {
            if (id > off + 4)
                return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: FDE's CIE pointer out of range", off);
            const cie *c = find_cie(w, off + 4 - id);
            if (!c)
                return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: FDE without a CIE before it", off);
            uint8_t fenc = c->fde_enc, lenc = c->lsda_enc;
            int hasz = c->z;
            uint64_t lo, range, x, lsda = 0;
            int sz;
            size_t pa = at;
            if (ptr(w, end, &at, fenc, &lo, &sz, "FDE location") < 0 ||
                (v->pointer && v->pointer(w, pa, sz, fenc, v->ctx) < 0))
                return -1;
            if (ptr(w, end, &at, fenc & 0x0f, &range, &sz, "FDE range") < 0)
                return -1;
            if (hasz) {
                size_t al_at = at;
                if (leb(w->p, end, &at, &x, 0) < 0 || x > end - at)
                    return icpp_err_set(w->err, ICPP_EFORMAT, ".eh_frame at %#zx: truncated FDE", off);
                size_t aend = at + (size_t)x;
                if (lenc != PE_OMIT && x > 0) {
                    uint64_t l;
                    pa = at;
                    if (ptr(w, aend, &at, lenc, &l, &sz, "LSDA") < 0)
                        return -1;
                    /* A zero pointer is no LSDA, whatever its encoding. */
                    lsda = get(w->p + pa, sz) ? l : 0;
                    if (lsda && v->pointer && v->pointer(w, pa, sz, lenc, v->ctx) < 0)
                        return -1;
                }
                (void)al_at;
                at = aend;
            }
            /* DW_CFA_set_loc would hold an address too; gcc never emits it
             * in .eh_frame, and the instruction scan that would find it is
             * lib/cfaprog.h's, which refuses it for the frames it patches. */
            if (v->fde && v->fde(w, off, lo, range, lsda, v->ctx) < 0)
                return -1;
        }
        off = end;
    }
    *end_out = off;
    return 0;
}

static int reserve(icpp_ehw *w, size_t more, icpp_err *err)
{
    if (more > SIZE_MAX - w->len || icpp_vec_reserve((void **)&w->buf, &w->cap, w->len + more, 1, 256) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory writing .eh_frame");
    return 0;
}

typedef struct reloc_ctx {
    int64_t delta;          /* old address - new address */
} reloc_ctx;

static int reloc_pointer(walker *w, size_t at, int sz, uint8_t enc, void *ctx)
{
    const reloc_ctx *r = ctx;
    if ((enc & 0x70) != PE_PCREL)
        return icpp_err_set(w->err, ICPP_EUNSUPPORTED, ".eh_frame at %#zx: an absolute pointer (encoding %#x) "
                            "cannot be moved without its dynamic relocation", at, enc);
    uint64_t v = get(w->p + at, sz) + (uint64_t)r->delta;
    if (sz < 8) {
        /* Signed encodings (sdata2/4) sign-extend, unsigned ones (udata2/4) do not. */
        int sgn = (enc & 0x0f) >= 0x09;
        uint64_t raw = get(w->p + at, sz);
        int64_t sv = sgn ? (int64_t)(raw << (64 - 8 * sz)) >> (64 - 8 * sz) : (int64_t)raw;
        int64_t nv = sv + r->delta, lim = (int64_t)1 << (8 * sz - 1);
        if (sgn ? nv < -lim || nv >= lim : nv < 0 || nv >= 2 * lim)
            return icpp_err_set(w->err, ICPP_EUNSUPPORTED, ".eh_frame at %#zx: a pc-relative pointer does not "
                                "reach from the new address", at);
        v = (uint64_t)nv;
    }
    put(w->p + at, sz, v);
    return 0;
}

int icpp_ehw_relocate(icpp_ehw *w, const uint8_t *old, size_t n, uint64_t old_addr, uint64_t new_addr,
                      icpp_err *err)
{
    memset(w, 0, sizeof *w);
    w->addr = new_addr;
    if (reserve(w, n + 16, err) < 0)
        return -1;
    if (n)
        memcpy(w->buf, old, n);
    /* The walk reads positions relative to the old address (pointer values
     * are not needed), and patches each pc-relative pointer in the copy. */
    walker k = {w->buf, n, old_addr, NULL, 0, 0, err};
    reloc_ctx rc = {(int64_t)(old_addr - new_addr)};
    visit v = {reloc_pointer, NULL, &rc};
    size_t end;
    int r = walk(&k, &v, &end);
    free(k.cies);
    if (r < 0) {
        icpp_ehw_free(w);
        return -1;
    }
    w->len = end;
    return 0;
}

int icpp_ehw_add_cie(icpp_ehw *w, const uint8_t *ins, size_t nins, size_t *cie_off, icpp_err *err)
{
    /* length, id 0, version 1, "zR", code align 1, data align -8, RA 16,
     * augmentation length 1, FDE encoding pcrel|sdata4, instructions,
     * padded with DW_CFA_nop to a multiple of 8. */
    static const uint8_t head[] = {0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, PE_PCREL | PE_SDATA4};
    size_t body = sizeof head + nins, tot = (4 + body + 7) & ~(size_t)7;
    if (reserve(w, tot, err) < 0)
        return -1;
    uint8_t *p = w->buf + w->len;
    memset(p, 0, tot);
    put(p, 4, tot - 4);
    memcpy(p + 4, head, sizeof head);
    if (nins)
        memcpy(p + 4 + sizeof head, ins, nins);     /* ins may be NULL when nins is 0 */
    *cie_off = w->len;
    w->len += tot;
    return 0;
}

int icpp_ehw_add_fde(icpp_ehw *w, size_t cie_off, uint64_t lo, uint64_t len, const uint8_t *ins, size_t nins,
                     icpp_err *err)
{
    return icpp_ehw_add_fde_lsda(w, cie_off, lo, len, 0, 0, ins, nins, err);
}

int icpp_ehw_add_fde_lsda(icpp_ehw *w, size_t cie_off, uint64_t lo, uint64_t len, int with_lsda, uint64_t lsda,
                          const uint8_t *ins, size_t nins, icpp_err *err)
{
    size_t naug = with_lsda ? 4 : 0;
    size_t body = 4 + 4 + 4 + 1 + naug + nins, tot = (4 + body + 7) & ~(size_t)7;
    if (reserve(w, tot, err) < 0)
        return -1;
    uint8_t *p = w->buf + w->len;
    memset(p, 0, tot);
    put(p, 4, tot - 4);
    put(p + 4, 4, w->len + 4 - cie_off);
    int64_t rel = (int64_t)(lo - (w->addr + w->len + 8));
    if (rel != (int32_t)rel || len > UINT32_MAX)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "an FDE's code at %#llx is out of reach of .eh_frame",
                            (unsigned long long)lo);
    put(p + 8, 4, (uint64_t)rel);
    put(p + 12, 4, len);
    p[16] = (uint8_t)naug;  /* augmentation length */
    if (with_lsda && lsda) {
        int64_t lr = (int64_t)(lsda - (w->addr + w->len + 17));
        if (lr != (int32_t)lr)
            return icpp_err_set(err, ICPP_EUNSUPPORTED, "an LSDA at %#llx is out of reach of .eh_frame",
                                (unsigned long long)lsda);
        put(p + 17, 4, (uint64_t)lr);
    }
    if (nins)
        memcpy(p + 17 + naug, ins, nins);
    w->len += tot;
    return 0;
}

int icpp_ehw_finish(icpp_ehw *w, icpp_err *err)
{
    if (reserve(w, 4, err) < 0)
        return -1;
    memset(w->buf + w->len, 0, 4);
    w->len += 4;
    return 0;
}

void icpp_ehw_free(icpp_ehw *w)
{
    free(w->buf);
    memset(w, 0, sizeof *w);
}

typedef struct list_ctx {
    icpp_ehw_fde *v;
    size_t        n, cap;
} list_ctx;

static int list_fde(walker *w, size_t off, uint64_t lo, uint64_t range, uint64_t lsda, void *ctx)
{
    list_ctx *h = ctx;
    if (icpp_vec_reserve((void **)&h->v, &h->cap, h->n + 1, sizeof *h->v, 256) < 0)
        return icpp_err_set(w->err, ENOMEM, "out of memory reading .eh_frame");
    h->v[h->n++] = (icpp_ehw_fde){lo, lo + range, lsda, off};
    return 0;
}

static int fde_cmp(const void *a, const void *b)
{
    const icpp_ehw_fde *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int icpp_ehw_list(const uint8_t *eh, size_t n, uint64_t eh_addr, icpp_ehw_fde **out, size_t *nout, icpp_err *err)
{
    /* The walk needs writable bytes (relocate patches through it). */
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return icpp_err_set(err, ENOMEM, "out of memory reading .eh_frame");
    if (n)
        memcpy(copy, eh, n);
    walker k = {copy, n, eh_addr, NULL, 0, 0, err};
    list_ctx h = {0};
    visit v = {NULL, list_fde, &h};
    size_t end;
    int r = walk(&k, &v, &end);
    free(k.cies);
    free(copy);
    if (r < 0) {
        free(h.v);
        return -1;
    }
    if (h.n)
        qsort(h.v, h.n, sizeof *h.v, fde_cmp);
    *out = h.v;
    *nout = h.n;
    return 0;
}

int icpp_ehw_hdr(const uint8_t *eh, size_t n, uint64_t eh_addr, uint64_t hdr_addr, uint8_t **out, size_t *outn,
                 icpp_err *err)
{
    icpp_ehw_fde *fv;
    size_t nf;
    if (icpp_ehw_list(eh, n, eh_addr, &fv, &nf, err) < 0)
        return -1;
    size_t tot = 12 + 8 * nf;
    uint8_t *p = malloc(tot);
    if (!p) {
        free(fv);
        return icpp_err_set(err, ENOMEM, "out of memory writing .eh_frame_hdr");
    }
    p[0] = 1;
    p[1] = PE_PCREL | PE_SDATA4;
    p[2] = PE_UDATA4;
    p[3] = PE_DATAREL | PE_SDATA4;
    int64_t ep = (int64_t)(eh_addr - (hdr_addr + 4));
    int bad = ep != (int32_t)ep || nf > UINT32_MAX;
    put(p + 4, 4, (uint64_t)ep);
    put(p + 8, 4, nf);
    for (size_t i = 0; i < nf; i++) {
        int64_t a = (int64_t)(fv[i].lo - hdr_addr), b = (int64_t)(eh_addr + fv[i].off - hdr_addr);
        bad |= a != (int32_t)a || b != (int32_t)b;
        put(p + 12 + 8 * i, 4, (uint64_t)a);
        put(p + 16 + 8 * i, 4, (uint64_t)b);
    }
    free(fv);
    if (bad) {
        free(p);
        return icpp_err_set(err, ICPP_EUNSUPPORTED, ".eh_frame_hdr: an address is out of 32-bit reach");
    }
    *out = p;
    *outn = tot;
    return 0;
}

static int emit(uint8_t *b, size_t *len, size_t cap, uint8_t x)
{
    if (*len >= cap)
        return -1;
    b[(*len)++] = x;
    return 0;
}

static int uleb(uint8_t *b, size_t *len, size_t cap, uint64_t v)
{
    do {
        uint8_t x = v & 0x7f;
        v >>= 7;
        if (emit(b, len, cap, (uint8_t)(x | (v ? 0x80 : 0))) < 0)
            return -1;
    } while (v);
    return 0;
}

static int sleb(uint8_t *b, size_t *len, size_t cap, int64_t v)
{
    for (;;) {
        uint8_t x = v & 0x7f;
        v >>= 7;
        int done = (v == 0 && !(x & 0x40)) || (v == -1 && (x & 0x40));
        if (emit(b, len, cap, (uint8_t)(x | (done ? 0 : 0x80))) < 0)
            return -1;
        if (done)
            return 0;
    }
}

int icpp_ehw_cfa_def(uint8_t *b, size_t *len, size_t cap, unsigned reg, uint64_t off)
{
    return emit(b, len, cap, 0x0c) < 0 || uleb(b, len, cap, reg) < 0 || uleb(b, len, cap, off) < 0 ? -1 : 0;
}

int icpp_ehw_cfa_offset(uint8_t *b, size_t *len, size_t cap, uint64_t off)
{
    return emit(b, len, cap, 0x0e) < 0 || uleb(b, len, cap, off) < 0 ? -1 : 0;
}

int icpp_ehw_cfa_saved(uint8_t *b, size_t *len, size_t cap, unsigned reg, int64_t cfa_off)
{
    /* DW_CFA_offset_extended_sf: the factored offset is cfa_off / -8. */
    if (cfa_off % 8)
        return -1;
    return emit(b, len, cap, 0x11) < 0 || uleb(b, len, cap, reg) < 0 || sleb(b, len, cap, cfa_off / -8) < 0 ? -1 : 0;
}

int icpp_ehw_cfa_advance(uint8_t *b, size_t *len, size_t cap, uint32_t delta)
{
    if (delta < 0x40)
        return emit(b, len, cap, (uint8_t)(0x40 | delta));
    if (delta <= 0xff)
        return emit(b, len, cap, 0x02) < 0 || emit(b, len, cap, (uint8_t)delta) < 0 ? -1 : 0;
    if (delta <= 0xffff)
        return emit(b, len, cap, 0x03) < 0 || emit(b, len, cap, (uint8_t)delta) < 0 ||
                       emit(b, len, cap, (uint8_t)(delta >> 8)) < 0 ? -1 : 0;
    if (emit(b, len, cap, 0x04) < 0)
        return -1;
    for (int i = 0; i < 4; i++)
        if (emit(b, len, cap, (uint8_t)(delta >> (8 * i))) < 0)
            return -1;
    return 0;
}
