/* replay.h -- replays a sample file: per-process mappings, modules, CFI tables and thread bases for each sample. */
/* The file may also be a perf.data (lib/perfdata.h), told by its magic. */
#ifndef ICPP_REPLAY_H
#define ICPP_REPLAY_H

#include <stdint.h>

#include "cfi.h"
#include "defs.h"
#include "err.h"
#include "module.h"
#include "samples.h"

typedef enum icpp_rs_status {
    ICPP_RS_OK = 0,         /* function, entry SP, base and height known */
    ICPP_RS_NOMAP,          /* IP in no file mapping of the process (JIT, unknown) */
    ICPP_RS_NOFILE,         /* the file cannot be opened, or is not ELF */
    ICPP_RS_CHANGED,        /* the file's build-id differs from the recording's */
    ICPP_RS_VDSO,           /* [vdso] and other kernel-provided code */
    ICPP_RS_NOFUNC,         /* no function at that address */
    ICPP_RS_NOFDE,          /* no CFI for the PC */
    ICPP_RS_NOTPASSIVE,     /* CFI needs memory or a register not sampled */
    ICPP_RS_NOBASE,         /* thread base unknown */
    ICPP_RS_FOREIGN,        /* SP not on the thread's own stack (sigaltstack, coroutine): no height */
    ICPP_RS_NOPATHMAP,      /* set by icpp-resolve: no path map for the process's executable */
    ICPP_RS_MAX
} icpp_rs_status;

const char *icpp_rs_status_name(int status);

/* A module as the replay knows it. */
typedef struct icpp_rmodule {
    char          *path;
    icpp_build_id  build_id;    /* from the recording (or the file if it had none) */
    icpp_module   *mod;         /* NULL if unreadable or changed */
    icpp_cfi      *cfi;         /* built on first use */
    int            status;      /* ICPP_RS_OK, NOFILE or CHANGED */
    const icpp_func *last;      /* the last sample's function, for addresses in [last_lo, last_hi) */
    uint64_t       last_lo, last_hi;
} icpp_rmodule;

typedef struct icpp_rsample {
    uint32_t pid, tid, event;
    uint32_t exec_gen;          /* execs of the process before the sample: another value, another image */
    int32_t  exe_module;        /* the process's main executable (index into modules), -1 if unknown */
    uint64_t time, ip, sp, bp;
    int      status;            /* icpp_rs_status */
    int32_t  module;            /* index into the replay's modules, -1 if none */
    uint64_t addr;              /* link-time IP in that module */
    const icpp_func *func;      /* function holding addr (NULL if none) */
    uint64_t entry_sp;          /* CFA - 8 */
    uint64_t base;
    int      base_kind;         /* icpp_base_kind */
    int64_t  height;
    icpp_sample_extra x;        /* --validate recordings: callchain, registers, stack (else zero) */
    icpp_learn_chain  l;        /* learn samples: the frames the sampler unwound (else zero) */
    int               learn;    /* a learn sample: a profile sample of `event` that also carries its
                                   frames; accuracy checks must not judge it */
} icpp_rsample;

typedef struct icpp_replay icpp_replay;

/* Open an ICPP sample file or a perf.data (by its first bytes). */
icpp_replay *icpp_replay_open(const char *path, icpp_err *err);
/* A replay without a file, kept up to date by icpp_replay_feed: the
 * sampler mirrors what it writes into one, to unwind learn samples with
 * the recording's own mappings and modules. */
icpp_replay *icpp_replay_live(void);
/* Apply one record (PROC, MMAP, EVENT, INFO, LOST; others are ignored). */
int icpp_replay_feed(icpp_replay *rp, const icpp_srec *r, icpp_err *err);
/* Which samples icpp_replay_next returns, and how far it resolves them: a
 * pass that needs only some need not pay for the rest.  Skipped samples are
 * still counted in info.samples (and learn samples in info.learn_samples).
 * The default, ICPP_REPLAY_ALL, returns every sample fully resolved; the
 * flags combine. */
