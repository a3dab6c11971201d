/* coldpart.c -- split-off cold parts of stripped code: the one function whose code jumps into them. */
#include "coldpart.h"

#include <Zydis/Zydis.h>
#include <stdlib.h>
#include <string.h>

/* What the jumps and calls into one FDE-only entry say about it. */
typedef struct cand {
    uint64_t from;          /* owner of the function that jumps into it (UINT64_MAX: none yet) */
    uint8_t  called;        /* a direct call reaches it, or code takes its address: a function */
    uint8_t  several;       /* jumps come from more than one function */
    uint8_t  not_tail;      /* a conditional jump, or a jump past its first byte */
} cand;

/* Index of the entry whose [addr, addr + size) holds a, or SIZE_MAX. */
static size_t entry_at(const icpp_ftab_entry *v, size_t n, uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return SIZE_MAX;
    const icpp_ftab_entry *e = &v[lo - 1];
    return a - e->addr < e->size ? lo - 1 : SIZE_MAX;
}

/* The code of [addr, addr + size) in the image, or NULL. */
static const uint8_t *code_at(const uint8_t *img, size_t len, const icpp_code_seg *segs, size_t nseg, uint64_t addr,
                              uint64_t size)
{
    for (size_t i = 0; i < nseg; i++) {
        const icpp_code_seg *s = &segs[i];
        if (addr < s->vaddr || addr - s->vaddr > s->size || size > s->size - (addr - s->vaddr))
            continue;
        uint64_t off = s->off + (addr - s->vaddr);
        if (off > len || size > len - off)
            return NULL;
        return img + off;
    }
    return NULL;
}

void icpp_insn_decode_zydis(const uint8_t *code, size_t avail, icpp_insn *out)
{
    ZydisDecoder d;     /* a few stores: cheaper than sharing one between threads */
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecoderEnableMode(&d, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
    ZydisDecodedInstruction in;
    memset(out, 0, sizeof *out);
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&d, NULL, code, avail, &in)))
        return;
    out->len = in.length;
    if ((in.attributes & ZYDIS_ATTRIB_HAS_MODRM) && in.raw.modrm.mod == 0 && in.raw.modrm.rm == 5 &&
        in.raw.disp.size == 32 && in.address_width == 64) {
        out->branch = ICPP_INSN_RIPREF;     /* [rip + disp32]: no SIB, so rm 5 with mod 0 is rip (not eip) */
        out->rel = in.raw.disp.value;
        return;
    }
    if (in.encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY || !in.raw.imm[0].is_relative)
        return;
    uint8_t op = in.opcode;
    if (in.opcode_map == ZYDIS_OPCODE_MAP_DEFAULT)
        out->branch = op == 0xe8 ? ICPP_INSN_CALL : op == 0xe9 || op == 0xeb ? ICPP_INSN_JMP
                    : op >= 0x70 && op <= 0x7f ? ICPP_INSN_JCC : ICPP_INSN_OTHER;
    else if (in.opcode_map == ZYDIS_OPCODE_MAP_0F && op >= 0x80 && op <= 0x8f)
        out->branch = ICPP_INSN_JCC;
    out->rel = in.raw.imm[0].value.s;
}

int icpp_coldpart_link(const uint8_t *img, size_t len, const icpp_code_seg *segs, size_t nseg, icpp_insn_decoder decode,
                       icpp_ftab_entry *v, size_t n)
{
    size_t ncand = 0;
    for (size_t i = 0; i < n; i++)
        ncand += v[i].source == ICPP_FSRC_FDE && v[i].owner == v[i].addr && !v[i].signal;
    if (ncand == 0)
        return 0;
    cand *c = calloc(n, sizeof *c);
    if (!c)
        return -1;
    for (size_t i = 0; i < n; i++)
        c[i].from = UINT64_MAX;
    for (size_t j = 0; j < n; j++) {
        const uint8_t *code = v[j].size ? code_at(img, len, segs, nseg, v[j].addr, v[j].size) : NULL;
        if (!code)
            continue;
        icpp_insn in;
        for (uint64_t o = 0; o < v[j].size;) {
            decode(code + o, v[j].size - o, &in);
            if (in.len == 0 || in.len > v[j].size - o) {
                o++;
                continue;
            }
            uint64_t at = v[j].addr + o;
            o += in.len;
            if (in.branch == ICPP_INSN_OTHER)
                continue;
            uint64_t t = at + in.len + (uint64_t)in.rel;
            size_t k = entry_at(v, n, t);
            if (k == SIZE_MAX || k == j || v[k].source != ICPP_FSRC_FDE || v[k].owner != v[k].addr || v[k].signal)
                continue;
            if (in.branch == ICPP_INSN_CALL || in.branch == ICPP_INSN_RIPREF) {
                /* called, or its address taken (an IFUNC resolver's lea of the variant it picks):
                 * a function, even if another one also jumps into it */
                if (in.branch == ICPP_INSN_CALL || t == v[k].addr)
                    c[k].called = 1;
                continue;
            }
            uint64_t src = v[j].owner;     /* an FDE-only jumper: itself, followed below */
            if (c[k].from == UINT64_MAX)
                c[k].from = src;
            else if (c[k].from != src)
                c[k].several = 1;
            if (in.branch == ICPP_INSN_JCC || t != v[k].addr)
                c[k].not_tail = 1;
        }
    }
    /* Owners: a part's jumper may itself be a part (follow, bounded). */
    int linked = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].from == UINT64_MAX || c[i].called || c[i].several || !(c[i].not_tail || v[i].framed))
            continue;
        uint64_t o = c[i].from;
        for (int hop = 0; hop < 8; hop++) {
            size_t k = entry_at(v, n, o);
            if (k == SIZE_MAX || v[k].addr != o || c[k].from == UINT64_MAX || c[k].called || c[k].several ||
                !(c[k].not_tail || v[k].framed) || c[k].from == v[i].addr)
                break;
            o = c[k].from;
        }
        if (o != v[i].addr) {
            v[i].owner = o;
            linked++;
        }
    }
    free(c);
    return linked;
}
