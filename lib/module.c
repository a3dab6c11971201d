/* module.c -- ELF modules: build-id, load bias, function table with demangled names; source lines and inlined functions from DWARF. */
#include "module.h"

#include "codec.h"
#include "debuginfo.h"
#include "fsafe.h"
#include "hmap.h"
#include "vec.h"

#include <bfd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    icpp_func       *funcs;     /* sorted by addr, unique addr; built on first use (funcs_of) */
    size_t           nfuncs;
    int              funcs_built;
    int              dbg_names; /* name the nameless functions from the debug file (name_from_debug) */
    char           **strings;   /* names we own */
    size_t           nstrings, capstrings;
    icpp_debuginfo   dbg;       /* the separate debug file (dbg.fd < 0: none), looked up when the
                                   binary lacks a symbol table or DWARF */
    Elf             *dbg_elf;   /* it, read with libelf */
    Elf             *dw_elf;    /* where DWARF comes from: elf, or dbg_elf when the binary has none */
    icpp_debuginfo   alt;       /* the dwz common file dw_elf's .gnu_debugaltlink names */
    Elf             *alt_elf;
    Dwarf           *alt_dw;
    Dwarf           *dw;        /* DWARF for source lines, opened on first use */
    int              dw_tried;
    struct dwtab    *dwcus;     /* subprogram tables of the CUs looked up so far (cu_table) */
    size_t           ndwcus, capdwcus;
    icpp_hmap        dwcu_ix;   /* CU DIE offset -> index into dwcus */
    int              dw_by_cu;  /* 1: .debug_aranges covers every CU with code; 0: not known yet; -1: no */
    struct dwtab    *dwwhole;   /* the whole module's table, when not by CU (built on first use) */
    icpp_hmap        dwnames;   /* linkage name (its address in .debug_str) -> demangled copy */
    size_t           refs;      /* icpp_module_open calls not closed yet (open_mods) */
    struct stat      st;        /* the file as opened */
    char            *dbgenv;    /* what the debug-file lookup read from the environment (debug_env) */
    int              has_syms, has_dwarf;   /* of the binary itself */
    int              remote;    /* no debug file here: debuginfod may be asked once it is due (ensure_remote) */
    int              needed;    /* a sample fell in it (icpp_module_need) */
};

/* Modules open in this process, shared.  A tool opens one file from several
 * places -- each pass over a recording, completion, PLT stubs, names, the
 * profile -- and a module's tables cost tens of ms to build for libc (its
 * functions with their cold parts, its DWARF).  One file is one module while
 * open: the same path, and the same device, inode, size and change time (a
 * file replaced or rewritten since is another), opened under the same
 * debug-file settings (debug_env).  The tools are single
 * threaded. */
static struct {
    icpp_module **v;
    size_t        n, cap;
} open_mods;

/* The environment the debug-file lookup reads (lib/debuginfo.c): a module
 * opened under other settings may have another debug file, so it is
 * another module.  NULL when out of memory (then it is shared with none). */
static char *debug_env(void)
{
    const char *d = getenv("ICPP_DEBUG_DIRS"), *u = getenv("DEBUGINFOD_URLS");
    size_t n = (d ? strlen(d) : 0) + (u ? strlen(u) : 0) + 4;
    char *e = malloc(n);
    if (e)
        snprintf(e, n, "%c%s\n%c%s", d ? '=' : '-', d ? d : "", u ? '=' : '-', u ? u : "");
    return e;
}

static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* One pc range [lo, hi) of a concrete DW_TAG_subprogram and the DIE's offset. */
struct dwfn {
    uint64_t lo, hi;            /* lo first: upper_bound's key */
    Dwarf_Off die;
};

/* The pc ranges of the subprograms of one CU or of a whole module, sorted. */
struct dwtab {
    struct dwfn *v;
    size_t       n, cap;
};

