/* pathmap.c -- the path map: calling-context tree with heights, its file format, merging and statistics. */
#include "pathmap.h"
#include "vec.h"

#include "codec.h"
#include "fsafe.h"
#include "hmap.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char MAGIC[8] = {'I', 'C', 'P', 'P', 'M', 'A', 'P', '\n'};
#define MAX_STR   (1u << 16)        /* paths, names, metadata */
#define MAX_FILE  ((size_t)1 << 32)

typedef struct meta {
    char *key, *val;
} meta;

struct icpp_pathmap {
    icpp_pm_module *mods;
    size_t          nmods, capmods;
    icpp_pm_func   *funcs;
    size_t          nfuncs, capfuncs;
    icpp_pm_node   *nodes;
    size_t          nnodes, capnodes;
    meta           *meta;
    size_t          nmeta;
    uint32_t        main_module;
    icpp_hmap       func_ix;        /* (module, addr) -> func */
    icpp_hmap       child_ix;       /* (parent, func) -> node */
    icpp_hmap       height_ix;      /* (node, height) -> index, for nodes with > SCAN_MAX heights */
    icpp_hmap       site_ix;        /* (node | module << 32, addr) -> index, likewise for sites */
};

/* A node's heights and sites are found by a scan up to this many; past it
 * through height_ix/site_ix (a crafted map with a million heights on one
 * node made decoding quadratic). */
#define SCAN_MAX 16

/* Per-node arrays start small (icpp_vec_reserve from 1): most nodes have one
 * height and one site; the map's own arrays from 16. */
static int grow(void **v, size_t *cap, size_t need, size_t elem)
{
    return icpp_vec_reserve(v, cap, need, elem, 16);
}

icpp_pathmap *icpp_pathmap_new(void)
{
    icpp_pathmap *pm = calloc(1, sizeof *pm);
    if (!pm)
        return NULL;
    if (grow((void **)&pm->nodes, &pm->capnodes, 1, sizeof *pm->nodes) < 0) {
        free(pm);
        return NULL;
    }
    pm->nnodes = 1;                 /* virtual root */
    return pm;
}

void icpp_pathmap_free(icpp_pathmap *pm)
{
    if (!pm)
        return;
    for (size_t i = 0; i < pm->nmods; i++)
        free(pm->mods[i].path);
    for (size_t i = 0; i < pm->nfuncs; i++)
        free(pm->funcs[i].name);
    for (size_t i = 0; i < pm->nnodes; i++) {
        free(pm->nodes[i].heights);
        free(pm->nodes[i].sites);
    }
    for (size_t i = 0; i < pm->nmeta; i++) {
        free(pm->meta[i].key);
        free(pm->meta[i].val);
    }
    free(pm->mods);
    free(pm->funcs);
    free(pm->nodes);
    free(pm->meta);
    icpp_hmap_free(&pm->func_ix);
    icpp_hmap_free(&pm->child_ix);
    icpp_hmap_free(&pm->height_ix);
    icpp_hmap_free(&pm->site_ix);
    free(pm);
}

int icpp_pathmap_add_module(icpp_pathmap *pm, const char *path, const icpp_build_id *bid, uint8_t kind,
                            uint32_t *idx)
{
    for (size_t i = 0; i < pm->nmods; i++) {
        const icpp_pm_module *m = &pm->mods[i];
        if (icpp_build_id_match(&m->build_id, m->path, bid, path)) {
            *idx = (uint32_t)i;
            return 0;
        }
    }
    if (grow((void **)&pm->mods, &pm->capmods, pm->nmods + 1, sizeof *pm->mods) < 0)
        return -ENOMEM;
    char *p = strdup(path ? path : "");
    if (!p)
        return -ENOMEM;
    pm->mods[pm->nmods] = (icpp_pm_module){p, *bid, kind};
    *idx = (uint32_t)pm->nmods++;
    return 0;
}

int icpp_pathmap_add_func(icpp_pathmap *pm, uint32_t module, uint64_t addr, const char *name, uint32_t *idx)
{
    uint64_t *v = icpp_hmap_get(&pm->func_ix, module, addr);
    if (v) {
        *idx = (uint32_t)*v;
        return 0;
    }
    if (module >= pm->nmods)
        return -EINVAL;
    if (grow((void **)&pm->funcs, &pm->capfuncs, pm->nfuncs + 1, sizeof *pm->funcs) < 0)
        return -ENOMEM;
    char *n = strdup(name ? name : "");
    if (!n || icpp_hmap_put(&pm->func_ix, module, addr, pm->nfuncs) < 0) {
        free(n);
        return -ENOMEM;
    }
    pm->funcs[pm->nfuncs] = (icpp_pm_func){module, addr, n};
    *idx = (uint32_t)pm->nfuncs++;
    return 0;
}

int64_t icpp_pathmap_find_func(const icpp_pathmap *pm, uint32_t module, uint64_t addr)
{
    const uint64_t *v = icpp_hmap_get(&pm->func_ix, module, addr);
    return v ? (int64_t)*v : -1;
}

