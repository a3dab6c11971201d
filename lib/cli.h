/* cli.h -- what the four tools' command lines share: --version, and a progress line on a terminal. */
#ifndef ICPP_CLI_H
#define ICPP_CLI_H

#include <stdio.h>

/* "TOOL VERSION\n" on out (the project version, config.h), for --version. */
void icpp_cli_version(FILE *out, const char *tool);

/* CPU seconds of this process (user + system): what time limits count, so
 * that they do not depend on how busy the machine is. */
double icpp_cli_cpu_seconds(void);

/* A progress line for long work (a training run, the rewrite search, a
 * large recording resolved): one line on stderr, rewritten in place at most
 * once a second, cleared when the work ends.  It is shown only when stderr
 * is a terminal and the user did not ask for quiet (-q): piped or
 * redirected, a tool's stderr holds its messages and summary only.
 * Cheap enough to ask often: icpp_cli_progress_due() reads the monotonic
 * clock (a vDSO call); callers in hot loops ask every N items. */
typedef struct icpp_cli_progress {
    const char *tool;           /* prefix of the line, "icpp-train" */
    int         on;             /* stderr is a terminal and not quiet */
    int         shown;          /* a line is on the screen (to be cleared) */
    double      t0;             /* CLOCK_MONOTONIC seconds at init */
    double      next;           /* when the next line is due */
} icpp_cli_progress;

void   icpp_cli_progress_init(icpp_cli_progress *p, const char *tool, int quiet);
/* The line is on and a second has passed since the last one (or since init). */
int    icpp_cli_progress_due(icpp_cli_progress *p);
/* Seconds since init. */
double icpp_cli_progress_elapsed(const icpp_cli_progress *p);
/* Show "TOOL: <elapsed>s, <fmt...>" in place of the previous line (if on). */
void   icpp_cli_progress_show(icpp_cli_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Clear the line (if one is shown), so what follows starts on a clean line. */
void   icpp_cli_progress_end(icpp_cli_progress *p);

#endif
