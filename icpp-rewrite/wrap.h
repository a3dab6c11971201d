/* wrap.h -- call-site wrapping: which call sites may go through a stub that lowers the stack, the stubs, their CFI, and the choice of sites. */
#ifndef RW_WRAP_H
#define RW_WRAP_H

#include <stddef.h>
#include <stdint.h>

#include "arr.h"
#include "err.h"
#include "frame.h"
#include "image.h"
#include "module.h"
#include "pathmap.h"

/* A wrapped call site (docs/rewrite.md, "Call-site wrapping"): the direct
 * `call f` (E8 rel32) at `call` becomes `jmp stub` (E9 rel32, same 5
 * bytes); the stub, in OUT's new segment, is
 *     sub $P,%rsp; call f; add $P,%rsp; jmp call+5
 * so f and everything below it on paths through this site is entered P
 * bytes lower.  The stub has no frame of its own: it is code of the
 * caller's frame outside the caller's range, like gcc's foo.cold parts,
 * and gets a symbol CALLER.cold.icpp_wrap.N and an FDE that repeats the
 * caller's CFI row at the site (the CFA offset +P while rsp is lowered). */
#define RW_WRAP_STUB 24         /* bytes of one stub */
#define RW_WRAP_RET  12         /* offset of the stub's return address (after its call) */

/* One call site the map's paths go through (a return address of the main
 * module), and whether it can be wrapped. */
typedef struct rw_site {
    uint64_t    ret;            /* return address in PROG (call + 5) */
    uint64_t    callee;         /* the E8's target */
    uint64_t    owner;          /* the function whose frame the call runs in */
    const char *owner_name;
    const char *why;            /* NULL: wrappable; else why not (static text) */
    uint8_t     cfa_reg;        /* the caller's CFA rule at the call: DWARF register (7 rsp, 6 rbp) + offset */
    int64_t     cfa_off;
    uint32_t    saved;          /* bit r: register r (0..16, 16 = return address) is saved at CFA + save_off[r] */
    int64_t     save_off[17];
    uint32_t    cls;            /* its class (sites that share a path must get the same padding) */
} rw_site;

/* The sites of a map and their classes. */
typedef struct rw_sites {
    rw_site  *v;                /* sorted by ret */
    size_t    n;
    uint32_t  ncls;
    uint8_t  *cls_ok;           /* per class: every site wrappable, every path through it only through such sites */
    uint64_t *cls_weight;       /* per class: training count of the paths through it */
    int32_t  *node_cls;         /* per node: the class of its call sites, -1 if none (or not in the main module) */
} rw_sites;

/* Order of rw_site by ret (for bsearch). */
int rw_site_cmp(const void *a, const void *b);

/* Find and judge every main-module call site of pm's paths in m (bytes in
 * img, verdicts of the callees in fs, the code's ranges from the plan). */
int  rw_sites_find(rw_sites *s, const icpp_pathmap *pm, const icpp_module *m, const rw_image *img,
                   const rw_frames *fs, const icpp_arr_range *ranges, size_t nranges, icpp_err *err);
void rw_sites_free(rw_sites *s);

/* Choose class paddings (cpad[class], bytes, 0: not wrapped) that separate
 * what the frame paddings fpad[] (per map function) left ambiguous: greedy,
 * each round the class and padding (0..256, a wrapped class may take
 * another) that most improve the weight of
 * unique contexts (then their number; the lighter class on a tie: cold
 * sites before hot ones), within max_height and time_limit CPU seconds. */
int rw_wrap_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                   int64_t max_height, double time_limit, uint32_t *cpad, icpp_err *err);

/* Choose classes whose call sites are to call a clone of their callee
 * instead (icpp-rewrite/clone.h) where resizing and wrapping (fpad, cpad)
 * left ambiguity: greedy as rw_wrap_search, each round the class and clone
 * padding (0..cmax[class] in steps of 16; cmax < 0: cannot be cloned) that
 * most improve the weight of unique contexts, by at least 0.01% of the
 * map's calls, at most max_clones.  A class
 * is taken only if its nodes run in PROG's code (none called from a clone
 * or from a node of the same class).  cq[class]: the clone's padding, -1
 * for none. */
int rw_clone_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                    const uint32_t *cpad, const int32_t *cmax, int64_t max_height, double time_limit,
                    size_t max_clones, int32_t *cq, icpp_err *err);
/* The wraps chosen (per class padding cpad[]) as icpp_arr_wrap records with
 * their stubs at code_addr + RW_WRAP_STUB * i, in site order. */
int rw_wrap_list(const rw_sites *s, const uint32_t *cpad, uint64_t code_addr, icpp_arr_wrap **out, size_t *n,
                 icpp_err *err);

/* Write the stubs of wraps[0..n) (code at code_addr, n * RW_WRAP_STUB
 * bytes into code), turn their calls in img into jumps, and append their
 * CIE and FDEs to the .eh_frame being built (a caller resized by pads
 * has its CFA offset grown). */
struct icpp_ehw;
int rw_wrap_emit(const rw_sites *s, const icpp_arr_wrap *w, size_t n, const icpp_arr_pad *pads, size_t npads,
                 uint64_t code_addr, uint8_t *code, rw_image *img, struct icpp_ehw *eh, icpp_err *err);

/* Where the first stub goes in OUT (0 if the headers cannot be read). */
uint64_t rw_wrap_code_addr(const rw_image *img);

/* Apply wraps w[0..n) (rw_wrap_list with rw_wrap_code_addr) to img: the
 * stubs, the calls turned into jumps, the new segment with the relocated
 * .eh_frame (img's, with every patch made so far) plus the stubs' FDEs, a
 * new .eh_frame_hdr and a symbol per stub.  Nothing to do for n = 0. */
/* With clones (icpp-rewrite/clone.h, laid out by rw_clone_list):
 * their code after the stubs, their CIEs and FDEs, their symbols (c[i].name)
 * and their call sites redirected. */
struct rw_cloner;
typedef struct rw_clones_in {
    struct rw_cloner     *cloner;
    const rw_frames      *fs;
    const icpp_arr_clone *c;
    size_t                n;
} rw_clones_in;
int rw_wrap_apply(rw_image *img, const rw_sites *s, const icpp_arr_wrap *w, size_t n, const icpp_arr_pad *pads,
                  size_t npads, const rw_clones_in *ci, icpp_err *err);


/* --wrap: the call at link-time address `call` must be wrapped (with 16
 * bytes unless the search chose more); an error says why it cannot be. */
int rw_wrap_force(const rw_sites *s, uint64_t call, uint32_t *cpad, icpp_err *err);

#endif
