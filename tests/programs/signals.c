/* signals.c -- signal handlers entered from known places, and optional
 * timer-driven ones.
 *
 * trigger() raises SIGUSR1; its handler on_usr1 runs on the same stack
 * below trigger's frame (libc's raise and the kernel's signal frame in
 * between are not the program's functions) and calls handler_leaf; every
 * other time it raises SIGUSR2 from inside the handler, so on_usr2 nests
 * on top of on_usr1. spin() arms a 1 ms ITIMER_REAL timer while it calls
 * spin_leaf (SIGALRM rather than SIGPROF, which in-process profilers use);
 * on_alarm may interrupt spin or spin_leaf any number of times, or never,
 * so those paths are optional.
 *
 * ICPP-PATHS  (prefixes are implied)
 * main;install
 * main;trigger;on_usr1;handler_leaf
 * main;trigger;on_usr1;on_usr2
 * main;spin;spin_leaf
 * ?main;spin;on_alarm
 * ?main;spin;spin_leaf;on_alarm
 *
 * ICPP-EXPECT
 * exit 0
 * stdout signals usr1=4 usr2=2 checksum=51fcdf3ac9a344b1
 */
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#include "corpus.h"

CORPUS_DEFINE_SINK;

static unsigned long unit;
static volatile sig_atomic_t usr1_count, usr2_count, alarm_count;
static volatile unsigned long handler_sum;

NOIPA unsigned long handler_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA void on_usr2(int sig)
{
	usr2_count++;
	handler_sum += (unsigned long)sig;
}

NOIPA void on_usr1(int sig)
{
	unsigned long r = handler_leaf(unit * 4, handler_sum + (unsigned long)sig);

	handler_sum ^= r;
	if (usr1_count++ & 1)
		raise(SIGUSR2);
	CORPUS_KEEP(r);
}

/* Timer-driven: whatever it interrupts, it must not change the output. */
NOIPA void on_alarm(int sig)
{
	alarm_count += sig > 0;
}

NOIPA unsigned long trigger(unsigned long x)
{
	raise(SIGUSR1);
	CORPUS_KEEP(x);
	return handler_sum ^ x;
}

NOIPA unsigned long spin_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 7) + (x >> 3) + i;
	return x;
}

NOIPA unsigned long spin(unsigned long n, unsigned long x)
{
	struct itimerval on = { { 0, 1000 }, { 0, 1000 } }, off;

	memset(&off, 0, sizeof off);
	setitimer(ITIMER_REAL, &on, NULL);
	for (int i = 0; i < 8; i++)
		x = spin_leaf(n / 8, x) + 1;
	setitimer(ITIMER_REAL, &off, NULL);
	CORPUS_KEEP(x);
	return x;
}

NOIPA void install(int sig, void (*fn)(int))
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = fn;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CORPUS_KEEP(sigaction(sig, &sa, NULL));	/* not a tail call */
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	install(SIGUSR1, on_usr1);
	install(SIGUSR2, on_usr2);
	install(SIGALRM, on_alarm);
	for (long s = 0; s < scale; s++) {
		for (int k = 0; k < 4; k++)
			sum += trigger(sum);
		sum ^= spin(unit * 16, sum);
	}
	printf("signals usr1=%d usr2=%d checksum=%016lx\n",
	       (int)usr1_count, (int)usr2_count, sum);
	return 0;
}
