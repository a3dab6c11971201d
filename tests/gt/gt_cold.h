/* gt_cold.h -- gcc's split-off cold parts for icpp-gt: which function each belongs to. */
#ifndef GT_COLD_H
#define GT_COLD_H

#include "gt_module.h"

/* Find m's cold parts (m->parts): by symbol (foo.cold -> foo), and for
 * code without a symbol by the rule of docs/definitions.md ("cold part"). */
void gt_cold_find(gt_module *m);

/* If the function starting at `start` is a cold part: its owner's start and
 * name (NULL when the owner has no symbol). */
bool gt_cold_owner(const gt_module *m, uint64_t start, uint64_t *owner, const char **name);

#endif
