/* trend.h -- empirical complexity: constant, linear and power-law fits of a cost series against a workload feature, with bootstrap intervals (docs/trend.md). */
#ifndef ICPP_TREND_H
#define ICPP_TREND_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Bootstrap resamples and the seed every series uses: the same seed gives
 * every series of one set of runs the same resampled run indices, so two
 * series' bootstrap exponents can be compared pairwise (icpp_trend_above). */
#define ICPP_TREND_BOOT      1000
#define ICPP_TREND_SEED      0x1cc9e7d5eedULL
/* Relative noise a run's cost has beyond sampling: a run's sample count k
 * has variance mu + (this * mu)^2 around its expectation mu (negative
 * binomial), so the largest runs do not outweigh all others. */
#define ICPP_TREND_NOISE     0.1
/* A run whose count is r standard deviations (of that model) off the power
 * law weighs (1 - (r / this)^2)^2 of its due, nothing beyond: Tukey's
 * bisquare M-estimator. */
#define ICPP_TREND_ROBUST    10.0
/* Score terms (docs/trend.md): percentage points of relative standard error
 * a model must save to beat a simpler one. */
#define ICPP_TREND_COST_LINEAR 2.0
#define ICPP_TREND_COST_POWER  3.0
/* Two series are one group when each fits the other as y = c x with
 * R^2 of at least this, on the log scale (docs/trend.md). */
#define ICPP_TREND_GROUP_R2  0.98

typedef enum icpp_trend_model {
    ICPP_TREND_CONSTANT,    /* y = a */
    ICPP_TREND_LINEAR,      /* y = a + b x */
    ICPP_TREND_POWER,       /* y = a x^b */
    ICPP_TREND_NMODELS
} icpp_trend_model;

const char *icpp_trend_model_name(icpp_trend_model m);   /* "constant", "linear", "power" */

/* One cost series: n runs, feature x[i] > 0, cost y[i] >= 0, and per[i] > 0
 * what one sample costs in run i, so that run i had y[i] / per[i] samples
 * (the power fit models those counts; per NULL: y are sample counts). */
typedef struct icpp_trend_series {
    size_t        n;
    const double *x, *y, *per;
} icpp_trend_series;

typedef struct icpp_trend_fit {
    icpp_trend_model model;     /* the one the score chose */
    double   c;                 /* constant: y = c (the mean) */
    double   la, lb;            /* linear: y = la + lb x (least squares) */
    double   pa, pb;            /* power: y = pa x^pb (a count regression, docs/trend.md); NaN if it
                                   cannot be fitted */
    double   score[ICPP_TREND_NMODELS];     /* lower is better; INFINITY: not fitted */
    double   se[ICPP_TREND_NMODELS];        /* standard error of each model, in y's units */
    double   r2_power;          /* R^2 of the power fit on the log scale (weighted) */
    double   exponent;          /* = pb: the growth, whatever model was chosen */
    double   exponent_lo, exponent_hi;      /* 95% bootstrap percentile interval (NaN: none) */
    double   x10;               /* 10 x the largest feature value */
    double   pred10;            /* the chosen model's prediction at x10 */
    double   pred10_lo, pred10_hi;          /* its 95% bootstrap interval */
    uint32_t runs;              /* points */
    uint32_t zeros;             /* points with y == 0 (in the power fit as counts of 0) */
    uint32_t boot_ok;           /* resamples the power law could be fitted on */
} icpp_trend_fit;

/* Fit the three models, choose one, and bootstrap (ICPP_TREND_BOOT resamples
 * of the runs, seed ICPP_TREND_SEED) the exponent and the prediction at 10x.
 * boot: NULL, or ICPP_TREND_BOOT doubles that receive each resample's
 * exponent (NaN where the resample could not be fitted), for
 * icpp_trend_above.  0, or -EINVAL (fewer than 2 runs, x <= 0 or not finite,
 * y < 0 or not finite) with a message. */
int icpp_trend_fit_series(const icpp_trend_series *s, icpp_trend_fit *out, double *boot, icpp_err *err);

/* Prediction of model m of fit f at x. */
double icpp_trend_predict(const icpp_trend_fit *f, icpp_trend_model m, double x);

/* Weighted least squares of v on u (w NULL: unweighted): v = a + b u.
 * Returns 0, or -1 when u does not vary.  r2: NULL or R^2 of the fit. */
int icpp_trend_wls(const double *u, const double *v, const double *w, size_t n, double *a, double *b, double *r2);

/* Lower end of the 95% bootstrap interval of (exponent of A - exponent of
 * B), from the paired resamples two icpp_trend_fit_series calls on the same
 * runs left in boot_a and boot_b; NaN if fewer than half of the resamples
 * fitted both.  > 0: A grows significantly faster than B. */
double icpp_trend_above(const double *boot_a, const double *boot_b);

/* R^2 of y = c x on the log scale (points where both are > 0; NaN if fewer
 * than 3 such points or y does not vary there): how well series a follows
 * series b up to a factor. */
double icpp_trend_follow_r2(const double *a, const double *b, size_t n);

#endif
