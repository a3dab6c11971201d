/* icpp-gt.c -- ground truth: the true call path of every sample of a program.
 *
 * Usage: icpp-gt [-F FREQ | -c PERIOD_NS] [-o OUT] [--max-samples N]
 *                [--stack-size BYTES] -- PROG [ARGS...]
 *
 * Runs PROG under perf_event_open (software cpu-clock, user space only,
 * inherited by threads and forked children), copies the user registers and
 * up to 64 KiB of user stack with every sample, and unwinds each sample with
 * DWARF CFI (gt_unwind.c) against its process's mappings at that instant
 * (gt_proc.c).  Writes one text line per sample; the format is in README.md
 * and parsed by gt.py.  Independent of lib/ on purpose: it is what ICPP's
 * accuracy is measured against.  Exit status: PROG's (128+N if killed by
 * signal N); 125 if icpp-gt itself failed, 126/127 if PROG could not run. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gt_module.h"
#include "gt_proc.h"
#include "gt_ring.h"
#include "gt_unwind.h"

#define GT_FORMAT_VERSION 1
#define MAX_FRAMES 1024

/* perf register order for sample_regs_user = AX..IP, R8..R15 (mask 0xff01ff),
 * mapped to DWARF numbers. */
static const int perf_to_dwarf[17] = {0, 3, 2, 1, 4, 5, 6, 7, 16,
                                      8, 9, 10, 11, 12, 13, 14, 15};
#define REGS_MASK 0xff01ffULL

static struct {
    FILE     *out;
    pid_t     child;
    uint64_t  t_ready;          /* CLOCK_MONOTONIC ns at the exec stop */
    long      max_samples;      /* 0 = no limit */
    gt_rings *rings;
    uint64_t  nsamples, nlost, nlost_records, nthrottle, nlost_samples;
    uint64_t  nstatus[GT_DEPTH + 1];
    int       next_obj;
    bool      disabled;
    gt_frame  frames[MAX_FRAMES];
} g;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("icpp-gt: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (g.child > 0)
        kill(g.child, SIGKILL);
    exit(125);
}

