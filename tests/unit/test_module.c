/* test_module.c -- ELF modules: kinds, build-id, bias, function lookup, demangling, inlined frames. */
#include "check.h"
#include "debuginfo.h"
#include "module.h"
#include "procmaps.h"

#include <dlfcn.h>
#include <libelf.h>
#include <time.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) int icpp_test_marker_function(int x)
{
    return x * 3 + 1;
}

/* Inlined frames: icpp_test_inliner holds outer, which holds inner (DWARF). */
static volatile unsigned icpp_test_sink;

static inline __attribute__((always_inline)) unsigned icpp_test_inl_inner(unsigned x)
{
    for (unsigned i = 0; i < x; i++)
        icpp_test_sink += i * x;
    return icpp_test_sink;
}

static inline __attribute__((always_inline)) unsigned icpp_test_inl_outer(unsigned x)
{
    icpp_test_sink ^= x;
    unsigned r = icpp_test_inl_inner(x * 5);
    icpp_test_sink ^= r;
    return r + 7;
}

__attribute__((noipa)) unsigned icpp_test_inliner(unsigned x)
{
    return icpp_test_inl_outer(x) ^ 3;
}

/* Runtime address -> (module path, link-time address) through /proc/self/maps. */
static int self_locate(uint64_t rt, icpp_module **mod, uint64_t *addr)
{
    icpp_maps mm;
    icpp_err err;
    icpp_maps_init(&mm);
    int ok = 0;
    if (icpp_maps_read(&mm, 0, &err) == 0) {
        const icpp_mapping *mp = icpp_maps_find(&mm, rt);
        if (mp && mp->path) {
            icpp_module *m = icpp_module_open(mp->path, &err);
            uint64_t bias;
            if (m && icpp_module_bias(m, mp->start, mp->pgoff, &bias, &err) == 0) {
                *mod = m;
                *addr = rt - bias;
                ok = 1;
            } else {
                icpp_module_close(m);
            }
        }
    }
    icpp_maps_free(&mm);
    return ok;
}

/* Every address of this executable's icpp_test_inliner: the chains are
 * prefixes of outer;inner, both occur, max truncates the innermost; a
 * function with nothing inlined has none. */
static void check_inlines(void)
{
    icpp_module *m = NULL;
    uint64_t addr = 0, plain;
    CHECK(self_locate((uint64_t)(uintptr_t)&icpp_test_inliner, &m, &addr), "cannot locate icpp_test_inliner");
    if (!m)
        return;
    const icpp_func *f = icpp_module_func_start(m, addr);
    CHECK(f && f->size > 0, "icpp_test_inliner: no sized symbol");
    int seen[3] = {0};
    for (uint64_t a = addr; f && a < addr + f->size; a++) {
        const char *names[4] = {0}, *one[1] = {0};
        int n = icpp_module_inlines(m, a, names, 4);
        CHECK(n >= 0 && n <= 2, "0x%" PRIx64 ": %d inlined frames", a, n);
        if (n < 0 || n > 2)
            continue;
        seen[n]++;
        CHECK(n < 1 || !strcmp(names[0], "icpp_test_inl_outer"), "0x%" PRIx64 ": outermost is %s", a, names[0]);
        CHECK(n < 2 || !strcmp(names[1], "icpp_test_inl_inner"), "0x%" PRIx64 ": innermost is %s", a, names[1]);
        int k = icpp_module_inlines(m, a, one, 1);
        CHECK(k == (n ? 1 : 0) && (!k || one[0] == names[0]), "0x%" PRIx64 ": max 1 gave %d", a, k);
    }
    printf("icpp_test_inliner: %d addresses with nothing inlined, %d in outer, %d in outer;inner\n", seen[0], seen[1],
           seen[2]);
    CHECK(seen[1] > 0 && seen[2] > 0, "outer alone at %d addresses, outer;inner at %d", seen[1], seen[2]);
    plain = addr + ((uint64_t)(uintptr_t)&icpp_test_marker_function - (uint64_t)(uintptr_t)&icpp_test_inliner);
    const icpp_func *g = icpp_module_func_start(m, plain);
    CHECK(g && g->size > 0, "cannot find the marker function");
    for (uint64_t a = plain; g && a < plain + g->size; a++) {
        const char *names[4];
        CHECK(icpp_module_inlines(m, a, names, 4) == 0, "0x%" PRIx64 ": inlined frames in the marker function", a);
    }
    icpp_module_close(m);
}

