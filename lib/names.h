/* names.h -- function names for people in a path map: from each module's symbols or its separate debug file, demangled. */
#ifndef ICPP_NAMES_H
#define ICPP_NAMES_H

#include "err.h"
#include "pathmap.h"

/* Name the functions the map has no name for (fn_ADDR, as the training
 * agent calls an unnamed function, or "") with the name their module's
 * function table has at that address (lib/module: the binary's symbols,
 * else its separate debug file's -- docs/debuginfo.md), where the module's
 * file at the map's path still has the map's build-id; demangle the names of
 * the others (C++).  A name the map has is never replaced: it is what
 * training recorded.  This is where stripped functions get their real names,
 * in icpp-train (the map written) and icpp-resolve (maps trained before the
 * debug file was installed).  Only names change, never an identity.
 * A debug file refused (another build-id, a wrong CRC: lib/debuginfo.h) is
 * never used; note[0..notesz) gets one line about the refusals for the
 * user ("" when there were none).  Returns 0, or -ENOMEM with *err set. */
int icpp_names_refresh(icpp_pathmap *pm, char *note, size_t notesz, icpp_err *err);

#endif
