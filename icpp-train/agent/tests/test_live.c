/* test_live.c -- patch functions while 3 threads call them in a tight loop; then check exact counts. */
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent.h"

/* 256 functions with frame-pointer prologues (push %rbp = 1 byte, so threads
 * really execute at offsets 1..4) calling a shared leaf, plus tiny ones that
 * take the int3 fallback.  Phase 1: 3 threads hammer them while the main
 * thread patches them LIVE in 8 batches; every result is checked, so a torn
 * or wrong relocation shows as a crash or a wrong value.  Phase 2: fresh
 * threads make a known number of calls; their trees must count them
 * exactly.  Phase 3: a thread blocked in read() with its RIP inside bytes
 * 1..4 of blocker1 (xor; syscall; ret) is moved to the stub by the
 * evacuation signal and returns correctly; in a forked child, the same
 * with ICPP_AGENT_PATCH_NO_EVACUATE must crash (proof that it matters). */

#define NF 256
void tiny(void);
#define NOINL __attribute__((noipa, optimize("no-omit-frame-pointer")))

NOINL long leaf(long x) { return x ^ 0x5a; }
#define FN(i) NOINL long fn_##i(long x) { return leaf(x) * 3 + i; }
#define FN4(i) FN(i##0) FN(i##1) FN(i##2) FN(i##3)
#define FN16(i) FN4(i##0) FN4(i##1) FN4(i##2) FN4(i##3)
FN16(1) FN16(2) FN16(3) FN16(4) FN16(5) FN16(6) FN16(7) FN16(8)
FN16(9) FN16(10) FN16(11) FN16(12) FN16(13) FN16(14) FN16(15) FN16(16)
#define REF(i) fn_##i,
#define REF4(i) REF(i##0) REF(i##1) REF(i##2) REF(i##3)
#define REF16(i) REF4(i##0) REF4(i##1) REF4(i##2) REF4(i##3)
static long (*const fns[NF])(long) = { REF16(1) REF16(2) REF16(3) REF16(4) REF16(5) REF16(6)
    REF16(7) REF16(8) REF16(9) REF16(10) REF16(11) REF16(12) REF16(13) REF16(14) REF16(15)
    REF16(16) };
