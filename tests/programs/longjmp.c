/* longjmp.c -- non-local exits with setjmp/longjmp; exits with status 3.
 *
 * run_jump: setjmp, then lj_deep recurses 11 deep and lj_leaf longjmps
 * back over all of them; run_jump then calls after_jump, entered at the
 * height the abandoned lj_deep chain had (the abandoned frames never
 * return). run_nested: catch_mid sets its own jmp_buf further down, and the
 * jump lands in the middle of the stack; catch_mid then calls mid_after.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;run_jump;lj_deep*11;lj_leaf
 * main;run_jump;after_jump
 * main;run_nested;catch_mid;lj_deep*6;lj_leaf
 * main;run_nested;catch_mid;mid_after
 *
 * ICPP-EXPECT
 * exit 3
 * stdout longjmp jumps=2 checksum=734c1f9592445e91
 */
#include <setjmp.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

static unsigned long unit;
static unsigned long leaf_result;	/* carried across the jump */

NOIPA void lj_leaf(unsigned long n, unsigned long x, jmp_buf *target)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	leaf_result = x;
	longjmp(*target, 1);
}

NOIPA unsigned long lj_deep(int level, unsigned long n, unsigned long x,
			    jmp_buf *target)
{
	if (level == 0)
		lj_leaf(n, x, target);
	else
		x = lj_deep(level - 1, n, x + (unsigned long)level, target);
	CORPUS_KEEP(x);			/* never reached: lj_leaf jumps */
	return x;
}

NOIPA unsigned long after_jump(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 9) + (x >> 5) + i;
	return x;
}

static jmp_buf top_env;

NOIPA unsigned long run_jump(unsigned long n, unsigned long x, int *jumps)
{
	unsigned long r;

	if (setjmp(top_env) == 0) {
		r = lj_deep(10, n, x, &top_env);	/* does not return */
	} else {
		++*jumps;
		r = after_jump(n, leaf_result);
	}
	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long mid_after(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x += (x << 3) ^ (x >> 13) ^ i;
	return x;
}

NOIPA unsigned long catch_mid(unsigned long n, unsigned long x, int *jumps)
{
	jmp_buf env;
	unsigned long r;

	if (setjmp(env) == 0) {
		r = lj_deep(5, n, x, &env);		/* does not return */
	} else {
		++*jumps;
		r = mid_after(n, leaf_result);
	}
	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long run_nested(unsigned long n, unsigned long x, int *jumps)
{
	unsigned long r = catch_mid(n, x, jumps);

	CORPUS_KEEP(r);
	return r;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;
	int jumps = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		sum += run_jump(unit * 8, sum, &jumps);
		sum ^= run_nested(unit * 8, sum, &jumps);
	}
	printf("longjmp jumps=%d checksum=%016lx\n", jumps, sum);
	return 3;	/* on purpose: tests check a profiled run keeps it */
}
