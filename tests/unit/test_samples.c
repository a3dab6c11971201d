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

/* Learn samples: frames come back exactly, through the outer-frame sharing
 * with each thread's previous learn sample, interleaved across threads and
 * with plain samples; a chain whose frame 0 is not the sample is refused. */
static void test_learn(const char *dir)
{
    enum { T = 3, L = 3000, DEPTH = 60 };
    char path[256];
    snprintf(path, sizeof path, "%s/learn.samples", dir);
    icpp_err err = {0};
    icpp_swriter *w = icpp_swriter_open(path, &err);
    CHECK(w != NULL, "open: %s", err.msg);
    if (!w)
        return;
    icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 4000, 1, 0, 0, 0);
    icpp_swriter_event(w, 1, "cpu-clock", 1, 0, 250, 1, 0, ICPP_EVENT_LEARN, 0);
    /* per thread a stack of frames (root last); each sample keeps a random
     * number of the outer frames and pushes new inner ones */
    static uint64_t pc[T][DEPTH], esp[T][DEPTH];
    static uint32_t depth[T];
    static uint64_t want_pc[L][DEPTH], want_esp[L][DEPTH];
    static uint32_t want_n[L], want_tid[L];
    static uint8_t want_st[L];
    for (int t = 0; t < T; t++) {
        depth[t] = 1;
        pc[t][0] = 0x401000 + (uint64_t)t;          /* the root frame sits at index depth-1 */
        esp[t][0] = 0x7ffc00100000ull + ((uint64_t)t << 24);
    }
    for (int i = 0; i < L; i++) {
        int t = (int)(rnd() % T);
        /* stack kept root-first in pc[t][0..depth-1]; pop some, push some */
        uint32_t keep = 1 + (uint32_t)(rnd() % depth[t]);
        uint32_t push = (uint32_t)(rnd() % 8);
        if (keep + push > DEPTH)
            push = DEPTH - keep;
        for (uint32_t j = keep; j < keep + push; j++) {
            pc[t][j] = 0x400000 + rnd() % 0x100000;
            esp[t][j] = esp[t][j - 1] - 16 - 8 * (rnd() % 64);
        }
        depth[t] = keep + push;
        uint32_t n = depth[t];
        uint64_t cpc[DEPTH], cesp[DEPTH];
        for (uint32_t j = 0; j < n; j++) {      /* leaf first */
            cpc[j] = pc[t][n - 1 - j];
            cesp[j] = esp[t][n - 1 - j];
        }
        uint64_t sp = cesp[0] - 8 * (rnd() % 8);
        icpp_learn_chain l = {(uint8_t)(rnd() % 3), n, cpc, cesp};
        icpp_swriter_learn(w, 200, 200 + (uint32_t)t, 1, 1000 + (uint64_t)i, cpc[0], sp, rnd(), &l);
        if (rnd() % 2)
            icpp_swriter_sample(w, 200, 200 + (uint32_t)t, 0, 1000 + (uint64_t)i, rnd(), sp, rnd(), NULL);
        want_n[i] = n;
        want_tid[i] = 200 + (uint32_t)t;
        want_st[i] = l.status;
        memcpy(want_pc[i], cpc, n * sizeof *cpc);
        memcpy(want_esp[i], cesp, n * sizeof *cesp);
    }
    /* frame 0 must be the sample: such a chain is not written */
    uint64_t bad_pc[2] = {0x401000, 0x402000}, bad_esp[2] = {0x7ffc00000000, 0x7ffc00000100};
    icpp_learn_chain bad = {0, 2, bad_pc, bad_esp};
    icpp_swriter_learn(w, 200, 200, 1, 99999, 0x999999, 0x7ffc00000000, 0, &bad);
    uint64_t bytes = icpp_swriter_bytes(w);
    CHECK(icpp_swriter_close(w, L, 0, &err) == 0, "close: %s", err.msg);
    icpp_sreader *r = icpp_sreader_open(path, &err);
    CHECK(r != NULL, "read: %s", err.msg);
    if (!r)
        return;
    icpp_srec rec;
    int k = 0, rc, mism = 0, roles = 0;
    uint64_t frames = 0;
    while ((rc = icpp_sreader_next(r, &rec, &err)) > 0) {
        if (rec.type == ICPP_SREC_EVENT && rec.u.event.id == 1)
            roles = rec.u.event.role == ICPP_EVENT_LEARN && rec.u.event.of == 0;
        if (rec.type != ICPP_SREC_LSAMPLE)
            continue;
        const icpp_learn_chain *l = &rec.u.sample.l;
        if (k >= L) {
            mism++;
            break;
        }
        int bad_one = l->n != want_n[k] || l->status != want_st[k] || rec.u.sample.tid != want_tid[k] ||
                      rec.u.sample.ip != want_pc[k][0];
        for (uint32_t j = 0; !bad_one && j < l->n; j++)
            bad_one = l->pc[j] != want_pc[k][j] || l->entry_sp[j] != want_esp[k][j];
        if (bad_one && mism++ < 3)
            fprintf(stderr, "learn sample %d differs (n %u want %u)\n", k, l->n, want_n[k]);
        frames += l->n;
        k++;
    }
    CHECK(rc == 0, "learn file read: %s", err.msg);
    CHECK(k == L, "%d learn samples read back, %d written", k, L);
    CHECK(mism == 0, "%d learn samples differ", mism);
    CHECK(roles, "the learn event's role and profile event did not come back");
    printf("%d learn samples, %llu frames, in %llu bytes: %.1f bytes per frame\n", L, (unsigned long long)frames,
           (unsigned long long)bytes, (double)bytes / (double)frames);
    icpp_sreader_close(r);

    /* The outer frames shared with the thread's previous learn sample are
     * not repeated: the same 50-frame chain 1000 times costs what its first
     * copy costs plus a few bytes per sample (about 250 per sample if not). */
    w = icpp_swriter_open(path, &err);
    CHECK(w != NULL, "open: %s", err.msg);
    if (!w)
        return;
    uint64_t cpc[50], cesp[50];
    for (int j = 0; j < 50; j++) {
        cpc[j] = 0x400000 + rnd() % 0x100000;
        cesp[j] = 0x7ffc00100000ull - 4096 + 80 * (uint64_t)j;
    }
    for (int i = 0; i < 1000; i++) {
        icpp_learn_chain l = {0, 50, cpc, cesp};
        icpp_swriter_learn(w, 300, 300, 1, 5000 + (uint64_t)i, cpc[0], cesp[0] - 8, 0, &l);
    }
    bytes = icpp_swriter_bytes(w);
    CHECK(icpp_swriter_close(w, 1000, 0, &err) == 0, "close: %s", err.msg);
    printf("the same 50-frame chain 1000 times: %.1f bytes per learn sample\n", (double)bytes / 1000);
    CHECK(bytes < 1000 * 16, "%llu bytes: outer frames not shared", (unsigned long long)bytes);

    /* Version 3's frame dictionary: a recursion (a cycle of 3 call sites with
     * fixed frame sizes) of varying depth under a varying leaf, entered at
     * another stack address each time, so that no outer frame is shared with
     * the previous sample; callers seen before cost about one byte each.  The frames come back exactly. */
    w = icpp_swriter_open(path, &err);
    CHECK(w != NULL, "open: %s", err.msg);
    if (!w)
        return;
    enum { RD = 240, RL = 500 };
    static uint64_t rpc[RL][RD], resp[RL][RD];
    static uint32_t rn[RL];
    uint64_t rframes = 0;
    for (int i = 0; i < RL; i++) {
        uint32_t n = 2 + (uint32_t)(rnd() % (RD - 2));
        /* root-first: frame j's call site cycles over 3, 48/64/80 bytes */
        uint64_t e = 0x7ffc00200000ull - 16 * (uint64_t)(i % 7);
        for (uint32_t j = 0; j < n; j++) {
            uint32_t f = n - 1 - j;        /* leaf first in the chain */
            rpc[i][f] = j + 1 < n ? 0x410000 + 0x100 * (j % 3) : 0x420000 + rnd() % 4096;
            resp[i][f] = e;
            e -= 48 + 16 * (j % 3);
        }
        rn[i] = n;
        rframes += n;
        icpp_learn_chain l = {0, n, rpc[i], resp[i]};
        icpp_swriter_learn(w, 400, 400, 1, 9000 + (uint64_t)i, rpc[i][0], resp[i][0] - 8, 0, &l);
    }
    bytes = icpp_swriter_bytes(w);
    CHECK(icpp_swriter_close(w, RL, 0, &err) == 0, "close: %s", err.msg);
    r = icpp_sreader_open(path, &err);
    CHECK(r != NULL, "read: %s", err.msg);
    if (!r)
        return;
    k = 0;
    mism = 0;
    while ((rc = icpp_sreader_next(r, &rec, &err)) > 0) {
        if (rec.type != ICPP_SREC_LSAMPLE || k >= RL)
            continue;
        const icpp_learn_chain *l = &rec.u.sample.l;
        int bad_one = l->n != rn[k];
        for (uint32_t j = 0; !bad_one && j < l->n; j++)
            bad_one = l->pc[j] != rpc[k][j] || l->entry_sp[j] != resp[k][j];
        mism += bad_one;
        k++;
    }
    icpp_sreader_close(r);
    CHECK(rc == 0 && k == RL && mism == 0, "recursion: %d of %d read back, %d differ (%s)", k, RL, mism, err.msg);
    printf("recursive chains: %llu frames in %llu bytes: %.2f bytes per frame\n", (unsigned long long)rframes,
           (unsigned long long)bytes, (double)bytes / (double)rframes);
    CHECK(bytes < rframes * 3 / 2, "%llu bytes for %llu recursive frames: the dictionary does not work",
          (unsigned long long)bytes, (unsigned long long)rframes);

    /* Skipping the frames (a resolve pass): the same samples, status and
     * order, no frames; then a dictionary index past the entries read so
     * far is still refused. */
    r = icpp_sreader_open(path, &err);
    CHECK(r != NULL, "read: %s", err.msg);
    if (!r)
        return;
    icpp_sreader_skip_frames(r, 1);
    k = 0;
    mism = 0;
    while ((rc = icpp_sreader_next(r, &rec, &err)) > 0) {
        if (rec.type != ICPP_SREC_LSAMPLE || k >= RL)
            continue;
        mism += rec.u.sample.l.n != 0 || rec.u.sample.ip != rpc[k][0] || rec.u.sample.sp != resp[k][0] - 8 ||
                rec.u.sample.time != 9000 + (uint64_t)k;
        k++;
    }
    icpp_sreader_close(r);
    CHECK(rc == 0 && k == RL && mism == 0, "skipping frames: %d of %d read, %d differ (%s)", k, RL, mism, err.msg);
    FILE *f = fopen(path, "rb");
    static uint8_t fb[1 << 20];
    size_t flen = f ? fread(fb, 1, sizeof fb, f) : 0;
    if (f)
        fclose(f);
    CHECK(flen > 64 && flen < sizeof fb, "reread %zu bytes", flen);
    /* the first learn sample's first frame named by the dictionary (v > 0,
     * one byte) becomes 127, past the few entries read so far */
    int refused[2] = {0, 0};
    for (int skip = 0; skip < 2 && flen > 64; skip++) {
        static uint8_t cp[1 << 20];
        memcpy(cp, fb, flen);
        size_t at = 0;
        for (size_t i = 24; i + 3 < flen && !at; i++)      /* LSAMPLE, thread 0, event 1 */
            if (cp[i] == ICPP_SREC_LSAMPLE && cp[i + 1] == 0 && cp[i + 2] == 1)
                at = i;
        CHECK(at != 0, "no learn sample found in the file");
        if (!at)
            break;
        icpp_sreader *q = icpp_sreader_mem(cp, flen, &err);
        if (!q)
            break;
        icpp_sreader_skip_frames(q, skip);
        /* the record as the writer wrote it: 6 sample fields, status, n, k, frame 0's delta, then frames */
        icpp_rbuf b;
        icpp_rbuf_init(&b, cp + at + 1, flen - at - 1);
        uint64_t fld[9];
        for (int i = 0; i < 9; i++)
            fld[i] = icpp_rbuf_uv(&b);
        (void)icpp_rbuf_uv(&b);
        size_t vpos = 0;
        for (uint64_t i = 1; i < fld[7] - fld[8] && !vpos && !b.bad; i++) {
            size_t here = (size_t)(b.p - cp);
            if (icpp_rbuf_uv(&b)) {
                vpos = here;
            } else {
                (void)icpp_rbuf_sv(&b);
                (void)icpp_rbuf_uv(&b);
            }
        }
        CHECK(vpos && cp[vpos] > 0 && cp[vpos] < 64, "no one-byte dictionary reference in the first learn sample");
        if (!vpos) {
            icpp_sreader_close(q);
            break;
        }
        cp[vpos] = 127;
        /* the block's CRC no longer matches: recompute it (block header at offset 16) */
        uint32_t plen = (uint32_t)cp[16] | (uint32_t)cp[17] << 8 | (uint32_t)cp[18] << 16 | (uint32_t)cp[19] << 24;
        uint32_t crc = icpp_crc32(0, cp + 24, plen);
        for (int i = 0; i < 4; i++)
            cp[20 + i] = (uint8_t)(crc >> (8 * i));
        while ((rc = icpp_sreader_next(q, &rec, &err)) > 0)
            ;
        refused[skip] = rc < 0;
        icpp_sreader_close(q);
    }
    CHECK(refused[0] && refused[1], "a dictionary index past its entries: refused %d (frames) %d (skipped)",
          refused[0], refused[1]);
}

