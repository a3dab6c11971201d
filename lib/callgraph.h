/* callgraph.h -- a module's static call graph from disassembly: call sites, their callees and the stack each call adds. */
#ifndef ICPP_CALLGRAPH_H
#define ICPP_CALLGRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "cfi.h"
#include "err.h"
#include "module.h"

/* Every function of a module (a split-off foo.cold part counts as foo) is
 * decoded with Zydis and walked along its control flow, tracking %rsp and
 * %rbp relative to the CFA (each instruction's effect as lib/x86stack.h
 * models it; the module's CFI table resynchronises the walk wherever its
 * rule is rsp-based).  Each call site gets
 *
 *   delta = caller's entry SP - callee's entry SP = CFA - %rsp at the call,
 *
 * the quantity a path map measures as child height - parent height.  A site
 * whose %rsp cannot be known (alloca, `and $-16,%rsp`, a merge of different
 * stack depths, an rbp rule with no tracked rsp) has no delta and is never
 * used as an edge.  See docs/resolve.md ("Completion"). */

typedef enum icpp_cg_kind {
    ICPP_CG_CALL = 1,       /* call rel32 to a function start of this module */
    ICPP_CG_TAIL,           /* jmp/jcc to another function's start with the frame torn down (CFA = rsp+8):
                               the callee replaces the caller on the stack (delta 0) */
    ICPP_CG_PLT,            /* call (or tail jmp) through the PLT/GOT to an imported symbol: `name` */
    ICPP_CG_INDIRECT,       /* call *reg / call *mem: the target is any address-taken function */
} icpp_cg_kind;

typedef struct icpp_cg_site {
    uint64_t    ret;        /* link-time address after the call (the return address); for a
                               tail jmp, the address after the jmp (never a return address) */
    uint64_t    caller;     /* function whose frame makes the call (the owner of a .cold part) */
    uint64_t    callee;     /* CALL, TAIL: function start; 0 otherwise */
    const char *name;       /* PLT: the imported symbol (lives as long as the module); else NULL */
    int32_t     delta;      /* caller entry SP - callee entry SP, bytes (valid if has_delta) */
    uint8_t     kind;       /* icpp_cg_kind */
    uint8_t     has_delta;  /* 0: the stack depth at the site is not known */
    uint8_t     tail;       /* PLT / INDIRECT reached by a jmp with the frame torn down */
} icpp_cg_site;

typedef struct icpp_callgraph icpp_callgraph;

/* Build the graph of module m with its CFA table.  NULL (and *err) only if
 * out of memory; code that does not decode just contributes no sites. */
icpp_callgraph *icpp_callgraph_build(const icpp_module *m, const icpp_cfi *cfi, icpp_err *err);
void            icpp_callgraph_free(icpp_callgraph *g);

/* All sites, sorted by ret. */
size_t              icpp_callgraph_nsites(const icpp_callgraph *g);
const icpp_cg_site *icpp_callgraph_sites(const icpp_callgraph *g);
/* The site whose return address is ret (a call, not a tail jmp), or NULL. */
const icpp_cg_site *icpp_callgraph_site_at(const icpp_callgraph *g, uint64_t ret);
/* Sites (CALL and TAIL, with a delta) whose callee is function start
 * `callee`: *out points at n pointers, valid as long as g. */
uint32_t icpp_callgraph_callers(const icpp_callgraph *g, uint64_t callee, const icpp_cg_site *const **out);
/* PLT sites (with a delta) that import `name`. */
uint32_t icpp_callgraph_plt_callers(const icpp_callgraph *g, const char *name, const icpp_cg_site *const **out);
/* The imported symbol a PLT stub starting at addr jumps to (through its
 * GOT slot), or NULL (not a stub's start, or PLT0). */
const char *icpp_callgraph_plt_name(icpp_callgraph *g, uint64_t addr);
/* Indirect sites with a delta. */
uint32_t icpp_callgraph_indirect(const icpp_callgraph *g, const icpp_cg_site *const **out);
/* 1 if the function starting at addr has its address taken (a rip-relative
 * lea or an absolute immediate in code, a pointer in data or a relocation,
 * or an exported dynamic symbol): a possible target of indirect calls. */
int icpp_callgraph_address_taken(const icpp_callgraph *g, uint64_t addr);
/* The exported function (global dynamic symbol) named `name`, or 0. */
uint64_t icpp_callgraph_export(const icpp_callgraph *g, const char *name);
/* The exported names of the function at addr (aliases included), at most max. */
uint32_t icpp_callgraph_export_names(const icpp_callgraph *g, uint64_t addr, const char **out, uint32_t max);

typedef struct icpp_cg_stats {
    size_t functions;       /* decoded (parts included) */
    size_t insns;           /* decoded instructions */
    size_t by_kind[5];      /* sites by icpp_cg_kind */
    size_t no_delta;        /* sites refused (stack depth unknown) */
    size_t address_taken;
    double build_ms;
} icpp_cg_stats;
void icpp_callgraph_get_stats(const icpp_callgraph *g, icpp_cg_stats *s);

#endif
