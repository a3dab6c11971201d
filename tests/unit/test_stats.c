/* test_stats.c -- lib/stats: intervals against simulated coverage, eq. 3.2 and 4.16 against the seed paper's own tables, autocorrelation against a two-pass computation. */
#include "check.h"
#include "stats.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)       /* xorshift64*: uniform in [0, 1) */
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

/* Coverage of the interval over simulated binomial draws: independent of
 * the formula, the reference is the true share. */
static double coverage(double p, int n, int trials)
{
    int in = 0;
    for (int t = 0; t < trials; t++) {
        int k = 0;
        for (int i = 0; i < n; i++)
            k += urand() < p;
        double lo, hi;
        icpp_stats_share_ci(k, n, ICPP_STATS_Z95, &lo, &hi);
        in += lo <= p && p <= hi;
    }
    return (double)in / trials;
}

/* r_k computed directly from the stored series, two passes. */
static double acf_direct(const double *x, int n, int k)
{
    double m = 0, den = 0, num = 0;
    for (int i = 0; i < n; i++)
        m += x[i];
    m /= n;
    for (int i = 0; i < n; i++)
        den += (x[i] - m) * (x[i] - m);
    for (int i = 0; i + k < n; i++)
        num += (x[i] - m) * (x[i + k] - m);
    return num / den;
}

