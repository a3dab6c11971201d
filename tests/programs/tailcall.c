/* tailcall.c -- tail calls (sibling calls), direct, mutual and indirect.
 *
 * At -O2 gcc compiles `return f(...)` in these functions to `jmp f`: the
 * callee replaces its caller on the stack and is entered at the caller's
 * entry SP. At -O0 every call is a real call. So the paths differ by
 * optimisation level; lines without a tag hold at both.
 *
 * run_chain:    tc_first -> tc_second -> tc_leaf (two tail calls)
 * run_parity:   is_even/is_odd mutual tail recursion, 40 deep, ending in
 *               parity_leaf (tail-called too)
 * run_dispatch: dispatch tail-calls ind_leaf through a function pointer
 * run_plain:    plain_caller calls tc_leaf normally (not a tail call), so
 *               tc_leaf is seen both under run_chain and under plain_caller.
 *
 * ICPP-PATHS  (prefixes are implied)
 * [O0] main;run_chain;tc_first;tc_second;tc_leaf
 * [O2] main;run_chain;tc_first
 * [O2] main;run_chain;tc_second
 * [O2] main;run_chain;tc_leaf
 * [O0] main;run_parity;(is_even;is_odd)*20;is_even;parity_leaf
 * [O2] main;run_parity;is_even
 * [O2] main;run_parity;is_odd
 * [O2] main;run_parity;parity_leaf
 * [O0] main;run_dispatch;dispatch;ind_leaf
 * [O2] main;run_dispatch;dispatch
 * [O2] main;run_dispatch;ind_leaf
 * main;run_plain;plain_caller;tc_leaf
 *
 * Tail calls present in the -O2 binaries (checked by test_corpus.py against
 * the disassembly; '*' is an indirect jump):
 * ICPP-TAILCALLS tc_first->tc_second tc_second->tc_leaf is_even->is_odd
 * ICPP-TAILCALLS is_odd->is_even is_even->parity_leaf dispatch->*
 *
 * ICPP-EXPECT
 * exit 0
 * stdout tailcall checksum=da975700c1de5e7d
 */
#include "corpus.h"

CORPUS_DEFINE_SINK;

#define PARITY_DEPTH 40

typedef unsigned long (*leaf_fn)(unsigned long n, unsigned long x);

static unsigned long unit;

NOIPA unsigned long tc_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		CORPUS_MIX(x);
	return x;
}

NOIPA unsigned long tc_second(unsigned long n, unsigned long x)
{
	return tc_leaf(n, x ^ 0x5555);		/* tail call */
}

NOIPA unsigned long tc_first(unsigned long n, unsigned long x)
{
	return tc_second(n, x + 1);		/* tail call */
}

NOIPA unsigned long run_chain(unsigned long n, unsigned long x)
{
	unsigned long r = tc_first(n, x);

	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long parity_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x += (x << 5) ^ (x >> 11) ^ i;
	return x;
}

NOIPA unsigned long is_odd(unsigned long depth, unsigned long n, unsigned long x);

NOIPA unsigned long is_even(unsigned long depth, unsigned long n, unsigned long x)
{
	if (depth == 0)
		return parity_leaf(n, x);		/* tail call */
	return is_odd(depth - 1, n, x + 1);	/* tail call */
}

NOIPA unsigned long is_odd(unsigned long depth, unsigned long n, unsigned long x)
{
	if (depth == 0)
		return ~x;			/* never reached from an even start */
	return is_even(depth - 1, n, x * 3);	/* tail call */
}

NOIPA unsigned long run_parity(unsigned long n, unsigned long x)
{
	unsigned long r = is_even(PARITY_DEPTH, n, x);

	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long ind_leaf(unsigned long n, unsigned long x)
{
	for (unsigned long i = 0; i < n; i++)
		x ^= (x << 7) + (x >> 9) + i;
	return x;
}

static leaf_fn volatile ind_target = ind_leaf;

NOIPA unsigned long dispatch(leaf_fn fn, unsigned long n, unsigned long x)
{
	return fn(n, x + 7);			/* indirect tail call */
}

NOIPA unsigned long run_dispatch(unsigned long n, unsigned long x)
{
	unsigned long r = dispatch(ind_target, n, x);

	CORPUS_KEEP(r);
	return r;
}

NOIPA unsigned long plain_caller(unsigned long n, unsigned long x)
{
	unsigned long r = tc_leaf(n, x);

	CORPUS_KEEP(r);				/* not a tail call */
	return r;
}

NOIPA unsigned long run_plain(unsigned long n, unsigned long x)
{
	unsigned long r = plain_caller(n, x);

	CORPUS_KEEP(r);
	return r;
}

int main(int argc, char **argv)
{
	long scale = corpus_scale(argc, argv);
	unsigned long sum = 0;

	unit = CORPUS_UNIT;
	for (long s = 0; s < scale; s++) {
		sum += run_chain(unit * 12, sum);
		sum ^= run_parity(unit * 12, sum);
		sum += run_dispatch(unit * 8, sum);
		sum ^= run_plain(unit * 8, sum);
	}
	printf("tailcall checksum=%016lx\n", sum);
	return 0;
}
