/* runinfo.h -- what a recording says about its run: workload features (NAME=VALUE) and the events' sampling periods (docs/samples-format.md, docs/trend.md). */
#ifndef ICPP_RUNINFO_H
#define ICPP_RUNINFO_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* A workload feature is an INFO record of the sample file with this key and
 * the value "NAME=VALUE" (docs/samples-format.md). */
#define ICPP_FEATURE_KEY      "feature"
#define ICPP_FEATURE_NAME_MAX 64        /* name bytes, NUL included */
#define ICPP_FEATURES_MAX     32        /* features per recording */
/* The default feature: the size of the one input file of the command. */
#define ICPP_FEATURE_BYTES    "bytes"

typedef struct icpp_feature {
    char   name[ICPP_FEATURE_NAME_MAX];   /* [A-Za-z_][A-Za-z0-9_.-]* */
    double value;                         /* finite */
} icpp_feature;

/* Parse "NAME=VALUE" (VALUE a finite decimal number, as strtod reads it, with
 * nothing after it).  0, or -EINVAL with a message that quotes s. */
int icpp_feature_parse(const char *s, icpp_feature *f, icpp_err *err);

/* The input-file size of a command line, when it is obvious: the one
 * argument after argv[0] that names a regular file (stat; never opened),
 * else -- no argument names one -- standard input if it is a regular file
 * (its size from its current offset).  1 with *bytes and *what (the argument,
 * or "<stdin>"), 0 when not obvious (no such file, or several). */
int icpp_feature_default_bytes(int argc, char *const *argv, double *bytes, const char **what);

#define ICPP_RUNINFO_EVENTS 8

/* A profile event of the recording and what one of its samples costs. */
typedef struct icpp_run_event {
    char     name[128];
    uint32_t type;                  /* perf type */
    uint64_t config, period;        /* period, or frequency when freq */
    uint8_t  freq;
} icpp_run_event;

typedef struct icpp_runinfo {
    size_t         nfeat;
    icpp_feature   feat[ICPP_FEATURES_MAX];
    uint32_t       nevents;         /* profile events, ids 0..nevents-1 */
    icpp_run_event ev[ICPP_RUNINFO_EVENTS];
    char           command[1024];
} icpp_runinfo;

/* Read the records before a recording's first sample (an ICPP sample file
 * or a perf.data): its features, profile events and command.  A feature
 * record that is not NAME=VALUE, a name given twice or more than
 * ICPP_FEATURES_MAX features make the file bad: -ICPP_EFORMAT with
 * "PATH: ..." (as do the readers' own errors). */
int icpp_runinfo_read(const char *path, icpp_runinfo *ri, icpp_err *err);
/* The same from an ICPP sample file in memory (the fuzzer's entry). */
int icpp_runinfo_mem(const uint8_t *buf, size_t len, icpp_runinfo *ri, icpp_err *err);

/* The feature called name, or NULL. */
const icpp_feature *icpp_runinfo_feature(const icpp_runinfo *ri, const char *name);

/* What one sample of event ev stands for: its fixed period (unit "events",
 * "ns" for the clock events), or for a clock event sampled by frequency
 * 1e9 / frequency ns (the mean period the kernel aims at); else 1 sample
 * (unit "samples"). */
double icpp_run_event_cost(const icpp_run_event *ev, const char **unit);

#endif
