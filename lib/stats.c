/* stats.c -- sampling statistics: a share's confidence interval, the samples that order two shares, the sample size that pays, the autocorrelation of sampling intervals. */
#include "stats.h"

#include <assert.h>
#include <math.h>
#include <string.h>

void icpp_stats_share_ci(double k, double n, double z, double *lo, double *hi)
{
    if (!(n > 0) || !(k >= 0)) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double p = k < n ? k / n : 1.0;
    double z2n = z * z / n;
    double center = (p + z2n / 2) / (1 + z2n);
    double half = z / (1 + z2n) * sqrt(p * (1 - p) / n + z2n / (4 * n));
    *lo = center - half > 0 ? center - half : 0;
    *hi = center + half < 1 ? center + half : 1;
    /* exact at the ends (rounding would leave 1e-17 off) */
    if (k <= 0)
        *lo = 0;
    if (k >= n)
        *hi = 1;
}

double icpp_stats_order_n(double p, double q, double z)
{
    if (!(p > q) || p > 1 || q < 0)
        return INFINITY;
    double s = sqrt(p * (1 - p)) + sqrt(q * (1 - q));
    return z * z * s * s / ((p - q) * (p - q));
}

double icpp_stats_stoker_n(double T, double p, double o, double z)
{
    if (!(T > 0) || !(p > 0) || !(p < 1) || !(o > 0) || !(z > 0))
        return 0;
    return pow(T * z * sqrt(p * (1 - p)) / (2 * o * p), 2.0 / 3.0);
}

void icpp_acf_init(icpp_acf *a)
{
    memset(a, 0, sizeof *a);
}

void icpp_acf_add(icpp_acf *a, double x)
{
    if (a->n == 0)
        a->x0 = x;
    double y = x - a->x0;
    /* y pairs with each of the previous ICPP_ACF_LAGS values at lag k.  The
     * ring is stored twice over, so tail[b .. b + L) holds the values at
     * lags L .. 1 in order and the products are one contiguous loop the
     * compiler vectorizes (this ran for every sample: 8% of icpp-resolve). */
    enum { L = ICPP_ACF_LAGS };
    size_t b = (size_t)(a->n % L);
    if (a->n >= L) {
        for (size_t j = 0; j < L; j++)
            a->lagrev[j] += y * a->tail[b + j];
    } else {
        for (size_t k = 1; k <= a->n; k++)
            a->lagrev[L - k] += y * a->tail[b + L - k];
    }
    if (a->n && fabs(x - (a->x0 + a->tail[(a->n - 1) % ICPP_ACF_LAGS])) <=
                    ICPP_ACF_REPEAT * fabs(a->x0 + a->tail[(a->n - 1) % ICPP_ACF_LAGS]))
        a->repeats++;
    if (a->n < ICPP_ACF_LAGS)
        a->head[a->n] = y;
    a->tail[b] = a->tail[b + L] = y;
    a->sum += y;
    a->sumsq += y * y;
    a->n++;
}

double icpp_acf_mean(const icpp_acf *a)
{
    return a->n ? a->x0 + a->sum / (double)a->n : 0;
}

double icpp_acf_cv(const icpp_acf *a)
{
    if (a->n < 2)
        return 0;
    double n = (double)a->n, m = a->sum / n;
    double var = a->sumsq / n - m * m;
    double mean = a->x0 + m;
    return var > 0 && mean != 0 ? sqrt(var) / fabs(mean) : 0;
}

double icpp_acf_r(const icpp_acf *a, int k)
{
    assert(k >= 1 && k <= ICPP_ACF_LAGS);
    if (a->n < (uint64_t)k + 2)
        return 0;
    double n = (double)a->n, m = a->sum / n;
    double den = a->sumsq - n * m * m;
    if (!(den > 1e-12 * (a->sumsq + 1e-300)))
        return 0;
    /* sum over t < n-k of y_t is sum minus the last k values; sum over
     * t >= k of y_t is sum minus the first k */
    double first = 0, last = 0;
    for (int i = 0; i < k; i++) {
        first += a->head[i];
        last += a->tail[(a->n - 1 - (uint64_t)i) % ICPP_ACF_LAGS];
    }
    double num = a->lagrev[ICPP_ACF_LAGS - k] - m * ((a->sum - last) + (a->sum - first)) + (n - k) * m * m;
    return num / den;
}

void icpp_acf_judge(const icpp_acf *a, icpp_acf_verdict *v)
{
    memset(v, 0, sizeof *v);
    if (a->n < ICPP_ACF_MIN_N)
        return;
    v->bound = 3.42 / sqrt((double)a->n);
    for (int k = 1; k <= ICPP_ACF_LAGS; k++) {
        double r = icpp_acf_r(a, k);
        if (fabs(r) > fabs(v->r)) {
            v->r = r;
            v->lag = k;
        }
    }
    v->repeat_share = (double)a->repeats / (double)(a->n - 1);
    v->periodic = v->repeat_share >= 0.5;
    v->lockstep = v->periodic || (fabs(v->r) > v->bound && fabs(v->r) > ICPP_ACF_MIN_R);
}
