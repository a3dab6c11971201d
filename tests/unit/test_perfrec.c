/* test_perfrec.c -- lib/perfrec.c: sample bodies and record times built by hand, ring and perf.data layouts. */
#include "perfrec.h"

#include <asm/perf_regs.h>
#include <string.h>

#include "check.h"
#include "events.h"

/* A body under construction. */
typedef struct { uint8_t b[1024]; size_t n; } body;

static void put64(body *b, uint64_t v) { memcpy(b->b + b->n, &v, 8); b->n += 8; }
static void put32(body *b, uint32_t v) { memcpy(b->b + b->n, &v, 4); b->n += 4; }

/* icpp-sample's layouts (lib/events.c): plain, learn (stack copy), --validate (chain, all registers, stack). */
static icpp_perfrec_layout ring_layout(int learn, int validate)
{
    icpp_perfrec_layout l = {PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                 PERF_SAMPLE_REGS_USER, 0, 0, ICPP_REGS_MASK, 0, 1};
    if (learn || validate)
        l.sample_type |= PERF_SAMPLE_STACK_USER;
    if (validate) {
        l.sample_type |= PERF_SAMPLE_CALLCHAIN;
        l.regs_user = 0xff0fffull;
    }
    return l;
}

static void ring_samples(void)
{
    icpp_perfrec_layout l = ring_layout(0, 0);
    icpp_perfrec_sample s;
    body b = {{0}, 0};
    put64(&b, 77);                  /* identifier */
    put64(&b, 0x401000);            /* ip */
    put32(&b, 10); put32(&b, 11);   /* pid, tid */
    put64(&b, 5000);                /* time */
    put64(&b, PERF_SAMPLE_REGS_ABI_64);
    put64(&b, 0xb0); put64(&b, 0x5a0); put64(&b, 0x401004);     /* bp, sp, ip: bit order */
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0, "plain ring sample");
    uint64_t bp = 0, sp = 0, ip = 0, id = 0, t = 0;
    CHECK(s.id == 77 && s.ip == 0x401000 && s.pid == 10 && s.tid == 11 && s.time == 5000, "fields");
    CHECK(icpp_perfrec_reg(s.uregs, l.regs_user, PERF_REG_X86_BP, &bp) && bp == 0xb0 &&
          icpp_perfrec_reg(s.uregs, l.regs_user, PERF_REG_X86_SP, &sp) && sp == 0x5a0 &&
          icpp_perfrec_reg(s.uregs, l.regs_user, PERF_REG_X86_IP, &ip) && ip == 0x401004, "registers in bit order");
    CHECK(!icpp_perfrec_reg(s.uregs, l.regs_user, PERF_REG_X86_AX, &ip), "a register not sampled");
    CHECK(icpp_perfrec_sample_id(&l, b.b, b.n, &id) == 1 && id == 77, "id");
    CHECK(icpp_perfrec_time(&l, PERF_RECORD_SAMPLE, b.b, b.n, &t) == 1 && t == 5000, "time");
    CHECK(icpp_perfrec_time(&l, PERF_RECORD_SAMPLE, b.b, 31, &t) == 0, "time cut short");
    /* every cut: an error; the ABI word seen from 40 bytes on (icpp-sample
     * counts an ABI-NONE sample then, and drops the others silently) */
    for (size_t n = 0; n < b.n; n++) {
        int rc = icpp_perfrec_sample_parse(&l, b.b, n, &s);
        CHECK(rc == -1 && !!(s.have & PERF_SAMPLE_REGS_USER) == (n >= 40) &&
                  !!(s.have & PERF_SAMPLE_TIME) == (n >= 32), "cut at %zu", n);
    }
    /* ABI none: no values follow */
    b.n = 32;
    put64(&b, PERF_SAMPLE_REGS_ABI_NONE);
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0 && s.uabi == 0 && !s.uregs, "abi none");
    /* learn: a stack copy of 16 bytes, 8 of them filled (dyn_size) */
    l = ring_layout(1, 0);
    b.n = 40;
    b.b[32] = PERF_SAMPLE_REGS_ABI_64;
    put64(&b, 1); put64(&b, 2); put64(&b, 3);
    put64(&b, 16); put64(&b, 0x1111); put64(&b, 0x2222); put64(&b, 8);
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0 && s.stack == b.b + 72 && s.stack_size == 8,
          "learn sample: dyn_size %zu", s.stack_size);
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n - 8, &s) == -1 && !(s.have & PERF_SAMPLE_STACK_USER),
          "dyn_size cut off");
    b.n -= 32;
    put64(&b, 0);       /* an empty copy has no dyn_size */
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0 && s.stack_size == 0, "zero-size stack");
    /* validate: a chain with a context marker */
    l = ring_layout(0, 1);
    b.n = 32;
    put64(&b, 3); put64(&b, (uint64_t)PERF_CONTEXT_USER); put64(&b, 0x401000); put64(&b, 0x402000);
    put64(&b, PERF_SAMPLE_REGS_ABI_64);
    for (int i = 0; i < __builtin_popcountll(l.regs_user); i++)
        put64(&b, 100 + (uint64_t)i);
    put64(&b, 8); put64(&b, 0xabc); put64(&b, 100);
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0 && s.nchain == 3 && s.stack_size == 8, "validate sample");
    uint64_t chain[4];
    CHECK(icpp_perfrec_chain(&s, 0, chain, 4) == 2 && chain[0] == 0x401000 && chain[1] == 0x402000, "chain");
    CHECK(icpp_perfrec_chain(&s, 0, chain, 1) == 1, "chain: at most max");
    CHECK(icpp_perfrec_reg(s.uregs, l.regs_user, PERF_REG_X86_SP, &sp) && sp == 100 + 7, "sp among 20 registers");
    body c = b;
    memset(c.b + 32, 0xff, 8);      /* a chain longer than the record */
    CHECK(icpp_perfrec_sample_parse(&l, c.b, c.n, &s) == -1 && !(s.have & PERF_SAMPLE_CALLCHAIN), "huge chain");
}

