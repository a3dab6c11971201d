/* arr.h -- activation record resizing on a path map: how paddings move heights, the padded binary's map and build-id. */
#ifndef ICPP_ARR_H
#define ICPP_ARR_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "err.h"
#include "pathmap.h"

/* Activation record resizing (ARR, docs/rewrite.md) enlarges the frames of
 * chosen functions of a map's main module.  A function padded by P bytes
 * enters every function it calls P bytes lower, so the height of a path grows
 * by the padding of every function above its leaf whose frame was live when
 * the leaf was entered (each occurrence counts: recursion multiplies); the
 * leaf's own padding does not move its entry.
 *
 * "Live" matters because a training map can hold returned frames: the
 * training agent has no exit hooks and pops a frame only when a later entry
 * is at or above its entry SP, so when G calls P, P returns, and G then
 * calls N with stack arguments pushed (a lower SP), the map records the path
 * G;P;N although P's frame is gone.  N's call site (its return address, in
 * the map) lies in G, not in P: the frame N was called from is G's.  These
 * helpers find that frame for every node ("caller") and shift heights along
 * callers, not parents.  They are shared by icpp-rewrite (which chooses the
 * paddings) and any tool that wants to predict the heights of a padded
 * binary. */

/* One padding: the main-module function at link-time `addr` gets `pad` more
 * bytes of frame (a multiple of 16, keeping the ABI's stack alignment). */
typedef struct icpp_arr_pad {
    uint64_t addr;                  /* link-time start address in the main module */
    uint32_t pad;                   /* bytes, multiple of 16 */
} icpp_arr_pad;

/* A wrapped call site (docs/rewrite.md, "Call-site wrapping"): the call
 * whose return address is `ret` in the main module goes through a stub that
 * lowers the stack by `pad` bytes (a multiple of 16) around it; in the
 * rewritten binary its return address is `new_ret` (in the stub). */
typedef struct icpp_arr_wrap {
    uint64_t ret, new_ret;
    uint32_t pad;
} icpp_arr_wrap;

/* A piece of the main module's code: [lo, hi) runs in the frame of the
 * function starting at `owner` (itself, or for gcc's foo.cold parts foo). */
typedef struct icpp_arr_range {
    uint64_t lo, hi, owner;
} icpp_arr_range;

/* The range of r[0..n) (sorted by lo, disjoint) with lo <= addr < hi, or NULL. */
const icpp_arr_range *icpp_arr_range_at(const icpp_arr_range *r, size_t n, uint64_t addr);

/* Per map function index (icpp_pathmap_nfuncs entries into out): the padding
 * of that function, 0 for functions of other modules and unlisted ones. */
void icpp_arr_func_pads(const icpp_pathmap *pm, const icpp_arr_pad *pads, size_t n, uint32_t *out);

/* For every node (icpp_pathmap_nnodes entries into caller), the node whose
 * frame it was called from: the nearest ancestor whose code (ranges of the
 * main module) holds the node's call sites, else its parent (no site in the
 * main module, or none in an ancestor: calls from other modules, signal
 * handlers).  caller[0] = 0.  If far is not NULL, far[i] is set to the
 * farthest such ancestor when the sites of node i lie in different ancestors
 * (then the frames between are live on some of its entries and not on
 * others), else 0.  Returns the number of nodes whose caller is not their
 * parent, or -ENOMEM. */
long icpp_arr_callers(const icpp_pathmap *pm, const icpp_arr_range *ranges, size_t nranges, uint32_t *caller,
                      uint32_t *far);

/* Per node (icpp_pathmap_nnodes entries into out): the padding of the
 * wrapped call sites it was called through -- wraps[0..n) sorted by ret --
 * when every one of its main-module sites is wrapped with that padding
 * (and it has no site elsewhere), else 0.  Returns the number of nodes
 * whose sites are partly wrapped or wrapped with different paddings (their
 * heights are then not predictable: the choice of wraps must avoid it). */
size_t icpp_arr_node_wraps(const icpp_pathmap *pm, const icpp_arr_wrap *wraps, size_t n, uint32_t *out);

/* Height shift of every node (icpp_pathmap_nnodes entries into shift):
 * shift[i] = shift[c] + func_pad[function of c] + wrap[i] with c =
 * caller[i] (NULL: parents; wrap NULL: none), and shift[0] = 0 -- the
 * paddings of the live frames above and of the wrapped call sites on the
 * way. */