uint32_t icpp_pathmap_find_child(const icpp_pathmap *pm, uint32_t parent, uint32_t func)
{
    const uint64_t *v = icpp_hmap_get(&pm->child_ix, parent, func);
    return v ? (uint32_t)*v : 0;
}

int icpp_pathmap_child(icpp_pathmap *pm, uint32_t parent, uint32_t func, uint32_t *idx)
{
    uint64_t *v = icpp_hmap_get(&pm->child_ix, parent, func);
    if (v) {
        *idx = (uint32_t)*v;
        return 0;
    }
    if (parent >= pm->nnodes || func >= pm->nfuncs || pm->nnodes >= UINT32_MAX)
        return -EINVAL;
    if (grow((void **)&pm->nodes, &pm->capnodes, pm->nnodes + 1, sizeof *pm->nodes) < 0 ||
        icpp_hmap_put(&pm->child_ix, parent, func, pm->nnodes) < 0)
        return -ENOMEM;
    icpp_pm_node *n = &pm->nodes[pm->nnodes];
    memset(n, 0, sizeof *n);
    n->parent = parent;
    n->func = func;
    n->depth = pm->nodes[parent].depth + 1;
    assert(parent < pm->nnodes);    /* pathmap.h: a parent's index is below its children's */
    *idx = (uint32_t)pm->nnodes++;
    return 0;
}

void icpp_pathmap_add_count(icpp_pathmap *pm, uint32_t node, uint64_t count)
{
    if (node < pm->nnodes)
        pm->nodes[node].count += count;
}

/* Node's entry for height, added (counts 0) if absent; NULL if out of memory. */
static icpp_pm_height *height_slot(icpp_pathmap *pm, icpp_pm_node *n, uint32_t node, int64_t height)
{
    if (n->nheights <= SCAN_MAX) {
        for (uint32_t i = 0; i < n->nheights; i++)
            if (n->heights[i].height == height)
                return &n->heights[i];
    } else {
        uint64_t *v = icpp_hmap_get(&pm->height_ix, node, (uint64_t)height);
        if (v)
            return &n->heights[*v];
    }
    size_t cap = n->capheights;
    if (icpp_vec_reserve((void **)&n->heights, &cap, (size_t)n->nheights + 1, sizeof *n->heights, 1) < 0)
        return NULL;
    n->capheights = (uint32_t)cap;
    n->heights[n->nheights++] = (icpp_pm_height){height, 0, 0};
    /* Past the scan limit: index them all (once), then each new one. */
    for (uint32_t i = n->nheights == SCAN_MAX + 1 ? 0 : n->nheights - 1; n->nheights > SCAN_MAX && i < n->nheights; i++)
        if (icpp_hmap_put(&pm->height_ix, node, (uint64_t)n->heights[i].height, i) < 0)
            return NULL;
    return &n->heights[n->nheights - 1];
}

int icpp_pathmap_add_height(icpp_pathmap *pm, uint32_t node, int64_t height, uint64_t count)
{
    if (node >= pm->nnodes)
        return -EINVAL;
    icpp_pm_height *h = height_slot(pm, &pm->nodes[node], node, height);
    if (!h)
        return -ENOMEM;
    h->count += count;
    return 0;
}

int icpp_pathmap_add_learned(icpp_pathmap *pm, uint32_t node, int64_t height, uint64_t n)
{
    if (node >= pm->nnodes)
        return -EINVAL;
    icpp_pm_height *h = height_slot(pm, &pm->nodes[node], node, height);
    if (!h)
        return -ENOMEM;
    h->learned += n;
    return 0;
}

int icpp_pathmap_add_site(icpp_pathmap *pm, uint32_t node, uint32_t module, uint64_t addr, uint64_t count)
{
    if (node >= pm->nnodes || module >= pm->nmods)
        return -EINVAL;
    icpp_pm_node *n = &pm->nodes[node];
    uint64_t k1 = node | (uint64_t)module << 32;
    if (n->nsites <= SCAN_MAX) {
        for (uint32_t i = 0; i < n->nsites; i++)
            if (n->sites[i].module == module && n->sites[i].addr == addr) {
                n->sites[i].count += count;
                return 0;
            }
    } else {
        uint64_t *v = icpp_hmap_get(&pm->site_ix, k1, addr);
        if (v) {
            n->sites[*v].count += count;
            return 0;
        }
    }
    size_t cap = n->capsites;
    if (icpp_vec_reserve((void **)&n->sites, &cap, (size_t)n->nsites + 1, sizeof *n->sites, 1) < 0)
        return -ENOMEM;
    n->capsites = (uint32_t)cap;
    n->sites[n->nsites++] = (icpp_pm_site){module, addr, count};
    for (uint32_t i = n->nsites == SCAN_MAX + 1 ? 0 : n->nsites - 1; n->nsites > SCAN_MAX && i < n->nsites; i++)
        if (icpp_hmap_put(&pm->site_ix, node | (uint64_t)n->sites[i].module << 32, n->sites[i].addr, i) < 0)
            return -ENOMEM;
    return 0;
}

