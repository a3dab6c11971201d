/* fsafe.c -- file safety: opening untrusted paths without blocking, and the one rule by which every tool creates and replaces its outputs (docs/file-safety.md). */
#include "fsafe.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* "a FIFO", "a directory", ... for messages. */
static const char *kind_name(mode_t m)
{
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

static int set_blocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

int icpp_fs_open_input(const char *path, struct stat *st, icpp_err *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) < 0) {
        int e = errno;
        close(fd);
        return icpp_err_set(err, e, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(s.st_mode)) {
        close(fd);
        return icpp_err_set(err, EINVAL, "%s: not a regular file (%s); give a file", path, kind_name(s.st_mode));
    }
    if (set_blocking(fd) < 0) {
        int e = errno;
        close(fd);
        return icpp_err_set(err, e, "%s: %s", path, strerror(e));
    }
    if (st)
        *st = s;
    return fd;
}

int icpp_fs_check_regular(const char *path, icpp_err *err)
{
    struct stat s;
    if (stat(path, &s) < 0)
        return icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
    if (!S_ISREG(s.st_mode))
        return icpp_err_set(err, EINVAL, "%s: not a regular file (%s); give a program file", path,
                            kind_name(s.st_mode));
    return 0;
}

/* The directory part of path, malloc'd ("." when there is none). */
static char *dir_of(const char *path)
{
    const char *sl = strrchr(path, '/');
    if (!sl)
        return strdup(".");
    if (sl == path)
        return strdup("/");
    return strndup(path, (size_t)(sl - path));
}

/* An existing file (lstat'ed into *st) owned by someone else in a sticky
 * directory is not ours to replace: /tmp's protection, kept even as root
 * and whatever fs.protected_* say. */
static int foreign_in_sticky(const char *path, const struct stat *st, icpp_err *err)
{
    if (st->st_uid == geteuid())
        return 0;
    char *dir = dir_of(path);
    if (!dir)
        return icpp_err_set(err, ENOMEM, "%s: out of memory", path);
    struct stat ds;
    int sticky = stat(dir, &ds) == 0 && (ds.st_mode & S_ISVTX);
    int r = 0;
    if (sticky)
        r = icpp_err_set(err, EPERM,
                         "%s belongs to another user (uid %u) in the sticky directory %s: ICPP does not replace "
                         "it; choose another output path",
                         path, (unsigned)st->st_uid, dir);
    free(dir);
    return r;
}

int icpp_fs_output_check(const char *path, icpp_err *err)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno == ENOENT)
            return ICPP_FS_ABSENT;
        return icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
    }
    if (S_ISLNK(st.st_mode))
        return icpp_err_set(err, ELOOP,
                            "%s is a symbolic link: ICPP does not write through links; give the file's own path "
                            "or remove the link",
                            path);
    if (S_ISCHR(st.st_mode))
        return ICPP_FS_CHARDEV;
    if (!S_ISREG(st.st_mode))
        return icpp_err_set(err, EINVAL, "%s is %s, not a regular file: give a regular file's path", path,
                            kind_name(st.st_mode));
    int r = foreign_in_sticky(path, &st, err);
    return r < 0 ? r : ICPP_FS_REGULAR;
}

/* Open the character device at path for writing, checking it still is one. */
static int open_device(const char *path, icpp_err *err)
{
    int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return icpp_err_set(err, errno, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || set_blocking(fd) < 0) {
        close(fd);
        return icpp_err_set(err, EINVAL, "%s changed while being opened: give a regular file's path", path);
    }
    return fd;
}

