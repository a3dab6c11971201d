/* gt_module.c -- ELF modules for icpp-gt: load bias, CFI, function symbols. */
#include "gt_module.h"

#include "gt_cold.h"

#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

static gt_module **modules;     /* every module ever asked for */
static size_t nmodules, capmodules;

void *gt_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "icpp-gt: out of memory\n");
        exit(125);
    }
    return p;
}

static int sym_cmp(const void *a, const void *b)
{
    const gt_sym *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return strcmp(x->name, y->name);
}

/* Read FUNC symbols from .symtab, or .dynsym when there is no .symtab. */
static void load_symbols(gt_module *m)
{
    Elf_Scn *scn = NULL, *use = NULL;
    GElf_Shdr sh, ush = {0};
    while ((scn = elf_nextscn(m->elf, scn))) {
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB) {
            use = scn;
            ush = sh;
            break;
        }
        if (sh.sh_type == SHT_DYNSYM && !use) {
            use = scn;
            ush = sh;
        }
    }
    if (!use || ush.sh_entsize == 0)
        return;
    Elf_Data *d = elf_getdata(use, NULL);
    if (!d)
        return;
    size_t n = ush.sh_size / ush.sh_entsize;
    m->syms = gt_xrealloc(NULL, n * sizeof *m->syms);
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        if (!gelf_getsym(d, (int)i, &s))
            continue;
        int type = GELF_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
            s.st_shndx == SHN_UNDEF || s.st_value == 0)
            continue;
        const char *name = elf_strptr(m->elf, ush.sh_link, s.st_name);
        if (!name || !*name)
            continue;
        int bind = GELF_ST_BIND(s.st_info);
        gt_sym *g = &m->syms[m->nsyms++];
        g->addr = s.st_value;
        g->size = s.st_size;
        g->name = name;
        /* Prefer global names, then names without leading underscores, so
         * that aliases resolve the same way every time. */
        g->rank = (bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 2 : 4) +
                  (name[0] == '_');
    }
    qsort(m->syms, m->nsyms, sizeof *m->syms, sym_cmp);
}

/* Decode one pointer of .eh_frame_hdr in the encodings that linkers emit. */
static bool read_enc(const uint8_t **p, const uint8_t *end, int enc,
                     uint64_t hdr_vaddr, uint64_t *out)
{
    int64_t v;
    switch (enc & 0x0f) {
    case 0x03: /* udata4 */
        if (end - *p < 4) return false;
        { uint32_t u; memcpy(&u, *p, 4); v = u; }
        *p += 4;
        break;
    case 0x0b: /* sdata4 */
        if (end - *p < 4) return false;
        { int32_t s; memcpy(&s, *p, 4); v = s; }
        *p += 4;
        break;
    case 0x04: case 0x0c: /* udata8, sdata8 */
        if (end - *p < 8) return false;
        memcpy(&v, *p, 8);
        *p += 8;
        break;
    default:
        return false;
    }
    switch (enc & 0x70) {
    case 0x00: *out = (uint64_t)v; return true;              /* absptr */
    case 0x30: *out = hdr_vaddr + (uint64_t)v; return true;  /* datarel */
    default: return false;
    }
}

/* FDE start addresses from the binary-search table of .eh_frame_hdr: the
 * function start for code that has CFI but no symbol (stripped libraries). */
static void load_fdes(gt_module *m)
{
    size_t nph;
    if (elf_getphdrnum(m->elf, &nph) != 0)
        return;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(m->elf, (int)i, &ph) || ph.p_type != PT_GNU_EH_FRAME)
            continue;
        Elf_Data *d = elf_getdata_rawchunk(m->elf, (int64_t)ph.p_offset,
                                           ph.p_filesz, ELF_T_BYTE);
        if (!d || d->d_size < 4)
            return;
        const uint8_t *p = d->d_buf, *end = p + d->d_size;
        int ver = p[0], ptr_enc = p[1], cnt_enc = p[2], tab_enc = p[3];
        p += 4;
        uint64_t dummy, count;
        if (ver != 1 || ptr_enc == 0xff || cnt_enc == 0xff || tab_enc == 0xff)
            return;
        /* eh_frame_ptr is usually pcrel; we only skip over it. */
        if (!read_enc(&p, end, ptr_enc & 0x0f, 0, &dummy) ||
            !read_enc(&p, end, cnt_enc, ph.p_vaddr, &count))
            return;
        if (count > (uint64_t)(end - p))
            return;
        m->fdes = gt_xrealloc(NULL, count * sizeof *m->fdes);
        for (uint64_t k = 0; k < count; k++) {
            uint64_t loc, fde;
            if (!read_enc(&p, end, tab_enc, ph.p_vaddr, &loc) ||
                !read_enc(&p, end, tab_enc, ph.p_vaddr, &fde))
                break;
            m->fdes[m->nfdes++] = loc;
        }
        return;
    }
}

