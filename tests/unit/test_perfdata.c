/* test_perfdata.c -- perf.data reader: hand-built files parsed exactly, sample layouts, errors, truncation and bit flips. */
#include "check.h"
#include "codec.h"
#include "perfdata.h"

#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- building perf.data files ---- */

#define ATTR_SIZE 128               /* PERF_ATTR_SIZE_VER7, what perf 6.1 writes */
#define F_FREQ    (1ull << 10)
#define F_IDALL   (1ull << 18)
#define F_PREC(n) ((uint64_t)(n) << 15)
#define REGS_SBI  0x1c0ull          /* bp, sp, ip */

typedef struct attr_spec {
    uint32_t type;
    uint64_t config, period, sample_type, read_format, flags, regs_user, regs_intr, branch_type;
    const uint64_t *ids;
    uint32_t nids;
} attr_spec;

typedef struct feat_spec {
    int      bit;
    icpp_wbuf body;
} feat_spec;

static void u16le(icpp_wbuf *b, uint16_t v)
{
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    icpp_wbuf_bytes(b, x, 2);
}

static size_t rec_begin(icpp_wbuf *b, uint32_t type, uint16_t misc)
{
    size_t at = b->len;
    icpp_wbuf_u32le(b, type);
    u16le(b, misc);
    u16le(b, 0);
    return at;
}

static void rec_end(icpp_wbuf *b, size_t at)
{
    size_t n = b->len - at;
    b->p[at + 6] = (uint8_t)n;
    b->p[at + 7] = (uint8_t)(n >> 8);
}

/* A NUL-terminated name padded to 8 bytes. */
static void name8(icpp_wbuf *b, const char *s)
{
    size_t n = strlen(s) + 1, pad = (8 - n % 8) % 8;
    icpp_wbuf_bytes(b, s, n);
    for (size_t i = 0; i < pad; i++)
        icpp_wbuf_bytes(b, "", 1);
}

/* sample_id_all trailer of TID|TIME. */
static void trailer(icpp_wbuf *b, uint32_t pid, uint32_t tid, uint64_t time)
{
    icpp_wbuf_u32le(b, pid);
    icpp_wbuf_u32le(b, tid);
    icpp_wbuf_u64le(b, time);
}

/* perf's string: u32 length (padded), bytes, NULs. */
static void pstring(icpp_wbuf *b, const char *s)
{
    size_t n = strlen(s) + 1, len = (n + 63) / 64 * 64;
    icpp_wbuf_u32le(b, (uint32_t)len);
    icpp_wbuf_bytes(b, s, n);
    for (size_t i = n; i < len; i++)
        icpp_wbuf_bytes(b, "", 1);
}

/* Header, attributes, ids, the data, feature index and sections. */
static void assemble(icpp_wbuf *out, const attr_spec *a, int na, const icpp_wbuf *data, feat_spec *f, int nf,
                     int data_size_zero)
{
    uint64_t attrs_off = 104, attrs_size = (uint64_t)na * (ATTR_SIZE + 16);
    uint64_t ids_off = attrs_off + attrs_size, nids = 0;
    for (int i = 0; i < na; i++)
        nids += a[i].nids;
    uint64_t data_off = ids_off + 8 * nids, feat_at = data_off + data->len;
    uint64_t bits[4] = {0};
    for (int i = 0; i < nf; i++)
        bits[f[i].bit / 64] |= 1ull << (f[i].bit % 64);
    icpp_wbuf_bytes(out, "PERFILE2", 8);
    icpp_wbuf_u64le(out, 104);
    icpp_wbuf_u64le(out, ATTR_SIZE + 16);
    icpp_wbuf_u64le(out, attrs_off);
    icpp_wbuf_u64le(out, attrs_size);
    icpp_wbuf_u64le(out, data_off);
    icpp_wbuf_u64le(out, data_size_zero ? 0 : data->len);
    icpp_wbuf_u64le(out, 0);
    icpp_wbuf_u64le(out, 0);
    for (int i = 0; i < 4; i++)
        icpp_wbuf_u64le(out, bits[i]);
    uint64_t io = ids_off;
    for (int i = 0; i < na; i++) {
        uint8_t at[ATTR_SIZE] = {0};
        icpp_wbuf t = {0};
        icpp_wbuf_u32le(&t, a[i].type);
        icpp_wbuf_u32le(&t, ATTR_SIZE);
        icpp_wbuf_u64le(&t, a[i].config);
        icpp_wbuf_u64le(&t, a[i].period);
        icpp_wbuf_u64le(&t, a[i].sample_type);
        icpp_wbuf_u64le(&t, a[i].read_format);
        icpp_wbuf_u64le(&t, a[i].flags);
        memcpy(at, t.p, t.len);
        icpp_wbuf_free(&t);
        for (int k = 0; k < 8; k++) {
            at[72 + k] = (uint8_t)(a[i].branch_type >> 8 * k);
            at[80 + k] = (uint8_t)(a[i].regs_user >> 8 * k);
            at[96 + k] = (uint8_t)(a[i].regs_intr >> 8 * k);
        }
        icpp_wbuf_bytes(out, at, sizeof at);
        icpp_wbuf_u64le(out, io);
        icpp_wbuf_u64le(out, 8ull * a[i].nids);
        io += 8ull * a[i].nids;
    }
    for (int i = 0; i < na; i++)
        for (uint32_t k = 0; k < a[i].nids; k++)
            icpp_wbuf_u64le(out, a[i].ids[k]);
    icpp_wbuf_bytes(out, data->p, data->len);
    if (data_size_zero)
        return;
    uint64_t so = feat_at + 16ull * nf;
    for (int i = 0; i < nf; i++) {          /* f[] is in bit order */
        icpp_wbuf_u64le(out, so);
        icpp_wbuf_u64le(out, f[i].body.len);
        so += f[i].body.len;
    }
    for (int i = 0; i < nf; i++)
        icpp_wbuf_bytes(out, f[i].body.p, f[i].body.len);
}

