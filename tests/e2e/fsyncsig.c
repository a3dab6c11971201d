/* fsyncsig.c -- LD_PRELOAD shim for tests/e2e/test_outputs.py: when a tool
 * fsyncs one of its new files (PATH.tmp.XXXXXX, lib/fsafe.c), it first sends
 * itself the signal $ICPP_TEST_FSYNC_SIGNAL -- a signal that arrives while
 * the new file is complete but not yet renamed over PATH, every time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fsync(int fd)
{
    static int (*real)(int);
    if (!real)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    const char *s = getenv("ICPP_TEST_FSYNC_SIGNAL");
    if (s && *s) {
        char link[64], path[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        if (n > 0) {
            path[n] = 0;
            if (strstr(path, ".tmp."))
                kill(getpid(), atoi(s));
        }
    }
    return real(fd);
}
