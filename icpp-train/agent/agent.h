/* agent.h -- icpp-train's in-process agent: patches function entries, records a calling-context tree per thread. */
#ifndef ICPP_AGENT_H
#define ICPP_AGENT_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"            /* lib/err.h: icpp_err */

/* Lifecycle (see BUILD.md for flags):
 *
 *   icpp_agent_init(&cfg, &err);                    once, in an LD_PRELOAD constructor
 *   icpp_agent_patch_module(name, funcs, n, 0, &st, &err);   per module, before main
 *       (or icpp_agent_patch_modules for a list; later, for a dlopen'd module)
 *   ... the program runs; every call of a patched function is recorded ...
 *   icpp_agent_enter_critical();                    writer code (may call libc)
 *   for (t = icpp_agent_thread_first(); t; t = icpp_agent_thread_next(t)) walk;
 *   icpp_agent_leave_critical();
 *
 * Definitions follow docs/definitions.md (evidence: docs/background.md section 1): entry SP = %rsp at the function's
 * first instruction; height = thread base - entry SP; a path is the patched
 * functions whose frames are live, root to leaf; call sites (return
 * addresses) are per-edge detail.  Exits are not instrumented: a frame is
 * dropped at the next entry whose SP is >= its entry SP, or whose return
 * address slot no longer holds the return address it was entered with. */

/* Exported from the agent's shared object (built -fvisibility=hidden). */
#define ICPP_AGENT_API __attribute__((visibility("default")))

/* Function indices are the caller's; these two are reserved. */
#define ICPP_AGENT_FUNC_ROOT     0xffffffffu   /* a thread's root node */
#define ICPP_AGENT_FUNC_OVERFLOW 0xfffffffeu   /* absorbs calls past the node cap */
#define ICPP_AGENT_FUNC_MAX      0xfffffff0u   /* indices must be below this */

/* ---- configuration and patching ---------------------------------------- */

typedef struct icpp_agent_config {
    uint32_t max_depth;       /* shadow-stack frames per thread; 0 = 1<<20 */
    uint64_t max_cct_bytes;   /* CCT memory per thread; 0 = 1 GiB */
    uint32_t prefault_bytes;  /* pre-faulted per thread (shadow stack and
                                 first CCT chunk, each); 0 = 64 KiB */
    int      live_signal;     /* signal used to evacuate threads during a
                                 live patch; 0 = SIGRTMAX - 2 */
    const char *live_dir;     /* non-NULL: each thread's tree lives in a file
                                 DIR/live.PID.TID.NS mapped MAP_SHARED, which
                                 survives a kill (live.h); NULL: anonymous
                                 memory.  Copied. */
} icpp_agent_config;

/* What was done to a function entry. */
typedef enum icpp_agent_how {
    ICPP_AGENT_HOW_NONE = 0,  /* left alone: never recorded */
    ICPP_AGENT_HOW_JMP,       /* jmp rel32 to a stub (fast path) */
    ICPP_AGENT_HOW_INT3,      /* int3 + SIGTRAP handler (~µs per call) */
} icpp_agent_how;

/* Why a function did not get the jmp (ICPP_AGENT_R_OK if it did). */
typedef enum icpp_agent_reason {
    ICPP_AGENT_R_OK = 0,
    ICPP_AGENT_R_TOO_SHORT,     /* size < 5 and too little nop/int3 padding after it, or the
                                   instruction at byte 4 runs past the end */
    ICPP_AGENT_R_NO_SIZE,       /* size 0 and no next function to bound it (or too short so) */
    ICPP_AGENT_R_BRANCH_IN,     /* a relative branch (in any listed function) targets bytes 1..4 */
    ICPP_AGENT_R_OVERLAP,       /* another listed function starts in bytes 1..4 */
    ICPP_AGENT_R_UNRELOCATABLE, /* an instruction in bytes 0..4 cannot be moved (see reloc.h) */
    ICPP_AGENT_R_DUPLICATE,     /* same start listed twice: the first one wins */
    ICPP_AGENT_R_NOT_EXEC,      /* start is not in an executable mapping */
    ICPP_AGENT_R_BAD_INDEX,     /* index >= ICPP_AGENT_FUNC_MAX */
    ICPP_AGENT_R_NO_STUB_MEM,   /* no memory within +-2 GiB for the stub */
    ICPP_AGENT_R_SELF,          /* in the agent's own code */
    ICPP_AGENT_R_COUNT
} icpp_agent_reason;

