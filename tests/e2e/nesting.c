/* nesting.c -- deep recursion whose arrangements share (function, height), for online resolving.
 *
 * usage: nesting MODE [SCALE]
 * A "body" is a string of P and H; nest() walks it, entering paren() for a P
 * and call() for an H, each of which works a little (step()) and nests the
 * rest.  paren's and call's frames differ in size, so the height at depth k
 * says how many H the first k letters hold but not where they are:
 * main;run;nest;paren;nest;call;nest;step and main;run;nest;call;nest;paren;nest;step
 * share (step, height) -- as tcc's expression parser does (docs/resolve.md,
 * "Never precise and wrong").
 * MODE flat:     bodies of 1-2 letters (the training input: shallow paths)
 * MODE periodic: 3 bodies of 60 letters, PPH repeated from 3 phases (few
 *                paths, each taken many times)
 * MODE random:   256 random bodies of 40-90 letters (thousands of paths,
 *                nearly every one taken once by a sampler)
 * Prints "nesting MODE CHECKSUM", exits 0.
 */
#include <string.h>

#include "../programs/corpus.h"    /* NOIPA, CORPUS_KEEP, CORPUS_MIX */

CORPUS_DEFINE_SINK;

static unsigned long unit = 2000;

NOIPA unsigned long step(unsigned long x)
{
    for (unsigned long i = 0; i < unit; i++)
        CORPUS_MIX(x);
    return x;
}

NOIPA unsigned long nest(const char *b, unsigned long x);

NOIPA unsigned long paren(const char *b, unsigned long x)
{
    volatile char pad[24];
    pad[0] = (char)x;
    unsigned long r = step(x + (unsigned long)pad[0]);
    r ^= nest(b + 1, r);
    CORPUS_KEEP(r);
    return r;
}

NOIPA unsigned long call(const char *b, unsigned long x)
{
    volatile char pad[88];
    pad[0] = (char)x;
    unsigned long r = step(x ^ (unsigned long)pad[0]);
    r ^= nest(b + 1, r);
    CORPUS_KEEP(r);
    return r;
}

NOIPA unsigned long nest(const char *b, unsigned long x)
{
    unsigned long r = *b == 'P' ? paren(b, x) : *b == 'H' ? call(b, x) : step(x);
    CORPUS_KEEP(r);
    return r;
}

NOIPA unsigned long run(char **bodies, int n, int rounds)
{
    unsigned long x = 1;
    for (int k = 0; k < rounds; k++)
        for (int i = 0; i < n; i++)
            x ^= nest(bodies[i], x + (unsigned long)i);
    return x;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nesting flat|periodic|random [SCALE]\n");
        return 2;
    }
    double scale = argc > 2 ? atof(argv[2]) : 1.0;
    char *bodies[256];
    int n = 0, rounds;
    unsigned long seed = 12345;
    if (!strcmp(argv[1], "flat")) {
        static const char *flat[] = {"P", "H", "PH", "HP", "PP", "HH", ""};
        for (n = 0; n < 7; n++)
            bodies[n] = strdup(flat[n]);
        rounds = (int)(6000 * scale);
    } else if (!strcmp(argv[1], "periodic")) {
        for (n = 0; n < 3; n++) {
            bodies[n] = calloc(61, 1);
            for (int k = 0; k < 60 && bodies[n]; k++)
                bodies[n][k] = (k + n) % 3 == 2 ? 'H' : 'P';
        }
        rounds = (int)(1500 * scale);
    } else if (!strcmp(argv[1], "random")) {
        for (n = 0; n < 256; n++) {
            CORPUS_MIX(seed);
            int len = 40 + (int)(seed % 51);
            bodies[n] = calloc((size_t)len + 1, 1);
            for (int k = 0; k < len && bodies[n]; k++) {
                CORPUS_MIX(seed);
                bodies[n][k] = (seed >> 17) % 3 == 0 ? 'H' : 'P';
            }
        }
        rounds = (int)(20 * scale);
    } else {
        fprintf(stderr, "nesting: unknown mode '%s'\n", argv[1]);
        return 2;
    }
    for (int i = 0; i < n; i++)
        if (!bodies[i])
            return 1;
    unsigned long r = run(bodies, n, rounds);
    printf("nesting %s %lx\n", argv[1], r & 0xffff);
    return 0;
}
