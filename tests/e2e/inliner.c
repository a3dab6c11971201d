/* inliner.c -- a program whose hot code is inlined, for checking icpp-resolve's inlined frames.
 *
 * usage: inliner [SCALE]
 * main calls work (noipa) SCALE * 10 times; work spends its time in three
 * always-inline functions, so its samples' paths, DWARF says, are
 *   main;work;spin                          the loop of spin, inlined into work
 *   main;work;twice;spin_more               twice inlined into work, spin_more into twice
 *   main;work;via_call;leaf                 via_call inlined into work calls leaf (noipa):
 *                                           the inlined frame sits between work and leaf
 * Prints "inliner X", exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

static volatile unsigned long sink;

/* One step of a 64-bit mixing generator: the loops cannot be collapsed. */
#define MIX(x) ((x) = (x) * 6364136223846793005UL + 1442695040888963407UL, (x) ^= (x) >> 29)

__attribute__((noipa)) unsigned long leaf(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        MIX(x);
    return x;
}

static inline __attribute__((always_inline)) unsigned long spin(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        MIX(x);
    return x;
}

static inline __attribute__((always_inline)) unsigned long spin_more(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++) {
        MIX(x);
        x += i;
    }
    return x;
}

static inline __attribute__((always_inline)) unsigned long twice(unsigned long n, unsigned long x)
{
    x = spin_more(n, x ^ 0x5555);
    sink += x;
    return spin_more(n, x);
}

static inline __attribute__((always_inline)) unsigned long via_call(unsigned long n, unsigned long x)
{
    unsigned long r = leaf(2 * n, x);
    sink += r;
    return r;
}

__attribute__((noipa)) unsigned long work(unsigned long n, unsigned long x)
{
    x = spin(2 * n, x);
    sink += x;
    x = twice(n, x);
    x = via_call(n, x);
    sink += x;              /* after the call: no tail call */
    return x;
}

int main(int argc, char **argv)
{
    long scale = argc > 1 ? atol(argv[1]) : 1;
    unsigned long x = 1;
    for (long i = 0; i < 10 * (scale < 1 ? 1 : scale); i++)
        x = work(1000000, x);
    printf("inliner %lx\n", x);
    return 0;
}
