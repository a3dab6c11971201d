/* functab.c -- an ELF file's function table and build-id from its raw bytes (no ELF library: the training agent uses it too). */
#include "functab.h"
#include "lde.h"

#include "coldpart.h"
#include "fde.h"
#include "vec.h"

#include <assert.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct img {
    const uint8_t    *p;
    size_t            len;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;       /* section headers, or NULL */
    size_t            nsh;
} img;

/* p[off .. off+n) lies inside the image. */
static int in(const img *m, uint64_t off, uint64_t n)
{
    return off <= m->len && n <= m->len - off;
}

static int open_img(img *m, const uint8_t *p, size_t len, icpp_err *err)
{
    memset(m, 0, sizeof *m);
    m->p = p;
    m->len = len;
    if (len < sizeof(Elf64_Ehdr) || memcmp(p, ELFMAG, SELFMAG))
        return icpp_err_set(err, ICPP_EFORMAT, "not an ELF file");
    m->eh = (const Elf64_Ehdr *)p;
    if (m->eh->e_ident[EI_CLASS] != ELFCLASS64 || m->eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        m->eh->e_machine != EM_X86_64)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "not an x86-64 ELF file");
    if (m->eh->e_shnum && m->eh->e_shentsize == sizeof(Elf64_Shdr) &&
        in(m, m->eh->e_shoff, (uint64_t)m->eh->e_shnum * sizeof(Elf64_Shdr)) && m->eh->e_shoff % 8 == 0) {
        m->sh = (const Elf64_Shdr *)(p + m->eh->e_shoff);
        m->nsh = m->eh->e_shnum;
    }
    return 0;
}

static const char *shname(const img *m, const Elf64_Shdr *s)
{
    size_t k = m->eh->e_shstrndx;
    if (k >= m->nsh)
        return NULL;
    const Elf64_Shdr *st = &m->sh[k];
    if (!in(m, st->sh_offset, st->sh_size) || s->sh_name >= st->sh_size)
        return NULL;
    const char *n = (const char *)m->p + st->sh_offset + s->sh_name;
    return memchr(n, 0, st->sh_size - s->sh_name) ? n : NULL;
}

static int cand_rank_cmp(const icpp_ftab_entry *a, const icpp_ftab_entry *b)
{
    static const int bind_rank[] = {[STB_LOCAL] = 2, [STB_GLOBAL] = 0, [STB_WEAK] = 1};
    int ra = a->bind <= STB_WEAK ? bind_rank[a->bind] : 3;
    int rb = b->bind <= STB_WEAK ? bind_rank[b->bind] : 3;
    if (ra != rb)
        return ra - rb;
    size_t ua = strspn(a->sym, "_"), ub = strspn(b->sym, "_");
    if (ua != ub)
        return ua < ub ? -1 : 1;
    size_t la = strlen(a->sym), lb = strlen(b->sym);
    if (la != lb)
        return la < lb ? -1 : 1;
    int c = strcmp(a->sym, b->sym);
    return c ? c : (int)a->source - (int)b->source;
}

static int cand_cmp(const void *pa, const void *pb)
{
    const icpp_ftab_entry *a = pa, *b = pb;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    if (!a->sym || !b->sym)
        return a->sym ? -1 : (b->sym ? 1 : 0);     /* symbols before FDE-only */
    return cand_rank_cmp(a, b);
}

typedef struct vec {
    icpp_ftab_entry *v;
    size_t n, cap;
} vec;

static int push(vec *x, icpp_ftab_entry e)
{
    if (icpp_vec_reserve((void **)&x->v, &x->cap, x->n + 1, sizeof *x->v, 1024) < 0)
        return -1;
    x->v[x->n++] = e;
    return 0;
}

static int collect_symbols(const img *m, vec *x)
{
    for (size_t i = 0; i < m->nsh; i++) {
        const Elf64_Shdr *s = &m->sh[i];
        if ((s->sh_type != SHT_SYMTAB && s->sh_type != SHT_DYNSYM) || s->sh_entsize != sizeof(Elf64_Sym) ||
            !in(m, s->sh_offset, s->sh_size) || s->sh_link >= m->nsh || s->sh_offset % 8)
            continue;
        const Elf64_Shdr *str = &m->sh[s->sh_link];
        if (!in(m, str->sh_offset, str->sh_size) || str->sh_size == 0)
            continue;
        const char *strs = (const char *)m->p + str->sh_offset;
        const Elf64_Sym *sym = (const Elf64_Sym *)(m->p + s->sh_offset);
        size_t cnt = s->sh_size / sizeof *sym;
        for (size_t k = 0; k < cnt; k++) {
            int t = ELF64_ST_TYPE(sym[k].st_info);
            if ((t != STT_FUNC && t != STT_GNU_IFUNC) || sym[k].st_shndx == SHN_UNDEF || sym[k].st_value == 0 ||
                sym[k].st_name == 0 || sym[k].st_name >= str->sh_size)
                continue;
            const char *nm = strs + sym[k].st_name;
            if (!memchr(nm, 0, str->sh_size - sym[k].st_name))
                continue;
            icpp_ftab_entry e = {sym[k].st_value, sym[k].st_size, sym[k].st_value, nm,
                                 s->sh_type == SHT_SYMTAB ? ICPP_FSRC_SYMTAB : ICPP_FSRC_DYNSYM,
                                 (uint8_t)ELF64_ST_BIND(sym[k].st_info), 0, 0, 0};
            if (push(x, e) < 0)
                return -1;
        }
    }
    return 0;
}