/* ---- reading them back ---- */

typedef struct got {
    icpp_srec r[64];
    char      str[64][128];         /* copies of each record's main string */
    uint64_t  chain[8], regs[8];
    uint32_t  nchain, nregs;
    uint8_t   stack[32];
    int       n, rc, opened;
    icpp_err  err;
    icpp_perfdata_stats st;
    size_t    truncated;
    int       clean;
} got;

static const char *main_str(const icpp_srec *r)
{
    switch (r->type) {
    case ICPP_SREC_INFO: return r->u.info.val;
    case ICPP_SREC_EVENT: return r->u.event.name;
    case ICPP_SREC_PROC: return r->u.proc.path;
    case ICPP_SREC_MMAP: return r->u.mmap.path;
    default: return "";
    }
}

/* Read every record of buf (at most 64 kept). */
static int read_all(const uint8_t *buf, size_t len, got *g)
{
    memset(g, 0, sizeof *g);
    icpp_perfdata *pd = icpp_perfdata_mem(buf, len, &g->err);
    if (!pd)
        return g->rc = -1;
    g->opened = 1;
    icpp_srec r;
    int rc, total = 0;
    while ((rc = icpp_perfdata_next(pd, &r, &g->err)) > 0) {
        total++;
        if (g->n < 64) {
            g->r[g->n] = r;
            snprintf(g->str[g->n], sizeof g->str[g->n], "%s", main_str(&r) ? main_str(&r) : "(null)");
            if (r.type == ICPP_SREC_SAMPLE && r.u.sample.x.nregs) {
                g->nchain = r.u.sample.x.nchain < 8 ? r.u.sample.x.nchain : 8;
                memcpy(g->chain, r.u.sample.x.chain, g->nchain * 8);
                g->nregs = r.u.sample.x.nregs < 8 ? r.u.sample.x.nregs : 8;
                memcpy(g->regs, r.u.sample.x.regs, g->nregs * 8);
                memcpy(g->stack, r.u.sample.x.stack, r.u.sample.x.stack_size < 32 ? r.u.sample.x.stack_size : 32);
            }
            g->n++;
        }
        if (total > 1000000)
            break;                  /* a hang would be a bug: the checks below catch it */
    }
    g->st = *icpp_perfdata_stats_get(pd);
    g->truncated = icpp_perfdata_truncated(pd);
    g->clean = icpp_perfdata_clean_end(pd);
    icpp_perfdata_close(pd);
    return g->rc = rc;
}

/* Index of the first record of `type` at or after `from`, or -1. */
static int find(const got *g, int type, int from)
{
    for (int i = from; i < g->n; i++)
        if (g->r[i].type == type)
            return i;
    return -1;
}

/* ---- file A: what `perf record -e cpu-clock --user-regs=sp,bp,ip -- prog` writes ---- */

#define ST_A (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD | PERF_SAMPLE_REGS_USER)

static void sample_a(icpp_wbuf *d, uint16_t misc, uint32_t pid, uint32_t tid, uint64_t t, uint64_t ip, uint64_t abi,
                     uint64_t bp, uint64_t sp, uint64_t rip)
{
    size_t at = rec_begin(d, PERF_RECORD_SAMPLE, misc);
    icpp_wbuf_u64le(d, ip);
    icpp_wbuf_u32le(d, pid);
    icpp_wbuf_u32le(d, tid);
    icpp_wbuf_u64le(d, t);
    icpp_wbuf_u64le(d, 250000);
    icpp_wbuf_u64le(d, abi);
    if (abi) {
        icpp_wbuf_u64le(d, bp);
        icpp_wbuf_u64le(d, sp);
        icpp_wbuf_u64le(d, rip);
    }
    rec_end(d, at);
}

