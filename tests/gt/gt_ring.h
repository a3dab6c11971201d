/* gt_ring.h -- one perf event per CPU for a task, read back in time order.
 *
 * The kernel refuses mmap() on an inherited per-task event (cpu == -1), so
 * following threads and children takes one event per CPU, each with its own
 * ring.  Records of different rings interleave in time (an mmap on one CPU,
 * a sample in the new code on another), so they are merged by timestamp
 * before anyone looks at them.  Needs sample_id_all with TID|TIME and the
 * sample layout IP, TID, TIME first (PERF_SAMPLE_IDENTIFIER unset). */
#ifndef GT_RING_H
#define GT_RING_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gt_rings gt_rings;

/* Open ATTR for task PID on every online CPU and map a ring for each, as
 * large as the locked-memory limits allow (up to 16 MiB each).  Returns NULL
 * with *err = errno and *what = the failing call on failure. */
gt_rings *gt_rings_open(struct perf_event_attr *attr, pid_t pid, int *err,
                        const char **what);

/* Ring data bytes per CPU, and the number of CPUs. */
size_t gt_rings_size(const gt_rings *r);
int gt_rings_count(const gt_rings *r);

/* Wait up to TIMEOUT_MS for data (or for EXTRA_FD, if >= 0, to be readable). */
void gt_rings_wait(gt_rings *r, int extra_fd, int timeout_ms);

/* Move every record now in the rings into the time-ordered queue. */
void gt_rings_fill(gt_rings *r);

/* The oldest queued record if its time is <= UNTIL, else NULL.  The record
 * stays valid until the next call. */
const struct perf_event_header *gt_rings_next(gt_rings *r, uint64_t until);

/* Stop sampling; side-band records (mmap, comm, task) stop too. */
void gt_rings_disable(gt_rings *r);

void gt_rings_close(gt_rings *r);

#endif
