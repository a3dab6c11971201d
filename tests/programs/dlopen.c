/* dlopen.c -- functions of a dlopen'ed plugin on the call paths.
 *
 * The plugin is plugin.<config>.so in this binary's directory, where
 * <config> is what follows "dlopen." in this binary's name (so
 * dlopen.O2-fp-pie loads plugin.O2-fp-pie.so). run_plugin calls the
 * plugin's plugin_run, which calls back into host_callback. The plugin
 * stays loaded until exit (no dlclose), so its mapping is there for the
 * whole run. Not built in the static configuration.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;load_plugin
 * main;host_work
 * main;run_plugin;plugin_run;plugin_step;plugin_leaf
 * main;run_plugin;plugin_run;plugin_step;host_callback
 *
 * ICPP-EXPECT
 * exit 0
 * stdout dlopen checksum=f1645c8b58c8ab9a
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

typedef unsigned long (*host_cb)(unsigned long n, unsigned long x);
typedef unsigned long (*plugin_run_fn)(unsigned long n, unsigned long x,
				       host_cb cb);

NOIPA unsigned long host_callback(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 3) + (x >> 8) + i;
	return x;
}

NOIPA unsigned long host_work(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x += (x << 10) ^ (x >> 6) ^ i;
	return x;
}

/* Returns plugin_run from plugin.<config>.so beside /proc/self/exe, or
 * NULL after printing why. */
NOIPA plugin_run_fn load_plugin(void)
{
	char exe[PATH_MAX], path[PATH_MAX + 32];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	char *base, *config;
	void *handle, *sym;
	plugin_run_fn run = NULL;

	if (len < 0) {
		perror("dlopen: readlink /proc/self/exe");
		return NULL;
	}
	exe[len] = '\0';
	base = strrchr(exe, '/');
	*base++ = '\0';
	config = strchr(base, '.');
	if (config == NULL) {
		fprintf(stderr, "dlopen: cannot tell the configuration from %s\n",
			base);
		return NULL;
	}
	snprintf(path, sizeof path, "%s/plugin%s.so", exe, config);
	handle = dlopen(path, RTLD_NOW);
	if (handle == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return NULL;
	}
	sym = dlsym(handle, "plugin_run");
	if (sym == NULL)
		fprintf(stderr, "dlopen: %s\n", dlerror());
	else
		memcpy(&run, &sym, sizeof run);	/* POSIX: same representation */
	CORPUS_KEEP(sym != NULL);
	return run;
}

NOIPA unsigned long run_plugin(plugin_run_fn run, unsigned long n,
			       unsigned long x)
{
	unsigned long r = run(n, x, host_callback);

	CORPUS_KEEP(r);
	return r;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0, unit = CORPUS_UNIT;
	plugin_run_fn run = load_plugin();

	if (run == NULL)
		return 1;
	for (long s = 0; s < scale; s++) {
		sum += host_work(unit * 8, sum);
		sum ^= run_plugin(run, unit * 4, sum);
	}
	printf("dlopen checksum=%016lx\n", sum);
	return 0;
}
