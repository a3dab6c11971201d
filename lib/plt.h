/* plt.h -- samples in PLT stubs: charged to the calling context, found from the call sites of the stub. */
#ifndef ICPP_PLT_H
#define ICPP_PLT_H

#include <stdint.h>

#include "pathmap.h"
#include "replay.h"
#include "cidx.h"

/* A PLT stub is no function (docs/definitions.md): a sample in one belongs
 * to the context that called it.  The stub was entered by a call, so the
 * sample's entry SP (CFA - 8, lib/cfi.c evaluates binutils' PLT rule) is
 * the one the imported function will have; every call site of that stub
 * in the module (the static call graph, lib/callgraph.h) whose caller F
 * adds `delta` bytes at the call gives a candidate context: the map's
 * paths at (F, height - delta); a site that reaches the stub by a tail
 * jmp (F's frame already gone) gives those paths' parents.  The union is
 * the sample's candidates, weighted by their training counts -- except
 * where training saw some of those contexts call through their site and
 * enter the callee at the sample's height: then only these (and the tail
 * jmp ones, which training files under the caller's caller) are, weighted
 * by those calls, as a sample at the callee's first instruction would be
 * resolved; unless learning found that callee novel (icpp_cidx_novel). */

typedef struct icpp_plt icpp_plt;

icpp_plt *icpp_plt_new(void);
void      icpp_plt_free(icpp_plt *p);

/* Candidates of sample s (s->func->plt) in map pm (index x): their number,
 * *out pointing at them (valid until the next call) and *func the first
 * one's path-map function (-1 if none).  0: no stub name (PLT0), no call
 * site, or no context in the map.  The call graph of a module is built on
 * first use (NULL on failure: no candidates). */
uint32_t icpp_plt_contexts(icpp_plt *p, icpp_cidx *x, const icpp_pathmap *pm, const icpp_replay *rp,
                           const icpp_rsample *s, const icpp_cand **out, int64_t *func);

#endif
