/* cold.c -- gcc's hot/cold splitting: part of a function's code placed away
 * from it (hot.cold, entered by a jump, never called) that calls functions
 * and loops itself.
 *
 * hot's unlikely branch (taken on every 8th call) runs a loop and calls
 * slow and leaf; at -O2 gcc moves that branch into hot.cold, in the binary's
 * cold text far from hot, with an FDE of its own (and, stripped, no
 * symbol). Frames there are hot's: a sample or a return address in hot.cold
 * belongs to hot (docs/definitions.md). slow is itself __attribute__((cold)),
 * a whole function in the cold text: a function of its own.
 *
 * viaptr has hot's shape but is called only through a pointer, and
 * viaptr.cold jumps back into its middle. Stripped, viaptr is still a
 * function (entered by calls through the pointer) and viaptr.cold its part,
 * not the other way round.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;hot;leaf
 * main;hot;slow;leaf
 * main;outer;hot;leaf
 * main;outer;hot;slow;leaf
 * main;viaptr;leaf
 * main;viaptr;slow;leaf
 *
 * ICPP-EXPECT
 * exit 0
 * stdout cold checksum=577c442710c426d6
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

static unsigned long unit;

NOIPA unsigned long leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA __attribute__((cold)) unsigned long slow(unsigned long n, unsigned long x)
{
	unsigned long r = leaf(n, x);

	CORPUS_KEEP(r);
	return r ^ 5;
}

NOIPA unsigned long hot(unsigned long n, unsigned long x, unsigned long k)
{
	unsigned long r = leaf(n, x);

	if (__builtin_expect((k & 7) == 7, 0)) {
		/* the cold part: its own loop, then two calls */
		for (unsigned long i = 0; i < 2 * n; i++)
			CORPUS_MIX(r);
		r += slow(n, r);
		CORPUS_KEEP(r);
		r ^= leaf(n, r);
		CORPUS_KEEP(r);
	}
	CORPUS_KEEP(r);
	return r + 1;
}

NOIPA unsigned long outer(unsigned long n, unsigned long x, unsigned long k)
{
	unsigned long r = hot(n, x, k);

	CORPUS_KEEP(r);
	return r + 3;
}

/* hot's shape, called only through vp below: viaptr.cold jumps back into it */
NOIPA unsigned long viaptr(unsigned long n, unsigned long x, unsigned long k)
{
	unsigned long r = leaf(n, x);

	if (__builtin_expect((k & 7) == 5, 0)) {
		r += slow(n, r);
		CORPUS_KEEP(r);
	}
	CORPUS_KEEP(r);
	return r + 7;
}

static unsigned long (*volatile vp)(unsigned long, unsigned long, unsigned long) = viaptr;

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++)
		for (unsigned long k = 0; k < 64; k++) {
			sum ^= hot(unit, sum + k, k);
			sum ^= outer(unit, sum + k, k + 3);
			sum ^= vp(unit, sum + k, k);
		}
	printf("cold checksum=%016lx\n", sum);
	return 0;
}
