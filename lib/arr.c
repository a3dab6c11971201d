/* arr.c -- activation record resizing on a path map: how paddings move heights, the padded binary's map and build-id. */
#include "arr.h"

#include "codec.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void icpp_arr_func_pads(const icpp_pathmap *pm, const icpp_arr_pad *pads, size_t n, uint32_t *out)
{
    size_t nf = icpp_pathmap_nfuncs(pm);
    uint32_t main = icpp_pathmap_main(pm);
    memset(out, 0, nf * sizeof *out);
    for (size_t i = 0; i < nf; i++) {
        const icpp_pm_func *f = icpp_pathmap_func(pm, (uint32_t)i);
        if (f->module != main)
            continue;
        for (size_t k = 0; k < n; k++)
            if (pads[k].addr == f->addr) {
                out[i] = pads[k].pad;
                break;
            }
    }
}

static int range_cmp(const void *a, const void *b)
{
    const icpp_arr_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

const icpp_arr_range *icpp_arr_range_at(const icpp_arr_range *r, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && addr < r[lo - 1].hi ? &r[lo - 1] : NULL;
}

/* The owner of the range holding return address addr, or UINT64_MAX: a
 * return address may be one past the end of its function (a call to a
 * function that does not return, last in its caller), so addr - 1. */
static uint64_t owner_of(const icpp_arr_range *r, size_t n, uint64_t addr)
{
    const icpp_arr_range *g = icpp_arr_range_at(r, n, addr - 1);
    return g ? g->owner : UINT64_MAX;
}

long icpp_arr_callers(const icpp_pathmap *pm, const icpp_arr_range *ranges, size_t nranges, uint32_t *caller,
                      uint32_t *far)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    uint32_t main = icpp_pathmap_main(pm);
    icpp_arr_range *r = nranges ? malloc(nranges * sizeof *r) : NULL;
    if (nranges && !r)
        return -ENOMEM;
    if (nranges) {
        memcpy(r, ranges, nranges * sizeof *r);
        qsort(r, nranges, sizeof *r, range_cmp);
    }
    long moved = 0;
    caller[0] = 0;
    if (far)
        far[0] = 0;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
        uint32_t near = 0, farthest = 0;
        for (uint32_t k = 0; k < n->nsites; k++) {
            if (n->sites[k].module != main)
                continue;
            uint64_t own = owner_of(r, nranges, n->sites[k].addr);
            if (own == UINT64_MAX)
                continue;
            /* The nearest ancestor running that function. */
            for (uint32_t a = n->parent; a; a = icpp_pathmap_node(pm, a)->parent) {
                const icpp_pm_func *f = icpp_pathmap_func(pm, icpp_pathmap_node(pm, a)->func);
                if (f->module == main && f->addr == own) {
                    if (!near || a > near)
                        near = a;
                    if (!farthest || a < farthest)
                        farthest = a;
                    break;
                }
            }
        }
        caller[i] = near ? near : n->parent;
        moved += caller[i] != n->parent;
        if (far)
            far[i] = near && farthest != near ? farthest : 0;
    }
    free(r);
    return moved;
}

static const icpp_arr_wrap *find_wrap(const icpp_arr_wrap *w, size_t n, uint64_t ret)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (w[mid].ret < ret)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && w[lo].ret == ret ? &w[lo] : NULL;
}

size_t icpp_arr_node_wraps(const icpp_pathmap *pm, const icpp_arr_wrap *wraps, size_t n, uint32_t *out)
{
    size_t nn = icpp_pathmap_nnodes(pm), mixed = 0;
    uint32_t main = icpp_pathmap_main(pm);
    for (size_t i = 0; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        uint32_t pad = 0;
        size_t wrapped = 0;
        int differ = 0;
        for (uint32_t k = 0; k < nd->nsites && n; k++) {
            const icpp_arr_wrap *w = nd->sites[k].module == main ? find_wrap(wraps, n, nd->sites[k].addr) : NULL;
            if (!w)
                continue;
            differ |= wrapped && w->pad != pad;
            pad = w->pad;
            wrapped++;
        }
        out[i] = wrapped == nd->nsites && !differ ? pad : 0;
        mixed += wrapped && (wrapped != nd->nsites || differ);
    }
    return mixed;
}

