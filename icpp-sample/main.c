/* main.c -- icpp-sample: record PC, SP and BP per sample through perf_event_open, nothing else. */
#include "autoperiod.h"
#include "cli.h"
#include "escape.h"
#include "defs.h"
#include "events.h"
#include "fsafe.h"
#include "hmap.h"
#include "jitter.h"
#include "module.h"
#include "perfrec.h"
#include "perfring.h"
#include "procmaps.h"
#include "replay.h"
#include "runinfo.h"
#include "samples.h"
#include "stackwalk.h"
#include "tqueue.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <limits.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 16     /* 8 named events and their learn events */
#define MAX_NAMED  8
/* --learn's N when not given (LEARN_EVERY_DEFAULT: chosen per event).  Software
 * events: 2 -- bench/RESULTS.md section 3's learn-rate table (the online targets
 * are met at 2, not at 4) at no measured cost (section 2).  Hardware events: 4 --
 * each learn sample costs an interrupt that large PEBS would avoid, and no
 * PMU was at hand to measure the trade-off (docs/resolve.md). */
#define LEARN_EVERY_DEFAULT UINT32_MAX
/* Ring data pages per CPU (-m): perf's 512 KiB; with learn samples 2 MiB, as
 * each carries a 16 KiB stack copy until icpp-sample unwinds it (at 10 kHz
 * and one learn sample in 2, 512 KiB lost 0.7% of the samples). */
#define RING_PAGES 128
#define RING_PAGES_LEARN 512
/* --validate: every sample carries a stack copy; at 8 kHz 2 MiB lost 8% of
 * a short run's samples (fnptr in tests/e2e/test_check.py), more when the
 * reader is starved of CPU.  8 MiB per CPU, but locked memory for all
 * rings together at most RING_VALIDATE_TOTAL (64 MiB: 8 CPUs at 8 MiB, 64
 * CPUs at RING_PAGES_LEARN) -- never less per CPU than learning takes. */
#define RING_PAGES_VALIDATE 2048
#define RING_VALIDATE_TOTAL 16384
#define WAKEUP_BYTES (256u << 10)   /* half of RING_PAGES: when the reader wakes, at any -m */
#define LEARN_EVERY_SOFTWARE 2
#define LEARN_EVERY_HARDWARE 4

static const char *usage_text =
    "usage: icpp-sample [-e EVENT[,EVENT...]] [-c PERIOD | -F FREQ | --auto-period] [--jitter R]\n"
    "                   [-o FILE] [-m PAGES]\n"
    "                   [--validate] [--stack-size BYTES] [--learn[=N] | --no-learn] [-q]\n"
    "                   [--feature NAME=VALUE...]\n"
    "                   (-p PID | -- PROG [ARGS...])\n"
    "       icpp-sample --list-events\n"
    "\n"
    "Record, for each sample, only what ICPP needs: the user-space IP, SP and BP,\n"
    "the thread and the time (no stack walk, no callchain), plus the thread\n"
    "bases (main thread startstack, thread stack mappings) and module mappings\n"
    "with build-ids. icpp-resolve turns the file into call-path profiles.\n"
    "\n"
    "  -e, --event LIST     events to sample, by name through libpfm4: cycles,\n"
    "                       instructions, cpu-clock, task-clock, raw rUUEE, PMU\n"
    "                       event names. Default: cycles if this machine has a\n"
    "                       hardware PMU, else cpu-clock (said on stderr).\n"
    "  -c, --count N, --period N\n"
    "                       sample every N events (ns for cpu-clock/task-clock).\n"
    "                       Hardware events always use a fixed period (default\n"
    "                       1000003) so Intel PEBS can buffer samples without an\n"
    "                       interrupt each.\n"
    "  -F, --freq HZ        samples per second for software events (default 4000).\n"
    "      --auto-period    choose the period from the sample-size model\n"
    "                       (docs/statistics.md): PROG runs three times first,\n"
    "                       stdin and stdout on /dev/null -- unprofiled for its CPU\n"
    "                       time T, then sampled at 10 kHz and at 1 kHz for p (the\n"
    "                       hottest context's share) and o (the CPU cost of a\n"
    "                       sample) -- and the period that gives\n"
    "                       n* = (T z sqrt(p(1-p)) / (2 o p))^(2/3) samples is used.\n"
    "                       Inputs and choice are printed, and after the run the\n"
    "                       samples taken. One event; not with -p, -c or -F.\n"
    "      --pilot-time S   with --auto-period: T is S seconds of CPU (no unprofiled\n"
    "                       run).\n"
    "      --jitter R       randomize every sampling interval: each next period is\n"
    "                       drawn from PERIOD * (1 + uniform(-R, R)), 0 < R < 1, so\n"
    "                       samples cannot fall in step with a rhythm of the program.\n"
    "                       Software events only (a hardware event keeps its fixed\n"
    "                       period for large PEBS); threads and processes created\n"
    "                       after sampling starts keep the period they inherit\n"
    "                       (docs/statistics.md says what is randomized where).\n"
    "  -o, --output FILE    output file (default icpp.samples; an existing file\n"
    "                       is renamed to FILE.old). Created with mode 0600:\n"
    "                       --validate copies the user stack (environment,\n"
    "                       keys, passwords) into it. A symbolic link, or\n"
    "                       another user's file in a sticky directory, is\n"
    "                       refused (docs/file-safety.md).\n"
    "  -m, --mmap-pages N   ring buffer data pages per CPU, a power of two\n"
    "                       (default 128, 512 with learn samples; with\n"
    "                       --validate up to 2048, 64 MiB over all CPUs; 128\n"
    "                       where the locked-memory limit refuses more).\n"
    "  -p, --pid PID        sample a running process and all its threads until\n"
    "                       Ctrl-C or its exit; it keeps running afterwards.\n"
    "      --validate       also record each sample's user callchain and a copy\n"
    "                       of the user stack, so `icpp-resolve --check` can\n"
    "                       measure accuracy against the true stacks. Costs more.\n"
    "      --stack-size N   bytes of stack to copy with --validate and for learn\n"
    "                       samples (default 16384).\n"
    "      --learn[=N]      one sample in N (N >= 2; default 2 for software events,\n"
    "                       4 for hardware events) also copies the\n"
    "                       user stack; icpp-sample unwinds it at once and keeps\n"
    "                       only its frames, so that icpp-resolve learns the\n"
    "                       contexts training never ran. On by default; no extra\n"
    "                       samples (the rate asked for is kept); the stack copy\n"
    "                       itself is not written.\n"
    "      --no-learn       only IP, SP and BP: no learn samples.\n"
    "      --feature NAME=VALUE  a workload feature of this run (repeatable), kept\n"
    "                       in the file for `icpp-resolve --trend` (e.g. n=1000).\n"
    "                       By default, when the command has exactly one argument\n"
    "                       that is a regular file (or none and standard input is\n"
    "                       one), its size is recorded as bytes=SIZE.\n"
    "  -q, --quiet          no summary on stderr.\n"
    "      --version        print icpp-sample's version.\n"
    "      --list-events    list the events this machine knows.\n"
    "  -h, --help           this text.\n"
    "\n"
    "Exit status: PROG's own (128+N if a signal N killed it); 1 on icpp-sample's\n"
    "own errors; 2 on bad usage.\n";