static void build_a(icpp_wbuf *out, int data_size_zero, int partial_tail)
{
    static const uint64_t ids[] = {5458, 5459};
    attr_spec a = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 4000, ST_A, 0, F_FREQ | F_IDALL, REGS_SBI, 0, 0,
                   ids, 2};
    icpp_wbuf d = {0};
    size_t at;
    /* perf's synthesized records for its forked child (time 0) */
    at = rec_begin(&d, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL);
    icpp_wbuf_u32le(&d, UINT32_MAX);
    icpp_wbuf_u32le(&d, 0);
    icpp_wbuf_u64le(&d, 0xffffffff81000000ull);
    icpp_wbuf_u64le(&d, 0x1276508);
    icpp_wbuf_u64le(&d, 0xffffffff81000000ull);
    name8(&d, "[kernel.kallsyms]_text");
    trailer(&d, 0, 0, 0);
    rec_end(&d, at);
    at = rec_begin(&d, PERF_RECORD_COMM, 0);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 100);
    name8(&d, "perf-exec");
    trailer(&d, 0, 0, 0);
    rec_end(&d, at);
    at = rec_begin(&d, 68, 0);              /* FINISHED_ROUND */
    rec_end(&d, at);
    /* the exec */
    at = rec_begin(&d, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 100);
    name8(&d, "prog");
    trailer(&d, 100, 100, 1000);
    rec_end(&d, at);
    at = rec_begin(&d, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u64le(&d, 0x555000);
    icpp_wbuf_u64le(&d, 0x1000);
    icpp_wbuf_u64le(&d, 0x1000);
    icpp_wbuf_u32le(&d, 254);               /* maj, min, ino, ino generation */
    icpp_wbuf_u32le(&d, 0);
    icpp_wbuf_u64le(&d, 5325563);
    icpp_wbuf_u64le(&d, 1);
    icpp_wbuf_u32le(&d, PROT_READ | PROT_EXEC);
    icpp_wbuf_u32le(&d, MAP_PRIVATE);
    name8(&d, "/bin/prog");
    trailer(&d, 100, 100, 1010);
    rec_end(&d, at);
    sample_a(&d, PERF_RECORD_MISC_USER, 100, 100, 1100, 0x555100, 2, 0x7ffd0100, 0x7ffd0000, 0x555100);
    at = rec_begin(&d, PERF_RECORD_MMAP, PERF_RECORD_MISC_USER | PERF_RECORD_MISC_MMAP_DATA);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u64le(&d, 0x7f0000000000ull);
    icpp_wbuf_u64le(&d, 0x800000);
    icpp_wbuf_u64le(&d, 0);
    name8(&d, "//anon");
    trailer(&d, 100, 100, 1200);
    rec_end(&d, at);
    at = rec_begin(&d, PERF_RECORD_FORK, 0);    /* a thread */
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 101);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u64le(&d, 1300);
    trailer(&d, 100, 101, 1300);
    rec_end(&d, at);
    at = rec_begin(&d, PERF_RECORD_FORK, 0);    /* a process */
    icpp_wbuf_u32le(&d, 102);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 102);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u64le(&d, 1310);
    trailer(&d, 102, 102, 1310);
    rec_end(&d, at);
    at = rec_begin(&d, PERF_RECORD_LOST, 0);
    icpp_wbuf_u64le(&d, 5458);
    icpp_wbuf_u64le(&d, 7);
    trailer(&d, 100, 100, 1400);
    rec_end(&d, at);
    sample_a(&d, PERF_RECORD_MISC_KERNEL, 0, 0, 1450, 0xffffffff81001234ull, 0, 0, 0, 0);   /* kernel thread */
    at = rec_begin(&d, PERF_RECORD_EXIT, 0);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u32le(&d, 101);
    icpp_wbuf_u32le(&d, 100);
    icpp_wbuf_u64le(&d, 1500);
    trailer(&d, 100, 101, 1500);
    rec_end(&d, at);
    at = rec_begin(&d, 68, 0);
    rec_end(&d, at);
    /* the other CPU's buffer, written after: earlier times */
    sample_a(&d, PERF_RECORD_MISC_KERNEL, 100, 100, 1050, 0xffffffff81000010ull, 2, 0x7ffd0200, 0x7ffd0080, 0x555200);
    at = rec_begin(&d, 68, 0);
    rec_end(&d, at);
    if (partial_tail)
        icpp_wbuf_bytes(&d, "\x09\x00\x00\x00\x02\x00\x48\x00\x01\x02\x03", 11);
    feat_spec f[3] = {{2, {0}}, {3, {0}}, {11, {0}}};
    /* build-id table: /bin/prog */
    at = rec_begin(&f[0].body, 67 /* HEADER_BUILD_ID */, PERF_RECORD_MISC_USER | (1u << 15));
    icpp_wbuf_u32le(&f[0].body, UINT32_MAX);
    uint8_t bid[24] = {0};
    for (int i = 0; i < 20; i++)
        bid[i] = (uint8_t)(0x11 * (i + 1));
    bid[20] = 20;
    icpp_wbuf_bytes(&f[0].body, bid, 24);
    name8(&f[0].body, "/bin/prog");
    rec_end(&f[0].body, at);
    pstring(&f[1].body, "host1");
    icpp_wbuf_u32le(&f[2].body, 3);
    pstring(&f[2].body, "/usr/bin/perf");
    pstring(&f[2].body, "record");
    pstring(&f[2].body, "prog");
    assemble(out, &a, 1, &d, f, 3, data_size_zero);
    icpp_wbuf_free(&d);
    for (int i = 0; i < 3; i++)
        icpp_wbuf_free(&f[i].body);
}

