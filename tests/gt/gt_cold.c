/* gt_cold.c -- gcc's split-off cold parts for icpp-gt: which function each belongs to.
 *
 * The rule is docs/definitions.md's ("cold part"), implemented here again,
 * on purpose without lib/ (which the tools share) and another way: symbols
 * first (foo.cold, foo.cold.N, foo.part.N.cold belong to the function named
 * before ".cold"); for an FDE no symbol covers, asked about only when a
 * frame lands in it, the branches into it are found by a byte scan for
 * every rel8/rel32 call, jmp and jcc encoding that would land there, and
 * every disp32 that, as a [rip + disp32] operand, would give an FDE's start
 * (an address taken: a function), each confirmed by decoding (Zydis, full
 * decode) the code around it from its FDE's start; the CFA at the FDE's
 * first byte comes from libdw.  Each block's parent is decided when first
 * needed, owners found by following parents when asked.  Lazy, because
 * icpp-gt must keep draining its rings while the program runs. */
#include "gt_cold.h"

#include <Zydis/Zydis.h>
#include <dwarf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first of n records (stride bytes each, a uint64_t key first) whose key
 * is >= key: every table here is sorted by such a key. */
static size_t lower(const void *base, size_t n, size_t stride, uint64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t k;
        memcpy(&k, (const char *)base + mid * stride, sizeof k);
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A possible branch: bytes at `site` that would jump to `target`. */
typedef struct gt_hit {
    uint64_t target, site;
} gt_hit;

/* A start asked about: the function it hangs off. */
typedef struct gt_answer {
    uint64_t start;
    uint64_t parent;        /* the one function jumping into it; == start: none */
} gt_answer;

enum { HOPS = 8 };          /* parent links followed (docs/definitions.md) */

struct gt_cold {
    gt_part   *parts;  size_t nparts;      /* by symbol, sorted by start */
    gt_hit    *hits;   size_t nhits;       /* sorted by target */
    int        scanned;
    gt_answer *ans;    size_t nans, capans; /* sorted by start */
};

static int part_cmp(const void *a, const void *b)
{
    const gt_part *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int hit_cmp(const void *a, const void *b)
{
    const gt_hit *x = a, *y = b;
    return x->target < y->target ? -1 : x->target > y->target;
}

/* The owner of "foo.cold[.N]" / "foo.part.N.cold", or NULL. */
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

void gt_cold_find(gt_module *m)
{
    gt_cold *c = gt_xrealloc(NULL, sizeof *c);
    memset(c, 0, sizeof *c);
    m->cold = c;
    size_t cap = 0;
    for (size_t i = 0; i < m->nsyms; i++) {
        const gt_sym *p = strstr(m->syms[i].name, ".cold") ? cold_parent(m, m->syms[i].name) : NULL;
        if (!p)
            continue;
        if (c->nparts == cap) {
            cap = cap ? 2 * cap : 16;
            c->parts = gt_xrealloc(c->parts, cap * sizeof *c->parts);
        }
        c->parts[c->nparts++] = (gt_part){m->syms[i].addr, p->addr, p->name};
    }
    if (c->nparts)  /* none: parts is NULL, which qsort must not get */
        qsort(c->parts, c->nparts, sizeof *c->parts, part_cmp);
}

void gt_cold_free(gt_module *m)
{
    if (!m->cold)
        return;
    free(m->cold->parts);
    free(m->cold->hits);
    free(m->cold->ans);
    free(m->cold);
    m->cold = NULL;
}

/* Executable bytes of [addr, addr + n), or NULL. */
static const uint8_t *code(const gt_module *m, uint64_t addr, uint64_t n)
{
    size_t flen;
    const char *raw = elf_rawfile(m->elf, &flen);
    for (size_t i = 0; raw && i < m->nloads; i++) {
        const gt_load *l = &m->loads[i];
        if ((l->flags & PF_X) && addr >= l->vaddr && addr - l->vaddr <= l->filesz && n <= l->filesz - (addr - l->vaddr) &&
            l->offset + (addr - l->vaddr) + n <= flen)
            return (const uint8_t *)raw + l->offset + (addr - l->vaddr);
    }
    return NULL;
}

static void add_hit(gt_cold *c, size_t *cap, uint64_t target, uint64_t site)
{
    if (c->nhits == *cap) {
        *cap = *cap ? 2 * *cap : 4096;
        c->hits = gt_xrealloc(c->hits, *cap * sizeof *c->hits);
    }
    c->hits[c->nhits++] = (gt_hit){target, site};
}

/* Is addr the start of an FDE? */
static bool fde_start(const gt_module *m, uint64_t addr)
{
    size_t i = lower(m->fdes, m->nfdes, sizeof *m->fdes, addr);
    return i < m->nfdes && m->fdes[i] == addr;
}

/* Every byte offset of the executable segments that could encode a direct
 * call, jmp or jcc: the target it would have; and every 4 bytes that, as
 * the disp32 of a [rip + disp32] operand followed by an immediate of 0, 1,
 * 2 or 4 bytes, would address an FDE's start: that start (site: the
 * disp32's first byte). */
static void scan(gt_module *m)
{
    gt_cold *c = m->cold;
    size_t cap = 0;
    c->scanned = 1;
    uint64_t flo = m->nfdes ? m->fdes[0] : 1, fhi = m->nfdes ? m->fdes[m->nfdes - 1] : 0;
    for (size_t i = 0; i < m->nloads; i++) {
        const gt_load *l = &m->loads[i];
        const uint8_t *b = (l->flags & PF_X) ? code(m, l->vaddr, l->filesz) : NULL;
        if (!b)
            continue;
        for (uint64_t o = 0; o + 2 <= l->filesz; o++) {
            if (o + 4 <= l->filesz) {
                int32_t d;
                memcpy(&d, b + o, 4);
                static const unsigned imm[] = {0, 1, 2, 4};
                for (int k = 0; k < 4; k++) {
                    uint64_t t = l->vaddr + o + 4 + imm[k] + (uint64_t)(int64_t)d;
                    if (t >= flo && t <= fhi && fde_start(m, t))
                        add_hit(c, &cap, t, l->vaddr + o);
                }
            }
            uint8_t op = b[o];
            int64_t rel;
            uint64_t len;
            if ((op == 0xe8 || op == 0xe9) && o + 5 <= l->filesz) {
                int32_t r;
                memcpy(&r, b + o + 1, 4);
                rel = r, len = 5;
            } else if (op == 0x0f && b[o + 1] >= 0x80 && b[o + 1] <= 0x8f && o + 6 <= l->filesz) {
                int32_t r;
                memcpy(&r, b + o + 2, 4);
                rel = r, len = 6;
            } else if (op == 0xeb || (op >= 0x70 && op <= 0x7f)) {
                rel = (int8_t)b[o + 1], len = 2;
            } else {
                continue;
            }
            uint64_t t = l->vaddr + o + len + (uint64_t)rel;
            if (t < l->vaddr || t >= l->vaddr + l->filesz)
                continue;
            add_hit(c, &cap, t, l->vaddr + o);
        }
    }
    qsort(c->hits, c->nhits, sizeof *c->hits, hit_cmp);
}

/* Index of the last FDE starting at or before addr, or -1. */
static long fde_at(const gt_module *m, uint64_t addr)
{
    size_t i = lower(m->fdes, m->nfdes, sizeof *m->fdes, addr);
    if (i < m->nfdes && m->fdes[i] == addr)
        return (long)i;
    return (long)i - 1;
}

enum { NONE, CALL, JMP, JCC, ADDR };

/* Decode the code around `site` from the start of its FDE: the branch an
 * instruction holding `site` makes to `target` (CALL, JMP, JCC), or ADDR if
 * its [rip + disp32] operand, whose displacement starts at `site`,
 * addresses `target`; else NONE. */
static int confirm(const gt_module *m, uint64_t site, uint64_t target)
{
    long k = fde_at(m, site);
    if (k < 0)
        return NONE;
    uint64_t lo = m->fdes[k], avail = site + 16 - lo;
    const uint8_t *b = code(m, lo, avail);
    if (!b)
        b = code(m, lo, avail = site + 6 - lo);
    if (!b)
        return NONE;
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisDecodedInstruction in;
    ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
    for (uint64_t o = 0; lo + o <= site;) {
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, b + o, avail - o, &in, op))) {
            o++;
            continue;
        }
        uint64_t at = lo + o, t;
        o += in.length;
        if (at + in.length <= site)
            continue;
        /* the instruction that holds site */
        for (unsigned i = 0; i < in.operand_count; i++)
            if (op[i].type == ZYDIS_OPERAND_TYPE_MEMORY && op[i].mem.base == ZYDIS_REGISTER_RIP &&
                in.raw.disp.size == 32 && at + in.raw.disp.offset == site &&
                ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[i], at, &t)) && t == target)
                return ADDR;
        int kind = in.mnemonic == ZYDIS_MNEMONIC_CALL ? CALL : in.mnemonic == ZYDIS_MNEMONIC_JMP ? JMP
                 : in.meta.category == ZYDIS_CATEGORY_COND_BR && in.mnemonic != ZYDIS_MNEMONIC_JRCXZ &&
                   in.mnemonic != ZYDIS_MNEMONIC_JECXZ && in.mnemonic != ZYDIS_MNEMONIC_LOOP &&
                   in.mnemonic != ZYDIS_MNEMONIC_LOOPE && in.mnemonic != ZYDIS_MNEMONIC_LOOPNE ? JCC : NONE;
        if (kind == NONE || op[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
            !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[0], at, &t)) || t != target)
            return NONE;
        return kind;
    }
    return NONE;
}

