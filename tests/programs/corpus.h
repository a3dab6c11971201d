/* corpus.h -- shared helpers for the ICPP test corpus programs.
 *
 * Nothing in here may show up as a frame of its own: the helpers are macros
 * or always-inline functions that -finstrument-functions leaves alone, so
 * the documented call paths (ICPP-PATHS blocks) list only the functions the
 * program's .c/.cpp files define. See README.md for the path format.
 */
#ifndef CORPUS_H
#define CORPUS_H

#include <stdio.h>
#include <stdlib.h>

/* Every function of a corpus program carries NOIPA: gcc -O2 may then neither
 * inline it nor clone it (.constprop/.isra/.part) nor fold it with an
 * identical one, so the functions named in the documentation are the
 * functions in the binary. Only sibling-call optimisation (tail calls) is
 * left; corpus code avoids it outside tailcall.c by using every callee's
 * result after the call (CORPUS_KEEP). */
#define NOIPA __attribute__((noipa))

/* Helpers expanded in place: never a frame, never instrumented. */
#define CORPUS_INLINE static inline __attribute__((always_inline, no_instrument_function))

/* A volatile sink: storing a callee's result here after the call keeps the
 * call from being a tail call (the store must happen after it returns). */
#ifdef __cplusplus
extern "C" {
#endif
extern __attribute__((visibility("hidden"))) volatile unsigned long corpus_sink;
#ifdef __cplusplus
}
#endif
#define CORPUS_KEEP(x) (corpus_sink += (unsigned long)(x))

/* Defines corpus_sink; put it once in each program's main source file (and
 * in a plugin: hidden visibility gives every module its own). */
#define CORPUS_DEFINE_SINK volatile unsigned long corpus_sink

/* One step of a 64-bit mixing generator (LCG + xorshift). Leaf loops run it
 * n times; gcc cannot collapse the loop, and the result is the same at every
 * optimisation level (integer arithmetic only, no addresses). */
#define CORPUS_MIX(x) \
	((x) = ((x) * 6364136223846793005UL + 1442695040888963407UL), \
	 (x) ^= (x) >> 29)

/* Scale = integer argv[1] if given (>= 1), else 1. Work is proportional to
 * it: 1 runs ~20 ms at -O2, 50-100 run about a second or more. */
CORPUS_INLINE long corpus_scale(int argc, char **argv)
{
	long s = 1;

	if (argc > 1) {
		s = strtol(argv[1], NULL, 10);
		if (s < 1)
			s = 1;
	}
	return s;
}

/* Inner loop length of a leaf at scale 1; programs multiply it. */
#define CORPUS_UNIT 320000UL

#endif /* CORPUS_H */
