/* test_cfaprog.c -- lib/cfaprog.c against libdw: the CFA rule of every span of every FDE of real
 * binaries, and rewritten operands read back by libdw with exactly the new offsets. */
#include "cfaprog.h"
#include "check.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* libdw's CFA at pc: 1 and reg/off for a register rule, 0 for anything else, -1 no FDE. */
static int ref_cfa(Dwarf_CFI *cfi, uint64_t pc, unsigned *reg, int64_t *off)
{
    Dwarf_Frame *fr = NULL;
    if (dwarf_cfi_addrframe(cfi, pc, &fr) != 0)
        return -1;
    Dwarf_Op *ops;
    size_t nops;
    int r = 0;
    if (dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx) {
        *reg = (unsigned)ops[0].number;
        *off = (int64_t)ops[0].number2;
        r = 1;
    }
    free(fr);
    return r;
}

static Elf_Scn *section(Elf *elf, const char *want, GElf_Shdr *sh)
{
    size_t shstrndx;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return NULL;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        const char *n;
        if (gelf_getshdr(scn, sh) && (n = elf_strptr(elf, shstrndx, sh->sh_name)) && !strcmp(n, want) &&
            sh->sh_type != SHT_NOBITS && !(sh->sh_flags & SHF_COMPRESSED))
            return scn;
    }
    return NULL;
}

/* Every span of every FDE of one section agrees with libdw at its first and
 * last byte.  Then (rewrite = 1) every operand that can take +16 gets it in
 * a copy of the file, and libdw must read exactly +16 wherever that operand
 * governs and the old offset elsewhere. */
static void check_section(const char *path, int eh, int rewrite)
{
    int fd = open(path, O_RDONLY);
    Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    CHECK(elf != NULL, "%s: cannot open", path);
    if (!elf)
        return;
    GElf_Shdr sh;
    Elf_Scn *scn = section(elf, eh ? ".eh_frame" : ".debug_frame", &sh);
    if (!scn) {
        CHECK(!eh, "%s: no .eh_frame", path);
        elf_end(elf);
        close(fd);
        return;
    }
    Elf_Data *d = elf_rawdata(scn, NULL);
    icpp_fde *f = NULL;
    size_t nf = 0;
    icpp_err err = {0};
    int rc = icpp_fde_parse(d->d_buf, d->d_size, sh.sh_addr, eh, &f, &nf, &err);
    CHECK(rc == 0 && nf > 0, "%s: %s", path, err.msg);
    Dwarf *dw = eh ? NULL : dwarf_begin_elf(elf, DWARF_C_READ, NULL);
    Dwarf_CFI *cfi = eh ? dwarf_getcfi_elf(elf) : dw ? dwarf_getcfi(dw) : NULL;
    CHECK(cfi != NULL, "%s: libdw has no CFI", path);
    size_t spans = 0, agree = 0, unread = 0, ops = 0, moved = 0;
    size_t rawlen = 0;
    const char *raw = elf_rawfile(elf, &rawlen);
    uint8_t *copy = rewrite && raw ? malloc(rawlen) : NULL;
    for (size_t i = 0; cfi && i < nf; i++) {
        icpp_cfaprog p;
        if (icpp_cfaprog_read(d->d_buf, d->d_size, &f[i], &p, &err) < 0) {
            unread++;
            continue;
        }
        CHECK(p.nspans > 0 && p.spans[0].lo == f[i].lo && p.spans[p.nspans - 1].hi == f[i].hi,
              "%s: FDE 0x%lx: spans do not cover it", path, (unsigned long)f[i].lo);
        for (size_t s = 0; s < p.nspans; s++) {
            const icpp_cfa_span *sp = &p.spans[s];
            CHECK(s == 0 || sp->lo == p.spans[s - 1].hi, "%s: gap at 0x%lx", path, (unsigned long)sp->lo);
            for (int end = 0; end < 2; end++) {
                uint64_t pc = end ? sp->hi - 1 : sp->lo;
                unsigned reg = 0;
                int64_t off = 0;
                int r = ref_cfa(cfi, pc, &reg, &off);
                if (r < 0)
                    continue;   /* libdw took another (overlapping) FDE's view: not this one's */
                spans++;
                int ok = sp->expr ? r == 0 : (r == 1 && reg == sp->reg && off == sp->off);
                agree += ok;
                CHECK(ok, "%s: 0x%lx: span says %s%u%+lld, libdw %d %u%+lld", path, (unsigned long)pc,
                      sp->expr ? "expr " : "", sp->reg, (long long)sp->off, r, reg, (long long)off);
                CHECK(sp->expr || sp->operand < 0 || p.ops[sp->operand].value == sp->off,
                      "%s: 0x%lx: operand value differs", path, (unsigned long)pc);
            }
        }
        ops += p.nops;
        /* Rewrite: operands of this FDE (not the CIE's, shared) that take +16,
         * in a copy of the whole file that libdw then reads. */
        for (size_t o = 0; copy && o < p.nops && moved < 100 && i % 7 == 0; o++) {
            const icpp_cfa_operand *op = &p.ops[o];
            if (op->in_cie || !icpp_cfaprog_fits(op, op->value + 16))
                continue;
            memcpy(copy, raw, rawlen);
            uint8_t *csec = copy + sh.sh_offset;
            CHECK(icpp_cfaprog_write(csec, d->d_size, op, op->value + 16, &err) == 0, "%s: write: %s", path,
                  err.msg);
            CHECK(icpp_cfaprog_write(csec, d->d_size, op, op->value + 32, &err) < 0,
                  "%s: a second write over changed bytes must fail", path);
            Elf *e2 = elf_memory((char *)copy, rawlen);
            Dwarf_CFI *c2 = e2 ? dwarf_getcfi_elf(e2) : NULL;
            CHECK(c2 != NULL, "%s: libdw cannot read the rewritten copy", path);
            for (size_t s = 0; c2 && s < p.nspans; s++) {
                if (p.spans[s].expr)
                    continue;
                unsigned reg = 0;
                int64_t off = 0;
                if (ref_cfa(cfi, p.spans[s].lo, &reg, &off) != 1 || reg != p.spans[s].reg || off != p.spans[s].off)
                    continue;   /* another FDE's view at this pc (see above) */
                int64_t want = p.spans[s].off + (p.spans[s].operand == (int32_t)o ? 16 : 0);
                int r = ref_cfa(c2, p.spans[s].lo, &reg, &off);
                CHECK(r == 1 && off == want, "%s: 0x%lx: libdw reads %lld after writing +16, want %lld", path,
                      (unsigned long)p.spans[s].lo, (long long)off, (long long)want);
            }
            if (c2)
                dwarf_cfi_end(c2);
            if (e2)
                elf_end(e2);
            moved++;
        }
        icpp_cfaprog_free(&p);
    }
    printf("%s %s: %zu FDEs (%zu unreadable), %zu span ends compared, %zu agree; %zu operands, %zu rewritten\n",
           path, eh ? ".eh_frame" : ".debug_frame", nf, unread, spans, agree, ops, moved);
    CHECK(unread == 0, "%s: %zu FDEs unreadable", path, unread);
    CHECK(spans > 0 && agree == spans, "%s: %zu of %zu disagree", path, spans - agree, spans);
    CHECK(!rewrite || moved > 0, "%s: nothing rewritten", path);
    free(copy);
    free(f);
    if (eh && cfi)
        dwarf_cfi_end(cfi);     /* .debug_frame's belongs to dw */
    if (dw)
        dwarf_end(dw);
    elf_end(elf);
    close(fd);
}

