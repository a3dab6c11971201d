/* module.c -- ELF modules: build-id, load bias, function table with demangled names. */
#include "module.h"
#include "cfi.h"

#include <bfd.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DMGL_PARAMS
#define DMGL_PARAMS (1 << 0)
#define DMGL_ANSI   (1 << 1)
#endif

struct icpp_module {
    char            *path;
    int              fd;
    Elf             *elf;
    icpp_module_kind kind;
    int              is_static;
    icpp_build_id    build_id;
    uint64_t         text_lo, text_hi;
    icpp_func       *funcs;     /* sorted by addr, unique addr */
    size_t           nfuncs;
    char           **strings;   /* names we own */
    size_t           nstrings, capstrings;
};

/* A symbol candidate before aliases are folded. */
typedef struct cand {
    uint64_t addr, size;
    const char *sym;            /* points into the ELF string table */
    uint8_t bind, source;
} cand;

static int once_elf_version(void)
{
    static int ok = -1;
    if (ok < 0)
        ok = elf_version(EV_CURRENT) != EV_NONE;
    return ok;
}

char *icpp_demangle(const char *sym)
{
    if (!sym || sym[0] != '_' || sym[1] != 'Z')
        return NULL;
    return bfd_demangle(NULL, sym, DMGL_PARAMS | DMGL_ANSI);
}

char *icpp_build_id_hex(const icpp_build_id *b, char *buf, size_t bufsz)
{
    size_t i, o = 0;
    if (bufsz == 0)
        return buf;
    buf[0] = 0;
    for (i = 0; i < b->len && o + 3 <= bufsz; i++)
        o += (size_t)snprintf(buf + o, bufsz - o, "%02x", b->bytes[i]);
    return buf;
}

static char *own(icpp_module *m, char *s)
{
    if (!s)
        return NULL;
    if (m->nstrings == m->capstrings) {
        size_t nc = m->capstrings ? 2 * m->capstrings : 256;
        char **nv = realloc(m->strings, nc * sizeof *nv);
        if (!nv) {
            free(s);
            return NULL;
        }
        m->strings = nv;
        m->capstrings = nc;
    }
    m->strings[m->nstrings++] = s;
    return s;
}

/* Lower is better: global beats weak beats local, then fewer leading '_',
 * then shorter, then symtab over dynsym (same name usually). */
static int cand_rank_cmp(const cand *a, const cand *b)
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
    const cand *a = pa, *b = pb;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return cand_rank_cmp(a, b);
}

static int collect_symbols(icpp_module *m, cand **out, size_t *nout, icpp_err *err)
{
    cand *v = NULL;
    size_t n = 0, cap = 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(m->elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || sh.sh_entsize == 0)
            continue;
        size_t cnt = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < cnt; i++) {
            GElf_Sym s;
            if (!gelf_getsym(d, (int)i, &s))
                break;
            int t = GELF_ST_TYPE(s.st_info);
            if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_value == 0)
                continue;
            const char *nm = elf_strptr(m->elf, sh.sh_link, s.st_name);
            if (!nm || !*nm)
                continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                cand *nv = realloc(v, cap * sizeof *nv);
                if (!nv) {
                    free(v);
                    return icpp_err_set(err, ENOMEM, "%s: out of memory reading symbols", m->path);
                }
                v = nv;
            }
            v[n++] = (cand){s.st_value, s.st_size, nm, (uint8_t)GELF_ST_BIND(s.st_info),
                            sh.sh_type == SHT_SYMTAB ? ICPP_FSRC_SYMTAB : ICPP_FSRC_DYNSYM};
        }
    }
    *out = v;
    *nout = n;
    return 0;
}

