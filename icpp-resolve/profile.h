/* profile.h -- icpp-resolve's profile: resolved sample weights per path-map node and event, plus what did not resolve. */
#ifndef ICPP_RESOLVE_PROFILE_H
#define ICPP_RESOLVE_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "pathmap.h"
#include "replay.h"
#include "resolve.h"

#define PROF_MAX_EVENTS 8

/* Samples that reached no path-map node, grouped by a label
 * ("[missing] func" or "[unresolved: reason] module:func"). */
typedef struct prof_extra {
    char  *label;
    int    kind;                        /* ICPP_RES_MISSING or ICPP_RES_UNRESOLVED */
    double w[PROF_MAX_EVENTS];
} prof_extra;

typedef struct profile {
    const icpp_pathmap *pm;
    const char  *map_path;
    uint32_t     nev;
    char         ev_names[PROF_MAX_EVENTS][128];
    size_t       nnodes;
    double      *self;                  /* [node * PROF_MAX_EVENTS + ev] */
    double      *self_amb;              /* the ambiguous part of self */
    double      *incl;                  /* inclusive, filled by prof_finish */
    prof_extra  *extra;
    size_t       nextra, capextra;
    uint64_t     samples[PROF_MAX_EVENTS];
    uint64_t     by_kind[PROF_MAX_EVENTS][ICPP_RES_MAX];
    uint64_t     by_status[ICPP_RS_MAX];        /* unresolved samples by replay status, all events */
    uint64_t     lost;
    size_t       truncated;
    int          clean_end;
    char         command[1024];
    char         binary[1024];          /* main module of the map */
    char         map_build_id[2 * ICPP_BUILD_ID_MAX + 1];
    struct icpp_module **mods;          /* the map's modules, opened for source lines */
    uint8_t     *mods_tried;
} profile;

int  prof_init(profile *p, const icpp_pathmap *pm, const char *map_path);
void prof_free(profile *p);
/* Add one sample's resolution. */
int  prof_add(profile *p, const icpp_replay *rp, const icpp_rsample *s, const icpp_resolution *r);
/* After the last sample: inclusive weights, event names, counters. */
void prof_finish(profile *p, const icpp_replay *rp);

/* The report header every format starts with (as comment lines with `lead`). */
void prof_header(const profile *p, FILE *out, const char *lead);
double prof_total(const profile *p, uint32_t ev);
/* Path of node n as "a;b;c" with names, into buf. */
const char *prof_path_str(const profile *p, uint32_t node, const char *sep, char *buf, size_t bufsz);
const char *prof_func_name(const profile *p, uint32_t func);
/* Where node's function was called from (its most frequent call site): the
 * caller's "file:line" from DWARF, else "module+0xaddr"; "" for none. */
const char *prof_site(profile *p, uint32_t node, char *buf, size_t bufsz);

#endif