/* Resident memory of this process, KiB (VmRSS). */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

/* A file several times the reader's release step comes back exactly, and
 * reading it does not make the file resident (the reader maps it and
 * releases what it has passed: lib/fmap.h). */
static void test_large(const char *dir)
{
    enum { LN = 1500000 };
    char path[300];
    icpp_err err = {0};
    snprintf(path, sizeof path, "%s/large.samples", dir);
    icpp_swriter *w = icpp_swriter_open(path, &err);
    CHECK(w != NULL, "open large: %s", err.msg);
    if (!w)
        return;
    uint64_t seed = 12345;
    for (int i = 0; i < LN; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        icpp_swriter_sample(w, 7, 7 + (uint32_t)(seed >> 62), 0, 1000 + (uint64_t)i * 97, seed >> 20,
                            0x7ffc00000000 + (seed >> 40), seed >> 24, NULL);
    }
    uint64_t bytes = icpp_swriter_bytes(w);
    CHECK(icpp_swriter_close(w, LN, 0, &err) == 0, "close large: %s", err.msg);
    long before = rss_kib(), peak = before;
    icpp_sreader *r = icpp_sreader_open(path, &err);
    CHECK(r != NULL, "read large: %s", err.msg);
    icpp_srec rec;
    int k = 0, rc = 0, mism = 0;
    seed = 12345;
    while (r && (rc = icpp_sreader_next(r, &rec, &err)) > 0) {
        if (rec.type != ICPP_SREC_SAMPLE)
            continue;
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        mism += rec.u.sample.tid != 7 + (uint32_t)(seed >> 62) || rec.u.sample.time != 1000 + (uint64_t)k * 97 ||
                rec.u.sample.ip != seed >> 20 || rec.u.sample.sp != 0x7ffc00000000 + (seed >> 40) ||
                rec.u.sample.bp != seed >> 24;
        if (++k % 100000 == 0) {
            long now = rss_kib();
            peak = now > peak ? now : peak;
        }
    }
    CHECK(rc == 0 && k == LN && mism == 0, "large: rc %d, %d of %d samples, %d differ: %s", rc, k, LN, mism, err.msg);
    /* Reading the whole file into memory would add all of it. */
    CHECK(before > 0 && (peak - before) * 1024 < (long)bytes / 2,
          "large: resident memory grew by %ld KiB reading a %llu-byte file", peak - before, (unsigned long long)bytes);
    printf("large: %d samples, %llu bytes, resident memory +%ld KiB while reading\n", k, (unsigned long long)bytes,
           peak - before);
    icpp_sreader_close(r);
    unlink(path);
}

int main(void)
{
    icpp_err err = {0};
    char dir[] = "/tmp/icpp-smp-XXXXXX", path[256], old[300];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    test_learn(dir);
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
    test_large(dir);
    unlink(path);
    unlink(old);
    rmdir(dir);
    free(tr);
    return check_done("test_samples");
}
