/* gt_cold.c -- gcc's split-off cold parts for icpp-gt: which function each belongs to.
 *
 * The rule is docs/definitions.md's ("cold part"), implemented here again,
 * on purpose without lib/ (which the tools share): symbols first (foo.cold,
 * foo.cold.N, foo.part.N.cold belong to the function named before
 * ".cold"); then, for FDEs no symbol covers, the jumps into them, found by
 * decoding every FDE's code with Zydis (full decode, mnemonics and
 * absolute targets), and the CFA at the FDE's first byte from libdw. */
#include "gt_cold.h"

#include <Zydis/Zydis.h>
#include <dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) {
        fprintf(stderr, "icpp-gt: out of memory\n");
        exit(125);
    }
    return p;
}

static int part_cmp(const void *a, const void *b)
{
    const gt_part *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The owner's name of "foo.cold[.N]" / "foo.part.N.cold", or NULL. */
static const gt_sym *cold_parent(const gt_module *m, const char *name)
{
    const char *c = strstr(name, ".cold");
    if (!c || c == name)
        return NULL;
    for (const char *q = c + 5; *q; q++)
        if (!(q == c + 5 ? *q == '.' : (*q >= '0' && *q <= '9')))
            return NULL;
    size_t n = (size_t)(c - name);
    for (size_t i = 0; i < m->nsyms; i++)
        if (strlen(m->syms[i].name) == n && !strncmp(m->syms[i].name, name, n))
            return &m->syms[i];
    return NULL;
}

/* The bytes of [addr, addr + n) from the file, or NULL. */
static const uint8_t *code(const gt_module *m, uint64_t addr, uint64_t n)
{
    size_t flen;
    const char *raw = elf_rawfile(m->elf, &flen);
    for (size_t i = 0; raw && i < m->nloads; i++) {
        const gt_load *l = &m->loads[i];
        if ((l->flags & PF_X) && addr >= l->vaddr && addr + n <= l->vaddr + l->filesz &&
            l->offset + (addr - l->vaddr) + n <= flen)
            return (const uint8_t *)raw + l->offset + (addr - l->vaddr);
    }
    return NULL;
}

/* Index of the FDE (start .. next start) holding addr, or -1. */
static long fde_at(const gt_module *m, uint64_t addr)
{
    long lo = 0, hi = (long)m->nfdes;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (m->fdes[mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* Is the CFA at the FDE's first byte rsp + 8 (a function entered by a call)? */
static bool entry_shape(const gt_module *m, uint64_t addr)
{
    Dwarf_Frame *fr;
    if (!gt_module_frame(m, addr, &fr))
        return true;
    Dwarf_Op *ops;
    size_t nops;
    bool call = dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx &&
                ops[0].number == 7 && ops[0].number2 == 8;
    free(fr);
    return call;
}

typedef struct fde_info {
    bool     candidate;     /* no symbol covers its start */
    bool     called, several, not_tail;
    uint64_t from;          /* function (start) whose code jumps in, 0 none */
} fde_info;

/* The function (start) the code at addr belongs to, by symbol, else its FDE. */
static uint64_t func_of(const gt_module *m, uint64_t addr, long k)
{
    uint64_t start;
    const char *name;
    if (gt_module_sym(m, addr, &start, &name)) {
        const gt_sym *p = strstr(name, ".cold") ? cold_parent(m, name) : NULL;
        return p ? p->addr : start;
    }
    return m->fdes[k];
}

void gt_cold_find(gt_module *m)
{
    size_t cap = 0;
    /* By symbol. */
    for (size_t i = 0; i < m->nsyms; i++) {
        const gt_sym *p = cold_parent(m, m->syms[i].name);
        if (!p)
            continue;
        if (m->nparts == cap) {
            cap = cap ? 2 * cap : 16;
            gt_part *np = realloc(m->parts, cap * sizeof *np);
            if (!np)
                exit(125);
            m->parts = np;
        }
        m->parts[m->nparts++] = (gt_part){m->syms[i].addr, p->addr, p->name};
    }
    /* By code, for FDEs without a symbol. */
    fde_info *fi = xcalloc(m->nfdes, sizeof *fi);
    size_t ncand = 0;
    for (size_t k = 0; k < m->nfdes; k++) {
        uint64_t start;
        const char *name;
        fi[k].candidate = !gt_module_sym(m, m->fdes[k], &start, &name) && (k == 0 || m->fdes[k] != m->fdes[k - 1]);
        ncand += fi[k].candidate;
    }
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    for (size_t k = 0; ncand && k + 1 < m->nfdes; k++) {
        uint64_t lo = m->fdes[k], hi = m->fdes[k + 1];
        const uint8_t *b = hi > lo ? code(m, lo, hi - lo) : NULL;
        if (!b)
            continue;
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        for (uint64_t o = 0; o < hi - lo;) {
            if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, b + o, hi - lo - o, &in, op))) {
                o++;
                continue;
            }
            uint64_t at = lo + o, t;
            o += in.length;
            bool call = in.mnemonic == ZYDIS_MNEMONIC_CALL;
            bool jmp = in.mnemonic == ZYDIS_MNEMONIC_JMP;
            bool jcc = in.meta.category == ZYDIS_CATEGORY_COND_BR && in.mnemonic != ZYDIS_MNEMONIC_JRCXZ &&
                       in.mnemonic != ZYDIS_MNEMONIC_JECXZ && in.mnemonic != ZYDIS_MNEMONIC_LOOP &&
                       in.mnemonic != ZYDIS_MNEMONIC_LOOPE && in.mnemonic != ZYDIS_MNEMONIC_LOOPNE;
            if (!(call || jmp || jcc) || op[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
                !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[0], at, &t)))
                continue;
            long j = fde_at(m, t);
            if (j < 0 || (size_t)j == k || !fi[j].candidate)
                continue;
            if (call) {
                fi[j].called = true;
                continue;
            }
            uint64_t src = func_of(m, at, (long)k);
            if (!fi[j].from)
                fi[j].from = src;
            else if (fi[j].from != src)
                fi[j].several = true;
            fi[j].not_tail |= jcc || t != m->fdes[j];
        }
    }
    for (size_t k = 0; k < m->nfdes; k++) {
        fde_info *f = &fi[k];
        if (!f->candidate || !f->from || f->called || f->several || (!f->not_tail && entry_shape(m, m->fdes[k])))
            continue;
        /* the jumper may itself be a part: follow (bounded) */
        uint64_t o = f->from;
        for (int hop = 0; hop < 8; hop++) {
            long j = fde_at(m, o);
            if (j < 0 || m->fdes[j] != o || !fi[j].candidate || !fi[j].from || fi[j].called || fi[j].several ||
                (!fi[j].not_tail && entry_shape(m, o)) || fi[j].from == m->fdes[k])
                break;
            o = fi[j].from;
        }
        if (o == m->fdes[k])
            continue;
        if (m->nparts == cap) {
            cap = cap ? 2 * cap : 16;
            gt_part *np = realloc(m->parts, cap * sizeof *np);
            if (!np)
                exit(125);
            m->parts = np;
        }
        uint64_t os;
        const char *on = NULL;
        if (!gt_module_sym(m, o, &os, &on) || os != o)
            on = NULL;
        m->parts[m->nparts++] = (gt_part){m->fdes[k], o, on};
    }
    free(fi);
    qsort(m->parts, m->nparts, sizeof *m->parts, part_cmp);
}

bool gt_cold_owner(const gt_module *m, uint64_t start, uint64_t *owner, const char **name)
{
    size_t lo = 0, hi = m->nparts;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->parts[mid].start < start)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == m->nparts || m->parts[lo].start != start)
        return false;
    *owner = m->parts[lo].owner;
    *name = m->parts[lo].owner_name;
    return true;
}
