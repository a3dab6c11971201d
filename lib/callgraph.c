/* callgraph.c -- a module's static call graph from disassembly: call sites, their callees and the stack each call adds. */
#include "callgraph.h"

#include "hmap.h"
#include "vec.h"
#include "x86stack.h"

#include <assert.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define UNK     INT32_MIN       /* a register's offset from the CFA that is not known */
#define MAXFUNC (1u << 20)      /* bytes decoded per function at most */

typedef struct st {
    int32_t rsp, rbp;       /* offset from the CFA, or UNK */
} st;

struct icpp_callgraph {
    const icpp_module *m;
    icpp_cg_site  *sites;           /* sorted by ret */
    size_t         nsites, capsites;
    const icpp_cg_site **by_callee; /* CALL/TAIL sites with delta, sorted by callee */
    size_t         nby_callee;
    const icpp_cg_site **by_name;   /* PLT sites with delta, sorted by name */
    size_t         nby_name;
    const icpp_cg_site **ind;       /* INDIRECT sites with delta */
    size_t         nind;
    icpp_hmap      taken;           /* (addr, 0) -> 1 */
    icpp_hmap      slots;           /* (GOT slot, 0) -> index into names: imported symbol */
    const char   **names;
    size_t         nnames, capnames;
    char         **owned;           /* names made here (IRELATIVE slots), freed with g */
    size_t         nowned, capowned;
    icpp_hmap      exports;         /* (name hash, probe) -> name; (name pointer, ~0) -> addr */
    icpp_hmap      export_names;    /* (addr, k) -> k-th exported name of addr */
    icpp_cg_stats  stats;
    /* scratch of the walk */
    icpp_x86_insn *v;       /* the function's instructions (icpp_x86_insn.target: see classify) */
    st    *s;
    uint8_t *seen;
    size_t n, cap;
    size_t *work;
    size_t nwork, capwork;
    int    weak;        /* seeding unreached code: do not merge into reached instructions */
};

static uint64_t name_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static void mark_taken(icpp_callgraph *g, uint64_t addr)
{
    const icpp_func *f = icpp_module_func_start(g->m, addr);
    if (f && f->owner == f->addr && !icpp_hmap_get(&g->taken, addr, 0))
        icpp_hmap_put(&g->taken, addr, 0, 1);
}

/* References to code: lea sym(%rip), mov $sym: the function may be called indirectly. */
static void code_refs(icpp_callgraph *g, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a)
{
    ZydisMnemonic m = in->mnemonic;
    if (m != ZYDIS_MNEMONIC_LEA && !in->raw.imm[0].size)
        return;     /* most instructions: no immediate could be an address (implicit ones are 1 or 3) */
    for (uint8_t i = 0; i < in->operand_count_visible; i++) {
        uint64_t t;
        if (op[i].type == ZYDIS_OPERAND_TYPE_MEMORY && op[i].mem.base == ZYDIS_REGISTER_RIP && m == ZYDIS_MNEMONIC_LEA &&
            ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(in, &op[i], a, &t)))
            mark_taken(g, t);
        else if (op[i].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && m != ZYDIS_MNEMONIC_CALL && m != ZYDIS_MNEMONIC_JMP &&
                 in->meta.category != ZYDIS_CATEGORY_COND_BR && op[i].imm.value.u >= 0x1000 &&
                 op[i].imm.value.u < (1ull << 32))
            mark_taken(g, op[i].imm.value.u);
    }
}

/* Classify the instruction at a into x (lib/x86stack.h, the call graph's
 * rules) and note the functions it takes the address of.  The walk knows
 * direct jumps only: a conditional one whose target cannot be computed
 * ends the path, an unconditional one is an indirect jmp (target 0). */
static void classify(icpp_callgraph *g, const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op, uint64_t a,
                     icpp_x86_insn *x)
{
    code_refs(g, in, op, a);
    icpp_x86_classify(in, op, a, ICPP_X86_RULES_CALLGRAPH, x);
    if (x->kind == ICPP_X86_JCC && !(x->flags & ICPP_X86_F_DIRECT))
        x->kind = ICPP_X86_STOP;    /* loop/jrcxz with a strange operand: give up on this path */
    else if (x->kind == ICPP_X86_JMP && !(x->flags & ICPP_X86_F_DIRECT))
        x->kind = ICPP_X86_JMP_IND;
}

/* ---- imports: GOT slot -> symbol, and the PLT stubs that jump through them ---- */

