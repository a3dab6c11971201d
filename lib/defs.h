/* defs.h -- definitions every ICPP tool shares: function id, CID, thread base, height. */
#ifndef ICPP_DEFS_H
#define ICPP_DEFS_H

#include <stddef.h>
#include <stdint.h>

/* These follow docs/definitions.md (the evidence: docs/background.md section 1).
 * Change them only together with every file format that stores them.
 *
 * entry SP  %rsp at a function's first instruction (points at the return
 *           address).  From a sample: entry SP = CFA(pc) - 8, CFA from CFI.
 * base      main thread: startstack (/proc/PID/stat field 28); any other
 *           thread: the end (top) of the mapping that holds its stack.
 * height    base - entry SP, in bytes.
 * function  (module, start address): the module is named by its build-id,
 *           the address is the function's link-time virtual address in that
 *           module (st_value; for PIE/DSOs the runtime address minus the bias).
 * CID       (function, height).
 * path      the functions on the stack, root to leaf; call sites are detail. */

#define ICPP_BUILD_ID_MAX 64    /* GNU build-ids are 20 bytes (sha1) in practice */
#define ICPP_RA_SIZE      8     /* bytes of return address between CFA and entry SP */

typedef struct icpp_build_id {
    uint8_t len;                        /* 0 = module has no build-id */
    uint8_t bytes[ICPP_BUILD_ID_MAX];
} icpp_build_id;

/* The one rule for "the same module" (docs/definitions.md, "same module").
 * Two modules are the same when
 *   - both have a build-id and the build-ids are equal (paths do not matter:
 *     a build-id names the contents wherever they lie), or
 *   - neither has a build-id and both paths are given (non-NULL) and equal:
 *     the path is then the only identity left;
 * a module with a build-id is never the same as one without.  A NULL path
 * means "no path to compare": an empty build-id then matches nothing.
 * A caller that has no build-id to check against at all (a recording made
 * without build-ids, a search that names no build-id) decides that before
 * calling; it is not a comparison.  Costs a length test per mismatch. */
static inline int icpp_build_id_match(const icpp_build_id *a, const char *apath,
                                      const icpp_build_id *b, const char *bpath)
{
    if (a->len != b->len)
        return 0;
    if (!a->len) {
        if (!apath || !bpath)
            return 0;
        while (*apath && *apath == *bpath)
            apath++, bpath++;
        return *apath == *bpath;
    }
    for (uint8_t i = 0; i < a->len; i++)
        if (a->bytes[i] != b->bytes[i])
            return 0;
    return 1;
}

/* icpp_build_id_match without paths: both build-ids present and equal. */
static inline int icpp_build_id_eq(const icpp_build_id *a, const icpp_build_id *b)
{
    return icpp_build_id_match(a, NULL, b, NULL);
}

/* A function: module index into the owning table of modules + start address. */
typedef struct icpp_func_id {
    uint32_t module;                    /* index into a module table */
    uint64_t addr;                      /* link-time start address in the module */
} icpp_func_id;

/* Context id. */
typedef struct icpp_cid {
    icpp_func_id func;
    int64_t      height;                /* bytes; base - entry SP */
} icpp_cid;

/* How a thread's base was obtained (stored with samples and maps). */
typedef enum icpp_base_kind {
    ICPP_BASE_NONE = 0,       /* unknown */
    ICPP_BASE_STARTSTACK = 1, /* main thread: /proc/PID/stat startstack */
    ICPP_BASE_MAPTOP = 2,     /* other threads: top of the stack's mapping */
    ICPP_BASE_INFERRED = 3,   /* voted from samples and training heights */
} icpp_base_kind;

/* Which stack a sample is on (docs/definitions.md, "foreign stack").  The
 * main thread's stack is the SPAN bytes below startstack (the kernel keeps
 * every mmap at least RLIMIT_STACK plus a guard gap below it); an SP above
 * startstack, farther below it, or inside another mapping is on a foreign
 * stack (a sigaltstack, a makecontext stack on the heap), whose heights
 * against startstack mean nothing. */
#define ICPP_MAIN_STACK_SPAN (1ull << 30)

static inline int icpp_main_stack_holds(uint64_t startstack, uint64_t sp)
{
    return startstack - sp < ICPP_MAIN_STACK_SPAN;   /* unsigned: sp above startstack is outside */
}

static inline uint64_t icpp_entry_sp_from_cfa(uint64_t cfa)
{
    return cfa - ICPP_RA_SIZE;
}

static inline int64_t icpp_height(uint64_t base, uint64_t entry_sp)
{
    return (int64_t)(base - entry_sp);
}

/* The largest |height| there can be: a height is the distance between two
 * addresses of one stack, and no stack is larger than x86-64's user address
 * space (2^56 bytes with 5-level paging).  A height past it comes from a
 * crafted or corrupt file: maps holding one are refused when read
 * (lib/pathmap.c), and code that computes on heights may assume the bound --
 * sums and differences of a few heights and paddings cannot overflow int64_t. */
#define ICPP_HEIGHT_MAX ((int64_t)1 << 56)

static inline int icpp_height_ok(int64_t h)
{
    return h > -ICPP_HEIGHT_MAX && h < ICPP_HEIGHT_MAX;
}

/* a + b for heights and offsets, saturated at INT64_MIN/INT64_MAX: where a
 * height's bound is not known to hold, a result past it stays past it (over
 * any budget) instead of wrapping. */
static inline int64_t icpp_height_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

#endif
