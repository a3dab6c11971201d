/* insn.h -- one x86-64 instruction as the cold-part rule needs it (length, branch kind, target), and the decoder type that gives it. */
#ifndef ICPP_INSN_H
#define ICPP_INSN_H

#include <stddef.h>
#include <stdint.h>

/* Decoders fill it (lib/lde.h's icpp_lde_coldpart, lib/coldpart.h's
 * icpp_insn_decode_zydis); lib/coldpart.h's rule reads it.  Types only, so
 * that the decoders, the rule and the function table (lib/functab.h) share
 * it without depending on one another. */

/* One instruction, as far as the rule needs it. */
typedef enum icpp_insn_branch {
    ICPP_INSN_OTHER = 0,
    ICPP_INSN_CALL,         /* E8 call rel32 */
    ICPP_INSN_JCC,          /* 70-7F jcc rel8, 0F 80-8F jcc rel32 */
    ICPP_INSN_JMP,          /* EB jmp rel8, E9 jmp rel32 */
    ICPP_INSN_RIPREF,       /* not a branch: a [rip + disp32] memory operand (lea, mov, ...),
                               any encoding, 64-bit addressing; rel is disp32 */
} icpp_insn_branch;

typedef struct icpp_insn {
    uint8_t len;            /* bytes; 0: no valid instruction here */
    uint8_t branch;         /* icpp_insn_branch (branches: legacy encoding only) */
    int64_t rel;            /* target (branches) or operand address (RIPREF) = address + len + rel */
} icpp_insn;

/* An x86-64 instruction decoder: fill *out from code[0..avail). */
typedef void (*icpp_insn_decoder)(const uint8_t *code, size_t avail, icpp_insn *out);

#endif
