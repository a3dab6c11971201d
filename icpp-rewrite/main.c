/* main.c -- icpp-rewrite: enlarge chosen activation records so that fewer call paths share a context id. */
#include "arr.h"
#include "cfi.h"
#include "cli.h"
#include "clone.h"
#include "escape.h"
#include "frame.h"
#include "fsafe.h"
#include "image.h"
#include "module.h"
#include "pathmap.h"
#include "plan.h"
#include "search.h"
#include "segment.h"
#include "sites.h"
#include "verify.h"
#include "wrap.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A name from PROG or the map, escaped for the terminal (lib/escape.h); four
 * rotating buffers, so up to four per printf. */
static const char *esc(const char *s)
{
    static char b[4][1024];
    static int i;
    i = (i + 1) % 4;
    return icpp_escape(s, b[i], sizeof b[i]);
}

static const char *usage_text =
    "usage: icpp-rewrite -m MAP [-o OUT] [options] PROG [ARGS...]\n"
    "\n"
    "Write OUT, a copy of PROG whose chosen functions have larger stack frames,\n"
    "so that more call paths of MAP (a training of PROG by icpp-train) end at a\n"
    "context id (function, stack height) no other path has; and OUT.icppmap,\n"
    "the path map of OUT (MAP with the new heights and OUT's build-id). PROG is\n"
    "never modified. Only frames that are provably safe to enlarge are touched\n"
    "(frame-pointer functions; see docs/rewrite.md); the others are listed with\n"
    "the reason.\n"
    "\n"
    "  -m, --map MAP            the path map of PROG (required).\n"
    "  -o, --output OUT         the rewritten program (default PROG.arr).\n"
    "      --max-stack-growth X the largest height of any path may grow to X times\n"
    "                           the map's largest height (default 1.5).\n"
    "      --seed N             seed of the randomized search (default 1).\n"
    "      --time-limit S       stop searching after S seconds of CPU time,\n"
    "                           resizing, wrapping and cloning together\n"
    "                           (default 6).\n"
    "      --no-wrap            do not wrap call sites (by default, ambiguity no\n"
    "                           resizing can separate -- the same callers in\n"
    "                           another order -- is separated by sending chosen\n"
    "                           direct calls through stubs that lower the stack;\n"
    "                           see docs/rewrite.md).\n"
    "      --wrap ADDR          also wrap the direct call at link-time address\n"
    "                           ADDR (repeatable; it must be on the map's paths).\n"
    "      --no-clone           do not clone functions (by default, where no call\n"
    "                           on the paths can be wrapped, chosen calls are\n"
    "                           re-aimed at a copy of their callee with a frame\n"
    "                           of its own size; see docs/rewrite.md).\n"
    "      --enter              also enlarge frame-pointer functions that have no\n"
    "                           `sub $imm,%rsp`, by rewriting `push %rbp; mov\n"
    "                           %rsp,%rbp` into `enter $N,$0` (same 4 bytes, but\n"
    "                           enter is a slow microcoded instruction).\n"
    "      --verify             run PROG ARGS and OUT ARGS (stdin /dev/null, ASLR off),\n"
    "                           compare output and exit status, train both with\n"
    "                           icpp-train and check every path's heights against\n"
    "                           the prediction and OUT's map (docs/rewrite.md).\n"
    "  -v, --verbose, --explain list the verdict on every function of PROG, and on\n"
    "                           every call site of the map's paths (wrapped or why not),\n"
    "                           and every CID still shared, not only the 12 heaviest.\n"
    "  -q, --quiet              only errors (and --verify's verdict); no progress\n"
    "                           line (on a terminal, the search's rounds and best\n"
    "                           score so far are shown every second).\n"
    "      --version            print icpp-rewrite's version.\n"
    "  -h, --help               this text.\n"
    "\n"
    "Exit status: 0 done (and verified); 1 error (nothing or nothing new written);\n"
    "2 bad usage; 3 --verify found a difference.\n";

static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("icpp-rewrite: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

static int64_t map_max_height(const icpp_pathmap *pm)
{
    int64_t m = 0;
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(pm); i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        for (uint32_t k = 0; k < n->nheights; k++)
            if (n->heights[k].height > m)
                m = n->heights[k].height;
    }
    return m;
}

static char *abs_path(const char *p)
{
    if (p[0] == '/')
        return strdup(p);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return strdup(p);
    char *r;
    return asprintf(&r, "%s/%s", cwd, p) < 0 ? NULL : r;
}

