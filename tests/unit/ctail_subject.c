/* ctail_subject.c -- a conditional tail call beside a cold part, for the
 * function table of its stripped copy (test_module, lib/coldpart.c).
 *
 * ctail is `if (k & 1) return ctail_far(n, x); return x + k;` compiled as
 * clang compiles it: `jne ctail_far` (gcc jumps to a `jmp ctail_far`
 * instead), written out here because gcc never emits it.  That jne is the
 * only branch reaching ctail_far, whose CFA at its first byte is rsp+8:
 * stripped, ctail_far must stay a function of its own, not ctail's cold
 * part (docs/definitions.md, "cold part").  hot's unlikely branch is a real
 * cold part (hot.cold), so the table has one to find as well.
 *
 * share_entry / share_body are glibc's mempcpy / memcpy shape: share_entry
 * is two instructions and a plain jmp into share_body's middle, the only
 * branch that reaches share_body, which is entered through a pointer:
 * share_body is a function too, not share_entry's part. */
#include <stdio.h>
#include <stdlib.h>

#define NOIPA __attribute__((noipa))

volatile unsigned long sink;

NOIPA unsigned long ctail(unsigned long n, unsigned long x, unsigned long k);
__asm__(".text\n"
        ".globl ctail\n"
        ".type ctail, @function\n"
        "ctail:\n"
        ".cfi_startproc\n"
        "\ttestb $1, %dl\n"
        "\tjne ctail_far\n"
        "\tleaq (%rsi,%rdx), %rax\n"
        "\tret\n"
        ".cfi_endproc\n"
        ".size ctail, .-ctail\n");

/* x + k; share_entry returns x + k + n */
unsigned long share_entry(unsigned long n, unsigned long x, unsigned long k);
unsigned long share_body(unsigned long n, unsigned long x, unsigned long k);
__asm__(".text\n"
        ".globl share_entry\n"
        ".type share_entry, @function\n"
        "share_entry:\n"
        ".cfi_startproc\n"
        "\tmovq %rdi, %rax\n"
        "\taddq %rdx, %rax\n"
        "\tjmp share_body_mid\n"
        ".cfi_endproc\n"
        ".size share_entry, .-share_entry\n"
        ".p2align 4\n"
        ".globl share_body\n"
        ".type share_body, @function\n"
        "share_body:\n"
        ".cfi_startproc\n"
        "\tmovq %rdx, %rax\n"
        "share_body_mid:\n"
        "\taddq %rsi, %rax\n"
        "\tret\n"
        ".cfi_endproc\n"
        ".size share_body, .-share_body\n");

static unsigned long (*volatile body_ptr)(unsigned long, unsigned long, unsigned long) = share_body;

NOIPA unsigned long leaf(unsigned long n, unsigned long x)
{
    for (unsigned long i = 0; i < n; i++)
        x = x * 6364136223846793005UL + i;
    return x;
}

/* reached only by ctail's jne */
NOIPA unsigned long ctail_far(unsigned long n, unsigned long x)
{
    unsigned long r = leaf(n, x);

    sink += r;
    return r ^ 3;
}

NOIPA __attribute__((cold)) unsigned long slow(unsigned long n, unsigned long x)
{
    unsigned long r = leaf(n, x);

    sink += r;
    return r ^ 5;
}

NOIPA unsigned long hot(unsigned long n, unsigned long x, unsigned long k)
{
    unsigned long r = leaf(n, x);

    if (__builtin_expect((k & 7) == 7, 0)) {
        r += slow(n, r);
        sink += r;
    }
    sink += r;
    return r + 1;
}

int main(void)
{
    unsigned long s = 0;

    for (unsigned long k = 0; k < 16; k++)
        s ^= hot(100, s + k, k) ^ ctail(100, s + k, k) ^ share_entry(k, s, 3) ^ body_ptr(k, s, 5);
    printf("%lx\n", s);
    return 0;
}
