/* test_lde_zydis.c -- lde.c against Zydis: every byte of real binaries, function sweeps, generated encodings. */
#include <elf.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

#include "functab.h"
#include "lde.h"
#include "reloc.h"

/* usage: test_lde_zydis [BINARY...]   (missing binaries are skipped; "self" = this test)
 *
 * The agent's conflict scan (patch.c) sweeps every listed function body
 * with icpp_agent_branch_target(); a length that differs from the truth
 * desyncs the sweep and can hide a branch into a patched entry.  The agent
 * used Zydis before; lde.c must give the same result wherever Zydis decodes:
 *   1. every byte offset of every executable section: Zydis and
 *      icpp_agent_branch_target() agree on the length and the branch target
 *      (lde's rel_size and rel too), and icpp_lde_is_nop() only calls
 *      NOP what Zydis does; icpp_agent_padding() never takes more bytes than
 *      the same loop over Zydis;
 *   2. a linear sweep of every function (the agent's function table:
 *      .symtab, .dynsym, FDEs; size 0 = up to the next function), resyncing
 *      byte by byte on failure as patch.c does, visits the same instruction
 *      boundaries with both decoders; the whole-section sweep is reported;
 *   3. generated encodings: every opcode of every map with every ModRM under
 *      many prefix combinations, every VEX/EVEX/MVEX/XOP map x pp x W x L,
 *      and random prefix soup (fixed seeds).
 * Offsets where only one decoder fails are counted, not failures: lde.c
 * accepts some encodings Zydis rejects (see its header comment) and never
 * the reverse (a Zydis-only success is a failure).  Also prints the sweep
 * speed of both decoders over the largest section. */

static ZydisDecoder dec;

typedef struct counts {
    long offsets, both, mismatch, zydis_only, lde_only, nop_extra, nop_missing, pad_longer, pad_shorter;
} counts;

static int shown;

static void hexdump(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("%02x", b[i]);
}

/* Zydis's length, or 0; *target as the agent computed it with Zydis. */
static size_t zy_branch(const uint8_t *code, size_t avail, uint64_t addr, uint64_t *target,
                        ZydisDecodedInstruction *in)
{
    *target = 0;
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, code, avail, in)))
        return 0;
    for (int i = 0; i < 2; i++)
        if (in->raw.imm[i].size && in->raw.imm[i].is_relative)
            *target = addr + in->length + (uint64_t)in->raw.imm[i].value.s;
    return in->length;
}

/* The agent's padding() as it was with Zydis. */
static size_t zy_padding(const uint8_t *code, size_t avail)
{
    size_t off = 0;
    while (off < avail) {
        if (code[off] == 0xcc) {
            off++;
            continue;
        }
        ZydisDecodedInstruction in;
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, code + off, avail - off, &in)) ||
            in.mnemonic != ZYDIS_MNEMONIC_NOP)
            break;
        off += in.length;
    }
    return off;
}

