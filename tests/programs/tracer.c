/* tracer.c -- records the call paths a corpus program really executes.
 *
 * Linked into the "instr" configuration only: the program is built with
 * -O0 -finstrument-functions, this file without instrumentation and with
 * frame pointers. test_corpus.py compares what it records with the
 * program's ICPP-PATHS block.
 *
 * How it works. gcc calls __cyg_profile_func_enter(fn, site) after fn's
 * prologue; fn's frame pointer is then entry SP - 8, so the entry SP is the
 * caller's saved %rbp + 8 as seen from the hook's own frame. Each thread
 * keeps a shadow stack of (entry SP, path node). On every entry at SP s,
 * every shadow frame entered at or below s has returned (docs/background.md section 1):
 * popping those first keeps the shadow stack right across longjmp, C++
 * unwinding and signal handlers, where exit hooks are skipped. Exit hooks
 * pop the same way. Paths are nodes of one process-wide trie keyed by
 * (parent node, function), so recording a path costs a hash look-up and
 * the set of nodes is the set of executed paths, prefixes included.
 *
 * Output: only when ICPP_TRACE_DIR is set. At exit, and just before execv
 * (link with -Wl,--wrap=execv), the process writes
 * $ICPP_TRACE_DIR/trace.<pid>.<n> (n makes the name unique: an exec keeps
 * the pid). Lines:
 *   N <node> <parent> <module path> <offset hex>   one per path; parent 0
 *                                                  is the root (no frame)
 *   S <bytes>     largest thread-base-to-hook distance seen (stack use)
 *   X <count>     entries dropped (shadow stack or trie full)
 * Offsets are symbol values (address - load bias), so `nm` names them.
 * A forked child inherits the parent's trie and writes its own file.
 *
 * Nothing here allocates with malloc after start-up, and a hook that finds
 * its thread already inside a hook (a signal arrived mid-hook) does nothing,
 * so timer-driven handlers cannot deadlock it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NOINSTR __attribute__((no_instrument_function))

#define MAX_DEPTH 2048		/* shadow stack entries per thread */
#define MAX_NODES (1u << 16)	/* distinct paths per process */
#define HASH_SIZE (1u << 17)	/* open addressing, power of two */

struct node {
	uint32_t parent;	/* parent node id, 0 = root */
	void *fn;		/* function entry address */
};

struct frame {
	uintptr_t sp;		/* entry SP */
	uint32_t node;		/* path node of this frame */
};

struct tstate {
	int busy;		/* inside a hook (re-entry from a signal) */
	int depth;		/* shadow stack entries in use */
	uintptr_t base;		/* highest root entry SP seen */
	struct frame st[MAX_DEPTH];
};

static struct node *nodes;	/* node 0 is the root */
static uint32_t *table;		/* node ids by hash, 0 = empty slot */
static uint32_t nnodes = 1;
static int lock;
static int enabled;
static unsigned long max_stack;
static unsigned long dropped;
static char outdir[PATH_MAX];

static __thread struct tstate ts;

NOINSTR static void lock_take(void)
{
	while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE))
		;
}

NOINSTR static void lock_drop(void)
{
	__atomic_clear(&lock, __ATOMIC_RELEASE);
}

/* Returns the node of path (parent, fn), creating it; 0 when full. */
NOINSTR static uint32_t intern(uint32_t parent, void *fn)
{
	uint64_t h = ((uint64_t)(uintptr_t)fn ^ ((uint64_t)parent << 32)) *
		     0x9e3779b97f4a7c15ULL;
	uint32_t i = (uint32_t)(h >> 40) & (HASH_SIZE - 1), id;

	lock_take();
	for (;;) {
		id = table[i];
		if (id == 0) {
			if (nnodes >= MAX_NODES)
				break;	/* id 0: the caller counts it */
			id = nnodes++;
			nodes[id].parent = parent;
			nodes[id].fn = fn;
			table[i] = id;
			break;
		}
		if (nodes[id].parent == parent && nodes[id].fn == fn)
			break;
		i = (i + 1) & (HASH_SIZE - 1);
	}
	lock_drop();
	return id;
}

/* Entry SP of the instrumented function that called the hook: its %rbp
 * (saved at the hook's frame pointer) + 8. Only valid inside a hook. */
#define CALLER_ENTRY_SP() \
	(((uintptr_t *)__builtin_frame_address(0))[0] + 8)

