/* e2e_prog.c -- program run under the agent: recursion, mutual recursion, function pointers, qsort,
 * longjmp, a thread, a tail call, tiny and hand-written functions, fork.  Built twice: plain (-O2, run
 * with the agent) and with -DGT, where every function keeps its own path counts (ground truth). */
#include <pthread.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define F __attribute__((noipa))

/* ---- ground truth (GT build only) ----------------------------------------- */
#ifdef GT
#define GT_MAXD 4096
static __thread const char *gt_stack[GT_MAXD];
static __thread int gt_depth;
static __thread const char *gt_label = "[main]";
typedef struct { char *path; long count; } gt_ent;
static gt_ent gt_tab[8192];
static int gt_n;
static pthread_mutex_t gt_mu = PTHREAD_MUTEX_INITIALIZER;
static int gt_pid;

static int gt_enter(const char *name)
{
    int d = gt_depth;
    gt_stack[gt_depth++] = name;
    size_t len = strlen(gt_label) + 1;
    for (int i = 0; i < gt_depth; i++)
        len += strlen(gt_stack[i]) + 1;
    char *p = malloc(len), *q = p;
    q += sprintf(q, "%s", gt_label);
    for (int i = 0; i < gt_depth; i++)
        q += sprintf(q, ";%s", gt_stack[i]);
    pthread_mutex_lock(&gt_mu);
    int k;
    for (k = 0; k < gt_n && strcmp(gt_tab[k].path, p); k++)
        ;
    if (k == gt_n) {
        gt_tab[gt_n].path = p;
        gt_tab[gt_n++].count = 0;
    } else {
        free(p);
    }
    gt_tab[k].count++;
    pthread_mutex_unlock(&gt_mu);
    return d;
}
static void gt_leave(int *d) { gt_depth = *d; }
#define ENTER() int gt_d_ __attribute__((cleanup(gt_leave))) = gt_enter(__func__)
#define GT_TAIL() (gt_depth = gt_d_)
#define GT_DEPTH() gt_depth
#define GT_RESTORE(d) (gt_depth = (d))
#define GT_LABEL(l) (gt_label = (l))
/* a call of a hand-written (asm) function, and of one it calls */
#define GT_ASM(name, call) ({ int d_ = gt_enter(name); __typeof__(call) r_ = (call); gt_depth = d_; r_; })
#define GT_ASM2(n1, n2, call) ({ int d_ = gt_enter(n1); gt_enter(n2); __typeof__(call) r_ = (call); gt_depth = d_; r_; })
/* n1 runs into n2's entry without a call: n2 replaces it (same entry SP) */
#define GT_ASM_FALL(n1, n2, call) ({ int d_ = gt_enter(n1); gt_depth = d_; gt_enter(n2); __typeof__(call) r_ = (call); gt_depth = d_; r_; })
__attribute__((destructor)) static void gt_print(void)
{
    if (getpid() != gt_pid)
        return;
    for (int k = 0; k < gt_n; k++)
        fprintf(stderr, "GT %s %ld\n", gt_tab[k].path, gt_tab[k].count);
}
#else
#define ENTER() (void)0
#define GT_TAIL() (void)0
#define GT_DEPTH() 0
#define GT_RESTORE(d) (void)(d)
#define GT_LABEL(l) (void)0
#define GT_ASM(name, call) (call)
#define GT_ASM2(n1, n2, call) (call)
#define GT_ASM_FALL(n1, n2, call) (call)
#endif

volatile long sink;

/* ---- heights: the program measures them itself ------------------------------- */

/* Base of the calling thread, measured independently of the agent (stdio):
 * main thread startstack, other threads the end of the mapping holding sp. */
F static uint64_t my_base(int main_thread)
{
    ENTER();
    char buf[4096];
    uint64_t base = 0;
    if (main_thread) {
        FILE *f = fopen("/proc/self/stat", "r");
        if (f && fgets(buf, sizeof buf, f)) {
            char *p = strrchr(buf, ')');
            for (int field = 2; p && field < 28; field++)
                p = strchr(p + 1, ' ');
            if (p)
                base = strtoull(p + 1, NULL, 10);
        }
        if (f)
            fclose(f);
    } else {
        uint64_t sp = (uint64_t)(uintptr_t)buf;
        FILE *f = fopen("/proc/self/maps", "r");
        while (f && fgets(buf, sizeof buf, f)) {
            unsigned long long a, b;
            if (sscanf(buf, "%llx-%llx", &a, &b) == 2 && sp >= a && sp < b)
                base = b;
        }
        if (f)
            fclose(f);
    }
    return base;
}

