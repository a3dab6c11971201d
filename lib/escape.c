/* escape.c -- names that come from files, made safe for text output (no terminal control, no forged lines). */
#include "escape.h"

#include <string.h>

/* Length of the valid, printable UTF-8 character at p (1 for printable
 * ASCII), or 0 when the byte at p must be escaped. */
static size_t keep_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c >= 0x20 && c < 0x7f)
        return 1;
    if (c < 0xc2 || c > 0xf4)
        return 0;                                   /* control, DEL, continuation, overlong lead */
    unsigned lo = 0x80, hi = 0xbf;
    size_t n;
    if (c < 0xe0) {
        n = 2;
        if (c == 0xc2 && p[1] < 0xa0)
            return 0;                               /* C1 controls U+0080..U+009F */
    } else if (c < 0xf0) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;                   /* no surrogates */
    } else {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

int icpp_escape_needed(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = keep_len(p);
        if (!n)
            return 1;
        p += n;
    }
    return 0;
}

static const char HEX[] = "0123456789abcdef";

const char *icpp_escape(const char *s, char *buf, size_t bufsz)
{
    if (!icpp_escape_needed(s))
        return s;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        size_t n = keep_len(p);
        if (n) {
            if (o + n >= bufsz)
                break;
            memcpy(buf + o, p, n);
            o += n;
            p += n;
        } else {
            if (o + 4 >= bufsz)
                break;
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = HEX[*p >> 4];
            buf[o++] = HEX[*p & 15];
            p++;
        }
    }
    buf[o] = 0;
    return buf;
}

void icpp_escape_fputs(const char *s, FILE *f)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t n = keep_len(p);
        if (n) {
            fwrite(p, 1, n, f);
            p += n;
        } else {
            fputc('\\', f);
            fputc('x', f);
            fputc(HEX[*p >> 4], f);
            fputc(HEX[*p & 15], f);
            p++;
        }
    }
}
