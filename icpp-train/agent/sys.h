/* sys.h -- raw Linux x86-64 system calls and /proc readers the agent uses where libc may be patched. */
#ifndef ICPP_AGENT_SYS_H
#define ICPP_AGENT_SYS_H

#include <stdint.h>
#include <stddef.h>

/* Everything here is safe in a signal handler, calls no libc function and
 * touches no SSE register: the recorder and the patch writer use it while
 * libc's own functions may be half-patched or recording. */

#define ICPP_SYS_read         0
#define ICPP_SYS_close        3
#define ICPP_SYS_mmap         9
#define ICPP_SYS_mprotect    10
#define ICPP_SYS_sched_yield 24
#define ICPP_SYS_munmap      11
#define ICPP_SYS_rt_sigaction 13
#define ICPP_SYS_rt_sigprocmask 14
#define ICPP_SYS_madvise     28
#define ICPP_SYS_getpid      39
#define ICPP_SYS_gettid     186
#define ICPP_SYS_clock_gettime 228
#define ICPP_SYS_ftruncate   77
#define ICPP_SYS_getdents64 217
#define ICPP_SYS_tgkill     234
#define ICPP_SYS_openat     257
#define ICPP_SYS_fallocate  285
#define ICPP_SYS_prlimit64  302
#define ICPP_SYS_membarrier 324

static inline long icpp_sys6(long n, long a, long b, long c, long d, long e, long f)
{
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

#define icpp_sys3(n, a, b, c) icpp_sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

/* Returns the address or a negative errno (test with icpp_sys_failed). */
static inline long icpp_sys_mmap(void *addr, size_t len, int prot, int flags)
{
    return icpp_sys6(ICPP_SYS_mmap, (long)addr, (long)len, prot, flags, -1, 0);
}
/* The same on a file (MAP_SHARED chunks of a live file). */
static inline long icpp_sys_mmap_fd(void *addr, size_t len, int prot, int flags, int fd, uint64_t off)
{
    return icpp_sys6(ICPP_SYS_mmap, (long)addr, (long)len, prot, flags, fd, (long)off);
}
static inline int icpp_sys_failed(long r) { return (unsigned long)r >= -4095UL; }

static inline long icpp_sys_mprotect(uint64_t addr, size_t len, int prot)
{
    return icpp_sys3(ICPP_SYS_mprotect, addr, len, prot);
}
static inline long icpp_sys_munmap(void *addr, size_t len)
{
    return icpp_sys3(ICPP_SYS_munmap, addr, len, 0);
}
static inline int icpp_sys_getpid(void) { return (int)icpp_sys3(ICPP_SYS_getpid, 0, 0, 0); }
static inline int icpp_sys_gettid(void) { return (int)icpp_sys3(ICPP_SYS_gettid, 0, 0, 0); }

/* Decimal digits of v at p, NUL-terminated; returns the end.  No stdio:
 * safe in a fork child and a signal handler. */
char *icpp_agent_utoa(char *p, uint64_t v);

/* One mapping line of /proc/self/maps (no path). */
typedef struct icpp_agent_maprow {
    uint64_t start, end;    /* [start, end) */
    int      prot;          /* PROT_* bits from the perms column */
} icpp_agent_maprow;

/* Called for every row in address order; return nonzero to stop. */
typedef int (*icpp_agent_maps_cb)(const icpp_agent_maprow *row, void *ctx);

/* Stream /proc/self/maps through cb with raw syscalls and a 2 KiB stack
 * buffer.  Returns 0, or a negative errno if the file cannot be read. */
int icpp_agent_maps_each(icpp_agent_maps_cb cb, void *ctx);

/* The row holding addr; 0 if found, -1 if no mapping holds it. */
int icpp_agent_maps_find(uint64_t addr, icpp_agent_maprow *out);

/* startstack of this process (field 28 of /proc/self/stat), 0 on failure. */
uint64_t icpp_agent_startstack(void);

/* Thread ids of this process from /proc/self/task: fills up to max of
 * them into tids (may be NULL) and returns how many exist, or -errno. */
int icpp_agent_list_threads(int *tids, int max);

#endif