static void usage(FILE *f, int code) __attribute__((noreturn));
static void usage(FILE *f, int code)
{
    fputs("usage: icpp-gt [-F FREQ | -c PERIOD_NS] [-o OUT] [--max-samples N]\n"
          "               [--stack-size BYTES] -- PROG [ARGS...]\n"
          "Samples PROG (cpu-clock, user space) and writes the true call path of\n"
          "each sample, unwound with DWARF CFI, to OUT (default icpp-gt.out).\n"
          "  -F FREQ          samples per second of CPU time (default 1000)\n"
          "  -c PERIOD_NS     sample every PERIOD_NS ns of CPU time instead\n"
          "  -o OUT           output file ('-' = stdout)\n"
          "  --max-samples N  stop sampling after N samples\n"
          "  --stack-size B   user stack bytes copied per sample (default 65528)\n"
          "Format: tests/gt/README.md.  Exit status: PROG's.\n", f);
    exit(code);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int read_int_file(const char *path)
{
    FILE *f = fopen(path, "re");
    int v = -99;
    if (f) {
        if (fscanf(f, "%d", &v) != 1)
            v = -99;
        fclose(f);
    }
    return v;
}

/* Explain a perf_event_open failure: the cause and what to do. */
static void explain_perf_error(int err)
{
    int paranoid = read_int_file("/proc/sys/kernel/perf_event_paranoid");
    fprintf(stderr, "icpp-gt: perf_event_open(cpu-clock, user space, pid %d): %s\n",
            (int)g.child, strerror(err));
    if (err == EACCES || err == EPERM) {
        fprintf(stderr,
            "icpp-gt: cause: the kernel refused to let this user sample its own child.\n"
            "icpp-gt:   kernel.perf_event_paranoid is %d; sampling user space of one's\n"
            "icpp-gt:   own processes needs <= 2 (or CAP_PERFMON / root).  A container's\n"
            "icpp-gt:   seccomp profile or an LSM can also block perf_event_open.\n"
            "icpp-gt: fix: as root, `sysctl kernel.perf_event_paranoid=2`; in a container,\n"
            "icpp-gt:   allow perf_event_open (e.g. docker --cap-add PERFMON or\n"
            "icpp-gt:   --security-opt seccomp=unconfined), or run icpp-gt as root.\n",
            paranoid);
    } else if (err == ENOENT || err == ENODEV || err == EOPNOTSUPP) {
        fprintf(stderr, "icpp-gt: cause: this kernel has no software cpu-clock event"
                        " (perf events disabled?).\n");
    } else if (err == ENOSYS) {
        fprintf(stderr, "icpp-gt: cause: kernel built without perf events"
                        " (CONFIG_PERF_EVENTS).\n");
    }
}

static void open_events(bool freq, uint64_t rate, uint32_t *stack_size)
{
    for (;;) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.freq = freq;
        a.sample_period = rate;     /* union with sample_freq */
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                        PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
                        PERF_SAMPLE_STACK_USER;
        a.sample_regs_user = REGS_MASK;
        a.sample_stack_user = *stack_size;
        a.disabled = 1;
        a.enable_on_exec = 1;
        a.inherit = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        a.exclude_callchain_kernel = 1;
        a.mmap = 1;
        a.mmap2 = 1;
        a.mmap_data = 1;        /* anonymous mappings: thread stacks */
        a.comm = 1;
        a.comm_exec = 1;
        a.task = 1;
        a.sample_id_all = 1;
        a.watermark = 1;
        a.wakeup_watermark = 1 << 20;
        a.use_clockid = 1;      /* timestamps comparable with our own clock */
        a.clockid = CLOCK_MONOTONIC;
        int err;
        const char *what;
        g.rings = gt_rings_open(&a, g.child, &err, &what);
        if (g.rings)
            return;
        if (err == EINVAL && *stack_size > 4096 && what[0] == 'p') {
            *stack_size = (*stack_size / 2) & ~7u;   /* as large as accepted */
            continue;
        }
        if (what[0] == 'p') {
            explain_perf_error(err);
        } else {
            fprintf(stderr, "icpp-gt: %s failed even at 128 KiB per CPU: %s\n"
                    "icpp-gt: fix: raise `ulimit -l` or kernel.perf_event_mlock_kb"
                    " (now %d)\n", what, strerror(err),
                    read_int_file("/proc/sys/kernel/perf_event_mlock_kb"));
        }
        kill(g.child, SIGKILL);
        exit(125);
    }
}

/* ---- output ---------------------------------------------------------- */

static int obj_index(gt_module *m)
{
    if (m->index < 0) {
        m->index = g.next_obj++;
        fprintf(g.out, "O %d %s %s\n", m->index, m->build_id[0] ? m->build_id : "-",
                m->path);
        if (!m->ok || m->error[0])
            fprintf(g.out, "# object %d: %s\n", m->index, m->error);
    }
    return m->index;
}

static void put_base_line(gt_proc *p, uint64_t time)
{
    fprintf(g.out, "B %d %llu ", p->pid, (unsigned long long)time);
    if (p->startstack)
        fprintf(g.out, "%llx %s\n", (unsigned long long)p->startstack, p->base_kind);
    else
        fprintf(g.out, "- %s\n", p->base_kind);
}

static void put_map_line(int pid, uint64_t time, uint64_t start, uint64_t end,
                         uint64_t pgoff, uint32_t prot, const char *path)
{
    if (!(prot & PROT_EXEC))
        return;
    fprintf(g.out, "M %d %llu %llx %llx %llx %c%c%c %s\n", pid,
            (unsigned long long)time, (unsigned long long)start,
            (unsigned long long)end, (unsigned long long)pgoff,
            prot & PROT_READ ? 'r' : '-', prot & PROT_WRITE ? 'w' : '-',
            prot & PROT_EXEC ? 'x' : '-', path && *path ? path : "-");
}

/* ---- records --------------------------------------------------------- */

struct sample_id { uint32_t pid, tid; uint64_t time; };