static int add_name(icpp_callgraph *g, const char *name, uint64_t *ix)
{
    if (icpp_vec_reserve((void **)&g->names, &g->capnames, g->nnames + 1, sizeof *g->names, 64) < 0)
        return -1;
    g->names[g->nnames] = name;
    *ix = g->nnames++;
    return 0;
}

/* Relocations, dynamic symbols and data words of the module's ELF. */
static int scan_elf(icpp_callgraph *g)
{
    Elf *elf = icpp_module_elf(g->m);
    Elf_Scn *scn = NULL;
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return 0;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_RELA) {
            Elf_Scn *symscn = elf_getscn(elf, sh.sh_link);
            GElf_Shdr symsh;
            Elf_Data *d = elf_getdata(scn, NULL), *sd = symscn ? elf_getdata(symscn, NULL) : NULL;
            if (!d || !symscn || !gelf_getshdr(symscn, &symsh) || sh.sh_entsize == 0)
                continue;
            for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
                GElf_Rela r;
                if (!gelf_getrela(d, (int)i, &r))
                    break;
                unsigned type = (unsigned)GELF_R_TYPE(r.r_info), si = (unsigned)GELF_R_SYM(r.r_info);
                if (type == R_X86_64_RELATIVE) {
                    mark_taken(g, (uint64_t)r.r_addend);
                    continue;
                }
                if (type == R_X86_64_IRELATIVE && !icpp_hmap_get(&g->slots, r.r_offset, 0)) {
                    /* a library's calls of its own IFUNCs (libc's memcpy, strlen, ...) go through
                     * stubs with no symbol: named as objdump names them, by the resolver's address */
                    char *nm = malloc(32);
                    uint64_t ix;
                    if (!nm || icpp_vec_reserve((void **)&g->owned, &g->capowned, g->nowned + 1, sizeof *g->owned,
                                                64) < 0) {
                        free(nm);
                        continue;
                    }
                    snprintf(nm, 32, "*ABS*+0x%" PRIx64, (uint64_t)r.r_addend);
                    g->owned[g->nowned++] = nm;
                    if (add_name(g, nm, &ix) == 0)
                        icpp_hmap_put(&g->slots, r.r_offset, 0, ix);
                    continue;
                }
                GElf_Sym sym;
                if (!sd || si == 0 || !gelf_getsym(sd, (int)si, &sym))
                    continue;
                if (type == R_X86_64_64 && sym.st_shndx != SHN_UNDEF)
                    mark_taken(g, sym.st_value + (uint64_t)r.r_addend);
                if (type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) {
                    const char *nm = elf_strptr(elf, symsh.sh_link, sym.st_name);
                    uint64_t ix;
                    if (nm && *nm && !icpp_hmap_get(&g->slots, r.r_offset, 0) && add_name(g, nm, &ix) == 0)
                        icpp_hmap_put(&g->slots, r.r_offset, 0, ix);
                }
            }
        } else if (sh.sh_type == SHT_DYNSYM) {
            Elf_Data *d = elf_getdata(scn, NULL);
            if (!d || sh.sh_entsize == 0)
                continue;
            for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(d, (int)i, &sym))
                    break;
                int t = GELF_ST_TYPE(sym.st_info), b = GELF_ST_BIND(sym.st_info);
                if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
                    (b != STB_GLOBAL && b != STB_WEAK))
                    continue;
                const char *nm = elf_strptr(elf, sh.sh_link, sym.st_name);
                if (!nm || !*nm)
                    continue;
                mark_taken(g, sym.st_value);
                uint64_t h = name_hash(nm);
                for (uint64_t p = 0; p < 64; p++) {
                    uint64_t *v = icpp_hmap_get(&g->exports, h, p);
                    if (!v) {
                        icpp_hmap_put(&g->exports, h, p, (uint64_t)(uintptr_t)nm << 0);
                        break;
                    }
                }
                /* value kept beside: a second map keyed by the name pointer */
                icpp_hmap_put(&g->exports, (uint64_t)(uintptr_t)nm, UINT64_MAX, sym.st_value);
                /* and the names of each address (aliases: qsort and __libc_qsort) */
                for (uint64_t k = 0; k < 16; k++)
                    if (!icpp_hmap_get(&g->export_names, sym.st_value, k)) {
                        icpp_hmap_put(&g->export_names, sym.st_value, k, (uint64_t)(uintptr_t)nm);
                        break;
                    }
            }
        } else if ((sh.sh_flags & SHF_ALLOC) && !(sh.sh_flags & SHF_EXECINSTR) &&
                   (sh.sh_type == SHT_PROGBITS || sh.sh_type == SHT_INIT_ARRAY || sh.sh_type == SHT_FINI_ARRAY)) {
            /* pointers to code in initialised data (non-PIE images have no relocations for them) */
            Elf_Data *d = elf_getdata(scn, NULL);
            if (!d || !d->d_buf)
                continue;
            const uint8_t *p = d->d_buf;
            for (size_t o = (8 - (sh.sh_addr & 7)) & 7; o + 8 <= d->d_size; o += 8) {
                uint64_t w;
                memcpy(&w, p + o, 8);
                if (w >= 0x1000)
                    mark_taken(g, w);
            }
        }
    }
    return 0;
}

