/* orderpaths.c -- paths that no padding can tell apart, for icpp-resolve --check's reasons (docs/resolve.md).
 *
 * usage: orderpaths [SCALE]
 * Four paths into work(), each run the same number of times with the same work:
 *   main;a;b;a;a;work  and  main;a;a;b;a;work   the same call edges in another order
 *                                               (main->a, a->a, a->b, b->a, a->work)
 *   main;a;b;work      and  main;b;a;work       the same functions, other call edges
 * a and b have fixed frames, so each pair enters work at one height: every
 * sample in work is ambiguous, and the reason is known from its truth's pair.
 * Prints "orderpaths X", exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noipa))
static volatile unsigned long sink;
#define KEEP(x) (sink += (unsigned long)(x))
#define MIX(x) ((x) = (x) * 6364136223846793005UL + 1442695040888963407UL, (x) ^= (x) >> 29)

static unsigned long scale = 1;

NOIPA unsigned long work(unsigned long x)
{
    for (unsigned long i = 0; i < 100000 * scale; i++)
        MIX(x);
    return x;
}

NOIPA unsigned long b(const char *s, unsigned long x);

/* The next letter of s says whom to call: a, b, or w(ork). */
NOIPA unsigned long a(const char *s, unsigned long x)
{
    unsigned long r = *s == 'a' ? a(s + 1, x + 1) : *s == 'b' ? b(s + 1, x + 2) : work(x);
    KEEP(r);
    return r + 1;
}

NOIPA unsigned long b(const char *s, unsigned long x)
{
    unsigned long r = *s == 'a' ? a(s + 1, x + 3) : *s == 'b' ? b(s + 1, x + 4) : work(x);
    KEEP(r);
    return r + 2;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scale = strtoul(argv[1], NULL, 0);
    unsigned long x = 1;
    for (int i = 0; i < 20; i++) {
        x += a("baaw", x);      /* main;a;b;a;a;work */
        x += a("abaw", x);      /* main;a;a;b;a;work */
        x += a("bw", x);        /* main;a;b;work */
        x += b("aw", x);        /* main;b;a;work */
    }
    printf("orderpaths %lu\n", x & 0xffff);
    return 0;
}
