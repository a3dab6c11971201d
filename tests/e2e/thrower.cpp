/* thrower.cpp -- a program that spends most of its time throwing: C++
 * exceptions of three kinds (a std::runtime_error, a class of a hierarchy, an
 * int) thrown 8 frames deep, one kind caught and rethrown on the way up.  So
 * most samples of it fall in the unwinder (libgcc_s, stripped) and the C++
 * runtime (libstdc++), which e2e-train checks against the ground truth. */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#define NOIPA __attribute__((noipa))

struct Base {
	unsigned long v;
	virtual ~Base() {}
};
struct Derived : Base {};

NOIPA void leaf(unsigned long i)
{
	if (i % 3 == 0)
		throw std::runtime_error("thrown");
	if (i % 3 == 1) {
		Derived d;
		d.v = i;
		throw d;
	}
	throw (int)(i & 0xff);
}

NOIPA void deep(int d, unsigned long i)
{
	if (d == 0)
		leaf(i);
	else
		deep(d - 1, i);
	__asm__ volatile("" ::: "memory");     /* no tail call */
}

NOIPA unsigned long middle(unsigned long i)
{
	try {
		deep(6, i);
	} catch (int) {
		throw;
	}
	return 0;
}

NOIPA unsigned long top(unsigned long i)
{
	try {
		return middle(i);
	} catch (const std::exception &e) {
		return (unsigned char)e.what()[0];
	} catch (const Base &b) {
		return b.v & 1;
	} catch (int e) {
		return (unsigned long)e;
	}
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000, sum = 0;

	for (unsigned long i = 0; i < n; i++)
		sum += top(i);
	printf("thrower %lu %lu\n", n, sum);
	return 0;
}
