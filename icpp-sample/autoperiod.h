/* autoperiod.h -- icpp-sample --auto-period: the sampling period from Stoker's sample-size model, with its inputs measured by pilot runs. */
#ifndef ICPP_SAMPLE_AUTOPERIOD_H
#define ICPP_SAMPLE_AUTOPERIOD_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct autoperiod {
    /* inputs */
    double   T;                 /* unprofiled run time, s (measured or given) */
    int      T_given;           /* T came from --pilot-time */
    double   T_sampled;         /* the sampled pilot's run time, s */
    uint64_t pilot_period;      /* the pilot's period (events; ns for clocks) */
    uint64_t pilot_samples;     /* samples the pilot took */
    uint64_t top;               /* of them, in the hottest context */
    double   p;                 /* top / pilot_samples */
    double   o;                 /* cost per sample, s */
    int      o_floor;           /* T_sampled - T was within noise: o is the floor */
    double   z;
    /* outputs */
    double   n_star;            /* eq. 4.16, clamped */
    uint64_t period;            /* the period chosen */
} autoperiod;

/* The smallest and largest sample counts and the smallest clock period
 * (the kernel's hrtimer floor is 10 us) the choice is clamped to. */
#define AUTOPERIOD_MIN_N      1000
#define AUTOPERIOD_MAX_N      10000000
#define AUTOPERIOD_MIN_PERIOD 10000
/* Below this, o is within a run's timing noise and taken as this (s). */
#define AUTOPERIOD_O_FLOOR    0.5e-6

/* Run the pilots for `argv` (PROG ARGS; stdin and stdout of the pilots are
 * /dev/null): an unprofiled run for T unless given_T > 0, then `self`
 * (icpp-sample) sampling `event` at a dense fixed period without learn
 * samples into a private temporary directory, whose recording gives p (the
 * share of the hottest (function, height) context -- ICPP's stand-in for a
 * call path) and o = (T_sampled - T) / samples.  Fills *ap; 0, or -errno
 * with a message (a pilot that fails, or that took no sample). */
int autoperiod_choose(char *const *argv, const char *self, const char *event, int hardware, double given_T,
                      autoperiod *ap, icpp_err *err);

/* The inputs and the choice, for stderr (one line each, prefixed). */
void autoperiod_print(const autoperiod *ap, FILE *f, const char *event);
/* After the run: the samples actually taken and the hottest context's
 * interval half-width at that count. */
void autoperiod_print_result(const autoperiod *ap, FILE *f, uint64_t samples);

#endif