void icpp_arr_shifts(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *func_pad, const uint32_t *wrap,
                     int64_t *shift)
{
    /* An ancestor always precedes its descendants, so one pass suffices. */
    size_t nn = icpp_pathmap_nnodes(pm);
    shift[0] = 0;
    for (size_t i = 1; i < nn; i++) {
        uint32_t c = caller ? caller[i] : icpp_pathmap_node(pm, (uint32_t)i)->parent;
        shift[i] = (c ? shift[c] + func_pad[icpp_pathmap_node(pm, c)->func] : 0) + (wrap ? wrap[i] : 0);
    }
}

static int pad_cmp(const void *a, const void *b)
{
    const icpp_arr_pad *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* splitmix64 finalizer: a good 64-bit mixer, enough for an identifier
 * (build-ids are names, not signatures). */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void icpp_arr_build_id(const icpp_build_id *old, const icpp_arr_pad *pads, size_t n, const icpp_arr_wrap *wraps,
                       size_t nwraps, icpp_build_id *out)
{
    icpp_arr_pad *s = n ? malloc(n * sizeof *s) : NULL;
    size_t ns = 0;
    for (size_t i = 0; s && i < n; i++)
        if (pads[i].pad)
            s[ns++] = pads[i];
    if (ns)
        qsort(s, ns, sizeof *s, pad_cmp);
    /* Four independent lanes over: a tag, the old id, the sorted paddings. */
    uint64_t lane[4] = {0x69637070u, 0x61727231u, 0x6275696cu, 0x642d6964u};
    for (int l = 0; l < 4; l++) {
        uint64_t h = mix(lane[l] ^ old->len);
        for (uint8_t i = 0; i < old->len; i++)
            h = mix(h ^ old->bytes[i] ^ ((uint64_t)i << 8));
        for (size_t i = 0; i < ns; i++)
            h = mix(mix(h ^ s[i].addr) ^ s[i].pad);
        for (size_t i = 0; i < nwraps; i++)   /* in ret order, as given */
            h = mix(mix(mix(h ^ 0x77726170u) ^ wraps[i].ret) ^ wraps[i].pad);
        lane[l] = mix(h ^ (uint64_t)ns);
    }
    free(s);
    memset(out, 0, sizeof *out);
    out->len = old->len ? old->len : 20;
    for (uint8_t i = 0; i < out->len; i++)
        out->bytes[i] = (uint8_t)(mix(lane[i & 3] + i) >> 56);
    if (out->len == old->len && !memcmp(out->bytes, old->bytes, old->len))
        out->bytes[0] ^= 0xa5;  /* never the old id */
}

/* The metadata of a map, which the public API reads only by key: find it in
 * the map's encoding (docs/pathmap-format.md) and set each pair on dst. */
static int copy_meta(const icpp_pathmap *src, icpp_pathmap *dst, icpp_err *err)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (icpp_pathmap_encode(src, &buf, &len, err) < 0)
        return -1;
    icpp_rbuf r;
    icpp_rbuf_init(&r, buf, len > 4 ? len - 4 : 0);   /* without the CRC */
    icpp_rbuf_bytes(&r, 24);                          /* magic, version, flags, length */
    icpp_rbuf_uv(&r);                                 /* definitions version */
    icpp_rbuf_uv(&r);                                 /* main module */
    for (uint64_t m = icpp_rbuf_uv(&r); m && !r.bad; m--) {
        icpp_rbuf_uv(&r);
        free(icpp_rbuf_str(&r, 1u << 16));
        icpp_rbuf_bytes(&r, icpp_rbuf_uv(&r));
    }
    for (uint64_t f = icpp_rbuf_uv(&r); f && !r.bad; f--) {
        icpp_rbuf_uv(&r);
        icpp_rbuf_uv(&r);
        free(icpp_rbuf_str(&r, 1u << 16));
    }
    for (uint64_t nn = icpp_rbuf_uv(&r); nn && !r.bad; nn--) {
        icpp_rbuf_uv(&r);
        icpp_rbuf_uv(&r);
        icpp_rbuf_uv(&r);
        for (uint64_t h = icpp_rbuf_uv(&r); h && !r.bad; h--) {
            icpp_rbuf_sv(&r);
            icpp_rbuf_uv(&r);
        }
        for (uint64_t s = icpp_rbuf_uv(&r); s && !r.bad; s--) {
            icpp_rbuf_uv(&r);
            icpp_rbuf_uv(&r);
            icpp_rbuf_uv(&r);
        }
    }
    int rc = 0;
    for (uint64_t k = icpp_rbuf_uv(&r); k && !r.bad && rc == 0; k--) {
        char *key = icpp_rbuf_str(&r, 1u << 16), *val = icpp_rbuf_str(&r, 1u << 16);
        if (key && val && icpp_pathmap_set_meta(dst, key, val) < 0)
            rc = icpp_err_set(err, ENOMEM, "out of memory copying the map's metadata");
        free(key);
        free(val);
    }
    if (rc == 0 && r.bad)
        rc = icpp_err_set(err, ICPP_EFORMAT, "internal error: cannot re-read the map's own encoding");
    free(buf);
    return rc;
}

