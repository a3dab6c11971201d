/* ftab.h -- one entry of an ELF file's function table: start, size, owner, name, where it was found. */
#ifndef ICPP_FTAB_H
#define ICPP_FTAB_H

#include <stdint.h>

/* lib/functab.h builds the table; lib/coldpart.h's rule gives stripped cold
 * parts their owners in it.  Types only, so that the rule needs nothing of
 * the builder that calls it. */

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

#endif
