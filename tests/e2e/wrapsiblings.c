/* wrapsiblings.c -- the same callers in another order, where every call that could separate
 * them follows a call of another function from the same frame (docs/rewrite.md, "The
 * training of OUT").
 *
 * usage: wrapsiblings [SCALE]
 * main;a;b;work and main;b;a;work hold the same functions (a and b have frames of one shape),
 * so work is entered at one height on both: no resizing separates them, a wrapped call site
 * can.  But a, b and main call tick() first, at the very height of their next call: a wrapped
 * call enters its callee below tick's returned frame, where a plain call would have popped it.
 * A training of the rewritten program must still record main;a;b;work, not main;a;tick;b;work.
 * Prints "wrapsiblings X", exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noipa))
static volatile unsigned long sink;
#define KEEP(x) (sink += (unsigned long)(x))
#define MIX(x) ((x) = (x) * 6364136223846793005UL + 1442695040888963407UL, (x) ^= (x) >> 29)

static unsigned long scale = 1;

NOIPA unsigned long tick(unsigned long x)
{
    KEEP(x);
    return x + 1;
}

NOIPA unsigned long work(unsigned long x)
{
    for (unsigned long i = 0; i < 100000 * scale; i++)
        MIX(x);
    return x;
}

NOIPA unsigned long b(int call_a, unsigned long x);

/* call_b: via b to work, else straight to work; tick first either way. */
NOIPA unsigned long a(int call_b, unsigned long x)
{
    x = tick(x);
    unsigned long r = call_b ? b(0, x) : work(x);
    KEEP(r);
    return r + 1;
}

NOIPA unsigned long b(int call_a, unsigned long x)
{
    x = tick(x);
    unsigned long r = call_a ? a(0, x) : work(x);
    KEEP(r);
    return r + 2;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scale = strtoul(argv[1], NULL, 0);
    unsigned long x = 1;
    for (int i = 0; i < 20; i++) {
        x = tick(x);
        x += a(1, x);           /* main;a;b;work */
        x = tick(x);
        x += b(1, x);           /* main;b;a;work */
    }
    printf("wrapsiblings %lu\n", x & 0xffff);
    return 0;
}
