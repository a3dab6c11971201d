/* sampstat.c -- icpp-resolve's sampling statistics: each path's confidence interval, which ranks are statistically ordered, and per-thread autocorrelation of the intervals between samples. */
#include "sampstat.h"

#include "escape.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sampstat_init(sampstat *st, const icpp_replay_info *info)
{
    memset(st, 0, sizeof *st);
    icpp_hmap_init(&st->ix);
    st->info = info;
}

void sampstat_free(sampstat *st)
{
    free(st->s);
    icpp_hmap_free(&st->ix);
    memset(st, 0, sizeof *st);
}

int sampstat_add(sampstat *st, const icpp_rsample *s)
{
    uint64_t k1 = (uint64_t)s->pid << 32 | s->tid, k2 = (uint64_t)s->event << 1 | (s->learn ? 1 : 0);
    /* runs of one thread's samples of one event are the rule: the hash is
     * asked when the key changes */
    if (!st->last_ix || st->last_k1 != k1 || st->last_k2 != k2) {
        uint64_t *ix = icpp_hmap_get(&st->ix, k1, k2);
        st->last_k1 = k1;
        st->last_k2 = k2;
        st->last_ix = ix ? (size_t)*ix + 1 : 0;
    }
    if (!st->last_ix) {
        if (icpp_vec_reserve((void **)&st->s, &st->cap, st->n + 1, sizeof *st->s, 16) < 0)
            return -ENOMEM;
        if (icpp_hmap_put(&st->ix, k1, k2, st->n) < 0)
            return -ENOMEM;
        sampstat_series *n = &st->s[st->n++];
        memset(n, 0, sizeof *n);
        n->pid = s->pid;
        n->tid = s->tid;
        n->event = s->event;
        n->learn = s->learn != 0;
        n->last = s->time;
        icpp_acf_init(&n->acf);
        st->last_ix = st->n;
        return 0;
    }
    sampstat_series *n = &st->s[st->last_ix - 1];
    /* a time that goes back (a corrupt or hand-made file) is no interval */
    if (s->time >= n->last) {
        double d = (double)(s->time - n->last);
        if (n->acf.n >= 16 && d > SAMPSTAT_GAP * n->typical) {
            n->gaps++;
        } else {
            icpp_acf_add(&n->acf, d);
            n->typical = n->acf.n < 64 ? icpp_acf_mean(&n->acf) : n->typical + (d - n->typical) / 64;
        }
    }
    n->last = s->time;
    return 0;
}

static const char *ev_name(const sampstat *st, uint32_t ev, char *buf, size_t sz)
{
    if (st->info && ev < st->info->nevents)
        return icpp_escape(st->info->event_names[ev], buf, sz);
    snprintf(buf, sz, "event %u", ev);
    return buf;
}

size_t sampstat_describe(const sampstat *st, FILE *f, const char *lead)
{
    size_t judged = 0, periodic = 0, corr = 0;
    double rmin = 1, rmax = 0;
    for (size_t i = 0; i < st->n; i++) {
        icpp_acf_verdict v;
        icpp_acf_judge(&st->s[i].acf, &v);
        judged += st->s[i].acf.n >= ICPP_ACF_MIN_N;
        if (v.periodic) {
            periodic++;
            rmin = v.repeat_share < rmin ? v.repeat_share : rmin;
            rmax = v.repeat_share > rmax ? v.repeat_share : rmax;
        }
    }
    if (periodic)
        fprintf(f,
                "%ssampling: a fixed period in %zu of %zu series of samples (per thread and event: %.0f-%.0f%% of "
                "the intervals repeat the one before within 1%%): the samples can fall in lockstep with a rhythm of "
                "the program; icpp-sample --jitter R randomizes them\n",
                lead, periodic, judged, 100 * rmin, 100 * rmax);
    for (size_t i = 0; i < st->n; i++) {
        const sampstat_series *s = &st->s[i];
        icpp_acf_verdict v;
        icpp_acf_judge(&s->acf, &v);
        if (!v.lockstep || v.periodic)
            continue;
        if (corr++ < 3) {
            char eb[160];
            fprintf(f,
                    "%ssampling: thread %u/%u, %s%s: the intervals between samples are autocorrelated (r = %.2f at "
                    "lag %d over %" PRIu64 " intervals; independent ones stay within +-%.2f): the samples follow a "
                    "rhythm -- the program's, or the machine's load -- and may be in lockstep with it\n",
                    lead, s->pid, s->tid, ev_name(st, s->event, eb, sizeof eb), s->learn ? " learn samples" : "", v.r,
                    v.lag, s->acf.n, v.bound);
        }
    }
    if (corr > 3)
        fprintf(f, "%ssampling: %zu more series of autocorrelated intervals (--format json lists them)\n", lead,
                corr - 3);
    return periodic + corr;
}

void sampstat_json(const sampstat *st, FILE *f)
{
    fprintf(f, "{\"threads\": [");
    for (size_t i = 0; i < st->n; i++) {
        const sampstat_series *s = &st->s[i];
        icpp_acf_verdict v;
        icpp_acf_judge(&s->acf, &v);
        fprintf(f,
                "%s\n    {\"pid\": %u, \"tid\": %u, \"event\": %u, \"learn\": %s, \"intervals\": %" PRIu64
                ", \"gaps\": %" PRIu64 ", \"mean_ns\": %.0f, \"cv\": %.4f, \"repeats\": %.4f, \"max_autocorrelation\": %.4f, \"lag\": %d, "
                "\"bound\": %.4f, \"periodic\": %s, \"lockstep\": %s}",
                i ? "," : "", s->pid, s->tid, s->event, s->learn ? "true" : "false", s->acf.n, s->gaps, icpp_acf_mean(&s->acf),
                icpp_acf_cv(&s->acf), v.repeat_share, v.r, v.lag, v.bound, v.periodic ? "true" : "false",
                v.lockstep ? "true" : "false");
    }
    fprintf(f, "%s]}", st->n ? "\n  " : "");
}

void sampstat_ci(double w, double n, double *lo, double *hi)
{
    icpp_stats_share_ci(w, n, ICPP_STATS_Z95, lo, hi);
}

int sampstat_ordered(double a, double b, double n, double *more)
{
    *more = 0;
    if (!(n > 0))
        return 0;
    double need = icpp_stats_order_n(a / n, b / n, ICPP_STATS_Z95);
    if (n >= need)
        return 1;
    *more = isinf(need) ? INFINITY : ceil(need - n);
    return 0;
}
