/* lde.h -- x86-64 (long mode) instruction length decoder: length and relative branch target from const tables, no libc. */
#ifndef ICPP_LDE_H
#define ICPP_LDE_H

#include <stddef.h>
#include <stdint.h>

#include "insn.h"

#define ICPP_LDE_MAX_LEN 15

/* icpp_lde_insn.enc */
enum {
    ICPP_LDE_LEGACY,      /* no VEX/EVEX/XOP prefix (map 0, 0F, 0F38, 0F3A) */
    ICPP_LDE_3DNOW,       /* 0F 0F modrm ... suffix-opcode */
    ICPP_LDE_VEX,         /* C4 / C5 */
    ICPP_LDE_EVEX,        /* 62 (always EVEX in 64-bit mode) */
    ICPP_LDE_MVEX,        /* 62 with P1 bit 2 clear (Knights Corner; Zydis decodes it) */
    ICPP_LDE_XOP,         /* 8F with map select >= 8 (AMD) */
};

/* icpp_lde_insn.prefixes: legacy prefixes seen (any order, any count) */
#define ICPP_LDE_P_66     0x01
#define ICPP_LDE_P_67     0x02
#define ICPP_LDE_P_LOCK   0x04
#define ICPP_LDE_P_F2     0x08
#define ICPP_LDE_P_F3     0x10
#define ICPP_LDE_P_SEG    0x20    /* 26 2E 36 3E 64 65 */

typedef struct icpp_lde_insn {
    uint8_t len;            /* bytes, 1..15 */
    uint8_t enc;            /* ICPP_LDE_LEGACY ... XOP */
    uint8_t map;            /* 0 one-byte, 1 0F, 2 0F38, 3 0F3A; VEX/EVEX/MVEX/XOP:
                               the prefix's map field (VEX 0-3, EVEX 1-3 5 6, MVEX
                               1-3, XOP 8-10); 3DNow: 1 */
    uint8_t opcode;         /* the opcode byte (3DNow: the suffix byte) */
    uint8_t has_modrm;      /* 1 if a ModRM byte follows the opcode */
    uint8_t modrm;          /* that byte (0 if none) */
    uint8_t prefixes;       /* ICPP_LDE_P_* */
    uint8_t mandatory;      /* legacy: 0x66, 0xF2 or 0xF3 as an SSE opcode takes it
                               (the last F2/F3, else 66), 0 if none; VEX/EVEX/MVEX/
                               XOP: the pp field's equivalent */
    uint8_t rex;            /* REX byte in effect (directly before the opcode), 0 = none */
    uint8_t riprel;         /* the memory operand is [rip + disp32] */
    int32_t disp;           /* riprel: that disp32 (operand address = address + len + disp), else 0 */
    uint8_t rel_size;       /* relative branch displacement: 0 = none, else 1, 2 or 4
                               bytes, always the instruction's last bytes */
    int32_t rel;            /* its value: target = address + len + rel */
} icpp_lde_insn;

/* Decode the instruction at code[0..avail) (at most 15 bytes are read).
 * Returns its length and fills *out, or returns 0 if the bytes do not form
 * a complete valid instruction (undefined opcode, invalid ModRM form,
 * misplaced LOCK/REX/66/F2/F3 before VEX/EVEX/XOP, longer than 15 bytes or
 * than avail).  Relative branches (rel_size != 0): jcc rel8/rel32, jmp
 * rel8/rel32, call rel32, loop/loope/loopne/jrcxz rel8, xbegin rel32 (rel16
 * with 66 and no REX.W), and Knights Corner's jkzd/jknzd (VEX), which Zydis
 * decodes.  66 does not shorten jcc/jmp/call rel32 (64-bit mode, as Intel
 * CPUs and Zydis do).  Lengths and targets equal Zydis's wherever Zydis
 * decodes (tests/test_lde_zydis.c checks every byte offset of real
 * binaries); some encodings Zydis rejects are accepted here (see lde.c).
 * Pure function of the bytes: no state, no libc, safe in any thread. */
size_t icpp_lde_decode(const uint8_t *code, size_t avail, icpp_lde_insn *out);

/* Is the decoded instruction one Zydis calls NOP: 90 (not pause, not xchg
 * with r8), 0F 1F /r, the reserved-nop hints 0F 19, 0F 1C, 0F 1D, 0F 1E
 * (except cldemote, endbr64/32, rdssp), 0F 18 and 0F 0D except their
 * prefetch memory forms?  (Zydis also calls some MPX encodings of 0F 1A /
 * 0F 1B NOP; they are not recognized here.) */
int icpp_lde_is_nop(const icpp_lde_insn *in);

/* The function table's decoder (lib/coldpart.h: stripped cold parts found
 * from the jumps into them), for icpp_functab_build_with: ~4x faster than
 * Zydis on every byte of a module, and the same table (agent-lde-zydis). */
void icpp_lde_coldpart(const uint8_t *code, size_t avail, icpp_insn *out);

#endif
