/* main.c -- icpp-resolve: sample files to call-path profiles. */
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
#include "run.h"
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

/* --script: one line per sample. */
static int script_sample(void *arg, run *r, icpp_rsample *s, icpp_err *err)
{
    (void)err;
    int inlines = *(const int *)arg;
    static const char *kinds[] = {"none", "startstack", "maptop", "inferred"};
    const icpp_replay_info *in = icpp_replay_info_get(r->rp);
    const icpp_rmodule *m = s->module >= 0 ? icpp_replay_module(r->rp, (uint32_t)s->module) : NULL;
    /* Names from the file, escaped (lib/escape.h): one line per sample. */
    char eb[256], mb[4096], fb[4096];
    printf("%u/%u %" PRIu64 " %s ip=%#" PRIx64 " sp=%#" PRIx64 " bp=%#" PRIx64 " base=%#" PRIx64 "(%s) height=%" PRId64
           " %s %s+%#" PRIx64 " %s",
           s->pid, s->tid, s->time, s->event < in->nevents ? icpp_escape(in->event_names[s->event], eb, sizeof eb) : "?",
           s->ip, s->sp, s->bp, s->base, kinds[s->base_kind & 3], s->status == ICPP_RS_OK ? s->height : 0,
           icpp_rs_status_name(s->status), m ? icpp_escape(m->path, mb, sizeof mb) : "-", s->addr,
           s->func ? icpp_escape(s->func->name, fb, sizeof fb) : "-");
    const char *names[PROF_MAX_INLINE];
    int n = inlines && s->func && m && m->mod ? icpp_module_inlines(m->mod, s->addr, names, PROF_MAX_INLINE) : 0;
    for (int i = 0; i < n; i++) {
        fputs(i ? ";" : " inlined=", stdout);
        icpp_escape_fputs(names[i], stdout);
    }
    putchar('\n');
    return 0;
}

/* ms: with maps given (-m, --map-dir), threads' own stacks are voted with
 * them (mapset.h), as the profile does; else each thread's first sample
 * decides.  The samples keep the recording's thread bases (no base vote). */
