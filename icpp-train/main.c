/* main.c -- icpp-train: run a program with the training agent and merge what it learned into a path map. */
#include "cli.h"
#include "codec.h"
#include "config.h"
#include "escape.h"
#include "fsafe.h"
#include "module.h"
#include "names.h"
#include "pathmap.h"
#include "recover.h"
#include "sibling.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *usage_text =
    "usage: icpp-train [-o MAP] [--modules main|all|LIST] [--fresh] [--max-depth N] -- PROG [ARGS...]\n"
    "       icpp-train --stats MAP | --paths MAP\n"
    "\n"
    "Run PROG as you would (same stdin, stdout, stderr, exit status) with ICPP's\n"
    "agent preloaded: it hooks every function entry of the chosen modules in the\n"
    "unmodified binary and records, for every call path, the stack height at\n"
    "which its last function was entered. The result is merged into MAP, so\n"
    "training on several inputs is several runs.\n"
    "\n"
    "  -o, --output MAP   path map to create or extend (default: PROG's name\n"
    "                     + .icppmap in the current directory).\n"
    "      --modules SEL  which modules to train: all (default: the program and\n"
    "                     every library it loads, dlopen'd ones too), main (the\n"
    "                     program only), or a comma list of library names.\n"
    "      --fresh        replace MAP instead of adding to it.\n"
    "      --max-depth N  shadow-stack frames per thread (default 1048576);\n"
    "                     deeper calls are counted, not recorded.\n"
    "      --stats MAP    print a map's contents: modules, functions, paths,\n"
    "                     context ids and how unique they are; how functions\n"
    "                     were hooked and the int3-hooked ones' trap entries.\n"
    "      --paths MAP    list every call path: count, heights, names, and\n"
    "                     module@address of each function (a path deeper than\n"
    "                     256 functions: its first and last 8); the modules'\n"
    "                     build-ids and paths in '# module' lines first.\n"
    "  -v, --verbose      list every function that did not get the jmp hook (the\n"
    "                     slower int3, or none) with the reason, as the agent\n"
    "                     patches it (stripped functions as fn_ADDR), and at the\n"
    "                     end how often each int3-hooked function was entered\n"
    "                     through its trap (its direct calls do not trap: they\n"
    "                     are pointed at the hook).\n"
    "  -q, --quiet        no summary, no progress line (on a terminal, a line\n"
    "                     with the time so far, processes, threads and the\n"
    "                     size of their trees is updated every second).\n"
    "      --version      print icpp-train's version.\n"
    "  -h, --help         this text.\n"
    "\n"
    "If PROG is killed (SIGKILL, a crash no handler can catch), what it learned\n"
    "up to then is recovered from files its threads kept up to date (in a\n"
    "directory in $TMPDIR, else /dev/shm, else /tmp). SIGTERM,\n"
    "SIGINT or SIGHUP sent to icpp-train go to PROG; icpp-train then waits for it\n"
    "and writes MAP. If icpp-train itself is killed, PROG is killed too.\n"
    "MAP names stripped functions from their separate debug files\n"
    "(docs/debuginfo.md: /usr/lib/debug or ICPP_DEBUG_DIRS, .gnu_debuglink,\n"
    "debuginfod when DEBUGINFOD_URLS is set).\n"
    "\n"
    "Each thread's calling-context tree may take ICPP_TRAIN_MAX_MB MiB (environment;\n"
    "default 1024). A thread that fills it records no new paths: their entries\n"
    "are counted (node-overflow and pair-overflow in --stats, which sums the\n"
    "counters over all threads) and the summary says how many entries and paths\n"
    "were lost; train again with a larger ICPP_TRAIN_MAX_MB.\n"
    "\n"
    "Exit status: PROG's (128+N if signal N killed it); 1 if the map could not\n"
    "be written (the previous MAP is kept), 2 on bad usage.\n";

#define die(...) icpp_cli_die("icpp-train", __VA_ARGS__)

/* ---- --stats ---- */

typedef struct int3row {
    const char *name;       /* "function (module)" */
    uint64_t    n;
} int3row;

static int int3row_cmp(const void *a, const void *b)
{
    const int3row *x = a, *y = b;
    return x->n != y->n ? (x->n < y->n ? 1 : -1) : strcmp(x->name, y->name);
}

/* The int3-hooked functions with their entries through the trap (metadata
 * "int3-entries:NAME (MODULE)"), most entered first, one a line; more than
 * INT3_ZEROS_LISTED never entered are summed up in one line. */
#define INT3_ZEROS_LISTED 10
static void print_int3(FILE *out, const icpp_pathmap *pm, const char *prefix)
{
    size_t n = 0, nm = icpp_pathmap_nmeta(pm);
    int3row *v = malloc((nm ? nm : 1) * sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < nm; i++) {
        const char *k = icpp_pathmap_meta_key(pm, i);
        if (!strncmp(k, "int3-entries:", 13))
            v[n++] = (int3row){k + 13, strtoull(icpp_pathmap_meta(pm, k), NULL, 10)};
    }
    qsort(v, n, sizeof *v, int3row_cmp);
    size_t zeros = 0;
    for (size_t i = 0; i < n; i++)
        zeros += v[i].n == 0;
    char eb[1024];
    for (size_t i = 0; i < n; i++)
        if (v[i].n || zeros <= INT3_ZEROS_LISTED)
            fprintf(out, "%s%s: %" PRIu64 " entries through the trap\n", prefix,
                    icpp_escape(v[i].name, eb, sizeof eb), v[i].n);
    if (zeros > INT3_ZEROS_LISTED)
        fprintf(out, "%s%zu more int3-hooked functions: never entered through the trap\n", prefix, zeros);
    free(v);
}

