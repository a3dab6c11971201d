/* plugin.c -- the shared object that dlopen.c loads at run time.
 *
 * Built once per configuration as plugin.<config>.so next to
 * dlopen.<config>. Its functions belong to the dlopen program: they appear
 * in that program's ICPP-PATHS, and plugin_step calls back into the host.
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

typedef unsigned long (*host_cb)(unsigned long n, unsigned long x);

NOIPA unsigned long plugin_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long plugin_step(unsigned long n, unsigned long x, host_cb cb)
{
	unsigned long r = plugin_leaf(n, x);

	r ^= cb(n / 2, r);
	CORPUS_KEEP(r);
	return r;
}

/* The entry point the host looks up with dlsym. */
NOIPA unsigned long plugin_run(unsigned long n, unsigned long x, host_cb cb)
{
	for (int i = 0; i < 4; i++)
		x = plugin_step(n, x, cb) + 1;
	CORPUS_KEEP(x);
	return x;
}
