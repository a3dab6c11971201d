/* tqueue.h -- icpp-sample's time-ordering queue: records of per-CPU rings handled in time order. */
#ifndef ICPP_SAMPLE_TQUEUE_H
#define ICPP_SAMPLE_TQUEUE_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

#include "order.h"

/* Per-CPU rings are each in time order but not with each other: an mmap
 * seen on one CPU must be applied before a sample taken later on another.
 * Records are queued (copied) with their timestamps during a drain round
 * (one drain of every ring); at the end of a round, those no later than the
 * newest timestamp of the rounds before are handled in time order, ties in
 * queueing order (anything still unread was written after that round was
 * read).  The order is lib/order.h's; the timestamps are the records' own
 * (PERF_SAMPLE_TIME and sample_id_all, as icpp-sample opens its events). */
typedef struct tqueue {
    icpp_order ord;             /* records not handled yet: (time, seq), payload their malloc'd copy */
    uint64_t   seq;             /* records queued so far */
} tqueue;

typedef int (*tq_fn)(void *ctx, const struct perf_event_header *h);

void tq_init(tqueue *q);
/* Free the queue and the records still in it (unhandled). */
void tq_free(tqueue *q);
/* Queue a copy of h, whose timestamp is t (lib/perfrec.h, icpp_perfrec_time);
 * 0, or -ENOMEM (h is not queued). */
int tq_push(tqueue *q, const struct perf_event_header *h, uint64_t t);
/* End a round: hand fn (in time order) the records no later than the
 * previous rounds' newest timestamp, or all of them if final.  fn's return
 * value is ignored; each record is freed after fn returns. */
void tq_round_end(tqueue *q, int final, tq_fn fn, void *ctx);
/* Records queued and not handled yet. */
size_t tq_held(const tqueue *q);

#endif