static void load_phdrs(gt_module *m)
{
    size_t nph;
    if (elf_getphdrnum(m->elf, &nph) != 0)
        return;
    m->loads = gt_xrealloc(NULL, nph * sizeof *m->loads);
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(m->elf, (int)i, &ph) && ph.p_type == PT_LOAD)
            m->loads[m->nloads++] = (gt_load){ph.p_vaddr, ph.p_offset, ph.p_filesz,
                                              ph.p_flags};
    }
}

static void setup(gt_module *m)
{
    GElf_Ehdr eh;
    if (!gelf_getehdr(m->elf, &eh) || eh.e_machine != EM_X86_64) {
        snprintf(m->error, sizeof m->error, "%s: not an x86-64 ELF file",
                 m->path);
        return;
    }
    m->entry = eh.e_entry;
    const void *bid;
    ssize_t n = dwelf_elf_gnu_build_id(m->elf, &bid);
    for (ssize_t i = 0; i < n && i < 20; i++)
        sprintf(m->build_id + 2 * i, "%02x", ((const uint8_t *)bid)[i]);
    load_phdrs(m);
    load_symbols(m);
    load_fdes(m);
    /* The entry code ends where the next function with CFI starts. */
    m->entry_end = m->entry ? m->entry + 64 : 0;
    for (size_t i = 0; i < m->nfdes; i++)
        if (m->fdes[i] > m->entry && m->fdes[i] < m->entry_end)
            m->entry_end = m->fdes[i];
    m->eh_cfi = dwarf_getcfi_elf(m->elf);
    m->dw = dwarf_begin_elf(m->elf, DWARF_C_READ, NULL);
    if (m->dw)
        m->dbg_cfi = dwarf_getcfi(m->dw);
    gt_cold_find(m);
    if (!m->eh_cfi && !m->dbg_cfi)
        snprintf(m->error, sizeof m->error, "%s: no .eh_frame or .debug_frame",
                 m->path);
    m->ok = true;
}

static gt_module *new_module(const char *path)
{
    gt_module *m = gt_xrealloc(NULL, sizeof *m);
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    m->index = -1;
    m->fd = -1;
    if (nmodules == capmodules) {
        capmodules = capmodules ? 2 * capmodules : 32;
        modules = gt_xrealloc(modules, capmodules * sizeof *modules);
    }
    modules[nmodules++] = m;
    return m;
}

gt_module *gt_module_get(const char *path)
{
    for (size_t i = 0; i < nmodules; i++)
        if (strcmp(modules[i]->path, path) == 0)
            return modules[i];
    gt_module *m = new_module(path);
    elf_version(EV_CURRENT);
    m->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (m->fd < 0) {
        snprintf(m->error, sizeof m->error, "%s: %s", path, strerror(errno));
        return m;
    }
    m->elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
    if (!m->elf || elf_kind(m->elf) != ELF_K_ELF) {
        snprintf(m->error, sizeof m->error, "%s: not an ELF file", path);
        return m;
    }
    setup(m);
    return m;
}