/* The symbol a PLT stub at t (or a GOT slot jumped through) stands for, or NULL. */
static const char *plt_name(icpp_callgraph *g, uint64_t t)
{
    uint8_t b[32];
    if (icpp_module_read(g->m, t, b, sizeof b) < 0)
        return NULL;
    ZydisDecodedInstruction in;
    ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
    size_t o = 0;
    for (int k = 0; k < 2 && o < sizeof b; k++) {
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(icpp_x86_decoder(), b + o, sizeof b - o, &in, op)))
            return NULL;
        if (in.mnemonic == ZYDIS_MNEMONIC_ENDBR64) {
            o += in.length;
            continue;
        }
        uint64_t slot;
        if (in.mnemonic == ZYDIS_MNEMONIC_JMP && op[0].type == ZYDIS_OPERAND_TYPE_MEMORY &&
            op[0].mem.base == ZYDIS_REGISTER_RIP && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[0], t + o, &slot))) {
            uint64_t *v = icpp_hmap_get(&g->slots, slot, 0);
            return v ? g->names[*v] : NULL;
        }
        return NULL;
    }
    return NULL;
}

/* ---- the walk ---- */

static int add_site(icpp_callgraph *g, const icpp_cg_site *s)
{
    if (g->nsites == g->capsites &&
        icpp_vec_reserve((void **)&g->sites, &g->capsites, g->nsites + 1, sizeof *g->sites, 1024) < 0)
        return -1;
    g->sites[g->nsites++] = *s;
    g->stats.by_kind[s->kind]++;
    g->stats.no_delta += !s->has_delta;
    return 0;
}

/* Merge state s into instruction i; queue it if it changed. */
static int reach(icpp_callgraph *g, size_t i, st s)
{
    if (i == SIZE_MAX)
        return 0;
    if (!g->seen[i]) {
        g->seen[i] = 1;
        g->s[i] = s;
    } else if (g->weak) {
        return 0;       /* code no branch reaches never changes what the walk knows */
    } else {
        st o = g->s[i];
        st nw = {o.rsp == s.rsp ? o.rsp : UNK, o.rbp == s.rbp ? o.rbp : UNK};
        if (nw.rsp == o.rsp && nw.rbp == o.rbp)
            return 0;
        g->s[i] = nw;
    }
    if (g->nwork == g->capwork &&
        icpp_vec_reserve((void **)&g->work, &g->capwork, g->nwork + 1, sizeof *g->work, 256) < 0)
        return -1;
    g->work[g->nwork++] = i;
    return 0;
}

/* The state after instruction x (lib/x86stack.h decides its effect). */
static st after(const icpp_x86_insn *x, st s)
{
    icpp_x86_regs r = {s.rsp, s.rbp, s.rsp != UNK, s.rbp != UNK};
    r = icpp_x86_effect(x, r);
    return (st){r.rsp_known ? (int32_t)r.rsp : UNK, r.rbp_known ? (int32_t)r.rbp : UNK};
}

