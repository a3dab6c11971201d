/* test_trend.c -- lib/trend.c against closed-form fits: exact power laws, lines and constants, textbook least squares, noise, zeros, pairing, grouping. */
#include "check.h"
#include "trend.h"

#include <math.h>
#include <string.h>

#define NEAR(a, b, tol) (fabs((a) - (double)(b)) <= (tol) * (1 + fabs((double)(b))))

/* n feature values from lo to hi, evenly spaced on the log scale. */
static void geo(double *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = lo * pow(hi / lo, (double)i / (double)(n - 1));
}

/* Deterministic noise in [-1, 1]. */
static double noise(uint64_t *st)
{
    *st = *st * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*st >> 11) / (double)(1ULL << 52) - 1.0;
}

static void textbook(void)
{
    /* The classic example: x 1..5, y 2 4 5 4 5 -> y = 2.2 + 0.6 x, R^2 = 0.6. */
    double u[] = {1, 2, 3, 4, 5}, v[] = {2, 4, 5, 4, 5}, a, b, r2;
    CHECK(icpp_trend_wls(u, v, NULL, 5, &a, &b, &r2) == 0, "ols");
    CHECK(NEAR(a, 2.2, 1e-12) && NEAR(b, 0.6, 1e-12) && NEAR(r2, 0.6, 1e-12), "ols: a %g b %g r2 %g", a, b, r2);
    /* Weighted, by hand: u 0 1 2, v 0 1 3, w 1 1 2 -> b = 4.25 / 2.75, a = 1.75 - 1.25 b. */
    double u2[] = {0, 1, 2}, v2[] = {0, 1, 3}, w2[] = {1, 1, 2};
    CHECK(icpp_trend_wls(u2, v2, w2, 3, &a, &b, NULL) == 0, "wls");
    CHECK(NEAR(b, 4.25 / 2.75, 1e-12) && NEAR(a, 1.75 - 1.25 * 4.25 / 2.75, 1e-12), "wls: a %g b %g", a, b);
    double same[] = {3, 3, 3};
    CHECK(icpp_trend_wls(same, v2, NULL, 3, &a, &b, NULL) < 0, "u that does not vary");
}

static void exact_models(void)
{
    double x[10], y[10];
    geo(x, 10, 100, 10000);
    /* y = 3 x^2.5 */
    for (int i = 0; i < 10; i++)
        y[i] = 3 * pow(x[i], 2.5);
    icpp_trend_series s = {10, x, y, NULL};
    icpp_trend_fit f;
    icpp_err err;
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0, "power: %s", err.msg);
    CHECK(f.model == ICPP_TREND_POWER, "power chosen, got %s", icpp_trend_model_name(f.model));
    CHECK(NEAR(f.exponent, 2.5, 1e-9) && NEAR(f.pa, 3, 1e-7), "power: a %g b %g", f.pa, f.exponent);
    CHECK(f.exponent_lo <= 2.5 + 1e-9 && f.exponent_hi >= 2.5 - 1e-9 && f.exponent_hi - f.exponent_lo < 1e-6,
          "exact power: CI [%g, %g]", f.exponent_lo, f.exponent_hi);
    CHECK(NEAR(f.x10, 100000, 1e-12) && NEAR(f.pred10, 3 * pow(1e5, 2.5), 1e-7), "pred10 %g", f.pred10);
    CHECK(f.pred10_lo <= f.pred10 * (1 + 1e-7) && f.pred10_hi >= f.pred10 * (1 - 1e-7), "pred10 CI");
    CHECK(f.runs == 10 && f.zeros == 0 && f.boot_ok > 900, "runs %u zeros %u boot %u", f.runs, f.zeros, f.boot_ok);

    /* y = 7e6 + 2e3 x: linear beats power (same error class, simpler) */
    for (int i = 0; i < 10; i++)
        y[i] = 7e6 + 2e3 * x[i];
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0, "linear");
    CHECK(f.model == ICPP_TREND_LINEAR, "linear chosen, got %s", icpp_trend_model_name(f.model));
    CHECK(NEAR(f.la, 7e6, 1e-9) && NEAR(f.lb, 2e3, 1e-9), "linear: a %g b %g", f.la, f.lb);
    CHECK(NEAR(f.pred10, 7e6 + 2e3 * 1e5, 1e-9), "linear pred10 %g", f.pred10);
    CHECK(f.exponent > 0 && f.exponent < 1, "a line with an intercept grows slower than x: %g", f.exponent);

    /* y = 5e5: constant */
    for (int i = 0; i < 10; i++)
        y[i] = 5e5;
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0, "constant");
    CHECK(f.model == ICPP_TREND_CONSTANT && NEAR(f.c, 5e5, 1e-12) && NEAR(f.pred10, 5e5, 1e-12), "constant: %s %g",
          icpp_trend_model_name(f.model), f.c);
    CHECK(fabs(f.exponent) < 1e-9, "constant exponent %g", f.exponent);
}

