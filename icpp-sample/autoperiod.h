/* autoperiod.h -- icpp-sample --auto-period: the sampling period from Stoker's sample-size model, with its inputs measured by pilot runs. */
#ifndef ICPP_SAMPLE_AUTOPERIOD_H
#define ICPP_SAMPLE_AUTOPERIOD_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct autoperiod {
    /* inputs */
    double   T;                 /* unprofiled run time, s of CPU (user + system; measured or given) */
    int      T_given;           /* T came from --pilot-time */
    double   T_sampled;         /* the dense pilot's CPU time, s (icpp-sample's and the program's) */
    double   T_sparse;          /* the sparse pilot's */
    uint64_t pilot_period;      /* the dense pilot's period (events; ns for clocks); the sparse one's is 10x */
    uint64_t pilot_samples;     /* samples the dense pilot took */
    uint64_t sparse_samples;    /* samples the sparse pilot took */
    uint64_t top;               /* of the dense pilot's, in the hottest context */
    double   p;                 /* top / pilot_samples */
    double   o;                 /* cost per sample, s: (T_sampled - T_sparse) / (pilot_samples - sparse_samples) */
    int      o_floor;           /* that was within noise: o is the floor */
    double   z;
    /* outputs */
    double   n_star;            /* eq. 4.16, clamped */
    double   events0;           /* the run's events without sampling, from the two pilots */
    double   event_o;           /* events a sample adds to the run (a clock counts its cost) */
    uint64_t period;            /* the period chosen: events0 / n* + event_o, or the floor */
    int      capped;            /* raised to AUTOPERIOD_O_SHARE * o (a clock) */
} autoperiod;

/* The smallest and largest sample counts and the smallest clock period
 * (the kernel's hrtimer floor is 10 us) the choice is clamped to. */
#define AUTOPERIOD_MIN_N      1000
#define AUTOPERIOD_MAX_N      10000000
#define AUTOPERIOD_MIN_PERIOD 10000
/* A clock's period is at least this many times o: sampling costs at most
 * about 1/AUTOPERIOD_O_SHARE of the run, whatever n* asks. */
#define AUTOPERIOD_O_SHARE    10
/* Below this, o is within a run's timing noise and taken as this (s). */
#define AUTOPERIOD_O_FLOOR    0.5e-6

/* Run the pilots for `argv` (PROG ARGS; stdin and stdout of the pilots are
 * /dev/null): an unprofiled run for T unless given_T > 0, then `self`
 * (icpp-sample) sampling `event` at a sparse and at a dense fixed period
 * without learn samples into a private temporary directory.  The dense
 * recording gives p (the share of the hottest (function, height) context --
 * ICPP's stand-in for a call path, which several paths can share), the two
 * run times o, the cost of a sample.  Fills *ap; 0, or -errno with a
 * message (a pilot that fails, or that took no sample). */
int autoperiod_choose(char *const *argv, const char *self, const char *event, int hardware, double given_T,
                      autoperiod *ap, icpp_err *err);

/* The inputs and the choice, for stderr (one line each, prefixed). */
void autoperiod_print(const autoperiod *ap, FILE *f, const char *event);
/* After the run: the samples actually taken and the hottest context's
 * interval half-width at that count. */
void autoperiod_print_result(const autoperiod *ap, FILE *f, uint64_t samples);

#endif
