/* fuzz.h -- what the libFuzzer harnesses share: property checks that abort, and checksum fix-ups. */
#ifndef ICPP_FUZZ_H
#define ICPP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "samples.h"

/* A property every accepted input must have.  abort() is what libFuzzer
 * reports as a crash (and saves the input as an artifact). */
#define FUZZ_CHECK(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: property violated: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static inline uint32_t fuzz_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void fuzz_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fuzz_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Structured inputs: values taken from the front of the fuzz input. */
typedef struct fuzz_reader {
    const uint8_t *p;
    size_t         n;
} fuzz_reader;

/* The next `bytes` bytes, little-endian; zeros once the input is used up. */
static inline uint64_t fuzz_take(fuzz_reader *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes && in->n; i++, in->p++, in->n--)
        v |= (uint64_t)*in->p << (8 * i);
    return v;
}

/* A malloc'd copy of data[0..size) (at least 1 byte, so never NULL for 0). */
static inline uint8_t *fuzz_dup(const uint8_t *data, size_t size)
{
    uint8_t *c = malloc(size ? size : 1);
    if (!c)
        abort();
    if (size)
        memcpy(c, data, size);
    return c;
}

/* Path map container (docs/pathmap-format.md): magic, version 1, body length
 * = len - 28, CRC-32 of everything before the last 4 bytes.  After this the
 * decoder gets past the container checks and parses the body.  len < 28:
 * nothing to fix (no room for a header and CRC). */
#define FUZZ_PATHMAP_OVERHEAD 28
static inline void fuzz_fix_pathmap(uint8_t *b, size_t len)
{
    if (len < FUZZ_PATHMAP_OVERHEAD)
        return;
    memcpy(b, "ICPPMAP\n", 8);
    fuzz_put_le32(b + 8, 1);
    fuzz_put_le64(b + 16, (uint64_t)(len - FUZZ_PATHMAP_OVERHEAD));
    fuzz_put_le32(b + len - 4, icpp_crc32(0, b, len - 4));
}

/* Sample file (docs/samples-format.md): a 16-byte header (magic, version 1,
 * flags), then blocks of { u32 payload length, u32 CRC-32 of the payload,
 * payload }.  Fix the header; keep each block's length where it is usable
 * (1 .. 1 MiB and inside the buffer), else stretch it to the rest of the
 * buffer; then set its CRC.  The reader then parses every record. */
#define FUZZ_SAMPLES_HDR       16
#define FUZZ_SAMPLES_BLOCK_MAX (1024 * 1024)    /* samples.c BLOCK_MAX */
static inline void fuzz_fix_samples(uint8_t *b, size_t len)
{
    if (len < FUZZ_SAMPLES_HDR)
        return;
    memcpy(b, "ICPPSMP\n", 8);
    fuzz_put_le32(b + 8, 1);
    size_t pos = FUZZ_SAMPLES_HDR;
    while (len - pos > 8) {
        size_t avail = len - pos - 8;
        uint32_t plen = fuzz_le32(b + pos);
        if (plen == 0 || plen > FUZZ_SAMPLES_BLOCK_MAX || plen > avail) {
            plen = (uint32_t)(avail < FUZZ_SAMPLES_BLOCK_MAX ? avail : FUZZ_SAMPLES_BLOCK_MAX);
            fuzz_put_le32(b + pos, plen);
        }
        fuzz_put_le32(b + pos + 4, icpp_crc32(0, b + pos + 8, plen));
        pos += 8 + (size_t)plen;
    }
}

/* A record as icpp_sreader_next (or icpp_perfdata_next) hands it out for
 * an input buf[0..len): a known type, non-NULL strings, values in range,
 * --validate extras that point inside the input (or, for the chain and
 * registers, into the reader's own arrays; touched so ASan checks them). */
static inline void fuzz_check_srec(const icpp_srec *r, const uint8_t *buf, size_t len)
{
    FUZZ_CHECK(r->type > 0 && r->type < ICPP_SREC_MAX && r->type != ICPP_SREC_THREAD &&
                   r->type != ICPP_SREC_VSAMPLE,
               "record type %d", r->type);
    switch (r->type) {
    case ICPP_SREC_INFO:
        FUZZ_CHECK(r->u.info.key && r->u.info.val, "INFO without strings");
        break;
    case ICPP_SREC_EVENT:
        FUZZ_CHECK(r->u.event.name && r->u.event.freq <= 1 && r->u.event.precise <= 3, "EVENT");
        break;
    case ICPP_SREC_PROC:
        FUZZ_CHECK(r->u.proc.path != NULL, "PROC without path");
        break;
    case ICPP_SREC_MMAP:
        FUZZ_CHECK(r->u.mmap.path && r->u.mmap.prot <= 7 && r->u.mmap.build_id.len <= ICPP_BUILD_ID_MAX, "MMAP");
        break;
    case ICPP_SREC_SAMPLE: {
        const icpp_sample_extra *x = &r->u.sample.x;
        FUZZ_CHECK(x->nchain <= 4096 && (!x->nchain || x->chain), "callchain of %u", x->nchain);
        FUZZ_CHECK(x->nregs == (uint32_t)__builtin_popcountll(x->regs_mask) && (!x->nregs || x->regs),
                   "%u registers for mask %#llx", x->nregs, (unsigned long long)x->regs_mask);
        if (x->stack_size)
            FUZZ_CHECK(x->stack >= buf && x->stack_size <= len && x->stack - buf <= (ptrdiff_t)(len - x->stack_size),
                       "stack copy outside the input");
        /* Touch what the reader hands out, so ASan sees a bad pointer. */
        volatile uint64_t sink = 0;
        for (uint32_t i = 0; i < x->nchain; i++)
            sink += x->chain[i];
        for (uint32_t i = 0; i < x->nregs; i++)
            sink += x->regs[i];
        if (x->stack_size)
            sink += x->stack[0] + x->stack[x->stack_size - 1];
        (void)sink;
        break;
    }
    case ICPP_SREC_LSAMPLE: {
        /* Learn frames: frame 0 is the sample, entry SPs grow towards the root. */
        const icpp_learn_chain *l = &r->u.sample.l;
        FUZZ_CHECK(l->n <= ICPP_LEARN_MAX_FRAMES && (!l->n || (l->pc && l->entry_sp)), "learn chain of %u", l->n);
        FUZZ_CHECK(!l->n || l->pc[0] == r->u.sample.ip, "learn frame 0 is not the sample");
        for (uint32_t i = 1; i < l->n; i++)
            FUZZ_CHECK(l->entry_sp[i] > l->entry_sp[i - 1], "learn frame %u below its callee", i);
        break;
    }
    default:
        break;
    }
}

#endif