static void test_a(void)
{
    icpp_wbuf b = {0};
    build_a(&b, 0, 0);
    got *g = calloc(1, sizeof *g);
    CHECK(read_all(b.p, b.len, g) == 0, "file A: %s", g->err.msg);
    int i = 0;
    CHECK(g->n == 13, "file A: %d records", g->n);
    CHECK(g->r[i].type == ICPP_SREC_INFO && !strcmp(g->r[i].u.info.key, "tool") && !strcmp(g->str[i], "perf"), "tool");
    i++;
    CHECK(g->r[i].type == ICPP_SREC_INFO && !strcmp(g->r[i].u.info.key, "command") &&
          !strcmp(g->str[i], "/usr/bin/perf record prog"), "command '%s'", g->str[i]);
    i++;
    CHECK(g->r[i].type == ICPP_SREC_INFO && !strcmp(g->r[i].u.info.key, "host") && !strcmp(g->str[i], "host1"),
          "host '%s'", g->str[i]);
    i++;
    CHECK(g->r[i].type == ICPP_SREC_INFO && !strcmp(g->r[i].u.info.key, "startstack") && !strcmp(g->str[i], "unknown"),
          "startstack marked unknown");
    i++;
    const icpp_srec *r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_EVENT && r->u.event.id == 0 && !strcmp(g->str[i - 1], "cpu-clock") &&
          r->u.event.type == PERF_TYPE_SOFTWARE && r->u.event.period == 4000 && r->u.event.freq == 1 &&
          r->u.event.precise == 0, "event");
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_PROC && r->u.proc.pid == 100 && r->u.proc.ppid == 0 && r->u.proc.startstack == 0 &&
          r->u.proc.flags == ICPP_PROC_EXEC && !strcmp(g->str[i - 1], "/bin/prog"),
          "exec PROC: type %d pid %u flags %u exe '%s'", r->type, r->u.proc.pid, r->u.proc.flags, g->str[i - 1]);
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_MMAP && r->u.mmap.pid == 100 && r->u.mmap.start == 0x555000 && r->u.mmap.len == 0x1000 &&
          r->u.mmap.pgoff == 0x1000 && r->u.mmap.prot == (PROT_READ | PROT_EXEC) && !strcmp(g->str[i - 1], "/bin/prog") &&
          r->u.mmap.build_id.len == 20 && r->u.mmap.build_id.bytes[0] == 0x11 && r->u.mmap.build_id.bytes[19] == 0x54,
          "exe MMAP with the build-id of the table (len %u)", r->u.mmap.build_id.len);
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_SAMPLE && r->u.sample.time == 1050 && r->u.sample.pid == 100 && r->u.sample.tid == 100 &&
          r->u.sample.ip == 0x555200 && r->u.sample.sp == 0x7ffd0080 && r->u.sample.bp == 0x7ffd0200 &&
          r->u.sample.event == 0 && r->u.sample.x.nregs == 0,
          "kernel sample, time-sorted first, charged to the user registers: t=%llu ip=%#llx",
          (unsigned long long)r->u.sample.time, (unsigned long long)r->u.sample.ip);
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_SAMPLE && r->u.sample.time == 1100 && r->u.sample.ip == 0x555100 &&
          r->u.sample.sp == 0x7ffd0000 && r->u.sample.bp == 0x7ffd0100, "user sample");
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_MMAP && r->u.mmap.start == 0x7f0000000000ull && r->u.mmap.len == 0x800000 &&
          r->u.mmap.prot == (PROT_READ | PROT_WRITE) && !strcmp(g->str[i - 1], "") && r->u.mmap.build_id.len == 0,
          "anonymous data MMAP: path '%s' prot %u", g->str[i - 1], r->u.mmap.prot);
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_PROC && r->u.proc.pid == 102 && r->u.proc.ppid == 100 && r->u.proc.flags == 0,
          "fork PROC (a thread's FORK gives nothing)");
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_LOST && r->u.lost.count == 7, "LOST");
    r = &g->r[i++];
    CHECK(r->type == ICPP_SREC_EXIT && r->u.exit.pid == 100 && r->u.exit.tid == 101, "EXIT");
    CHECK(g->st.samples == 2 && g->st.kernel == 1 && g->st.noregs == 1 && g->st.unknown_id == 0 &&
          g->st.data_mmaps == 1, "stats: samples %llu kernel %llu noregs %llu", (unsigned long long)g->st.samples,
          (unsigned long long)g->st.kernel, (unsigned long long)g->st.noregs);
    CHECK(g->clean == 1 && g->truncated == 0, "clean end");
    CHECK(icpp_perfdata_is(b.p, b.len), "magic recognised");

    /* A killed perf: data size 0, no features, a partial last record. */
    icpp_wbuf k = {0};
    build_a(&k, 1, 1);
    CHECK(read_all(k.p, k.len, g) == 0, "killed perf: %s", g->err.msg);
    CHECK(g->clean == 0 && g->truncated == 11, "killed perf: clean %d truncated %zu", g->clean, g->truncated);
    CHECK(g->st.samples == 2 && find(g, ICPP_SREC_PROC, 0) >= 0 && g->r[0].type == ICPP_SREC_INFO &&
          g->r[1].type == ICPP_SREC_INFO && !strcmp(g->r[1].u.info.key, "startstack"),
          "killed perf: records still read (%llu samples)", (unsigned long long)g->st.samples);
    int m = find(g, ICPP_SREC_MMAP, 0);
    CHECK(m >= 0 && g->r[m].u.mmap.build_id.len == 0, "killed perf: no build-id table");
    /* The same partial record in a finished file is corruption. */
    icpp_wbuf_free(&k);

    /* Every truncation: an error or a shorter stream, never a crash. */
    for (size_t n = 0; n < b.len; n++) {
        uint8_t *cut = malloc(n ? n : 1);
        memcpy(cut, b.p, n);
        int rc = read_all(cut, n, g);
        if (n < b.len - 1) {
            if (rc == 0 && n >= 104)
                CHECK(g->st.samples <= 2, "cut at %zu", n);
        }
        if (n == 50)
            CHECK(rc < 0 && strstr(g->err.msg, "truncated at offset 50"), "cut header: %s", g->err.msg);
        free(cut);
    }
    icpp_wbuf_free(&b);
    free(g);
}

/* ---- file B: two events, every sample field ---- */

#define ST_B (PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | \
              PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ | \
              PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER | \
              PERF_SAMPLE_STACK_USER | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC | PERF_SAMPLE_TRANSACTION | \
              PERF_SAMPLE_REGS_INTR | PERF_SAMPLE_PHYS_ADDR)
#define RF_B (PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_LOST)
#define UREGS_B (REGS_SBI | 1ull)            /* ax too */

