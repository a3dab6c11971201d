/* test_debuginfo.c -- separate debug files: libc's names from libc6-dbg against nm, a stripped corpus binary against its unstripped self by every lookup path, refusals. */
#include "check.h"
#include "debuginfo.h"
#include "module.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Run a shell command (file names are ours, in a private directory). */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = system(cmd);
    CHECK(r == 0, "command failed (%d): %s", r, cmd);
    return r;
}

static int is_fn_name(const char *s)
{
    return !strncmp(s, "fn_", 3);
}

/* ---- nm of a file: address -> function names (the independent reader) ---- */

typedef struct nsym {
    uint64_t addr;
    char     name[400];
} nsym;

static nsym *nm_funcs(const char *path, size_t *n)
{
    char cmd[4096];
    /* nm prints versioned names of .symtab as NAME@VERSION: the table keeps the name */
    snprintf(cmd, sizeof cmd, "nm --defined-only '%s'", path);
    FILE *p = popen(cmd, "r");
    nsym *v = NULL;
    size_t cap = 0;
    *n = 0;
    char line[512];
    while (p && fgets(line, sizeof line, p)) {
        uint64_t a;
        char t, name[400];
        if (sscanf(line, "%" SCNx64 " %c %399s", &a, &t, name) != 3 || !strchr("tTWwiu", t))
            continue;
        if (icpp_vec_reserve((void **)&v, &cap, *n + 1, sizeof *v, 4096) < 0)
            break;
        v[*n].addr = a;
        snprintf(v[*n].name, sizeof v[*n].name, "%s", name);
        (*n)++;
    }
    if (p)
        pclose(p);
    return v;
}

static int nm_has(const nsym *v, size_t n, uint64_t addr, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].addr == addr && (!strcmp(v[i].name, name) ||
                                  (!strncmp(v[i].name, name, strlen(name)) && v[i].name[strlen(name)] == '@')))
            return 1;
    return 0;
}

static int nm_at(const nsym *v, size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].addr == addr)
            return 1;
    return 0;
}

/* libc as Debian ships it (stripped: .dynsym only) with libc6-dbg's file
 * under /usr/lib/debug/.build-id: every function the stripped table knew
 * only from an FDE gets the name nm reads at that address from the debug
 * file; file:line agrees with addr2line on the debug file. */
