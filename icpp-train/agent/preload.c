/* preload.c -- icpp-train's in-process front end: pick modules, patch them, write path-map parts at exit, fork, exec, dlopen and fatal signals. */
#include "agent.h"
#include "internal.h"
#include "live.h"
#include "sys.h"

#include <Zydis/Zydis.h>

#include "codec.h"
#include "functab.h"
#include "lde.h"
#include "pathmap.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Environment, set by icpp-train (docs/train.md):
 *   ICPP_TRAIN_DIR       where to write part files; without it the agent stays idle
 *   ICPP_TRAIN_MODULES   all (default) | main | comma list of names (basename or path substring)
 *   ICPP_TRAIN_MAX_DEPTH shadow-stack frames per thread
 *   ICPP_TRAIN_MAX_MB    CCT memory per thread, MiB
 *   ICPP_TRAIN_NO_INT3   never use the int3 fallback
 *   ICPP_TRAIN_VERBOSE   list the functions that did not get the jmp (stderr)
 *
 * Each process writes, when it ends (exit, _exit, exec, fatal signal), one
 * part file per thread that ran in it: DIR/part.PID.TID.NSEC.icppmap, a
 * complete path map (docs/pathmap-format.md) of that thread's tree.  Writing
 * allocates nothing (mmap-backed buffers) so it also works from a signal
 * handler.  icpp-train merges the parts.  Meanwhile every thread's tree
 * lives in DIR/live.PID.TID.NS and the function table in DIR/syms.PID.NS
 * (live.h), from which icpp-train recovers a process that was killed
 * before it could write its parts. */

#define API __attribute__((visibility("default")))

typedef struct module {
    char           *path;
    uint64_t        bias;           /* runtime = bias + link-time address */
    uint64_t        lo, hi;         /* runtime range of its PT_LOAD segments */
    icpp_build_id   build_id;
    uint8_t         kind;           /* 1 exec, 2 PIE, 3 DSO (icpp_module_kind) */
    int             patched;
} module;

typedef struct func {
    uint32_t    module;
    uint64_t    addr;               /* link-time */
    const char *name;
} func;

static module  *mods;
static size_t   nmods, capmods;
static func    *funcs;
static size_t   nfuncs, capfuncs;
static uint32_t *func_mark;         /* dump scratch: part index + 1 (mmap'd) */
static size_t   func_mark_cap;
static char     dir[4096];
static char     modules_sel[4096] = "all";
static int      active;             /* agent initialised and patching */
static volatile int owner_pid;      /* process the trees belong to */
static volatile int dumped_pid;     /* process that already wrote its parts */
static int      no_int3, verbose;
static char     cmdline[2048];
static icpp_agent_patch_stats totals;
static void    *self_base;          /* our own load address */
static void    *zydis_base;         /* Zydis, loaded for us (relocation) */
static char     syms_path[4200];    /* this image's function table (live.h) */
static size_t   syms_len;           /* bytes of complete records in it */

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
    char b[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!write(2, b, (size_t)(n < (int)sizeof b ? n : (int)sizeof b - 1));
}

/* ---- the agent's own file writes ----
 * They must not change what the program experiences: under the program's
 * RLIMIT_FSIZE a write past the limit raises SIGXFSZ, which kills it (exit
 * status 153 instead of its own), and under RLIMIT_NOFILE an open fails.
 * Around them the soft limits are raised to the hard ones (when they are
 * lower) and restored, and SIGXFSZ is blocked in this thread (the kernel
 * sends it to the writing thread): a write past a limit still in force
 * returns EFBIG and the signal it left pending is taken back before the
 * mask is restored.  Async-signal-safe (raw syscalls). */

typedef struct io_guard {
    sigset_t mask;              /* the thread's mask before */
    int      xfsz_pending;      /* SIGXFSZ was pending before (the program's) */
    int      raised[2];         /* RLIMIT_FSIZE, RLIMIT_NOFILE raised: restore */
    struct rlimit saved[2];
    int      efbig;             /* a write of ours ran into RLIMIT_FSIZE */
} io_guard;

static const int guard_limits[2] = {RLIMIT_FSIZE, RLIMIT_NOFILE};

static void io_begin(io_guard *g)
{
    sigset_t x, pend;
    sigemptyset(&x);
    sigaddset(&x, SIGXFSZ);
    memset(g, 0, sizeof *g);
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &x, &g->mask, 8);
    g->xfsz_pending = syscall(SYS_rt_sigpending, &pend, 8) == 0 && sigismember(&pend, SIGXFSZ);
    for (int i = 0; i < 2; i++) {
        struct rlimit up;
        if (syscall(SYS_prlimit64, 0, guard_limits[i], NULL, &g->saved[i]) == 0 &&
            g->saved[i].rlim_cur < g->saved[i].rlim_max) {
            up = g->saved[i];
            up.rlim_cur = up.rlim_max;
            g->raised[i] = syscall(SYS_prlimit64, 0, guard_limits[i], &up, NULL) == 0;
        }
    }
}

static void io_end(io_guard *g)
{
    for (int i = 0; i < 2; i++)
        if (g->raised[i])
            syscall(SYS_prlimit64, 0, guard_limits[i], &g->saved[i], NULL);
    sigset_t x, pend;
    sigemptyset(&x);
    sigaddset(&x, SIGXFSZ);
    if (!g->xfsz_pending && syscall(SYS_rt_sigpending, &pend, 8) == 0 && sigismember(&pend, SIGXFSZ)) {
        struct timespec zero = {0, 0};
        g->efbig = syscall(SYS_rt_sigtimedwait, &x, NULL, &zero, 8) == SIGXFSZ;
    }
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &g->mask, NULL, 8);
}

