/* order.c -- time order of records: entries by (time, sequence), released round by round. */
#include "order.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ORDER_RUN_BUF 512       /* entries read ahead from each spilled run */

/* A sorted run of entries spilled to the temporary file. */
struct icpp_order_run {
    uint64_t        at, left;   /* next entry's offset in the spill file; entries still there */
    icpp_order_ent *buf;        /* entries read ahead */
    size_t          pos, n;
};

static int ent_less(const icpp_order_ent *x, const icpp_order_ent *y)
{
    return x->time != y->time ? x->time < y->time : x->seq < y->seq;
}

static int cmp_ent(const void *a, const void *b)
{
    const icpp_order_ent *x = a, *y = b;
    return ent_less(x, y) ? -1 : ent_less(y, x);
}

void icpp_order_init(icpp_order *o, int flags)
{
    assert(!((flags & ICPP_ORDER_PAYLOAD) && (flags & ICPP_ORDER_SPILL)));     /* runs hold no payloads */
    memset(o, 0, sizeof *o);
    o->flags = flags;
    o->window = flags & ICPP_ORDER_SPILL ? ICPP_ORDER_WINDOW : SIZE_MAX;
    o->spill_fd = -1;
}

void icpp_order_free(icpp_order *o)
{
    free(o->heap);
    free(o->pay);
    for (size_t i = 0; i < o->nruns; i++)
        free(o->runs[i].buf);
    free(o->runs);
    if (o->spill_fd >= 0)
        close(o->spill_fd);
    icpp_order_init(o, o->flags);
}

int icpp_order_set_window(icpp_order *o, size_t records)
{
    if (records < 1 || !(o->flags & ICPP_ORDER_SPILL) || o->n || o->nruns)
        return -EINVAL;
    o->window = records;
    return 0;
}

/* ---- the heap (pay, if any, moves with heap) ---- */

static void heap_push(icpp_order *o, icpp_order_ent e, uint64_t pay)
{
    size_t i = o->n++;
    while (i > 0 && ent_less(&e, &o->heap[(i - 1) / 2])) {
        o->heap[i] = o->heap[(i - 1) / 2];
        if (o->pay)
            o->pay[i] = o->pay[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    o->heap[i] = e;
    if (o->pay)
        o->pay[i] = pay;
}

static void heap_pop(icpp_order *o)
{
    icpp_order_ent last = o->heap[--o->n];
    uint64_t lastpay = o->pay ? o->pay[o->n] : 0;
    size_t i = 0, n = o->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ent_less(&o->heap[c + 1], &o->heap[c]))
            c++;
        if (!ent_less(&o->heap[c], &last))
            break;
        o->heap[i] = o->heap[c];
        if (o->pay)
            o->pay[i] = o->pay[c];
        i = c;
    }
    if (n) {
        o->heap[i] = last;
        if (o->pay)
            o->pay[i] = lastpay;
    }
}

/* Room for one more entry: doubled from 1024, never past the window. */
static int grow(icpp_order *o, icpp_err *err)
{
    size_t nc = o->cap ? 2 * o->cap : 1024;
    nc = nc < o->window ? nc : o->window;
    icpp_order_ent *nh = realloc(o->heap, nc * sizeof *nh);
    if (!nh)
        return icpp_err_set(err, ENOMEM, "out of memory holding %zu records for time order", o->n);
    o->heap = nh;
    if (o->flags & ICPP_ORDER_PAYLOAD) {
        uint64_t *np = realloc(o->pay, nc * sizeof *np);
        if (!np)
            return icpp_err_set(err, ENOMEM, "out of memory holding %zu records for time order", o->n);
        o->pay = np;
    }
    o->cap = nc;
    return 0;
}

/* ---- spilling ---- */

/* An unlinked temporary file in $TMPDIR (or /tmp). */
static int spill_file(icpp_err *err)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        char t[4096];
        snprintf(t, sizeof t, "%s/icpp-order-XXXXXX", dir);
        fd = mkstemp(t);
        if (fd >= 0)
            unlink(t);
    }
    if (fd < 0)
        return icpp_err_set(err, errno, "cannot create a spill file in %s: %s; set TMPDIR to a writable directory",
                            dir, strerror(errno));
    return fd;
}

