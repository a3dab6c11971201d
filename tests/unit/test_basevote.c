/* test_basevote.c -- thread bases by voting: the true base wins, alignment, recursion, ties and low support refused, apply, no samples. */
#include "basevote.h"
#include "check.h"

#include <string.h>

#define B_MAIN 0x7ffc00001230ull        /* a startstack: 16-byte aligned */
#define B_THR  0x7f0000200000ull        /* a thread's mapping top: page aligned */

/* main (264) -> f (312) -> g (360); main -> g (312); main -> rec (344) -> rec ... 40 deep, 48 bytes a frame */
static icpp_pathmap *map(uint32_t fn[4])
{
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_build_id bid = {20, {0xab}};
    uint32_t m, n_main, n, k;
    icpp_pathmap_add_module(pm, "/bin/prog", &bid, 2, &m);
    icpp_pathmap_set_main(pm, m);
    const char *names[4] = {"main", "f", "g", "rec"};
    for (int i = 0; i < 4; i++)
        icpp_pathmap_add_func(pm, m, 0x1000 * (i + 1), names[i], &fn[i]);
    icpp_pathmap_child(pm, 0, fn[0], &n_main);
    icpp_pathmap_add_height(pm, n_main, 264, 1);
    icpp_pathmap_child(pm, n_main, fn[1], &n);
    icpp_pathmap_add_height(pm, n, 312, 10);
    icpp_pathmap_child(pm, n, fn[2], &k);
    icpp_pathmap_add_height(pm, k, 360, 10);
    icpp_pathmap_child(pm, n_main, fn[2], &n);
    icpp_pathmap_add_height(pm, n, 312, 5);
    n = n_main;
    for (int d = 0; d < 200; d++) {         /* deeper than ICPP_BV_MAX_HEIGHTS */
        icpp_pathmap_child(pm, n, fn[3], &k);
        icpp_pathmap_add_height(pm, k, 344 + 48 * d, 200 - d);
        n = k;
    }
    return pm;
}

/* describe() of thread t */
static const char *describe(const icpp_basevote *bv, const icpp_bv_thread *t)
{
    static char line[512];
    line[0] = 0;
    if (t)
        icpp_basevote_describe(bv, (size_t)(t - icpp_basevote_thread(bv, 0)), line, sizeof line);
    return line;
}

static uint64_t rng = 12345;
static uint32_t rnd(uint32_t n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33) % n;
}

