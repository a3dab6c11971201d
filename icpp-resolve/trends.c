/* trends.c -- icpp-resolve --trend: how each call path's cost grows across runs of one program, against a workload feature (docs/trend.md). */
#include "trends.h"

#include "cli.h"
#include "escape.h"
#include "fsafe.h"
#include "hmap.h"
#include "mapset.h"
#include "module.h"
#include "output.h"
#include "profile.h"
#include "replay.h"
#include "run.h"
#include "runinfo.h"
#include "trend.h"
#include "vec.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *usage_text =
    "usage: icpp-resolve --trend [-m MAP...] [--map-dir DIR] [--feature NAME[=V1,V2,...]]\n"
    "                    [--format text|json] [-n N] [--rank 10x|exponent]\n"
    "                    [--min-samples N] [--plots DIR] [-o OUT] RUN1 RUN2 RUN3 ...\n"
    "\n"
    "How the cost of every call path grows with a workload feature, over runs of\n"
    "one program (sample files of icpp-sample, or perf.data files), each resolved\n"
    "as icpp-resolve resolves one. Per path and event: its total (inclusive) and\n"
    "self cost per run (samples x period), fitted as constant, linear (a + b x)\n"
    "and power law (a x^b: a robust count regression, runs without a sample\n"
    "counted as zeros), one model chosen by a score that prefers the simpler\n"
    "model unless the fit is clearly better; 95% bootstrap intervals (1000\n"
    "resamples of the runs, fixed seed) on the exponent b and on the cost\n"
    "predicted at 10x the largest feature value. Paths whose exponent is\n"
    "significantly above the program total's are flagged; paths whose costs\n"
    "follow each other up to a factor form a group (docs/trend.md).\n"
    "\n"
    "  --feature NAME    the feature to fit against (default: the one feature\n"
    "                    all runs carry; icpp-sample --feature NAME=VALUE, or\n"
    "                    bytes=, the size of the command's one input file).\n"
    "  --feature NAME=V1,V2,...  the feature's values for the runs, in order\n"
    "                    (instead of the files' own).\n"
    "  --format FORMAT   text (default): the table; json: everything, for scripts.\n"
    "  -n N              rows in the table and plots written (default 20, 0 = all).\n"
    "  --rank KEY        10x (default): by the cost predicted at 10x the largest\n"
    "                    feature value; exponent: by the exponent.\n"
    "  --min-samples N   fit paths with at least N samples over all runs\n"
    "                    (default 20) and samples in 3 runs or more.\n"
    "  --plots DIR       a log-log plot with the fit and the residuals per row,\n"
    "                    DIR/trend-RANK.svg (self-contained SVG; DIR is created).\n"
    "  -m, --map MAP, --map-dir DIR, --no-learn, --no-complete, --no-inline\n"
    "                    as for one recording (icpp-resolve --help).\n"
    "  -o, --output OUT  write there instead of standard output.\n"
    "  -q, --quiet       no progress line (on a terminal, the runs resolved so far).\n"
    "  --version         print icpp-resolve's version.\n"
    "  -h, --help        this text.\n";

#define MIN_RUNS 3      /* distinct feature values a fit needs to mean anything */

typedef struct topts {
    const char **maps, **dirs;
    size_t       nmaps, ndirs;
    int          learn, complete, inlines, json, top, by_exp, quiet;
    double       min_samples;
    const char  *feature;           /* NAME or NAME=V1,... */
    const char  *plots, *out;
} topts;

/* A call path seen in some run: its samples per (run, event). */
typedef struct tseries {
    char   *key;                    /* frames ';'-separated, escaped (prof_path_str) */
    double *incl, *self;            /* [run * nev + ev] */
} tseries;

/* One fitted (path, event). */
typedef struct tfit {
    uint32_t        series, ev;
    icpp_trend_fit  total, self;
    int             has_self;
    double          above;          /* lower end of the 95% interval of exponent - the program's */
    uint32_t        group;          /* 1, 2, ... */
    uint32_t        rank10, rankexp;
    double          maxcost;
} tfit;

typedef struct trend_ctx {
    size_t          nruns;
    char          **runs;
    double         *x;              /* feature value per run */
    char            feature[ICPP_FEATURE_NAME_MAX];
    uint32_t        nev;
    char            evname[ICPP_RUNINFO_EVENTS][128];
    const char     *unit[ICPP_RUNINFO_EVENTS];
    double         *evcost;         /* [run * nev + ev]: what one sample stands for */
    double         *prog;           /* [run * nev + ev]: all samples of the run */
    icpp_trend_fit  progfit[ICPP_RUNINFO_EVENTS];
    double         *progboot;       /* [ev * ICPP_TREND_BOOT] */
    tseries        *ser;
    size_t          nser, capser;
    icpp_hmap       ix;             /* (hash, probe) -> series */
    tfit           *fits;
    size_t          nfits;
    uint32_t        ngroups;
    char            binary[1024], build_id[2 * ICPP_BUILD_ID_MAX + 1], map[1024];
    icpp_build_id   bid;            /* the first run's binary (binary and build_id: as shown) */
} trend_ctx;

int trend_requested(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--trend"))
            return 1;
    return 0;
}

/* ---- options and run headers ---- */

static int push(const char ***v, size_t *n, const char *s)
{
    const char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    nv[(*n)++] = s;
    *v = nv;
    return 0;
}