/* ---- the function table for recovery (live.h) ---- */


static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* DIR/syms.PID.NS, created with its magic, or holding the first `copy`
 * bytes of `from` (a fork child's copy of its parent's table); live files
 * made from now on name it.  Async-signal-safe.  On failure the table is
 * off (syms_path empty): parts are still written, recovery is not possible. */
static void syms_create(const char *from, size_t copy)
{
    uint64_t ns = mono_ns();
    char path[sizeof syms_path], *p = path;
    size_t dl = strlen(dir);            /* < sizeof dir - 64 (agent_start) */
    memcpy(p, dir, dl);
    memcpy(p + dl, "/syms.", 6);
    p = icpp_agent_utoa(p + dl + 6, (uint64_t)syscall(SYS_getpid));   /* no snprintf: a fork child handler */
    *p++ = '.';
    p = icpp_agent_utoa(p, ns);
    size_t n = (size_t)(p - path);
    syms_path[0] = 0;
    io_guard g;
    io_begin(&g);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        io_end(&g);
        return;
    }
    int ok;
    if (from) {
        int in = open(from, O_RDONLY | O_CLOEXEC);
        off_t off = 0;
        while (in >= 0 && (size_t)off < copy && sendfile(fd, in, &off, copy - (size_t)off) > 0)
            ;
        ok = in >= 0 && (size_t)off == copy;
        if (in >= 0)
            close(in);
    } else {
        ok = write(fd, ICPP_SYMS_MAGIC, 8) == 8;
        copy = 8;
    }
    close(fd);
    if (!ok)
        unlink(path);
    io_end(&g);
    if (!ok)
        return;
    memcpy(syms_path, path, n + 1);
    syms_len = copy;
    icpp_agent_set_live_tag(ns);
}

typedef struct rec {
    uint8_t *p;
    size_t   len, cap;
} rec;

static void rec_put(rec *r, const void *v, size_t n)
{
    if (r->len + n > r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 4096;
        while (nc < r->len + n)
            nc *= 2;
        uint8_t *q = realloc(r->p, nc);
        if (!q) {
            r->cap = (size_t)-1;    /* failed: never written */
            return;
        }
        r->p = q;
        r->cap = nc;
    }
    if (r->cap != (size_t)-1) {
        memcpy(r->p + r->len, v, n);
        r->len += n;
    }
}
#define REC_PUT(r, x) rec_put((r), &(x), sizeof(x))

static rec rec_begin(uint8_t type)
{
    rec r = {0, 0, 0};
    uint32_t size = 0;
    REC_PUT(&r, size);
    REC_PUT(&r, type);
    return r;
}

/* Append the record in one write (a kill cuts at most this one short). */
static void rec_end(rec *r)
{
    if (syms_path[0] && r->p && r->cap != (size_t)-1 && r->len - 5 <= UINT32_MAX) {
        uint32_t size = (uint32_t)(r->len - 5);
        memcpy(r->p, &size, 4);
        io_guard g;
        io_begin(&g);
        int fd = open(syms_path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, r->p, r->len) == (ssize_t)r->len)
                syms_len += r->len;
            else
                syms_path[0] = 0;   /* a hole would shift every later record */
            close(fd);
        }
        io_end(&g);
    }
    free(r->p);
}

static void syms_cmdline(const char *cmd)
{
    rec r = rec_begin('C');
    rec_put(&r, cmd, strlen(cmd));
    rec_end(&r);
}

static void syms_totals(void)
{
    icpp_agent_patch_stats t;
    icpp_agent_patch_totals(&t);
    uint32_t v[4] = {t.how[ICPP_AGENT_HOW_JMP], t.jmp_short, t.how[ICPP_AGENT_HOW_INT3], t.how[ICPP_AGENT_HOW_NONE]};
    rec r = rec_begin('T');
    rec_put(&r, v, sizeof v);
    rec_end(&r);
}

/* ---- module selection and patching ---- */

static int selected(const char *path, int is_exe)
{
    if (!strcmp(modules_sel, "all"))
        return 1;
    if (!strcmp(modules_sel, "main"))
        return is_exe;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", modules_sel);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "main") && is_exe)
            return 1;
        if (!strcmp(t, base) || strstr(path, t) || !strncmp(base, t, strlen(t)))
            return 1;
    }
    return 0;
}

static int add_module(const char *path, uint64_t bias, uint64_t lo, uint64_t hi, uint8_t kind, const uint8_t *img,
                      size_t len)
{
    if (nmods == capmods) {
        size_t nc = capmods ? 2 * capmods : 32;
        module *n = realloc(mods, nc * sizeof *n);
        if (!n)
            return -1;
        mods = n;
        capmods = nc;
    }
    module *m = &mods[nmods];
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    m->bias = bias;
    m->lo = lo;
    m->hi = hi;
    m->kind = kind;
    icpp_functab_build_id(img, len, &m->build_id);
    return m->path ? (int)nmods++ : -1;
}

/* Ranges of every hooked function, republished after each module. */
static icpp_agent_frange *ranges;
static size_t nranges;

static int frange_cmp(const void *a, const void *b)
{
    const icpp_agent_frange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* The hooked functions af[0..k) (sorted by address) and the cold parts
 * of the module, e[0..ne) with owner != addr (bias added), join the
 * ranges.  A cold part -- gcc's foo.cold, the stub of a call site
 * icpp-rewrite wrapped -- runs in its owner's frame, so a call from it is
 * the owner's call: the recorder's caller check (recorder.c) then drops the
 * returned frames above the owner's whatever their heights (a wrapped call
 * enters below a sibling that returned, at the height where a plain call
 * would have popped it). */
