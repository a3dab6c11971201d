/* test_crc.c -- lib/codec.c's CRC-32 against zlib's: built twice, as the training agent builds it
 * (slicing by 8: it links nothing) and as libicpp does (-DICPP_CRC_ZLIB: PCLMULQDQ folding, zlib for the rest). */
#include "check.h"

#include "codec.h"

#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The CRC of every block against zlib's, at every alignment and length up
 * to 320 bytes (the folding takes 64, then 16 at a time, and leaves up to 15
 * to zlib), chained, and on 1 MiB. */
static void test_crc(void)
{
    static uint8_t buf[1 << 20];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)rnd();
    int bad = 0;
    for (size_t off = 0; off < 16; off++)
        for (size_t n = 0; n <= 320; n++) {
            uint32_t a = icpp_crc32(0, buf + off, n), b = (uint32_t)crc32(0, buf + off, (uInt)n);
            uint32_t a2 = icpp_crc32(a, buf + 100 + off, n), b2 = (uint32_t)crc32(b, buf + 100 + off, (uInt)n);
            bad += a != b || a2 != b2;
        }
    CHECK(bad == 0, "%d CRCs differ from zlib's", bad);
    CHECK(icpp_crc32(0, buf, sizeof buf) == (uint32_t)crc32(0, buf, sizeof buf), "1 MiB CRC differs from zlib's");
}

int main(void)
{
    test_crc();
    return check_done("crc");
}
