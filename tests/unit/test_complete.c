/* test_complete.c -- completion against truth: train each corpus binary, take paths out of the map, and ask the completer for their (function, height): a completion reported unique must be the path taken out; alternatives for known CIDs. */
#include "check.h"
#include "cidx.h"
#include "complete.h"
#include "pathmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXD 4096

/* pm without the nodes marked in drop[] (and their subtrees). */
static icpp_pathmap *without(const icpp_pathmap *pm, const uint8_t *drop)
{
    icpp_pathmap *q = icpp_pathmap_new();
    for (uint32_t m = 0; m < icpp_pathmap_nmodules(pm); m++) {
        const icpp_pm_module *pmm = icpp_pathmap_module(pm, m);
        uint32_t idx;
        icpp_pathmap_add_module(q, pmm->path, &pmm->build_id, pmm->kind, &idx);
    }
    icpp_pathmap_set_main(q, icpp_pathmap_main(pm));
    for (uint32_t f = 0; f < icpp_pathmap_nfuncs(pm); f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(pm, f);
        uint32_t idx;
        icpp_pathmap_add_func(q, pf->module, pf->addr, pf->name, &idx);
    }
    size_t nn = icpp_pathmap_nnodes(pm);
    int64_t *to = malloc(nn * sizeof *to);
    to[0] = 0;
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        to[i] = -1;
        if (drop[i] || to[n->parent] < 0)
            continue;
        uint32_t k;
        icpp_pathmap_child(q, (uint32_t)to[n->parent], n->func, &k);
        icpp_pathmap_add_count(q, k, n->count);
        for (uint32_t h = 0; h < n->nheights; h++)
            icpp_pathmap_add_height(q, k, n->heights[h].height, n->heights[h].count);
        for (uint32_t s = 0; s < n->nsites; s++)
            icpp_pathmap_add_site(q, k, n->sites[s].module, n->sites[s].addr, n->sites[s].count);
        to[i] = k;
    }
    free(to);
    return q;
}

/* Same path?  Compared as (module, address) sequences; funcs index the same
 * table in both maps except for functions the completer added. */
static int same_path(const icpp_pathmap *a, uint32_t na, const icpp_pathmap *b, uint32_t nb)
{
    uint32_t pa[MAXD], pb[MAXD];
    uint32_t da = icpp_pathmap_path(a, na, pa, MAXD), db = icpp_pathmap_path(b, nb, pb, MAXD);
    if (da != db || da > MAXD)
        return 0;
    for (uint32_t i = 0; i < da; i++) {
        const icpp_pm_func *fa = icpp_pathmap_func(a, pa[i]), *fb = icpp_pathmap_func(b, pb[i]);
        if (fa->module != fb->module || fa->addr != fb->addr)
            return 0;
    }
    return 1;
}

/* Did the anchor of inferred node `node` (its first ancestor that was in q
 * before completion) lose a path sharing one of its CIDs when the map was
 * pruned?  Then a unique completion is unique given a wrong anchor. */
static int anchor_lost(const icpp_cidx *xo, const icpp_pathmap *q, const icpp_cidx *xq, uint32_t node, size_t before)
{
    while (node >= before)
        node = icpp_pathmap_node(q, node)->parent;
    const icpp_pm_node *a = icpp_pathmap_node(q, node);
    const icpp_cand *cd;
    for (uint32_t k = 0; node && k < a->nheights; k++)
        if (icpp_cidx_lookup(xo, a->func, a->heights[k].height, &cd) > icpp_cidx_lookup(xq, a->func, a->heights[k].height, &cd))
            return 1;
    return 0;
}

static uint64_t T_shared, T_shared_found, T_shared_missed, T_anchor_lost, T_missing, T_found, T_unique_ok, T_unique_bad, T_amb_ok, T_amb_bad, T_trunc, T_alt_q, T_alt;

