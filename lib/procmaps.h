/* procmaps.h -- a process's mappings and thread bases, from /proc or from mmap records. */
#ifndef ICPP_PROCMAPS_H
#define ICPP_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

typedef struct icpp_mapping {
    uint64_t start, end;    /* [start, end) runtime addresses */
    uint64_t pgoff;         /* file offset mapped at start */
    uint32_t prot;          /* PROT_READ | PROT_WRITE | PROT_EXEC */
    char    *path;          /* file path, "[stack]", "[heap]", or NULL if anonymous */
} icpp_mapping;

/* A set of mappings, kept sorted by start, non-overlapping (a later insert
 * replaces what it overlaps, as mmap does). */
typedef struct icpp_maps {
    icpp_mapping *v;
    size_t        n, cap;
} icpp_maps;

void icpp_maps_init(icpp_maps *mm);
void icpp_maps_free(icpp_maps *mm);
/* Read /proc/PID/maps (pid 0 = self).  Replaces the contents of *mm. */
int  icpp_maps_read(icpp_maps *mm, pid_t pid, icpp_err *err);
/* Parse the text of a maps file. */
int  icpp_maps_parse(icpp_maps *mm, const char *text, size_t len, icpp_err *err);
/* Insert a mapping (an mmap record); overlapped parts of older ones go. */
int  icpp_maps_insert(icpp_maps *mm, const icpp_mapping *m, icpp_err *err);
/* The mapping holding addr, or NULL. */
const icpp_mapping *icpp_maps_find(const icpp_maps *mm, uint64_t addr);

/* startstack of a process: field 28 of /proc/PID/stat (main thread base). */
int icpp_proc_startstack(pid_t pid, uint64_t *out, icpp_err *err);
/* Parse the text of a /proc/PID/stat file for startstack. */
int icpp_proc_parse_startstack(const char *text, size_t len, uint64_t *out, icpp_err *err);

/* Base of a thread other than main: the top (end) of the mapping holding sp.
 * glibc allocates a thread's stack and TCB in one mapping.  Returns 0 if no
 * mapping holds sp. */
uint64_t icpp_maps_stack_top(const icpp_maps *mm, uint64_t sp);

#endif