static long fn_const(int i)
{
    /* fn_<digits>: the constant i in `leaf(x) * 3 + i` is the name's number */
    static const int tens[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
    int g = i / 16, r = i % 16, a = r / 4, b = r % 4;
    char buf[32];
    snprintf(buf, sizeof buf, "%d%d%d", tens[g], a, b);
    return atol(buf);
}

/* long blockerN(int fd, void *buf, long n): read(2) with the syscall at
 * offset 2, so a blocked thread's RIP is 2 (restart) or 4 (bytes 1..4). */
long blocker1(int fd, void *buf, long n);
long blocker2(int fd, void *buf, long n);
void tiny(void);            /* 1 byte, directly followed by blocker1: int3 */
__asm__(".text\n"
        ".p2align 4\n"
        ".globl tiny\n.type tiny,@function\ntiny:\n  ret\n.size tiny,.-tiny\n"
        ".globl blocker1\n.type blocker1,@function\nblocker1:\n"
        "  xor %eax,%eax\n  syscall\n  ret\n  int3\n  int3\n  int3\n"
        ".size blocker1,.-blocker1\n"
        ".globl blocker2\n.type blocker2,@function\nblocker2:\n"
        "  xor %eax,%eax\n  syscall\n  ret\n  int3\n  int3\n  int3\n"
        ".size blocker2,.-blocker2\n");

typedef struct blk {
    long (*fn)(int, void *, long);
    int  fd;
    long ret;
    char buf[4];
} blk;

static void *block_thread(void *p)
{
    blk *b = p;
    b->ret = b->fn(b->fd, b->buf, 1);
    return NULL;
}

/* Start a thread blocked in fn, patch fn live, release it.  Returns the
 * thread's read() result (1 expected). */
static long blocked_patch(long (*fn)(int, void *, long), uint64_t size, unsigned flags,
                          icpp_agent_patch_stats *st)
{
    int pfd[2];
    if (pipe(pfd))
        return -100;
    blk b = { fn, pfd[0], -1, { 0 } };
    pthread_t th;
    pthread_create(&th, NULL, block_thread, &b);
    struct timespec ms50 = { 0, 50 * 1000 * 1000 };
    nanosleep(&ms50, NULL);                 /* it is now asleep in read() */
    icpp_agent_func f = { (uint64_t)(uintptr_t)fn, size, 9999, 0, 0 };
    icpp_err err = { 0 };
    if (icpp_agent_patch_module("blocker", &f, 1, flags | ICPP_AGENT_PATCH_LIVE, st, &err) < 0)
        printf("  patch blocker: %s\n", err.msg);
    if (f.how != ICPP_AGENT_HOW_JMP)
        return -101;
    if (write(pfd[1], "x", 1) != 1)
        return -102;
    pthread_join(th, NULL);
    close(pfd[0]);
    close(pfd[1]);
    return b.ret == 1 && b.buf[0] == 'x' ? 1 : b.ret;
}

static volatile int stop;
static long errors;

typedef struct job {
    long     iters;       /* phase 2: exact number of rounds; 0 = until stop */
    long     calls[NF];
    long     tiny_calls;
} job;

static void *worker(void *p)
{
    job *j = p;
    uint64_t x = (uint64_t)(uintptr_t)p;
    for (long it = 0; j->iters ? it < j->iters : !stop; it++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int i = (int)((x >> 33) % NF);
        long a = (long)(x >> 40);
        if (fns[i](a) != (a ^ 0x5a) * 3 + fn_const(i))
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        j->calls[i]++;
        if ((it & 15) == 0) {
            tiny();
            j->tiny_calls++;
        }
    }
    return NULL;
}

/* Phase 4: btl's first instruction is a branch target (a loop into byte
 * 1): it is int3-hooked, and its direct calls -- call (bc_call), jmp
 * (bc_jmp) and jcc rel32 (bc_jcc) -- are rewritten live, while threads run
 * them, to enter its stub.  long btl(long x) = x ^ 0x33 for x >= 0. */
long btl(long x);
long bc_jmp(long x);        /* btl(x) by a tail jmp rel32 */
long bc_jcc(long x);        /* x > 0 ? btl(x) by a tail jcc rel32 : -1 */
long bc_call2(long x);      /* btl(x) + 2 by a call rel32 at offset 9 (not relocated) */
NOINL long bc_call(long x) { return btl(x) + 1; }
__asm__(".text\n"
        ".globl btl\n.type btl,@function\nbtl:\n"
        "  push %rbx\n"
        "1: neg %rdi\n"                 /* offset 1: target of the loop */
        "  mov %rdi,%rax\n  test %rax,%rax\n"
        "  js 1b\n"                     /* past the bytes a jmp would relocate */
        "  xor $0x33,%rax\n  pop %rbx\n  ret\n"
        ".size btl,.-btl\n"
        ".globl bc_jmp\n.type bc_jmp,@function\nbc_jmp:\n"
        "  mov $0,%eax\n  jmp.d32 btl\n"
        ".size bc_jmp,.-bc_jmp\n"
        ".globl bc_jcc\n.type bc_jcc,@function\nbc_jcc:\n"
        "  mov $-1,%rax\n  test %rdi,%rdi\n  jg.d32 btl\n  ret\n"
        ".size bc_jcc,.-bc_jcc\n"
        ".globl bc_call2\n.type bc_call2,@function\nbc_call2:\n"
        "  mov $0,%eax\n  sub $8,%rsp\n  call btl\n  add $8,%rsp\n  add $2,%rax\n  ret\n"
        ".size bc_call2,.-bc_call2\n");

/* Run fn(x) with an int3 written at fn + off, a rewritten branch: the
 * SIGTRAP handler must take the branch as the CPU would (what it does for
 * threads reaching the branch while a live patch writes it). */
static long with_int3_at(long (*fn)(long), int off, long x)
{
    uint8_t *p = (uint8_t *)(uintptr_t)fn + off, old = *p;
    uintptr_t pg = (uintptr_t)p & ~(uintptr_t)4095;
    if (mprotect((void *)pg, 8192, PROT_READ | PROT_WRITE | PROT_EXEC))
        return -999;
    *(volatile uint8_t *)p = 0xcc;
    long r = fn(x);
    *(volatile uint8_t *)p = old;
    mprotect((void *)pg, 8192, PROT_READ | PROT_EXEC);
    return r;
}

static long bc_errors;

static int is_bc(const char *nm)
{
    return !strcmp(nm, "btl") || !strcmp(nm, "bc_call") || !strcmp(nm, "bc_jmp") || !strcmp(nm, "bc_jcc") ||
           !strcmp(nm, "bc_call2");
}

static void *bc_worker(void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    while (!stop) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        long a = (long)(x >> 40) - (1 << 10);           /* a few are <= 0: jcc not taken */
        long b = a < 0 ? -a : a;
        if (bc_call(b) != (b ^ 0x33) + 1 || bc_jmp(b) != (b ^ 0x33) || bc_jcc(a) != (a > 0 ? a ^ 0x33 : -1) ||
            bc_call2(b) != (b ^ 0x33) + 2)
            __atomic_add_fetch(&bc_errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

static void add_traps(uint32_t index, uint64_t traps, void *arg)
{
    if (index == 7000)
        *(uint64_t *)arg += traps;
}

static uint64_t btl_traps(void)
{
    uint64_t n = 0;
    icpp_agent_int3_each(add_traps, &n);
    return n;
}

typedef struct sym {
    char     name[64];
    uint64_t addr, size;
} sym;

static int read_syms(sym *out, int max)
{
    elf_version(EV_CURRENT);
    int fd = open("/proc/self/exe", O_RDONLY), n = 0;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    Elf_Scn *scn = NULL;
    extern char __executable_start[];
    /* PIE: runtime = bias + st_value; find the bias from a known symbol */
    uint64_t bias = 0;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        gelf_getshdr(scn, &sh);
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym s;
            gelf_getsym(d, (int)i, &s);
            const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
            if (!strcmp(nm, "leaf"))
                bias = (uint64_t)(uintptr_t)leaf - s.st_value;
        }
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && n < max; i++) {
            GElf_Sym s;
            gelf_getsym(d, (int)i, &s);
            const char *nm = elf_strptr(e, sh.sh_link, s.st_name);
            if (GELF_ST_TYPE(s.st_info) != STT_FUNC || !s.st_value)
                continue;
            if (strncmp(nm, "fn_", 3) && strcmp(nm, "leaf") && strcmp(nm, "tiny") && !is_bc(nm))
                continue;
            snprintf(out[n].name, sizeof out[n].name, "%s", nm);
            out[n].addr = bias + s.st_value;
            out[n].size = s.st_size;
            n++;
        }
    }
    (void)__executable_start;
    elf_end(e);
    close(fd);
    return n;
}