static void test_libc(const char *libc)
{
    unsetenv("ICPP_DEBUG_DIRS");
    icpp_err err;
    icpp_module *m = icpp_module_open(libc, &err);
    CHECK(m, "%s: %s", libc, m ? "" : err.msg);
    if (!m)
        return;
    const icpp_debuginfo *d = icpp_module_debuginfo(m);
    CHECK(d->fd >= 0 && d->via == ICPP_DBG_BUILD_ID, "%s: no debug file by build-id (libc6-dbg installed?) %s", libc,
          d->refused);
    setenv("ICPP_DEBUG_DIRS", "/nonexistent", 1);
    icpp_module *bare = icpp_module_open(libc, &err);
    unsetenv("ICPP_DEBUG_DIRS");
    CHECK(bare && icpp_module_debuginfo(bare)->fd < 0, "lookup under /nonexistent found something");
    if (d->fd < 0 || !bare) {
        icpp_module_close(m);
        icpp_module_close(bare);
        return;
    }
    size_t nn;
    nsym *v = nm_funcs(d->path, &nn);
    CHECK(nn > 1000, "nm %s: %zu function symbols", d->path, nn);
    const icpp_func *f = icpp_module_funcs(m), *b = icpp_module_funcs(bare);
    size_t n = icpp_module_nfuncs(m), before = 0, after = 0, named = 0;
    CHECK(n == icpp_module_nfuncs(bare), "debug file changed the function table: %zu vs %zu", n,
          icpp_module_nfuncs(bare));
    for (size_t i = 0; i < n && n == icpp_module_nfuncs(bare); i++) {
        CHECK(f[i].addr == b[i].addr && f[i].size == b[i].size && f[i].owner == b[i].owner,
              "0x%" PRIx64 ": identity changed by the debug file", b[i].addr);
        before += is_fn_name(b[i].name);
        after += is_fn_name(f[i].name);
        if (is_fn_name(b[i].name) && !is_fn_name(f[i].name)) {
            named++;
            CHECK(nm_has(v, nn, f[i].addr, f[i].sym), "0x%" PRIx64 ": named %s, nm has no such symbol there",
                  f[i].addr, f[i].sym);
        }
        if (is_fn_name(f[i].name))
            CHECK(!nm_at(v, nn, f[i].addr), "0x%" PRIx64 ": nm names it, the table left %s", f[i].addr, f[i].name);
    }
    printf("libc: %zu functions, %zu fn_ names without the debug file, %zu with it (%zu named)\n", n, before, after,
           named);
    CHECK(before > 500 && named > 500, "too few stripped functions named (%zu of %zu)", named, before);

    /* file:line at 300 function starts against binutils' addr2line. */
    char cmd[8192];
    int k = snprintf(cmd, sizeof cmd, "addr2line -e '%s'", d->path);
    uint64_t addrs[300];
    int na = 0;
    for (size_t i = 0; i < n && na < 300; i += n / 300 + 1)
        if (f[i].source == ICPP_FSRC_FDE) {
            addrs[na++] = f[i].addr;
            k += snprintf(cmd + k, sizeof cmd - (size_t)k, " 0x%" PRIx64, f[i].addr);
        }
    FILE *p = popen(cmd, "r");
    int agree = 0, lines = 0;
    char line[4096];
    for (int i = 0; p && i < na && fgets(line, sizeof line, p); i++) {
        line[strcspn(line, "\n")] = 0;
        int ln = 0;
        const char *file = icpp_module_srcline(m, addrs[i], &ln);
        char mine[4096];
        snprintf(mine, sizeof mine, "%s:%d", file ? file : "??", file ? ln : 0);
        char *disc = strstr(line, " (discriminator");
        if (disc)
            *disc = 0;
        if (!strncmp(line, "??", 2) || line[0] == ':')
            continue;
        /* addr2line puts the unit's directory before a relative name; in
         * code from an included file it names the unit's own file at times
         * (the line is the same): lines must agree, files nearly always. */
        size_t ll = strlen(line), lm = strlen(mine);
        int same = !strcmp(line, mine) || (ll > lm && !strcmp(line + ll - lm, mine) && line[ll - lm - 1] == '/');
        const char *c1 = strrchr(line, ':'), *c2 = strrchr(mine, ':');
        lines++;
        agree += same;
        CHECK(c1 && c2 && !strcmp(c1, c2), "0x%" PRIx64 ": addr2line %s, module %s", addrs[i], line, mine);
    }
    if (p)
        pclose(p);
    CHECK(lines > 100 && agree >= lines * 8 / 10, "addr2line gave %d lines, %d with the same file", lines, agree);
    printf("libc: line agrees with addr2line at %d function starts, file:line at %d\n", lines, agree);
    free(v);
    icpp_module_close(m);
    icpp_module_close(bare);
}

/* The stripped module names, lines and inlined frames like the unstripped. */
static void same_as_full(icpp_module *full, icpp_module *s, const char *what)
{
    const icpp_func *f = icpp_module_funcs(s);
    size_t n = icpp_module_nfuncs(s), cmp = 0, lines = 0;
    for (size_t i = 0; i < n; i++) {
        const icpp_func *g = icpp_module_func_start(full, f[i].addr);
        if (!g)
            continue;
        cmp++;
        CHECK(!strcmp(g->name, f[i].name), "%s: 0x%" PRIx64 " named %s, unstripped %s", what, f[i].addr, f[i].name,
              g->name);
        for (uint64_t off = 0; off < (f[i].size ? f[i].size : 1); off += 7) {
            int l1 = 0, l2 = 0;
            const char *a = icpp_module_srcline(full, f[i].addr + off, &l1);
            const char *b = icpp_module_srcline(s, f[i].addr + off, &l2);
            CHECK((!a && !b) || (a && b && !strcmp(a, b) && l1 == l2), "%s: 0x%" PRIx64 ": %s:%d, unstripped %s:%d",
                  what, f[i].addr + off, b ? b : "-", l2, a ? a : "-", l1);
            lines += a != NULL;
            const char *i1[8], *i2[8];
            int n1 = icpp_module_inlines(full, f[i].addr + off, i1, 8);
            int n2 = icpp_module_inlines(s, f[i].addr + off, i2, 8);
            CHECK(n1 == n2, "%s: 0x%" PRIx64 ": %d inlined frames, unstripped %d", what, f[i].addr + off, n2, n1);
            for (int k = 0; k < n1 && k < n2; k++)
                CHECK(!strcmp(i1[k], i2[k]), "%s: inlined %s vs %s", what, i2[k], i1[k]);
        }
    }
    CHECK(cmp > 5 && lines > 20, "%s: compared %zu functions, %zu lines", what, cmp, lines);
}

