/* inject.c -- a controlled amount of extra work on one call path (actionability).
 *
 * victim is called from path_a and from path_b; steady does work of its own
 * beside them.  argv[2] is the injection level L (default 0): victim runs
 * L * 2 extra units of work when path_a called it, none when path_b did.
 * The extra is a loop count passed as an argument, so no frame changes
 * size and every (function, height) stays where it is: only the time on
 * main;path_a;victim grows, by the same amount per level.  Per scale step
 * at level 0: spin 4 units, victim 2 under path_a and 2 under path_b.
 * A profiler that attributes time correctly reports the path's time rising
 * one for one with the program's total time as L grows (slope 1).
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;steady;spin
 * main;path_a;victim
 * main;path_b;victim
 *
 * ICPP-EXPECT
 * exit 0
 * stdout inject level=0 checksum=c52189022fed8308
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

NOIPA unsigned long spin(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long steady(unsigned long n, unsigned long x)
{
	unsigned long r = spin(n, x + 7);

	CORPUS_KEEP(r);
	return r + 1;
}

/* The injected work: `extra` more rounds of the same loop. */
NOIPA unsigned long victim(unsigned long n, unsigned long extra, unsigned long x)
{
	for (unsigned long i = 0; i < n + extra; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long path_a(unsigned long n, unsigned long extra, unsigned long x)
{
	unsigned long r = victim(n, extra, x ^ 1);

	CORPUS_KEEP(r);
	return r + 3;
}

NOIPA unsigned long path_b(unsigned long n, unsigned long extra, unsigned long x)
{
	unsigned long r = victim(n, extra, x ^ 2);

	CORPUS_KEEP(r);
	return r + 5;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	long level = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	unsigned long unit = CORPUS_UNIT, sum = 0;

	if (level < 0)
		level = 0;
	/* small steps, interleaved: every part of the run sees every path */
	for (long s = 0; s < scale * 4; s++) {
		sum += steady(unit * 4, sum);
		sum += path_a(unit * 2, unit * 2 * (unsigned long)level, sum);
		sum += path_b(unit * 2, 0, sum);
	}
	printf("inject level=%ld checksum=%016lx\n", level, sum);
	return 0;
}
