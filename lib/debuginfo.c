/* debuginfo.c -- separate debug files: found where gdb and elfutils look (build-id directory, .gnu_debuglink with its CRC, debuginfod), and refused unless they belong to the binary. */
#include "debuginfo.h"

#include "codec.h"
#include "fsafe.h"
#include "functab.h"
#include "vec.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_DEBUG_DIRS "/usr/lib/debug"

int icpp_debuginfo_parse_debuglink(const uint8_t *p, size_t n, const char **name, uint32_t *crc)
{
    const uint8_t *nul = n ? memchr(p, 0, n) : NULL;
    if (!nul || nul == p)
        return -ICPP_EFORMAT;
    size_t crc_at = ((size_t)(nul - p) + 1 + 3) & ~(size_t)3;
    if (crc_at > n || n - crc_at < 4)
        return -ICPP_EFORMAT;
    const char *s = (const char *)p;
    if (strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
        return -ICPP_EFORMAT;
    *name = s;
    *crc = (uint32_t)p[crc_at] | (uint32_t)p[crc_at + 1] << 8 | (uint32_t)p[crc_at + 2] << 16 |
           (uint32_t)p[crc_at + 3] << 24;
    return 0;
}

int icpp_debuginfo_parse_altlink(const uint8_t *p, size_t n, const char **name, icpp_build_id *bid)
{
    const uint8_t *nul = n ? memchr(p, 0, n) : NULL;
    if (!nul || nul == p)
        return -ICPP_EFORMAT;
    size_t blen = n - (size_t)(nul - p) - 1;
    if (blen == 0 || blen > ICPP_BUILD_ID_MAX)
        return -ICPP_EFORMAT;
    *name = (const char *)p;
    bid->len = (uint8_t)blen;
    memcpy(bid->bytes, nul + 1, blen);
    return 0;
}

/* ---- one lookup ---- */

typedef struct look {
    icpp_debuginfo *out;
    const icpp_build_id *want;  /* the build-id a candidate must carry (len 0: none required) */
    dev_t bin_dev;              /* the binary itself, never its own debug file */
    ino_t bin_ino;
} look;

__attribute__((format(printf, 3, 4)))
static void refuse(look *lk, const char *cand, const char *fmt, ...)
{
    icpp_debuginfo *d = lk->out;
    if (d->nrefused++ == 0) {
        char why[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof why, fmt, ap);
        va_end(ap);
        snprintf(d->refused, sizeof d->refused, "%s: %s", cand, why);
    }
}

/* Try one candidate path: 1 taken (out filled), 0 not there or refused,
 * -ENOMEM.  check_crc: the file must have this CRC-32 (from a debuglink). */
static int try_file(look *lk, const char *cand, icpp_dbg_via via, int check_crc, uint32_t crc)
{
    struct stat st;
    icpp_err err;
    int fd = icpp_fs_open_input(cand, &st, &err);
    if (fd == -ENOENT || fd == -ENOTDIR)
        return 0;               /* nothing there: the usual case, not a refusal */
    if (fd < 0) {
        refuse(lk, cand, "%s", strchr(err.msg, ':') ? strchr(err.msg, ':') + 2 : err.msg);
        return 0;
    }
    if (st.st_dev == lk->bin_dev && st.st_ino == lk->bin_ino) {
        close(fd);              /* the binary itself (a debuglink naming its own file) */
        return 0;
    }
    if (st.st_size <= 0) {
        refuse(lk, cand, "empty file");
        close(fd);
        return 0;
    }
    size_t len = (size_t)st.st_size;
    void *img = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (img == MAP_FAILED) {
        refuse(lk, cand, "cannot map it: %s", strerror(errno));
        close(fd);
        return 0;
    }
    icpp_build_id got;
    const uint8_t *sec;
    size_t n;
    int ok = 0;
    char hw[2 * ICPP_BUILD_ID_MAX + 1], hg[2 * ICPP_BUILD_ID_MAX + 1];
    if (icpp_functab_build_id(img, len, &got) < 0)
        refuse(lk, cand, "not an x86-64 ELF file");
    else if (lk->want->len && !icpp_build_id_eq(&got, lk->want))     /* none wanted: the CRC checks it */
        refuse(lk, cand, "build-id %s is not the binary's %s", got.len ? icpp_hex(got.bytes, got.len, hg, sizeof hg) : "(none)",
               icpp_hex(lk->want->bytes, lk->want->len, hw, sizeof hw));
    else if (check_crc && icpp_crc32(0, img, len) != crc)
        refuse(lk, cand, "CRC-32 %08x is not the %08x its .gnu_debuglink names", icpp_crc32(0, img, len), crc);
    else if (icpp_functab_section(img, len, ".symtab", &sec, &n) < 0 &&
             icpp_functab_section(img, len, ".debug_info", &sec, &n) < 0)
        refuse(lk, cand, "neither a symbol table nor DWARF in it");
    else
        ok = 1;
    munmap(img, len);
    if (!ok) {
        close(fd);
        return 0;
    }
    icpp_debuginfo *d = lk->out;
    if (!(d->path = strdup(cand))) {
        close(fd);
        return -ENOMEM;
    }
    d->fd = fd;
    d->via = via;
    return 1;
}

/* Call f(lk, dir, arg) for each debug directory; stop at the first nonzero. */
static int each_dir(look *lk, int (*f)(look *, const char *, const void *), const void *arg)
{
    const char *dirs = getenv("ICPP_DEBUG_DIRS");
    if (!dirs || !*dirs)
        dirs = DEFAULT_DEBUG_DIRS;
    for (const char *p = dirs; *p;) {
        size_t k = strcspn(p, ":");
        if (k > 0 && k < 4096) {
            char dir[4096];
            memcpy(dir, p, k);
            dir[k] = 0;
            int r = f(lk, dir, arg);
            if (r)
                return r;
        }
        p += k;
        if (*p == ':')
            p++;
    }
    return 0;
}

static int by_build_id(look *lk, const char *dir, const void *arg)
{
    const icpp_build_id *b = arg;
    char hex[2 * ICPP_BUILD_ID_MAX + 1], cand[4096 + 2 * ICPP_BUILD_ID_MAX + 32];
    icpp_hex(b->bytes, b->len, hex, sizeof hex);
    snprintf(cand, sizeof cand, "%s/.build-id/%.2s/%s.debug", dir, hex, hex + 2);
    return try_file(lk, cand, ICPP_DBG_BUILD_ID, 0, 0);
}

typedef struct linkarg {
    const char *bindir;     /* the binary's directory, absolute */
    const char *name;
    uint32_t    crc;
} linkarg;

static int by_link_in_dir(look *lk, const char *dir, const void *arg)
{
    const linkarg *a = arg;
    char cand[3 * 4096];
    snprintf(cand, sizeof cand, "%s%s/%s", dir, a->bindir, a->name);
    return try_file(lk, cand, ICPP_DBG_DEBUGLINK, 1, a->crc);
}

/* ---- debuginfod, through elfutils' client library when it is installed ----
 * With limits of ICPP's own (docs/debuginfo.md): a time budget for all the
 * queries of a run, a size limit per answer, queries only for the build-ids
 * a tool says it needs (icpp_debuginfo_want), all enforced from the
 * library's progress callback, which aborts a transfer when it returns
 * nonzero. */

typedef struct debuginfod_client debuginfod_client;
typedef int (*dfd_progressfn)(debuginfod_client *, long, long);
typedef struct dfd_api {
    debuginfod_client *(*begin)(void);
    void (*end)(debuginfod_client *);
    int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
    void (*set_progressfn)(debuginfod_client *, dfd_progressfn);
} dfd_api;

#define DFD_BUDGET_DEFAULT  30.0
#define DFD_MAXSIZE_DEFAULT ((uint64_t)1 << 30)

static struct {
    icpp_dfd_config cfg;
    icpp_dfd_stats  st;
    icpp_build_id  *want;       /* the build-ids queries may be made for (cfg.wanted_only) */
    size_t          nwant, capwant;
    double          t0;         /* this query's start (CLOCK_MONOTONIC seconds) */
    const char     *binary;     /* this query's binary, for the progress callback */
    int             why;        /* why the progress callback aborted: 1 time, 2 size */
} dfd;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double dfd_budget(void) { return dfd.cfg.budget > 0 ? dfd.cfg.budget : DFD_BUDGET_DEFAULT; }

static uint64_t dfd_maxsize(void)
{
    if (dfd.cfg.maxsize)
        return dfd.cfg.maxsize;
    const char *e = getenv("DEBUGINFOD_MAXSIZE");     /* libdebuginfod's own setting, when given */
    char *end;
    unsigned long long v = e && *e ? strtoull(e, &end, 10) : 0;
    return v && !*end ? (uint64_t)v : DFD_MAXSIZE_DEFAULT;
}

void icpp_debuginfo_configure(const icpp_dfd_config *c) { dfd.cfg = *c; }
void icpp_debuginfo_stats(icpp_dfd_stats *st) { *st = dfd.st; }

int icpp_debuginfo_want(const icpp_build_id *b)
{
    if (!b->len)
        return 0;
    for (size_t i = 0; i < dfd.nwant; i++)
        if (icpp_build_id_eq(&dfd.want[i], b))
            return 0;
    if (icpp_vec_reserve((void **)&dfd.want, &dfd.capwant, dfd.nwant + 1, sizeof *dfd.want, 16) < 0)
        return -ENOMEM;
    dfd.want[dfd.nwant++] = *b;
    return 0;
}

int icpp_debuginfo_remote_possible(const icpp_build_id *b)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    return b->len && !dfd.cfg.off && urls && *urls;
}

