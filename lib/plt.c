/* plt.c -- samples in PLT stubs: charged to the calling context, found from the call sites of the stub. */
#include "plt.h"

#include "callgraph.h"
#include "cfi.h"
#include "module.h"
#include "vec.h"

#include <stdlib.h>
#include <string.h>

/* A module's call graph, on the module opened here: icpp-resolve replays a
 * recording several times (a replay each), and a graph must not outlive the
 * replay whose module it reads -- so graphs are kept by build-id, on their
 * own module and CFI table. */
typedef struct plt_graph {
    icpp_build_id   bid;
    char           *path;       /* the module's file: its identity when it has no build-id */
    icpp_module    *m;
    icpp_cfi       *cfi;
    icpp_callgraph *g;          /* NULL: could not be built */
} plt_graph;

/* A candidate list (scratch, reused from sample to sample). */
typedef struct cand_list {
    icpp_cand *v;
    size_t     n, cap;
} cand_list;

struct icpp_plt {
    plt_graph *graphs;
    size_t     ngraphs, capgraphs;
    cand_list  all;             /* the last sample's candidates: every call site's contexts */
    cand_list  conf;            /* ... those with a trained call through the site at the height */
    const icpp_pathmap *kids_pm;    /* the map kid_first/kids index (built on first use) */
    size_t     kids_nn;         /* its nodes then (completion adds more later: not indexed) */
    uint32_t  *kid_first;       /* node i's children: kids[kid_first[i] .. kid_first[i+1]) */
    uint32_t  *kids;
};

icpp_plt *icpp_plt_new(void)
{
    return calloc(1, sizeof(icpp_plt));
}

void icpp_plt_free(icpp_plt *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->ngraphs; i++) {
        icpp_callgraph_free(p->graphs[i].g);     /* before the module it reads */
        icpp_cfi_free(p->graphs[i].cfi);
        icpp_module_close(p->graphs[i].m);
        free(p->graphs[i].path);
    }
    free(p->graphs);
    free(p->all.v);
    free(p->conf.v);
    free(p->kid_first);
    free(p->kids);
    free(p);
}

static icpp_callgraph *graph_of(icpp_plt *p, const icpp_replay *rp, uint32_t mi)
{
    const icpp_rmodule *rm = icpp_replay_module(rp, mi);
    if (!rm || !rm->mod)
        return NULL;
    const icpp_build_id *bid = icpp_module_build_id(rm->mod);
    for (size_t i = 0; i < p->ngraphs; i++)
        if (icpp_build_id_match(&p->graphs[i].bid, p->graphs[i].path, bid, rm->path))
            return p->graphs[i].g;
    if (icpp_vec_reserve((void **)&p->graphs, &p->capgraphs, p->ngraphs + 1, sizeof *p->graphs, 8) < 0)
        return NULL;
    char *path = strdup(rm->path);
    if (!path)
        return NULL;
    plt_graph *pg = &p->graphs[p->ngraphs++];
    memset(pg, 0, sizeof *pg);
    pg->bid = *bid;
    pg->path = path;
    pg->m = icpp_module_open(rm->path, NULL);
    if (pg->m && !icpp_build_id_match(icpp_module_build_id(pg->m), rm->path, bid, rm->path)) {
        icpp_module_close(pg->m);       /* the file changed since the replay opened it */
        pg->m = NULL;
    }
    pg->cfi = pg->m ? icpp_cfi_build(pg->m, NULL) : NULL;
    pg->g = pg->cfi ? icpp_callgraph_build(pg->m, pg->cfi, NULL) : NULL;
    return pg->g;
}

/* Add node (count c) to list l unless it is there (then add the counts). */
static int add(cand_list *l, uint32_t node, uint64_t count, uint64_t learned)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].node == node) {
            l->v[i].count += count;
            l->v[i].learned += learned;
            return 0;
        }
    if (icpp_vec_reserve((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v, 16) < 0)
        return -1;
    l->v[l->n++] = (icpp_cand){node, count, learned};
    return 0;
}

/* The children of every node of pm (the map keeps parents only), built once:
 * counted at first[parent + 2], summed, then placed with first[parent + 1]
 * as the cursor, which leaves first[i] at node i's first child. */
static int index_kids(icpp_plt *p, const icpp_pathmap *pm)
{
    if (p->kids_pm == pm)
        return 0;
    size_t nn = icpp_pathmap_nnodes(pm);
    uint32_t *first = calloc(nn + 2, sizeof *first), *kids = malloc((nn ? nn : 1) * sizeof *kids);
    if (!first || !kids) {
        free(first);
        free(kids);
        return -1;
    }
    for (size_t i = 1; i < nn; i++)
        first[icpp_pathmap_node(pm, (uint32_t)i)->parent + 2]++;
    for (size_t i = 2; i < nn + 2; i++)
        first[i] += first[i - 1];
    for (size_t i = 1; i < nn; i++)
        kids[first[icpp_pathmap_node(pm, (uint32_t)i)->parent + 1]++] = (uint32_t)i;
    free(p->kid_first);
    free(p->kids);
    p->kid_first = first;
    p->kids = kids;
    p->kids_pm = pm;
    p->kids_nn = nn;
    return 0;
}

