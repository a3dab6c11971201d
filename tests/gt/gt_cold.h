/* gt_cold.h -- gcc's split-off cold parts for icpp-gt: which function each belongs to. */
#ifndef GT_COLD_H
#define GT_COLD_H

#include "gt_module.h"

/* Set up m's cold parts: those with a symbol (foo.cold -> foo) now; code
 * without a symbol is judged when asked about (gt_cold_owner). */
void gt_cold_find(gt_module *m);
void gt_cold_free(gt_module *m);

/* If the function starting at `start` is a cold part: its owner's start and
 * name (NULL when the owner has no symbol).  by_fde: start is an FDE's start
 * that no symbol covers, to be judged by the rule of docs/definitions.md
 * ("cold part") from the code that branches into it. */
bool gt_cold_owner(gt_module *m, uint64_t start, bool by_fde, uint64_t *owner, const char **name);

#endif