/* Compare both decoders on code[0..avail) at runtime address addr. */
static void compare(const uint8_t *code, size_t avail, uint64_t addr, counts *c, int padding)
{
    ZydisDecodedInstruction zi;
    uint64_t zt, lt;
    size_t zl = zy_branch(code, avail, addr, &zt, &zi);
    size_t ll = icpp_agent_branch_target(code, avail, addr, &lt);
    icpp_lde_insn li;
    size_t ll2 = icpp_lde_decode(code, avail, &li);
    c->offsets++;
    if (ll != ll2) {
        c->mismatch++;
        return;
    }
    if (zl && ll) {
        c->both++;
        int zrel = 0;
        int64_t zval = 0;
        for (int i = 0; i < 2; i++)
            if (zi.raw.imm[i].size && zi.raw.imm[i].is_relative) {
                zrel = zi.raw.imm[i].size / 8;
                zval = zi.raw.imm[i].value.s;
            }
        int znop = zi.mnemonic == ZYDIS_MNEMONIC_NOP, lnop = icpp_lde_is_nop(&li);
        /* [rip + disp32] and its displacement (lib/coldpart.c: an address taken) */
        int zrip = (zi.attributes & ZYDIS_ATTRIB_HAS_MODRM) && zi.raw.modrm.mod == 0 && zi.raw.modrm.rm == 5 &&
                   zi.raw.disp.size == 32;
        int64_t zdisp = zrip ? zi.raw.disp.value : 0;
        if (zl != ll || zt != lt || zrel != li.rel_size || zval != li.rel || (lnop && !znop) ||
            zrip != li.riprel || zdisp != li.disp) {
            c->mismatch++;
            if (shown++ < 20) {
                printf("  MISMATCH at %#llx: Zydis len %zu target %#llx nop %d, "
                       "lde len %zu target %#llx nop %d: ",
                       (unsigned long long)addr, zl, (unsigned long long)zt, znop, ll,
                       (unsigned long long)lt, lnop);
                hexdump(code, zl > ll ? zl : ll);
                printf("\n");
            }
        }
        c->nop_extra += lnop && !znop;
        c->nop_missing += znop && !lnop;
    } else if (zl) {
        c->zydis_only++;
        if (shown++ < 20) {
            printf("  ZYDIS-ONLY at %#llx: len %zu: ", (unsigned long long)addr, zl);
            hexdump(code, zl);
            printf("\n");
        }
    } else if (ll) {
        c->lde_only++;
    }
    if (padding) {
        size_t zp = zy_padding(code, avail), lp = icpp_agent_padding(code, avail);
        c->pad_longer += lp > zp;
        c->pad_shorter += lp < zp;
    }
}

static int bad_counts(const counts *c)
{
    return c->mismatch || c->zydis_only || c->nop_extra || c->pad_longer;
}

static void print_counts(const char *what, const counts *c)
{
    printf("  %s: %ld offsets, %ld decoded by both (mismatches %ld), Zydis only %ld, lde only %ld;"
           " Zydis NOP that lde is_nop misses %ld, lde-only nop %ld; padding longer %ld, shorter %ld\n",
           what, c->offsets, c->both, c->mismatch, c->zydis_only, c->lde_only, c->nop_missing, c->nop_extra,
           c->pad_longer, c->pad_shorter);
}

/* One sweep step: the length, or 1 where the decoder fails (patch.c resyncs so). */
static size_t step_zydis(const uint8_t *p, size_t avail)
{
    ZydisDecodedInstruction in;
    return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, p, avail, &in)) ? in.length : 1;
}

static size_t step_lde(const uint8_t *p, size_t avail, uint64_t addr)
{
    uint64_t t;
    size_t n = icpp_agent_branch_target(p, avail, addr, &t);
    return n ? n : 1;
}

/* Sweep code[0..n) with both; returns the number of places where both
 * stand at the same offset and step differently; *insns = lde's steps. */
static long sweep(const uint8_t *code, size_t n, uint64_t addr, long *insns, uint64_t *first_at)
{
    size_t oz = 0, ol = 0;
    long diff = 0;
    while (oz < n || ol < n) {
        if (oz == ol) {
            size_t z = step_zydis(code + oz, n - oz), l = step_lde(code + ol, n - ol, addr + ol);
            if (z != l && diff++ == 0 && first_at)
                *first_at = addr + oz;
            oz += z;
            ol += l;
            (*insns)++;
        } else if (oz < ol) {
            oz += step_zydis(code + oz, n - oz);
        } else {
            ol += step_lde(code + ol, n - ol, addr + ol);
            (*insns)++;
        }
    }
    return diff;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Agent-style sweeps (no resync bookkeeping) of one section: ns/instruction. */
static void speed(const char *name, const uint8_t *code, size_t n)
{
    double best_z = 1e30, best_l = 1e30;
    long nz = 0, nl = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_ns();
        nz = 0;
        for (size_t o = 0; o < n; nz++)
            o += step_zydis(code + o, n - o);
        double t1 = now_ns();
        nl = 0;
        for (size_t o = 0; o < n; nl++)
            o += step_lde(code + o, n - o, o);
        double t2 = now_ns();
        best_z = t1 - t0 < best_z ? t1 - t0 : best_z;
        best_l = t2 - t1 < best_l ? t2 - t1 : best_l;
    }
    printf("  speed (%s, %zu bytes, best of 5 sweeps): Zydis %.1f ms = %.1f ns/insn, "
           "lde %.1f ms = %.1f ns/insn (%.1fx)\n",
           name, n, best_z / 1e6, best_z / nz, best_l / 1e6, best_l / nl, best_z / best_l);
}

