/* trap.c -- SIGTRAP handler for int3-patched entries and for jmp writes in progress (signal-safe, no libc). */
#include "internal.h"
#include "sys.h"

#include <signal.h>
#include <ucontext.h>

/* Compiled like recorder.c (no libc calls, general registers only).
 *
 * An int3 at a function's first byte means one of:
 *   INT3 site       record the entry, resume at the relocated copy of the
 *                   first instruction (which jumps back to byte len);
 *   JMP(_PENDING)   a live patch is writing the jmp (patch.c brackets the
 *                   write with an int3): resume at the stub, which records.
 * Anything else is not ours: pass it to the handler that was installed
 * before, or restore the default action and re-execute the int3. */

icpp_agent_modsites *volatile icpp_agent_mods;

/* The kernel's struct sigaction (rt_sigaction), not libc's (internal.h). */
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif

typedef icpp_agent_ksigaction ksigaction;

/* The program's SIGTRAP action while ours is installed (the kernel keeps
 * ours: icpp_agent_trap_sigaction).  Guarded by a spin lock: the program
 * may change it while another thread's trap reads it. */
static ksigaction prev;
static volatile int installed;
static volatile int prev_lock;
static ksigaction ours;             /* what the kernel holds */

/* Holders block every signal: a handler of the program entering a trap
 * on the holder's thread would spin for ever. */
static uint64_t lock_all(void)
{
    uint64_t all = ~0ull, old = 0;
    icpp_sys6(ICPP_SYS_rt_sigprocmask, 0 /* SIG_BLOCK */, (long)&all, (long)&old, 8, 0, 0);
    return old;
}

static void unlock_all(uint64_t old)
{
    icpp_sys6(ICPP_SYS_rt_sigprocmask, 2 /* SIG_SETMASK */, (long)&old, 0, 8, 0, 0);
}

static void prev_lock_take(void)
{
    while (__atomic_exchange_n(&prev_lock, 1, __ATOMIC_ACQUIRE))
        icpp_sys3(ICPP_SYS_sched_yield, 0, 0, 0);
}

static void prev_lock_drop(void)
{
    __atomic_store_n(&prev_lock, 0, __ATOMIC_RELEASE);
}

static ksigaction prev_get(void)
{
    prev_lock_take();
    ksigaction p = prev;
    prev_lock_drop();
    return p;
}

static void prev_set(const ksigaction *p)
{
    prev_lock_take();
    prev = *p;
    prev_lock_drop();
}

/* The element of v[0..n) (each `stride` bytes, sorted by a leading
 * uint64_t address) whose address is addr, or NULL. */
