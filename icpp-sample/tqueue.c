/* tqueue.c -- icpp-sample's time-ordering queue: records of per-CPU rings handled in time order. */
#include "tqueue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tq_init(tqueue *q)
{
    icpp_order_init(&q->ord, ICPP_ORDER_PAYLOAD);
    q->seq = 0;
}

/* Hand fn the records no later than limit, in time order (fn NULL: free them). */
static void handle(tqueue *q, uint64_t limit, tq_fn fn, void *ctx)
{
    icpp_order_ent e;
    uint64_t copy;
    while (icpp_order_next(&q->ord, limit, &e, &copy, NULL) > 0) {
        struct perf_event_header *h = (struct perf_event_header *)(uintptr_t)copy;
        if (fn)
            fn(ctx, h);
        free(h);
    }
}

void tq_free(tqueue *q)
{
    handle(q, UINT64_MAX, NULL, NULL);
    icpp_order_free(&q->ord);
    tq_init(q);
}

int tq_push(tqueue *q, const struct perf_event_header *h, uint64_t t)
{
    struct perf_event_header *copy = malloc(h->size);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, h, h->size);
    if (icpp_order_push(&q->ord, t, q->seq, (uintptr_t)copy, NULL) < 0) {
        free(copy);
        return -ENOMEM;
    }
    q->seq++;
    return 0;
}

void tq_round_end(tqueue *q, int final, tq_fn fn, void *ctx)
{
    icpp_order_round(&q->ord);
    handle(q, final ? UINT64_MAX : q->ord.limit, fn, ctx);
}

size_t tq_held(const tqueue *q)
{
    return q->ord.n;
}
