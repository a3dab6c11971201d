/* functab.h -- an ELF file's function table and build-id from its raw bytes (no ELF library: the training agent uses it too). */
#ifndef ICPP_FUNCTAB_H
#define ICPP_FUNCTAB_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "err.h"
#include "ftab.h"
#include "insn.h"

/* Every function of the ELF image img[0..len) (a whole file), sorted by
 * address, one entry per start: FUNC and IFUNC symbols of .symtab and
 * .dynsym with aliases folded (preferred name: global, then weak, then
 * local; fewest leading '_'; shortest), plus the starts of .eh_frame FDEs
 * that no sized symbol covers (stripped code).  gcc's split-off cold parts
 * ("foo.cold", or stripped: lib/coldpart.h) get owner = foo, the rule of
 * docs/definitions.md.  *out is malloc'd; names point into img.
 * The image is untrusted: every offset is checked. */
int icpp_functab_build(const uint8_t *img, size_t len, icpp_ftab_entry **out, size_t *n, icpp_err *err);

/* The same, decoding code (for stripped cold parts) with `decode`
 * (lib/insn.h); icpp_functab_build uses lib/lde.h's decoder (the same table
 * as Zydis's, test agent-lde-zydis). */
int icpp_functab_build_with(const uint8_t *img, size_t len, icpp_insn_decoder decode, icpp_ftab_entry **out,
                            size_t *n, icpp_err *err);

/* The contents of the section named `name` in the image: *sec, *n; -1 if
 * there is none, it has no file bytes (SHT_NOBITS) or lies outside the image. */
int icpp_functab_section(const uint8_t *img, size_t len, const char *name, const uint8_t **sec, size_t *n);

/* The NT_GNU_BUILD_ID note of the image (len 0 if none). */
int icpp_functab_build_id(const uint8_t *img, size_t len, icpp_build_id *out);

#endif