typedef struct session {
    icpp_event       ev[MAX_EVENTS];
    /* Each event's record layout (lib/perfrec.h), taken from its attr in
     * setup_events.  Every event's samples begin with IDENTIFIER, IP, TID and
     * TIME and share one sample_id trailer (lib/events.c), so lay[0] finds
     * any record's event and time. */
    icpp_perfrec_layout lay[MAX_EVENTS];
    int              nev;
    icpp_sample_opts so;
    jitter          *jit;       /* --jitter: periods drawn per sample; NULL: fixed */
    int             *fds;       /* every event fd, to close */
    size_t           nfds, capfds;
    icpp_hmap        ids;       /* kernel sample id -> event index (one lookup per sample) */
    icpp_ring       *rings;     /* one per CPU */
    int             *cpus;
    int              ncpus;
    size_t           pages;
    int              pages_default;     /* -m not given: may shrink to RING_PAGES at the mlock limit */
    icpp_swriter    *w;
    tqueue           tq;        /* ring records on their way to on_record, in time order */
    uint64_t         samples, lost, noregs, throttles;
    int              initial_exec_seen;  /* the launched program's exec record was handled */
    int              validate;
    /* processes seen: pid -> startstack, exe */
    struct proc { uint32_t pid; uint64_t startstack; char exe[512]; } *procs;
    size_t           nprocs, capprocs;
    /* --learn: a replay that mirrors the side-band records written, to
     * unwind learn samples with the recording's own mappings */
    icpp_err         ring_err;          /* why a ring buffer could not be mapped */
    uint32_t         learn_every;       /* 0 = no learning; LEARN_EVERY_DEFAULT: per event */
    icpp_replay     *live;
    uint64_t         learned, learned_root;
    uint64_t         learn_status[ICPP_SW_MAX];
    icpp_sw_frame    frames[ICPP_LEARN_MAX_FRAMES];
    uint64_t         fpc[ICPP_LEARN_MAX_FRAMES], fesp[ICPP_LEARN_MAX_FRAMES];
    icpp_feature     feat[ICPP_FEATURES_MAX];   /* --feature, and the default bytes= */
    size_t           nfeat;
    /* the options (parse_options) */
    const char      *events, *out;      /* -e (NULL: the default), -o */
    pid_t            attach;            /* -p, or 0 */
    char           **cmd;               /* the command to run (argv after the options) */
    int              ncmd;
    int              quiet, auto_period;
    double           pilot_t, jitter_r;
    /* choices made on the way (choose_events, open_events) */
    int              user_chose;        /* -e given (or implied by --jitter): no fallback to the clock */
    int              amd;
    int              fell_back;         /* no hardware PMU: sampling cpu-clock instead of cycles */
    int             *ring_owner;        /* per CPU: the fd owning its ring, or -1 */
    jitter           jit_state;         /* s->jit points here with --jitter */
    autoperiod       ap;                /* --auto-period's inputs and choice */
} session;

static volatile sig_atomic_t stop_requested, forward_signal;
static pid_t child_pid;

#define die(...) icpp_cli_die("icpp-sample", 1, __VA_ARGS__)

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    stop_requested = 1;
    /* A signal sent by kill() to us alone is passed on to the child; one from
     * the terminal already reached the child's process group. */
    if (child_pid > 0 && si && si->si_code == SI_USER)
        kill(child_pid, sig);
}

static int online_cpus(int **out)
{
    /* /sys/devices/system/cpu/online: "0-3,5" */
    FILE *f = fopen("/sys/devices/system/cpu/online", "re");
    int *v = NULL, n = 0;
    size_t cap = 0;
    if (f) {
        int a, b;
        char sep;
        while (fscanf(f, "%d", &a) == 1) {
            b = a;
            if (fscanf(f, "%c", &sep) == 1 && sep == '-') {
                if (fscanf(f, "%d", &b) != 1)
                    break;
                if (fscanf(f, "%c", &sep) != 1)
                    sep = '\n';
            }
            for (int c = a; c <= b && c < 4096; c++) {
                if (icpp_vec_reserve((void **)&v, &cap, (size_t)n + 1, sizeof *v, 16) < 0)
                    break;      /* out of memory: the CPUs listed so far */
                v[n++] = c;
            }
            if (sep != ',')
                break;
        }
        fclose(f);
    }
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_CONF);
        v = malloc((size_t)(c > 0 ? c : 1) * sizeof *v);
        for (n = 0; v && n < (c > 0 ? c : 1); n++)
            v[n] = n;
    }
    *out = v;
    return n;
}

static struct proc *find_proc(session *s, uint32_t pid)
{
    for (size_t i = 0; i < s->nprocs; i++)
        if (s->procs[i].pid == pid)
            return &s->procs[i];
    return NULL;
}

static struct proc *add_proc(session *s, uint32_t pid, uint64_t startstack, const char *exe)
{
    struct proc *p = find_proc(s, pid);
    if (!p) {
        if (icpp_vec_reserve((void **)&s->procs, &s->capprocs, s->nprocs + 1, sizeof *s->procs, 16) < 0)
            return NULL;
        p = &s->procs[s->nprocs++];
        p->pid = pid;
    }
    p->startstack = startstack;
    snprintf(p->exe, sizeof p->exe, "%s", exe ? exe : "");
    return p;
}

/* Side-band records go to the file and, when learning, to the live replay. */
static void emit_proc(session *s, uint32_t pid, uint32_t ppid, uint64_t ss, const char *exe, uint32_t flags)
{
    icpp_swriter_proc(s->w, pid, ppid, ss, exe, flags);
    if (s->live) {
        icpp_srec r = {.type = ICPP_SREC_PROC};
        r.u.proc.pid = pid;
        r.u.proc.ppid = ppid;
        r.u.proc.startstack = ss;
        r.u.proc.path = exe;
        r.u.proc.flags = flags;
        icpp_replay_feed(s->live, &r, NULL);
    }
}

static void emit_mmap(session *s, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                      const char *path, const icpp_build_id *bid)
{
    icpp_swriter_mmap(s->w, pid, start, len, pgoff, prot, path, bid);
    if (s->live) {
        icpp_srec r = {.type = ICPP_SREC_MMAP};
        r.u.mmap.pid = pid;
        r.u.mmap.start = start;
        r.u.mmap.len = len;
        r.u.mmap.pgoff = pgoff;
        r.u.mmap.prot = prot;
        r.u.mmap.path = path;
        r.u.mmap.build_id = *bid;
        icpp_replay_feed(s->live, &r, NULL);
    }
}

