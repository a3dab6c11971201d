/* test_learn.c -- lib/learn.c: learn samples become paths with learned counts; repeats (remembered chains) count
 * exactly as often as they occur; the streaming learner equals the file pass; replay's sample selection; the
 * learn trail (neighbours in time, missing mass). */
#include "check.h"

#include "learn.h"
#include "procmaps.h"
#include "replay.h"
#include "samples.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The functions the chains name (only their addresses are used). */
__attribute__((noinline)) int fn_a(int x) { return x * 5 + 2; }
__attribute__((noinline)) int fn_b(int x) { return x * 7 + 3; }
__attribute__((noinline)) int fn_c(int x) { return x * 11 + 4; }
__attribute__((noinline)) int fn_d(int x) { return x * 13 + 5; }

int main(void);

enum { PID = 100, TID = 101 };
#define A(f) ((uint64_t)(uintptr_t)&(f))

static uint64_t ss;     /* the main thread's base */

/* Chains, leaf first: rooted ones reach main; the last is not rooted and
 * joins at (fn_c, 1000), which the first chain makes known. */
typedef struct chain {
    uint8_t  status;
    uint32_t n;
    uint64_t pc[4], esp[4];
} chain;

static chain chains[5];

static void set_chain(chain *c, uint8_t status, uint32_t n, const uint64_t *pc, const uint64_t *esp)
{
    memset(c, 0, sizeof *c);
    c->status = status;
    c->n = n;
    memcpy(c->pc, pc, n * sizeof *pc);
    memcpy(c->esp, esp, n * sizeof *esp);
}

static void make_chains(void)
{
    /* main -> fn_a -> fn_b -> fn_c, leaf at its first instruction */
    set_chain(&chains[0], 0, 4, (uint64_t[]){A(fn_c), A(fn_b) + 2, A(fn_a) + 2, A(main) + 2},
              (uint64_t[]){ss - 1000, ss - 900, ss - 800, ss - 700});
    /* the same context, the leaf's pc elsewhere in fn_c: the same path and heights */
    chains[1] = chains[0];
    chains[1].pc[0] = A(fn_c) + 1;
    /* main -> fn_b -> fn_c: another path */
    set_chain(&chains[2], 0, 3, (uint64_t[]){A(fn_c), A(fn_b) + 2, A(main) + 2},
              (uint64_t[]){ss - 600, ss - 500, ss - 400});
    /* main -> fn_a -> fn_b -> fn_c at other heights: same path, new contexts */
    chains[3] = chains[0];
    for (int i = 0; i < 4; i++)
        chains[3].esp[i] -= 64;
    /* not rooted: fn_c (at 1000) -> fn_d, joined at chain 0's fn_c */
    set_chain(&chains[4], 1, 2, (uint64_t[]){A(fn_d), A(fn_c) + 2}, (uint64_t[]){ss - 1100, ss - 1000});
}

/* A recording of this process with chain i repeated reps[i] times, interleaved, and a profile sample of another
 * thread and of the main thread between them. */
static void write_file(const char *path, const int *reps)
{
    icpp_err err;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0, "readlink");
    exe[n > 0 ? n : 0] = 0;
    icpp_maps mm;
    icpp_maps_init(&mm);
    CHECK(icpp_maps_read(&mm, getpid(), &err) == 0, "maps: %s", err.msg);
    icpp_swriter *w = icpp_swriter_open(path, &err);
    CHECK(w, "writer: %s", err.msg);
    if (!w)
        exit(check_done("learn"));
    icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 1000, 0, 0, 0, 0);
    icpp_swriter_event(w, 1, "cpu-clock", 1, 0, 4000, 0, 0, ICPP_EVENT_LEARN, 0);
    icpp_swriter_proc(w, PID, 0, ss, exe, 0);
    icpp_build_id none = {0, {0}};
    for (size_t i = 0; i < mm.n; i++)
        icpp_swriter_mmap(w, PID, mm.v[i].start, mm.v[i].end - mm.v[i].start, mm.v[i].pgoff, mm.v[i].prot,
                          mm.v[i].path ? mm.v[i].path : "", &none);
    icpp_maps_free(&mm);
    int left[5], more = 1;
    memcpy(left, reps, sizeof left);
    uint64_t t = 1, samples = 0;
    while (more) {
        more = 0;
        for (int i = 0; i < 5; i++) {
            if (!left[i])
                continue;
            left[i]--;
            more = 1;
            const chain *c = &chains[i];
            icpp_learn_chain l = {c->status, c->n, c->pc, c->esp};
            icpp_swriter_learn(w, PID, PID, 1, t++, c->pc[0], c->esp[0], 0, &l);
            icpp_swriter_sample(w, PID, PID, 0, t++, A(fn_a), ss - 4096, 0, NULL);
            icpp_swriter_sample(w, PID, TID, 0, t++, A(fn_b), ss - 8192, 0, NULL);
            samples += 3;
        }
    }
    CHECK(icpp_swriter_close(w, samples, 0, &err) == 0, "close: %s", err.msg);
}