static int print_stats(const char *path)
{
    icpp_err err;
    icpp_pathmap *pm = icpp_pathmap_read(path, &err);
    if (!pm)
        die(1, "%s", err.msg);
    icpp_pm_stats st;
    if (icpp_pathmap_stats(pm, &st, &err) < 0)
        die(1, "%s", err.msg);
    const icpp_pm_module *mm = icpp_pathmap_module(pm, icpp_pathmap_main(pm));
    char bid[2 * ICPP_BUILD_ID_MAX + 1] = "";
    if (mm)
        icpp_build_id_hex(&mm->build_id, bid, sizeof bid);
    const char *runs = icpp_pathmap_meta(pm, "runs");
    char eb[4096];
    printf("map:          %s\n", icpp_escape(path, eb, sizeof eb));
    printf("binary:       %s (build-id %s)\n", mm ? icpp_escape(mm->path, eb, sizeof eb) : "?", bid);
    printf("runs:         %s\n", runs ? icpp_escape(runs, eb, sizeof eb) : "?");
    printf("modules:      %zu\n", st.modules);
    printf("functions:    %zu entered\n", st.funcs);
    printf("call paths:   %zu (deepest %u)\n", st.paths, st.max_depth);
    printf("contexts:     %zu (path, height) pairs, %zu distinct CIDs (function, height)\n", st.contexts, st.cids);
    printf("unique CIDs:  %.1f%% of paths, %.1f%% of contexts, %.1f%% of calls\n",
           st.paths ? 100.0 * (double)st.unique_paths / (double)st.paths : 0.0,
           st.contexts ? 100.0 * (double)st.unique_contexts / (double)st.contexts : 0.0,
           st.calls ? 100.0 * (double)st.unique_calls / (double)st.calls : 0.0);
    printf("ambiguity (contexts and calls by how many paths share their CID):\n");
    printf("  %-8s %12s %8s %16s %8s\n", "paths", "contexts", "%", "calls", "%");
    for (int b = 0; b < ICPP_AMBIG_BUCKETS; b++)
        printf("  %-8s %12zu %7.1f%% %16" PRIu64 " %7.1f%%\n", icpp_pathmap_bucket_name(b), st.hist_paths[b],
               st.contexts ? 100.0 * (double)st.hist_paths[b] / (double)st.contexts : 0.0, st.hist_calls[b],
               st.calls ? 100.0 * (double)st.hist_calls[b] / (double)st.calls : 0.0);
    static const char *keys[] = {"entries", "entries-slow", "patched-jmp", "patched-short-jmp", "patched-int3",
                                 "patched-int3-calls", "redirected-calls", "patched-none", "int3-entries",
                                 "dropped-depth", "dropped-foreign", "node-overflow", "node-overflow-paths",
                                 "pair-overflow", "threads", "processes"};
    const char *tc = icpp_pathmap_meta(pm, "thread-counters");
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = icpp_pathmap_meta(pm, keys[i]);
        if (!v)
            continue;
        /* Per-thread counters: summed over the map's threads (its runs'),
         * or -- a map from before they were summed -- one thread's. */
        const char *note = "";
        if (!strcmp(keys[i], "entries"))
            note = tc ? " (all threads of all runs)" : " (one thread's: a map written before icpp-train summed them)";
        if (!strcmp(keys[i], "node-overflow") && strcmp(v, "0"))
            note = " (entries not recorded: the tree memory was full; raise ICPP_TRAIN_MAX_MB)";
        printf("%-20s%s%s\n", keys[i], icpp_escape(v, eb, sizeof eb), note);
    }
    print_int3(stdout, pm, "  int3: ");
    icpp_pathmap_free(pm);
    return 0;
}

/* ---- --paths: every path, for people and scripts ---- */

/* Paths deeper than this are listed as their first and last PATHS_END
 * functions around one "...N more..." entry, so that the listing stays
 * linear in the map's size (a crafted 300k-deep chain would otherwise print
 * 300k^2/2 names). */
#define PATHS_FULL_DEPTH 256
#define PATHS_END        8

/* A module as the functions column names it: its path's last component. */
static const char *module_name(const icpp_pm_module *m)
{
    const char *b = strrchr(m->path, '/');
    return b ? b + 1 : m->path;
}

/* One tab-separated field: the functions of fs[0..n), names or module@address,
 * with an elision marker after the first `cut` of them (cut < n). */
static void print_field(const icpp_pathmap *pm, const uint32_t *fs, uint32_t n, uint32_t cut, uint32_t more,
                        int names)
{
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            putchar(';');
        if (k == cut)
            printf("...%u more...;", more);
        const icpp_pm_func *f = icpp_pathmap_func(pm, fs[k]);
        if (names) {
            /* escaped, and a ';' inside a name would split it: ',' */
            char eb[4096];
            for (const char *c = icpp_escape(f->name, eb, sizeof eb); *c; c++)
                putchar(*c == ';' ? ',' : *c);
        } else {
            icpp_escape_fputs(module_name(icpp_pathmap_module(pm, f->module)), stdout);
            printf("@%" PRIx64, f->addr);
        }
    }
}