/* The function (start) the code at addr belongs to by symbol (a named part:
 * its owner), else its FDE's start. */
static uint64_t func_of(const gt_module *m, uint64_t addr)
{
    uint64_t start;
    const char *name;
    if (gt_module_sym(m, addr, &start, &name)) {
        const gt_sym *p = strstr(name, ".cold") ? cold_parent(m, name) : NULL;
        return p ? p->addr : start;
    }
    long k = fde_at(m, addr);
    return k >= 0 ? m->fdes[k] : addr;
}

/* Is the CFA at addr rsp + 8 (the shape of a function entered by a call)? */
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

static gt_answer *answer_of(gt_cold *c, uint64_t start, bool add)
{
    size_t lo = lower(c->ans, c->nans, sizeof *c->ans, start);
    if (lo < c->nans && c->ans[lo].start == start)
        return &c->ans[lo];
    if (!add)
        return NULL;
    if (c->nans == c->capans) {
        c->capans = c->capans ? 2 * c->capans : 64;
        c->ans = gt_xrealloc(c->ans, c->capans * sizeof *c->ans);
    }
    memmove(&c->ans[lo + 1], &c->ans[lo], (c->nans - lo) * sizeof *c->ans);
    c->nans++;
    c->ans[lo] = (gt_answer){start, start};
    return &c->ans[lo];
}

