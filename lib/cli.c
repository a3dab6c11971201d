/* cli.c -- --version and the progress line (cli.h). */
#include "cli.h"

#include "config.h"

#include <stdarg.h>
#include <time.h>
#include <unistd.h>

void icpp_cli_version(FILE *out, const char *tool)
{
    fprintf(out, "%s %s\n", tool, ICPP_VERSION);
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
