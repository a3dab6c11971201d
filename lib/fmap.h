/* fmap.h -- a file mapped read-only for sequential passes, with the pages behind the cursor released. */
#ifndef ICPP_FMAP_H
#define ICPP_FMAP_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The readers of recordings (lib/samples.h, lib/perfdata.h) see a file as
 * one byte array, but a recording may be larger than memory.  The file is
 * mapped (nothing is read until touched; the kernel reads ahead a bounded
 * window, MADV_SEQUENTIAL), and a reader that has passed offset N calls
 * icpp_fmap_release(m, N): the pages before N are unmapped (MADV_DONTNEED),
 * so the process holds at most the window between two releases.  Touching a
 * released page again is correct (it is read back from the file), only
 * slower.  A caller's buffer (icpp_fmap_mem) is never released. */
typedef struct icpp_fmap {
    const uint8_t *p;           /* the file's bytes */
    size_t         len;
    size_t         released;    /* pages before this offset were released (page-aligned) */
    void          *map;         /* our mapping (NULL: a caller's buffer, or an empty file) */
} icpp_fmap;

/* Map a regular file read-only, opened by icpp_fs_open_input (lib/fsafe.h):
 * fails with "PATH: ..." for a file that cannot be opened or is not a
 * regular file (a FIFO is refused, not waited on). */
int  icpp_fmap_open(icpp_fmap *m, const char *path, icpp_err *err);
/* Use buf[0..len) as the file (it must outlive m). */
void icpp_fmap_mem(icpp_fmap *m, const uint8_t *buf, size_t len);
/* A pass is at offset pos: pages wholly before it may be dropped.  Cheap to
 * call often: it acts once per few MiB. */
void icpp_fmap_release(icpp_fmap *m, size_t pos);
/* Start another pass from the beginning (the release mark goes back). */
void icpp_fmap_rewind(icpp_fmap *m);
void icpp_fmap_close(icpp_fmap *m);

#endif
