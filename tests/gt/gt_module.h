/* gt_module.h -- ELF modules for icpp-gt: load bias, CFI, function symbols.
 *
 * Deliberately independent of lib/: the ground truth must not share code
 * (and so bugs) with the tools it checks.  Only elfutils is used. */
#ifndef GT_MODULE_H
#define GT_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <elfutils/libdw.h>
#include <gelf.h>

typedef struct gt_sym {
    uint64_t    addr;           /* link-time start */
    uint64_t    size;           /* st_size (0 = unknown) */
    const char *name;           /* points into the ELF string table */
    int         rank;           /* tie-break among aliases: lower wins */
} gt_sym;

typedef struct gt_load {
    uint64_t vaddr, offset, filesz;  /* one PT_LOAD program header */
    uint32_t flags;                  /* PF_X etc. */
} gt_load;

/* A cold part with a symbol (gt_cold.h): code of another function's frame. */
typedef struct gt_part {
    uint64_t    start;          /* link-time start of the part */
    uint64_t    owner;          /* start of the function it belongs to */
    const char *owner_name;     /* its symbol */
} gt_part;

typedef struct gt_cold gt_cold;

typedef struct gt_module {
    char       *path;           /* as mapped ("/usr/lib/..." or "[vdso]") */
    int         index;          /* number in the output's O lines, -1 = not yet */
    bool        ok;             /* false: could not open; error says why */
    char        error[256];
    char        build_id[41];   /* hex, "" if none */
    int         fd;
    void       *image;          /* private copy for in-memory modules */
    Elf        *elf;
    Dwarf      *dw;             /* only for .debug_frame; may be NULL */
    Dwarf_CFI  *eh_cfi;         /* .eh_frame, may be NULL */
    Dwarf_CFI  *dbg_cfi;        /* .debug_frame, may be NULL */
    uint64_t    entry;          /* e_entry (link-time), 0 if none */
    uint64_t    entry_end;      /* end of the entry code: the next FDE */
    gt_load    *loads;   size_t nloads;
    gt_sym     *syms;    size_t nsyms;   /* FUNC symbols sorted by addr, rank */
    uint64_t   *fdes;    size_t nfdes;   /* FDE starts from .eh_frame_hdr */
    gt_cold    *cold;           /* its cold parts (gt_cold.c) */
} gt_module;

/* Return the module for PATH, opening it on first use; the same pointer for
 * the same path afterwards (modules live until gt_module_free_all).  Never
 * NULL: a file that cannot be opened gives a module with ok == false. */
gt_module *gt_module_get(const char *path);

/* The vdso has no file: icpp-gt reads its own (the kernel maps the same image
 * into every 64-bit process).  Returns the "[vdso]" module. */
gt_module *gt_module_vdso(void);

/* Load bias of a mapping of M that starts at START with file offset PGOFF
 * (EXEC: the mapping is executable): runtime address = link-time address +
 * bias.  Returns false when no PT_LOAD covers PGOFF. */
bool gt_module_bias(const gt_module *m, uint64_t start, uint64_t pgoff,
                    bool exec, uint64_t *bias);

/* The function containing link-time address ADDR: symbol start and name if
 * a symbol covers it, else (only if HAVE_FDE: ADDR is known to be covered by
 * an FDE) the start of the FDE (.eh_frame_hdr) and name NULL; a cold part
 * (gt_cold.h) gives its owner's start and name instead.  Returns false if
 * neither is known (then *start = ADDR). */
bool gt_module_func(gt_module *m, uint64_t addr, bool have_fde,
                    uint64_t *start, const char **name);

/* The symbol covering link-time address ADDR (its start and name), the
 * first half of gt_module_func; false if none. */
bool gt_module_sym(const gt_module *m, uint64_t addr, uint64_t *start, const char **name);

/* CFI row for link-time address ADDR, from .eh_frame else .debug_frame.
 * The caller frees *frame.  Returns false if no FDE covers ADDR. */
bool gt_module_frame(const gt_module *m, uint64_t addr, Dwarf_Frame **frame);

void gt_module_free_all(void);

/* realloc, or exit 125 with a message when out of memory. */
void *gt_xrealloc(void *p, size_t n);

#endif