/* The sample_id_all trailer of a non-sample record (TID, TIME). */
static struct sample_id trailer_id(const struct perf_event_header *h)
{
    struct sample_id id = {0};
    if (h->size >= sizeof *h + sizeof id)
        memcpy(&id, (const uint8_t *)h + h->size - sizeof id, sizeof id);
    return id;
}

static void on_sample(const struct perf_event_header *h)
{
    const uint8_t *p = (const uint8_t *)(h + 1), *end = (const uint8_t *)h + h->size;
#define TAKE(dst, n) do { if (end - p < (ptrdiff_t)(n)) return; memcpy(dst, p, n); p += (n); } while (0)
    uint64_t ip, time, nr, abi = 0, size = 0, dyn = 0;
    uint32_t pidtid[2];
    TAKE(&ip, 8);
    TAKE(pidtid, 8);
    TAKE(&time, 8);
    TAKE(&nr, 8);
    if ((uint64_t)(end - p) / 8 < nr)
        return;
    const uint64_t *chain = (const uint64_t *)p;
    p += nr * 8;
    gt_regs regs = {.valid = 0};
    TAKE(&abi, 8);
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        for (int i = 0; i < 17; i++) {
            TAKE(&regs.r[perf_to_dwarf[i]], 8);
            regs.valid |= 1u << perf_to_dwarf[i];
        }
    }
    TAKE(&size, 8);
    const uint8_t *stack = p;
    if (size) {
        if ((uint64_t)(end - p) < size + 8)
            return;
        p += size;
        TAKE(&dyn, 8);
        if (dyn > size)
            dyn = size;
    }
#undef TAKE
    if (g.disabled)
        return;
    int pid = (int)pidtid[0], tid = (int)pidtid[1];
    gt_proc *proc = gt_proc_get(pid);
    if (proc->exec_pending) {
        /* First sample after an exec: the new image's startstack is set by
         * now; read it while the process (hopefully) still lives. */
        proc->exec_pending = false;
        if (gt_proc_read_startstack(pid, &proc->startstack) == 0)
            proc->base_kind = "exec";
        put_base_line(proc, time);
    }
    uint64_t sp = regs.r[GT_RSP], bp = regs.r[GT_RBP], base = 0;
    const char *kind = "unknown";
    if (pid == tid) {
        base = proc->startstack;
        kind = proc->base_kind;
    } else if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        const gt_map *m = gt_proc_map_at(proc, sp);
        if (m) {
            base = m->end;
            kind = "map";
        }
    }
    if (!base)
        kind = "unknown";

    gt_stack st = {.sp = sp, .data = stack, .size = dyn};
    int n = 0;
    gt_status s = gt_unwind(&regs, &st, gt_proc_module_at, proc, g.frames,
                            MAX_FRAMES, &n);
    g.nstatus[s]++;
    g.nsamples++;
    for (int i = 0; i < n; i++)
        if (g.frames[i].mod)
            obj_index(g.frames[i].mod);

    FILE *o = g.out;
    fprintf(o, "S %d %d %llu %llx %llx %llx ", pid, tid, (unsigned long long)time,
            (unsigned long long)ip, (unsigned long long)sp, (unsigned long long)bp);
    if (base)
        fprintf(o, "%llx", (unsigned long long)base);
    else
        fputc('-', o);
    fprintf(o, " %s %s %d %llu", kind, gt_status_name(s), n, (unsigned long long)dyn);
    for (int i = n; i-- > 0;) {      /* root first */
        const gt_frame *f = &g.frames[i];
        fputs(" | ", o);
        if (f->mod)
            fprintf(o, "%d:", f->mod->index);
        else
            fputs("-:", o);
        if (f->func_known)
            fprintf(o, "%llx:", (unsigned long long)f->func);
        else
            fputs("-:", o);
        fprintf(o, "%llx:", (unsigned long long)f->pc);
        if (f->cfa)
            fprintf(o, "%llx:", (unsigned long long)(f->cfa - 8));
        else
            fputs("-:", o);
        fprintf(o, "%s:%s", f->cfa_rule, f->name ? f->name : "?");
    }
    fputs(" | K", o);
    for (uint64_t i = 0; i < nr; i++)
        if (chain[i] < (uint64_t)PERF_CONTEXT_MAX)
            fprintf(o, " %llx", (unsigned long long)chain[i]);
    fputc('\n', o);

    if (g.max_samples && g.nsamples >= (uint64_t)g.max_samples) {
        gt_rings_disable(g.rings);
        g.disabled = true;
    }
}

