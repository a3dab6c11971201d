/* clonepaths.c -- call paths that only a clone separates (docs/rewrite.md, "Cloning").
 *
 * main;one;two;work and main;two;one;work: the same functions, so the same
 * height whatever the frames' paddings, and every call takes eight
 * arguments, two of them on the stack, which the callees read -- so no
 * call can be wrapped (a stub would move them).  A copy of one of the
 * callees, called from one of the two orders only, with a frame of its own
 * size, tells them apart.  work's own samples and those of its callee spin
 * (below it) both need it.  Output: a checksum, the same for the rewritten
 * binary. */
#include <stdio.h>
#include <stdlib.h>

static volatile long sink;

__attribute__((noipa)) long spin(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += (i * i) ^ (s >> 3);
    sink = s;
    return s;
}

__attribute__((noinline)) long work(long n, long a, long b, long c, long d, long e, long f, long g)
{
    volatile long buf[4] = {a, b, c, d};
    long s = spin(n + f - f) + buf[(g + e) & 3];
    for (long i = 0; i < n; i++)
        s += (i ^ g) * 7 + (s >> 5);
    return s;
}

long two(long n, long nested, long b, long c, long d, long e, long f, long g);

__attribute__((noinline)) long one(long n, long nested, long b, long c, long d, long e, long f, long g)
{
    volatile long buf[2] = {b, c};
    long r = nested ? two(n, 0, c, b, d, e, f, g) : work(n, b, c, d, e, f, g, nested);
    return r + buf[g & 1];
}

__attribute__((noinline)) long two(long n, long nested, long b, long c, long d, long e, long f, long g)
{
    volatile long buf[2] = {c, b};
    long r = nested ? one(n, 0, b, c, d, e, f, g) : work(n, c, b, d, e, f, g, nested);
    return r ^ buf[f & 1];
}

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 10, n = argc > 2 ? atol(argv[2]) : 1000000, s = 0;
    for (long i = 0; i < reps; i++) {
        s += one(n, 1, i, 2, 3, 4, 5, 6);
        s += two(n, 1, i, 3, 4, 5, 6, 7);
    }
    printf("%ld\n", s & 0xffffff);
    return 0;
}
