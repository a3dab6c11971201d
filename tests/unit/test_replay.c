/* test_replay.c -- lib/replay.c: which stack a sample is on (own or foreign), and each process's executable. */
#include "check.h"

#include "procmaps.h"
#include "replay.h"
#include "samples.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A sample at this function's first instruction has entry SP == SP. */
__attribute__((noinline)) int leaf_fn(int x)
{
    return x * 3 + 1;
}

enum { PID = 100, TID = 101, CHILD = 200 };

int main(void)
{
    char path[] = "/tmp/icpp-test-replay-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    icpp_err err;
    uint64_t ss = 0;
    CHECK(icpp_proc_startstack(getpid(), &ss, &err) == 0 && ss, "startstack: %s", err.msg);
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(n > 0, "readlink");
    exe[n > 0 ? n : 0] = 0;
    icpp_maps mm;
    icpp_maps_init(&mm);
    CHECK(icpp_maps_read(&mm, getpid(), &err) == 0, "maps: %s", err.msg);
    void *heap = malloc(4096);

    icpp_swriter *w = icpp_swriter_open(path, &err);
    CHECK(w, "writer: %s", err.msg);
    if (!w)
        return check_done("replay");
    icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 1000, 0, 0, 0, 0);
    icpp_swriter_proc(w, PID, 0, ss, exe, 0);
    icpp_build_id none = {0, {0}};
    for (size_t i = 0; i < mm.n; i++)
        icpp_swriter_mmap(w, PID, mm.v[i].start, mm.v[i].end - mm.v[i].start, mm.v[i].pgoff, mm.v[i].prot,
                          mm.v[i].path ? mm.v[i].path : "", &none);
    /* Two anonymous mappings for a thread: its own stack, then a coroutine's. */
    const uint64_t A = 0x100000000000ull, B = 0x200000000000ull, L = 1 << 20;
    icpp_swriter_mmap(w, PID, A, L, 0, PROT_READ | PROT_WRITE, "", &none);
    icpp_swriter_mmap(w, PID, B, L, 0, PROT_READ | PROT_WRITE, "", &none);
    uint64_t ip = (uint64_t)(uintptr_t)&leaf_fn, t = 1;
    /* main thread */
    icpp_swriter_sample(w, PID, PID, 0, t++, ip, ss - 4096, 0, NULL);                   /* 1: own stack */
    icpp_swriter_sample(w, PID, PID, 0, t++, ip, (uint64_t)(uintptr_t)heap, 0, NULL);   /* 2: heap: foreign */
    icpp_swriter_sample(w, PID, PID, 0, t++, ip, ss + 64, 0, NULL);                     /* 3: above: foreign */
    icpp_swriter_sample(w, PID, PID, 0, t++, ip, A + 4096, 0, NULL);                    /* 4: a mapping: foreign */
    /* another thread: first in A, then B (foreign), back in A; a new thread of the same tid in B */
    icpp_swriter_sample(w, PID, TID, 0, t++, ip, A + L - 512, 0, NULL);                 /* 5: own */
    icpp_swriter_sample(w, PID, TID, 0, t++, ip, B + L - 512, 0, NULL);                 /* 6: foreign */
    icpp_swriter_sample(w, PID, TID, 0, t++, ip, A + L - 1024, 0, NULL);                /* 7: own */
    icpp_swriter_sample(w, PID, TID, 0, t++, ip, 0x300000000000ull, 0, NULL);         /* 7b: no mapping: foreign */
    icpp_swriter_exit(w, PID, TID);
    icpp_swriter_sample(w, PID, TID, 0, t++, ip, 0x300000000000ull, 0, NULL);         /* 8a: new thread, no mapping: no base */
    icpp_swriter_sample(w, PID, TID, 0, t++, ip, B + L - 256, 0, NULL);                 /* 8: a new thread: own */
    /* a fork child inherits the executable */
    icpp_swriter_proc(w, CHILD, PID, ss, "", 0);
    icpp_swriter_sample(w, CHILD, CHILD, 0, t++, ip, ss - 2048, 0, NULL);               /* 9 */
    CHECK(icpp_swriter_close(w, 11, 0, &err) == 0, "close: %s", err.msg);

    icpp_replay *rp = icpp_replay_open(path, &err);
    CHECK(rp, "open: %s", err.msg);
    if (!rp)
        return check_done("replay");
    enum { N = 11 };
    static const int want[N] = {ICPP_RS_OK, ICPP_RS_FOREIGN, ICPP_RS_FOREIGN, ICPP_RS_FOREIGN, ICPP_RS_OK,
                                ICPP_RS_FOREIGN, ICPP_RS_OK, ICPP_RS_FOREIGN, ICPP_RS_NOBASE, ICPP_RS_OK, ICPP_RS_OK};
    static const int64_t height[N] = {4096, 0, 0, 0, 512, 0, 1024, 0, 0, 256, 2048};
    icpp_rsample s;
    int k = 0, rc;
    while ((rc = icpp_replay_next(rp, &s, &err)) > 0 && k < N) {
        CHECK(s.status == want[k], "sample %d: status %s, want %s", k + 1, icpp_rs_status_name(s.status),
              icpp_rs_status_name(want[k]));
        if (want[k] == ICPP_RS_OK)
            CHECK(s.height == height[k], "sample %d: height %lld, want %lld", k + 1, (long long)s.height,
                  (long long)height[k]);
        const icpp_rmodule *em = s.exe_module >= 0 ? icpp_replay_module(rp, (uint32_t)s.exe_module) : NULL;
        CHECK(em && !strcmp(em->path, exe), "sample %d: executable %s, want %s", k + 1, em ? em->path : "none", exe);
        CHECK(em && s.module == s.exe_module, "sample %d: the ip is in the executable", k + 1);
        k++;
    }
    CHECK(rc >= 0 && k == N, "read %d samples (rc %d: %s)", k, rc, rc < 0 ? err.msg : "");
    /* The modules go on to the next pass (icpp-resolve's passes share them). */
    const icpp_module *exe_mod = s.exe_module >= 0 ? icpp_replay_module(rp, (uint32_t)s.exe_module)->mod : NULL;
    icpp_replay *pool = icpp_replay_live();
    CHECK(pool && exe_mod && icpp_replay_take_modules(pool, rp) == 0 && !icpp_replay_nmodules(rp),
          "modules not taken from the first pass");
    icpp_replay_close(rp);

    /* The thread's own stack given (icpp-resolve's vote): B, so its samples
     * in A are the foreign ones; after its EXIT, the first-sample rule. */
    rp = icpp_replay_open(path, &err);
    CHECK(rp && icpp_replay_set_own_stack(rp, PID, TID, B + L) == 0, "reopen: %s", err.msg);
    CHECK(rp && pool && icpp_replay_take_modules(rp, pool) == 0 && icpp_replay_take_modules(rp, pool) < 0,
          "modules not given to the second pass, or given twice");
    static const int want2[N] = {ICPP_RS_OK, ICPP_RS_FOREIGN, ICPP_RS_FOREIGN, ICPP_RS_FOREIGN, ICPP_RS_FOREIGN,
                                 ICPP_RS_OK, ICPP_RS_FOREIGN, ICPP_RS_FOREIGN, ICPP_RS_NOBASE, ICPP_RS_OK, ICPP_RS_OK};
    for (k = 0; rp && (rc = icpp_replay_next(rp, &s, &err)) > 0 && k < N; k++) {
        CHECK(s.status == want2[k], "own stack given: sample %d: status %s, want %s", k + 1,
              icpp_rs_status_name(s.status), icpp_rs_status_name(want2[k]));
        CHECK(s.exe_module >= 0 && icpp_replay_module(rp, (uint32_t)s.exe_module)->mod == exe_mod,
              "own stack given: sample %d: the executable was opened again", k + 1);
    }
    CHECK(k == N, "own stack given: read %d samples", k);
    icpp_replay_close(pool);
    icpp_replay_close(rp);
    /* Code in no file: JIT code in anonymous memory (perf's "//anon", a
     * prctl-named "[anon:jit]") has no mapping to resolve in; [vdso] is the
     * kernel's. */
    w = icpp_swriter_open(path, &err);
    CHECK(w, "writer: %s", err.msg);
    static const char *names[3] = {"//anon", "[anon:jit]", "[vdso]"};
    static const int want3[3] = {ICPP_RS_NOMAP, ICPP_RS_NOMAP, ICPP_RS_VDSO};
    if (w) {
        icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 1000, 0, 0, 0, 0);
        icpp_swriter_proc(w, PID, 0, ss, exe, 0);
        for (size_t i = 0; i < mm.n; i++)
            icpp_swriter_mmap(w, PID, mm.v[i].start, mm.v[i].end - mm.v[i].start, mm.v[i].pgoff, mm.v[i].prot,
                              mm.v[i].path ? mm.v[i].path : "", &none);
        for (int i = 0; i < 3; i++)
            icpp_swriter_mmap(w, PID, 0x400000000000ull + (uint64_t)i * L, L, 0, PROT_READ | PROT_EXEC, names[i], &none);
        for (int i = 0; i < 3; i++)
            icpp_swriter_sample(w, PID, PID, 0, t++, 0x400000000000ull + (uint64_t)i * L + 64, ss - 4096, 0, NULL);
        CHECK(icpp_swriter_close(w, 3, 0, &err) == 0, "close: %s", err.msg);
    }
    rp = icpp_replay_open(path, &err);
    CHECK(rp, "open: %s", err.msg);
    for (k = 0; rp && k < 3 && icpp_replay_next(rp, &s, &err) > 0; k++)
        CHECK(s.status == want3[k], "a sample in %s: status %s, want %s", names[k], icpp_rs_status_name(s.status),
              icpp_rs_status_name(want3[k]));
    CHECK(k == 3, "code in no file: read %d samples", k);
    icpp_replay_close(rp);
    icpp_maps_free(&mm);
    free(heap);
    unlink(path);
    return check_done("replay");
}
