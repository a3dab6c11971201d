/* orders.c -- the same functions in a different order, and paths that
 * differ in one function only.
 *
 * main;a;b;d and main;b;a;d hold the same functions in another order;
 * main;b;a;d and main;b;e;d differ only in the middle function. a and e
 * have frames of the same shape, so d may be entered at the same height on
 * both paths (a context-id collision that ARR has to separate).
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;a;b;d
 * main;b;a;d
 * main;b;e;d
 * main;c;d
 *
 * ICPP-EXPECT
 * exit 0
 * stdout orders checksum=bdb12b64c3a56348
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

static unsigned long unit;

NOIPA unsigned long d(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long b(unsigned long n, unsigned long x, int mode);

/* a: via b to d (call_b != 0) or straight to d. */
NOIPA unsigned long a(unsigned long n, unsigned long x, int call_b)
{
	unsigned long r = call_b ? b(n, x, 0) : d(n, x);

	CORPUS_KEEP(r);
	return r + 1;
}

/* e: same shape as a, always straight to d. */
NOIPA unsigned long e(unsigned long n, unsigned long x, int unused)
{
	unsigned long r = unused ? x : d(n, x);

	CORPUS_KEEP(r);
	return r + 1;
}

/* b: mode 0 -> d, mode 1 -> a -> d, mode 2 -> e -> d. */
NOIPA unsigned long b(unsigned long n, unsigned long x, int mode)
{
	unsigned long r;

	if (mode == 0)
		r = d(n, x);
	else if (mode == 1)
		r = a(n, x, 0);
	else
		r = e(n, x, 0);
	CORPUS_KEEP(r);
	return r + 2;
}

NOIPA unsigned long c(unsigned long n, unsigned long x)
{
	unsigned long r = d(n, x);

	CORPUS_KEEP(r);
	return r + 3;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		sum += a(unit * 16, sum, 1);	/* main;a;b;d */
		sum ^= b(unit * 12, sum, 1);	/* main;b;a;d */
		sum += b(unit * 8, sum, 2);	/* main;b;e;d */
		sum ^= c(unit * 4, sum);		/* main;c;d */
	}
	printf("orders checksum=%016lx\n", sum);
	return 0;
}