/* A new file PATH.tmp.XXXXXX beside path, O_EXCL|O_NOFOLLOW, with mode. */
static int create_beside(const char *path, mode_t mode, char **tmpp, icpp_err *err)
{
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    if (!tmp)
        return icpp_err_set(err, ENOMEM, "%s: out of memory", path);
    static unsigned counter;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 20) ^ (uint64_t)(uintptr_t)tmp;
    for (int tries = 0; tries < 100; tries++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull + counter++;
        snprintf(tmp, n, "%s.tmp.%06x", path, (unsigned)(x >> 40));
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0) {
            *tmpp = tmp;
            return fd;
        }
        if (errno != EEXIST) {
            int e = errno;
            free(tmp);
            return icpp_err_set(err, e, "%s: cannot create a file beside it: %s", path, strerror(e));
        }
    }
    free(tmp);
    return icpp_err_set(err, EEXIST, "%s: cannot create a file beside it: too many taken names", path);
}

int icpp_fs_out_begin(icpp_fs_out *o, const char *path, mode_t mode, icpp_err *err)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    int k = icpp_fs_output_check(path, err);
    if (k < 0)
        return k;
    if (!(o->path = strdup(path)))
        return icpp_err_set(err, ENOMEM, "%s: out of memory", path);
    int fd = k == ICPP_FS_CHARDEV ? open_device(path, err) : create_beside(path, mode, &o->tmp, err);
    if (fd < 0) {
        free(o->path);
        o->path = NULL;
        return fd;
    }
    o->fd = fd;
    return 0;
}

FILE *icpp_fs_out_fopen(icpp_fs_out *o)
{
    if (!o->fp)
        o->fp = fdopen(o->fd, "w");
    return o->fp;
}

/* The new file a signal should remove (icpp_fs_out_remove_on_signal). */
static char *volatile sig_tmp;

static void on_signal(int sig)
{
    char *t = sig_tmp;
    if (t)
        unlink(t);
    signal(sig, SIG_DFL);
    raise(sig);
}

void icpp_fs_out_remove_on_signal(icpp_fs_out *o)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    if (!o->tmp)
        return;
    sig_tmp = o->tmp;
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sigaction(sigs[i], &sa, NULL);
        }
    }
}

static void out_free(icpp_fs_out *o)
{
    if (sig_tmp && sig_tmp == o->tmp)
        sig_tmp = NULL;
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    o->fd = -1;
    o->fp = NULL;
}

int icpp_fs_out_commit(icpp_fs_out *o, icpp_err *err)
{
    int e = 0;
    if (o->fp) {
        errno = 0;
        if (fflush(o->fp) != 0 || ferror(o->fp))
            e = errno ? errno : EIO;
    }
    if (!e && o->tmp && fsync(o->fd) < 0)
        e = errno;
    if ((o->fp ? fclose(o->fp) : close(o->fd)) != 0 && !e)
        e = errno;
    if (e) {
        if (o->tmp)
            unlink(o->tmp);
        icpp_err_set(err, e, "%s: write failed: %s%s", o->path, strerror(e),
                     o->tmp ? " (the previous file, if any, is kept)" : "");
        out_free(o);
        return -e;
    }
    if (o->tmp && rename(o->tmp, o->path) < 0) {
        e = errno;
        unlink(o->tmp);
        icpp_err_set(err, e, "%s: cannot replace: %s", o->path, strerror(e));
        out_free(o);
        return -e;
    }
    out_free(o);
    return 0;
}

void icpp_fs_out_abort(icpp_fs_out *o)
{
    if (o->fd >= 0) {
        if (o->fp)
            fclose(o->fp);
        else
            close(o->fd);
    }
    if (o->tmp)
        unlink(o->tmp);
    out_free(o);
}

int icpp_fs_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return w < 0 ? errno : ENOSPC;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int icpp_fs_write_file(const char *path, const void *buf, size_t len, mode_t mode, icpp_err *err)
{
    icpp_fs_out o;
    int r = icpp_fs_out_begin(&o, path, mode, err);
    if (r < 0)
        return r;
    int e = icpp_fs_write_all(o.fd, buf, len);
    if (e) {
        icpp_fs_out_abort(&o);
        return icpp_err_set(err, e, "%s: write failed: %s (the previous file, if any, is kept)", path,
                            strerror(e));
    }
    return icpp_fs_out_commit(&o, err);
}

