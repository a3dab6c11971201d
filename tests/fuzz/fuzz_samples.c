/* fuzz_samples.c -- libFuzzer harness for the sample file reader (lib/samples.c): raw input, then with every block's CRC fixed up.
 *
 * Each input is read to the end with icpp_sreader_next twice: as it is, and
 * with the header and each block's length and CRC made right so that the
 * record parser sees the payloads.  Every record that comes out must be
 * well-formed: a known type, non-NULL strings, --validate extras that point
 * inside the input. */
#include "fuzz.h"

static void read_all(const uint8_t *buf, size_t len)
{
    icpp_err err = {0};
    icpp_sreader *r = icpp_sreader_mem(buf, len, &err);
    if (!r)
        return;
    icpp_srec rec;
    int rc;
    size_t n = 0, ends = 0;
    while ((rc = icpp_sreader_next(r, &rec, &err)) == 1) {
        fuzz_check_srec(&rec, buf, len);
        ends += rec.type == ICPP_SREC_END;
        n++;
        FUZZ_CHECK(n <= len, "more records than bytes");
    }
    FUZZ_CHECK(rc == 0 || (rc < 0 && err.code != 0 && err.msg[0]), "error %d without a message", rc);
    FUZZ_CHECK(icpp_sreader_truncated(r) <= len, "truncated %zu of %zu", icpp_sreader_truncated(r), len);
    FUZZ_CHECK(!icpp_sreader_clean_end(r) || ends > 0, "clean end without an END record");
    icpp_sreader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_all(data, size);
    FUZZ_CHECK(icpp_samples_is(data, size) == (size >= 8 && !memcmp(data, "ICPPSMP\n", 8)), "samples_is");
    if (size >= FUZZ_SAMPLES_HDR) {
        uint8_t *c = fuzz_dup(data, size);
        fuzz_fix_samples(c, size);
        read_all(c, size);
        free(c);
    }
    return 0;
}
