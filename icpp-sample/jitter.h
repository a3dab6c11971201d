/* jitter.h -- icpp-sample --jitter: randomized sampling intervals (period * (1 + uniform(-R, R)) per sample) for software events, through PERF_EVENT_IOC_PERIOD. */
#ifndef ICPP_SAMPLE_JITTER_H
#define ICPP_SAMPLE_JITTER_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "perfrec.h"

typedef struct jitter {
    double    r;                /* relative half-width: the period is drawn from [P(1-r), P(1+r)] */
    uint64_t  rng;              /* xorshift64* state */
    icpp_hmap fds;              /* kernel event id -> index into ev */
    struct jitter_fd {
        int      fd;
        uint32_t tid;           /* the task the event was opened for */
        uint64_t base;          /* its nominal period */
    } *ev;
    size_t    n, cap;
    uint64_t  rearmed;          /* periods drawn */
    uint64_t  inherited;        /* samples of inherited events (later threads and processes): not randomized */
    uint64_t  failed;           /* PERF_EVENT_IOC_PERIOD refused */
} jitter;

/* r in (0, 1).  0, or -ENOMEM. */
int  jitter_init(jitter *j, double r);
void jitter_free(jitter *j);

/* Make a software event's attributes fit: a fixed period (freq mode's
 * 1e9/freq ns for a clock) and a wakeup per sample, so that the next period
 * is drawn right after each sample. */
void jitter_attr(struct perf_event_attr *a);

/* An opened event fd of task tid with nominal period `base`: draw its first
 * period now.  0, or -ENOMEM. */
int  jitter_add_fd(jitter *j, int fd, uint32_t tid, uint64_t base);

/* A ring-buffer record as it is read (before any reordering), whose
 * samples have layout l (its event id and TID are read by lib/perfrec.h):
 * for a sample of an event opened here for the sampled task itself, draw that event's
 * next period.  Samples of inherited copies (threads and processes created
 * after the events were opened) carry their parent's id; the kernel's
 * PERF_EVENT_IOC_PERIOD does not reach those copies, so they keep the
 * period they inherited -- they are counted, not re-armed. */
void jitter_on_record(jitter *j, const icpp_perfrec_layout *l, const struct perf_event_header *h);

#endif
