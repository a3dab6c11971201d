/* codec.c -- byte buffers, LEB128 varints, CRC-32 and atomic file replacement for ICPP's file formats. */
#include "codec.h"

#include "fsafe.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/mman.h>

void icpp_wbuf_free(icpp_wbuf *b)
{
    if (b->mmapped) {
        if (b->p)
            munmap(b->p, b->cap);
    } else {
        free(b->p);
    }
    int mm = b->mmapped;
    memset(b, 0, sizeof *b);
    b->mmapped = mm;
}

/* Grow to at least `need` bytes: realloc, or mmap/mremap for mmapped
 * buffers (async-signal-safe). */
static int wbuf_grow(icpp_wbuf *b, size_t need)
{
    size_t nc = b->cap ? b->cap : 65536;
    while (nc < need)
        nc *= 2;
    uint8_t *np;
    if (b->mmapped) {
        void *q = b->p ? mremap(b->p, b->cap, nc, MREMAP_MAYMOVE)
                       : mmap(NULL, nc, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        np = q == MAP_FAILED ? NULL : q;
    } else {
        np = realloc(b->p, nc);
    }
    if (!np)
        return -1;
    b->p = np;
    b->cap = nc;
    return 0;
}

void icpp_wbuf_bytes(icpp_wbuf *b, const void *p, size_t n)
{
    if (b->oom)
        return;
    assert(b->len <= b->cap && (b->p || !b->cap));
    if (b->len + n > b->cap && wbuf_grow(b, b->len + n) < 0) {
        b->oom = 1;
        return;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

void icpp_wbuf_u32le(icpp_wbuf *b, uint32_t v)
{
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    icpp_wbuf_bytes(b, t, 4);
}

void icpp_wbuf_u64le(icpp_wbuf *b, uint64_t v)
{
    icpp_wbuf_u32le(b, (uint32_t)v);
    icpp_wbuf_u32le(b, (uint32_t)(v >> 32));
}

void icpp_wbuf_uv(icpp_wbuf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    icpp_wbuf_bytes(b, t, n);
}

void icpp_wbuf_uv5(icpp_wbuf *b, uint64_t v)
{
    assert(v < (1ull << 35));      /* codec.h: a count < 2^35 (5 LEB128 bytes) */
    uint8_t t[5];
    for (int i = 0; i < 5; i++) {
        t[i] = (uint8_t)(v & 0x7f) | (i < 4 ? 0x80 : 0);
        v >>= 7;
    }
    icpp_wbuf_bytes(b, t, 5);
}

void icpp_wbuf_patch_uv5(icpp_wbuf *b, size_t at, uint64_t v)
{
    assert(v < (1ull << 35));      /* codec.h: a count < 2^35 */
    if (b->oom || at + 5 > b->len)
        return;
    for (int i = 0; i < 5; i++) {
        b->p[at + i] = (uint8_t)(v & 0x7f) | (i < 4 ? 0x80 : 0);
        v >>= 7;
    }
}

void icpp_wbuf_sv(icpp_wbuf *b, int64_t v)
{
    icpp_wbuf_uv(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void icpp_wbuf_str(icpp_wbuf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    icpp_wbuf_uv(b, n);
    icpp_wbuf_bytes(b, s, n);
}

void icpp_rbuf_init(icpp_rbuf *r, const uint8_t *p, size_t len)
{
    r->p = r->start = p;
    r->end = p + len;
    r->bad = 0;
}

const uint8_t *icpp_rbuf_bytes(icpp_rbuf *r, size_t n)
{
    if (r->bad || icpp_rbuf_left(r) < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

uint32_t icpp_rbuf_u32le(icpp_rbuf *r)
{
    const uint8_t *p = icpp_rbuf_bytes(r, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0;
}

uint64_t icpp_rbuf_u64le(icpp_rbuf *r)
{
    uint64_t lo = icpp_rbuf_u32le(r);
    return lo | (uint64_t)icpp_rbuf_u32le(r) << 32;
}

uint64_t icpp_rbuf_uv_long(icpp_rbuf *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->bad || r->p >= r->end)
            break;
        uint8_t b = *r->p++;
        if (shift == 63 && (b & 0x7e))
            break;                      /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

char *icpp_rbuf_str(icpp_rbuf *r, size_t maxlen)
{
    uint64_t n = icpp_rbuf_uv(r);
    if (r->bad || n > maxlen || n > icpp_rbuf_left(r)) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = icpp_rbuf_bytes(r, (size_t)n);
    if (!p || memchr(p, 0, (size_t)n)) {
        r->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        r->bad = 1;
        return NULL;
    }
    memcpy(s, p, (size_t)n);
    s[n] = 0;
    return s;
}

#ifdef ICPP_CRC_ZLIB
/* libicpp: icpp-resolve checksums every block of a recording on each pass.
 * zlib's CRC-32 is 2.8x the speed of the slicing-by-8 below on these
 * machines (2.07 against 0.73 GB/s) and was still 4-5% of icpp-resolve's
 * time; where the CPU has PCLMULQDQ, whole 16-byte units are folded with
 * carry-less multiplies (Gopal, Ozturk et al., "Fast CRC computation for
 * generic polynomials using PCLMULQDQ", Intel 2009: four lanes folded by 64
 * bytes, then one, then Barrett reduction), and zlib does the rest. */
#include <zlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The CRC (pre- and post-inverted by the caller) of n bytes, n >= 64 and a
 * multiple of 16.  Constants: x^k mod P for the fold distances (bit-reflected,
 * as the polynomial 0xEDB88320 is), and P and floor(x^64 / P) for Barrett. */
__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold(uint32_t crc, const uint8_t *b, size_t n)
{
    const __m128i k_by4 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);     /* 512 bits */
    const __m128i k_by1 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);     /* 128 bits */
    const __m128i k_64 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i barrett = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    __m128i x[4];
    for (int i = 0; i < 4; i++)
        x[i] = _mm_loadu_si128((const __m128i *)(const void *)(b + 16 * i));
    x[0] = _mm_xor_si128(x[0], _mm_cvtsi32_si128((int)crc));
    b += 64;
    n -= 64;
    for (; n >= 64; b += 64, n -= 64)
        for (int i = 0; i < 4; i++) {
            __m128i lo = _mm_clmulepi64_si128(x[i], k_by4, 0x00), hi = _mm_clmulepi64_si128(x[i], k_by4, 0x11);
            x[i] = _mm_xor_si128(_mm_xor_si128(lo, hi), _mm_loadu_si128((const __m128i *)(const void *)(b + 16 * i)));
        }
    __m128i a = x[0];
    for (int i = 1; i < 4; i++)
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k_by1, 0x00), _mm_clmulepi64_si128(a, k_by1, 0x11)),
                          x[i]);
    for (; n >= 16; b += 16, n -= 16)
        a = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(a, k_by1, 0x00), _mm_clmulepi64_si128(a, k_by1, 0x11)),
                          _mm_loadu_si128((const __m128i *)(const void *)b));
    /* 128 -> 64 bits, then 64 -> 32 by Barrett reduction */
    a = _mm_xor_si128(_mm_srli_si128(a, 8), _mm_clmulepi64_si128(a, k_by1, 0x10));
    a = _mm_xor_si128(_mm_srli_si128(a, 4), _mm_clmulepi64_si128(_mm_and_si128(a, low32), k_64, 0x00));
    __m128i t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), barrett, 0x10), low32);
    a = _mm_xor_si128(a, _mm_clmulepi64_si128(t, barrett, 0x00));
    return (uint32_t)_mm_extract_epi32(a, 1);
}

