/* cli.c -- --version, die, option numbers and the progress line (cli.h). */
#include "cli.h"

#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void icpp_cli_version(FILE *out, const char *tool)
{
    fprintf(out, "%s %s\n", tool, ICPP_VERSION);
}

void icpp_cli_die(const char *tool, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", tool);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(status);
}

int icpp_cli_u64(const char *s, int base, uint64_t min, uint64_t max, uint64_t *out)
{
    char *e;
    errno = 0;
    unsigned long long x = strtoull(s, &e, base);
    if (errno || e == s || *e || strchr(s, '-') || x < min || x > max)
        return -1;
    *out = x;
    return 0;
}

int icpp_cli_long(const char *s, long lo, long hi, long *out)
{
    char *e;
    errno = 0;
    long x = strtol(s, &e, 10);
    if (errno || e == s || *e || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

int icpp_cli_double(const char *s, double *out)
{
    char *e;
    errno = 0;
    double x = strtod(s, &e);
    if (e == s || *e)
        return -1;
    *out = x;
    return errno ? 1 : 0;
}

uint64_t icpp_cli_opt_u64(const char *tool, const char *opt, const char *s, uint64_t min, uint64_t max)
{
    uint64_t x;
    if (icpp_cli_u64(s, 10, min, max, &x) < 0)
        icpp_cli_die(tool, 2, "%s wants a number from %llu to %llu, not '%s'", opt, (unsigned long long)min,
                     (unsigned long long)max, s);
    return x;
}

double icpp_cli_opt_fraction(const char *tool, const char *opt, const char *s, double min, double max)
{
    double x;
    if (icpp_cli_double(s, &x) != 0 || !(x > min && x < max))
        icpp_cli_die(tool, 2, "%s wants a number above %g and below %g, not '%s'", opt, min, max, s);
    return x;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void icpp_cli_progress_init(icpp_cli_progress *p, const char *tool, int quiet)
{
    p->tool = tool;
    p->on = !quiet && isatty(STDERR_FILENO);
    p->shown = 0;
    p->t0 = mono();
    p->next = p->t0 + 1.0;
}

int icpp_cli_progress_due(icpp_cli_progress *p)
{
    if (!p || !p->on)
        return 0;
    double t = mono();
    if (t < p->next)
        return 0;
    p->next = t + 1.0;
    return 1;
}

double icpp_cli_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double icpp_cli_progress_elapsed(const icpp_cli_progress *p)
{
    return mono() - p->t0;
}

void icpp_cli_progress_show(icpp_cli_progress *p, const char *fmt, ...)
{
    if (!p || !p->on)
        return;
    /* \r and "erase to end of line" (every terminal icpp runs on knows
     * ECMA-48 EL): the new line replaces the old one, shorter or not. */
    fprintf(stderr, "\r%s: %.0fs, ", p->tool, icpp_cli_progress_elapsed(p));
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\033[K", stderr);
    fflush(stderr);
    p->shown = 1;
}

void icpp_cli_progress_end(icpp_cli_progress *p)
{
    if (!p || !p->shown)
        return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    p->shown = 0;
}