void icpp_arr_shifts(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *func_pad, const uint32_t *wrap,
                     int64_t *shift);

/* The build-id of the padded binary: the same length as `old` (20 if old has
 * none), a deterministic function of the old id and the paddings (sorted by
 * address; zero paddings ignored), and never equal to `old`.  A map or sample
 * file of one binary can therefore never be taken for the other's. */
void icpp_arr_build_id(const icpp_build_id *old, const icpp_arr_pad *pads, size_t n, const icpp_arr_wrap *wraps,
                       size_t nwraps, icpp_build_id *out);

/* The map of the padded binary: a copy of `pm` whose heights are shifted by
 * icpp_arr_shifts (with `caller`, NULL for parents, and the wraps
 * wraps[0..nwraps), sorted by ret), whose wrapped call sites are their
 * stubs' return addresses, and whose main module has `new_path` and
 * `new_bid`; all metadata is kept, and "arr-source" (the old build-id in
 * hex), "arr-paddings" (number of padded functions) and, with wraps,
 * "arr-wraps" (number of wrapped sites) are set.  NULL on failure
 * (ICPP_EFORMAT if a node's sites are partly wrapped). */
icpp_pathmap *icpp_arr_apply(const icpp_pathmap *pm, const uint32_t *caller, const icpp_arr_pad *pads, size_t n,
                             const icpp_arr_wrap *wraps, size_t nwraps, const char *new_path,
                             const icpp_build_id *new_bid, icpp_err *err);

/* A clone (docs/rewrite.md, "Cloning"): a copy of the main-module function
 * at `orig` and of its split-off parts (parts[0] is its own code, copied
 * to `addr`), with a frame padding `pad` of its own, called
 * instead of it through the direct calls whose return addresses are
 * rets[0..nrets) (sorted). */
typedef struct icpp_arr_part {
    uint64_t lo, hi;                /* a piece of the function's code in PROG */
    uint64_t addr;                  /* its copy's address */
} icpp_arr_part;
typedef struct icpp_arr_clone {
    uint64_t             orig, size, addr;  /* size: of the copy, parts and alignment included */
    const char          *name;      /* its name in the map: the original's (a profile of OUT shows the program's
                                       functions); the binary's symbol is another (icpp-rewrite: NAME.icpp_clone.N) */
    const char          *sym;       /* that symbol (not used here) */
    uint32_t             pad;
    const uint64_t      *rets;
    size_t               nrets;
    const icpp_arr_part *parts;     /* the function's code and its split-off (.cold) parts, copied */
    size_t               nparts;
} icpp_arr_clone;
/* The map of the program with clones c[0..n), before any padding: a copy of
 * pm with one function per clone (after pm's), each node called through a
 * clone's sites -- its function is the clone's original and every one of
 * its sites is among the clone's rets, all in the main module -- taken by
 * the clone, and every call site executed in a copy moved into it: a
 * return address inside a clone's original whose nearest ancestor running
 * that function is a clone's node.  Node i of pm is node i of the result,
 * so callers (icpp_arr_callers on pm) stay valid.  *partly (if not NULL)
 * counts the nodes of a clone's function with some but not all sites among
 * its rets (left to the original: unpredictable).  NULL on failure. */
icpp_pathmap *icpp_arr_clone_map(const icpp_pathmap *pm, const icpp_arr_clone *c, size_t n, size_t *partly,
                                 icpp_err *err);
/* "arr-unpaddable" in a padded binary's map: the main module's functions of
 * the map that icpp-rewrite could not pad (refused: docs/rewrite.md), as
 * comma-separated link-time addresses in hex.  With it, icpp-resolve --check
 * tells which ambiguity only unpaddable functions could separate.
 * icpp_arr_set_unpaddable writes it for the functions f of pm's main module
 * with maxpad[f] < 16 (per map function index, as icpp-rewrite's plan).
 * icpp_arr_unpaddable reads it back: mask[f] (icpp_pathmap_nfuncs entries)
 * is 1 for a listed function, 2 for a function of another module, 0 for
 * the rest; returns 1, or 0 when pm has no such key (mask untouched), or
 * -1 on a malformed list (ICPP_EFORMAT). */
int icpp_arr_set_unpaddable(icpp_pathmap *out, const icpp_pathmap *pm, const uint32_t *maxpad, icpp_err *err);
int icpp_arr_unpaddable(const icpp_pathmap *pm, uint8_t *mask, icpp_err *err);

#endif
