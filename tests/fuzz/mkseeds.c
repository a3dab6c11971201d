/* mkseeds.c -- writes the fuzzers' seed corpora with the project's own writers and from real ELF files.
 *
 * Usage: mkseeds OUTDIR ELF...
 * Creates OUTDIR/{pathmap,samples,fde,functab,procmaps}/ and fills them:
 *   pathmap   maps built with icpp_pathmap_* and the streaming encoder;
 *   samples   sample files from icpp_swriter: every record type, several
 *             blocks, a cut-short one, and a recording of the first ELF
 *             (mappings and samples at its real functions) that replays;
 *             fuzz_replay uses these too;
 *   fde       .eh_frame and .debug_frame of each ELF, in fuzz_fde's input
 *             layout (flags byte, 8-byte section address, section);
 *   functab   each ELF cut down to the sections the function table reads
 *             (symbol tables, strings, notes, .eh_frame), and the first ELF
 *             whole;
 *   procmaps  this process's /proc/self/maps and stat, and made-up ones.
 * Built with gcc against libicpp (no sanitizer needed); run by run.sh. */
#include "codec.h"
#include "functab.h"
#include "pathmap.h"
#include "samples.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *outdir;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "mkseeds: %s: %s\n", what, msg);
    exit(1);
}

static void path_of(char *buf, size_t sz, const char *sub, const char *name)
{
    snprintf(buf, sz, "%s/%s/%s", outdir, sub, name);
}

static void put(const char *sub, const char *name, const void *p, size_t n)
{
    char path[4096];
    path_of(path, sizeof path, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0)
        die(path, strerror(errno));
}

static uint8_t *slurp(const char *path, size_t *len)
{
    icpp_err err;
    uint8_t *b;
    if (icpp_read_file(path, (size_t)1 << 30, &b, len, &err) < 0)
        die(path, err.msg);
    return b;
}

/* ---- path maps ---- */

static void put_map(const icpp_pathmap *pm, const char *name)
{
    uint8_t *b;
    size_t n;
    icpp_err err;
    if (icpp_pathmap_encode(pm, &b, &n, &err) < 0)
        die(name, err.msg);
    put("pathmap", name, b, n);
    free(b);
}

