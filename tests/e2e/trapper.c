/* trapper.c -- a program with its own SIGTRAP handler (installed with sigaction, then with signal)
 * that calls a function the agent can only hook with int3, and raises SIGTRAP on purpose (raise and
 * an int3 instruction of its own): under icpp-train its handler must see exactly its own traps, with
 * their siginfo, and sigaction must report its handler, not the agent's (docs/train.md, "int3").
 * It prints what it saw and exits 0 if all was as without the agent, 1 otherwise.
 *
 * TRAP-PATHS (count):
 *   main;trap_me 150
 *   main;own_int3 2
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/* Its loop branches back to byte 1: no jmp fits (docs/train.md), so the
 * agent hooks it with int3.  Called through a pointer: a direct call would
 * be pointed at the hook's stub and not trap. */
int trap_me(int n);
__asm__(".text\n"
        ".globl trap_me\n.type trap_me,@function\n"
        "trap_me:\n"
        "  nop\n"
        "1: sub $1,%edi\n"              /* offset 1: the loop's target */
        "  mov %edi,%edi\n"             /* the jg lies past the bytes a jmp would move */
        "  jg 1b\n"
        "  mov $42,%eax\n"
        "  ret\n"
        ".size trap_me,.-trap_me\n");

int (*volatile trap_ptr)(int) = trap_me;

static volatile int info_calls, plain_calls, last_code, last_signo, last_pid;
static volatile uintptr_t last_rip;
static void *volatile int3_after;

static void on_trap_info(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    info_calls++;
    last_signo = si->si_signo;
    last_code = si->si_code;
    last_pid = si->si_code == SI_KERNEL ? 0 : si->si_pid;
    last_rip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
    (void)sig;
}

static void on_trap_plain(int sig)
{
    plain_calls += sig == SIGTRAP;
}

/* An int3 of the program's own, inside a function, past the first bytes
 * (which a jmp hook moves into its stub). */
__attribute__((noinline)) static void own_int3(void)
{
    void *after;
    __asm__ volatile(".fill 8,1,0x90\n\tint3\n1:\n\tleaq 1b(%%rip), %0" : "=r"(after));
    int3_after = after;
}

static int bad;

static void expect(int ok, const char *what)
{
    if (!ok) {
        printf("FAIL: %s (info handler %d calls, plain handler %d, last si_code %d signo %d pid %d)\n", what,
               info_calls, plain_calls, last_code, last_signo, last_pid);
        bad = 1;
    }
}

int main(void)
{
    long sum = 0;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap_info;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    expect(sigaction(SIGTRAP, &sa, NULL) == 0, "sigaction(SIGTRAP) failed");
    expect(sigaction(SIGTRAP, NULL, &old) == 0 && old.sa_sigaction == on_trap_info && (old.sa_flags & SA_SIGINFO),
           "sigaction(SIGTRAP, NULL, &old) does not return the handler just installed");
    for (int i = 0; i < 100; i++)
        sum += trap_ptr(i % 5 + 1);
    expect(info_calls == 0, "the handler saw traps that were not the program's");
    raise(SIGTRAP);
    expect(info_calls == 1 && last_signo == SIGTRAP && last_code == SI_TKILL && last_pid == getpid(),
           "raise(SIGTRAP): wrong siginfo");
    own_int3();
    expect(info_calls == 2 && last_signo == SIGTRAP && last_code == SI_KERNEL && last_rip == (uintptr_t)int3_after,
           "int3: wrong siginfo or address");

    void (*prev)(int) = signal(SIGTRAP, on_trap_plain);
    expect((void *)prev == (void *)on_trap_info, "signal(SIGTRAP) did not return the previous handler");
    expect(sigaction(SIGTRAP, NULL, &old) == 0 && old.sa_handler == on_trap_plain && !(old.sa_flags & SA_SIGINFO),
           "sigaction(SIGTRAP, NULL, &old) does not return the handler signal() installed");
    for (int i = 0; i < 50; i++)
        sum += trap_ptr(i % 3 + 1);
    expect(plain_calls == 0 && info_calls == 2, "the handler saw traps that were not the program's");
    raise(SIGTRAP);
    own_int3();
    expect(plain_calls == 2 && info_calls == 2, "signal()'s handler did not see the program's two traps");
    expect(sum == 150 * 42, "trap_me returned wrong values");
    printf("trapper: %d+%d own traps handled, sum %ld: %s\n", info_calls, plain_calls, sum, bad ? "FAILED" : "ok");
    return bad;
}
