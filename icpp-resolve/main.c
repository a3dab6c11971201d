/* main.c -- icpp-resolve: sample files to call-path profiles. */
#include "basevote.h"
#include "cli.h"
#include "defs.h"
#include "debuginfo.h"
#include "escape.h"
#include "fsafe.h"
#include "learn.h"
#include "module.h"
#include "check.h"
#include "complete.h"
#include "mapset.h"
#include "output.h"
#include "pathmap.h"
#include "profile.h"
#include "replay.h"
#include "resolve.h"
#include "sampstat.h"
#include "trends.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *usage_text =
    "usage: icpp-resolve [-m MAP...] [--map-dir DIR] [--format FORMAT] [-n N] [-o OUT]\n"
    "                    [--check] [--no-learn] [--save-map OUT] [--fold-recursion] SAMPLES\n"
    "       icpp-resolve --script [-m MAP...] SAMPLES\n"
    "       icpp-resolve --trend [-m MAP...] RUN1 RUN2 RUN3 ...   (--trend --help)\n"
    "\n"
    "Turn an icpp-sample recording into call-path profiles using the path map\n"
    "icpp-train made for the same binary. Every report starts with how many\n"
    "samples resolved precisely, ambiguously, not at all (missing from the map),\n"
    "or could not be resolved (no CFI, vdso, ...).\n"
    "\n"
    "  -m, --map MAP     a path map; give several for a recording of several\n"
    "                    programs (a wrapper, a script, fork+exec): each process\n"
    "                    is resolved with the map of its executable's build-id.\n"
    "  --map-dir DIR     maps found by build-id among DIR/*.icppmap (repeatable).\n"
    "                    Without -m and --map-dir: BINARY.icppmap next to each\n"
    "                    recorded executable, then NAME.icppmap in the current\n"
    "                    directory (a map whose build-id differs is never used).\n"
    "  --format FORMAT   text (default): hot call paths, ranked;\n"
    "                    tree: inclusive and self shares down the call tree;\n"
    "                    folded: 'a;b;c weight' lines for flamegraph.pl/speedscope;\n"
    "                    json: everything, for scripts;\n"
    "                    speedscope: speedscope's JSON file format;\n"
    "                    pprof: gzipped profile.proto (go tool pprof, pprof UIs);\n"
    "                    svg: interactive flame graph (one file, for a browser).\n"
    "  -n N              rows in the text list (default 20, 0 = all).\n"
    "  --full-paths      do not fold long paths in the middle.\n"
    "  --call-sites      text: show where each function was called from\n"
    "                    (file:line from DWARF where the binary has it; json\n"
    "                    always has them).\n"
    "  --no-inline       do not expand inlined frames.  By default, where a binary\n"
    "                    has DWARF, the functions inlined at a sample's address\n"
    "                    extend its path, and those inlined at a call site (the\n"
    "                    one training saw most often) come between caller and\n"
    "                    callee; they are marked 'NAME [inlined]' (pprof: several\n"
    "                    lines in one location; json: \"inlined\": true).\n"
    "  --sort EVENT      rank by this event when several were recorded.\n"
    "  --min PCT         tree: hide nodes below PCT% inclusive (default 0.5).\n"
    "  -o, --output OUT  write there instead of standard output.\n"
    "  --no-learn        ignore the recording's learn samples (icpp-sample --learn).\n"
    "                    By default each one becomes a path of the map before\n"
    "                    the samples are resolved: contexts training never ran\n"
    "                    are learned from the recording itself. With no map at\n"
    "                    all (none given, none by the default name), a recording\n"
    "                    with learn samples resolves against what it learned.\n"
    "  --save-map OUT    write the map with what was learned added to OUT (it can\n"
    "                    be the map itself), so the map improves with every\n"
    "                    recording; what others wrote to the map meanwhile stays.\n"
    "  --learn-votes K   where several known paths share a sample's (function,\n"
    "                    height) and this recording's learn samples there all\n"
    "                    took one of them, at least K times, resolve to that one\n"
    "                    as precise (default 0: off; see docs/resolve.md).\n"
    "  --evidence WHEN   weigh a sample's candidate paths by this recording's learn\n"
    "                    samples: 'auto' (default) where they show the run does\n"
    "                    what training did not (new contexts), 'on', 'off'.  A\n"
    "                    candidate in a region no learn sample was seen in gives\n"
    "                    way to others; an unconfirmed one that an untrained path\n"
    "                    through a seen context also explains is 'uncertain'\n"
    "                    (docs/resolve.md).\n"
    "  --check           accuracy against the true stacks of an `icpp-sample\n"
    "                    --validate` recording: precise, ambiguous-containing-\n"
    "                    truth, incorrect, missing, unresolved; by samples and\n"
    "                    by distinct paths; call sites too (--format json too);\n"
    "                    and by samples on recursion-folded paths.\n"
    "  --check-only FUNC --check, judging only the samples whose true stack\n"
    "                    passes through a function named FUNC (a phase of\n"
    "                    the program).\n"
    "  --fold-recursion  a recursion-folded view: a block of functions repeated\n"
    "                    back to back in a path is shown once (f;f;f -> f,\n"
    "                    (a;b)*k;a -> a;b;a; docs/resolve.md), and a sample\n"
    "                    whose candidate paths all fold to one path is precise.\n"
    "  --no-complete     leave samples whose (function, height) training never saw\n"
    "                    as [missing].  By default they are completed: call paths\n"
    "                    the binary's static call graph allows, from the sample's\n"
    "                    function back to a context the map knows, within a\n"
    "                    bound (docs/resolve.md); such paths are *inferred*, a\n"
    "                    status of their own ('NAME [inferred]' frames, an\n"
    "                    [inferred] mark at the path; json: \"inferred\").\n"
    "  --complete        complete (the default; undoes an earlier --no-complete).\n"
    "  --complete-stats  print the completion search's figures to stderr.\n"
    "  --script          one line per sample: pid/tid, time, event, ip, sp, bp,\n"
    "                    thread base, height, module and function, and\n"
    "                    (with -m/--map-dir, threads' own stacks are chosen with\n"
    "                    the maps, as for a profile; else by their first sample)\n"
    "                    'inlined=G;H' when the address is in functions inlined\n"
    "                    into it (outermost first; not with --no-inline).\n"
    "  --no-debuginfod   never ask a debuginfod server for debug files.\n"
    "  --debuginfod-timeout SECONDS\n"
    "                    all debuginfod queries of this run together take at\n"
    "                    most this long (default 30); an answer larger than\n"
    "                    DEBUGINFOD_MAXSIZE bytes (default 1 GiB) is stopped.\n"
    "                    Only binaries that samples fall in are asked for.\n"
    "  -q, --quiet       no progress line (on a terminal, the samples resolved\n"
    "                    and how far into the file, and debuginfod transfers,\n"
    "                    are shown every second).\n"
    "  --version         print icpp-resolve's version.\n"
    "  -h, --help        this text.\n"
    "\n"
    "Ambiguous samples (several paths share the sample's (function, height)) are\n"
    "shared among the candidate paths in proportion to their training counts;\n"
    "the amb% column says how much of a path's weight came from such sharing.\n"
    "Every share comes with its 95% interval; column o says whether a rank is\n"
    "statistically ahead of the next one ('>') or not ('~': the footer says how\n"
    "many more samples would order them). A thread whose intervals between\n"
    "samples are periodic or autocorrelated (lockstep sampling) is named in the\n"
    "report's header (text, tree, svg; json: \"sampling\"; docs/statistics.md).\n"
    "Stripped functions are named, and get inlined frames and lines, from their\n"
    "separate debug files (/usr/lib/debug, .gnu_debuglink, debuginfod when\n"
    "DEBUGINFOD_URLS is set; ICPP_DEBUG_DIRS replaces /usr/lib/debug;\n"
    "docs/debuginfo.md); otherwise they show as fn_ADDR.\n";

