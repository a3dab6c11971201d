/* perfrec.c -- perf_event record bodies: the sample and sample_id layouts one attr implies. */
#include "perfrec.h"

#include <string.h>

#define BRANCH_HW_INDEX (1ull << 17)    /* PERF_SAMPLE_BRANCH_HW_INDEX */
#define BRANCH_COUNTERS (1ull << 19)    /* PERF_SAMPLE_BRANCH_COUNTERS (Linux 6.8) */

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t icpp_perfrec_u64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void icpp_perfrec_layout_of(const struct perf_event_attr *a, icpp_perfrec_layout *l)
{
    l->sample_type = a->sample_type;
    l->read_format = a->read_format;
    l->branch_type = a->branch_sample_type;
    l->regs_user = a->sample_regs_user;
    l->regs_intr = a->sample_regs_intr;
    l->id_all = a->sample_id_all;
}

/* The cursor of a parse: c bytes of p[0..n) read. */
typedef struct cur {
    const uint8_t *p;
    size_t         n, c;
} cur;

/* k more bytes are there. */
static int need(const cur *u, uint64_t k)
{
    return k <= u->n - u->c;
}

static int skip(cur *u, uint64_t k)
{
    if (!need(u, k))
        return 0;
    u->c += (size_t)k;
    return 1;
}

static int take64(cur *u, uint64_t *v)
{
    if (!need(u, 8))
        return 0;
    *v = icpp_perfrec_u64(u->p + u->c);
    u->c += 8;
    return 1;
}

/* A READ field (read_format): its values, one group or one counter. */
static int skip_read(cur *u, uint64_t rf)
{
    uint64_t per = 1 + !!(rf & PERF_FORMAT_ID) + !!(rf & PERF_FORMAT_LOST);
    uint64_t times = !!(rf & PERF_FORMAT_TOTAL_TIME_ENABLED) + !!(rf & PERF_FORMAT_TOTAL_TIME_RUNNING);
    if (!(rf & PERF_FORMAT_GROUP))
        return skip(u, 8 * (times + per));
    uint64_t nr;
    if (!take64(u, &nr) || nr > u->n / 8)
        return 0;
    return skip(u, 8 * (times + nr * per));
}

static int read_chain(cur *u, icpp_perfrec_sample *s)
{
    uint64_t nr;
    if (!take64(u, &nr) || nr > (u->n - u->c) / 8)
        return 0;
    s->chain = u->p + u->c;
    s->nchain = (size_t)nr;
    u->c += 8 * (size_t)nr;
    return 1;
}

static int skip_raw(cur *u)
{
    if (!need(u, 4))
        return 0;
    uint32_t sz = get32(u->p + u->c);
    u->c += 4;
    return skip(u, sz);
}

static int skip_branches(cur *u, uint64_t bt)
{
    uint64_t nr;
    if (!take64(u, &nr) || nr > u->n / 24)
        return 0;
    if ((bt & BRANCH_HW_INDEX) && !skip(u, 8))
        return 0;
    if (!skip(u, 24 * nr))
        return 0;
    return !(bt & BRANCH_COUNTERS) || skip(u, 8 * nr);
}

/* REGS_USER or REGS_INTR: the ABI word (noted in s->have as `bit`), then
 * one value per bit of mask unless the ABI is NONE. */
static int read_regs(cur *u, uint64_t mask, uint64_t bit, icpp_perfrec_sample *s, uint64_t *abi,
                     const uint8_t **regs)
{
    if (!take64(u, abi))
        return 0;
    s->have |= bit;
    if (!*abi)
        return 1;
    const uint8_t *at = u->p + u->c;
    if (!skip(u, 8 * (uint64_t)__builtin_popcountll(mask)))
        return 0;
    *regs = at;
    return 1;
}

/* STACK_USER: the size of the copy, the copy, and (if not empty) how much
 * of it the kernel could fill (dyn_size). */
static int read_stack(cur *u, icpp_perfrec_sample *s)
{
    uint64_t sz, dyn;
    if (!take64(u, &sz))
        return 0;
    const uint8_t *at = u->p + u->c;
    if (!skip(u, sz))
        return 0;
    s->stack = at;
    s->stack_size = (size_t)sz;
    if (sz) {
        if (!take64(u, &dyn))
            return 0;
        if (dyn < sz)
            s->stack_size = (size_t)dyn;
    }
    return 1;
}

/* One u64 field of bit `bit` into *v (or skipped, v NULL). */
static int field64(cur *u, uint64_t st, uint64_t bit, icpp_perfrec_sample *s, uint64_t *v)
{
    uint64_t x;
    if (!(st & bit))
        return 1;
    if (!take64(u, &x))
        return 0;
    if (v)
        *v = x;
    s->have |= bit;
    return 1;
}

/* A field of bit `bit` read by `ok` (the reader's result); notes it. */
#define FIELD(bit, ok)                          \
    do {                                        \
        if (st & (bit)) {                       \
            if (!(ok))                          \
                return -1;                      \
            s->have |= st & (bit);              \
        }                                       \
    } while (0)