static void add_ranges(const icpp_agent_func *af, size_t k, const icpp_ftab_entry *e, size_t ne, uint64_t bias)
{
    size_t nc = 0;
    for (size_t i = 0; i < ne; i++)
        nc += e[i].owner != e[i].addr && !e[i].signal && !e[i].plt && e[i].size;
    icpp_agent_frange *v = malloc((nranges + k + nc + 1) * sizeof *v);
    if (!v)
        return;
    memcpy(v, ranges, nranges * sizeof *v);
    size_t n = nranges;
    for (size_t i = 0; i < k; i++)
        if (af[i].how != ICPP_AGENT_HOW_NONE)
            v[n++] = (icpp_agent_frange){af[i].addr, af[i].addr + (af[i].size ? af[i].size : 1), af[i].index, 0};
    for (size_t i = 0; i < ne; i++) {
        if (e[i].owner == e[i].addr || e[i].signal || e[i].plt || !e[i].size)
            continue;
        size_t lo = 0, hi = k;      /* the owner among the hooked functions */
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (af[mid].addr < bias + e[i].owner)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < k && af[lo].addr == bias + e[i].owner && af[lo].how != ICPP_AGENT_HOW_NONE)
            v[n++] = (icpp_agent_frange){bias + e[i].addr, bias + e[i].addr + e[i].size, af[lo].index, 0};
    }
    qsort(v, n, sizeof *v, frange_cmp);
    /* Unsized functions run up to the next one; clip overlaps. */
    for (size_t i = 0; i + 1 < n; i++)
        if (v[i].hi > v[i + 1].lo || (v[i].hi == v[i].lo + 1 && v[i + 1].lo > v[i].hi))
            v[i].hi = v[i + 1].lo;
    /* The old array stays allocated: a thread may still be reading it. */
    icpp_agent_set_ranges(v, n);
    ranges = v;
    nranges = n;
}

/* Read, list and patch one loaded object. */
static void patch_object(const char *path, const struct dl_phdr_info *info, int is_exe, int live)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0) {
        if (fd >= 0)
            close(fd);
        msg("icpp-train: agent: cannot read %s: not trained\n", path);
        return;
    }
    uint8_t *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED)
        return;
    uint64_t lo = UINT64_MAX, hi = 0;
    int interp = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_INTERP)
            interp = 1;
        if (ph->p_type == PT_LOAD) {
            if (info->dlpi_addr + ph->p_vaddr < lo)
                lo = info->dlpi_addr + ph->p_vaddr;
            if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
                hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
        }
    }
    uint8_t kind = info->dlpi_addr == 0 ? 1 : (is_exe || interp) ? 2 : 3;
    int mi = add_module(path, info->dlpi_addr, lo, hi, kind, img, (size_t)st.st_size);
    icpp_ftab_entry *e = NULL;
    size_t n = 0;
    icpp_err err;
    if (mi < 0 || icpp_functab_build_with(img, (size_t)st.st_size, icpp_lde_coldpart, &e, &n, &err) < 0) {
        munmap(img, (size_t)st.st_size);
        msg("icpp-train: agent: %s: %s: not trained\n", path, mi < 0 ? "out of memory" : err.msg);
        return;
    }
    icpp_agent_func *af = calloc(n + 1, sizeof *af);
    if (!af || nfuncs + n > capfuncs) {
        size_t nc = capfuncs ? capfuncs : 4096;
        while (nc < nfuncs + n)
            nc *= 2;
        func *nf = realloc(funcs, nc * sizeof *nf);
        if (!af || !nf) {
            free(af);
            free(e);
            munmap(img, (size_t)st.st_size);
            return;
        }
        funcs = nf;
        capfuncs = nc;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        /* Not functions to hook: cold parts (never entered by a call),
         * PLT stubs (a sample there is its caller's) and signal-return
         * trampolines (the kernel returns into the trampoline's bytes
         * 1..4: a jmp there crashed every handler). */
        if (e[i].signal && e[i].source == ICPP_FSRC_FDE)
            icpp_agent_add_sigreturn(info->dlpi_addr + e[i].addr, info->dlpi_addr + e[i].addr + e[i].size);
        if (e[i].owner != e[i].addr || e[i].signal || e[i].plt)
            continue;
        char fallback[40];
        if (!e[i].sym)
            snprintf(fallback, sizeof fallback, "fn_%llx", (unsigned long long)e[i].addr);
        funcs[nfuncs + k] = (func){(uint32_t)mi, e[i].addr, strdup(e[i].sym ? e[i].sym : fallback)};
        af[k] = (icpp_agent_func){info->dlpi_addr + e[i].addr, e[i].size, (uint32_t)(nfuncs + k), 0, 0, 0, 0};
        k++;
    }
    /* The table first: an entry recorded after the patch names these. */
    {
        const module *m = &mods[mi];
        uint32_t idx = (uint32_t)mi, first = (uint32_t)nfuncs, nk = (uint32_t)k;
        rec r = rec_begin('M');
        REC_PUT(&r, idx);
        REC_PUT(&r, m->kind);
        REC_PUT(&r, m->bias);
        REC_PUT(&r, m->lo);
        REC_PUT(&r, m->hi);
        REC_PUT(&r, m->build_id.len);
        rec_put(&r, m->build_id.bytes, m->build_id.len);
        rec_put(&r, m->path, strlen(m->path));
        rec_end(&r);
        r = rec_begin('F');
        REC_PUT(&r, idx);
        REC_PUT(&r, first);
        REC_PUT(&r, nk);
        for (size_t i = 0; i < k; i++) {
            const func *f = &funcs[nfuncs + i];
            size_t nl = strlen(f->name);
            uint16_t l = (uint16_t)(nl > 65535 ? 65535 : nl);
            REC_PUT(&r, f->addr);
            REC_PUT(&r, l);
            rec_put(&r, f->name, l);
        }
        rec_end(&r);
    }
    nfuncs += k;
    icpp_agent_patch_stats ps;
    memset(&ps, 0, sizeof ps);
    unsigned flags = (no_int3 ? ICPP_AGENT_PATCH_NO_INT3 : 0) | (live ? ICPP_AGENT_PATCH_LIVE : 0);
    if (icpp_agent_patch_module(path, af, k, flags, &ps, &err) < 0)
        msg("icpp-train: agent: %s: %s: not trained\n", path, err.msg);
    else
        mods[mi].patched = 1;
    if (verbose)
        for (size_t i = 0; i < k; i++)
            if (af[i].how != ICPP_AGENT_HOW_JMP)
                msg("icpp-train: agent: %s: %s at +%#llx size %llu: %s (%s)\n", path, funcs[af[i].index].name,
                    (unsigned long long)(af[i].addr - info->dlpi_addr), (unsigned long long)af[i].size,
                    icpp_agent_how_name(af[i].how), icpp_agent_reason_name(af[i].reason));
    syms_totals();
    add_ranges(af, k, e, n, info->dlpi_addr);
    free(e);
    munmap(img, (size_t)st.st_size);
    free(af);
}

