/* stats.h -- sampling statistics: a share's confidence interval, the samples that order two shares, the sample size that pays, the autocorrelation of sampling intervals. */
#ifndef ICPP_STATS_H
#define ICPP_STATS_H

#include <stddef.h>
#include <stdint.h>

/* The standard score of a two-sided 95% interval. */
#define ICPP_STATS_Z95 1.959963984540054

/* The z-interval of a share observed as k of n samples (k may be
 * fractional: ambiguous samples are shared), into [*lo, *hi] within [0, 1].
 * It is the normal approximation of the binomial (Stoker eq. 3.1) inverted
 * as Wilson's score interval: for large n*p it equals p +- z sqrt(p(1-p)/n);
 * unlike that, it does not shrink to [0, 0] or [1, 1] at k = 0 or k = n, and
 * it keeps its coverage where n*p is small (docs/statistics.md).  n <= 0
 * gives [0, 1]. */
void icpp_stats_share_ci(double k, double n, double z, double *lo, double *hi);

/* Stoker eq. 3.2: the samples n at which shares p > q stop being
 * statistically tied, i.e. p - z sqrt(p(1-p)/n) = q + z sqrt(q(1-q)/n):
 * n = z^2 (sqrt(p(1-p)) + sqrt(q(1-q)))^2 / (p - q)^2.  Shares observed on
 * n samples are ordered (at z) when n >= this.  INFINITY when p <= q. */
double icpp_stats_order_n(double p, double q, double z);

/* Stoker eq. 4.16: the sample count that minimises the worst-case time the
 * profile attributes to the hottest context (overhead n*o*p against the
 * interval's width): n* = (T z sqrt(p(1-p)) / (2 o p))^(2/3).  T and o in
 * the same unit (seconds), p in (0, 1).  0 when an input is out of range. */
double icpp_stats_stoker_n(double T, double p, double o, double z);

/* Sample autocorrelation of a series at lags 1..ICPP_ACF_LAGS, accumulated
 * one value at a time in O(ICPP_ACF_LAGS) (the values are not kept).
 * Values are taken relative to the first one, so sums of squares of
 * nanosecond intervals keep their precision. */
#define ICPP_ACF_LAGS 32
typedef struct icpp_acf {
    uint64_t n;                         /* values added */
    double   x0;                        /* the first value: the origin */
    double   sum, sumsq;                /* of the values - x0 */
    double   lagrev[ICPP_ACF_LAGS];     /* [ICPP_ACF_LAGS - k]: sum of y_t * y_{t+k} */
    double   head[ICPP_ACF_LAGS];       /* the first ICPP_ACF_LAGS values - x0 */
    double   tail[2 * ICPP_ACF_LAGS];   /* the last ICPP_ACF_LAGS values - x0, a ring, each at
                                           [i] and [i + ICPP_ACF_LAGS] (icpp_acf_add) */
    uint64_t repeats;                   /* values within ICPP_ACF_REPEAT of the one before */
} icpp_acf;

/* A value that repeats the one before to within this fraction of it. */
#define ICPP_ACF_REPEAT 0.01

void icpp_acf_init(icpp_acf *a);
void icpp_acf_add(icpp_acf *a, double x);
/* r_k for k in 1..ICPP_ACF_LAGS: sum (x_t - m)(x_{t+k} - m) / sum (x_t - m)^2
 * (the usual estimator); 0 when fewer than k + 2 values or no variance. */
double icpp_acf_r(const icpp_acf *a, int k);
double icpp_acf_mean(const icpp_acf *a);
/* Coefficient of variation (standard deviation / mean) of the values. */
double icpp_acf_cv(const icpp_acf *a);

/* The verdict on one series of inter-sample intervals. */
typedef struct icpp_acf_verdict {
    int    lockstep;                    /* 1: periodic, or some lag's r_k is significant and not small */
    int    periodic;                    /* 1: at least half the values repeat the one before (a fixed period) */
    double repeat_share;                /* the share of values that repeat the one before */
    int    lag;                         /* the lag of the largest |r_k| (1-based; 0 if none) */
    double r;                           /* that r_k */
    double bound;                       /* |r_k| above this is significant */
} icpp_acf_verdict;

/* Lockstep is suggested two ways.  Periodic: at least half the intervals
 * repeat the one before to within 1% -- a fixed period (a timer, or the
 * kernel's frequency mode), which can fall in step with a rhythm of the
 * program; a period randomized by +-5% or more repeats far less often (the
 * difference of two uniform draws is within 1% with probability about
 * 0.01/R).  Autocorrelated: independent intervals give r_k ~ N(0, 1/n) at
 * each lag; flagged when the largest |r_k| exceeds both the Bonferroni
 * bound over the lags at the 1% level (3.42/sqrt(n)) and ICPP_ACF_MIN_R:
 * a weaker correlation is not worth a warning, and intervals with
 * descheduled gaps (a loaded machine) reach 0.1 by themselves -- measured:
 * randomized periods on a busy 2-core VM, r = 0.12.  Fewer than
 * ICPP_ACF_MIN_N values are never flagged. */
#define ICPP_ACF_MIN_N 100
#define ICPP_ACF_MIN_R 0.2
void icpp_acf_judge(const icpp_acf *a, icpp_acf_verdict *v);

#endif
