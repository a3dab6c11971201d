/* plt.c -- samples in PLT stubs: charged to the calling context, found from the call sites of the stub. */
#include "plt.h"

#include "callgraph.h"
#include "cfi.h"
#include "module.h"

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

struct icpp_plt {
    plt_graph *graphs;
    size_t     ngraphs, capgraphs;
    icpp_cand *cands;           /* scratch: the last sample's candidates */
    size_t     ncands, capcands;
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
    free(p->cands);
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
    if (p->ngraphs == p->capgraphs) {
        size_t n = p->capgraphs ? 2 * p->capgraphs : 8;
        plt_graph *ng = realloc(p->graphs, n * sizeof *ng);
        if (!ng)
            return NULL;
        p->graphs = ng;
        p->capgraphs = n;
    }
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

/* Add node (count c) to the candidates unless it is there. */
static int add(icpp_plt *p, uint32_t node, uint64_t count, uint64_t learned)
{
    for (size_t i = 0; i < p->ncands; i++)
        if (p->cands[i].node == node) {
            p->cands[i].count += count;
            p->cands[i].learned += learned;
            return 0;
        }
    if (p->ncands == p->capcands) {
        size_t n = p->capcands ? 2 * p->capcands : 16;
        icpp_cand *nc = realloc(p->cands, n * sizeof *nc);
        if (!nc)
            return -1;
        p->cands = nc;
        p->capcands = n;
    }
    p->cands[p->ncands++] = (icpp_cand){node, count, learned};
    return 0;
}

uint32_t icpp_plt_contexts(icpp_plt *p, icpp_cidx *x, const icpp_pathmap *pm, const icpp_replay *rp,
                           const icpp_rsample *s, const icpp_cand **out, int64_t *func)
{
    *out = NULL;
    *func = -1;
    p->ncands = 0;
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
        const icpp_cand *c;
        uint32_t nc = icpp_cidx_lookup(x, (uint32_t)f, s->height - site->delta, &c);
        for (uint32_t k = 0; k < nc; k++) {
            uint32_t node = site->tail ? icpp_pathmap_node(pm, c[k].node)->parent : c[k].node;
            if (node && add(p, node, c[k].count, c[k].learned) < 0)
                return 0;
        }
    }
    if (!p->ncands)
        return 0;
    *out = p->cands;
    *func = icpp_pathmap_node(pm, p->cands[0].node)->func;
    return (uint32_t)p->ncands;
}
