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
#include "report.h"
#include "run.h"
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

#define die(...) icpp_cli_die("icpp-rewrite", __VA_ARGS__)

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

static const rw_frame *verdict(const void *fs, uint64_t addr)
{
    return rw_frames_find(fs, addr);
}


/* ---- the phases, in the order main runs them ---- */

/* The command line into r->o.  -1: go on; else the exit status (--help,
 * --version, bad usage: its message printed). */
static int parse_options(int argc, char **argv, rw_opts *o)
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
    o->growth = 1.5, o->tlimit = 6.0, o->seed = 1, o->wrap = 1, o->clone = 1;
    int c;
    while ((c = getopt_long(argc, argv, "+m:o:qvh", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o->map_path = optarg; break;
        case 'o': o->out = optarg; break;
        case OPT_GROWTH:
            if (icpp_cli_double(optarg, &o->growth) < 0 || !(o->growth >= 1.0) || o->growth > 1000)
                die(2, "--max-stack-growth wants a factor from 1 to 1000 (1.5: paths may get 50%% higher), not '%s'",
                    optarg);
            break;
        case OPT_SEED:
            if (icpp_cli_u64(optarg, 0, 0, UINT64_MAX, &o->seed) < 0)
                die(2, "--seed wants a number from 0 to 2^64-1, not '%s'", optarg);
            break;
        case OPT_TIME:
            if (icpp_cli_double(optarg, &o->tlimit) < 0 || !(o->tlimit > 0) || o->tlimit > 1e6)
                die(2, "--time-limit wants seconds (> 0), not '%s'", optarg);
            break;
        case OPT_VERIFY: o->verify = 1; break;
        case OPT_ENTER: o->enter = 1; break;
        case OPT_NOWRAP: o->wrap = 0; break;
        case OPT_NOCLONE: o->clone = 0; break;
        case OPT_WRAP:
            if (o->nforce == RW_MAX_FORCE)
                die(2, "--wrap: at most %zu call sites", (size_t)RW_MAX_FORCE);
            if (icpp_cli_u64(optarg, 0, 0, UINT64_MAX, &o->force[o->nforce++]) < 0)
                die(2, "--wrap wants the address of a call instruction (0x1234), not '%s'", optarg);
            break;
        case OPT_EXPLAIN:
        case 'v': o->explain = 1; break;
        case 'q': o->quiet = 1; break;
        case OPT_VERSION: icpp_cli_version(stdout, "icpp-rewrite"); return 0;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!o->map_path)
        die(2, "no path map given: -m MAP (made by icpp-train -o MAP -- PROG)");
    if (optind >= argc)
        die(2, "no program given (see --help)");
    o->prog = argv[optind];
    o->args = argv + optind + 1;
    o->nargs = argc - optind - 1;
    if (!o->out) {
        snprintf(o->defout, sizeof o->defout, "%s.arr", o->prog);
        o->out = o->defout;
    }
    snprintf(o->out_map, sizeof o->out_map, "%s.icppmap", o->out);
    return -1;
}

/* PROG and MAP read and checked against each other, OUT and its map
 * checked, before any work. */
static void open_inputs(rw_run *r)
{
    icpp_err err;
    const char *prog = r->o.prog, *map_path = r->o.map_path;
    if (!(r->m = icpp_module_open(prog, &err)))
        die(1, "%s", err.msg);
    r->bid = icpp_module_build_id(r->m);
    char hex_map[2 * ICPP_BUILD_ID_MAX + 1];
    icpp_build_id_hex(r->bid, r->hex_old, sizeof r->hex_old);
    if (!r->bid->len)
        die(1, "%s has no GNU build-id: ICPP names binaries by build-id (link with -Wl,--build-id)", prog);
    if (!(r->pm = icpp_pathmap_read(map_path, &err)))
        die(1, "%s", err.msg);
    const icpp_pm_module *mm =
        icpp_pathmap_nmodules(r->pm) ? icpp_pathmap_module(r->pm, icpp_pathmap_main(r->pm)) : NULL;
    if (!mm)
        die(1, "%s: the map is empty (no modules)", map_path);
    icpp_build_id_hex(&mm->build_id, hex_map, sizeof hex_map);
    char mpe[1024];
    if (!icpp_build_id_eq(&mm->build_id, r->bid))     /* bid->len > 0: checked above */
        die(1, "%s is a map of %s (build-id %s), not of %s (build-id %s): train this program with icpp-train",
            map_path, icpp_escape(mm->path, mpe, sizeof mpe), hex_map, prog, r->hex_old);
    check_outputs(prog, map_path, r->o.out, r->o.out_map);
}

/* Every function's verdict (may its frame grow, and how), and the plan. */
static void analyse(rw_run *r)
{
    icpp_err err;
    if (!(r->cfi = icpp_cfi_build(r->m, &err)))
        die(1, "%s", err.msg);
    if (rw_image_load(&r->img, r->m, &err) < 0)
        die(1, "%s", err.msg);
    if (!r->img.bid_len)
        die(1, "%s has no GNU build-id note to replace (link with -Wl,--build-id)", r->o.prog);
    rw_frame_opts fo = {r->o.enter, 1u << 20};
    if (!(r->fs = rw_frames_analyze(r->m, &r->img, r->cfi, &fo, &err)))
        die(1, "%s", err.msg);
    if (r->o.explain)
        rw_report_explain_frames(r->fs);
    if (rw_plan_build(&r->plan, r->pm, icpp_module_funcs(r->m), icpp_module_nfuncs(r->m), verdict, r->fs, &err) < 0)
        die(1, "%s", err.msg);
}

/* The resizing search, after the call sites are judged (all of a
 * function's are wrapped at once where its frame cannot grow:
 * rw_plan_wrap_frames). */
static void search_frames(rw_run *r)
{
    icpp_err err;
    if (icpp_pathmap_stats(r->pm, &r->before, &err) < 0)
        die(1, "%s", err.msg);
    r->h0 = map_max_height(r->pm);
    if (rw_sites_find(&r->sites, r->pm, r->m, &r->img, r->fs, r->plan.ranges, r->plan.nranges, &err) < 0)
        die(1, "%s: %s", r->o.prog, err.msg);
    if (r->o.wrap && rw_plan_wrap_frames(&r->plan, r->pm, &r->sites, verdict, r->fs, &err) < 0)
        die(1, "%s", err.msg);
    icpp_cli_progress_init(&r->progress, "icpp-rewrite", r->o.quiet);
    /* --time-limit bounds the searches: resizing gets 3/4 of it, wrapping 4/5
     * of the rest (of at least 1/4), cloning what is left (at least 1/16), so
     * rewriting stays within its bound (docs/rewrite.md). */
    /* The budget: h0 x growth, at most the largest height there can be
     * (ICPP_HEIGHT_MAX; the map reader refuses larger ones), so that it
     * neither overflows int64_t nor lets a height leave the bound. */
    double hbudget = floor((double)r->h0 * r->o.growth);
    r->so = (rw_search_opts){r->o.seed, r->o.tlimit * 0.75,
                             hbudget < (double)ICPP_HEIGHT_MAX ? (int64_t)hbudget : ICPP_HEIGHT_MAX - 1, 0,
                             &r->progress};
    int srr = rw_search_run(r->pm, r->plan.caller, r->plan.maxpad, &r->so, &r->sr, &err);
    icpp_cli_progress_end(&r->progress);
    if (srr < 0)
        die(1, "%s", err.msg);
}

/* Call sites to wrap where resizing left ambiguity, and --wrap's. */
static void search_wraps(rw_run *r)
{
    icpp_err err;
    double tlimit = r->o.tlimit;
    r->cpad = calloc(r->sites.ncls + 1, sizeof *r->cpad);
    r->nwrap = calloc(icpp_pathmap_nnodes(r->pm), sizeof *r->nwrap);
    if (!r->cpad || !r->nwrap)
        die(1, "out of memory");
    /* wrapping: 4/5 of what resizing left (at least 1/4 of the limit); cloning the rest */
    double wlimit = (tlimit - r->sr.seconds > tlimit / 4 ? tlimit - r->sr.seconds : tlimit / 4) * 0.8;
    if (r->o.wrap &&
        rw_wrap_search(r->pm, r->plan.caller, r->sr.pad, &r->sites, r->so.max_height, wlimit, r->cpad, &err) < 0)
        die(1, "%s", err.msg);
    if (rw_plan_wrap_pads(&r->plan, r->pm, &r->sites, r->sr.pad, r->cpad, &r->wpads, &r->nwpads, &err) < 0)
        die(1, "%s", err.msg);
    for (size_t i = 0; i < r->o.nforce; i++)
        if (rw_wrap_force(&r->sites, r->o.force[i], r->cpad, &err) < 0)
            die(1, "%s", err.msg);
    if (rw_wrap_list(&r->sites, r->cpad, rw_wrap_code_addr(&r->img), &r->wraps, &r->nwraps, &err) < 0)
        die(1, "%s", err.msg);
    icpp_arr_node_wraps(r->pm, r->wraps, r->nwraps, r->nwrap);
}

/* Clones where resizing and wrapping left ambiguity (docs/rewrite.md,
 * "Cloning"): from PROG's bytes, so before any patch (the cloner keeps a
 * copy of them: only when cloning or explaining). */
static void search_clones(rw_run *r)
{
    icpp_err err;
    double tlimit = r->o.tlimit;
    int clone = r->o.clone, explain = r->o.explain;
    uint32_t ncls = r->sites.ncls;
    r->cloner = clone || explain ? rw_cloner_new(r->m, &r->img, &err) : NULL;
    r->cmax = malloc((ncls + 1) * sizeof *r->cmax), r->cq = malloc((ncls + 1) * sizeof *r->cq);
    if ((!r->cloner && (clone || explain)) || !r->cmax || !r->cq)
        die(1, "%s", r->cmax && r->cq ? err.msg : "out of memory");
    for (uint32_t k = 0; k <= ncls; k++)
        r->cq[k] = r->cmax[k] = -1;
    /* what is left of --time-limit, at least 1/16 of it */
    double climit = tlimit - (icpp_cli_cpu_seconds() - r->t[RW_T_ANALYSIS]);
    if (climit < tlimit / 16)
        climit = tlimit / 16;
    if (clone && (rw_clone_classes(r->pm, &r->sites, r->cpad, r->cloner, r->fs, r->plan.maxpad, r->plan.bywrap,
                                   r->cmax, &err) < 0 ||
                  rw_clone_search(r->pm, r->plan.caller, r->sr.pad, &r->sites, r->cpad, r->cmax, r->so.max_height,
                                  climit, RW_MAX_CLONES, r->cq, &err) < 0))
        die(1, "%s", err.msg);
    if (rw_clone_list(r->m, r->pm, &r->sites, r->cq, r->cloner,
                      rw_wrap_code_addr(&r->img) + RW_WRAP_STUB * r->nwraps, &r->cs, &err) < 0)
        die(1, "%s", err.msg);
    if (explain)
        rw_report_explain_sites(r->m, &r->sites, r->cpad, r->cq, r->cmax, r->cloner, clone);
}

/* The frames enlarged, OUT's build-id, the stubs and clones in its new segment. */
static void patch(rw_run *r)
{
    icpp_err err;
    const rw_clone_set *cs = &r->cs;
    if (rw_plan_pads(r->pm, r->sr.pad, verdict, r->fs, &r->pads, &r->npads, &r->n_sub, &r->n_enter, &err) < 0)
        die(1, "%s", err.msg);
    for (size_t i = 0; i < r->npads; i++)
        if (rw_frame_patch(rw_frames_find(r->fs, r->pads[i].addr), r->pads[i].pad, &r->img, &err) < 0)
            die(1, "%s", err.msg);
    /* OUT's map: the clones' map, padded (each clone by its own padding). */
    r->pads2 = malloc((r->npads + cs->n + 1) * sizeof *r->pads2);
    r->bidw = malloc((r->nwraps + cs->nrets + 1) * sizeof *r->bidw);
    if (!r->pads2 || !r->bidw)
        die(1, "out of memory");
    memcpy(r->pads2, r->pads, r->npads * sizeof *r->pads);
    memcpy(r->bidw, r->wraps, r->nwraps * sizeof *r->wraps);
    r->npads2 = r->npads, r->nbidw = r->nwraps;
    for (size_t i = 0; i < cs->n; i++) {
        if (cs->c[i].pad)
            r->pads2[r->npads2++] = (icpp_arr_pad){cs->c[i].addr, cs->c[i].pad};
        for (size_t k = 0; k < cs->c[i].nrets; k++)
            r->bidw[r->nbidw++] = (icpp_arr_wrap){cs->c[i].rets[k], cs->c[i].addr, cs->c[i].pad + 1};
    }
    icpp_arr_build_id(r->bid, r->pads, r->npads, r->bidw, r->nbidw, &r->nbid);
    icpp_build_id_hex(&r->nbid, r->hex_new, sizeof r->hex_new);
    if (rw_image_set_build_id(&r->img, &r->nbid, &err) < 0)
        die(1, "%s: %s", r->o.prog, err.msg);
    rw_clones_in ci = {r->cloner, r->fs, cs->c, cs->n};
    if (rw_segment_apply(&r->img, &r->sites, r->wraps, r->nwraps, r->pads, r->npads, &ci, &err) < 0)
        die(1, "%s: cannot wrap call sites or clone functions: %s (--no-wrap, --no-clone leave them)", r->o.prog,
            err.msg);
}

/* OUT's map: MAP with the clones, padded, with OUT's build-id and path. */
static void new_map(rw_run *r)
{
    icpp_err err;
    r->out_abs = abs_path(r->o.out);
    size_t partly = 0;
    if (!(r->cpm = icpp_arr_clone_map(r->pm, r->cs.c, r->cs.n, &partly, &err)))
        die(1, "%s", err.msg);
    if (partly)
        die(1, "internal error: %zu paths go through a clone's call sites only in part", partly);
    r->npm = icpp_arr_apply(r->cpm, r->plan.caller, r->pads2, r->npads2, r->wraps, r->nwraps,
                            r->out_abs ? r->out_abs : r->o.out, &r->nbid, &err);
    if (!r->npm || icpp_arr_set_unpaddable(r->npm, r->pm, r->plan.maxpad, &err) < 0)
        die(1, "%s", err.msg);
    char ncl[32];
    snprintf(ncl, sizeof ncl, "%zu", r->cs.n);
    if (r->cs.n && icpp_pathmap_set_meta(r->npm, "arr-clones", ncl) < 0)
        die(1, "out of memory");
    if (icpp_pathmap_stats(r->npm, &r->after, &err) < 0)
        die(1, "%s", err.msg);
}

/* The binary and its map belong together: both new files are written
 * first, then both replace the previous ones, or neither does (the map
 * is put in place first, the binary last: lib/fsafe.h). */
static void write_outputs(rw_run *r)
{
    icpp_err err;
    const char *out = r->o.out, *out_map = r->o.out_map;
    icpp_fs_out ob, om;
    uint8_t *mbuf;
    size_t mlen;
    if (icpp_pathmap_encode(r->npm, &mbuf, &mlen, &err) < 0)
        die(1, "%s: %s", out_map, err.msg);
    if (rw_image_write(&r->img, &ob, out, &err) < 0)
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
}

/* --verify: 0 matched, 1 could not run, 3 a difference. */
static int verify(const rw_run *r)
{
    rw_verify_opts vo = {r->o.prog, r->o.out,   r->o.out_map,  r->o.args,  r->o.nargs,     r->pads2,
                         r->npads2, r->wraps,   r->nwraps,     r->cs.c,    r->cs.n,        r->plan.ranges,
                         r->plan.nranges,       r->o.quiet};
    int v = rw_verify(&vo);
    return v < 0 ? 1 : v > 0 ? 3 : 0;
}

static void run_free(rw_run *r)
{
    free(r->out_abs);
    icpp_pathmap_free(r->cpm);
    rw_clone_set_free(&r->cs);
    rw_cloner_free(r->cloner);
    free(r->cmax), free(r->cq), free(r->pads2), free(r->bidw);
    free(r->pads);
    free(r->wraps);
    free(r->cpad);
    free(r->wpads);
    free(r->nwrap);
    rw_sites_free(&r->sites);
    rw_plan_free(&r->plan);
    rw_search_result_free(&r->sr);
    icpp_pathmap_free(r->npm);
    icpp_pathmap_free(r->pm);
    rw_frames_free(r->fs);
    rw_image_free(&r->img);
    icpp_cfi_free(r->cfi);
    icpp_module_close(r->m);
}

int main(int argc, char **argv)
{
    static rw_run r;
    int status = parse_options(argc, argv, &r.o);
    if (status >= 0)
        return status;
    /* A new file not yet in place is removed when SIGINT, SIGTERM or SIGHUP end us. */
    icpp_fs_remove_temps_on_signal();
    r.t[RW_T_START] = icpp_cli_cpu_seconds();
    open_inputs(&r);
    r.t[RW_T_READ] = icpp_cli_cpu_seconds();
    analyse(&r);
    r.t[RW_T_ANALYSIS] = icpp_cli_cpu_seconds();
    search_frames(&r);
    search_wraps(&r);
    search_clones(&r);
    r.t[RW_T_SEARCH] = icpp_cli_cpu_seconds();
    patch(&r);
    new_map(&r);
    r.t[RW_T_MAP] = icpp_cli_cpu_seconds();
    write_outputs(&r);
    r.t[RW_T_WRITE] = icpp_cli_cpu_seconds();
    icpp_err err;
    if (!r.o.quiet && rw_report(&r, &err) < 0)
        die(1, "%s", err.msg);
    status = r.o.verify ? verify(&r) : 0;
    run_free(&r);
    return status;
}