typedef struct walk {
    int live;
    int first;
} walk;

static int already_known(uint64_t bias, const char *path)
{
    for (size_t i = 0; i < nmods; i++)
        if (mods[i].bias == bias && !strcmp(mods[i].path, path))
            return 1;
    return 0;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    walk *w = arg;
    int is_exe = w->first;
    w->first = 0;
    char path[4096];
    if (is_exe) {
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
        path[k > 0 ? k : 0] = 0;
    } else {
        snprintf(path, sizeof path, "%s", info->dlpi_name ? info->dlpi_name : "");
    }
    if (!path[0] || path[0] != '/')
        return 0;                                   /* vdso */
    if ((void *)info->dlpi_addr == self_base || (zydis_base && (void *)info->dlpi_addr == zydis_base))
        return 0;                                   /* the agent itself, and its Zydis */
    const char *b = strrchr(path, '/');
    if (b && !strncmp(b + 1, "ld-linux", 8))
        return 0;                                   /* the dynamic loader */
    if (already_known(info->dlpi_addr, path) || !selected(path, is_exe))
        return 0;
    patch_object(path, info, is_exe, w->live);
    return 0;
}

/* ---- writing parts ---- */

static int find_module(uint64_t rt)
{
    for (size_t i = 0; i < nmods; i++)
        if (rt >= mods[i].lo && rt < mods[i].hi)
            return (int)i;
    return -1;
}

static void meta_u(icpp_pmenc *e, const char *k, uint64_t v)
{
    char b[24];
    icpp_agent_utoa(b, v);
    icpp_pmenc_meta(e, k, b);
}

/* Stack of (node, parent index) for a preorder walk, mmap'd. */
typedef struct witem {
    const icpp_agent_node *n;
    uint64_t parent;
} witem;

/* Entries through each int3 trap: process-wide, so written into the first
 * part a process writes (icpp-train sums them over the parts). */
typedef struct int3meta {
    icpp_pmenc *e;
    uint64_t    total;
    unsigned    listed;
} int3meta;

#define INT3_LISTED_MAX 256

static void int3_meta_one(uint32_t index, uint64_t traps, void *arg)
{
    int3meta *m = arg;
    m->total += traps;
    if (index >= nfuncs || m->listed >= INT3_LISTED_MAX)
        return;
    static char k[640];     /* one dumper at a time (dump_all) */
    const char *mp = mods[funcs[index].module].path, *b = strrchr(mp, '/');
    b = b ? b + 1 : mp;
    size_t nl = strlen(funcs[index].name), bl = strlen(b), o = sizeof "int3-entries:" - 1;
    nl = nl > 400 ? 400 : nl;
    bl = bl > 200 ? 200 : bl;
    memcpy(k, "int3-entries:", o);
    memcpy(k + o, funcs[index].name, nl);
    o += nl;
    memcpy(k + o, " (", 2);
    memcpy(k + o + 2, b, bl);
    o += 2 + bl;
    memcpy(k + o, ")", 2);
    meta_u(m->e, k, traps);
    m->listed++;
}

/* Why the last part could not be written (an errno). */
static int part_errno;

/* Tell icpp-train that thread tid's part could not be written, and why:
 * an empty file DIR/lost.PID.TID.NS.ERRNO.NAME made with mknod (no
 * descriptor, no byte written: it works under the limits that made the
 * part fail).  Returns 0, or -1 if it could not be made either. */
