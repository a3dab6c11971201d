/* live.h -- on-disk layout of the agent's live calling-context trees and function table (read by icpp-train's recovery). */
#ifndef ICPP_AGENT_LIVE_H
#define ICPP_AGENT_LIVE_H

#include <stdint.h>

/* docs/train.md ("What survives a kill") describes these files; this
 * header is their one definition.  Both are private to one icpp-train run
 * (its temporary directory) and to one build of the agent: the recovery
 * checks the magic, the version and the node layout and refuses the rest.
 *
 * live.PID.TID.NS -- one per thread, MAP_SHARED by the agent while it runs:
 *   [0, header_size)      icpp_live_header, then chunk[max_chunks]
 *   [header_size, ...)    arena chunks, in the order they were mapped: the
 *                         thread's CCT nodes (icpp_agent_node) and pair
 *                         blocks (icpp_agent_pairext), with pointers that are
 *                         the agent's virtual addresses; chunk[i] says where
 *                         chunk i was mapped, so a pointer p lies in the
 *                         file at chunk[i].off + (p - chunk[i].vaddr).
 * Commit protocol: every field of the header is written before `magic`;
 * a chunk's entry is written before `nchunks` counts it, and before any
 * pointer into the chunk is stored; a node, a pair block and a pair slot
 * are published (first_child, ext, count != 0) only after their other
 * fields (internal.h).  So a reader that starts at `root` and follows only
 * pointers into counted chunks sees complete nodes; counts may lack the
 * increments in flight at the kill.
 *
 * syms.PID.NS -- the function table of a process image, appended as the
 * agent patches modules (before any of their functions can be entered):
 *   "ICPPSYM1", then records { u32 size of body; u8 type; body[size] },
 *   little endian, unaligned:
 *   'C' command line (bytes)
 *   'M' u32 index, u8 kind, u64 bias, u64 lo, u64 hi, u8 build-id length,
 *       build-id bytes, path (the rest)
 *   'F' u32 module, u32 first function index, u32 n, then n times
 *       { u64 link-time address; u16 name length; name }
 *   'T' u32 patched jmp, short jmp, int3, none (the latest counts)
 *   A record cut short by a kill ends the table. */

#define ICPP_LIVE_MAGIC   "ICPPLIV1"
#define ICPP_LIVE_VERSION 1
#define ICPP_SYMS_MAGIC   "ICPPSYM1"

typedef struct icpp_live_chunk {
    uint64_t vaddr;           /* where the agent mapped it */
    uint64_t len;             /* bytes */
    uint64_t off;             /* file offset, or ICPP_LIVE_ANON */
} icpp_live_chunk;

/* A chunk the file could not hold (no space, file size limit): anonymous
 * memory.  The tree goes on growing there; what lies in it is lost at a
 * kill, and recovery prunes pointers into it instead of calling the file
 * corrupt. */
#define ICPP_LIVE_ANON (~0ull)

typedef struct icpp_live_header {
    char     magic[8];        /* ICPP_LIVE_MAGIC, written last */
    uint32_t version;         /* ICPP_LIVE_VERSION */
    uint32_t header_size;     /* bytes before the first chunk (pages) */
    uint32_t max_chunks;      /* entries chunk[] has room for */
    uint32_t nchunks;         /* commit counter: chunk[0, nchunks) are complete */
    int32_t  pid, tid;        /* the thread */
    uint64_t created_ns;      /* CLOCK_MONOTONIC when created (also in the name) */
    uint64_t syms_ns;         /* its function table is syms.PID.SYMS_NS */
    uint64_t base;            /* thread base */
    uint32_t base_kind;       /* icpp_agent_base_kind */
    uint32_t node_size;       /* sizeof(icpp_agent_node): layout check */
    uint32_t pairext_size;    /* sizeof(icpp_agent_pairext) */
    uint32_t pad;
    uint64_t root;            /* address of the root node (in chunk 0) */
    icpp_live_chunk chunk[];  /* max_chunks entries */
} icpp_live_header;

#endif
