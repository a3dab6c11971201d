/* resolve_rate.c -- benchmark: samples resolved per second, CID lookup alone and the whole replay, one core. */
#include "complete.h"
#include "pathmap.h"
#include "replay.h"
#include "resolve.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    /* --complete: with completion of missing CIDs (lib/complete.h); the
     * first round then includes every search, later ones hit its cache. */
    int complete = argc == 4 && !strcmp(argv[1], "--complete");
    if (argc != 3 + complete) {
        fprintf(stderr, "usage: resolve_rate [--complete] MAP SAMPLES\n");
        return 2;
    }
    argv += complete;
    icpp_err err;
    icpp_pathmap *pm = icpp_pathmap_read(argv[1], &err);
    icpp_cidx *x = pm ? icpp_cidx_build(pm, &err) : NULL;
    icpp_completer *cpl = x && complete ? icpp_completer_new(pm, x, NULL, &err) : NULL;
    if (!x || (complete && !cpl)) {
        fprintf(stderr, "resolve_rate: %s\n", err.msg);
        return 1;
    }
    icpp_cidx_set_completer(x, cpl);
    double first = 0;
    /* Whole replay + resolution: what icpp-resolve does per sample. */
    double best_all = 1e9, best_cid = 1e9;
    size_t n = 0;
    icpp_rsample *keep = NULL;
    for (int round = 0; round < 5; round++) {
        icpp_replay *rp = icpp_replay_open(argv[2], &err);
        if (!rp) {
            fprintf(stderr, "resolve_rate: %s\n", err.msg);
            return 1;
        }
        icpp_rsample s;
        icpp_resolution r;
        static size_t cap;
        size_t k = 0;
        if (!keep)
            keep = malloc((cap = 1 << 16) * sizeof *keep);
        uint64_t sink = 0;
        double t0 = now();
        while (icpp_replay_next(rp, &s, &err) > 0) {
            icpp_resolve_sample(x, rp, &s, &r);
            sink += r.ncand;
            if (k == cap)
                keep = realloc(keep, (cap *= 2) * sizeof *keep);
            keep[k] = s;        /* its func points into this round's modules */
            k++;
        }
        double dt = now() - t0;
        if (round == 0)
            first = dt;
        if (dt < best_all)
            best_all = dt;
        n = k;
        /* CID lookup alone, on this round's resolved samples (the replay's
         * modules stay open while rp lives). */
        t0 = now();
        for (size_t i = 0; i < n; i++) {
            icpp_resolve_sample(x, rp, &keep[i], &r);
            sink += r.ncand;
        }
        dt = now() - t0;
        if (dt < best_cid)
            best_cid = dt;
        icpp_replay_close(rp);
        if (sink == 42)
            putchar(' ');
    }
    printf("| samples | replay + resolve (samples/s) | CID lookup alone (samples/s) |\n|---|---|---|\n");
    printf("| %zu | %.2f M | %.2f M |\n", n, (double)n / best_all / 1e6, (double)n / best_cid / 1e6);
    if (cpl) {
        icpp_cpl_stats cs;
        icpp_completer_get_stats(cpl, &cs);
        printf("with completion: first round (every search) %.2f M samples/s; %" PRIu64 " searches, mean %.1f us, "
               "worst %.1f us; call graphs %.0f ms (not in the rates)\n", (double)n / (first - cs.graph_ms / 1e3) / 1e6,
               cs.queries, cs.queries ? cs.total_us / (double)cs.queries : 0.0, cs.max_us, cs.graph_ms);
    }
    free(keep);
    icpp_completer_free(cpl);
    icpp_cidx_free(x);
    icpp_pathmap_free(pm);
    return 0;
}