static int mark_lost(int pid, int tid, int err)
{
    char path[4400], *p = path;
    size_t dl = strlen(dir);
    memcpy(p, dir, dl);
    memcpy(p + dl, "/lost.", 6);
    p = icpp_agent_utoa(p + dl + 6, (uint64_t)pid);
    *p++ = '.';
    p = icpp_agent_utoa(p, (uint64_t)tid);
    *p++ = '.';
    p = icpp_agent_utoa(p, mono_ns());
    *p++ = '.';
    p = icpp_agent_utoa(p, (uint64_t)(err > 0 ? err : EIO));
    *p++ = '.';
    const char *name = cmdline, *e = strchr(cmdline, ' ');
    size_t nl = e ? (size_t)(e - cmdline) : strlen(cmdline);
    for (size_t i = 0; i < nl; i++)
        if (cmdline[i] == '/')
            name = cmdline + i + 1;
    nl -= (size_t)(name - cmdline);
    for (size_t i = 0; i < nl && i < 64; i++)
        *p++ = name[i] == '/' ? '_' : name[i];
    *p = 0;
    return mknod(path, S_IFREG | 0600, 0);
}

/* func_mark zeroed for nfuncs functions (mapped larger when the table
 * grew).  Returns 0, or -1 when no memory was left. */
static int func_marks_clear(void)
{
    if (func_mark_cap < nfuncs) {
        if (func_mark)
            munmap(func_mark, func_mark_cap * sizeof *func_mark);
        func_mark_cap = nfuncs + 4096;
        func_mark = mmap(NULL, func_mark_cap * sizeof *func_mark, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (func_mark == MAP_FAILED) {
            func_mark = NULL;
            func_mark_cap = 0;
            return -1;
        }
    }
    memset(func_mark, 0, nfuncs * sizeof *func_mark);
    return 0;
}

/* Pass 1 of a part: the functions the tree under root uses, each given its
 * part index + 1 in func_mark, in preorder (a walk without a stack). */
static void encode_funcs(icpp_pmenc *e, const icpp_agent_node *root)
{
    icpp_pmenc_funcs(e);
    uint32_t nused = 0;
    for (const icpp_agent_node *n = icpp_agent_node_first_child(root); n;) {
        uint32_t f = icpp_agent_node_func(n);
        if (f < nfuncs && !func_mark[f]) {
            func_mark[f] = ++nused;
            icpp_pmenc_func(e, funcs[f].module, funcs[f].addr, funcs[f].name);
        }
        const icpp_agent_node *c = f < nfuncs ? icpp_agent_node_first_child(n) : NULL;
        if (c) {
            n = c;
            continue;
        }
        while (n && n != root && !icpp_agent_node_next_sibling(n))
            n = icpp_agent_node_parent(n);
        n = (n && n != root) ? icpp_agent_node_next_sibling(n) : NULL;
    }
}

/* One node of a part: parent_delta back to its parent's index, function
 * f's part index, its count, its heights and its call sites (as module
 * offsets; a site in no known module is left out). */
static void encode_node(icpp_pmenc *e, const icpp_agent_node *n, uint64_t parent_delta, uint32_t f)
{
    /* static: one dumper at a time (dump_all), and signal stacks are small */
    static icpp_agent_pair pairs[256];
    static icpp_pm_height hs[256];
    static icpp_pm_site ss[256];
    size_t np = icpp_agent_node_heights(n, pairs, 256, NULL), nh = 0, ns = 0;
    for (size_t i = 0; i < np && i < 256; i++)
        if (pairs[i].count)
            hs[nh++] = (icpp_pm_height){(int64_t)pairs[i].key, pairs[i].count, 0};
    np = icpp_agent_node_sites(n, pairs, 256, NULL);
    for (size_t i = 0; i < np && i < 256; i++) {
        int m = pairs[i].count ? find_module(pairs[i].key) : -1;
        if (m >= 0)
            ss[ns++] = (icpp_pm_site){(uint32_t)m, pairs[i].key - mods[m].bias, pairs[i].count};
    }
    icpp_pmenc_node(e, parent_delta, func_mark[f] - 1, icpp_agent_node_count(n), hs, (uint32_t)nh, ss,
                    (uint32_t)ns);
}

/* The walk stack of pass 2 (mmap'd, grown with mremap). */
typedef struct wstack {
    witem *v;
    size_t n, cap;
} wstack;

/* Pass 2 of a part: the nodes under root, parents first.  Returns the
 * nodes left out: OVERFLOW nodes, nodes added after pass 1, and children
 * for which the stack could not grow. */
static uint64_t encode_nodes(icpp_pmenc *e, const icpp_agent_node *root, wstack *ws)
{
    icpp_pmenc_nodes(e);
    uint64_t idx = 0, skipped = 0;
    for (const icpp_agent_node *c = icpp_agent_node_first_child(root); c; c = icpp_agent_node_next_sibling(c))
        if (ws->n < ws->cap)
            ws->v[ws->n++] = (witem){c, 0};
    while (ws->n) {
        witem it = ws->v[--ws->n];
        uint32_t f = icpp_agent_node_func(it.n);
        if (f >= nfuncs || !func_mark[f]) {
            skipped++;          /* OVERFLOW node, or a node added after pass 1 */
            continue;
        }
        idx++;
        encode_node(e, it.n, idx - it.parent, f);
        for (const icpp_agent_node *c = icpp_agent_node_first_child(it.n); c; c = icpp_agent_node_next_sibling(c)) {
            if (ws->n == ws->cap) {
                void *q = mremap(ws->v, ws->cap * sizeof *ws->v, 2 * ws->cap * sizeof *ws->v, MREMAP_MAYMOVE);
                if (q == MAP_FAILED) {
                    skipped++;
                    continue;
                }
                ws->v = q;
                ws->cap *= 2;
            }
            ws->v[ws->n++] = (witem){c, idx};
        }
    }
    return skipped;
}

/* The part's metadata: the thread's, the patch counts, and (*proc_meta:
 * in the first part a process writes) the entries through each int3 trap. */
static void encode_metas(icpp_pmenc *e, const icpp_agent_thread_info *ti, int pid, uint64_t skipped,
                         int *proc_meta)
{
    icpp_pmenc_metas(e);
    icpp_pmenc_meta(e, "program", cmdline);
    meta_u(e, "pid", (uint64_t)pid);
    meta_u(e, "tid", (uint64_t)ti->tid);
    icpp_pmenc_meta(e, "base", ti->base_kind == ICPP_AGENT_BASE_STARTSTACK ? "startstack"
                               : ti->base_kind == ICPP_AGENT_BASE_MAPTOP   ? "maptop"
                                                                           : "none");
    meta_u(e, "entries", ti->entries);
    meta_u(e, "entries-slow", ti->entries_slow);
    meta_u(e, "dropped-depth", ti->dropped_depth);
    meta_u(e, "dropped-foreign", ti->dropped_foreign);
    meta_u(e, "dropped-reentrant", ti->dropped_reentrant);
    meta_u(e, "node-overflow", ti->node_overflow + skipped);
    if (ti->node_overflow) {
        meta_u(e, "node-overflow-paths", ti->lost_paths);
        if (ti->lost_paths_more)
            meta_u(e, "node-overflow-paths-more", 1);
    }
    meta_u(e, "pair-overflow", ti->pair_overflow);
    meta_u(e, "max-depth", ti->max_depth_seen);
    meta_u(e, "patched-jmp", totals.how[ICPP_AGENT_HOW_JMP]);
    meta_u(e, "patched-short-jmp", totals.jmp_short);
    meta_u(e, "patched-int3", totals.how[ICPP_AGENT_HOW_INT3]);
    meta_u(e, "patched-none", totals.how[ICPP_AGENT_HOW_NONE]);
    meta_u(e, "patched-int3-calls", totals.int3_calls);
    meta_u(e, "redirected-calls", totals.calls_redirected);
    if (*proc_meta) {
        int3meta im = {e, 0, 0};
        icpp_agent_int3_each(int3_meta_one, &im);
        meta_u(e, "int3-entries", im.total);
        *proc_meta = 0;
    }
    for (int r = 1; r < ICPP_AGENT_R_COUNT; r++)
        if (totals.reason[r]) {
            char k[64] = "refused-";
            strncat(k, icpp_agent_reason_name(r), sizeof k - 9);
            meta_u(e, k, totals.reason[r]);
        }
}

/* The encoded part b as DIR/part.PID.TID.NS.icppmap: written as tmp.part.*,
 * renamed when complete, so a part file is whole; it supersedes the
 * thread's live file (its NS is later), which is removed.  Returns 0, or -1
 * with part_errno set (and no file left). */
static int write_part_file(const icpp_wbuf *b, int pid, const icpp_agent_thread_info *ti)
{
    char path[4200], tmp[4200], *p = path;
    size_t dl = strlen(dir);
    memcpy(p, dir, dl);
    p += dl;
    memcpy(p, "/part.", 6);
    p = icpp_agent_utoa(p + 6, (uint64_t)pid);
    *p++ = '.';
    p = icpp_agent_utoa(p, (uint64_t)ti->tid);
    *p++ = '.';
    p = icpp_agent_utoa(p, mono_ns());
    memcpy(p, ".icppmap", 9);
    memcpy(tmp, dir, dl);
    memcpy(tmp + dl, "/tmp.", 5);
    memcpy(tmp + dl + 5, path + dl + 1, strlen(path + dl + 1) + 1);   /* DIR/tmp.part.... */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        part_errno = errno;
        return -1;
    }
    int rc = 0;
    const uint8_t *q = b->p;
    size_t left = b->len;
    while (left) {
        ssize_t w = write(fd, q, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            part_errno = w < 0 ? errno : ENOSPC;
            rc = -1;
            break;
        }
        q += w;
        left -= (size_t)w;
    }
    if (close(fd) < 0 && rc == 0) {
        part_errno = errno;
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) < 0) {
        part_errno = errno;
        rc = -1;
    }
    if (rc < 0)
        unlink(tmp);
    else if (ti->live_file[0])
        unlink(ti->live_file);
    return rc;
}