/* Pops every shadow frame entered at or below sp: those have returned. */
#define POP_DEAD(sp) \
	while (ts.depth > 0 && ts.st[ts.depth - 1].sp <= (sp)) \
		ts.depth--

NOINSTR void __cyg_profile_func_enter(void *fn, void *site)
{
	uintptr_t sp, here = (uintptr_t)__builtin_frame_address(0);
	uint32_t parent, id;
	unsigned long used, old;

	(void)site;
	if (!enabled || ts.busy)
		return;
	ts.busy = 1;
	sp = CALLER_ENTRY_SP();
	POP_DEAD(sp);
	if (ts.depth == 0 && sp > ts.base)
		ts.base = sp;
	parent = ts.depth > 0 ? ts.st[ts.depth - 1].node : 0;
	id = intern(parent, fn);
	if (id != 0 && ts.depth < MAX_DEPTH) {
		ts.st[ts.depth].sp = sp;
		ts.st[ts.depth].node = id;
		ts.depth++;
	} else {
		__atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
	}
	used = ts.base - here;
	old = __atomic_load_n(&max_stack, __ATOMIC_RELAXED);
	while (used > old &&
	       !__atomic_compare_exchange_n(&max_stack, &old, used, 0,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	ts.busy = 0;
}

NOINSTR void __cyg_profile_func_exit(void *fn, void *site)
{
	uintptr_t sp;

	(void)fn;
	(void)site;
	if (!enabled || ts.busy)
		return;
	ts.busy = 1;
	sp = CALLER_ENTRY_SP();
	POP_DEAD(sp);
	ts.busy = 0;
}

/* Writes this process's trie to a new file in outdir. */
NOINSTR static void dump(void)
{
	char path[PATH_MAX + 64], exe[PATH_MAX];
	ssize_t elen;
	FILE *f = NULL;
	int fd = -1;

	if (!enabled)
		return;
	ts.busy = 1;	/* whatever runs from here on is not recorded */
	for (int n = 0; n < 1000 && fd < 0; n++) {
		snprintf(path, sizeof path, "%s/trace.%ld.%d", outdir,
			 (long)getpid(), n);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		fprintf(stderr, "icpp tracer: cannot create %s: %s\n", path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		ts.busy = 0;
		return;
	}
	elen = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[elen > 0 ? elen : 0] = '\0';
	lock_take();
	for (uint32_t id = 1; id < nnodes; id++) {
		Dl_info info;
		struct link_map *lm = NULL;
		const char *mod = "?";
		uintptr_t off = (uintptr_t)nodes[id].fn;

		if (dladdr1(nodes[id].fn, &info, (void **)&lm,
			    RTLD_DL_LINKMAP) != 0 && lm != NULL) {
			mod = lm->l_name[0] != '\0' ? lm->l_name : exe;
			off -= lm->l_addr;
		}
		fprintf(f, "N %u %u %s %lx\n", id, nodes[id].parent, mod,
			(unsigned long)off);
	}
	lock_drop();
	fprintf(f, "S %lu\nX %lu\n", max_stack, dropped);
	fclose(f);
	ts.busy = 0;
}

NOINSTR static void before_fork(void)
{
	lock_take();
}

NOINSTR static void after_fork(void)
{
	lock_drop();
}

__attribute__((constructor, no_instrument_function))
static void tracer_init(void)
{
	const char *dir = getenv("ICPP_TRACE_DIR");
	void *n, *t;

	if (dir == NULL || *dir == '\0')
		return;
	n = mmap(NULL, MAX_NODES * sizeof *nodes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	t = mmap(NULL, HASH_SIZE * sizeof *table, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n == MAP_FAILED || t == MAP_FAILED) {
		perror("icpp tracer: mmap");
		return;
	}
	nodes = n;
	table = t;
	snprintf(outdir, sizeof outdir, "%s", dir);
	pthread_atfork(before_fork, after_fork, after_fork);
	enabled = 1;
}

__attribute__((destructor, no_instrument_function))
static void tracer_fini(void)
{
	dump();
	enabled = 0;
}

/* execv replaces the image without running destructors: dump first. */
int __real_execv(const char *path, char *const argv[]);

NOINSTR int __wrap_execv(const char *path, char *const argv[])
{
	dump();
	return __real_execv(path, argv);
}