static int wanted(const icpp_build_id *b)
{
    if (!dfd.cfg.wanted_only)
        return 1;
    for (size_t i = 0; i < dfd.nwant; i++)
        if (icpp_build_id_eq(&dfd.want[i], b))
            return 1;
    return 0;
}

int icpp_debuginfo_remote_due(const icpp_build_id *b) { return icpp_debuginfo_remote_possible(b) && wanted(b); }

static int dfd_progress(debuginfod_client *c, long done, long total)
{
    (void)c;
    double el = now_s() - dfd.t0;
    uint64_t max = dfd_maxsize();
    if (dfd.st.seconds + el > dfd_budget())
        return dfd.why = 1;
    if ((total > 0 && (uint64_t)total > max) || (done > 0 && (uint64_t)done > max))
        return dfd.why = 2;
    if (dfd.cfg.progress)
        dfd.cfg.progress(dfd.cfg.arg, dfd.binary, done, total);
    return 0;
}

static const dfd_api *dfd_load(void)
{
    static int tried;
    static dfd_api api;
    if (!tried) {
        tried = 1;
        void *h = dlopen("libdebuginfod.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (h) {
            *(void **)&api.begin = dlsym(h, "debuginfod_begin");
            *(void **)&api.end = dlsym(h, "debuginfod_end");
            *(void **)&api.find_debuginfo = dlsym(h, "debuginfod_find_debuginfo");
            *(void **)&api.set_progressfn = dlsym(h, "debuginfod_set_progressfn");
            /* without the progress callback the limits cannot hold: not used */
            if (!api.begin || !api.end || !api.find_debuginfo || !api.set_progressfn)
                api.begin = NULL;
        }
    }
    return api.begin ? &api : NULL;
}

