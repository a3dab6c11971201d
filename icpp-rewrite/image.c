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

int rw_image_write(const rw_image *img, const char *path, icpp_err *err)
{
    /* Execute wherever read is allowed, as the original (a program); created
     * with that mode under the output rule (lib/fsafe.h), never chmod'ed by
     * name afterwards (a name can be a link to someone else's file). */
    mode_t mode = (img->mode | ((img->mode & 0444) >> 2) | 0100) & 07777;
    return icpp_fs_write_file(path, img->bytes, img->len, mode, err) < 0 ? -1 : 0;
}