/* The heap is full: write it out as a sorted run and empty it. */
static int spill(icpp_order *o, icpp_err *err)
{
    if (o->spill_fd < 0 && (o->spill_fd = spill_file(err)) < 0)
        return -1;
    icpp_order_run *nr = realloc(o->runs, (o->nruns + 1) * sizeof *nr);
    if (!nr)
        return icpp_err_set(err, ENOMEM, "out of memory");
    o->runs = nr;
    qsort(o->heap, o->n, sizeof *o->heap, cmp_ent);
    size_t bytes = o->n * sizeof *o->heap, done = 0;
    while (done < bytes) {
        ssize_t w = pwrite(o->spill_fd, (const uint8_t *)o->heap + done, bytes - done, (off_t)(o->spill_len + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return icpp_err_set(err, w < 0 ? errno : ENOSPC, "writing the spill file (records out of time order): %s; "
                                "set TMPDIR to a directory with room", strerror(w < 0 ? errno : ENOSPC));
        done += (size_t)w;
    }
    o->runs[o->nruns++] = (icpp_order_run){o->spill_len, o->n, NULL, 0, 0};
    o->spill_len += bytes;
    o->spilled += o->n;
    o->n = 0;
    return 0;
}

/* Read ahead the next entries of a spilled run (none left: u->n == 0). */
static int run_refill(icpp_order *o, icpp_order_run *u, icpp_err *err)
{
    if (!u->buf && !(u->buf = malloc(ORDER_RUN_BUF * sizeof *u->buf)))
        return icpp_err_set(err, ENOMEM, "out of memory");
    size_t n = u->left < ORDER_RUN_BUF ? (size_t)u->left : ORDER_RUN_BUF, bytes = n * sizeof *u->buf, done = 0;
    while (done < bytes) {
        ssize_t g = pread(o->spill_fd, (uint8_t *)u->buf + done, bytes - done, (off_t)(u->at + done));
        if (g < 0 && errno == EINTR)
            continue;
        if (g <= 0)
            return icpp_err_set(err, g < 0 ? errno : EIO, "reading the spill file back: %s",
                                g < 0 ? strerror(errno) : "short read");
        done += (size_t)g;
    }
    u->at += bytes;
    u->left -= n;
    u->pos = 0;
    u->n = n;
    return 0;
}

/* ---- the API ---- */

int icpp_order_push(icpp_order *o, uint64_t time, uint64_t seq, uint64_t payload, icpp_err *err)
{
    if (o->n == o->window && spill(o, err) < 0)
        return -1;
    if (o->n == o->cap && grow(o, err) < 0)
        return -1;
    heap_push(o, (icpp_order_ent){time, seq}, payload);
    if (time > o->newest)
        o->newest = time;
    if (o->n > o->held_max)
        o->held_max = o->n;
    return 0;
}

void icpp_order_round(icpp_order *o)
{
    o->limit = o->round_newest;
    o->round_newest = o->newest;
}

int icpp_order_next(icpp_order *o, uint64_t limit, icpp_order_ent *e, uint64_t *payload, icpp_err *err)
{
    const icpp_order_ent *best = o->n ? &o->heap[0] : NULL;
    size_t from = SIZE_MAX;                     /* best's run, or SIZE_MAX: the heap's */
    for (size_t i = 0; i < o->nruns;) {
        icpp_order_run *u = &o->runs[i];
        if (u->pos == u->n && u->left && run_refill(o, u, err) < 0)
            return -1;
        if (u->pos == u->n) {                   /* run used up */
            free(u->buf);
            o->runs[i] = o->runs[--o->nruns];
            best = o->n ? &o->heap[0] : NULL;   /* restart: entries moved */
            from = SIZE_MAX;
            i = 0;
            continue;
        }
        if (!best || ent_less(&u->buf[u->pos], best)) {
            best = &u->buf[u->pos];
            from = i;
        }
        i++;
    }
    if (!best || best->time > limit)
        return 0;
    *e = *best;
    if (from != SIZE_MAX) {
        o->runs[from].pos++;
        return 1;
    }
    if (payload && o->pay)
        *payload = o->pay[0];
    heap_pop(o);
    return 1;
}