static int print_paths(const char *path)
{
    icpp_err err;
    icpp_pathmap *pm = icpp_pathmap_read(path, &err);
    if (!pm)
        die(1, "%s", err.msg);
    printf("# count\theights (height:count,...)\tpath (root;...;leaf)\tfunctions (module@address;...)\n");
    printf("# paths deeper than %d functions: the first and last %d, with '...N more...' between\n",
           PATHS_FULL_DEPTH, PATHS_END);
    /* the modules, so that a script can tell them by build-id: the path is the
     * one the program loaded, which may be a link to a file of another name */
    printf("# module\tname\tbuild-id\tpath\n");
    for (uint32_t m = 0; m < icpp_pathmap_nmodules(pm); m++) {
        const icpp_pm_module *mm = icpp_pathmap_module(pm, m);
        char bid[2 * ICPP_BUILD_ID_MAX + 1] = "";
        icpp_build_id_hex(&mm->build_id, bid, sizeof bid);
        printf("# module\t");
        icpp_escape_fputs(module_name(mm), stdout);
        printf("\t%s\t", bid);
        icpp_escape_fputs(mm->path, stdout);
        putchar('\n');
    }
    size_t nn = icpp_pathmap_nnodes(pm);
    uint32_t *top = malloc(sizeof *top * (nn ? nn : 1));     /* ancestor at depth PATHS_END */
    uint32_t fs[PATHS_FULL_DEPTH];
    if (!top)
        die(1, "out of memory");
    for (uint32_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(pm, i);
        top[i] = n->depth <= PATHS_END ? i : top[n->parent];    /* parents precede children */
        uint32_t d = n->depth, cut = UINT32_MAX, more = 0;
        if (d <= PATHS_FULL_DEPTH) {
            d = icpp_pathmap_path(pm, i, fs, PATHS_FULL_DEPTH);
        } else {
            icpp_pathmap_path(pm, top[i], fs, PATHS_END);
            uint32_t x = i;
            for (uint32_t k = 2 * PATHS_END; k-- > PATHS_END; x = icpp_pathmap_node(pm, x)->parent)
                fs[k] = icpp_pathmap_node(pm, x)->func;
            cut = PATHS_END;
            more = d - 2 * PATHS_END;
            d = 2 * PATHS_END;
        }
        printf("%" PRIu64 "\t", n->count);
        for (uint32_t k = 0; k < n->nheights; k++)
            printf("%s%" PRId64 ":%" PRIu64, k ? "," : "", n->heights[k].height, n->heights[k].count);
        putchar('\t');
        print_field(pm, fs, d, cut, more, 1);
        putchar('\t');
        print_field(pm, fs, d, cut, more, 0);
        putchar('\n');
    }
    free(top);
    icpp_pathmap_free(pm);
    return 0;
}

/* ---- running the program ---- */

static char *find_in_path(const char *prog)
{
    if (strchr(prog, '/'))
        return realpath(prog, NULL);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    char *dup = strdup(path), *save = NULL;
    for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char buf[PATH_MAX];
        snprintf(buf, sizeof buf, "%s/%s", *d ? d : ".", prog);
        if (access(buf, X_OK) == 0) {
            free(dup);
            return realpath(buf, NULL);
        }
    }
    free(dup);
    return NULL;
}

/* The training agent, first found of: $ICPP_AGENT; libicpp-agent.so next
 * to icpp-train (the build tree); the installed agent relative to
 * icpp-train's own directory (bindir/../LIBDIR/icpp, config.h), which finds
 * it in a relocated install too (meson install --destdir, a package
 * unpacked elsewhere); the absolute path configured from the install
 * prefix (icpp-train copied or linked elsewhere).  Its real path, or NULL. */
static char *agent_path(void)
{
    static const char *const rel[] = {"libicpp-agent.so", ICPP_AGENT_FROM_BINDIR};
    char *p = icpp_sibling_find("ICPP_AGENT", rel, sizeof rel / sizeof *rel, R_OK);
    if (p)
        return p;
    if (access(ICPP_AGENT_PATH, R_OK) == 0)
        return realpath(ICPP_AGENT_PATH, NULL);
    return NULL;
}

static volatile pid_t child;
static volatile sig_atomic_t pending_sig;

/* SIGTERM, SIGINT, SIGHUP sent to icpp-train by a process go to the
 * target; icpp-train then waits for it, recovers and cleans up.  The
 * terminal's (si_code SI_KERNEL) reach the whole foreground group, the
 * target too: not sent twice. */
static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (si && si->si_code == SI_KERNEL)
        return;
    if (child > 0)
        kill(child, sig);
    else
        pending_sig = sig;
}

/* icpp-train's private directory (parts, live trees, function tables):
 * in $TMPDIR if set, else on tmpfs (/dev/shm, if it has 1 GiB free -- a
 * container's is often 64 MiB: the live trees are written back to no
 * disk, and a fork's file operations do not wait on a journal), else in
 * /tmp.  The first that works; its absolute name (the program may chdir
 * before its threads make their files).  0 or -1. */
static int make_train_dir(char *tdir, size_t n)
{
    const char *env = getenv("TMPDIR");
    struct statvfs vfs;
    int shm_ok = statvfs("/dev/shm", &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize >= (1ull << 30);
    const char *cand[] = {env && *env ? env : NULL, shm_ok ? "/dev/shm" : NULL, "/tmp"};
    for (size_t i = 0; i < sizeof cand / sizeof *cand; i++) {
        if (!cand[i] || (size_t)snprintf(tdir, n, "%s/icpp-train.XXXXXX", cand[i]) >= n || !mkdtemp(tdir))
            continue;
        char *abs = realpath(tdir, NULL);
        if (abs && strlen(abs) < n)
            memcpy(tdir, abs, strlen(abs) + 1);
        free(abs);
        return 0;
    }
    return -1;
}

/* The janitor: a process outside icpp-train's process group that holds
 * the read end of a pipe.  Messages (5 bytes): 'P' + the target's pid,
 * 'D' (icpp-train cleaned up itself).  End of file without 'D' means
 * icpp-train died (SIGKILL): the janitor kills the target (which
 * PR_SET_PDEATHSIG kills too), waits until it is gone, removes `dir`.
 * Returns the write end, or -1 (then a SIGKILLed icpp-train leaves dir). */
enum { JANITOR_MSG = 5 };
static int janitor_start(const char *dir)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t j = fork();
    if (j < 0) {
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (j > 0) {
        close(p[0]);
        return p[1];
    }
    close(p[1]);
    setsid();       /* a kill of icpp-train's process group does not reach it */
    prctl(PR_SET_NAME, "icpp-train-jan");
    int dn = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && dn >= 0; fd++)
        dup2(dn, fd);
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        signal(sigs[i], SIG_IGN);
    int pidfd = -1;
    unsigned char m[JANITOR_MSG];
    for (;;) {
        ssize_t n = read(p[0], m, sizeof m);
        if (n < 0 && errno == EINTR)
            continue;
        if (n != (ssize_t)sizeof m)
            break;
        if (m[0] == 'D')
            _exit(0);
        if (m[0] == 'P' && pidfd < 0) {
            int32_t pid;
            memcpy(&pid, m + 1, 4);
            pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        }
    }
    if (pidfd >= 0) {
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        struct pollfd pf = {pidfd, POLLIN, 0};
        poll(&pf, 1, 10000);
    }
    icpp_fs_remove_tree(dir);
    _exit(0);
}

