/* samples.h -- the ICPP sample file: streaming writer and checked reader (docs/samples-format.md). */
#ifndef ICPP_SAMPLES_H
#define ICPP_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "err.h"

#define ICPP_SAMPLES_VERSION 3   /* reads 1 to 3; 2 added LSAMPLE and the EVENT role; 3 the LSAMPLE frame dictionary */

typedef enum icpp_srec_type {
    ICPP_SREC_INFO = 1,     /* key/value about the recording */
    ICPP_SREC_EVENT,        /* an event definition */
    ICPP_SREC_PROC,         /* a process and its main-thread base (startstack) */
    ICPP_SREC_MMAP,         /* a mapping of a process */
    ICPP_SREC_THREAD,       /* (internal) thread index for later samples */
    ICPP_SREC_SAMPLE,       /* pc, sp, bp of a thread at a time, for an event */
    ICPP_SREC_LOST,         /* the kernel dropped samples (ring buffer full) */
    ICPP_SREC_EXIT,         /* a thread or process ended */
    ICPP_SREC_VSAMPLE,      /* --validate: a sample with its callchain, registers, user stack */
    ICPP_SREC_END,          /* clean end: totals */
    ICPP_SREC_LSAMPLE,      /* --learn: a sample with its unwound frames (pc, entry SP) */
    ICPP_SREC_MAX
} icpp_srec_type;

#define ICPP_PROC_EXEC 1    /* PROC flag: the process image changed by exec */

/* What --validate adds to a sample: the kernel's user callchain (frame
 * pointers), the user registers in perf's bit order, and a copy of the user
 * stack from SP up. */
typedef struct icpp_sample_extra {
    uint32_t        nchain;
    const uint64_t *chain;
    uint32_t        nregs;
    const uint64_t *regs;
    uint64_t        regs_mask;
    uint32_t        stack_size;
    const uint8_t  *stack;
} icpp_sample_extra;

/* EVENT roles (version 2).  A learn event samples the same thing as its
 * profile event `of`, at a longer period, with the user stack: its samples
 * (LSAMPLE) are profile samples of event `of` too, and also learning input
 * (the sampler shortens the profile event's period so that both together
 * sample at the rate asked for). */
#define ICPP_EVENT_LEARN 1

/* What --learn adds to a sample: its frames as the sampler unwound them
 * (lib/stackwalk.h), leaf first -- pc[0] is the sample's IP, pc[i] a return
 * address; entry_sp[i] = CFA - 8 of frame i -- and how the walk ended. */
#define ICPP_LEARN_MAX_FRAMES 4096

typedef struct icpp_learn_chain {
    uint8_t         status;     /* icpp_sw_status: 0 = reached the root */
    uint32_t        n;
    const uint64_t *pc;
    const uint64_t *entry_sp;
} icpp_learn_chain;

typedef struct icpp_srec {
    int type;
    union {
        struct { const char *key, *val; } info;
        struct { uint32_t id; const char *name; uint32_t type; uint64_t config, period; uint8_t freq, precise;
                 uint32_t role, of; } event;   /* role: ICPP_EVENT_LEARN or 0; of: a learn event's
                                                  profile event */
        struct { uint32_t pid, ppid; uint64_t startstack; const char *path; uint32_t flags; } proc;
        struct { uint32_t pid; uint64_t start, len, pgoff; uint32_t prot; const char *path; icpp_build_id build_id; } mmap;
        struct {
            uint32_t pid, tid, event;
            uint64_t time, ip, sp, bp;
            icpp_sample_extra x;        /* all zero unless --validate */
            icpp_learn_chain  l;        /* LSAMPLE only */
        } sample;                       /* SAMPLE, VSAMPLE (as SAMPLE) and LSAMPLE */
        struct { uint64_t count; } lost;
        struct { uint32_t pid, tid; } exit;
        struct { uint64_t samples, lost; } end;
    } u;
} icpp_srec;

/* ---- writer ---- */
typedef struct icpp_swriter icpp_swriter;

/* Create `path` with mode 0600 under the output rule of lib/fsafe.h (a link
 * or another user's file in a sticky directory is refused; an existing file
 * is first renamed to PATH.old; a character device is written in place) and
 * write the file header.  Records go out in checksummed blocks of at most 64 KiB;
 * a killed writer loses at most the unflushed block. */
icpp_swriter *icpp_swriter_open(const char *path, icpp_err *err);
void icpp_swriter_info(icpp_swriter *w, const char *key, const char *val);
void icpp_swriter_event(icpp_swriter *w, uint32_t id, const char *name, uint32_t type, uint64_t config,
                        uint64_t period, int freq, int precise, uint32_t role, uint32_t of);
