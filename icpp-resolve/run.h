/* run.h -- icpp-resolve's resolve pipeline: a pass over a recording (replay opened, threads' own stacks told, thread bases inferred), each sample to a callback. */
#ifndef ICPP_RESOLVE_RUN_H
#define ICPP_RESOLVE_RUN_H

#include <stdint.h>

#include "basevote.h"
#include "cli.h"
#include "err.h"
#include "mapset.h"
#include "profile.h"
#include "replay.h"
#include "sampstat.h"

/* Every mode that reads samples -- the profile, --check, --trend, --script
 * -- makes its pass here, after mapset_prepare: run_open, run_each with
 * its own callback, run_close.  The callback sees each sample with its
 * thread base already inferred (where the recording has none, a
 * perf.data); it resolves the sample itself (mapset_resolve), as only it
 * knows which samples it judges.
 *
 * The passes differ today in a few ways none of them chose on purpose
 * (they were written separately); each flag keeps one such difference so
 * that every mode's output stays what it was.  The default (0) is the
 * profile's pass. */
enum {
    RUN_FRESH_MODULES = 1 << 0, /* icpp_replay_open, not mapset_replay_open: the modules are opened again
                                   rather than taken from mapset_prepare's passes (--trend) */
    RUN_LEARN_FRAMES  = 1 << 1, /* learn samples keep their frames (no ICPP_REPLAY_NO_FRAMES; --trend,
                                   --script) */
    RUN_NO_BASES      = 1 << 2, /* no thread-base vote: samples keep the recording's bases (--script) */
    RUN_QUIET_BASES   = 1 << 3, /* the base vote says nothing on stderr (--trend) */
};

typedef struct run {
    mapset            *ms;
    const char        *samples;     /* the recording's path */
    icpp_replay       *rp;          /* the pass's replay (owned) */
    icpp_basevote     *bv;          /* inferred thread bases (owned; NULL with RUN_NO_BASES) */
    icpp_cli_progress *prog;        /* set by the caller to show samples read and MiB on a terminal; NULL: none */
    uint64_t           nread;       /* samples handed to the callback so far */
} run;

/* Open a pass over `samples` (prepared in ms: mapset_prepare, or nothing
 * for --script without maps), tell it each thread's own stack
 * (mapset_apply_stacks) and infer thread bases (mapset_infer_bases, which
 * names each inferred base on stderr unless RUN_QUIET_BASES).  0, or -1
 * with *err: the replay's message, or "out of memory".  run_close after
 * either. */
int  run_open(run *r, mapset *ms, const char *samples, unsigned flags, icpp_err *err);

/* What run_each returns when the callback stopped it. */
enum { RUN_OK = 0, RUN_ERR_READ = -1, RUN_ERR_SAMPLE = -2 };

/* Called per sample, in the recording's order, its base inferred; 0 to go
 * on, negative to stop with *err set. */
typedef int (*run_sample_fn)(void *arg, run *r, icpp_rsample *s, icpp_err *err);

/* Every sample of the pass to fn.  RUN_OK at the end of the recording;
 * RUN_ERR_READ with the replay's message in *err; RUN_ERR_SAMPLE when fn
 * failed (its message in *err). */
int  run_each(run *r, run_sample_fn fn, void *arg, icpp_err *err);

/* The profile's pass (the profile and --trend): each sample resolved with
 * its binary's map (mapset_resolve) and added to prof (prof_add), and to
 * ss (NULL: no interval statistics).  As run_each; out of memory is
 * RUN_ERR_SAMPLE with "out of memory". */
int  run_profile(run *r, profile *prof, sampstat *ss, icpp_err *err);

void run_close(run *r);

#endif