static void janitor_say(int fd, char what, int32_t pid)
{
    unsigned char m[JANITOR_MSG] = {(unsigned char)what};
    memcpy(m + 1, &pid, 4);
    if (fd >= 0)
        (void)!write(fd, m, sizeof m);
}

/* The progress line while the program runs: what the training directory
 * holds so far -- function tables (one per process image), threads' live
 * trees and parts, and their size (the trees grow with the call paths
 * recorded).  A directory listing once a second, nothing in the program. */
static void train_progress(const char *tdir, icpp_cli_progress *p)
{
    DIR *d = opendir(tdir);
    if (!d)
        return;
    size_t procs = 0, threads = 0;
    uint64_t bytes = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (!strncmp(de->d_name, "syms.", 5))
            procs++;
        else if (!strncmp(de->d_name, "live.", 5) || !strncmp(de->d_name, "part.", 5)) {
            threads++;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                bytes += (uint64_t)st.st_size;
        }
    }
    closedir(d);
    icpp_cli_progress_show(p, "training: %zu process%s, %zu thread%s, trees %.1f MiB", procs, procs == 1 ? "" : "es",
                           threads, threads == 1 ? "" : "s", (double)bytes / 1048576.0);
}

/* Run the program with the agent; returns its wait status.  The child
 * dies with icpp-train (PR_SET_PDEATHSIG; if icpp-train is already gone
 * when that is set, it does not run at all).  With a progress line on (a
 * terminal, no -q), wake once a second (poll on its pidfd) to update it. */
