/* main.c -- icpp-resolve: sample files to call-path profiles. */
#include "defs.h"
#include "module.h"
#include "replay.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "usage: icpp-resolve [-m MAP] [--format text|tree|folded|pprof|speedscope|svg|json] [-n N]\n"
    "                    [-o OUT] [--check] SAMPLES\n"
    "       icpp-resolve --script SAMPLES\n"
    "\n"
    "  --script        one line per sample: pid/tid, time, event, ip, sp, bp, thread\n"
    "                  base, height, module and function (like perf script).\n"
    "  -h, --help      this text.\n";

static int script(const char *path)
{
    icpp_err err;
    icpp_replay *rp = icpp_replay_open(path, &err);
    if (!rp) {
        fprintf(stderr, "icpp-resolve: %s\n", err.msg);
        return 1;
    }
    icpp_rsample s;
    int rc;
    static const char *kinds[] = {"none", "startstack", "maptop", "inferred"};
    while ((rc = icpp_replay_next(rp, &s, &err)) > 0) {
        const icpp_replay_info *in = icpp_replay_info_get(rp);
        const icpp_rmodule *m = s.module >= 0 ? icpp_replay_module(rp, (uint32_t)s.module) : NULL;
        printf("%u/%u %" PRIu64 " %s ip=%#" PRIx64 " sp=%#" PRIx64 " bp=%#" PRIx64 " base=%#" PRIx64 "(%s) height=%" PRId64
               " %s %s+%#" PRIx64 " %s\n",
               s.pid, s.tid, s.time, s.event < in->nevents ? in->event_names[s.event] : "?", s.ip, s.sp, s.bp, s.base,
               kinds[s.base_kind & 3], s.status == ICPP_RS_OK ? s.height : 0, icpp_rs_status_name(s.status),
               m ? m->path : "-", s.addr, s.func ? s.func->name : "-");
    }
    const icpp_replay_info *in = icpp_replay_info_get(rp);
    if (rc < 0)
        fprintf(stderr, "icpp-resolve: %s: %s\n", path, err.msg);
    else if (in->truncated)
        fprintf(stderr, "icpp-resolve: %s: the last %zu bytes are an incomplete block (the sampler was killed?); "
                        "read what came before\n", path, in->truncated);
    icpp_replay_close(rp);
    return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    enum { OPT_SCRIPT = 256 };
    static const struct option lo[] = {{"script", no_argument, 0, OPT_SCRIPT}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c, do_script = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        switch (c) {
        case OPT_SCRIPT: do_script = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "icpp-resolve: give one sample file (see --help)\n");
        return 2;
    }
    if (do_script)
        return script(argv[optind]);
    fprintf(stderr, "icpp-resolve: call-path resolution needs a path map; not implemented yet (issue #5). "
                    "--script works.\n");
    return 1;
}
