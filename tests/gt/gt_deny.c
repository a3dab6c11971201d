/* gt_deny.c -- LD_PRELOAD shim for test_gt.py: perf_event_open fails EACCES.
 *
 * Lets the test see icpp-gt's message for a refused perf_event_open without
 * changing kernel.perf_event_paranoid on a shared machine.  icpp-gt calls
 * perf_event_open through libc's syscall(), which this interposes. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

long syscall(long n, ...)
{
    static long (*real)(long, ...);
    va_list ap;
    long a[6];
    va_start(ap, n);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (n == SYS_perf_event_open) {
        errno = EACCES;
        return -1;
    }
    if (!real)
        real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