typedef struct section {
    uint64_t addr, off, size;
    const char *name;
} section;

static int check_binary(const char *path, counts *total)
{
    char self[4096];
    if (!strcmp(path, "self")) {
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0)
            return 0;
        self[n] = 0;
        path = self;
    }
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        printf("%s: missing, skipped\n", path);
        if (fd >= 0)
            close(fd);
        return 0;
    }
    size_t len = (size_t)st.st_size;
    const uint8_t *img = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED || len < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) ||
        img[EI_CLASS] != ELFCLASS64) {
        printf("%s: not a 64-bit ELF file, skipped\n", path);
        if (img != MAP_FAILED)
            munmap((void *)img, len);
        return 0;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (eh->e_shoff > len || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shnum > (len - eh->e_shoff) / sizeof(Elf64_Shdr)) {
        printf("%s: bad section headers, skipped\n", path);
        munmap((void *)img, len);
        return 0;
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(img + eh->e_shoff);
    const char *shstr = eh->e_shstrndx < eh->e_shnum && sh[eh->e_shstrndx].sh_offset < len
                            ? (const char *)img + sh[eh->e_shstrndx].sh_offset : NULL;
    section secs[64];
    int nsec = 0;
    for (int i = 0; i < eh->e_shnum && nsec < 64; i++)
        if (sh[i].sh_type == SHT_PROGBITS && (sh[i].sh_flags & SHF_EXECINSTR) && sh[i].sh_offset <= len &&
            sh[i].sh_size <= len - sh[i].sh_offset)
            secs[nsec++] = (section){sh[i].sh_addr, sh[i].sh_offset, sh[i].sh_size,
                                     shstr ? shstr + sh[i].sh_name : "?"};

    int fail = 0;
    counts c = {0};
    size_t biggest = 0;
    long sec_insns = 0, sec_diff = 0;
    for (int s = 0; s < nsec; s++) {
        const uint8_t *code = img + secs[s].off;
        for (uint64_t o = 0; o < secs[s].size; o++)
            compare(code + o, secs[s].size - o, secs[s].addr + o, &c, 1);
        sec_diff += sweep(code, secs[s].size, secs[s].addr, &sec_insns, NULL);
        if (secs[s].size > secs[biggest].size)
            biggest = (size_t)s;
    }
    printf("%s: %d executable sections\n", path, nsec);
    print_counts("every offset", &c);
    fail |= bad_counts(&c);

    /* Function sweeps, with the agent's function table. */
    icpp_ftab_entry *fe = NULL;
    size_t nf = 0;
    icpp_err err;
    long fn_swept = 0, fn_insns = 0, fn_diff = 0, fn_bad = 0;
    if (icpp_functab_build(img, len, &fe, &nf, &err) < 0) {
        printf("  function table: %s\n", err.msg);
        fail = 1;
    }
    /* The agent builds it with the length decoder (stripped cold parts,
     * lib/coldpart.h): the same table as with Zydis, owners included. */
    {
        icpp_ftab_entry *fl = NULL;
        size_t nl = 0;
        long differ = 0, parts = 0;
        if (icpp_functab_build_with(img, len, icpp_lde_coldpart, &fl, &nl, &err) < 0 || nl != nf) {
            printf("  function table with the length decoder: %zu entries, with Zydis %zu\n", nl, nf);
            fail = 1;
        }
        for (size_t i = 0; i < nf && i < nl; i++) {
            parts += fe[i].owner != fe[i].addr;
            differ += fl[i].addr != fe[i].addr || fl[i].owner != fe[i].owner;
        }
        printf("  function table: %zu functions, %ld cold parts; with the length decoder %ld differ\n", nf, parts,
               differ);
        fail |= differ != 0;
        free(fl);
    }
    for (size_t i = 0; i < nf; i++) {
        uint64_t lo = fe[i].addr, hi = fe[i].size ? lo + fe[i].size : i + 1 < nf ? fe[i + 1].addr : 0;
        int s;
        for (s = 0; s < nsec; s++)
            if (lo >= secs[s].addr && lo < secs[s].addr + secs[s].size)
                break;
        if (s == nsec)
            continue;                   /* not in an executable PROGBITS section (e.g. .plt.sec bounds) */
        if (!hi || hi > secs[s].addr + secs[s].size)
            hi = secs[s].addr + secs[s].size;
        if (hi <= lo)
            continue;
        uint64_t at = 0;
        long d = sweep(img + secs[s].off + (lo - secs[s].addr), hi - lo, lo, &fn_insns, &at);
        fn_swept++;
        fn_diff += d;
        if (d && fn_bad++ < 10)
            printf("  SWEEP DIVERGES in %s at %#llx (first at %#llx)\n", fe[i].sym ? fe[i].sym : "(FDE)",
                   (unsigned long long)lo, (unsigned long long)at);
    }
    free(fe);
    printf("  function sweeps: %ld functions, %ld instructions, %ld divergent steps in %ld functions\n",
           fn_swept, fn_insns, fn_diff, fn_bad);
    printf("  whole-section sweeps: %ld instructions, %ld divergent steps (data between functions included)\n",
           sec_insns, sec_diff);
    fail |= fn_diff != 0;
    if (nsec && secs[biggest].size > 1 << 20)
        speed(secs[biggest].name, img + secs[biggest].off, secs[biggest].size);
    total->offsets += c.offsets;
    total->both += c.both;
    total->mismatch += c.mismatch;
    total->zydis_only += c.zydis_only;
    total->lde_only += c.lde_only;
    total->nop_extra += c.nop_extra;
    total->nop_missing += c.nop_missing;
    total->pad_longer += c.pad_longer;
    total->pad_shorter += c.pad_shorter;
    munmap((void *)img, len);
    return fail;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint8_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 24);
}

