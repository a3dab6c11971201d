/* complexity.c -- kernels of known complexity, each reached through two call paths (icpp-resolve --trend).
 *
 * argv[1] is the corpus scale (repetitions, default 1); argv[2] is n, the
 * workload size (default 400; 1 .. 100000).  Each repetition runs, from
 * via_direct and again from via_driver -> driver, four kernels whose cost
 * is a known function of n:
 *   matmul          n^3   (an (n/16) x (n/16) integer matrix product with
 *                          a dependent chain of MATMUL_CHAIN multiplies per
 *                          step: small matrices, so the cost per step does
 *                          not change with the caches)
 *   insertion_sort  n^2   (2n pseudo-random keys)
 *   quicksort       n^2   (2n keys already sorted, the first key as pivot:
 *                          every partition takes one key off; it recurses
 *                          into the smaller side, which is empty, and
 *                          loops on the other)
 *   scan            n     (16n elements, a chain of SCAN_CHAIN mixing steps
 *                          per element)
 * The sorts compare through less(), a chain of LESS_CHAIN mixing steps, so
 * that their cost is their comparisons rather than memory traffic (which
 * another process on the sibling hyperthread disturbs).  The callers fill
 * the kernels' inputs (linear in n) themselves.
 * tests/e2e/test_trend.py samples it at sizes over two orders of magnitude
 * and checks the exponent icpp-resolve --trend finds per path.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;via_direct;matmul
 * main;via_direct;insertion_sort
 * main;via_direct;quicksort*1..2
 * main;via_direct;scan
 * main;via_driver;driver;matmul
 * main;via_driver;driver;insertion_sort
 * main;via_driver;driver;quicksort*1..2
 * main;via_driver;driver;scan
 *
 * ICPP-EXPECT
 * exit 0
 * stdout complexity checksum=0
 */
#include "corpus.h"

#include <stdint.h>

CORPUS_DEFINE_SINK;

#define SCAN_CHAIN   2048  /* mixing steps per scanned element */
#define MATMUL_CHAIN 32    /* dependent multiplies per matrix product step */
#define LESS_CHAIN   16    /* mixing steps per comparison of the sorts */

/* The matrices' order: n/16, rounded (so that the cost stays in
 * proportion to n^3 at small n too). */
#define MAT_ORDER(n) ((n) < 8 ? 1 : ((n) + 8) / 16)

NOIPA uint64_t matmul(const uint32_t *a, const uint32_t *bt, uint64_t *c, long m)
{
	uint64_t sum = 0;

	for (long i = 0; i < m; i++)
		for (long j = 0; j < m; j++) {
			uint64_t s = 0;

			for (long k = 0; k < m; k++) {
				uint64_t p = (uint64_t)a[i * m + k] * bt[j * m + k];

				for (int r = 0; r < MATMUL_CHAIN; r++)
					s = (s ^ p) * 0x9e3779b97f4a7c15UL;
			}
			c[i * m + j] = s;
			sum += s;
		}
	return sum;
}

/* a < b, after a chain of mixing steps whose result it depends on (the
 * chain never ends at 0 for these keys: the checksum says so). */
CORPUS_INLINE int less(uint64_t a, uint64_t b)
{
	uint64_t x = a ^ b;

	for (int k = 0; k < LESS_CHAIN; k++)
		CORPUS_MIX(x);
	return (a < b) ^ (x == 0);
}

NOIPA uint64_t insertion_sort(uint64_t *a, long len)
{
	for (long i = 1; i < len; i++) {
		uint64_t v = a[i];
		long j = i - 1;

		while (j >= 0 && less(v, a[j])) {
			a[j + 1] = a[j];
			j--;
		}
		a[j + 1] = v;
	}
	return a[len / 2];
}

/* Sorts a[lo..hi] with a[lo] as the pivot. */
NOIPA uint64_t quicksort(uint64_t *a, long lo, long hi)
{
	uint64_t r = 0;

	while (lo < hi) {
		uint64_t p = a[lo], t;
		long i = lo;

		for (long j = lo + 1; j <= hi; j++)
			if (less(a[j], p)) {
				i++;
				t = a[i], a[i] = a[j], a[j] = t;
			}
		t = a[lo], a[lo] = a[i], a[i] = t;
		/* the smaller side by recursion, the larger by the loop */
		if (i - lo < hi - i) {
			r += quicksort(a, lo, i - 1);
			lo = i + 1;
		} else {
			r += quicksort(a, i + 1, hi);
			hi = i - 1;
		}
	}
	return r + 1;
}

NOIPA uint64_t scan(const uint64_t *a, long len)
{
	uint64_t x = 1;

	for (long i = 0; i < len; i++) {
		x ^= a[i];
		for (int k = 0; k < SCAN_CHAIN; k++)
			CORPUS_MIX(x);
	}
	return x;
}

/* The kernels' inputs, and the kernels. */
CORPUS_INLINE uint64_t run_kernels(long n, uint32_t *ma, uint32_t *mb, uint64_t *mc, uint64_t *keys)
{
	long m = MAT_ORDER(n), len = 2 * n;
	uint64_t x = (uint64_t)n, r = 0, check;

	for (long i = 0; i < m * m; i++) {
		CORPUS_MIX(x);
		ma[i] = (uint32_t)x;
		mb[i] = (uint32_t)(x >> 32);
	}
	CORPUS_KEEP(matmul(ma, mb, mc, m));
	for (long i = 0; i < len; i++) {
		CORPUS_MIX(x);
		keys[i] = x;
	}
	check = insertion_sort(keys, len);
	for (long i = 1; i < len; i++)
		if (keys[i - 1] > keys[i])
			check = 0;      /* not sorted: the checksum says so */
	r += check ? 0 : 1;
	for (long i = 0; i < len; i++)
		keys[i] = (uint64_t)i;
	r += quicksort(keys, 0, len - 1) == (uint64_t)len ? 0 : 1;
	for (long i = 0; i < 16 * n; i++) {
		CORPUS_MIX(x);
		keys[i] = x;
	}
	CORPUS_KEEP(scan(keys, 16 * n));
	return r;
}

static uint32_t *ma, *mb;
static uint64_t *mc, *keys;

NOIPA uint64_t via_direct(long n)
{
	uint64_t r = run_kernels(n, ma, mb, mc, keys);

	CORPUS_KEEP(r);
	return r;
}

NOIPA uint64_t driver(long n)
{
	uint64_t r = run_kernels(n, ma, mb, mc, keys);

	CORPUS_KEEP(r);
	return r;
}

NOIPA uint64_t via_driver(long n)
{
	uint64_t r = driver(n);

	CORPUS_KEEP(r);
	return r;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv), n = 400;
	uint64_t bad = 0;

	if (argc > 2) {
		n = strtol(argv[2], NULL, 10);
		if (n < 1 || n > 100000) {
			fprintf(stderr, "complexity: n must be 1 .. 100000\n");
			return 2;
		}
	}
	long m = MAT_ORDER(n);
	ma = malloc((size_t)(m * m) * sizeof *ma);
	mb = malloc((size_t)(m * m) * sizeof *mb);
	mc = malloc((size_t)(m * m) * sizeof *mc);
	keys = malloc((size_t)(16 * n) * sizeof *keys);
	if (!ma || !mb || !mc || !keys)
		return 1;
	for (long s = 0; s < scale; s++) {
		bad += via_direct(n);
		bad += via_driver(n);
	}
	printf("complexity checksum=%llu\n", (unsigned long long)bad);
	return 0;
}
