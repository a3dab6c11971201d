/* internal.h -- agent internals shared by the recorder, the trap handler and the patcher. */
#ifndef ICPP_AGENT_INTERNAL_H
#define ICPP_AGENT_INTERNAL_H

#include <stdint.h>
#include <stddef.h>

#include "agent.h"
#include "asm_offsets.h"
#include "live.h"

#define ICPP_AGENT_HIDDEN __attribute__((visibility("hidden")))

/* ---- CCT ---------------------------------------------------------------- */

#define ICPP_AGENT_INLINE_PAIRS 1   /* pairs held in the node itself */
#define ICPP_AGENT_EXT_PAIRS    7   /* pairs per extension block (128 bytes) */

typedef struct icpp_agent_pairext {
    struct icpp_agent_pairext *next;            /* older block */
    uint64_t                   pad;
    icpp_agent_pair            p[ICPP_AGENT_EXT_PAIRS];
} icpp_agent_pairext;

/* A small set of (key, count); count 0 marks a free slot.  Inline slots
 * first, then a chain of blocks from the thread's arena. */
typedef struct icpp_agent_pairset {
    icpp_agent_pair     in[ICPP_AGENT_INLINE_PAIRS];
    icpp_agent_pairext *ext;                     /* newest block first */
    uint64_t            overflow;                /* adds that found no memory */
} icpp_agent_pairset;

/* A call recorded before, cached in its caller's node: the key is what
 * the recorder's result depends on besides the caller node; the value is
 * the child and where the counts it incremented live.  The trampoline's
 * fast path commits a hit without the C recorder (tramp.S). */
typedef struct icpp_agent_hit {
    uint64_t                 ra;      /* key: return address (0: empty) */
    uint64_t                 key;     /* key: (uint32_t)height << 32 | function index */
    struct icpp_agent_node  *child;
    uint64_t                *hcount;  /* child's count for this height */
    uint64_t                *scount;  /* child's count for this call site */
} icpp_agent_hit;

/* The thread's table behind the nodes' slots (a node calling more than a
 * few places often: an interpreter's loop), keyed by the node too. */
typedef struct icpp_agent_hit2 {
    struct icpp_agent_node *parent;
    icpp_agent_hit          hit;
    uint64_t                pad[2];
} icpp_agent_hit2;

#define ICPP_AGENT_HIT2_MIN_BITS 12   /* 4096 slots (256 KiB) at the start */
#define ICPP_AGENT_HIT2_MAX_BITS 16   /* 4 MiB: doubled while misses are of known calls */

#define ICPP_AGENT_NODE_HITS 8         /* each call has two slots to be in: hit_put */

/* 64-byte aligned; what an entry increments (count, the first height's
 * and the first call site's counts) shares the first cache line. */
struct icpp_agent_node {
    uint32_t           func;          /* function index */
    uint32_t           pad;
    uint64_t           count;         /* entries */
    icpp_agent_pairset heights;       /* key: height as uint64 */
    icpp_agent_pairset sites;         /* key: return address */
    icpp_agent_node   *parent;
    icpp_agent_node   *first_child;   /* newest child first (published last) */
    icpp_agent_node   *next_sibling;
    icpp_agent_node   *last_hit;      /* child found by the last lookup (cache) */
    icpp_agent_hit     hits[ICPP_AGENT_NODE_HITS];   /* calls made from this node */
};

/* One shadow-stack frame: a live (as far as we know) activation. */
typedef struct icpp_agent_frame {
    uint64_t         sp;     /* entry SP */
    uint64_t         ra;     /* return address found at *sp on entry */
    icpp_agent_node *node;
} icpp_agent_frame;

/* Bump allocator over mmap'd chunks: anonymous, or (live != 0) chunks of
 * the thread's live file, mapped MAP_SHARED so that they outlive a kill
 * (live.h). */
typedef struct icpp_agent_arena {
    char    *cur, *end;      /* free part of the current chunk */
    uint64_t chunk;          /* size of the next chunk */
    uint64_t used;           /* bytes mapped so far */
    uint64_t cap;            /* max bytes */
    icpp_live_header *live;  /* the live file's header (MAP_SHARED), or 0 */
    const char *path;        /* the live file (reopened to grow it) */
    uint64_t fsize;          /* its size: where the next chunk goes */
} icpp_agent_arena;