static void noisy_and_zeros(void)
{
    double x[12], y[12], k[12], b3[ICPP_TREND_BOOT], b1[ICPP_TREND_BOOT], b3b[ICPP_TREND_BOOT];
    geo(x, 12, 10, 1000);
    uint64_t st = 42;
    for (int i = 0; i < 12; i++)
        k[i] = 1000;        /* one sample stands for 1000 */
    icpp_trend_series s = {12, x, y, k};
    icpp_trend_fit f, g, h;
    icpp_err err;
    /* 10% multiplicative noise on n^3 */
    for (int i = 0; i < 12; i++)
        y[i] = pow(x[i], 3) * (1 + 0.1 * noise(&st));
    CHECK(icpp_trend_fit_series(&s, &f, b3, &err) == 0, "noisy cubic");
    CHECK(f.model == ICPP_TREND_POWER && fabs(f.exponent - 3) < 0.05, "noisy cubic: %s %g",
          icpp_trend_model_name(f.model), f.exponent);
    CHECK(f.exponent_lo < f.exponent && f.exponent < f.exponent_hi && f.exponent_lo < 3 && 3 < f.exponent_hi &&
              f.exponent_hi - f.exponent_lo < 0.2,
          "noisy cubic CI [%g, %g]", f.exponent_lo, f.exponent_hi);
    /* the same fit again: the same interval (deterministic seed) */
    CHECK(icpp_trend_fit_series(&s, &g, NULL, &err) == 0 && g.exponent_lo == f.exponent_lo &&
              g.exponent_hi == f.exponent_hi && g.pred10_lo == f.pred10_lo,
          "deterministic");

    /* a linear series with noise: exponent near 1, above the cubic's not */
    double y1[12], k1[12];
    for (int i = 0; i < 12; i++)
        y1[i] = 1e4 * x[i] * (1 + 0.1 * noise(&st)), k1[i] = 1000;
    icpp_trend_series s1 = {12, x, y1, k1};
    CHECK(icpp_trend_fit_series(&s1, &h, b1, &err) == 0 && fabs(h.exponent - 1) < 0.05, "noisy line %g", h.exponent);
    CHECK(h.model != ICPP_TREND_CONSTANT, "noisy line not constant");
    CHECK(icpp_trend_above(b3, b1) > 1.5, "n^3 above n: %g", icpp_trend_above(b3, b1));
    CHECK(icpp_trend_above(b1, b3) < 0, "n not above n^3");
    /* another cubic with other noise: not significantly above the first */
    double y3[12], k3[12];
    for (int i = 0; i < 12; i++)
        y3[i] = 2 * pow(x[i], 3) * (1 + 0.1 * noise(&st)), k3[i] = 1000;
    icpp_trend_series s3 = {12, x, y3, k3};
    CHECK(icpp_trend_fit_series(&s3, &g, b3b, &err) == 0, "second cubic");
    CHECK(!(icpp_trend_above(b3b, b3) > 0), "equal exponents are not significant: %g", icpp_trend_above(b3b, b3));

    /* one run slowed down twice (another process on the core): the robust
     * fit keeps the exponent, plain least squares on the log scale does not */
    for (int i = 0; i < 12; i++)
        y[i] = pow(x[i], 3) * (i == 10 ? 2 : 1);
    double lu[12], lv[12], la, lb;
    for (int i = 0; i < 12; i++)
        lu[i] = log(x[i]), lv[i] = log(y[i]);
    CHECK(icpp_trend_wls(lu, lv, NULL, 12, &la, &lb, NULL) == 0 && fabs(lb - 3) > 0.05, "least squares: %g", lb);
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0 && fabs(f.exponent - 3) < 0.01,
          "an outlier: %g (least squares %g)", f.exponent, lb);
    /* zeros: counts expected 1e-3 x^2, observed as the nearest whole count,
     * so the smallest runs have none; they are counts of 0 in the fit */
    s.per = NULL;
    for (int i = 0; i < 12; i++)
        y[i] = round(1e-3 * x[i] * x[i]);
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0, "zeros");
    CHECK(f.zeros == 2 && fabs(f.exponent - 2) < 0.03, "zeros %u exp %g a %g", f.zeros, f.exponent, f.pa);
    /* lucky small runs: where 0.1 .. 0.5 samples were due, two of four runs
     * got one.  Counting the other two as zeros keeps the exponent;
     * leaving them out (as a log-log fit must) flattens it */
    double xs[12], ys[12];
    size_t m = 0;
    for (int i = 0; i < 12; i++) {
        y[i] = i < 4 ? (i % 2) : round(1e-3 * x[i] * x[i]);
        if (y[i] > 0)
            xs[m] = x[i], ys[m++] = y[i];
    }
    icpp_trend_fit g2;
    icpp_trend_series sd = {m, xs, ys, NULL};
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0 && icpp_trend_fit_series(&sd, &g2, NULL, &err) == 0 &&
              fabs(f.exponent - 2) < 0.05 && fabs(f.exponent - 2) < fabs(g2.exponent - 2),
          "lucky runs: with zeros %g, without %g", f.exponent, g2.exponent);
    s.per = k;
    /* all zero: constant 0, no power law */
    for (int i = 0; i < 12; i++)
        y[i] = 0;
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0 && f.model == ICPP_TREND_CONSTANT && isnan(f.exponent) &&
              f.boot_ok == 0,
          "all zero: %s %g", icpp_trend_model_name(f.model), f.exponent);
}

