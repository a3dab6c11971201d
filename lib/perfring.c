/* perfring.c -- reading perf_event mmap ring buffers record by record. */
#include "perfring.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int icpp_ring_map(icpp_ring *r, int fd, size_t pages, icpp_err *err)
{
    memset(r, 0, sizeof *r);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    r->fd = fd;
    r->data_size = pages * pg;
    r->map_size = r->data_size + pg;
    r->base = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->base == MAP_FAILED) {
        int e = errno;
        r->base = NULL;
        if (e == EPERM)
            return icpp_err_set(err, e,
                                "cannot map a %zu KiB sample buffer: over the locked-memory limit "
                                "(kernel.perf_event_mlock_kb); use a smaller -m or run as root",
                                r->data_size / 1024);
        return icpp_err_set(err, e, "cannot map the sample buffer: %s", strerror(e));
    }
    return 0;
}

void icpp_ring_unmap(icpp_ring *r)
{
    if (r->base)
        munmap(r->base, r->map_size);
    free(r->copy);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

size_t icpp_ring_drain(icpp_ring *r, icpp_ring_fn fn, void *ctx)
{
    struct perf_event_mmap_page *meta = r->base;
    if (!meta)
        return 0;
    assert(r->data_size && !(r->data_size & (r->data_size - 1)));   /* perfring.h: power of two */
    uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = meta->data_tail;
    const uint8_t *data = (const uint8_t *)r->base + (r->map_size - r->data_size);
    size_t n = 0;
    while (tail + sizeof(struct perf_event_header) <= head) {
        size_t off = (size_t)(tail & (r->data_size - 1));
        struct perf_event_header hdr;
        /* the header itself may wrap */
        for (size_t i = 0; i < sizeof hdr; i++)
            ((uint8_t *)&hdr)[i] = data[(off + i) & (r->data_size - 1)];
        if (hdr.size < sizeof hdr || tail + hdr.size > head)
            break;      /* corrupt or incomplete: stop here */
        const struct perf_event_header *rec;
        if (off + hdr.size <= r->data_size) {
            rec = (const struct perf_event_header *)(data + off);
        } else {
            if (r->copy_cap < hdr.size) {
                uint8_t *nc = realloc(r->copy, 65536);
                if (!nc)
                    break;
                r->copy = nc;
                r->copy_cap = 65536;
            }
            size_t first = r->data_size - off;
            memcpy(r->copy, data + off, first);
            memcpy(r->copy + first, data, hdr.size - first);
            rec = (const struct perf_event_header *)r->copy;
        }
        if (fn(ctx, rec))
            break;
        tail += hdr.size;
        n++;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
    return n;
}