static int run_target(const char *exe, char **args, int janitor, const char *tdir, icpp_cli_progress *prog)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGQUIT, SIG_IGN);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        die(1, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(127);
        execv(exe, args);
        fprintf(stderr, "icpp-train: cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    child = pid;
    janitor_say(janitor, 'P', pid);
    if (pending_sig)
        kill(pid, pending_sig);
    int wst;
    int pfd = prog->on ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    if (pfd >= 0) {
        struct pollfd q = {pfd, POLLIN, 0};
        for (;;) {
            int r = poll(&q, 1, 1000);
            if (r > 0 || (r < 0 && errno != EINTR))
                break;
            if (icpp_cli_progress_due(prog))
                train_progress(tdir, prog);
        }
        close(pfd);
    }
    while (waitpid(pid, &wst, 0) < 0)
        if (errno != EINTR)
            die(1, "waitpid: %s", strerror(errno));
    icpp_cli_progress_end(prog);
    child = -1;     /* reaped: its pid may be reused, never signal it again */
    return wst;
}

static void add_meta(icpp_pathmap *dst, const char *key, uint64_t v);

/* "int3-entries" counts are per process (docs/train.md): a part's add to
 * the ones already merged (merging keeps the first value of other keys). */
static void sum_int3_entries(icpp_pathmap *mine, const icpp_pathmap *part)
{
    for (size_t i = 0; i < icpp_pathmap_nmeta(part); i++) {
        const char *k = icpp_pathmap_meta_key(part, i);
        if (strncmp(k, "int3-entries", 12) || !icpp_pathmap_meta(mine, k))
            continue;
        add_meta(mine, k, strtoull(icpp_pathmap_meta(part, k), NULL, 10));
    }
}

/* ---- parts the agent could not write ---- */

/* DIR/lost.PID.TID.NS.ERRNO.NAME: thread TID of process PID (program
 * NAME) could not write its part at NS, for ERRNO (the agent makes it with
 * mknod: no descriptor, no byte, so under the limits that stopped the part). */
static int lost_name(const char *name, int *pid, int *tid, uint64_t *ns, int *err, const char **prog)
{
    int n = -1;
    if (sscanf(name, "lost.%d.%d.%" SCNu64 ".%d.%n", pid, tid, ns, err, &n) != 4 || n < 0)
        return -1;
    *prog = name + n;
    return 0;
}

static size_t recovered_unwritten;  /* live files recovered because a part could not be written */

static int lost_marked(char *const *names, size_t n, int pid, int tid, uint64_t live_ns)
{
    for (size_t i = 0; i < n; i++) {
        int p, t, e;
        uint64_t ns;
        const char *prog;
        if (!lost_name(names[i], &p, &t, &ns, &e, &prog) && p == pid && t == tid && ns >= live_ns)
            return 1;
    }
    return 0;
}

static const char *lost_why(int err)
{
    switch (err) {
    case EFBIG: return "file size limit (RLIMIT_FSIZE)";
    case EMFILE: return "open file limit (RLIMIT_NOFILE)";
    case ENFILE: return "the system's open file limit";
    case ENOSPC: return "no space left in the training directory";
    case EDQUOT: return "disk quota exceeded in the training directory";
    default: return strerror(err);
    }
}

/* One line per thread whose part the agent could not write: which, why,
 * and whether its live file still held its tree (docs/train.md). */
static void report_lost(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    size_t shown = 0, more = 0;
    while ((de = readdir(d)) != NULL) {
        int pid, tid, err;
        uint64_t ns;
        const char *prog;
        if (lost_name(de->d_name, &pid, &tid, &ns, &err, &prog) < 0)
            continue;
        if (shown == 20) {
            more++;
            continue;
        }
        /* Its live file stays when the part fails (and was recovered). */
        int live = 0, lp, lt;
        uint64_t lns;
        DIR *d2 = opendir(dir);
        struct dirent *e2;
        while (d2 && (e2 = readdir(d2)) != NULL)
            live |= icpp_recover_name(e2->d_name, "live.", &lp, &lt, &lns) == 0 && lp == pid && lt == tid && lns <= ns;
        if (d2)
            closedir(d2);
        char eb[256];
        fprintf(stderr, "icpp-train: pid %d (%s): thread %d's training could not be written: %s; %s\n", pid,
                icpp_escape(prog, eb, sizeof eb), tid, lost_why(err),
                live ? "its tree was recovered from its live file" : "it is lost");
        shown++;
    }
    closedir(d);
    if (more)
        fprintf(stderr, "icpp-train: and %zu more threads whose training could not be written\n", more);
}

/* Per-thread counters (docs/train.md): each part holds its thread's, the
 * map their sum over the run's threads (and over its runs, as "threads"). */
static const char *const thread_counters[] = {"entries", "entries-slow", "dropped-depth", "dropped-foreign",
                                              "dropped-reentrant", "node-overflow", "node-overflow-paths",
                                              "node-overflow-paths-more", "pair-overflow"};
#define NTHREAD_COUNTERS (sizeof thread_counters / sizeof *thread_counters)
static size_t overflow_threads;     /* threads whose tree memory was full */

/* A part's counters add to the ones already merged (merging keeps the
 * first value of a key; a key mine lacks comes with the merge). */
static void sum_thread_counts(icpp_pathmap *mine, const icpp_pathmap *part)
{
    const char *v = icpp_pathmap_meta(part, "node-overflow"), *w = icpp_pathmap_meta(part, "pair-overflow");
    overflow_threads += (v && strcmp(v, "0")) || (w && strcmp(w, "0"));
    for (size_t i = 0; mine && i < NTHREAD_COUNTERS; i++)
        if ((v = icpp_pathmap_meta(part, thread_counters[i])) && icpp_pathmap_meta(mine, thread_counters[i]))
            add_meta(mine, thread_counters[i], strtoull(v, NULL, 10));
}

/* Merge the part files of `dir`, and the live files of threads that wrote
 * no part (their process was killed: recover.h), into a map per main
 * binary; the one of `want` (build-id) goes to *mine (the first part
 * itself, when *mine is NULL), the others are reported.  A live file is
 * superseded by a part of the same thread written after it (PID, TID, and
 * a later NS). */
static int merge_parts(const char *dir, const icpp_build_id *want, icpp_pathmap **mine, size_t *nparts,
                       size_t *nthreads, size_t *nprocs, size_t *nrecovered, int quiet)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    struct dirent *de;
    char **names = NULL;
    size_t nnames = 0, cap = 0;
    while ((de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "part.", 5) && strncmp(de->d_name, "live.", 5) && strncmp(de->d_name, "lost.", 5))
            continue;
        if (icpp_vec_reserve((void **)&names, &cap, nnames + 1, sizeof *names, 64) < 0)
            die(1, "out of memory");
        if (!(names[nnames++] = strdup(de->d_name)))
            die(1, "out of memory");
    }
    closedir(d);
    uint32_t pids[4096];
    size_t npids = 0;
    for (size_t i = 0; i < nnames; i++) {
        const char *name = names[i];
        icpp_err err;
        icpp_pathmap *part;
        int pid, tid, recovered = 0;
        uint64_t ns;
        if (icpp_recover_name(name, "live.", &pid, &tid, &ns) == 0) {
            int superseded = 0, ppid, ptid;
            uint64_t pns;
            for (size_t k = 0; k < nnames && !superseded; k++)
                superseded = icpp_recover_name(names[k], "part.", &ppid, &ptid, &pns) == 0 && ppid == pid &&
                             ptid == tid && pns >= ns;
            if (superseded)
                continue;
            int empty;
            part = icpp_recover_live(dir, name, &empty, &err);
            if (!part) {
                if (!empty)
                    fprintf(stderr, "icpp-train: skipping %s: %s\n", name, err.msg);
                continue;
            }
            /* Not killed: the agent could not write the part (lost.*). */
            recovered = !lost_marked(names, nnames, pid, tid, ns);
            recovered_unwritten += !recovered;
        } else if (!strncmp(name, "part.", 5)) {
            char path[PATH_MAX + 256];
            snprintf(path, sizeof path, "%s/%s", dir, name);
            part = icpp_pathmap_read(path, &err);
            if (!part) {
                fprintf(stderr, "icpp-train: skipping %s: %s\n", name, err.msg);
                continue;
            }
        } else {
            continue;
        }
        const icpp_pm_module *mm = icpp_pathmap_module(part, icpp_pathmap_main(part));
        if (!mm || !icpp_build_id_eq(&mm->build_id, want)) {
            char eb[1024];
            if (!quiet)
                fprintf(stderr, "icpp-train: a process ran %s (another binary, e.g. after exec): its training is "
                                "not in this map; train that binary separately\n",
                        mm ? icpp_escape(mm->path, eb, sizeof eb) : "?");
            icpp_pathmap_free(part);
            continue;
        }
        if (*mine)
            sum_int3_entries(*mine, part);
        sum_thread_counts(*mine, part);
        if (*mine && icpp_pathmap_merge(*mine, part, &err) < 0)
            fprintf(stderr, "icpp-train: %s: %s\n", name, err.msg);
        const char *pidm = icpp_pathmap_meta(part, "pid");
        uint32_t p = pidm ? (uint32_t)strtoul(pidm, NULL, 10) : 0;
        size_t k;
        for (k = 0; k < npids && pids[k] != p; k++)
            ;
        if (k == npids && npids < 4096)
            pids[npids++] = p;
        (*nparts)++;
        (*nthreads)++;
        *nrecovered += (size_t)recovered;
        if (!*mine)
            *mine = part;
        else
            icpp_pathmap_free(part);
    }
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    *nprocs = npids;
    return 0;
}

