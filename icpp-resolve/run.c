/* run.c -- icpp-resolve's resolve pipeline: a pass over a recording (replay opened, threads' own stacks told, thread bases inferred), each sample to a callback. */
#include "run.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

int run_open(run *r, mapset *ms, const char *samples, unsigned flags, icpp_err *err)
{
    memset(r, 0, sizeof *r);
    r->ms = ms;
    r->samples = samples;
    r->rp = flags & RUN_FRESH_MODULES ? icpp_replay_open(samples, err) : mapset_replay_open(ms, samples, err);
    if (!r->rp)
        return -1;
    if (!(flags & RUN_LEARN_FRAMES))
        icpp_replay_select(r->rp, ICPP_REPLAY_NO_FRAMES);  /* learning is done: their frames are not needed */
    if (mapset_apply_stacks(ms, r->rp) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    if (flags & RUN_NO_BASES)
        return 0;
    /* a perf.data: bases from the union's heights (an ICPP sample file gives an empty vote) */
    r->bv = mapset_infer_bases(ms, samples, flags & RUN_QUIET_BASES ? NULL : stderr, err);
    return r->bv ? 0 : -1;
}

int run_each(run *r, run_sample_fn fn, void *arg, icpp_err *err)
{
    icpp_rsample s;
    int rc;
    while ((rc = icpp_replay_next(r->rp, &s, err)) > 0) {
        if (++r->nread % 4096 == 0 && r->prog && icpp_cli_progress_due(r->prog)) {    /* the clock every 4096 */
            size_t done, len;
            icpp_replay_position(r->rp, &done, &len);
            icpp_cli_progress_show(r->prog, "%" PRIu64 " samples resolved, %.0f of %.0f MiB read", r->nread,
                                   (double)done / 1048576.0, (double)len / 1048576.0);
        }
        icpp_basevote_apply(r->bv, &s);
        if (fn(arg, r, &s, err) < 0)
            return RUN_ERR_SAMPLE;
    }
    return rc < 0 ? RUN_ERR_READ : RUN_OK;
}

typedef struct prof_pass {
    profile  *prof;
    sampstat *ss;
} prof_pass;

static int profile_sample(void *arg, run *r, icpp_rsample *s, icpp_err *err)
{
    prof_pass *pp = arg;
    icpp_resolution res;
    if (pp->ss && sampstat_add(pp->ss, s) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    mapset_resolve(r->ms, r->rp, s, &res, NULL);
    if (prof_add(pp->prof, r->rp, s, &res) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    return 0;
}

int run_profile(run *r, profile *prof, sampstat *ss, icpp_err *err)
{
    prof_pass pp = {prof, ss};
    return run_each(r, profile_sample, &pp, err);
}

void run_close(run *r)
{
    icpp_replay_close(r->rp);
    icpp_basevote_free(r->bv);
    r->rp = NULL;
    r->bv = NULL;
}
