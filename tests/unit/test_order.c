/* test_order.c -- lib/order.c: random times with ties, rounds, spill on and off, against a reference sort. */
#include "order.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(uint64_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng % n;
}

static int cmp_ent(const void *a, const void *b)
{
    const icpp_order_ent *x = a, *y = b;
    if (x->time != y->time)
        return x->time < y->time ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

/* The reference: entries held in an array, the release a sort and a prefix. */
typedef struct ref {
    icpp_order_ent *v;
    size_t          n;
} ref;

static size_t ref_release(ref *r, uint64_t limit, icpp_order_ent *out)
{
    qsort(r->v, r->n, sizeof *r->v, cmp_ent);
    size_t k = 0;
    while (k < r->n && r->v[k].time <= limit)
        k++;
    memcpy(out, r->v, k * sizeof *out);
    memmove(r->v, r->v + k, (r->n - k) * sizeof *r->v);
    r->n -= k;
    return k;
}

/* Random pushes (times from a small range: many ties), releases up to random
 * limits, rounds; the orderer (flags, window) must release what the
 * reference does, in the same order.  Returns how many entries it spilled. */
static uint64_t random_ops(int flags, size_t window, uint64_t seed, size_t nops, uint64_t release_per_10k)
{
    rng = seed;
    icpp_order o;
    icpp_order_init(&o, flags);
    if (window)
        CHECK(icpp_order_set_window(&o, window) == 0, "window %zu", window);
    ref r = {malloc(nops * sizeof *r.v), 0};
    icpp_order_ent *want = malloc(nops * sizeof *want);
    uint64_t seq = 0, base = 0, newest = 0, round_newest = 0, limit_ref = 0;
    int bad = 0;
    for (size_t i = 0; i < nops && !bad; i++) {
        uint64_t op = rnd(10000);
        if (op < 10000 - 1000 - release_per_10k) {     /* push */
            uint64_t t = base + rnd(40);
            seq += 1 + rnd(3);                          /* unique and growing, not dense (a file offset) */
            icpp_err err = {0};
            if (icpp_order_push(&o, t, seq, seq * 7, &err) < 0) {
                CHECK(0, "push: %s", err.msg);
                bad = 1;
            }
            r.v[r.n++] = (icpp_order_ent){t, seq};
            newest = t > newest ? t : newest;
            if (rnd(10) == 0)
                base += rnd(20);
        } else if (op < 10000 - release_per_10k) {     /* round */
            icpp_order_round(&o);
            limit_ref = round_newest;
            round_newest = newest;
            if (o.limit != limit_ref) {
                CHECK(0, "round limit %llu, want %llu", (unsigned long long)o.limit, (unsigned long long)limit_ref);
                bad = 1;
            }
        } else {                                        /* release up to a limit */
            uint64_t k10 = rnd(10);                     /* mostly part of them, or at the round limit, or all */
            uint64_t limit = k10 < 7 ? (base > 20 ? base - 20 : 0) + rnd(40) : k10 < 9 ? o.limit : UINT64_MAX;
            size_t k = ref_release(&r, limit, want), got = 0;
            icpp_order_ent e;
            uint64_t pay = 0;
            icpp_err err = {0};
            int rc;
            while ((rc = icpp_order_next(&o, limit, &e, &pay, &err)) > 0) {
                if (got >= k || e.time != want[got].time || e.seq != want[got].seq ||
                    ((flags & ICPP_ORDER_PAYLOAD) && pay != e.seq * 7)) {
                    CHECK(0, "op %zu: release %zu: (%llu, %llu), want %zu entries", i, got,
                          (unsigned long long)e.time, (unsigned long long)e.seq, k);
                    bad = 1;
                    break;
                }
                got++;
            }
            if (!bad && (rc < 0 || got != k)) {
                CHECK(0, "op %zu: %zu released of %zu (rc %d: %s)", i, got, k, rc, err.msg);
                bad = 1;
            }
        }
    }
    /* the end: everything, in order */
    size_t k = ref_release(&r, UINT64_MAX, want), got = 0;
    icpp_order_ent e;
    while (!bad && icpp_order_next(&o, UINT64_MAX, &e, NULL, NULL) > 0)
        if (got < k && e.time == want[got].time && e.seq == want[got].seq)
            got++;
        else
            bad = 1;
    CHECK(!bad && got == k && o.n == 0 && o.nruns == 0, "end: %zu of %zu", got, k);
    uint64_t spilled = o.spilled;
    if (window)
        CHECK(o.held_max <= window, "held %zu, window %zu", o.held_max, window);
    icpp_order_free(&o);
    free(r.v);
    free(want);
    return spilled;
}

/* Sources each in time order, read round by round (a reader that drains
 * each in turn while they go on writing): released at the round limits,
 * everything comes out in one time order, and the window stays small. */
static void rounds(int flags, size_t window)
{
    enum { NSRC = 5, PER = 4000 };
    rng = 12345;
    static icpp_order_ent all[NSRC * PER];
    static uint64_t times[NSRC][PER];
    size_t pos[NSRC] = {0}, n = 0;
    for (int c = 0; c < NSRC; c++) {
        uint64_t t = rnd(100);
        for (int i = 0; i < PER; i++)
            times[c][i] = t += rnd(c + 2);              /* ties within and across sources */
    }
    icpp_order o;
    icpp_order_init(&o, flags);
    if (window)
        icpp_order_set_window(&o, window);
    uint64_t clock = 0, seq = 0;
    icpp_order_ent e;
    int more = 1;
    while (more) {
        more = 0;
        for (int c = 0; c < NSRC; c++) {
            clock += rnd(15);                           /* the sources write on while the reader reads */
            while (pos[c] < PER && times[c][pos[c]] <= clock) {
                CHECK(icpp_order_push(&o, times[c][pos[c]], seq++, 0, NULL) == 0, "push");
                pos[c]++;
            }
            more |= pos[c] < PER;
        }
        icpp_order_round(&o);
        while (icpp_order_next(&o, more ? o.limit : UINT64_MAX, &e, NULL, NULL) > 0)
            all[n++] = e;
    }
    int sorted = n == NSRC * PER;
    for (size_t i = 1; sorted && i < n; i++)
        sorted = cmp_ent(&all[i - 1], &all[i]) < 0;
    CHECK(sorted, "rounds (flags %d, window %zu): %zu records in one time order", flags, window, n);
    CHECK(o.held_max < NSRC * PER / 10, "rounds: %zu held at most", o.held_max);
    icpp_order_free(&o);
}

int main(void)
{
    /* without spill, with payloads, with spill through small windows: the same order */
    for (uint64_t seed = 1; seed <= 20; seed++) {
        uint64_t s = seed * 0x9e3779b97f4a7c15ull, often = seed & 1 ? 1000 : 100;   /* releases per 10,000 ops */
        random_ops(0, 0, s, 3000, often);
        random_ops(ICPP_ORDER_PAYLOAD, 0, s, 3000, often);
        uint64_t s1 = random_ops(ICPP_ORDER_SPILL, 1, s, 3000, often);
        uint64_t s7 = random_ops(ICPP_ORDER_SPILL, 7, s, 3000, often);
        uint64_t s64 = random_ops(ICPP_ORDER_SPILL, 64, s, 3000, 100);
        CHECK(s1 > 0 && s7 > 0 && s64 > 0, "seed %llu: spilled %llu %llu %llu", (unsigned long long)seed,
              (unsigned long long)s1, (unsigned long long)s7, (unsigned long long)s64);
    }
    CHECK(random_ops(ICPP_ORDER_SPILL, 0, 7, 3000, 100) == 0, "default window: no spill");
    /* more than ORDER_RUN_BUF entries per run: the read-ahead refills */
    CHECK(random_ops(ICPP_ORDER_SPILL, 1500, 99, 20000, 2) > 0, "long runs");
    random_ops(0, 0, 99, 20000, 2);
    rounds(0, 0);
    rounds(ICPP_ORDER_SPILL, 16);

    /* the window: only with SPILL, only before the first entry, not 0 */
    icpp_order o;
    icpp_order_init(&o, 0);
    CHECK(icpp_order_set_window(&o, 10) < 0, "no window without spill");
    icpp_order_free(&o);
    icpp_order_init(&o, ICPP_ORDER_SPILL);
    CHECK(icpp_order_set_window(&o, 0) < 0, "window 0");
    icpp_order_push(&o, 1, 1, 0, NULL);
    CHECK(icpp_order_set_window(&o, 10) < 0, "window after an entry");
    icpp_order_free(&o);

    /* a spill file that cannot be made: the push fails with the message */
    setenv("TMPDIR", "/nonexistent/icpp-order-test", 1);
    icpp_order_init(&o, ICPP_ORDER_SPILL);
    icpp_order_set_window(&o, 2);
    icpp_err err = {0};
    int rc = icpp_order_push(&o, 3, 1, 0, &err) | icpp_order_push(&o, 2, 2, 0, &err);
    CHECK(rc == 0, "two fit");
    CHECK(icpp_order_push(&o, 1, 3, 0, &err) < 0 &&
              !strncmp(err.msg, "cannot create a spill file in /nonexistent/icpp-order-test: ", 60) &&
              strstr(err.msg, "; set TMPDIR to a writable directory"),
          "spill file: %s", err.msg);
    icpp_order_ent e;
    CHECK(icpp_order_next(&o, UINT64_MAX, &e, NULL, NULL) == 1 && e.time == 2, "the held ones stay");
    icpp_order_free(&o);
    unsetenv("TMPDIR");
    return check_done("order");
}
