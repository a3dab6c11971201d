/* image.c -- a private, patchable copy of an ELF executable's bytes: addresses to file offsets, the build-id note, writing OUT. */
#include "image.h"

#include "codec.h"
#include "fsafe.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void find_build_id(rw_image *img, Elf *elf)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data *d = elf_rawdata(scn, NULL);
        if (!d)
            continue;
        size_t off = 0, next, name_off, desc_off;
        GElf_Nhdr nh;
        while ((next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                !memcmp((const char *)d->d_buf + name_off, "GNU", 4) && nh.n_descsz > 0 &&
                nh.n_descsz <= ICPP_BUILD_ID_MAX && sh.sh_offset + desc_off + nh.n_descsz <= img->len) {
                img->bid_off = sh.sh_offset + desc_off;
                img->bid_len = (uint8_t)nh.n_descsz;
                return;
            }
            off = next;
        }
    }
}

static void find_cfi_sections(rw_image *img, Elf *elf)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) != NULL;) {
        GElf_Shdr sh;
        const char *n;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !(n = elf_strptr(elf, shstrndx, sh.sh_name)))
            continue;
        rw_cfisec *c = !strcmp(n, ".eh_frame") ? &img->eh_frame : !strcmp(n, ".debug_frame") ? &img->debug_frame : NULL;
        if (!c || sh.sh_offset > img->len || sh.sh_size > img->len - sh.sh_offset)
            continue;
        *c = (rw_cfisec){sh.sh_offset, sh.sh_size, sh.sh_addr, (sh.sh_flags & SHF_COMPRESSED) != 0};
    }
}

int rw_image_load(rw_image *img, const icpp_module *m, icpp_err *err)
{
    memset(img, 0, sizeof *img);
    Elf *elf = icpp_module_elf(m);
    size_t len = 0;
    const char *raw = elf_rawfile(elf, &len);
    if (!raw || !len)
        return icpp_err_set(err, ICPP_EFORMAT, "%s: cannot read the file's bytes", icpp_module_path(m));
    struct stat st;
    if (fstat(icpp_module_fd(m), &st) < 0)
        return icpp_err_set(err, errno, "%s: %s", icpp_module_path(m), strerror(errno));
    img->mode = st.st_mode & 07777;
    img->bytes = malloc(len);
    if (!img->bytes)
        return icpp_err_set(err, ENOMEM, "%s: out of memory copying the file", icpp_module_path(m));
    memcpy(img->bytes, raw, len);
    img->len = len;
    size_t nph;
    if (elf_getphdrnum(elf, &nph) != 0)
        nph = 0;
    for (size_t i = 0; i < nph && img->nsegs < RW_MAX_SEGS; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
            continue;
        if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
            continue;
        img->segs[img->nsegs++] = (rw_seg){ph.p_vaddr, ph.p_filesz, ph.p_offset, ph.p_flags};
    }
    if (!img->nsegs) {
        rw_image_free(img);
        return icpp_err_set(err, ICPP_EFORMAT, "%s: no loadable segment", icpp_module_path(m));
    }
    find_build_id(img, elf);
    find_cfi_sections(img, elf);
    return 0;
}

void rw_image_free(rw_image *img)
{
    free(img->bytes);
    img->bytes = NULL;
}

uint8_t *rw_image_code(const rw_image *img, uint64_t addr, size_t *avail)
{
    for (size_t i = 0; i < img->nsegs; i++) {
        const rw_seg *s = &img->segs[i];
        if (!(s->flags & PF_X) || addr < s->vaddr || addr - s->vaddr >= s->filesz)
            continue;
        *avail = s->filesz - (addr - s->vaddr);
        return img->bytes + s->off + (addr - s->vaddr);
    }
    *avail = 0;
    return NULL;
}

int rw_image_set_build_id(rw_image *img, const icpp_build_id *bid, icpp_err *err)
{
    if (!img->bid_len)
        return icpp_err_set(err, ICPP_EUNSUPPORTED,
                            "the program has no GNU build-id note, so the rewritten binary could not be told "
                            "apart from it (link with -Wl,--build-id)");
    if (bid->len != img->bid_len)
        return icpp_err_set(err, EINVAL, "internal error: new build-id has %u bytes, the note %u", bid->len,
                            img->bid_len);
    memcpy(img->bytes + img->bid_off, bid->bytes, bid->len);
    return 0;
}

