/* codec.h -- byte buffers, LEB128 varints, CRC-32 and atomic file replacement for ICPP's file formats. */
#ifndef ICPP_CODEC_H
#define ICPP_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

/* A growable output buffer.  After an allocation failure `oom` is set and
 * further writes are ignored: check once at the end. */
typedef struct icpp_wbuf {
    uint8_t *p;
    size_t   len, cap;
    int      oom;
    int      mmapped;   /* set before the first write: grow with mmap/mremap
                           instead of realloc (async-signal-safe) */
} icpp_wbuf;

void icpp_wbuf_free(icpp_wbuf *b);
void icpp_wbuf_bytes(icpp_wbuf *b, const void *p, size_t n);
void icpp_wbuf_u32le(icpp_wbuf *b, uint32_t v);
void icpp_wbuf_u64le(icpp_wbuf *b, uint64_t v);
void icpp_wbuf_uv(icpp_wbuf *b, uint64_t v);          /* unsigned LEB128 */
void icpp_wbuf_sv(icpp_wbuf *b, int64_t v);           /* zigzag + LEB128 */
/* A 5-byte (padded) LEB128 placeholder for a count < 2^35, patched later. */
void icpp_wbuf_uv5(icpp_wbuf *b, uint64_t v);
void icpp_wbuf_patch_uv5(icpp_wbuf *b, size_t at, uint64_t v);
void icpp_wbuf_str(icpp_wbuf *b, const char *s);      /* uv length + bytes */

/* A bounds-checked reader over untrusted bytes.  Any overrun sets `bad` and
 * returns zeros; check `bad` where it matters. */
typedef struct icpp_rbuf {
    const uint8_t *p, *end, *start;
    int            bad;
} icpp_rbuf;

void     icpp_rbuf_init(icpp_rbuf *r, const uint8_t *p, size_t len);
uint32_t icpp_rbuf_u32le(icpp_rbuf *r);
uint64_t icpp_rbuf_u64le(icpp_rbuf *r);
/* Varints (LEB128): the one-byte case inline -- most of a recording's
 * fields -- the rest in icpp_rbuf_uv_long.  A bad or truncated one marks r
 * bad and reads as 0. */
uint64_t icpp_rbuf_uv_long(icpp_rbuf *r);
static inline uint64_t icpp_rbuf_uv(icpp_rbuf *r)
{
    if (!r->bad && r->p < r->end && *r->p < 0x80)
        return *r->p++;
    return icpp_rbuf_uv_long(r);
}
static inline int64_t icpp_rbuf_sv(icpp_rbuf *r)
{
    uint64_t u = icpp_rbuf_uv(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}
/* A string of at most maxlen bytes, NUL-free; returns malloc'd copy or NULL (bad set). */
char    *icpp_rbuf_str(icpp_rbuf *r, size_t maxlen);
const uint8_t *icpp_rbuf_bytes(icpp_rbuf *r, size_t n);
static inline size_t icpp_rbuf_left(const icpp_rbuf *r) { return (size_t)(r->end - r->p); }
static inline size_t icpp_rbuf_pos(const icpp_rbuf *r) { return (size_t)(r->p - r->start); }

/* CRC-32 with zlib's polynomial and conventions: icpp_crc32(0, p, n). */
uint32_t icpp_crc32(uint32_t crc, const void *p, size_t n);
/* Lower-case hex of n bytes into buf; truncated to the whole bytes that fit in bufsz-1 characters. */
char *icpp_hex(const uint8_t *p, size_t n, char *buf, size_t bufsz);

/* Write `len` bytes to `path` so that either the old file or the complete new
 * one is there afterwards: a new file beside it, fsync, rename; mode 0644.
 * The output rule of lib/fsafe.h applies (links and other users' files in
 * sticky directories are refused; a character device is written in place). */
int icpp_write_file_atomic(const char *path, const void *buf, size_t len, icpp_err *err);
/* Read a whole regular file (at most maxlen bytes); opened without blocking
 * (icpp_fs_open_input), so a FIFO or device is refused, never waited on. */
int icpp_read_file(const char *path, size_t maxlen, uint8_t **buf, size_t *len, icpp_err *err);
/* Up to n bytes of fd from offset off into buf (pread, retried on EINTR and
 * short reads): the count read, less than n only at end of file or on an
 * error. */
size_t icpp_read_at(int fd, void *buf, size_t n, off_t off);

#endif