static void grouping(void)
{
    double x[8], a[8], b[8], c[8];
    geo(x, 8, 1, 100);
    for (int i = 0; i < 8; i++)
        a[i] = pow(x[i], 2), b[i] = 5 * pow(x[i], 2) * (1 + 0.01 * (i % 2)), c[i] = pow(x[i], 3);
    CHECK(icpp_trend_follow_r2(b, a, 8) > ICPP_TREND_GROUP_R2, "5 n^2 follows n^2: %g", icpp_trend_follow_r2(b, a, 8));
    CHECK(icpp_trend_follow_r2(c, a, 8) < 0.9, "n^3 does not follow n^2: %g", icpp_trend_follow_r2(c, a, 8));
    /* why not the linear R^2 of BB-TrendProf: n^2 and n^3 over two orders of
     * magnitude fit each other linearly with R^2 above the threshold */
    double la, lb, r2;
    CHECK(icpp_trend_wls(c, a, NULL, 8, &la, &lb, &r2) == 0 && r2 > ICPP_TREND_GROUP_R2, "linear R^2 of n^2 on n^3: %g",
          r2);
    double z[8] = {0};
    CHECK(isnan(icpp_trend_follow_r2(z, a, 8)), "no common points");
}

static void bad_input(void)
{
    double x[3] = {1, 2, 3}, y[3] = {1, 2, 3};
    icpp_trend_series s = {1, x, y, NULL};
    icpp_trend_fit f;
    icpp_err err;
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) < 0 && strstr(err.msg, "at least 2 runs"), "one run: %s", err.msg);
    s.n = 3;
    x[1] = 0;
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) < 0 && strstr(err.msg, "run 2"), "x 0: %s", err.msg);
    x[1] = 2;
    y[2] = NAN;
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) < 0 && strstr(err.msg, "run 3"), "y NaN: %s", err.msg);
    y[2] = 3;
    x[0] = x[1] = x[2] = 5;     /* one feature value: no line, no power law */
    CHECK(icpp_trend_fit_series(&s, &f, NULL, &err) == 0 && f.model == ICPP_TREND_CONSTANT && isnan(f.exponent),
          "one feature value");
}

int main(void)
{
    textbook();
    exact_models();
    noisy_and_zeros();
    grouping();
    bad_input();
    return check_done("trend");
}
