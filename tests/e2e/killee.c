/* killee.c -- a program that reaches known paths, says so, then waits to be killed (or kills itself).
 *
 * usage: killee MODE [SCALE]
 *   main      runs its paths, prints "killee ready pid=P", blocks in main;block
 *   threads   3 worker threads run their paths and block in worker;block;
 *             then main prints the marker and blocks too
 *   fork      runs its paths, forks: the child runs main;child_main;c_leaf,
 *             prints "killee child ready pid=C" and blocks; the parent waits
 *             for it, prints "killee parent: child status S", runs
 *             main;after_leaf and exits 0
 *   selfkill  runs its paths, prints the marker, sleeps 0.3 s, then SIGKILLs
 *             itself in main;die_now (no handler can run)
 *   overflow  runs its paths, prints the marker, then recurses in
 *             main;overflow;overflow;... until the stack overflows (SIGSEGV
 *             with no alternate stack: no handler can run)
 *   churn     prints the marker, then makes new paths until killed:
 *             main;churn_run;X;X;... with X = churn_a or churn_b, 1 to 24
 *             deep, chosen by a counter's bits (the tree grows all the time,
 *             so a kill lands while nodes and memory chunks are being added)
 * SCALE (default 1) multiplies the leaf work (about 30 ms at 1).
 *
 * KILL-PATHS  (modes: a path reached before the kill; prefixes implied;
 * tests/e2e/test_train_kill.py reads these lines)
 * main threads fork selfkill overflow: main;run_main;stage_a;leaf_a
 * main threads fork selfkill overflow: main;run_main;stage_b;leaf_b
 * main threads selfkill overflow: main;marker
 * main threads: main;block
 * threads: worker;t_stage;t_leaf
 * threads: worker;block
 * fork: main;child_main;c_leaf
 * fork: main;child_main;block
 * fork: main;after_leaf
 * selfkill: main;die_now
 * overflow: main;overflow;overflow
 * churn: main;marker
 * churn: main;churn_run;churn_a
 * (fork: the child is killed, the parent then runs main;after_leaf and
 * exits normally.  overflow: main;overflow repeated to the depth the stack
 * allows, each deeper path recorded too.  churn: any sequence of churn_a
 * and churn_b after main;churn_run, up to 24.)
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))
#define NTHREADS 3

static volatile unsigned long sink;
static long scale = 1;
static pthread_barrier_t ready;

NOIPA void leaf_a(long n)
{
    for (long i = 0; i < n; i++)
        sink += (unsigned long)i ^ (sink >> 3);
}

NOIPA void leaf_b(long n)
{
    for (long i = 0; i < n; i++)
        sink ^= (unsigned long)i * 7 + (sink << 1);
}

NOIPA void stage_a(long n) { leaf_a(n); sink++; }
NOIPA void stage_b(long n) { leaf_b(n); sink++; }

NOIPA void run_main(void)
{
    for (int k = 0; k < 10; k++) {
        stage_a(2000000 * scale / 10);
        stage_b(2000000 * scale / 10);
    }
    sink++;
}

NOIPA void block(void)
{
    for (;;)
        pause();
}

NOIPA void t_leaf(long n)
{
    for (long i = 0; i < n; i++)
        sink += (unsigned long)i * 3;
}

NOIPA void t_stage(long n) { t_leaf(n); sink++; }

NOIPA void *worker(void *arg)
{
    (void)arg;
    t_stage(1000000 * scale);
    pthread_barrier_wait(&ready);
    block();
    return NULL;
}

NOIPA void c_leaf(long n)
{
    for (long i = 0; i < n; i++)
        sink -= (unsigned long)i ^ 0x55;
}

NOIPA void child_main(void)
{
    c_leaf(1000000 * scale);
    printf("killee child ready pid=%d\n", (int)getpid());
    fflush(stdout);
    block();
    sink++;     /* not a tail call: child_main stays on the path */
}

NOIPA void after_leaf(long n)
{
    for (long i = 0; i < n; i++)
        sink += 5;
}

NOIPA void die_now(void)
{
    kill(getpid(), SIGKILL);
    sink++;
}

#pragma GCC diagnostic ignored "-Winfinite-recursion"
NOIPA unsigned long overflow(unsigned long d)
{
    volatile char frame[4096];
    frame[d % sizeof frame] = (char)d;
    return overflow(d + 1) + frame[(d * 7) % sizeof frame];
}

NOIPA unsigned long churn_a(unsigned long bits, int d);
NOIPA unsigned long churn_b(unsigned long bits, int d);
/* Called through this table: gcc would turn a direct self-call into a loop. */
static unsigned long (*volatile churn_next[2])(unsigned long, int) = {churn_a, churn_b};

/* Follows the bits of `bits`: 0 -> churn_a, 1 -> churn_b, d more levels. */
NOIPA unsigned long churn_a(unsigned long bits, int d)
{
    if (d == 0)
        return bits;
    return churn_next[bits & 1](bits >> 1, d - 1) + 1;
}

NOIPA unsigned long churn_b(unsigned long bits, int d)
{
    if (d == 0)
        return bits;
    return churn_next[bits & 1](bits >> 1, d - 1) + 2;
}

NOIPA void churn_run(void)
{
    for (unsigned long i = 0;; i++) {
        unsigned long x = i * 0x9e3779b97f4a7c15ul;
        sink += churn_a(x >> 8, (int)(x % 24));
    }
}

NOIPA void marker(void)
{
    printf("killee ready pid=%d\n", (int)getpid());
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "main";
    if (argc > 2 && atol(argv[2]) > 0)
        scale = atol(argv[2]);
    if (!strcmp(mode, "churn")) {
        marker();
        churn_run();
    }
    run_main();
    if (!strcmp(mode, "main")) {
        marker();
        block();
    } else if (!strcmp(mode, "threads")) {
        pthread_t t[NTHREADS];
        pthread_barrier_init(&ready, NULL, NTHREADS + 1);
        for (int i = 0; i < NTHREADS; i++)
            if (pthread_create(&t[i], NULL, worker, NULL) != 0)
                return 1;
        pthread_barrier_wait(&ready);
        marker();
        block();
    } else if (!strcmp(mode, "fork")) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0)
            child_main();
        int st;
        if (waitpid(pid, &st, 0) != pid)
            return 1;
        printf("killee parent: child status %d\n", st);
        after_leaf(1000 * scale);
        return 0;
    } else if (!strcmp(mode, "selfkill")) {
        marker();
        usleep(300000);     /* a lagging icpp-gt still finds the process to read its stack base */
        die_now();
    } else if (!strcmp(mode, "overflow")) {
        marker();
        sink += overflow(0);
    }
    return 2;
}
