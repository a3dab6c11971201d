/* autoperiod.c -- icpp-sample --auto-period: the sampling period from Stoker's sample-size model, with its inputs measured by pilot runs. */
#include "autoperiod.h"

#include "hmap.h"
#include "replay.h"
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The pilots' periods: the dense one so that the cost of its samples
 * stands out of a run's timing noise (10 kHz for a clock), the sparse one
 * ten times longer.  o is the difference of their run times over the
 * difference of their sample counts: the sampler's own start and finish
 * (reading the program's mappings and build-ids, writing the file: tens of
 * ms here) cost the same in both and cancel, where (T_sampled - T)/samples
 * would count them as cost per sample (measured: 56 us instead of 20). */
#define PILOT_PERIOD_CLOCK 100000
#define PILOT_PERIOD_HW    100003
#define PILOT_SPARSE       10

/* Run argv with stdin and stdout on /dev/null; its CPU time (user +
 * system, with its waited-for children's: a pilot icpp-sample's includes
 * the program's) in *secs.  CPU time, not wall: on a shared machine the
 * wall time of one run moved by 30% with the load, and a sample costs CPU
 * time wherever it is spent.  0, or -errno with a message (it could not
 * run, or failed). */
static int run_timed(char *const *argv, double *secs, icpp_err *err)
{
    pid_t pid = fork();
    if (pid < 0)
        return icpp_err_set(err, errno, "auto period: fork: %s", strerror(errno));
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    while (wait4(pid, &st, 0, &ru) < 0)
        if (errno != EINTR)
            return icpp_err_set(err, errno, "auto period: waitpid: %s", strerror(errno));
    *secs = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
            (double)ru.ru_stime.tv_usec / 1e6;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return icpp_err_set(err, ENOEXEC, "auto period: the pilot run of %s could not start", argv[0]);
    if (WIFSIGNALED(st))
        return icpp_err_set(err, EINTR, "auto period: the pilot run of %s was killed by signal %d", argv[0],
                            WTERMSIG(st));
    return 0;
}

/* The hottest (module, function, height) of a recording: its count in
 * *top, all samples in *n.  Samples without a context (no function, no
 * height) count in n, under one bucket per status. */
static int hottest(const char *path, uint64_t *top, uint64_t *n, icpp_err *err)
{
    icpp_replay *rp = icpp_replay_open(path, err);
    if (!rp)
        return -err->code;
    icpp_hmap h;
    icpp_hmap_init(&h);
    icpp_rsample s;
    int rc;
    *top = *n = 0;
    while ((rc = icpp_replay_next(rp, &s, err)) > 0) {
        uint64_t k1, k2;
        if (s.status == ICPP_RS_OK && s.func) {
            k1 = (uint64_t)(uint32_t)s.module << 32 ^ s.func->addr;
            k2 = (uint64_t)s.height;
        } else {
            k1 = UINT64_MAX;
            k2 = (uint64_t)s.status;
        }
        uint64_t *c = icpp_hmap_get(&h, k1, k2);
        uint64_t v = c ? *c + 1 : 1;
        if (icpp_hmap_put(&h, k1, k2, v) < 0) {
            rc = icpp_err_set(err, ENOMEM, "out of memory");
            break;
        }
        if (v > *top)
            *top = v;
        (*n)++;
    }
    icpp_hmap_free(&h);
    icpp_replay_close(rp);
    return rc < 0 ? rc : 0;
}

/* Run icpp-sample (self) on argv at `period`, without learn samples, into
 * a directory only we can enter; its CPU time and the recording's sample
 * count and hottest context. */