int icpp_pathmap_rename_func(icpp_pathmap *pm, uint32_t i, const char *name)
{
    if (i >= pm->nfuncs)
        return -EINVAL;
    char *n = strdup(name);
    if (!n)
        return -ENOMEM;
    free(pm->funcs[i].name);
    pm->funcs[i].name = n;
    return 0;
}

int icpp_pathmap_set_meta(icpp_pathmap *pm, const char *key, const char *value)
{
    for (size_t i = 0; i < pm->nmeta; i++)
        if (!strcmp(pm->meta[i].key, key)) {
            char *v = strdup(value);
            if (!v)
                return -ENOMEM;
            free(pm->meta[i].val);
            pm->meta[i].val = v;
            return 0;
        }
    meta *nm = realloc(pm->meta, (pm->nmeta + 1) * sizeof *nm);
    if (!nm)
        return -ENOMEM;
    pm->meta = nm;
    char *k = strdup(key), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    pm->meta[pm->nmeta++] = (meta){k, v};
    return 0;
}

const char *icpp_pathmap_meta(const icpp_pathmap *pm, const char *key)
{
    for (size_t i = 0; i < pm->nmeta; i++)
        if (!strcmp(pm->meta[i].key, key))
            return pm->meta[i].val;
    return NULL;
}

size_t icpp_pathmap_nmeta(const icpp_pathmap *pm) { return pm->nmeta; }

const char *icpp_pathmap_meta_key(const icpp_pathmap *pm, size_t i)
{
    return i < pm->nmeta ? pm->meta[i].key : NULL;
}

void icpp_pathmap_set_main(icpp_pathmap *pm, uint32_t module) { pm->main_module = module; }
int32_t icpp_pathmap_find_module(const icpp_pathmap *pm, const icpp_build_id *bid)
{
    for (size_t i = 0; i < pm->nmods; i++)
        if (icpp_build_id_eq(&pm->mods[i].build_id, bid))
            return (int32_t)i;
    return -1;
}

size_t icpp_pathmap_nmodules(const icpp_pathmap *pm) { return pm->nmods; }
const icpp_pm_module *icpp_pathmap_module(const icpp_pathmap *pm, uint32_t i) { return i < pm->nmods ? &pm->mods[i] : NULL; }
uint32_t icpp_pathmap_main(const icpp_pathmap *pm) { return pm->main_module; }
size_t icpp_pathmap_nfuncs(const icpp_pathmap *pm) { return pm->nfuncs; }
const icpp_pm_func *icpp_pathmap_func(const icpp_pathmap *pm, uint32_t i) { return i < pm->nfuncs ? &pm->funcs[i] : NULL; }
size_t icpp_pathmap_nnodes(const icpp_pathmap *pm) { return pm->nnodes; }
const icpp_pm_node *icpp_pathmap_node(const icpp_pathmap *pm, uint32_t i) { return i < pm->nnodes ? &pm->nodes[i] : NULL; }

uint32_t icpp_pathmap_path(const icpp_pathmap *pm, uint32_t node, uint32_t *out, uint32_t max)
{
    if (node >= pm->nnodes)
        return 0;
    uint32_t d = pm->nodes[node].depth;
    if (out) {
        uint32_t i = d, n = node;
        for (; n && i; n = pm->nodes[n].parent) {
            i--;
            if (i < max)
                out[i] = pm->nodes[n].func;
        }
        assert(!n && !i);       /* a node's depth is its number of ancestors below the root (icpp_pathmap_child) */
    }
    return d;
}

/* ---- file format (docs/pathmap-format.md) ---- */

void icpp_pmenc_begin(icpp_pmenc *e, icpp_wbuf *b, uint32_t main_module)
{
    e->b = b;
    icpp_wbuf_bytes(b, MAGIC, sizeof MAGIC);
    icpp_wbuf_u32le(b, ICPP_PATHMAP_VERSION);
    icpp_wbuf_u32le(b, 0);                      /* flags */
    icpp_wbuf_u64le(b, 0);                      /* body length, patched by end */
    e->body = b->len;
    icpp_wbuf_uv(b, ICPP_DEFS_VERSION);
    icpp_wbuf_uv(b, main_module);
    e->count_at = b->len;
    e->count = 0;
    icpp_wbuf_uv5(b, 0);                        /* modules */
}

/* Close the current section's count and open the next one's. */
static void next_section(icpp_pmenc *e)
{
    icpp_wbuf_patch_uv5(e->b, e->count_at, e->count);
    e->count_at = e->b->len;
    e->count = 0;
    icpp_wbuf_uv5(e->b, 0);
}

void icpp_pmenc_module(icpp_pmenc *e, uint8_t kind, const char *path, const icpp_build_id *bid)
{
    icpp_wbuf_uv(e->b, kind);
    icpp_wbuf_str(e->b, path);
    icpp_wbuf_uv(e->b, bid->len);
    icpp_wbuf_bytes(e->b, bid->bytes, bid->len);
    e->count++;
}

