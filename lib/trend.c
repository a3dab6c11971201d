/* trend.c -- empirical complexity: constant, linear and power-law fits of a cost series against a workload feature, with bootstrap intervals (docs/trend.md). */
#include "trend.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *icpp_trend_model_name(icpp_trend_model m)
{
    static const char *names[] = {"constant", "linear", "power"};
    return m < ICPP_TREND_NMODELS ? names[m] : "?";
}

int icpp_trend_wls(const double *u, const double *v, const double *w, size_t n, double *a, double *b, double *r2)
{
    double sw = 0, su = 0, sv = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        sw += wi;
        su += wi * u[i];
        sv += wi * v[i];
    }
    if (!(sw > 0))
        return -1;
    double mu = su / sw, mv = sv / sw, suu = 0, suv = 0, svv = 0;
    for (size_t i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0, du = u[i] - mu, dv = v[i] - mv;
        suu += wi * du * du;
        suv += wi * du * dv;
        svv += wi * dv * dv;
    }
    /* u must vary, relative to its size (equal x values differ by rounding) */
    if (!(suu > 1e-18 * (1 + mu * mu) * sw))
        return -1;
    *b = suv / suu;
    *a = mv - *b * mu;
    if (r2)
        *r2 = svv > 0 ? 1 - (svv - *b * suv) / svv : 1.0;
    return 0;
}

/* The power law as a model of the sample counts k_i = y_i / per_i:
 * E k_i = exp(ln a + b ln x_i) / per_i with variance mu + (NOISE mu)^2
 * (a negative binomial regression with a log link, by iteratively
 * reweighted least squares, robust: bisquare weights on the residuals),
 * started from the weighted least squares of
 * ln y on ln x over the runs with a cost.  Runs without a sample count as
 * zeros, not left out: dropping them keeps only the small runs that were
 * lucky to get a sample, and flattens the exponent (docs/trend.md).
 * idx: the runs to use (a bootstrap resample), n of them.  0, or -1 when it
 * cannot be fitted (fewer than 2 distinct feature values with a cost, or
 * no convergence).  r2: NULL, or R^2 of the starting fit on the log scale. */
static int fit_power(const icpp_trend_series *s, const size_t *idx, size_t n, double *pa, double *pb, double *r2,
                     double *lu, double *lv, double *lw)
{
    const double c2 = ICPP_TREND_NOISE * ICPP_TREND_NOISE;
    size_t m = 0;
    for (size_t j = 0; j < n; j++) {
        size_t i = idx ? idx[j] : j;
        if (!(s->y[i] > 0))
            continue;
        double k = s->y[i] / (s->per ? s->per[i] : 1);
        lu[m] = log(s->x[i]);
        lv[m] = log(s->y[i]);
        lw[m] = 1.0 / (1.0 / k + c2);
        m++;
    }
    double a, b;
    if (m < 2 || icpp_trend_wls(lu, lv, lw, m, &a, &b, r2) < 0)
        return -1;
    {
        /* IRLS over every run; lu/lv/lw now hold all n */
        double *z = lv;
        for (int it = 0; it < 100; it++) {
            for (size_t j = 0; j < n; j++) {
                size_t i = idx ? idx[j] : j;
                double per = s->per ? s->per[i] : 1, k = s->y[i] / per;
                double eta = a + b * log(s->x[i]);          /* ln of the expected cost */
                double mu = exp(eta) / per;                 /* expected count */
                if (!(mu > 1e-300) || !isfinite(mu))
                    return -1;
                /* Tukey's bisquare weight on the Pearson residual: a run far
                 * off the law (another process slowed it) counts less, one
                 * ICPP_TREND_ROBUST deviations off not at all */
                double r = fabs(k - mu) / sqrt(mu + c2 * mu * mu) / ICPP_TREND_ROBUST;
                lu[j] = log(s->x[i]);
                z[j] = eta + (k - mu) / mu;
                lw[j] = mu / (1 + c2 * mu) * (r < 1 ? (1 - r * r) * (1 - r * r) : 0);
            }
            double na, nb;
            if (icpp_trend_wls(lu, z, lw, n, &na, &nb, NULL) < 0 || !isfinite(nb) || fabs(nb) > 100)
                return -1;
            double step = fabs(nb - b);
            a = na;
            b = nb;
            if (step < 1e-12 * (1 + fabs(b)))
                break;
        }
    }
    *pa = exp(a);
    *pb = b;
    return isfinite(*pa) ? 0 : -1;
}