#define ICPP_AGENT_LIVE_PATH_MAX 4200   /* live_dir + "/live.PID.TID.NS" */

struct icpp_agent_thread {
    /* hot: read by the trampoline's fast path (offsets in asm_offsets.h) */
    icpp_agent_frame  *top;           /* current frame */
    icpp_agent_frame  *frames;        /* frames[0]: sentinel holding the root */
    icpp_agent_frame  *limit;         /* frames + max_depth + 1 */
    uint64_t           base;          /* thread base */
    icpp_agent_frame  *max_top;       /* deepest frame the C recorder pushed */
    icpp_agent_hit2   *hits;          /* hit_mask + 1 entries */
    uint64_t           hit_mask;
    /* cold */
    icpp_agent_thread *next;          /* older thread (global list) */
    int                tid, pid;
    int                inherited;
    int                base_kind;
    icpp_agent_node   *root;          /* in the arena (so in the live file) */
    icpp_agent_node    overflow;      /* OVERFLOW node (not linked in the tree) */
    icpp_agent_node  **hash;          /* open addressing on (parent, func) */
    uint64_t           hash_mask;     /* slots - 1 */
    uint64_t           hash_used;
    icpp_agent_arena   arena;
    uint64_t           nodes;
    uint64_t           slow;          /* entries through icpp_agent_record */
    uint64_t           hit_conflicts;  /* slow entries of known calls since hit2_maybe_grow */
    uint64_t           dropped_critical, dropped_reentrant, dropped_depth, node_overflow;
    char               live_path[ICPP_AGENT_LIVE_PATH_MAX];   /* "" if anonymous */
    uint64_t           span;          /* own stack: base - entry SP < span (else a foreign stack) */
    uint64_t           dropped_foreign; /* entries on a foreign stack (sigaltstack, coroutine): no height */
    uint64_t          *lost;          /* tree memory full: hashes of the calls that left the tree
                                         (parent, function), ICPP_AGENT_LOST_SLOTS; mmap'd at the first */
    uint64_t           lost_paths;    /* distinct such calls (paths not recorded) */
    int                lost_more;     /* the set filled: more than lost_paths */
};

#define ICPP_AGENT_LOST_SLOTS (1u << 16)

/* Per-thread state, initial-exec TLS (a %fs-relative load, no call). */
typedef struct icpp_agent_tls {
    icpp_agent_thread *thr;
    uint32_t           busy;          /* nonzero: do not record (critical depth | IN_RECORDER) */
    uint32_t           failed;        /* thread setup failed: never record */
} icpp_agent_tls;

extern __thread icpp_agent_tls icpp_agent_tls_
    __attribute__((tls_model("initial-exec"))) ICPP_AGENT_HIDDEN;

/* Settings read by the recorder (written once by icpp_agent_init). */
typedef struct icpp_agent_settings {
    uint64_t max_depth;
    uint64_t max_cct_bytes;
    uint64_t prefault;
    uint64_t startstack;
    int      live_signal;    /* signal for evacuating threads (live patching) */
    const char *live_dir;    /* where live files go; 0 = anonymous trees */
    volatile uint64_t syms_ns; /* written into new live files' headers */
} icpp_agent_settings;

extern icpp_agent_settings icpp_agent_cfg ICPP_AGENT_HIDDEN;

/* The C recorder: function `func` was entered with %rsp == entry_sp.
 * Called by the trampoline (tramp.S) and the SIGTRAP handler. */
void icpp_agent_record(uint32_t func, uint64_t entry_sp) ICPP_AGENT_HIDDEN;

/* The assembly trampoline every stub calls with the index in %r11d. */
extern char icpp_agent_tramp[] ICPP_AGENT_HIDDEN;
/* sa_restorer for our own handler (libc's __restore_rt might be patched). */
extern char icpp_agent_restore_rt[] ICPP_AGENT_HIDDEN;

/* ---- patched sites (read by the SIGTRAP handler) ------------------------- */

enum {
    ICPP_AGENT_SITE_JMP_PENDING = 1,  /* jmp being written: int3 may be there */
    ICPP_AGENT_SITE_JMP = 2,          /* jmp in place */
    ICPP_AGENT_SITE_INT3 = 3,         /* int3 fallback */
};