/* Thread t's part: its tree encoded (lib/pathmap's encoder, into mmap'd
 * memory) and written.  Nothing for an inherited tree, nor for one without
 * entries (its live file is removed).  Returns 0, or -1 with part_errno.
 * Kept out of line: dump_all's libc call before its critical section
 * (getpid at exit) is recorded, at a height that includes dump_all's frame
 * and its callers'; inlined, this function's locals would grow that frame
 * and change every trained map's exit path. */
__attribute__((noinline)) static int write_part(const icpp_agent_thread *t, int pid, int *proc_meta)
{
    icpp_agent_thread_info ti;
    icpp_agent_thread_get_info(t, &ti);
    if (ti.inherited)
        return 0;           /* the parent's tree (and live file) */
    if (ti.entries == 0) {
        if (ti.live_file[0])
            unlink(ti.live_file);
        return 0;
    }
    /* Functions used by this tree get part indices. */
    if (func_marks_clear() < 0) {
        part_errno = ENOMEM;
        return -1;
    }
    wstack ws = {NULL, 0, 1 << 16};
    ws.v = mmap(NULL, ws.cap * sizeof *ws.v, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ws.v == MAP_FAILED) {
        part_errno = ENOMEM;
        return -1;
    }
    icpp_wbuf b;
    memset(&b, 0, sizeof b);
    b.mmapped = 1;
    icpp_pmenc e;
    icpp_pmenc_begin(&e, &b, 0);
    for (size_t i = 0; i < nmods; i++)
        icpp_pmenc_module(&e, mods[i].kind, mods[i].path, &mods[i].build_id);
    const icpp_agent_node *root = icpp_agent_thread_root(t);
    encode_funcs(&e, root);
    uint64_t skipped = encode_nodes(&e, root, &ws);
    munmap(ws.v, ws.cap * sizeof *ws.v);
    encode_metas(&e, &ti, pid, skipped, proc_meta);
    int rc = icpp_pmenc_end(&e);
    part_errno = rc < 0 ? ENOMEM : 0;
    if (rc == 0)
        rc = write_part_file(&b, pid, &ti);
    icpp_wbuf_free(&b);
    return rc;
}