/* Sum numeric metadata of src into dst (counts that add over runs). */
static void add_meta(icpp_pathmap *dst, const char *key, uint64_t v)
{
    const char *old = icpp_pathmap_meta(dst, key);
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, (uint64_t)(old ? strtoull(old, NULL, 10) : 0) + v);
    icpp_pathmap_set_meta(dst, key, buf);
}

static uint64_t meta_n(const icpp_pathmap *pm, const char *key)
{
    const char *v = icpp_pathmap_meta(pm, key);
    return v ? strtoull(v, NULL, 10) : 0;
}

/* The run's threads whose calling-context tree memory was full: what the
 * map lacks, and what to do (docs/train.md, "Tree memory"). */
static void overflow_warning(const icpp_pathmap *pm, size_t nthr)
{
    const char *mb = getenv("ICPP_TRAIN_MAX_MB");
    uint64_t lost = meta_n(pm, "node-overflow"), paths = meta_n(pm, "node-overflow-paths"),
             pairs = meta_n(pm, "pair-overflow"), all = meta_n(pm, "entries");
    fprintf(stderr,
            "icpp-train: warning: the tree memory of %zu thread%s was full (ICPP_TRAIN_MAX_MB=%s MiB per thread): "
            "%" PRIu64 " of %" PRIu64 " entries (%.1f%%) were not recorded, on %s%" PRIu64
            " call paths that found no room and every path below them",
            nthr, nthr == 1 ? "" : "s", mb && *mb ? mb : "1024", lost, all,
            all ? 100.0 * (double)lost / (double)all : 0.0, meta_n(pm, "node-overflow-paths-more") ? "more than " : "",
            paths);
    if (pairs)
        fprintf(stderr, ", %" PRIu64 " heights or call sites of recorded paths were dropped", pairs);
    double now = mb && strtod(mb, NULL) > 0 ? strtod(mb, NULL) : 1024;
    fprintf(stderr, "; set ICPP_TRAIN_MAX_MB higher (e.g. ICPP_TRAIN_MAX_MB=%.0f) and train again\n",
            now * 4 < 1 ? 1 : now * 4);
}

/* This run's map into the map as it is when locked (cur, or none). */
typedef struct run_merge {
    icpp_pathmap       *pm;         /* this run's */
    const icpp_build_id *want;
    const char         *exe, *out, *cmd;
    size_t              nprocs, nthreads;
    icpp_pathmap       *result;     /* what was written: cur or pm */
    size_t              old_paths;  /* cur's paths before the merge */
    char                note[1024];
} run_merge;

static int merge_run(void *arg, icpp_pathmap *cur, const icpp_pathmap **outp, icpp_err *err)
{
    run_merge *rm = arg;
    icpp_pathmap *result = rm->pm;
    if (cur) {
        const icpp_pm_module *mm = icpp_pathmap_module(cur, icpp_pathmap_main(cur));
        char eb[1024];
        if (mm && !icpp_build_id_eq(&mm->build_id, rm->want))
            return icpp_err_set(err, ICPP_EMISMATCH,
                                "%s is now the map of %s, not of %s (another build-id): use --fresh to replace it, "
                                "or another -o",
                                rm->out, icpp_escape(mm->path, eb, sizeof eb), rm->exe);
        rm->old_paths = icpp_pathmap_nnodes(cur) - 1;
    }
    /* The per-thread counters add over runs too; a map written before
     * they were summed holds one thread's: then the sum is not marked. */
    int had[NTHREAD_COUNTERS], summed = !cur || icpp_pathmap_meta(cur, "thread-counters") ||
                                        !icpp_pathmap_meta(cur, "entries");
    for (size_t i = 0; i < NTHREAD_COUNTERS; i++)
        had[i] = cur && icpp_pathmap_meta(cur, thread_counters[i]);
    if (cur) {
        if (icpp_pathmap_merge(cur, rm->pm, err) < 0)
            return -1;
        result = cur;
        for (size_t i = 0; i < NTHREAD_COUNTERS; i++) {
            const char *v = icpp_pathmap_meta(rm->pm, thread_counters[i]);
            if (had[i] && v)
                add_meta(cur, thread_counters[i], strtoull(v, NULL, 10));
        }
    }
    if (summed)
        icpp_pathmap_set_meta(result, "thread-counters", "summed");
    /* Names for people: symbols or a separate debug file, demangled C++. */
    if (icpp_names_refresh(result, rm->note, sizeof rm->note, err) < 0)
        return -1;
    add_meta(result, "runs", 1);
    add_meta(result, "processes", rm->nprocs);
    add_meta(result, "threads", rm->nthreads);
    if (!icpp_pathmap_meta(result, "program"))
        icpp_pathmap_set_meta(result, "program", rm->cmd);
    rm->result = result;
    *outp = result;
    return 0;
}

/* One training run: the command line, then what each phase of main makes. */
typedef struct train_run {
    const char   *out;              /* -o, or defmap */
    const char   *modules;          /* --modules */
    const char   *depth;            /* --max-depth, or NULL */
    int           fresh, quiet, verbose;
    const char   *prog;             /* PROG as given */
    char        **argv;             /* PROG ARGS */
    int           argc;
    char         *exe;              /* PROG found (find_in_path) */
    icpp_module  *mod;
    icpp_build_id want;             /* its build-id: the map's must be the same */
    char          defmap[PATH_MAX]; /* basename(PROG).icppmap */
    icpp_pathmap *old;              /* the map as it was (read to refuse a wrong one early), or NULL */
    char         *agent, *preload;
    char          tdir[PATH_MAX];   /* where the agent writes its parts */
    int           status;           /* icpp-train's exit status: PROG's */
    icpp_pathmap *pm;               /* this run's map, merged from the parts */
    size_t        nparts, nthreads, nprocs, nrecovered;
} train_run;