static size_t upper_bound(const void *base, size_t n, size_t stride, uint64_t addr);

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
    return icpp_hex(b->bytes, b->len, buf, bufsz);
}

static char *own(icpp_module *m, char *s)
{
    if (!s)
        return NULL;
    if (icpp_vec_reserve((void **)&m->strings, &m->capstrings, m->nstrings + 1, sizeof *m->strings, 256) < 0) {
        free(s);
        return NULL;
    }
    m->strings[m->nstrings++] = s;
    return s;
}

static int build_functions(icpp_module *m, icpp_err *err)
{
    size_t len = 0;
    const char *raw = elf_rawfile(m->elf, &len);
    if (!raw)
        return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot read the file image", m->path);
    icpp_ftab_entry *e = NULL;
    size_t n = 0;
    if (icpp_functab_build((const uint8_t *)raw, len, &e, &n, err) < 0)
        return icpp_err_prefix(err, "%s", m->path);
    m->funcs = calloc(n + 1, sizeof *m->funcs);
    if (!m->funcs) {
        free(e);
        return icpp_err_set(err, ENOMEM, "%s: out of memory", m->path);
    }
    for (size_t i = 0; i < n; i++) {
        char *sym, *dem = NULL;
        if (e[i].sym) {
            sym = own(m, strdup(e[i].sym));
            dem = own(m, icpp_demangle(e[i].sym));
        } else {
            char buf[32];
            snprintf(buf, sizeof buf, "fn_%" PRIx64, e[i].addr);
            sym = own(m, strdup(buf));
        }
        if (!sym) {
            free(e);
            return icpp_err_set(err, ENOMEM, "%s: out of memory", m->path);
        }
        m->funcs[i] = (icpp_func){e[i].addr, e[i].size, dem ? dem : sym, sym, e[i].source, e[i].owner, e[i].plt};
    }
    m->nfuncs = n;
    free(e);
    return 0;
}

/* Names from the debug file's symbol table for the functions the binary
 * found without a name (FDE starts; docs/debuginfo.md: a debug file names
 * functions, it never adds, moves, merges or renames one -- their identity
 * is what training sees). */
static int name_from_debug(icpp_module *m, icpp_err *err)
{
    size_t len = 0;
    const char *raw = elf_rawfile(m->dbg_elf, &len);
    icpp_ftab_entry *e = NULL;
    size_t n = 0;
    if (!raw || icpp_functab_build((const uint8_t *)raw, len, &e, &n, NULL) < 0)
        return 0;               /* an unreadable symbol table names nothing */
    for (size_t i = 0; i < m->nfuncs; i++) {
        icpp_func *f = &m->funcs[i];
        if (f->source != ICPP_FSRC_FDE)
            continue;           /* named by .dynsym already: the name training recorded */
        size_t k = upper_bound(e, n, sizeof *e, f->addr);
        if (!k || e[k - 1].addr != f->addr || !e[k - 1].sym)
            continue;
        char *sym = own(m, strdup(e[k - 1].sym)), *d = sym ? icpp_demangle(sym) : NULL, *dem = NULL;
        if (!sym || (d && !(dem = own(m, d)))) {
            free(e);
            return icpp_err_set(err, ENOMEM, "%s: out of memory", m->path);
        }
        f->sym = sym;
        f->name = dem ? dem : sym;
    }
    free(e);
    return 0;
}

/* The debug file m->dbg found: read it with libelf, and let it serve names and DWARF. */
static void use_debug(icpp_module *m)
{
    if (m->dbg.fd < 0)
        return;
    m->dbg_elf = elf_begin(m->dbg.fd, ELF_C_READ_MMAP, NULL);
    if (!m->dbg_elf || elf_kind(m->dbg_elf) != ELF_K_ELF)
        return;
    if (!m->has_dwarf)
        m->dw_elf = m->dbg_elf;
    m->dbg_names = !m->has_syms;    /* done when the function table is built (funcs_of) */
}