/* Prints its own height: base - entry SP, entry SP = frame address + 8
 * (the frame pointer is forced; checked by run.sh in the disassembly). */
F __attribute__((optimize("no-omit-frame-pointer"))) static void probe(const char *tag, int main_thread)
{
    ENTER();
    uint64_t esp = (uint64_t)(uintptr_t)__builtin_frame_address(0) + 8;
    uint64_t base = my_base(main_thread);
    printf("PROBE %s %lld\n", tag, (long long)(base - esp));
}

/* ---- recursion ------------------------------------------------------------- */

F static int rec(int n, int main_thread)
{
    ENTER();
    if (n == 0) {
        probe("rec", main_thread);
        return 0;
    }
    int r = rec(n - 1, main_thread) + 1;
    sink = r;          /* keeps the call out of tail position */
    return r;
}

F static int is_odd(int n);
F static int is_even(int n)
{
    ENTER();
    if (n == 0)
        return 1;
    int r = is_odd(n - 1);
    sink = r;
    return r;
}
F static int is_odd(int n)
{
    ENTER();
    if (n == 0)
        return 0;
    int r = is_even(n - 1);
    sink = r;
    return r;
}

/* ---- function pointers and qsort ------------------------------------------- */

F static long op_add(long a, long b) { ENTER(); return a + b; }
F static long op_mul(long a, long b) { ENTER(); return a * b; }
F static long op_sub(long a, long b) { ENTER(); return a - b; }

F static long run_ops(void)
{
    ENTER();
    long (*ops[3])(long, long) = { op_add, op_mul, op_sub };
    long acc = 0;
    for (int i = 0; i < 30; i++)
        acc += ops[i % 3](i, 2);
    return acc;
}