static void on_record(const struct perf_event_header *h)
{
    const uint8_t *body = (const uint8_t *)(h + 1);
    struct sample_id id;
    switch (h->type) {
    case PERF_RECORD_SAMPLE:
        on_sample(h);
        break;
    case PERF_RECORD_MMAP2: {
        struct { uint32_t pid, tid; uint64_t addr, len, pgoff;
                 uint32_t maj, min; uint64_t ino, ino_gen; uint32_t prot, flags; } r;
        if (h->size < sizeof *h + sizeof r)
            break;
        memcpy(&r, body, sizeof r);
        const char *name = (const char *)body + sizeof r;
        id = trailer_id(h);
        gt_proc_map(gt_proc_get((int)r.pid), r.addr, r.addr + r.len, r.pgoff,
                    r.prot, name);
        put_map_line((int)r.pid, id.time, r.addr, r.addr + r.len, r.pgoff,
                     r.prot, name);
        break;
    }
    case PERF_RECORD_MMAP: {    /* not expected with mmap2 = 1 */
        struct { uint32_t pid, tid; uint64_t addr, len, pgoff; } r;
        if (h->size < sizeof *h + sizeof r)
            break;
        memcpy(&r, body, sizeof r);
        const char *name = (const char *)body + sizeof r;
        id = trailer_id(h);
        gt_proc_map(gt_proc_get((int)r.pid), r.addr, r.addr + r.len, r.pgoff,
                    PROT_READ | PROT_EXEC, name);
        put_map_line((int)r.pid, id.time, r.addr, r.addr + r.len, r.pgoff,
                     PROT_READ | PROT_EXEC, name);
        break;
    }
    case PERF_RECORD_COMM: {
        struct { uint32_t pid, tid; } r;
        memcpy(&r, body, sizeof r);
        const char *comm = (const char *)body + sizeof r;
        id = trailer_id(h);
        if (!(h->misc & PERF_RECORD_MISC_COMM_EXEC))
            break;
        /* The launched program's own exec happened before the exec stop,
         * where its maps and startstack were read: nothing to redo. */
        if ((pid_t)r.pid == g.child && id.time <= g.t_ready)
            break;
        gt_proc *p = gt_proc_get((int)r.pid);
        gt_proc_exec(p);
        fprintf(g.out, "P %llu exec %u %s\n", (unsigned long long)id.time, r.pid, comm);
        break;
    }
    case PERF_RECORD_FORK: {
        struct { uint32_t pid, ppid, tid, ptid; uint64_t time; } r;
        memcpy(&r, body, sizeof r);
        if (r.pid == r.tid && r.pid != r.ppid) {
            gt_proc *c = gt_proc_fork(gt_proc_get((int)r.ppid), (int)r.pid);
            fprintf(g.out, "P %llu fork %u %u\n", (unsigned long long)r.time,
                    r.pid, r.ppid);
            put_base_line(c, r.time);
        } else {
            fprintf(g.out, "P %llu thread %u %u\n", (unsigned long long)r.time,
                    r.pid, r.tid);
        }
        break;
    }
    case PERF_RECORD_EXIT: {
        struct { uint32_t pid, ppid, tid, ptid; uint64_t time; } r;
        memcpy(&r, body, sizeof r);
        fprintf(g.out, "P %llu exit %u %u\n", (unsigned long long)r.time, r.pid, r.tid);
        break;
    }
    case PERF_RECORD_LOST: {
        struct { uint64_t id, lost; } r;
        memcpy(&r, body, sizeof r);
        g.nlost += r.lost;
        g.nlost_records++;
        /* mmap records may be among the lost: trust /proc again. */
        fprintf(g.out, "# lost %llu records; re-read the maps of %d processes\n",
                (unsigned long long)r.lost, gt_proc_resync());
        break;
    }
    case PERF_RECORD_LOST_SAMPLES: {
        uint64_t lost;
        memcpy(&lost, body, sizeof lost);
        g.nlost_samples += lost;
        break;
    }
    case PERF_RECORD_THROTTLE:
        g.nthrottle++;
        break;
    default:
        break;
    }
}

