/* test_codec.c -- lib/codec.c: LEB128 against hand-encoded bytes, readers on truncated and
 * overlong input, CRC-32 against zlib, hex, atomic write and read back. */
#include "codec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

static int bytes_are(const icpp_wbuf *b, const char *want, size_t n)
{
    return !b->oom && b->len == n && !memcmp(b->p, want, n);
}

int main(void)
{
    /* unsigned LEB128: known encodings (DWARF 5, section 7.6) */
    struct { uint64_t v; const char *enc; size_t n; } uv[] = {
        {0, "\x00", 1}, {2, "\x02", 1}, {127, "\x7f", 1}, {128, "\x80\x01", 2}, {129, "\x81\x01", 2},
        {130, "\x82\x01", 2}, {12857, "\xb9\x64", 2},
        {UINT64_MAX, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    };
    for (size_t i = 0; i < sizeof uv / sizeof *uv; i++) {
        icpp_wbuf b = {0};
        icpp_wbuf_uv(&b, uv[i].v);
        CHECK(bytes_are(&b, uv[i].enc, uv[i].n), "uv %llu encoded wrongly", (unsigned long long)uv[i].v);
        icpp_rbuf r;
        icpp_rbuf_init(&r, b.p, b.len);
        CHECK(icpp_rbuf_uv(&r) == uv[i].v && !r.bad && !icpp_rbuf_left(&r), "uv %llu read back",
              (unsigned long long)uv[i].v);
        icpp_rbuf_init(&r, b.p, b.len - 1);     /* truncated */
        CHECK(icpp_rbuf_uv(&r) == 0 && r.bad, "uv %llu truncated: bad", (unsigned long long)uv[i].v);
        icpp_wbuf_free(&b);
    }
    /* zigzag signed */
    struct { int64_t v; const char *enc; size_t n; } sv[] = {
        {0, "\x00", 1}, {-1, "\x01", 1}, {1, "\x02", 1}, {-64, "\x7f", 1}, {64, "\x80\x01", 2},
        {INT64_MIN, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    };
    for (size_t i = 0; i < sizeof sv / sizeof *sv; i++) {
        icpp_wbuf b = {0};
        icpp_wbuf_sv(&b, sv[i].v);
        CHECK(bytes_are(&b, sv[i].enc, sv[i].n), "sv %lld encoded wrongly", (long long)sv[i].v);
        icpp_rbuf r;
        icpp_rbuf_init(&r, b.p, b.len);
        CHECK(icpp_rbuf_sv(&r) == sv[i].v && !r.bad, "sv %lld read back", (long long)sv[i].v);
        icpp_wbuf_free(&b);
    }
    {   /* more than 64 bits, and an 11-byte varint, are refused */
        icpp_rbuf r;
        icpp_rbuf_init(&r, (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10);
        CHECK(icpp_rbuf_uv(&r) == 0 && r.bad, "a 65th bit refused");
        icpp_rbuf_init(&r, (const uint8_t *)"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 11);
        CHECK(icpp_rbuf_uv(&r) == 0 && r.bad, "an 11-byte varint refused");
    }
    {   /* the padded placeholder, patched later, reads as an ordinary varint */
        icpp_wbuf b = {0};
        icpp_wbuf_uv5(&b, 0);
        icpp_wbuf_u32le(&b, 0xdeadbeef);
        icpp_wbuf_patch_uv5(&b, 0, 300);
        icpp_wbuf_patch_uv5(&b, 7, 1);          /* past the end: ignored */
        icpp_rbuf r;
        icpp_rbuf_init(&r, b.p, b.len);
        CHECK(b.len == 9 && icpp_rbuf_uv(&r) == 300 && icpp_rbuf_pos(&r) == 5, "uv5 patched to 300");
        CHECK(icpp_rbuf_u32le(&r) == 0xdeadbeef && !r.bad, "the bytes after it untouched");
        CHECK(icpp_rbuf_u64le(&r) == 0 && r.bad, "reading past the end: zero and bad");
        CHECK(icpp_rbuf_u32le(&r) == 0 && r.bad, "bad stays set");
        icpp_wbuf_free(&b);
    }
    {   /* little-endian fixed widths, strings */
        icpp_wbuf b = {0};
        icpp_wbuf_u64le(&b, 0x0102030405060708ull);
        CHECK(bytes_are(&b, "\x08\x07\x06\x05\x04\x03\x02\x01", 8), "u64le byte order");
        icpp_wbuf_str(&b, "main");
        icpp_wbuf_str(&b, NULL);
        icpp_rbuf r;
        icpp_rbuf_init(&r, b.p, b.len);
        icpp_rbuf_u64le(&r);
        char *s = icpp_rbuf_str(&r, 16), *e = icpp_rbuf_str(&r, 16);
        CHECK(s && !strcmp(s, "main") && e && !*e && !r.bad && !icpp_rbuf_left(&r), "strings read back");
        free(s), free(e);
        icpp_rbuf_init(&r, b.p + 8, b.len - 8);
        CHECK(!icpp_rbuf_str(&r, 3) && r.bad, "a string longer than maxlen refused");
        icpp_rbuf_init(&r, (const uint8_t *)"\x03" "a\0b", 4);
        CHECK(!icpp_rbuf_str(&r, 16) && r.bad, "a string with a NUL refused");
        icpp_rbuf_init(&r, (const uint8_t *)"\x05" "abc", 4);
        CHECK(!icpp_rbuf_str(&r, 16) && r.bad, "a string past the end refused");
        icpp_wbuf_free(&b);
    }
    {   /* CRC-32 against zlib, whole and in pieces; hex */
        static uint8_t buf[100003];
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (uint8_t)(i * 2654435761u >> 13);
        int bad = 0;
        for (size_t n = 0; n < 40; n++)
            bad += icpp_crc32(0, buf + n, n * 37) != (uint32_t)crc32(0, buf + n, (uInt)(n * 37));
        CHECK(!bad, "%d of 40 short CRCs differ from zlib's", bad);
        uint32_t c = icpp_crc32(0, buf, 777);
        c = icpp_crc32(c, buf + 777, sizeof buf - 777);
        CHECK(c == (uint32_t)crc32(0, buf, sizeof buf), "CRC-32 in two pieces equals zlib's");
        CHECK(icpp_crc32(0, "123456789", 9) == 0xcbf43926u, "the CRC-32 check value");
        char h[8];
        CHECK(!strcmp(icpp_hex((const uint8_t *)"\x01\xab\xff", 3, h, sizeof h), "01abff"), "hex");
        CHECK(!strcmp(icpp_hex((const uint8_t *)"\x01\xab\xff\x10", 4, h, 6), "01ab"), "hex truncated to whole bytes");
    }
    {   /* atomic write, read back, maxlen */
        umask(022);
        char dir[] = "/tmp/icpp-test-codec-XXXXXX";
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        char path[256];
        snprintf(path, sizeof path, "%s/f", dir);
        icpp_err err;
        CHECK(icpp_write_file_atomic(path, "old", 3, &err) == 0, "write: %s", err.msg);
        CHECK(icpp_write_file_atomic(path, "new!", 4, &err) == 0, "replace: %s", err.msg);
        uint8_t *p = NULL;
        size_t n = 0;
        CHECK(icpp_read_file(path, 100, &p, &n, &err) == 0 && n == 4 && !memcmp(p, "new!", 4), "read back");
        free(p);
        p = NULL;
        CHECK(icpp_read_file(path, 3, &p, &n, &err) < 0 && err.msg[0], "a file over maxlen refused");
        free(p);
        struct stat st;
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "mode 0644");
        unlink(path);
        CHECK(icpp_read_file(path, 100, &p, &n, &err) < 0 && err.code == ENOENT, "a missing file: ENOENT");
        rmdir(dir);
    }
    return check_done("codec");
}
