/* sibling.h -- the files a tool finds beside its own executable: another tool (icpp-train for --verify), the training agent. */
#ifndef ICPP_SIBLING_H
#define ICPP_SIBLING_H

#include <stddef.h>

/* The file a tool runs or loads with it, first found of: the path in the
 * environment variable env (when set: as given, not checked); then each of
 * rel[0..nrel) -- paths relative to the directory of the running executable
 * (/proc/self/exe), "" skipped -- that access(2) allows with `mode` (X_OK for
 * a program, R_OK for a library), as its real path.  Returns a malloc'd path
 * (free it), or NULL when none is found (or out of memory): the caller
 * decides the fallback (PATH, an installed path) and the message. */
char *icpp_sibling_find(const char *env, const char *const *rel, size_t nrel, int mode);

#endif