static int by_debuginfod(look *lk, const char *binary, const icpp_build_id *b)
{
    if (!icpp_debuginfo_remote_possible(b) || !wanted(b))
        return 0;
    if (dfd.st.seconds >= dfd_budget()) {
        dfd.st.skipped++;       /* the run's budget is spent */
        return 0;
    }
    const dfd_api *api = dfd_load();
    debuginfod_client *c = api ? api->begin() : NULL;
    if (!c)
        return 0;
    api->set_progressfn(c, dfd_progress);
    char *path = NULL;
    dfd.t0 = now_s();
    dfd.binary = binary;
    dfd.why = 0;
    dfd.st.queries++;
    int fd = api->find_debuginfo(c, b->bytes, b->len, &path);
    api->end(c);
    dfd.st.seconds += now_s() - dfd.t0;
    if (dfd.why == 1)
        dfd.st.timed_out++;
    else if (dfd.why == 2)
        dfd.st.too_big++;
    int r = 0;
    if (fd >= 0) {
        close(fd);              /* opened again under our input rules */
        if (path)
            r = try_file(lk, path, ICPP_DBG_DEBUGINFOD, 0, 0);
        dfd.st.found += r > 0;
    }
    free(path);
    return r;
}

/* ---- the lookups ---- */

static int find_local(const char *path, const uint8_t *img, size_t len, const icpp_build_id *bidp,
                      icpp_debuginfo *out);

