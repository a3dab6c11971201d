/* testpreload.c -- test driver preloaded with the agent: patches the exe (and libc) from their symbols, dumps CCTs as text. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../agent.h"

/* Environment:
 *   ICPP_AGENT_TEST_MODULES  comma list of "exe", "libc", or a path substring
 *                            of a loaded object (default "exe")
 *   ICPP_AGENT_TEST_OUT      dump file; a forked child writes OUT.child.PID
 *   ICPP_AGENT_TEST_STATS    patch statistics and refused functions
 *   ICPP_AGENT_TEST_NO_INT3  if set, refused functions are not int3-patched
 *   ICPP_AGENT_TEST_DLOPEN   if set, dlopen is interposed and each new object
 *                            matching a module pattern is patched (LIVE)
 *   ICPP_AGENT_TEST_MAX_DEPTH, ICPP_AGENT_TEST_MAX_CCT   icpp_agent_config caps
 *   ICPP_AGENT_TEST_LIVE_DIR trees in live files there (icpp_agent_config.live_dir)
 *   ICPP_AGENT_TEST_NORECORD if set, the constructor ends inside a critical
 *                            section (benchmark of the bare stub cost)
 *
 * Dump lines (one per CCT node; the first element is the thread's label):
 *   P [main];_start;main;f COUNT H:C,H:C...       heights with counts
 *   S [main];_start;main;f SITE:C,...             call sites as func+0xoff
 *   T tid=.. pid=.. base_kind=.. inherited=.. entries=.. nodes=.. ...
 * This is test code: it uses libc freely (inside a critical section). */

typedef struct fn {
    uint64_t    addr, size;
    const char *name;
} fn;

static fn    *fns;          /* by function index */
static size_t nfns, capfns;
static fn   **by_addr;      /* sorted, for call-site names */
static int    main_pid;
static FILE  *stats;

static int pref_name(const char *a, const char *b)
{
    /* prefer fewer leading '_', then shorter, then alphabetical */
    size_t ua = strspn(a, "_"), ub = strspn(b, "_");
    if (ua != ub)
        return ua < ub;
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb)
        return la < lb;
    return strcmp(a, b) < 0;
}

/* Functions of one object: STT_FUNC, defined, from .symtab and .dynsym,
 * one per address.  Returns the index of its first function in fns. */
static size_t read_funcs(const char *path, uint64_t bias, size_t *count)
{
    size_t first = nfns;
    *count = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return first;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    Elf_Scn *scn = NULL;
    while (e && (scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
        for (size_t i = 0; d && i < n; i++) {
            GElf_Sym s;
            if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
                s.st_shndx == SHN_UNDEF || s.st_value == 0)
                continue;
            const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
            if (!nm || !*nm)
                continue;
            uint64_t a = bias + s.st_value;
            size_t j;
            for (j = first; j < nfns && fns[j].addr != a; j++)
                ;
            if (j < nfns) {
                if (pref_name(nm, fns[j].name))
                    fns[j].name = strdup(nm);
                if (s.st_size > fns[j].size)
                    fns[j].size = s.st_size;
                continue;
            }
            if (nfns == capfns) {
                capfns = capfns ? capfns * 2 : 1024;
                fns = realloc(fns, capfns * sizeof *fns);
            }
            fns[nfns].addr = a;
            fns[nfns].size = s.st_size;
            fns[nfns].name = strdup(nm);
            nfns++;
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    *count = nfns - first;
    return first;
}

typedef struct obj {
    char     path[4096];
    uint64_t bias;
    int      is_exe;
} obj;

typedef struct objs {
    obj    v[64];
    size_t n;
} objs;

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *p)
{
    (void)size;
    objs *os = p;
    if (os->n == 64)
        return 1;
    obj *o = &os->v[os->n];
    o->is_exe = os->n == 0 && (!info->dlpi_name || !*info->dlpi_name);
    if (o->is_exe) {
        ssize_t k = readlink("/proc/self/exe", o->path, sizeof o->path - 1);
        o->path[k > 0 ? k : 0] = 0;
    } else {
        snprintf(o->path, sizeof o->path, "%s", info->dlpi_name ? info->dlpi_name : "");
    }
    o->bias = info->dlpi_addr;
    os->n++;
    return 0;
}

static int wanted(const obj *o, int *is_patch)
{
    const char *mods = getenv("ICPP_AGENT_TEST_MODULES");
    if (!mods)
        mods = "exe";
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", mods);
    *is_patch = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "exe") ? o->is_exe
            : !strcmp(tok, "libc") ? strstr(o->path, "/libc.so.6") != NULL
                                   : (!o->is_exe && strstr(o->path, tok) != NULL))
            *is_patch = 1;
    }
    /* libc symbols are always read, for naming call sites */
    return *is_patch || o->is_exe || strstr(o->path, "/libc.so.6");
}