/* A branch or call leaving the function at instruction x with state s. */
static int leave_to(icpp_callgraph *g, const icpp_func *f, const icpp_x86_insn *x, st s, const icpp_cfi *cfi)
{
    int call = x->kind == ICPP_X86_CALL;
    icpp_cg_site site = {.ret = x->addr + x->len, .caller = f->owner};
    if (call) {
        site.has_delta = s.rsp != UNK;
        site.delta = site.has_delta ? -s.rsp : 0;
    } else {
        if (s.rsp != -8)
            return 0;       /* not a tail call: the frame is still there (or unknown) */
        site.has_delta = 1;
        site.delta = 0;
        site.tail = 1;
    }
    if (x->flags & ICPP_X86_F_DIRECT) {
        const icpp_func *t = icpp_module_func_start(g->m, x->target);
        /* a PLT stub first: .plt.got/.plt.sec have FDEs, so stubs can look like function starts */
        if ((!t || t->source == ICPP_FSRC_FDE) && (site.name = plt_name(g, x->target))) {
            site.kind = ICPP_CG_PLT;
        } else if (t && t->owner == t->addr && (call || t->owner != f->owner)) {   /* recursion is a call */
            site.kind = call ? ICPP_CG_CALL : ICPP_CG_TAIL;
            site.callee = t->addr;
        } else {
            return 0;       /* a call to the next instruction (pc thunk), into a .cold part, ... */
        }
    } else {
        uint64_t *v = x->target ? icpp_hmap_get(&g->slots, x->target, 0) : NULL;
        if (v) {
            site.kind = ICPP_CG_PLT;      /* call *sym@GOTPCREL(%rip) (-fno-plt) */
            site.name = g->names[*v];
        } else {
            site.kind = ICPP_CG_INDIRECT;
        }
    }
    (void)cfi;
    return add_site(g, &site);
}

static int walk_func(icpp_callgraph *g, const icpp_func *f, uint64_t end, const icpp_cfi *cfi, uint8_t **buf,
                     size_t *bufcap)
{
    size_t len = end - f->addr;
    if (len > *bufcap) {
        uint8_t *nb = realloc(*buf, len);
        if (!nb)
            return -1;
        *buf = nb;
        *bufcap = len;
    }
    while (len > 0 && icpp_module_read(g->m, f->addr, *buf, len) < 0)
        len = len > 64 ? len / 2 : 0;   /* runs past the file-backed part: decode what is there */
    if (!len)
        return 0;
    g->n = 0;
    const ZydisDecoder *dec = icpp_x86_decoder();
    ZydisDecodedInstruction in;
    ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
    for (size_t o = 0; o < len;) {
        if (g->n == g->cap) {       /* three arrays of one capacity: it grows once all have */
            size_t cv = g->cap, cs = g->cap, cn = g->cap;
            if (icpp_vec_reserve((void **)&g->v, &cv, g->n + 1, sizeof *g->v, 4096) < 0 ||
                icpp_vec_reserve((void **)&g->s, &cs, g->n + 1, sizeof *g->s, 4096) < 0 ||
                icpp_vec_reserve((void **)&g->seen, &cn, g->n + 1, sizeof *g->seen, 4096) < 0)
                return -1;
            g->cap = cv;
        }
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(dec, *buf + o, len - o, &in, op))) {
            g->v[g->n] = (icpp_x86_insn){.addr = f->addr + o, .len = 1, .kind = ICPP_X86_STOP};
            g->n++;
            o++;
            continue;
        }
        classify(g, &in, op, f->addr + o, &g->v[g->n]);
        g->n++;
        o += in.length;
    }
    g->stats.functions++;
    g->stats.insns += g->n;
    memset(g->seen, 0, g->n);
    g->nwork = 0;
    uint64_t lo = f->addr, hi = f->addr + len;
    /* entry: CFA = rsp + 8 for a function; a .cold part starts as its CFI says */
    st s0 = {f->owner == f->addr ? -8 : UNK, UNK};
    if (reach(g, 0, s0) < 0)
        return -1;
    int32_t jt = 0;         /* rsp at the function's indirect jumps (switch tables): 0 none, UNK mixed */
    int seeded = 0;
    for (;;) {
        while (g->nwork) {
            size_t i = g->work[--g->nwork];
            const icpp_x86_insn *x = &g->v[i];
            st s = g->s[i];
            icpp_cfa_rule r = icpp_cfi_lookup(cfi, x->addr);
            if (r.kind == ICPP_CFA_RSP)
                s.rsp = -r.off;
            else if (r.kind == ICPP_CFA_RBP)
                s.rbp = -r.off;
            st n = after(x, s);
            int fall = 1;
            switch (x->kind) {
            case ICPP_X86_JMP:
            case ICPP_X86_JCC:
                if (x->target >= lo && x->target < hi && reach(g, icpp_x86_find(g->v, g->n, x->target), s) < 0)
                    return -1;
                fall = x->kind == ICPP_X86_JCC;
                break;
            case ICPP_X86_JMP_IND:
                if (s.rsp != -8)
                    jt = jt == 0 ? (s.rsp == UNK ? UNK : s.rsp) : jt == s.rsp ? jt : UNK;
                fall = 0;
                break;
            case ICPP_X86_RET:
            case ICPP_X86_STOP: fall = 0; break;
            default: break;
            }
            if (fall && i + 1 < g->n && reach(g, i + 1, n) < 0)
                return -1;
        }
        /* Code no direct branch reaches: switch-table targets (at the depth of
         * the function's indirect jumps), or unreachable padding. */
        if (seeded)
            break;
        seeded = 1;
        g->weak = 1;
        for (size_t i = 0; i < g->n; i++)
            if (!g->seen[i] && reach(g, i, (st){jt != 0 ? jt : UNK, UNK}) < 0)
                return -1;
        if (!g->nwork)
            break;
    }
    g->weak = 0;
    /* The sites, once each, with the state the walk settled on. */
    for (size_t i = 0; i < g->n; i++) {
        const icpp_x86_insn *x = &g->v[i];
        if (!g->seen[i] || (x->kind != ICPP_X86_CALL && x->kind != ICPP_X86_JMP && x->kind != ICPP_X86_JCC &&
                            x->kind != ICPP_X86_JMP_IND))
            continue;
        if ((x->kind == ICPP_X86_JMP || x->kind == ICPP_X86_JCC) && x->target >= lo && x->target < hi)
            continue;
        st s = g->s[i];
        icpp_cfa_rule r = icpp_cfi_lookup(cfi, x->addr);
        if (r.kind == ICPP_CFA_RSP)
            s.rsp = -r.off;
        if (leave_to(g, f, x, s, cfi) < 0)
            return -1;
    }
    return 0;
}

