/* tqueue.c -- icpp-sample's time-ordering queue: records of per-CPU rings handled in time order. */
#include "tqueue.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

void tq_init(tqueue *q)
{
    memset(q, 0, sizeof *q);
}

void tq_free(tqueue *q)
{
    for (size_t i = 0; i < q->n; i++)
        free(q->q[i].h);
    free(q->q);
    tq_init(q);
}

void tq_round_begin(tqueue *q)
{
    q->round_max = 0;
}

int tq_push(tqueue *q, const struct perf_event_header *h, uint64_t t)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? 2 * q->cap : 4096;
        tq_rec *nq = realloc(q->q, nc * sizeof *nq);
        if (!nq)
            return -ENOMEM;
        q->q = nq;
        q->cap = nc;
    }
    struct perf_event_header *copy = malloc(h->size);
    if (!copy)
        return -ENOMEM;
    memcpy(copy, h, h->size);
    if (t > q->round_max)
        q->round_max = t;
    q->q[q->n++] = (tq_rec){t, q->seq++, copy};
    return 0;
}

static int rec_cmp(const void *a, const void *b)
{
    const tq_rec *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Handle queued records with time <= limit, in time order. */
static void process(tqueue *q, uint64_t limit, tq_fn fn, void *ctx)
{
    if (!q->n)
        return;
    qsort(q->q, q->n, sizeof *q->q, rec_cmp);
    size_t i = 0;
    for (; i < q->n && q->q[i].time <= limit; i++) {
        assert(!i || rec_cmp(&q->q[i - 1], &q->q[i]) < 0);     /* sorted, seq unique */
        fn(ctx, q->q[i].h);
        free(q->q[i].h);
    }
    memmove(q->q, q->q + i, (q->n - i) * sizeof *q->q);
    q->n -= i;
}

void tq_round_end(tqueue *q, int final, tq_fn fn, void *ctx)
{
    process(q, final ? UINT64_MAX : q->prev_round_max, fn, ctx);
    if (q->round_max > q->prev_round_max)
        q->prev_round_max = q->round_max;
}