static icpp_module *open_with(const char *path, const char *dirs)
{
    if (dirs)
        setenv("ICPP_DEBUG_DIRS", dirs, 1);
    else
        unsetenv("ICPP_DEBUG_DIRS");
    icpp_err err;
    icpp_module *m = icpp_module_open(path, &err);
    CHECK(m, "%s: %s", path, m ? "" : err.msg);
    return m;
}

static void expect(icpp_module *m, icpp_dbg_via via, const char *refusal, const char *what)
{
    if (!m)
        return;
    const icpp_debuginfo *d = icpp_module_debuginfo(m);
    CHECK(d->via == via && (via == ICPP_DBG_NONE) == (d->fd < 0), "%s: found via %d (want %d) %s", what, d->via, via,
          d->refused);
    if (refusal)
        CHECK(d->nrefused >= 1 && strstr(d->refused, refusal), "%s: refusal \"%s\", want one about %s", what,
              d->refused, refusal);
    else
        CHECK(d->nrefused == 0, "%s: refused %s", what, d->refused);
    if (via == ICPP_DBG_NONE) {         /* refused: the stripped names stay */
        size_t fn = 0;
        for (size_t i = 0; i < icpp_module_nfuncs(m); i++)
            fn += is_fn_name(icpp_module_funcs(m)[i].name);
        CHECK(fn > 0, "%s: a refused debug file named functions", what);
    }
}

/* A corpus binary split as distributions do: every lookup path, then a
 * wrong CRC and a wrong build-id refused. */
static void test_generated(const char *full_path, const char *other)
{
    char t[] = "/tmp/icpp-debuginfo-XXXXXX";
    if (!mkdtemp(t)) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    char bin[256], link[256], bid_dir[256], path[1024];
    snprintf(bin, sizeof bin, "%s/bin", t);
    snprintf(link, sizeof link, "%s/bin/prog", t);
    sh("mkdir -p %s/bin/.debug %s/root%s/bin %s/bid", t, t, t, t);
    sh("objcopy --only-keep-debug --compress-debug-sections '%s' %s/prog.debug", full_path, t);
    /* .gnu_debuglink holds the CRC of the file it is made from */
    sh("cd %s && objcopy --strip-all --add-gnu-debuglink=prog.debug '%s' %s", t, full_path, link);
    sh("objcopy --strip-all '%s' %s/nolink", full_path, t);
    icpp_build_id bid;
    icpp_err err;
    char hex[2 * ICPP_BUILD_ID_MAX + 1];
    CHECK(icpp_elf_build_id(full_path, &bid, &err) == 0 && bid.len, "%s: no build-id", full_path);
    icpp_build_id_hex(&bid, hex, sizeof hex);
    snprintf(bid_dir, sizeof bid_dir, "%s/bid/.build-id/%.2s", t, hex);
    sh("mkdir -p %s && cp %s/prog.debug %s/%s.debug", bid_dir, t, bid_dir, hex + 2);

    icpp_module *full = open_with(full_path, "/nonexistent");
    CHECK(full && icpp_module_debuginfo(full)->fd < 0, "the unstripped binary looked for a debug file");
    if (!full)
        return;

    /* no debug file anywhere: stripped names */
    icpp_module *m = open_with(link, "/nonexistent");
    expect(m, ICPP_DBG_NONE, NULL, "stripped, no debug file");
    icpp_module_close(m);

    /* 1. build-id directory (a binary without a debuglink) */
    snprintf(path, sizeof path, "%s/bid", t);
    m = open_with(link, path);
    expect(m, ICPP_DBG_BUILD_ID, NULL, "build-id");
    if (m)
        same_as_full(full, m, "build-id");
    icpp_module_close(m);
    snprintf(path, sizeof path, "%s/nolink", t);
    icpp_module *nl = open_with(path, NULL);
    expect(nl, ICPP_DBG_NONE, NULL, "no debuglink, default directory");
    icpp_module_close(nl);

    /* 2a. debuglink beside the binary */
    sh("cp %s/prog.debug %s/prog.debug", t, bin);
    m = open_with(link, "/nonexistent");
    expect(m, ICPP_DBG_DEBUGLINK, NULL, "debuglink beside");
    if (m)
        same_as_full(full, m, "debuglink beside");
    icpp_module_close(m);
    /* 2b. in .debug/ */
    sh("mv %s/prog.debug %s/.debug/prog.debug", bin, bin);
    m = open_with(link, "/nonexistent");
    expect(m, ICPP_DBG_DEBUGLINK, NULL, "debuglink .debug/");
    icpp_module_close(m);
    /* 2c. DIR + the binary's directory */
    sh("mv %s/.debug/prog.debug %s/root%s/bin/prog.debug", bin, t, t);
    snprintf(path, sizeof path, "%s/root", t);
    m = open_with(link, path);
    expect(m, ICPP_DBG_DEBUGLINK, NULL, "debuglink under a debug directory");
    if (m)
        same_as_full(full, m, "debuglink under a debug directory");
    icpp_module_close(m);

    /* wrong CRC: same build-id, one byte more */
    sh("mv %s/root%s/bin/prog.debug %s/prog.debug && echo >> %s/prog.debug", t, t, bin, bin);
    m = open_with(link, "/nonexistent");
    expect(m, ICPP_DBG_NONE, "CRC-32", "wrong CRC");
    icpp_module_close(m);

    /* wrong build-id: another program's debug file, under both paths */
    sh("objcopy --only-keep-debug '%s' %s/prog.debug && cp %s/prog.debug %s/%s.debug", other, bin, bin, bid_dir,
       hex + 2);
    snprintf(path, sizeof path, "%s/bid", t);
    m = open_with(link, path);
    expect(m, ICPP_DBG_NONE, "build-id", "wrong build-id");
    if (m)
        CHECK(icpp_module_debuginfo(m)->nrefused == 2, "wrong build-id: %u refusals, want 2 (build-id path, link)",
              icpp_module_debuginfo(m)->nrefused);
    icpp_module_close(m);

    /* a FIFO at the build-id path: refused, never opened blocking */
    sh("rm -f %s/%s.debug %s/prog.debug && mkfifo %s/%s.debug", bid_dir, hex + 2, bin, bid_dir, hex + 2);
    m = open_with(link, path);
    expect(m, ICPP_DBG_NONE, "not a regular file", "FIFO");
    icpp_module_close(m);

    icpp_module_close(full);
    unsetenv("ICPP_DEBUG_DIRS");
    sh("rm -rf %s", t);
}

