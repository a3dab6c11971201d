/* craftmap.c -- test helper: copy a path map with hostile changes (escape bytes in names, a module path, a deep chain). */
#include "pathmap.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage =
    "usage: craftmap IN OUT [--suffix STR] [--module-path I PATH] [--chain FUNC HEIGHT N] [--height FUNC H]...\n"
    "  --suffix STR            append STR (any bytes: ESC, newline) to every function name\n"
    "  --module-path I PATH    module I's path becomes PATH\n"
    "  --chain FUNC HEIGHT N   under a node of FUNC entered at HEIGHT, N more calls of FUNC,\n"
    "                          each at HEIGHT: N+1 paths share one context id\n"
    "  --height FUNC H         every node of FUNC has the one height H (any int64: extreme heights)\n";

int main(int argc, char **argv)
{
    if (argc < 3) {
        fputs(usage, stderr);
        return 2;
    }
    const char *suffix = "", *mpath = NULL, *chain_fn = NULL;
    long mi = -1, n_chain = 0;
    int64_t chain_h = 0;
    const char *hfn[16];
    int64_t hval[16];
    int nh = 0;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--suffix") && i + 1 < argc) {
            suffix = argv[++i];
        } else if (!strcmp(argv[i], "--module-path") && i + 2 < argc) {
            mi = atol(argv[++i]);
            mpath = argv[++i];
        } else if (!strcmp(argv[i], "--chain") && i + 3 < argc) {
            chain_fn = argv[++i];
            chain_h = strtoll(argv[++i], NULL, 0);
            n_chain = atol(argv[++i]);
        } else if (!strcmp(argv[i], "--height") && i + 2 < argc && nh < 16) {
            hfn[nh] = argv[++i];
            hval[nh++] = strtoll(argv[++i], NULL, 0);
        } else {
            fputs(usage, stderr);
            return 2;
        }
    }
    icpp_err err;
    icpp_pathmap *in = icpp_pathmap_read(argv[1], &err);
    if (!in) {
        fprintf(stderr, "craftmap: %s\n", err.msg);
        return 1;
    }
    icpp_pathmap *out = icpp_pathmap_new();
    for (uint32_t m = 0; m < icpp_pathmap_nmodules(in); m++) {
        const icpp_pm_module *pm = icpp_pathmap_module(in, m);
        uint32_t idx;
        if (icpp_pathmap_add_module(out, (long)m == mi ? mpath : pm->path, &pm->build_id, pm->kind, &idx) < 0)
            return 1;
    }
    icpp_pathmap_set_main(out, icpp_pathmap_main(in));
    uint32_t chain_func = UINT32_MAX;
    for (uint32_t f = 0; f < icpp_pathmap_nfuncs(in); f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(in, f);
        char *name = malloc(strlen(pf->name) + strlen(suffix) + 1);
        strcpy(name, pf->name);
        strcat(name, suffix);
        uint32_t idx;
        if (icpp_pathmap_add_func(out, pf->module, pf->addr, name, &idx) < 0)
            return 1;
        free(name);
        if (chain_fn && !strcmp(pf->name, chain_fn))
            chain_func = f;
    }
    size_t nn = icpp_pathmap_nnodes(in);
    uint32_t *map = calloc(nn, sizeof *map), anchor = 0;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(in, i);
        if (icpp_pathmap_child(out, map[n->parent], n->func, &map[i]) < 0)
            return 1;
        icpp_pathmap_add_count(out, map[i], n->count);
        const char *fname = icpp_pathmap_func(in, n->func)->name;
        int set = -1;
        for (int k = 0; k < nh; k++)
            if (!strcmp(fname, hfn[k]))
                set = k;
        if (set >= 0) {
            uint64_t cnt = 0;
            for (uint32_t k = 0; k < n->nheights; k++)
                cnt += n->heights[k].count;
            icpp_pathmap_add_height(out, map[i], hval[set], cnt ? cnt : 1);
        }
        for (uint32_t k = 0; set < 0 && k < n->nheights; k++) {
            icpp_pathmap_add_height(out, map[i], n->heights[k].height, n->heights[k].count);
            if (n->func == chain_func && n->heights[k].height == chain_h && !anchor)
                anchor = map[i];
        }
        for (uint32_t k = 0; k < n->nsites; k++)
            icpp_pathmap_add_site(out, map[i], n->sites[k].module, n->sites[k].addr, n->sites[k].count);
    }
    if (chain_fn && !anchor) {
        fprintf(stderr, "craftmap: no node of %s at height %" PRId64 "\n", chain_fn, chain_h);
        return 1;
    }
    for (long k = 0; k < n_chain; k++) {
        if (icpp_pathmap_child(out, anchor, chain_func, &anchor) < 0)
            return 1;
        icpp_pathmap_add_count(out, anchor, 1);
        icpp_pathmap_add_height(out, anchor, chain_h, 1);
    }
    const char *v = icpp_pathmap_meta(in, "program");
    if (v)
        icpp_pathmap_set_meta(out, "program", v);
    if (icpp_pathmap_write(out, argv[2], &err) < 0) {
        fprintf(stderr, "craftmap: %s\n", err.msg);
        return 1;
    }
    icpp_pathmap_free(in);
    icpp_pathmap_free(out);
    free(map);
    return 0;
}
