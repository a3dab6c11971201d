/* coldpart.h -- split-off cold parts of stripped code: the one function whose code jumps into them. */
#ifndef ICPP_COLDPART_H
#define ICPP_COLDPART_H

#include <stddef.h>
#include <stdint.h>

#include "functab.h"

/* Where the code of link-time addresses [vaddr, vaddr + size) is in the
 * image: bytes img[off .. off + size). */
typedef struct icpp_code_seg {
    uint64_t vaddr, off, size;
} icpp_code_seg;

/* The rule of docs/definitions.md ("cold part") for code without a symbol:
 * an FDE-only entry of v[0..n) (sorted, as icpp_functab_build makes it)
 * that no direct call reaches, and that direct jumps from outside it reach
 * from the code of exactly one function F is F's cold part (its owner
 * becomes F's owner) if it is not a function's entry: its FDE starts inside
 * a frame (entry->framed), or at least one of the jumps is conditional or
 * lands past its first byte.  (A block with CFA = rsp + 8 at its start
 * reached only by plain jmps to its start is a tail-called function.)  Code is decoded (Zydis) linearly over every entry's
 * [addr, addr + size), from the image's executable segments segs[0..nseg);
 * nothing is decoded when v has no FDE-only entry.  Returns how many
 * entries got an owner, -1 if out of memory.  The image is untrusted:
 * every range is checked against len. */
int icpp_coldpart_link(const uint8_t *img, size_t len, const icpp_code_seg *segs, size_t nseg, icpp_ftab_entry *v,
                       size_t n);

#endif
