/* jitter.c -- icpp-sample --jitter: randomized sampling intervals (period * (1 + uniform(-R, R)) per sample) for software events, through PERF_EVENT_IOC_PERIOD. */
#include "jitter.h"
#include "vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <time.h>

int jitter_init(jitter *j, double r)
{
    memset(j, 0, sizeof *j);
    j->r = r;
    icpp_hmap_init(&j->fds);
    if (getrandom(&j->rng, sizeof j->rng, 0) != (ssize_t)sizeof j->rng)
        j->rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull;
    j->rng |= 1;
    return 0;
}

void jitter_free(jitter *j)
{
    icpp_hmap_free(&j->fds);
    free(j->ev);
    memset(j, 0, sizeof *j);
}

void jitter_attr(struct perf_event_attr *a)
{
    if (a->freq) {
        uint64_t f = a->sample_freq ? a->sample_freq : 4000;
        a->freq = 0;
        a->sample_period = 1000000000ull / f ? 1000000000ull / f : 1;
    }
    a->watermark = 0;
    a->wakeup_events = 1;
}

/* A period from [base (1 - r), base (1 + r)], at least 1. */
static uint64_t draw(jitter *j, uint64_t base)
{
    j->rng ^= j->rng >> 12;
    j->rng ^= j->rng << 25;
    j->rng ^= j->rng >> 27;
    double u = (double)((j->rng * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;   /* [0, 1) */
    double p = (double)base * (1 + j->r * (2 * u - 1));
    return p >= 1 ? (uint64_t)p : 1;
}

static void rearm(jitter *j, struct jitter_fd *e)
{
    uint64_t p = draw(j, e->base);
    if (ioctl(e->fd, PERF_EVENT_IOC_PERIOD, &p) < 0)
        j->failed++;
    else
        j->rearmed++;
}

int jitter_add_fd(jitter *j, int fd, uint32_t tid, uint64_t base)
{
    uint64_t id;
    if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
        return 0;           /* cannot tell its samples: it keeps its period */
    if (icpp_vec_reserve((void **)&j->ev, &j->cap, j->n + 1, sizeof *j->ev, 16) < 0)
        return -ENOMEM;
    if (icpp_hmap_put(&j->fds, id, 0, j->n) < 0)
        return -ENOMEM;
    j->ev[j->n] = (struct jitter_fd){fd, tid, base};
    rearm(j, &j->ev[j->n]);
    j->n++;
    return 0;
}

void jitter_on_record(jitter *j, const icpp_perfrec_layout *l, const struct perf_event_header *h)
{
    if (h->type != PERF_RECORD_SAMPLE)
        return;
    /* the fields before the one cut short are read: a sample too short for
     * its TID is passed over */
    icpp_perfrec_sample x;
    icpp_perfrec_sample_parse(l, (const uint8_t *)(h + 1), h->size > sizeof *h ? h->size - sizeof *h : 0, &x);
    if (!(x.have & PERF_SAMPLE_TID) || !(x.have & (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_ID)))
        return;
    uint64_t id = x.id;
    uint32_t tid = x.tid;
    const uint64_t *ix = icpp_hmap_get(&j->fds, id, 0);
    if (!ix)
        return;
    struct jitter_fd *e = &j->ev[*ix];
    if (e->tid != tid) {
        j->inherited++;
        return;
    }
    rearm(j, e);
}