static int by_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The map as text: one line per (path, height) with its learned count, sorted. */
static char *dump(const icpp_pathmap *pm)
{
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    char **lines = NULL;
    size_t nl = 0;
    for (uint32_t k = 1; k < icpp_pathmap_nnodes(pm); k++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, k);
        uint32_t path[64];
        uint32_t d = icpp_pathmap_path(pm, k, path, 64);
        char p[1024] = "";
        size_t o = 0;
        for (uint32_t i = 0; i < d && o < sizeof p; i++) {
            const icpp_pm_func *f = icpp_pathmap_func(pm, path[i]);
            o += (size_t)snprintf(p + o, sizeof p - o, "%s%s", i ? ";" : "", f->name);
        }
        for (uint32_t h = 0; h < nd->nheights; h++) {
            lines = realloc(lines, (nl + 1) * sizeof *lines);
            if (asprintf(&lines[nl], "%s @%lld learned %llu\n", p, (long long)nd->heights[h].height,
                         (unsigned long long)nd->heights[h].learned) < 0)
                exit(1);
            nl++;
        }
    }
    qsort(lines, nl, sizeof *lines, by_text);
    for (size_t i = 0; i < nl; i++) {
        size_t l = strlen(lines[i]);
        if (len + l + 1 < cap) {
            memcpy(out + len, lines[i], l + 1);
            len += l;
        }
        free(lines[i]);
    }
    free(lines);
    return out;
}

/* The node whose path is `names` (';'-separated), 0 if none. */
static uint32_t node_of(const icpp_pathmap *pm, const char *names)
{
    for (uint32_t k = 1; k < icpp_pathmap_nnodes(pm); k++) {
        uint32_t path[64];
        uint32_t d = icpp_pathmap_path(pm, k, path, 64);
        char p[1024] = "";
        size_t o = 0;
        for (uint32_t i = 0; i < d && o < sizeof p; i++)
            o += (size_t)snprintf(p + o, sizeof p - o, "%s%s", i ? ";" : "", icpp_pathmap_func(pm, path[i])->name);
        if (!strcmp(p, names))
            return k;
    }
    return 0;
}

/* The learn trail of a recording (each chain once, in order, at times 1, 4, 7, 10, 13; the main thread's profile
 * samples at 2, 5, 8, 11, 14): which contexts the thread's learn samples just before and after a moment passed
 * through, and the share of learn samples whose chain no other repeated. */