int icpp_fs_create_stream(const char *path, mode_t mode, int *kind, icpp_err *err)
{
    int k = icpp_fs_output_check(path, err);
    if (k < 0)
        return k;
    *kind = k;
    if (k == ICPP_FS_CHARDEV)
        return open_device(path, err);
    if (k == ICPP_FS_REGULAR) {
        size_t n = strlen(path) + 8;
        char *old = malloc(n);
        if (!old)
            return icpp_err_set(err, ENOMEM, "%s: out of memory", path);
        snprintf(old, n, "%s.old", path);
        struct stat st;
        int r = lstat(old, &st) == 0 ? foreign_in_sticky(old, &st, err) : 0;
        if (r == 0 && rename(path, old) < 0)
            r = icpp_err_set(err, errno, "%s: exists and cannot be renamed to %s: %s", path, old, strerror(errno));
        free(old);
        if (r < 0)
            return r;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        return icpp_err_set(err, errno, "%s: cannot create: %s%s", path, strerror(errno),
                            errno == EEXIST ? " (something else created it meanwhile)" : "");
    return fd;
}

/* ---- the lock beside a file replaced by rename ---- */

int icpp_fs_lock_beside(icpp_fs_lock *lk, const char *path, icpp_err *err)
{
    lk->fd = -1;
    if (asprintf(&lk->path, "%s.lock", path) < 0) {
        lk->path = NULL;
        return icpp_err_set(err, ENOMEM, "%s: out of memory", path);
    }
    int rc = 0;
    while (rc == 0) {
        /* No link followed, no blocking on a FIFO; created if absent.  Read
         * only: flock needs no more, and another user's lock file in a
         * shared (not sticky) directory can be locked too. */
        int fd = open(lk->path, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                      ICPP_FS_MODE_PLAIN);
        if (fd < 0) {
            int e = errno;
            rc = e == ELOOP ? icpp_err_set(err, e, "%s is a symbolic link: ICPP does not lock a map through links; "
                                           "remove the link", lk->path)
                            : icpp_err_set(err, e, "%s: cannot open the map's lock file: %s", lk->path, strerror(e));
            break;
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
            rc = icpp_err_set(err, errno, "%s: %s", lk->path, strerror(errno));
        else if (!S_ISREG(st.st_mode))
            rc = icpp_err_set(err, EINVAL, "%s is %s, not a regular file: it is the name of the map's lock file; "
                              "remove it", lk->path, kind_name(st.st_mode));
        else if (st.st_uid != geteuid()) {
            char *dir = dir_of(lk->path);
            struct stat ds;
            if (!dir)
                rc = icpp_err_set(err, ENOMEM, "%s: out of memory", lk->path);
            else if (stat(dir, &ds) == 0 && (ds.st_mode & S_ISVTX))
                rc = icpp_err_set(err, EPERM,
                                  "%s belongs to another user (uid %u) in the sticky directory %s: ICPP does not "
                                  "wait on a lock file another user controls; choose another output path",
                                  lk->path, (unsigned)st.st_uid, dir);
            free(dir);
        }
        while (rc == 0 && flock(fd, LOCK_EX) < 0)
            if (errno != EINTR)
                rc = icpp_err_set(err, errno, "%s: cannot lock the map's lock file: %s", lk->path, strerror(errno));
        if (rc < 0) {
            close(fd);
            break;
        }
        /* The holder before us may have removed the name (and someone made
         * a new file there): then ours is a lock nobody else takes; again. */
        struct stat now;
        if (lstat(lk->path, &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino) {
            lk->fd = fd;
            return 0;
        }
        close(fd);
    }
    free(lk->path);
    lk->path = NULL;
    return rc;
}

void icpp_fs_unlock(icpp_fs_lock *lk)
{
    if (lk->fd < 0)
        return;
    unlink(lk->path);       /* while held: see icpp_fs_lock_beside */
    close(lk->fd);
    lk->fd = -1;
    free(lk->path);
    lk->path = NULL;
}