static int func_cmp(const void *pa, const void *pb)
{
    const icpp_func *a = pa, *b = pb;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* Is addr inside [f.addr, f.addr+size) for some function with a size? */
static int covered(const icpp_func *f, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (f[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    const icpp_func *g = &f[lo - 1];
    return g->addr == addr || (g->size && addr < g->addr + g->size);
}

static int link_cold_parts(icpp_module *m);

static int build_functions(icpp_module *m, icpp_err *err)
{
    cand *c = NULL;
    size_t nc = 0;
    int r = collect_symbols(m, &c, &nc, err);
    if (r < 0)
        return r;
    if (nc)
        qsort(c, nc, sizeof *c, cand_cmp);

    icpp_fde *fdes = NULL;
    size_t nfdes = 0;
    icpp_err ferr;
    if (icpp_fde_list(m->elf, 0, &fdes, &nfdes, &ferr) < 0)
        nfdes = 0;      /* a bad .eh_frame costs us FDE-only names, not the module */

    m->funcs = calloc(nc + nfdes + 1, sizeof *m->funcs);
    if (!m->funcs) {
        free(c);
        free(fdes);
        return icpp_err_set(err, ENOMEM, "%s: out of memory", m->path);
    }
    size_t n = 0;
    for (size_t i = 0; i < nc;) {
        size_t j = i;
        uint64_t size = 0;
        for (; j < nc && c[j].addr == c[i].addr; j++)
            if (c[j].size > size)
                size = c[j].size;
        char *sym = own(m, strdup(c[i].sym));
        char *dem = own(m, icpp_demangle(c[i].sym));
        if (!sym) {
            free(c);
            free(fdes);
            return icpp_err_set(err, ENOMEM, "%s: out of memory", m->path);
        }
        m->funcs[n++] = (icpp_func){c[i].addr, size, dem ? dem : sym, sym, c[i].source, c[i].addr};
        i = j;
    }
    free(c);
    size_t nsym = n;
    for (size_t i = 0; i < nfdes; i++) {
        if (fdes[i].lo == 0 || covered(m->funcs, nsym, fdes[i].lo))
            continue;
        char buf[32];
        snprintf(buf, sizeof buf, "fn_%" PRIx64, fdes[i].lo);
        char *s = own(m, strdup(buf));
        if (!s)
            break;
        m->funcs[n++] = (icpp_func){fdes[i].lo, fdes[i].hi - fdes[i].lo, s, s, ICPP_FSRC_FDE, fdes[i].lo};
    }
    free(fdes);
    if (n)
        qsort(m->funcs, n, sizeof *m->funcs, func_cmp);
    /* Two FDEs can start at one address; keep the first. */
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || m->funcs[w - 1].addr != m->funcs[i].addr)
            m->funcs[w++] = m->funcs[i];
    m->nfuncs = w;
    return link_cold_parts(m);
}

static int name_cmp(const void *a, const void *b)
{
    const icpp_func *const *x = a, *const *y = b;
    return strcmp((*x)->sym, (*y)->sym);
}

/* gcc splits rarely run blocks into "foo.cold" (or "foo.cold.N"): code that
 * runs in foo's frame and is never entered by a call.  Point it at foo. */
static int link_cold_parts(icpp_module *m)
{
    const icpp_func **by_name = malloc((m->nfuncs + 1) * sizeof *by_name);
    if (!by_name)
        return -ENOMEM;
    for (size_t i = 0; i < m->nfuncs; i++) {
        m->funcs[i].owner = m->funcs[i].addr;
        by_name[i] = &m->funcs[i];
    }
    qsort(by_name, m->nfuncs, sizeof *by_name, name_cmp);
    for (size_t i = 0; i < m->nfuncs; i++) {
        const char *c = strstr(m->funcs[i].sym, ".cold");
        if (!c || (c[5] && c[5] != '.'))
            continue;
        char base[512];
        size_t bl = (size_t)(c - m->funcs[i].sym);
        if (bl == 0 || bl >= sizeof base)
            continue;
        memcpy(base, m->funcs[i].sym, bl);
        base[bl] = 0;
        icpp_func key = {.sym = base};
        const icpp_func *kp = &key;
        const icpp_func **hit = bsearch(&kp, by_name, m->nfuncs, sizeof *by_name, name_cmp);
        if (hit)
            m->funcs[i].owner = (*hit)->addr;
    }
    free(by_name);
    return 0;
}

static int read_headers(icpp_module *m, icpp_err *err)
{
    GElf_Ehdr eh;
    if (!gelf_getehdr(m->elf, &eh))
        return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot read ELF header: %s", m->path, elf_errmsg(-1));
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
        return icpp_err_set(err, ICPP_EUNSUPPORTED,
                            "%s: not an x86-64 ELF file (ICPP supports Linux x86-64 only)", m->path);
    if (eh.e_type != ET_EXEC && eh.e_type != ET_DYN)
        return icpp_err_set(err, ICPP_EUNSUPPORTED,
                            "%s: ELF type %u is neither an executable nor a shared object", m->path,
                            eh.e_type);
    size_t nph;
    if (elf_getphdrnum(m->elf, &nph) != 0)
        return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot read program headers: %s", m->path,
                            elf_errmsg(-1));
    int interp = 0, dynamic = 0, pie_flag = 0;
    m->text_lo = UINT64_MAX;
    m->text_hi = 0;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(m->elf, (int)i, &ph))
            return icpp_err_set(err, ICPP_EFORMAT, "%s: bad program header %zu", m->path, i);
        if (ph.p_type == PT_INTERP)
            interp = 1;
        if (ph.p_type == PT_DYNAMIC)
            dynamic = 1;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
            if (ph.p_vaddr < m->text_lo)
                m->text_lo = ph.p_vaddr;
            if (ph.p_vaddr + ph.p_memsz > m->text_hi)
                m->text_hi = ph.p_vaddr + ph.p_memsz;
        }
    }
    if (m->text_lo == UINT64_MAX)
        m->text_lo = 0;
    /* DF_1_PIE tells a (static-)PIE from a shared object. */
    Elf_Scn *scn = NULL;
    while (dynamic && (scn = elf_nextscn(m->elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || sh.sh_entsize == 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Dyn dyn;
            if (gelf_getdyn(d, (int)i, &dyn) && dyn.d_tag == DT_FLAGS_1 && (dyn.d_un.d_val & DF_1_PIE))
                pie_flag = 1;
        }
    }
    if (eh.e_type == ET_EXEC)
        m->kind = ICPP_MOD_EXEC;
    else
        m->kind = (interp || pie_flag) ? ICPP_MOD_PIE : ICPP_MOD_DSO;
    m->is_static = !interp && m->kind != ICPP_MOD_DSO;

    const void *bid = NULL;
    ssize_t blen = dwelf_elf_gnu_build_id(m->elf, &bid);
    if (blen > 0 && bid) {
        if (blen > ICPP_BUILD_ID_MAX)
            blen = ICPP_BUILD_ID_MAX;
        m->build_id.len = (uint8_t)blen;
        memcpy(m->build_id.bytes, bid, (size_t)blen);
    }
    return 0;
}