/* One function to patch.  addr/size/index are inputs; how/reason outputs. */
typedef struct icpp_agent_func {
    uint64_t addr;     /* runtime address of the first instruction */
    uint64_t size;     /* bytes (st_size); 0 = unknown: up to the next listed function */
    uint32_t index;    /* recorded in the CCT; < ICPP_AGENT_FUNC_MAX */
    uint8_t  how;      /* out: icpp_agent_how */
    uint8_t  reason;   /* out: icpp_agent_reason (why not JMP) */
    uint8_t  short_jmp; /* out: JMP as a 2-byte jmp to a 5-byte one in nearby padding */
    uint32_t calls;    /* out: INT3: direct calls (call/jmp/jcc rel32 in this module)
                          rewritten to enter its stub without the trap */
} icpp_agent_func;

/* Counts for one patch_module call (or summed over all of them). */
typedef struct icpp_agent_patch_stats {
    uint32_t nfuncs;                        /* functions listed */
    uint32_t how[3];                        /* by icpp_agent_how */
    uint32_t reason[ICPP_AGENT_R_COUNT];    /* by why-not-jmp; [0] = jmp */
    uint32_t jmp_padded;                    /* jmp: shorter than 5 bytes, completed by the
                                               alignment padding that follows it */
    uint32_t jmp_size_inferred;             /* jmp: size 0, taken up to the next function */
    uint32_t jmp_short;                     /* jmp: a 2-byte jmp to a 5-byte one in dead
                                               padding nearby (bytes 2..4 could not be
                                               overwritten) */
    uint32_t int3_calls;                    /* int3: functions whose direct calls were
                                               rewritten to their stub (only pointers,
                                               rel8 branches and other modules trap) */
    uint32_t calls_redirected;              /* those direct calls (branch instructions) */
    uint64_t calls_trapped;                 /* live: of those, executions taken by the SIGTRAP
                                               handler while their rel32 was written */
    uint32_t live;                          /* 1 if the int3-bracketed live protocol was used */
    int32_t  evac_unacked;                  /* live: threads that did not answer the
                                               evacuation signal (<0: -errno, not done) */
    uint32_t evac_moved;                    /* live: threads moved out of patched bytes */
    uint64_t stub_bytes;                    /* stub memory used */
} icpp_agent_patch_stats;

enum {
    /* Other threads may be running: write int3 at every entry, serialize
     * all cores, signal every other thread to move it out of bytes 1..4
     * (evacuation), write bytes 1..4, serialize, write the E9, serialize
     * (see patch.c).  Chosen automatically when /proc/self/task has more
     * than one entry. */
    ICPP_AGENT_PATCH_LIVE = 1u << 0,
    /* Never use the int3 fallback (refused functions stay unpatched). */
    ICPP_AGENT_PATCH_NO_INT3 = 1u << 1,
    /* Decide and count only; write nothing. */
    ICPP_AGENT_PATCH_DRY_RUN = 1u << 2,
    /* LIVE without the evacuation signal (for programs that cannot take an
     * EINTR): a thread preempted inside bytes 1..4 would then crash. */
    ICPP_AGENT_PATCH_NO_EVACUATE = 1u << 3,
};

/* Set up the agent: config (NULL = defaults), startstack, fork handler.
 * Call once before any patch_module; the calling thread's base is found at
 * its first recorded entry.  Returns 0 or -errno with *err filled. */
ICPP_AGENT_API int icpp_agent_init(const icpp_agent_config *cfg, icpp_err *err);

/* Patch the entries of one module's functions (any order; duplicates are
 * refused).  `name` is used in messages only.  Fills funcs[i].how/.reason,
 * adds to *stats if non-NULL.  Stubs are placed within +-2 GiB of the
 * module.  Safe to call later for a dlopen'd module (pass LIVE if other
 * threads may run; it is forced when more than one thread exists).
 * Returns 0 (even if some functions were refused) or -errno on a failure
 * that left the module unpatched (e.g. no stub memory, mprotect refused). */