int rw_image_write(const rw_image *img, icpp_fs_out *o, const char *path, icpp_err *err)
{
    /* Execute wherever read is allowed, as the original (a program); created
     * with that mode under the output rule (lib/fsafe.h), never chmod'ed by
     * name afterwards (a name can be a link to someone else's file). */
    mode_t mode = (img->mode | ((img->mode & 0444) >> 2) | 0100) & 07777;
    if (icpp_fs_out_begin(o, path, mode, err) < 0)
        return -1;
    int e = icpp_fs_write_all(o->fd, img->bytes, img->len);
    if (e) {
        icpp_fs_out_abort(o);
        icpp_err_set(err, e, "%s: write failed: %s", path, strerror(e));
        return -1;
    }
    return 0;
}

/* ---- a new segment (docs/rewrite.md, "The new segment") ---- */

#define PAGE 4096u

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) & ~(a - 1);
}

/* The ELF header and program headers of the image, bounds-checked. */
static int headers(const rw_image *img, Elf64_Ehdr **eh, Elf64_Phdr **ph, icpp_err *err)
{
    if (img->len < sizeof(Elf64_Ehdr))
        return icpp_err_set(err, ICPP_EFORMAT, "the file is too short for an ELF header");
    *eh = (Elf64_Ehdr *)img->bytes;
    Elf64_Ehdr *e = *eh;
    if (e->e_ident[EI_CLASS] != ELFCLASS64 || e->e_phentsize != sizeof(Elf64_Phdr) || e->e_phoff > img->len ||
        (uint64_t)e->e_phnum * sizeof(Elf64_Phdr) > img->len - e->e_phoff || e->e_phoff % 8 ||
        (e->e_shnum && (e->e_shentsize != sizeof(Elf64_Shdr) || e->e_shoff > img->len || e->e_shoff % 8 ||
                        (uint64_t)e->e_shnum * sizeof(Elf64_Shdr) > img->len - e->e_shoff)))
        return icpp_err_set(err, ICPP_EFORMAT, "its ELF headers are not those of a 64-bit executable");
    *ph = (Elf64_Phdr *)(img->bytes + e->e_phoff);
    return 0;
}

uint64_t rw_image_new_vaddr(const rw_image *img)
{
    Elf64_Ehdr *eh;
    Elf64_Phdr *ph;
    icpp_err err;
    if (headers(img, &eh, &ph, &err) < 0)
        return 0;
    uint64_t top = 0;
    for (size_t i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > top)
            top = ph[i].p_vaddr + ph[i].p_memsz;
    return align_up(top, PAGE);
}

size_t rw_image_phdr_room(const rw_image *img)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img->bytes;
    return align_up(((size_t)eh->e_phnum + 1) * sizeof(Elf64_Phdr), 16);
}

static Elf64_Shdr *section(const rw_image *img, Elf64_Shdr *sh, size_t nsh, const char *name, size_t *idx)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img->bytes;
    if (eh->e_shstrndx >= nsh)
        return NULL;
    const Elf64_Shdr *ss = &sh[eh->e_shstrndx];
    if (ss->sh_offset > img->len || ss->sh_size > img->len - ss->sh_offset)
        return NULL;
    const char *str = (const char *)img->bytes + ss->sh_offset;
    size_t nl = strlen(name);
    for (size_t i = 0; i < nsh; i++)
        if (sh[i].sh_name + nl < ss->sh_size && !memcmp(str + sh[i].sh_name, name, nl + 1)) {
            if (idx)
                *idx = i;
            return &sh[i];
        }
    return NULL;
}