static void check_self_lookup(const char *what, uint64_t rt, const char *want_name)
{
    icpp_module *m = NULL;
    uint64_t addr = 0;
    CHECK(self_locate(rt, &m, &addr), "%s: cannot locate 0x%" PRIx64, what, rt);
    if (!m)
        return;
    const icpp_func *f = icpp_module_func_start(m, addr);
    CHECK(f && strcmp(f->name, want_name) == 0, "%s: function at start is %s, want %s", what,
          f ? f->name : "(none)", want_name);
    const icpp_func *g = icpp_module_func_at(m, addr + 1);
    CHECK(g == f, "%s: func_at(start+1) is not the same function", what);
    icpp_module_close(m);
}

/* Every function start of the stripped copy has the owner the symbols of
 * the unstripped one give (foo.cold -> foo), and at least one is a part. */
static void check_cold_pair(const char *full_path, const char *strip_path)
{
    icpp_err err;
    icpp_module *full = icpp_module_open(full_path, &err);
    CHECK(full != NULL, "open %s: %s", full_path, err.msg);
    icpp_module *strip = full ? icpp_module_open(strip_path, &err) : NULL;
    CHECK(!full || strip != NULL, "open %s: %s", strip_path, err.msg);
    if (!full || !strip) {
        icpp_module_close(full);
        return;
    }
    size_t parts = 0, found = 0, wrong = 0;
    for (size_t k = 0; k < icpp_module_nfuncs(strip); k++) {
        const icpp_func *s = &icpp_module_funcs(strip)[k];
        const icpp_func *f = icpp_module_func_start(full, s->addr);
        if (!f)
            continue;       /* the PLT's FDE: no symbol in either */
        parts += f->owner != f->addr;
        found += f->owner != f->addr && s->owner == f->owner;
        if (s->owner != f->owner) {
            if (wrong++ < 5)
                fprintf(stderr, "%s: %s at %#llx: owner %#llx, %s says %#llx\n", strip_path, f->sym,
                        (unsigned long long)s->addr, (unsigned long long)s->owner, full_path,
                        (unsigned long long)f->owner);
        }
    }
    printf("%s: %zu cold parts by symbol, %zu found from the code, %zu owners differ\n", strip_path, parts, found,
           wrong);
    CHECK(parts > 0 && found == parts && wrong == 0, "%s: cold parts %zu, found %zu, wrong owners %zu", strip_path,
          parts, found, wrong);
    icpp_module_close(full);
    icpp_module_close(strip);
}

/* A function is no cold part: every function start of the stripped module
 * that the symbols of its separate debug file (or unstripped twin) name as
 * a function of its own -- not a part -- keeps itself as owner in the
 * stripped one.  (glibc's hand-written string functions are entered both by
 * indirect calls, through the IFUNC resolver's choice, and by another
 * variant's conditional tail jump: __strcmp_evex from __strncmp_evex.) */
