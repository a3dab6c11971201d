/* vla.c -- variable-length arrays and alloca: the same path reached at
 * different stack heights.
 *
 * vla_frame and alloca_frame allocate a buffer of 16..6000 bytes on the
 * stack and then call their leaf, so vla_leaf and alloca_leaf are entered
 * at five different heights each on one and the same path. vla_nest
 * recurses 3 deep with a VLA in every level. (Both frame functions keep a
 * frame pointer even at -fomit-frame-pointer: gcc needs one for a
 * variable-sized frame.)
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;vla_frame;vla_leaf
 * main;alloca_frame;alloca_leaf
 * main;vla_nest*3;vla_leaf
 *
 * ICPP-EXPECT
 * exit 0
 * stdout vla checksum=21d117bc7d81cc21
 */
#include <alloca.h>
#include <string.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

static const size_t sizes[] = { 16, 200, 1000, 3000, 6000 };
static unsigned long unit;

NOIPA unsigned long vla_leaf(unsigned char *buf, size_t len, unsigned long n)
{
	unsigned long x = len;

	for (unsigned long i = 0; i < n; i++) {
		CORPUS_MIX(x);
		buf[i % len] ^= (unsigned char)x;
	}
	for (size_t i = 0; i < len; i++)
		x += buf[i];
	return x;
}

NOIPA unsigned long alloca_leaf(unsigned char *buf, size_t len, unsigned long n)
{
	unsigned long x = ~len;

	for (unsigned long i = 0; i < n; i++) {
		x += (x << 3) ^ (x >> 5) ^ i;
		buf[(i * 7) % len] += (unsigned char)x;
	}
	for (size_t i = 0; i < len; i++)
		x ^= buf[i];
	return x;
}

NOIPA unsigned long vla_frame(size_t len, unsigned long n)
{
	unsigned char buf[len];
	unsigned long r;

	memset(buf, (int)(len & 0x7f), len);
	r = vla_leaf(buf, len, n);
	CORPUS_KEEP(buf[0]);
	return r;
}

NOIPA unsigned long alloca_frame(size_t len, unsigned long n)
{
	unsigned char *buf = alloca(len);
	unsigned long r;

	memset(buf, (int)(len & 0x3f), len);
	r = alloca_leaf(buf, len, n);
	CORPUS_KEEP(buf[len - 1]);
	return r;
}

/* Recurses `level` deep, with a VLA of `len` bytes at every level. */
NOIPA unsigned long vla_nest(int level, size_t len, unsigned long n)
{
	unsigned char buf[len];
	unsigned long r;

	memset(buf, level, len);
	if (level > 1)
		r = vla_nest(level - 1, len * 2, n);
	else
		r = vla_leaf(buf, len, n);
	CORPUS_KEEP(buf[len / 2]);
	return r;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
			sum += vla_frame(sizes[i], unit);
			sum ^= alloca_frame(sizes[i], unit);
		}
		sum += vla_nest(3, 100, unit * 2);
	}
	printf("vla checksum=%016lx\n", sum);
	return 0;
}
