/* bench_fib.c -- fib(N) timed in-process, R times; prints "min_ns median_ns result reps". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

__attribute__((noipa)) long fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static int cmp(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 30, reps = argc > 2 ? atoi(argv[2]) : 10;
    long long t[1000];
    long r = 0;
    if (reps > 1000)
        reps = 1000;
    for (int i = 0; i < reps; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        r = fib(n);
        clock_gettime(CLOCK_MONOTONIC, &b);
        t[i] = (long long)(b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp);
    printf("%lld %lld %ld %d\n", t[0], t[reps / 2], r, reps);
    return 0;
}
