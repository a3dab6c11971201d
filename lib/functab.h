/* functab.h -- an ELF file's function table and build-id from its raw bytes (no ELF library: the training agent uses it too). */
#ifndef ICPP_FUNCTAB_H
#define ICPP_FUNCTAB_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "err.h"

typedef enum icpp_func_source {
    ICPP_FSRC_SYMTAB = 1,   /* .symtab */
    ICPP_FSRC_DYNSYM,       /* .dynsym */
    ICPP_FSRC_FDE,          /* start of an .eh_frame FDE no symbol covers */
} icpp_func_source;

typedef struct icpp_ftab_entry {
    uint64_t    addr;       /* link-time start */
    uint64_t    size;       /* bytes; 0 if unknown */
    uint64_t    owner;      /* function whose frame this code runs in (foo for foo.cold) */
    const char *sym;        /* symbol name, pointing into the image; NULL for FDE-only code */
    uint8_t     source;     /* icpp_func_source */
    uint8_t     bind;       /* STB_* of the chosen symbol */
    uint8_t     signal;     /* overlaps signal-return trampoline code (an 'S' FDE, e.g.
                               glibc's __restore_rt): never entered by a call, never hook it */
    uint8_t     framed;     /* FDE-only: its FDE starts inside a frame (CFA is not rsp+8 there),
                               so no call enters it there (lib/coldpart.h) */
    uint8_t     plt;        /* PLT stubs (.plt, .plt.sec, .plt.got, .plt.bnd): not a function; a sample
                               or frame there belongs to the calling context (never hook it) */
} icpp_ftab_entry;

/* Every function of the ELF image img[0..len) (a whole file), sorted by
 * address, one entry per start: FUNC and IFUNC symbols of .symtab and
 * .dynsym with aliases folded (preferred name: global, then weak, then
 * local; fewest leading '_'; shortest), plus the starts of .eh_frame FDEs
 * that no sized symbol covers (stripped code).  gcc's split-off cold parts
 * ("foo.cold", or stripped: lib/coldpart.h) get owner = foo, the rule of
 * docs/definitions.md.  *out is malloc'd; names point into img.
 * The image is untrusted: every offset is checked. */
int icpp_functab_build(const uint8_t *img, size_t len, icpp_ftab_entry **out, size_t *n, icpp_err *err);

/* The same, decoding code (for stripped cold parts) with `decode` (the
 * type is lib/coldpart.h's); icpp_functab_build uses lib/lde.h's decoder (the same table as Zydis's, test agent-lde-zydis). */
typedef struct icpp_insn icpp_insn;
int icpp_functab_build_with(const uint8_t *img, size_t len, void (*decode)(const uint8_t *, size_t, icpp_insn *),
                            icpp_ftab_entry **out, size_t *n, icpp_err *err);

/* The contents of the section named `name` in the image: *sec, *n; -1 if
 * there is none, it has no file bytes (SHT_NOBITS) or lies outside the image. */
int icpp_functab_section(const uint8_t *img, size_t len, const char *name, const uint8_t **sec, size_t *n);

/* The NT_GNU_BUILD_ID note of the image (len 0 if none). */
int icpp_functab_build_id(const uint8_t *img, size_t len, icpp_build_id *out);

#endif