static int attach_debug(icpp_module *m, icpp_err *err)
{
    size_t len = 0, n;
    const uint8_t *raw = (const uint8_t *)elf_rawfile(m->elf, &len), *sec;
    if (!raw)
        return 0;
    m->has_syms = icpp_functab_section(raw, len, ".symtab", &sec, &n) == 0;
    m->has_dwarf = icpp_functab_section(raw, len, ".debug_info", &sec, &n) == 0;
    if (m->has_syms && m->has_dwarf)
        return 0;
    if (icpp_debuginfo_find(m->path, raw, len, &m->dbg) < 0)
        return icpp_err_set(err, ENOMEM, "%s: out of memory", m->path);
    /* nothing here: debuginfod is asked only when the names or DWARF are
     * used, and only for a binary the tool needs (docs/debuginfo.md) */
    m->remote = m->dbg.fd < 0 && icpp_debuginfo_remote_possible(&m->build_id);
    use_debug(m);
    return 0;
}

/* Ask debuginfod for the debug file, once, when the module's names or DWARF
 * are used and the query is due (icpp_debuginfo_remote_due). */
static void ensure_remote(icpp_module *m)
{
    if (!m->remote || !icpp_debuginfo_remote_due(&m->build_id))
        return;
    m->remote = 0;
    size_t len = 0;
    const uint8_t *raw = (const uint8_t *)elf_rawfile(m->elf, &len);
    if (!raw || icpp_debuginfo_find_remote(m->path, raw, len, &m->dbg) < 0 || m->dbg.fd < 0)
        return;
    use_debug(m);
    icpp_err err;
    if (m->funcs_built && m->dbg_names)
        name_from_debug(m, &err);   /* the table was built before: name it now */
    if (m->dw_tried && !m->dw && m->dw_elf == m->dbg_elf)
        m->dw_tried = 0;            /* no DWARF then: look again */
}

void icpp_module_need(icpp_module *m)
{
    if (!m->needed) {
        m->needed = 1;
        icpp_debuginfo_want(&m->build_id);
    }
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
    int fd = icpp_fs_named_begin(err);
    if (fd < 0)
        return fd;
    fd = icpp_fs_open_input(path, NULL, err);
    icpp_fs_named_end();
    if (fd < 0)
        return fd;
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
    m->dbg.fd = m->alt.fd = -1;     /* before any way out: icpp_module_close closes what is >= 0 */
    /* a file named inside an input: read with its owner's rights (lib/fsafe.h) */
    if (icpp_fs_named_begin(err) < 0)
        goto fail;
    m->fd = icpp_fs_open_input(path, NULL, err);
    icpp_fs_named_end();
    if (m->fd < 0)
        goto fail;
    m->dbgenv = debug_env();
    int known = m->dbgenv && fstat(m->fd, &m->st) == 0;
    if (known) {
        for (size_t i = 0; i < open_mods.n; i++)
            if (!strcmp(open_mods.v[i]->path, path) && same_file(&open_mods.v[i]->st, &m->st) &&
                !strcmp(open_mods.v[i]->dbgenv, m->dbgenv)) {
                icpp_module_close(m);
                open_mods.v[i]->refs++;
                return open_mods.v[i];
            }
    }
    m->elf = elf_begin(m->fd, ELF_C_READ_MMAP, NULL);
    if (!m->elf || elf_kind(m->elf) != ELF_K_ELF) {
        icpp_err_set(err, ICPP_EFORMAT, "%s: not an ELF file", path);
        goto fail;
    }
    m->dw_elf = m->elf;
    if (read_headers(m, err) < 0 || attach_debug(m, err) < 0)
        goto fail;
    if (known && icpp_vec_reserve((void **)&open_mods.v, &open_mods.cap, open_mods.n + 1, sizeof *open_mods.v, 16) == 0) {
        m->refs = 1;            /* out of memory: this one is not shared, nothing worse */
        open_mods.v[open_mods.n++] = m;
    }
    return m;
fail:
    icpp_module_close(m);
    return NULL;
}