static const void *find_addr(const void *v, size_t n, size_t stride, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (*(const uint64_t *)(const void *)((const char *)v + mid * stride) < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    const void *e = (const char *)v + lo * stride;
    return lo < n && *(const uint64_t *)e == addr ? e : 0;
}

const icpp_agent_site *icpp_agent_site_at(uint64_t addr)
{
    for (icpp_agent_modsites *m = __atomic_load_n(&icpp_agent_mods, __ATOMIC_ACQUIRE); m;
         m = m->next) {
        const void *e = addr < m->lo || addr > m->hi ? 0 : find_addr(m->sites, m->nsites, sizeof *m->sites, addr);
        if (e)
            return e;
    }
    return 0;
}

volatile uint64_t icpp_agent_calls_emulated;

/* The rewritten branch at addr, or NULL (signal-safe). */
static const icpp_agent_callsite *callsite_at(uint64_t addr)
{
    for (icpp_agent_modsites *m = __atomic_load_n(&icpp_agent_mods, __ATOMIC_ACQUIRE); m;
         m = m->next) {
        const void *e = find_addr(m->calls, m->ncalls, sizeof *m->calls, addr);
        if (e)
            return e;
    }
    return 0;
}

/* Whether jcc's condition cc (opcode & 15) holds for these flags. */
static int cond_holds(unsigned cc, uint64_t f)
{
    int cf = f & 1, pf = (f >> 2) & 1, zf = (f >> 6) & 1, sf = (f >> 7) & 1, of = (f >> 11) & 1, r;
    switch (cc >> 1) {
    case 0: r = of; break;                  /* jo */
    case 1: r = cf; break;                  /* jb */
    case 2: r = zf; break;                  /* je */
    case 3: r = cf | zf; break;             /* jbe */
    case 4: r = sf; break;                  /* js */
    case 5: r = pf; break;                  /* jp */
    case 6: r = sf != of; break;            /* jl */
    default: r = zf | (sf != of); break;    /* jle */
    }
    return r ^ (int)(cc & 1);
}

static void trap_handler(int sig, siginfo_t *si, void *ucv)
{
    ucontext_t *uc = ucv;
    greg_t *g = uc->uc_mcontext.gregs;
    uint64_t pc = (uint64_t)g[REG_RIP] - 1;
    const icpp_agent_site *s = si->si_code == SI_KERNEL ? icpp_agent_site_at(pc) : 0;
    const icpp_agent_callsite *c = si->si_code == SI_KERNEL && !s ? callsite_at(pc) : 0;
    if (c) {
        /* A branch being rewritten: take it (to the stub, which records).
         * A call's push lands in the red zone, which a call overwrites
         * anyway; the signal frame lies below the red zone. */
        uint64_t next = pc + c->len;
        if (c->kind == ICPP_AGENT_CALL_CALL) {
            g[REG_RSP] -= 8;
            *(volatile uint64_t *)(uintptr_t)g[REG_RSP] = next;
            g[REG_RIP] = (greg_t)c->to;
        } else if (c->kind == ICPP_AGENT_CALL_JMP || cond_holds(c->cc, (uint64_t)g[REG_EFL])) {
            g[REG_RIP] = (greg_t)c->to;
        } else {
            g[REG_RIP] = (greg_t)next;
        }
        __atomic_add_fetch(&icpp_agent_calls_emulated, 1, __ATOMIC_RELAXED);
        return;
    }
    if (s) {
        uint8_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == ICPP_AGENT_SITE_INT3) {
            __atomic_add_fetch(&((icpp_agent_site *)s)->traps, 1, __ATOMIC_RELAXED);
            icpp_agent_record(s->index, (uint64_t)g[REG_RSP]);
            g[REG_RIP] = (greg_t)s->resume;
            return;
        }
        if (st == ICPP_AGENT_SITE_JMP_PENDING || st == ICPP_AGENT_SITE_JMP) {
            g[REG_RIP] = (greg_t)s->stub;
            return;
        }
    }
    /* Not ours: the program's action, as the kernel would have taken it.
     * An int3 of the program's own with SIGTRAP ignored kills it (the
     * kernel forces trap signals: ignored becomes the default). */
    ksigaction p = prev_get();
    if (p.handler == SIG_IGN && si->si_code != SI_KERNEL)
        return;
    if (p.handler == SIG_DFL || p.handler == SIG_IGN) {
        ksigaction dfl = { SIG_DFL, 0, 0, 0 };
        icpp_sys6(ICPP_SYS_rt_sigaction, SIGTRAP, (long)&dfl, 0, 8, 0, 0);
        if (si->si_code == SI_KERNEL)
            g[REG_RIP] = (greg_t)pc;   /* re-execute the int3: default action */
        else
            icpp_sys3(ICPP_SYS_tgkill, icpp_sys_getpid(), icpp_sys_gettid(), SIGTRAP);
        return;
    }
    if (p.flags & SA_RESETHAND) {       /* the kernel would reset it before the call */
        ksigaction dfl = { SIG_DFL, 0, 0, 0 };
        prev_set(&dfl);
    }
    /* The handler's sa_mask while it runs (SIGTRAP itself stays unblocked:
     * a trap while it is blocked would kill the process).  The mask the
     * program interrupted comes back at sigreturn (uc_sigmask). */
    uint64_t mask = p.mask & ~(1ull << (SIGTRAP - 1)), old = 0;
    if (mask)
        icpp_sys6(ICPP_SYS_rt_sigprocmask, 0 /* SIG_BLOCK */, (long)&mask, (long)&old, 8, 0, 0);
    if (p.flags & SA_SIGINFO)
        ((void (*)(int, siginfo_t *, void *))p.handler)(sig, si, ucv);
    else
        ((void (*)(int))p.handler)(sig);
    if (mask)
        icpp_sys6(ICPP_SYS_rt_sigprocmask, 2 /* SIG_SETMASK */, (long)&old, 0, 8, 0, 0);
}

int icpp_agent_trap_install(void)
{
    if (installed)
        return 0;
    ksigaction sa = {
        .handler = (void *)trap_handler,
        .flags = SA_SIGINFO | SA_RESTORER | SA_NODEFER | SA_RESTART,
        .restorer = icpp_agent_restore_rt,
        .mask = 0,
    };
    uint64_t m = lock_all();
    prev_lock_take();
    long r = icpp_sys6(ICPP_SYS_rt_sigaction, SIGTRAP, (long)&sa, (long)&prev, 8, 0, 0);
    if (r == 0) {
        sa.flags |= prev.flags & SA_ONSTACK;
        if (sa.flags & SA_ONSTACK)
            icpp_sys6(ICPP_SYS_rt_sigaction, SIGTRAP, (long)&sa, 0, 8, 0, 0);
        ours = sa;
        installed = 1;
    }
    prev_lock_drop();
    unlock_all(m);
    return r < 0 ? (int)r : 0;
}

int icpp_agent_trap_sigaction(const icpp_agent_ksigaction *act, icpp_agent_ksigaction *old)
{
    if (!installed)
        return -1;
    uint64_t m = lock_all();
    prev_lock_take();
    if (old) {
        old->handler = prev.handler;
        old->flags = prev.flags;
        old->restorer = prev.restorer;
        old->mask = prev.mask;
    }
    if (act) {
        prev.handler = act->handler;
        prev.flags = act->flags;
        prev.restorer = act->restorer;
        prev.mask = act->mask;
        /* The program's handler runs on the alternate stack if it asked. */
        if ((ours.flags ^ act->flags) & SA_ONSTACK) {
            ours.flags ^= SA_ONSTACK;
            icpp_sys6(ICPP_SYS_rt_sigaction, SIGTRAP, (long)&ours, 0, 8, 0, 0);
        }
    }
    prev_lock_drop();
    unlock_all(m);
    return 0;
}

