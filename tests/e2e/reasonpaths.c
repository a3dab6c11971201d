/* reasonpaths.c -- call paths into work() that only functions icpp-rewrite cannot pad tell apart.
 *
 * main;p_one;work and main;p_two;work: p_one and p_two are push-only frames
 * at -O2 -fomit-frame-pointer (work is noipa, so n lives in %rbx across the
 * call: push %rbx, no sub $N,%rsp): their frames cannot be enlarged ("no
 * frame to enlarge"), so without call-site wrapping only --check's
 * "refused-functions" explains the pair; with wrapping, icpp-rewrite
 * enlarges one of them by wrapping its call of work (or wraps main's calls).
 * main;lib_one;work and main;lib_two;work: the same shape in a shared library
 * (reasonlib.c) calling work back: functions of another module
 * ("library-functions"), and main's calls go through the PLT (not wrapped).
 * All four do the same work, so each pair holds about half the samples. */
#include <stdio.h>
#include <stdlib.h>

long lib_one(long n, long (*f)(long));
long lib_two(long n, long (*f)(long));

static volatile long N = 2000000;
static volatile long sink;

__attribute__((noipa)) long work(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += (i * i) ^ (s >> 3);
    sink = s;
    return s;
}

__attribute__((noinline)) long p_one(long n)
{
    long k = n * 3;
    long r = work(n);
    return r + k;
}

__attribute__((noinline)) long p_two(long n)
{
    long k = n * 5;
    long r = work(n);
    return r ^ k;
}

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 10, s = 0;
    for (long i = 0; i < reps; i++) {
        s += p_one(N);
        s += p_two(N);
        s += lib_one(N, work);
        s += lib_two(N, work);
    }
    printf("%ld\n", s & 0xffff);
    return 0;
}
