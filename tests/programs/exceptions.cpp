/* exceptions.cpp -- C++ exceptions: throw deep, rethrow in the middle,
 * catch near the top.
 *
 * guarded() calls rethrower(), which calls descend() 7 deep; fail_leaf
 * throws. rethrower catches it, calls note_failure, and rethrows; guarded
 * catches it for good and calls recover(). The unwound frames never
 * return normally. Every 4th round does not throw (fail_leaf returns), so
 * the plain return path is exercised too.
 *
 * Functions live in namespace exc; paths name them by their linkage
 * (mangled) names, as the symbol table has them (corpus.demangle()):
 *   _ZN3exc7guardedEmmPm    exc::guarded(unsigned long, unsigned long,
 *                                        unsigned long*)
 *   _ZN3exc9rethrowerEmmb   exc::rethrower(unsigned long, unsigned long, bool)
 *   _ZN3exc7descendEimmb    exc::descend(int, unsigned long, unsigned long,
 *                                        bool)
 *   _ZN3exc9fail_leafEmmb   exc::fail_leaf(unsigned long, unsigned long, bool)
 *   _ZN3exc12note_failureEm exc::note_failure(unsigned long)
 *   _ZN3exc7recoverEmm      exc::recover(unsigned long, unsigned long)
 * At -O2 gcc moves the throw and the catch blocks of fail_leaf, rethrower
 * and guarded to separate .cold parts (symbols foo.cold); they are part of
 * foo and run in foo's frame.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;_ZN3exc7guardedEmmPm;_ZN3exc9rethrowerEmmb;_ZN3exc7descendEimmb*7;_ZN3exc9fail_leafEmmb
 * main;_ZN3exc7guardedEmmPm;_ZN3exc9rethrowerEmmb;_ZN3exc12note_failureEm
 * main;_ZN3exc7guardedEmmPm;_ZN3exc7recoverEmm
 *
 * ICPP-EXPECT
 * exit 0
 * stdout exceptions caught=6 noted=874 checksum=021ea220f0fbaf9e
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

namespace exc {

/* A trivial aggregate: throwing it generates no constructor of our own. */
struct Failure {
	unsigned long value;
};

static unsigned long unit;
static unsigned long noted;

NOIPA unsigned long fail_leaf(unsigned long n, unsigned long x, bool do_throw)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	if (do_throw)
		throw Failure{x};
	return x;
}

NOIPA unsigned long descend(int level, unsigned long n, unsigned long x,
			    bool do_throw)
{
	unsigned long r;

	if (level <= 1)
		r = fail_leaf(n, x, do_throw);
	else
		r = descend(level - 1, n, x + 1, do_throw);
	CORPUS_KEEP(r);
	return r + 1;
}

NOIPA unsigned long note_failure(unsigned long v)
{
	noted += v & 0xff;
	return noted;
}

NOIPA unsigned long rethrower(unsigned long n, unsigned long x, bool do_throw)
{
	unsigned long r;

	try {
		r = descend(7, n, x, do_throw);
	} catch (const Failure &f) {
		CORPUS_KEEP(note_failure(f.value));
		throw;
	}
	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long recover(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 11) + (x >> 7) + i;
	return x;
}

/* Round r throws unless r % 4 == 3; counts the catches in *caught. */
NOIPA unsigned long guarded(unsigned long n, unsigned long round,
			    unsigned long *caught)
{
	unsigned long r;

	try {
		r = rethrower(n, round * 77, round % 4 != 3);
	} catch (const Failure &f) {
		++*caught;
		r = recover(n, f.value);
	}
	CORPUS_KEEP(r);
	return r;
}

} /* namespace exc */

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0, caught = 0;

	exc::unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++)
		for (unsigned long k = 0; k < 8; k++)
			sum += exc::guarded(exc::unit * 2, k, &caught);
	printf("exceptions caught=%lu noted=%lu checksum=%016lx\n",
		    caught, exc::noted, sum);
	return 0;
}
