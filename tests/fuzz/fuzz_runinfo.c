/* fuzz_runinfo.c -- libFuzzer harness for a recording's workload features and events (lib/runinfo.c): the header records of a sample file, and NAME=VALUE as given on a command line.
 *
 * The input is read by icpp_runinfo_mem as it is and with the sample file's
 * blocks fixed up (so the feature records are parsed), and as one
 * NUL-terminated NAME=VALUE.  Whatever is accepted must be well-formed:
 * features with valid, unique names and finite values that print and parse
 * back to themselves, at most ICPP_FEATURES_MAX of them; events with a
 * positive, finite cost per sample. */
#include "fuzz.h"
#include "runinfo.h"

#include <math.h>

static void check_feature(const icpp_feature *f)
{
    char s[ICPP_FEATURE_NAME_MAX + 40];
    icpp_feature g;
    icpp_err err;
    FUZZ_CHECK(isfinite(f->value), "value %g", f->value);
    snprintf(s, sizeof s, "%s=%.17g", f->name, f->value);
    FUZZ_CHECK(icpp_feature_parse(s, &g, &err) == 0, "'%s' does not parse back: %s", s, err.msg);
    FUZZ_CHECK(!strcmp(g.name, f->name) && g.value == f->value, "'%s' round trip", s);
}

static void read_info(const uint8_t *buf, size_t len)
{
    icpp_runinfo ri;
    icpp_err err = {0};
    int rc = icpp_runinfo_mem(buf, len, &ri, &err);
    FUZZ_CHECK(rc == 0 || (err.code && err.msg[0]), "error %d without a message", rc);
    if (rc < 0)
        return;
    FUZZ_CHECK(ri.nfeat <= ICPP_FEATURES_MAX && ri.nevents <= ICPP_RUNINFO_EVENTS, "counts %zu %u", ri.nfeat,
               ri.nevents);
    for (size_t i = 0; i < ri.nfeat; i++) {
        check_feature(&ri.feat[i]);
        FUZZ_CHECK(icpp_runinfo_feature(&ri, ri.feat[i].name) == &ri.feat[i], "feature %s twice", ri.feat[i].name);
    }
    for (uint32_t e = 0; e < ri.nevents; e++) {
        const char *unit = NULL;
        double c = icpp_run_event_cost(&ri.ev[e], &unit);
        FUZZ_CHECK(c > 0 && isfinite(c) && unit, "event %u cost %g", e, c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_info(data, size);
    if (size >= FUZZ_SAMPLES_HDR) {
        uint8_t *c = fuzz_dup(data, size);
        fuzz_fix_samples(c, size);
        read_info(c, size);
        free(c);
    }
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    icpp_feature f;
    icpp_err err;
    if (icpp_feature_parse(s, &f, &err) == 0)
        check_feature(&f);
    else
        FUZZ_CHECK(err.msg[0], "refused without a message");
    free(s);
    return 0;
}