/* Is `start` an FDE's start that no symbol covers (code the rule judges)? */
static bool fde_only(const gt_module *m, uint64_t start)
{
    uint64_t s;
    const char *n;
    long k = fde_at(m, start);
    return k >= 0 && m->fdes[k] == start && !gt_module_sym(m, start, &s, &n);
}

static uint64_t parent_of(gt_module *m, uint64_t start);

/* Where the parents of framed FDE-only code lead from `start`, HOPS links at most. */
static uint64_t framed_root(gt_module *m, uint64_t start)
{
    for (int hop = 0; hop < HOPS && fde_only(m, start) && !entry_shape(m, start); hop++) {
        uint64_t p = parent_of(m, start);
        if (p == start)
            break;
        start = p;
    }
    return start;
}

/* The parent of the FDE-only code at `start` (FDE index k): the one function
 * whose code jumps into it when it is not called and is no function's entry
 * (framed: it starts inside a frame; else a conditional jump lands past its
 * first byte, jumps back from its own framed parts not counted); else start. */
static uint64_t decide(gt_module *m, uint64_t start, long k)
{
    gt_cold *c = m->cold;
    if (!c->scanned)
        scan(m);
    bool framed = !entry_shape(m, start);
    uint64_t end = (size_t)k + 1 < m->nfdes ? m->fdes[k + 1] : start + 1;
    size_t lo = lower(c->hits, c->nhits, sizeof *c->hits, start);
    bool several = false, past = false;
    uint64_t from = 0;
    for (size_t i = lo; i < c->nhits && c->hits[i].target < end; i++) {
        const gt_hit *h = &c->hits[i];
        if (h->site >= start && h->site < end)
            continue;       /* its own loops: never counted, not worth a decode */
        /* a function's code: a symbol's, or an FDE's (not a gap without CFI) */
        uint64_t ss;
        const char *sn;
        Dwarf_Frame *fr;
        if (!gt_module_sym(m, h->site, &ss, &sn)) {
            if (!gt_module_frame(m, h->site, &fr))
                continue;
            free(fr);
        }
        int kind = confirm(m, h->site, h->target);
        if (kind == NONE)
            continue;
        if (kind == CALL || (kind == ADDR && h->target == start))
            return start;   /* called, or its address taken: a function */
        if (kind == ADDR)
            continue;
        uint64_t src = func_of(m, h->site);
        if (src == start)
            continue;       /* its own loops */
        if (!framed && fde_only(m, src) && !entry_shape(m, src) && framed_root(m, src) == start)
            continue;       /* back from its own framed part */
        if (from && from != src)
            several = true;
        from = from ? from : src;
        past |= kind == JCC && h->target != start;
    }
    return from && !several && (framed || past) ? from : start;
}

static uint64_t parent_of(gt_module *m, uint64_t start)
{
    gt_answer *a = answer_of(m->cold, start, false);
    if (a)
        return a->parent;
    long k = fde_at(m, start);
    uint64_t p = k >= 0 && m->fdes[k] == start ? decide(m, start, k) : start;
    answer_of(m->cold, start, true)->parent = p;
    return p;
}

bool gt_cold_owner(gt_module *m, uint64_t start, bool by_fde, uint64_t *owner, const char **name)
{
    gt_cold *c = m->cold;
    if (!c)
        return false;
    size_t lo = lower(c->parts, c->nparts, sizeof *c->parts, start);
    if (lo < c->nparts && c->parts[lo].start == start) {
        *owner = c->parts[lo].owner;
        *name = c->parts[lo].owner_name;
        return true;
    }
    if (!by_fde)
        return false;
    /* follow parents to code that has none: a function (HOPS links at most;
     * a chain that comes back or goes on is no owner) */
    uint64_t o = start;
    bool ends = false;
    for (int hop = 0;; hop++) {
        uint64_t p = fde_only(m, o) ? parent_of(m, o) : o;
        if (p == o) {
            ends = true;
            break;
        }
        if (hop == HOPS)
            break;
        o = p;
        if (o == start)
            break;
    }
    if (!ends || o == start)
        return false;
    uint64_t s;
    const char *n;
    *owner = o;
    *name = gt_module_sym(m, o, &s, &n) && s == o ? n : NULL;
    return true;
}