void icpp_module_close(icpp_module *m)
{
    if (!m || (m->refs && --m->refs))
        return;
    for (size_t i = 0; i < open_mods.n; i++)
        if (open_mods.v[i] == m) {
            open_mods.v[i] = open_mods.v[--open_mods.n];
            break;
        }
    if (!open_mods.n) {
        free(open_mods.v);
        open_mods.v = NULL;
        open_mods.cap = 0;
    }
    for (size_t i = 0; i < m->nstrings; i++)
        free(m->strings[i]);
    free(m->strings);
    free(m->funcs);
    for (size_t i = 0; i < m->ndwcus; i++)
        free(m->dwcus[i].v);
    free(m->dwcus);
    icpp_hmap_free(&m->dwcu_ix);
    if (m->dwwhole)
        free(m->dwwhole->v);
    free(m->dwwhole);
    icpp_hmap_free(&m->dwnames);
    if (m->dw)
        dwarf_end(m->dw);
    if (m->alt_dw)
        dwarf_end(m->alt_dw);
    if (m->alt_elf)
        elf_end(m->alt_elf);
    icpp_debuginfo_release(&m->alt);
    if (m->dbg_elf)
        elf_end(m->dbg_elf);
    icpp_debuginfo_release(&m->dbg);
    if (m->elf)
        elf_end(m->elf);
    if (m->fd >= 0)
        close(m->fd);
    free(m->dbgenv);
    free(m->path);
    free(m);
}

const char *icpp_module_path(const icpp_module *m) { return m->path; }
const icpp_debuginfo *icpp_module_debuginfo(const icpp_module *m) { return &m->dbg; }
Elf *icpp_module_elf(const icpp_module *m) { return m->elf; }
int icpp_module_fd(const icpp_module *m) { return m->fd; }
icpp_module_kind icpp_module_kind_of(const icpp_module *m) { return m->kind; }
int icpp_module_is_static(const icpp_module *m) { return m->is_static; }
const icpp_build_id *icpp_module_build_id(const icpp_module *m) { return &m->build_id; }
/* The function table, built on first use: finding stripped cold parts
 * decodes the module's code (~30-60 ms for libc), which a reader that
 * needs only the CFI (icpp-sample's learn samples) must not pay while its
 * ring buffers fill.  Out of memory leaves the module without functions;
 * a debug file that cannot name them leaves them fn_ADDR. */
static const icpp_module *funcs_of(const icpp_module *cm)
{
    icpp_module *m = (icpp_module *)cm;     /* the object is never const: only the table is filled in */
    if (m->remote)
        ensure_remote(m);
    if (!m->funcs_built) {
        icpp_err err;
        m->funcs_built = 1;
        if (build_functions(m, &err) < 0) {
            free(m->funcs);
            m->funcs = NULL;
            m->nfuncs = 0;
        } else if (m->dbg_names) {
            name_from_debug(m, &err);
        }
    }
    return m;
}

size_t icpp_module_nfuncs(const icpp_module *m) { return funcs_of(m)->nfuncs; }
const icpp_func *icpp_module_funcs(const icpp_module *m) { return funcs_of(m)->funcs; }

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

int icpp_module_read(const icpp_module *m, uint64_t addr, void *buf, size_t n)
{
    size_t len = 0, nph;
    const char *raw = elf_rawfile(m->elf, &len);
    if (!raw || elf_getphdrnum(m->elf, &nph) != 0)
        return -1;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(m->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (addr < ph.p_vaddr || addr - ph.p_vaddr > ph.p_filesz || n > ph.p_filesz - (addr - ph.p_vaddr))
            continue;
        uint64_t off = ph.p_offset + (addr - ph.p_vaddr);
        if (off > len || n > len - off)
            return -1;
        memcpy(buf, raw + off, n);
        return 0;
    }
    return -1;
}