/* The section parsers on hand-made bytes. */
static void test_parsers(void)
{
    const char *name;
    uint32_t crc;
    static const uint8_t ok[] = {'a', '.', 'd', 'e', 'b', 'u', 'g', 0, 0x78, 0x56, 0x34, 0x12};
    CHECK(icpp_debuginfo_parse_debuglink(ok, sizeof ok, &name, &crc) == 0 && !strcmp(name, "a.debug") &&
              crc == 0x12345678, "debuglink parse");
    static const uint8_t pad[] = {'a', 'b', 'c', 0, 1, 0, 0, 0};
    CHECK(icpp_debuginfo_parse_debuglink(pad, sizeof pad, &name, &crc) == 0 && crc == 1, "debuglink, no padding");
    CHECK(icpp_debuginfo_parse_debuglink(ok, 10, &name, &crc) < 0, "short CRC accepted");
    static const uint8_t slash[] = {'.', '.', '/', 'x', 0, 0, 0, 0, 1, 2, 3, 4};
    CHECK(icpp_debuginfo_parse_debuglink(slash, sizeof slash, &name, &crc) < 0, "a path in a debuglink accepted");
    static const uint8_t dots[] = {'.', '.', 0, 0, 1, 2, 3, 4};
    CHECK(icpp_debuginfo_parse_debuglink(dots, sizeof dots, &name, &crc) < 0, "\"..\" accepted");
    static const uint8_t nonul[] = {'a', 'b', 'c', 'd'};
    CHECK(icpp_debuginfo_parse_debuglink(nonul, sizeof nonul, &name, &crc) < 0, "unterminated name accepted");
    icpp_build_id b;
    static const uint8_t alt[] = {'/', 'd', 'w', 'z', 0, 0xab, 0xcd};
    CHECK(icpp_debuginfo_parse_altlink(alt, sizeof alt, &name, &b) == 0 && !strcmp(name, "/dwz") && b.len == 2 &&
              b.bytes[1] == 0xcd, "altlink parse");
    CHECK(icpp_debuginfo_parse_altlink(alt, 5, &name, &b) < 0, "altlink without a build-id accepted");
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_debuginfo LIBC UNSTRIPPED-BINARY OTHER-BINARY\n");
        return 2;
    }
    unsetenv("DEBUGINFOD_URLS");
    test_parsers();
    test_libc(argv[1]);
    test_generated(argv[2], argv[3]);
    return check_done("debuginfo");
}