/* ---- the report ---- */

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

/* What one run did, for the report. */
typedef struct rw_report {
    const icpp_module      *m;
    const char             *prog, *out, *map_path, *out_map;
    const char             *hex_old, *hex_new;      /* build-ids of prog and out */
    const icpp_pm_stats    *before, *after;         /* the map's ambiguity before and after */
    int64_t                 h0;                     /* the map's largest height */
    double                  growth;                 /* --max-stack-growth */
    const rw_search_opts   *so;
    const rw_search_result *sr;
    const rw_plan          *plan;
    const rw_frames        *fs;
    const icpp_arr_pad     *pads;
    size_t                  npads, n_sub, n_enter;
    const icpp_arr_pad     *wpads;                  /* functions enlarged by wrapping their calls (by address) */
    size_t                  nwpads;
    const icpp_arr_wrap    *wraps;                  /* the wrapped call sites, by return address */
    size_t                  nwraps;
    const uint32_t         *nwrap;                  /* per node: its wrap padding (icpp_arr_node_wraps) */
    const rw_sites         *sites;
    uint64_t                seed;
    double                  t[6];                   /* CPU seconds at: start, read, analysis, search, new map, written */
    int                     wrap;                   /* call sites could be wrapped (no --no-wrap) */
    int                     all_groups;             /* list every shared CID, not the 12 heaviest (--explain) */
    const rw_clone_set     *clones;                 /* the functions copied, and the calls that call the copies */
    const int32_t          *cq;                     /* per call-site class: its clone's padding, -1 if none */
    /* What is left ambiguous is judged on the map with clones (icpp_arr_clone_map): */
    const icpp_pathmap     *cpm;
    const uint32_t         *cpad_f, *cnwrap, *cmaxpad; /* per cpm function, per node, per cpm function */
} rw_report;

/* Why no call site on an inseparable group's paths separated them: for
 * each path, its own call site nearest the leaf (the first main-module one
 * from the leaf up) and its verdict -- not wrappable and why, in a class of
 * sites with one that is not, wrappable but not chosen by the search, or
 * wrapped -- each site once (paths often share it). */