enum {
    ICPP_REPLAY_ALL           = 0,
    ICPP_REPLAY_LEARN_ONLY    = 1 << 0, /* learn samples only */
    ICPP_REPLAY_OTHER_THREADS = 1 << 1, /* samples of threads other than their process's main thread */
    ICPP_REPLAY_PROCESS_ONLY  = 1 << 2, /* only pid, tid, event, time, ip, sp, bp, learn, exec_gen,
                                           exe_module, base, base_kind and (learn samples) the frames are
                                           filled; status is ICPP_RS_OK, module -1, func NULL (no module,
                                           function or CFI lookup: what learning and the executables
                                           sampled need) */
    ICPP_REPLAY_NO_FRAMES     = 1 << 3, /* learn samples without their frames (l.n = 0): they are
                                           resolved as profile samples only.  Takes effect only
                                           before the first sample is read. */
};
void icpp_replay_select(icpp_replay *rp, unsigned what);
/* The CFA table of replay module i, built on first use; NULL if none. */
const icpp_cfi *icpp_replay_cfi(icpp_replay *rp, uint32_t i);
/* The replay module of the recording's (first process's) executable, if it
 * was mapped; NULL if not. */
const icpp_rmodule *icpp_replay_exe_module(const icpp_replay *rp);

/* lib/stackwalk.h's lookup over a replay's mappings: ctx is an
 * icpp_replay_at naming the process. */
typedef struct icpp_replay_at {
    icpp_replay *rp;
    uint32_t     pid;
} icpp_replay_at;
const icpp_cfi *icpp_replay_sw_lookup(void *ctx, uint64_t addr, uint64_t *link_addr);
void         icpp_replay_close(icpp_replay *rp);
/* Move src's modules -- files opened, function and CFI tables built -- to
 * dst, which has none yet: another pass over the same recording then opens
 * and builds none of them again (a module is matched by path and build-id,
 * as always).  0, or -1 (nothing moved) if dst has modules already. */
int          icpp_replay_take_modules(icpp_replay *dst, icpp_replay *src);
/* Next sample: 1, 0 at the end, negative for a corrupt file.  Pointers in
 * *out stay valid until the next call. */
int icpp_replay_next(icpp_replay *rp, icpp_rsample *out, icpp_err *err);

/* What the file said, valid after the end (and growing during). */
typedef struct icpp_replay_info {
    uint64_t lost;              /* samples the kernel dropped */
    uint64_t samples;           /* samples read */
    size_t   truncated;         /* bytes of an incomplete tail (sampler killed) */
    int      clean_end;
    uint32_t nevents;           /* profile events (ids 0..nevents-1) */
    char     event_names[8][128];
    uint64_t learn_samples;     /* of `samples`, learn samples (icpp-sample --learn) */
    char     command[1024];
    char     exe[1024];         /* the first process's executable */
    /* What does not add up (sample files; docs/samples-format.md, "What a
     * reader checks"): */
    int      lost_saturated;    /* the LOST records add up past 2^64 - 1: lost is that bound */
    uint64_t end_samples;       /* the END record's count (when clean_end) */
    uint64_t before_end;        /* sample records before it */
    uint64_t after_end;         /* sample records after it: left out */
    uint64_t after_exit;        /* samples of a thread after its EXIT record: left out */
    uint64_t unknown_event;     /* samples of an event id no EVENT record declared: left out */
    uint32_t first_unknown;     /* the first such id */
} icpp_replay_info;
const icpp_replay_info *icpp_replay_info_get(const icpp_replay *rp);
size_t              icpp_replay_nmodules(const icpp_replay *rp);
/* How far icpp_replay_next has read: *done bytes of the file's *len. */
void                icpp_replay_position(const icpp_replay *rp, size_t *done, size_t *len);
/* Module and link-time address of runtime address `addr` in process pid,
 * as the mappings stand now; -1 if no readable module holds it. */
int icpp_replay_locate(const icpp_replay *rp, uint32_t pid, uint64_t addr, int32_t *module, uint64_t *link_addr);
const icpp_rmodule *icpp_replay_module(const icpp_replay *rp, uint32_t i);
/* The module of the file mapping holding `addr` in process pid, whatever
 * its status (a file changed since the recording too); -1 if none. */
int32_t icpp_replay_module_at(const icpp_replay *rp, uint32_t pid, uint64_t addr);
/* Which stack is thread (pid, tid)'s own (docs/definitions.md): the one
 * whose mapping ends at `top`.  Without this, a thread other than the main
 * one takes the mapping of its first sample -- wrong when that sample was on
 * a coroutine's stack.  Call before replaying; applies until the thread's
 * EXIT record.  0, or -ENOMEM. */
int icpp_replay_set_own_stack(icpp_replay *rp, uint32_t pid, uint32_t tid, uint64_t top);

#endif