ICPP_AGENT_API int icpp_agent_patch_module(const char *name, icpp_agent_func *funcs, size_t nfuncs,
                            unsigned flags, icpp_agent_patch_stats *stats, icpp_err *err);

/* One module for icpp_agent_patch_modules. */
typedef struct icpp_agent_module {
    const char      *name;       /* for messages */
    icpp_agent_func *funcs;
    size_t           nfuncs;
} icpp_agent_module;

/* patch_module for each module in turn; stops at the first failure
 * (returns its -errno; earlier modules stay patched). */
ICPP_AGENT_API int icpp_agent_patch_modules(const icpp_agent_module *mods, size_t nmods,
                                            unsigned flags, icpp_agent_patch_stats *stats,
                                            icpp_err *err);

/* Sum of every patch_module call so far. */
ICPP_AGENT_API void icpp_agent_patch_totals(icpp_agent_patch_stats *out);

/* Calls fn for every int3-hooked function (any module) with the number of
 * entries that went through its trap in this process (a fork child counts
 * from zero).  Direct calls rewritten to the stub are not among them. */
ICPP_AGENT_API void icpp_agent_int3_each(void (*fn)(uint32_t index, uint64_t traps, void *arg), void *arg);

ICPP_AGENT_API const char *icpp_agent_reason_name(int reason);   /* "too_short", ... */
ICPP_AGENT_API const char *icpp_agent_how_name(int how);         /* "none", "jmp", "int3" */

/* ---- reentrancy ---------------------------------------------------------- */

/* While a thread is inside a critical section, its calls of patched
 * functions are not recorded (the recorder returns at once).  Nests.  Use it
 * around agent code that calls libc when libc may be patched.  Safe before
 * init and in signal handlers. */
ICPP_AGENT_API void icpp_agent_enter_critical(void);
ICPP_AGENT_API void icpp_agent_leave_critical(void);

/* ---- walking the trees ---------------------------------------------------- */

typedef struct icpp_agent_thread icpp_agent_thread;   /* one per thread ever seen */
typedef struct icpp_agent_node   icpp_agent_node;     /* a CCT node */

typedef struct icpp_agent_pair {
    uint64_t key;      /* height (bytes, as int64_t) or return address */
    uint64_t count;
} icpp_agent_pair;

typedef enum icpp_agent_base_kind {
    ICPP_AGENT_BASE_NONE = 0,        /* not found: heights are base 0 - SP */
    ICPP_AGENT_BASE_STARTSTACK = 1,  /* main thread */
    ICPP_AGENT_BASE_MAPTOP = 2,      /* top of the mapping holding the SP */
} icpp_agent_base_kind;

typedef struct icpp_agent_thread_info {
    int      tid;             /* kernel thread id at the first entry */
    int      pid;             /* process that recorded it (see fork below) */
    int      inherited;       /* 1: copied from the parent at fork, not run here */
    int      base_kind;       /* icpp_agent_base_kind */
    uint64_t base;            /* thread base */
    uint64_t entries;         /* entries recorded */
    uint64_t entries_slow;    /* of which the C recorder handled (not in the hit cache) */
    uint64_t nodes;           /* CCT nodes */
    uint64_t cct_bytes;       /* CCT memory in use */
    uint32_t max_depth_seen;  /* deepest shadow stack */
    uint64_t dropped_critical;  /* entries inside icpp_agent_enter/leave_critical */
    uint64_t dropped_reentrant; /* entries while the recorder ran (signal handler) */
    uint64_t dropped_depth;   /* entries past max_depth (not recorded) */
    uint64_t dropped_foreign; /* entries on another stack than the thread's own (not recorded) */
    uint64_t node_overflow;   /* entries folded into the OVERFLOW node */
    uint64_t lost_paths;      /* of those, distinct paths that left the recorded tree
                                 (a call from a recorded node that found no memory) */
    int      lost_paths_more; /* more than lost_paths (their set, 65536, filled) */
    uint64_t pair_overflow;   /* height/site pairs that found no memory */
    const char *live_file;    /* the tree's live file; "" if in anonymous memory */
} icpp_agent_thread_info;