static void trailer_times(void)
{
    icpp_perfrec_layout l = ring_layout(0, 0);
    body b = {{0}, 0};
    uint64_t t = 0, id = 0;
    put64(&b, 1); put64(&b, 2); put64(&b, 3);           /* an mmap's fields */
    put32(&b, 7); put32(&b, 7); put64(&b, 444); put64(&b, 77);     /* pid/tid, time, identifier */
    CHECK(icpp_perfrec_time(&l, PERF_RECORD_MMAP2, b.b, b.n, &t) == 1 && t == 444, "trailer time");
    CHECK(icpp_perfrec_time(&l, PERF_RECORD_MMAP2, b.b, 23, &t) == 0, "trailer cut short");
    CHECK(icpp_perfrec_trailer_id(b.b, b.n, &id) == 1 && id == 77, "trailing identifier");
    l.id_all = 0;
    CHECK(icpp_perfrec_time(&l, PERF_RECORD_MMAP2, b.b, b.n, &t) == 0, "no sample_id_all: no time");
    t = 0;
    CHECK(icpp_perfrec_time(NULL, PERF_RECORD_EXIT, b.b, b.n, &t) == 1 && t == 3, "exit's own time");
    CHECK(icpp_perfrec_time(NULL, PERF_RECORD_COMM, b.b, b.n, &t) == 0, "comm: none");
}

/* perf record --user-regs=sp,bp,ip -d -g: ID by position, ADDR, CPU, PERIOD, READ, chain, branches, intr regs. */
static void perf_samples(void)
{
    icpp_perfrec_layout l = {PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ADDR | PERF_SAMPLE_ID |
                                 PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_READ | PERF_SAMPLE_CALLCHAIN |
                                 PERF_SAMPLE_RAW | PERF_SAMPLE_BRANCH_STACK | PERF_SAMPLE_REGS_USER |
                                 PERF_SAMPLE_WEIGHT | PERF_SAMPLE_REGS_INTR,
                             PERF_FORMAT_GROUP | PERF_FORMAT_ID, 1ull << 17, ICPP_REGS_MASK,
                             1ull << PERF_REG_X86_SP, 1};
    icpp_perfrec_sample s;
    body b = {{0}, 0};
    put64(&b, 0x401000); put32(&b, 5); put32(&b, 6); put64(&b, 900); put64(&b, 0xdead);
    put64(&b, 42);                                  /* id */
    put32(&b, 3); put32(&b, 0);                     /* cpu */
    put64(&b, 1000);                                /* period */
    put64(&b, 2); put64(&b, 1); put64(&b, 42); put64(&b, 2); put64(&b, 43);     /* group of 2 */
    put64(&b, 1); put64(&b, 0x401000);              /* chain */
    put32(&b, 4); put32(&b, 0);                     /* raw */
    put64(&b, 1); put64(&b, 0); put64(&b, 1); put64(&b, 2); put64(&b, 3);      /* branches: hw_idx, one */
    put64(&b, PERF_SAMPLE_REGS_ABI_64); put64(&b, 1); put64(&b, 2); put64(&b, 3);
    put64(&b, 9);                                   /* weight */
    put64(&b, PERF_SAMPLE_REGS_ABI_64); put64(&b, 0x7ff0);
    uint64_t id = 0, sp = 0, t = 0;
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0, "perf sample");
    CHECK(s.ip == 0x401000 && s.pid == 5 && s.tid == 6 && s.time == 900 && s.addr == 0xdead && s.id == 42 &&
          s.cpu == 3 && s.period == 1000 && s.nchain == 1, "perf fields");
    CHECK(icpp_perfrec_reg(s.iregs, l.regs_intr, PERF_REG_X86_SP, &sp) && sp == 0x7ff0, "intr sp");
    CHECK(icpp_perfrec_sample_id(&l, b.b, b.n, &id) == 1 && id == 42, "id by position");
    CHECK(icpp_perfrec_sample_id(&l, b.b, 39, &id) == -1, "id cut short");
    CHECK(icpp_perfrec_time(&l, PERF_RECORD_SAMPLE, b.b, b.n, &t) == 1 && t == 900, "time");
    for (size_t n = 0; n < b.n; n++)
        CHECK(icpp_perfrec_sample_parse(&l, b.b, n, &s) == -1, "cut at %zu", n);
    /* fields after REGS_INTR are not read: a record cut there is whole */
    l.sample_type |= PERF_SAMPLE_PHYS_ADDR;
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == 0, "after REGS_INTR: not read");
    /* a group count beyond the record */
    memset(b.b + 56, 0xff, 8);
    CHECK(icpp_perfrec_sample_parse(&l, b.b, b.n, &s) == -1 && s.period == 1000, "huge group");
    icpp_perfrec_layout none = {PERF_SAMPLE_IP, 0, 0, 0, 0, 0};
    CHECK(icpp_perfrec_sample_id(&none, b.b, b.n, &id) == 0, "no id field");
    CHECK(icpp_perfrec_time(&none, PERF_RECORD_SAMPLE, b.b, b.n, &t) == 0, "no time field");
}

int main(void)
{
    ring_samples();
    trailer_times();
    perf_samples();
    return check_done("perfrec");
}