/* A learn sample: unwind its stack copy now and keep only the frames. */
static void learn_sample(session *s, uint32_t pid, uint32_t tid, uint32_t ev, uint64_t time, uint64_t ip,
                         uint64_t sp, uint64_t bp, const uint8_t *stack, size_t size)
{
    icpp_replay_at at = {s->live, pid};
    int n = 0;
    int st = icpp_stackwalk(icpp_replay_sw_lookup, &at, ip, sp, bp, stack, size, s->frames, ICPP_LEARN_MAX_FRAMES, &n);
    for (int i = 0; i < n; i++) {
        s->fpc[i] = s->frames[i].pc;
        s->fesp[i] = s->frames[i].entry_sp;
    }
    icpp_learn_chain l = {(uint8_t)st, (uint32_t)n, s->fpc, s->fesp};
    icpp_swriter_learn(s->w, pid, tid, ev, time, ip, sp, bp, &l);
    s->learned++;
    s->learned_root += st == ICPP_SW_ROOT;
    s->learn_status[st]++;
}

/* Build-id of a file, read from its ELF notes (empty if none or unreadable). */
static void file_build_id(const char *path, icpp_build_id *bid)
{
    memset(bid, 0, sizeof *bid);
    if (!path || path[0] != '/')
        return;
    icpp_err err;
    icpp_elf_build_id(path, bid, &err);
}

/* Describe process `pid` from /proc: startstack, exe, every mapping. */
static void snapshot_process(session *s, pid_t pid, uint32_t ppid, uint32_t flags)
{
    icpp_err err;
    uint64_t ss = 0;
    char exe[512] = "", link[64];
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    if (icpp_proc_startstack(pid, &ss, &err) < 0)
        fprintf(stderr, "icpp-sample: warning: %s: main-thread heights of pid %d will be unknown\n", err.msg, (int)pid);
    add_proc(s, (uint32_t)pid, ss, exe);
    emit_proc(s, (uint32_t)pid, ppid, ss, exe, flags);
    icpp_maps mm;
    icpp_maps_init(&mm);
    if (icpp_maps_read(&mm, pid, &err) < 0) {
        fprintf(stderr, "icpp-sample: warning: %s\n", err.msg);
        return;
    }
    for (size_t i = 0; i < mm.n; i++) {
        const icpp_mapping *m = &mm.v[i];
        icpp_build_id bid;
        file_build_id((m->prot & PROT_EXEC) ? m->path : NULL, &bid);
        emit_mmap(s, (uint32_t)pid, m->start, m->end - m->start, m->pgoff, m->prot, m->path, &bid);
    }
    icpp_maps_free(&mm);
}

/* ---- ring buffer records ---- */

/* A ring record's time, to order it by (0 if it has none). */
static uint64_t ring_time(const session *s, const struct perf_event_header *h)
{
    uint64_t t = 0;
    icpp_perfrec_time(&s->lay[0], h->type, (const uint8_t *)(h + 1), h->size > sizeof *h ? h->size - sizeof *h : 0, &t);
    return t;
}

/* A sample: written with its registers (and, with --validate, its chain
 * and stack copy), or a learn sample unwound now.  A sample cut short is
 * dropped; one without user registers (a kernel thread) is counted. */
static void on_sample(session *s, const uint8_t *p, size_t n)
{
    icpp_perfrec_sample x;
    uint64_t id;
    if (icpp_perfrec_sample_id(&s->lay[0], p, n, &id) < 0)
        return;
    const uint64_t *evp = icpp_hmap_get(&s->ids, id, 0);
    uint32_t ev = evp ? (uint32_t)*evp : 0;
    const struct perf_event_attr *a = &s->ev[ev].attr;
    const icpp_perfrec_layout *l = &s->lay[ev];
    int rc = icpp_perfrec_sample_parse(l, p, n, &x);
    if (!(x.have & PERF_SAMPLE_REGS_USER))
        return;
    if (x.uabi == PERF_SAMPLE_REGS_ABI_NONE) {
        s->noregs++;
        return;
    }
    if (rc < 0)
        return;
    uint64_t regs[32] = {0}, chain[512];
    int nregs = __builtin_popcountll(l->regs_user);
    for (int i = 0; i < nregs && i < 32; i++)
        regs[i] = icpp_perfrec_u64(x.uregs + 8 * i);
    uint64_t ip = x.ip, bp = 0, sp = 0, rip = ip;
    icpp_perfrec_reg(x.uregs, l->regs_user, PERF_REG_X86_BP, &bp);
    icpp_perfrec_reg(x.uregs, l->regs_user, PERF_REG_X86_SP, &sp);
    icpp_perfrec_reg(x.uregs, l->regs_user, PERF_REG_X86_IP, &rip);
    /* precise_ip >= 2 reports the eventing IP with post-retirement
     * registers: pair SP with the register-set IP instead. */
    if (a->precise_ip >= 2)
        ip = rip;
    icpp_sample_extra e, *ep = NULL;
    if (l->sample_type & PERF_SAMPLE_STACK_USER) {
        if (s->ev[ev].learn) {
            learn_sample(s, x.pid, x.tid, ev, x.time, ip, sp, bp, x.stack, x.stack_size);
            s->samples++;
            return;
        }
        uint32_t nchain = (uint32_t)icpp_perfrec_chain(&x, 0, chain, 512);
        e = (icpp_sample_extra){nchain, chain, (uint32_t)nregs, regs, l->regs_user, (uint32_t)x.stack_size, x.stack};
        ep = &e;
    }
    icpp_swriter_sample(s->w, x.pid, x.tid, ev, x.time, ip, sp, bp, ep);
    s->samples++;
}

/* The body of a side-band record, read field by field; a record cut short
 * is ignored. */
typedef struct body {
    const uint8_t *p, *end;
} body;

static int take(body *b, void *dst, size_t k)
{
    if ((size_t)(b->end - b->p) < k)
        return 0;
    memcpy(dst, b->p, k);
    b->p += k;
    return 1;
}
#define TAKE(b, dst) take((b), &(dst), sizeof(dst))

/* A new mapping: its build-id from the record (Linux 5.12+) or the file. */
static void on_mmap2(session *s, const struct perf_event_header *h, body *b)
{
    uint32_t pid, tid, prot, flags;
    uint64_t addr, len, pgoff;
    icpp_build_id bid = {0, {0}};
    uint8_t bsz, pad[3], bytes[20], skip[24];   /* skip: maj, min, ino, ino_generation */
    if (!TAKE(b, pid) || !TAKE(b, tid) || !TAKE(b, addr) || !TAKE(b, len) || !TAKE(b, pgoff))
        return;
    if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
        if (!TAKE(b, bsz) || !TAKE(b, pad) || !TAKE(b, bytes))
            return;
        bid.len = bsz <= 20 ? bsz : 20;
        memcpy(bid.bytes, bytes, bid.len);
    } else if (!TAKE(b, skip)) {
        return;
    }
    if (!TAKE(b, prot) || !TAKE(b, flags))
        return;
    char path[4096];
    size_t plen = (size_t)(b->end - b->p);
    if (plen >= sizeof path)
        plen = sizeof path - 1;
    memcpy(path, b->p, plen);
    path[plen] = 0;
    path[strnlen(path, plen)] = 0;
    if (!bid.len && (prot & PROT_EXEC))
        file_build_id(path, &bid);
    int anon = path[0] == '/' ? 0 : 1;
    emit_mmap(s, pid, addr, len, pgoff, prot, anon && path[0] != '[' ? NULL : path, &bid);
}

