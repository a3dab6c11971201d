/* gt_spin.c -- a program with a known call path for testing icpp-gt.
 *
 * main -> a -> b -> c, c spinning; main calls a() until it has used --ms
 * milliseconds of CPU time (so a loaded machine does not mean fewer samples).  With --threads N, N threads run gt_thread -> a -> b -> c instead
 * while main waits in pthread_join.  --fork: a forked child runs the same
 * loop.  --exec: after the loop, exec this program again with the other
 * arguments.  --info prints the facts a test compares icpp-gt against
 * (startstack, thread stack tops) to stderr.  --exit N / --kill SIG end the
 * program with status N / by signal SIG.  a, b, c are noipa and do work after
 * each call so that -O2 neither inlines, clones nor tail-calls them. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static double run_ms = 400;
static int info;

/* CPU time of the calling thread. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noipa)) void c(void)
{
    for (long i = 0; i < 200000; i++)
        sink += i;
}

__attribute__((noipa)) void b(void)
{
    c();
    sink++;
}

__attribute__((noipa)) void a(void)
{
    b();
    sink++;
}

static unsigned long startstack(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 28; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoul(p + 1, NULL, 10) : 0;
}

__attribute__((noipa)) void *gt_thread(void *arg)
{
    double end = cpu_ms() + run_ms;
    if (info) {
        pthread_attr_t at;
        void *addr;
        size_t size;
        pthread_getattr_np(pthread_self(), &at);
        pthread_attr_getstack(&at, &addr, &size);
        fprintf(stderr, "gt_spin thread %d %ld %lx\n", (int)getpid(),
                (long)syscall(SYS_gettid), (unsigned long)addr + size);
        pthread_attr_destroy(&at);
    }
    while (cpu_ms() < end)
        a();
    sink++;
    return arg;
}

int main(int argc, char **argv)
{
    int threads = 0, do_fork = 0, do_exec = 0, code = 0, sig = 0;
    char *rest[64];
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ms") && i + 1 < argc)
            run_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fork"))
            do_fork = 1;
        else if (!strcmp(argv[i], "--exec"))
            do_exec = 1;
        else if (!strcmp(argv[i], "--info"))
            info = 1;
        else if (!strcmp(argv[i], "--exit") && i + 1 < argc)
            code = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kill") && i + 1 < argc)
            sig = atoi(argv[++i]);
        else {
            fprintf(stderr, "gt_spin: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    /* The exec'd image gets the same arguments minus --exec. */
    for (int i = 1; i < argc && nrest < 63; i++)
        if (strcmp(argv[i], "--exec"))
            rest[nrest++] = argv[i];
    rest[nrest] = NULL;

    pid_t child = 0;
    if (do_fork) {
        fflush(NULL);
        child = fork();
    }
    if (info)
        fprintf(stderr, "gt_spin startstack %d %lx\n", (int)getpid(), startstack());
    if (threads > 0) {
        pthread_t t[64];
        if (threads > 64)
            threads = 64;
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, gt_thread, NULL);
        for (int i = 0; i < threads; i++)
            pthread_join(t[i], NULL);
    } else {
        double end = cpu_ms() + run_ms;
        while (cpu_ms() < end)
            a();
    }
    if (do_fork && child == 0)
        _exit(0);
    if (child > 0)
        waitpid(child, NULL, 0);
    if (do_exec) {
        fflush(NULL);
        execv("/proc/self/exe", rest);
        perror("gt_spin: execv");
        return 2;
    }
    if (sig)
        raise(sig);
    return code;
}