static int parse_count(const char *opt, const char *s, double max, double *out)
{
    double v;
    if (icpp_cli_double(s, &v) < 0 || !(v >= 0 && v <= max) || v != floor(v)) {
        fprintf(stderr, "icpp-resolve: %s wants a count, not '%s'\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Which feature, and its value per run: --feature NAME=V1,... or the files'. */
static int choose_feature(trend_ctx *t, const topts *o, const icpp_runinfo *ri)
{
    const char *eq = o->feature ? strchr(o->feature, '=') : NULL;
    if (eq) {
        size_t nl = (size_t)(eq - o->feature);
        snprintf(t->feature, sizeof t->feature, "%.*s", (int)(nl < sizeof t->feature ? nl : sizeof t->feature - 1),
                 o->feature);
        const char *p = eq + 1;
        size_t k = 0;
        while (*p) {
            char item[ICPP_FEATURE_NAME_MAX + 64];
            size_t l = strcspn(p, ",");
            snprintf(item, sizeof item, "%s=%.*s", t->feature, (int)(l < 60 ? l : 60), p);
            icpp_feature f;
            icpp_err err;
            if (k == t->nruns || icpp_feature_parse(item, &f, &err) < 0) {
                fprintf(stderr, "icpp-resolve: --feature %s: %s\n", t->feature,
                        k == t->nruns ? "more values than runs" : err.msg);
                return -1;
            }
            t->x[k++] = f.value;
            p += l + (p[l] == ',');
        }
        if (k != t->nruns) {
            fprintf(stderr, "icpp-resolve: --feature %s: %zu values for %zu runs\n", t->feature, k, t->nruns);
            return -1;
        }
        return 0;
    }
    if (o->feature) {
        snprintf(t->feature, sizeof t->feature, "%s", o->feature);
    } else {
        /* the features every run carries */
        const char *common[ICPP_FEATURES_MAX];
        size_t nc = 0;
        for (size_t i = 0; i < ri[0].nfeat; i++) {
            size_t r = 1;
            while (r < t->nruns && icpp_runinfo_feature(&ri[r], ri[0].feat[i].name))
                r++;
            if (r == t->nruns)
                common[nc++] = ri[0].feat[i].name;
        }
        if (nc != 1) {
            char list[1024] = "";
            for (size_t i = 0, o2 = 0; i < nc && o2 < sizeof list; i++)
                o2 += (size_t)snprintf(list + o2, sizeof list - o2, "%s%s", i ? ", " : "", common[i]);
            if (nc)
                fprintf(stderr, "icpp-resolve: the runs carry several features (%s): choose one with --feature NAME\n",
                        list);
            else
                fprintf(stderr, "icpp-resolve: the runs share no workload feature: record them with icpp-sample "
                                "--feature NAME=VALUE, or give the values with --feature NAME=V1,V2,...\n");
            return -1;
        }
        snprintf(t->feature, sizeof t->feature, "%s", common[0]);
    }
    for (size_t r = 0; r < t->nruns; r++) {
        const icpp_feature *f = icpp_runinfo_feature(&ri[r], t->feature);
        if (!f) {
            char has[512] = "";
            for (size_t i = 0, o2 = 0; i < ri[r].nfeat && o2 < sizeof has; i++)
                o2 += (size_t)snprintf(has + o2, sizeof has - o2, "%s%s", i ? ", " : "", ri[r].feat[i].name);
            fprintf(stderr, "icpp-resolve: %s has no feature '%s' (it has: %s); give the values with --feature %s=V1,V2,...\n",
                    t->runs[r], t->feature, ri[r].nfeat ? has : "none", t->feature);
            return -1;
        }
        t->x[r] = f->value;
    }
    return 0;
}

/* Headers of every run, before any is resolved: features, events. */
static int read_headers(trend_ctx *t, const topts *o)
{
    icpp_runinfo *ri = calloc(t->nruns, sizeof *ri);
    if (!ri) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        return -1;
    }
    int rc = -1;
    for (size_t r = 0; r < t->nruns; r++) {
        icpp_err err;
        if (icpp_runinfo_read(t->runs[r], &ri[r], &err) < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            goto out;
        }
        if (!ri[r].nevents) {
            fprintf(stderr, "icpp-resolve: %s: no samples (no event)\n", t->runs[r]);
            goto out;
        }
        if (ri[r].nevents != ri[0].nevents) {
            fprintf(stderr, "icpp-resolve: %s samples %u events, %s %u: a trend compares runs of one recording setup\n",
                    t->runs[r], ri[r].nevents, t->runs[0], ri[0].nevents);
            goto out;
        }
        for (uint32_t e = 0; e < ri[r].nevents; e++) {
            const char *unit;
            icpp_run_event_cost(&ri[r].ev[e], &unit);
            if (strcmp(ri[r].ev[e].name, ri[0].ev[e].name) || (r && strcmp(unit, t->unit[e]))) {
                fprintf(stderr, "icpp-resolve: %s samples event %s (%s), %s event %s (%s): a trend compares runs of "
                                "one recording setup\n",
                        t->runs[r], ri[r].ev[e].name, unit, t->runs[0], ri[0].ev[e].name, t->unit[e]);
                goto out;
            }
            t->unit[e] = unit;
            snprintf(t->evname[e], sizeof t->evname[e], "%s", ri[r].ev[e].name);
        }
        t->nev = ri[0].nevents;
    }
    t->evcost = calloc(t->nruns * t->nev, sizeof *t->evcost);
    t->prog = calloc(t->nruns * t->nev, sizeof *t->prog);
    if (!t->evcost || !t->prog) {
        fprintf(stderr, "icpp-resolve: out of memory\n");
        goto out;
    }
    for (size_t r = 0; r < t->nruns; r++)
        for (uint32_t e = 0; e < t->nev; e++)
            t->evcost[r * t->nev + e] = icpp_run_event_cost(&ri[r].ev[e], &t->unit[e]);
    if (choose_feature(t, o, ri) < 0)
        goto out;
    size_t distinct = 0;
    for (size_t r = 0; r < t->nruns; r++) {
        if (!(t->x[r] > 0)) {
            fprintf(stderr, "icpp-resolve: %s: feature %s=%g: a trend needs positive values\n", t->runs[r], t->feature,
                    t->x[r]);
            goto out;
        }
        size_t q = 0;
        while (q < r && t->x[q] != t->x[r])
            q++;
        distinct += q == r;
    }
    if (distinct < MIN_RUNS) {
        fprintf(stderr, "icpp-resolve: --trend needs runs at %d or more values of %s, got %zu (better: 8 or more, "
                        "spanning two orders of magnitude)\n",
                MIN_RUNS, t->feature, distinct);
        goto out;
    }
    rc = 0;
out:
    free(ri);
    return rc;
}

/* ---- one run ---- */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* The series of path `key`, created (zero) if new; NULL when out of memory. */
static tseries *series_of(trend_ctx *t, const char *key)
{
    uint64_t h = str_hash(key), probe = 0, *v;
    for (; (v = icpp_hmap_get(&t->ix, h, probe)); probe++)
        if (!strcmp(t->ser[*v].key, key))
            return &t->ser[*v];
    if (icpp_vec_reserve((void **)&t->ser, &t->capser, t->nser + 1, sizeof *t->ser, 256) < 0)
        return NULL;
    tseries *s = &t->ser[t->nser];
    s->key = strdup(key);
    s->incl = calloc(2 * t->nruns * t->nev, sizeof *s->incl);
    if (!s->key || !s->incl || icpp_hmap_put(&t->ix, h, probe, t->nser) < 0) {
        free(s->key);
        free(s->incl);
        return NULL;
    }
    s->self = s->incl + t->nruns * t->nev;
    t->nser++;
    return s;
}

/* The binary and map of a run; a trend is of one program, resolved alike. */
static int same_program(trend_ctx *t, size_t r, const mapset *ms)
{
    if (!ms->nbins) {
        fprintf(stderr, "icpp-resolve: %s: no executable recorded\n", t->runs[r]);
        return -1;
    }
    const ms_bin *b = &ms->bins[0];
    char hex[2 * ICPP_BUILD_ID_MAX + 1], bb[1024], mb[1024];
    icpp_build_id_hex(&b->bid, hex, sizeof hex);
    const char *bin = icpp_escape(b->path, bb, sizeof bb);
    const char *map = icpp_escape(b->map >= 0 ? ms->maps[b->map].path : "(none)", mb, sizeof mb);
    if (!r) {
        snprintf(t->binary, sizeof t->binary, "%s", bin);
        snprintf(t->build_id, sizeof t->build_id, "%s", hex);
        t->bid = b->bid;
        snprintf(t->map, sizeof t->map, "%s", map);
        return 0;
    }
    if (!icpp_build_id_eq(&b->bid, &t->bid)) {     /* a mapset's binaries all have one */
        fprintf(stderr, "icpp-resolve: %s is a run of %s (build-id %s), %s of %s (build-id %s): a trend compares runs "
                        "of one binary\n",
                t->runs[r], bin, hex, t->runs[0], t->binary, t->build_id);
        return -1;
    }
    if (strcmp(map, t->map)) {
        fprintf(stderr, "icpp-resolve: %s was resolved with the map %s, %s with %s: give the one map with -m\n",
                t->runs[r], map, t->runs[0], t->map);
        return -1;
    }
    return 0;
}

/* The same-file rule (lib/fsafe.h): `out` is none of the recordings and
 * none of the maps given (`more`: the maps a run found, or NULL); 0, or -1
 * after saying why. */
static int not_an_input(const trend_ctx *t, const topts *o, const char *out, const mapset *more)
{
    icpp_err err;
    int bad = icpp_fs_output_not_input(out, (const char *const *)t->runs, t->nruns, &err) < 0 ||
              icpp_fs_output_not_input(out, o->maps, o->nmaps, &err) < 0;
    for (size_t i = 0; !bad && more && i < more->nmaps; i++) {
        const char *mp = more->maps[i].path;
        bad = icpp_fs_output_not_input(out, &mp, 1, &err) < 0;
    }
    if (bad)
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
    return bad ? -1 : 0;
}

/* Resolve run r as icpp-resolve resolves one recording, and add its paths'
 * samples to the series. */
static int resolve_run(trend_ctx *t, size_t r, const topts *o)
{
    const char *path = t->runs[r];
    icpp_err err;
    mapset ms;
    mapset_init(&ms);
    run rn = {0};
    profile prof;
    int have_prof = 0, rc = -1;
    for (size_t i = 0; i < o->nmaps; i++)
        if (mapset_add_map(&ms, o->maps[i], &err) < 0)
            goto fail;
    for (size_t i = 0; i < o->ndirs; i++)
        mapset_add_dir(&ms, o->dirs[i], &err);     /* out of memory ignored (run.h's drifts) */
    ms.learn = o->learn;
    ms.votes = ICPP_LEARN_VOTES;
    ms.complete = o->complete;
    if (mapset_prepare(&ms, path, &err) < 0) {
        icpp_err_prefix(&err, "%s", path);
        goto fail;
    }
    if (same_program(t, r, &ms) < 0 || (o->out && not_an_input(t, o, o->out, &ms) < 0))
        goto out;
    /* as the profile's pass, but as --trend always made it (run.h) */
    if (run_open(&rn, &ms, path, RUN_FRESH_MODULES | RUN_LEARN_FRAMES | RUN_QUIET_BASES, &err) < 0)
        goto fail;
    if (prof_init(&prof, ms.all, t->map, o->inlines) < 0) {
        icpp_err_set(&err, ENOMEM, "out of memory");
        goto fail;
    }
    have_prof = 1;
    prof.learn = o->learn ? &ms.ls : NULL;
    if (run_profile(&rn, &prof, NULL, &err) < 0) {
        icpp_err_prefix(&err, "%s", path);
        goto fail;
    }
    if (prof_finish(&prof, rn.rp) < 0) {
        icpp_err_set(&err, ENOMEM, "out of memory");
        goto fail;
    }
    prof_warn_incomplete(stderr, path, icpp_replay_info_get(rn.rp));
    /* events by name: the profile's order is the recording's */
    for (uint32_t e = 0; e < t->nev && e < prof.nev; e++)
        t->prog[r * t->nev + e] = prof_total(&prof, e);
    static char key[1 << 16];
    for (uint32_t f = 1; f < prof.nframes; f++) {
        tseries *sr = series_of(t, prof_path_str(&prof, f, ";", key, sizeof key));
        if (!sr) {
            icpp_err_set(&err, ENOMEM, "out of memory");
            goto fail;
        }
        for (uint32_t e = 0; e < t->nev && e < prof.nev; e++) {
            sr->incl[r * t->nev + e] += prof.incl[(size_t)f * PROF_MAX_EVENTS + e];
            sr->self[r * t->nev + e] += prof.self[(size_t)f * PROF_MAX_EVENTS + e];
        }
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "icpp-resolve: %s\n", err.msg);
out:
    if (have_prof)
        prof_free(&prof);
    run_close(&rn);
    mapset_free(&ms);
    return rc;
}

/* ---- fits, flags, groups, ranks ---- */

/* Fit the series of samples k[r * stride] (run r) of event ev, as costs. */
static int fit_samples(const trend_ctx *t, uint32_t ev, const double *k, size_t stride, icpp_trend_fit *f, double *boot)
{
    double y[t->nruns], per[t->nruns];
    for (size_t r = 0; r < t->nruns; r++) {
        per[r] = t->evcost[r * t->nev + ev];
        y[r] = k[r * stride] * per[r];
    }
    icpp_trend_series s = {t->nruns, t->x, y, per};
    icpp_err err;
    if (icpp_trend_fit_series(&s, f, boot, &err) < 0) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static const trend_ctx *sort_t;

static double cost_of(const trend_ctx *t, const tfit *f, size_t r)
{
    return t->ser[f->series].incl[r * t->nev + f->ev] * t->evcost[r * t->nev + f->ev];
}

static int by_variance(const void *a, const void *b)
{
    const tfit *x = *(tfit *const *)a, *y = *(tfit *const *)b;
    double vx = 0, vy = 0, mx = 0, my = 0;
    size_t n = sort_t->nruns;
    for (size_t r = 0; r < n; r++)
        mx += cost_of(sort_t, x, r) / (double)n, my += cost_of(sort_t, y, r) / (double)n;
    for (size_t r = 0; r < n; r++) {
        double dx = cost_of(sort_t, x, r) - mx, dy = cost_of(sort_t, y, r) - my;
        vx += dx * dx;
        vy += dy * dy;
    }
    return vx > vy ? -1 : vx < vy;
}

static int by_pred10(const void *a, const void *b)
{
    const tfit *x = *(tfit *const *)a, *y = *(tfit *const *)b;
    return x->total.pred10 > y->total.pred10 ? -1 : x->total.pred10 < y->total.pred10;
}

static int by_exponent(const void *a, const void *b)
{
    const tfit *x = *(tfit *const *)a, *y = *(tfit *const *)b;
    double ex = isnan(x->total.exponent) ? -INFINITY : x->total.exponent;
    double ey = isnan(y->total.exponent) ? -INFINITY : y->total.exponent;
    if (ex != ey)
        return ex > ey ? -1 : 1;
    return by_pred10(a, b);
}

/* BB-TrendProf's clustering (docs/trend.md): by decreasing variance, a path
 * joins the first group whose representative it follows both ways. */
static void group(trend_ctx *t, tfit **v, size_t n)
{
    sort_t = t;
    qsort(v, n, sizeof *v, by_variance);
    size_t *reps = malloc((n ? n : 1) * sizeof *reps), nreps = 0;
    double *a = malloc(2 * t->nruns * sizeof *a), *b = a ? a + t->nruns : NULL;
    if (!reps || !a) {
        free(reps);
        free(a);
        for (size_t i = 0; i < n; i++)
            v[i]->group = ++t->ngroups;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t r = 0; r < t->nruns; r++)
            a[r] = cost_of(t, v[i], r);
        size_t g = 0;
        for (; g < nreps; g++) {
            if (v[reps[g]]->ev != v[i]->ev)
                continue;
            for (size_t r = 0; r < t->nruns; r++)
                b[r] = cost_of(t, v[reps[g]], r);
            double r1 = icpp_trend_follow_r2(a, b, t->nruns), r2 = icpp_trend_follow_r2(b, a, t->nruns);
            if (r1 >= ICPP_TREND_GROUP_R2 && r2 >= ICPP_TREND_GROUP_R2)
                break;
        }
        if (g == nreps) {
            reps[nreps++] = i;
            v[i]->group = ++t->ngroups;
        } else {
            v[i]->group = v[reps[g]]->group;
        }
    }
    free(reps);
    free(a);
}

static int fit_all(trend_ctx *t, const topts *o, tfit ***order)
{
    double boot[ICPP_TREND_BOOT];
    t->progboot = malloc((size_t)t->nev * ICPP_TREND_BOOT * sizeof *t->progboot);
    t->fits = calloc(t->nser * t->nev + 1, sizeof *t->fits);
    if (!t->progboot || !t->fits)
        return -1;
    for (uint32_t e = 0; e < t->nev; e++)
        if (fit_samples(t, e, t->prog + e, t->nev, &t->progfit[e], t->progboot + (size_t)e * ICPP_TREND_BOOT) < 0)
            return -1;
    for (size_t i = 0; i < t->nser; i++)
        for (uint32_t e = 0; e < t->nev; e++) {
            const tseries *s = &t->ser[i];
            double sum = 0, self = 0;
            size_t with = 0;
            for (size_t r = 0; r < t->nruns; r++) {
                sum += s->incl[r * t->nev + e];
                self += s->self[r * t->nev + e];
                with += s->incl[r * t->nev + e] > 0;
            }
            if (sum < o->min_samples || with < MIN_RUNS)
                continue;
            tfit *f = &t->fits[t->nfits];
            f->series = (uint32_t)i;
            f->ev = e;
            if (fit_samples(t, e, s->incl + e, t->nev, &f->total, boot) < 0)
                return -1;
            f->above = icpp_trend_above(boot, t->progboot + (size_t)e * ICPP_TREND_BOOT);
            f->has_self = self >= o->min_samples;
            if (f->has_self && fit_samples(t, e, s->self + e, t->nev, &f->self, NULL) < 0)
                return -1;
            for (size_t r = 0; r < t->nruns; r++)
                if (cost_of(t, f, r) > f->maxcost)
                    f->maxcost = cost_of(t, f, r);
            t->nfits++;
        }
    tfit **v = malloc((t->nfits + 1) * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < t->nfits; i++)
        v[i] = &t->fits[i];
    group(t, v, t->nfits);
    qsort(v, t->nfits, sizeof *v, by_exponent);
    for (size_t i = 0; i < t->nfits; i++)
        v[i]->rankexp = (uint32_t)i + 1;
    qsort(v, t->nfits, sizeof *v, by_pred10);
    for (size_t i = 0; i < t->nfits; i++)
        v[i]->rank10 = (uint32_t)i + 1;
    if (o->by_exp)
        qsort(v, t->nfits, sizeof *v, by_exponent);
    *order = v;
    return 0;
}

/* ---- outputs ---- */

/* Scales worse than the program: the 95% paired bootstrap interval of
 * (exponent - the program's) lies above TREND_MARGIN (docs/trend.md). */
#define TREND_MARGIN 0.1

static int worse(const tfit *f)
{
    return f->above > TREND_MARGIN;
}

static double xmin_of(const trend_ctx *t)
{
    double m = t->x[0];
    for (size_t r = 1; r < t->nruns; r++)
        if (t->x[r] < m)
            m = t->x[r];
    return m;
}

static void out_table(const trend_ctx *t, tfit **v, const topts *o, FILE *f)
{
    fprintf(f, "# trend of %zu runs of %s (build-id %s) against %s = %g .. %g, map %s\n", t->nruns, t->binary,
            t->build_id, t->feature, xmin_of(t), t->progfit[0].x10 / 10, t->map);
    for (uint32_t e = 0; e < t->nev; e++) {
        const icpp_trend_fit *p = &t->progfit[e];
        fprintf(f, "# event %s (cost in %s): program total %s, exponent %.3f [%.3f, %.3f], predicted at %s=%g: %.4g %s\n",
                t->evname[e], t->unit[e], icpp_trend_model_name(p->model), p->exponent, p->exponent_lo,
                p->exponent_hi, t->feature, p->x10, p->pred10, t->unit[e]);
    }
    fprintf(f, "# %zu paths with >= %g samples fitted, %u groups; ranked by %s; '!' scales worse than the program\n",
            t->nfits, o->min_samples, t->ngroups, o->by_exp ? "exponent" : "the cost predicted at 10x");
    fprintf(f, "%5s %-8s %-24s %11s %11s %5s %5s %s%s\n", "rank", "model", "exponent [95% CI]", "@10x", "max", "runs",
            "group", t->nev > 1 ? "event " : "", "path");
    size_t rows = o->top && (size_t)o->top < t->nfits ? (size_t)o->top : t->nfits;
    for (size_t i = 0; i < rows; i++) {
        const tfit *x = v[i];
        char ci[64];
        snprintf(ci, sizeof ci, "%.3f [%.3f, %.3f]", x->total.exponent, x->total.exponent_lo, x->total.exponent_hi);
        fprintf(f, "%5zu %-8s %-24s %11.4g %11.4g %2u/%-2zu %5u %s%s%s%s\n", i + 1,
                icpp_trend_model_name(x->total.model), ci, x->total.pred10, x->maxcost,
                x->total.runs - x->total.zeros, t->nruns, x->group, t->nev > 1 ? t->evname[x->ev] : "",
                t->nev > 1 ? " " : "", t->ser[x->series].key, worse(x) ? "  !" : "");
    }
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

/* "KEY": [v[0], v[stride], ... n values], after sep. */
static void json_arr(FILE *f, const char *sep, const char *key, const double *v, size_t n, size_t stride)
{
    fprintf(f, "%s\"%s\": [", sep, key);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        json_num(f, v[i * stride]);
    }
    fputc(']', f);
}

/* "KEY": v, after sep. */
static void json_key(FILE *f, const char *sep, const char *key, double v)
{
    fprintf(f, "%s\"%s\": ", sep, key);
    json_num(f, v);
}

static void json_fit(FILE *f, const icpp_trend_fit *x)
{
    double ci[2] = {x->exponent_lo, x->exponent_hi}, pci[2] = {x->pred10_lo, x->pred10_hi};
    double lin[2] = {x->la, x->lb}, pw[2] = {x->pa, x->pb};
    fprintf(f, "\"model\": \"%s\"", icpp_trend_model_name(x->model));
    json_key(f, ", ", "exponent", x->exponent);
    json_arr(f, ", ", "exponent_ci", ci, 2, 1);
    json_key(f, ", ", "predicted_10x", x->pred10);
    json_arr(f, ", ", "predicted_10x_ci", pci, 2, 1);
    fprintf(f, ", \"runs\": %u, \"zero_runs\": %u", x->runs, x->zeros);
    json_key(f, ", ", "r2_power", x->r2_power);
    json_arr(f, ", \"fits\": {", "constant", &x->c, 1, 1);
    json_arr(f, ", ", "linear", lin, 2, 1);
    json_arr(f, ", ", "power", pw, 2, 1);
    json_arr(f, "}, ", "scores", x->score, ICPP_TREND_NMODELS, 1);
}

static void out_trend_json(const trend_ctx *t, tfit **v, const topts *o, FILE *f)
{
    fputs("{\"format\": \"icpp-resolve-trend\", \"version\": 1, \"binary\": ", f);
    json_str(f, t->binary);
    fputs(", \"build_id\": ", f);
    json_str(f, t->build_id);
    fputs(", \"map\": ", f);
    json_str(f, t->map);
    fputs(", \"feature\": ", f);
    json_str(f, t->feature);
    fprintf(f, ", \"rank\": \"%s\", \"min_samples\": %g, \"bootstrap\": %d,\n \"runs\": [", o->by_exp ? "exponent" : "10x",
            o->min_samples, ICPP_TREND_BOOT);
    for (size_t r = 0; r < t->nruns; r++) {
        fputs(r ? ", " : "", f);
        fputs("{\"file\": ", f);
        json_str(f, t->runs[r]);
        json_key(f, ", ", "value", t->x[r]);
        json_arr(f, ", ", "samples", t->prog + r * t->nev, t->nev, 1);
        fputc('}', f);
    }
    fputs("],\n \"events\": [", f);
    for (uint32_t e = 0; e < t->nev; e++) {
        fputs(e ? ",\n  " : "", f);
        fputs("{\"name\": ", f);
        json_str(f, t->evname[e]);
        fputs(", \"unit\": ", f);
        json_str(f, t->unit[e]);
        fputs(", \"program\": {", f);
        json_fit(f, &t->progfit[e]);
        fputs("}}", f);
    }
    fputs("],\n \"trends\": [", f);
    for (size_t i = 0; i < t->nfits; i++) {
        const tfit *x = v[i];
        const tseries *s = &t->ser[x->series];
        fputs(i ? ",\n  " : "\n  ", f);
        fputs("{\"path\": [", f);
        for (const char *p = s->key, *q; *p; p = *q ? q + 1 : q) {
            q = p + strcspn(p, ";");
            char nm[4096];
            snprintf(nm, sizeof nm, "%.*s", (int)(q - p), p);
            fputs(p != s->key ? ", " : "", f);
            json_str(f, nm);
        }
        fputs("], \"event\": ", f);
        json_str(f, t->evname[x->ev]);
        fputs(", ", f);
        json_fit(f, &x->total);
        fprintf(f, ", \"rank_10x\": %u, \"rank_exponent\": %u, \"group\": %u, \"scales_worse\": %s", x->rank10,
                x->rankexp, x->group, worse(x) ? "true" : "false");
        json_key(f, ", ", "above_program", x->above);
        double cost[t->nruns];
        for (size_t r = 0; r < t->nruns; r++)
            cost[r] = cost_of(t, x, r);
        json_arr(f, ", ", "cost", cost, t->nruns, 1);
        json_arr(f, ", ", "samples", s->incl + x->ev, t->nruns, t->nev);
        json_arr(f, ", ", "self_samples", s->self + x->ev, t->nruns, t->nev);
        fputs(", \"self\": ", f);
        if (x->has_self) {
            fputc('{', f);
            json_fit(f, &x->self);
            fputc('}', f);
        } else {
            fputs("null", f);
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
}

/* ---- plots ---- */

/* A log-log plot of one path's costs with the chosen fit (dashed beyond
 * the largest run, the 10x prediction with its interval) and, below, the
 * residuals ln(cost) - ln(fit) per run. */
static void plot_svg(const trend_ctx *t, const tfit *x, FILE *f)
{
    const icpp_trend_fit *fit = &x->total;
    const double W = 760, L = 90, PW = 620, T1 = 70, H1 = 300, T2 = 420, H2 = 120;
    double xlo = floor(log10(xmin_of(t))), xhi = ceil(log10(fit->x10));
    double ylo = INFINITY, yhi = -INFINITY;
    for (size_t r = 0; r < t->nruns; r++) {
        double y = cost_of(t, x, r);
        if (y > 0)
            ylo = fmin(ylo, log10(y)), yhi = fmax(yhi, log10(y));
    }
    double top = fmax(fit->pred10_hi, fit->pred10);
    if (top > 0 && isfinite(top))
        yhi = fmax(yhi, log10(top));
    if (!isfinite(ylo))
        ylo = 0, yhi = 1;
    ylo = floor(ylo);
    yhi = ceil(yhi);
    if (yhi <= ylo)
        yhi = ylo + 1;
    if (xhi <= xlo)
        xhi = xlo + 1;
#define PX(lx) (L + ((lx) - xlo) / (xhi - xlo) * PW)
#define PY(ly) (T1 + H1 - ((ly) - ylo) / (yhi - ylo) * H1)
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
               "height=\"%.0f\" font-family=\"monospace\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
               "fill=\"white\"/>\n<text x=\"10\" y=\"18\" font-size=\"12\">",
            W, T2 + H2 + 50);
    xml_put(f, t->ser[x->series].key, 120);
    fprintf(f, "</text>\n<text x=\"10\" y=\"36\">%s: %s, exponent %.3f [%.3f, %.3f], predicted at %s=%g: %.4g %s "
               "[%.4g, %.4g]%s</text>\n",
            t->evname[x->ev], icpp_trend_model_name(fit->model), fit->exponent, fit->exponent_lo, fit->exponent_hi,
            t->feature, fit->x10, fit->pred10, t->unit[x->ev], fit->pred10_lo, fit->pred10_hi,
            worse(x) ? "; scales worse than the program" : "");
    /* frames and decade grid */
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T1, PW, H1);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T2, PW, H2);
    for (double d = xlo; d <= xhi; d++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.0f\" "
                   "text-anchor=\"middle\">1e%.0f</text>\n",
                PX(d), T1, PX(d), T1 + H1, PX(d), T1 + H1 + 14, d);
    for (double d = ylo; d <= yhi; d++)
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/><text x=\"%.0f\" y=\"%.1f\" "
                   "text-anchor=\"end\">1e%.0f</text>\n",
                L, PY(d), L + PW, PY(d), L - 4, PY(d) + 4, d);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", L + PW / 2, T1 + H1 + 30, t->feature);
    fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">cost (%s)</text>\n",
            T1 + H1 / 2, T1 + H1 / 2, t->unit[x->ev]);
    /* the fit: solid over the runs, dashed to 10x */
    double x0 = xmin_of(t), xm = fit->x10 / 10;
    for (int part = 0; part < 2; part++) {
        double a = part ? xm : x0, b = part ? fit->x10 : xm;
        fprintf(f, "<polyline fill=\"none\" stroke=\"#c03\" stroke-width=\"1.5\"%s points=\"",
                part ? " stroke-dasharray=\"5,4\"" : "");
        for (int i = 0; i <= 64; i++) {
            double xv = a * pow(b / a, i / 64.0), yv = icpp_trend_predict(fit, fit->model, xv);
            if (yv > 0)
                fprintf(f, "%.1f,%.1f ", PX(log10(xv)), PY(fmin(fmax(log10(yv), ylo), yhi)));
        }
        fputs("\"/>\n", f);
    }
    if (fit->pred10_lo > 0 && fit->pred10_hi > 0)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c03\" stroke-width=\"3\"/>\n",
                PX(log10(fit->x10)), PY(fmax(log10(fit->pred10_lo), ylo)), PX(log10(fit->x10)),
                PY(fmin(log10(fit->pred10_hi), yhi)));
    /* the runs; a run without a sample on the lower edge, hollow */
    double rmax = 0.1;
    for (size_t r = 0; r < t->nruns; r++) {
        double y = cost_of(t, x, r), yf = icpp_trend_predict(fit, fit->model, t->x[r]);
        if (y > 0 && yf > 0)
            rmax = fmax(rmax, fabs(log(y) - log(yf)));
        if (y > 0)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#036\"/>\n", PX(log10(t->x[r])), PY(log10(y)));
        else
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"none\" stroke=\"#036\"/>\n", PX(log10(t->x[r])),
                    T1 + H1);
    }
    /* residuals */