int main(void)
{
    double lo, hi;
    /* large n: the Wald interval of eq. 3.1 */
    icpp_stats_share_ci(3000, 10000, 1.96, &lo, &hi);
    double half = 1.96 * sqrt(0.3 * 0.7 / 10000);
    CHECK(fabs(lo - (0.3 - half)) < 2e-4 && fabs(hi - (0.3 + half)) < 2e-4, "wald agreement: [%g, %g]", lo, hi);
    /* the ends: k = 0 gives [0, z^2/(n+z^2)], not [0, 0] */
    icpp_stats_share_ci(0, 100, 1.96, &lo, &hi);
    CHECK(lo == 0 && fabs(hi - 1.96 * 1.96 / (100 + 1.96 * 1.96)) < 1e-12, "k=0: [%g, %g]", lo, hi);
    icpp_stats_share_ci(100, 100, 1.96, &lo, &hi);
    CHECK(hi == 1 && lo > 0.95 && lo < 0.97, "k=n: [%g, %g]", lo, hi);
    icpp_stats_share_ci(5, 0, 1.96, &lo, &hi);
    CHECK(lo == 0 && hi == 1, "n=0: [%g, %g]", lo, hi);
    icpp_stats_share_ci(2.5, 10, 1.96, &lo, &hi);      /* fractional (ambiguous) weights */
    CHECK(lo > 0 && lo < 0.25 && hi > 0.25 && hi < 1, "fractional: [%g, %g]", lo, hi);
    /* coverage near 95% where the normal approximation is good and where it is not */
    double c1 = coverage(0.3, 400, 4000), c2 = coverage(0.02, 300, 4000), c3 = coverage(0.5, 50, 4000);
    CHECK(c1 > 0.93 && c1 < 0.97, "coverage p=.3 n=400: %.3f", c1);
    CHECK(c2 > 0.92 && c2 < 0.985, "coverage p=.02 n=300: %.3f", c2);
    CHECK(c3 > 0.92 && c3 < 0.98, "coverage p=.5 n=50: %.3f", c3);

    /* eq. 3.2 against Stoker's Table 3.2 (z = 1.96; the table rounds its p, q
     * products, so within 3 samples) */
    static const struct { double p, q, n; } t32[] = {
        {.49, .48, 38375}, {.40, .39, 36718}, {.30, .29, 31956}, {.20, .19, 24115}, {.10, .09, 13201}, {.02, .01, 2204}};
    for (size_t i = 0; i < sizeof t32 / sizeof *t32; i++) {
        double n = icpp_stats_order_n(t32[i].p, t32[i].q, 1.96);
        CHECK(fabs(n - t32[i].n) < 3, "eq 3.2 (%g, %g): %.1f, table %g", t32[i].p, t32[i].q, n, t32[i].n);
        /* at that n the two eq. 3.1 intervals touch */
        double a = t32[i].p - 1.96 * sqrt(t32[i].p * (1 - t32[i].p) / n);
        double b = t32[i].q + 1.96 * sqrt(t32[i].q * (1 - t32[i].q) / n);
        CHECK(fabs(a - b) < 1e-9, "intervals touch at n: %g vs %g", a, b);
    }
    CHECK(isinf(icpp_stats_order_n(0.2, 0.2, 1.96)) && isinf(icpp_stats_order_n(0.1, 0.2, 1.96)), "tie/reverse");

    /* eq. 4.16 against Stoker's worked example: T=300, z=1.96, p=.2, o=.00025 -> 17,686 */
    double ns = icpp_stats_stoker_n(300, 0.2, 0.00025, 1.96);
    CHECK(fabs(ns - 17686) < 1, "eq 4.16: %.1f", ns);
    CHECK(icpp_stats_stoker_n(300, 0, 0.00025, 1.96) == 0 && icpp_stats_stoker_n(300, 0.2, 0, 1.96) == 0 &&
              icpp_stats_stoker_n(-1, 0.2, 0.1, 1.96) == 0 && icpp_stats_stoker_n(300, 1, 0.1, 1.96) == 0,
          "eq 4.16 out of range");

    /* autocorrelation: streaming equals two-pass, on three kinds of series */
    enum { N = 5000 };
    static double x[N];
    for (int kind = 0; kind < 3; kind++) {
        icpp_acf a;
        icpp_acf_init(&a);
        double prev = 0;
        for (int i = 0; i < N; i++) {
            double e = urand() - 0.5;
            if (kind == 0)          /* jittered period, ns: independent */
                x[i] = 250000 + 50000 * e;
            else if (kind == 1)     /* AR(1), phi = 0.6 */
                x[i] = prev = 0.6 * prev + e;
            else                    /* a rhythm of period 7 under noise */
                x[i] = 250000 + 20000 * sin(2 * M_PI * i / 7.0) + 10000 * e;
            icpp_acf_add(&a, x[i]);
        }
        for (int k = 1; k <= ICPP_ACF_LAGS; k++) {
            double r = icpp_acf_r(&a, k), d = acf_direct(x, N, k);
            CHECK(fabs(r - d) < 1e-9, "kind %d lag %d: streaming %g, direct %g", kind, k, r, d);
        }
        icpp_acf_verdict v;
        icpp_acf_judge(&a, &v);
        if (kind == 0) {
            CHECK(!v.lockstep && !v.periodic, "independent intervals flagged: lag %d r %g bound %g", v.lag, v.r,
                  v.bound);
            /* +-10% uniform: two in a row within 1% about 1 time in 10 */
            CHECK(v.repeat_share > 0.05 && v.repeat_share < 0.15, "jittered repeats %g", v.repeat_share);
            CHECK(fabs(icpp_acf_cv(&a) - 50000 / sqrt(12.0) / 250000) < 0.005, "cv %g", icpp_acf_cv(&a));
        } else if (kind == 1) {
            CHECK(v.lockstep && v.lag == 1 && fabs(v.r - 0.6) < 0.05, "AR(1): lag %d r %g", v.lag, v.r);
        } else {
            CHECK(v.lockstep && v.lag % 7 == 0 && v.r > 0.5, "rhythm: lag %d r %g", v.lag, v.r);
        }
        CHECK(fabs(icpp_acf_mean(&a) - (kind == 1 ? 0 : 250000)) < (kind == 1 ? 0.1 : 2000), "mean %g",
              icpp_acf_mean(&a));
    }
    /* constant intervals: no variance, no verdict; too few: none either */
    icpp_acf a;
    icpp_acf_init(&a);
    for (int i = 0; i < 500; i++)
        icpp_acf_add(&a, 1000);
    icpp_acf_verdict v;
    icpp_acf_judge(&a, &v);
    CHECK(v.lockstep && v.periodic && v.repeat_share == 1 && icpp_acf_r(&a, 1) == 0 && icpp_acf_cv(&a) == 0,
          "constant");
    /* a timer: a fixed period with small noise and a few long gaps (descheduled) */
    icpp_acf_init(&a);
    for (int i = 0; i < 2000; i++)
        icpp_acf_add(&a, (i % 97 == 0 ? 500000 : 250000) + 1000 * (urand() - 0.5));
    icpp_acf_judge(&a, &v);
    CHECK(v.lockstep && v.periodic && v.repeat_share > 0.9, "timer: repeats %g", v.repeat_share);
    icpp_acf_init(&a);
    for (int i = 0; i < 50; i++)
        icpp_acf_add(&a, i % 2 ? 1 : 1000);
    icpp_acf_judge(&a, &v);
    CHECK(!v.lockstep && !v.periodic && fabs(icpp_acf_r(&a, 1) + 1) < 0.05, "short series: r1 %g", icpp_acf_r(&a, 1));
    return check_done("stats");
}
