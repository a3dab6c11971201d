/* check.h -- icpp-resolve --check: resolved paths against the true stacks of a --validate recording. */
#ifndef ICPP_RESOLVE_CHECK_H
#define ICPP_RESOLVE_CHECK_H

#include <stdio.h>

#include "learn.h"
#include "pathmap.h"

/* Replay `samples` against the map and print the accuracy report (text, or
 * JSON if json).  Only profile samples are judged: learn samples are never
 * judged, and a --validate sample's stack copy is truth, never learning
 * input.  ls: what learning added to the map (NULL if it was off).
 * complete: complete missing CIDs (lib/complete.h), judging the inferred
 * paths on their own (completion adds nodes to pm).
 * Returns 0, or 1 with a message on stderr. */
int check_run(const char *samples, icpp_pathmap *pm, const char *map_path, FILE *out, int json,
              const icpp_learn_stats *ls, uint32_t votes, const uint8_t *novel, size_t nnovel, int complete);

#endif