/* Write every thread's part once per process.  Async-signal-safe. */
static void dump_all(void)
{
    if (!active)
        return;
    int pid = (int)syscall(SYS_getpid);
    if (pid != owner_pid)
        return;         /* a vfork child: the trees are the parent's */
    if (__atomic_exchange_n(&dumped_pid, pid, __ATOMIC_ACQ_REL) == pid)
        return;         /* this process wrote already (exit after a failed exec...) */
    icpp_agent_enter_critical();
    icpp_agent_patch_totals(&totals);
    int proc_meta = 1;
    for (const icpp_agent_thread *t = icpp_agent_thread_first(); t; t = icpp_agent_thread_next(t)) {
        io_guard g;
        io_begin(&g);
        int rc = write_part(t, pid, &proc_meta);
        io_end(&g);
        /* icpp-train says which thread's part is missing and why (past
         * RLIMIT_FSIZE: the signal says so when a short write hid EFBIG). */
        if (rc < 0) {
            int err = g.efbig ? EFBIG : part_errno;
            icpp_agent_thread_info ti;
            icpp_agent_thread_get_info(t, &ti);
            if (mark_lost(pid, ti.tid, err) < 0)
                msg("icpp-train: agent: cannot write a part file in %s (%s): thread %d's training %s\n", dir,
                    strerror(err), ti.tid, ti.live_file[0] ? "stays in its live file" : "is lost");
        }
    }
    icpp_agent_leave_critical();
}

/* ---- process events ---- */

static const int fatal_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGABRT,   SIGBUS,  SIGFPE,  SIGUSR1,
                                    SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,   SIGXCPU, SIGXFSZ, SIGVTALRM,
                                    SIGPROF, SIGSYS,  SIGPWR,  SIGSTKFLT};

static void on_fatal(int sig)
{
    int saved = errno;
    dump_all();
    /* SA_RESETHAND restored the default action: die by the same signal. */
    errno = saved;
    raise(sig);
}

/* Runs before the agent gives the forking thread a new tree (agent.h):
 * the child's live files name the child's own copy of the table. */
static void on_fork_child(void)
{
    owner_pid = (int)syscall(SYS_getpid);
    dumped_pid = 0;
    if (syms_path[0]) {
        char from[sizeof syms_path];
        memcpy(from, syms_path, sizeof from);
        syms_create(from, syms_len);
    }
}

static void on_exit_hook(void)
{
    dump_all();
}

static void read_cmdline(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
    close(fd);
    for (ssize_t i = 0; i < n - 1; i++)
        if (!cmdline[i])
            cmdline[i] = ' ';
    cmdline[n > 0 ? n : 0] = 0;
}