/* pm's modules (the main one renamed to new_path and new_bid, unless NULL)
 * and functions into the empty out, at the same indexes. */
static int copy_heads(const icpp_pathmap *pm, icpp_pathmap *out, const char *new_path, const icpp_build_id *new_bid,
                      icpp_err *err)
{
    size_t nm = icpp_pathmap_nmodules(pm);
    uint32_t main = icpp_pathmap_main(pm);
    for (size_t i = 0; i < nm; i++) {
        const icpp_pm_module *m = icpp_pathmap_module(pm, (uint32_t)i);
        int re = i == main && new_path;
        uint32_t idx;
        if (icpp_pathmap_add_module(out, re ? new_path : m->path, re ? new_bid : &m->build_id, m->kind, &idx) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory copying a map");
        if (idx != i)
            return icpp_err_set(err, ICPP_EFORMAT, "the map lists module %s twice", m->path);
    }
    if (nm)
        icpp_pathmap_set_main(out, main);
    for (size_t i = 0; i < icpp_pathmap_nfuncs(pm); i++) {
        const icpp_pm_func *f = icpp_pathmap_func(pm, (uint32_t)i);
        uint32_t idx;
        if (icpp_pathmap_add_func(out, f->module, f->addr, f->name, &idx) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory copying a map");
    }
    return 0;
}

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The clone of c[0..n) node nd is called through (its sites: site[], as
 * executed -- a call made in a copy is not re-aimed), or -1 (*part set
 * when only some of its sites are a clone's). */
static long node_clone(const icpp_pathmap *pm, uint32_t main, const icpp_pm_node *nd, const uint64_t *site,
                       const icpp_arr_clone *c, size_t n, int *part)
{
    const icpp_pm_func *f = icpp_pathmap_func(pm, nd->func);
    *part = 0;
    if (f->module != main || !nd->nsites)
        return -1;
    for (size_t k = 0; k < n; k++) {
        if (c[k].orig != f->addr)
            continue;
        uint32_t in = 0;
        for (uint32_t j = 0; j < nd->nsites; j++)
            in += nd->sites[j].module == main &&
                  bsearch(&site[j], c[k].rets, c[k].nrets, sizeof *c[k].rets, u64_cmp) != NULL;
        if (in == nd->nsites)
            return (long)k;
        if (in)
            *part = 1;
    }
    return -1;
}

/* Where the call returning to a (a main-module return address of a path
 * below node up) was made: in the frame of the nearest ancestor running
 * the function whose code holds a.  If that ancestor runs a copy, the
 * return address is in the copy.  (A return address may end its function:
 * a call that does not return.) */
static uint64_t site_in_copy(const icpp_pathmap *pm, const long *cl, const icpp_arr_clone *c, size_t n, uint32_t up,
                             uint64_t a)
{
    uint64_t f = 0;
    size_t part = 0;
    for (size_t k = 0; k < n && !f; k++)
        for (size_t j = 0; j < c[k].nparts && !f; j++)
            if (a > c[k].parts[j].lo && a <= c[k].parts[j].hi)
                f = c[k].orig, part = j;
    if (!f)
        return a;
    for (uint32_t q = up; q; q = icpp_pathmap_node(pm, q)->parent)
        if (icpp_pathmap_func(pm, icpp_pathmap_node(pm, q)->func)->addr == f) {
            if (cl[q] < 0 || part >= c[cl[q]].nparts)
                return a;
            const icpp_arr_part *pt = &c[cl[q]].parts[part];
            return a - pt->lo + pt->addr;
        }
    return a;
}

icpp_pathmap *icpp_arr_clone_map(const icpp_pathmap *pm, const icpp_arr_clone *c, size_t n, size_t *partly,
                                 icpp_err *err)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    uint32_t main = icpp_pathmap_main(pm);
    icpp_pathmap *out = icpp_pathmap_new();
    long *cl = malloc((nn + 1) * sizeof *cl);           /* per node: the clone it runs in, or -1 */
    uint32_t *cfid = malloc((n + 1) * sizeof *cfid);    /* per clone: its function index */
    uint64_t *site = NULL;                              /* a node's sites as executed */
    size_t nsite = 0;
    if (partly)
        *partly = 0;
    if (!out || !cl || !cfid)
        goto oom;
    if (copy_heads(pm, out, NULL, NULL, err) < 0)
        goto fail;
    for (size_t k = 0; k < n; k++)
        if (icpp_pathmap_add_func(out, main, c[k].addr, c[k].name, &cfid[k]) < 0)
            goto oom;
    cl[0] = -1;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *s = icpp_pathmap_node(pm, (uint32_t)i);
        int part;
        if (s->nsites > nsite) {
            uint64_t *ns = realloc(site, s->nsites * sizeof *site);
            if (!ns)
                goto oom;
            site = ns, nsite = s->nsites;
        }
        for (uint32_t k = 0; k < s->nsites; k++)
            site[k] = s->sites[k].module == main ? site_in_copy(pm, cl, c, n, s->parent, s->sites[k].addr)
                                                 : s->sites[k].addr;
        cl[i] = node_clone(pm, main, s, site, c, n, &part);
        if (part && partly)
            (*partly)++;
        uint32_t d;
        if (icpp_pathmap_child(out, s->parent, cl[i] >= 0 ? cfid[cl[i]] : s->func, &d) < 0)
            goto oom;
        if (d != i) {
            icpp_err_set(err, ICPP_EFORMAT, "the map stores path %zu twice", i);
            goto fail;
        }
        icpp_pathmap_add_count(out, d, s->count);
        for (uint32_t k = 0; k < s->nheights; k++)
            if (icpp_pathmap_add_height(out, d, s->heights[k].height, s->heights[k].count) < 0)
                goto oom;
        for (uint32_t k = 0; k < s->nsites; k++)
            if (icpp_pathmap_add_site(out, d, s->sites[k].module, site[k], s->sites[k].count) < 0)
                goto oom;
    }
    if (copy_meta(pm, out, err) < 0)
        goto fail;
    free(cl);
    free(cfid);
    free(site);
    return out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory building the cloned program's map");
fail:
    icpp_pathmap_free(out);
    free(cl);
    free(cfid);
    free(site);
    return NULL;
}

icpp_pathmap *icpp_arr_apply(const icpp_pathmap *pm, const uint32_t *caller, const icpp_arr_pad *pads, size_t n,
                             const icpp_arr_wrap *wraps, size_t nwraps, const char *new_path,
                             const icpp_build_id *new_bid, icpp_err *err)
{
    size_t nm = icpp_pathmap_nmodules(pm), nf = icpp_pathmap_nfuncs(pm), nn = icpp_pathmap_nnodes(pm);
    uint32_t main = icpp_pathmap_main(pm);
    icpp_pathmap *out = icpp_pathmap_new();
    uint32_t *fpad = malloc((nf + 1) * sizeof *fpad);
    int64_t *shift = malloc(nn * sizeof *shift);
    uint32_t *nwrap = malloc((nn + 1) * sizeof *nwrap);
    if (!out || !fpad || !shift || !nwrap)
        goto oom;
    icpp_arr_func_pads(pm, pads, n, fpad);
    if (icpp_arr_node_wraps(pm, wraps, nwraps, nwrap)) {
        icpp_err_set(err, ICPP_EFORMAT, "internal error: a path's call sites are partly wrapped");
        goto fail;
    }
    icpp_arr_shifts(pm, caller, fpad, nwrap, shift);
    if (copy_heads(pm, out, new_path, new_bid, err) < 0)
        goto fail;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *s = icpp_pathmap_node(pm, (uint32_t)i);
        uint32_t d;
        if (icpp_pathmap_child(out, s->parent, s->func, &d) < 0)
            goto oom;
        if (d != i) {               /* paths are unique: node i is copied to node i */
            icpp_err_set(err, ICPP_EFORMAT, "the map stores path %zu twice", i);
            goto fail;
        }
        icpp_pathmap_add_count(out, d, s->count);
        for (uint32_t k = 0; k < s->nheights; k++)
            if (icpp_pathmap_add_height(out, d, s->heights[k].height + shift[i], s->heights[k].count) < 0)
                goto oom;
        for (uint32_t k = 0; k < s->nsites; k++) {
            const icpp_arr_wrap *w = s->sites[k].module == main ? find_wrap(wraps, nwraps, s->sites[k].addr) : NULL;
            if (icpp_pathmap_add_site(out, d, s->sites[k].module, w ? w->new_ret : s->sites[k].addr,
                                      s->sites[k].count) < 0)
                goto oom;
        }
    }
    if (copy_meta(pm, out, err) < 0)
        goto fail;
    char hex[2 * ICPP_BUILD_ID_MAX + 1] = "", num[32];
    if (nm)
        icpp_hex(icpp_pathmap_module(pm, main)->build_id.bytes, icpp_pathmap_module(pm, main)->build_id.len, hex,
                 sizeof hex);
    size_t npadded = 0;
    for (size_t k = 0; k < n; k++)
        npadded += pads[k].pad != 0;
    snprintf(num, sizeof num, "%zu", npadded);
    if (icpp_pathmap_set_meta(out, "arr-source", hex) < 0 || icpp_pathmap_set_meta(out, "arr-paddings", num) < 0)
        goto oom;
    snprintf(num, sizeof num, "%zu", nwraps);
    if (nwraps && icpp_pathmap_set_meta(out, "arr-wraps", num) < 0)
        goto oom;
    free(nwrap);
    free(fpad);
    free(shift);
    return out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory building the padded binary's map");
fail:
    free(nwrap);
    icpp_pathmap_free(out);
    free(fpad);
    free(shift);
    return NULL;
}