static int script(const char *path, int inlines, mapset *ms)
{
    icpp_err err;
    if ((ms->nmaps || ms->ndirs) && mapset_prepare(ms, path, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    run rn;
    if (run_open(&rn, ms, path, RUN_LEARN_FRAMES | RUN_NO_BASES, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        run_close(&rn);
        return 1;
    }
    int rc = run_each(&rn, script_sample, &inlines, &err);
    if (rc < 0)
        fprintf(stderr, "icpp-resolve: %s: %s\n", path, err.msg);
    else
        prof_warn_incomplete(stderr, path, icpp_replay_info_get(rn.rp));
    run_close(&rn);
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


/* The command line, parsed. */
typedef struct ropts {
    const char  *samples, *out_path, *sort_name, *save_map;
    int          quiet, do_script, check, inlines, learn, complete, cstats, fold, evidence, no_dfd;
    uint32_t     votes;
    double       dfd_budget;
    fmt_t        fmt;
    out_opts     oo;
    const char **inputs;        /* every file read, for the same-file rule (lib/fsafe.h): -m maps, then the recording */
    size_t       ninputs;
} ropts;

enum { OPT_SCRIPT = 256, OPT_CHECK_ONLY, OPT_FORMAT, OPT_FULL, OPT_SORT, OPT_MIN, OPT_CHECK, OPT_SITES, OPT_NOINLINE,
       OPT_NOLEARN, OPT_SAVEMAP, OPT_VOTES, OPT_EVIDENCE, OPT_COMPLETE, OPT_NOCOMPLETE, OPT_CSTATS, OPT_MAPDIR,
       OPT_FOLD, OPT_VERSION, OPT_NODFD, OPT_DFDTIME };

/* One option (getopt_long's c) into o; -1 to go on, else the exit status. */
static int parse_opt(int c, ropts *o, mapset *ms)
{
    icpp_err err;
    long v;
    double d;
    switch (c) {
    case OPT_SCRIPT: o->do_script = 1; break;
    case 'm':
        o->inputs[o->ninputs++] = optarg;
        if (mapset_add_map(ms, optarg, &err) < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            return 1;
        }
        break;
    case OPT_MAPDIR: mapset_add_dir(ms, optarg, &err); break;  /* out of memory ignored (mapset.h: run.h's drifts) */
    case 'o': o->out_path = optarg; break;
    case 'n':
        if (icpp_cli_long(optarg, 0, 100000000, &v) < 0) {
            fprintf(stderr, "icpp-resolve: -n wants a count (0 = all), not '%s'\n", optarg);
            return 2;
        }
        o->oo.top = (int)v;
        break;
    case OPT_FORMAT: {
        static const char *const fmts[] = {"text", "tree", "folded", "json", "speedscope", "pprof", "svg"};
        static const fmt_t fv[] = {F_TEXT, F_TREE, F_FOLDED, F_JSON, F_SPEEDSCOPE, F_PPROF, F_SVG};
        size_t i = 0;
        while (i < sizeof fmts / sizeof *fmts && strcmp(optarg, fmts[i]))
            i++;
        if (i == sizeof fmts / sizeof *fmts) {
            fprintf(stderr, "icpp-resolve: unknown format '%s' (text, tree, folded, json, speedscope, pprof, svg)\n",
                    optarg);
            return 2;
        }
        o->fmt = fv[i];
        break;
    }
    case OPT_FULL: o->oo.full = 1; break;
    case OPT_SITES: o->oo.sites = 1; break;
    case OPT_NOINLINE: o->inlines = 0; break;
    case OPT_SORT: o->sort_name = optarg; break;
    case OPT_MIN:
        if (icpp_cli_double(optarg, &d) < 0 || !(d >= 0 && d <= 100)) {     /* NaN fails both */
            fprintf(stderr, "icpp-resolve: --min wants a percentage from 0 to 100, not '%s'\n", optarg);
            return 2;
        }
        o->oo.min_pct = d;
        break;
    case OPT_CHECK: o->check = 1; break;
    case OPT_CHECK_ONLY: o->check = 1; check_only(optarg); break;
    case OPT_FOLD: o->fold = 1; break;
    case OPT_NOLEARN: o->learn = 0; break;
    case OPT_SAVEMAP: o->save_map = optarg; break;
    case OPT_VOTES:
        if (icpp_cli_long(optarg, 0, 1000000, &v) < 0) {
            fprintf(stderr, "icpp-resolve: --learn-votes wants a count (0 = off), not '%s'\n", optarg);
            return 2;
        }
        o->votes = (uint32_t)v;
        break;
    case OPT_EVIDENCE:
        if (!strcmp(optarg, "auto"))
            o->evidence = -1;
        else if (!strcmp(optarg, "on"))
            o->evidence = 1;
        else if (!strcmp(optarg, "off"))
            o->evidence = 0;
        else {
            fprintf(stderr, "icpp-resolve: --evidence wants auto, on or off, not '%s'\n", optarg);
            return 2;
        }
        break;
    case OPT_COMPLETE: o->complete = 1; break;
    case OPT_NOCOMPLETE: o->complete = 0; break;
    case OPT_CSTATS: o->cstats = 1; break;
    case 'q': o->quiet = 1; break;
    case OPT_NODFD: o->no_dfd = 1; break;
    case OPT_DFDTIME:
        if (icpp_cli_double(optarg, &d) < 0 || !(d > 0 && d <= 86400)) {     /* NaN fails both */
            fprintf(stderr, "icpp-resolve: --debuginfod-timeout wants seconds (more than 0, at most 86400), "
                            "not '%s'\n", optarg);
            return 2;
        }
        o->dfd_budget = d;
        break;
    case OPT_VERSION: icpp_cli_version(stdout, "icpp-resolve"); return 0;
    case 'h': fputs(usage_text, stdout); return 0;
    default: fputs(usage_text, stderr); return 2;
    }
    return -1;
}

/* The command line into o, -m maps read into ms; -1 to go on, else the
 * exit status (after saying why). */
static int parse_args(int argc, char **argv, ropts *o, mapset *ms)
{
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
    *o = (ropts){.inlines = 1, .learn = 1, .complete = 1, .evidence = -1, .votes = ICPP_LEARN_VOTES,
                 .fmt = F_TEXT, .oo = {20, 0, 0, 0.5, 0}};
    o->inputs = malloc(((size_t)argc + 1) * sizeof *o->inputs);
    if (!o->inputs) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return 1;
    }
    icpp_fs_remove_temps_on_signal();   /* -o's and --save-map's new files, not yet in place */
    int c, st;
    while ((c = getopt_long(argc, argv, "m:o:n:qh", lo, NULL)) != -1)
        if ((st = parse_opt(c, o, ms)) >= 0)
            return st;
    if (optind != argc - 1) {
        fprintf(stderr, "icpp-resolve: give one sample file (see --help)\n");
        return 2;
    }
    o->samples = argv[optind];
    return -1;
}

/* The output rule and the same-file rule (lib/fsafe.h) before any work:
 * -o is none of the inputs; --save-map may be a map read (it adds to it),
 * never the recording.  0, or the exit status after saying why. */
static int check_outputs(ropts *o)
{
    icpp_err err;
    o->inputs[o->ninputs++] = o->samples;
    if ((o->out_path && icpp_fs_output_check(o->out_path, &err) < 0) ||
        (o->save_map && icpp_fs_output_check(o->save_map, &err) < 0) ||
        (o->out_path && icpp_fs_output_not_input(o->out_path, o->inputs, o->ninputs, &err) < 0) ||
        (o->save_map && icpp_fs_output_not_input(o->save_map, &o->samples, 1, &err) < 0)) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    if (o->out_path && o->save_map &&
        (!strcmp(o->out_path, o->save_map) || icpp_fs_output_not_input(o->out_path, &o->save_map, 1, &err) < 0)) {
        fprintf(stderr, "icpp-resolve: -o and --save-map name the same file (%s): give each its own\n", o->out_path);
        return 1;
    }
    free(o->inputs);
    o->inputs = NULL;
    return 0;
}

/* The maps of the recording's executables (mapset_prepare), -o against
 * those found by name or in --map-dir too, --save-map written.  0, or the
 * exit status after saying why. */
static int prepare_maps(const ropts *o, mapset *ms)
{
    icpp_err err;
    ms->learn = o->learn;
    ms->votes = o->votes;
    ms->evidence = o->evidence;
    ms->allow_unmapped = o->check;
    ms->complete = o->complete;     /* a completer per map, on its own index (mapset_prepare) */
    int bad = mapset_prepare(ms, o->samples, &err) < 0;
    for (size_t i = 0; !bad && o->out_path && i < ms->nmaps; i++) {
        const char *mp = ms->maps[i].path;
        bad = icpp_fs_output_not_input(o->out_path, &mp, 1, &err) < 0;
    }
    bad = bad || (o->save_map && mapset_save_learned(ms, o->save_map, &err) < 0);
    if (bad) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        mapset_free(ms);
        return 1;
    }
    return 0;
}

/* --check, to -o or stdout; the exit status. */
static int check_mode(const ropts *o, mapset *ms)
{
    icpp_err err;
    FILE *co = stdout;
    icpp_fs_out cof;
    if (o->out_path && !(co = open_output(&cof, o->out_path)))
        return 1;
    int r = check_run(o->samples, ms, co, o->fmt == F_JSON);
    if (co != stdout && (r == 0 ? icpp_fs_out_commit(&cof, &err) : (icpp_fs_out_abort(&cof), 0)) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        r = 1;
    }
    mapset_free(ms);
    return r;
}

/* --complete-stats: the completion search's figures, summed over the maps, on stderr. */
static void print_cpl_stats(const mapset *ms)
{
    icpp_cpl_stats cs;
    if (!mapset_cpl_stats(ms, &cs))
        return;
    fprintf(stderr, "icpp-resolve: completion: %" PRIu64 " missing (function, height) searched, %" PRIu64
                    " completed (%" PRIu64 " unique), %" PRIu64 " bounded by work, %" PRIu64 " cut at the frame bound, %" PRIu64
                    " open at an address-taken function; "
                    "search time mean %.1f us, worst %.1f us; %u call graphs built in %.0f ms\n",
            cs.queries, cs.found, cs.unique, cs.truncated, cs.cut, cs.open, cs.queries ? cs.total_us / (double)cs.queries : 0.0,
            cs.max_us, cs.graphs, cs.graph_ms);
}

/* Every sample resolved into prof (and its intervals into ss) over the
 * pass rn, which this opens; -1 when done, else the exit status after
 * saying why. */
static int resolve_profile(const ropts *o, mapset *ms, const char *map_path, run *rn, profile *prof, sampstat *ss)
{
    icpp_err err;
    if (run_open(rn, ms, o->samples, 0, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    if (prof_init(prof, ms->all, map_path, o->inlines) < 0) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return 1;
    }
    prof->learn = o->learn ? &ms->ls : NULL;
    prof->fold = o->fold;
    sampstat_init(ss, icpp_replay_info_get(rn->rp));
    icpp_cli_progress prog;     /* samples resolved and how far into the file, on a terminal (lib/cli.h) */
    icpp_cli_progress_init(&prog, "icpp-resolve", o->quiet);
    rn->prog = &prog;
    int rc = run_profile(rn, prof, ss, &err);
    icpp_cli_progress_end(&prog);
    rn->prog = NULL;
    if (rc == RUN_ERR_READ)
        fprintf(stderr, "icpp-resolve: %s: %s\n", o->samples, err.msg);
    else if (rc < 0)
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
    if (rc < 0)
        return 1;
    if (o->cstats)
        print_cpl_stats(ms);
    if (prof_finish(prof, rn->rp) < 0) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return 1;
    }
    prof_warn_incomplete(stderr, o->samples, icpp_replay_info_get(rn->rp));
    prof->ms = ms;
    prof->ss = ss;
    return -1;
}

/* The profile in o's format, to -o or stdout; the exit status. */
static int write_profile(const ropts *o, profile *prof)
{
    icpp_err err;
    out_opts oo = o->oo;
    if (o->sort_name) {
        oo.sort_ev = UINT32_MAX;
        for (uint32_t e = 0; e < prof->nev; e++)
            if (!strcmp(prof->ev_names[e], o->sort_name))
                oo.sort_ev = e;
        if (oo.sort_ev == UINT32_MAX) {
            fprintf(stderr, "icpp-resolve: --sort %s: no such event in %s\n", o->sort_name, o->samples);
            return 2;
        }
    }
    FILE *out = stdout;
    icpp_fs_out of;
    if (o->out_path && !(out = open_output(&of, o->out_path)))
        return 1;
    switch (o->fmt) {
    case F_TEXT: out_text(prof, out, &oo); break;
    case F_TREE: out_tree(prof, out, &oo); break;
    case F_FOLDED: out_folded(prof, out, &oo); break;
    case F_JSON: out_json(prof, out, &oo); break;
    case F_SPEEDSCOPE: out_speedscope(prof, out, &oo); break;
    case F_SVG: out_svg(prof, out, &oo); break;
    case F_PPROF:
        if (out == stdout && isatty(1)) {
            fprintf(stderr, "icpp-resolve: pprof output is binary: give -o FILE.pb.gz\n");
            return 2;
        }
        if (out_pprof(prof, out, &oo) < 0) {
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
    return 0;
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
    ropts o;
    mapset ms;
    mapset_init(&ms);
    int st = parse_args(argc, argv, &o, &ms);
    if (st >= 0)
        return st;
    dfd_setup(o.no_dfd, o.dfd_budget, o.quiet);
    if ((st = check_outputs(&o)))
        return st;
    if (o.do_script) {
        st = script(o.samples, o.inlines, &ms);
        mapset_free(&ms);
        return st;
    }
    if ((st = prepare_maps(&o, &ms)))
        return st;
    char map_path[4096];
    mapset_names(&ms, map_path, sizeof map_path);
    if (o.check)
        return check_mode(&o, &ms);
    run rn;
    profile prof;
    sampstat ss;    /* intervals between samples, per thread (sampstat.h) */
    if ((st = resolve_profile(&o, &ms, map_path, &rn, &prof, &ss)) >= 0 || (st = write_profile(&o, &prof)))
        return st;
    prof_free(&prof);
    sampstat_free(&ss);
    run_close(&rn);
    mapset_free(&ms);
    return 0;
}
