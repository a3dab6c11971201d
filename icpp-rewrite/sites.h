/* sites.h -- the main-module call sites of a map's paths: each judged (may it go through a stub or call a copy?), and their classes (sites that share a path). */
#ifndef RW_SITES_H
#define RW_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "arr.h"
#include "err.h"
#include "frame.h"
#include "image.h"
#include "module.h"
#include "pathmap.h"

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
/* The site whose return address is ret, or NULL. */
rw_site *rw_sites_at(const rw_sites *s, uint64_t ret);

/* Find and judge every main-module call site of pm's paths in m (bytes in
 * img, verdicts of the callees in fs, the code's ranges from the plan). */
int  rw_sites_find(rw_sites *s, const icpp_pathmap *pm, const icpp_module *m, const rw_image *img,
                   const rw_frames *fs, const icpp_arr_range *ranges, size_t nranges, icpp_err *err);
void rw_sites_free(rw_sites *s);

#endif
