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
#include "sites.h"

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

/* Choose class paddings (cpad[class], bytes, 0: not wrapped) that separate
 * what the frame paddings fpad[] (per map function) left ambiguous: greedy
 * (greedy.h),
 * each round the class and padding (0..256, a wrapped class may take
 * another) that most improve the weight of
 * unique contexts (then their number; the lighter class on a tie: cold
 * sites before hot ones), within max_height and time_limit CPU seconds. */
int rw_wrap_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                   int64_t max_height, double time_limit, uint32_t *cpad, icpp_err *err);

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

/* --wrap: the call at link-time address `call` must be wrapped (with 16
 * bytes unless the search chose more); an error says why it cannot be. */
int rw_wrap_force(const rw_sites *s, uint64_t call, uint32_t *cpad, icpp_err *err);

#endif
