/* fuzz_perfdata.c -- libFuzzer harness for the perf.data reader (lib/perfdata.c): icpp_perfdata_mem and a full icpp_perfdata_next loop.
 *
 * Seeds are perf.data files `perf record` writes at test time (run.sh),
 * when perf works on the machine, plus the committed ones in
 * seeds/perfdata/ (header, attributes and data section only: no feature
 * sections, which hold the recording machine's name).  No checksums to
 * fix: perf.data has none.  Records must satisfy the same contract as the
 * sample file reader's (fuzz_check_srec), and the reader's counters must
 * agree with what it handed out.  Half the inputs go through a tiny
 * reorder window, so records spill to a temporary file and merge back. */
#include "fuzz.h"
#include "perfdata.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)icpp_perfdata_is(data, size);
    icpp_err err = {0};
    icpp_perfdata *pd = icpp_perfdata_mem(data, size, &err);
    if (!pd) {
        FUZZ_CHECK(err.code && err.msg[0], "refused without a message");
        return 0;
    }
    /* Every other input through a window of 3 records: the spill and the
     * merge of spilled runs get fuzzed too. */
    if (size && (data[size - 1] & 1))
        FUZZ_CHECK(icpp_perfdata_set_window(pd, 3) == 0, "window refused before the first record");
    icpp_srec rec;
    int rc;
    uint64_t samples = 0;
    size_t n = 0;
    while ((rc = icpp_perfdata_next(pd, &rec, &err)) == 1) {
        fuzz_check_srec(&rec, data, size);
        samples += rec.type == ICPP_SREC_SAMPLE;
        FUZZ_CHECK(++n <= size + 64, "more records than bytes");
    }
    FUZZ_CHECK(rc == 0 || (rc < 0 && err.code && err.msg[0]), "error %d without a message", rc);
    const icpp_perfdata_stats *st = icpp_perfdata_stats_get(pd);
    FUZZ_CHECK(st->samples == samples, "stats say %llu samples, %llu came out", (unsigned long long)st->samples,
               (unsigned long long)samples);
    FUZZ_CHECK(st->kernel <= st->samples, "more kernel samples than samples");
    FUZZ_CHECK(icpp_perfdata_truncated(pd) <= size, "truncated %zu of %zu", icpp_perfdata_truncated(pd), size);
    icpp_perfdata_close(pd);
    return 0;
}
