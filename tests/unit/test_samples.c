/* test_samples.c -- sample file: round trip, deltas, truncation (killed writer), corruption, bad paths. */
#include "check.h"
#include "codec.h"
#include "samples.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define N 50000

typedef struct truth {
    uint32_t pid, tid, ev;
    uint64_t t, ip, sp, bp;
} truth;

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

int main(void)
{
    icpp_err err = {0};
    char dir[] = "/tmp/icpp-smp-XXXXXX", path[256], old[300];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/a.samples", dir);
    snprintf(old, sizeof old, "%s.old", path);

    truth *tr = malloc(N * sizeof *tr);
    icpp_swriter *w = icpp_swriter_open(path, &err);
    CHECK(w != NULL, "open: %s", err.msg);
    icpp_swriter_info(w, "tool", "test");
    icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 4000, 1, 0, 0, 0);
    icpp_swriter_event(w, 1, "cycles", 0, 0, 1000003, 0, 1, 0, 0);
    icpp_swriter_proc(w, 100, 0, 0x7ffc12345670, "/bin/x", 0);
    icpp_build_id bid = {20, {1, 2, 3}};
    icpp_swriter_mmap(w, 100, 0x555555554000, 0x3000, 0x1000, 5, "/bin/x", &bid);
    uint64_t t = 1000;
    uint64_t sp[4] = {0x7ffc12340000, 0x7f0000100000, 0x7f0000200000, 0x7ffc12340000};
    for (int i = 0; i < N; i++) {
        int th = (int)(rnd() % 4);
        t += rnd() % 300000;
        sp[th] += (rnd() % 512) - 256;
        truth x = {th == 3 ? 101 : 100, (uint32_t)(th == 3 ? 101 : 100 + th), (uint32_t)(rnd() % 2), t,
                   0x555555555000 + rnd() % 0x2000, sp[th], (rnd() & 1) ? sp[th] + 64 : rnd()};
        tr[i] = x;
        if (i == 10) {
            uint64_t chain[3] = {0x555555555100, 0x555555555200, 0x7f1234567890};
            uint64_t regs[3] = {1, 2, 3};
            uint8_t st[100];
            memset(st, 0xab, sizeof st);
            icpp_sample_extra xx = {3, chain, 3, regs, 0x1c0, sizeof st, st};
            icpp_swriter_sample(w, x.pid, x.tid, x.ev, x.t, x.ip, x.sp, x.bp, &xx);
        } else {
            icpp_swriter_sample(w, x.pid, x.tid, x.ev, x.t, x.ip, x.sp, x.bp, NULL);
        }
    }
    icpp_swriter_lost(w, 7);
    icpp_swriter_exit(w, 100, 101);
    uint64_t bytes = icpp_swriter_bytes(w);
    CHECK(icpp_swriter_close(w, N, 7, &err) == 0, "close: %s", err.msg);
    printf("%d samples in %llu bytes: %.1f bytes/sample\n", N, (unsigned long long)bytes, (double)bytes / N);
    CHECK((double)bytes / N <= 32.0, "more than 32 bytes per sample");

    /* Read back everything exactly. */
    icpp_sreader *r = icpp_sreader_open(path, &err);
    CHECK(r != NULL, "read: %s", err.msg);
    icpp_srec rec;
    int k = 0, rc, saw_chain = 0, saw_stack = 0, saw_lost = 0, saw_mmap = 0, mism = 0;
    while (r && (rc = icpp_sreader_next(r, &rec, &err)) > 0) {
        if (rec.type == ICPP_SREC_SAMPLE) {
            truth *x = &tr[k++];
            if (rec.u.sample.pid != x->pid || rec.u.sample.tid != x->tid || rec.u.sample.event != x->ev ||
                rec.u.sample.time != x->t || rec.u.sample.ip != x->ip || rec.u.sample.sp != x->sp ||
                rec.u.sample.bp != x->bp)
                mism++;
            const icpp_sample_extra *e = &rec.u.sample.x;
            if (k == 11) {
                saw_chain = e->nchain == 3 && e->chain[2] == 0x7f1234567890;
                saw_stack = e->stack_size == 100 && e->stack[99] == 0xab && e->nregs == 3 && e->regs[2] == 3 &&
                            e->regs_mask == 0x1c0;
            } else if (e->nchain || e->stack_size) {
                mism++;
            }
        } else if (rec.type == ICPP_SREC_LOST) {
            saw_lost = rec.u.lost.count == 7;
        } else if (rec.type == ICPP_SREC_MMAP) {
            saw_mmap = rec.u.mmap.start == 0x555555554000 && rec.u.mmap.build_id.len == 20 &&
                       rec.u.mmap.build_id.bytes[2] == 3 && !strcmp(rec.u.mmap.path, "/bin/x");
        }
    }
    CHECK(k == N && mism == 0, "read %d samples, %d differ", k, mism);
    CHECK(saw_chain && saw_stack && saw_lost && saw_mmap, "records missing");
    CHECK(r && icpp_sreader_clean_end(r) && icpp_sreader_truncated(r) == 0, "clean end");
    icpp_sreader_close(r);

    /* A killed writer: every truncation point reads as a prefix, never an error. */
    uint8_t *buf;
    size_t len;
    CHECK(icpp_read_file(path, 1 << 30, &buf, &len, &err) == 0, "slurp");
    int errors = 0, last_count = -1, monotone = 1;
    for (size_t cut = 16; cut < len; cut += 997) {
        icpp_sreader *q = icpp_sreader_mem(buf, cut, &err);
        int n = 0;
        while (q && (rc = icpp_sreader_next(q, &rec, &err)) > 0)
            n += rec.type == ICPP_SREC_SAMPLE;
        if (!q || rc < 0)
            errors++;
        if (n < last_count)
            monotone = 0;
        last_count = n;
        CHECK(!q || !icpp_sreader_clean_end(q), "truncated file claims a clean end");
        icpp_sreader_close(q);
    }
    CHECK(errors == 0 && monotone, "truncations: %d errors, monotone %d", errors, monotone);

    /* A flipped bit inside a block is a checksum error, not garbage samples. */
    buf[len / 2] ^= 0x10;
    icpp_sreader *q = icpp_sreader_mem(buf, len, &err);
    while (q && (rc = icpp_sreader_next(q, &rec, &err)) > 0)
        ;
    CHECK(q && rc < 0 && strstr(err.msg, "checksum"), "flip: %s", err.msg);
    icpp_sreader_close(q);
    buf[len / 2] ^= 0x10;
    buf[8] = 9;
    CHECK(icpp_sreader_mem(buf, len, &err) == NULL && err.code == ICPP_EVERSION, "version: %s", err.msg);
    free(buf);

    /* Overwriting keeps the previous file as .old; bad directories fail cleanly. */
    w = icpp_swriter_open(path, &err);
    CHECK(w && access(old, F_OK) == 0, "previous file not kept as .old");
    icpp_swriter_close(w, 0, 0, &err);
    CHECK(icpp_swriter_open("/nonexistent-dir/x.samples", &err) == NULL && strstr(err.msg, "cannot create"),
          "unwritable: %s", err.msg);
    /* A full disk: /dev/full accepts the open but no write. */
    if (access("/dev/full", W_OK) == 0) {
        CHECK(icpp_swriter_open("/dev/full", &err) == NULL, "wrote a header to /dev/full?");
    }
    unlink(path);
    unlink(old);
    rmdir(dir);
    free(tr);
    return check_done("test_samples");
}