void icpp_agent_int3_each(void (*fn)(uint32_t index, uint64_t traps, void *arg), void *arg)
{
    for (icpp_agent_modsites *m = __atomic_load_n(&icpp_agent_mods, __ATOMIC_ACQUIRE); m; m = m->next)
        for (size_t i = 0; i < m->nsites; i++)
            if (m->sites[i].state == ICPP_AGENT_SITE_INT3)
                fn(m->sites[i].index, __atomic_load_n(&m->sites[i].traps, __ATOMIC_RELAXED), arg);
}

void icpp_agent_int3_reset(void)
{
    for (icpp_agent_modsites *m = __atomic_load_n(&icpp_agent_mods, __ATOMIC_ACQUIRE); m; m = m->next)
        for (size_t i = 0; i < m->nsites; i++)
            __atomic_store_n(&m->sites[i].traps, 0, __ATOMIC_RELAXED);
}

/* ---- evacuation (live patching) ---------------------------------------------- */

static const icpp_agent_site *volatile evac_sites;
static volatile size_t evac_n;
static volatile int evac_acks, evac_moved;

static void evac_handler(int sig, siginfo_t *si, void *ucv)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    greg_t *g = uc->uc_mcontext.gregs;
    uint64_t rip = (uint64_t)g[REG_RIP];
    const icpp_agent_site *s = evac_sites;
    size_t lo = 0, hi = evac_n;
    while (lo < hi) {          /* last site with addr < rip */
        size_t mid = (lo + hi) / 2;
        if (s[mid].addr < rip)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > 0) {
        const icpp_agent_site *x = &s[lo - 1];
        if (rip < x->addr + x->len)
            for (int k = 1; k < x->ninsn; k++)
                if (rip == x->addr + x->src_off[k]) {
                    g[REG_RIP] = (greg_t)(x->resume + x->dst_off[k]);
                    __atomic_add_fetch(&evac_moved, 1, __ATOMIC_RELAXED);
                }
    }
    __atomic_add_fetch(&evac_acks, 1, __ATOMIC_RELEASE);
}

int icpp_agent_evacuate(const icpp_agent_site *sites, size_t n, int sig, int timeout_ms,
                        int *moved)
{
    int tids[1024];
    int self = icpp_sys_gettid(), pid = icpp_sys_getpid();
    int nt = icpp_agent_list_threads(tids, 1024);
    *moved = 0;
    if (nt < 0)
        return nt;
    if (nt > 1024)
        return -7;   /* E2BIG: too many threads to stop this way */
    evac_sites = sites;
    evac_n = n;
    evac_acks = 0;
    evac_moved = 0;
    ksigaction sa = {
        .handler = (void *)evac_handler,
        .flags = SA_SIGINFO | SA_RESTORER | SA_RESTART,
        .restorer = icpp_agent_restore_rt,
        .mask = 0,
    }, old;
    long r = icpp_sys6(ICPP_SYS_rt_sigaction, sig, 0, (long)&old, 8, 0, 0);
    if (r < 0)
        return (int)r;
    if (old.handler != SIG_DFL && old.handler != SIG_IGN && old.handler != (void *)evac_handler)
        return -16;  /* EBUSY: the program uses this signal */
    r = icpp_sys6(ICPP_SYS_rt_sigaction, sig, (long)&sa, 0, 8, 0, 0);
    if (r < 0)
        return (int)r;
    int sent = 0;
    for (int i = 0; i < nt; i++)
        if (tids[i] != self && icpp_sys3(ICPP_SYS_tgkill, pid, tids[i], sig) == 0)
            sent++;
    struct { long sec, nsec; } t0, t;
    icpp_sys3(ICPP_SYS_clock_gettime, 1 /* CLOCK_MONOTONIC */, &t0, 0);
    while (__atomic_load_n(&evac_acks, __ATOMIC_ACQUIRE) < sent) {
        icpp_sys3(ICPP_SYS_sched_yield, 0, 0, 0);
        icpp_sys3(ICPP_SYS_clock_gettime, 1, &t, 0);
        if ((t.sec - t0.sec) * 1000 + (t.nsec - t0.nsec) / 1000000 > timeout_ms)
            break;
    }
    int acks = __atomic_load_n(&evac_acks, __ATOMIC_ACQUIRE);
    /* Restore the old action only if nobody can still receive the signal:
     * a pending one would otherwise hit SIG_DFL and kill the process.  A
     * late evac_handler is harmless (the site tables are never freed). */
    if (acks == sent)
        icpp_sys6(ICPP_SYS_rt_sigaction, sig, (long)&old, 0, 8, 0, 0);
    *moved = evac_moved;
    return sent - acks;
}
