/* sampstat.h -- icpp-resolve's sampling statistics: each path's confidence interval, which ranks are statistically ordered, and per-thread autocorrelation of the intervals between samples. */
#ifndef ICPP_RESOLVE_SAMPSTAT_H
#define ICPP_RESOLVE_SAMPSTAT_H

#include <stdint.h>
#include <stdio.h>

#include "hmap.h"
#include "replay.h"
#include "stats.h"

/* One series of intervals: the samples of one event in one thread (learn
 * samples, a separate perf event with its own period, are a series of
 * their own). */
typedef struct sampstat_series {
    uint32_t pid, tid, event;
    int      learn;
    uint64_t last;                      /* the previous sample's time */
    double   typical;                   /* a running mean of the intervals kept */
    uint64_t gaps;                      /* intervals left out: the thread was off the CPU (SAMPSTAT_GAP) */
    icpp_acf acf;                       /* of the intervals, ns */
} sampstat_series;

/* The times are wall-clock: an interval longer than this many times the
 * typical one had the thread descheduled or blocked in it, which says
 * nothing about how the sampler picks its moments (a scheduler's time
 * slices made randomized intervals look autocorrelated); it is left out. */
#define SAMPSTAT_GAP 2.0

typedef struct sampstat {
    sampstat_series *s;
    size_t           n, cap;
    icpp_hmap        ix;                /* (pid << 32 | tid, event << 1 | learn) -> index */
    uint64_t         last_k1, last_k2;  /* the previous sample's key, and its index (+1; 0: none) */
    size_t           last_ix;
    const icpp_replay_info *info;       /* event names */
} sampstat;

void sampstat_init(sampstat *st, const icpp_replay_info *info);
void sampstat_free(sampstat *st);
/* Add one sample (in the recording's order: time order per thread); 0 or -ENOMEM. */
int  sampstat_add(sampstat *st, const icpp_rsample *s);
/* The report header's lines (each starting with `lead`) on lockstep
 * sampling (icpp_acf_judge): one for the series with a fixed period, one
 * per autocorrelated series (at most 3, then a count); nothing when no
 * series suggests it.  Returns the number of such series. */
size_t sampstat_describe(const sampstat *st, FILE *f, const char *lead);
/* "sampling": {...} for --format json (without the key). */
void sampstat_json(const sampstat *st, FILE *f);

/* The 95% interval of a share of w among n samples. */
void sampstat_ci(double w, double n, double *lo, double *hi);
/* Whether weight a is statistically ahead of b (a >= b) among n samples
 * (Stoker eq. 3.2 at 95%); if not, *more is the samples to add so that
 * they would be, at these shares (INFINITY for equal shares). */
int  sampstat_ordered(double a, double b, double n, double *more);

#endif