static void try_bytes(uint8_t *b, size_t n, size_t fixed, counts *c)
{
    for (size_t i = fixed; i < 32; i++)
        b[i] = rnd();
    compare(b, n, 0x10000, c, 0);
}

/* Legacy prefix combinations x escape x opcode x ModRM, random tails. */
static void gen_legacy(counts *c)
{
    static const char *pfx[] = {"", "66", "f2", "f3", "48", "41", "4f", "6648", "4866", "f048", "f0", "67", "2e",
                                "3e", "64", "66f2", "f266", "f366", "66f3", "f2f3", "f3f2", "6748", "f066",
                                "266567", "f3f0", "48f2"};
    static const char *esc[] = {"", "0f", "0f38", "0f3a"};
    for (size_t i = 0; i < sizeof pfx / sizeof *pfx; i++)
        for (size_t e = 0; e < 4; e++) {
            uint8_t b[32];
            size_t n = 0;
            for (const char *s = pfx[i]; *s; s += 2)
                b[n++] = (uint8_t)strtoul((char[3]){s[0], s[1], 0}, NULL, 16);
            for (const char *s = esc[e]; *s; s += 2)
                b[n++] = (uint8_t)strtoul((char[3]){s[0], s[1], 0}, NULL, 16);
            for (unsigned op = 0; op < 256; op++)
                for (unsigned m = 0; m < 256; m++) {
                    b[n] = (uint8_t)op;
                    b[n + 1] = (uint8_t)m;
                    try_bytes(b, 15, n + 2, c);
                }
        }
}