int icpp_arr_set_unpaddable(icpp_pathmap *out, const icpp_pathmap *pm, const uint32_t *maxpad, icpp_err *err)
{
    uint32_t main = icpp_pathmap_main(pm);
    size_t nf = icpp_pathmap_nfuncs(pm), len = 0, cap = 0;
    char *buf = NULL;
    if (icpp_vec_reserve((void **)&buf, &cap, 1, 1, 64) < 0)
        goto oom;
    for (size_t f = 0; f < nf; f++) {
        const icpp_pm_func *fn = icpp_pathmap_func(pm, (uint32_t)f);
        if (fn->module != main || maxpad[f] >= 16)   /* paddings are multiples of 16 */
            continue;
        if (icpp_vec_reserve((void **)&buf, &cap, len + 24, 1, 64) < 0)  /* ",", 16 hex digits, NUL */
            goto oom;
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRIx64, len ? "," : "", fn->addr);
    }
    if (icpp_pathmap_set_meta(out, "arr-unpaddable", buf) < 0)
        goto oom;
    free(buf);
    return 0;
oom:
    free(buf);
    icpp_err_set(err, ENOMEM, "out of memory listing the unpaddable functions");
    return -1;
}

static int addr_idx_cmp(const void *a, const void *b)
{
    uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];
    return x < y ? -1 : x > y;
}