void icpp_pmenc_funcs(icpp_pmenc *e) { next_section(e); }
void icpp_pmenc_nodes(icpp_pmenc *e) { next_section(e); }
void icpp_pmenc_metas(icpp_pmenc *e) { next_section(e); }

void icpp_pmenc_func(icpp_pmenc *e, uint32_t module, uint64_t addr, const char *name)
{
    icpp_wbuf_uv(e->b, module);
    icpp_wbuf_uv(e->b, addr);
    icpp_wbuf_str(e->b, name);
    e->count++;
}

void icpp_pmenc_node(icpp_pmenc *e, uint64_t parent_distance, uint32_t func, uint64_t count,
                     const icpp_pm_height *h, uint32_t nh, const icpp_pm_site *s, uint32_t ns)
{
    icpp_wbuf *b = e->b;
    assert(parent_distance >= 1);   /* nodes come parent first (pathmap.h) */
    icpp_wbuf_uv(b, parent_distance);
    icpp_wbuf_uv(b, func);
    icpp_wbuf_uv(b, count);
    icpp_wbuf_uv(b, nh);
    for (uint32_t k = 0; k < nh; k++) {
        icpp_wbuf_sv(b, h[k].height);
        icpp_wbuf_uv(b, h[k].count + h[k].learned);
    }
    icpp_wbuf_uv(b, ns);
    for (uint32_t k = 0; k < ns; k++) {
        icpp_wbuf_uv(b, s[k].module);
        icpp_wbuf_uv(b, s[k].addr);
        icpp_wbuf_uv(b, s[k].count);
    }
    e->count++;
}

void icpp_pmenc_meta(icpp_pmenc *e, const char *key, const char *val)
{
    icpp_wbuf_str(e->b, key);
    icpp_wbuf_str(e->b, val);
    e->count++;
}

int icpp_pmenc_end(icpp_pmenc *e)
{
    icpp_wbuf *b = e->b;
    icpp_wbuf_patch_uv5(b, e->count_at, e->count);
    if (b->oom)
        return -ENOMEM;
    uint64_t blen = b->len - e->body;
    for (int k = 0; k < 8; k++)
        b->p[e->body - 8 + k] = (uint8_t)(blen >> (8 * k));
    icpp_wbuf_u32le(b, icpp_crc32(0, b->p, b->len));
    return b->oom ? -ENOMEM : 0;
}

int icpp_pathmap_encode(const icpp_pathmap *pm, uint8_t **out, size_t *outlen, icpp_err *err)
{
    icpp_wbuf b = {0};
    icpp_pmenc e;
    icpp_pmenc_begin(&e, &b, pm->main_module);
    for (size_t i = 0; i < pm->nmods; i++)
        icpp_pmenc_module(&e, pm->mods[i].kind, pm->mods[i].path, &pm->mods[i].build_id);
    icpp_pmenc_funcs(&e);
    for (size_t i = 0; i < pm->nfuncs; i++)
        icpp_pmenc_func(&e, pm->funcs[i].module, pm->funcs[i].addr, pm->funcs[i].name);
    icpp_pmenc_nodes(&e);
    for (size_t i = 1; i < pm->nnodes; i++) {
        const icpp_pm_node *n = &pm->nodes[i];
        icpp_pmenc_node(&e, i - n->parent, n->func, n->count, n->heights, n->nheights, n->sites, n->nsites);
    }
    icpp_pmenc_metas(&e);
    for (size_t i = 0; i < pm->nmeta; i++)
        icpp_pmenc_meta(&e, pm->meta[i].key, pm->meta[i].val);
    if (icpp_pmenc_end(&e) < 0) {
        icpp_wbuf_free(&b);
        return icpp_err_set(err, ENOMEM, "out of memory encoding the path map");
    }
    *out = b.p;
    *outlen = b.len;
    return 0;
}

#define FAIL(...)                                     \
    do {                                              \
        icpp_err_set(err, ICPP_EFORMAT, __VA_ARGS__); \
        goto fail;                                    \
    } while (0)

