/* test_ehwrite.c -- lib/ehwrite.c: real .eh_frame sections relocated and grown, read back by lib/fde.c,
 * lib/cfaprog.c and its own FDE list; the search table; truncated and unsupported input refused. */
#include "cfaprog.h"
#include "check.h"
#include "ehwrite.h"
#include "fde.h"

#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static Elf_Scn *section(Elf *elf, const char *want, GElf_Shdr *sh)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        const char *n;
        if (gelf_getshdr(scn, sh) && (n = elf_strptr(elf, shstrndx, sh->sh_name)) && !strcmp(n, want))
            return scn;
    }
    return NULL;
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Relocate path's .eh_frame by delta, append a stub's CIE and FDE, and read it all back. */
static void check_file(const char *path, int64_t delta)
{
    int fd = open(path, O_RDONLY);
    Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    CHECK(elf != NULL, "%s: cannot open", path);
    if (!elf)
        return;
    GElf_Shdr sh;
    Elf_Scn *scn = section(elf, ".eh_frame", &sh);
    CHECK(scn != NULL, "%s: no .eh_frame", path);
    Elf_Data *d = scn ? elf_rawdata(scn, NULL) : NULL;
    if (!d)
        goto out;
    icpp_err err = {0};
    icpp_fde *f0 = NULL, *f1 = NULL;
    size_t n0 = 0, n1 = 0, nl0 = 0, nl1 = 0;
    icpp_ehw_fde *l0 = NULL, *l1 = NULL;
    CHECK(icpp_fde_parse(d->d_buf, d->d_size, sh.sh_addr, 1, &f0, &n0, &err) == 0 && n0 > 0, "%s: %s", path, err.msg);
    CHECK(icpp_ehw_list(d->d_buf, d->d_size, sh.sh_addr, &l0, &nl0, &err) == 0 && nl0 == n0, "%s: list: %s (%zu vs %zu)",
          path, err.msg, nl0, n0);
    uint64_t na = sh.sh_addr + (uint64_t)delta;
    icpp_ehw w;
    int rc = icpp_ehw_relocate(&w, d->d_buf, d->d_size, sh.sh_addr, na, &err);
    CHECK(rc == 0, "%s: relocate: %s", path, err.msg);
    if (rc < 0)
        goto out;
    /* A stub of 24 bytes: CFA rsp+32, rbx at CFA-16, return address at CFA-8; rsp+64 over [7, 19). */
    uint8_t ins[64];
    size_t len = 0, cie;
    uint64_t lo = na + 0x100000;
    icpp_ehw_cfa_def(ins, &len, sizeof ins, 7, 32);
    icpp_ehw_cfa_saved(ins, &len, sizeof ins, 3, -16);
    icpp_ehw_cfa_saved(ins, &len, sizeof ins, 16, -8);
    icpp_ehw_cfa_advance(ins, &len, sizeof ins, 7);
    icpp_ehw_cfa_offset(ins, &len, sizeof ins, 64);
    icpp_ehw_cfa_advance(ins, &len, sizeof ins, 12);
    icpp_ehw_cfa_offset(ins, &len, sizeof ins, 32);
    CHECK(icpp_ehw_add_cie(&w, NULL, 0, &cie, &err) == 0 && icpp_ehw_add_fde(&w, cie, lo, 24, ins, len, &err) == 0 &&
          icpp_ehw_finish(&w, &err) == 0, "%s: %s", path, err.msg);
    CHECK(icpp_fde_parse(w.buf, w.len, na, 1, &f1, &n1, &err) == 0 && n1 == n0 + 1, "%s: reparse: %s (%zu vs %zu)",
          path, err.msg, n1, n0 + 1);
    /* Every old FDE covers the same code, in the same order; the LSDAs point where they did. */
    size_t same = 0;
    for (size_t i = 0; i < n0 && i < n1; i++)
        same += f0[i].lo == f1[i].lo && f0[i].hi == f1[i].hi && f0[i].ins == f1[i].ins;
    CHECK(same == n0, "%s: %zu of %zu FDEs kept their ranges", path, same, n0);
    CHECK(icpp_ehw_list(w.buf, w.len, na, &l1, &nl1, &err) == 0 && nl1 == n0 + 1, "%s: list after: %s", path,
          err.msg);
    size_t lsda = 0, lsda_same = 0;
    for (size_t i = 0, j = 0; i < nl0 && j < nl1; i++, j++) {
        if (l1[j].lo == lo)
            j++;
        lsda += l0[i].lsda != 0;
        lsda_same += l0[i].lo == l1[j].lo && l0[i].lsda == l1[j].lsda;
    }
    CHECK(lsda_same == nl0, "%s: %zu of %zu FDEs kept their LSDA (%zu have one)", path, lsda_same, nl0, lsda);
    printf("%s: %zu FDEs (%zu with an LSDA) moved by %+lld\n", path, n0, lsda, (long long)delta);
    /* The new FDE's rows. */
    if (n1 == n0 + 1) {
        icpp_cfaprog p;
        const icpp_fde *nf = &f1[n0];
        CHECK(nf->lo == lo && nf->hi == lo + 24, "%s: new FDE at %#lx", path, (unsigned long)nf->lo);
        if (icpp_cfaprog_read(w.buf, w.len, nf, &p, &err) == 0) {
            CHECK(p.nspans == 3 && p.spans[0].reg == 7 && p.spans[0].off == 32 && p.spans[1].lo == lo + 7 &&
                      p.spans[1].off == 64 && p.spans[2].lo == lo + 19 && p.spans[2].off == 32,
                  "%s: the stub's CFA rows are wrong (%zu spans)", path, p.nspans);
            icpp_cfaprog_free(&p);
        } else {
            CHECK(0, "%s: new FDE unreadable: %s", path, err.msg);
        }
    }
    /* The search table: sorted, each entry naming an FDE of that start. */
    uint8_t *hdr = NULL;
    size_t hl = 0;
    uint64_t ha = na + w.len + 64;
    CHECK(icpp_ehw_hdr(w.buf, w.len, na, ha, &hdr, &hl, &err) == 0, "%s: hdr: %s", path, err.msg);
    if (hdr) {
        CHECK(hdr[0] == 1 && hdr[1] == 0x1b && hdr[2] == 0x03 && hdr[3] == 0x3b && get32(hdr + 8) == n0 + 1 &&
                  ha + 4 + (int32_t)get32(hdr + 4) == na && hl == 12 + 8 * (n0 + 1),
              "%s: hdr header wrong", path);
        size_t ok = 0;
        for (size_t i = 0; i < get32(hdr + 8); i++) {
            uint64_t start = ha + (uint64_t)(int64_t)(int32_t)get32(hdr + 12 + 8 * i);
            uint64_t at = ha + (uint64_t)(int64_t)(int32_t)get32(hdr + 16 + 8 * i) - na;
            int sorted = i == 0 || (int32_t)get32(hdr + 12 + 8 * i) >= (int32_t)get32(hdr + 4 + 8 * i);
            for (size_t j = 0; j < nl1; j++)
                if (l1[j].off == at) {
                    ok += l1[j].lo == start && sorted;
                    break;
                }
        }
        CHECK(ok == n0 + 1, "%s: %zu of %zu search table entries right", path, ok, n0 + 1);
    }
    /* Truncated anywhere: an error or a shorter section, never a crash. */
    for (size_t cut = 0; cut < d->d_size; cut += 1 + cut / 7) {
        icpp_ehw t;
        if (icpp_ehw_relocate(&t, d->d_buf, cut, sh.sh_addr, na, &err) == 0)
            icpp_ehw_free(&t);
    }
    free(hdr);
    free(f0);
    free(f1);
    free(l0);
    free(l1);
    icpp_ehw_free(&w);
out:
    elf_end(elf);
    close(fd);
}

int main(int argc, char **argv)
{
    elf_version(EV_CURRENT);
    (void)argc;
    check_file(argv[0], 0x123450);
    check_file(argv[0], -0x1000);
    for (int i = 1; i < argc; i++)
        check_file(argv[i], 0x7654320);
    /* An absolute FDE pointer (encoding 0): it would need its dynamic
     * relocation moved too, so relocating refuses it. */
    static const uint8_t absptr[] = {
        /* CIE */ 16, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x00, 0, 0, 0,
        /* FDE */ 20, 0, 0, 0, 24, 0, 0, 0, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0};
    icpp_ehw t;
    icpp_err err = {0};
    CHECK(icpp_ehw_relocate(&t, absptr, sizeof absptr, 0x2000, 0x9000, &err) < 0 && strstr(err.msg, "absolute"),
          "an absolute pointer was moved: %s", err.msg);
    return check_done("ehwrite");
}
