/* test_tqueue.c -- icpp-sample/tqueue.c: records of two "CPUs" handled in time order, round by round. */
#include "tqueue.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

/* A sample record as icpp-sample opens its events: id, ip, pid/tid, time, ... */
typedef struct { struct perf_event_header h; uint64_t id, ip; uint32_t pid, tid; uint64_t time, tag; } srec;
/* A side-band record with sample_id_all: ..., pid/tid, time, identifier. */
typedef struct { struct perf_event_header h; uint64_t body[3]; uint32_t pid, tid; uint64_t time, ident; } brec;

static srec sample(uint64_t time, uint64_t tag)
{
    return (srec){{PERF_RECORD_SAMPLE, 0, sizeof(srec)}, 1, 0x1000, 7, 7, time, tag};
}

static brec side(uint64_t time, uint64_t tag)
{
    return (brec){{PERF_RECORD_MMAP2, 0, sizeof(brec)}, {tag, 0, 0}, 7, 7, time, 1};
}

static uint64_t seen[64];
static size_t nseen;

static int handle(void *ctx, const struct perf_event_header *h)
{
    (void)ctx;
    uint64_t tag = h->type == PERF_RECORD_SAMPLE ? ((const srec *)h)->tag : ((const brec *)h)->body[0];
    if (nseen < 64)
        seen[nseen++] = tag;
    return 0;
}

static int seen_is(const uint64_t *want, size_t n)
{
    return nseen == n && !memcmp(seen, want, n * sizeof *want);
}

int main(void)
{
    srec s10 = sample(10, 1), s30 = sample(30, 3), s20 = sample(20, 2), s25 = sample(25, 25), s40 = sample(40, 4);
    brec b5 = side(5, 5), b20 = side(20, 20);
    /* (the records' times: lib/perfrec.c, tests/unit/test_perfrec.c) */

    tqueue q;
    tq_init(&q);
    /* round 1: CPU 0 gives 10, 30; CPU 1 gives 20 and an mmap at 5.  Nothing
     * is handled yet: a record older than 30 may still be unread on a CPU. */
    CHECK(!tq_push(&q, &s10.h, s10.time) && !tq_push(&q, &s30.h, s30.time) && !tq_push(&q, &s20.h, s20.time) && !tq_push(&q, &b5.h, b5.time), "push");
    tq_round_end(&q, 0, handle, NULL);
    CHECK(nseen == 0 && tq_held(&q) == 4, "first round: nothing handled (%zu), 4 queued", nseen);
    /* round 2: 25 and an mmap at 20 (after the sample at 20 was queued); up to 30 handled, in time order */
    CHECK(!tq_push(&q, &s25.h, s25.time) && !tq_push(&q, &b20.h, b20.time) && !tq_push(&q, &s40.h, s40.time), "push");
    s25.tag = 99;       /* the queue holds copies */
    tq_round_end(&q, 0, handle, NULL);
    static const uint64_t want2[] = {5, 1, 2, 20, 25, 3};
    CHECK(seen_is(want2, 6), "second round: 5 10 20 20(mmap, queued later) 25 30 (got %zu)", nseen);
    CHECK(tq_held(&q) == 1 && q.ord.round_newest == 40, "40 waits for the next round");
    /* round 3, empty, not final: 40 is now older than the previous round's newest */
    tq_round_end(&q, 0, handle, NULL);
    CHECK(nseen == 7 && seen[6] == 4 && tq_held(&q) == 0, "third round: 40");
    /* final: everything, whatever its time */
    srec late = sample(1000, 8), early = sample(1, 9);
    tq_push(&q, &late.h, late.time);
    tq_push(&q, &early.h, early.time);
    tq_round_end(&q, 1, handle, NULL);
    CHECK(nseen == 9 && seen[7] == 9 && seen[8] == 8 && tq_held(&q) == 0, "final round: all, in time order");
    /* records left unhandled are freed with the queue (ASan's leak check in build-san) */
    srec later = sample(2000, 10);
    tq_push(&q, &later.h, later.time);
    tq_round_end(&q, 0, handle, NULL);
    CHECK(tq_held(&q) == 1 && nseen == 9, "one left: newer than every earlier round");
    tq_free(&q);
    CHECK(tq_held(&q) == 0 && q.ord.heap == NULL, "freed");
    return check_done("tqueue");
}