icpp_pathmap *icpp_pathmap_decode(const uint8_t *buf, size_t len, icpp_err *err)
{
    icpp_pathmap *pm = icpp_pathmap_new();
    if (!pm) {
        icpp_err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    icpp_rbuf r;
    icpp_rbuf_init(&r, buf, len);
    const uint8_t *mg = icpp_rbuf_bytes(&r, sizeof MAGIC);
    if (!mg || memcmp(mg, MAGIC, sizeof MAGIC))
        FAIL("not an ICPP path map (bad magic)");
    uint32_t version = icpp_rbuf_u32le(&r);
    if (r.bad)
        FAIL("truncated header");
    if (version != ICPP_PATHMAP_VERSION) {
        icpp_err_set(err, ICPP_EVERSION, "path map version %u; this build reads version %u", version,
                     ICPP_PATHMAP_VERSION);
        goto fail;
    }
    icpp_rbuf_u32le(&r);                        /* flags: none defined */
    uint64_t blen = icpp_rbuf_u64le(&r);
    if (r.bad || icpp_rbuf_left(&r) < 4 || blen != icpp_rbuf_left(&r) - 4)   /* not blen + 4: it can wrap */
        FAIL("length field says %" PRIu64 " bytes of body, file has %zu (truncated or appended to)", blen,
             icpp_rbuf_left(&r) >= 4 ? icpp_rbuf_left(&r) - 4 : 0);
    uint32_t crc_want = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 | (uint32_t)buf[len - 2] << 16 |
                        (uint32_t)buf[len - 1] << 24;
    if (icpp_crc32(0, buf, len - 4) != crc_want)
        FAIL("checksum mismatch: the file is corrupt");
    icpp_rbuf_init(&r, r.p, (size_t)blen);      /* body only */

    uint64_t defs = icpp_rbuf_uv(&r);
    if (defs != ICPP_DEFS_VERSION)
        FAIL("heights use definitions version %" PRIu64 ", this build uses %d", defs, ICPP_DEFS_VERSION);
    uint64_t mainmod = icpp_rbuf_uv(&r);
    uint64_t nmods = icpp_rbuf_uv(&r);
    if (r.bad || nmods > icpp_rbuf_left(&r) || (nmods && mainmod >= nmods))
        FAIL("bad module table");
    pm->main_module = (uint32_t)mainmod;
    for (uint64_t i = 0; i < nmods; i++) {
        uint64_t kind = icpp_rbuf_uv(&r);
        char *path = icpp_rbuf_str(&r, MAX_STR);
        uint64_t bl = icpp_rbuf_uv(&r);
        const uint8_t *bb = (!r.bad && bl <= ICPP_BUILD_ID_MAX) ? icpp_rbuf_bytes(&r, (size_t)bl) : NULL;
        if (r.bad || !path || kind > 255 || (bl && !bb)) {
            free(path);
            FAIL("bad module %" PRIu64, i);
        }
        if (grow((void **)&pm->mods, &pm->capmods, pm->nmods + 1, sizeof *pm->mods) < 0) {
            free(path);
            FAIL("out of memory");
        }
        icpp_pm_module *m = &pm->mods[pm->nmods++];
        m->path = path;
        m->kind = (uint8_t)kind;
        m->build_id.len = (uint8_t)bl;
        if (bl)
            memcpy(m->build_id.bytes, bb, (size_t)bl);
    }
    uint64_t nfuncs = icpp_rbuf_uv(&r);
    if (r.bad || nfuncs > icpp_rbuf_left(&r))
        FAIL("bad function table");
    for (uint64_t i = 0; i < nfuncs; i++) {
        uint64_t mod = icpp_rbuf_uv(&r), addr = icpp_rbuf_uv(&r);
        char *name = icpp_rbuf_str(&r, MAX_STR);
        uint32_t idx;
        if (r.bad || !name || mod >= nmods) {
            free(name);
            FAIL("bad function %" PRIu64, i);
        }
        int rc = icpp_pathmap_add_func(pm, (uint32_t)mod, addr, name, &idx);
        free(name);
        if (rc < 0)
            FAIL("out of memory");
        if (idx != i)
            FAIL("function %" PRIu64 " repeats function %u", i, idx);
    }
    uint64_t nn = icpp_rbuf_uv(&r);
    if (r.bad || nn > icpp_rbuf_left(&r) || nn >= UINT32_MAX)
        FAIL("bad node count");
    for (uint64_t i = 1; i <= nn; i++) {
        uint64_t back = icpp_rbuf_uv(&r), func = icpp_rbuf_uv(&r), count = icpp_rbuf_uv(&r);
        if (r.bad || back == 0 || back > i || func >= nfuncs)
            FAIL("bad node %" PRIu64, i);
        uint32_t idx;
        if (icpp_pathmap_child(pm, (uint32_t)(i - back), (uint32_t)func, &idx) < 0)
            FAIL("out of memory");
        if (idx != i)
            FAIL("node %" PRIu64 " repeats the path of node %u", i, idx);
        pm->nodes[idx].count = count;
        uint64_t nh = icpp_rbuf_uv(&r);
        if (r.bad || nh > icpp_rbuf_left(&r))
            FAIL("bad heights of node %" PRIu64, i);
        for (uint64_t k = 0; k < nh; k++) {
            int64_t h = icpp_rbuf_sv(&r);
            uint64_t c = icpp_rbuf_uv(&r);
            if (!r.bad && !icpp_height_ok(h))
                FAIL("height %" PRId64 " of node %" PRIu64 " is beyond any stack (2^56 bytes): "
                     "a corrupt or crafted map; train a new one", h, i);
            if (r.bad || icpp_pathmap_add_height(pm, idx, h, c) < 0)
                FAIL("bad height %" PRIu64 " of node %" PRIu64, k, i);
        }
        uint64_t ns = icpp_rbuf_uv(&r);
        if (r.bad || ns > icpp_rbuf_left(&r))
            FAIL("bad call sites of node %" PRIu64, i);
        for (uint64_t k = 0; k < ns; k++) {
            uint64_t mod = icpp_rbuf_uv(&r), addr = icpp_rbuf_uv(&r), c = icpp_rbuf_uv(&r);
            if (r.bad || mod >= nmods || icpp_pathmap_add_site(pm, idx, (uint32_t)mod, addr, c) < 0)
                FAIL("bad call site %" PRIu64 " of node %" PRIu64, k, i);
        }
    }
    uint64_t nmeta = icpp_rbuf_uv(&r);
    if (r.bad || nmeta > icpp_rbuf_left(&r))
        FAIL("bad metadata");
    for (uint64_t i = 0; i < nmeta; i++) {
        char *k = icpp_rbuf_str(&r, MAX_STR), *v = icpp_rbuf_str(&r, MAX_STR);
        int rc = (k && v) ? icpp_pathmap_set_meta(pm, k, v) : -1;
        free(k);
        free(v);
        if (rc < 0)
            FAIL("bad metadata entry %" PRIu64, i);
    }
    if (icpp_rbuf_left(&r))
        FAIL("%zu stray bytes after the metadata", icpp_rbuf_left(&r));
    return pm;
fail:
    icpp_pathmap_free(pm);
    return NULL;
}

/* Encode and replace, the lock (if any) held by the caller. */
static int write_unlocked(const icpp_pathmap *pm, const char *path, icpp_err *err)
{
    uint8_t *buf;
    size_t len;
    if (icpp_pathmap_encode(pm, &buf, &len, err) < 0)
        return icpp_err_prefix(err, "%s", path);
    int r = icpp_write_file_atomic(path, buf, len, err);
    free(buf);
    return r;
}

/* The container's header against the file's size, and the file for holes,
 * before its bytes are read into memory: a damaged map (a sparse file of
 * gigabytes behind a small header) is refused at once, not after reading
 * it all (docs/pathmap-format.md, "Container").  0, or -errno. */
static int precheck(int fd, const struct stat *st, icpp_err *err)
{
    uint8_t h[24];
    size_t got = icpp_read_at(fd, h, sizeof h, 0);
    if (got < sizeof MAGIC || memcmp(h, MAGIC, sizeof MAGIC))
        return icpp_err_set(err, ICPP_EFORMAT, "not an ICPP path map (bad magic)");
    if (got < sizeof h)
        return icpp_err_set(err, ICPP_EFORMAT, "truncated header (%zu bytes)", got);
    uint32_t version = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
    if (version != ICPP_PATHMAP_VERSION)
        return icpp_err_set(err, ICPP_EVERSION, "path map version %u; this build reads version %u", version,
                            ICPP_PATHMAP_VERSION);
    uint64_t blen = 0;
    for (int i = 7; i >= 0; i--)
        blen = blen << 8 | h[16 + i];
    uint64_t size = (uint64_t)st->st_size;
    if (size < 28 || blen != size - 28)
        return icpp_err_set(err, ICPP_EFORMAT,
                            "length field says %" PRIu64 " bytes of body, file has %" PRIu64
                            " (truncated or appended to)", blen, size >= 28 ? size - 28 : 0);
    if (size > MAX_FILE)
        return icpp_err_set(err, EFBIG, "%" PRIu64 " bytes is more than the %zu this reader accepts", size,
                            MAX_FILE);
    /* A map is written out in full: a hole is bytes never written. */
    off_t hole = lseek(fd, 0, SEEK_HOLE);
    if (hole >= 0 && (uint64_t)hole < size)
        return icpp_err_set(err, ICPP_EFORMAT, "the file has a hole at byte %lld (%" PRIu64 " bytes, %lld on disk): "
                            "it is damaged", (long long)hole, size, (long long)st->st_blocks * 512);
    return 0;
}


int icpp_pathmap_update(const char *path, int replace, icpp_pathmap_update_fn fn, void *arg,
                        icpp_pathmap **cur_out, icpp_err *err)
{
    if (cur_out)
        *cur_out = NULL;
    int kind = icpp_fs_output_check(path, err);
    if (kind < 0)
        return kind;
    icpp_fs_lock lk = {.fd = -1};
    int rc = kind != ICPP_FS_CHARDEV ? icpp_fs_lock_beside(&lk, path, err) : 0;
    if (rc < 0)
        return rc;
    icpp_pathmap *cur = NULL;
    const icpp_pathmap *out = NULL;
    if (!replace) {
        icpp_err e2;
        cur = icpp_pathmap_read(path, &e2);
        if (!cur && e2.code != ENOENT) {
            if (err)
                *err = e2;
            rc = -(e2.code ? e2.code : EIO);
        }
    }
    if (rc == 0)
        rc = fn(arg, cur, &out, err);
    if (rc == 0)
        rc = out ? write_unlocked(out, path, err) : icpp_err_set(err, EINVAL, "%s: no map to write", path);
    icpp_fs_unlock(&lk);
    if (cur_out)
        *cur_out = cur;
    else
        icpp_pathmap_free(cur);
    return rc < 0 ? rc : 0;
}

static int write_as_is(void *arg, icpp_pathmap *cur, const icpp_pathmap **out, icpp_err *err)
{
    *out = arg;
    return 0;
}

int icpp_pathmap_write(const icpp_pathmap *pm, const char *path, icpp_err *err)
{
    return icpp_pathmap_update(path, 1, write_as_is, (void *)pm, NULL, err);
}

icpp_pathmap *icpp_pathmap_read(const char *path, icpp_err *err)
{
    struct stat st;
    int fd = icpp_fs_open_input(path, &st, err);
    if (fd < 0)
        return NULL;
    size_t len = (size_t)st.st_size, got = 0;
    uint8_t *buf = NULL;
    if (precheck(fd, &st, err) == 0 && !(buf = malloc(len ? len : 1)))
        icpp_err_set(err, ENOMEM, "out of memory");
    if (!buf) {
        close(fd);
        icpp_err_prefix(err, "%s", path);
        return NULL;
    }
    got = icpp_read_at(fd, buf, len, 0);
    close(fd);
    if (got != len) {
        free(buf);
        icpp_err_set(err, EIO, "%s: short read", path);
        return NULL;
    }
    icpp_pathmap *pm = icpp_pathmap_decode(buf, len, err);
    free(buf);
    if (!pm)
        icpp_err_prefix(err, "%s", path);
    return pm;
}

int icpp_pathmap_merge(icpp_pathmap *dst, const icpp_pathmap *src, icpp_err *err)
{
    if (dst->nmods && src->nmods) {
        const icpp_pm_module *a = &dst->mods[dst->main_module], *b = &src->mods[src->main_module];
        if (!icpp_build_id_match(&a->build_id, a->path, &b->build_id, b->path)) {
            char ha[2 * ICPP_BUILD_ID_MAX + 1], hb[2 * ICPP_BUILD_ID_MAX + 1];
            icpp_hex(a->build_id.bytes, a->build_id.len, ha, sizeof ha);
            icpp_hex(b->build_id.bytes, b->build_id.len, hb, sizeof hb);
            return icpp_err_set(err, ICPP_EMISMATCH,
                                "the map is of %s (build-id %s), the new data of %s (build-id %s): "
                                "use another map file or --fresh",
                                a->path, ha, b->path, hb);
        }
    }
    uint32_t *modmap = calloc(src->nmods + 1, sizeof *modmap);
    uint32_t *funcmap = calloc(src->nfuncs + 1, sizeof *funcmap);
    uint32_t *nodemap = calloc(src->nnodes, sizeof *nodemap);
    int rc = -ENOMEM;
    if (!modmap || !funcmap || !nodemap)
        goto out;
    int dst_was_empty = dst->nmods == 0;    /* then src decides which module is main */
    for (size_t i = 0; i < src->nmods; i++)
        if (icpp_pathmap_add_module(dst, src->mods[i].path, &src->mods[i].build_id, src->mods[i].kind,
                                    &modmap[i]) < 0)
            goto out;
    if (dst_was_empty && src->nmods)
        dst->main_module = modmap[src->main_module];
    for (size_t i = 0; i < src->nfuncs; i++)
        if (icpp_pathmap_add_func(dst, modmap[src->funcs[i].module], src->funcs[i].addr, src->funcs[i].name,
                                  &funcmap[i]) < 0)
            goto out;
    nodemap[0] = 0;
    for (size_t i = 1; i < src->nnodes; i++) {
        const icpp_pm_node *n = &src->nodes[i];
        uint32_t d;
        if (icpp_pathmap_child(dst, nodemap[n->parent], funcmap[n->func], &d) < 0)
            goto out;
        nodemap[i] = d;
        dst->nodes[d].count += n->count;
        for (uint32_t k = 0; k < n->nheights; k++)
            if (icpp_pathmap_add_height(dst, d, n->heights[k].height, n->heights[k].count) < 0 ||
                (n->heights[k].learned &&
                 icpp_pathmap_add_learned(dst, d, n->heights[k].height, n->heights[k].learned) < 0))
                goto out;
        for (uint32_t k = 0; k < n->nsites; k++)
            if (icpp_pathmap_add_site(dst, d, modmap[n->sites[k].module], n->sites[k].addr, n->sites[k].count) < 0)
                goto out;
    }
    for (size_t i = 0; i < src->nmeta; i++)
        if (!icpp_pathmap_meta(dst, src->meta[i].key) &&
            icpp_pathmap_set_meta(dst, src->meta[i].key, src->meta[i].val) < 0)
            goto out;
    rc = 0;
out:
    free(modmap);
    free(funcmap);
    free(nodemap);
    if (rc < 0)
        icpp_err_set(err, ENOMEM, "out of memory merging path maps");
    return rc;
}

icpp_pathmap *icpp_pathmap_learned_part(const icpp_pathmap *pm)
{
    icpp_pathmap *out = icpp_pathmap_new();
    uint8_t *need = calloc(pm->nnodes + 1, 1);
    uint32_t *nodemap = calloc(pm->nnodes + 1, sizeof *nodemap);
    int64_t *funcmap = malloc((pm->nfuncs + 1) * sizeof *funcmap);
    int64_t *modmap = malloc((pm->nmods + 1) * sizeof *modmap);
    int ok = out && need && nodemap && funcmap && modmap;
    for (size_t i = 0; ok && i < pm->nfuncs; i++)
        funcmap[i] = -1;
    for (size_t i = 0; ok && i < pm->nmods; i++)
        modmap[i] = -1;
    /* The nodes with a learned height, and their ancestors (a parent
     * precedes its children: one pass from the end). */
    for (size_t i = pm->nnodes; ok && i-- > 1;) {
        const icpp_pm_node *n = &pm->nodes[i];
        for (uint32_t k = 0; k < n->nheights && !need[i]; k++)
            need[i] = n->heights[k].learned != 0;
        if (need[i])
            need[n->parent] = 1;
    }
    uint32_t idx;
    if (ok && pm->nmods) {      /* the main module first: it stays the map's identity */
        const icpp_pm_module *m = &pm->mods[pm->main_module];
        ok = icpp_pathmap_add_module(out, m->path, &m->build_id, m->kind, &idx) == 0;
        modmap[pm->main_module] = idx;
        if (ok)
            icpp_pathmap_set_main(out, idx);
    }
    for (size_t i = 1; ok && i < pm->nnodes; i++) {
        if (!need[i])
            continue;
        const icpp_pm_node *n = &pm->nodes[i];
        const icpp_pm_func *f = &pm->funcs[n->func];
        if (modmap[f->module] < 0) {
            const icpp_pm_module *m = &pm->mods[f->module];
            ok = icpp_pathmap_add_module(out, m->path, &m->build_id, m->kind, &idx) == 0;
            modmap[f->module] = idx;
        }
        if (ok && funcmap[n->func] < 0) {
            ok = icpp_pathmap_add_func(out, (uint32_t)modmap[f->module], f->addr, f->name, &idx) == 0;
            funcmap[n->func] = idx;
        }
        ok = ok && icpp_pathmap_child(out, nodemap[n->parent], (uint32_t)funcmap[n->func], &nodemap[i]) == 0;
        for (uint32_t k = 0; ok && k < n->nheights; k++)
            if (n->heights[k].learned)
                ok = icpp_pathmap_add_height(out, nodemap[i], n->heights[k].height, n->heights[k].learned) == 0;
    }
    free(need);
    free(nodemap);
    free(funcmap);
    free(modmap);
    if (!ok) {
        icpp_pathmap_free(out);
        return NULL;
    }
    return out;
}

/* ---- statistics ---- */

static int bucket_of(uint64_t k)
{
    return k <= 1 ? 0 : k == 2 ? 1 : k == 3 ? 2 : k <= 5 ? 3 : k <= 10 ? 4 : k <= 100 ? 5 : 6;
}

const char *icpp_pathmap_bucket_name(int b)
{
    static const char *names[ICPP_AMBIG_BUCKETS] = {"1", "2", "3", "4-5", "6-10", "11-100", ">100"};
    return b >= 0 && b < ICPP_AMBIG_BUCKETS ? names[b] : "?";
}

int icpp_pathmap_stats(const icpp_pathmap *pm, icpp_pm_stats *st, icpp_err *err)
{
    memset(st, 0, sizeof *st);
    st->modules = pm->nmods;
    st->funcs = pm->nfuncs;
    st->paths = pm->nnodes - 1;
    /* CID -> number of distinct nodes having it.  A node lists each height
     * once, so counting (node, height) pairs per CID counts nodes. */
    icpp_hmap cid;
    icpp_hmap_init(&cid);
    for (size_t i = 1; i < pm->nnodes; i++) {
        const icpp_pm_node *n = &pm->nodes[i];
        if (n->depth > st->max_depth)
            st->max_depth = n->depth;
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t *v = icpp_hmap_get(&cid, n->func, (uint64_t)n->heights[k].height);
            if (v)
                (*v)++;
            else if (icpp_hmap_put(&cid, n->func, (uint64_t)n->heights[k].height, 1) < 0) {
                icpp_hmap_free(&cid);
                return icpp_err_set(err, ENOMEM, "out of memory computing statistics");
            }
            st->contexts++;
        }
    }
    st->cids = cid.n;
    for (size_t i = 1; i < pm->nnodes; i++) {
        const icpp_pm_node *n = &pm->nodes[i];
        int all_unique = n->nheights > 0;
        for (uint32_t k = 0; k < n->nheights; k++) {
            uint64_t sharing = *icpp_hmap_get(&cid, n->func, (uint64_t)n->heights[k].height);
            int b = bucket_of(sharing);
            st->hist_paths[b]++;
            st->hist_calls[b] += n->heights[k].count;
            st->calls += n->heights[k].count;
            if (sharing == 1) {
                st->unique_contexts++;
                st->unique_calls += n->heights[k].count;
            } else {
                all_unique = 0;
            }
        }
        st->unique_paths += all_unique;
    }
    icpp_hmap_free(&cid);
    return 0;
}
