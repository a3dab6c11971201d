/* recurse.c -- deep self-recursion, mutual recursion and a fib tree.
 *
 * descend() recurses 128 deep and does leaf work at every level, so a
 * sampler sees descend_work at 128 different heights with 128 different
 * paths. ping/pong recurse mutually. fib() builds an exponential call tree
 * whose paths are main;fib*1..18.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;descend*1..128;descend_work
 * main;(ping;pong)*20;ping;pp_leaf
 * main;(ping;pong)*21;pp_leaf
 * main;fib*18
 *
 * ICPP-EXPECT
 * exit 0
 * stdout recurse checksum=49f86473eee69d85
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

#define DESCEND_DEPTH 128
#define PING_DEPTH    40

static unsigned long unit;	/* leaf loop length, set from the scale */

NOIPA unsigned long descend_work(unsigned long level)
{
	unsigned long x = level;

	for (unsigned long i = 0; i < unit / 8; i++)
		CORPUS_MIX(x);
	return x;
}

/* Work at every level, then recurse: descend(n) makes paths of depth n. */
NOIPA unsigned long descend(unsigned long n)
{
	unsigned long r = descend_work(n);

	if (n > 1)
		r ^= descend(n - 1);
	CORPUS_KEEP(r);	/* after the call: no tail/accumulator recursion */
	return r;
}

NOIPA unsigned long pong(unsigned long n, unsigned long x);

NOIPA unsigned long pp_leaf(unsigned long x)
{
	for (unsigned long i = 0; i < unit * 4; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long ping(unsigned long n, unsigned long x)
{
	unsigned long r = n == 0 ? pp_leaf(x) : pong(n - 1, x + 1);

	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long pong(unsigned long n, unsigned long x)
{
	unsigned long r = n == 0 ? pp_leaf(x) : ping(n - 1, x * 3);

	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long fib(unsigned long n)
{
	unsigned long x = n, r;

	for (unsigned long i = 0; i < unit / 512; i++)
		CORPUS_MIX(x);
	if (n < 2) {
		r = n;
	} else {
		r = fib(n - 1);
		r += fib(n - 2);
	}
	CORPUS_KEEP(x);
	return r;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		sum += descend(DESCEND_DEPTH);
		sum ^= ping(PING_DEPTH, sum & 0xff);
		sum ^= ping(PING_DEPTH + 1, sum & 0xff);
		sum += fib(18);
	}
	printf("recurse checksum=%016lx\n", sum);
	return 0;
}