static void print_wrap_why(const icpp_pathmap *pm, const rw_report *r, const rw_amb_group *G)
{
    const rw_site *shown[4] = {0};
    for (uint32_t j = 0; j < G->nnodes && j < 4; j++) {
        for (uint32_t nd = G->nodes[j]; nd; nd = icpp_pathmap_node(pm, nd)->parent) {
            const icpp_pm_node *n = icpp_pathmap_node(pm, nd);
            int32_t k = r->sites->node_cls ? r->sites->node_cls[nd] : -1;
            if (k < 0 || !n->nsites)
                continue;
            rw_site key = {.ret = n->sites[0].addr};
            const rw_site *st = bsearch(&key, r->sites->v, r->sites->n, sizeof key, rw_site_cmp);
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
            else if (!r->wrap)
                printf("      (call %#" PRIx64 " into %s wrappable, not wrapped: --no-wrap)\n", st->ret - 5, name);
            else if (!r->sites->cls_ok[st->cls])
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

/* The report on stdout: what changed, what was refused and why, what stays ambiguous. */
static int report(const icpp_pathmap *pm, const rw_report *r, icpp_err *err)
{
    printf("icpp-rewrite: %s -> %s\n", r->prog, r->out);
    printf("build-id:     %s -> %s\n", r->hex_old, r->hex_new);
    printf("map:          %s -> %s\n", r->map_path, r->out_map);
    print_stats_pair(r->before, r->after);
    printf("max height:   %" PRId64 " -> %" PRId64 " bytes (x%.2f; budget x%.2f = %" PRId64 ")\n", r->h0,
           r->sr->max_height, r->h0 ? (double)r->sr->max_height / (double)r->h0 : 1.0, r->growth, r->so->max_height);
    printf("functions:    %zu of the program's functions call others on the map's paths: %zu can be "
           "enlarged, %zu refused\n",
           r->plan->ncallers, r->plan->ncallers_ok, r->plan->ncallers - r->plan->ncallers_ok);
    if (r->plan->moved)
        printf("returned:     %ld paths were entered below frames that had returned (calls with stack "
               "arguments); heights follow the frame they were called from\n",
               r->plan->moved);
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
            const rw_site *st = bsearch(&key, r->sites->v, r->sites->n, sizeof key, rw_site_cmp);
            ns += st && st->owner == r->wpads[i].addr;
        }
        printf("  %#10" PRIx64 "  +%-5u wrap  %zu call%s (%s)  %s\n", r->wpads[i].addr, r->wpads[i].pad, ns,
               ns == 1 ? "" : "s", fr && fr->why ? fr->why : "?", fr ? esc(fr->name) : "?");
    }
    /* A wrapped call costs two jumps and two adds each time it runs (docs/rewrite.md, "Figures": tcc's hot
     * wrapped sites cost 4%): how many of the training's calls went through one. */
    uint64_t all = 0, through = 0;
    for (size_t i = 1; i < icpp_pathmap_nnodes(pm); i++) {
        all += icpp_pathmap_node(pm, (uint32_t)i)->count;
        if (r->nwrap[i])
            through += icpp_pathmap_node(pm, (uint32_t)i)->count;
    }
    printf("wrapped:      %zu call sites", r->nwraps);
    if (r->nwraps)
        printf(" (%.2f%% of the training's calls went through them):", all ? 100.0 * (double)through / (double)all : 0);
    putchar('\n');
    for (size_t i = 0; i < r->nwraps; i++) {
        rw_site key = {.ret = r->wraps[i].ret};
        const rw_site *st = bsearch(&key, r->sites->v, r->sites->n, sizeof key, rw_site_cmp);
        const icpp_func *cf = st ? icpp_module_func_start(r->m, st->callee) : NULL;
        const icpp_func *of = st ? icpp_module_func_start(r->m, st->owner) : NULL;
        printf("  %#10" PRIx64 "  +%-5u call %s -> %s (stub %#" PRIx64 ")\n", r->wraps[i].ret - 5, r->wraps[i].pad,
               of ? esc(of->name) : "?", cf ? esc(cf->name) : "?",
               r->wraps[i].new_ret - RW_WRAP_RET);
    }
    printf("cloned:       %zu functions for %zu call sites%s\n", r->clones->n, r->clones->nrets,
           r->clones->n ? ":" : "");
    for (size_t i = 0; i < r->clones->n; i++) {
        const icpp_arr_clone *c = &r->clones->c[i];
        for (size_t k = 0; k < c->nrets; k++) {
            rw_site key = {.ret = c->rets[k]};
            const rw_site *st = bsearch(&key, r->sites->v, r->sites->n, sizeof key, rw_site_cmp);
            const icpp_func *cf = icpp_module_func_start(r->m, c->orig);
            const icpp_func *of = st ? icpp_module_func_start(r->m, st->owner) : NULL;
            printf("  %#10" PRIx64 "  +%-5u call %s -> %s (copy %s at %#" PRIx64 ", %" PRIu64 " bytes)\n",
                   c->rets[k] - 5, c->pad, of ? esc(of->name) : "?", cf ? esc(cf->name) : "?", esc(c->sym), c->addr,
                   c->size);
        }
    }
    if (r->plan->nreasons) {
        const rw_reason *rc = r->plan->reasons;
        printf("refused (callers on the map's paths), by reason:\n");
        for (size_t i = 0; i < r->plan->nreasons; i++)
            printf("  %5zu  %s (%s%s%s%s%s%s)\n", rc[i].n, rc[i].why, rc[i].eg[0] ? esc(rc[i].eg[0]) : "",
                   rc[i].eg[1] ? ", " : "", rc[i].eg[1] ? esc(rc[i].eg[1]) : "", rc[i].eg[2] ? ", " : "",
                   rc[i].eg[2] ? esc(rc[i].eg[2]) : "", rc[i].n > 3 ? ", ..." : "");
        printf("  (--explain lists every function with the address the reason is about)\n");
    }
    printf("search:       %.3f s CPU, %" PRIu64 " best responses, %" PRIu64 " paddings evaluated, %zu candidate "
           "functions, %zu contexts that can collide, seed %" PRIu64 "%s\n",
           r->sr->seconds, r->sr->iterations, r->sr->evaluations, r->sr->candidates, r->sr->tracked, r->seed,
           r->sr->hit_time_limit ? " (time limit reached)" : "");
    printf("time:         %.2f s CPU: reading %.2f, analysis %.2f, search %.2f, new map %.2f, writing %.2f\n",
           r->t[5] - r->t[0], r->t[1] - r->t[0], r->t[2] - r->t[1], r->t[3] - r->t[2], r->t[4] - r->t[3],
           r->t[5] - r->t[4]);
    rw_amb_report ar;
    pm = r->cpm;
    if (rw_ambiguity(pm, r->plan->caller, r->cpad_f, r->cnwrap, r->cmaxpad, &ar, err) < 0)
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
    for (size_t g = 0; g < ar.ngroups && (r->all_groups || shown < 12); g++, shown++) {
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

/* Refuse, before any work, an OUT that is PROG itself, that cannot be
 * written, or that the output rule (lib/fsafe.h) refuses; the same for its
 * map; and either of them when it is an input (PROG or MAP: the same-file rule). */
static void check_outputs(const char *prog, const char *map_path, const char *out, const char *out_map)
{
    icpp_err err;
    struct stat sp, so;
    if (stat(prog, &sp) == 0 && stat(out, &so) == 0 && sp.st_dev == so.st_dev && sp.st_ino == so.st_ino)
        die(1, "%s is the program itself: icpp-rewrite never modifies PROG; choose another -o", out);
    char *d1 = strdup(out), *dir = dirname(d1);
    if (access(dir, W_OK) != 0)
        die(1, "%s: cannot write in %s: %s", out, dir, strerror(errno));
    /* The output rule (lib/fsafe.h), checked before the search; the
     * binary is run to verify it, so it must be a file, not a device. */
    int k = icpp_fs_output_check(out, &err);
    if (k < 0)
        die(1, "%s", err.msg);
    if (k == ICPP_FS_CHARDEV)
        die(1, "%s exists and is not a regular file", out);
    if (stat(out, &so) == 0 && access(out, W_OK) != 0 && errno != ENOENT)
        die(1, "%s: cannot replace it: %s", out, strerror(errno));
    k = icpp_fs_output_check(out_map, &err);
    if (k < 0)
        die(1, "%s (it would be %s's map)", err.msg, out);
    if (k == ICPP_FS_CHARDEV)
        die(1, "%s exists and is not a regular file (it would be %s's map)", out_map, out);
    const char *inputs[] = {prog, map_path};
    if (icpp_fs_output_not_input(out, inputs, 2, &err) < 0 || icpp_fs_output_not_input(out_map, inputs, 2, &err) < 0)
        die(1, "%s", err.msg);
    free(d1);
}

/* --explain: the verdict on every function of the program. */
static void explain_frames(const rw_frames *fs)
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
static void explain_sites(const icpp_module *m, const rw_sites *s, const uint32_t *cpad, const int32_t *cq,
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

static const rw_frame *verdict(const void *fs, uint64_t addr)
{
    return rw_frames_find(fs, addr);
}

int main(int argc, char **argv)
{
    enum { OPT_GROWTH = 256, OPT_SEED, OPT_TIME, OPT_VERIFY, OPT_ENTER, OPT_EXPLAIN, OPT_VERSION, OPT_NOWRAP,
           OPT_WRAP, OPT_NOCLONE };
    static const struct option lo[] = {{"map", required_argument, 0, 'm'},
                                       {"output", required_argument, 0, 'o'},
                                       {"max-stack-growth", required_argument, 0, OPT_GROWTH},
                                       {"seed", required_argument, 0, OPT_SEED},
                                       {"time-limit", required_argument, 0, OPT_TIME},
                                       {"verify", no_argument, 0, OPT_VERIFY},
                                       {"enter", no_argument, 0, OPT_ENTER},
                                       {"no-wrap", no_argument, 0, OPT_NOWRAP},
                                       {"no-clone", no_argument, 0, OPT_NOCLONE},
                                       {"wrap", required_argument, 0, OPT_WRAP},
                                       {"explain", no_argument, 0, OPT_EXPLAIN},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"version", no_argument, 0, OPT_VERSION},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    const char *map_path = NULL, *out = NULL;
    double growth = 1.5, tlimit = 6.0;
    uint64_t seed = 1;
    int do_verify = 0, enter = 0, explain = 0, quiet = 0, wrap = 1, clone = 1, c;
    uint64_t force[64];
    size_t nforce = 0;
    char *e;
    while ((c = getopt_long(argc, argv, "+m:o:qvh", lo, NULL)) != -1) {
        switch (c) {
        case 'm': map_path = optarg; break;
        case 'o': out = optarg; break;
        case OPT_GROWTH:
            growth = strtod(optarg, &e);
            if (*e || !(growth >= 1.0) || growth > 1000)
                die(2, "--max-stack-growth wants a factor from 1 to 1000 (1.5: paths may get 50%% higher), not '%s'",
                    optarg);
            break;
        case OPT_SEED:
            errno = 0;
            seed = strtoull(optarg, &e, 0);
            if (*e || !*optarg || errno || strchr(optarg, '-'))     /* strtoull takes "-1" as 2^64-1 */
                die(2, "--seed wants a number from 0 to 2^64-1, not '%s'", optarg);
            break;
        case OPT_TIME:
            tlimit = strtod(optarg, &e);
            if (*e || !(tlimit > 0) || tlimit > 1e6)
                die(2, "--time-limit wants seconds (> 0), not '%s'", optarg);
            break;
        case OPT_VERIFY: do_verify = 1; break;
        case OPT_ENTER: enter = 1; break;
        case OPT_NOWRAP: wrap = 0; break;
        case OPT_NOCLONE: clone = 0; break;
        case OPT_WRAP:
            if (nforce == sizeof force / sizeof *force)
                die(2, "--wrap: at most %zu call sites", sizeof force / sizeof *force);
            errno = 0;
            force[nforce++] = strtoull(optarg, &e, 0);
            if (*e || !*optarg || errno || strchr(optarg, '-'))
                die(2, "--wrap wants the address of a call instruction (0x1234), not '%s'", optarg);
            break;
        case OPT_EXPLAIN:
        case 'v': explain = 1; break;
        case 'q': quiet = 1; break;
        case OPT_VERSION: icpp_cli_version(stdout, "icpp-rewrite"); return 0;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!map_path)
        die(2, "no path map given: -m MAP (made by icpp-train -o MAP -- PROG)");
    if (optind >= argc)
        die(2, "no program given (see --help)");
    const char *prog = argv[optind];
    char defout[PATH_MAX];
    if (!out) {
        snprintf(defout, sizeof defout, "%s.arr", prog);
        out = defout;
    }
    char out_map[PATH_MAX + 16];
    snprintf(out_map, sizeof out_map, "%s.icppmap", out);

    /* A new file not yet in place is removed when SIGINT, SIGTERM or SIGHUP end us. */
    icpp_fs_remove_temps_on_signal();
    /* Inputs, checked before any work. */
    double t_start = icpp_cli_cpu_seconds(), t_read, t_analysis, t_search, t_map, t_write;
    icpp_err err;
    icpp_module *m = icpp_module_open(prog, &err);
    if (!m)
        die(1, "%s", err.msg);
    const icpp_build_id *bid = icpp_module_build_id(m);
    char hex_old[2 * ICPP_BUILD_ID_MAX + 1], hex_new[2 * ICPP_BUILD_ID_MAX + 1], hex_map[2 * ICPP_BUILD_ID_MAX + 1];
    icpp_build_id_hex(bid, hex_old, sizeof hex_old);
    if (!bid->len)
        die(1, "%s has no GNU build-id: ICPP names binaries by build-id (link with -Wl,--build-id)", prog);
    icpp_pathmap *pm = icpp_pathmap_read(map_path, &err);
    if (!pm)
        die(1, "%s", err.msg);
    const icpp_pm_module *mm = icpp_pathmap_nmodules(pm) ? icpp_pathmap_module(pm, icpp_pathmap_main(pm)) : NULL;
    if (!mm)
        die(1, "%s: the map is empty (no modules)", map_path);
    icpp_build_id_hex(&mm->build_id, hex_map, sizeof hex_map);
    char mpe[1024];
    if (!icpp_build_id_eq(&mm->build_id, bid))     /* bid->len > 0: checked above */
        die(1, "%s is a map of %s (build-id %s), not of %s (build-id %s): train this program with icpp-train",
            map_path, icpp_escape(mm->path, mpe, sizeof mpe), hex_map, prog, hex_old);
    check_outputs(prog, map_path, out, out_map);

    /* Analysis. */
    t_read = icpp_cli_cpu_seconds();
    icpp_cfi *cfi = icpp_cfi_build(m, &err);
    if (!cfi)
        die(1, "%s", err.msg);
    rw_image img;
    if (rw_image_load(&img, m, &err) < 0)
        die(1, "%s", err.msg);
    if (!img.bid_len)
        die(1, "%s has no GNU build-id note to replace (link with -Wl,--build-id)", prog);
    rw_frame_opts fo = {enter, 1u << 20};
    rw_frames *fs = rw_frames_analyze(m, &img, cfi, &fo, &err);
    if (!fs)
        die(1, "%s", err.msg);
    if (explain)
        explain_frames(fs);
    rw_plan plan;
    if (rw_plan_build(&plan, pm, icpp_module_funcs(m), icpp_module_nfuncs(m), verdict, fs, &err) < 0)
        die(1, "%s", err.msg);

    /* Search. */
    t_analysis = icpp_cli_cpu_seconds();
    icpp_pm_stats before, after;
    if (icpp_pathmap_stats(pm, &before, &err) < 0)
        die(1, "%s", err.msg);
    int64_t h0 = map_max_height(pm);
    /* Call sites: wrapped where resizing leaves ambiguity, and all of a
     * function's at once where its frame cannot grow (rw_plan_wrap_frames). */
    rw_sites sites;
    if (rw_sites_find(&sites, pm, m, &img, fs, plan.ranges, plan.nranges, &err) < 0)
        die(1, "%s: %s", prog, err.msg);
    if (wrap && rw_plan_wrap_frames(&plan, pm, &sites, verdict, fs, &err) < 0)
        die(1, "%s", err.msg);
    icpp_cli_progress progress; /* the search's progress on a terminal (lib/cli.h) */
    icpp_cli_progress_init(&progress, "icpp-rewrite", quiet);
    /* --time-limit bounds the searches: resizing gets 3/4 of it, wrapping 4/5
     * of the rest (of at least 1/4), cloning what is left (at least 1/16), so
     * rewriting stays within its bound (docs/rewrite.md). */
    /* The budget: h0 x growth, at most the largest height there can be
     * (ICPP_HEIGHT_MAX; the map reader refuses larger ones), so that it
     * neither overflows int64_t nor lets a height leave the bound. */
    double hbudget = floor((double)h0 * growth);
    rw_search_opts so2 = {seed, tlimit * 0.75,
                          hbudget < (double)ICPP_HEIGHT_MAX ? (int64_t)hbudget : ICPP_HEIGHT_MAX - 1, 0, &progress};
    rw_search_result sr;
    int srr = rw_search_run(pm, plan.caller, plan.maxpad, &so2, &sr, &err);
    icpp_cli_progress_end(&progress);
    if (srr < 0)
        die(1, "%s", err.msg);

    /* Call sites to wrap where resizing left ambiguity. */
    uint32_t *cpad = calloc(sites.ncls + 1, sizeof *cpad), *nwrap = calloc(icpp_pathmap_nnodes(pm), sizeof *nwrap);
    if (!cpad || !nwrap)
        die(1, "out of memory");
    /* wrapping: 4/5 of what resizing left (at least 1/4 of the limit); cloning the rest */
    double wlimit = (tlimit - sr.seconds > tlimit / 4 ? tlimit - sr.seconds : tlimit / 4) * 0.8;
    if (wrap && rw_wrap_search(pm, plan.caller, sr.pad, &sites, so2.max_height, wlimit, cpad, &err) < 0)
        die(1, "%s", err.msg);
    icpp_arr_pad *wpads;    /* functions enlarged by wrapping their calls (rw_plan_wrap_pads), for the report */
    size_t n_bywrap;
    if (rw_plan_wrap_pads(&plan, pm, &sites, sr.pad, cpad, &wpads, &n_bywrap, &err) < 0)
        die(1, "%s", err.msg);
    for (size_t i = 0; i < nforce; i++)
        if (rw_wrap_force(&sites, force[i], cpad, &err) < 0)
            die(1, "%s", err.msg);
    icpp_arr_wrap *wraps;
    size_t nwraps;
    if (rw_wrap_list(&sites, cpad, rw_wrap_code_addr(&img), &wraps, &nwraps, &err) < 0)
        die(1, "%s", err.msg);
    icpp_arr_node_wraps(pm, wraps, nwraps, nwrap);

    /* Clones where resizing and wrapping left ambiguity (docs/rewrite.md,
     * "Cloning"): from PROG's bytes, so before any patch (the cloner keeps a
     * copy of them: only when cloning or explaining). */
    rw_cloner *cloner = clone || explain ? rw_cloner_new(m, &img, &err) : NULL;
    int32_t *cmax = malloc((sites.ncls + 1) * sizeof *cmax), *cq = malloc((sites.ncls + 1) * sizeof *cq);
    if ((!cloner && (clone || explain)) || !cmax || !cq)
        die(1, "%s", cmax && cq ? err.msg : "out of memory");
    for (uint32_t k = 0; k <= sites.ncls; k++)
        cq[k] = cmax[k] = -1;
    /* what is left of --time-limit, at least 1/16 of it */
    double climit = tlimit - (icpp_cli_cpu_seconds() - t_analysis);
    if (climit < tlimit / 16)
        climit = tlimit / 16;
    if (clone && (rw_clone_classes(pm, &sites, cpad, cloner, fs, plan.maxpad, plan.bywrap, cmax, &err) < 0 ||
                  rw_clone_search(pm, plan.caller, sr.pad, &sites, cpad, cmax, so2.max_height, climit, RW_MAX_CLONES,
                                  cq, &err) < 0))
        die(1, "%s", err.msg);
    rw_clone_set cs;
    if (rw_clone_list(m, pm, &sites, cq, cloner, rw_wrap_code_addr(&img) + RW_WRAP_STUB * nwraps, &cs, &err) < 0)
        die(1, "%s", err.msg);
    if (explain)
        explain_sites(m, &sites, cpad, cq, cmax, cloner, clone);

    /* Patch. */
    t_search = icpp_cli_cpu_seconds();
    icpp_arr_pad *pads;
    size_t npads, n_sub, n_enter;
    if (rw_plan_pads(pm, sr.pad, verdict, fs, &pads, &npads, &n_sub, &n_enter, &err) < 0)
        die(1, "%s", err.msg);
    for (size_t i = 0; i < npads; i++)
        if (rw_frame_patch(rw_frames_find(fs, pads[i].addr), pads[i].pad, &img, &err) < 0)
            die(1, "%s", err.msg);
    /* OUT's map: the clones' map, padded (each clone by its own padding). */
    icpp_arr_pad *pads2 = malloc((npads + cs.n + 1) * sizeof *pads2);
    icpp_arr_wrap *bidw = malloc((nwraps + cs.nrets + 1) * sizeof *bidw);
    if (!pads2 || !bidw)
        die(1, "out of memory");
    memcpy(pads2, pads, npads * sizeof *pads);
    memcpy(bidw, wraps, nwraps * sizeof *wraps);
    size_t npads2 = npads, nbidw = nwraps;
    for (size_t i = 0; i < cs.n; i++) {
        if (cs.c[i].pad)
            pads2[npads2++] = (icpp_arr_pad){cs.c[i].addr, cs.c[i].pad};
        for (size_t k = 0; k < cs.c[i].nrets; k++)
            bidw[nbidw++] = (icpp_arr_wrap){cs.c[i].rets[k], cs.c[i].addr, cs.c[i].pad + 1};
    }
    icpp_build_id nbid;
    icpp_arr_build_id(bid, pads, npads, bidw, nbidw, &nbid);
    icpp_build_id_hex(&nbid, hex_new, sizeof hex_new);
    if (rw_image_set_build_id(&img, &nbid, &err) < 0)
        die(1, "%s: %s", prog, err.msg);
    rw_clones_in ci = {cloner, fs, cs.c, cs.n};
    if (rw_segment_apply(&img, &sites, wraps, nwraps, pads, npads, &ci, &err) < 0)
        die(1, "%s: cannot wrap call sites or clone functions: %s (--no-wrap, --no-clone leave them)", prog,
            err.msg);
    char *out_abs = abs_path(out);
    size_t partly = 0;
    icpp_pathmap *cpm = icpp_arr_clone_map(pm, cs.c, cs.n, &partly, &err);
    if (!cpm)
        die(1, "%s", err.msg);
    if (partly)
        die(1, "internal error: %zu paths go through a clone's call sites only in part", partly);
    icpp_pathmap *npm = icpp_arr_apply(cpm, plan.caller, pads2, npads2, wraps, nwraps, out_abs ? out_abs : out,
                                       &nbid, &err);
    if (!npm || icpp_arr_set_unpaddable(npm, pm, plan.maxpad, &err) < 0)
        die(1, "%s", err.msg);
    char ncl[32];
    snprintf(ncl, sizeof ncl, "%zu", cs.n);
    if (cs.n && icpp_pathmap_set_meta(npm, "arr-clones", ncl) < 0)
        die(1, "out of memory");
    if (icpp_pathmap_stats(npm, &after, &err) < 0)
        die(1, "%s", err.msg);
    t_map = icpp_cli_cpu_seconds();
    /* The binary and its map belong together: both new files are written
     * first, then both replace the previous ones, or neither does (the map
     * is put in place first, the binary last: lib/fsafe.h). */
    icpp_fs_out ob, om;
    uint8_t *mbuf;
    size_t mlen;
    if (icpp_pathmap_encode(npm, &mbuf, &mlen, &err) < 0)
        die(1, "%s: %s", out_map, err.msg);
    if (rw_image_write(&img, &ob, out, &err) < 0)
        die(1, "%s (neither %s nor %s was changed)", err.msg, out, out_map);
    if (icpp_fs_out_begin(&om, out_map, ICPP_FS_MODE_PLAIN, &err) < 0) {
        icpp_fs_out_abort(&ob);
        die(1, "%s (neither %s nor %s was changed)", err.msg, out, out_map);
    }
    int we = icpp_fs_write_all(om.fd, mbuf, mlen);
    free(mbuf);
    if (we) {
        icpp_fs_out_abort(&om);
        icpp_fs_out_abort(&ob);
        die(1, "%s: write failed: %s (neither %s nor %s was changed)", out_map, strerror(we), out, out_map);
    }
    /* The map's lock (the concurrency rule for maps, docs/file-safety.md):
     * a training run or --save-map writing OUT.icppmap meanwhile waits. */
    icpp_fs_lock lk = {.fd = -1};
    if (icpp_fs_lock_beside(&lk, out_map, &err) < 0) {
        icpp_fs_out_abort(&om);
        icpp_fs_out_abort(&ob);
        die(1, "%s (neither %s nor %s was changed)", err.msg, out, out_map);
    }
    int pr = icpp_fs_out_commit_pair(&om, &ob, &err);
    icpp_fs_unlock(&lk);
    if (pr < 0)
        die(1, "%s", err.msg);
    t_write = icpp_cli_cpu_seconds();

    if (!quiet) {
        size_t ncf = icpp_pathmap_nfuncs(cpm), nmf = icpp_pathmap_nfuncs(pm);
        uint32_t *cpad_f = malloc((ncf + 1) * sizeof *cpad_f), *cmaxpad = calloc(ncf + 1, sizeof *cmaxpad);
        uint32_t *cnwrap = malloc((icpp_pathmap_nnodes(cpm) + 1) * sizeof *cnwrap);
        if (!cpad_f || !cmaxpad || !cnwrap)
            die(1, "out of memory");
        icpp_arr_func_pads(cpm, pads2, npads2, cpad_f);
        icpp_arr_node_wraps(cpm, wraps, nwraps, cnwrap);
        memcpy(cmaxpad, plan.maxpad, nmf * sizeof *cmaxpad);
        for (size_t i = nmf; i < ncf; i++)
            cmaxpad[i] = cs.c[i - nmf].pad ? 16 : 0;
        rw_report r = {.m = m, .prog = prog, .out = out, .map_path = map_path, .out_map = out_map,
                       .hex_old = hex_old, .hex_new = hex_new, .before = &before, .after = &after, .h0 = h0,
                       .growth = growth, .so = &so2, .sr = &sr, .plan = &plan, .fs = fs, .pads = pads,
                       .npads = npads, .n_sub = n_sub, .n_enter = n_enter, .wpads = wpads, .nwpads = n_bywrap,
                       .wraps = wraps, .nwraps = nwraps, .nwrap = nwrap, .sites = &sites, .seed = seed,
                       .t = {t_start, t_read, t_analysis, t_search, t_map, t_write}, .wrap = wrap,
                       .all_groups = explain, .clones = &cs, .cq = cq, .cpm = cpm, .cpad_f = cpad_f, .cnwrap = cnwrap,
                       .cmaxpad = cmaxpad};
        if (report(pm, &r, &err) < 0)
            die(1, "%s", err.msg);
        free(cpad_f), free(cmaxpad), free(cnwrap);
    }
    int status = 0;
    if (do_verify) {
        rw_verify_opts vo = {prog,   out,    out_map, argv + optind + 1, argc - optind - 1, pads2, npads2, wraps,
                             nwraps, cs.c,   cs.n,   plan.ranges, plan.nranges,     quiet};
        int v = rw_verify(&vo);
        status = v < 0 ? 1 : v > 0 ? 3 : 0;
    }
    free(out_abs);
    icpp_pathmap_free(cpm);
    rw_clone_set_free(&cs);
    rw_cloner_free(cloner);
    free(cmax), free(cq), free(pads2), free(bidw);
    free(pads);
    free(wraps);
    free(cpad);
    free(wpads);
    free(nwrap);
    rw_sites_free(&sites);
    rw_plan_free(&plan);
    rw_search_result_free(&sr);
    icpp_pathmap_free(npm);
    icpp_pathmap_free(pm);
    rw_frames_free(fs);
    rw_image_free(&img);
    icpp_cfi_free(cfi);
    icpp_module_close(m);
    return status;
}
