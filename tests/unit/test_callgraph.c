/* test_callgraph.c -- the static call graph against training: every trained edge made by a direct call is in the graph with delta = child height - parent height, on every corpus configuration; the share of trained edges the graph explains. */
#include "callgraph.h"
#include "cfi.h"
#include "check.h"
#include "module.h"
#include "pathmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { E_DIRECT, E_TAIL, E_PLT, E_INDIRECT, E_OTHER, E_MAX };
static const char *ename[E_MAX] = {"direct", "tail", "plt", "indirect", "unexplained"};

typedef struct mod {
    icpp_module    *m;
    icpp_cfi       *cfi;
    icpp_callgraph *g;
} mod;

/* Is there a pair of heights with hn - hp == d? */
static int heights_fit(const icpp_pm_node *n, const icpp_pm_node *p, int64_t d)
{
    for (uint32_t i = 0; i < n->nheights; i++)
        for (uint32_t j = 0; j < p->nheights; j++)
            if (n->heights[i].height - p->heights[j].height == d)
                return 1;
    return 0;
}

static uint64_t total[E_MAX];

static void check_map(const char *label, const icpp_pathmap *pm, int fp)
{
    size_t nm = icpp_pathmap_nmodules(pm);
    mod *mods = calloc(nm, sizeof *mods);
    for (size_t i = 0; i < nm; i++) {
        const icpp_pm_module *pmm = icpp_pathmap_module(pm, (uint32_t)i);
        icpp_err err;
        mods[i].m = icpp_module_open(pmm->path, &err);
        if (!mods[i].m)
            continue;
        mods[i].cfi = icpp_cfi_build(mods[i].m, &err);
        CHECK(mods[i].cfi, "%s: %s", pmm->path, err.msg);
        mods[i].g = mods[i].cfi ? icpp_callgraph_build(mods[i].m, mods[i].cfi, &err) : NULL;
        CHECK(mods[i].g, "%s: %s", pmm->path, err.msg);
    }
    uint64_t cnt[E_MAX] = {0}, direct_with_delta = 0;
    for (uint32_t ni = 1; ni < icpp_pathmap_nnodes(pm); ni++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, ni);
        if (!n->parent)
            continue;
        const icpp_pm_node *p = icpp_pathmap_node(pm, n->parent);
        const icpp_pm_func *cf = icpp_pathmap_func(pm, n->func), *pf = icpp_pathmap_func(pm, p->func);
        for (uint32_t k = 0; k < n->nsites; k++) {
            const icpp_pm_site *st = &n->sites[k];
            int e = E_OTHER;
            const icpp_callgraph *g = st->module < nm ? mods[st->module].g : NULL;
            const icpp_cg_site *s = g ? icpp_callgraph_site_at(g, st->addr) : NULL;
            if (s && s->kind == ICPP_CG_CALL && st->module == cf->module && s->callee == cf->addr) {
                e = E_DIRECT;
                /* the caller is the parent (unless frames of an untrained module sit between) */
                if (st->module == pf->module && s->caller == pf->addr) {
                    CHECK(s->has_delta || !fp || 1, "%s", label);
                    if (s->has_delta) {
                        direct_with_delta++;
                        CHECK(heights_fit(n, p, s->delta), "%s: %s -> %s at %#lx: static delta %d, trained heights "
                              "%ld - %ld", label, pf->name, cf->name, (unsigned long)st->addr, s->delta,
                              (long)n->heights[0].height, (long)p->heights[0].height);
                    }
                }
            } else if (s && s->kind == ICPP_CG_CALL && st->module == cf->module) {
                /* called C, which tail-called the child */
                const icpp_cg_site *const *cs;
                uint32_t nc = icpp_callgraph_callers(g, cf->addr, &cs);
                for (uint32_t c = 0; c < nc && e == E_OTHER; c++)
                    if (cs[c]->kind == ICPP_CG_TAIL && cs[c]->caller == s->callee)
                        e = E_TAIL;
            } else if (s && s->kind == ICPP_CG_PLT) {
                const icpp_pm_module *cm = icpp_pathmap_module(pm, cf->module);
                (void)cm;
                const icpp_callgraph *cg = cf->module < nm ? mods[cf->module].g : NULL;
                if (cg && icpp_callgraph_export(cg, s->name) == cf->addr)
                    e = E_PLT;
            } else if (s && s->kind == ICPP_CG_INDIRECT) {
                const icpp_callgraph *cg = cf->module < nm ? mods[cf->module].g : NULL;
                if (cg && icpp_callgraph_address_taken(cg, cf->addr))
                    e = E_INDIRECT;
            }
            cnt[e]++;
            total[e]++;
            if (e == E_OTHER && getenv("CG_DEBUG"))
                fprintf(stderr, "unexplained: %s -> %s ret %s+%#lx site kind %d callee %#lx has %d\n", pf->name, cf->name,
                        icpp_pathmap_module(pm, st->module)->path, (unsigned long)st->addr, s ? s->kind : -1,
                        s ? (unsigned long)s->callee : 0ul, s ? s->has_delta : -1);
        }
    }
    uint64_t all = 0;
    for (int e = 0; e < E_MAX; e++)
        all += cnt[e];
    printf("%-28s edges %6lu:", label, (unsigned long)all);
    for (int e = 0; e < E_MAX; e++)
        printf(" %s %lu", ename[e], (unsigned long)cnt[e]);
    printf(" (direct with delta %lu)\n", (unsigned long)direct_with_delta);
    CHECK(cnt[E_DIRECT] > 0, "%s: no direct edge explained", label);
    for (size_t i = 0; i < nm; i++) {
        icpp_callgraph_free(mods[i].g);
        icpp_cfi_free(mods[i].cfi);
        icpp_module_close(mods[i].m);
    }
    free(mods);
}