/* ms: with maps given (-m, --map-dir), threads' own stacks are voted with
 * them (mapset.h), as the profile does; else each thread's first sample
 * decides. */
static int script(const char *path, int inlines, mapset *ms)
{
    icpp_err err;
    if ((ms->nmaps || ms->ndirs) && mapset_prepare(ms, path, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    icpp_replay *rp = mapset_replay_open(ms, path, &err);
    if (!rp || mapset_apply_stacks(ms, rp) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", rp ? "out of memory" : err.msg);
        icpp_replay_close(rp);
        return 1;
    }
    icpp_rsample s;
    int rc;
    static const char *kinds[] = {"none", "startstack", "maptop", "inferred"};
    while ((rc = icpp_replay_next(rp, &s, &err)) > 0) {
        const icpp_replay_info *in = icpp_replay_info_get(rp);
        const icpp_rmodule *m = s.module >= 0 ? icpp_replay_module(rp, (uint32_t)s.module) : NULL;
        /* Names from the file, escaped (lib/escape.h): one line per sample. */
        char eb[256], mb[4096], fb[4096];
        printf("%u/%u %" PRIu64 " %s ip=%#" PRIx64 " sp=%#" PRIx64 " bp=%#" PRIx64 " base=%#" PRIx64 "(%s) height=%" PRId64
               " %s %s+%#" PRIx64 " %s",
               s.pid, s.tid, s.time, s.event < in->nevents ? icpp_escape(in->event_names[s.event], eb, sizeof eb) : "?",
               s.ip, s.sp, s.bp, s.base, kinds[s.base_kind & 3], s.status == ICPP_RS_OK ? s.height : 0,
               icpp_rs_status_name(s.status), m ? icpp_escape(m->path, mb, sizeof mb) : "-", s.addr,
               s.func ? icpp_escape(s.func->name, fb, sizeof fb) : "-");
        const char *names[PROF_MAX_INLINE];
        int n = inlines && s.func && m && m->mod ? icpp_module_inlines(m->mod, s.addr, names, PROF_MAX_INLINE) : 0;
        for (int i = 0; i < n; i++) {
            fputs(i ? ";" : " inlined=", stdout);
            icpp_escape_fputs(names[i], stdout);
        }
        putchar('\n');
    }
    const icpp_replay_info *in = icpp_replay_info_get(rp);
    if (rc < 0)
        fprintf(stderr, "icpp-resolve: %s: %s\n", path, err.msg);
    else
        prof_warn_incomplete(stderr, path, in);
    icpp_replay_close(rp);
    return rc < 0 ? 1 : 0;
}

/* -o OUT under the output rule (lib/fsafe.h): a new file beside OUT,
 * renamed over it once complete; NULL after saying why. */
static FILE *open_output(icpp_fs_out *o, const char *path)
{
    icpp_err err;
    if (icpp_fs_out_begin(o, path, ICPP_FS_MODE_PLAIN, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return NULL;
    }
    icpp_fs_out_remove_on_signal(o);
    FILE *f = icpp_fs_out_fopen(o);
    if (!f) {
        fprintf(stderr, "icpp-resolve: %s: %s\n", path, strerror(errno));
        icpp_fs_out_abort(o);
    }
    return f;
}

typedef enum { F_TEXT, F_TREE, F_FOLDED, F_JSON, F_SPEEDSCOPE, F_PPROF, F_SVG } fmt_t;

/* ---- debuginfod: within limits, progress on a terminal (docs/debuginfo.md) ---- */
static icpp_cli_progress dfd_prog;

static void dfd_progress(void *arg, const char *binary, long done, long total)
{
    (void)arg;
    if (!icpp_cli_progress_due(&dfd_prog))
        return;
    char e[512];
    if (total > 0)
        icpp_cli_progress_show(&dfd_prog, "debuginfod: the debug file of %s, %.1f of %.1f MiB",
                               icpp_escape(binary, e, sizeof e), done / 1048576.0, total / 1048576.0);
    else
        icpp_cli_progress_show(&dfd_prog, "debuginfod: asking for the debug file of %s (%.1f MiB so far)",
                               icpp_escape(binary, e, sizeof e), (done > 0 ? done : 0) / 1048576.0);
}

/* What the limits cut short, once at exit (stderr). */
static void dfd_note(void)
{
    icpp_cli_progress_end(&dfd_prog);
    icpp_dfd_stats st;
    icpp_debuginfo_stats(&st);
    if (st.timed_out || st.skipped)
        fprintf(stderr, "icpp-resolve: note: debuginfod: the time budget (%.0f s, --debuginfod-timeout) ran out: "
                "%u quer%s stopped, %u not made; those binaries keep fn_ADDR names\n", st.seconds,
                st.timed_out, st.timed_out == 1 ? "y" : "ies", st.skipped);
    if (st.too_big)
        fprintf(stderr, "icpp-resolve: note: debuginfod: %u answer%s larger than the size limit "
                "(DEBUGINFOD_MAXSIZE, 1 GiB by default) stopped and not kept\n", st.too_big, st.too_big == 1 ? "" : "s");
}

static void dfd_setup(int off, double budget, int quiet)
{
    icpp_cli_progress_init(&dfd_prog, "icpp-resolve", quiet);
    icpp_dfd_config c = {off, budget, 0, 1, dfd_progress, NULL};
    icpp_debuginfo_configure(&c);
    atexit(dfd_note);
}

int main(int argc, char **argv)
{
    /* Files a recording or map names are read with its owner's rights
     * (docs/file-safety.md, "Files named inside inputs"). */
    icpp_fs_named_guard();
    if (trend_requested(argc, argv)) {
        dfd_setup(0, 0, 0);
        return trend_main(argc, argv);
    }
    enum { OPT_SCRIPT = 256, OPT_CHECK_ONLY, OPT_FORMAT, OPT_FULL, OPT_SORT, OPT_MIN, OPT_CHECK, OPT_SITES, OPT_NOINLINE,
           OPT_NOLEARN, OPT_SAVEMAP, OPT_VOTES, OPT_EVIDENCE, OPT_COMPLETE, OPT_NOCOMPLETE, OPT_CSTATS, OPT_MAPDIR,
           OPT_FOLD, OPT_VERSION, OPT_NODFD, OPT_DFDTIME };
    static const struct option lo[] = {{"script", no_argument, 0, OPT_SCRIPT},
                                       {"map", required_argument, 0, 'm'},
                                       {"map-dir", required_argument, 0, OPT_MAPDIR},
                                       {"format", required_argument, 0, OPT_FORMAT},
                                       {"output", required_argument, 0, 'o'},
                                       {"full-paths", no_argument, 0, OPT_FULL},
                                       {"call-sites", no_argument, 0, OPT_SITES},
                                       {"no-inline", no_argument, 0, OPT_NOINLINE},
                                       {"sort", required_argument, 0, OPT_SORT},
                                       {"min", required_argument, 0, OPT_MIN},
                                       {"check", no_argument, 0, OPT_CHECK},
                                       {"check-only", required_argument, 0, OPT_CHECK_ONLY},
                                       {"no-learn", no_argument, 0, OPT_NOLEARN},
                                       {"save-map", required_argument, 0, OPT_SAVEMAP},
                                       {"learn-votes", required_argument, 0, OPT_VOTES},
                                       {"evidence", required_argument, 0, OPT_EVIDENCE},
                                       {"complete", no_argument, 0, OPT_COMPLETE},
                                       {"no-complete", no_argument, 0, OPT_NOCOMPLETE},
                                       {"complete-stats", no_argument, 0, OPT_CSTATS},
                                       {"fold-recursion", no_argument, 0, OPT_FOLD},
                                       {"no-debuginfod", no_argument, 0, OPT_NODFD},
                                       {"debuginfod-timeout", required_argument, 0, OPT_DFDTIME},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"version", no_argument, 0, OPT_VERSION},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int no_dfd = 0;
    double dfd_budget = 0;
    int c, quiet = 0, do_script = 0, check = 0, inlines = 1, learn = 1, complete = 1, cstats = 0, fold = 0;
    uint32_t votes = ICPP_LEARN_VOTES;
    int evidence = -1;
    const char *out_path = NULL, *sort_name = NULL, *save_map = NULL;
    mapset ms;
    mapset_init(&ms);
    icpp_err err;
    fmt_t fmt = F_TEXT;
    out_opts oo = {20, 0, 0, 0.5, 0};
    /* Every file read, for the same-file rule (lib/fsafe.h): -m maps, then the recording. */
    const char **inputs = malloc(((size_t)argc + 1) * sizeof *inputs);
    size_t ninputs = 0;
    if (!inputs) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return 1;
    }
    icpp_fs_remove_temps_on_signal();   /* -o's and --save-map's new files, not yet in place */
    while ((c = getopt_long(argc, argv, "m:o:n:qh", lo, NULL)) != -1) {
        switch (c) {
        case OPT_SCRIPT: do_script = 1; break;
        case 'm':
            inputs[ninputs++] = optarg;
            if (mapset_add_map(&ms, optarg, &err) < 0) {
                fprintf(stderr, "icpp-resolve: %s\n", err.msg);
                return 1;
            }
            break;
        case OPT_MAPDIR: mapset_add_dir(&ms, optarg, &err); break;
        case 'o': out_path = optarg; break;
        case 'n': {
            char *e;
            long v = strtol(optarg, &e, 10);
            if (*e || e == optarg || v < 0 || v > 100000000) {
                fprintf(stderr, "icpp-resolve: -n wants a count (0 = all), not '%s'\n", optarg);
                return 2;
            }
            oo.top = (int)v;
            break;
        }
        case OPT_FORMAT:
            if (!strcmp(optarg, "text")) fmt = F_TEXT;
            else if (!strcmp(optarg, "tree")) fmt = F_TREE;
            else if (!strcmp(optarg, "folded")) fmt = F_FOLDED;
            else if (!strcmp(optarg, "json")) fmt = F_JSON;
            else if (!strcmp(optarg, "speedscope")) fmt = F_SPEEDSCOPE;
            else if (!strcmp(optarg, "pprof")) fmt = F_PPROF;
            else if (!strcmp(optarg, "svg")) fmt = F_SVG;
            else {
                fprintf(stderr, "icpp-resolve: unknown format '%s' (text, tree, folded, json, speedscope, pprof, svg)\n",
                        optarg);
                return 2;
            }
            break;
        case OPT_FULL: oo.full = 1; break;
        case OPT_SITES: oo.sites = 1; break;
        case OPT_NOINLINE: inlines = 0; break;
        case OPT_SORT: sort_name = optarg; break;
        case OPT_MIN: {
            char *e;
            double v = strtod(optarg, &e);
            if (*e || e == optarg || !(v >= 0 && v <= 100)) {     /* NaN fails both */
                fprintf(stderr, "icpp-resolve: --min wants a percentage from 0 to 100, not '%s'\n", optarg);
                return 2;
            }
            oo.min_pct = v;
            break;
        }
        case OPT_CHECK: check = 1; break;
        case OPT_CHECK_ONLY: check = 1; check_only(optarg); break;
        case OPT_FOLD: fold = 1; break;
        case OPT_NOLEARN: learn = 0; break;
        case OPT_SAVEMAP: save_map = optarg; break;
        case OPT_VOTES: {
            char *e;
            long v = strtol(optarg, &e, 10);
            if (*e || e == optarg || v < 0 || v > 1000000) {
                fprintf(stderr, "icpp-resolve: --learn-votes wants a count (0 = off), not '%s'\n", optarg);
                return 2;
            }
            votes = (uint32_t)v;
            break;
        }
        case OPT_EVIDENCE:
            if (!strcmp(optarg, "auto"))
                evidence = -1;
            else if (!strcmp(optarg, "on"))
                evidence = 1;
            else if (!strcmp(optarg, "off"))
                evidence = 0;
            else {
                fprintf(stderr, "icpp-resolve: --evidence wants auto, on or off, not '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_COMPLETE: complete = 1; break;
        case OPT_NOCOMPLETE: complete = 0; break;
        case OPT_CSTATS: cstats = 1; break;
        case 'q': quiet = 1; break;
        case OPT_NODFD: no_dfd = 1; break;
        case OPT_DFDTIME: {
            char *e;
            double v = strtod(optarg, &e);
            if (*e || e == optarg || !(v > 0 && v <= 86400)) {     /* NaN fails both */
                fprintf(stderr, "icpp-resolve: --debuginfod-timeout wants seconds (more than 0, at most 86400), "
                                "not '%s'\n", optarg);
                return 2;
            }
            dfd_budget = v;
            break;
        }
        case OPT_VERSION: icpp_cli_version(stdout, "icpp-resolve"); return 0;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "icpp-resolve: give one sample file (see --help)\n");
        return 2;
    }
    const char *samples = argv[optind];
    dfd_setup(no_dfd, dfd_budget, quiet);
    inputs[ninputs++] = samples;
    /* The output rule and the same-file rule (lib/fsafe.h) before any work:
     * -o is none of the inputs; --save-map may be a map read (it adds to it),
     * never the recording. */
    if ((out_path && icpp_fs_output_check(out_path, &err) < 0) ||
        (save_map && icpp_fs_output_check(save_map, &err) < 0) ||
        (out_path && icpp_fs_output_not_input(out_path, inputs, ninputs, &err) < 0) ||
        (save_map && icpp_fs_output_not_input(save_map, &samples, 1, &err) < 0)) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    if (out_path && save_map &&
        (!strcmp(out_path, save_map) || icpp_fs_output_not_input(out_path, &save_map, 1, &err) < 0)) {
        fprintf(stderr, "icpp-resolve: -o and --save-map name the same file (%s): give each its own\n", out_path);
        return 1;
    }
    free(inputs);
    if (do_script) {
        int r = script(samples, inlines, &ms);
        mapset_free(&ms);
        return r;
    }
    ms.learn = learn;
    ms.votes = votes;
    ms.evidence = evidence;
    ms.allow_unmapped = check;
    ms.complete = complete;     /* a completer per map, on its own index (mapset_prepare) */
    if (mapset_prepare(&ms, samples, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        mapset_free(&ms);
        return 1;
    }
    /* -o against the maps found by name or in --map-dir too. */
    for (size_t i = 0; out_path && i < ms.nmaps; i++) {
        const char *mp = ms.maps[i].path;
        if (icpp_fs_output_not_input(out_path, &mp, 1, &err) < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            mapset_free(&ms);
            return 1;
        }
    }
    const icpp_pathmap *pm = ms.all;
    char map_path[4096];
    mapset_names(&ms, map_path, sizeof map_path);
    if (save_map && mapset_save_learned(&ms, save_map, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        mapset_free(&ms);
        return 1;
    }
    if (check) {
        FILE *co = stdout;
        icpp_fs_out cof;
        if (out_path && !(co = open_output(&cof, out_path)))
            return 1;
        int r = check_run(samples, &ms, co, fmt == F_JSON);
        if (co != stdout && (r == 0 ? icpp_fs_out_commit(&cof, &err) : (icpp_fs_out_abort(&cof), 0)) < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            r = 1;
        }
        mapset_free(&ms);
        return r;
    }
    icpp_replay *rp = mapset_replay_open(&ms, samples, &err);
    if (rp)
        icpp_replay_select(rp, ICPP_REPLAY_NO_FRAMES);     /* learning is done: their frames are not needed */
    if (!rp || mapset_apply_stacks(&ms, rp) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", rp ? "out of memory" : err.msg);
        return 1;
    }
    icpp_basevote *bv = mapset_infer_bases(&ms, samples, stderr, &err);
    if (!bv) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    profile prof;
    if (prof_init(&prof, pm, map_path, inlines) < 0) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return 1;
    }
    prof.learn = learn ? &ms.ls : NULL;
    prof.fold = fold;
    icpp_rsample s;
    icpp_resolution r;
    int rc;
    sampstat ss;    /* intervals between samples, per thread (sampstat.h) */
    sampstat_init(&ss, icpp_replay_info_get(rp));
    icpp_cli_progress prog;     /* samples resolved and how far into the file, on a terminal (lib/cli.h) */
    icpp_cli_progress_init(&prog, "icpp-resolve", quiet);
    uint64_t nread = 0;
    while ((rc = icpp_replay_next(rp, &s, &err)) > 0) {
        if (++nread % 4096 == 0 && icpp_cli_progress_due(&prog)) {     /* the clock every 4096 samples */
            size_t done, len;
            icpp_replay_position(rp, &done, &len);
            icpp_cli_progress_show(&prog, "%" PRIu64 " samples resolved, %.0f of %.0f MiB read", nread,
                                   (double)done / 1048576.0, (double)len / 1048576.0);
        }
        if (sampstat_add(&ss, &s) < 0) {
            fprintf(stderr, "icpp-resolve: out of memory\n");
            return 1;
        }
        icpp_basevote_apply(bv, &s);
        mapset_resolve(&ms, rp, &s, &r, NULL);
        if (prof_add(&prof, rp, &s, &r) < 0) {
            fprintf(stderr, "icpp-resolve: out of memory\n");
            return 1;
        }
    }
    icpp_cli_progress_end(&prog);
    if (rc < 0) {
        fprintf(stderr, "icpp-resolve: %s: %s\n", samples, err.msg);
        return 1;
    }
    icpp_cpl_stats cs;
    if (cstats && mapset_cpl_stats(&ms, &cs)) {     /* summed over the maps */
        fprintf(stderr, "icpp-resolve: completion: %" PRIu64 " missing (function, height) searched, %" PRIu64
                        " completed (%" PRIu64 " unique), %" PRIu64 " bounded by work, %" PRIu64 " cut at the frame bound, %" PRIu64
                        " open at an address-taken function; "
                        "search time mean %.1f us, worst %.1f us; %u call graphs built in %.0f ms\n",
                cs.queries, cs.found, cs.unique, cs.truncated, cs.cut, cs.open, cs.queries ? cs.total_us / (double)cs.queries : 0.0,
                cs.max_us, cs.graphs, cs.graph_ms);
    }
    if (prof_finish(&prof, rp) < 0) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return 1;
    }
    prof_warn_incomplete(stderr, samples, icpp_replay_info_get(rp));
    prof.ms = &ms;
    prof.ss = &ss;
    if (sort_name) {
        oo.sort_ev = UINT32_MAX;
        for (uint32_t e = 0; e < prof.nev; e++)
            if (!strcmp(prof.ev_names[e], sort_name))
                oo.sort_ev = e;
        if (oo.sort_ev == UINT32_MAX) {
            fprintf(stderr, "icpp-resolve: --sort %s: no such event in %s\n", sort_name, samples);
            return 2;
        }
    }
    FILE *out = stdout;
    icpp_fs_out of;
    if (out_path && !(out = open_output(&of, out_path)))
        return 1;
    switch (fmt) {
    case F_TEXT: out_text(&prof, out, &oo); break;
    case F_TREE: out_tree(&prof, out, &oo); break;
    case F_FOLDED: out_folded(&prof, out, &oo); break;
    case F_JSON: out_json(&prof, out, &oo); break;
    case F_SPEEDSCOPE: out_speedscope(&prof, out, &oo); break;
    case F_SVG: out_svg(&prof, out, &oo); break;
    case F_PPROF:
        if (out == stdout && isatty(1)) {
            fprintf(stderr, "icpp-resolve: pprof output is binary: give -o FILE.pb.gz\n");
            return 2;
        }
        if (out_pprof(&prof, out, &oo) < 0) {
            fprintf(stderr, "icpp-resolve: cannot write the pprof profile: %s\n", strerror(errno));
            if (out != stdout)
                icpp_fs_out_abort(&of);
            return 1;
        }
        break;
    }
    if (out != stdout) {
        if (icpp_fs_out_commit(&of, &err) < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            return 1;
        }
    } else if (ferror(out) | fflush(out)) {
        fprintf(stderr, "icpp-resolve: stdout: write failed: %s\n", strerror(errno));
        return 1;
    }
    prof_free(&prof);
    sampstat_free(&ss);
    icpp_replay_close(rp);
    icpp_basevote_free(bv);
    mapset_free(&ms);
    return 0;
}
