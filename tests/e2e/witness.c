/* witness.c -- a program that writes down its own thread bases, for checking what a sampler recorded.
 *
 * usage: witness TRUTHFILE [SCALE]
 * Each thread (main, 3 pthreads, a forked child's main thread) appends one
 * line "pid tid base kind" to TRUTHFILE, where base is what docs/definitions.md
 * defines (thread base), measured from inside: startstack (field 28 of
 * /proc/self/stat) for a main thread, the end of the /proc/self/maps mapping
 * holding a local variable for other threads.  Then each spins in its own
 * function (spin_main, spin_thread, spin_child) and in libc's random_r, so
 * samples land in the executable and in libc.  Prints "witness ok", exits 0.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *truth;
static int scale = 1;
static volatile unsigned long sink;

static unsigned long long startstack(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    int field = 2;
    unsigned long long v = 0;
    for (char *t = strtok(p + 1, " "); t; t = strtok(NULL, " "))
        if (++field == 28) {
            v = strtoull(t, NULL, 10);
            break;
        }
    return v;
}

static unsigned long long maptop(uintptr_t addr)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long long top = 0, a, b;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%llx-%llx", &a, &b) == 2 && addr >= a && addr < b)
            top = b;
    if (f)
        fclose(f);
    return top;
}

static void note(int main_thread)
{
    int local = 0;
    unsigned long long base = main_thread ? startstack() : maptop((uintptr_t)&local);
    FILE *f = fopen(truth, "a");
    if (f) {
        fprintf(f, "%d %ld %llu %s\n", (int)getpid(), (long)syscall(SYS_gettid), base,
                main_thread ? "startstack" : "maptop");
        fclose(f);
    }
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Spin for `secs` of this thread's CPU time, alternating own code and libc. */
static void work(void (*own)(void), double secs)
{
    struct random_data rd;
    char state[64];
    int32_t r;
    memset(&rd, 0, sizeof rd);
    initstate_r(1, state, sizeof state, &rd);
    double end = cpu_now() + secs;
    while (cpu_now() < end) {
        own();
        for (int i = 0; i < 20000; i++) {
            random_r(&rd, &r);
            sink += (unsigned long)r;
        }
    }
}

__attribute__((noinline)) void spin_main(void)
{
    for (int i = 0; i < 200000; i++)
        sink += (unsigned long)i * 7;
}
__attribute__((noinline)) void spin_thread(void)
{
    for (int i = 0; i < 200000; i++)
        sink += (unsigned long)i * 11;
}
__attribute__((noinline)) void spin_child(void)
{
    for (int i = 0; i < 200000; i++)
        sink += (unsigned long)i * 13;
}

static void *thread_main(void *arg)
{
    (void)arg;
    note(0);
    work(spin_thread, 0.05 * scale);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: witness TRUTHFILE [SCALE]\n");
        return 2;
    }
    truth = argv[1];
    if (argc > 2)
        scale = atoi(argv[2]);
    note(1);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, thread_main, NULL);
    pid_t c = fork();
    if (c == 0) {
        note(1);
        work(spin_child, 0.1 * scale);
        _exit(0);
    }
    work(spin_main, 0.1 * scale);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int st;
    waitpid(c, &st, 0);
    printf("witness ok\n");
    return 0;
}