int icpp_arr_unpaddable(const icpp_pathmap *pm, uint8_t *mask, icpp_err *err)
{
    const char *v = icpp_pathmap_meta(pm, "arr-unpaddable");
    if (!v)
        return 0;
    uint32_t main = icpp_pathmap_main(pm);
    size_t nf = icpp_pathmap_nfuncs(pm), nm = 0;
    uint64_t(*byaddr)[2] = malloc((nf ? nf : 1) * sizeof *byaddr);     /* main module: (address, index) */
    if (!byaddr) {
        icpp_err_set(err, ENOMEM, "out of memory reading the map's arr-unpaddable list");
        return -1;
    }
    for (size_t f = 0; f < nf; f++) {
        const icpp_pm_func *fn = icpp_pathmap_func(pm, (uint32_t)f);
        mask[f] = fn->module != main ? 2 : 0;
        if (fn->module == main) {
            byaddr[nm][0] = fn->addr;
            byaddr[nm++][1] = f;
        }
    }
    qsort(byaddr, nm, sizeof *byaddr, addr_idx_cmp);
    while (*v) {
        char *end;
        errno = 0;
        uint64_t key[2] = {strtoull(v, &end, 16), 0};
        if (end == v || errno || (*end && *end != ',') || (*end == ',' && !end[1])) {
            free(byaddr);
            icpp_err_set(err, ICPP_EFORMAT, "the map's arr-unpaddable list is malformed");
            return -1;
        }
        const uint64_t *hit = bsearch(key, byaddr, nm, sizeof *byaddr, addr_idx_cmp);
        if (hit)
            mask[hit[1]] = 1;   /* an address the map has no function for is skipped */
        v = *end ? end + 1 : end;
    }
    free(byaddr);
    return 1;
}
