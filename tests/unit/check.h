/* check.h -- minimal assertions for the unit tests: count failures, report them, exit 1. */
#ifndef ICPP_CHECK_H
#define ICPP_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        check_count++;                                                          \
        if (!(cond)) {                                                          \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* Print a summary and return the process exit status. */
static inline int check_done(const char *name)
{
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
