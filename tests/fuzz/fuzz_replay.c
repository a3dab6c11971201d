/* fuzz_replay.c -- libFuzzer harness for lib/replay.c through a temporary file, with the files it may open confined to a fixed list.
 *
 * icpp_replay_open takes a path and opens every executable it finds in the
 * recording's mmap records.  Fed raw fuzz bytes it would open arbitrary
 * files (FIFOs, devices), so the harness instead:
 *   1. reads the input as a sample file (block CRCs fixed up as in
 *      fuzz_samples.c, which fuzzes the byte-level reader itself);
 *   2. writes its records again with icpp_swriter into a temporary file,
 *      replacing every absolute path by one of a fixed list (a real small
 *      executable, a missing file, a text file, a directory; never a
 *      device: /dev/null can be a regular file someone else is writing, and
 *      a file shrinking under libelf's mmap is a SIGBUS); "[vdso]"-style and relative
 *      paths stay as they are, the replay never opens them;
 *   3. replays that file and checks each sample: it is the one written
 *      (the writer/reader round trip), its status and module index are in
 *      range, and an ICPP_RS_OK sample has a function, a base and
 *      height = base - entry SP.
 * So what is fuzzed is the replay's logic (processes, fork/exec, mappings
 * that overlap, build-ids that differ, samples anywhere) and CFI lookups in
 * a real module, not arbitrary files. */
#include "fuzz.h"
#include "replay.h"
#include "samples.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RECORDS 2000

static char dir[256], file[300], oldfile[310], notelf[300];
static const char *allowed[4];

static void cleanup(void)
{
    unlink(file);
    unlink(oldfile);
    unlink(notelf);
    rmdir(dir);
}

static void init(void)
{
    if (dir[0])
        return;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/icpp-fuzz-replay-XXXXXX", base);
    FUZZ_CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
    snprintf(file, sizeof file, "%s/s.icpps", dir);
    snprintf(oldfile, sizeof oldfile, "%s.old", file);
    snprintf(notelf, sizeof notelf, "%s/not-elf", dir);
    atexit(cleanup);
    FILE *f = fopen(notelf, "w");
    FUZZ_CHECK(f && fputs("not an ELF file\n", f) >= 0 && fclose(f) == 0, "cannot write %s", notelf);
    const char *elf = getenv("ICPP_FUZZ_REPLAY_ELF");
    if (!elf || !elf[0])
        elf = access("/usr/bin/true", R_OK) == 0 ? "/usr/bin/true" : "/bin/true";
    allowed[0] = elf;
    allowed[1] = "/nonexistent/icpp-fuzz/libmissing.so";
    allowed[2] = notelf;
    allowed[3] = dir;           /* a directory: opens, reads nothing */
}

static const char *confine(const char *p)
{
    if (!p || p[0] != '/')
        return p;
    for (int i = 0; i < 4; i++)
        if (!strcmp(p, allowed[i]))
            return p;
    return allowed[icpp_crc32(0, p, strlen(p)) % 4];
}

typedef struct want {
    uint32_t pid, tid, event;
    uint64_t time, ip, sp, bp;
    uint32_t nchain, nregs, stack_size;
    uint64_t regs_mask;
    uint32_t crc;               /* of chain, regs and stack, or of a learn sample's frames */
    uint32_t learn_n;           /* a learn sample: its frames */
    uint8_t  learn;
} want;

static uint32_t extra_crc(const uint64_t *chain, uint32_t nc, const uint64_t *regs, uint32_t nr, const uint8_t *st,
                          uint32_t ns)
{
    uint32_t c = icpp_crc32(0, chain, nc * sizeof *chain);
    c = icpp_crc32(c, regs, nr * sizeof *regs);
    return icpp_crc32(c, st, ns);
}

/* Steps 1 and 2: the records of buf, rewritten to `file`.  Returns the
 * number of samples written (their values in w[]). */