static void run(const char *label, const icpp_pathmap *pm, unsigned seed)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    uint8_t *drop = calloc(nn, 1);
    /* every 5th node below the root level (not roots: nothing to join) */
    for (uint32_t i = 1; i < nn; i++)
        if (icpp_pathmap_node(pm, i)->parent && (i * 2654435761u + seed) % 5 == 0)
            drop[i] = 1;
    icpp_pathmap *q = without(pm, drop);
    icpp_err err;
    icpp_cidx *x = icpp_cidx_build(q, &err);
    CHECK(x, "%s", err.msg);
    icpp_cidx *xo = icpp_cidx_build(pm, &err);     /* the unpruned map's (same function table) */
    CHECK(xo, "%s", err.msg);
    size_t before = icpp_pathmap_nnodes(q);
    icpp_cpl_opts o;
    icpp_cpl_opts_default(&o);
    if (getenv("ANY_INDIRECT"))
        o.any_indirect = atoi(getenv("ANY_INDIRECT"));
    icpp_completer *c = x ? icpp_completer_new(q, x, &o, &err) : NULL;
    CHECK(c, "%s", err.msg);
    if (!c) {
        icpp_cidx_free(xo);
        icpp_cidx_free(x);
        icpp_pathmap_free(q);
        free(drop);
        return;
    }
    uint64_t miss = 0, found = 0, uok = 0, ubad = 0, aok = 0, abad = 0;
    for (uint32_t i = 1; i < nn; i++) {
        if (!drop[i])
            continue;
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        const icpp_pm_func *f = icpp_pathmap_func(pm, n->func);
        for (uint32_t k = 0; k < n->nheights; k++) {
            const icpp_cand *cd;
            if (icpp_cidx_lookup(x, n->func, n->heights[k].height, &cd)) {
                /* another path still has the CID: the path taken out is an
                 * alternative part 3 must hear of (unless a bound hid it) */
                int trunc = 0;
                int a = icpp_complete_alternatives(c, f->module, f->addr, n->heights[k].height, 0, &trunc);
                T_shared++;
                T_shared_found += a > 0;
                T_shared_missed += a == 0 && !trunc;
                continue;
            }
            miss++;
            int trunc = 0;
            int nc = icpp_complete(c, f->module, f->addr, n->heights[k].height, &cd, &trunc);
            CHECK(nc >= 0, "%s: out of memory", label);
            if (nc <= 0)
                continue;
            found++;
            int hit = 0;
            for (int j = 0; j < nc; j++)
                hit |= same_path(pm, i, q, cd[j].node);
            if (nc == 1 && !trunc && !hit && anchor_lost(xo, q, x, cd[0].node, before)) {
                T_anchor_lost++;
            } else if (nc == 1 && !trunc) {
                uok += hit;
                ubad += !hit;
                if (!hit) {
                    uint32_t p[MAXD];
                    uint32_t d = icpp_pathmap_path(q, cd[0].node, p, MAXD), dt;
                    char a[4096] = "", b[4096] = "";
                    for (uint32_t z = 0; z < d && z < MAXD; z++)
                        snprintf(a + strlen(a), sizeof a - strlen(a), "%s;", icpp_pathmap_func(q, p[z])->name);
                    dt = icpp_pathmap_path(pm, i, p, MAXD);
                    for (uint32_t z = 0; z < dt && z < MAXD; z++)
                        snprintf(b + strlen(b), sizeof b - strlen(b), "%s;", icpp_pathmap_func(pm, p[z])->name);
                    fprintf(stderr, "%s: height %ld: inferred %s truth %s\n", label, (long)n->heights[k].height, a, b);
                }
            } else {
                aok += hit;
                abad += !hit;
            }
            T_trunc += trunc;
        }
    }
    /* Alternatives of known CIDs: the paths still in the map explain their
     * own CIDs, so every alternative is a path the map lacks. */
    uint64_t altq = 0, alt = 0;
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(q) && altq < 200; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(q, i);
        if (!n->parent || !n->nheights)
            continue;
        const icpp_pm_func *f = icpp_pathmap_func(q, n->func);
        int trunc;
        int a = icpp_complete_alternatives(c, f->module, f->addr, n->heights[0].height, 0, &trunc);
        CHECK(a >= 0, "%s: alternatives failed", label);
        altq++;
        alt += a > 0;
    }
    icpp_cpl_stats st;
    icpp_completer_get_stats(c, &st);
    printf("%-26s missing %4lu completed %4lu: unique right %4lu wrong %lu, ambiguous with truth %3lu without %3lu; "
           "alternatives for %lu of %lu known CIDs; search max %.0f us mean %.1f us, graphs %.0f ms\n",
           label, (unsigned long)miss, (unsigned long)found, (unsigned long)uok, (unsigned long)ubad,
           (unsigned long)aok, (unsigned long)abad, (unsigned long)alt, (unsigned long)altq, st.max_us,
           st.queries ? st.total_us / (double)st.queries : 0.0, st.graph_ms);
    T_missing += miss, T_found += found, T_unique_ok += uok, T_unique_bad += ubad, T_amb_ok += aok, T_amb_bad += abad;
    T_alt_q += altq, T_alt += alt;
    icpp_completer_free(c);
    icpp_cidx_free(x);
    icpp_cidx_free(xo);
    icpp_pathmap_free(q);
    free(drop);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_complete ICPP-TRAIN CORPUS-LIST TMPDIR\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    CHECK(f, "%s", argv[2]);
    if (!f)
        return check_done("complete");
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char prog[256], config[256], tags[256], bin[2048], src[2048];
        if (line[0] == '#' || sscanf(line, "%255s %255s %255s %2047s %2047s", prog, config, tags, bin, src) != 5)
            continue;
        if (strstr(tags, "instr") || strstr(tags, "static"))   /* static: no LD_PRELOAD training */
            continue;
        char map[4096], cmd[8192], label[600];
        snprintf(label, sizeof label, "%s.%s", prog, config);
        snprintf(map, sizeof map, "%s/%s.complete.icppmap", argv[3], label);
        snprintf(cmd, sizeof cmd, "'%s' -q --fresh -o '%s' -- '%s' 1 >/dev/null 2>&1", argv[1], map, bin);
        int rc = system(cmd);
        (void)rc;
        icpp_err err;
        icpp_pathmap *pm = icpp_pathmap_read(map, &err);
        CHECK(pm, "%s: %s", label, err.msg);
        if (!pm)
            continue;
        for (unsigned seed = 0; seed < 2; seed++)
            run(label, pm, seed);
        icpp_pathmap_free(pm);
        unlink(map);
    }
    fclose(f);
    printf("corpus: %lu missing CIDs, %lu completed; unique: %lu right, %lu wrong; ambiguous: %lu with the truth, %lu "
           "without; %lu truncated; alternatives for %lu of %lu known CIDs\n",
           (unsigned long)T_missing, (unsigned long)T_found, (unsigned long)T_unique_ok, (unsigned long)T_unique_bad,
           (unsigned long)T_amb_ok, (unsigned long)T_amb_bad, (unsigned long)T_trunc, (unsigned long)T_alt,
           (unsigned long)T_alt_q);
    CHECK(T_unique_ok > 100, "only %lu unique completions", (unsigned long)T_unique_ok);
    /* A unique completion is unique given its anchor: when pruning took away
     * one of two paths that shared the anchor's CID, the anchor itself may be
     * the wrong one -- the online case part 3 judges (seen: exit ->
     * __do_global_dtors_aux vs _fini -> __cxa_finalize).  Those are counted
     * apart; every other unique completion must be the true path. */
    printf("known CIDs that lost a path in pruning: %lu, alternatives found for %lu, none found by an unbounded "
           "search for %lu\n", (unsigned long)T_shared, (unsigned long)T_shared_found, (unsigned long)T_shared_missed);
    /* Seen: 37 found and 7 missed in one environment, 7 and 4 in another
     * (maps differ with the environment): a missed one came through an
     * indirect call from a function the pruning removed, or through ld.so,
     * which the search cannot see.  The query is sound only in what it finds. */
    CHECK(T_shared == 0 || T_shared_found > 0, "no alternative found for any of %lu CIDs that lost a path",
          (unsigned long)T_shared);
    printf("unique completions through an anchor whose CID lost a path in pruning: %lu\n", (unsigned long)T_anchor_lost);
    CHECK(T_unique_bad == 0, "%lu of %lu unique completions are not the true path", (unsigned long)T_unique_bad,
          (unsigned long)(T_unique_ok + T_unique_bad));
    /* At most a tenth: 11 of ~180 under meson (MALLOC_PERTURB_ adds malloc's
     * memset paths), 1-3 without.  It was a twentieth while the maps held the
     * agent's own start-up calls (qsort's merge sort recursion: ~60 paths a
     * map, half the unique completions); the lost anchors are the programs'
     * own (the exit handlers above), as many as before. */
    CHECK(T_anchor_lost * 10 <= T_unique_ok, "%lu unique completions through a lost anchor", (unsigned long)T_anchor_lost);
    return check_done("complete");
}
