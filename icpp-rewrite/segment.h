/* segment.h -- OUT's new segment: the stubs of wrapped call sites and the copies of cloned functions, their CFI in a relocated .eh_frame, a new .eh_frame_hdr, their symbols. */
#ifndef RW_SEGMENT_H
#define RW_SEGMENT_H

#include <stddef.h>

#include "arr.h"
#include "clone.h"
#include "err.h"
#include "frame.h"
#include "image.h"
#include "sites.h"

/* Apply wraps w[0..n) (rw_wrap_list with rw_wrap_code_addr) to img: the
 * stubs, the calls turned into jumps, the new segment with the relocated
 * .eh_frame (img's, with every patch made so far) plus the stubs' FDEs, a
 * new .eh_frame_hdr and a symbol per stub.  Nothing to do for n = 0.
 * With clones (icpp-rewrite/clone.h, laid out by rw_clone_list):
 * their code after the stubs, their CIEs and FDEs, their symbols (c[i].name)
 * and their call sites redirected. */
typedef struct rw_clones_in {
    rw_cloner            *cloner;
    const rw_frames      *fs;
    const icpp_arr_clone *c;
    size_t                n;
} rw_clones_in;
int rw_segment_apply(rw_image *img, const rw_sites *s, const icpp_arr_wrap *w, size_t n, const icpp_arr_pad *pads,
                     size_t npads, const rw_clones_in *ci, icpp_err *err);

#endif
