/* gt_proc.h -- icpp-gt's model of the sampled processes: mappings and bases.
 *
 * Each process's address space is seeded from /proc/PID/maps (at the exec
 * stop, for the launched program) and then follows the kernel's MMAP2
 * records, which must therefore be applied in time order, interleaved with
 * the samples.  A fork copies the parent's model; an exec empties it. */
#ifndef GT_PROC_H
#define GT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gt_module.h"

typedef struct gt_map {
    uint64_t    start, end;     /* [start, end) */
    uint64_t    pgoff;          /* file offset of start */
    uint32_t    prot;           /* PROT_READ | PROT_WRITE | PROT_EXEC */
    const char *path;           /* interned; "" for anonymous memory */
    gt_module  *mod;            /* resolved on first use, if executable */
    bool        resolved;
    bool        bias_ok;
    uint64_t    bias;
} gt_map;

typedef struct gt_proc {
    int         pid;
    gt_map     *maps;           /* sorted by start, disjoint */
    size_t      nmaps, capmaps;
    uint64_t    startstack;     /* main thread's base; 0 = unknown */
    const char *base_kind;      /* how startstack was learned: "startstack"
                                   (read at the exec stop), "fork" (inherited
                                   from the parent), "exec" (read after a
                                   later exec), "unknown" */
    bool        exec_pending;   /* exec seen; read startstack at next sample */
} gt_proc;

/* The process PID, created empty (base unknown) if new. */
gt_proc *gt_proc_get(int pid);

/* Record that [start, end) now maps PATH (NULL or "//anon" = anonymous) at
 * PGOFF with PROT; older overlapping mappings are cut away. */
void gt_proc_map(gt_proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
                 uint32_t prot, const char *path);

/* Replace P's mappings by those in /proc/PID/maps.  Returns 0, or -errno. */
int gt_proc_read_maps(gt_proc *p);

/* startstack (field 28 of /proc/PID/stat).  Returns 0, or -errno (-ESRCH if
 * the process is gone or shows 0, as a zombie or a mid-exec process does). */
int gt_proc_read_startstack(int pid, uint64_t *out);

/* A new process CHILD forked from PARENT: same mappings, same startstack. */
gt_proc *gt_proc_fork(gt_proc *parent, int child);

/* PID called exec: its mappings are gone and its base is to be re-read. */
void gt_proc_exec(gt_proc *p);

/* Records were lost (ring full), possibly mmap records: re-read the maps of
 * every known process that still exists.  Returns how many were re-read. */
int gt_proc_resync(void);

/* The mapping containing ADDR, or NULL. */
const gt_map *gt_proc_map_at(const gt_proc *p, uint64_t addr);

/* The module of the executable mapping containing ADDR and its load bias,
 * or NULL (a gt_lookup_fn with ctx = the gt_proc). */
gt_module *gt_proc_module_at(void *p, uint64_t addr, uint64_t *bias);

void gt_proc_free_all(void);

#endif
