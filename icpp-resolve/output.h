/* output.h -- icpp-resolve's output formats, each written from a finished profile. */
#ifndef ICPP_RESOLVE_OUTPUT_H
#define ICPP_RESOLVE_OUTPUT_H

#include <stdio.h>

#include "profile.h"

typedef struct out_opts {
    int      top;        /* rows in the text list (0 = all) */
    int      full;       /* do not fold long paths */
    uint32_t sort_ev;    /* event to rank by */
    double   min_pct;    /* tree: hide nodes below this inclusive share */
    int      sites;      /* text: show where each function was called from */
} out_opts;

void out_text(const profile *p, FILE *f, const out_opts *o);     /* hot path list */
void out_tree(const profile *p, FILE *f, const out_opts *o);     /* calling-context tree, inclusive/self */
void out_folded(const profile *p, FILE *f, const out_opts *o);   /* "a;b;c weight" lines */
void out_json(const profile *p, FILE *f, const out_opts *o);     /* everything, for scripts */
void out_speedscope(const profile *p, FILE *f, const out_opts *o); /* speedscope file format */
int  out_pprof(const profile *p, FILE *f, const out_opts *o);    /* gzipped profile.proto; <0 on failure */
void out_svg(const profile *p, FILE *f, const out_opts *o);      /* interactive flame graph, self-contained SVG */

/* The report header of text, tree and svg (as comment lines with `lead`):
 * samples and how they resolved, the maps, each binary (p->ms) and the
 * sampling's lockstep (p->ss); names and paths from the files escaped as
 * text (lib/escape.h). */
void out_header(const profile *p, FILE *out, const char *lead);

/* JSON string with escapes. */
void json_str(FILE *f, const char *s);
/* s escaped for XML text and attribute values, at most max characters;
 * bytes that are not valid UTF-8 or not allowed in XML become '?'. */
void xml_put(FILE *f, const char *s, size_t max);

#endif