/* The trained call of context `node` through the call site returning to
 * (module, ret) that entered its callee at `height`: the callee's node (its
 * training count at that height in *count), or 0. */
static uint32_t call_through(const icpp_plt *p, const icpp_pathmap *pm, uint32_t node, uint32_t module,
                             uint64_t ret, int64_t height, uint64_t *count)
{
    if (node >= p->kids_nn)
        return 0;       /* added after the index (completion): no training call */
    for (uint32_t k = p->kid_first[node]; k < p->kid_first[node + 1]; k++) {
        const icpp_pm_node *c = icpp_pathmap_node(pm, p->kids[k]);
        int site = 0;
        for (uint32_t j = 0; j < c->nsites && !site; j++)
            site = c->sites[j].module == module && c->sites[j].addr == ret;
        if (!site)
            continue;
        for (uint32_t j = 0; j < c->nheights; j++)
            if (c->heights[j].height == height && c->heights[j].count) {
                *count = c->heights[j].count;
                return p->kids[k];
            }
    }
    return 0;
}

uint32_t icpp_plt_contexts(icpp_plt *p, icpp_cidx *x, const icpp_pathmap *pm, const icpp_replay *rp,
                           const icpp_rsample *s, const icpp_cand **out, int64_t *func)
{
    *out = NULL;
    *func = -1;
    p->all.n = p->conf.n = 0;
    icpp_callgraph *g = graph_of(p, rp, (uint32_t)s->module);
    const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)s->module);
    if (!g || !rm)
        return 0;
    /* The stub holding the pc: PLT entries are 16 bytes, .plt.got's 8, so
     * the 8-byte boundary first: in .plt.got the 16-byte one is the stub
     * before it (another function's); in a 16-byte entry the 8-byte one is
     * its middle, where no stub starts. */
    uint64_t pc = s->addr;
    const char *name = icpp_callgraph_plt_name(g, pc & ~(uint64_t)7);
    if (!name)
        name = icpp_callgraph_plt_name(g, pc & ~(uint64_t)15);
    if (!name)
        return 0;
    int kids = index_kids(p, pm) == 0;
    int novel = 0;          /* a callee through the stub that this run calls in untrained contexts */
    uint32_t confirmed = 0;
    const icpp_cg_site *const *sites;
    uint32_t n = icpp_callgraph_plt_callers(g, name, &sites);
    for (uint32_t i = 0; i < n; i++) {
        const icpp_cg_site *site = sites[i];
        uint8_t op;
        /* a call/jmp rel32 into a stub; not `call *sym@GOTPCREL(%rip)` (-fno-plt: no stub) */
        if (!site->has_delta || icpp_module_read(rm->mod, site->ret - 5, &op, 1) < 0 || (op != 0xe8 && op != 0xe9))
            continue;
        int64_t f = icpp_cidx_func(x, (uint32_t)s->module, &rm->build_id, site->caller);
        if (f < 0)
            continue;
        uint32_t fmod = icpp_pathmap_func(pm, (uint32_t)f)->module;
        const icpp_cand *c;
        uint32_t nc = icpp_cidx_lookup(x, (uint32_t)f, s->height - site->delta, &c);
        for (uint32_t k = 0; k < nc; k++) {
            uint32_t node = site->tail ? icpp_pathmap_node(pm, c[k].node)->parent : c[k].node;
            if (node && add(&p->all, node, c[k].count, c[k].learned) < 0)
                return 0;
            /* a tail jmp's callee replaced F: training filed it under F's
             * caller, so such a context is kept, never confirmed */
            uint64_t cnt = 0;
            uint32_t callee = !site->tail && kids ? call_through(p, pm, node, fmod, site->ret, s->height, &cnt) : 0;
            if (callee) {
                confirmed++;
                novel |= icpp_cidx_novel(x, icpp_pathmap_node(pm, callee)->func);
            }
            if (node && (callee || site->tail) && add(&p->conf, node, callee ? cnt : c[k].count, c[k].learned) < 0)
                return 0;
        }
    }
    /* Where training saw the call through the stub entering its callee at
     * this height from some of the contexts, those are the candidates, as
     * for a sample at the callee's first instruction (docs/resolve.md) --
     * unless learning found the callee in contexts training lacked. */
    const cand_list *l = confirmed && !novel ? &p->conf : &p->all;
    if (!l->n)
        return 0;
    *out = l->v;
    *func = icpp_pathmap_node(pm, l->v[0].node)->func;
    return (uint32_t)l->n;
}
