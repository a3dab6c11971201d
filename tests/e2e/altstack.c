/* altstack.c -- a signal handler doing real work on a sigaltstack (malloc'd).
 *
 * Usage: altstack [scale]. main installs on_usr1 with SA_ONSTACK on a heap
 * alternate stack, then alternates main_leaf (on the main stack) with
 * trigger(), which raises SIGUSR1: on_usr1 runs alt_leaf on the alternate
 * stack.  Paths (corpus notation, tests/programs/README.md):
 *   main;main_leaf
 *   main;trigger;on_usr1;alt_leaf       on the alternate stack: a foreign stack
 * Samples in on_usr1/alt_leaf must come out as `unresolved: foreign stack`,
 * never as missing with a height measured from startstack; training must
 * record no height for them (docs/definitions.md).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noipa))

static volatile unsigned long sink;

NOIPA unsigned long alt_leaf(unsigned long n, unsigned long x)
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

static unsigned long unit;

NOIPA void on_usr1(int sig)
{
    sink += alt_leaf(unit, (unsigned long)sig);
}

NOIPA void trigger(void)
{
    raise(SIGUSR1);
    sink += 1;
}

int main(int argc, char **argv)
{
    long scale = argc > 1 ? atol(argv[1]) : 1;
    unit = 200000;
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16, .ss_flags = 0};
    if (!ss.ss_sp || sigaltstack(&ss, NULL) < 0)
        return 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    if (sigaction(SIGUSR1, &sa, NULL) < 0)
        return 1;
    for (long i = 0; i < 40 * scale; i++) {
        sink += main_leaf(unit, (unsigned long)i);
        trigger();
    }
    printf("altstack %lu\n", (unsigned long)(sink != 0));
    return 0;
}