static void test_trail(const char *once_file, const char *many_file)
{
    icpp_err err;
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_learn_stats st;
    icpp_learn_trail *t = NULL;
    CHECK(icpp_learn_file_novel(once_file, pm, &st, NULL, NULL, &t, &err) == 0 && t, "trail: %s", err.msg);
    uint32_t abc = node_of(pm, "main;fn_a;fn_b;fn_c"), bc = node_of(pm, "main;fn_b;fn_c");
    CHECK(abc && bc, "trail: nodes");
    CHECK(icpp_learn_trail_len(t) == 5, "trail: %zu learn samples, want 5", icpp_learn_trail_len(t));
    /* t = 8: chain 2 (main;fn_b;fn_c @600) before, chain 3 (main;fn_a;fn_b;fn_c @1064) after */
    CHECK(icpp_learn_trail_confirms(t, PID, PID, 8, bc, 600) == 1, "trail: the learn sample before");
    CHECK(icpp_learn_trail_confirms(t, PID, PID, 8, abc, 1064) == 2, "trail: the learn sample after");
    CHECK(!icpp_learn_trail_confirms(t, PID, PID, 8, abc, 1000), "trail: chains 0 and 1 are not next to t = 8");
    CHECK(!icpp_learn_trail_confirms(t, PID, PID, 8, bc, 1064), "trail: the node at another height");
    CHECK(icpp_learn_trail_confirms(t, PID, PID, 2, abc, 1000) && icpp_learn_trail_confirms(t, PID, PID, 1, abc, 1000),
          "trail: chain 0 at and just after its time");
    CHECK(!icpp_learn_trail_confirms(t, PID, TID, 8, bc, 600), "trail: another thread's moment");
    CHECK(!icpp_learn_trail_confirms(t, PID + 1, PID, 8, bc, 600), "trail: another process's moment");
    uint32_t abcd = node_of(pm, "main;fn_a;fn_b;fn_c;fn_d");
    CHECK(abcd && icpp_learn_trail_confirms(t, PID, PID, 99, abcd, 1100) &&
              icpp_learn_trail_confirms(t, PID, PID, 99, abc, 1000),
          "trail: after the last, the last (chain 4, and the context it was anchored at)");
    /* chains 0 and 1 have the same path and heights: 3 of 5 samples took a path no other took */
    double m1 = icpp_learn_trail_missing(t);
    CHECK(m1 > 0.59 && m1 < 0.61 && icpp_learn_trail_sparse(t), "trail: missing mass %.3f, want 0.6 (sparse)", m1);
    icpp_learn_trail_free(t);
    icpp_pathmap_free(pm);

    pm = icpp_pathmap_new();
    CHECK(icpp_learn_file_novel(many_file, pm, &st, NULL, NULL, &t, &err) == 0 && t, "trail: %s", err.msg);
    CHECK(icpp_learn_trail_len(t) == 21 && icpp_learn_trail_missing(t) == 0.0 && !icpp_learn_trail_sparse(t),
          "trail: repeated chains: %zu learn samples, missing mass %.3f (want 21, 0)", icpp_learn_trail_len(t),
          icpp_learn_trail_missing(t));
    icpp_learn_trail_free(t);
    icpp_pathmap_free(pm);
    CHECK(!icpp_learn_trail_confirms(NULL, PID, PID, 8, bc, 600) && icpp_learn_trail_missing(NULL) == 0.0 &&
              !icpp_learn_trail_sparse(NULL),
          "trail: none");
}