#define RY(v) (T2 + H2 / 2 - (v) / rmax * (H2 / 2 - 6))
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#999\"/>\n", L, RY(0), L + PW, RY(0));
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">+%.2f</text><text x=\"%.0f\" y=\"%.1f\" "
               "text-anchor=\"end\">-%.2f</text>\n",
            L - 4, RY(rmax) + 4, rmax, L - 4, RY(-rmax) + 4, rmax);
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">residual ln(cost) - ln(fit) against %s</text>\n",
            L + PW / 2, T2 + H2 + 18, t->feature);
    for (size_t r = 0; r < t->nruns; r++) {
        double y = cost_of(t, x, r), yf = icpp_trend_predict(fit, fit->model, t->x[r]);
        if (y > 0 && yf > 0)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#036\"/>\n", PX(log10(t->x[r])),
                    RY(log(y) - log(yf)));
    }
    fputs("</svg>\n", f);
#undef PX
#undef PY
#undef RY
}

static int write_plots(const trend_ctx *t, tfit **v, const topts *o)
{
    if (mkdir(o->plots, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "icpp-resolve: --plots %s: %s\n", o->plots, strerror(errno));
        return -1;
    }
    size_t rows = o->top && (size_t)o->top < t->nfits ? (size_t)o->top : t->nfits;
    for (size_t i = 0; i < rows; i++) {
        char path[4096], *buf = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/trend-%02zu.svg", o->plots, i + 1);
        if (not_an_input(t, o, path, NULL) < 0)
            return -1;
        FILE *m = open_memstream(&buf, &len);
        if (!m) {
            fprintf(stderr, "icpp-resolve: out of memory\n");
            return -1;
        }
        plot_svg(t, v[i], m);
        fclose(m);
        icpp_err err;
        int rc = icpp_fs_write_file(path, buf, len, ICPP_FS_MODE_PLAIN, &err);
        free(buf);
        if (rc < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

/* ---- the mode ---- */

static void ctx_free(trend_ctx *t)
{
    for (size_t i = 0; i < t->nser; i++) {
        free(t->ser[i].key);
        free(t->ser[i].incl);
    }
    free(t->ser);
    icpp_hmap_free(&t->ix);
    free(t->x);
    free(t->evcost);
    free(t->prog);
    free(t->progboot);
    free(t->fits);
}

int trend_main(int argc, char **argv)
{
    enum { OPT_TREND = 256, OPT_MAPDIR, OPT_FEATURE, OPT_FORMAT, OPT_RANK, OPT_MIN, OPT_PLOTS, OPT_NOLEARN,
           OPT_NOCOMPLETE, OPT_NOINLINE, OPT_VERSION };
    static const struct option lo[] = {{"trend", no_argument, 0, OPT_TREND},
                                       {"map", required_argument, 0, 'm'},
                                       {"map-dir", required_argument, 0, OPT_MAPDIR},
                                       {"feature", required_argument, 0, OPT_FEATURE},
                                       {"format", required_argument, 0, OPT_FORMAT},
                                       {"rank", required_argument, 0, OPT_RANK},
                                       {"min-samples", required_argument, 0, OPT_MIN},
                                       {"plots", required_argument, 0, OPT_PLOTS},
                                       {"output", required_argument, 0, 'o'},
                                       {"no-learn", no_argument, 0, OPT_NOLEARN},
                                       {"no-complete", no_argument, 0, OPT_NOCOMPLETE},
                                       {"no-inline", no_argument, 0, OPT_NOINLINE},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"version", no_argument, 0, OPT_VERSION},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    topts o = {.learn = 1, .complete = 1, .inlines = 1, .top = 20, .min_samples = 20};
    int c, status = 1;
    double v;
    trend_ctx t;
    memset(&t, 0, sizeof t);
    icpp_hmap_init(&t.ix);
    while ((c = getopt_long(argc, argv, "m:o:n:qh", lo, NULL)) != -1) {
        switch (c) {
        case OPT_TREND: break;
        case 'm':
            if (push(&o.maps, &o.nmaps, optarg) < 0)
                goto oom;
            break;
        case OPT_MAPDIR:
            if (push(&o.dirs, &o.ndirs, optarg) < 0)
                goto oom;
            break;
        case OPT_FEATURE: o.feature = optarg; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "text") && strcmp(optarg, "json")) {
                fprintf(stderr, "icpp-resolve: --trend --format is text or json, not '%s'\n", optarg);
                return 2;
            }
            o.json = !strcmp(optarg, "json");
            break;
        case 'n':
            if (parse_count("-n", optarg, 1e8, &v) < 0)
                return 2;
            o.top = (int)v;
            break;
        case OPT_RANK:
            if (strcmp(optarg, "10x") && strcmp(optarg, "exponent")) {
                fprintf(stderr, "icpp-resolve: --rank is 10x or exponent, not '%s'\n", optarg);
                return 2;
            }
            o.by_exp = !strcmp(optarg, "exponent");
            break;
        case OPT_MIN:
            if (parse_count("--min-samples", optarg, 1e15, &o.min_samples) < 0)
                return 2;
            break;
        case OPT_PLOTS: o.plots = optarg; break;
        case 'o': o.out = optarg; break;
        case OPT_NOLEARN: o.learn = 0; break;
        case OPT_NOCOMPLETE: o.complete = 0; break;
        case OPT_NOINLINE: o.inlines = 0; break;
        case 'q': o.quiet = 1; break;
        case OPT_VERSION: icpp_cli_version(stdout, "icpp-resolve"); return 0;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    t.nruns = (size_t)(argc - optind);
    t.runs = argv + optind;
    if (t.nruns < MIN_RUNS) {
        fprintf(stderr, "icpp-resolve: --trend compares runs of one program at different feature values: give %d or "
                        "more recordings (got %zu)\n",
                MIN_RUNS, t.nruns);
        free(o.maps);
        free(o.dirs);
        return 2;
    }
    icpp_fs_remove_temps_on_signal();   /* -o's and the plots' new files, not yet in place */
    icpp_err err;
    if ((o.out && icpp_fs_output_check(o.out, &err) < 0)) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        goto out;
    }
    if (o.out && not_an_input(&t, &o, o.out, NULL) < 0)
        goto out;
    if (!(t.x = calloc(t.nruns, sizeof *t.x)))
        goto oom;
    if (read_headers(&t, &o) < 0)
        goto out;
    icpp_cli_progress prog;     /* a line per run resolved, on a terminal (lib/cli.h) */
    icpp_cli_progress_init(&prog, "icpp-resolve", o.quiet);
    for (size_t r = 0; r < t.nruns; r++) {
        if (icpp_cli_progress_due(&prog))
            icpp_cli_progress_show(&prog, "resolving run %zu of %zu", r + 1, t.nruns);
        int rr = resolve_run(&t, r, &o);
        if (rr < 0) {
            icpp_cli_progress_end(&prog);
            goto out;
        }
    }
    icpp_cli_progress_end(&prog);
    tfit **order = NULL;
    if (fit_all(&t, &o, &order) < 0) {
        free(order);
        goto oom;
    }
    FILE *f = stdout;
    icpp_fs_out of;
    if (o.out) {
        if (icpp_fs_out_begin(&of, o.out, ICPP_FS_MODE_PLAIN, &err) < 0 || !(f = icpp_fs_out_fopen(&of))) {
            fprintf(stderr, "icpp-resolve: %s\n", f ? err.msg : strerror(errno));
            free(order);
            goto out;
        }
    }
    if (o.json)
        out_trend_json(&t, order, &o, f);
    else
        out_table(&t, order, &o, f);
    status = 0;
    if (o.plots && write_plots(&t, order, &o) < 0)
        status = 1;
    free(order);
    if (o.out) {
        if ((status ? (icpp_fs_out_abort(&of), 0) : icpp_fs_out_commit(&of, &err)) < 0) {
            fprintf(stderr, "icpp-resolve: %s\n", err.msg);
            status = 1;
        }
    } else if (ferror(f) | fflush(f)) {
        fprintf(stderr, "icpp-resolve: stdout: write failed: %s\n", strerror(errno));
        status = 1;
    }
    goto out;
oom:
    fprintf(stderr, "icpp-resolve: out of memory\n");
    status = 1;
out:
    ctx_free(&t);
    free(o.maps);
    free(o.dirs);
    return status;
}
