/* runinfo.c -- what a recording says about its run: workload features (NAME=VALUE) and the events' sampling periods (docs/samples-format.md, docs/trend.md). */
#include "runinfo.h"

#include "perfdata.h"
#include "samples.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int name_ok(const char *s, size_t n)
{
    if (!n || n >= ICPP_FEATURE_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!(alpha || (i && ((c >= '0' && c <= '9') || c == '.' || c == '-'))))
            return 0;
    }
    return 1;
}

int icpp_feature_parse(const char *s, icpp_feature *f, icpp_err *err)
{
    const char *eq = strchr(s, '=');
    /* quote at most 80 bytes of what was given: it may come from a file */
    if (!eq || !name_ok(s, (size_t)(eq - s)))
        return icpp_err_set(err, EINVAL,
                            "feature '%.80s' is not NAME=VALUE (NAME: a letter or '_', then letters, digits, '_', '.', '-'; "
                            "at most %d bytes)",
                            s, ICPP_FEATURE_NAME_MAX - 1);
    char *end;
    errno = 0;
    double v = strtod(eq + 1, &end);
    if (end == eq + 1 || *end || !isfinite(v) || errno == ERANGE)
        return icpp_err_set(err, EINVAL, "feature '%.80s': the value is not a finite number", s);
    memcpy(f->name, s, (size_t)(eq - s));
    f->name[eq - s] = 0;
    f->value = v;
    return 0;
}

int icpp_feature_default_bytes(int argc, char *const *argv, double *bytes, const char **what)
{
    int found = 0;
    struct stat st;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' || stat(argv[i], &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (found++)
            return 0;       /* several files: which one is the input is not obvious */
        *bytes = (double)st.st_size;
        *what = argv[i];
    }
    if (found)
        return 1;
    if (fstat(0, &st) == 0 && S_ISREG(st.st_mode)) {
        off_t at = lseek(0, 0, SEEK_CUR);
        *bytes = (double)(st.st_size - (at > 0 && at <= st.st_size ? at : 0));
        *what = "<stdin>";
        return 1;
    }
    return 0;
}

/* One record of the header: features, events, command.  1 to go on, 0 at
 * the first sample, <0 on a bad feature record. */
static int take(icpp_runinfo *ri, const icpp_srec *r, icpp_err *err)
{
    switch (r->type) {
    case ICPP_SREC_INFO:
        if (!strcmp(r->u.info.key, "command"))
            snprintf(ri->command, sizeof ri->command, "%s", r->u.info.val);
        if (strcmp(r->u.info.key, ICPP_FEATURE_KEY))
            return 1;
        icpp_feature f;
        if (icpp_feature_parse(r->u.info.val, &f, err) < 0) {
            if (err)
                err->code = ICPP_EFORMAT;
            return -ICPP_EFORMAT;
        }
        if (icpp_runinfo_feature(ri, f.name))
            return icpp_err_set(err, ICPP_EFORMAT, "feature '%s' is given twice", f.name);
        if (ri->nfeat == ICPP_FEATURES_MAX)
            return icpp_err_set(err, ICPP_EFORMAT, "more than %d features", ICPP_FEATURES_MAX);
        ri->feat[ri->nfeat++] = f;
        return 1;
    case ICPP_SREC_EVENT:
        if (r->u.event.role || r->u.event.id >= ICPP_RUNINFO_EVENTS)
            return 1;
        icpp_run_event *e = &ri->ev[r->u.event.id];
        snprintf(e->name, sizeof e->name, "%s", r->u.event.name);
        e->type = r->u.event.type;
        e->config = r->u.event.config;
        e->period = r->u.event.period;
        e->freq = r->u.event.freq;
        if (r->u.event.id + 1 > ri->nevents)
            ri->nevents = r->u.event.id + 1;
        return 1;
    case ICPP_SREC_SAMPLE:
    case ICPP_SREC_LSAMPLE:
        return 0;
    default:
        return 1;
    }
}

int icpp_runinfo_mem(const uint8_t *buf, size_t len, icpp_runinfo *ri, icpp_err *err)
{
    memset(ri, 0, sizeof *ri);
    icpp_sreader *rd = icpp_sreader_mem(buf, len, err);
    if (!rd)
        return err ? -err->code : -EINVAL;
    icpp_srec r;
    int rc;
    while ((rc = icpp_sreader_next(rd, &r, err)) > 0 && (rc = take(ri, &r, err)) > 0)
        ;
    icpp_sreader_close(rd);
    return rc < 0 ? rc : 0;
}

int icpp_runinfo_read(const char *path, icpp_runinfo *ri, icpp_err *err)
{
    memset(ri, 0, sizeof *ri);
    icpp_perfdata *pd = NULL;
    icpp_sreader *rd = NULL;
    if (icpp_perfdata_file_is(path))
        pd = icpp_perfdata_open(path, err);
    else
        rd = icpp_sreader_open(path, err);
    if (!pd && !rd)
        return err ? -err->code : -EINVAL;
    icpp_srec r;
    int rc;
    while ((rc = pd ? icpp_perfdata_next(pd, &r, err) : icpp_sreader_next(rd, &r, err)) > 0 &&
           (rc = take(ri, &r, err)) > 0)
        ;
    icpp_perfdata_close(pd);
    icpp_sreader_close(rd);
    if (rc < 0 && err && strncmp(err->msg, path, strlen(path)))
        icpp_err_prefix(err, "%s", path);
    return rc < 0 ? rc : 0;
}

const icpp_feature *icpp_runinfo_feature(const icpp_runinfo *ri, const char *name)
{
    for (size_t i = 0; i < ri->nfeat; i++)
        if (!strcmp(ri->feat[i].name, name))
            return &ri->feat[i];
    return NULL;
}

double icpp_run_event_cost(const icpp_run_event *ev, const char **unit)
{
    int clock = ev->type == PERF_TYPE_SOFTWARE &&
                (ev->config == PERF_COUNT_SW_CPU_CLOCK || ev->config == PERF_COUNT_SW_TASK_CLOCK);
    if (!ev->freq && ev->period) {
        *unit = clock ? "ns" : "events";
        return (double)ev->period;
    }
    if (clock && ev->freq && ev->period) {
        *unit = "ns";
        return 1e9 / (double)ev->period;
    }
    *unit = "samples";
    return 1;
}
