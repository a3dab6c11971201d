/* ender.c -- a program that ends in a chosen way, after running a known path.
 *
 * usage: ender MODE      MODE: exit | _exit | return | abort | segv | term | thread-exit | wait
 * Before ending it always runs main;work;leaf (and, for thread-exit, the
 * thread's path worker;work;leaf).  `wait` spins in main;spin until killed.
 * Prints "ender MODE" first, so a test can see it started.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline, noipa)) void leaf(int n)
{
    for (int i = 0; i < n; i++)
        sink += (unsigned long)i;
}

__attribute__((noinline, noipa)) void work(void)
{
    leaf(1000);
    sink++;
}

__attribute__((noinline, noipa)) void spin(void)
{
    for (;;)
        leaf(1000000);
}

__attribute__((noinline, noipa)) void *worker(void *arg)
{
    work();
    exit(*(int *)arg);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "return";
    printf("ender %s\n", mode);
    fflush(stdout);
    work();
    if (!strcmp(mode, "exit"))
        exit(4);
    if (!strcmp(mode, "_exit"))
        _exit(5);
    if (!strcmp(mode, "abort"))
        abort();
    if (!strcmp(mode, "segv"))
        raise(SIGSEGV);
    if (!strcmp(mode, "term"))
        raise(SIGTERM);
    if (!strcmp(mode, "thread-exit")) {
        static int code = 6;
        pthread_t t;
        pthread_create(&t, NULL, worker, &code);
        for (;;)
            pause();
    }
    if (!strcmp(mode, "wait"))
        spin();
    return 0;
}