/* Handle the queued records up to time UNTIL; return how many. */
static size_t handle_until(uint64_t until)
{
    size_t n = 0;
    const struct perf_event_header *h;
    while ((h = gt_rings_next(g.rings, until))) {
        on_record(h);
        n++;
    }
    return n;
}

/* ---- launching ------------------------------------------------------- */

static void forward_signal(int sig)
{
    if (g.child > 0)
        kill(g.child, sig);
}

/* Child side: one ptrace stop before exec (so the parent can open the
 * event), then the exec stop (so it can read startstack and the maps). */
static void run_child(char **argv)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
        fprintf(stderr, "icpp-gt: ptrace(PTRACE_TRACEME): %s\n"
                "icpp-gt: cause: ptrace is restricted here (Yama ptrace_scope=3,"
                " a seccomp profile or an LSM).\n"
                "icpp-gt: fix: allow ptrace of one's own children (e.g."
                " `sysctl kernel.yama.ptrace_scope=1`, or docker"
                " --cap-add SYS_PTRACE).\n", strerror(errno));
        _exit(125);
    }
    raise(SIGSTOP);
    execvp(argv[0], argv);
    int err = errno;
    fprintf(stderr, "icpp-gt: cannot run %s: %s\n", argv[0], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 125;
}

/* Wait for the child's next ptrace stop with signal SIG; if it exits
 * instead, leave with its exit status (it printed why). */