/* VEX (C4), EVEX, MVEX, XOP: every map field value x pp x W x L x opcode;
 * every ModRM where the map exists, two (mod 0, mod 3) where it does not. */
static void gen_vector(counts *c)
{
    for (unsigned kind = 0; kind < 4; kind++)
        for (unsigned map = 0; map < (kind == 0 || kind == 3 ? 32u : 16u); map++)
            for (unsigned pp = 0; pp < 4; pp++)
                for (unsigned wl = 0; wl < 4; wl++) {
                    unsigned w = wl & 1, l = wl >> 1;
                    int exists = kind == 0 ? map <= 3 : kind == 1 ? map <= 7
                               : kind == 2 ? map <= 3 : map >= 8 && map <= 10;
                    uint8_t b[32];
                    size_t n = 0;
                    if (kind == 0 || kind == 3) {           /* VEX / XOP: C4|8F RXBmmmmm WvvvvLpp */
                        b[n++] = kind ? 0x8f : 0xc4;
                        b[n++] = (uint8_t)(0xe0 | map);
                        b[n++] = (uint8_t)(w << 7 | 0xf << 3 | l << 2 | pp);
                    } else {                                /* EVEX / MVEX: 62 RXBR'mmmm Wvvvv?pp ... */
                        b[n++] = 0x62;
                        b[n++] = (uint8_t)(0xf0 | map);
                        b[n++] = (uint8_t)(w << 7 | 0xf << 3 | (kind == 1 ? 4 : 0) | pp);
                        b[n++] = (uint8_t)(kind == 1 ? l << 5 | 8 | 1 : l << 4 | 8 | 1);
                    }
                    for (unsigned op = 0; op < 256; op++)
                        for (unsigned m = 0; m < 256; m += exists ? 1 : 0xc0) {
                            b[n] = (uint8_t)op;
                            b[n + 1] = (uint8_t)m;
                            try_bytes(b, 15, n + 2, c);
                        }
                }
}

/* Random prefix soup, escapes, then random bytes, random available length. */
static void gen_soup(counts *c, long count)
{
    static const uint8_t pf[] = {0x66, 0x67, 0xf0, 0xf2, 0xf3, 0x2e, 0x3e, 0x26, 0x64, 0x65, 0x36,
                                 0x40, 0x41, 0x48, 0x4f, 0x44, 0xc4, 0xc5, 0x62, 0x8f};
    for (long i = 0; i < count; i++) {
        uint8_t b[32];
        size_t n = 0, np = rnd() % 6;
        for (size_t j = 0; j < np; j++)
            b[n++] = pf[rnd() % sizeof pf];
        switch (rnd() % 6) {
        case 1: b[n++] = 0x0f; break;
        case 2: b[n++] = 0x0f; b[n++] = 0x38; break;
        case 3: b[n++] = 0x0f; b[n++] = 0x3a; break;
        case 4: b[n++] = 0x0f; b[n++] = 0x0f; break;
        }
        try_bytes(b, 1 + rnd() % 15, n, c);
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    int fail = 0;
    counts total = {0};
    for (int i = 1; i < argc; i++)
        fail |= check_binary(argv[i], &total);
    printf("all binaries:\n");
    print_counts("every offset", &total);

    double t0 = now_ns();
    counts g = {0};
    gen_legacy(&g);
    print_counts("generated: legacy prefixes x maps x opcode x ModRM", &g);
    fail |= bad_counts(&g);
    counts v = {0};
    gen_vector(&v);
    print_counts("generated: VEX/EVEX/MVEX/XOP map x pp x W x L x opcode x ModRM", &v);
    fail |= bad_counts(&v);
    counts r = {0};
    gen_soup(&r, 4000000);
    print_counts("generated: random prefix soup", &r);
    fail |= bad_counts(&r);
    printf("generated encodings: %.1f s\n", (now_ns() - t0) / 1e9);

    printf("%s\n", fail ? "FAIL" : "ok: lde agrees with Zydis wherever Zydis decodes");
    return fail;
}