static void check_no_false_parts(const char *full_path, const char *strip_path)
{
    icpp_err err;
    icpp_module *full = icpp_module_open(full_path, &err);
    CHECK(full != NULL, "open %s: %s", full_path, err.msg);
    icpp_module *strip = full ? icpp_module_open(strip_path, &err) : NULL;
    CHECK(!full || strip != NULL, "open %s: %s", strip_path, err.msg);
    if (!full || !strip) {
        icpp_module_close(full);
        return;
    }
    size_t funcs = 0, wrong = 0;
    for (size_t k = 0; k < icpp_module_nfuncs(strip); k++) {
        const icpp_func *s = &icpp_module_funcs(strip)[k];
        const icpp_func *f = icpp_module_func_start(full, s->addr);
        if (!f || f->owner != f->addr || strstr(f->sym, ".cold") || s->source != ICPP_FSRC_FDE)
            continue;       /* no symbol, a named part, or named in the stripped file too */
        funcs++;
        if (s->owner != s->addr && wrong++ < 5)
            fprintf(stderr, "%s: %s at %#llx is a function, taken as a part of %#llx\n", strip_path, f->sym,
                    (unsigned long long)s->addr, (unsigned long long)s->owner);
    }
    printf("%s: %zu functions known only from the CFI that %s names, %zu taken as cold parts\n", strip_path, funcs,
           full_path, wrong);
    CHECK(funcs > 0 && wrong == 0, "%s: %zu of %zu functions taken as cold parts", strip_path, wrong, funcs);
    icpp_module_close(full);
    icpp_module_close(strip);
}

/* One file is one module while open: a second open shares it, a close keeps
 * it for the other user, and a file changed since is another module. */
static void check_shared(void)
{
    icpp_err err;
    char tmp[] = "/tmp/icpp-test-module-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0, "mkstemp failed");
    if (fd < 0)
        return;
    icpp_module *self = icpp_module_open("/proc/self/exe", &err);
    size_t len = 0;
    const char *raw = self ? elf_rawfile(icpp_module_elf(self), &len) : NULL;
    CHECK(raw && len && write(fd, raw, len) == (ssize_t)len, "cannot copy the test binary");
    icpp_module *a = icpp_module_open(tmp, &err), *b = icpp_module_open(tmp, &err);
    CHECK(a && a == b, "two opens of one file gave %p and %p", (void *)a, (void *)b);
    icpp_module_close(b);
    const icpp_func *f = a ? icpp_module_func_start(a, icpp_module_funcs(a)[0].addr) : NULL;
    CHECK(f != NULL, "the module did not outlive the other user's close");
    /* rewritten in place: same path, same inode, another change time */
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    CHECK(pwrite(fd, raw, 1, 0) == 1, "cannot rewrite the copy");
    icpp_module *c = icpp_module_open(tmp, &err);
    CHECK(c && c != a, "a file changed since it was opened gave the same module");
    icpp_module_close(c);
    icpp_module_close(a);
    icpp_module_close(self);
    close(fd);
    unlink(tmp);
}

/* A file that is not ELF is refused without touching descriptors that are
 * not the module's: it used to close descriptor 0 (a debug-file descriptor
 * not yet set to -1 on that way out). */
static void check_fd0_kept(void)
{
    icpp_err err;
    int saved = dup(0);
    int nul = open("/dev/null", O_RDONLY);
    CHECK(saved >= 0 && nul >= 0 && dup2(nul, 0) == 0, "cannot put /dev/null on descriptor 0");
    icpp_module *m = icpp_module_open("/etc/passwd", &err);
    CHECK(!m, "/etc/passwd opened as a module");
    CHECK(fcntl(0, F_GETFD) != -1, "icpp_module_open closed descriptor 0");
    if (saved >= 0) {
        dup2(saved, 0);
        close(saved);
    }
    if (nul >= 0)
        close(nul);
}

