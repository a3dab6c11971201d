/* escape.h -- names that come from files, made safe for text output (no terminal control, no forged lines). */
#ifndef ICPP_ESCAPE_H
#define ICPP_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* A function name, module path or command line read from a map or a sample
 * file is untrusted: an ESC starts a terminal escape sequence, a newline
 * forges a line of folded or text output.  In the text-like formats (text,
 * tree, folded, --script, --paths, --stats, --check) every byte below 0x20,
 * DEL (0x7f), every C1 control character (U+0080..U+009F) and every byte that
 * is not part of valid UTF-8 is written as the four characters \xNN; valid
 * UTF-8 is kept as it is.  (json, speedscope and svg escape by their own
 * rules.) */

/* 1 if s has a byte that icpp_escape would rewrite. */
int icpp_escape_needed(const char *s);
/* s itself when nothing needs escaping; else buf, holding the escaped text
 * cut at a character boundary to fit bufsz (bufsz >= 1). */
const char *icpp_escape(const char *s, char *buf, size_t bufsz);
/* The escaped s to f, whole. */
void icpp_escape_fputs(const char *s, FILE *f);

#endif