typedef struct icpp_agent_site {
    uint64_t addr;         /* function start */
    uint64_t stub;         /* stub entry: records via the trampoline */
    uint64_t resume;       /* relocated code (after the recording prefix) */
    uint64_t island;       /* short jmp: where its 5-byte jmp to the stub lies; else 0 */
    uint32_t index;        /* function index */
    uint8_t  state;        /* ICPP_AGENT_SITE_* */
    uint8_t  len;          /* bytes relocated (jmp) or first instruction (int3) */
    uint8_t  orig[6];      /* original first bytes (5 used) */
    uint8_t  ninsn;        /* instructions relocated */
    uint8_t  src_off[5];   /* their offsets in the original ... */
    uint8_t  dst_off[5];   /* ... and from `resume` in the stub */
    uint64_t traps;        /* INT3: entries through the trap in this process */
} icpp_agent_site;

/* A direct call of an int3 site whose rel32 a live patch rewrites to the
 * site's stub: while it is written (int3 at its byte 0) the SIGTRAP handler
 * does what the branch does, to the stub. */
enum { ICPP_AGENT_CALL_CALL = 0, ICPP_AGENT_CALL_JMP = 1, ICPP_AGENT_CALL_JCC = 2 };

typedef struct icpp_agent_callsite {
    uint64_t at;           /* the branch instruction */
    uint64_t to;           /* its new target (the stub) */
    uint8_t  len;          /* its length; the rel32 is its last 4 bytes */
    uint8_t  kind;         /* ICPP_AGENT_CALL_* */
    uint8_t  cc;           /* jcc: the condition (opcode & 15) */
    uint8_t  first;        /* its original byte 0 */
} icpp_agent_callsite;

/* A patched module's sites, sorted by addr; published on a lock-free list. */
typedef struct icpp_agent_modsites {
    struct icpp_agent_modsites *next;
    uint64_t                    lo, hi;     /* [first site addr, last site addr] */
    icpp_agent_site            *sites;
    size_t                      nsites;
    icpp_agent_callsite        *calls;      /* live patches' rewritten calls, sorted by at */
    size_t                      ncalls;
} icpp_agent_modsites;

/* Branches the SIGTRAP handler carried out for a live patch's rewrites. */
extern volatile uint64_t icpp_agent_calls_emulated ICPP_AGENT_HIDDEN;

extern icpp_agent_modsites *volatile icpp_agent_mods ICPP_AGENT_HIDDEN;

/* The site whose function starts at addr, or NULL (signal-safe). */
const icpp_agent_site *icpp_agent_site_at(uint64_t addr) ICPP_AGENT_HIDDEN;

/* Zero every site's trap count (a fork child counts its own entries:
 * icpp_agent_init's atfork child handler, patch.c). */
void icpp_agent_int3_reset(void) ICPP_AGENT_HIDDEN;

/* Install the SIGTRAP handler (once); 0 or -errno. */
int icpp_agent_trap_install(void) ICPP_AGENT_HIDDEN;

/* The kernel's struct sigaction (rt_sigaction's), for the program's. */
typedef struct icpp_agent_ksigaction {
    void         *handler;
    unsigned long flags;
    void         *restorer;
    uint64_t      mask;
} icpp_agent_ksigaction;

/* Once the handler is installed, the program's sigaction(SIGTRAP) and
 * signal(SIGTRAP) (interposed by preload.c) read and set the action the
 * handler passes the traps that are not the agent's to, and the kernel
 * keeps the agent's handler first.  Returns 0, or -1 if the handler is not
 * installed (then the program's call goes to the kernel as it is). */
int icpp_agent_trap_sigaction(const icpp_agent_ksigaction *act, icpp_agent_ksigaction *old) ICPP_AGENT_HIDDEN;

/* Live patching, step "no thread inside bytes 1..4": signal every other
 * thread; each handler moves its interrupted RIP out of the first bytes of
 * any of `sites` (sorted) into the equivalent point of the stub's copy.
 * Returns the number of threads that did not answer within timeout_ms
 * (they may block the signal), or -errno; *moved gets how many RIPs moved. */
int icpp_agent_evacuate(const icpp_agent_site *sites, size_t n, int sig, int timeout_ms,
                        int *moved) ICPP_AGENT_HIDDEN;

#endif
