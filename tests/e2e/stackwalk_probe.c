/* stackwalk_probe.c -- lib/stackwalk (learn samples' unwinder) against lib/unwind (libdw, the truth) on every
 * sample of a --validate recording.  Prints one line: samples, compared, agreeing, mismatches. */
#include "replay.h"
#include "stackwalk.h"
#include "unwind.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXF 4096

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: stackwalk_probe RECORDING\n");
        return 2;
    }
    icpp_err err;
    icpp_replay *rp = icpp_replay_open(argv[1], &err);
    if (!rp) {
        fprintf(stderr, "stackwalk_probe: %s\n", err.msg);
        return 1;
    }
    icpp_unwinder *u = icpp_unwinder_new(rp);
    static icpp_uframe truth[MAXF];
    static icpp_sw_frame got[MAXF];
    uint64_t samples = 0, compared = 0, agree = 0, mismatch = 0, rooted_both = 0, rooted_truth = 0;
    icpp_rsample s;
    int rc;
    while ((rc = icpp_replay_next(rp, &s, &err)) > 0) {
        samples++;
        if (s.learn || !s.x.nregs)
            continue;
        int nt = 0, ng = 0;
        int ts = icpp_unwind(u, &s, truth, MAXF, &nt);
        icpp_replay_at at = {rp, s.pid};
        int gs = icpp_stackwalk(icpp_replay_sw_lookup, &at, s.ip, s.sp, s.bp, s.x.stack, s.x.stack_size, got, MAXF, &ng);
        if (nt == 0)
            continue;
        compared++;
        /* Every frame both have must agree: pc and entry SP.  The truth
         * keeps the signal-return trampoline as a frame of its own, which
         * stackwalk leaves out (no function), writing the interrupted frame's
         * pc + 1 (lib/stackwalk.h): compare the truth that way. */
        int k = 0;
        for (int i = 0; i < nt; i++) {
            if (truth[i].sigframe)
                continue;
            uint64_t pc = truth[i].pc + (i && truth[i - 1].sigframe);
            truth[k] = truth[i];
            truth[k++].pc = pc;
        }
        nt = k;
        int n = nt < ng ? nt : ng, bad = 0;
        for (int i = 0; i < n && !bad; i++)
            if (truth[i].pc != got[i].pc || truth[i].entry_sp != got[i].entry_sp)
                bad = 1;
        if (bad) {
            if (mismatch++ < 5)
                fprintf(stderr, "stackwalk_probe: sample at ip %#" PRIx64 ": frames differ (truth %d frames, %s; "
                                "stackwalk %d, %s)\n", s.ip, nt, icpp_uw_status_name(ts), ng, icpp_sw_status_name(gs));
            continue;
        }
        rooted_truth += ts == ICPP_UW_ROOT;
        if (ts == ICPP_UW_ROOT && gs == ICPP_SW_ROOT && nt == ng) {
            rooted_both++;
            agree++;
        } else if (ts != ICPP_UW_ROOT || gs != ICPP_SW_ROOT) {
            agree++;        /* agree as far as both went */
        }
    }
    printf("samples %" PRIu64 " compared %" PRIu64 " agree %" PRIu64 " mismatch %" PRIu64 " rooted_truth %" PRIu64
           " rooted_both %" PRIu64 "\n", samples, compared, agree, mismatch, rooted_truth, rooted_both);
    icpp_unwinder_free(u);
    icpp_replay_close(rp);
    return rc < 0 ? 1 : 0;
}