static int pilot(char *const *argv, const char *self, const char *event, uint64_t period, double *secs,
                 uint64_t *top, uint64_t *n, icpp_err *err)
{
    char dir[] = "/tmp/icpp-pilot.XXXXXX", out[64], per[32];
    if (!mkdtemp(dir))
        return icpp_err_set(err, errno, "auto period: cannot make a temporary directory: %s", strerror(errno));
    snprintf(out, sizeof out, "%s/pilot.samples", dir);
    snprintf(per, sizeof per, "%" PRIu64, period);
    size_t na = 0;
    while (argv[na])
        na++;
    char **pv = calloc(na + 12, sizeof *pv);
    if (!pv) {
        rmdir(dir);
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    size_t k = 0;
    pv[k++] = (char *)self;
    pv[k++] = "-q";
    pv[k++] = "--no-learn";
    pv[k++] = "-e";
    pv[k++] = (char *)event;
    pv[k++] = "-c";
    pv[k++] = per;
    pv[k++] = "-o";
    pv[k++] = out;
    pv[k++] = "--";
    for (size_t i = 0; i < na; i++)
        pv[k++] = argv[i];
    int r = run_timed(pv, secs, err);
    free(pv);
    if (r == 0)
        r = hottest(out, top, n, err);
    unlink(out);
    rmdir(dir);
    if (r < 0)
        return icpp_err_prefix(err, "auto period: the sampled pilot");
    if (!*n)
        return icpp_err_set(err, ENODATA, "auto period: the sampled pilot took no sample (the program ran %.3f s)",
                            *secs);
    return 0;
}

int autoperiod_choose(char *const *argv, const char *self, const char *event, int hardware, double given_T,
                      autoperiod *ap, icpp_err *err)
{
    memset(ap, 0, sizeof *ap);
    ap->z = ICPP_STATS_Z95;
    int r;
    if (given_T > 0) {
        ap->T = given_T;
        ap->T_given = 1;
    } else if ((r = run_timed(argv, &ap->T, err)) < 0) {
        return r;
    }
    ap->pilot_period = hardware ? PILOT_PERIOD_HW : PILOT_PERIOD_CLOCK;
    uint64_t stop;
    if ((r = pilot(argv, self, event, ap->pilot_period * PILOT_SPARSE, &ap->T_sparse, &stop, &ap->sparse_samples,
                   err)) < 0 ||
        (r = pilot(argv, self, event, ap->pilot_period, &ap->T_sampled, &ap->top, &ap->pilot_samples, err)) < 0)
        return r;
    ap->p = (double)ap->top / (double)ap->pilot_samples;
    ap->o = ap->pilot_samples > ap->sparse_samples
                ? (ap->T_sampled - ap->T_sparse) / (double)(ap->pilot_samples - ap->sparse_samples)
                : 0;
    if (!(ap->o > AUTOPERIOD_O_FLOOR)) {
        ap->o = AUTOPERIOD_O_FLOOR;
        ap->o_floor = 1;
    }
    /* p = 1 (one context): any count orders it; the floor then applies */
    double n = ap->p < 1 ? icpp_stats_stoker_n(ap->T, ap->p, ap->o, ap->z) : 0;
    ap->n_star = n < AUTOPERIOD_MIN_N ? AUTOPERIOD_MIN_N : n > AUTOPERIOD_MAX_N ? AUTOPERIOD_MAX_N : n;
    /* The run's events without sampling, spread over n* samples, and each
     * sample's own: a clock counts the time a sample costs the program, so
     * the dense pilot counted its run and pilot_samples samples' cost (on a
     * loaded VM half of its events: 0.47 s counted for a 0.24 s run).  Two
     * pilots give both: events = events0 + samples x event_o. */
    double dense = (double)ap->pilot_samples * (double)ap->pilot_period;
    double sparse = (double)ap->sparse_samples * (double)ap->pilot_period * PILOT_SPARSE;
    ap->event_o = ap->pilot_samples > ap->sparse_samples
                      ? (dense - sparse) / (double)(ap->pilot_samples - ap->sparse_samples) : 0;
    if (!(ap->event_o > 0) || hardware)
        ap->event_o = 0;        /* within noise; a hardware event counts the program only */
    ap->events0 = dense - (double)ap->pilot_samples * ap->event_o;
    if (!(ap->events0 > 0.1 * dense)) {
        /* the pilots disagree past reason (sampling would be 90% of the
         * dense pilot; under a load of 16 on 2 cores it was 53%): the
         * dense pilot's count */
        ap->events0 = dense;
        ap->event_o = 0;
    }
    double per_n = ap->events0 / ap->n_star + ap->event_o;
    /* A clock's period never below 10 o: a sample costs o of the
     * program's own time, and cpu-clock counts it, so a period near o
     * would sample mostly the sampling (measured: 10 us on a 13 ms
     * program with o = 25 us ran it 60,000 samples long). */
    double floor_ns = AUTOPERIOD_O_SHARE * ap->o * 1e9;
    if (floor_ns < AUTOPERIOD_MIN_PERIOD)
        floor_ns = AUTOPERIOD_MIN_PERIOD;
    if (!hardware && per_n < floor_ns) {
        per_n = floor_ns;
        ap->capped = 1;
    }
    ap->period = per_n >= 1 ? (uint64_t)per_n : 1;
    return 0;
}

void autoperiod_print(const autoperiod *ap, FILE *f, const char *event)
{
    fprintf(f, "icpp-sample: auto period: T = %.3f s CPU (%s); pilots: %" PRIu64 " samples at period %" PRIu64
               " in %.3f s, %" PRIu64 " at %" PRIu64 " in %.3f s; p = %.4f (the hottest context: %" PRIu64
               " samples); o = %.2f us per sample%s; z = %.2f\n",
            ap->T, ap->T_given ? "given" : "unprofiled run", ap->pilot_samples, ap->pilot_period, ap->T_sampled,
            ap->sparse_samples, ap->pilot_period * PILOT_SPARSE, ap->T_sparse, ap->p, ap->top, ap->o * 1e6,
            ap->o_floor ? " (the pilots' difference was within noise: the floor)"
                        : " = (dense CPU - sparse CPU) / (dense samples - sparse samples)",
            ap->z);
    fprintf(f, "icpp-sample: auto period: n* = (T z sqrt(p(1-p)) / (2 o p))^(2/3) = %.0f samples%s -> period %" PRIu64
               " on %s = E0 / n* + e (E0 = %.0f events without sampling, e = %.0f per sample: the pilots' "
               "difference)%s\n",
            ap->n_star, ap->n_star <= AUTOPERIOD_MIN_N || ap->n_star >= AUTOPERIOD_MAX_N ? " (clamped)" : "", ap->period,
            event, ap->events0, ap->event_o,
            ap->capped ? " (raised to 10 o: sampling may cost at most a tenth of the run)" : "");
}

void autoperiod_print_result(const autoperiod *ap, FILE *f, uint64_t samples)
{
    double lo, hi;
    icpp_stats_share_ci(ap->p * (double)samples, (double)samples, ap->z, &lo, &hi);
    /* the samples the period takes: n*, or fewer where it was raised */
    double per = (double)ap->period - ap->event_o;
    double planned = per > 0 ? ap->events0 / per : ap->n_star;
    fprintf(f, "icpp-sample: auto period: %" PRIu64 " samples taken (%.0f planned%s); at that count the hottest "
               "context's share %.1f%% has the 95%% interval %.1f-%.1f%% (width %.2f points)\n",
            samples, planned, ap->capped ? ", fewer than n*: the period was raised" : " = n*", 100 * ap->p,
            100 * lo, 100 * hi, 100 * (hi - lo));
}