__attribute__((constructor(101))) static void agent_start(void)
{
    const char *d = getenv("ICPP_TRAIN_DIR");
    if (!d || !*d || strlen(d) >= sizeof dir - 64)
        return;
    snprintf(dir, sizeof dir, "%s", d);
    const char *m = getenv("ICPP_TRAIN_MODULES");
    if (m && *m)
        snprintf(modules_sel, sizeof modules_sel, "%s", m);
    no_int3 = getenv("ICPP_TRAIN_NO_INT3") != NULL;
    verbose = getenv("ICPP_TRAIN_VERBOSE") != NULL;
    Dl_info di;
    if (dladdr((void *)agent_start, &di))
        self_base = di.dli_fbase;
    if (dladdr((void *)ZydisDecoderInit, &di))
        zydis_base = di.dli_fbase;
    icpp_agent_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if ((m = getenv("ICPP_TRAIN_MAX_DEPTH")))
        cfg.max_depth = (uint32_t)strtoul(m, NULL, 10);
    if ((m = getenv("ICPP_TRAIN_MAX_MB")) && strtod(m, NULL) > 0)     /* MiB; fractions too (0.25) */
        cfg.max_cct_bytes = (uint64_t)(strtod(m, NULL) * 1048576.0);
    cfg.live_dir = dir;
    icpp_err err;
    if (icpp_agent_init(&cfg, &err) < 0) {
        msg("icpp-train: agent: %s: this run is not trained\n", err.msg);
        return;
    }
    read_cmdline();
    syms_create(NULL, 0);
    syms_cmdline(cmdline);
    owner_pid = (int)syscall(SYS_getpid);
    icpp_agent_set_fork_child_hook(on_fork_child);
    atexit(on_exit_hook);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
        if (sigaction(fatal_signals[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
            sigaction(fatal_signals[i], &sa, NULL);
    active = 1;
    /* The agent's own calls (malloc, qsort, ... once libc is patched) are
     * not the program's: as for dlopen below.  They used to be recorded as
     * root paths whose heights follow the agent's heap and the number of
     * ranges -- which grows with a rewritten program's wrap stubs. */
    icpp_agent_enter_critical();
    walk w = {0, 1};
    dl_iterate_phdr(phdr_cb, &w);
    icpp_agent_leave_critical();
}

/* Libraries loaded later: patch them while other threads may run. */
API void *dlopen(const char *file, int mode)
{
    static void *(*real)(const char *, int);
    if (!real)
        real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    void *h = real(file, mode);
    if (h && active) {
        icpp_agent_enter_critical();
        walk w = {1, 1};
        dl_iterate_phdr(phdr_cb, &w);
        icpp_agent_leave_critical();
    }
    return h;
}

/* _exit skips atexit handlers; exec replaces the image: write first. */
API void _exit(int status)
{
    dump_all();
    syscall(SYS_exit_group, status);
    __builtin_unreachable();
}

API void _Exit(int status)
{
    _exit(status);
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

#define REAL(name, type)                                                     \
    static type real_##name;                                                 \
    if (!real_##name)                                                        \
        real_##name = (type)dlsym(RTLD_NEXT, #name);

API int execve(const char *path, char *const argv[], char *const envp[])
{
    REAL(execve, execve_fn);
    dump_all();
    return real_execve(path, argv, envp);
}

API int execv(const char *path, char *const argv[])
{
    REAL(execv, execv_fn);
    dump_all();
    return real_execv(path, argv);
}

API int execvp(const char *file, char *const argv[])
{
    REAL(execvp, execv_fn);
    dump_all();
    return real_execvp(file, argv);
}

API int execvpe(const char *file, char *const argv[], char *const envp[])
{
    REAL(execvpe, execve_fn);
    dump_all();
    return real_execvpe(file, argv, envp);
}

API int fexecve(int fd, char *const argv[], char *const envp[])
{
    REAL(fexecve, fexecve_fn);
    dump_all();
    return real_fexecve(fd, argv, envp);
}

/* execl* take variadic argv: collect and call execv*. */
static int collect(const char *arg0, va_list ap, char **argv, int max)
{
    int n = 0;
    argv[n++] = (char *)arg0;
    while (n < max - 1 && (argv[n] = va_arg(ap, char *)) != NULL)
        n++;
    argv[n] = NULL;
    return n;
}

API int execl(const char *path, const char *arg, ...)
{
    char *argv[4096];
    va_list ap;
    va_start(ap, arg);
    collect(arg, ap, argv, 4096);
    va_end(ap);
    return execv(path, argv);
}

API int execlp(const char *file, const char *arg, ...)
{
    char *argv[4096];
    va_list ap;
    va_start(ap, arg);
    collect(arg, ap, argv, 4096);
    va_end(ap);
    return execvp(file, argv);
}

API int execle(const char *path, const char *arg, ...)
{
    char *argv[4096];
    va_list ap;
    va_start(ap, arg);
    collect(arg, ap, argv, 4096);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, argv, envp);
}

/* ---- the program's SIGTRAP action ----
 * Once the agent's SIGTRAP handler is installed (int3 hooks, live
 * patches), it stays the kernel's: the program's sigaction/signal for
 * SIGTRAP set and read the action it passes the traps that are not the
 * agent's to (trap.c).  A program that installed its own handler (LLVM's
 * crash reports) used to take the agent's traps and crash at the byte
 * after an int3-hooked entry.  Other signals go to libc as they are. */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

API int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    REAL(sigaction, sigaction_fn);
    if (sig == SIGTRAP) {
        icpp_agent_ksigaction k, o;
        if (act) {
            k.handler = (void *)act->sa_handler;
            k.flags = (unsigned long)(unsigned)act->sa_flags | 0x04000000 /* SA_RESTORER, as libc adds */;
            k.restorer = NULL;
            memcpy(&k.mask, &act->sa_mask, sizeof k.mask);
        }
        if (icpp_agent_trap_sigaction(act ? &k : NULL, old ? &o : NULL) == 0) {
            if (old) {
                memset(old, 0, sizeof *old);
                old->sa_handler = (void (*)(int))o.handler;
                old->sa_flags = (int)o.flags;
                old->sa_restorer = (void (*)(void))o.restorer;
                memcpy(&old->sa_mask, &o.mask, sizeof o.mask);
            }
            return 0;
        }
    }
    return real_sigaction(sig, act, old);
}

/* libc's signal() calls its internal sigaction, not this one. */
static void (*signal_as(int sig, void (*fn)(int), int flags, int mask_self))(int)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    if (mask_self && sig > 0 && sig < 65)
        sigaddset(&sa.sa_mask, sig);
    return sigaction(sig, &sa, &old) < 0 ? SIG_ERR : old.sa_handler;
}

typedef void (*(*signal_fn)(int, void (*)(int)))(int);

/* Other signals, and SIGTRAP before the handler is installed, go to
 * libc's own (siginterrupt's flags and all). */
#define SIGNAL_LIKE(name, flags, mask_self)                                  \
    REAL(name, signal_fn);                                                   \
    if (sig != SIGTRAP || icpp_agent_trap_sigaction(NULL, NULL) < 0)         \
        return real_##name(sig, fn);                                         \
    return signal_as(sig, fn, flags, mask_self);

API void (*signal(int sig, void (*fn)(int)))(int)
{
    SIGNAL_LIKE(signal, SA_RESTART, 1)          /* BSD semantics, as glibc's */
}

void (*bsd_signal(int sig, void (*fn)(int)))(int);
API void (*bsd_signal(int sig, void (*fn)(int)))(int)
{
    SIGNAL_LIKE(bsd_signal, SA_RESTART, 1)
}

API void (*sysv_signal(int sig, void (*fn)(int)))(int)
{
    SIGNAL_LIKE(sysv_signal, SA_RESETHAND | SA_NODEFER, 0)
}