/* An exec: the new image's startstack and exe, read from /proc. */
static void on_comm(session *s, const struct perf_event_header *h, body *b)
{
    uint32_t pid, tid;
    if (!TAKE(b, pid) || !TAKE(b, tid) || !(h->misc & PERF_RECORD_MISC_COMM_EXEC) || pid != tid)
        return;
    /* The launched program's own exec (the one we stopped at and
     * described from /proc) comes through here too: skip it. */
    if ((pid_t)pid == child_pid && !s->initial_exec_seen) {
        s->initial_exec_seen = 1;
        return;
    }
    /* The process may already be gone; then its main-thread samples have no base. */
    uint64_t ss = 0;
    char exe[512] = "", link[64];
    snprintf(link, sizeof link, "/proc/%u/exe", pid);
    ssize_t n = readlink(link, exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    icpp_proc_startstack((pid_t)pid, &ss, NULL);
    add_proc(s, pid, ss, exe);
    emit_proc(s, pid, 0, ss, exe, ICPP_PROC_EXEC);
}

/* A new process: the same layout as its parent's. */
static void on_fork(session *s, body *b)
{
    uint32_t pid, ppid, tid, ptid;
    if (!TAKE(b, pid) || !TAKE(b, ppid) || !TAKE(b, tid) || !TAKE(b, ptid) || pid == ppid || pid != tid)
        return;
    struct proc *pp = find_proc(s, ppid);
    uint64_t ss = pp ? pp->startstack : 0;
    char exe[512];
    snprintf(exe, sizeof exe, "%s", pp ? pp->exe : "");
    add_proc(s, pid, ss, exe);
    emit_proc(s, pid, ppid, ss, exe, 0);
}

/* One ring record, in time order (through the queue, drain_all). */
static int on_record(void *ctx, const struct perf_event_header *h)
{
    session *s = ctx;
    body b = {(const uint8_t *)(h + 1), (const uint8_t *)h + h->size};
    uint32_t pid, ppid, tid, ptid;
    uint64_t id, n;
    switch (h->type) {
    case PERF_RECORD_SAMPLE:
        on_sample(s, b.p, b.end > b.p ? (size_t)(b.end - b.p) : 0);
        break;
    case PERF_RECORD_MMAP2: on_mmap2(s, h, &b); break;
    case PERF_RECORD_COMM: on_comm(s, h, &b); break;
    case PERF_RECORD_FORK: on_fork(s, &b); break;
    case PERF_RECORD_EXIT:
        if (TAKE(&b, pid) && TAKE(&b, ppid) && TAKE(&b, tid) && TAKE(&b, ptid))
            icpp_swriter_exit(s->w, pid, tid);
        break;
    case PERF_RECORD_LOST:
        if (TAKE(&b, id) && TAKE(&b, n)) {
            s->lost += n;
            icpp_swriter_lost(s->w, n);
        }
        break;
    case PERF_RECORD_THROTTLE:
        s->throttles++;
        break;
    default:
        break;
    }
    return 0;
}
#undef TAKE

/* Ring records go through the time-ordering queue (tqueue.h) to on_record. */
static int enqueue(void *ctx, const struct perf_event_header *h)
{
    session *s = ctx;
    if (s->jit)
        jitter_on_record(s->jit, &s->lay[0], h);    /* the next period, right after the sample */
    return tq_push(&s->tq, h, ring_time(s, h)) < 0;
}

static void drain_all(session *s, int final)
{
    for (int c = 0; c < s->ncpus; c++)
        icpp_ring_drain(&s->rings[c], enqueue, s);
    tq_round_end(&s->tq, final, on_record, s);
}

/* ---- opening events ---- */

static int add_fd(session *s, int fd, uint32_t ev)
{
    if (icpp_vec_reserve((void **)&s->fds, &s->capfds, s->nfds + 1, sizeof *s->fds, 16) < 0)
        return -1;
    uint64_t id;
    if (ioctl(fd, PERF_EVENT_IOC_ID, &id) == 0 && icpp_hmap_put(&s->ids, id, 0, ev) < 0)
        return -1;
    s->fds[s->nfds++] = fd;
    return 0;
}

/* Open every event on every CPU for task `tid`; the first fd per CPU owns
 * that CPU's ring buffer, the rest write into it.  Returns 0 or -errno of
 * the first failure (with the failing event's index in *bad). */
static int open_for_task(session *s, pid_t tid, int enable_on_exec, int *bad, int *ring_owner)
{
    for (int e = 0; e < s->nev; e++) {
        struct perf_event_attr attr = s->ev[e].attr;
        /* Wake the reader after WAKEUP_BYTES whatever the ring's size: an
         * exec is described from /proc when its record is read, and a
         * short-lived process is gone before a 2 MiB ring half fills. */
        size_t half = s->pages * (size_t)sysconf(_SC_PAGESIZE) / 2;
        if (attr.watermark)     /* else --jitter's wakeup_events, the same field */
            attr.wakeup_watermark = (uint32_t)(half < WAKEUP_BYTES ? half : WAKEUP_BYTES);
        attr.enable_on_exec = (unsigned)enable_on_exec;
        attr.disabled = enable_on_exec ? 1 : 0;
        for (int c = 0; c < s->ncpus; c++) {
            int fd = icpp_perf_event_open(&attr, tid, s->cpus[c], -1, PERF_FLAG_FD_CLOEXEC);
            if (fd < 0 && errno == EINVAL && attr.build_id) {
                attr.build_id = 0;      /* kernels before 5.12 */
                s->ev[e].attr.build_id = 0;
                fd = icpp_perf_event_open(&attr, tid, s->cpus[c], -1, PERF_FLAG_FD_CLOEXEC);
            }
            if (fd < 0 && (errno == EINVAL || errno == EOPNOTSUPP) && attr.precise_ip) {
                attr.precise_ip = 0;    /* no PEBS for this event here */
                s->ev[e].attr.precise_ip = 0;
                fd = icpp_perf_event_open(&attr, tid, s->cpus[c], -1, PERF_FLAG_FD_CLOEXEC);
            }
            if (fd < 0) {
                *bad = e;
                return -errno;
            }
            if (ring_owner[c] < 0) {
                /* The owner's ring must exist before other events can be
                 * redirected into it (the kernel refuses SET_OUTPUT to an
                 * event without a buffer). */
                int mr = icpp_ring_map(&s->rings[c], fd, s->pages, &s->ring_err);
                if (mr == -EPERM && s->pages_default && s->pages > RING_PAGES) {
                    s->pages = RING_PAGES;  /* over the locked-memory limit: the size without learning */
                    mr = icpp_ring_map(&s->rings[c], fd, s->pages, &s->ring_err);
                }
                if (mr < 0) {
                    close(fd);
                    *bad = e;
                    return -(s->ring_err.code ? s->ring_err.code : ENOMEM);
                }
                ring_owner[c] = fd;
            } else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_owner[c]) < 0) {
                int er = errno;
                close(fd);
                *bad = e;
                return -er;
            }
            add_fd(s, fd, (uint32_t)e);
            if (s->jit && jitter_add_fd(s->jit, fd, (uint32_t)tid, attr.sample_period) < 0)
                return -ENOMEM;
        }
    }
    return 0;
}