int icpp_module_is_sigreturn(const icpp_module *m, uint64_t addr)
{
    static const uint8_t restore_rt[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
    uint8_t b[9];
    return icpp_module_read(m, addr, b, sizeof b) == 0 && !memcmp(b, restore_rt, sizeof b);
}

/* The dwz common file of the debug file, given to libdw before it looks
 * for one itself (it would open the path without our input rules). */
static void attach_alt(icpp_module *m)
{
    size_t len = 0;
    const char *raw = elf_rawfile(m->dw_elf, &len);
    if (!raw || icpp_debuginfo_find_alt(m->dbg.path, (const uint8_t *)raw, len, &m->alt) < 0 || m->alt.fd < 0)
        return;
    m->alt_elf = elf_begin(m->alt.fd, ELF_C_READ_MMAP, NULL);
    m->alt_dw = m->alt_elf ? dwarf_begin_elf(m->alt_elf, DWARF_C_READ, NULL) : NULL;
    if (m->alt_dw)
        dwarf_setalt(m->dw, m->alt_dw);
}

static Dwarf *module_dwarf(icpp_module *m)
{
    if (m->remote)
        ensure_remote(m);
    if (!m->dw_tried) {
        m->dw_tried = 1;
        m->dw = dwarf_begin_elf(m->dw_elf, DWARF_C_READ, NULL);
        if (m->dw && m->dw_elf == m->dbg_elf)
            attach_alt(m);
    }
    return m->dw;
}

const char *icpp_module_srcline(icpp_module *m, uint64_t addr, int *line)
{
    module_dwarf(m);
    Dwarf_Die cu;
    if (!m->dw || !dwarf_addrdie(m->dw, addr, &cu))
        return NULL;
    Dwarf_Line *l = dwarf_getsrc_die(&cu, addr);
    const char *file = l ? dwarf_linesrc(l, NULL, NULL) : NULL;
    if (!file || dwarf_lineno(l, line) != 0)
        return NULL;
    return file;
}

/* How many of the n elements at base (stride bytes apart, each starting
 * with a uint64_t key, sorted by it) have key <= addr. */
static size_t upper_bound(const void *base, size_t n, size_t stride, uint64_t addr)
{
    _Static_assert(offsetof(icpp_func, addr) == 0 && offsetof(struct dwfn, lo) == 0 &&
                   offsetof(icpp_ftab_entry, addr) == 0, "keys first");
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint64_t key;
        memcpy(&key, (const char *)base + mid * stride, sizeof key);
        if (key <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* ---- inlined functions ----
 * dwarf_getscopes() finds the scopes at a pc by walking the whole CU, which
 * took 3.4 ms per address in sqlite3's amalgamation.  Instead: one pass over
 * a CU's top-level subprograms (and those in namespaces and classes) gives a
 * sorted table of pc ranges; an address then descends from its subprogram
 * through the nested scopes that hold it (3 us).  The CU is the address's by
 * .debug_aranges where that covers every CU (aranges_cover), else the tables
 * of all CUs are one. */

static int dwfn_cmp(const void *a, const void *b)
{
    const struct dwfn *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Add the pc ranges of the subprograms among parent's children to t; 0 or -ENOMEM. */
static int dwfns_collect(struct dwtab *t, Dwarf_Die *parent)
{
    Dwarf_Die c;
    if (dwarf_child(parent, &c) != 0)
        return 0;
    do {
        int tag = dwarf_tag(&c);
        if (tag == DW_TAG_namespace || tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
            tag == DW_TAG_union_type) {
            if (dwfns_collect(t, &c) < 0)
                return -ENOMEM;
            continue;
        }
        if (tag != DW_TAG_subprogram)
            continue;
        Dwarf_Addr base, lo, hi;
        for (ptrdiff_t off = 0; (off = dwarf_ranges(&c, off, &base, &lo, &hi)) > 0;) {
            if (icpp_vec_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v, 256) < 0)
                return -ENOMEM;
            t->v[t->n++] = (struct dwfn){lo, hi, dwarf_dieoffset(&c)};
        }
    } while (dwarf_siblingof(&c, &c) == 0);
    return 0;
}

static void dwtab_sort(struct dwtab *t)
{
    if (t->n)
        qsort(t->v, t->n, sizeof *t->v, dwfn_cmp);
}

/* Does .debug_aranges name every CU that has code?  Then an address's CU is
 * found without reading DIEs, and only the CUs that samples fall in need
 * their subprograms read (libc's debug file: a 10 MB .debug_info, of which a
 * profile touches a few CUs).  A producer that leaves aranges out (clang by
 * default) makes the answer no, and the whole module is read as before. */
static int aranges_cover(Dwarf *dw)
{
    Dwarf_Aranges *ar;
    size_t nar;
    if (dwarf_getaranges(dw, &ar, &nar) != 0 || nar == 0)
        return 0;
    icpp_hmap cus;
    icpp_hmap_init(&cus);
    int ok = 1;
    for (size_t i = 0; i < nar && ok; i++) {
        Dwarf_Off cu;
        Dwarf_Arange *a = dwarf_onearange(ar, i);
        ok = a && dwarf_getarangeinfo(a, NULL, NULL, &cu) == 0 && icpp_hmap_put(&cus, cu, 0, 1) == 0;
    }
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t unit_type;
    while (ok && dwarf_get_units(dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0) {
        Dwarf_Addr lo;
        int code = dwarf_lowpc(&cudie, &lo) == 0 || dwarf_hasattr(&cudie, DW_AT_ranges);
        ok = !code || icpp_hmap_get(&cus, dwarf_dieoffset(&cudie), 0) != NULL;
    }
    icpp_hmap_free(&cus);
    return ok;
}

/* The subprogram table of the CU whose DIE is cudie, read on first use; NULL
 * when out of memory. */
static const struct dwtab *cu_table(icpp_module *m, Dwarf_Die *cudie)
{
    Dwarf_Off off = dwarf_dieoffset(cudie);
    uint64_t *ix = icpp_hmap_get(&m->dwcu_ix, off, 0);
    if (ix)
        return &m->dwcus[*ix];
    if (icpp_vec_reserve((void **)&m->dwcus, &m->capdwcus, m->ndwcus + 1, sizeof *m->dwcus, 16) < 0)
        return NULL;
    struct dwtab t = {NULL, 0, 0};
    if (dwfns_collect(&t, cudie) < 0 || icpp_hmap_put(&m->dwcu_ix, off, 0, m->ndwcus) < 0) {
        free(t.v);
        return NULL;
    }
    dwtab_sort(&t);
    m->dwcus[m->ndwcus] = t;
    return &m->dwcus[m->ndwcus++];
}

/* The whole module's subprogram table, read on first use (an empty one when
 * out of memory: no inlined frames, nothing worse). */
static const struct dwtab *whole_table(icpp_module *m)
{
    if (m->dwwhole)
        return m->dwwhole;
    struct dwtab *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    Dwarf_CU *cu = NULL;
    Dwarf_Die cudie;
    uint8_t unit_type;
    while (dwarf_get_units(m->dw, cu, &cu, NULL, &unit_type, &cudie, NULL) == 0)
        if (dwfns_collect(t, &cudie) < 0) {
            t->n = 0;
            break;
        }
    dwtab_sort(t);
    return m->dwwhole = t;
}

/* The DIE offset of the concrete subprogram whose pc ranges hold addr; 0 if
 * none does. */
static Dwarf_Off subprogram_at(icpp_module *m, uint64_t addr)
{
    if (!module_dwarf(m))
        return 0;
    if (!m->dw_by_cu)
        m->dw_by_cu = aranges_cover(m->dw) ? 1 : -1;
    const struct dwtab *t;
    if (m->dw_by_cu > 0) {
        Dwarf_Die cudie;
        if (!dwarf_addrdie(m->dw, addr, &cudie))
            return 0;       /* in no CU: no DWARF for this code */
        t = cu_table(m, &cudie);
    } else {
        t = whole_table(m);
    }
    size_t lo = t ? upper_bound(t->v, t->n, sizeof *t->v, addr) : 0;
    return lo && addr < t->v[lo - 1].hi ? t->v[lo - 1].die : 0;
}

/* Name of an inlined subroutine (from its abstract origin): the demangled
 * linkage name where there is one, as the function table has it, else the
 * plain name; NULL if neither. */
static const char *inline_name(icpp_module *m, Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!link)
        link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (link) {
        uint64_t *v = icpp_hmap_get(&m->dwnames, (uint64_t)(uintptr_t)link, 0);
        if (v)
            return (const char *)(uintptr_t)*v;
        const char *dem = own(m, icpp_demangle(link));
        if (dem) {
            /* if this fails, the name is only demangled again next time */
            icpp_hmap_put(&m->dwnames, (uint64_t)(uintptr_t)link, 0, (uint64_t)(uintptr_t)dem);
            return dem;
        }
    }
    const char *name = dwarf_diename(die);
    return name ? name : link;
}

int icpp_module_inlines(icpp_module *m, uint64_t addr, const char **out, int max)
{
    Dwarf_Off sub = subprogram_at(m, addr);
    Dwarf_Die die;
    if (!sub || !dwarf_offdie(m->dw, sub, &die))
        return 0;
    /* Scopes at one level do not overlap: descend into the one holding addr. */
    int n = 0;
    for (;;) {
        Dwarf_Die c;
        int found = 0;
        if (dwarf_child(&die, &c) != 0)
            break;
        do {
            int tag = dwarf_tag(&c);
            if ((tag == DW_TAG_lexical_block || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_try_block ||
                 tag == DW_TAG_catch_block) && dwarf_haspc(&c, addr) > 0) {
                if (tag == DW_TAG_inlined_subroutine && n < max) {
                    const char *name = inline_name(m, &c);
                    out[n++] = name ? name : "?";
                }
                die = c;
                found = 1;
                break;
            }
        } while (dwarf_siblingof(&c, &c) == 0);
        if (!found)
            break;
    }
    return n;
}

const icpp_func *icpp_module_func_span(const icpp_module *m, uint64_t addr, uint64_t *lo, uint64_t *hi)
{
    m = funcs_of(m);
    size_t i = upper_bound(m->funcs, m->nfuncs, sizeof *m->funcs, addr);
    if (i == 0)
        return NULL;
    const icpp_func *f = &m->funcs[i - 1];
    uint64_t end = i < m->nfuncs ? m->funcs[i].addr : UINT64_MAX;     /* the next function's start */
    if (f->size)
        end = f->addr + f->size < end ? f->addr + f->size : end;
    else    /* unsized: up to the next function, which starts after addr */
        end = m->text_hi < end ? m->text_hi : end;
    if (addr >= end)
        return NULL;
    *lo = f->addr;
    *hi = end;
    return f;
}

const icpp_func *icpp_module_func_at(const icpp_module *m, uint64_t addr)
{
    uint64_t lo, hi;
    return icpp_module_func_span(m, addr, &lo, &hi);
}

const icpp_func *icpp_module_func_start(const icpp_module *m, uint64_t addr)
{
    m = funcs_of(m);
    size_t i = upper_bound(m->funcs, m->nfuncs, sizeof *m->funcs, addr);
    return (i && m->funcs[i - 1].addr == addr) ? &m->funcs[i - 1] : NULL;
}