int icpp_perfrec_sample_parse(const icpp_perfrec_layout *l, const uint8_t *p, size_t n, icpp_perfrec_sample *s)
{
    cur u = {p, n, 0};
    uint64_t st = l->sample_type, pt = 0, cpu = 0;
    memset(s, 0, sizeof *s);
    if (!field64(&u, st, PERF_SAMPLE_IDENTIFIER, s, &s->id) || !field64(&u, st, PERF_SAMPLE_IP, s, &s->ip) ||
        !field64(&u, st, PERF_SAMPLE_TID, s, &pt))
        return -1;
    s->pid = (uint32_t)pt;
    s->tid = (uint32_t)(pt >> 32);
    if (!field64(&u, st, PERF_SAMPLE_TIME, s, &s->time) || !field64(&u, st, PERF_SAMPLE_ADDR, s, &s->addr) ||
        !field64(&u, st, PERF_SAMPLE_ID, s, &s->id) || !field64(&u, st, PERF_SAMPLE_STREAM_ID, s, &s->stream_id) ||
        !field64(&u, st, PERF_SAMPLE_CPU, s, &cpu))
        return -1;
    s->cpu = (uint32_t)cpu;
    if (!field64(&u, st, PERF_SAMPLE_PERIOD, s, &s->period))
        return -1;
    FIELD(PERF_SAMPLE_READ, skip_read(&u, l->read_format));
    FIELD(PERF_SAMPLE_CALLCHAIN, read_chain(&u, s));
    FIELD(PERF_SAMPLE_RAW, skip_raw(&u));
    FIELD(PERF_SAMPLE_BRANCH_STACK, skip_branches(&u, l->branch_type));
    if ((st & PERF_SAMPLE_REGS_USER) && !read_regs(&u, l->regs_user, PERF_SAMPLE_REGS_USER, s, &s->uabi, &s->uregs))
        return -1;
    FIELD(PERF_SAMPLE_STACK_USER, read_stack(&u, s));
    FIELD(PERF_SAMPLE_WEIGHT | PERF_SAMPLE_WEIGHT_STRUCT, skip(&u, 8));
    FIELD(PERF_SAMPLE_DATA_SRC, skip(&u, 8));
    FIELD(PERF_SAMPLE_TRANSACTION, skip(&u, 8));
    if ((st & PERF_SAMPLE_REGS_INTR) && !read_regs(&u, l->regs_intr, PERF_SAMPLE_REGS_INTR, s, &s->iabi, &s->iregs))
        return -1;
    return 0;
}
#undef FIELD

int icpp_perfrec_sample_id(const icpp_perfrec_layout *l, const uint8_t *p, size_t n, uint64_t *id)
{
    uint64_t st = l->sample_type;
    size_t at;
    if (st & PERF_SAMPLE_IDENTIFIER)
        at = 0;
    else if (st & PERF_SAMPLE_ID)
        at = 8 * (size_t)(!!(st & PERF_SAMPLE_IP) + !!(st & PERF_SAMPLE_TID) + !!(st & PERF_SAMPLE_TIME) +
                          !!(st & PERF_SAMPLE_ADDR));
    else
        return 0;
    if (n < at + 8)
        return -1;
    *id = icpp_perfrec_u64(p + at);
    return 1;
}

int icpp_perfrec_time(const icpp_perfrec_layout *l, uint32_t type, const uint8_t *p, size_t n, uint64_t *t)
{
    uint64_t st = l ? l->sample_type : 0;
    if (type == PERF_RECORD_SAMPLE) {
        if (!(st & PERF_SAMPLE_TIME))
            return 0;
        size_t o = 8 * (size_t)(!!(st & PERF_SAMPLE_IDENTIFIER) + !!(st & PERF_SAMPLE_IP) + !!(st & PERF_SAMPLE_TID));
        if (n < o + 8)
            return 0;
        *t = icpp_perfrec_u64(p + o);
        return 1;
    }
    if (l && l->id_all && (st & PERF_SAMPLE_TIME)) {
        size_t tl = 8 * (size_t)__builtin_popcountll(st & ICPP_PERFREC_TRAILER_BITS);
        size_t o = 8 * (size_t)!!(st & PERF_SAMPLE_TID);
        if (n >= tl) {
            *t = icpp_perfrec_u64(p + n - tl + o);
            return 1;
        }
    }
    if ((type == PERF_RECORD_FORK || type == PERF_RECORD_EXIT) && n >= 24) {
        *t = icpp_perfrec_u64(p + 16);      /* pid, ppid, tid, ptid, time */
        return 1;
    }
    return 0;
}

int icpp_perfrec_trailer_id(const uint8_t *p, size_t n, uint64_t *id)
{
    if (n < 8)
        return 0;
    *id = icpp_perfrec_u64(p + n - 8);
    return 1;
}

int icpp_perfrec_reg(const uint8_t *regs, uint64_t mask, int reg, uint64_t *v)
{
    if (!regs || !(mask >> reg & 1))
        return 0;
    *v = icpp_perfrec_u64(regs + 8 * (size_t)__builtin_popcountll(mask & ((1ull << reg) - 1)));
    return 1;
}

size_t icpp_perfrec_chain(const icpp_perfrec_sample *s, int user_only, uint64_t *out, size_t max)
{
    size_t k = 0;
    int in_user = 1;
    for (size_t i = 0; i < s->nchain; i++) {
        uint64_t v = icpp_perfrec_u64(s->chain + 8 * i);
        if (v >= (uint64_t)PERF_CONTEXT_MAX) {
            in_user = v == (uint64_t)PERF_CONTEXT_USER;
            continue;
        }
        if ((in_user || !user_only) && k < max)
            out[k++] = v;
    }
    return k;
}
