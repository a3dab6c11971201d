/* perfdata.h -- perf.data files (perf record) read as the same record stream as the ICPP sample reader. */
#ifndef ICPP_PERFDATA_H
#define ICPP_PERFDATA_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "samples.h"

/* A perf.data file written by `perf record --user-regs=sp,bp,ip ...` (or
 * --intr-regs with a precise event) comes out as icpp_srec records, in time
 * order, exactly as icpp_sreader_next gives them for an ICPP sample file:
 *
 *   INFO    tool=perf, command (perf's command line), kernel, host,
 *           startstack=unknown
 *   EVENT   one per perf event attribute, ids 0, 1, ... in file order
 *   PROC    at an exec (COMM record with the exec flag; flags = ICPP_PROC_EXEC,
 *           path = the first file the new image maps: the executable), at a
 *           fork of a process (ppid set), and for a process first seen
 *           through perf's synthesized COMM (attached with -p).  startstack
 *           is always 0: a perf.data has none.  See lib/basevote.h.
 *   MMAP    MMAP and MMAP2 records of user processes; build-ids from MMAP2
 *           (PERF_RECORD_MISC_MMAP_BUILD_ID) or perf's build-id table
 *           (HEADER_BUILD_ID); "//anon" becomes "" (anonymous)
 *   SAMPLE  pid, tid, event index, time, and ip/sp/bp from the user
 *           registers (or the interrupt registers).  A sample taken in the
 *           kernel is charged to the user context that entered the kernel:
 *           ip/sp/bp all from the user registers.  The register-set IP
 *           replaces the sample IP for precise_ip >= 2 (PEBS reports the
 *           eventing IP with post-retirement registers).  With
 *           PERF_SAMPLE_STACK_USER (--call-graph dwarf) the extras are set
 *           as for an `icpp-sample --validate` recording.
 *   LOST    LOST and LOST_SAMPLES records
 *   EXIT    EXIT records
 *
 * Every byte is untrusted: all offsets and lengths are checked; a corrupt
 * file is an error with a one-line message, never a crash.  docs/perfdata.md
 * has the details. */

typedef struct icpp_perfdata icpp_perfdata;

/* What the reader met so far (complete after the end). */
typedef struct icpp_perfdata_stats {
    uint64_t records;       /* records of the data section */
    uint64_t samples;       /* SAMPLE records given out */
    uint64_t kernel;        /* of those: taken in the kernel, charged to the user context */
    uint64_t noregs;        /* samples dropped: no usable registers (kernel threads, an event recorded without them) */
    uint64_t unknown_id;    /* samples dropped: their id names no event of the header */
    uint64_t data_mmaps;    /* MMAP records of data (perf record -d): bases of threads other than main */
    uint64_t held_max;      /* most records waiting in memory at once for the ones before them in time */
    uint64_t spilled;       /* records written to the spill file (the window overflowed) */
} icpp_perfdata_stats;

/* Open a perf.data file or a buffer (which must outlive the reader).  The
 * file is mapped and read in two passes with a bounded part of it in memory
 * (docs/perfdata.md, "How the file is read").  Checks the header,
 * attributes, ids and feature sections, and the framing of every record of
 * the data section (the first pass); fails with "FILE: ..." messages such as "not a
 * perf.data file", "truncated at offset N", "samples carry no user
 * registers: record with --user-regs=sp,bp,ip". */
icpp_perfdata *icpp_perfdata_open(const char *path, icpp_err *err);
icpp_perfdata *icpp_perfdata_mem(const uint8_t *buf, size_t len, icpp_err *err);
void           icpp_perfdata_close(icpp_perfdata *pd);
/* How many records may wait in memory for earlier-timed ones before they
 * are spilled to a temporary file ($TMPDIR); default 1 Mi (16 MiB).  Only
 * before the first icpp_perfdata_next; -EINVAL otherwise or for 0. */
int            icpp_perfdata_set_window(icpp_perfdata *pd, size_t records);

/* Next record: 1, 0 at the end, negative (and *err) for a corrupt record.
 * Pointers in *rec stay valid until the next call.  Same contract as
 * icpp_sreader_next. */
int icpp_perfdata_next(icpp_perfdata *pd, icpp_srec *rec, icpp_err *err);

/* Bytes of an incomplete last record of a recording perf did not finish
 * (killed: the header's data size is 0); whether perf finished it. */
size_t icpp_perfdata_truncated(const icpp_perfdata *pd);
/* How far the second pass is: *done bytes of the file's *len (for a
 * progress line; records waiting in the reorder window count as read). */
void   icpp_perfdata_position(const icpp_perfdata *pd, size_t *done, size_t *len);
int    icpp_perfdata_clean_end(const icpp_perfdata *pd);
const icpp_perfdata_stats *icpp_perfdata_stats_get(const icpp_perfdata *pd);

/* Identify a perf.data file (either byte order, file or pipe mode) by its
 * first bytes, or by reading the first bytes of `path` (0 if unreadable). */
int icpp_perfdata_is(const uint8_t *buf, size_t len);
int icpp_perfdata_file_is(const char *path);

#endif
