/* err.c -- errors as values: a code and a message the caller can print. */
#include "err.h"

#include <stdio.h>
#include <string.h>

int icpp_err_vset(icpp_err *e, int code, const char *fmt, va_list ap)
{
    if (code <= 0)
        code = ICPP_EFORMAT;
    if (e) {
        e->code = code;
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    }
    return -code;
}

int icpp_err_set(icpp_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = icpp_err_vset(e, code, fmt, ap);
    va_end(ap);
    return r;
}

int icpp_err_prefix(icpp_err *e, const char *fmt, ...)
{
    if (!e)
        return -ICPP_EFORMAT;
    char pre[256], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t k = strlen(pre);
    if (k > sizeof e->msg - 3)
        k = sizeof e->msg - 3;
    memcpy(e->msg, pre, k);
    memcpy(e->msg + k, ": ", 2);
    size_t rest = sizeof e->msg - k - 3, ol = strnlen(old, rest);
    memcpy(e->msg + k + 2, old, ol);
    e->msg[k + 2 + ol] = 0;
    return -(e->code ? e->code : ICPP_EFORMAT);
}
