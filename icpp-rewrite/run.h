/* run.h -- one run of icpp-rewrite: its options and what each phase (main.c) makes, which the report (report.c) reads. */
#ifndef RW_RUN_H
#define RW_RUN_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "arr.h"
#include "cfi.h"
#include "cli.h"
#include "clone.h"
#include "frame.h"
#include "image.h"
#include "module.h"
#include "pathmap.h"
#include "plan.h"
#include "search.h"
#include "sites.h"

#define RW_MAX_FORCE 64         /* --wrap ADDR, at most this many */

/* The command line. */
typedef struct rw_opts {
    const char   *map_path;             /* -m */
    const char   *out;                  /* -o, or defout */
    const char   *prog;                 /* PROG */
    char *const  *args;                 /* PROG's arguments (for --verify) */
    int           nargs;
    double        growth;               /* --max-stack-growth */
    double        tlimit;               /* --time-limit, CPU seconds */
    uint64_t      seed;                 /* --seed */
    int           verify, enter, explain, quiet;
    int           wrap;                 /* call sites may be wrapped (no --no-wrap) */
    int           clone;                /* functions may be cloned (no --no-clone) */
    uint64_t      force[RW_MAX_FORCE];  /* --wrap: link-time addresses of calls */
    size_t        nforce;
    char          defout[PATH_MAX];     /* PROG.arr */
    char          out_map[PATH_MAX + 16]; /* OUT.icppmap */
} rw_opts;

/* CPU seconds at the end of each phase (rw_run.t): what the report's time line shows. */
enum { RW_T_START, RW_T_READ, RW_T_ANALYSIS, RW_T_SEARCH, RW_T_MAP, RW_T_WRITE, RW_NT };

/* Everything one run makes, phase by phase (main.c); arrays per map node,
 * per map function or per call-site class as said. */
typedef struct rw_run {
    rw_opts              o;
    /* inputs */
    icpp_module         *m;                     /* PROG */
    const icpp_build_id *bid;                   /* its build-id */
    icpp_pathmap        *pm;                    /* MAP */
    char                 hex_old[2 * ICPP_BUILD_ID_MAX + 1], hex_new[2 * ICPP_BUILD_ID_MAX + 1];
    /* analysis */
    icpp_cfi            *cfi;
    rw_image             img;                   /* PROG's bytes, patched into OUT's */
    rw_frames           *fs;                    /* the verdict on every function */
    rw_plan              plan;
    /* the searches: resizing, wrapping, cloning */
    icpp_pm_stats        before, after;         /* the map's ambiguity before and after */
    int64_t              h0;                    /* the map's largest height */
    rw_sites             sites;                 /* the call sites of the map's paths */
    icpp_cli_progress    progress;              /* the search's line on a terminal */
    rw_search_opts       so;
    rw_search_result     sr;                    /* the frame paddings */
    uint32_t            *cpad;                  /* per class: its wrap padding, 0 if none */
    uint32_t            *nwrap;                 /* per node: its wrap padding (icpp_arr_node_wraps) */
    icpp_arr_pad        *wpads;                 /* functions enlarged by wrapping their calls (by address) */
    size_t               nwpads;
    icpp_arr_wrap       *wraps;                 /* the wrapped call sites, by return address */
    size_t               nwraps;
    rw_cloner           *cloner;                /* when cloning or explaining */
    int32_t             *cmax;                  /* per class: the largest padding of its clone, -1 if none */
    int32_t             *cq;                    /* per class: its clone's padding, -1 if none */
    rw_clone_set         cs;                    /* the functions copied, and the calls that call the copies */
    /* the patch and OUT's map */
    icpp_arr_pad        *pads;                  /* the frames enlarged */
    size_t               npads, n_sub, n_enter; /* ... of them by their sub immediates, by enter */
    icpp_arr_pad        *pads2;                 /* the same and the clones' paddings (OUT's map) */
    size_t               npads2;
    icpp_arr_wrap       *bidw;                  /* the wraps and the clones' calls (OUT's build-id) */
    size_t               nbidw;
    icpp_build_id        nbid;                  /* OUT's build-id */
    char                *out_abs;               /* OUT's absolute path, for its map */
    icpp_pathmap        *cpm;                   /* MAP with the clones (icpp_arr_clone_map) */
    icpp_pathmap        *npm;                   /* OUT's map */
    double               t[RW_NT];
} rw_run;

#endif