int main(void)
{
    icpp_err err;
    CHECK(icpp_proc_startstack(getpid(), &ss, &err) == 0 && ss, "startstack: %s", err.msg);
    make_chains();
    char p1[] = "/tmp/icpp-test-learn1-XXXXXX", p3[] = "/tmp/icpp-test-learn3-XXXXXX";
    int fd1 = mkstemp(p1), fd3 = mkstemp(p3);
    CHECK(fd1 >= 0 && fd3 >= 0, "mkstemp");
    close(fd1);
    close(fd3);
    static const int once[5] = {1, 1, 1, 1, 1}, many[5] = {5, 3, 7, 2, 4};
    write_file(p1, once);
    write_file(p3, many);

    /* Once each: the paths and heights the chains name, one learn count each. */
    icpp_pathmap *m1 = icpp_pathmap_new();
    icpp_learn_stats st1;
    CHECK(icpp_learn_file(p1, m1, &st1, &err) == 0, "learn once: %s", err.msg);
    CHECK(st1.samples == 5 && st1.learned == 5 && st1.anchored == 1, "once: %llu samples, %llu learned, %llu anchored",
          (unsigned long long)st1.samples, (unsigned long long)st1.learned, (unsigned long long)st1.anchored);
    char *d1 = dump(m1);
    /* main is the root frame of every rooted chain (no height); fn_a at 800 and 864, fn_b at 900 and 964 under
     * fn_a, at 500 under main; fn_c at 1000 (twice: chains 0 and 1) and 1064, and 600; fn_d at 1100 (anchored). */
    static const char *expect[] = {
        "main;fn_a @800 learned 2", "main;fn_a @864 learned 1", "main;fn_a;fn_b @900 learned 2",
        "main;fn_a;fn_b @964 learned 1", "main;fn_a;fn_b;fn_c @1000 learned 3", "main;fn_a;fn_b;fn_c @1064 learned 1",
        "main;fn_a;fn_b;fn_c;fn_d @1100 learned 1", "main;fn_b @500 learned 1", "main;fn_b;fn_c @600 learned 1",
    };
    for (size_t i = 0; i < sizeof expect / sizeof *expect; i++)
        CHECK(strstr(d1, expect[i]) != NULL, "once: '%s' not in the map:\n%s", expect[i], d1);

    /* Repeated: the same map, each count times its chain's repeats (chain 4 joins chain 0's fn_c, which is
     * counted once more per anchored sample). */
    icpp_pathmap *m3 = icpp_pathmap_new();
    icpp_learn_stats st3;
    CHECK(icpp_learn_file(p3, m3, &st3, &err) == 0, "learn repeated: %s", err.msg);
    CHECK(st3.samples == 21 && st3.learned == 21 && st3.anchored == 4 && st3.new_paths == st1.new_paths &&
          st3.new_contexts == st1.new_contexts,
          "repeated: %llu samples, %llu learned, %llu anchored, %llu/%llu new paths, %llu/%llu new contexts",
          (unsigned long long)st3.samples, (unsigned long long)st3.learned, (unsigned long long)st3.anchored,
          (unsigned long long)st3.new_paths, (unsigned long long)st1.new_paths,
          (unsigned long long)st3.new_contexts, (unsigned long long)st1.new_contexts);
    char *d3 = dump(m3);
    static const char *expect3[] = {
        "main;fn_a @800 learned 8", "main;fn_a @864 learned 2", "main;fn_a;fn_b @900 learned 8",
        "main;fn_a;fn_b @964 learned 2", "main;fn_a;fn_b;fn_c @1000 learned 12", "main;fn_a;fn_b;fn_c @1064 learned 2",
        "main;fn_a;fn_b;fn_c;fn_d @1100 learned 4", "main;fn_b @500 learned 7", "main;fn_b;fn_c @600 learned 7",
    };
    for (size_t i = 0; i < sizeof expect3 / sizeof *expect3; i++)
        CHECK(strstr(d3, expect3[i]) != NULL, "repeated: '%s' not in the map:\n%s", expect3[i], d3);

    /* The streaming learner over a replay that also reads profile samples (as icpp-resolve's one pass does)
     * learns the same map. */
    icpp_replay *rp = icpp_replay_open(p3, &err);
    CHECK(rp, "open: %s", err.msg);
    icpp_replay_select(rp, ICPP_REPLAY_PROCESS_ONLY);
    icpp_pathmap *ms = icpp_pathmap_new();
    icpp_learner *lr = icpp_learner_new(ms);
    icpp_rsample s;
    int rc, prof = 0, learnfull = 0, other = 0;
    while (rp && (rc = icpp_replay_next(rp, &s, &err)) > 0) {
        CHECK(icpp_learner_add(lr, rp, &s) == 0, "learner_add");
        CHECK(s.module == -1 && !s.func && s.exe_module >= 0 && s.status == ICPP_RS_OK && s.base,
              "process only: a sample has module %d, func %p, exe_module %d, base %#llx", s.module, (void *)s.func,
              s.exe_module, (unsigned long long)s.base);
        prof += !s.learn;
        learnfull += s.learn && s.l.n > 0;
    }
    CHECK(prof == 42 && learnfull == 21, "process only: %d profile samples (want 42), %d learn samples with their "
          "frames (want 21)", prof, learnfull);
    icpp_learn_stats sts;
    uint8_t *novel = NULL;
    size_t nnovel = 0;
    CHECK(icpp_learner_end(lr, &sts, &novel, &nnovel, NULL) == 0, "learner_end");
    char *ds = dump(ms);
    CHECK(!strcmp(ds, d3) && sts.learned == st3.learned && sts.new_contexts == st3.new_contexts,
          "streaming learner differs from the file pass:\n%s\nvs\n%s", ds, d3);
    CHECK(nnovel == icpp_pathmap_nfuncs(ms), "novel: %zu bytes for %zu functions", nnovel, icpp_pathmap_nfuncs(ms));
    icpp_replay_close(rp);

    /* Other threads only: the main thread's samples, learn samples included, are passed over. */
    rp = icpp_replay_open(p3, &err);
    CHECK(rp, "open: %s", err.msg);
    icpp_replay_select(rp, ICPP_REPLAY_OTHER_THREADS);
    while (rp && (rc = icpp_replay_next(rp, &s, &err)) > 0) {
        other++;
        CHECK(s.tid == TID && !s.learn, "other threads: a sample of %u/%u (learn %d)", s.pid, s.tid, s.learn);
    }
    CHECK(other == 21 && icpp_replay_info_get(rp)->samples == 63, "other threads: %d returned of %llu read", other,
          (unsigned long long)icpp_replay_info_get(rp)->samples);
    icpp_replay_close(rp);

    test_trail(p1, p3);

    free(novel);
    free(d1);
    free(d3);
    free(ds);
    icpp_pathmap_free(m1);
    icpp_pathmap_free(m3);
    icpp_pathmap_free(ms);
    unlink(p1);
    unlink(p3);
    return check_done("learn");
}