uint32_t icpp_crc32(uint32_t crc, const void *p, size_t n)
{
    static int fold = -1;
    if (fold < 0)
        fold = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    if (fold && n >= 64) {
        size_t m = n & ~(size_t)15;
        crc = ~crc_fold(~crc, p, m);
        p = (const uint8_t *)p + m;
        n -= m;
    }
    return n ? (uint32_t)crc32_z(crc, p, n) : crc;
}
#else
uint32_t icpp_crc32(uint32_t crc, const void *p, size_t n)
{
    return (uint32_t)crc32_z(crc, p, n);
}
#endif
#else
/* The training agent links nothing (icpp-train/meson.build): */
/* CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), table-driven
 * and dependency-free so that the training agent can checksum its output
 * inside a signal handler.  Slicing by 8 (eight tables, 8 KiB): a reader
 * checksums every block of a recording on each pass, and byte at a time
 * this was a fifth of icpp-resolve's time. */
static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t icpp_crc32(uint32_t crc, const void *p, size_t n)
{
    /* crc_table[7][128] is the last entry written: once set, all are
     * (racing callers write the same values) */
    if (!crc_table[7][128])
        crc_init();
    const uint8_t *b = p;
    crc = ~crc;
    while (n && ((uintptr_t)b & 7)) {
        crc = crc_table[0][(crc ^ *b++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, b, 8);   /* little-endian x86-64 */
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^ crc_table[5][(w >> 16) & 0xff] ^
              crc_table[4][(w >> 24) & 0xff] ^ crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        b += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_table[0][(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
#endif

char *icpp_hex(const uint8_t *p, size_t n, char *buf, size_t bufsz)
{
    static const char dig[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n && o + 2 < bufsz; i++) {
        buf[o++] = dig[p[i] >> 4];
        buf[o++] = dig[p[i] & 15];
    }
    if (bufsz)
        buf[o] = 0;
    return buf;
}

int icpp_write_file_atomic(const char *path, const void *buf, size_t len, icpp_err *err)
{
    return icpp_fs_write_file(path, buf, len, ICPP_FS_MODE_PLAIN, err);
}

size_t icpp_read_at(int fd, void *buf, size_t n, off_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

int icpp_read_file(const char *path, size_t maxlen, uint8_t **buf, size_t *len, icpp_err *err)
{
    struct stat st;
    int fd = icpp_fs_open_input(path, &st, err);
    if (fd < 0)
        return fd;
    if ((uint64_t)st.st_size > maxlen) {
        close(fd);
        return icpp_err_set(err, EFBIG, "%s: %lld bytes is more than the %zu this reader accepts", path,
                            (long long)st.st_size, maxlen);
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *b = malloc(n ? n : 1);
    if (!b) {
        close(fd);
        return icpp_err_set(err, ENOMEM, "%s: out of memory", path);
    }
    got = icpp_read_at(fd, b, n, 0);
    close(fd);
    if (got != n) {
        free(b);
        return icpp_err_set(err, EIO, "%s: short read", path);
    }
    *buf = b;
    *len = n;
    return 0;
}