int rw_image_add_segment(rw_image *img, const rw_newseg *ns, icpp_err *err)
{
    Elf64_Ehdr *eh;
    Elf64_Phdr *ph;
    if (headers(img, &eh, &ph, err) < 0)
        return -1;
    size_t nph = eh->e_phnum, nsh = eh->e_shnum;
    if (!nsh)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "it has no section headers");
    Elf64_Shdr *osh = (Elf64_Shdr *)(img->bytes + eh->e_shoff);
    size_t i_eh, i_hdr, i_sym = 0, i_str = 0;
    Elf64_Shdr *s_eh = section(img, osh, nsh, ".eh_frame", &i_eh), *s_hdr = section(img, osh, nsh, ".eh_frame_hdr", &i_hdr);
    Elf64_Shdr *s_sym = section(img, osh, nsh, ".symtab", &i_sym);
    if (!s_eh || !s_hdr)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "it has no .eh_frame or no .eh_frame_hdr section");
    int have_pt_eh = 0;
    for (size_t i = 0; i < nph; i++)
        have_pt_eh |= ph[i].p_type == PT_GNU_EH_FRAME;
    if (!have_pt_eh)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "it has no PT_GNU_EH_FRAME");
    if (s_sym) {
        i_str = s_sym->sh_link;
        if (i_str >= nsh || s_sym->sh_entsize != sizeof(Elf64_Sym) || s_sym->sh_offset > img->len ||
            s_sym->sh_size > img->len - s_sym->sh_offset || s_sym->sh_info > s_sym->sh_size / sizeof(Elf64_Sym) ||
            osh[i_str].sh_offset > img->len || osh[i_str].sh_size > img->len - osh[i_str].sh_offset)
            return icpp_err_set(err, ICPP_EFORMAT, "its .symtab is malformed");
    }
    const Elf64_Shdr *s_shstr = &osh[eh->e_shstrndx];

    /* Layout: the old file; the segment at a page boundary; then the
     * section-header material (not loaded). */
    uint64_t off = align_up(img->len, PAGE);
    size_t seglen = ns->len;
    uint64_t after = align_up(off + seglen, 8);
    static const char secname[] = ".icpp_wrap";
    size_t shstr_len = s_shstr->sh_size + sizeof secname;
    size_t names = 0;
    for (size_t i = 0; i < ns->nsyms; i++)
        names += strlen(ns->syms[i].name) + 1;
    size_t str_len = s_sym ? osh[i_str].sh_size + names : 0;
    size_t nsym_old = s_sym ? s_sym->sh_size / sizeof(Elf64_Sym) : 0;
    size_t sym_len = s_sym ? (nsym_old + ns->nsyms) * sizeof(Elf64_Sym) : 0;
    uint64_t o_shstr = after, o_str = o_shstr + shstr_len, o_sym = align_up(o_str + str_len, 8),
             o_sh = align_up(o_sym + sym_len, 8);
    size_t total = o_sh + (nsh + 1) * sizeof(Elf64_Shdr);
    uint8_t *nb = calloc(1, total);
    if (!nb)
        return icpp_err_set(err, ENOMEM, "out of memory growing the file");
    memcpy(nb, img->bytes, img->len);
    memcpy(nb + off, ns->data, seglen);

    /* Program headers.  A PT_NOTE that only repeats PT_GNU_PROPERTY (what
     * the kernel and ld.so read for those notes) after the last PT_LOAD
     * becomes the new PT_LOAD in place: the table stays where it was, which
     * binutils' strip and objcopy require.  Otherwise the table moves to
     * the start of the new segment with one more entry after the last
     * PT_LOAD, and PT_PHDR follows it.  PT_GNU_EH_FRAME points at the new
     * .eh_frame_hdr either way. */
    size_t last_load = 0, reuse = SIZE_MAX;
    for (size_t i = 0; i < nph; i++)
        if (ph[i].p_type == PT_LOAD)
            last_load = i;
    for (size_t i = last_load + 1; i < nph && reuse == SIZE_MAX; i++)
        for (size_t j = 0; j < nph && ph[i].p_type == PT_NOTE; j++)
            if (ph[j].p_type == PT_GNU_PROPERTY && ph[j].p_offset == ph[i].p_offset &&
                ph[j].p_filesz == ph[i].p_filesz) {
                reuse = i;
                break;
            }
    const Elf64_Phdr load = {PT_LOAD, PF_R | PF_X, off, ns->vaddr, ns->vaddr, seglen, seglen, PAGE};
    Elf64_Phdr *np = reuse != SIZE_MAX ? (Elf64_Phdr *)(nb + eh->e_phoff) : (Elf64_Phdr *)(nb + off);
    size_t k = 0;
    for (size_t i = 0; i < nph; i++) {
        np[k] = i == reuse ? load : ph[i];
        if (np[k].p_type == PT_PHDR && reuse == SIZE_MAX) {
            np[k].p_offset = off;
            np[k].p_vaddr = np[k].p_paddr = ns->vaddr;
            np[k].p_filesz = np[k].p_memsz = (nph + 1) * sizeof(Elf64_Phdr);
        } else if (np[k].p_type == PT_GNU_EH_FRAME) {
            np[k].p_offset = off + (ns->hdr_addr - ns->vaddr);
            np[k].p_vaddr = np[k].p_paddr = ns->hdr_addr;
            np[k].p_filesz = np[k].p_memsz = ns->hdr_size;
            np[k].p_align = 4;
        }
        k++;
        if (i == last_load && reuse == SIZE_MAX)
            np[k++] = load;
    }
    Elf64_Ehdr *ne = (Elf64_Ehdr *)nb;
    if (reuse == SIZE_MAX) {
        ne->e_phoff = off;
        ne->e_phnum = (Elf64_Half)(nph + 1);
    }

    /* Section names, symbols, section headers. */
    memcpy(nb + o_shstr, img->bytes + s_shstr->sh_offset, s_shstr->sh_size);
    memcpy(nb + o_shstr + s_shstr->sh_size, secname, sizeof secname);
    Elf64_Shdr *sh = (Elf64_Shdr *)(nb + o_sh);
    memcpy(sh, osh, nsh * sizeof *sh);
    sh[eh->e_shstrndx].sh_offset = o_shstr;
    sh[eh->e_shstrndx].sh_size = shstr_len;
    sh[i_eh].sh_addr = ns->eh_addr;
    sh[i_eh].sh_offset = off + (ns->eh_addr - ns->vaddr);
    sh[i_eh].sh_size = ns->eh_size;
    sh[i_hdr].sh_addr = ns->hdr_addr;
    sh[i_hdr].sh_offset = off + (ns->hdr_addr - ns->vaddr);
    sh[i_hdr].sh_size = ns->hdr_size;
    sh[nsh] = (Elf64_Shdr){(Elf64_Word)s_shstr->sh_size, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, ns->code_addr,
                           off + (ns->code_addr - ns->vaddr), ns->code_size, 0, 0, 16, 0};
    if (s_sym) {
        const Elf64_Shdr *ss = &osh[i_str];
        memcpy(nb + o_str, img->bytes + ss->sh_offset, ss->sh_size);
        size_t at = ss->sh_size;
        Elf64_Sym *os = (Elf64_Sym *)(img->bytes + s_sym->sh_offset), *sy = (Elf64_Sym *)(nb + o_sym);
        size_t nloc = s_sym->sh_info;   /* locals first: the new ones go at their end */
        memcpy(sy, os, nloc * sizeof *sy);
        for (size_t i = 0; i < ns->nsyms; i++) {
            size_t l = strlen(ns->syms[i].name) + 1;
            memcpy(nb + o_str + at, ns->syms[i].name, l);
            sy[nloc + i] = (Elf64_Sym){(Elf64_Word)at, ELF64_ST_INFO(STB_LOCAL, STT_FUNC), STV_DEFAULT,
                                       (Elf64_Section)nsh, ns->syms[i].addr, ns->syms[i].size};
            at += l;
        }
        memcpy(sy + nloc + ns->nsyms, os + nloc, (nsym_old - nloc) * sizeof *sy);
        /* Labels in the moved sections (__GNU_EH_FRAME_HDR, __FRAME_END__)
         * move with them, to the same offset or the new end. */
        for (size_t i = 0; i < nsym_old + ns->nsyms; i++) {
            const Elf64_Shdr *o = sy[i].st_shndx == i_eh ? s_eh : sy[i].st_shndx == i_hdr ? s_hdr : NULL;
            if (!o || sy[i].st_value < o->sh_addr)
                continue;
            uint64_t rel = sy[i].st_value - o->sh_addr, nsize = sh[sy[i].st_shndx].sh_size;
            sy[i].st_value = sh[sy[i].st_shndx].sh_addr + (rel < nsize ? rel : nsize);
        }
        sh[i_str].sh_offset = o_str;
        sh[i_str].sh_size = str_len;
        sh[i_sym].sh_offset = o_sym;
        sh[i_sym].sh_size = sym_len;
        sh[i_sym].sh_info = (Elf64_Word)(nloc + ns->nsyms);
    }
    ne->e_shoff = o_sh;
    ne->e_shnum = (Elf64_Half)(nsh + 1);

    free(img->bytes);
    img->bytes = nb;
    img->len = total;
    if (img->nsegs < RW_MAX_SEGS)
        img->segs[img->nsegs++] = (rw_seg){ns->vaddr, seglen, off, PF_R | PF_X};
    return 0;
}