/* Threads, most recent first.  The list only grows; a thread's tree stays
 * after it exits.  Walking while threads still run is safe (nodes are
 * published complete) but counts may be a moment old. */
ICPP_AGENT_API const icpp_agent_thread *icpp_agent_thread_first(void);
ICPP_AGENT_API const icpp_agent_thread *icpp_agent_thread_next(const icpp_agent_thread *t);
ICPP_AGENT_API void icpp_agent_thread_get_info(const icpp_agent_thread *t, icpp_agent_thread_info *out);
ICPP_AGENT_API const icpp_agent_node *icpp_agent_thread_root(const icpp_agent_thread *t);
/* The calling thread's record (NULL before its first entry). */
ICPP_AGENT_API const icpp_agent_thread *icpp_agent_thread_self(void);

ICPP_AGENT_API uint32_t icpp_agent_node_func(const icpp_agent_node *n);     /* index or FUNC_ROOT/OVERFLOW */
ICPP_AGENT_API uint64_t icpp_agent_node_count(const icpp_agent_node *n);    /* entries into this path */
ICPP_AGENT_API const icpp_agent_node *icpp_agent_node_parent(const icpp_agent_node *n);
ICPP_AGENT_API const icpp_agent_node *icpp_agent_node_first_child(const icpp_agent_node *n);
ICPP_AGENT_API const icpp_agent_node *icpp_agent_node_next_sibling(const icpp_agent_node *n);
/* Copy up to max (height, count) pairs into out; return how many distinct
 * heights exist.  *overflow (if non-NULL) = entries whose height found no room. */
ICPP_AGENT_API size_t icpp_agent_node_heights(const icpp_agent_node *n, icpp_agent_pair *out, size_t max,
                               uint64_t *overflow);
/* Same for call sites: key = runtime return address. */
ICPP_AGENT_API size_t icpp_agent_node_sites(const icpp_agent_node *n, icpp_agent_pair *out, size_t max,
                             uint64_t *overflow);

/* The hooked functions' runtime ranges, sorted by lo, non-overlapping; the
 * array must stay valid until replaced.  Entries whose return address lies
 * in a hooked function other than the top frame's drop the returned frames
 * above the caller's. */
typedef struct icpp_agent_frange {
    uint64_t lo, hi;
    uint32_t index;
    uint32_t pad;
} icpp_agent_frange;
ICPP_AGENT_API void icpp_agent_set_ranges(const icpp_agent_frange *v, size_t n);

/* Declare [lo, hi) (runtime) signal-return trampoline code: functions whose
 * return address lies there are signal handlers, and frames entered below
 * the interrupted SP are dropped when they are entered. */
ICPP_AGENT_API void icpp_agent_add_sigreturn(uint64_t lo, uint64_t hi);

/* The value live files created from now on record as their function
 * table's tag (live.h: syms.PID.TAG).  Async-signal-safe. */
ICPP_AGENT_API void icpp_agent_set_live_tag(uint64_t syms_ns);

/* ---- fork ------------------------------------------------------------------ */

/* In a forked child the trees are the parent's copies (with live files:
 * the parent's, still shared): all other threads' records are marked
 * inherited and never written again; the forking thread's record starts a
 * new tree (a new live file) holding only the path on its shadow stack,
 * with zero counts, so that the child's record holds only what the child
 * ran.  No entry is recorded between fork's prepare handlers and this.  A
 * callback may be set to run in the child, before the new tree is made
 * (e.g. to open a new output file, set the live tag); it runs in the
 * pthread_atfork child handler, so only async-signal-safe work. */
ICPP_AGENT_API void icpp_agent_set_fork_child_hook(void (*fn)(void));

/* Zero every count of a thread's tree, keeping its structure (the paths on
 * its shadow stack stay valid).  Only for a thread whose tree this process
 * owns (not an inherited one: its live file is the parent's).
 * Async-signal-safe (memory writes only). */
ICPP_AGENT_API void icpp_agent_thread_reset_counts(const icpp_agent_thread *t);

#endif
