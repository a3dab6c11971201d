/* test_perfring.c -- lib/perfring.c's drain over a ring built in memory: records in order,
 * a record and a header that wrap around, an incomplete record left, fn stopping, data_tail. */
#include "perfring.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

#define PAGE 4096
#define DATA 256            /* a small ring: wraps soon */

static uint8_t *data;
static struct perf_event_mmap_page *meta;

/* Write a record of `size` bytes (tagged) at ring position pos (wrapping). */
static uint64_t put(uint64_t pos, uint16_t size, uint8_t tag)
{
    uint8_t rec[512];
    struct perf_event_header h = {PERF_RECORD_SAMPLE, 0, size};
    memcpy(rec, &h, sizeof h);
    memset(rec + sizeof h, tag, size - sizeof h);
    for (uint16_t i = 0; i < size; i++)
        data[(pos + i) % DATA] = rec[i];
    return pos + size;
}

static uint8_t got[32];
static uint16_t gotsize[32];
static size_t ngot, stop_after = 1000;

static int take(void *ctx, const struct perf_event_header *h)
{
    (void)ctx;
    const uint8_t *p = (const uint8_t *)(h + 1);
    int same = 1;
    for (size_t i = 0; i + sizeof *h < h->size; i++)
        same &= p[i] == p[0];
    got[ngot] = same ? p[0] : 0xff;
    gotsize[ngot++] = h->size;
    return ngot >= stop_after;
}

int main(void)
{
    uint8_t *base = aligned_alloc(PAGE, 2 * PAGE);     /* a size the alignment divides */
    memset(base, 0, PAGE + DATA);
    meta = (struct perf_event_mmap_page *)base;
    data = base + PAGE;
    icpp_ring r = {.fd = -1, .base = base, .data_size = DATA, .map_size = PAGE + DATA};

    CHECK(icpp_ring_drain(&r, take, NULL) == 0 && ngot == 0, "an empty ring: nothing");
    uint64_t pos = 0;
    pos = put(pos, 40, 1);
    pos = put(pos, 100, 2);
    pos = put(pos, 64, 3);
    meta->data_head = pos;
    CHECK(icpp_ring_drain(&r, take, NULL) == 3 && ngot == 3, "three records (%zu)", ngot);
    CHECK(got[0] == 1 && got[1] == 2 && got[2] == 3 && gotsize[1] == 100, "in order, whole");
    CHECK(meta->data_tail == 204, "data_tail released to 204 (%llu)", (unsigned long long)meta->data_tail);

    /* a record that wraps (204 + 120 > 256), then one whose header wraps (324 % 256 = 68: no; make it 252) */
    ngot = 0;
    pos = put(pos, 120, 4);             /* 204..324: wraps */
    meta->data_head = pos;
    CHECK(icpp_ring_drain(&r, take, NULL) == 1 && got[0] == 4 && gotsize[0] == 120, "a wrapping record, copied whole");
    ngot = 0;
    pos = put(pos, 184, 5);             /* 324..508: ring offsets 68..252 */
    pos = put(pos, 24, 6);              /* 508: offset 252, its 8-byte header wraps */
    meta->data_head = pos;
    CHECK(icpp_ring_drain(&r, take, NULL) == 2 && got[0] == 5 && got[1] == 6 && gotsize[1] == 24,
          "a record whose header wraps");

    /* incomplete: head inside a record; it stays for the next drain */
    ngot = 0;
    uint64_t start = pos;
    pos = put(pos, 48, 7);
    meta->data_head = pos - 8;
    CHECK(icpp_ring_drain(&r, take, NULL) == 0 && meta->data_tail == start, "an incomplete record stays");
    meta->data_head = pos;
    CHECK(icpp_ring_drain(&r, take, NULL) == 1 && got[0] == 7, "and comes once complete");

    /* fn stops: the rest stays */
    ngot = 0;
    stop_after = 1;
    pos = put(pos, 32, 8);
    pos = put(pos, 32, 9);
    meta->data_head = pos;
    CHECK(icpp_ring_drain(&r, take, NULL) == 0 && ngot == 1, "fn stopped at the first");
    stop_after = 1000;
    CHECK(icpp_ring_drain(&r, take, NULL) == 2 && got[1] == 8 && got[2] == 9, "the stopped record comes again");

    /* a corrupt size (smaller than a header) stops the drain, nothing consumed */
    ngot = 0;
    start = meta->data_tail;
    struct perf_event_header h0 = {PERF_RECORD_SAMPLE, 0, 4};
    for (size_t i = 0; i < sizeof h0; i++)
        data[(pos + i) % DATA] = ((uint8_t *)&h0)[i];
    meta->data_head = pos + 16;
    CHECK(icpp_ring_drain(&r, take, NULL) == 0 && meta->data_tail == start, "a size below a header: stop");

    free(r.copy);
    free(base);
    return check_done("perfring");
}
