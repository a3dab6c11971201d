/* fsafe.h -- file safety: opening untrusted paths without blocking, and the one rule by which every tool creates and replaces its outputs (docs/file-safety.md). */
#ifndef ICPP_FSAFE_H
#define ICPP_FSAFE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "err.h"

/* Modes of the files ICPP creates (the process umask still applies). */
#define ICPP_FS_MODE_MEMORY 0600    /* holds program memory: every sample file */
#define ICPP_FS_MODE_PLAIN  0644    /* maps, profiles */

/* ---- inputs ---- */

/* Open `path` (from the user or from a file) for reading: O_RDONLY with
 * O_NONBLOCK|O_NOCTTY|O_CLOEXEC, so that a FIFO or a device cannot block the
 * open; then fstat: anything but a regular file is refused ("PATH: not a
 * regular file (a FIFO)").  O_NONBLOCK is cleared again before returning.
 * Returns the descriptor, or -errno with *err set; *st (if given) is filled. */
int icpp_fs_open_input(const char *path, struct stat *st, icpp_err *err);

/* ---- files named inside inputs (docs/file-safety.md, "Files named inside
 * inputs") ----
 * A recording or a map names files the user never named: ELF modules, their
 * debug files, the maps beside a binary.  Run as root over another user's
 * recording, a tool would read them with root's rights.  A tool that reads
 * such inputs (icpp-resolve) calls icpp_fs_named_guard() first.  From then
 * on, every file icpp_fs_open_input opens outside a named scope (an input
 * the user named: a recording, a map) notes its owner; and inside a named
 * scope -- icpp_fs_named_begin/end, around every lookup of a file named
 * inside an input -- files are looked up and opened with that owner's
 * rights (fsuid, fsgid and groups; per thread) when the process runs as
 * root and the owner is another user.  Inputs of several other users: the
 * rights of nobody (65534).  Unguarded, or not root: scopes change nothing. */
void icpp_fs_named_guard(void);
/* Enter a named scope (they nest): 0, or -errno with *err set when the
 * owner's rights cannot be taken -- then nothing may be opened, and end is
 * not called. */
int  icpp_fs_named_begin(icpp_err *err);
void icpp_fs_named_end(void);
/* The uid whose rights named files are opened with, or -1: the process's own. */
long icpp_fs_named_uid(void);

/* `path` names a regular file (links followed), checked without opening it:
 * for a program about to be run (exec would block on nothing, but the ELF
 * readers would). */
int icpp_fs_check_regular(const char *path, icpp_err *err);

/* ---- outputs ----
 * The rule (all four tools): an output path that is a symbolic link, a FIFO,
 * a socket, a directory or a block device is refused; so is an existing file
 * owned by another user in a sticky (world-writable) directory.  A character
 * device (/dev/null) is written in place.  Anything else is written to a new
 * file created O_CREAT|O_EXCL|O_NOFOLLOW beside the path and renamed over the
 * path itself (rename replaces a link, never follows it). */

typedef enum icpp_fs_kind {
    ICPP_FS_ABSENT = 0,     /* nothing there yet */
    ICPP_FS_REGULAR,        /* a regular file we may replace */
    ICPP_FS_CHARDEV,        /* a character device: written in place */
} icpp_fs_kind;

/* Apply the rule to `path` without writing: the kind, or -errno with a
 * one-line message naming the path and what to do. */
int icpp_fs_output_check(const char *path, icpp_err *err);

/* The same-file rule: refuse `out` when it is the same file (device and
 * inode, links followed) as any of the n paths in `inputs` (NULL entries
 * skipped): "OUT is the same file as the input IN: ...".  An absent output,
 * or an input that cannot be stat'ed, is no conflict.  Every tool checks
 * every output against every input it reads, before any work.  0, or -EINVAL
 * with *err set. */
int icpp_fs_output_not_input(const char *out, const char *const *inputs, size_t n, icpp_err *err);

typedef struct icpp_fs_out {
    int   fd;       /* where to write (-1 once committed or aborted) */
    FILE *fp;       /* set by icpp_fs_out_fopen; then fd belongs to it */
    char *path;     /* the output path */
    char *tmp;      /* the new file beside it; NULL when writing a device in place */
} icpp_fs_out;

/* Begin writing `path` under the rule with `mode`.  Returns 0 or -errno
 * (*err set, nothing created). */