static int fit_linear(const icpp_trend_series *s, const size_t *idx, size_t n, double *a, double *b, double *u, double *v)
{
    for (size_t j = 0; j < n; j++) {
        size_t i = idx ? idx[j] : j;
        u[j] = s->x[i];
        v[j] = s->y[i];
    }
    return icpp_trend_wls(u, v, NULL, n, a, b, NULL);
}

static double mean_y(const icpp_trend_series *s, const size_t *idx, size_t n)
{
    double t = 0;
    for (size_t j = 0; j < n; j++)
        t += s->y[idx ? idx[j] : j];
    return n ? t / (double)n : 0;
}

double icpp_trend_predict(const icpp_trend_fit *f, icpp_trend_model m, double x)
{
    switch (m) {
    case ICPP_TREND_CONSTANT: return f->c;
    case ICPP_TREND_LINEAR: return f->la + f->lb * x;
    case ICPP_TREND_POWER: return f->pa * pow(x, f->pb);
    default: return NAN;
    }
}

/* splitmix64: the bootstrap's deterministic generator. */
static uint64_t next_rand(uint64_t *st)
{
    uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of v[0..n-1], sorted in place; linear interpolation. */
static double quantile(double *v, size_t n, double q)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    if (i + 1 >= n)
        return v[n - 1];
    return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

int icpp_trend_fit_series(const icpp_trend_series *s, icpp_trend_fit *f, double *boot, icpp_err *err)
{
    memset(f, 0, sizeof *f);
    size_t n = s->n;
    if (n < 2)
        return icpp_err_set(err, EINVAL, "a trend needs at least 2 runs, got %zu", n);
    double xmax = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(s->x[i] > 0) || !isfinite(s->x[i]))
            return icpp_err_set(err, EINVAL, "run %zu: feature value %g is not a positive number", i + 1, s->x[i]);
        if (!(s->y[i] >= 0) || !isfinite(s->y[i]))
            return icpp_err_set(err, EINVAL, "run %zu: cost %g is not a non-negative number", i + 1, s->y[i]);
        if (s->per && (!(s->per[i] > 0) || !isfinite(s->per[i])))
            return icpp_err_set(err, EINVAL, "run %zu: cost per sample %g is not a positive number", i + 1, s->per[i]);
        if (s->x[i] > xmax)
            xmax = s->x[i];
        if (s->y[i] == 0)
            f->zeros++;
    }
    double *tmp = malloc(4 * n * sizeof *tmp);
    size_t *idx = malloc(n * sizeof *idx);
    double *bx = malloc(2 * ICPP_TREND_BOOT * sizeof *bx);
    if (!tmp || !idx || !bx) {
        free(tmp);
        free(idx);
        free(bx);
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    double *u = tmp, *v = tmp + n, *w = tmp + 2 * n;
    f->runs = (uint32_t)n;
    f->x10 = 10 * xmax;
    f->c = mean_y(s, NULL, n);
    int lin_ok = fit_linear(s, NULL, n, &f->la, &f->lb, u, v) == 0;
    int pow_ok = fit_power(s, NULL, n, &f->pa, &f->pb, &f->r2_power, u, v, w) == 0;
    if (!pow_ok)
        f->pa = f->pb = f->r2_power = NAN;
    if (!lin_ok)
        f->la = f->lb = NAN;

    /* The score: relative standard error in percent plus a complexity cost,
     * so that a more complex model must be clearly better (docs/trend.md). */
    static const double cost[ICPP_TREND_NMODELS] = {0, ICPP_TREND_COST_LINEAR, ICPP_TREND_COST_POWER};
    static const int params[ICPP_TREND_NMODELS] = {1, 2, 2};
    int ok[ICPP_TREND_NMODELS] = {1, lin_ok, pow_ok};
    f->model = ICPP_TREND_CONSTANT;
    for (int m = 0; m < ICPP_TREND_NMODELS; m++) {
        f->score[m] = f->se[m] = INFINITY;
        if (!ok[m])
            continue;
        double ss = 0;
        for (size_t i = 0; i < n; i++) {
            double d = icpp_trend_predict(f, (icpp_trend_model)m, s->x[i]) - s->y[i];
            ss += d * d;
        }
        size_t dof = n > (size_t)params[m] ? n - (size_t)params[m] : 1;
        f->se[m] = sqrt(ss / (double)dof);
        f->score[m] = (f->c > 0 ? 100 * f->se[m] / f->c : 0) + cost[m];
        if (f->score[m] < f->score[f->model])
            f->model = (icpp_trend_model)m;
    }
    f->exponent = f->pb;
    f->pred10 = icpp_trend_predict(f, f->model, f->x10);

    /* Bootstrap: resample the runs with replacement, refit. */
    uint64_t st = ICPP_TREND_SEED;
    double *be = bx, *bp = bx + ICPP_TREND_BOOT;
    size_t nb = 0, np = 0;
    for (int r = 0; r < ICPP_TREND_BOOT; r++) {
        for (size_t j = 0; j < n; j++)
            idx[j] = (size_t)(next_rand(&st) % n);
        icpp_trend_fit g = *f;
        int pok = fit_power(s, idx, n, &g.pa, &g.pb, NULL, u, v, w) == 0;
        if (boot)
            boot[r] = pok ? g.pb : NAN;
        if (pok)
            be[nb++] = g.pb;
        int mok = 1;
        switch (f->model) {
        case ICPP_TREND_CONSTANT: g.c = mean_y(s, idx, n); break;
        case ICPP_TREND_LINEAR: mok = fit_linear(s, idx, n, &g.la, &g.lb, u, v) == 0; break;
        case ICPP_TREND_POWER: mok = pok; break;
        default: mok = 0;
        }
        if (mok)
            bp[np++] = icpp_trend_predict(&g, f->model, f->x10);
    }
    f->boot_ok = (uint32_t)nb;
    f->exponent_lo = quantile(be, nb, 0.025);
    f->exponent_hi = quantile(be, nb, 0.975);
    f->pred10_lo = quantile(bp, np, 0.025);
    f->pred10_hi = quantile(bp, np, 0.975);
    free(tmp);
    free(idx);
    free(bx);
    return 0;
}

double icpp_trend_above(const double *a, const double *b)
{
    double d[ICPP_TREND_BOOT];
    size_t n = 0;
    for (int r = 0; r < ICPP_TREND_BOOT; r++)
        if (!isnan(a[r]) && !isnan(b[r]))
            d[n++] = a[r] - b[r];
    if (n < ICPP_TREND_BOOT / 2)
        return NAN;
    return quantile(d, n, 0.025);
}

double icpp_trend_follow_r2(const double *a, const double *b, size_t n)
{
    double sd = 0, sa = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] > 0 && b[i] > 0) {
            sd += log(a[i]) - log(b[i]);
            sa += log(a[i]);
            m++;
        }
    if (m < 3)
        return NAN;
    double md = sd / (double)m, ma = sa / (double)m, res = 0, tot = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] > 0 && b[i] > 0) {
            double d = log(a[i]) - log(b[i]) - md, t = log(a[i]) - ma;
            res += d * d;
            tot += t * t;
        }
    if (!(tot > 0))
        return NAN;
    return 1 - res / tot;
}