void icpp_swriter_proc(icpp_swriter *w, uint32_t pid, uint32_t ppid, uint64_t startstack, const char *path,
                       uint32_t flags);
void icpp_swriter_mmap(icpp_swriter *w, uint32_t pid, uint64_t start, uint64_t len, uint64_t pgoff, uint32_t prot,
                       const char *path, const icpp_build_id *bid);
/* x: NULL, or the --validate extras (written as one VSAMPLE record). */
void icpp_swriter_sample(icpp_swriter *w, uint32_t pid, uint32_t tid, uint32_t event, uint64_t time, uint64_t ip,
                         uint64_t sp, uint64_t bp, const icpp_sample_extra *x);
/* A learn sample (an LSAMPLE record): the sample and its unwound frames. */
void icpp_swriter_learn(icpp_swriter *w, uint32_t pid, uint32_t tid, uint32_t event, uint64_t time, uint64_t ip,
                        uint64_t sp, uint64_t bp, const icpp_learn_chain *l);
void icpp_swriter_lost(icpp_swriter *w, uint64_t count);
void icpp_swriter_exit(icpp_swriter *w, uint32_t pid, uint32_t tid);
/* Write out the current block (call periodically and before blocking). */
int  icpp_swriter_flush(icpp_swriter *w, icpp_err *err);
/* END record, flush, fsync (once; close does it if not done).  Returns the
 * first error met. */
int  icpp_swriter_finish(icpp_swriter *w, uint64_t samples, uint64_t lost, icpp_err *err);
/* What the file holds now: bytes and samples in whole, written blocks (after
 * a write error: what is there, not what was offered). */
void icpp_swriter_written(const icpp_swriter *w, uint64_t *bytes, uint64_t *samples);
/* END record, flush, fsync, close, free.  Returns the first error met. */
int  icpp_swriter_close(icpp_swriter *w, uint64_t samples, uint64_t lost, icpp_err *err);
/* Close and remove the file if this writer created it (a regular file);
 * a device or pipe given as the output is left alone. */
void icpp_swriter_discard(icpp_swriter *w);
/* The first write error (e.g. disk full), latched; 0 if none.  After an
 * error, records are dropped and counted. */
int  icpp_swriter_error(const icpp_swriter *w, icpp_err *err);
uint64_t icpp_swriter_bytes(const icpp_swriter *w);
/* Sample records written so far (what the END record should count). */
uint64_t icpp_swriter_samples(const icpp_swriter *w);

/* ---- reader ---- */
typedef struct icpp_sreader icpp_sreader;

/* Open a sample file as a stream: it is mapped, not read (lib/fmap.h), and
 * the pages behind the current block are released, so a reader holds a few
 * MiB of it whatever its size (docs/samples-format.md). */
icpp_sreader *icpp_sreader_open(const char *path, icpp_err *err);
icpp_sreader *icpp_sreader_mem(const uint8_t *buf, size_t len, icpp_err *err);  /* buf must outlive it */
void          icpp_sreader_close(icpp_sreader *r);
/* Next record (pointers in *rec stay valid until the next call): 1, or 0 at
 * the end, or a negative error for a corrupt file.  THREAD records are
 * consumed internally; samples (SAMPLE and VSAMPLE both come out as
 * ICPP_SREC_SAMPLE, LSAMPLE as ICPP_SREC_LSAMPLE) have pid/tid and absolute
 * values. */
int icpp_sreader_next(icpp_sreader *r, icpp_srec *rec, icpp_err *err);
/* Before the first record: return LSAMPLE records without their frames
 * (l.n = 0), for a pass that needs only the samples' IP and SP.  The frames
 * are still read as far as the file order needs, and checked except against
 * the frames a record shares with its thread's previous learn sample. */
void icpp_sreader_skip_frames(icpp_sreader *r, int skip);
/* After the end: bytes of an incomplete last block (writer killed), and
 * whether an END record was seen. */
size_t icpp_sreader_truncated(const icpp_sreader *r);
int    icpp_sreader_clean_end(const icpp_sreader *r);
/* After the end: the samples the END record counts and the sample records
 * read before it (they differ in a damaged file), and the sample records
 * left out -- those after the END record, and those of a thread after its
 * EXIT record (counted in before_end too): the writer writes neither. */
typedef struct icpp_sreader_tally {
    uint64_t end_samples, before_end, after_end, after_exit;
} icpp_sreader_tally;
void   icpp_sreader_get_tally(const icpp_sreader *r, icpp_sreader_tally *c);
/* How far the reader is: *done bytes of the file's *len read (for a
 * progress line). */
void   icpp_sreader_position(const icpp_sreader *r, size_t *done, size_t *len);

/* Identify a sample file by its first bytes. */
int icpp_samples_is(const uint8_t *buf, size_t len);

#endif