/* user: abi of the user registers (0 = none); intr: of the interrupt registers */
static void sample_b(icpp_wbuf *d, uint64_t id, uint64_t t, uint64_t ip, int user, int intr, uint64_t rip)
{
    size_t at = rec_begin(d, PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER);
    icpp_wbuf_u64le(d, id);                 /* IDENTIFIER */
    icpp_wbuf_u64le(d, ip);
    icpp_wbuf_u32le(d, 200);
    icpp_wbuf_u32le(d, 201);
    icpp_wbuf_u64le(d, t);
    icpp_wbuf_u64le(d, 0xdead);             /* ADDR */
    icpp_wbuf_u64le(d, id);                 /* ID */
    icpp_wbuf_u64le(d, id);                 /* STREAM_ID */
    icpp_wbuf_u64le(d, 1);                  /* CPU, reserved */
    icpp_wbuf_u64le(d, 100003);             /* PERIOD */
    icpp_wbuf_u64le(d, 2);                  /* READ: nr, time enabled, nr x {value, id, lost} */
    icpp_wbuf_u64le(d, 12345);
    for (int i = 0; i < 2; i++) {
        icpp_wbuf_u64le(d, 1000 + i);
        icpp_wbuf_u64le(d, 7 + i);
        icpp_wbuf_u64le(d, 0);
    }
    icpp_wbuf_u64le(d, 5);                  /* CALLCHAIN */
    icpp_wbuf_u64le(d, (uint64_t)PERF_CONTEXT_KERNEL);
    icpp_wbuf_u64le(d, 0xffffffff81000000ull);
    icpp_wbuf_u64le(d, (uint64_t)PERF_CONTEXT_USER);
    icpp_wbuf_u64le(d, 0x401000);
    icpp_wbuf_u64le(d, 0x402000);
    icpp_wbuf_u32le(d, 12);                 /* RAW: size, 12 bytes (u64-aligned with the size) */
    icpp_wbuf_bytes(d, "rawrawrawraw", 12);
    icpp_wbuf_u64le(d, 1);                  /* BRANCH_STACK: nr, hw_idx, {from, to, flags} */
    icpp_wbuf_u64le(d, 0);
    icpp_wbuf_u64le(d, 0x401000);
    icpp_wbuf_u64le(d, 0x402000);
    icpp_wbuf_u64le(d, 0);
    icpp_wbuf_u64le(d, user ? 2 : 0);       /* REGS_USER: ax, bp, sp, ip */
    if (user) {
        icpp_wbuf_u64le(d, 0xaa);
        icpp_wbuf_u64le(d, 0x7ffe0100);
        icpp_wbuf_u64le(d, 0x7ffe0000);
        icpp_wbuf_u64le(d, rip);
    }
    icpp_wbuf_u64le(d, 16);                 /* STACK_USER: size, data, dyn_size */
    icpp_wbuf_bytes(d, "0123456789abcdef", 16);
    icpp_wbuf_u64le(d, 12);
    icpp_wbuf_u64le(d, 77);                 /* WEIGHT */
    icpp_wbuf_u64le(d, 0);                  /* DATA_SRC */
    icpp_wbuf_u64le(d, 0);                  /* TRANSACTION */
    icpp_wbuf_u64le(d, intr ? 2 : 0);       /* REGS_INTR: bp, sp, ip */
    if (intr) {
        icpp_wbuf_u64le(d, 0x7ffe0900);
        icpp_wbuf_u64le(d, 0x7ffe0800);
        icpp_wbuf_u64le(d, rip);
    }
    icpp_wbuf_u64le(d, 0x1234000);          /* PHYS_ADDR: after what is read */
    rec_end(d, at);
}

static void build_b(icpp_wbuf *out)
{
    static const uint64_t ids0[] = {7, 17}, ids1[] = {8};
    attr_spec a[2] = {
        {PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 100003, ST_B, RF_B, F_IDALL | F_PREC(2), UREGS_B, REGS_SBI,
         1ull << 17, ids0, 2},
        {PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, 100003, ST_B, RF_B, F_IDALL | F_PREC(1), UREGS_B,
         REGS_SBI, 1ull << 17, ids1, 1},
    };
    icpp_wbuf d = {0};
    sample_b(&d, 7, 10, 0x401234, 1, 1, 0x401230);     /* precise 2: the registers' IP */
    sample_b(&d, 8, 20, 0x401234, 0, 1, 0x401230);     /* no user registers: interrupt ones */
    sample_b(&d, 99, 30, 0x401234, 1, 1, 0x401230);    /* an id of no event */
    sample_b(&d, 17, 40, 0x401234, 0, 0, 0);           /* no registers at all */
    size_t at = rec_begin(&d, PERF_RECORD_LOST_SAMPLES, 0);
    icpp_wbuf_u64le(&d, 3);
    for (int i = 0; i < 6; i++)             /* sample_id trailer of ST_B */
        icpp_wbuf_u64le(&d, i == 1 ? 50 : i == 5 ? 7 : 0);
    rec_end(&d, at);
    feat_spec f[1] = {{12, {0}}};           /* EVENT_DESC: the names perf gave */
    icpp_wbuf_u32le(&f[0].body, 2);
    icpp_wbuf_u32le(&f[0].body, ATTR_SIZE);
    for (int i = 0; i < 2; i++) {
        uint8_t z[ATTR_SIZE] = {0};
        icpp_wbuf_bytes(&f[0].body, z, sizeof z);
        icpp_wbuf_u32le(&f[0].body, 0);
        pstring(&f[0].body, i ? "instructions:u" : "cycles:pp");
    }
    assemble(out, a, 2, &d, f, 1, 0);
    icpp_wbuf_free(&d);
    icpp_wbuf_free(&f[0].body);
}