static void seeds_pathmap(void)
{
    icpp_pathmap *pm = icpp_pathmap_new();
    put_map(pm, "empty.icppmap");

    icpp_build_id exe = {20, {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
    icpp_build_id none = {0, {0}}, libc = {8, {0xca, 0xfe, 0xba, 0xbe, 0, 1, 2, 3}};
    uint32_t m0, m1, m2, f[6], n[10];
    icpp_pathmap_add_module(pm, "/usr/bin/prog", &exe, 2, &m0);
    icpp_pathmap_add_module(pm, "/lib/x86_64-linux-gnu/libc.so.6", &libc, 3, &m1);
    icpp_pathmap_add_module(pm, "[vdso]", &none, 0, &m2);
    icpp_pathmap_set_main(pm, m0);
    icpp_pathmap_add_func(pm, m0, 0x1040, "main", &f[0]);
    icpp_pathmap_add_func(pm, m0, 0x1180, "work", &f[1]);
    icpp_pathmap_add_func(pm, m0, 0x1200, "recurse", &f[2]);
    icpp_pathmap_add_func(pm, m1, 0x29d90, "__libc_start_call_main", &f[3]);
    icpp_pathmap_add_func(pm, m1, 0x9a0c0, "", &f[4]);
    icpp_pathmap_add_func(pm, m2, 0x700, "__vdso_clock_gettime", &f[5]);
    icpp_pathmap_child(pm, 0, f[3], &n[0]);
    icpp_pathmap_child(pm, n[0], f[0], &n[1]);
    icpp_pathmap_child(pm, n[1], f[1], &n[2]);
    icpp_pathmap_child(pm, n[1], f[2], &n[3]);
    icpp_pathmap_child(pm, n[3], f[2], &n[4]);
    icpp_pathmap_child(pm, n[4], f[2], &n[5]);
    icpp_pathmap_child(pm, n[2], f[4], &n[6]);
    icpp_pathmap_child(pm, n[2], f[5], &n[7]);
    icpp_pathmap_child(pm, 0, f[1], &n[8]);             /* a second root */
    icpp_pathmap_child(pm, n[5], f[1], &n[9]);
    for (int i = 0; i < 10; i++) {
        icpp_pathmap_add_count(pm, n[i], (uint64_t)(i + 1) * 1000);
        icpp_pathmap_add_height(pm, n[i], 88 + 48 * i, (uint64_t)(i + 1) * 999);
        icpp_pathmap_add_site(pm, n[i], i < 3 ? m1 : m0, 0x1100 + 8 * i, 7);
    }
    icpp_pathmap_add_height(pm, n[2], 200, 1);          /* alloca: a second height */
    icpp_pathmap_add_height(pm, n[2], -16, 3);          /* a negative one */
    icpp_pathmap_add_site(pm, n[4], m0, 0x12ff, 1u << 20);
    icpp_pathmap_set_meta(pm, "program", "prog --flag input");
    icpp_pathmap_set_meta(pm, "runs", "3");
    put_map(pm, "small.icppmap");
    icpp_pathmap_free(pm);

    /* The streaming encoder (the training agent's writer), deep path. */
    icpp_wbuf b = {0};
    icpp_pmenc e;
    icpp_pmenc_begin(&e, &b, 0);
    icpp_pmenc_module(&e, 1, "/opt/static-prog", &exe);
    icpp_pmenc_funcs(&e);
    for (uint32_t i = 0; i < 4; i++)
        icpp_pmenc_func(&e, 0, 0x401000 + 0x40 * i, i == 3 ? "f.cold" : "f");
    icpp_pmenc_nodes(&e);
    for (uint32_t i = 0; i < 40; i++) {
        icpp_pm_height h[2] = {{(int64_t)i * 32 + 8, i + 1, 0}, {(int64_t)i * 32 + 24, 1, 0}};
        icpp_pm_site s = {0, 0x401010 + i, i};
        icpp_pmenc_node(&e, 1, i % 4, i, h, 1 + (i % 2), &s, i % 3 ? 1 : 0);
    }
    icpp_pmenc_metas(&e);
    icpp_pmenc_meta(&e, "capped-nodes", "0");
    if (icpp_pmenc_end(&e) < 0)
        die("pmenc", "out of memory");
    put("pathmap", "stream.icppmap", b.p, b.len);
    icpp_wbuf_free(&b);
}

/* ---- ELF helpers ---- */

typedef struct elf {
    uint8_t          *p;
    size_t            len;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    size_t            nsh;
} elf;

static int elf_open(elf *e, const char *path)
{
    e->p = slurp(path, &e->len);
    e->eh = (const Elf64_Ehdr *)e->p;
    if (e->len < sizeof *e->eh || memcmp(e->p, ELFMAG, SELFMAG) || e->eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        e->eh->e_shentsize != sizeof(Elf64_Shdr) || e->eh->e_shoff + e->eh->e_shnum * sizeof(Elf64_Shdr) > e->len) {
        fprintf(stderr, "mkseeds: %s: not a 64-bit ELF file with section headers, skipped\n", path);
        free(e->p);
        return -1;
    }
    e->sh = (const Elf64_Shdr *)(e->p + e->eh->e_shoff);
    e->nsh = e->eh->e_shnum;
    return 0;
}

static const char *elf_secname(const elf *e, size_t i)
{
    const Elf64_Shdr *st = &e->sh[e->eh->e_shstrndx];
    return (const char *)e->p + st->sh_offset + e->sh[i].sh_name;
}

static const Elf64_Shdr *elf_section(const elf *e, const char *name)
{
    for (size_t i = 0; i < e->nsh; i++)
        if (e->sh[i].sh_type != SHT_NOBITS && !strcmp(elf_secname(e, i), name) &&
            e->sh[i].sh_offset + e->sh[i].sh_size <= e->len)
            return &e->sh[i];
    return NULL;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* fuzz_fde input: flags, section address, section bytes. */
static void seed_fde(const elf *e, const char *secname, int eh, const char *tag)
{
    const Elf64_Shdr *s = elf_section(e, secname);
    if (!s || !s->sh_size)
        return;
    size_t n = 9 + s->sh_size;
    uint8_t *b = malloc(n);
    b[0] = (uint8_t)eh;
    for (int i = 0; i < 8; i++)
        b[1 + i] = (uint8_t)(s->sh_addr >> (8 * i));
    memcpy(b + 9, e->p + s->sh_offset, s->sh_size);
    char name[400];
    snprintf(name, sizeof name, "%s%s", tag, secname);
    put("fde", name, b, n);
    free(b);
}

/* The ELF with only the sections icpp_functab_build reads keeping their
 * bytes; every other section keeps its header (indexes stay valid) but no
 * contents.  Program headers stay; a PT_NOTE follows its note section. */
static void seed_functab_small(const elf *e, const char *tag)
{
    size_t phsz = (size_t)e->eh->e_phnum * sizeof(Elf64_Phdr);
    if (e->eh->e_phoff + phsz > e->len)
        phsz = 0;
    size_t cap = sizeof(Elf64_Ehdr) + phsz + e->nsh * sizeof(Elf64_Shdr) + 64;
    for (size_t i = 0; i < e->nsh; i++)
        cap += e->sh[i].sh_size + 8;
    uint8_t *o = calloc(1, cap);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)o;
    *eh = *e->eh;
    size_t pos = sizeof *eh;
    Elf64_Phdr *ph = NULL;
    if (phsz) {
        eh->e_phoff = pos;
        ph = (Elf64_Phdr *)(o + pos);
        memcpy(ph, e->p + e->eh->e_phoff, phsz);
        pos += phsz;
    } else {
        eh->e_phoff = 0;
        eh->e_phnum = 0;
    }
    Elf64_Shdr *sh = malloc(e->nsh * sizeof *sh);
    for (size_t i = 0; i < e->nsh; i++) {
        sh[i] = e->sh[i];
        const char *nm = elf_secname(e, i);
        int keep = sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size <= e->len &&
                   (sh[i].sh_type == SHT_SYMTAB || sh[i].sh_type == SHT_DYNSYM || sh[i].sh_type == SHT_STRTAB ||
                    sh[i].sh_type == SHT_NOTE || !strcmp(nm, ".eh_frame"));
        if (!keep) {
            sh[i].sh_offset = 0;
            if (sh[i].sh_type != SHT_NOBITS)
                sh[i].sh_size = 0;
            continue;
        }
        pos = (pos + 7) & ~(size_t)7;
        memcpy(o + pos, e->p + e->sh[i].sh_offset, sh[i].sh_size);
        for (size_t k = 0; ph && k < eh->e_phnum; k++)
            if (ph[k].p_type == PT_NOTE && ph[k].p_offset == e->sh[i].sh_offset)
                ph[k].p_offset = pos;
        sh[i].sh_offset = pos;
        pos += sh[i].sh_size;
    }
    pos = (pos + 7) & ~(size_t)7;
    eh->e_shoff = pos;
    memcpy(o + pos, sh, e->nsh * sizeof *sh);
    pos += e->nsh * sizeof *sh;
    char name[400];
    snprintf(name, sizeof name, "%s.small", tag);
    put("functab", name, o, pos);
    free(sh);
    free(o);
}

/* ---- sample files ---- */

static icpp_swriter *swopen(const char *name)
{
    char path[4096];
    icpp_err err;
    path_of(path, sizeof path, "samples", name);
    icpp_swriter *w = icpp_swriter_open(path, &err);
    if (!w)
        die(path, err.msg);
    return w;
}

static void swclose(icpp_swriter *w, uint64_t samples, uint64_t lost)
{
    icpp_err err;
    if (icpp_swriter_close(w, samples, lost, &err) < 0)
        die("swriter_close", err.msg);
}

static void seeds_samples_synthetic(void)
{
    icpp_build_id bid = {20, {0xde, 0xad, 0xbe, 0xef}};
    icpp_swriter *w = swopen("all.icpps");
    icpp_swriter_info(w, "command", "prog a b");
    icpp_swriter_info(w, "tool", "mkseeds");
    icpp_swriter_info(w, "feature", "n=1000");          /* workload features (lib/runinfo.h) */
    icpp_swriter_info(w, "feature", "bytes=1.5e6");
    icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 4000, 1, 0, 0, 0);
    icpp_swriter_event(w, 1, "cycles", 0, 0, 1000003, 0, 2, 0, 0);
    icpp_swriter_event(w, 2, "cpu-clock", 1, 0, 250, 1, 0, ICPP_EVENT_LEARN, 0);
    icpp_swriter_proc(w, 100, 1, 0x7ffc12345670, "/usr/bin/prog", 0);
    icpp_swriter_mmap(w, 100, 0x555555554000, 0x3000, 0, 5, "/usr/bin/prog", &bid);
    icpp_swriter_mmap(w, 100, 0x7ffff7fc1000, 0x2000, 0, 5, "[vdso]", NULL);
    icpp_swriter_mmap(w, 100, 0x7f0000000000, 0x800000, 0, 3, "", NULL);
    uint64_t t = 5000;
    for (int i = 0; i < 12; i++) {
        uint32_t tid = 100 + (uint32_t)(i % 3);
        t += 250000;
        icpp_swriter_sample(w, 100, tid, (uint32_t)(i & 1), t, 0x555555555000 + 0x40 * (uint64_t)i,
                            tid == 100 ? 0x7ffc12345000 - 16 * (uint64_t)i : 0x7f0000700000 + 64 * (uint64_t)i,
                            0x7ffc12345100, NULL);
    }
    uint64_t chain[3] = {0x555555555100, 0x555555555200, 0x7f1234567890};
    uint64_t regs[3] = {0x7ffc12345000, 0x7ffc12345100, 0x555555555100};
    uint8_t st[64];
    for (int i = 0; i < 64; i++)
        st[i] = (uint8_t)(i * 7);
    icpp_sample_extra x = {3, chain, 3, regs, 0x1c0, sizeof st, st};
    icpp_swriter_sample(w, 100, 100, 0, t + 1, 0x555555555100, 0x7ffc12345000, 0x7ffc12345100, &x);
    /* learn samples: two of one thread sharing outer frames, one of another */
    uint64_t lpc[4] = {0x555555555180, 0x555555555210, 0x555555555300, 0x555555555010};
    uint64_t lesp[4] = {0x7ffc12344ff8, 0x7ffc12345038, 0x7ffc12345098, 0x7ffc12345668};
    icpp_learn_chain l = {0, 4, lpc, lesp};
    icpp_swriter_learn(w, 100, 100, 2, t + 1, lpc[0], 0x7ffc12344fe0, 0x7ffc12345030, &l);
    lpc[1] = 0x555555555220;
    lpc[0] = 0x555555555190;
    icpp_swriter_learn(w, 100, 100, 2, t + 1, lpc[0], 0x7ffc12344fe0, 0x7ffc12345030, &l);
    icpp_learn_chain l2 = {1, 2, lpc, lesp};
    icpp_swriter_learn(w, 100, 101, 2, t + 1, lpc[0], 0x7f0000700000, 0, &l2);
    icpp_swriter_lost(w, 17);
    icpp_swriter_proc(w, 101, 100, 0x7ffc12345670, "/usr/bin/prog", 0);             /* fork */
    icpp_swriter_sample(w, 101, 101, 0, t + 2, 0x555555555040, 0x7ffc12344f00, 0, NULL);
    icpp_swriter_proc(w, 101, 100, 0x7ffd00000000, "/usr/bin/other", ICPP_PROC_EXEC);  /* exec */
    icpp_swriter_mmap(w, 101, 0x400000, 0x1000, 0, 5, "/usr/bin/other", NULL);
    icpp_swriter_sample(w, 101, 101, 0, t + 3, 0x400100, 0x7ffcfffff000, 0, NULL);
    icpp_swriter_exit(w, 100, 102);
    icpp_swriter_exit(w, 101, 101);
    swclose(w, 16, 17);

    /* Many small blocks: a flush after every record. */
    w = swopen("blocks.icpps");
    icpp_err err;
    icpp_swriter_proc(w, 7, 0, 0x7ffe00000000, "/bin/x", 0);
    icpp_swriter_flush(w, &err);
    icpp_swriter_mmap(w, 7, 0x10000, 0x10000, 0x1000, 5, "/bin/x", NULL);
    icpp_swriter_flush(w, &err);
    for (int i = 0; i < 6; i++) {
        icpp_swriter_sample(w, 7, 7 + (uint32_t)i / 3, 0, (uint64_t)i * 1000, 0x10000 + 0x100 * (uint64_t)i,
                            0x7ffdfffff000 - 32 * (uint64_t)i, 0, NULL);
        icpp_swriter_flush(w, &err);
    }
    swclose(w, 6, 0);

    /* A writer killed mid-block: all.icpps without its last 5 bytes. */
    char path[4096];
    size_t n;
    path_of(path, sizeof path, "samples", "all.icpps");
    uint8_t *b = slurp(path, &n);
    put("samples", "cut.icpps", b, n - 5);
    free(b);
}

/* A recording of `path` (the first ELF) whose samples are at its functions,
 * so the replay finds the module, its CFI and heights. */
static void seed_samples_real(const elf *e, const char *path)
{
    icpp_ftab_entry *ft;
    size_t nft;
    icpp_err err;
    if (icpp_functab_build(e->p, e->len, &ft, &nft, &err) < 0 || nft == 0)
        return;
    icpp_build_id bid;
    icpp_functab_build_id(e->p, e->len, &bid);
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(e->p + e->eh->e_phoff);
    uint64_t bias = e->eh->e_type == ET_DYN ? 0x555555554000ull : 0;
    icpp_swriter *w = swopen("real.icpps");
    icpp_swriter_info(w, "command", path);
    icpp_swriter_event(w, 0, "cpu-clock", 1, 0, 4000, 1, 0, 0, 0);
    uint64_t startstack = 0x7ffd12345670;
    icpp_swriter_proc(w, 4000, 1, startstack, path, 0);
    for (size_t i = 0; i < e->eh->e_phnum; i++) {
        if (ph[i].p_type != PT_LOAD)
            continue;
        uint64_t lo = ph[i].p_vaddr & ~0xfffull, hi = (ph[i].p_vaddr + ph[i].p_memsz + 0xfff) & ~0xfffull;
        uint32_t prot = (ph[i].p_flags & PF_R ? 1 : 0) | (ph[i].p_flags & PF_W ? 2 : 0) | (ph[i].p_flags & PF_X ? 4 : 0);
        icpp_swriter_mmap(w, 4000, bias + lo, hi - lo, ph[i].p_offset & ~0xfffull, prot, path, &bid);
    }
    icpp_swriter_mmap(w, 4000, 0x7ffd12300000, 0x100000, 0, 3, "[stack]", NULL);
    icpp_swriter_mmap(w, 4000, 0x7f0000000000, 0x800000, 0, 3, "", NULL);      /* a thread's stack */
    uint64_t t = 1000;
    size_t ns = 0;
    for (size_t i = 0; i < nft && ns < 48; i++, ns += 2) {
        uint64_t ip = bias + ft[i].addr + (ft[i].size > 8 ? ft[i].size / 2 : 0);
        icpp_swriter_sample(w, 4000, 4000, 0, t += 4000, ip, startstack - 0x100 - 16 * i, startstack - 0x80, NULL);
        icpp_swriter_sample(w, 4000, 4001, 0, t += 4000, bias + ft[i].addr, 0x7f00007ff000 - 8 * i, 0, NULL);
    }
    icpp_swriter_sample(w, 4000, 4000, 0, t += 4000, 0x1234, startstack - 0x100, 0, NULL);   /* unmapped */
    icpp_swriter_proc(w, 4001, 4000, startstack, path, 0);                                    /* fork */
    icpp_swriter_sample(w, 4001, 4001, 0, t += 4000, bias + ft[0].addr, startstack - 0x200, 0, NULL);
    swclose(w, ns + 2, 0);
    free(ft);
}

/* ---- /proc text ---- */

static void copy_proc(const char *src, const char *name)
{
    FILE *f = fopen(src, "r");
    if (!f)
        return;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    put("procmaps", name, buf, n);
}

static void seeds_procmaps(void)
{
    copy_proc("/proc/self/maps", "self.maps");
    copy_proc("/proc/self/stat", "self.stat");
    static const char made_up[] =
        "00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/dbus-daemon\n"
        "00651000-00652000 r--p 00051000 08:02 173521      /usr/bin/dbus-daemon\n"
        "00652000-00655000 rw-p 00052000 08:02 173521      /usr/bin/dbus-daemon (deleted)\n"
        "00e03000-00e24000 rw-p 00000000 00:00 0           [heap]\n"
        "00410000-00420000 r-xp 00010000 08:02 99          /overlapping/new\n"
        "7fff5b7e6000-7fff5b807000 rw-p 00000000 00:00 0   [stack]\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n";
    put("procmaps", "made-up.maps", made_up, sizeof made_up - 1);
    static const char stat[] = "4242 (a b) c)) R 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 "
                               "123456 1000000 200 18446744073709551615 94000000000000 94000000001000 "
                               "140730000000000 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
    put("procmaps", "made-up.stat", stat, sizeof stat - 1);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mkseeds OUTDIR ELF...\n");
        return 2;
    }
    outdir = argv[1];
    static const char *subs[] = {"", "/pathmap", "/samples", "/fde", "/functab", "/procmaps"};
    for (size_t i = 0; i < sizeof subs / sizeof *subs; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s", outdir, subs[i]);
        if (mkdir(p, 0777) < 0 && errno != EEXIST)
            die(p, strerror(errno));
    }
    seeds_pathmap();
    seeds_samples_synthetic();
    seeds_procmaps();
    for (int i = 2; i < argc; i++) {
        elf e;
        if (elf_open(&e, argv[i]) < 0)
            continue;
        char tag[300];
        snprintf(tag, sizeof tag, "%d-%s", i - 1, base_name(argv[i]));
        seed_fde(&e, ".eh_frame", 1, tag);
        seed_fde(&e, ".debug_frame", 0, tag);
        seed_functab_small(&e, tag);
        if (i == 2) {
            put("functab", tag, e.p, e.len);
            seed_samples_real(&e, argv[i]);
        }
        free(e.p);
    }
    return 0;
}
