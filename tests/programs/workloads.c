/* workloads.c -- two inputs that take different call paths (online profiling).
 *
 * A tiny interpreter: run() dispatches opcodes through a table of function
 * pointers, as real interpreters do.  argv[2] names the workload: "a" (the
 * default) runs the add and the shift programs, "b" the mul, the pow and
 * the shift programs.  Training on "a" and sampling "b" is the online case
 * of learning (docs/resolve.md, "Learned contexts"): the contexts under op_mul and op_pow were never trained.
 * op_add and op_mul have frames of the same shape, so `leaf` under op_mul
 * sits at the height a trained path has under op_add: a map trained on "a"
 * alone resolves those samples precisely -- and wrongly.  op_pow reaches
 * pow_step, a function training on "a" never entered.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;run;op_add;leaf
 * main;run;op_shift;shift_loop;leaf
 * ?main;run;op_mul;leaf
 * ?main;run;op_pow;pow_step;leaf
 *
 * ICPP-EXPECT
 * exit 0
 * stdout workloads a checksum=1def71b791b344f3
 */
#include "corpus.h"

#include <string.h>

CORPUS_DEFINE_SINK;

typedef unsigned long (*op_fn)(unsigned long n, unsigned long x);

static unsigned long unit;

NOIPA unsigned long leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

/* op_add and op_mul: the same shape, so leaf enters at the same height. */
NOIPA unsigned long op_add(unsigned long n, unsigned long x)
{
	unsigned long r = leaf(n, x + 1);

	CORPUS_KEEP(r);
	return r + 1;
}

NOIPA unsigned long op_mul(unsigned long n, unsigned long x)
{
	unsigned long r = leaf(n, x * 3);

	CORPUS_KEEP(r);
	return r * 3;
}

NOIPA unsigned long shift_loop(unsigned long n, unsigned long x)
{
	unsigned long r = 0;

	for (int k = 0; k < 2; k++)
		r ^= leaf(n / 2, x << k);
	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long op_shift(unsigned long n, unsigned long x)
{
	unsigned long r = shift_loop(n, x);

	CORPUS_KEEP(r);
	return r >> 1;
}

NOIPA unsigned long pow_step(unsigned long n, unsigned long x)
{
	volatile unsigned long pad[6] = {x, n, 1, 2, 3, 4};
	unsigned long r = leaf(n, pad[0] ^ pad[5]);

	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long op_pow(unsigned long n, unsigned long x)
{
	unsigned long r = pow_step(n, x);

	CORPUS_KEEP(r);
	return r ^ x;
}

static op_fn ops[] = {op_add, op_mul, op_shift, op_pow};

/* run: execute a program of opcodes through the table. */
NOIPA unsigned long run(const unsigned char *prog, unsigned long n, unsigned long x)
{
	for (const unsigned char *p = prog; *p; p++) {
		unsigned long r = ops[*p - '0'](n, x);

		CORPUS_KEEP(r);
		x += r;
	}
	return x;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	const char *w = argc > 2 ? argv[2] : "a";
	int b = strcmp(w, "b") == 0;
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		if (b)
			sum = run((const unsigned char *)"1312", unit * 8, sum);	/* mul, pow, mul, shift */
		else
			sum = run((const unsigned char *)"0202", unit * 8, sum);	/* add, shift, add, shift */
	}
	printf("workloads %s checksum=%016lx\n", b ? "b" : "a", sum);
	return 0;
}