static int site_cmp(const void *a, const void *b)
{
    const icpp_cg_site *x = a, *y = b;
    return x->ret < y->ret ? -1 : x->ret > y->ret ? 1 : x->tail - y->tail;
}

static int callee_cmp(const void *a, const void *b)
{
    const icpp_cg_site *x = *(const icpp_cg_site *const *)a, *y = *(const icpp_cg_site *const *)b;
    return x->callee < y->callee ? -1 : x->callee > y->callee ? 1 : (x->ret > y->ret) - (x->ret < y->ret);
}

static int name_cmp(const void *a, const void *b)
{
    const icpp_cg_site *x = *(const icpp_cg_site *const *)a, *y = *(const icpp_cg_site *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->ret > y->ret) - (x->ret < y->ret);
}

icpp_callgraph *icpp_callgraph_build(const icpp_module *m, const icpp_cfi *cfi, icpp_err *err)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    icpp_callgraph *g = calloc(1, sizeof *g);
    if (!g)
        goto oom;
    g->m = m;
    if (scan_elf(g) < 0)
        goto oom;
    size_t nf = icpp_module_nfuncs(m);
    const icpp_func *fs = icpp_module_funcs(m);
    uint8_t *buf = NULL;
    size_t bufcap = 0;
    for (size_t i = 0; i < nf; i++) {
        uint64_t end = fs[i].size ? fs[i].addr + fs[i].size : i + 1 < nf ? fs[i + 1].addr : fs[i].addr;
        if (i + 1 < nf && end > fs[i + 1].addr && !fs[i].size)
            end = fs[i + 1].addr;
        if (end <= fs[i].addr || end - fs[i].addr > MAXFUNC)
            continue;
        if (walk_func(g, &fs[i], end, cfi, &buf, &bufcap) < 0) {
            free(buf);
            goto oom;
        }
    }
    free(buf);
    free(g->v), g->v = NULL;
    free(g->s), g->s = NULL;
    free(g->seen), g->seen = NULL;
    free(g->work), g->work = NULL;
    if (g->nsites)
        qsort(g->sites, g->nsites, sizeof *g->sites, site_cmp);
    for (size_t i = 1; i < g->nsites; i++)
        assert(g->sites[i - 1].ret <= g->sites[i].ret);     /* callgraph.h: sorted by ret */
    g->by_callee = malloc((g->nsites + 1) * sizeof *g->by_callee);
    g->by_name = malloc((g->nsites + 1) * sizeof *g->by_name);
    g->ind = malloc((g->nsites + 1) * sizeof *g->ind);
    if (!g->by_callee || !g->by_name || !g->ind)
        goto oom;
    for (size_t i = 0; i < g->nsites; i++) {
        const icpp_cg_site *s = &g->sites[i];
        if (!s->has_delta)
            continue;
        if (s->kind == ICPP_CG_CALL || s->kind == ICPP_CG_TAIL)
            g->by_callee[g->nby_callee++] = s;
        else if (s->kind == ICPP_CG_PLT)
            g->by_name[g->nby_name++] = s;
        else
            g->ind[g->nind++] = s;
    }
    qsort(g->by_callee, g->nby_callee, sizeof *g->by_callee, callee_cmp);
    qsort(g->by_name, g->nby_name, sizeof *g->by_name, name_cmp);
    g->stats.address_taken = g->taken.n;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    g->stats.build_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return g;