F static int cmp_int(const void *a, const void *b)
{
    ENTER();
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

F static int sort_driver(void)
{
    ENTER();
    int v[64];
    for (int i = 0; i < 64; i++)
        v[i] = (i * 37 + 11) % 64;
    qsort(v, 64, sizeof v[0], cmp_int);
    for (int i = 1; i < 64; i++)
        if (v[i - 1] > v[i])
            return -1;
    return v[63];
}

/* ---- setjmp / longjmp ------------------------------------------------------- */

static jmp_buf jb;

F static void lj_deep(int n)
{
    ENTER();
    if (n == 0)
        longjmp(jb, 7);
    lj_deep(n - 1);
    sink = n;
}

F static int after_longjmp(int v) { ENTER(); return v * 2; }

F static int lj_driver(void)
{
    ENTER();
    volatile int d = GT_DEPTH();
    int v = setjmp(jb);
    if (v == 0) {
        lj_deep(5);
        return -1;
    }
    GT_RESTORE(d);
    return after_longjmp(v);
}

/* ---- tail call: tail_caller ends in `jmp tail_callee` at -O2 ---------------- */

F static long tail_callee(long x) { ENTER(); return x + sink; }
F static long tail_caller(long x)
{
    ENTER();
    sink += x;
    GT_TAIL();
    return tail_callee(x * 3);
}

/* ---- tiny functions (jmp over their padding) and hand-written ones ---------- */

F static void empty_fn(void) { ENTER(); }                 /* ret: 1 byte + padding */
F static int tiny_zero(void) { ENTER(); return 0; }      /* xor; ret: 3 bytes + padding */

int asm_loop(int n);        /* loop branches back into bytes 1..4: short jmp */
int asm_tiny(void);         /* 3 bytes followed directly by asm_jcc: short jmp */
int asm_nop1(int n);        /* loop branches back into byte 1: int3 */
int asm_fall(int x);        /* falls through padding into asm_tiny2 when x == 0 */
int asm_tiny2(void);        /* 3 bytes; the only padding in reach can run: int3 */
int asm_tiny3(void);        /* 4 bytes; dead padding before it: short jmp */
int asm_jcc(int x);         /* jcc rel8 inside the first 5 bytes */
/* asm_bt: its first instruction is a branch target (a loop into byte 1):
 * int3, but its direct calls are rewritten to enter its stub; it returns
 * its entry SP.  The others reach it by a tail call: jmp rel32, jcc rel32,
 * and jmp rel8 (which cannot reach the stub: it traps). */
uint64_t asm_bt(int n);
uint64_t asm_bt_tail(int n);
uint64_t asm_bt_jcc(int n);
uint64_t asm_bt_near(int n);
int asm_call_first(void);   /* starts with a call */
int asm_helper(void);
int asm_rip(void);          /* starts with a rip-relative load */
__asm__(
    ".text\n"
    ".globl asm_loop\n.type asm_loop,@function\n"
    "asm_loop:\n"
    "  xor %eax,%eax\n"           /* 2 bytes */
    "1: add $1,%eax\n"            /* offset 2: target of the loop */
    "  cmp %edi,%eax\n"
    "  jl 1b\n"
    "  ret\n"
    ".size asm_loop,.-asm_loop\n"
    ".globl asm_tiny\n.type asm_tiny,@function\n"   /* 3 bytes, no padding: int3 */
    "asm_tiny:\n"
    "  xor %eax,%eax\n"
    "  ret\n"
    ".size asm_tiny,.-asm_tiny\n"
    ".globl asm_nop1\n.type asm_nop1,@function\n"
    "asm_nop1:\n"
    "  nop\n"                      /* 1 byte */
    "1: add $1,%eax\n"             /* offset 1: target of the loop */
    "  cmp %edi,%eax\n"
    "  jl 1b\n"
    "  ret\n"
    ".size asm_nop1,.-asm_nop1\n"
    /* An island must lie within 128 bytes: walls of non-padding code (sized
     * functions full of ret) keep every other gap out of reach. */
    ".p2align 4\n"
    ".type asm_wall1,@function\n"
    "asm_wall1: .fill 144,1,0xc3\n"
    ".size asm_wall1,.-asm_wall1\n"
    ".globl asm_fall\n.type asm_fall,@function\n"
    "asm_fall:\n"
    "  mov $7,%eax\n"
    "  test %edi,%edi\n"
    "  jne asm_wall2+8\n"         /* a ret, past the entry's bytes */
    ".size asm_fall,.-asm_fall\n"
    "  .fill 8,1,0x90\n"           /* runs when x == 0: no island here */
    ".globl asm_tiny2\n.type asm_tiny2,@function\n"
    "asm_tiny2:\n"
    "  xor %eax,%eax\n"
    "  ret\n"
    ".size asm_tiny2,.-asm_tiny2\n"
    ".type asm_wall2,@function\n"
    "asm_wall2: .fill 144,1,0xc3\n"
    ".size asm_wall2,.-asm_wall2\n"
    "  .fill 8,1,0x90\n"           /* after a ret: dead, an island */
    ".globl asm_tiny3\n.type asm_tiny3,@function\n"
    "asm_tiny3:\n"
    "  push $3\n"
    "  pop %rax\n"
    "  ret\n"
    ".size asm_tiny3,.-asm_tiny3\n"
    ".type asm_wall3,@function\n"
    "asm_wall3: .fill 144,1,0xc3\n"
    ".size asm_wall3,.-asm_wall3\n"
    ".globl asm_jcc\n.type asm_jcc,@function\n"
    "asm_jcc:\n"
    "  test %edi,%edi\n"
    "  je 2f\n"
    "  mov $7,%eax\n"
    "  ret\n"
    "2: mov $3,%eax\n"
    "  ret\n"
    ".size asm_jcc,.-asm_jcc\n"
    ".globl asm_bt\n.type asm_bt,@function\n"
    "asm_bt:\n"
    ".Lbt:\n"
    "  push %rbx\n"                /* 1 byte */
    "1: lea 8(%rsp),%rax\n"        /* offset 1: target of the loop; the entry SP */
    "  sub $1,%edi\n"
    "  jg 1b\n"
    "  pop %rbx\n"
    "  ret\n"
    ".size asm_bt,.-asm_bt\n"
    ".globl asm_bt_near\n.type asm_bt_near,@function\n"
    "asm_bt_near:\n"
    "  mov $0,%eax\n"              /* 5 bytes: the jmp below is not relocated */
    "  jmp .Lbt\n"                 /* rel8 */
    ".size asm_bt_near,.-asm_bt_near\n"
    ".globl asm_bt_tail\n.type asm_bt_tail,@function\n"
    "asm_bt_tail:\n"
    "  mov $0,%eax\n"
    "  jmp.d32 asm_bt\n"           /* rel32 */
    ".size asm_bt_tail,.-asm_bt_tail\n"
    ".globl asm_bt_jcc\n.type asm_bt_jcc,@function\n"
    "asm_bt_jcc:\n"
    "  mov $0,%eax\n"
    "  test %edi,%edi\n"
    "  jg.d32 asm_bt\n"            /* rel32 */
    "  ret\n"
    ".size asm_bt_jcc,.-asm_bt_jcc\n"
    ".globl asm_call_first\n.type asm_call_first,@function\n"
    "asm_call_first:\n"
    "  call asm_helper\n"
    "  add $1,%eax\n"
    "  ret\n"
    ".size asm_call_first,.-asm_call_first\n"
    ".globl asm_helper\n.type asm_helper,@function\n"
    "asm_helper:\n"
    "  mov $41,%eax\n"
    "  ret\n"
    ".size asm_helper,.-asm_helper\n"
    ".globl asm_rip\n.type asm_rip,@function\n"
    "asm_rip:\n"
    "  mov asm_rip_val(%rip),%eax\n"
    "  ret\n"
    ".size asm_rip,.-asm_rip\n"
    ".data\nasm_rip_val: .long 1234\n.text\n");

/* ---- thread and fork --------------------------------------------------------- */

F static void *thread_fn(void *arg)
{
    GT_LABEL("[thread]");
    ENTER();
    probe("thread_fn", 0);
    sink = rec(40, 0);
    sink += run_ops();
    return arg;
}

F static int child_work(void) { ENTER(); return 5; }

F static int do_fork(void)
{
    ENTER();
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        sink = child_work();
        exit(0);        /* runs destructors: the agent's child dump */
    }
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* In a function of their own: main calls the asm functions above with
 * stack arguments pushed for printf, and a stale asm_loop frame would be
 * kept (this driver gives the recorder no function ranges to check with). */
static __attribute__((noinline)) void asm_more(void)
{
    ENTER();
    int a1 = GT_ASM("asm_nop1", asm_nop1(4));
    int a2 = GT_ASM("asm_fall", asm_fall(1));
    int a3 = GT_ASM_FALL("asm_fall", "asm_tiny2", asm_fall(0));
    int a4 = GT_ASM("asm_tiny2", asm_tiny2());
    int a5 = GT_ASM("asm_tiny3", asm_tiny3());
    printf("asm2 %d %d %d %d %d\n", a1, a2, a3, a4, a5);
}

/* asm_bt entered four ways at one SP: the heights the agent records must
 * be the one this prints (base - asm_bt's entry SP, measured here). */
F static void bt_driver(void)
{
    ENTER();
    uint64_t (*volatile ptr)(int) = asm_bt;
    uint64_t base = my_base(1);
    uint64_t s1 = GT_ASM("asm_bt", asm_bt(3));                          /* call rel32 */
    uint64_t s2 = GT_ASM("asm_bt", ptr(2));                             /* call *reg: traps */
    uint64_t s3 = GT_ASM_FALL("asm_bt_tail", "asm_bt", asm_bt_tail(4)); /* jmp rel32 */
    uint64_t s4 = GT_ASM_FALL("asm_bt_jcc", "asm_bt", asm_bt_jcc(1));   /* jcc rel32 */
    uint64_t s5 = GT_ASM_FALL("asm_bt_near", "asm_bt", asm_bt_near(2)); /* jmp rel8: traps */
    printf("BT %llu %llu %llu %llu %llu\n", (unsigned long long)(base - s1), (unsigned long long)(base - s2),
           (unsigned long long)(base - s3), (unsigned long long)(base - s4), (unsigned long long)(base - s5));
}

int main(int argc, char **argv)
{
#ifdef GT
    gt_pid = getpid();
#endif
    ENTER();
    (void)argv;
    probe("main", 1);
    printf("rec %d\n", rec(1000, 1));
    printf("even %d odd %d\n", is_even(10), is_odd(7));
    printf("ops %ld\n", run_ops());
    printf("sort %d\n", sort_driver());
    printf("lj %d\n", lj_driver());
    long t = 0;
    for (int i = 0; i < 3; i++)
        t += tail_caller(i);
    printf("tail %ld\n", t);
    for (int i = 0; i < 5; i++)
        empty_fn();
    int z = 0;
    for (int i = 0; i < 4; i++)
        z += tiny_zero();
    printf("tiny %d\n", z);
    asm_more();
    bt_driver();
    printf("asm %d %d %d %d %d %d\n", GT_ASM("asm_loop", asm_loop(5)), GT_ASM("asm_loop", asm_loop(3)),
           GT_ASM("asm_jcc", asm_jcc(0)), GT_ASM("asm_jcc", asm_jcc(1)),
           GT_ASM2("asm_call_first", "asm_helper", asm_call_first()), GT_ASM("asm_rip", asm_rip()));
    for (int i = 0; i < 3; i++) {
        sink += GT_ASM2("asm_call_first", "asm_helper", asm_call_first());
        sink += GT_ASM("asm_tiny", asm_tiny());
    }
    pthread_t th;
    pthread_create(&th, NULL, thread_fn, NULL);
    pthread_join(th, NULL);
    printf("fork %d\n", do_fork());
    return argc + 2;      /* exit status 3 */
}
