/* order.h -- time order of records: entries by (time, sequence), released round by round. */
#ifndef ICPP_ORDER_H
#define ICPP_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Records from sources that are each in time order but not with each other
 * -- icpp-sample's per-CPU ring buffers, the per-CPU buffers perf record
 * writes into a perf.data -- are put in one time order here.  The caller
 * pushes an entry per record: its time and a sequence number that is unique
 * and grows in arrival order (a counter, a file offset).  Entries come out
 * by (time, seq): ties in arrival order, and since the key is unique the
 * order is total -- the same whatever the heap's shape or the spill.
 *
 * An entry is released (icpp_order_next) once its time is no later than a
 * limit the caller gives: `limit` below, which the rounds set, a better
 * bound the caller knows, or UINT64_MAX at the end.
 *
 * Rounds.  A round ends when every source has been read up to a point
 * (icpp-sample drained every ring; perf record wrote every CPU's buffer and
 * then PERF_RECORD_FINISHED_ROUND).  A record not read yet was written after
 * the previous round had been read, so it is no older than the newest
 * record pushed before that round ended: at each round end, `limit`
 * becomes that time (perf's tools/perf/util/ordered-events.c has the same
 * rule).
 *
 * Options (flags of icpp_order_init):
 * - ICPP_ORDER_PAYLOAD: each entry carries a caller's word (a pointer to
 *   the record's copy), held beside the 16-byte entry;
 * - ICPP_ORDER_SPILL: memory stays bounded.  When `window` entries wait at
 *   once, they are sorted and written as a run to an unlinked temporary file
 *   in $TMPDIR (default /tmp); the heap and the runs are merged at release,
 *   ORDER_RUN_BUF entries read ahead per run.  Memory: 16 bytes per entry of
 *   the window, 8 KiB per run.  Not with PAYLOAD. */

typedef struct icpp_order_ent {
    uint64_t time;              /* the record's time */
    uint64_t seq;               /* unique, in arrival order: ties go by it */
} icpp_order_ent;

enum { ICPP_ORDER_PAYLOAD = 1, ICPP_ORDER_SPILL = 2 };
#define ICPP_ORDER_WINDOW ((size_t)1 << 20)     /* default spill window: 1 Mi entries (16 MiB) */

typedef struct icpp_order_run icpp_order_run;

typedef struct icpp_order {
    icpp_order_ent *heap;       /* entries waiting in memory: a min-heap by (time, seq) */
    uint64_t       *pay;        /* PAYLOAD: pay[i] is heap[i]'s word; else NULL */
    size_t          n, cap;     /* entries in the heap; room */
    size_t          window;     /* SPILL: entries held before a spill; else SIZE_MAX */
    int             flags;
    uint64_t        newest;     /* the latest time pushed */
    uint64_t        round_newest; /* newest at the last round end */
    uint64_t        limit;      /* newest at the round end before: no later entry is older */
    icpp_order_run *runs;       /* SPILL: runs in the spill file with entries left */
    size_t          nruns;
    int             spill_fd;   /* -1 until the first spill */
    uint64_t        spill_len;  /* bytes written to it */
    size_t          held_max;   /* most entries in the heap at once */
    uint64_t        spilled;    /* entries written to the spill file */
} icpp_order;

/* An empty orderer with ICPP_ORDER_* flags (the window ICPP_ORDER_WINDOW). */
void icpp_order_init(icpp_order *o, int flags);
/* Free the orderer and its spill file; payloads still held are the
 * caller's (release them first with icpp_order_next(o, UINT64_MAX, ...)). */
void icpp_order_free(icpp_order *o);
/* The spill window, before the first entry: 0, or -EINVAL (0 records,
 * no SPILL option, entries pushed). */
int icpp_order_set_window(icpp_order *o, size_t records);
/* Add an entry (with its payload word if PAYLOAD).  0, or negative with
 * *err: "out of memory holding N records for time order", or the spill's
 * "cannot create a spill file in DIR: ...; set TMPDIR to a writable
 * directory", "writing the spill file (records out of time order): ...;
 * set TMPDIR to a directory with room", "out of memory". */
int icpp_order_push(icpp_order *o, uint64_t time, uint64_t seq, uint64_t payload, icpp_err *err);
/* A round ended (see above): `limit` moves on. */
void icpp_order_round(icpp_order *o);
/* The first entry by (time, seq), if its time is no later than limit:
 * 1, *e and (PAYLOAD, if payload) *payload, the entry removed; 0 if there
 * is none (or none that early); negative with *err if a run could not be
 * read back ("reading the spill file back: ...", "out of memory"). */
int icpp_order_next(icpp_order *o, uint64_t limit, icpp_order_ent *e, uint64_t *payload, icpp_err *err);

#endif