static void wait_stop(int sig)
{
    for (;;) {
        int st;
        if (waitpid(g.child, &st, 0) < 0)
            die("waitpid: %s", strerror(errno));
        if (WIFEXITED(st) || WIFSIGNALED(st)) {
            g.child = 0;
            exit(exit_code(st));
        }
        if (WIFSTOPPED(st) && WSTOPSIG(st) == sig)
            return;
        if (WIFSTOPPED(st))     /* some other signal: deliver it */
            ptrace(PTRACE_CONT, g.child, NULL, (void *)(long)WSTOPSIG(st));
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"max-samples", required_argument, NULL, 'm'},
        {"stack-size", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *outpath = "icpp-gt.out";
    bool freq = true;
    uint64_t rate = 1000;
    uint32_t stack_size = 65528;
    int c;
    while ((c = getopt_long(argc, argv, "+F:c:o:h", opts, NULL)) != -1) {
        char *e = "";
        switch (c) {
        case 'F': freq = true;  rate = strtoull(optarg, &e, 10); break;
        case 'c': freq = false; rate = strtoull(optarg, &e, 10); break;
        case 'o': outpath = optarg; break;
        case 'm': g.max_samples = strtol(optarg, &e, 10); break;
        case 's': stack_size = (uint32_t)strtoul(optarg, &e, 10) & ~7u; break;
        case 'h': usage(stdout, 0);
        default:  usage(stderr, 125);
        }
        if (*e || ((c == 'F' || c == 'c') && rate == 0))
            usage(stderr, 125);
    }
    if (optind >= argc)
        usage(stderr, 125);
    if (stack_size < 8 || stack_size > 65528)
        die("--stack-size must be 8..65528");

    if (strcmp(outpath, "-") == 0) {
        g.out = stdout;
    } else {
        int fd = open(outpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || !(g.out = fdopen(fd, "w")))
            die("cannot write %s: %s", outpath, strerror(errno));
    }
    setvbuf(g.out, NULL, _IOFBF, 1 << 20);

    signal(SIGINT, SIG_IGN);        /* the terminal signals the child too */
    signal(SIGQUIT, SIG_IGN);
    signal(SIGTERM, forward_signal);
    signal(SIGHUP, forward_signal);

    fflush(NULL);
    g.child = fork();
    if (g.child < 0)
        die("fork: %s", strerror(errno));
    if (g.child == 0)
        run_child(argv + optind);

    wait_stop(SIGSTOP);
    open_events(freq, rate, &stack_size);
    if (ptrace(PTRACE_CONT, g.child, NULL, NULL) != 0)
        die("ptrace(PTRACE_CONT): %s", strerror(errno));
    wait_stop(SIGTRAP);         /* after a successful exec */
    g.t_ready = now_ns();

    gt_proc *root = gt_proc_get(g.child);
    int err = gt_proc_read_maps(root);
    if (err)
        die("reading /proc/%d/maps: %s", (int)g.child, strerror(-err));
    err = gt_proc_read_startstack(g.child, &root->startstack);
    if (err)
        die("reading startstack of /proc/%d/stat: %s", (int)g.child, strerror(-err));
    root->base_kind = "startstack";

    fprintf(g.out, "# icpp-gt %d\n", GT_FORMAT_VERSION);
    fprintf(g.out, "H version=%d pid=%d %s=%llu stack_user=%u ring=%zux%d event=cpu-clock"
            " clock=monotonic max_stack=%d cmd=", GT_FORMAT_VERSION, (int)g.child,
            freq ? "freq" : "period", (unsigned long long)rate, stack_size, gt_rings_size(g.rings),
            gt_rings_count(g.rings),
            read_int_file("/proc/sys/kernel/perf_event_max_stack"));
    for (int i = optind; i < argc; i++)
        fprintf(g.out, "%s%s", i > optind ? " " : "", argv[i]);
    fputc('\n', g.out);
    for (size_t i = 0; i < root->nmaps; i++) {
        const gt_map *m = &root->maps[i];
        put_map_line(root->pid, g.t_ready, m->start, m->end, m->pgoff, m->prot, m->path);
    }
    put_base_line(root, g.t_ready);

    if (ptrace(PTRACE_DETACH, g.child, NULL, NULL) != 0)
        die("ptrace(PTRACE_DETACH): %s", strerror(errno));

    /* Records are handled in time order across CPUs: each round handles
     * what is older than the previous round's start, as everything stamped
     * before then has surely reached its ring by now. */
    int pidfd = pidfd_open(g.child, 0);
    int status = 0;
    uint64_t prev = now_ns();
    for (;;) {
        gt_rings_wait(g.rings, pidfd, pidfd >= 0 ? 50 : 20);
        uint64_t t = now_ns();
        gt_rings_fill(g.rings);
        handle_until(prev);
        prev = t;
        int st;
        pid_t w = waitpid(g.child, &st, WNOHANG);
        if (w == g.child && (WIFEXITED(st) || WIFSIGNALED(st))) {
            status = exit_code(st);
            break;
        }
        if (w < 0 && errno != EINTR)
            die("waitpid: %s", strerror(errno));
    }
    g.child = 0;
    gt_rings_fill(g.rings);
    handle_until(UINT64_MAX);
    gt_rings_close(g.rings);

    uint64_t complete = g.nstatus[GT_ROOT] + g.nstatus[GT_RA0];
    fprintf(g.out, "T samples=%llu complete=%llu lost=%llu lost_records=%llu"
            " lost_samples=%llu throttled=%llu",
            (unsigned long long)g.nsamples, (unsigned long long)complete,
            (unsigned long long)g.nlost, (unsigned long long)g.nlost_records,
            (unsigned long long)g.nlost_samples, (unsigned long long)g.nthrottle);
    for (int s = 0; s <= GT_DEPTH; s++)
        fprintf(g.out, " %s=%llu", gt_status_name(s), (unsigned long long)g.nstatus[s]);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(g.out, " exit=%d self_cpu_ms=%ld\n", status,
            (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
            (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000);
    if (fclose(g.out) != 0)
        die("writing %s: %s", outpath, strerror(errno));
    if (g.nlost)
        fprintf(stderr, "icpp-gt: %llu samples lost (ring buffer full)\n",
                (unsigned long long)g.nlost);
    gt_module_free_all();
    gt_proc_free_all();
    return status;
}
