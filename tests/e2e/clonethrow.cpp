// clonethrow.cpp -- clonepaths.c's two orders through functions with exception tables.
//
// main;one;two;work and main;two;one;work again (eight arguments each, two
// on the stack: no call can be wrapped), but every function has a
// destructor to run when an exception passes (a cleanup landing pad in its
// exception table), and work throws on one call in seven, caught in main.
// A clone of one or two must keep its exception table: the copy's landing
// pads run (the count of cleanups is printed) and the exception reaches
// main (the count caught is printed). Output: checksum, caught, cleanups.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static volatile long sink;
static long cleanups;

struct Guard {
    long k;
    ~Guard() { cleanups += k; }
};

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
    Guard gd{1};
    volatile long buf[4] = {a, b, c, d};
    long s = spin(n + f - f) + buf[(g + e) & 3];
    for (long i = 0; i < n; i++)
        s += (i ^ g) * 7 + (s >> 5);
    if (a % 7 == 3)
        throw std::runtime_error("seven");
    return s;
}

long two(long n, long nested, long b, long c, long d, long e, long f, long g);

__attribute__((noinline)) long one(long n, long nested, long b, long c, long d, long e, long f, long g)
{
    Guard gd{10};
    volatile long buf[2] = {b, c};
    long r = nested ? two(n, 0, c, b, d, e, f, g) : work(n, b, c, d, e, f, g, nested);
    return r + buf[g & 1];
}

__attribute__((noinline)) long two(long n, long nested, long b, long c, long d, long e, long f, long g)
{
    Guard gd{100};
    volatile long buf[2] = {c, b};
    long r = nested ? one(n, 0, b, c, d, e, f, g) : work(n, c, b, d, e, f, g, nested);
    return r ^ buf[f & 1];
}

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 10, n = argc > 2 ? atol(argv[2]) : 1000000, s = 0, caught = 0;
    for (long i = 0; i < reps; i++) {
        try {
            s += one(n, 1, i, 2, 3, 4, 5, 6);
        } catch (const std::runtime_error &) {
            caught++;
        }
        try {
            s += two(n, 1, i, 3, 4, 5, 6, 7);
        } catch (const std::runtime_error &) {
            caught++;
        }
    }
    printf("%ld caught %ld cleanups %ld\n", s & 0xffffff, caught, cleanups);
    return 0;
}
