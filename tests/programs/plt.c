/* plt.c -- time spent in PLT stubs: calls into libc through the
 * procedure linkage table in a tight loop.
 *
 * spin calls libc's rand_r (a few instructions) through its PLT stub
 * (.plt, or .plt.sec with IBT; a static build calls it directly): a good
 * share of the samples land in the stub itself, whose CFA rule is a DWARF
 * expression (binutils: rsp + 8, plus 8 once the lazy stub's push ran). A
 * PLT stub is no function: its samples belong to the context that called
 * it (docs/definitions.md), here main;spin or main;outer;spin. libc's
 * frames are elided in the paths below.
 *
 * rand_r's and div's addresses are also taken (`taken`, by code), so a PIE's
 * linker gives them 8-byte stubs in .plt.got (each jumps through the GOT
 * slot the address came from) instead of .plt entries: one of the two
 * stubs is the second in its 16 bytes, whose samples must be charged to
 * its own callers (spin_div calls only div), not to the first stub's.
 *
 * twin is spin's code called with use = 0: its call of rand_r is never
 * taken, but it has the same frame as spin and is called from main at the
 * same height, so a sample in rand_r's stub fits main;twin's call site as
 * well as main;spin's; training saw only main;spin call through it, so that
 * is the sample's context (lib/plt.h).  With argv[2] = "twin" (an input
 * training did not see, tests/e2e/test_learn.py) twin calls rand_r too, as
 * often as spin's two calls together: the stub is one instruction, which a
 * timer sample may seldom hit (a VM's cpu-clock, stack-copying recordings),
 * so half of the few that land there are twin's.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;spin
 * main;outer;spin
 * main;twin
 * main;spin_div
 *
 * ICPP-EXPECT
 * exit 0
 * stdout plt checksum=00000135f52744ad
 */
#include "corpus.h"

#include <stdlib.h>

CORPUS_DEFINE_SINK;

NOIPA unsigned long spin(unsigned long n, unsigned int seed, int use)
{
	unsigned long x = 0;

	for (unsigned long i = 0; i < n; i++)
		x += use ? (unsigned long)rand_r(&seed) : i ^ seed;
	return x;
}

NOIPA unsigned long twin(unsigned long n, unsigned int seed, int use)
{
	unsigned long x = 0;

	for (unsigned long i = 0; i < n; i++)
		x += use ? (unsigned long)rand_r(&seed) : i ^ seed;
	return x;
}

NOIPA unsigned long spin_div(unsigned long n, unsigned int seed)
{
	unsigned long x = 0;

	for (unsigned long i = 0; i < n; i++)
		x += (unsigned long)div((int)(i | 1) + (int)seed, 7).rem;
	return x;
}

/* addresses taken by code (through the GOT): .plt.got stubs in a PIE (see above) */
void *volatile taken[2];

NOIPA unsigned long outer(unsigned long n, unsigned int seed)
{
	unsigned long r = spin(n, seed, 1);

	CORPUS_KEEP(r);
	return r + 3;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0, n = 16 * CORPUS_UNIT;
	int use = argc > 2 && argv[2][0] == 't';

	taken[0] = (void *)rand_r;
	taken[1] = (void *)div;

	for (long s = 0; s < scale; s++) {
		sum += spin(n, (unsigned int)s, 1);
		sum ^= outer(n, (unsigned int)s + 7);
		sum += twin(use ? 2 * n : n / 4, (unsigned int)s, use);
		sum += spin_div(n, (unsigned int)s);
	}
	printf("plt checksum=%016lx\n", sum);
	return 0;
}