/* Open every event for the launched child (enabled at its exec), or for
 * every existing thread of an attached process (threads they create later
 * are inherited).  Returns 0 or -errno (a vanished thread is not an error). */
static int open_target(session *s, pid_t target, int launch, int *bad, int *ring_owner)
{
    if (launch)
        return open_for_task(s, target, 1, bad, ring_owner);
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", (int)target);
    DIR *d = opendir(task);
    if (!d)
        return -ESRCH;
    struct dirent *de;
    int r = 0;
    while (r == 0 && (de = readdir(d)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        r = open_for_task(s, (pid_t)atoi(de->d_name), 0, bad, ring_owner);
        if (r == -ESRCH)
            r = 0;          /* that thread ended meanwhile */
    }
    closedir(d);
    return r;
}

static void close_all(session *s)
{
    for (int c = 0; s->rings && c < s->ncpus; c++)
        icpp_ring_unmap(&s->rings[c]);
    for (size_t i = 0; i < s->nfds; i++)
        close(s->fds[i]);
    s->nfds = 0;
}

static void write_header(session *s, int argc, char **argv)
{
    char cmd[4096] = "";
    size_t o = 0;
    for (int i = 0; i < argc && o < sizeof cmd - 2; i++)
        o += (size_t)snprintf(cmd + o, sizeof cmd - o, "%s%s", i ? " " : "", argv[i]);
    struct utsname u;
    uname(&u);
    icpp_swriter_info(s->w, "tool", "icpp-sample 0.1.0");
    icpp_swriter_info(s->w, "command", cmd);
    icpp_swriter_info(s->w, "kernel", u.release);
    icpp_swriter_info(s->w, "host", u.nodename);
    icpp_swriter_info(s->w, "clock", "perf_clock");
    for (size_t i = 0; i < s->nfeat; i++) {
        char fv[ICPP_FEATURE_NAME_MAX + 32];
        snprintf(fv, sizeof fv, "%s=%.17g", s->feat[i].name, s->feat[i].value);
        icpp_swriter_info(s->w, ICPP_FEATURE_KEY, fv);
    }
    for (int e = 0; e < s->nev; e++) {
        const struct perf_event_attr *a = &s->ev[e].attr;
        icpp_swriter_event(s->w, (uint32_t)e, s->ev[e].name, a->type, a->config,
                           a->freq ? a->sample_freq : a->sample_period, a->freq, a->precise_ip,
                           s->ev[e].learn ? ICPP_EVENT_LEARN : 0, s->ev[e].learn ? s->ev[e].of : 0);
    }
}

static void parse_events(session *s, const char *list)
{
    char *dup = strdup(list), *save = NULL;
    icpp_err err;
    for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (s->nev == MAX_NAMED)
            die("at most %d events at once", MAX_NAMED);
        if (icpp_event_parse(t, &s->ev[s->nev], &err) < 0)
            die("%s", err.msg);
        s->nev++;
    }
    free(dup);
    if (!s->nev)
        die("-e needs at least one event name");
}

/* Set up the named events and, when learning, a learn event for each. */
static void setup_events(session *s, int amd)
{
    int named = s->nev;
    for (int e = 0; e < named; e++) {
        icpp_event_setup(&s->ev[e], &s->so, amd);
        uint32_t every = s->learn_every != LEARN_EVERY_DEFAULT ? s->learn_every
                         : s->ev[e].hardware ? LEARN_EVERY_HARDWARE : LEARN_EVERY_SOFTWARE;
        if (s->learn_every)
            icpp_event_setup_learn(&s->ev[e], (uint32_t)e, &s->ev[s->nev++], every,
                                   s->so.stack_bytes ? s->so.stack_bytes : 16384);
    }
    for (int e = 0; s->jit && e < s->nev; e++)
        jitter_attr(&s->ev[e].attr);
    for (int e = 0; e < s->nev; e++)
        icpp_perfrec_layout_of(&s->ev[e].attr, &s->lay[e]);
}

/* A number in [min, max] / in (min, max) for opt, or exit 2 (lib/cli.h). */
#define parse_u64(opt, v, min, max)      icpp_cli_opt_u64("icpp-sample", opt, v, min, max)
#define parse_fraction(opt, v, min, max) icpp_cli_opt_fraction("icpp-sample", opt, v, min, max)

/* The default workload feature: bytes=SIZE of the command's one input
 * file (lib/runinfo.h), unless --feature named bytes. */
static void add_default_bytes(session *s, int argc, char **argv)
{
    double bytes;
    const char *what;
    for (size_t i = 0; i < s->nfeat; i++)
        if (!strcmp(s->feat[i].name, ICPP_FEATURE_BYTES))
            return;
    if (argc > 0 && s->nfeat < ICPP_FEATURES_MAX && icpp_feature_default_bytes(argc, argv, &bytes, &what)) {
        snprintf(s->feat[s->nfeat].name, sizeof s->feat[s->nfeat].name, "%s", ICPP_FEATURE_BYTES);
        s->feat[s->nfeat++].value = bytes;
    }
}

/* The file execvp runs for cmd (PATH searched when it has no '/', an empty
 * entry being the current directory), in buf; NULL when there is none (the
 * exec then says so). */
static const char *program_file(const char *cmd, char *buf, size_t n)
{
    if (strchr(cmd, '/'))
        return cmd;
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin";     /* glibc's default */
    for (const char *p = path;; ) {
        const char *e = strchrnul(p, ':');
        int len = (int)(e - p);
        struct stat st;
        if ((size_t)snprintf(buf, n, "%.*s%s%s", len, p, len ? "/" : "", cmd) < n && access(buf, X_OK) == 0 &&
            stat(buf, &st) == 0 && S_ISREG(st.st_mode))
            return buf;
        if (!*e)
            return NULL;
        p = e + 1;
    }
}

/* The same-file rule (lib/fsafe.h): the recording is not the program, and
 * neither is OUT.old when an existing OUT is moved there. */
static void check_not_program(const char *out, pid_t attach, const char *cmd)
{
    char buf[4096], old[4096];
    const char *prog;
    if (attach) {
        snprintf(buf, sizeof buf, "/proc/%d/exe", (int)attach);
        prog = buf;
    } else {
        prog = program_file(cmd, buf, sizeof buf);
    }
    icpp_err err;
    if (icpp_fs_output_not_input(out, &prog, 1, &err) < 0)
        die("%s", err.msg);
    struct stat st;
    snprintf(old, sizeof old, "%s.old", out);
    if (lstat(out, &st) == 0 && S_ISREG(st.st_mode) && icpp_fs_output_not_input(old, &prog, 1, &err) < 0)
        die("%s (the previous %s would be moved there)", err.msg, out);
}

