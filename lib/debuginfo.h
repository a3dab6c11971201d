/* debuginfo.h -- separate debug files: found where gdb and elfutils look (build-id directory, .gnu_debuglink with its CRC, debuginfod), and refused unless they belong to the binary. */
#ifndef ICPP_DEBUGINFO_H
#define ICPP_DEBUGINFO_H

#include <stddef.h>
#include <stdint.h>

#include "defs.h"
#include "err.h"

/* The lookup order (docs/debuginfo.md), first acceptable file wins:
 *   1. DIR/.build-id/xx/rest.debug for each debug directory DIR
 *      (ICPP_DEBUG_DIRS, colon-separated; default /usr/lib/debug);
 *   2. the name in the binary's .gnu_debuglink, in the binary's directory,
 *      in its .debug/ subdirectory, then DIR/<binary's directory>/ for each DIR;
 *   3. debuginfod (elfutils' libdebuginfod, loaded at run time) when
 *      DEBUGINFOD_URLS is set and the library is there: a separate step
 *      (icpp_debuginfo_find_remote), within the limits of
 *      icpp_debuginfo_configure.
 * Steps 1 and 2 look up and open files with the rights of the owner of the
 * input that named the binary (lib/fsafe.h, icpp_fs_named_begin).
 * A candidate is acceptable when it is a regular file (lib/fsafe input
 * rules), a 64-bit x86-64 ELF file other than the binary itself, has a
 * .symtab or .debug_info, carries the binary's GNU build-id (when the binary
 * has one), and -- found by .gnu_debuglink -- has the CRC-32 the link names.
 * A candidate that exists but fails a check is refused: counted, the first
 * reason kept, never used. */

typedef enum icpp_dbg_via {
    ICPP_DBG_NONE = 0,
    ICPP_DBG_BUILD_ID,      /* DIR/.build-id/xx/rest.debug */
    ICPP_DBG_DEBUGLINK,     /* .gnu_debuglink */
    ICPP_DBG_DEBUGINFOD,    /* a debuginfod server (its client cache) */
} icpp_dbg_via;

typedef struct icpp_debuginfo {
    int          fd;            /* the debug file, open for reading; -1 if none */
    char        *path;          /* where it was found (malloc'd), NULL if none */
    icpp_dbg_via via;
    unsigned     nrefused;      /* candidates that existed but were refused */
    char         refused[512];  /* the first refusal, one line: "CANDIDATE: why" ("" if none) */
} icpp_debuginfo;

/* Look for the separate debug file of the binary `path`, whose whole image
 * is img[0..len) (read from its sections: build-id, .gnu_debuglink), on
 * this machine (steps 1 and 2).  Fills *out (out->fd < 0 when nothing
 * acceptable was found: not an error).  Returns 0, or -ENOMEM. */
int  icpp_debuginfo_find(const char *path, const uint8_t *img, size_t len, icpp_debuginfo *out);
/* Step 3, after icpp_debuginfo_find found nothing (*out as it left it):
 * ask debuginfod, if the configuration allows a query for this binary's
 * build-id now.  Same conventions. */
int  icpp_debuginfo_find_remote(const char *path, const uint8_t *img, size_t len, icpp_debuginfo *out);

/* ---- debuginfod's limits (docs/debuginfo.md) ---- */
typedef struct icpp_dfd_config {
    int      off;           /* never ask a server (--no-debuginfod) */
    double   budget;        /* seconds all queries of the process may take together; 0: 30 */
    uint64_t maxsize;       /* bytes one answer may have; 0: DEBUGINFOD_MAXSIZE if set, else 1 GiB */
    int      wanted_only;   /* ask only for the build-ids given to icpp_debuginfo_want */
    /* during a transfer (at most every few hundred ms): the binary, bytes so
     * far, the answer's size (<= 0: not known yet); NULL: nothing */
    void   (*progress)(void *arg, const char *binary, long done, long total);
    void    *arg;
} icpp_dfd_config;
/* Without a call: every build-id may be asked for, within the default limits. */
void icpp_debuginfo_configure(const icpp_dfd_config *c);
/* A tool needs this build-id's debug file (a sample fell in its binary).  0 or -ENOMEM. */
int  icpp_debuginfo_want(const icpp_build_id *b);
/* Could a server be asked for this build-id at all (DEBUGINFOD_URLS set, not off)? */
int  icpp_debuginfo_remote_possible(const icpp_build_id *b);
/* ... and is a query for it allowed now (possible, and wanted when the configuration asks so)? */
int  icpp_debuginfo_remote_due(const icpp_build_id *b);
typedef struct icpp_dfd_stats {
    unsigned queries;       /* made */
    unsigned found;         /* gave an acceptable debug file */
    unsigned timed_out;     /* aborted: the time budget ran out */
    unsigned too_big;       /* aborted: the answer was larger than the size limit */
    unsigned skipped;       /* not made: the budget was spent */
    double   seconds;       /* spent in queries */
} icpp_dfd_stats;
void icpp_debuginfo_stats(icpp_dfd_stats *st);
/* The dwz common file named by a debug file's .gnu_debugaltlink (image
 * img[0..len)): found by the build-id the link names, under each debug
 * directory's .build-id/, else at the link's own path (relative to the
 * debug file's directory `dpath`'s); refused unless its build-id is the
 * named one.  Same *out conventions. */
int  icpp_debuginfo_find_alt(const char *dpath, const uint8_t *img, size_t len, icpp_debuginfo *out);
void icpp_debuginfo_release(icpp_debuginfo *d);

/* ---- the sections, parsed (exported for tests and fuzzing) ---- */

/* .gnu_debuglink contents p[0..n): a NUL-terminated file name, padding to
 * 4 bytes, the file's CRC-32 (little-endian).  A name must be a plain file
 * name (no '/', not "." or ".."). *name points into p.  0 or -ICPP_EFORMAT. */
int icpp_debuginfo_parse_debuglink(const uint8_t *p, size_t n, const char **name, uint32_t *crc);
/* .gnu_debugaltlink contents: a NUL-terminated path, then the build-id
 * (the rest, 1..ICPP_BUILD_ID_MAX bytes).  0 or -ICPP_EFORMAT. */
int icpp_debuginfo_parse_altlink(const uint8_t *p, size_t n, const char **name, icpp_build_id *bid);

#endif
