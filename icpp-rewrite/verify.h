/* verify.h -- --verify: run PROG and OUT alike, compare their output, train OUT and check every height against the prediction. */
#ifndef RW_VERIFY_H
#define RW_VERIFY_H

#include <stddef.h>

#include "arr.h"

typedef struct rw_verify_opts {
    const char         *prog;       /* PROG (any path) */
    const char         *out;        /* OUT, already written */
    const char         *out_map;    /* OUT.icppmap, already written */
    char *const        *args;       /* the program's arguments */
    int                 nargs;
    const icpp_arr_pad *pads;       /* the paddings OUT has */
    size_t              npads;
    const icpp_arr_wrap *wraps;     /* the call sites OUT wraps, by return address */
    size_t              nwraps;
    const icpp_arr_clone *clones;   /* the functions OUT copies, and the calls that call the copies */
    size_t              nclones;
    const icpp_arr_range *ranges;   /* PROG's code, for icpp_arr_callers */
    size_t              nranges;
    int                 quiet;
} rw_verify_opts;

/* Prints its findings on stdout; returns 0 when everything matched, 1 when
 * something differs, -1 when it could not run (message on stderr). */
int rw_verify(const rw_verify_opts *o);

#endif
