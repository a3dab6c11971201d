/* names.h -- function names for people in a path map: from each module's symbols or its separate debug file, demangled. */
#ifndef ICPP_NAMES_H
#define ICPP_NAMES_H

#include "err.h"
#include "pathmap.h"

/* Give every function of the map the name its module's function table has
 * at that address (lib/module: the binary's symbols, else its separate
 * debug file's -- docs/debuginfo.md), where the module's file at the map's
 * path still has the map's build-id and names it (not the fn_ADDR of an
 * unnamed function: a name the map has stays); other functions keep their
 * name, demangled if it is a C++ symbol.  The training agent names stripped
 * functions fn_ADDR; this is where they get their real names, in
 * icpp-train (the map written) and icpp-resolve (maps trained before the
 * debug file was installed).  Only names change, never an identity.
 * A debug file refused (another build-id, a wrong CRC: lib/debuginfo.h) is
 * never used; note[0..notesz) gets one line about the refusals for the
 * user ("" when there were none).  Returns 0, or -ENOMEM with *err set. */
int icpp_names_refresh(icpp_pathmap *pm, char *note, size_t notesz, icpp_err *err);

#endif
