/* module.h -- ELF modules: build-id, load bias, function table with demangled names; source lines and inlined functions from DWARF. */
#ifndef ICPP_MODULE_H
#define ICPP_MODULE_H

#include <stddef.h>
#include <stdint.h>
#include <libelf.h>

#include "debuginfo.h"
#include "defs.h"
#include "err.h"
#include "functab.h"

typedef struct icpp_module icpp_module;

typedef enum icpp_module_kind {
    ICPP_MOD_EXEC = 1,      /* ET_EXEC: fixed addresses, bias 0 */
    ICPP_MOD_PIE,           /* ET_DYN with PT_INTERP or DF_1_PIE */
    ICPP_MOD_DSO,           /* ET_DYN shared object */
} icpp_module_kind;

typedef struct icpp_func {
    uint64_t    addr;       /* link-time start address */
    uint64_t    size;       /* bytes; 0 if unknown (then it ends at the next function) */
    const char *name;       /* demangled if C++, else the symbol; "fn_<hex>" for FDE-only */
    const char *sym;        /* raw symbol name (== name for C) */
    uint8_t     source;     /* icpp_func_source */
    uint64_t    owner;      /* function whose frame this code runs in: addr itself, or for a
                               split-off part (gcc's foo.cold) the start of foo */
    uint8_t     plt;        /* PLT stubs: no function; a sample there is charged to the calling
                               context (lib/plt.h) */
} icpp_func;

/* Open an ELF file and read its headers and build-id; the function table
 * is built on the first call that needs it (not thread-safe then).
 * Returns NULL and fills *err for a missing, non-ELF or non-x86-64 file. */
icpp_module *icpp_module_open(const char *path, icpp_err *err);
void         icpp_module_close(icpp_module *m);

const char          *icpp_module_path(const icpp_module *m);
/* The separate debug file (lib/debuginfo.h), looked up at open when the
 * binary lacks a symbol table or DWARF: where it was found (fd >= 0) and
 * what was refused.  Its symbol table names the functions the binary's own
 * table lacks names for (never adding one: docs/debuginfo.md); its DWARF
 * serves icpp_module_srcline and icpp_module_inlines when the binary has
 * none. */
const icpp_debuginfo *icpp_module_debuginfo(const icpp_module *m);
/* A sample fell in m: its debug file may be asked of debuginfod (lib/debuginfo.h,
 * icpp_debuginfo_want) when its names or DWARF are used. */
void                 icpp_module_need(icpp_module *m);
Elf                 *icpp_module_elf(const icpp_module *m);
int                  icpp_module_fd(const icpp_module *m);
icpp_module_kind     icpp_module_kind_of(const icpp_module *m);
int                  icpp_module_is_static(const icpp_module *m); /* no PT_INTERP, no PT_DYNAMIC */
const icpp_build_id *icpp_module_build_id(const icpp_module *m);
/* Lowest and one-past-highest address of executable PT_LOAD segments. */
void icpp_module_text_range(const icpp_module *m, uint64_t *lo, uint64_t *hi);

/* Load bias of a mapping of file offset `pgoff` placed at runtime address
 * `start` (from /proc/PID/maps or an mmap record): runtime = bias + addr.
 * Fails if no PT_LOAD segment holds that file offset. */
int icpp_module_bias(const icpp_module *m, uint64_t start, uint64_t pgoff,
                     uint64_t *bias, icpp_err *err);

/* Function table, sorted by address, one entry per start address: see
 * icpp_functab_build (the training agent builds the same table). */
size_t           icpp_module_nfuncs(const icpp_module *m);
const icpp_func *icpp_module_funcs(const icpp_module *m);
/* The function whose [addr, addr+size) holds `addr` (size 0: up to the next
 * function), or NULL. */
const icpp_func *icpp_module_func_at(const icpp_module *m, uint64_t addr);
/* icpp_module_func_at, and the addresses [*lo, *hi) around addr for which it
 * gives the same function (set only when it is not NULL): a caller may keep
 * them to skip the search for the next address. */
const icpp_func *icpp_module_func_span(const icpp_module *m, uint64_t addr, uint64_t *lo, uint64_t *hi);
/* The function that starts exactly at `addr`, or NULL. */
const icpp_func *icpp_module_func_start(const icpp_module *m, uint64_t addr);

/* Source file and line of link-time address addr from the module's DWARF
 * (.debug_line), or NULL where there is none.  The string lives as long as
 * the module. */
const char *icpp_module_srcline(icpp_module *m, uint64_t addr, int *line);

/* The functions inlined at link-time address addr, from the module's DWARF
 * (the DW_TAG_inlined_subroutine scopes that hold addr inside its
 * subprogram): their names into out[], outermost first -- out[0] was inlined
 * into the function that holds addr, the last one holds addr itself.
 * Returns how many (at most max: deeper ones are left out); 0 without DWARF
 * or outside any subprogram it describes.  Names are demangled like the
 * function table's and live as long as the module.  The first call indexes
 * the subprograms' pc ranges (one pass over the CUs). */
int icpp_module_inlines(icpp_module *m, uint64_t addr, const char **out, int max);

/* Copy n bytes at link-time address addr from the file image; -1 if the
 * range is not in a loaded, file-backed part of a segment. */
int icpp_module_read(const icpp_module *m, uint64_t addr, void *buf, size_t n);
/* 1 if addr is a signal-return trampoline (glibc's __restore_rt:
 * mov $15,%rax; syscall): the return address of every signal handler. */
int icpp_module_is_sigreturn(const icpp_module *m, uint64_t addr);

/* Only the build-id of an ELF file (cheap: no function table). */
int icpp_elf_build_id(const char *path, icpp_build_id *out, icpp_err *err);

/* Hex string of a build-id into buf (2*len+1 bytes); "" when len == 0. */
char *icpp_build_id_hex(const icpp_build_id *b, char *buf, size_t bufsz);

/* Demangle a C++ symbol; returns a malloc'd string or NULL if not mangled. */
char *icpp_demangle(const char *sym);

#endif