/* Redundant-length encodings: a 1-byte ULEB takes 0..127 only, a 2-byte one
 * up to 16383; an SLEB factored by -8 takes multiples of 8 in range. */
static void check_encodings(void)
{
    uint8_t b[4] = {0x0e, 0x10, 0x0e, 0};
    icpp_cfa_operand u1 = {1, 1, 0, 0, 0, 16};
    CHECK(icpp_cfaprog_fits(&u1, 127) && !icpp_cfaprog_fits(&u1, 128) && !icpp_cfaprog_fits(&u1, -8), "uleb1");
    icpp_err err = {0};
    CHECK(icpp_cfaprog_write(b, sizeof b, &u1, 112, &err) == 0 && b[1] == 112, "uleb1 write");
    u1.value = 112;
    CHECK(icpp_cfaprog_write(b, sizeof b, &u1, 128, &err) < 0 && b[1] == 112, "uleb1 overflow");
    uint8_t c[2] = {0x90, 0x01};    /* 144 in two bytes */
    icpp_cfa_operand u2 = {0, 2, 0, 0, 0, 144};
    CHECK(icpp_cfaprog_write(c, sizeof c, &u2, 16, &err) == 0 && c[0] == 0x90 && c[1] == 0x00,
          "uleb2 redundant: %02x %02x", c[0], c[1]);
    uint8_t s[1] = {0x7e};          /* -2 * -8 = 16 */
    icpp_cfa_operand s1 = {0, 1, 1, 0, -8, 16};
    CHECK(icpp_cfaprog_fits(&s1, 512) && !icpp_cfaprog_fits(&s1, 520) && !icpp_cfaprog_fits(&s1, 20), "sleb1");
    CHECK(icpp_cfaprog_write(s, sizeof s, &s1, 48, &err) == 0 && s[0] == 0x7a, "sleb1 write %02x", s[0]);
}

int main(int argc, char **argv)
{
    elf_version(EV_CURRENT);
    check_encodings();
    for (int i = 1; i < argc; i++) {
        check_section(argv[i], 1, i == 1 || i == argc - 1);
        check_section(argv[i], 0, 0);
    }
    return check_done("cfaprog");
}