static size_t rewrite(const uint8_t *buf, size_t len, want *w)
{
    icpp_err err = {0};
    icpp_sreader *r = icpp_sreader_mem(buf, len, &err);
    FUZZ_CHECK(r != NULL, "fixed-up input refused: %s", err.msg);
    unlink(file);
    icpp_swriter *sw = icpp_swriter_open(file, &err);
    FUZZ_CHECK(sw != NULL, "swriter_open: %s", err.msg);
    size_t ns = 0;
    uint32_t learn_of[16] = {0};    /* learn event id -> its profile event + 1 */
    uint64_t declared[4] = {0};     /* event ids an EVENT record declared: the replay leaves out samples of others */
    icpp_srec rec;
    for (int k = 0; k < MAX_RECORDS && icpp_sreader_next(r, &rec, &err) == 1; k++) {
        if ((rec.type == ICPP_SREC_SAMPLE || rec.type == ICPP_SREC_LSAMPLE) &&
            (rec.u.sample.event >= 256 || !(declared[rec.u.sample.event / 64] >> (rec.u.sample.event % 64) & 1)))
            continue;
        switch (rec.type) {
        case ICPP_SREC_INFO:
            icpp_swriter_info(sw, rec.u.info.key, rec.u.info.val);
            break;
        case ICPP_SREC_EVENT:
            if (rec.u.event.id < 256)
                declared[rec.u.event.id / 64] |= 1ull << (rec.u.event.id % 64);
            if (rec.u.event.role == ICPP_EVENT_LEARN && rec.u.event.id < 16)
                learn_of[rec.u.event.id] = rec.u.event.of + 1;
            icpp_swriter_event(sw, rec.u.event.id, rec.u.event.name, rec.u.event.type, rec.u.event.config,
                               rec.u.event.period, rec.u.event.freq, rec.u.event.precise, rec.u.event.role,
                               rec.u.event.of);
            break;
        case ICPP_SREC_PROC:
            icpp_swriter_proc(sw, rec.u.proc.pid, rec.u.proc.ppid, rec.u.proc.startstack, confine(rec.u.proc.path),
                              rec.u.proc.flags);
            break;
        case ICPP_SREC_MMAP:
            icpp_swriter_mmap(sw, rec.u.mmap.pid, rec.u.mmap.start, rec.u.mmap.len, rec.u.mmap.pgoff,
                              rec.u.mmap.prot, confine(rec.u.mmap.path), &rec.u.mmap.build_id);
            break;
        case ICPP_SREC_SAMPLE: {
            const icpp_sample_extra *x = &rec.u.sample.x;
            int has_x = x->nchain || x->nregs || x->stack_size || x->regs_mask;
            icpp_swriter_sample(sw, rec.u.sample.pid, rec.u.sample.tid, rec.u.sample.event, rec.u.sample.time,
                                rec.u.sample.ip, rec.u.sample.sp, rec.u.sample.bp, has_x ? x : NULL);
            w[ns++] = (want){rec.u.sample.pid, rec.u.sample.tid, rec.u.sample.event, rec.u.sample.time,
                             rec.u.sample.ip, rec.u.sample.sp, rec.u.sample.bp, x->nchain, x->nregs,
                             x->stack_size, x->regs_mask,
                             extra_crc(x->chain, x->nchain, x->regs, x->nregs, x->stack, x->stack_size)};
            break;
        }
        case ICPP_SREC_LSAMPLE: {
            const icpp_learn_chain *l = &rec.u.sample.l;
            icpp_swriter_learn(sw, rec.u.sample.pid, rec.u.sample.tid, rec.u.sample.event, rec.u.sample.time,
                               rec.u.sample.ip, rec.u.sample.sp, rec.u.sample.bp, l);
            /* a learn sample is a profile sample of its event's profile event */
            uint32_t ev = rec.u.sample.event < 16 && learn_of[rec.u.sample.event] ? learn_of[rec.u.sample.event] - 1
                                                                                   : rec.u.sample.event;
            w[ns++] = (want){rec.u.sample.pid, rec.u.sample.tid, ev, rec.u.sample.time, rec.u.sample.ip,
                             rec.u.sample.sp, rec.u.sample.bp, 0, 0, 0, 0,
                             extra_crc(l->pc, l->n, l->entry_sp, l->n, NULL, 0), l->n, 1};
            break;
        }
        case ICPP_SREC_LOST:
            icpp_swriter_lost(sw, rec.u.lost.count);
            break;
        case ICPP_SREC_EXIT:
            icpp_swriter_exit(sw, rec.u.exit.pid, rec.u.exit.tid);
            break;
        default:            /* END: close writes it */
            break;
        }
    }
    icpp_sreader_close(r);
    FUZZ_CHECK(icpp_swriter_close(sw, icpp_swriter_samples(sw), 0, &err) == 0, "swriter_close: %s", err.msg);
    return ns;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < FUZZ_SAMPLES_HDR)
        return 0;
    init();
    uint8_t *c = fuzz_dup(data, size);
    fuzz_fix_samples(c, size);
    want *w = malloc(MAX_RECORDS * sizeof *w);
    size_t nw = rewrite(c, size, w);
    free(c);

    icpp_err err = {0};
    icpp_replay *rp = icpp_replay_open(file, &err);
    FUZZ_CHECK(rp != NULL, "replay_open of a file icpp_swriter wrote: %s", err.msg);
    icpp_rsample s;
    size_t n = 0;
    int rc;
    while ((rc = icpp_replay_next(rp, &s, &err)) == 1) {
        FUZZ_CHECK(n < nw, "more samples than written (%zu)", nw);
        const want *x = &w[n];
        FUZZ_CHECK(s.pid == x->pid && s.tid == x->tid && s.event == x->event && s.time == x->time && s.ip == x->ip &&
                       s.sp == x->sp && s.bp == x->bp,
                   "sample %zu differs from the one written", n);
        FUZZ_CHECK(s.learn == x->learn && (!s.learn || (s.l.n == x->learn_n &&
                   extra_crc(s.l.pc, s.l.n, s.l.entry_sp, s.l.n, NULL, 0) == x->crc)),
                   "sample %zu: learn frames differ from the ones written", n);
        FUZZ_CHECK(s.learn || (s.x.nchain == x->nchain && s.x.nregs == x->nregs && s.x.stack_size == x->stack_size &&
                               s.x.regs_mask == x->regs_mask &&
                               extra_crc(s.x.chain, s.x.nchain, s.x.regs, s.x.nregs, s.x.stack, s.x.stack_size) ==
                                   x->crc),
                   "sample %zu: --validate extras differ from the ones written", n);
        FUZZ_CHECK(s.status >= 0 && s.status < ICPP_RS_MAX, "sample %zu: status %d", n, s.status);
        FUZZ_CHECK(s.module == -1 || (s.module >= 0 && (size_t)s.module < icpp_replay_nmodules(rp)),
                   "sample %zu: module %d", n, s.module);
        if (s.module >= 0) {
            const icpp_rmodule *m = icpp_replay_module(rp, (uint32_t)s.module);
            FUZZ_CHECK(m && m->path && m->path[0] == '/', "sample %zu: module without a path", n);
        }
        if (s.status == ICPP_RS_OK)
            FUZZ_CHECK(s.func && s.base && s.module >= 0 && s.height == icpp_height(s.base, s.entry_sp),
                       "sample %zu: ok but incomplete", n);
        n++;
    }
    FUZZ_CHECK(rc == 0, "replay of a file icpp_swriter wrote fails: %s", err.msg);
    const icpp_replay_info *info = icpp_replay_info_get(rp);
    FUZZ_CHECK(n == nw && info->samples == nw, "%zu samples written, %zu replayed, info says %llu", nw, n,
               (unsigned long long)info->samples);
    /* what the writer wrote adds up (docs/samples-format.md, "What a reader checks") */
    FUZZ_CHECK(info->clean_end && info->end_samples == info->before_end && info->before_end == nw &&
                   !info->after_end && !info->after_exit && !info->unknown_event,
               "the written file does not add up: END %llu, %llu before it, %llu after, %llu after exits, "
               "%llu of undeclared events", (unsigned long long)info->end_samples,
               (unsigned long long)info->before_end, (unsigned long long)info->after_end,
               (unsigned long long)info->after_exit, (unsigned long long)info->unknown_event);
    FUZZ_CHECK(info->clean_end && info->truncated == 0, "file written whole reads as cut short");
    FUZZ_CHECK(info->nevents <= 8, "nevents %u", info->nevents);
    icpp_replay_close(rp);
    free(w);
    return 0;
}