int icpp_elf_build_id(const char *path, icpp_build_id *out, icpp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!once_elf_version())
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "libelf: version mismatch");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int r = 0;
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        r = icpp_err_set(err, ICPP_EFORMAT, "%s: not an ELF file", path);
    } else {
        const void *bid = NULL;
        ssize_t n = dwelf_elf_gnu_build_id(elf, &bid);
        if (n > 0 && bid) {
            out->len = (uint8_t)(n > ICPP_BUILD_ID_MAX ? ICPP_BUILD_ID_MAX : n);
            memcpy(out->bytes, bid, out->len);
        }
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return r;
}

icpp_module *icpp_module_open(const char *path, icpp_err *err)
{
    if (!once_elf_version()) {
        icpp_err_set(err, ICPP_EUNSUPPORTED, "libelf: version mismatch");
        return NULL;
    }
    icpp_module *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        icpp_err_set(err, ENOMEM, "%s: out of memory", path);
        return NULL;
    }
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) {
        icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
        goto fail;
    }
    m->elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
    if (!m->elf || elf_kind(m->elf) != ELF_K_ELF) {
        icpp_err_set(err, ICPP_EFORMAT, "%s: not an ELF file", path);
        goto fail;
    }
    if (read_headers(m, err) < 0 || build_functions(m, err) < 0)
        goto fail;
    return m;
fail:
    icpp_module_close(m);
    return NULL;
}

void icpp_module_close(icpp_module *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nstrings; i++)
        free(m->strings[i]);
    free(m->strings);
    free(m->funcs);
    if (m->elf)
        elf_end(m->elf);
    if (m->fd >= 0)
        close(m->fd);
    free(m->path);
    free(m);
}

const char *icpp_module_path(const icpp_module *m) { return m->path; }
Elf *icpp_module_elf(const icpp_module *m) { return m->elf; }
int icpp_module_fd(const icpp_module *m) { return m->fd; }
icpp_module_kind icpp_module_kind_of(const icpp_module *m) { return m->kind; }
int icpp_module_is_static(const icpp_module *m) { return m->is_static; }
const icpp_build_id *icpp_module_build_id(const icpp_module *m) { return &m->build_id; }
size_t icpp_module_nfuncs(const icpp_module *m) { return m->nfuncs; }
const icpp_func *icpp_module_funcs(const icpp_module *m) { return m->funcs; }

void icpp_module_text_range(const icpp_module *m, uint64_t *lo, uint64_t *hi)
{
    *lo = m->text_lo;
    *hi = m->text_hi;
}

int icpp_module_bias(const icpp_module *m, uint64_t start, uint64_t pgoff, uint64_t *bias,
                     icpp_err *err)
{
    size_t nph;
    if (elf_getphdrnum(m->elf, &nph) != 0)
        return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot read program headers", m->path);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(m->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        uint64_t off0 = ph.p_offset & ~(uint64_t)0xfff;
        if (pgoff >= off0 && pgoff < ph.p_offset + (ph.p_filesz ? ph.p_filesz : 1)) {
            *bias = start - pgoff - ph.p_vaddr + ph.p_offset;
            return 0;
        }
    }
    return icpp_err_set(err, ICPP_EMISMATCH,
                        "%s: no loadable segment holds file offset 0x%" PRIx64
                        " (is the mapping of another file?)",
                        m->path, pgoff);
}

static size_t upper_bound(const icpp_func *f, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (f[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const icpp_func *icpp_module_func_at(const icpp_module *m, uint64_t addr)
{
    size_t i = upper_bound(m->funcs, m->nfuncs, addr);
    if (i == 0)
        return NULL;
    const icpp_func *f = &m->funcs[i - 1];
    if (f->size)
        return addr < f->addr + f->size ? f : NULL;
    if (addr >= m->text_hi)
        return NULL;
    return f;   /* unsized: up to the next function, which starts after addr */
}

const icpp_func *icpp_module_func_start(const icpp_module *m, uint64_t addr)
{
    size_t i = upper_bound(m->funcs, m->nfuncs, addr);
    return (i && m->funcs[i - 1].addr == addr) ? &m->funcs[i - 1] : NULL;
}
