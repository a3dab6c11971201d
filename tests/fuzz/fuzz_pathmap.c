/* fuzz_pathmap.c -- libFuzzer harness for icpp_pathmap_decode (lib/pathmap.c): raw input, then with the container fixed up.
 *
 * Each input is decoded twice: as it is (exercises magic, version, length
 * and CRC checks) and with magic, version, length and CRC made right
 * (exercises the body parser).  A map that decodes must re-encode, decode
 * to the same tree, and re-encode to the same bytes; its statistics, paths
 * and a merge into an empty map must not fail. */
#include "fuzz.h"
#include "pathmap.h"

static void same_maps(const icpp_pathmap *a, const icpp_pathmap *b)
{
    FUZZ_CHECK(icpp_pathmap_nmodules(a) == icpp_pathmap_nmodules(b), "modules %zu vs %zu",
               icpp_pathmap_nmodules(a), icpp_pathmap_nmodules(b));
    FUZZ_CHECK(icpp_pathmap_main(a) == icpp_pathmap_main(b), "main module");
    for (uint32_t i = 0; i < icpp_pathmap_nmodules(a); i++) {
        const icpp_pm_module *x = icpp_pathmap_module(a, i), *y = icpp_pathmap_module(b, i);
        FUZZ_CHECK(x->kind == y->kind && !strcmp(x->path, y->path) && x->build_id.len == y->build_id.len &&
                       !memcmp(x->build_id.bytes, y->build_id.bytes, x->build_id.len),
                   "module %u", i);
    }
    FUZZ_CHECK(icpp_pathmap_nfuncs(a) == icpp_pathmap_nfuncs(b), "functions");
    for (uint32_t i = 0; i < icpp_pathmap_nfuncs(a); i++) {
        const icpp_pm_func *x = icpp_pathmap_func(a, i), *y = icpp_pathmap_func(b, i);
        FUZZ_CHECK(x->module == y->module && x->addr == y->addr && !strcmp(x->name, y->name), "function %u", i);
    }
    FUZZ_CHECK(icpp_pathmap_nnodes(a) == icpp_pathmap_nnodes(b), "nodes");
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(a); i++) {
        const icpp_pm_node *x = icpp_pathmap_node(a, i), *y = icpp_pathmap_node(b, i);
        FUZZ_CHECK(x->parent == y->parent && x->func == y->func && x->depth == y->depth && x->count == y->count &&
                       x->nheights == y->nheights && x->nsites == y->nsites,
                   "node %u", i);
        for (uint32_t k = 0; k < x->nheights; k++)
            FUZZ_CHECK(x->heights[k].height == y->heights[k].height && x->heights[k].count == y->heights[k].count,
                       "node %u height %u", i, k);
        for (uint32_t k = 0; k < x->nsites; k++)
            FUZZ_CHECK(x->sites[k].module == y->sites[k].module && x->sites[k].addr == y->sites[k].addr &&
                           x->sites[k].count == y->sites[k].count,
                       "node %u site %u", i, k);
    }
}

/* The invariants the decoder promises (docs/pathmap-format.md). */
static void check_tree(const icpp_pathmap *pm)
{
    size_t nm = icpp_pathmap_nmodules(pm), nf = icpp_pathmap_nfuncs(pm), nn = icpp_pathmap_nnodes(pm);
    FUZZ_CHECK(nn >= 1, "no root");
    FUZZ_CHECK(!nm || icpp_pathmap_main(pm) < nm, "main module %u of %zu", icpp_pathmap_main(pm), nm);
    for (uint32_t i = 0; i < nf; i++)
        FUZZ_CHECK(icpp_pathmap_func(pm, i)->module < nm, "function %u: module out of range", i);
    uint32_t *path = malloc(sizeof *path * 64);
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        FUZZ_CHECK(n->parent < i, "node %u: parent %u does not precede it", i, n->parent);
        FUZZ_CHECK(n->func < nf, "node %u: function out of range", i);
        FUZZ_CHECK(n->depth == icpp_pathmap_node(pm, n->parent)->depth + 1, "node %u: depth", i);
        for (uint32_t k = 0; k < n->nsites; k++)
            FUZZ_CHECK(n->sites[k].module < nm, "node %u site %u: module out of range", i, k);
        for (uint32_t k = 0; k + 1 < n->nheights; k++)
            for (uint32_t j = k + 1; j < n->nheights; j++)
                FUZZ_CHECK(n->heights[k].height != n->heights[j].height, "node %u: height repeated", i);
        uint32_t d = icpp_pathmap_path(pm, i, path, 64);
        FUZZ_CHECK(d == n->depth, "node %u: path depth", i);
        if (d <= 64)
            FUZZ_CHECK(path[d - 1] == n->func, "node %u: path leaf", i);
    }
    free(path);
}

static void check_map(icpp_pathmap *pm)
{
    if (!pm)
        return;
    check_tree(pm);
    icpp_err err = {0};
    uint8_t *b1 = NULL, *b2 = NULL;
    size_t l1 = 0, l2 = 0;
    FUZZ_CHECK(icpp_pathmap_encode(pm, &b1, &l1, &err) == 0, "encode: %s", err.msg);
    icpp_pathmap *pm2 = icpp_pathmap_decode(b1, l1, &err);
    FUZZ_CHECK(pm2 != NULL, "re-encoded map does not decode: %s", err.msg);
    same_maps(pm, pm2);
    FUZZ_CHECK(icpp_pathmap_encode(pm2, &b2, &l2, &err) == 0, "encode: %s", err.msg);
    FUZZ_CHECK(l1 == l2 && !memcmp(b1, b2, l1), "encoding is not stable (%zu vs %zu bytes)", l1, l2);

    icpp_pm_stats st;
    FUZZ_CHECK(icpp_pathmap_stats(pm, &st, &err) == 0, "stats: %s", err.msg);
    FUZZ_CHECK(st.paths == icpp_pathmap_nnodes(pm) - 1 && st.unique_contexts <= st.contexts &&
                   st.cids <= st.contexts && st.unique_paths <= st.paths,
               "statistics out of range");

    icpp_pathmap *m = icpp_pathmap_new();
    FUZZ_CHECK(m != NULL, "new");
    FUZZ_CHECK(icpp_pathmap_merge(m, pm, &err) == 0, "merge into empty: %s", err.msg);
    FUZZ_CHECK(icpp_pathmap_nnodes(m) <= icpp_pathmap_nnodes(pm), "merge made nodes");
    check_tree(m);
    icpp_pathmap_free(m);

    free(b1);
    free(b2);
    icpp_pathmap_free(pm2);
    icpp_pathmap_free(pm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    icpp_err err;
    check_map(icpp_pathmap_decode(data, size, &err));
    if (size >= FUZZ_PATHMAP_OVERHEAD) {
        uint8_t *c = fuzz_dup(data, size);
        fuzz_fix_pathmap(c, size);
        check_map(icpp_pathmap_decode(c, size, &err));
        free(c);
    }
    return 0;
}
