/* clone.h -- function cloning: a copy of a function in OUT's new segment, called instead of it from chosen call sites, with a frame padding of its own. */
#ifndef RW_CLONE_H
#define RW_CLONE_H
#include <stddef.h>
#include <stdint.h>
#include "arr.h"
#include "err.h"
#include "frame.h"
#include "image.h"
#include "module.h"
#include "sites.h"
/* A clone (docs/rewrite.md, "Cloning") is PROG's bytes of a function and
 * of its split-off parts, copied to OUT's new segment with every
 * pc-relative reference out of them (into another part: into its copy)
 * (calls, tail jumps, rip-relative data) re-aimed at what they reached in
 * PROG, enlarged by its own padding (frame.c's patches, applied to the
 * copy), with FDEs that repeat the function's CFI (its CFA offsets grown
 * as the copy's frame; its CIE and exception tables) and local symbols
 * NAME.icpp_clone.N (and NAME.icpp_clone.N.cold for a split-off part).  The
 * redirected call sites keep their bytes but their rel32, so their return
 * addresses -- and every exception table entry -- stay where they were.
 * Paths through those sites enter the copy: another function for every
 * ICPP tool, whose calls are call sites of their own. */
/* Whether the function starting at addr can be copied: NULL, or why not
 * (static text).  The rules, each a reason: a function of the program with
 * a size, and at most 3 split-off parts with sizes; per part one FDE
 * covering exactly it, under a "zR" or "zPLR" CIE with gcc's encodings,
 * an exception table without its own LPStart, a CFA program lib/cfaprog.h
 * reads; every byte decodes; no indirect jump (a jump table would lead
 * back into PROG's copy); no short jump out of a part, and no jump out of
 * the function but to a function's entry (a tail call); no absolute
 * immediate inside it. */
typedef struct rw_cloner rw_cloner;
rw_cloner  *rw_cloner_new(const icpp_module *m, const rw_image *img, icpp_err *err);
void        rw_cloner_free(rw_cloner *c);
const char *rw_clone_judge(rw_cloner *c, uint64_t addr);
/* The parts of the function at addr (its own code, then its split-off
 * .cold parts) and their copies' addresses from `at` on, each 16-byte
 * aligned after the previous: the count (at most RW_CLONE_MAX_PARTS), 0 if
 * it cannot be copied. */
#define RW_CLONE_MAX_PARTS 4
size_t      rw_clone_parts(rw_cloner *c, uint64_t addr, uint64_t at, icpp_arr_part *out);
/* Write the clone of the function at `orig` -- its parts as rw_clone_parts
 * lays them out from link-time `at` -- to code[0..), padded by pad (fr: its
 * frame verdict, needed when pad > 0), and an FDE per part to eh (under
 * the function's CIE, with its exception table).  Uses PROG's bytes as loaded, whatever was
 * patched in the image since. */
struct icpp_ehw;
int rw_clone_emit(rw_cloner *c, uint64_t orig, const rw_frame *fr, uint32_t pad, uint64_t at, uint8_t *code,
                  struct icpp_ehw *eh, icpp_err *err);
/* Point the direct call whose return address is ret (E8 rel32) at `to`. */
int rw_clone_redirect(rw_image *img, uint64_t ret, uint64_t to, icpp_err *err);
/* Which call-site classes (icpp-rewrite/wrap.h) may call a clone of their
 * callee: per class, cmax[k] = the largest padding its clone may get (0:
 * only a copy with PROG's frame), or -1: none.  A class qualifies when it
 * is not wrapped (cpad), all its sites are direct calls of one function f
 * of the program and every node through them enters f with all its sites
 * in the class; f can be copied (rw_clone_judge), is not enlarged by
 * wrapping (bywrap, per map function) and owns no wrapped site.  The
 * padding is f's maxpad (per map function) when f's frame can grow. */
int rw_clone_classes(const icpp_pathmap *pm, const rw_sites *s, const uint32_t *cpad, rw_cloner *c,
                     const rw_frames *fs, const uint32_t *maxpad, const uint8_t *bywrap, int32_t *cmax,
                     icpp_err *err);
/* Choose classes whose call sites are to call a clone of their callee
 * instead (icpp-rewrite/clone.h) where resizing and wrapping (fpad, cpad)
 * left ambiguity: greedy as rw_wrap_search (icpp-rewrite/wrap.h), each round the class and clone
 * padding (0..cmax[class] in steps of 16; cmax < 0: cannot be cloned) that
 * most improve the weight of unique contexts, by at least 0.01% of the
 * map's calls, at most max_clones.  A class
 * is taken only if its nodes run in PROG's code (none called from a clone
 * or from a node of the same class).  cq[class]: the clone's padding, -1
 * for none. */
int rw_clone_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                    const uint32_t *cpad, const int32_t *cmax, int64_t max_height, double time_limit,
                    size_t max_clones, int32_t *cq, icpp_err *err);
/* At most this many clones per rewrite (each a copy of a whole function). */
#define RW_MAX_CLONES 64
/* The clones chosen (per class cq[k] >= 0: rw_clone_search), laid
 * out from `at` on (after the stubs: rw_wrap_code_addr + RW_WRAP_STUB per
 * wrap), each and each part 16-byte aligned: one per class, with the
 * class's return addresses, the symbol SYMBOL.icpp_clone.N and, for OUT's
 * map, the name pm gives the original. */
typedef struct rw_clone_set {
    icpp_arr_clone *c;
    size_t          n, nrets;       /* clones, and redirected calls in all */
    uint64_t       *rets;           /* storage of the clones' rets */
    icpp_arr_part  *parts;          /* ... of their parts */
    char           *names;          /* ... of their names */
} rw_clone_set;
int  rw_clone_list(const icpp_module *m, const icpp_pathmap *pm, const rw_sites *s, const int32_t *cq,
                   rw_cloner *cl, uint64_t at, rw_clone_set *out, icpp_err *err);
void rw_clone_set_free(rw_clone_set *cs);
#endif
