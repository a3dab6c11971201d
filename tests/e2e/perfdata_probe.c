/* perfdata_probe.c -- test helper: dump a perf.data as ICPP records, or print the thread-base vote of a recording. */
#include "basevote.h"
#include "codec.h"
#include "pathmap.h"
#include "perfdata.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *usage =
    "usage: perfdata_probe --dump PERF.DATA\n"
    "       perfdata_probe --vote [--override] SAMPLES MAP\n";

static int dump(const char *path)
{
    icpp_err err;
    icpp_perfdata *pd = icpp_perfdata_open(path, &err);
    if (!pd) {
        fprintf(stderr, "perfdata_probe: %s\n", err.msg);
        return 1;
    }
    icpp_srec r;
    int rc;
    char hex[2 * ICPP_BUILD_ID_MAX + 1];
    while ((rc = icpp_perfdata_next(pd, &r, &err)) > 0) {
        switch (r.type) {
        case ICPP_SREC_INFO: printf("INFO %s=%s\n", r.u.info.key, r.u.info.val); break;
        case ICPP_SREC_EVENT:
            printf("EVENT %u %s type=%u config=%#" PRIx64 " period=%" PRIu64 " freq=%u precise=%u\n", r.u.event.id,
                   r.u.event.name, r.u.event.type, r.u.event.config, r.u.event.period, r.u.event.freq,
                   r.u.event.precise);
            break;
        case ICPP_SREC_PROC:
            printf("PROC %u ppid=%u startstack=%#" PRIx64 " flags=%u %s\n", r.u.proc.pid, r.u.proc.ppid,
                   r.u.proc.startstack, r.u.proc.flags, r.u.proc.path);
            break;
        case ICPP_SREC_MMAP:
            printf("MMAP %u %#" PRIx64 "+%#" PRIx64 " @%#" PRIx64 " prot=%u %s bid=%s\n", r.u.mmap.pid,
                   r.u.mmap.start, r.u.mmap.len, r.u.mmap.pgoff, r.u.mmap.prot, r.u.mmap.path,
                   icpp_hex(r.u.mmap.build_id.bytes, r.u.mmap.build_id.len, hex, sizeof hex));
            break;
        case ICPP_SREC_SAMPLE:
            printf("SAMPLE %u/%u ev=%u t=%" PRIu64 " ip=%#" PRIx64 " sp=%#" PRIx64 " bp=%#" PRIx64 " chain=%u stack=%u\n",
                   r.u.sample.pid, r.u.sample.tid, r.u.sample.event, r.u.sample.time, r.u.sample.ip, r.u.sample.sp,
                   r.u.sample.bp, r.u.sample.x.nchain, r.u.sample.x.stack_size);
            break;
        case ICPP_SREC_LOST: printf("LOST %" PRIu64 "\n", r.u.lost.count); break;
        case ICPP_SREC_EXIT: printf("EXIT %u/%u\n", r.u.exit.pid, r.u.exit.tid); break;
        default: printf("? %d\n", r.type); break;
        }
    }
    const icpp_perfdata_stats *st = icpp_perfdata_stats_get(pd);
    printf("STATS records=%" PRIu64 " samples=%" PRIu64 " kernel=%" PRIu64 " noregs=%" PRIu64 " unknown_id=%" PRIu64
           " data_mmaps=%" PRIu64 " truncated=%zu clean=%d\n",
           st->records, st->samples, st->kernel, st->noregs, st->unknown_id, st->data_mmaps,
           icpp_perfdata_truncated(pd), icpp_perfdata_clean_end(pd));
    icpp_perfdata_close(pd);
    if (rc < 0) {
        fprintf(stderr, "perfdata_probe: %s: %s\n", path, err.msg);
        return 1;
    }
    return 0;
}

static int vote(const char *samples, const char *map, int flags)
{
    icpp_err err;
    icpp_pathmap *pm = icpp_pathmap_read(map, &err);
    icpp_basevote *bv = pm ? icpp_basevote_infer(samples, pm, flags, 0, &err) : NULL;
    if (!bv) {
        fprintf(stderr, "perfdata_probe: %s\n", err.msg);
        icpp_pathmap_free(pm);
        return 1;
    }
    printf("#pid\ttid\tgen\tsamples\tvoters\tbase\tvotes\trunner\trunner_votes\taccepted\trecorded\n");
    for (size_t i = 0; i < icpp_basevote_nthreads(bv); i++) {
        const icpp_bv_thread *t = icpp_basevote_thread(bv, i);
        char line[512];
        icpp_basevote_describe(bv, i, line, sizeof line);
        fprintf(stderr, "%s\n", line);
        printf("%u\t%u\t%u\t%" PRIu64 "\t%" PRIu64 "\t%#" PRIx64 "\t%" PRIu64 "\t%#" PRIx64 "\t%" PRIu64 "\t%d\t%#" PRIx64
               "\n", t->pid, t->tid, t->gen, t->samples, t->voters, t->base, t->votes, t->runner, t->runner_votes,
               t->accepted, t->recorded);
    }
    icpp_basevote_free(bv);
    icpp_pathmap_free(pm);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--dump"))
        return dump(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "--vote"))
        return vote(argv[2], argv[3], 0);
    if (argc == 5 && !strcmp(argv[1], "--vote") && !strcmp(argv[2], "--override"))
        return vote(argv[3], argv[4], ICPP_BV_OVERRIDE);
    fputs(usage, stderr);
    return 2;
}