/* Is addr a symbol start, or inside a sized symbol? (v sorted, unique) */
static int covered(const icpp_ftab_entry *v, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const icpp_ftab_entry *g = &v[lo - 1];
    return g->addr == addr || (g->size && addr < g->addr + g->size);
}

static int by_sym(const void *a, const void *b)
{
    const icpp_ftab_entry *const *x = a, *const *y = b;
    return strcmp((*x)->sym, (*y)->sym);
}

/* gcc's "foo.cold" / "foo.cold.N": code of foo's frame, never called. */
static int link_cold(icpp_ftab_entry *v, size_t n)
{
    const icpp_ftab_entry **s = malloc((n + 1) * sizeof *s);
    size_t ns = 0;
    if (!s)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (v[i].sym)
            s[ns++] = &v[i];
    qsort(s, ns, sizeof *s, by_sym);
    for (size_t i = 0; i < n; i++) {
        const char *c = v[i].sym ? strstr(v[i].sym, ".cold") : NULL;
        if (!c || (c[5] && c[5] != '.'))
            continue;
        char base[512];
        size_t bl = (size_t)(c - v[i].sym);
        if (bl == 0 || bl >= sizeof base)
            continue;
        memcpy(base, v[i].sym, bl);
        base[bl] = 0;
        icpp_ftab_entry key = {.sym = base};
        const icpp_ftab_entry *kp = &key;
        const icpp_ftab_entry **hit = bsearch(&kp, s, ns, sizeof *s, by_sym);
        if (hit)
            v[i].owner = (*hit)->addr;
    }
    free(s);
    return 0;
}

/* Executable PT_LOAD segments: where code is in the image (at most max). */
static size_t code_segs(const img *m, icpp_code_seg *out, size_t max)
{
    const Elf64_Ehdr *eh = m->eh;
    if (eh->e_phentsize != sizeof(Elf64_Phdr) || !in(m, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)) ||
        eh->e_phoff % 8)
        return 0;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(m->p + eh->e_phoff);
    size_t k = 0;
    for (size_t i = 0; i < eh->e_phnum && k < max; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && in(m, ph[i].p_offset, ph[i].p_filesz))
            out[k++] = (icpp_code_seg){ph[i].p_vaddr, ph[i].p_offset, ph[i].p_filesz};
    return k;
}

int icpp_functab_build(const uint8_t *p, size_t len, icpp_ftab_entry **out, size_t *nout, icpp_err *err)
{
    return icpp_functab_build_with(p, len, icpp_lde_coldpart, out, nout, err);   /* = Zydis's table, ~4x faster */
}

