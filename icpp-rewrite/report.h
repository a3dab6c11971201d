/* report.h -- icpp-rewrite's report on stdout (what changed, what was refused and why, what stays ambiguous) and --explain's listings. */
#ifndef RW_REPORT_H
#define RW_REPORT_H

#include <stdint.h>

#include "clone.h"
#include "err.h"
#include "frame.h"
#include "module.h"
#include "run.h"
#include "sites.h"

/* The report of a run whose every phase is done (OUT written).  0, or -1
 * (out of memory) with err set. */
int  rw_report(const rw_run *r, icpp_err *err);

/* --explain: the verdict on every function of the program. */
void rw_report_explain_frames(const rw_frames *fs);

/* --explain: the verdict on every call site of the map's paths (cpad: the
 * classes' wraps, cq and cmax: their clones; clone: cloning was on). */
void rw_report_explain_sites(const icpp_module *m, const rw_sites *s, const uint32_t *cpad, const int32_t *cq,
                             const int32_t *cmax, rw_cloner *cl, int clone);

#endif
