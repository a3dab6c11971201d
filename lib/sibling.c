/* sibling.c -- the files a tool finds beside its own executable: another tool (icpp-train for --verify), the training agent. */
#include "sibling.h"

#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *icpp_sibling_find(const char *env, const char *const *rel, size_t nrel, int mode)
{
    const char *v = env ? getenv(env) : NULL;
    if (v)
        return strdup(v);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = 0;
    const char *d = dirname(self);
    for (size_t i = 0; i < nrel; i++) {
        char buf[PATH_MAX + 64];
        if (!*rel[i] || snprintf(buf, sizeof buf, "%s/%s", d, rel[i]) >= (int)sizeof buf)
            continue;
        if (access(buf, mode) == 0)
            return realpath(buf, NULL);
    }
    return NULL;
}