static int fails;
#define CHECK(c, ...)                                   \
    do {                                                \
        if (!(c)) {                                     \
            fails++;                                    \
            printf("FAIL line %d: ", __LINE__);         \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)

int main(void)
{
    icpp_err err = { 0 };
    if (icpp_agent_init(NULL, &err) < 0) {
        printf("FAIL init: %s\n", err.msg);
        return 1;
    }
    static sym all[NF + 16], syms[NF + 8], bc[5];
    int na = read_syms(all, NF + 16), ns = 0, nb = 0;
    for (int i = 0; i < na; i++) {      /* phase 4's functions apart */
        if (!is_bc(all[i].name))
            syms[ns++] = all[i];
        else if (nb < 5)
            bc[nb++] = all[i];
    }
    CHECK(ns == NF + 2 && nb == 5, "found %d functions and %d of phase 4", ns, nb);

    /* index = position in syms */
    static icpp_agent_func funcs[NF + 8];
    for (int i = 0; i < ns; i++) {
        funcs[i].addr = syms[i].addr;
        funcs[i].size = syms[i].size;
        funcs[i].index = (uint32_t)i;
    }

    /* phase 1 */
    pthread_t th[3];
    static job jobs[3];
    for (int t = 0; t < 3; t++)
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    struct timespec ms20 = { 0, 20 * 1000 * 1000 };
    nanosleep(&ms20, NULL);
    icpp_agent_patch_stats st = { 0 };
    int batch = (ns + 7) / 8;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int b = 0; b < ns; b += batch) {
        int k = ns - b < batch ? ns - b : batch;
        if (icpp_agent_patch_module("test_live", funcs + b, (size_t)k, ICPP_AGENT_PATCH_LIVE, &st,
                                    &err) < 0)
            CHECK(0, "patch: %s", err.msg);
        nanosleep(&ms20, NULL);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    nanosleep(&ms20, NULL);
    stop = 1;
    for (int t = 0; t < 3; t++)
        pthread_join(th[t], NULL);
    long phase1 = 0;
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < NF; i++)
            phase1 += jobs[t].calls[i];
    CHECK(errors == 0, "%ld wrong results while patching", errors);
    CHECK(st.live == 1, "live protocol not used");
    CHECK(st.how[ICPP_AGENT_HOW_JMP] == NF + 1 && st.how[ICPP_AGENT_HOW_INT3] == 1,
          "jmp %u int3 %u", st.how[ICPP_AGENT_HOW_JMP], st.how[ICPP_AGENT_HOW_INT3]);
    CHECK(st.evac_unacked == 0, "evacuation: %d threads did not answer", st.evac_unacked);
    printf("  phase 1: %ld checked calls by 3 threads while 8 live patches ran (%.1f ms incl. "
           "sleeps), %u thread(s) moved out of patched bytes\n",
           phase1, (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
           st.evac_moved);

    /* phase 2: exact counts in fresh threads */
    static job j2[3];
    for (int t = 0; t < 3; t++) {
        j2[t].iters = 20000 + 1000 * t;
        pthread_create(&th[t], NULL, worker, &j2[t]);
    }
    for (int t = 0; t < 3; t++)
        pthread_join(th[t], NULL);
    CHECK(errors == 0, "%ld wrong results after patching", errors);
    int seen = 0;
    for (const icpp_agent_thread *t = icpp_agent_thread_first(); t; t = icpp_agent_thread_next(t)) {
        icpp_agent_thread_info ti;
        icpp_agent_thread_get_info(t, &ti);
        if (ti.entries == 0)
            continue;
        job *j = NULL;
        /* phase-2 threads have exactly iters fn calls + iters fn->leaf calls + tiny calls */
        for (int k = 0; k < 3; k++) {
            long want = 2 * j2[k].iters + j2[k].tiny_calls;
            if ((long)ti.entries == want)
                j = &j2[k];
        }
        if (!j)
            continue;   /* a phase-1 thread */
        seen++;
        CHECK(ti.base_kind == ICPP_AGENT_BASE_MAPTOP, "base kind %d", ti.base_kind);
        long c[NF + 8] = { 0 }, leafc = 0;
        for (const icpp_agent_node *n = icpp_agent_node_first_child(icpp_agent_thread_root(t)); n;
             n = icpp_agent_node_next_sibling(n)) {
            uint32_t f = icpp_agent_node_func(n);
            c[f] += (long)icpp_agent_node_count(n);
            for (const icpp_agent_node *m = icpp_agent_node_first_child(n); m;
                 m = icpp_agent_node_next_sibling(m)) {
                CHECK(!strcmp(syms[icpp_agent_node_func(m)].name, "leaf"), "child %s of %s",
                      syms[icpp_agent_node_func(m)].name, syms[f].name);
                CHECK(icpp_agent_node_count(m) == icpp_agent_node_count(n), "leaf count under %s",
                      syms[f].name);
                leafc += (long)icpp_agent_node_count(m);
            }
        }
        for (int i = 0; i < ns; i++) {
            const char *nm = syms[i].name;
            if (!strcmp(nm, "tiny"))
                CHECK(c[i] == j->tiny_calls, "tiny %ld want %ld", c[i], j->tiny_calls);
            else if (!strcmp(nm, "leaf"))
                CHECK(c[i] == 0, "leaf at top level");
            else {
                int k;
                for (k = 0; k < NF && (long (*)(long))(uintptr_t)syms[i].addr != fns[k]; k++)
                    ;
                CHECK(k < NF && c[i] == j->calls[k], "%s: %ld want %ld", nm, c[i],
                      k < NF ? j->calls[k] : -1);
            }
        }
        CHECK(leafc == j->iters, "leaf total %ld want %ld", leafc, j->iters);
    }
    CHECK(seen == 3, "found %d phase-2 threads", seen);

    /* phase 3: evacuation */
    pid_t kid = fork();
    if (kid == 0) {
        icpp_agent_patch_stats s3 = { 0 };
        long r = blocked_patch(blocker2, 8, ICPP_AGENT_PATCH_NO_EVACUATE, &s3);
        _exit(r == 1 ? 0 : 1);
    }
    int ws = 0;
    waitpid(kid, &ws, 0);
    CHECK(!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0),
          "without evacuation the thread inside bytes 1..4 survived (status %#x)", ws);
    printf("  phase 3: without evacuation the blocked thread %s\n",
           WIFSIGNALED(ws) ? strsignal(WTERMSIG(ws)) : "returned a wrong result");
    icpp_agent_patch_stats s3 = { 0 };
    long r = blocked_patch(blocker1, 8, 0, &s3);
    CHECK(r == 1, "blocked thread after live patch: %ld", r);
    CHECK(s3.evac_moved == 1 && s3.evac_unacked == 0, "evacuation moved %u, unacked %d",
          s3.evac_moved, s3.evac_unacked);
    printf("  phase 3: with evacuation: moved %u thread, read() returned %ld\n", s3.evac_moved, r);

    /* phase 4: btl's direct calls rewritten live while 3 threads run them */
    icpp_agent_func bf[5];
    int bi = -1;
    for (int i = 0; i < nb; i++) {
        bf[i] = (icpp_agent_func){ bc[i].addr, bc[i].size, strcmp(bc[i].name, "btl") ? 7001u + (uint32_t)i : 7000u,
                                   0, 0, 0, 0 };
        if (!strcmp(bc[i].name, "btl"))
            bi = i;
    }
    stop = 0;
    for (int t = 0; t < 3; t++)
        pthread_create(&th[t], NULL, bc_worker, (void *)(uintptr_t)(t + 1));
    nanosleep(&ms20, NULL);
    icpp_agent_patch_stats s4 = { 0 };
    if (icpp_agent_patch_module("test_live_bc", bf, (size_t)nb, ICPP_AGENT_PATCH_LIVE, &s4, &err) < 0)
        CHECK(0, "patch: %s", err.msg);
    nanosleep(&ms20, NULL);
    stop = 1;
    for (int t = 0; t < 3; t++)
        pthread_join(th[t], NULL);
    CHECK(bc_errors == 0, "%ld wrong results around the live rewrite of btl's calls", bc_errors);
    CHECK(bi >= 0 && bf[bi].how == ICPP_AGENT_HOW_INT3 && bf[bi].reason == ICPP_AGENT_R_BRANCH_IN,
          "btl: how %d reason %d", bi >= 0 ? bf[bi].how : -1, bi >= 0 ? bf[bi].reason : -1);
    /* bc_call's call runs from its stub's copy (retargeted there), the others in place */
    CHECK(bi >= 0 && bf[bi].calls == 4 && s4.calls_redirected == 4, "btl: %u direct calls rewritten, want 4",
          bi >= 0 ? bf[bi].calls : 0);
    uint64_t t0r = btl_traps();
    long (*volatile ptr)(long) = btl;
    for (long i = 1; i <= 1000; i++)
        CHECK(bc_call(i) == (i ^ 0x33) + 1 && bc_jmp(i) == (i ^ 0x33) && bc_jcc(i) == (i ^ 0x33) &&
              bc_call2(i) == (i ^ 0x33) + 2, "results at %ld", i);
    uint64_t t1r = btl_traps();
    for (long i = 0; i < 10; i++)
        CHECK(ptr(i) == (i ^ 0x33), "btl through a pointer");
    uint64_t t2r = btl_traps();
    /* the handler's side of the live rewrite: call, jmp, jcc taken and not */
    long e1 = with_int3_at(bc_call2, 9, 5), e2 = with_int3_at(bc_jmp, 5, 6), e3 = with_int3_at(bc_jcc, 10, 7),
         e4 = with_int3_at(bc_jcc, 10, -7);
    CHECK(e1 == (5 ^ 0x33) + 2 && e2 == (6 ^ 0x33) && e3 == (7 ^ 0x33) && e4 == -1,
          "branches taken by the handler: %ld %ld %ld %ld", e1, e2, e3, e4);
    CHECK(btl_traps() == t2r, "btl trapped when its rewritten callers trapped");
    CHECK(t1r == t0r && t2r - t1r == 10, "btl traps: %llu by 4000 direct calls (want 0), %llu by 10 through a pointer",
          (unsigned long long)(t1r - t0r), (unsigned long long)(t2r - t1r));
    printf("  phase 4: btl's 4 direct calls rewritten live under 3 threads (%llu executions taken by the "
           "handler meanwhile); afterwards 4000 direct calls trapped %llu times, 10 through a pointer %llu\n",
           (unsigned long long)s4.calls_trapped, (unsigned long long)(t1r - t0r), (unsigned long long)(t2r - t1r));
    printf("test_live: %d failure(s)\n", fails);
    return fails != 0;
}
