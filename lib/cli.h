/* cli.h -- what the four tools' command lines share: --version, die, option numbers, a progress line on a terminal. */
#ifndef ICPP_CLI_H
#define ICPP_CLI_H

#include <stdint.h>
#include <stdio.h>

/* "TOOL VERSION\n" on out (the project version, config.h), for --version. */
void icpp_cli_version(FILE *out, const char *tool);

/* "TOOL: <fmt...>\n" on stderr, then exit(status): a front end's fatal
 * error (lib/ never calls it; only the tools' own code does). */
void icpp_cli_die(const char *tool, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Option values: the whole of s is the number, or the call fails (nothing
 * before or after it but strtoul's/strtod's leading blanks; no digits is
 * not a number).  The callers check their own ranges where they print their
 * own messages. */

/* An unsigned number (strtoull in `base`: 10, or 0 for 0x.. and 0..) in
 * [min, max]: 0 and *out, or -1: not a number, a '-' anywhere (strtoull
 * would take "-1" as 2^64-1), more than 2^64-1, or outside [min, max]. */
int icpp_cli_u64(const char *s, int base, uint64_t min, uint64_t max, uint64_t *out);

/* A decimal number (strtol, a sign allowed) in [lo, hi]: 0 and *out, or -1. */
int icpp_cli_long(const char *s, long lo, long hi, long *out);

/* A floating-point number (strtod): 0 and *out; 1 and *out when it is one
 * but beyond a double's range (strtod's ERANGE: overflow to +-HUGE_VAL, or
 * underflow near 0), which a caller may refuse or let its range check judge;
 * -1 when s is not a number.  NaN and infinities parse ("nan", "inf"): a
 * range check written !(x >= lo && x <= hi) refuses NaN. */
int icpp_cli_double(const char *s, double *out);

/* icpp-sample's option numbers, or exit 2 after
 *   "TOOL: OPT wants a number from MIN to MAX, not 'S'"   (decimal, [min, max]) or
 *   "TOOL: OPT wants a number above MIN and below MAX, not 'S'"   (a double in (min, max),
 *                                                               ERANGE refused). */
uint64_t icpp_cli_opt_u64(const char *tool, const char *opt, const char *s, uint64_t min, uint64_t max);
double   icpp_cli_opt_fraction(const char *tool, const char *opt, const char *s, double min, double max);

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