int main(void)
{
    icpp_err err;
    uint32_t fn[4];
    icpp_pathmap *pm = map(fn);
    icpp_basevote *bv = icpp_basevote_new(pm, &err);
    CHECK(bv != NULL, "new: %s", err.msg);

    /* Thread 100/100: f, g and deep recursion (down to depth 199: beyond the
     * stage-1 height cap), 5 samples at heights never trained, 10 outside the map. */
    int voters = 0, fit = 0;
    for (int i = 0; i < 300; i++) {
        uint32_t w = rnd(10), f;
        int64_t h;
        if (w < 3) {
            f = fn[1];
            h = 312;
        } else if (w < 5) {
            f = fn[2];
            h = rnd(2) ? 360 : 312;
        } else {
            f = fn[3];
            h = 344 + 48 * (int64_t)rnd(200);
        }
        icpp_basevote_add(bv, 100, 100, 0, f, B_MAIN - (uint64_t)h, 0);
        voters++;
        fit++;
    }
    for (int i = 0; i < 5; i++, voters++)
        icpp_basevote_add(bv, 100, 100, 0, fn[1], B_MAIN - 1000 - 16 * (uint64_t)i, 0);
    for (int i = 0; i < 10; i++)
        icpp_basevote_add(bv, 100, 100, 0, -1, B_MAIN - 500, 0);
    /* Thread 100/101: g at 312; g's other height (360) gives a candidate that is not page aligned. */
    for (int i = 0; i < 20; i++)
        icpp_basevote_add(bv, 100, 101, 0, fn[2], B_THR - 312, B_THR);
    /* Process 300: every sample in g at one entry SP: two candidates tie. */
    for (int i = 0; i < 20; i++)
        icpp_basevote_add(bv, 300, 300, 0, fn[2], B_MAIN - 360, 0);
    /* Thread 100/100 after an exec: 6 samples agree on one base, 4 on another (60%). */
    for (int i = 0; i < 6; i++)
        icpp_basevote_add(bv, 100, 100, 1, fn[1], B_MAIN + 0x10000 - 312, 0);
    for (int i = 0; i < 4; i++)
        icpp_basevote_add(bv, 100, 100, 1, fn[0], B_MAIN + 0x20000 - 264, 0);
    /* Thread 200/200: nothing in the map. */
    for (int i = 0; i < 7; i++)
        icpp_basevote_add(bv, 200, 200, 0, -1, B_MAIN, 0);
    CHECK(icpp_basevote_tally(bv, 0, &err) == 0, "tally");
    CHECK(icpp_basevote_nthreads(bv) == 5, "%zu threads", icpp_basevote_nthreads(bv));

    const icpp_bv_thread *t = icpp_basevote_find(bv, 100, 100, 0);
    CHECK(t && t->base == B_MAIN && t->accepted && t->samples == 315 && t->voters == (uint64_t)voters &&
          t->votes == (uint64_t)fit, "main thread: base %#llx, %llu of %llu votes", t ? (unsigned long long)t->base : 0,
          t ? (unsigned long long)t->votes : 0, t ? (unsigned long long)t->voters : 0);
    CHECK(t && (t->runner == B_MAIN + 48 || t->runner == B_MAIN - 48) && t->runner_votes < t->votes &&
          t->runner_votes > t->votes / 2, "recursion's runner-up is a frame away: %#llx with %llu",
          t ? (unsigned long long)t->runner : 0, t ? (unsigned long long)t->runner_votes : 0);
    char line[512];
    strcpy(line, describe(bv, t));
    CHECK(strstr(line, "pid 100 tid 100: thread base 0x7ffc00001230 inferred from 300 of 305") != NULL, "%s", line);

    t = icpp_basevote_find(bv, 100, 101, 0);
    CHECK(t && t->base == B_THR && t->accepted && t->votes == 20 && t->runner == 0 && t->recorded == B_THR,
          "thread: page-aligned base only");
    strcpy(line, describe(bv, t));
    CHECK(strstr(line, "no runner-up") && strstr(line, "agrees"), "%s", line);

    t = icpp_basevote_find(bv, 300, 300, 0);
    CHECK(t && !t->accepted && t->votes == 20 && t->runner_votes == 20, "a tie is refused: %llu/%llu %#llx %#llx", t ? (unsigned long long)t->votes : 0, t ? (unsigned long long)t->runner_votes : 0, t ? (unsigned long long)t->base : 0, t ? (unsigned long long)t->runner : 0);
    strcpy(line, describe(bv, t));
    CHECK(strstr(line, "no thread base inferred") && strstr(line, "stay unresolved"), "%s", line);

    t = icpp_basevote_find(bv, 100, 100, 1);
    CHECK(t && !t->accepted && t->base == B_MAIN + 0x10000 && t->votes == 6 && t->voters == 10,
          "60%% support is refused by default");
    strcpy(line, describe(bv, t));
    CHECK(strstr(line, "(exec 1)") == NULL && strstr(line, "60.0%"), "%s", line);

    t = icpp_basevote_find(bv, 200, 200, 0);
    CHECK(t && !t->accepted && t->voters == 0 && t->samples == 7, "no voters");
    strcpy(line, describe(bv, t));
    CHECK(strstr(line, "none of its 7 samples"), "%s", line);
    CHECK(icpp_basevote_find(bv, 1, 1, 0) == NULL, "unknown thread");

    /* apply: a sample without a base gets its thread's accepted one. */
    icpp_func fake = {0x2000, 0, "f", "f", 0, 0x2000, 0};
    icpp_rsample s = {0};
    s.pid = s.tid = 100;
    s.status = ICPP_RS_NOBASE;
    s.func = &fake;
    s.entry_sp = B_MAIN - 312;
    CHECK(icpp_basevote_apply(bv, &s) == 1 && s.base == B_MAIN && s.base_kind == ICPP_BASE_INFERRED &&
          s.height == 312 && s.status == ICPP_RS_OK, "apply");
    s.status = ICPP_RS_NOBASE;
    s.func = NULL;
    s.base = 0;
    CHECK(icpp_basevote_apply(bv, &s) == 1 && s.status == ICPP_RS_NOFUNC, "apply without a function");
    s = (icpp_rsample){.pid = 300, .tid = 300, .status = ICPP_RS_NOBASE, .entry_sp = 1};
    CHECK(icpp_basevote_apply(bv, &s) == 0 && s.status == ICPP_RS_NOBASE && s.base == 0, "refused thread: unchanged");
    s = (icpp_rsample){.pid = 100, .tid = 100, .status = ICPP_RS_OK, .base = 5, .entry_sp = 1};
    CHECK(icpp_basevote_apply(bv, &s) == 0 && s.base == 5, "a recorded base stays");
    CHECK(icpp_basevote_apply(NULL, &s) == 0, "no vote");
    icpp_basevote_free(bv);

    /* A lower minimum accepts the 60% thread. */
    bv = icpp_basevote_new(pm, &err);
    for (int i = 0; i < 6; i++)
        icpp_basevote_add(bv, 100, 100, 1, fn[1], B_MAIN + 0x10000 - 312, 0);
    for (int i = 0; i < 4; i++)
        icpp_basevote_add(bv, 100, 100, 1, fn[0], B_MAIN + 0x20000 - 264, 0);
    icpp_basevote_tally(bv, 0.5, &err);
    t = icpp_basevote_find(bv, 100, 100, 1);
    CHECK(t && t->accepted && t->base == B_MAIN + 0x10000 && t->runner == B_MAIN + 0x20000 && t->runner_votes == 4,
          "min support 0.5");
    strcpy(line, describe(bv, t));
    CHECK(strstr(line, "(exec 1)") == NULL, "gen 1 is the first exec: %s", line);
    icpp_basevote_free(bv);

    /* No samples at all: no threads (the NULL thread array never reaches qsort or bsearch: UBSan). */
    bv = icpp_basevote_new(pm, &err);
    CHECK(bv && icpp_basevote_tally(bv, 0, &err) == 0 && icpp_basevote_nthreads(bv) == 0 &&
          icpp_basevote_find(bv, 100, 100, 0) == NULL && icpp_basevote_thread(bv, 0) == NULL, "a vote without samples");
    icpp_basevote_free(bv);

    /* An ICPP sample file carries its bases: nothing to read, an empty vote. */
    bv = icpp_basevote_infer("/nonexistent/icpp.samples", pm, 0, 0, &err);
    CHECK(bv && icpp_basevote_nthreads(bv) == 0, "infer on a sample file: empty");
    icpp_basevote_free(bv);
    bv = icpp_basevote_infer("/nonexistent/icpp.samples", pm, ICPP_BV_ANY_FILE, 0, &err);
    CHECK(!bv && strstr(err.msg, "/nonexistent/icpp.samples"), "infer: missing file: %s", err.msg);
    icpp_pathmap_free(pm);
    return check_done("basevote");
}