static int cmp_addr(const void *a, const void *b)
{
    const fn *x = *(fn *const *)a, *y = *(fn *const *)b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void index_by_addr(void)
{
    free(by_addr);
    by_addr = malloc(nfns * sizeof *by_addr);
    for (size_t i = 0; i < nfns; i++)
        by_addr[i] = &fns[i];
    qsort(by_addr, nfns, sizeof *by_addr, cmp_addr);
}

static void patch_obj(const obj *o, int live)
{
    size_t count, first = read_funcs(o->path, o->bias, &count);
    icpp_agent_func *fs = calloc(count ? count : 1, sizeof *fs);
    for (size_t i = 0; i < count; i++) {
        fs[i].addr = fns[first + i].addr;
        fs[i].size = fns[first + i].size;
        fs[i].index = (uint32_t)(first + i);
    }
    unsigned flags = (getenv("ICPP_AGENT_TEST_NO_INT3") ? ICPP_AGENT_PATCH_NO_INT3 : 0) |
                     (live ? ICPP_AGENT_PATCH_LIVE : 0);
    icpp_agent_patch_stats st = { 0 };
    icpp_err err = { 0 };
    if (icpp_agent_patch_module(o->path, fs, count, flags, &st, &err) < 0)
        fprintf(stderr, "icpp agent test: %s\n", err.msg);
    if (stats) {
        fprintf(stats,
                "module %s funcs %u jmp %u int3 %u none %u live %u stub_bytes %llu "
                "jmp_padded %u jmp_size_inferred %u\n",
                o->is_exe ? "exe" : o->path, st.nfuncs, st.how[ICPP_AGENT_HOW_JMP],
                st.how[ICPP_AGENT_HOW_INT3], st.how[ICPP_AGENT_HOW_NONE], st.live,
                (unsigned long long)st.stub_bytes, st.jmp_padded, st.jmp_size_inferred);
        for (int r = 0; r < ICPP_AGENT_R_COUNT; r++)
            if (st.reason[r])
                fprintf(stats, "reason %s %s %u\n", o->is_exe ? "exe" : o->path,
                        icpp_agent_reason_name(r), st.reason[r]);
        for (size_t i = 0; i < count; i++)
            if (fs[i].short_jmp)
                fprintf(stats, "short %s %s\n", o->is_exe ? "exe" : o->path, fns[first + i].name);
        for (size_t i = 0; i < count; i++)
            if (fs[i].calls)
                fprintf(stats, "calls %s %s %u\n", o->is_exe ? "exe" : o->path, fns[first + i].name,
                        fs[i].calls);
        for (size_t i = 0; i < count; i++)
            if (fs[i].how != ICPP_AGENT_HOW_JMP)
                fprintf(stats, "refused %s %s %s %s size=%llu\n", o->is_exe ? "exe" : o->path,
                        fns[first + i].name, icpp_agent_how_name(fs[i].how),
                        icpp_agent_reason_name(fs[i].reason),
                        (unsigned long long)fs[i].size);
        fflush(stats);
    }
    free(fs);
}

static void *(*real_dlopen)(const char *, int);

/* Interposed for ICPP_AGENT_TEST_DLOPEN: patch objects that appear. */
__attribute__((visibility("default"))) void *dlopen(const char *file, int mode)
{
    if (!real_dlopen)
        real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    void *h = real_dlopen(file, mode);
    if (!h || !getenv("ICPP_AGENT_TEST_DLOPEN"))
        return h;
    icpp_agent_enter_critical();
    static objs before;     /* objects already handled */
    objs now = { .n = 0 };
    dl_iterate_phdr(phdr_cb, &now);
    for (size_t i = 0; i < now.n; i++) {
        int seen = 0, p;
        for (size_t j = 0; j < before.n; j++)
            seen |= !strcmp(before.v[j].path, now.v[i].path);
        if (!seen && !now.v[i].is_exe && wanted(&now.v[i], &p) && p &&
            !strstr(now.v[i].path, "/libc.so.6"))
            patch_obj(&now.v[i], 1);
    }
    before = now;
    index_by_addr();
    icpp_agent_leave_critical();
    return h;
}

static const char *site_name(uint64_t ra, char *buf, size_t n)
{
    size_t lo = 0, hi = nfns;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (by_addr[mid]->addr <= ra)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* size 0 (crt symbols): up to the next function */
    uint64_t end = !lo ? 0
                   : by_addr[lo - 1]->size ? by_addr[lo - 1]->addr + by_addr[lo - 1]->size
                   : lo < nfns             ? by_addr[lo]->addr
                                           : 0;
    if (lo && ra < end)
        snprintf(buf, n, "%s+%#llx", by_addr[lo - 1]->name,
                 (unsigned long long)(ra - by_addr[lo - 1]->addr));
    else
        snprintf(buf, n, "?%#llx", (unsigned long long)ra);
    return buf;
}

static const char *func_name(uint32_t f)
{
    if (f == ICPP_AGENT_FUNC_OVERFLOW)
        return "[overflow]";
    return f < nfns ? fns[f].name : "?";
}

static void dump_thread(FILE *out, const icpp_agent_thread *t)
{
    icpp_agent_thread_info ti;
    icpp_agent_thread_get_info(t, &ti);
    fprintf(out,
            "T tid=%d pid=%d base_kind=%d base=%#llx inherited=%d entries=%llu nodes=%llu "
            "cct_bytes=%llu max_depth=%u dropped_critical=%llu dropped_reentrant=%llu dropped_depth=%llu "
            "node_overflow=%llu pair_overflow=%llu\n",
            ti.tid, ti.pid, ti.base_kind, (unsigned long long)ti.base, ti.inherited,
            (unsigned long long)ti.entries, (unsigned long long)ti.nodes,
            (unsigned long long)ti.cct_bytes, ti.max_depth_seen,
            (unsigned long long)ti.dropped_critical, (unsigned long long)ti.dropped_reentrant,
            (unsigned long long)ti.dropped_depth,
            (unsigned long long)ti.node_overflow, (unsigned long long)ti.pair_overflow);
    const char *label = ti.base_kind == ICPP_AGENT_BASE_STARTSTACK ? "[main]"
                        : ti.base_kind == ICPP_AGENT_BASE_MAPTOP   ? "[thread]"
                                                                   : "[nobase]";
    size_t cap = 1 << 16, *lens = malloc(sizeof(size_t) * 4096), lcap = 4096, depth = 0;
    char *path = malloc(cap);
    size_t len = (size_t)sprintf(path, "%s%s", label, ti.inherited ? "~inherited" : "");
    const icpp_agent_node *root = icpp_agent_thread_root(t);
    const icpp_agent_node *n = icpp_agent_node_first_child(root);
    icpp_agent_pair pairs[256];
    char sb[512];
    while (n) {
        /* enter n */
        const char *nm = func_name(icpp_agent_node_func(n));
        if (depth == lcap)
            lens = realloc(lens, sizeof(size_t) * (lcap *= 2));
        lens[depth++] = len;
        if (len + strlen(nm) + 2 > cap)
            path = realloc(path, cap = cap * 2 + strlen(nm));
        len += (size_t)sprintf(path + len, ";%s", nm);
        uint64_t ov;
        size_t k = icpp_agent_node_heights(n, pairs, 256, &ov);
        fprintf(out, "P %s %llu ", path, (unsigned long long)icpp_agent_node_count(n));
        for (size_t i = 0; i < k && i < 256; i++)
            fprintf(out, "%s%lld:%llu", i ? "," : "", (long long)pairs[i].key,
                    (unsigned long long)pairs[i].count);
        fprintf(out, ov ? " overflow=%llu\n" : "\n", (unsigned long long)ov);
        k = icpp_agent_node_sites(n, pairs, 256, &ov);
        fprintf(out, "S %s ", path);
        for (size_t i = 0; i < k && i < 256; i++)
            fprintf(out, "%s%s:%llu", i ? "," : "", site_name(pairs[i].key, sb, sizeof sb),
                    (unsigned long long)pairs[i].count);
        fprintf(out, "\n");
        /* next in preorder */
        const icpp_agent_node *c = icpp_agent_node_first_child(n);
        if (c) {
            n = c;
            continue;
        }
        while (n) {
            len = lens[--depth];
            path[len] = 0;
            const icpp_agent_node *s = icpp_agent_node_next_sibling(n);
            if (s) {
                n = s;
                break;
            }
            n = icpp_agent_node_parent(n);
            if (n == root)
                n = NULL;
            else if (n) {
                /* n's own entry is popped by the loop's next iteration */
            }
        }
    }
    free(path);
    free(lens);
}

__attribute__((constructor)) static void test_init(void)
{
    icpp_agent_enter_critical();
    main_pid = getpid();
    const char *sp = getenv("ICPP_AGENT_TEST_STATS");
    if (sp)
        stats = fopen(sp, "w");
    icpp_err err = { 0 };
    icpp_agent_config cfg = { 0 };
    if (getenv("ICPP_AGENT_TEST_MAX_DEPTH"))
        cfg.max_depth = (uint32_t)atoi(getenv("ICPP_AGENT_TEST_MAX_DEPTH"));
    if (getenv("ICPP_AGENT_TEST_MAX_CCT"))
        cfg.max_cct_bytes = (uint64_t)atoll(getenv("ICPP_AGENT_TEST_MAX_CCT"));
    cfg.live_dir = getenv("ICPP_AGENT_TEST_LIVE_DIR");   /* trees in live files, as icpp-train runs it */
    if (icpp_agent_init(&cfg, &err) < 0) {
        fprintf(stderr, "icpp agent test: %s\n", err.msg);
        icpp_agent_leave_critical();
        return;
    }
    objs os = { .n = 0 };
    dl_iterate_phdr(phdr_cb, &os);
    for (size_t i = 0; i < os.n; i++) {
        int p;
        if (!wanted(&os.v[i], &p))
            continue;
        if (p)
            patch_obj(&os.v[i], 0);
        else {
            size_t c;
            read_funcs(os.v[i].path, os.v[i].bias, &c);
        }
    }
    index_by_addr();
    icpp_agent_leave_critical();
    /* benchmark aid: stay critical, so each call costs the stub and the
     * trampoline but records nothing */
    if (getenv("ICPP_AGENT_TEST_NORECORD"))
        icpp_agent_enter_critical();
}

/* "I name traps": entries of an int3-hooked function through its trap. */
static void dump_traps(uint32_t index, uint64_t traps, void *arg)
{
    fprintf(arg, "I %s %llu\n", func_name(index), (unsigned long long)traps);
}

__attribute__((destructor)) static void test_fini(void)
{
    icpp_agent_enter_critical();
    const char *op = getenv("ICPP_AGENT_TEST_OUT");
    if (op) {
        char name[4096];
        if (getpid() == main_pid)
            snprintf(name, sizeof name, "%s", op);
        else
            snprintf(name, sizeof name, "%s.child.%d", op, getpid());
        FILE *out = fopen(name, "w");
        if (out) {
            for (const icpp_agent_thread *t = icpp_agent_thread_first(); t;
                 t = icpp_agent_thread_next(t))
                dump_thread(out, t);
            icpp_agent_int3_each(dump_traps, out);
            fclose(out);
        }
    }
    icpp_agent_leave_critical();
}
