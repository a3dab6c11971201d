/* learn.h -- learned contexts: the frames of `icpp-sample --learn` samples become paths of the path map. */
#ifndef ICPP_LEARN_H
#define ICPP_LEARN_H

#include <stdint.h>

#include "err.h"
#include "pathmap.h"
#include "replay.h"

/* A learn sample carries the frames the sampler unwound (lib/stackwalk.h):
 * every frame's pc and entry SP.  With the sample's thread base that is a
 * call path with the height of every function on it -- exactly what
 * training records (docs/definitions.md), in the map's representation:
 *   - function = (module build-id, start of the function holding the pc;
 *     a return address is looked up at ra - 1; a foo.cold part is foo);
 *   - frames in modules the map did not train are left out, as training
 *     never saw them (docs/train.md); a map without functions (no map at
 *     all) takes every module;
 *   - tail calls need nothing: the caller's frame is gone in both;
 *   - a walk that reached the root adds the whole path from the root; one
 *     that stopped early (stack copy too short, a signal frame, a PLT stub)
 *     is joined at its outermost frame whose (function, height) the map
 *     knows as exactly one path -- else it is not learned;
 *   - the outermost frame of a rooted walk (_start, a thread's clone) has
 *     no caller to measure its entry SP against: it names the root but adds
 *     no height.
 * Each context on the path gets one learn count (icpp_pathmap_add_learned);
 * the training counts are left alone, so a resolver can tell them apart. */

typedef struct icpp_learn_stats {
    uint64_t samples;           /* learn samples read */
    uint64_t learned;           /* turned into a path */
    uint64_t anchored;          /* of those, joined at a known context (walk not rooted) */
    uint64_t not_rooted;        /* walk ended early with no known context to join */
    uint64_t no_base;           /* thread base unknown */
    uint64_t unreadable;        /* a frame in a module that cannot be read or changed since */
    uint64_t untrained_only;    /* no frame in a trained module */
    uint64_t foreign;           /* of another program than the map's (refused) */
    uint64_t new_paths;         /* nodes the map did not have */
    uint64_t new_contexts;      /* (node, height) pairs the map did not have */
} icpp_learn_stats;

/* The recording's run does what training did not: its learned paths
 * brought at least ICPP_LEARN_NEW_SHARE new contexts (ones the map did not
 * have) per learned path.  Recorded on the input training ran, no bench
 * recording brought any (0 in 128-568 learned paths each); recorded on
 * other inputs, 0.004 (bzip2) to 6.4 (tcc) per learned path.  Where this
 * holds, training's own counts stop describing the run, and icpp-resolve
 * weighs candidates by this recording's evidence (icpp_cidx_set_evidence). */
#define ICPP_LEARN_NEW_SHARE 0.01
static inline int icpp_learn_run_is_new(const icpp_learn_stats *st)
{
    return st->learned && (double)st->new_contexts >= ICPP_LEARN_NEW_SHARE * (double)st->learned;
}

/* Learn from every learn sample of `samples` into pm.  Refuses, counting
 * them as foreign, learn samples of a recording whose executable is not the
 * map's main module (by build-id).  Returns 0, or negative for an unreadable
 * file or out of memory (err says which). */
int icpp_learn_file(const char *samples, icpp_pathmap *pm, icpp_learn_stats *st, icpp_err *err);

/* The same, and *novel (malloc'd, one byte per function of the map as it
 * is afterwards, *nnovel of them): 1 for a function of which learning found
 * a context -- a (path, height) -- the map did not have: this run does with
 * that function what training never saw.  NULL novel: not wanted.  And
 * *trail, the recording's learn trail (below; NULL: not wanted). */
typedef struct icpp_learn_trail icpp_learn_trail;
int icpp_learn_file_novel(const char *samples, icpp_pathmap *pm, icpp_learn_stats *st, uint8_t **novel,
                          size_t *nnovel, icpp_learn_trail **trail, icpp_err *err);

/* The learn samples of a recording in time order per thread, each with the
 * contexts -- (node, height) pairs -- its path gave a learn count: which
 * contexts the thread was seen in just before and just after a moment.  A
 * profile sample whose candidate a neighbouring learn sample passed through
 * was, most likely, in the same activation of that path (docs/resolve.md,
 * "Never precise and wrong").  Made by icpp_learner_end. */
/* Did the last learn sample of thread (pid, tid) at or before `time` (bit
 * 0 of the result), and the first after it (bit 1), pass through node at
 * height? */
int  icpp_learn_trail_confirms(const icpp_learn_trail *t, uint32_t pid, uint32_t tid, uint64_t time, uint32_t node,
                               int64_t height);
/* Learn samples held: those learned through the memo (others confirm
 * nothing), up to ICPP_TRAIL_MAX (16 bytes each); from the first that did
 * not fit on, nothing is confirmed (a long recording's later samples are
 * judged without neighbours: less often precise, never more often wrong). */
#define ICPP_TRAIL_MAX (1u << 21)
size_t icpp_learn_trail_len(const icpp_learn_trail *t);
/* Did a learn sample of process image (pid, exec generation) pass through
 * node, at any height?  1 or 0; -1 where the recording's learn samples are
 * of one process image only (or t is NULL): then the map's learn counts say
 * the same.  Another process's learn samples show where *it* went: a forked
 * child in one of two twin contexts says nothing of which one its parent
 * or an exec'd image took (docs/resolve.md, "The recording's evidence"). */
int icpp_learn_trail_process_saw(const icpp_learn_trail *t, uint32_t pid, uint32_t gen, uint32_t node);
/* The share of the learned learn samples whose path (with its heights) no
 * other learn sample took: Good-Turing's estimate of the chance that the
 * next sample's path is one learning never saw.  0.05-0.28 on the bench's
 * recordings but one, 0.98 on a deeply recursive one (docs/resolve.md). */
double icpp_learn_trail_missing(const icpp_learn_trail *t);
/* A *sparse* recording: its missing mass is at least ICPP_LEARN_SPARSE --
 * learning saw little of what the run did (0 for no trail). */
#define ICPP_LEARN_SPARSE 0.5
int icpp_learn_trail_sparse(const icpp_learn_trail *t);
void icpp_learn_trail_free(icpp_learn_trail *t);

/* The same, a sample at a time, for a reader that makes one pass over the
 * recording for several purposes: icpp_learner_add every sample of one
 * replay (profile samples are passed over), then icpp_learner_end.  The
 * learner changes pm as it goes; pm must outlive it. */
typedef struct icpp_learner icpp_learner;
/* A learner into pm; NULL if out of memory. */
icpp_learner *icpp_learner_new(icpp_pathmap *pm);
/* Learn s if it is a learn sample.  0, or -ENOMEM. */
int  icpp_learner_add(icpp_learner *lr, const icpp_replay *rp, const icpp_rsample *s);
/* Finish: what was learned, *novel as icpp_learn_file_novel (novel may
 * be NULL) and *trail, the learn samples' trail (trail may be NULL; the
 * caller frees it); frees lr, also on failure.  0, or -ENOMEM. */
int  icpp_learner_end(icpp_learner *lr, icpp_learn_stats *st, uint8_t **novel, size_t *nnovel,
                      icpp_learn_trail **trail);
/* Free without finishing (after an error). */
void icpp_learner_free(icpp_learner *lr);

#endif