gt_module *gt_module_vdso(void)
{
    for (size_t i = 0; i < nmodules; i++)
        if (strcmp(modules[i]->path, "[vdso]") == 0)
            return modules[i];
    gt_module *m = new_module("[vdso]");
    uintptr_t base = getauxval(AT_SYSINFO_EHDR);
    /* The vdso's size: the end of our own [vdso] mapping. */
    size_t size = 0;
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == base)
            size = hi - lo;
    }
    if (f)
        fclose(f);
    if (!base || !size) {
        snprintf(m->error, sizeof m->error, "[vdso]: not found in icpp-gt itself");
        return m;
    }
    m->image = gt_xrealloc(NULL, size);
    memcpy(m->image, (void *)base, size);
    elf_version(EV_CURRENT);
    m->elf = elf_memory(m->image, size);
    if (!m->elf) {
        snprintf(m->error, sizeof m->error, "[vdso]: %s", elf_errmsg(-1));
        return m;
    }
    setup(m);
    return m;
}

bool gt_module_bias(const gt_module *m, uint64_t start, uint64_t pgoff,
                    bool exec, uint64_t *bias)
{
    /* The loader maps each PT_LOAD at its page-aligned offset; prefer the
     * segment mapped exactly there with the mapping's exec permission, as
     * segments may differ in (vaddr - offset). */
    const gt_load *best = NULL;
    int best_score = -1;
    for (size_t i = 0; i < m->nloads; i++) {
        const gt_load *l = &m->loads[i];
        uint64_t lo = l->offset & ~(uint64_t)0xfff;
        if (pgoff < lo || pgoff >= l->offset + l->filesz)
            continue;
        int score = (lo == pgoff) * 2 + (((l->flags & PF_X) != 0) == exec);
        if (score > best_score) {
            best = l;
            best_score = score;
        }
    }
    if (!best)
        return false;
    *bias = start - pgoff - best->vaddr + best->offset;
    return true;
}

bool gt_module_func(gt_module *m, uint64_t addr, bool have_fde,
                    uint64_t *start, const char **name)
{
    uint64_t owner;
    const char *oname;
    bool by_fde = false;
    if (!gt_module_sym(m, addr, start, name)) {
        by_fde = true;
        if (!have_fde)
            return false;   /* the FDE before ADDR need not cover it */
        size_t lo = 0, hi = m->nfdes;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (m->fdes[mid] <= addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo == 0)
            return false;
        *start = m->fdes[lo - 1];
    }
    if (gt_cold_owner(m, *start, by_fde, &owner, &oname)) {
        *start = owner;
        *name = oname;
    }
    return true;
}

bool gt_module_sym(const gt_module *m, uint64_t addr, uint64_t *start, const char **name)
{
    *start = addr;
    *name = NULL;
    /* Last symbol with sym.addr <= addr, then walk back over a few more in
     * case symbols nest (rare).  Within a run of aliases (same address) the
     * lowest index has the lowest rank and wins. */
    size_t lo = 0, hi = m->nsyms;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (m->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const gt_sym *best = NULL;
    for (size_t i = lo, k = 0; i-- > 0 && k < 16; k++) {
        const gt_sym *s = &m->syms[i];
        if (best && s->addr != best->addr)
            break;
        if (addr < s->addr + s->size)
            best = s;
    }
    if (best) {
        *start = best->addr;
        *name = best->name;
        return true;
    }
    return false;
}

bool gt_module_frame(const gt_module *m, uint64_t addr, Dwarf_Frame **frame)
{
    if (m->eh_cfi && dwarf_cfi_addrframe(m->eh_cfi, addr, frame) == 0)
        return true;
    if (m->dbg_cfi && dwarf_cfi_addrframe(m->dbg_cfi, addr, frame) == 0)
        return true;
    return false;
}

void gt_module_free_all(void)
{
    for (size_t i = 0; i < nmodules; i++) {
        gt_module *m = modules[i];
        if (m->eh_cfi)
            dwarf_cfi_end(m->eh_cfi);
        if (m->dw)
            dwarf_end(m->dw);
        if (m->elf)
            elf_end(m->elf);
        if (m->fd >= 0)
            close(m->fd);
        free(m->image);
        free(m->loads);
        free(m->syms);
        free(m->fdes);
        gt_cold_free(m);
        free(m->path);
        free(m);
    }
    free(modules);
    modules = NULL;
    nmodules = capmodules = 0;
}
