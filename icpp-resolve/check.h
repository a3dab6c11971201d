/* check.h -- icpp-resolve --check: resolved paths against the true stacks of a --validate recording. */
#ifndef ICPP_RESOLVE_CHECK_H
#define ICPP_RESOLVE_CHECK_H

#include <stdio.h>

#include "mapset.h"

/* Replay `samples` against each process's map (ms, prepared) and print the
 * accuracy report (text, or JSON if json), overall and per binary.  Only
 * profile samples are judged: learn samples are never judged, and a
 * --validate sample's stack copy is truth, never learning input.  What
 * learning added (and the votes) come from ms (mapset.h); with completion
 * (ms->complete) the inferred paths are judged on their own, against the
 * map completion added them to.  Returns 0, or 1
 * with a message on stderr. */
int check_run(const char *samples, mapset *ms, FILE *out, int json);
/* --check-only FUNC: judge only the samples whose true stack passes
 * through a function of that name (a phase of a program, one subsystem);
 * NULL: every sample. */
void check_only(const char *func);

#endif
