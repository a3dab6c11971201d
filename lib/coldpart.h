/* coldpart.h -- split-off cold parts of stripped code: the one function whose code jumps into them. */
#ifndef ICPP_COLDPART_H
#define ICPP_COLDPART_H

#include <stddef.h>
#include <stdint.h>

#include "ftab.h"
#include "insn.h"

/* The library's decoder (Zydis).  The training agent passes its own length
 * decoder, which agrees with Zydis at every byte (agent tests). */
void icpp_insn_decode_zydis(const uint8_t *code, size_t avail, icpp_insn *out);

/* Where the code of link-time addresses [vaddr, vaddr + size) is in the
 * image: bytes img[off .. off + size). */
typedef struct icpp_code_seg {
    uint64_t vaddr, off, size;
} icpp_code_seg;

/* The rule of docs/definitions.md ("cold part") for code without a symbol:
 * an FDE-only entry of v[0..n) (sorted, as icpp_functab_build makes it)
 * that no direct call reaches, whose address no RIP-relative operand of
 * another entry's code takes (its first byte), and that direct jumps from
 * outside it reach from the code of exactly one function F (its parent) is
 * F's cold part if it is not a function's entry: its FDE starts inside a
 * frame (entry->framed), or one of F's conditional jumps lands past its
 * first byte -- for an entry that is not framed, jumps back from its own
 * framed parts not counted.  A block with CFA = rsp + 8 at its start
 * reached only there (jmp or jcc) is a tail-called function, and one
 * reached past its start only by plain jmps a function that shares its body
 * (glibc's mempcpy jumps into memcpy's).  Its owner: parents followed, at
 * most 8 links, to an entry that has none.
 * Code is decoded with `decode` linearly over every entry's [addr,
 * addr + size), from the image's executable segments segs[0..nseg);
 * nothing is decoded when v has no FDE-only entry.  Returns how many
 * entries got an owner, -1 if out of memory.  The image is untrusted:
 * every range is checked against len. */
int icpp_coldpart_link(const uint8_t *img, size_t len, const icpp_code_seg *segs, size_t nseg, icpp_insn_decoder decode,
                       icpp_ftab_entry *v, size_t n);

#endif