static void test_b(void)
{
    icpp_wbuf b = {0};
    build_b(&b);
    got *g = calloc(1, sizeof *g);
    CHECK(read_all(b.p, b.len, g) == 0, "file B: %s", g->err.msg);
    int e0 = find(g, ICPP_SREC_EVENT, 0), e1 = find(g, ICPP_SREC_EVENT, e0 + 1);
    CHECK(e0 >= 0 && e1 >= 0 && !strcmp(g->str[e0], "cycles:pp") && !strcmp(g->str[e1], "instructions:u") &&
          g->r[e0].u.event.precise == 2 && g->r[e0].u.event.freq == 0 && g->r[e0].u.event.period == 100003 &&
          g->r[e1].u.event.id == 1 && g->r[e1].u.event.config == PERF_COUNT_HW_INSTRUCTIONS,
          "events named by EVENT_DESC");
    int s0 = find(g, ICPP_SREC_SAMPLE, 0), s1 = s0 >= 0 ? find(g, ICPP_SREC_SAMPLE, s0 + 1) : -1;
    CHECK(s0 >= 0 && s1 >= 0 && find(g, ICPP_SREC_SAMPLE, s1 + 1) < 0, "two samples given");
    if (s1 >= 0) {
        const icpp_srec *r = &g->r[s0];
        CHECK(r->u.sample.event == 0 && r->u.sample.pid == 200 && r->u.sample.tid == 201 && r->u.sample.time == 10 &&
              r->u.sample.ip == 0x401230 && r->u.sample.sp == 0x7ffe0000 && r->u.sample.bp == 0x7ffe0100,
              "sample 0: user registers, the register IP for precise 2 (ip %#llx sp %#llx)",
              (unsigned long long)r->u.sample.ip, (unsigned long long)r->u.sample.sp);
        CHECK(r->u.sample.x.nchain == 2 && g->chain[0] == 0x401000 && g->chain[1] == 0x402000,
              "user part of the callchain (%u)", r->u.sample.x.nchain);
        CHECK(r->u.sample.x.nregs == 4 && r->u.sample.x.regs_mask == UREGS_B && g->regs[0] == 0xaa &&
              g->regs[2] == 0x7ffe0000, "user registers kept");
        CHECK(r->u.sample.x.stack_size == 12 && !memcmp(g->stack, "0123456789ab", 12), "user stack (dyn size)");
        r = &g->r[s1];
        CHECK(r->u.sample.event == 1 && r->u.sample.time == 20 && r->u.sample.ip == 0x401234 &&
              r->u.sample.sp == 0x7ffe0800 && r->u.sample.bp == 0x7ffe0900 && r->u.sample.x.nregs == 0,
              "sample 1: interrupt registers, the sample IP for precise 1 (ip %#llx sp %#llx)",
              (unsigned long long)r->u.sample.ip, (unsigned long long)r->u.sample.sp);
    }
    int l = find(g, ICPP_SREC_LOST, 0);
    CHECK(l > s1 && g->r[l].u.lost.count == 3, "LOST_SAMPLES, ordered by its trailer's time");
    CHECK(g->st.unknown_id == 1 && g->st.noregs == 1 && g->st.samples == 2, "stats: unknown %llu noregs %llu",
          (unsigned long long)g->st.unknown_id, (unsigned long long)g->st.noregs);
    icpp_wbuf_free(&b);
    free(g);
}

/* ---- errors ---- */

static void expect_error(const uint8_t *p, size_t n, const char *want, const char *what)
{
    got *g = calloc(1, sizeof *g);
    int rc = read_all(p, n, g);
    CHECK(rc < 0 && strstr(g->err.msg, want) && !strchr(g->err.msg, '\n'), "%s: rc %d, message '%s' (want '%s')",
          what, rc, g->err.msg, want);
    free(g);
}

static void test_errors(void)
{
    icpp_wbuf b = {0};
    build_a(&b, 0, 0);
    static uint8_t c[4096];
    CHECK(b.len > 400 && b.len <= sizeof c && !b.oom, "file A built: %zu bytes", b.len);
    if (b.len <= 400 || b.len > sizeof c)
        return;

    expect_error((const uint8_t *)"ICPPSMP\n\1\0\0\0\0\0\0\0", 16, "not a perf.data file", "another format");
    expect_error((const uint8_t *)"PERFFILE", 8, "too old", "version 1");
    expect_error((const uint8_t *)"", 0, "not a perf.data file", "empty");
    memcpy(c, b.p, b.len);
    memcpy(c, "2ELIFREP", 8);
    expect_error(c, b.len, "big-endian", "other byte order");
    CHECK(icpp_perfdata_is(c, b.len), "swapped magic is still a perf.data");
    memcpy(c, b.p, b.len);
    c[8] = 16;                              /* perf_pipe_file_header */
    expect_error(c, b.len, "pipe", "pipe mode");
    memcpy(c, b.p, b.len);
    memset(c + 104 + 80, 0, 8);             /* sample_regs_user = 0 */
    expect_error(c, b.len, "samples carry no user registers: record with --user-regs=sp,bp,ip", "no registers");
    memcpy(c, b.p, b.len);
    c[104 + 24] &= (uint8_t)~PERF_SAMPLE_TID;
    expect_error(c, b.len, "thread ids", "no tid");
    memcpy(c, b.p, b.len);
    c[48] = 0xff;                           /* data size: past the end */
    c[49] = 0xff;
    expect_error(c, b.len, "truncated at offset", "data section past the end");
    expect_error(b.p, 200, "truncated at offset 200", "cut in the attributes");
    /* A record longer than the data section of a finished file. */
    memcpy(c, b.p, b.len);
    uint64_t doff = 0;
    for (int k = 0; k < 8; k++)
        doff |= (uint64_t)c[40 + k] << 8 * k;
    c[doff + 6] = 0x04;                     /* first record: size 4 < 8 */
    c[doff + 7] = 0;
    expect_error(c, b.len, "corrupt record at offset", "record size below 8");
    /* Two events and no way to tell their samples apart. */
    static const uint64_t i0[] = {1}, i1[] = {2};
    attr_spec two[2] = {{1, 0, 4000, ST_A, 0, F_IDALL, REGS_SBI, 0, 0, i0, 1},
                        {1, 1, 4000, ST_A, 0, F_IDALL, REGS_SBI, 0, 0, i1, 1}};
    icpp_wbuf d = {0}, o = {0};
    rec_end(&d, rec_begin(&d, 68, 0));      /* FINISHED_ROUND */
    assemble(&o, two, 2, &d, NULL, 0, 0);
    expect_error(o.p, o.len, "cannot be told apart", "two events without ids");
    icpp_wbuf_free(&o);
    /* Compressed data. */
    size_t at = rec_begin(&d, 81, 0);
    icpp_wbuf_u64le(&d, 0);
    rec_end(&d, at);
    assemble(&o, two, 1, &d, NULL, 0, 0);
    expect_error(o.p, o.len, "perf record -z", "compressed");
    icpp_wbuf_free(&o);
    icpp_wbuf_free(&d);
    icpp_wbuf_free(&b);
}