static void init_out(icpp_debuginfo *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
}

int icpp_debuginfo_find(const char *path, const uint8_t *img, size_t len, icpp_debuginfo *out)
{
    init_out(out);
    icpp_build_id bid;
    if (icpp_functab_build_id(img, len, &bid) < 0)
        return 0;
    icpp_err err;
    if (icpp_fs_named_begin(&err) < 0) {    /* files named inside inputs: their owner's rights (lib/fsafe.h) */
        snprintf(out->refused, sizeof out->refused, "%s", err.msg);
        out->nrefused = 1;
        return 0;
    }
    int r = find_local(path, img, len, &bid, out);
    icpp_fs_named_end();
    return r;
}

int icpp_debuginfo_find_remote(const char *path, const uint8_t *img, size_t len, icpp_debuginfo *out)
{
    icpp_build_id bid;
    if (out->fd >= 0 || icpp_functab_build_id(img, len, &bid) < 0)
        return 0;
    look lk = {out, &bid, 0, 0};
    int r = by_debuginfod(&lk, path, &bid);
    return r < 0 ? r : 0;
}

static int find_local(const char *path, const uint8_t *img, size_t len, const icpp_build_id *bidp, icpp_debuginfo *out)
{
    icpp_build_id bid = *bidp;
    look lk = {out, &bid, 0, 0};
    struct stat st;
    if (stat(path, &st) == 0) {
        lk.bin_dev = st.st_dev;
        lk.bin_ino = st.st_ino;
    }
    int r = 0;
    if (bid.len)
        r = each_dir(&lk, by_build_id, &bid);
    const uint8_t *sec;
    size_t n;
    const char *name;
    uint32_t crc;
    if (!r && icpp_functab_section(img, len, ".gnu_debuglink", &sec, &n) == 0 &&
        icpp_debuginfo_parse_debuglink(sec, n, &name, &crc) == 0) {
        char *real = realpath(path, NULL);
        if (!real)
            return errno == ENOMEM ? -ENOMEM : 0;
        char *sl = strrchr(real, '/');
        *sl = 0;                /* realpath is absolute: "/x" -> "" is the root */
        char cand[3 * 4096];
        snprintf(cand, sizeof cand, "%s/%s", real, name);
        r = try_file(&lk, cand, ICPP_DBG_DEBUGLINK, 1, crc);
        if (!r) {
            snprintf(cand, sizeof cand, "%s/.debug/%s", real, name);
            r = try_file(&lk, cand, ICPP_DBG_DEBUGLINK, 1, crc);
        }
        if (!r)
            r = each_dir(&lk, by_link_in_dir, &(linkarg){real, name, crc});
        free(real);
    }
    return r < 0 ? r : 0;
}

int icpp_debuginfo_find_alt(const char *dpath, const uint8_t *img, size_t len, icpp_debuginfo *out)
{
    init_out(out);
    const uint8_t *sec;
    size_t n;
    const char *name;
    icpp_build_id bid;
    if (icpp_functab_section(img, len, ".gnu_debugaltlink", &sec, &n) < 0 ||
        icpp_debuginfo_parse_altlink(sec, n, &name, &bid) < 0)
        return 0;
    look lk = {out, &bid, 0, 0};
    icpp_err err;
    if (icpp_fs_named_begin(&err) < 0)
        return 0;
    int r = each_dir(&lk, by_build_id, &bid);
    if (!r) {
        char cand[2 * 4096];
        const char *sl = strrchr(dpath, '/');
        if (name[0] == '/' || !sl)
            snprintf(cand, sizeof cand, "%s", name);
        else
            snprintf(cand, sizeof cand, "%.*s/%s", (int)(sl - dpath), dpath, name);
        r = try_file(&lk, cand, ICPP_DBG_DEBUGLINK, 0, 0);
    }
    icpp_fs_named_end();
    return r < 0 ? r : 0;
}

void icpp_debuginfo_release(icpp_debuginfo *d)
{
    if (d->fd >= 0)
        close(d->fd);
    free(d->path);
    d->fd = -1;
    d->path = NULL;
}
