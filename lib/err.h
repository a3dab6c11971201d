/* err.h -- errors as values: a code and a message the caller can print. */
#ifndef ICPP_ERR_H
#define ICPP_ERR_H

#include <stdarg.h>

/* Library functions report failure by returning a negative int (or NULL) and,
 * when the caller passed an icpp_err, filling it with one line that names the
 * file, offset or function concerned and, where possible, what to do.  Only a
 * tool's main() decides to print and exit. */
typedef struct icpp_err {
    int  code;          /* errno value, or ICPP_E* below; 0 = no error */
    char msg[512];      /* one line, no trailing newline */
} icpp_err;

enum {
    ICPP_EFORMAT = 1000, /* input file is corrupt or not what it claims */
    ICPP_EVERSION,       /* file format version we cannot read */
    ICPP_EMISMATCH,      /* e.g. a map or samples of another binary */
    ICPP_EUNSUPPORTED,   /* valid input this build cannot handle */
    ICPP_ELIMIT,         /* a configured cap was reached */
};

/* Fill *e (if non-NULL) and return -code, so `return icpp_err_set(...)` works. */
int icpp_err_set(icpp_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int icpp_err_vset(icpp_err *e, int code, const char *fmt, va_list ap);

/* Prefix the message already in *e with "ctx: " (for adding a file name). */
int icpp_err_prefix(icpp_err *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
