/* perfrec.h -- perf_event record bodies: the sample and sample_id layouts one attr implies. */
#ifndef ICPP_PERFREC_H
#define ICPP_PERFREC_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

/* A PERF_RECORD_SAMPLE body is the concatenation of the fields its
 * event's sample_type selects, in the kernel's order
 * (include/uapi/linux/perf_event.h); a non-sample record of an event with
 * sample_id_all ends with a sample_id trailer of the TID, TIME, ID,
 * STREAM_ID, CPU and IDENTIFIER fields it selects.  This module is the one
 * place that knows those layouts: icpp-sample reads its ring buffers with
 * it, lib/perfdata.c perf.data files, for both the record bodies and the
 * times records are ordered by.
 *
 * Every byte is untrusted: a body is the n bytes after the 8-byte record
 * header, every length and count in it is checked against n, and values
 * are read byte by byte (bodies need no alignment).  Nothing is allocated;
 * pointers in a parsed sample point into the body. */

/* The sample_type bits of the sample_id trailer's fields. */
#define ICPP_PERFREC_TRAILER_BITS (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | \
                                   PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)

/* What a sample's layout depends on: fields of its perf_event_attr. */
typedef struct icpp_perfrec_layout {
    uint64_t sample_type;       /* PERF_SAMPLE_* */
    uint64_t read_format;       /* PERF_FORMAT_*: the size of a READ field */
    uint64_t branch_type;       /* PERF_SAMPLE_BRANCH_*: HW_INDEX and COUNTERS change the branch stack */
    uint64_t regs_user;         /* sample_regs_user: one u64 per bit, in bit order */
    uint64_t regs_intr;         /* sample_regs_intr */
    int      id_all;            /* sample_id_all: non-sample records carry the trailer */
} icpp_perfrec_layout;

/* The fields of one sample, up to and including REGS_INTR (the fields after
 * it -- PHYS_ADDR, AUX, CGROUP, page sizes -- are not read: no reader needs
 * them, and a record cut short there is not an error). */
typedef struct icpp_perfrec_sample {
    uint64_t       have;        /* PERF_SAMPLE_* bits of the fields read (REGS_USER/INTR: their ABI word) */
    uint64_t       id;          /* IDENTIFIER, else ID */
    uint64_t       ip, time, addr, stream_id, period;
    uint32_t       pid, tid, cpu;
    const uint8_t *chain;       /* CALLCHAIN: nchain u64 entries, context markers included */
    size_t         nchain;
    uint64_t       uabi, iabi;  /* register ABIs (PERF_SAMPLE_REGS_ABI_NONE: no values) */
    const uint8_t *uregs;       /* the values of the layout's regs_user, if uabi; else NULL */
    const uint8_t *iregs;       /* the values of regs_intr, if iabi; else NULL */
    const uint8_t *stack;       /* STACK_USER: the bytes copied */
    size_t         stack_size;  /* of them valid: the dynamic size, if smaller than the copy */
} icpp_perfrec_sample;

/* The layout of a perf_event_attr as this machine's kernel writes it. */
void icpp_perfrec_layout_of(const struct perf_event_attr *a, icpp_perfrec_layout *l);

/* Parse sample body p[0..n) by layout l into *s (zeroed first).  0, or -1
 * if the body is shorter than its layout; then s->have says which fields
 * came before the one cut short (their values are set). */
int icpp_perfrec_sample_parse(const icpp_perfrec_layout *l, const uint8_t *p, size_t n, icpp_perfrec_sample *s);

/* The event id of a sample body, which every layout of the events sharing
 * a stream must place alike (IDENTIFIER first, or ID at the same
 * position): 1 and *id, 0 if l has neither field, -1 if the body is too
 * short to hold it. */
int icpp_perfrec_sample_id(const icpp_perfrec_layout *l, const uint8_t *p, size_t n, uint64_t *id);

/* A record's time: a sample's TIME field, else the sample_id trailer's
 * (l may be NULL when the trailer's layout is unknown), else the time
 * FORK and EXIT bodies hold.  1 and *t, or 0 if it has none. */
int icpp_perfrec_time(const icpp_perfrec_layout *l, uint32_t type, const uint8_t *p, size_t n, uint64_t *t);

/* The trailing identifier of a non-sample record (the last u64 of its
 * body): 1 and *id, or 0 if the body is shorter. */
int icpp_perfrec_trailer_id(const uint8_t *p, size_t n, uint64_t *id);

/* Register `reg` (a PERF_REG_X86_* bit) of a register set of `mask` whose
 * values are at regs: 1 and *v, or 0 if the set lacks it or regs is NULL. */
int icpp_perfrec_reg(const uint8_t *regs, uint64_t mask, int reg, uint64_t *v);

/* Copy a sample's callchain entries, context markers left out, to out (at
 * most max): every context's, or with user_only those after
 * PERF_CONTEXT_USER (the chain starts in user context).  Returns how many. */
size_t icpp_perfrec_chain(const icpp_perfrec_sample *s, int user_only, uint64_t *out, size_t max);

/* A u64 of a body, little-endian (x86), unaligned. */
uint64_t icpp_perfrec_u64(const uint8_t *p);

#endif