oom:
    icpp_callgraph_free(g);
    icpp_err_set(err, ENOMEM, "%s: out of memory building the call graph", icpp_module_path(m));
    return NULL;
}

void icpp_callgraph_free(icpp_callgraph *g)
{
    if (!g)
        return;
    free(g->sites);
    free(g->by_callee);
    free(g->by_name);
    free(g->ind);
    free(g->names);
    for (size_t i = 0; i < g->nowned; i++)
        free(g->owned[i]);
    free(g->owned);
    free(g->v);
    free(g->s);
    free(g->seen);
    free(g->work);
    icpp_hmap_free(&g->taken);
    icpp_hmap_free(&g->slots);
    icpp_hmap_free(&g->exports);
    icpp_hmap_free(&g->export_names);
    free(g);
}

size_t icpp_callgraph_nsites(const icpp_callgraph *g) { return g->nsites; }
const icpp_cg_site *icpp_callgraph_sites(const icpp_callgraph *g) { return g->sites; }

const icpp_cg_site *icpp_callgraph_site_at(const icpp_callgraph *g, uint64_t ret)
{
    size_t lo = 0, hi = g->nsites;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->sites[mid].ret < ret)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < g->nsites && g->sites[lo].ret == ret && !g->sites[lo].tail ? &g->sites[lo] : NULL;
}

uint32_t icpp_callgraph_callers(const icpp_callgraph *g, uint64_t callee, const icpp_cg_site *const **out)
{
    size_t lo = 0, hi = g->nby_callee;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->by_callee[mid]->callee < callee)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t e = lo;
    while (e < g->nby_callee && g->by_callee[e]->callee == callee)
        e++;
    *out = g->by_callee + lo;
    return (uint32_t)(e - lo);
}

const char *icpp_callgraph_plt_name(icpp_callgraph *g, uint64_t addr)
{
    return plt_name(g, addr);
}

uint32_t icpp_callgraph_plt_callers(const icpp_callgraph *g, const char *name, const icpp_cg_site *const **out)
{
    size_t lo = 0, hi = g->nby_name;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(g->by_name[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t e = lo;
    while (e < g->nby_name && !strcmp(g->by_name[e]->name, name))
        e++;
    *out = g->by_name + lo;
    return (uint32_t)(e - lo);
}

uint32_t icpp_callgraph_indirect(const icpp_callgraph *g, const icpp_cg_site *const **out)
{
    *out = g->ind;
    return (uint32_t)g->nind;
}

int icpp_callgraph_address_taken(const icpp_callgraph *g, uint64_t addr)
{
    return icpp_hmap_get(&g->taken, addr, 0) != NULL;
}

uint64_t icpp_callgraph_export(const icpp_callgraph *g, const char *name)
{
    uint64_t h = name_hash(name);
    for (uint64_t p = 0; p < 64; p++) {
        uint64_t *v = icpp_hmap_get(&g->exports, h, p);
        if (!v)
            return 0;
        const char *nm = (const char *)(uintptr_t)*v;
        if (!strcmp(nm, name)) {
            uint64_t *a = icpp_hmap_get(&g->exports, *v, UINT64_MAX);
            return a ? *a : 0;
        }
    }
    return 0;
}

uint32_t icpp_callgraph_export_names(const icpp_callgraph *g, uint64_t addr, const char **out, uint32_t max)
{
    uint32_t n = 0;
    for (uint64_t k = 0; k < 16 && n < max; k++) {
        uint64_t *v = icpp_hmap_get(&g->export_names, addr, k);
        if (!v)
            break;
        out[n++] = (const char *)(uintptr_t)*v;
    }
    return n;
}

void icpp_callgraph_get_stats(const icpp_callgraph *g, icpp_cg_stats *s)
{
    *s = g->stats;
}