/* ---- bit flips and random bytes never crash or hang ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void fuzz(const icpp_wbuf *b, const char *name, int rounds)
{
    got *g = calloc(1, sizeof *g);
    uint8_t *c = malloc(b->len);
    int opened = 0, errors = 0;
    for (int it = 0; it < rounds; it++) {
        memcpy(c, b->p, b->len);
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = rnd() % b->len;
            if (rnd() & 1)
                c[at] ^= (uint8_t)(1u << (rnd() % 8));
            else
                c[at] = (uint8_t)rnd();
        }
        int rc = read_all(c, b->len, g);
        opened += g->opened;
        errors += rc < 0;
        if (rc < 0)
            CHECK(g->err.msg[0] && !strchr(g->err.msg, '\n'), "%s round %d: an error needs a one-line message", name, it);
    }
    CHECK(opened > rounds / 4, "%s: only %d of %d corrupted files opened", name, opened, rounds);
    printf("%s: %d corrupted copies, %d opened, %d errors\n", name, rounds, opened, errors);
    free(c);
    free(g);
}

/* ---- time order: a bounded window, spilled when it overflows ---- */

/* Samples of `ncpu` CPUs, each CPU's times increasing, written as perf
 * record does: each CPU's buffer in turn, a FINISHED_ROUND after each pass.
 * ip = the sample's index in the file.  late_cpu >= 0: that CPU's buffer
 * is written only at the end (a disorder as long as the recording; no
 * FINISHED_ROUND then, since their promise would not hold).  tail_lost:
 * end with two LOST_SAMPLES of time 0, as perf record 6.1 does. */
static size_t build_cpus(icpp_wbuf *out, int n, int ncpu, int late_cpu, int tail_lost, uint64_t **times)
{
    static const uint64_t ids[] = {7};
    attr_spec a = {PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 4000, ST_A, 0, F_FREQ | F_IDALL, REGS_SBI, 0, 0,
                   ids, 1};
    uint64_t *t = calloc((size_t)n, sizeof *t), clock[16] = {0};
    int *cpu = calloc((size_t)n, sizeof *cpu);
    for (int i = 0; i < n; i++) {           /* a sample's CPU and time, in the order they happened */
        cpu[i] = (int)(rnd() % (uint64_t)ncpu);
        clock[0] += 1 + rnd() % 1000;
        t[i] = clock[0];
    }
    icpp_wbuf d = {0};
    size_t idx = 0, done = 0;
    uint64_t *ft = calloc((size_t)n, sizeof *ft);      /* time of the k-th sample in the file */
    int *next = calloc((size_t)ncpu, sizeof *next);
    while (done < (size_t)n) {
        size_t upto = done + 1 + rnd() % 3000;          /* this round's events */
        if (upto > (size_t)n)
            upto = (size_t)n;
        for (int c = 0; c < ncpu; c++) {
            if (c == late_cpu && upto < (size_t)n)
                continue;
            for (int i = next[c]; i < (int)upto; i++) {
                if (cpu[i] != c)
                    continue;
                sample_a(&d, PERF_RECORD_MISC_USER, 42, 42 + (uint32_t)c, t[i], idx, 2, 0x7ff0, 0x7fe0, idx);
                ft[idx++] = t[i];
            }
            next[c] = (int)upto;
        }
        if (late_cpu < 0)
            rec_end(&d, rec_begin(&d, 68, 0));      /* FINISHED_ROUND */
        done = upto;
    }
    for (int i = 0; i < 2 * !!tail_lost; i++) {
        size_t at = rec_begin(&d, PERF_RECORD_LOST_SAMPLES, 0);
        icpp_wbuf_u64le(&d, 17 + (uint64_t)i);
        trailer(&d, 0, 0, 0);
        rec_end(&d, at);
    }
    assemble(out, &a, 1, &d, NULL, 0, 0);
    icpp_wbuf_free(&d);
    free(t);
    free(cpu);
    free(next);
    *times = ft;
    return idx;
}

