/* reloc.h -- move a function's first instructions elsewhere (Zydis): rip-relative fix-ups, branches re-encoded. */
#ifndef ICPP_AGENT_RELOC_H
#define ICPP_AGENT_RELOC_H

#include <stddef.h>
#include <stdint.h>

#define ICPP_RELOC_MAX_CODE 192   /* relocated code + jmp back + literals */
#define ICPP_RELOC_MAX_INSN 16

/* The relocated copy of [src_addr, src_addr + src_len) followed by a
 * `jmp rel32` back to src_addr + src_len and a pool of 8-byte literals.
 * Every branch is emitted in its rel32 form, so `size` does not depend on
 * the destination address: relocate once at any address to learn the size,
 * then again at the final one. */
typedef struct icpp_agent_reloc {
    uint8_t  code[ICPP_RELOC_MAX_CODE];
    uint32_t size;                      /* bytes of code used */
    uint32_t src_len;                   /* original bytes moved */
    uint32_t code_end;                  /* end of their copies in code[]: the jmp back */
    uint32_t ninsn;                     /* instructions moved */
    uint8_t  src_off[ICPP_RELOC_MAX_INSN];  /* instruction i starts here in the original */
    uint8_t  dst_off[ICPP_RELOC_MAX_INSN];  /* ... and here in code[] */
    uint64_t ref_lo, ref_hi;            /* absolute addresses the code refers to */
    uint32_t flow_end;                  /* end offset of the first moved ret/jmp/ud2/
                                           hlt/int3 (code may stop there); 0 = none */
} icpp_agent_reloc;

/* Relocate whole instructions starting at src (the bytes of runtime address
 * src_addr; `avail` of them belong to the function and only those are
 * read) until at least min_len
 * bytes are covered, for execution at dst_addr.
 *
 * Handled: any position-independent instruction (copied); rip-relative
 * memory operands (disp32 recomputed); jmp/jcc rel8/rel32 (re-encoded as
 * rel32, targets inside the moved range mapped to their copies); loop/
 * jrcxz (rel8 only: `op +2; jmp +5; jmp rel32`); call rel32 as `push
 * [rip+literal original return address]; jmp rel32` so the callee sees the
 * original return address -- allowed only if that address is at or past
 * src_addr + min_len (not inside the overwritten bytes).
 * Refused (ICPP_AGENT_R_UNRELOCATABLE): undecodable bytes, indirect calls,
 * xbegin, a branch into the middle of a moved instruction, a rel32 that
 * cannot reach from dst_addr.  ICPP_AGENT_R_TOO_SHORT when the instructions
 * run past `avail`.  Returns 0 on success; *why (if non-NULL) gets a static
 * message on failure. */
int icpp_agent_relocate(const uint8_t *src, size_t avail, uint64_t src_addr, size_t min_len,
                        uint64_t dst_addr, icpp_agent_reloc *out, const char **why);

/* Relative branch target of the instruction at `code` (runtime address
 * addr, `avail` bytes readable): returns its length and sets *target
 * (0 if it has no relative branch target); returns 0 if undecodable.
 * Used to scan function bodies for branches into patched bytes, so it is
 * the fast length decoder (lde.c), not Zydis: ~5x faster, same lengths and
 * targets wherever Zydis decodes (test_lde_zydis). */
size_t icpp_agent_branch_target(const uint8_t *code, size_t avail, uint64_t addr, uint64_t *target);

/* Bytes of alignment padding at code[0..avail): whole nop instructions
 * (any form icpp_lde_is_nop knows) and int3 bytes, up to the first
 * other instruction.  A function shorter than 5 bytes followed by >= 5 -
 * size of these can still take the jmp (its relocated copy includes the
 * padding, which never runs). */
size_t icpp_agent_padding(const uint8_t *code, size_t avail);

#endif