int icpp_functab_build_with(const uint8_t *p, size_t len, icpp_insn_decoder decode, icpp_ftab_entry **out,
                            size_t *nout, icpp_err *err)
{
    img m;
    *out = NULL;
    *nout = 0;
    int r = open_img(&m, p, len, err);
    if (r < 0)
        return r;
    vec x = {0}, sig = {0};
    if (collect_symbols(&m, &x) < 0)
        goto oom;
    if (x.n)
        qsort(x.v, x.n, sizeof *x.v, cand_cmp);
    /* Fold aliases: the first of each address run is the preferred name;
     * keep the largest size seen. */
    size_t w = 0;
    for (size_t i = 0; i < x.n;) {
        size_t j = i;
        uint64_t size = 0;
        for (; j < x.n && x.v[j].addr == x.v[i].addr; j++)
            if (x.v[j].size > size)
                size = x.v[j].size;
        x.v[w] = x.v[i];
        x.v[w].size = size;
        w++;
        i = j;
    }
    x.n = w;
    /* FDE starts no symbol covers. */
    size_t nsym = x.n;
    for (size_t i = 0; i < m.nsh; i++) {
        const char *nm = shname(&m, &m.sh[i]);
        if (!nm || strcmp(nm, ".eh_frame") || m.sh[i].sh_type == SHT_NOBITS || !in(&m, m.sh[i].sh_offset, m.sh[i].sh_size))
            continue;
        icpp_fde *f = NULL;
        size_t nf = 0;
        icpp_err ferr;
        if (icpp_fde_parse(m.p + m.sh[i].sh_offset, m.sh[i].sh_size, m.sh[i].sh_addr, 1, &f, &nf, &ferr) < 0)
            nf = 0;         /* a bad .eh_frame costs FDE-only functions, not the module */
        for (size_t k = 0; k < nf; k++)
            if (f[k].lo && !covered(x.v, nsym, f[k].lo) &&
                push(&x, (icpp_ftab_entry){f[k].lo, f[k].hi - f[k].lo, f[k].lo, NULL, ICPP_FSRC_FDE, STB_LOCAL,
                                           f[k].signal, f[k].entry == ICPP_FDE_ENTRY_FRAME, 0}) < 0) {
                free(f);
                goto oom;
            }
        for (size_t k = 0; k < nf; k++)
            if (f[k].signal && push(&sig, (icpp_ftab_entry){.addr = f[k].lo, .size = f[k].hi - f[k].lo}) < 0) {
                free(f);
                goto oom;
            }
        free(f);
    }
    if (x.n)
        qsort(x.v, x.n, sizeof *x.v, cand_cmp);
    w = 0;
    for (size_t i = 0; i < x.n; i++)
        if (w == 0 || x.v[w - 1].addr != x.v[i].addr)
            x.v[w++] = x.v[i];
    x.n = w;
    if (link_cold(x.v, x.n) < 0)
        goto oom;
    /* stripped cold parts: from the jumps that enter them */
    icpp_code_seg segs[16];
    if (icpp_coldpart_link(p, len, segs, code_segs(&m, segs, 16), decode, x.v, x.n) < 0)
        goto oom;
    /* PLT stubs: FDE-only code in a PLT section. */
    for (size_t i = 0; i < m.nsh; i++) {
        const char *nm = shname(&m, &m.sh[i]);
        if (!nm || (strcmp(nm, ".plt") && strcmp(nm, ".plt.sec") && strcmp(nm, ".plt.got") && strcmp(nm, ".plt.bnd")))
            continue;
        for (size_t k = 0; k < x.n; k++)
            if (x.v[k].source == ICPP_FSRC_FDE && x.v[k].addr - m.sh[i].sh_addr < m.sh[i].sh_size)
                x.v[k].plt = 1;
    }
    /* Mark entries whose first bytes (what a hook would overwrite) touch
     * signal-return code: the kernel returns into it, nobody calls it. */
    for (size_t i = 0; i < x.n; i++)
        for (size_t k = 0; k < sig.n; k++)
            if (x.v[i].addr < sig.v[k].addr + sig.v[k].size && sig.v[k].addr < x.v[i].addr + 8)
                x.v[i].signal = 1;
    free(sig.v);
    for (size_t i = 1; i < x.n; i++)
        assert(x.v[i - 1].addr < x.v[i].addr);      /* functab.h: sorted, one entry per start */
    *out = x.v;
    *nout = x.n;
    return 0;
oom:
    free(x.v);
    free(sig.v);
    return icpp_err_set(err, ENOMEM, "out of memory reading the function table");
}

int icpp_functab_section(const uint8_t *p, size_t len, const char *name, const uint8_t **sec, size_t *n)
{
    img m;
    if (open_img(&m, p, len, NULL) < 0)
        return -1;
    for (size_t i = 0; i < m.nsh; i++) {
        const char *nm = shname(&m, &m.sh[i]);
        if (!nm || strcmp(nm, name) || m.sh[i].sh_type == SHT_NOBITS || !in(&m, m.sh[i].sh_offset, m.sh[i].sh_size))
            continue;
        *sec = m.p + m.sh[i].sh_offset;
        *n = m.sh[i].sh_size;
        return 0;
    }
    return -1;
}

static int notes(const img *m, uint64_t off, uint64_t size, icpp_build_id *out)
{
    if (!in(m, off, size))
        return 0;
    const uint8_t *p = m->p + off, *end = p + size;
    while ((size_t)(end - p) >= sizeof(Elf64_Nhdr)) {
        Elf64_Nhdr nh;
        memcpy(&nh, p, sizeof nh);
        p += sizeof nh;
        uint64_t nsz = ((uint64_t)nh.n_namesz + 3) & ~3ull, dsz = ((uint64_t)nh.n_descsz + 3) & ~3ull;
        if (nsz > (uint64_t)(end - p) || dsz > (uint64_t)(end - p) - nsz)
            return 0;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(p, "GNU", 4) && nh.n_descsz > 0) {
            out->len = (uint8_t)(nh.n_descsz > ICPP_BUILD_ID_MAX ? ICPP_BUILD_ID_MAX : nh.n_descsz);
            memcpy(out->bytes, p + nsz, out->len);
            return 1;
        }
        p += nsz + dsz;
    }
    return 0;
}

int icpp_functab_build_id(const uint8_t *p, size_t len, icpp_build_id *out)
{
    img m;
    memset(out, 0, sizeof *out);
    if (open_img(&m, p, len, NULL) < 0)
        return -1;
    for (size_t i = 0; i < m.nsh; i++)
        if (m.sh[i].sh_type == SHT_NOTE && notes(&m, m.sh[i].sh_offset, m.sh[i].sh_size, out))
            return 0;
    const Elf64_Ehdr *eh = m.eh;
    if (eh->e_phentsize == sizeof(Elf64_Phdr) && in(&m, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)) &&
        eh->e_phoff % 8 == 0) {
        const Elf64_Phdr *ph = (const Elf64_Phdr *)(p + eh->e_phoff);
        for (size_t i = 0; i < eh->e_phnum; i++)
            if (ph[i].p_type == PT_NOTE && notes(&m, ph[i].p_offset, ph[i].p_filesz, out))
                return 0;
    }
    return 0;
}