int main(int argc, char **argv)
{
    icpp_err err = {0};

    /* This executable (PIE by default): symbol lookup through the real bias. */
    check_self_lookup("main", (uint64_t)(uintptr_t)&main, "main");
    check_self_lookup("marker", (uint64_t)(uintptr_t)&icpp_test_marker_function, "icpp_test_marker_function");
    check_inlines();
    /* libc: aliases folded to the public name.  Ask libc itself (under ASan
     * &malloc is the sanitizer's interceptor). */
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL, "libc.so.6 not loaded?");
    if (libc) {
        check_self_lookup("malloc", (uint64_t)(uintptr_t)dlsym(libc, "malloc"), "malloc");
        check_self_lookup("qsort", (uint64_t)(uintptr_t)dlsym(libc, "qsort"), "qsort");
        dlclose(libc);
    }

    /* Kinds. */
    icpp_module *self = icpp_module_open("/proc/self/exe", &err);
    CHECK(self && icpp_module_kind_of(self) == ICPP_MOD_PIE, "self is not a PIE");
    CHECK(self && !icpp_module_is_static(self), "self is static?");
    CHECK(self && icpp_module_build_id(self)->len == 20, "self build-id length %d",
          self ? icpp_module_build_id(self)->len : -1);
    icpp_module_close(self);

    /* Demangling. */
    char *d = icpp_demangle("_ZN3foo3barEi");
    CHECK(d && strcmp(d, "foo::bar(int)") == 0, "demangle gave %s", d ? d : "NULL");
    free(d);
    CHECK(icpp_demangle("main") == NULL, "demangled a C name");

    check_shared();
    check_fd0_kept();

    /* Bad input. */
    icpp_module *m = icpp_module_open("/nonexistent/xyz", &err);
    CHECK(!m && strstr(err.msg, "/nonexistent/xyz") && strstr(err.msg, "No such file"), "missing: %s", err.msg);
    m = icpp_module_open("/etc/passwd", &err);
    CHECK(!m && strstr(err.msg, "not an ELF file"), "non-ELF: %s", err.msg);

    /* Optional: pairs of (binary, stripped copy): every FDE-derived function of
     * the stripped copy starts where a symbol of the original starts. */
    for (int i = 1; i + 1 < argc; i += 2) {
        icpp_module *full = icpp_module_open(argv[i], &err);
        icpp_module *strip = icpp_module_open(argv[i + 1], &err);
        CHECK(full && strip, "open %s / %s: %s", argv[i], argv[i + 1], err.msg);
        if (!full || !strip)
            continue;
        CHECK(memcmp(icpp_module_build_id(full), icpp_module_build_id(strip), sizeof(icpp_build_id)) == 0,
              "strip changed the build-id");
        size_t n = icpp_module_nfuncs(strip), fde = 0, matched = 0;
        const icpp_func *fs = icpp_module_funcs(strip);
        for (size_t k = 0; k < n; k++) {
            if (fs[k].source != ICPP_FSRC_FDE)
                continue;
            fde++;
            const icpp_func *g = icpp_module_func_start(full, fs[k].addr);
            if (g && g->source != ICPP_FSRC_FDE)
                matched++;
            else
                fprintf(stderr, "stripped: FDE function 0x%" PRIx64 " has no symbol in %s\n", fs[k].addr, argv[i]);
        }
        printf("%s: %zu functions, stripped copy %zu (%zu from FDEs, %zu match symbols)\n", argv[i],
               icpp_module_nfuncs(full), n, fde, matched);
        CHECK(fde > 0, "stripped copy has no FDE-derived functions");
        /* No DWARF, no inlined frames (and no crash looking for them). */
        size_t inl = 0;
        for (size_t k = 0; k < n; k += 7) {
            const char *names[4];
            inl += icpp_module_inlines(strip, fs[k].addr + 1, names, 4) != 0;
        }
        CHECK(inl == 0, "inlined frames in a stripped file");
        /* The PLT's FDE has no symbol: allow it and nothing else. */
        CHECK(matched + 2 >= fde, "%zu of %zu FDE functions do not match symbols", fde - matched, fde);
        icpp_module_close(full);
        icpp_module_close(strip);
    }
    /* gcc's foo.cold parts run in foo's frame: their owner is foo. */
    const char *cold = getenv("ICPP_COLD_BINARY");
    if (cold) {
        icpp_module *cm = icpp_module_open(cold, &err);
        CHECK(cm != NULL, "open %s: %s", cold, err.msg);
        size_t ncold = 0, linked = 0;
        for (size_t k = 0; cm && k < icpp_module_nfuncs(cm); k++) {
            const icpp_func *f = &icpp_module_funcs(cm)[k];
            const char *dot = strstr(f->sym, ".cold");
            if (!dot)
                continue;
            ncold++;
            const icpp_func *o = icpp_module_func_start(cm, f->owner);
            if (o && o != f && !strncmp(o->sym, f->sym, (size_t)(dot - f->sym)) && o->sym[dot - f->sym] == 0)
                linked++;
        }
        printf("%s: %zu .cold parts, %zu linked to their function\n", cold, ncold, linked);
        CHECK(ncold > 0 && linked == ncold, "cold parts %zu, linked %zu", ncold, linked);
        icpp_module_close(cm);
    }
    /* Stripped, the same cold parts are found from the code (lib/coldpart.c):
     * the unstripped twin's symbols are the truth for every owner. */
    const char *pairs = getenv("ICPP_COLD_PAIRS");
    for (const char *p = pairs; p && *p;) {
        char a[4096], b[4096];
        size_t la = strcspn(p, "|"), lb = p[la] ? strcspn(p + la + 1, ";") : 0;
        CHECK(p[la] == '|' && la < sizeof a && lb < sizeof b, "ICPP_COLD_PAIRS: want A|B;C|D, not %s", pairs);
        if (p[la] != '|' || la >= sizeof a || lb >= sizeof b)
            break;
        memcpy(a, p, la);
        a[la] = 0;
        memcpy(b, p + la + 1, lb);
        b[lb] = 0;
        p += la + 1 + lb + (p[la + 1 + lb] == ';');
        check_cold_pair(a, b);
    }
    /* A stripped library (libc) against its separate debug file's symbols
     * (libc6-dbg): no function taken as a part. */
    const char *stripped = getenv("ICPP_FUNC_STRIPPED");
    if (stripped) {
        int fd = open(stripped, O_RDONLY);
        struct stat st;
        void *img = fd >= 0 && fstat(fd, &st) == 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)
                                                   : MAP_FAILED;
        icpp_debuginfo dbg = {.fd = -1};
        CHECK(img != MAP_FAILED && icpp_debuginfo_find(stripped, img, (size_t)st.st_size, &dbg) == 0 && dbg.path,
              "%s: no separate debug file", stripped);
        if (dbg.path)
            check_no_false_parts(dbg.path, stripped);
        icpp_debuginfo_release(&dbg);
        if (img != MAP_FAILED)
            munmap(img, (size_t)st.st_size);
        if (fd >= 0)
            close(fd);
    }
    /* C++: the inlined method's name is demangled, as the function table's names are. */
    const char *cxx = getenv("ICPP_INLINE_CXX");
    if (cxx) {
        icpp_module *xm = icpp_module_open(cxx, &err);
        CHECK(xm != NULL, "open %s: %s", cxx, err.msg);
        const icpp_func *u = NULL;
        for (size_t k = 0; xm && k < icpp_module_nfuncs(xm); k++)
            if (!strcmp(icpp_module_funcs(xm)[k].name, "icpp_test_cxx_user(unsigned int)"))
                u = &icpp_module_funcs(xm)[k];
        CHECK(u && u->size, "%s: no icpp_test_cxx_user(unsigned int)", cxx);
        size_t found = 0, other = 0;
        for (uint64_t a = u ? u->addr : 0; u && a < u->addr + u->size; a++) {
            const char *names[4];
            int n = icpp_module_inlines(xm, a, names, 4);
            if (n == 1 && !strcmp(names[0], "ns::Acc::add(unsigned int)"))
                found++;
            else if (n)
                other++, fprintf(stderr, "%s+0x%" PRIx64 ": inlined %s\n", cxx, a, names[0]);
        }
        CHECK(found > 0 && other == 0, "%s: ns::Acc::add(unsigned int) inlined at %zu addresses, others at %zu", cxx, found,
              other);
        icpp_module_close(xm);
    }
    return check_done("test_module");
}
