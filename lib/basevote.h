/* basevote.h -- thread bases inferred by voting from samples and training heights, for recordings without them. */
#ifndef ICPP_BASEVOTE_H
#define ICPP_BASEVOTE_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "pathmap.h"
#include "replay.h"

/* A perf.data has no startstack, and no thread-stack mappings unless perf
 * recorded data mappings (-d).  A sample's entry SP is still known (CFI), and
 * the path map knows the heights h its function was entered at in training;
 * so each sample votes for base = entry SP + h, once for every training
 * height of its function, and the true base collects the votes of every
 * sample whose context is in the map (docs/background.md section 3).  Candidates
 * must be aligned as bases are: 16 bytes for a main thread (startstack),
 * a page for other threads (the top of a mapping).
 *
 * Votes are kept per thread: (pid, tid, exec generation).  Stage 1 counts
 * the votes of each function's ICPP_BV_MAX_HEIGHTS most frequent heights and
 * nominates each thread's most voted bases; stage 2 gives each nominee its
 * support: the share of the voting samples whose (function, nominee - entry
 * SP) is a trained CID.  A thread's inference is accepted when the winner's
 * support is at least the minimum (ICPP_BV_MIN_SUPPORT by default) and
 * strictly above the runner-up's; the caller says out loud what was
 * inferred (icpp_basevote_describe).  docs/perfdata.md. */

#define ICPP_BV_MIN_SUPPORT (2.0 / 3)  /* default share of the voting samples the winner needs */
#define ICPP_BV_MAX_HEIGHTS 64      /* a function votes with its most frequent training heights */

typedef struct icpp_basevote icpp_basevote;

typedef struct icpp_bv_thread {
    uint32_t pid, tid, gen;     /* gen: the process's exec generation (icpp_rsample.exec_gen) */
    uint64_t samples;           /* samples offered (with an entry SP) */
    uint64_t voters;            /* of those: function in the map, so they voted */
    uint64_t base, votes;       /* the winner (0 if no votes) and its votes */
    uint64_t runner, runner_votes;  /* the runner-up (0 if none) */
    double   support;           /* votes / voters */
    double   runner_support;    /* runner_votes / voters */
    int      accepted;          /* support >= the minimum and votes > runner_votes */
    uint64_t recorded;          /* the base the recording gave (0 = none): to check the inference */
} icpp_bv_thread;

/* Voting on the heights of path map `pm` (which must outlive the vote). */
icpp_basevote *icpp_basevote_new(const icpp_pathmap *pm, icpp_err *err);
void           icpp_basevote_free(icpp_basevote *bv);

/* One sample of thread (pid, tid, gen) in path-map function `func` (-1: not
 * in the map: counted, no vote) entered at `entry_sp`.  `recorded`: the base
 * the recording gave, 0 if none.  0, or -ENOMEM. */
int icpp_basevote_add(icpp_basevote *bv, uint32_t pid, uint32_t tid, uint32_t gen, int64_t func, uint64_t entry_sp,
                      uint64_t recorded);

/* Count the votes (after the last add): fills the threads, sorted by pid,
 * tid, gen.  min_support: the share a winner needs (0: ICPP_BV_MIN_SUPPORT).
 * 0, or -ENOMEM. */
int icpp_basevote_tally(icpp_basevote *bv, double min_support, icpp_err *err);
size_t                icpp_basevote_nthreads(const icpp_basevote *bv);
const icpp_bv_thread *icpp_basevote_thread(const icpp_basevote *bv, size_t i);
const icpp_bv_thread *icpp_basevote_find(const icpp_basevote *bv, uint32_t pid, uint32_t tid, uint32_t gen);

/* One line for people: what was inferred for thread i, with its support and
 * the runner-up's, or why nothing was. */
void icpp_basevote_describe(const icpp_basevote *bv, size_t i, char *buf, size_t len);

/* ---- for icpp-resolve: two passes over a recording ---- */

enum {
    ICPP_BV_ANY_FILE = 1,   /* also vote on ICPP sample files (default: perf.data only; they have bases) */
    ICPP_BV_OVERRIDE = 2,   /* every sample votes, and inferred bases replace recorded ones (to test the
                               inference against a recording's true bases) */
};

/* Pass 1: replay `samples`, vote with every sample that has an entry SP but
 * no base (with ICPP_BV_OVERRIDE: every sample with an entry SP), tally.
 * min_support as for icpp_basevote_tally.  For an ICPP sample file without
 * ICPP_BV_ANY_FILE/OVERRIDE this reads nothing and returns an empty vote.
 * NULL and *err on failure. */
icpp_basevote *icpp_basevote_infer(const char *samples, const icpp_pathmap *pm, int flags, double min_support,
                                   icpp_err *err);

/* Pass 2, per replayed sample: give a sample without a base (with
 * ICPP_BV_OVERRIDE: any sample with an entry SP) its thread's accepted
 * inferred base -- base, base_kind ICPP_BASE_INFERRED, height and status.
 * Returns 1 if it did.  bv may be NULL. */
int icpp_basevote_apply(const icpp_basevote *bv, icpp_rsample *s);

#endif
