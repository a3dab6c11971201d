/* fnptr.c -- calls through function pointers and through libc callbacks.
 *
 * apply_ops() calls three leaves through a table of function pointers;
 * sort_items() hands cmp_items to qsort (libc), which calls it back, and
 * cmp_items calls item_key; find_items() does the same through bsearch.
 * Frames of libc are elided in paths: main -> sort_items -> qsort -> cmp.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;make_items
 * main;apply_ops;op_add
 * main;apply_ops;op_xor
 * main;apply_ops;op_mul
 * main;sort_items;cmp_items;item_key
 * main;find_items;cmp_key;item_key
 *
 * ICPP-EXPECT
 * exit 0
 * stdout fnptr checksum=ea6b84ebfdd34ad0
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

#define NITEMS 4096

typedef unsigned long (*op_fn)(unsigned long n, unsigned long x);

static unsigned long items[NITEMS];
static unsigned long unit;

NOIPA unsigned long op_add(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x += (x >> 7) + i;
	return x;
}

NOIPA unsigned long op_xor(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 13) ^ (x >> 3) ^ i;
	return x;
}

NOIPA unsigned long op_mul(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

/* The table is volatile so gcc cannot turn the indirect calls into direct
 * ones. */
static op_fn volatile ops[3] = { op_add, op_xor, op_mul };

NOIPA unsigned long apply_ops(unsigned long n, unsigned long x)
{
	for (int i = 0; i < 3; i++)
		x = ops[i](n, x) + 1;
	CORPUS_KEEP(x);
	return x;
}

/* A sort key that costs something, so samples land in item_key. */
NOIPA unsigned long item_key(unsigned long v)
{
	unsigned long x = v;

	for (int i = 0; i < 24; i++)
		CORPUS_MIX(x);
	return x >> 8;
}

NOIPA int cmp_items(const void *pa, const void *pb)
{
	unsigned long a = *(const unsigned long *)pa;
	unsigned long b = *(const unsigned long *)pb;
	unsigned long ka = item_key(a), kb = item_key(b);
	int r;

	/* Total order (key, then value): the result does not depend on the
	 * sort algorithm. */
	if (ka != kb)
		r = ka < kb ? -1 : 1;
	else
		r = a < b ? -1 : a > b;
	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long sort_items(unsigned long *v, size_t n)
{
	unsigned long h = 0;

	qsort(v, n, sizeof v[0], cmp_items);
	for (size_t i = 0; i < n; i++)
		h = h * 31 + v[i];
	return h;
}

NOIPA int cmp_key(const void *pkey, const void *pelem)
{
	unsigned long k = *(const unsigned long *)pkey;
	unsigned long e = *(const unsigned long *)pelem;
	unsigned long ke = item_key(e), kk = item_key(k);
	int r;

	if (kk != ke)
		r = kk < ke ? -1 : 1;
	else
		r = k < e ? -1 : k > e;
	CORPUS_KEEP(r);
	return r;
}

/* Looks up every 8th item of the sorted array; returns how many hits. */
NOIPA unsigned long find_items(const unsigned long *v, size_t n)
{
	unsigned long hits = 0;

	for (size_t i = 0; i < n; i += 8) {
		const void *p = bsearch(&v[i], v, n, sizeof v[0], cmp_key);
		hits += p != NULL;
	}
	CORPUS_KEEP(hits);
	return hits;
}

NOIPA void make_items(unsigned long *v, size_t n, unsigned long seed)
{
	unsigned long x = seed;

	for (size_t i = 0; i < n; i++)
		v[i] = CORPUS_MIX(x);
	CORPUS_KEEP(x);
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		make_items(items, NITEMS, (unsigned long)s + 1);
		sum += apply_ops(unit * 4, sum);
		sum ^= sort_items(items, NITEMS);
		sum += find_items(items, NITEMS);
	}
	printf("fnptr checksum=%016lx\n", sum);
	return 0;
}