int icpp_fs_out_begin(icpp_fs_out *o, const char *path, mode_t mode, icpp_err *err);
/* A stdio stream over o->fd (closed by commit/abort).  NULL on failure. */
FILE *icpp_fs_out_fopen(icpp_fs_out *o);
/* Flush, fsync and close, then rename the new file over the path.  On any
 * failure (a write error the stream latched, a full disk) the new file is
 * removed and the previous one kept; returns -errno with *err set. */
int icpp_fs_out_commit(icpp_fs_out *o, icpp_err *err);
/* Two outputs that belong together (icpp-rewrite's binary and its map):
 * both or neither are replaced.  Both new files are completed (flushed,
 * fsynced, closed) before either is renamed; then `first` is put in place
 * (exchanged with its previous file, RENAME_EXCHANGE), then `last` renamed
 * over its path; if that fails, `first`'s previous file is put back (or the
 * new one removed when there was none).  On failure *err says so, naming
 * both ("neither A nor B was changed"); both new files are removed. */
int icpp_fs_out_commit_pair(icpp_fs_out *first, icpp_fs_out *last, icpp_err *err);
/* Give up: close and remove the new file; the previous one stays. */
void icpp_fs_out_abort(icpp_fs_out *o);
/* For a tool's main, once (never inside another program: the agent): from
 * now on, SIGINT, SIGTERM or SIGHUP (those whose action is the default)
 * first remove every new file not yet committed or aborted, then end the
 * process as before.  SIGKILL cannot be caught: it leaves PATH.tmp.XXXXXX. */
void icpp_fs_remove_temps_on_signal(void);
/* The same, and o's new file is among them (o begun before the call). */
void icpp_fs_out_remove_on_signal(icpp_fs_out *o);

/* The whole of `buf` to `path` under the rule (begin, write, commit). */
int icpp_fs_write_file(const char *path, const void *buf, size_t len, mode_t mode, icpp_err *err);

/* For a file written while it grows (the sample stream), which must stay
 * readable if the writer is killed: the rule, then an existing regular file
 * is renamed to PATH.old (itself checked by the rule) and `path` is created
 * O_CREAT|O_EXCL|O_NOFOLLOW with `mode`.  *kind says what was there.  Returns
 * the descriptor or -errno with *err set. */
int icpp_fs_create_stream(const char *path, mode_t mode, int *kind, icpp_err *err);

/* ---- the lock beside a file replaced by rename ----
 * A file replaced by rename cannot itself carry a lock (each writer would
 * lock another inode), so writers that read, merge and replace one (the
 * path maps: lib/pathmap.h) lock a stable file beside it, PATH.lock, with
 * flock(LOCK_EX): exclusive, waited for, released when the holder closes it
 * or dies (docs/file-safety.md, "The concurrency rule for maps").  The lock
 * file is created O_CREAT|O_NOFOLLOW (a link there is refused, never
 * followed) with ICPP_FS_MODE_PLAIN; one that is not a regular file, or
 * belongs to another user in a sticky directory, is refused like an output.
 * The holder removes it before releasing it; a waiter that then finds the
 * name gone or naming another file starts again, so two writers never hold
 * locks on two different files of one name. */
typedef struct icpp_fs_lock {
    int   fd;       /* the locked file; -1 when not held */
    char *path;     /* PATH.lock */
} icpp_fs_lock;

/* Take the lock of `path` (wait while another process holds it).  Returns 0
 * or -errno with *err set (then nothing is held). */
int  icpp_fs_lock_beside(icpp_fs_lock *lk, const char *path, icpp_err *err);
/* Remove the lock file and release the lock (nothing when not held). */
void icpp_fs_unlock(icpp_fs_lock *lk);

/* write() all of it, retrying on EINTR: 0, or the errno (ENOSPC for a short
 * write that made no progress). */
int icpp_fs_write_all(int fd, const void *p, size_t n);

/* Remove the directory `dir` and everything below it (a tool's own scratch
 * directory: icpp-train's copies, icpp-rewrite --verify's), never following
 * a link: each level is opened O_NOFOLLOW and its entries removed relative to
 * it, so a link planted there is removed, not its target.  Best effort: what
 * cannot be removed stays; below 16 levels nothing is entered. */
void icpp_fs_remove_tree(const char *dir);

#endif