/* ---- the steps of main ---- */

/* A traced exec (spawn_stopped) does not raise privileges: the kernel runs
 * a set-user-ID or set-group-ID program, or one with file capabilities, with
 * the tracer's credentials unless the tracer could trace the privileged
 * process anyway (root).  Say so: the program may then behave otherwise. */
static void warn_privileges(const char *prog)
{
    if (geteuid() == 0)
        return;
    char buf[4096];
    const char *path = program_file(prog, buf, sizeof buf);
    struct stat st;
    if (!path || stat(path, &st) < 0)
        return;
    const char *what = NULL;
    if ((st.st_mode & S_ISUID) && st.st_uid != geteuid())
        what = "set-user-ID";
    else if ((st.st_mode & S_ISGID) && st.st_gid != getegid())
        what = "set-group-ID";
    else if (getxattr(path, "security.capability", NULL, 0) > 0)
        what = "file capabilities";
    if (what) {
        fputs("icpp-sample: warning: ", stderr);
        icpp_escape_fputs(path, stderr);
        fprintf(stderr, " is %s%s, but a traced program starts without them: it runs with your privileges "
                        "and may behave otherwise (sample it as root to keep them)\n",
                what[0] == 'f' ? "given " : "", what);
    }
}

/* Fork the child that runs cmd: it waits for a byte on go[0], then asks to be
 * traced (so that it stops at its exec) and execs cmd; errno of a failed
 * exec comes back on ep.  Leaves the parent's ends go[1] and ep[0] open. */
static pid_t spawn_stopped(char **cmd, int go[2], int ep[2])
{
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
        die("pipe: %s", strerror(errno));
    child_pid = fork();
    if (child_pid < 0)
        die("fork: %s", strerror(errno));
    if (child_pid == 0) {
        char b;
        close(go[1]);
        close(ep[0]);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (read(go[0], &b, 1) != 1)
            _exit(127);     /* the parent gave up */
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) < 0) {
            int e = errno;
            (void)!write(ep[1], &e, sizeof e);
            _exit(127);
        }
        execvp(cmd[0], cmd);
        int e = errno;
        (void)!write(ep[1], &e, sizeof e);
        _exit(127);
    }
    close(go[0]);
    close(ep[1]);
    return child_pid;
}

static void kill_child(void)
{
    if (child_pid > 0) {
        kill(child_pid, SIGKILL);
        waitpid(child_pid, NULL, 0);
    }
}

/* Can this machine count ev at all (a hardware event: is there a PMU)?
 * A counter on ourselves, opened disabled and closed at once. */
static int event_available(const icpp_event *ev)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = ev->attr.type;
    a.config = ev->attr.config;
    a.config1 = ev->attr.config1;
    a.config2 = ev->attr.config2;
    a.disabled = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    int fd = icpp_perf_event_open(&a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        return 1;
    }
    return !(errno == ENOENT || errno == EOPNOTSUPP || errno == ENODEV);
}

/* Open the events on every CPU for target; without a hardware PMU (a VM)
 * and no event chosen, the clock instead (returns 1 then, else 0).  Dies
 * with the reason (and kills a launched child) when they cannot be opened. */
static int open_events(session *s, pid_t target, int launch, int user_chose, int amd, int *ring_owner)
{
    int bad = 0, fell_back = 0;
    int r = open_target(s, target, launch, &bad, ring_owner);
    if ((r == -ENOENT || r == -EOPNOTSUPP || r == -ENODEV) && !user_chose) {
        /* No hardware PMU (a VM): use the clock, and say so once sampling runs. */
        close_all(s);
        for (int i = 0; i < s->ncpus; i++)
            ring_owner[i] = -1;
        fell_back = 1;
        s->nev = 0;
        parse_events(s, "cpu-clock");
        setup_events(s, amd);
        r = open_target(s, target, launch, &bad, ring_owner);
    }
    if (r < 0) {
        icpp_err err;
        if (s->ring_err.code)
            err = s->ring_err;
        else
            icpp_event_open_error(&err, -r, &s->ev[bad], target);
        kill_child();
        die("%s", err.msg);
    }
    for (int i = 0; i < s->ncpus; i++)
        if (ring_owner[i] < 0)
            die("no event could be opened on CPU %d", s->cpus[i]);
    return fell_back;
}

/* Let the launched child exec (one byte on go), wait for its exec stop,
 * snapshot its mappings and let it run.  -1 (said on stderr) if it never
 * got there. */