static uint64_t lost_seen;      /* LOST counts check_order met */

/* Read the samples of pd; check they come out by time, file order breaking
 * ties, and each exactly once.  Returns the number seen. */
static size_t check_order(icpp_perfdata *pd, const uint64_t *ft, size_t n, const char *what)
{
    /* Expected: the file indices stably sorted by time. */
    size_t *want = malloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++)
        want[i] = i;
    for (size_t w = 1; w < n; w *= 2) {     /* bottom-up merge sort: stable */
        size_t *tmp = malloc(n * sizeof *tmp);
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, a = lo, b = mid, k = lo;
            while (a < mid || b < hi)
                tmp[k++] = b >= hi || (a < mid && ft[want[a]] <= ft[want[b]]) ? want[a++] : want[b++];
        }
        memcpy(want, tmp, n * sizeof *want);
        free(tmp);
    }
    icpp_srec r;
    icpp_err err = {0};
    size_t k = 0, bad = 0;
    int rc;
    lost_seen = 0;
    while ((rc = icpp_perfdata_next(pd, &r, &err)) > 0) {
        lost_seen += r.type == ICPP_SREC_LOST ? r.u.lost.count : 0;
        if (r.type != ICPP_SREC_SAMPLE)
            continue;
        if (k >= n || r.u.sample.ip != want[k] || r.u.sample.time != ft[want[k]])
            bad++;
        k++;
    }
    CHECK(rc == 0, "%s: %s", what, err.msg);
    CHECK(k == n, "%s: %zu of %zu samples", what, k, n);
    CHECK(bad == 0, "%s: %zu samples out of time order", what, bad);
    free(want);
    return k;
}

static void test_order(void)
{
    /* Four CPUs, rounds of up to 3000 events: ~8 MiB, several chunks. */
    icpp_wbuf b = {0};
    uint64_t *ft;
    size_t n = build_cpus(&b, 120000, 4, -1, 1, &ft);
    icpp_err err = {0};
    icpp_perfdata *pd = icpp_perfdata_mem(b.p, b.len, &err);
    CHECK(pd, "cpus: %s", err.msg);
    if (pd) {
        check_order(pd, ft, n, "4 cpus");
        const icpp_perfdata_stats *st = icpp_perfdata_stats_get(pd);
        /* The LOST_SAMPLES of time 0 at the end do not hold the window open. */
        CHECK(st->spilled == 0 && st->held_max > 0 && st->held_max < n / 3,
              "4 cpus: %llu records held at most, %llu spilled, of %zu: the window should be bounded, not the file",
              (unsigned long long)st->held_max, (unsigned long long)st->spilled, n);
        CHECK(lost_seen == 17 + 18, "4 cpus: lost %llu", (unsigned long long)lost_seen);
        icpp_perfdata_close(pd);
    }
    /* The same file through a window of 1000 records: spilled, same order. */
    pd = icpp_perfdata_mem(b.p, b.len, &err);
    CHECK(pd && icpp_perfdata_set_window(pd, 1000) == 0, "window 1000");
    if (pd) {
        check_order(pd, ft, n, "4 cpus, window 1000");
        const icpp_perfdata_stats *st = icpp_perfdata_stats_get(pd);
        CHECK(st->spilled > 0 && st->held_max <= 1000, "window 1000: %llu spilled, %llu held",
              (unsigned long long)st->spilled, (unsigned long long)st->held_max);
        CHECK(icpp_perfdata_set_window(pd, 10) < 0, "the window is set before reading");
        icpp_perfdata_close(pd);
    }
    /* The same bytes from a file (mapped, pages released behind the cursor). */
    char path[] = "/tmp/icpp-test-perfdata-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, b.p, b.len) == (ssize_t)b.len, "temp file");
    close(fd);
    pd = icpp_perfdata_open(path, &err);
    CHECK(pd, "file: %s", err.msg);
    if (pd) {
        check_order(pd, ft, n, "4 cpus, file");
        icpp_perfdata_close(pd);
    }
    unlink(path);
    free(ft);
    icpp_wbuf_free(&b);

    /* One CPU's buffer written only at the end: the window holds the whole
     * recording unless it spills; both ways give the time order. */
    n = build_cpus(&b, 30000, 3, 1, 0, &ft);
    pd = icpp_perfdata_mem(b.p, b.len, &err);
    CHECK(pd, "late cpu: %s", err.msg);
    if (pd) {
        check_order(pd, ft, n, "late cpu");
        icpp_perfdata_close(pd);
    }
    pd = icpp_perfdata_mem(b.p, b.len, &err);
    if (pd) {
        icpp_perfdata_set_window(pd, 256);
        check_order(pd, ft, n, "late cpu, window 256");
        const icpp_perfdata_stats *st = icpp_perfdata_stats_get(pd);
        CHECK(st->spilled > n / 2 && st->held_max <= 256, "late cpu, window 256: %llu spilled, %llu held",
              (unsigned long long)st->spilled, (unsigned long long)st->held_max);
        icpp_perfdata_close(pd);
    }
    free(ft);
    icpp_wbuf_free(&b);
}

int main(void)
{
    test_a();
    test_b();
    test_errors();
    test_order();
    icpp_wbuf a = {0}, b = {0};
    build_a(&a, 0, 0);
    build_b(&b);
    fuzz(&a, "file A", 20000);
    fuzz(&b, "file B", 20000);
    icpp_wbuf_free(&a);
    icpp_wbuf_free(&b);
    return check_done("perfdata");
}
