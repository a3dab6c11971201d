/* coldpart.c -- split-off cold parts of stripped code: the one function whose code jumps into them. */
#include "coldpart.h"

#include "vec.h"

#include <Zydis/Zydis.h>
#include <stdlib.h>
#include <string.h>

/* A direct jump into an FDE-only entry from another function's code. */
typedef struct jump {
    size_t   to;            /* index of the entry jumped into */
    uint64_t from;          /* owner of the function whose code jumps (an FDE-only one: its start) */
    uint8_t  past;          /* conditional, and lands past the entry's first byte */
} jump;

static int jump_cmp(const void *a, const void *b)
{
    const jump *x = a, *y = b;
    return x->to < y->to ? -1 : x->to > y->to;
}

#define NO_PARENT UINT64_MAX
#define MAX_HOPS  8         /* parent links followed, docs/definitions.md */

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

/* The entry starting exactly at a, or SIZE_MAX. */
static size_t entry_start(const icpp_ftab_entry *v, size_t n, uint64_t a)
{
    size_t k = entry_at(v, n, a);
    return k != SIZE_MAX && v[k].addr == a ? k : SIZE_MAX;
}

/* Is v[k] an entry the rule decides (FDE-only, not yet a part by symbol, no signal trampoline)? */
static int candidate(const icpp_ftab_entry *v, size_t k)
{
    return k != SIZE_MAX && v[k].source == ICPP_FSRC_FDE && v[k].owner == v[k].addr && !v[k].signal;
}

/* Where the parents of framed parts lead from a: at most MAX_HOPS links. */
static uint64_t framed_root(const icpp_ftab_entry *v, size_t n, const uint64_t *parent, uint64_t a)
{
    for (int hop = 0; hop < MAX_HOPS; hop++) {
        size_t k = entry_start(v, n, a);
        if (!candidate(v, k) || !v[k].framed || parent[k] == NO_PARENT)
            break;
        a = parent[k];
    }
    return a;
}

/* The one function the jumps js[0..nj) into v[k] come from, skipping those
 * from the framed parts whose parents lead back to v[k] (its own parts) when
 * `own` is set; NO_PARENT if none or several.  *past: one of its jumps is
 * conditional and lands past v[k]'s first byte. */
static uint64_t one_jumper(const icpp_ftab_entry *v, size_t n, const uint64_t *parent, size_t k, const jump *js,
                           size_t nj, int own, int *past)
{
    uint64_t from = NO_PARENT;
    *past = 0;
    for (size_t i = 0; i < nj; i++) {
        uint64_t f = js[i].from;
        if (f == v[k].addr)
            continue;
        if (own) {
            size_t fk = entry_start(v, n, f);
            if (candidate(v, fk) && v[fk].framed && framed_root(v, n, parent, f) == v[k].addr)
                continue;
        }
        if (from != NO_PARENT && from != f)
            return NO_PARENT;
        from = f;
        *past |= js[i].past;
    }
    return from;
}

int icpp_coldpart_link(const uint8_t *img, size_t len, const icpp_code_seg *segs, size_t nseg, icpp_insn_decoder decode,
                       icpp_ftab_entry *v, size_t n)
{
    size_t ncand = 0;
    for (size_t i = 0; i < n; i++)
        ncand += candidate(v, i);
    if (ncand == 0)
        return 0;
    uint8_t *called = calloc(n, 1);
    uint64_t *parent = malloc(n * sizeof *parent);
    jump *js = NULL;
    size_t nj = 0, capj = 0;
    int rc = -1;
    if (!called || !parent)
        goto out;
    for (size_t i = 0; i < n; i++)
        parent[i] = NO_PARENT;
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
            if (k == j || !candidate(v, k))
                continue;
            if (in.branch == ICPP_INSN_CALL || in.branch == ICPP_INSN_RIPREF) {
                /* called, or its address taken (an IFUNC resolver's lea of the variant it picks):
                 * a function, even if another one also jumps into it */
                if (in.branch == ICPP_INSN_CALL || t == v[k].addr)
                    called[k] = 1;
                continue;
            }
            if (icpp_vec_reserve((void **)&js, &capj, nj + 1, sizeof *js, 256) < 0)
                goto out;
            js[nj++] = (jump){k, v[j].owner, in.branch == ICPP_INSN_JCC && t != v[k].addr};
        }
    }
    if (nj)
        qsort(js, nj, sizeof *js, jump_cmp);
    /* Parents: framed entries first (never a function's entry), then the
     * others, whose own framed parts' jumps back into them do not count. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t a = 0; a < nj;) {
            size_t k = js[a].to, b = a;
            while (b < nj && js[b].to == k)
                b++;
            int past;
            if (!called[k] && (pass == 0) == (v[k].framed != 0)) {
                uint64_t f = one_jumper(v, n, parent, k, js + a, b - a, pass == 1, &past);
                if (f != NO_PARENT && (v[k].framed || past))
                    parent[k] = f;
            }
            a = b;
        }
    /* Owners: follow parents, at most MAX_HOPS links, to an entry that has
     * none; a chain that comes back or goes on is no owner. */
    rc = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t o = v[i].addr;
        size_t k = i;
        for (int hop = 0; hop < MAX_HOPS && k != SIZE_MAX && parent[k] != NO_PARENT; hop++) {
            o = parent[k];
            k = o == v[i].addr ? SIZE_MAX : entry_start(v, n, o);
        }
        if (o == v[i].addr || (k != SIZE_MAX && parent[k] != NO_PARENT))
            continue;
        v[i].owner = o;
        rc++;
    }
out:
    free(called);
    free(parent);
    free(js);
    return rc;
}
