/* perfring.h -- reading perf_event mmap ring buffers record by record. */
#ifndef ICPP_PERFRING_H
#define ICPP_PERFRING_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

typedef struct icpp_ring {
    int      fd;
    void    *base;       /* mmap: metadata page + data pages */
    size_t   data_size;  /* power of two */
    size_t   map_size;
    uint8_t *copy;       /* a record that wraps around is copied here */
    size_t   copy_cap;
} icpp_ring;

/* mmap `pages` (a power of two) data pages of fd's ring buffer. */
int  icpp_ring_map(icpp_ring *r, int fd, size_t pages, icpp_err *err);
void icpp_ring_unmap(icpp_ring *r);

/* Call fn for every complete record now in the buffer, then release the
 * space.  fn returns 0 to go on, non-zero to stop (remaining records stay).
 * Returns the number of records consumed. */
typedef int (*icpp_ring_fn)(void *ctx, const struct perf_event_header *h);
size_t icpp_ring_drain(icpp_ring *r, icpp_ring_fn fn, void *ctx);

#endif
