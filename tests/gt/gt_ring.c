/* gt_ring.c -- one perf event per CPU for a task, read back in time order. */
#include "gt_ring.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct ring {
    int      fd;
    uint8_t *base;              /* metadata page, then data */
} ring;

typedef struct qrec {
    uint64_t time, seq;         /* order: time, then arrival */
    struct perf_event_header *h;
} qrec;

struct gt_rings {
    ring   *rings;
    int     n;
    size_t  data;               /* data bytes per ring, power of two */
    long    page;
    qrec   *heap;               /* min-heap on (time, seq) */
    size_t  nheap, capheap;
    uint64_t seq;
    struct perf_event_header *current;  /* handed out by gt_rings_next */
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "icpp-gt: out of memory\n");
        exit(125);
    }
    return p;
}

/* CPUs in /sys/devices/system/cpu/online ("0-3,5"). */
static int online_cpus(int *cpus, int max)
{
    int n = 0;
    char buf[1024];
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    if (f && fgets(buf, sizeof buf, f)) {
        for (char *p = buf; *p && *p != '\n';) {
            char *e;
            long lo = strtol(p, &e, 10), hi = lo;
            if (e == p)
                break;
            if (*e == '-')
                hi = strtol(e + 1, &e, 10);
            for (long c = lo; c <= hi && n < max; c++)
                cpus[n++] = (int)c;
            p = *e == ',' ? e + 1 : e;
        }
    }
    if (f)
        fclose(f);
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_CONF);
        for (long i = 0; i < c && n < max; i++)
            cpus[n++] = (int)i;
    }
    return n;
}

static void unmap_all(gt_rings *r)
{
    for (int i = 0; i < r->n; i++)
        if (r->rings[i].base) {
            munmap(r->rings[i].base, r->data + r->page);
            r->rings[i].base = NULL;
        }
}

gt_rings *gt_rings_open(struct perf_event_attr *attr, pid_t pid, int *err,
                        const char **what)
{
    static int cpus[4096];
    int ncpu = online_cpus(cpus, 4096);
    gt_rings *r = xrealloc(NULL, sizeof *r);
    memset(r, 0, sizeof *r);
    r->page = sysconf(_SC_PAGESIZE);
    r->rings = xrealloc(NULL, ncpu * sizeof *r->rings);
    for (int i = 0; i < ncpu; i++) {
        int fd = (int)syscall(SYS_perf_event_open, attr, pid, cpus[i], -1,
                              PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
            *err = errno;
            *what = "perf_event_open";
            gt_rings_close(r);
            return NULL;
        }
        r->rings[r->n++] = (ring){fd, NULL};
    }
    /* One size for all rings: halve until every ring fits the limits
     * (perf_event_mlock_kb per CPU plus RLIMIT_MEMLOCK for non-root). */
    for (r->data = 16u << 20; r->data >= 128u << 10; r->data /= 2) {
        int i;
        for (i = 0; i < r->n; i++) {
            void *p = mmap(NULL, r->data + r->page, PROT_READ | PROT_WRITE,
                           MAP_SHARED, r->rings[i].fd, 0);
            if (p == MAP_FAILED)
                break;
            r->rings[i].base = p;
        }
        if (i == r->n)
            return r;
        *err = errno;
        unmap_all(r);
    }
    *what = "mmap of the perf ring buffers";
    gt_rings_close(r);
    return NULL;
}

size_t gt_rings_size(const gt_rings *r) { return r->data; }
int gt_rings_count(const gt_rings *r) { return r->n; }

void gt_rings_wait(gt_rings *r, int extra_fd, int timeout_ms)
{
    struct pollfd pf[r->n + 1];
    for (int i = 0; i < r->n; i++)
        pf[i] = (struct pollfd){r->rings[i].fd, POLLIN, 0};
    pf[r->n] = (struct pollfd){extra_fd, POLLIN, 0};
    poll(pf, r->n + (extra_fd >= 0), timeout_ms);
}

static bool before(const qrec *a, const qrec *b)
{
    return a->time != b->time ? a->time < b->time : a->seq < b->seq;
}

static void heap_push(gt_rings *r, qrec q)
{
    if (r->nheap == r->capheap) {
        r->capheap = r->capheap ? 2 * r->capheap : 1024;
        r->heap = xrealloc(r->heap, r->capheap * sizeof *r->heap);
    }
    size_t i = r->nheap++;
    while (i > 0 && before(&q, &r->heap[(i - 1) / 2])) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i] = q;
}

static qrec heap_pop(gt_rings *r)
{
    qrec top = r->heap[0], last = r->heap[--r->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->nheap)
            break;
        if (c + 1 < r->nheap && before(&r->heap[c + 1], &r->heap[c]))
            c++;
        if (!before(&r->heap[c], &last))
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->nheap)
        r->heap[i] = last;
    return top;
}

/* A record's timestamp: samples carry IP, TID, TIME first; other records
 * end with the sample_id trailer TID, TIME. */
static uint64_t rec_time(const struct perf_event_header *h)
{
    uint64_t t = 0;
    if (h->type == PERF_RECORD_SAMPLE) {
        if (h->size >= sizeof *h + 24)
            memcpy(&t, (const uint8_t *)(h + 1) + 16, 8);
    } else if (h->size >= sizeof *h + 16) {
        memcpy(&t, (const uint8_t *)h + h->size - 8, 8);
    }
    return t;
}

void gt_rings_fill(gt_rings *r)
{
    for (int i = 0; i < r->n; i++) {
        struct perf_event_mmap_page *meta = (void *)r->rings[i].base;
        uint8_t *data = r->rings[i].base + r->page;
        uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
        uint64_t tail = meta->data_tail;
        while (tail < head) {
            size_t off = tail & (r->data - 1);
            struct perf_event_header hd;
            memcpy(&hd, data + off, sizeof hd);   /* 8-aligned: never wraps */
            if (hd.size < sizeof hd) {
                fprintf(stderr, "icpp-gt: corrupt perf ring (record size %u)\n",
                        hd.size);
                exit(125);
            }
            struct perf_event_header *h = xrealloc(NULL, hd.size);
            size_t first = r->data - off < hd.size ? r->data - off : hd.size;
            memcpy(h, data + off, first);
            memcpy((uint8_t *)h + first, data, hd.size - first);
            heap_push(r, (qrec){rec_time(h), r->seq++, h});
            tail += hd.size;
        }
        __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
    }
}

const struct perf_event_header *gt_rings_next(gt_rings *r, uint64_t until)
{
    free(r->current);
    r->current = NULL;
    if (r->nheap == 0 || r->heap[0].time > until)
        return NULL;
    r->current = heap_pop(r).h;
    return r->current;
}

void gt_rings_disable(gt_rings *r)
{
    for (int i = 0; i < r->n; i++)
        ioctl(r->rings[i].fd, PERF_EVENT_IOC_DISABLE, 0);
}

void gt_rings_close(gt_rings *r)
{
    if (!r)
        return;
    unmap_all(r);
    for (int i = 0; i < r->n; i++)
        close(r->rings[i].fd);
    while (r->nheap)
        free(heap_pop(r).h);
    free(r->current);
    free(r->heap);
    free(r->rings);
    free(r);
}
