/* report.c -- icpp-rewrite's report on stdout (what changed, what was refused and why, what stays ambiguous) and --explain's listings. */
#include "report.h"

#include "escape.h"
#include "wrap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name from PROG or the map, escaped for the terminal (lib/escape.h); four
 * rotating buffers, so up to four per printf. */
static const char *esc(const char *s)
{
    static char b[4][1024];
    static int i;
    i = (i + 1) % 4;
    return icpp_escape(s, b[i], sizeof b[i]);
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void print_stats_pair(const icpp_pm_stats *a, const icpp_pm_stats *b)
{
    printf("%-28s %12s %12s\n", "", "before", "after");
    printf("%-28s %11.1f%% %11.1f%%   (%zu -> %zu of %zu)\n", "unique CIDs, by paths", pct(a->unique_paths, a->paths),
           pct(b->unique_paths, b->paths), a->unique_paths, b->unique_paths, a->paths);
    printf("%-28s %11.1f%% %11.1f%%   (%zu -> %zu of %zu)\n", "unique CIDs, by contexts",
           pct(a->unique_contexts, a->contexts), pct(b->unique_contexts, b->contexts), a->unique_contexts,
           b->unique_contexts, a->contexts);
    printf("%-28s %11.1f%% %11.1f%%   (%" PRIu64 " -> %" PRIu64 " of %" PRIu64 ")\n",
           "unique CIDs, by call weight", pct(a->unique_calls, a->calls), pct(b->unique_calls, b->calls),
           a->unique_calls, b->unique_calls, a->calls);
    printf("ambiguity (contexts by how many paths share their CID; calls in brackets):\n");
    for (int k = 0; k < ICPP_AMBIG_BUCKETS; k++)
        printf("  %-8s %10zu [%12" PRIu64 "]  ->  %10zu [%12" PRIu64 "]\n", icpp_pathmap_bucket_name(k),
               a->hist_paths[k], a->hist_calls[k], b->hist_paths[k], b->hist_calls[k]);
}

/* Why no call site on an inseparable group's paths separated them: for
 * each path, its own call site nearest the leaf (the first main-module one
 * from the leaf up) and its verdict -- not wrappable and why, in a class of
 * sites with one that is not, wrappable but not chosen by the search, or
 * wrapped -- each site once (paths often share it). */
static void print_wrap_why(const icpp_pathmap *pm, const rw_run *r, const rw_amb_group *G)
{
    const rw_site *shown[4] = {0};
    for (uint32_t j = 0; j < G->nnodes && j < 4; j++) {
        for (uint32_t nd = G->nodes[j]; nd; nd = icpp_pathmap_node(pm, nd)->parent) {
            const icpp_pm_node *n = icpp_pathmap_node(pm, nd);
            int32_t k = r->sites.node_cls ? r->sites.node_cls[nd] : -1;
            if (k < 0 || !n->nsites)
                continue;
            rw_site key = {.ret = n->sites[0].addr};
            const rw_site *st = bsearch(&key, r->sites.v, r->sites.n, sizeof key, rw_site_cmp);
            if (!st)
                continue;
            int dup = 0;
            for (uint32_t q = 0; q < j && !dup; q++)
                dup = shown[q] == st;
            shown[j] = st;
            if (dup)
                break;
            const char *name = esc(icpp_pathmap_func(pm, n->func)->name);
            if (r->cq && r->cq[st->cls] >= 0)
                printf("      (call %#" PRIx64 " into %s calls a copy, +%d: not enough to separate these paths)\n",
                       st->ret - 5, name, r->cq[st->cls]);
            else if (st->why)
                printf("      (call %#" PRIx64 " into %s not wrapped: %s)\n", st->ret - 5, name, st->why);
            else if (!r->o.wrap)
                printf("      (call %#" PRIx64 " into %s wrappable, not wrapped: --no-wrap)\n", st->ret - 5, name);
            else if (!r->sites.cls_ok[st->cls])
                printf("      (call %#" PRIx64 " into %s not wrapped: it shares paths with a call site that cannot "
                       "be)\n", st->ret - 5, name);
            else if (r->nwrap && r->nwrap[nd])
                printf("      (call %#" PRIx64 " into %s wrapped, +%u: not enough to separate these paths)\n",
                       st->ret - 5, name, r->nwrap[nd]);
            else
                printf("      (call %#" PRIx64 " into %s wrappable, not wrapped: no padding of it separates these "
                       "paths within the budget)\n", st->ret - 5, name);
            break;
        }
    }
}

/* The frames enlarged, by their own code or by wrapping their calls. */
static void report_resized(const rw_run *r)
{
    printf("resized:      %zu functions (%zu sub immediates, %zu enter, %zu by wrapping their calls)%s\n",
           r->npads + r->nwpads, r->n_sub, r->n_enter, r->nwpads, r->npads + r->nwpads ? ":" : "");
    for (size_t i = 0; i < r->npads; i++) {
        const rw_frame *fr = rw_frames_find(r->fs, r->pads[i].addr);
        printf("  %#10" PRIx64 "  +%-5u %-5s frame %5u -> %-5u  %s\n", r->pads[i].addr, r->pads[i].pad,
               fr->mode == RW_MODE_ENTER ? "enter" : "sub", fr->frame, fr->frame + r->pads[i].pad, esc(fr->name));
    }
    for (size_t i = 0; i < r->nwpads; i++) {
        const rw_frame *fr = rw_frames_find(r->fs, r->wpads[i].addr);
        size_t ns = 0;
        for (size_t j = 0; j < r->nwraps; j++) {
            rw_site key = {.ret = r->wraps[j].ret};
            const rw_site *st = bsearch(&key, r->sites.v, r->sites.n, sizeof key, rw_site_cmp);
            ns += st && st->owner == r->wpads[i].addr;
        }
        printf("  %#10" PRIx64 "  +%-5u wrap  %zu call%s (%s)  %s\n", r->wpads[i].addr, r->wpads[i].pad, ns,
               ns == 1 ? "" : "s", fr && fr->why ? fr->why : "?", fr ? esc(fr->name) : "?");
    }
}

/* The call sites wrapped, and how many of the training's calls went through them. */
static void report_wrapped(const rw_run *r)
{
    /* A wrapped call costs two jumps and two adds each time it runs (docs/rewrite.md, "Figures": tcc's hot
     * wrapped sites cost 4%): how many of the training's calls went through one. */
    uint64_t all = 0, through = 0;
    for (size_t i = 1; i < icpp_pathmap_nnodes(r->pm); i++) {
        all += icpp_pathmap_node(r->pm, (uint32_t)i)->count;
        if (r->nwrap[i])
            through += icpp_pathmap_node(r->pm, (uint32_t)i)->count;
    }
    printf("wrapped:      %zu call sites", r->nwraps);
    if (r->nwraps)
        printf(" (%.2f%% of the training's calls went through them):", all ? 100.0 * (double)through / (double)all : 0);
    putchar('\n');
    for (size_t i = 0; i < r->nwraps; i++) {
        rw_site key = {.ret = r->wraps[i].ret};
        const rw_site *st = bsearch(&key, r->sites.v, r->sites.n, sizeof key, rw_site_cmp);
        const icpp_func *cf = st ? icpp_module_func_start(r->m, st->callee) : NULL;
        const icpp_func *of = st ? icpp_module_func_start(r->m, st->owner) : NULL;
        printf("  %#10" PRIx64 "  +%-5u call %s -> %s (stub %#" PRIx64 ")\n", r->wraps[i].ret - 5, r->wraps[i].pad,
               of ? esc(of->name) : "?", cf ? esc(cf->name) : "?",
               r->wraps[i].new_ret - RW_WRAP_RET);
    }
}

/* The functions copied, and the calls that call the copies. */
static void report_cloned(const rw_run *r)
{
    printf("cloned:       %zu functions for %zu call sites%s\n", r->cs.n, r->cs.nrets,
           r->cs.n ? ":" : "");
    for (size_t i = 0; i < r->cs.n; i++) {
        const icpp_arr_clone *c = &r->cs.c[i];
        for (size_t k = 0; k < c->nrets; k++) {
            rw_site key = {.ret = c->rets[k]};
            const rw_site *st = bsearch(&key, r->sites.v, r->sites.n, sizeof key, rw_site_cmp);
            const icpp_func *cf = icpp_module_func_start(r->m, c->orig);
            const icpp_func *of = st ? icpp_module_func_start(r->m, st->owner) : NULL;
            printf("  %#10" PRIx64 "  +%-5u call %s -> %s (copy %s at %#" PRIx64 ", %" PRIu64 " bytes)\n",
                   c->rets[k] - 5, c->pad, of ? esc(of->name) : "?", cf ? esc(cf->name) : "?", esc(c->sym), c->addr,
                   c->size);
        }
    }
}

/* The functions refused, the search, the time. */
static void report_refused(const rw_run *r)
{
    if (r->plan.nreasons) {
        const rw_reason *rc = r->plan.reasons;
        printf("refused (callers on the map's paths), by reason:\n");
        for (size_t i = 0; i < r->plan.nreasons; i++)
            printf("  %5zu  %s (%s%s%s%s%s%s)\n", rc[i].n, rc[i].why, rc[i].eg[0] ? esc(rc[i].eg[0]) : "",
                   rc[i].eg[1] ? ", " : "", rc[i].eg[1] ? esc(rc[i].eg[1]) : "", rc[i].eg[2] ? ", " : "",
                   rc[i].eg[2] ? esc(rc[i].eg[2]) : "", rc[i].n > 3 ? ", ..." : "");
        printf("  (--explain lists every function with the address the reason is about)\n");
    }
    printf("search:       %.3f s CPU, %" PRIu64 " best responses, %" PRIu64 " paddings evaluated, %zu candidate "
           "functions, %zu contexts that can collide, seed %" PRIu64 "%s\n",
           r->sr.seconds, r->sr.iterations, r->sr.evaluations, r->sr.candidates, r->sr.tracked, r->o.seed,
           r->sr.hit_time_limit ? " (time limit reached)" : "");
    printf("time:         %.2f s CPU: reading %.2f, analysis %.2f, search %.2f, new map %.2f, writing %.2f\n",
           r->t[5] - r->t[0], r->t[1] - r->t[0], r->t[2] - r->t[1], r->t[3] - r->t[2], r->t[4] - r->t[3],
           r->t[5] - r->t[4]);
}

/* What is left ambiguous, judged on the map with clones (r->cpm): with
 * cpad_f (per cpm function its padding), cnwrap (per cpm node its wrap),
 * cmaxpad (per cpm function its largest padding). */
static int report_ambiguous(const rw_run *r, const uint32_t *cpad_f, const uint32_t *cnwrap, const uint32_t *cmaxpad,
                            icpp_err *err)
{
    const icpp_pathmap *pm = r->cpm;
    rw_amb_report ar;
    if (rw_ambiguity(pm, r->plan.caller, cpad_f, cnwrap, cmaxpad, &ar, err) < 0)
        return -1;
    static const char *cls_name[RW_AMB_NCLASSES] = {
        "same callers in another order or place: no resizing can separate, no wrappable call site did",
        "only functions that cannot be patched differ",
        "separable in principle: budget or conflicts left them",
    };
    printf("still ambiguous: %zu contexts\n",
           ar.contexts[0] + ar.contexts[1] + ar.contexts[2]);
    for (int k = 0; k < RW_AMB_NCLASSES; k++)
        printf("  %6zu contexts, %12" PRIu64 " calls: %s\n", ar.contexts[k], ar.weight[k], cls_name[k]);
    size_t shown = 0;
    for (size_t g = 0; g < ar.ngroups && (r->o.explain || shown < 12); g++, shown++) {
        const rw_amb_group *G = &ar.groups[g];
        printf("  [%s] %s at height %" PRId64 ", %u paths, %" PRIu64 " calls:\n",
               G->cls == RW_AMB_SAME_CALLERS ? "inseparable" : G->cls == RW_AMB_UNPATCHABLE ? "unpatchable" : "open",
               esc(icpp_pathmap_func(pm, G->leaf)->name), G->height, G->nnodes, G->weight);
        for (uint32_t j = 0; j < G->nnodes && j < 4; j++) {
            char pn[1024];
            rw_path_name(pm, G->nodes[j], pn, sizeof pn);
            printf("      %s\n", esc(pn));
        }
        if (G->cls != RW_AMB_OPEN)
            print_wrap_why(pm, r, G);
        if (G->nnodes > 4)
            printf("      ... %u more\n", G->nnodes - 4);
    }
    if (ar.ngroups > shown)
        printf("  ... %zu more shared CIDs\n", ar.ngroups - shown);
    rw_amb_report_free(&ar);
    return 0;
}

int rw_report(const rw_run *r, icpp_err *err)
{
    size_t ncf = icpp_pathmap_nfuncs(r->cpm), nmf = icpp_pathmap_nfuncs(r->pm);
    uint32_t *cpad_f = malloc((ncf + 1) * sizeof *cpad_f), *cmaxpad = calloc(ncf + 1, sizeof *cmaxpad);
    uint32_t *cnwrap = malloc((icpp_pathmap_nnodes(r->cpm) + 1) * sizeof *cnwrap);
    if (!cpad_f || !cmaxpad || !cnwrap) {
        free(cpad_f), free(cmaxpad), free(cnwrap);
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    icpp_arr_func_pads(r->cpm, r->pads2, r->npads2, cpad_f);
    icpp_arr_node_wraps(r->cpm, r->wraps, r->nwraps, cnwrap);
    memcpy(cmaxpad, r->plan.maxpad, nmf * sizeof *cmaxpad);
    for (size_t i = nmf; i < ncf; i++)
        cmaxpad[i] = r->cs.c[i - nmf].pad ? 16 : 0;
    printf("icpp-rewrite: %s -> %s\n", r->o.prog, r->o.out);
    printf("build-id:     %s -> %s\n", r->hex_old, r->hex_new);
    printf("map:          %s -> %s\n", r->o.map_path, r->o.out_map);
    print_stats_pair(&r->before, &r->after);
    printf("max height:   %" PRId64 " -> %" PRId64 " bytes (x%.2f; budget x%.2f = %" PRId64 ")\n", r->h0,
           r->sr.max_height, r->h0 ? (double)r->sr.max_height / (double)r->h0 : 1.0, r->o.growth, r->so.max_height);
    printf("functions:    %zu of the program's functions call others on the map's paths: %zu can be "
           "enlarged, %zu refused\n",
           r->plan.ncallers, r->plan.ncallers_ok, r->plan.ncallers - r->plan.ncallers_ok);
    if (r->plan.moved)
        printf("returned:     %ld paths were entered below frames that had returned (calls with stack "
               "arguments); heights follow the frame they were called from\n",
               r->plan.moved);
    report_resized(r);
    report_wrapped(r);
    report_cloned(r);
    report_refused(r);
    int rc = report_ambiguous(r, cpad_f, cnwrap, cmaxpad, err);
    free(cpad_f), free(cmaxpad), free(cnwrap);
    return rc;
}

/* --explain: the verdict on every function of the program. */
void rw_report_explain_frames(const rw_frames *fs)
{
    printf("# function\taddress\tverdict\n");
    for (size_t i = 0; i < rw_frames_count(fs); i++) {
        const rw_frame *f = rw_frames_get(fs, i);
        if (f->why)
            printf("%s\t%#" PRIx64 "\trefused: %s%s", esc(f->name), f->addr, f->why, f->where ? " at " : "");
        else
            printf("%s\t%#" PRIx64 "\tok: %s, frame %u, up to +%u (%u patches%s)", esc(f->name), f->addr,
                   f->mode == RW_MODE_ENTER ? "enter" : "sub", f->frame, f->maxpad, f->npatches,
                   f->ncfa ? ", no frame pointer: CFA offsets in the CFI among them" : "");
        if (f->why && f->where)
            printf("%#" PRIx64, f->where);
        putchar('\n');
    }
}

/* --explain: the verdict on every call site of the map's paths. */
void rw_report_explain_sites(const icpp_module *m, const rw_sites *s, const uint32_t *cpad, const int32_t *cq,
                             const int32_t *cmax, rw_cloner *cl, int clone)
{
    printf("# call site\tcaller\tcallee\tverdict\t(not wrapped or cloned: whether a copy of the callee could "
           "take the call)\n");
    for (size_t i = 0; i < s->n; i++) {
        const rw_site *st = &s->v[i];
        const icpp_func *of = icpp_module_func_start(m, st->owner), *cf = icpp_module_func_start(m, st->callee);
        printf("%#" PRIx64 "\t%s\t%s\t", st->ret - 5, of ? esc(of->name) : "?", cf ? esc(cf->name) : "?");
        if (cq[st->cls] >= 0)
            printf("cloned: calls a copy of its callee, padded +%d", cq[st->cls]);
        else if (st->why)
            printf("refused: %s", st->why);
        else if (!s->cls_ok[st->cls])
            printf("refused: another site on its paths cannot be wrapped, or they have sites in other modules");
        else if (cpad[st->cls])
            printf("wrapped: +%u", cpad[st->cls]);
        else
            printf("ok, not needed");
        const char *why = NULL;
        if (cq[st->cls] >= 0 || cpad[st->cls])
            ;
        else if (!clone)
            printf("\tcopy: not tried (--no-clone)");
        else if (cmax[st->cls] >= 0)
            printf("\tcopy: possible (up to +%d), not needed", cmax[st->cls]);
        else if (!cf || cf->plt || cf->owner != cf->addr)
            printf("\tcopy: no: the callee is not a function of the program");
        else if ((why = rw_clone_judge(cl, st->callee)))
            printf("\tcopy: no: %s", why);
        else
            printf("\tcopy: no: some path through it enters another function or has a call site elsewhere, the "
                   "callee owns a wrapped call, or is enlarged by wrapping");
        putchar('\n');
    }
}
