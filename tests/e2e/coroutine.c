/* coroutine.c -- makecontext/swapcontext coroutines on malloc'd stacks.
 *
 * Usage: coroutine [scale [thread]]. With "thread", all of this runs in a
 * second thread (run_all is its start routine) instead of the main thread.
 * main (or run_all) creates two coroutines (co_body on its own
 * 64 KiB heap stack each) and resumes them in turn; each runs co_leaf and
 * swaps back.  Between resumes main runs main_leaf on the main stack.
 * Paths (corpus notation, tests/programs/README.md):
 *   main;main_leaf
 *   main;make_co                       (with "thread": run_all instead of main
 *                                       as the root of the own-stack paths)
 *   main;resume                        (swapcontext: libc, not a frame here)
 *   co_body;co_leaf                    on a coroutine stack: a foreign stack
 * Samples in co_body/co_leaf must come out as `unresolved: foreign stack`,
 * never as missing with a height measured from startstack; training must
 * record no height for them (docs/definitions.md).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;
static ucontext_t main_ctx, co_ctx[2];
static unsigned long unit;

NOIPA unsigned long co_leaf(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL, x ^= x >> 29;
    return x;
}

NOIPA unsigned long main_leaf(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        x = x * 2862933555777941757UL + 3037000493UL, x ^= x >> 31;
    return x;
}

NOIPA void co_body(int id)
{
    for (;;) {
        sink += co_leaf(unit, (unsigned long)id);
        swapcontext(&co_ctx[id], &main_ctx);
    }
}

NOIPA void resume(int id)
{
    swapcontext(&main_ctx, &co_ctx[id]);
    sink += 1;
}

/* getcontext returns once here (nothing swaps to this context). */
NOIPA int make_co(int id)
{
    if (getcontext(&co_ctx[id]) < 0)
        return -1;
    co_ctx[id].uc_stack.ss_sp = malloc(1 << 16);
    co_ctx[id].uc_stack.ss_size = 1 << 16;
    co_ctx[id].uc_link = &main_ctx;
    if (!co_ctx[id].uc_stack.ss_sp)
        return -1;
    makecontext(&co_ctx[id], (void (*)(void))co_body, 1, id);
    return 0;
}

static long scale;

NOIPA void *run_all(void *arg)
{
    if (make_co(0) < 0 || make_co(1) < 0)
        return arg;
    for (long i = 0; i < 40 * scale; i++) {
        sink += main_leaf(unit, (unsigned long)i);
        resume((int)(i & 1));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    scale = argc > 1 ? atol(argv[1]) : 1;
    unit = 200000;
    void *failed = (void *)1;
    if (argc > 2 && !strcmp(argv[2], "thread")) {
        pthread_t t;
        if (pthread_create(&t, NULL, run_all, (void *)1) || pthread_join(t, &failed))
            return 1;
    } else {
        failed = run_all((void *)1);
    }
    if (failed)
        return 1;
    printf("coroutine %lu\n", (unsigned long)(sink != 0));
    return 0;
}
