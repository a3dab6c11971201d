/* newpaths.c -- a program whose call paths depend on its input, for completion (icpp-resolve's inferred paths).
 *
 * usage: newpaths MODE [SCALE]
 * MODE a: main;alpha;work                       (the training input)
 * MODE b: main;beta;gamma;work                  beta and gamma never run in mode a;
 *         main;beta;gamma;deep;work             their frames differ in size from alpha's
 * MODE c: main;via_table;target1;work           through a function pointer (address-taken target)
 * MODE d: main;twin1;common;work and main;twin2;common;work: twin1 and twin2
 *         have frames of one size, so (work, height) cannot tell them apart
 * Prints "newpaths X", exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOIPA __attribute__((noipa))
static volatile unsigned long sink;
#define KEEP(x) (sink += (unsigned long)(x))
#define MIX(x) ((x) = (x) * 6364136223846793005UL + 1442695040888963407UL, (x) ^= (x) >> 29)

static unsigned long scale = 1;

NOIPA unsigned long work(unsigned long x)
{
    for (unsigned long i = 0; i < 200000 * scale; i++)
        MIX(x);
    return x;
}

/* Locals of different sizes give the frames different heights. */
NOIPA unsigned long alpha(unsigned long x)
{
    volatile char pad[40];
    pad[0] = (char)x;
    unsigned long r = work(x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long deep(unsigned long x)
{
    volatile char pad[200];
    pad[0] = (char)x;
    unsigned long r = work(x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long gamma_(unsigned long x)
{
    volatile char pad[120];
    pad[0] = (char)x;
    unsigned long r = work(x + pad[0]) + deep(x);
    KEEP(r);
    return r;
}

NOIPA unsigned long beta(unsigned long x)
{
    volatile char pad[72];
    pad[0] = (char)x;
    unsigned long r = gamma_(x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long target1(unsigned long x)
{
    volatile char pad[24];
    pad[0] = (char)x;
    unsigned long r = work(x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long target2(unsigned long x)
{
    volatile char pad[56];
    pad[0] = (char)x;
    unsigned long r = work(x + pad[0]) * 3;
    KEEP(r);
    return r;
}

static unsigned long (*const table[2])(unsigned long) = {target1, target2};

NOIPA unsigned long via_table(unsigned long x, int i)
{
    volatile char pad[88];
    pad[0] = (char)x;
    unsigned long r = table[i & 1](x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long common(unsigned long x)
{
    volatile char pad[32];
    pad[0] = (char)x;
    unsigned long r = work(x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long twin1(unsigned long x)
{
    volatile char pad[64];
    pad[0] = (char)x;
    unsigned long r = common(x + pad[0]);
    KEEP(r);
    return r;
}

NOIPA unsigned long twin2(unsigned long x)
{
    volatile char pad[64];
    pad[1] = (char)x;
    unsigned long r = common(x + pad[1]) + 1;
    KEEP(r);
    return r;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "a";
    if (argc > 2)
        scale = strtoul(argv[2], NULL, 10);
    unsigned long x = 1;
    for (int i = 0; i < 40; i++) {
        if (strchr(mode, 'a'))
            x ^= alpha(x);
        if (strchr(mode, 'b'))
            x ^= beta(x);
        if (strchr(mode, 'c'))
            x ^= via_table(x, 0);
        if (strchr(mode, 'd'))
            x ^= twin1(x) + twin2(x);
    }
    printf("newpaths %lu\n", x & 0xffff);
    return 0;
}