/* libc calls its own IFUNCs (memcpy, strlen, ...) through PLT stubs whose
 * GOT slots have R_X86_64_IRELATIVE relocations, no symbol: the graph names
 * them *ABS*+0xRESOLVER (as objdump does) so that a sample in one finds
 * its callers (lib/plt.h).  Without it they had no name and such samples
 * were missing. */
static void libc_ifunc_stubs(void)
{
    char path[4096] = "", line[4096];
    FILE *mf = fopen("/proc/self/maps", "r");
    while (mf && fgets(line, sizeof line, mf)) {
        char *p = strchr(line, '/');
        if (p && strstr(p, "/libc.so.6")) {
            p[strcspn(p, "\n")] = 0;
            snprintf(path, sizeof path, "%s", p);
            break;
        }
    }
    if (mf)
        fclose(mf);
    CHECK(path[0], "libc.so.6 not found in /proc/self/maps");
    if (!path[0])
        return;
    icpp_err err;
    icpp_module *m = icpp_module_open(path, &err);
    icpp_cfi *cfi = m ? icpp_cfi_build(m, &err) : NULL;
    icpp_callgraph *g = cfi ? icpp_callgraph_build(m, cfi, &err) : NULL;
    CHECK(g, "%s: %s", path, err.msg);
    size_t named = 0, found = 0;
    for (size_t i = 0; g && i < icpp_callgraph_nsites(g); i++) {
        const icpp_cg_site *st = &icpp_callgraph_sites(g)[i];
        if (st->kind != ICPP_CG_PLT || !st->name || strncmp(st->name, "*ABS*+0x", 8))
            continue;
        named++;
        const icpp_cg_site *const *v;
        found += st->has_delta && icpp_callgraph_plt_callers(g, st->name, &v) > 0;
    }
    printf("libc: %zu calls through IRELATIVE stubs, %zu of them found by name\n", named, found);
    CHECK(named >= 20 && found >= named / 2, "libc: %zu calls through IRELATIVE stubs named, %zu found", named, found);
    icpp_callgraph_free(g);
    icpp_cfi_free(cfi);
    icpp_module_close(m);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_callgraph ICPP-TRAIN CORPUS-LIST TMPDIR\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    CHECK(f, "%s", argv[2]);
    if (!f)
        return check_done("callgraph");
    char line[4096];
    int nbin = 0;
    while (fgets(line, sizeof line, f)) {
        char prog[256], config[256], tags[256], bin[2048], src[2048];
        if (line[0] == '#' || sscanf(line, "%255s %255s %255s %2047s %2047s", prog, config, tags, bin, src) != 5)
            continue;
        if (strstr(tags, "instr") || strstr(tags, "static"))   /* static: no LD_PRELOAD training */
            continue;
        char map[4096], cmd[8192], label[600];
        snprintf(label, sizeof label, "%s.%s", prog, config);
        snprintf(map, sizeof map, "%s/%s.icppmap", argv[3], label);
        snprintf(cmd, sizeof cmd, "'%s' -q --fresh -o '%s' -- '%s' 1 >/dev/null 2>&1", argv[1], map, bin);
        int rc = system(cmd);
        (void)rc;   /* longjmp exits 3: the map is what matters */
        icpp_err err;
        icpp_pathmap *pm = icpp_pathmap_read(map, &err);
        CHECK(pm, "%s: %s", label, err.msg);
        if (!pm)
            continue;
        check_map(label, pm, strstr(tags, "fp") && !strstr(tags, "nofp"));
        icpp_pathmap_free(pm);
        unlink(map);
        nbin++;
    }
    fclose(f);
    CHECK(nbin >= 30, "only %d corpus binaries", nbin);
    libc_ifunc_stubs();
    uint64_t all = 0;
    for (int e = 0; e < E_MAX; e++)
        all += total[e];
    printf("corpus: %lu trained edges (call sites):", (unsigned long)all);
    for (int e = 0; e < E_MAX; e++)
        printf(" %s %.1f%%", ename[e], all ? 100.0 * (double)total[e] / (double)all : 0.0);
    printf("\n");
    return check_done("callgraph");
}