/* The command line into t.  -1: go on; else the exit status (--stats,
 * --paths, --help, --version, bad usage). */
static int parse_options(int argc, char **argv, train_run *t)
{
    enum { OPT_MODULES = 256, OPT_FRESH, OPT_STATS, OPT_DEPTH, OPT_PATHS, OPT_VERSION };
    static const struct option lo[] = {{"output", required_argument, 0, 'o'},
                                       {"modules", required_argument, 0, OPT_MODULES},
                                       {"fresh", no_argument, 0, OPT_FRESH},
                                       {"stats", required_argument, 0, OPT_STATS},
                                       {"paths", required_argument, 0, OPT_PATHS},
                                       {"max-depth", required_argument, 0, OPT_DEPTH},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"verbose", no_argument, 0, 'v'},
                                       {"version", no_argument, 0, OPT_VERSION},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
    int c;
    t->modules = "all";
    while ((c = getopt_long(argc, argv, "+o:qvh", lo, NULL)) != -1) {
        switch (c) {
        case 'o': t->out = optarg; break;
        case OPT_MODULES:
            if (!*optarg || *optarg == ',' || optarg[strlen(optarg) - 1] == ',' || strstr(optarg, ",,"))
                die(2, "--modules wants main, all or a comma list of library names, not '%s'", optarg);
            t->modules = optarg;
            break;
        case OPT_FRESH: t->fresh = 1; break;
        case OPT_STATS: return print_stats(optarg);
        case OPT_PATHS: return print_paths(optarg);
        case OPT_DEPTH: {
            uint64_t v;
            if (icpp_cli_u64(optarg, 10, 1, 1ul << 26, &v) < 0)
                die(2, "--max-depth wants a number of frames from 1 to %lu, not '%s'", 1ul << 26, optarg);
            t->depth = optarg;
            break;
        }
        case 'q': t->quiet = 1; break;
        case 'v': t->verbose = 1; break;
        case OPT_VERSION: icpp_cli_version(stdout, "icpp-train"); return 0;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "icpp-train: no program to run (see --help)\n");
        return 2;
    }
    t->prog = argv[optind];
    t->argv = argv + optind;
    t->argc = argc - optind;
    return -1;
}

/* PROG found, opened, and fit for training: dynamically linked, with a build-id. */
static void open_program(train_run *t)
{
    icpp_err err;
    if (!(t->exe = find_in_path(t->prog)))
        die(127, "%s: no such program (not found, or not executable)", t->prog);
    if (!(t->mod = icpp_module_open(t->exe, &err)))
        die(1, "%s", err.msg);
    if (icpp_module_is_static(t->mod))
        die(1, "%s is statically linked: icpp-train trains dynamically linked programs (it preloads its agent "
               "with LD_PRELOAD, which a static binary never reads); link it dynamically to train it",
            t->exe);
    t->want = *icpp_module_build_id(t->mod);
    if (!t->want.len)
        die(1, "%s has no GNU build-id: ICPP names binaries by build-id (link with -Wl,--build-id)", t->exe);
}

/* The map: checked before the program runs, so a bad one costs nothing. */
static void check_map(train_run *t)
{
    icpp_err err;
    if (!t->out) {
        char *b = strdup(t->exe);
        snprintf(t->defmap, sizeof t->defmap, "%s.icppmap", basename(b));
        free(b);
        t->out = t->defmap;
    }
    /* The output rule and the same-file rule (lib/fsafe.h), before the
     * program runs: the map is never the program (nor, below, the agent). */
    const char *exe_in = t->exe;
    if (icpp_fs_output_check(t->out, &err) < 0 || icpp_fs_output_not_input(t->out, &exe_in, 1, &err) < 0)
        die(1, "%s", err.msg);
    struct stat st;
    if (!t->fresh && stat(t->out, &st) == 0) {
        if (!(t->old = icpp_pathmap_read(t->out, &err)))
            die(1, "%s (use --fresh to replace it, or another -o)", err.msg);
        const icpp_pm_module *mm = icpp_pathmap_module(t->old, icpp_pathmap_main(t->old));
        char eb[1024];
        if (mm && !icpp_build_id_eq(&mm->build_id, &t->want))
            die(1, "%s is the map of %s, not of %s (another build-id): use --fresh to replace it, or another -o",
                t->out, icpp_escape(mm->path, eb, sizeof eb), t->exe);
    }
    char *outdup = strdup(t->out), *outdir = dirname(outdup);
    if (access(outdir, W_OK) != 0)
        die(1, "%s: cannot write in %s: %s", t->out, outdir, strerror(errno));
    free(outdup);
}

/* The agent found and checked, the training directory made, and the
 * environment PROG runs in: the agent preloaded, told where to write. */
static void prepare_agent(train_run *t)
{
    icpp_err err;
    if (!(t->agent = agent_path()))
        die(1, "cannot find libicpp-agent.so next to icpp-train, nor installed (" ICPP_AGENT_PATH "): set ICPP_AGENT to its path");
    if (icpp_fs_check_regular(t->agent, &err) < 0)      /* ld.so would block on a FIFO */
        die(1, "ICPP_AGENT: %s", err.msg);
    const char *agent_in = t->agent;
    if (icpp_fs_output_not_input(t->out, &agent_in, 1, &err) < 0)
        die(1, "%s", err.msg);

    if (make_train_dir(t->tdir, sizeof t->tdir) < 0)
        die(1, "cannot make a temporary directory in $TMPDIR, /dev/shm or /tmp: %s", strerror(errno));

    const char *pre = getenv("LD_PRELOAD");
    if (asprintf(&t->preload, "%s%s%s", t->agent, pre && *pre ? ":" : "", pre ? pre : "") < 0)
        die(1, "out of memory");
    setenv("LD_PRELOAD", t->preload, 1);
    setenv("ICPP_TRAIN_DIR", t->tdir, 1);
    setenv("ICPP_TRAIN_MODULES", t->modules, 1);
    if (t->depth)
        setenv("ICPP_TRAIN_MAX_DEPTH", t->depth, 1);
    if (t->verbose)
        setenv("ICPP_TRAIN_VERBOSE", "1", 1);
}