static int start_child(session *s, int go, int ep, const char *prog)
{
    if (write(go, "g", 1) != 1)
        die("cannot start the child: %s", strerror(errno));
    close(go);
    int st;
    for (;;) {
        pid_t w = waitpid(child_pid, &st, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            die("waitpid: %s", strerror(errno));
        break;
    }
    if (!WIFSTOPPED(st)) {
        int e = 0;
        if (read(ep, &e, sizeof e) == (ssize_t)sizeof e)
            fprintf(stderr, "icpp-sample: cannot run %s: %s\n", prog, strerror(e));
        else
            fprintf(stderr, "icpp-sample: %s ended before it started\n", prog);
        return -1;
    }
    close(ep);
    /* At the exec stop: the image, ld.so and the stack are mapped. */
    snapshot_process(s, child_pid, 0, 0);
    if (ptrace(PTRACE_DETACH, child_pid, 0, 0) < 0)
        die("ptrace detach: %s", strerror(errno));
    return 0;
}

/* Record until the target ends (or, attached, until a signal): drain the
 * rings, flush once a second, stop sampling on a write error (said once:
 * *werr_said).  Returns the launched program's exit status (128+N for a
 * signal N), 0 when attached. */
static int record(session *s, pid_t attach, const char *prog, int quiet, int *werr_said)
{
    icpp_err err;
    int status = 0;
    struct pollfd *pfd = calloc((size_t)s->ncpus, sizeof *pfd);
    if (!pfd)
        die("out of memory");
    for (int i = 0; i < s->ncpus; i++)
        pfd[i] = (struct pollfd){s->rings[i].fd, POLLIN, 0};
    time_t last_flush = time(NULL);
    int done = 0;
    while (!done) {
        int pr = poll(pfd, (nfds_t)s->ncpus, 100);
        (void)pr;
        drain_all(s, 0);
        if (!attach) {
            int st;
            pid_t w = waitpid(child_pid, &st, WNOHANG);
            if (w == child_pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
                status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                if (WIFSIGNALED(st) && !quiet)
                    fprintf(stderr, "icpp-sample: %s was killed by signal %d (%s)\n", prog, WTERMSIG(st),
                            strsignal(WTERMSIG(st)));
                done = 1;
            }
        } else {
            if (stop_requested || kill(attach, 0) < 0)
                done = 1;
            int hup = 1;
            for (int i = 0; i < s->ncpus; i++)
                if (!(pfd[i].revents & POLLHUP))
                    hup = 0;
            if (hup)
                done = 1;
        }
        if (time(NULL) != last_flush) {
            icpp_swriter_flush(s->w, NULL);
            last_flush = time(NULL);
        }
        if (icpp_swriter_error(s->w, &err) < 0 && !attach && !stop_requested) {
            *werr_said = 1;
            fprintf(stderr, "icpp-sample: %s; %s keeps running, unsampled\n", err.msg, prog);
            for (size_t i = 0; i < s->nfds; i++)
                ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
            stop_requested = 1;
        }
    }
    free(pfd);
    return status;
}

/* The summary on stderr: what the file holds (in_file samples, bytes), what
 * was lost, --auto-period's and --jitter's outcome. */
static void print_summary(const session *s, uint64_t in_file, uint64_t bytes, const char *out, const autoperiod *ap,
                          double jitter_r)
{
    fprintf(stderr, "icpp-sample: %" PRIu64 " samples of %s", in_file, s->ev[0].name);
    for (int e = 1; e < s->nev; e++)
        if (!s->ev[e].learn)
            fprintf(stderr, ",%s", s->ev[e].name);
    if (s->learn_every)
        fprintf(stderr, " (%" PRIu64 " of them learn samples, %" PRIu64 " unwound to the root)", s->learned,
                s->learned_root);
    fprintf(stderr, " (%" PRIu64 " lost%s), %" PRIu64 " bytes, %.1f bytes/sample, written to %s", s->lost,
            s->lost ? ": the ring buffer overflowed, try a larger -m or a longer period" : "", bytes,
            in_file ? (double)bytes / (double)in_file : 0.0, out);
    if (in_file != s->samples)
        fprintf(stderr, "; %" PRIu64 " more samples could not be written", s->samples - in_file);
    fputc('\n', stderr);
    if (ap)
        autoperiod_print_result(ap, stderr, in_file);
    if (s->jit)
        fprintf(stderr, "icpp-sample: --jitter %g: %" PRIu64 " periods drawn, %" PRIu64 " refused by the kernel; %" PRIu64
                        " samples of threads or processes created later kept their inherited period\n",
                jitter_r, s->jit->rearmed, s->jit->failed, s->jit->inherited);
}

/* --feature NAME=VALUE: 0, or 2 (said on stderr) for bad usage. */
static int add_feature(session *s, const char *arg)
{
    icpp_err fe;
    icpp_feature f;
    if (icpp_feature_parse(arg, &f, &fe) < 0 || s->nfeat == ICPP_FEATURES_MAX) {
        fprintf(stderr, "icpp-sample: --feature: %s\n", s->nfeat == ICPP_FEATURES_MAX ? "too many features" : fe.msg);
        return 2;
    }
    for (size_t i = 0; i < s->nfeat; i++)
        if (!strcmp(s->feat[i].name, f.name)) {
            fprintf(stderr, "icpp-sample: --feature %s is given twice\n", f.name);
            return 2;
        }
    s->feat[s->nfeat++] = f;
    return 0;
}

/* Options that exclude each other, and the target: 0, or 2 (said). */
static int check_options(const session *s)
{
    const char *bad = NULL;
    if (s->so.period && s->so.freq)
        bad = "-c and -F exclude each other";
    else if (s->auto_period && (s->so.period || s->so.freq || s->attach || (s->events && strchr(s->events, ','))))
        bad = "--auto-period chooses the period of one event for a program it runs: "
              "not with -c, -F, -p or several events";
    else if (s->pilot_t > 0 && !s->auto_period)
        bad = "--pilot-time goes with --auto-period";
    else if (!s->attach && s->ncmd <= 0)
        bad = "nothing to sample: give -p PID or -- PROG [ARGS...] (see --help)";
    else if (s->attach && s->ncmd > 0)
        bad = "-p and a command exclude each other";
    if (!bad)
        return 0;
    fprintf(stderr, "icpp-sample: %s\n", bad);
    return 2;
}

/* The command line into s: -1 to go on, else the exit status (0 after
 * --help, --version, --list-events; 2 on bad usage, said on stderr). */
static int parse_options(session *s, int argc, char **argv)
{
    enum { OPT_VALIDATE = 256, OPT_STACK, OPT_LIST, OPT_LEARN, OPT_NO_LEARN, OPT_AUTO, OPT_PILOT_T, OPT_JITTER,
           OPT_FEATURE, OPT_VERSION };
    static const struct option lo[] = {
        {"event", required_argument, 0, 'e'},   {"period", required_argument, 0, 'c'},
        {"count", required_argument, 0, 'c'},
        {"freq", required_argument, 0, 'F'},    {"output", required_argument, 0, 'o'},
        {"mmap-pages", required_argument, 0, 'm'}, {"pid", required_argument, 0, 'p'},
        {"validate", no_argument, 0, OPT_VALIDATE}, {"stack-size", required_argument, 0, OPT_STACK},
        {"learn", optional_argument, 0, OPT_LEARN}, {"no-learn", no_argument, 0, OPT_NO_LEARN},
        {"quiet", no_argument, 0, 'q'},         {"list-events", no_argument, 0, OPT_LIST},
        {"auto-period", no_argument, 0, OPT_AUTO}, {"pilot-time", required_argument, 0, OPT_PILOT_T},
        {"jitter", required_argument, 0, OPT_JITTER},
        {"feature", required_argument, 0, OPT_FEATURE},
        {"version", no_argument, 0, OPT_VERSION},
        {"help", no_argument, 0, 'h'},          {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "+e:c:F:o:m:p:qh", lo, NULL)) != -1) {
        switch (c) {
        case 'e': s->events = optarg; break;
        case 'c': s->so.period = parse_u64("-c", optarg, 1, UINT64_MAX >> 1); break;
        case 'F': s->so.freq = parse_u64("-F", optarg, 1, 1000000); break;
        case 'o': s->out = optarg; break;
        case 'm':
            s->pages = parse_u64("-m", optarg, 1, 1 << 20);
            if (s->pages & (s->pages - 1)) {
                fprintf(stderr, "icpp-sample: -m wants a power of two, not %zu\n", s->pages);
                return 2;
            }
            break;
        case 'p': s->attach = (pid_t)parse_u64("-p", optarg, 1, 1 << 30); break;
        case 'q': s->quiet = 1; break;
        case OPT_VALIDATE: s->so.validate = 1; break;
        case OPT_STACK: s->so.stack_bytes = (uint32_t)parse_u64("--stack-size", optarg, 8, 65528) & ~7u; break;
        case OPT_LEARN:
            s->learn_every = optarg ? (uint32_t)parse_u64("--learn", optarg, 2, 1u << 20) : LEARN_EVERY_DEFAULT;
            break;
        case OPT_NO_LEARN: s->learn_every = 0; break;
        case OPT_AUTO: s->auto_period = 1; break;
        case OPT_PILOT_T: s->pilot_t = parse_fraction("--pilot-time", optarg, 0, 1e7); break;
        case OPT_JITTER: s->jitter_r = parse_fraction("--jitter", optarg, 0, 1); break;
        case OPT_FEATURE:
            if (add_feature(s, optarg))
                return 2;
            break;
        case OPT_LIST: icpp_event_list(stdout); return 0;
        case OPT_VERSION: icpp_cli_version(stdout, "icpp-sample"); return 0;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    s->cmd = argv + optind;
    s->ncmd = argc - optind;
    if (check_options(s))
        return 2;
    s->validate = s->so.validate;
    add_default_bytes(s, s->attach ? 0 : s->ncmd, s->cmd);
    return -1;
}

/* Files first, before anything runs: the output rule (lib/fsafe.h) and a
 * program given by path that is not a file (a FIFO would never exec). */
static void check_files(const session *s)
{
    icpp_err ferr;
    if (icpp_fs_output_check(s->out, &ferr) < 0)
        die("%s", ferr.msg);
    check_not_program(s->out, s->attach, s->attach ? NULL : s->cmd[0]);
    if (!s->attach && strchr(s->cmd[0], '/') && icpp_fs_check_regular(s->cmd[0], &ferr) < 0 && ferr.code == EINVAL)
        die("%s", ferr.msg);
}

/* The events: parsed, checked against --jitter, their period chosen by
 * --auto-period's pilots, set up (with their learn events). */
static void choose_events(session *s)
{
    /* --jitter: software events only, so its default is the clock */
    if (s->jitter_r > 0 && !s->events)
        s->events = "cpu-clock";
    s->user_chose = s->events != NULL;
    parse_events(s, s->events ? s->events : "cycles");
    if (s->jitter_r > 0) {
        for (int e = 0; e < s->nev; e++)
            if (s->ev[e].hardware)
                die("--jitter randomizes software events (cpu-clock, task-clock) only: '%s' is a hardware event, "
                    "whose period stays fixed so that large PEBS works", s->ev[e].name);
        jitter_init(&s->jit_state, s->jitter_r);
        s->jit = &s->jit_state;
    }
    if (s->auto_period && !s->user_chose && s->ev[0].hardware && !event_available(&s->ev[0])) {
        /* The pilots sample what the run will: without a hardware PMU (a
         * VM) that is the clock, as open_events would choose. */
        s->nev = 0;
        parse_events(s, "cpu-clock");
        s->fell_back = 1;
    }
    if (s->auto_period) {
        char self[4096];
        ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
        self[sl > 0 ? sl : 0] = 0;
        icpp_err aerr;
        if (autoperiod_choose(s->cmd, self, s->ev[0].name, s->ev[0].hardware, s->pilot_t, &s->ap, &aerr) < 0)
            die("%s", aerr.msg);
        if (!s->quiet)
            autoperiod_print(&s->ap, stderr, s->ev[0].name);
        s->so.period = s->ap.period;
    }
    s->amd = icpp_cpu_is_amd();
    setup_events(s, s->amd);
    if (s->learn_every)
        s->live = icpp_replay_live();
}

/* One ring per online CPU, of the pages -m gave or the default for the mode. */
static void plan_rings(session *s)
{
    s->ncpus = online_cpus(&s->cpus);
    if (!s->pages) {
        s->pages = s->learn_every ? RING_PAGES_LEARN : RING_PAGES;
        while (s->validate && s->pages < RING_PAGES_VALIDATE && 2 * s->pages * (size_t)s->ncpus <= RING_VALIDATE_TOTAL)
            s->pages *= 2;
        s->pages_default = 1;
    }
    s->ring_owner = malloc((size_t)s->ncpus * sizeof *s->ring_owner);
    if (!s->ring_owner || !s->cpus)
        die("out of memory");
    for (int i = 0; i < s->ncpus; i++)
        s->ring_owner[i] = -1;
    s->rings = calloc((size_t)(unsigned)s->ncpus, sizeof *s->rings);
    if (!s->rings)
        die("out of memory");
}

static void catch_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Launch the command stopped (or take the attached process), open the
 * events, the output and its header, then let the command run (or describe
 * the attached process).  -1 if the command never started (said). */
static int start_sampling(session *s, int argc, char **argv)
{
    icpp_err err;
    int go[2] = {-1, -1}, ep[2] = {-1, -1};
    pid_t target = s->attach;
    if (!s->attach) {
        warn_privileges(s->cmd[0]);
        target = spawn_stopped(s->cmd, go, ep);
    }
    s->fell_back |= open_events(s, target, !s->attach, s->user_chose, s->amd, s->ring_owner);
    s->w = icpp_swriter_open(s->out, &err);
    if (!s->w) {
        kill_child();
        die("%s", err.msg);
    }
    write_header(s, argc, argv);
    if (!s->attach) {
        if (start_child(s, go[1], ep[0], s->cmd[0]) < 0) {
            icpp_swriter_discard(s->w);
            return -1;
        }
    } else {
        snapshot_process(s, s->attach, 0, 0);
    }
    /* Said only now that sampling runs, so that an error stays one line. */
    if (s->fell_back && !s->quiet)
        fprintf(stderr, "icpp-sample: 'cycles' is not available on this machine (no hardware PMU); "
                        "sampling cpu-clock instead\n");
    return 0;
}

/* Close the file and say what it holds; the exit status: the program's,
 * or 1 after a write error. */
static int finish(session *s, int status, int werr_said)
{
    icpp_err err;
    drain_all(s, 1);
    close_all(s);
    tq_free(&s->tq);
    /* The summary says what the file holds: after a write error (a full
     * disk) that is less than what was sampled. */
    /* END counts the sample records in the file: readers check it */
    int werr = icpp_swriter_finish(s->w, icpp_swriter_samples(s->w), s->lost, &err);
    uint64_t bytes, in_file;
    icpp_swriter_written(s->w, &bytes, &in_file);
    if (icpp_swriter_close(s->w, icpp_swriter_samples(s->w), s->lost, &err) < 0)
        werr = -1;
    if (werr < 0 && !werr_said)
        fprintf(stderr, "icpp-sample: %s\n", err.msg);
    if (!s->quiet)
        print_summary(s, in_file, bytes, s->out, s->auto_period ? &s->ap : NULL, s->jitter_r);
    if (s->jit)
        jitter_free(s->jit);
    free(s->ring_owner);
    free(s->cpus);
    free(s->fds);
    icpp_hmap_free(&s->ids);
    free(s->rings);
    free(s->procs);
    icpp_replay_close(s->live);
    if (werr < 0 && status == 0)
        return 1;
    return status;
}

int main(int argc, char **argv)
{
    static session s;   /* large (learn frames); zeroed */
    tq_init(&s.tq);
    s.out = "icpp.samples";
    s.pages = 0;        /* not given: RING_PAGES or RING_PAGES_LEARN */
    s.learn_every = LEARN_EVERY_DEFAULT;
    int rc = parse_options(&s, argc, argv);
    if (rc >= 0)
        return rc;
    check_files(&s);
    choose_events(&s);
    plan_rings(&s);
    catch_signals();
    if (start_sampling(&s, argc, argv) < 0)
        return 127;
    int werr_said = 0;      /* the write error was already reported */
    int status = record(&s, s.attach, s.attach ? NULL : s.cmd[0], s.quiet, &werr_said);
    return finish(&s, status, werr_said);
}
