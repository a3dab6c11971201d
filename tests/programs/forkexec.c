/* forkexec.c -- fork, and exec of the same binary in another mode.
 *
 * Usage: forkexec [scale [exec]]. The parent does some work, forks, works
 * on while the child runs, waits for it and prints the child's exit status.
 * The child works, then re-executes this binary (/proc/self/exe) with the
 * argument "exec", which selects the exec_* paths; that image exits with
 * status 5. Every process prints one line and flushes before the next one
 * can print, so stdout is deterministic. The paths are the union over all
 * three processes (parent, forked child, exec'ed image).
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;before_leaf
 * main;child_main;child_leaf
 * main;child_main;reexec
 * main;parent_leaf
 * main;exec_main;exec_leaf
 *
 * ICPP-EXPECT
 * exit 0
 * stdout forkexec child checksum=e830604099312a97
 * stdout forkexec exec checksum=cb364cdf1bc4df4a
 * stdout forkexec parent child-status=5 checksum=73514800b84cb6a5
 */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

NOIPA unsigned long before_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long child_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 5) + (x >> 9) + i;
	return x;
}

NOIPA unsigned long parent_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x += (x << 6) ^ (x >> 10) ^ i;
	return x;
}

NOIPA unsigned long exec_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 15) + (x >> 4) + i;
	return x;
}

/* Replaces the process image; returns only if execv fails. */
NOIPA int reexec(const char *scale_arg)
{
	char self[] = "/proc/self/exe";
	char mode[] = "exec";
	char *args[] = { self, (char *)scale_arg, mode, NULL };

	execv(self, args);
	perror("forkexec: execv /proc/self/exe");
	return 127;
}

NOIPA int child_main(unsigned long n, unsigned long seed, const char *scale_arg)
{
	unsigned long r = child_leaf(n, seed);
	int status;

	printf("forkexec child checksum=%016lx\n", r);
	fflush(stdout);
	status = reexec(scale_arg);
	CORPUS_KEEP(status);
	return status;
}

NOIPA int exec_main(unsigned long n)
{
	unsigned long r = exec_leaf(n, 5);

	printf("forkexec exec checksum=%016lx\n", r);
	CORPUS_KEEP(r);
	return 5;	/* on purpose: the parent reports it */
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long n = CORPUS_UNIT * 8 * (unsigned long)scale, sum;
	char scale_arg[32];
	int status;
	pid_t pid;

	if (argc > 2 && strcmp(argv[2], "exec") == 0) {
		status = exec_main(n);
		CORPUS_KEEP(status);	/* keeps main on the stack at -O2 */
		return status;
	}

	sum = before_leaf(n, 1);
	snprintf(scale_arg, sizeof scale_arg, "%ld", scale);
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		perror("forkexec: fork");
		return 1;
	}
	if (pid == 0)
		exit(child_main(n, sum, scale_arg));
	sum = parent_leaf(n, sum);
	if (waitpid(pid, &status, 0) != pid) {
		perror("forkexec: waitpid");
		return 1;
	}
	printf("forkexec parent child-status=%d checksum=%016lx\n",
	       WIFEXITED(status) ? WEXITSTATUS(status) : -1, sum);
	return 0;
}