/* Run PROG; then merge the parts (and what live files recover) into
 * t->pm, and say how PROG ended.  0, or 1 when no training data came back
 * (said on stderr; the map is unchanged). */
static int run_and_collect(train_run *t)
{
    /* Like system(): the terminal's ^C and ^\ reach the program, which
     * decides; termination requests sent to icpp-train are passed on. */
    int janitor = janitor_start(t->tdir);
    icpp_cli_progress progress;
    icpp_cli_progress_init(&progress, "icpp-train", t->quiet);
    int wst = run_target(t->exe, t->argv, janitor, t->tdir, &progress);
    t->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);

    /* Merge: the parts (and what live files recover), then the previous map. */
    if (merge_parts(t->tdir, &t->want, &t->pm, &t->nparts, &t->nthreads, &t->nprocs, &t->nrecovered, t->quiet) < 0)
        die(1, "cannot read the training data in %s", t->tdir);
    if (!t->quiet)
        report_lost(t->tdir);
    icpp_fs_remove_tree(t->tdir);
    janitor_say(janitor, 'D', 0);
    const char *prog = t->prog;
    size_t nrec = t->nrecovered;
    if (!t->quiet && WIFSIGNALED(wst) && nrec)
        fprintf(stderr, "icpp-train: %s was killed by signal %d (%s); recovered the trees of %zu thread%s from its "
                        "live files\n",
                prog, WTERMSIG(wst), strsignal(WTERMSIG(wst)), nrec, nrec == 1 ? "" : "s");
    else if (!t->quiet && WIFSIGNALED(wst))
        fprintf(stderr, "icpp-train: %s was killed by signal %d (%s)\n", prog, WTERMSIG(wst), strsignal(WTERMSIG(wst)));
    else if (!t->quiet && nrec)
        fprintf(stderr, "icpp-train: a process of %s was killed; recovered the trees of %zu thread%s from live "
                        "files\n",
                prog, nrec, nrec == 1 ? "" : "s");
    if (t->nparts == 0) {
        int listed = strcmp(t->modules, "all") && strcmp(t->modules, "main");
        fprintf(stderr, "icpp-train: no training data came back from %s%s; %s is unchanged%s%s%s\n", prog,
                WIFSIGNALED(wst) ? " (killed before it recorded anything)" : "", t->out,
                listed ? " (--modules " : "", listed ? t->modules : "",
                listed ? ": no module the program loaded has such a name; give main, all, or names of libraries it "
                         "loads, e.g. libc.so.6)" : "");
        return 1;
    }
    return 0;
}

/* This run into the map as it is now, under its lock (lib/pathmap.h):
 * other runs may have added to it while this one ran; then the summary
 * on stderr.  0, or 1 (said on stderr). */
static int merge_and_say(train_run *t)
{
    icpp_err err;
    char cmd[1024] = "";
    size_t o = 0;
    for (int i = 0; i < t->argc && o < sizeof cmd - 2; i++)
        o += (size_t)snprintf(cmd + o, sizeof cmd - o, "%s%s", i > 0 ? " " : "", t->argv[i]);
    run_merge rm = {.pm = t->pm, .want = &t->want, .exe = t->exe, .out = t->out, .cmd = cmd, .nprocs = t->nprocs,
                    .nthreads = t->nthreads};
    if (t->old)
        icpp_pathmap_free(t->old);         /* read to refuse a wrong map early; merged as it is now below */
    if (icpp_pathmap_update(t->out, t->fresh, merge_run, &rm, &t->old, &err) < 0) {
        fprintf(stderr, "icpp-train: %s%s\n", err.msg,
                err.code == ICPP_EFORMAT ? " (use --fresh to replace it, or another -o)" : "");
        return 1;
    }
    if (rm.note[0] && !t->quiet)
        fprintf(stderr, "icpp-train: note: %s\n", rm.note);
    if (!t->quiet) {
        icpp_pm_stats s;
        icpp_pathmap_stats(rm.result, &s, &err);
        const char *refused = icpp_pathmap_meta(t->pm, "patched-none");
        int some = refused && strcmp(refused, "0");
        fprintf(stderr,
                "icpp-train: %s: %zu call paths (%zu new), %zu functions, %zu processes, %zu threads; "
                "unique CIDs: %.1f%% of paths, %.1f%% of calls%s%s%s\n",
                t->out, s.paths, s.paths - rm.old_paths, s.funcs, t->nprocs, t->nthreads,
                s.paths ? 100.0 * (double)s.unique_paths / (double)s.paths : 0.0,
                s.calls ? 100.0 * (double)s.unique_calls / (double)s.calls : 0.0,
                some ? "; functions not hookable: " : "", some ? refused : "", some ? " (--stats)" : "");
    }
    if (!t->quiet && overflow_threads)
        overflow_warning(t->pm, overflow_threads);
    if (t->verbose)
        print_int3(stderr, t->pm, "icpp-train: int3: ");
    return 0;
}

int main(int argc, char **argv)
{
    static train_run t;
    int status = parse_options(argc, argv, &t);
    if (status >= 0)
        return status;
    open_program(&t);
    check_map(&t);
    prepare_agent(&t);
    if (run_and_collect(&t))
        return t.status ? t.status : 1;
    if (merge_and_say(&t))
        return 1;
    icpp_pathmap_free(t.pm);
    if (t.old)
        icpp_pathmap_free(t.old);
    icpp_module_close(t.mod);
    free(t.exe);
    free(t.agent);
    free(t.preload);
    return t.status;
}
