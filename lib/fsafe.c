/* fsafe.c -- file safety: opening untrusted paths without blocking, and the one rule by which every tool creates and replaces its outputs (docs/file-safety.md). */
#include "fsafe.h"

#include <errno.h>
#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <stdint.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
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

/* ---- files named inside inputs ---- */

#define NOBODY 65534u
#define MAX_GROUPS 256

static struct {
    int    guard;               /* icpp_fs_named_guard was called */
    int    depth;               /* named scopes entered */
    int    owners;              /* 0: no other user's input read; 1: one (uid); 2: several */
    uid_t  uid;                 /* whose rights (valid when owners) */
    gid_t  gid;
    gid_t  groups[MAX_GROUPS];  /* the owner's supplementary groups */
    int    ngroups;
    gid_t  saved[MAX_GROUPS];   /* ours, while in a scope */
    int    nsaved;
} named;

void icpp_fs_named_guard(void) { named.guard = 1; }

long icpp_fs_named_uid(void)
{
    return named.guard && named.owners && geteuid() == 0 ? (long)named.uid : -1;
}

/* The owner of an input the user named: another user's makes named files
 * opened with that user's rights (several users': nobody's). */
static void note_owner(const struct stat *st)
{
    if (!named.guard || geteuid() != 0 || st->st_uid == 0 || st->st_uid == geteuid())
        return;
    if (named.owners == 2 || (named.owners == 1 && named.uid == st->st_uid))
        return;
    named.ngroups = 0;
    if (named.owners == 1) {    /* a second user: only what anyone may read */
        named.owners = 2;
        named.uid = NOBODY;
        named.gid = NOBODY;
        return;
    }
    named.owners = 1;
    named.uid = st->st_uid;
    named.gid = NOBODY;         /* a user with no passwd entry: nogroup, no groups */
    struct passwd *pw = getpwuid(st->st_uid);
    if (pw) {
        int n = MAX_GROUPS;
        named.gid = pw->pw_gid;
        if (getgrouplist(pw->pw_name, pw->pw_gid, named.groups, &n) >= 0)
            named.ngroups = n;
        else
            named.groups[named.ngroups++] = pw->pw_gid;
    }
}

/* The thread's credentials, by system call: glibc's setgroups would change
 * every thread's. */
static int set_groups(int n, const gid_t *g) { return (int)syscall(SYS_setgroups, (size_t)n, g); }

static void restore_ids(void)
{
    setfsuid(geteuid());
    setfsgid(getegid());
    set_groups(named.nsaved, named.saved);
}

int icpp_fs_named_begin(icpp_err *err)
{
    if (named.depth++ || icpp_fs_named_uid() < 0)
        return 0;
    named.nsaved = getgroups(MAX_GROUPS, named.saved);
    if (named.nsaved < 0 || set_groups(named.ngroups, named.groups) < 0) {
        int e = errno;
        if (named.nsaved >= 0)
            set_groups(named.nsaved, named.saved);
        named.depth--;
        return icpp_err_set(err, e, "cannot take the rights of uid %u to open the files a recording or map names: %s",
                            (unsigned)named.uid, strerror(e));
    }
    /* setfsuid/setfsgid say only what was there: ask again to see it took */
    setfsgid(named.gid);
    setfsuid(named.uid);
    if ((gid_t)setfsgid((gid_t)-1) != named.gid || (uid_t)setfsuid((uid_t)-1) != named.uid) {
        restore_ids();
        named.depth--;
        return icpp_err_set(err, EPERM, "cannot take the rights of uid %u to open the files a recording or map names",
                            (unsigned)named.uid);
    }
    return 0;
}

void icpp_fs_named_end(void)
{
    if (named.depth > 0 && --named.depth == 0 && icpp_fs_named_uid() >= 0)
        restore_ids();
}

int icpp_fs_open_input(const char *path, struct stat *st, icpp_err *err)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (named.depth && icpp_fs_named_uid() >= 0 && (e == EACCES || e == EPERM))
            return icpp_err_set(err, e, "%s: not readable for uid %u, who owns the input that names it", path,
                                (unsigned)named.uid);
        return icpp_err_set(err, e, "%s: %s", path, strerror(e));
    }
    struct stat s;
    if (fstat(fd, &s) < 0) {
        int e = errno;
        close(fd);
        return icpp_err_set(err, e, "%s: %s", path, strerror(e));
    }
    if (!named.depth)
        note_owner(&s);
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

int icpp_fs_output_not_input(const char *out, const char *const *inputs, size_t n, icpp_err *err)
{
    struct stat so, si;
    if (stat(out, &so) < 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (inputs[i] && stat(inputs[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino)
            return icpp_err_set(err, EINVAL,
                                "%s is the same file as the input %s: ICPP never writes over its input; choose "
                                "another output path",
                                out, inputs[i]);
    return 0;
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

/* New files a signal should remove (icpp_fs_remove_temps_on_signal): a few
 * slots of pointers to their malloc'd names, set while a name exists and
 * cleared before it is freed, so the handler reads only stable strings and
 * calls only unlink, signal and raise (async-signal-safe). */
enum { SIG_SLOTS = 8 };
static char *volatile sig_tmps[SIG_SLOTS];
static volatile sig_atomic_t sig_enabled;
static const int sig_nums[] = {SIGINT, SIGTERM, SIGHUP};

static void on_signal(int sig)
{
    for (int i = 0; i < SIG_SLOTS; i++) {
        char *t = sig_tmps[i];
        if (t)
            unlink(t);
    }
    signal(sig, SIG_DFL);
    raise(sig);     /* blocked until the handler returns: then the default action */
}

/* Our handler on each of sig_nums whose action is the default (a tool's
 * own handler or an ignored signal is left alone). */
static void install_handlers(void)
{
    for (size_t i = 0; i < sizeof sig_nums / sizeof *sig_nums; i++) {
        struct sigaction old, sa;
        if (sigaction(sig_nums[i], NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sigaction(sig_nums[i], &sa, NULL);
        }
    }
}

static void sig_register(char *tmp)
{
    int free_slot = -1;
    for (int i = 0; i < SIG_SLOTS; i++) {
        if (sig_tmps[i] == tmp)
            return;
        if (!sig_tmps[i] && free_slot < 0)
            free_slot = i;
    }
    if (free_slot >= 0)
        sig_tmps[free_slot] = tmp;
}

static void sig_unregister(const char *tmp)
{
    for (int i = 0; i < SIG_SLOTS && tmp; i++)
        if (sig_tmps[i] == tmp)
            sig_tmps[i] = NULL;
}

void icpp_fs_remove_temps_on_signal(void)
{
    sig_enabled = 1;
    install_handlers();
}

void icpp_fs_out_remove_on_signal(icpp_fs_out *o)
{
    icpp_fs_remove_temps_on_signal();
    if (o->tmp)
        sig_register(o->tmp);
}

/* Block the signals the handler catches (while a new file is created and
 * registered, or a pair renamed); *old receives the previous mask. */
static void sig_block(sigset_t *old)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof sig_nums / sizeof *sig_nums; i++)
        sigaddset(&set, sig_nums[i]);
    sigprocmask(SIG_BLOCK, &set, old);
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
    int fd;
    if (k == ICPP_FS_CHARDEV)
        fd = open_device(path, err);
    else if (!sig_enabled)
        fd = create_beside(path, mode, &o->tmp, err);
    else {
        /* No signal between the new file's creation and its registration. */
        sigset_t old;
        sig_block(&old);
        install_handlers();
        fd = create_beside(path, mode, &o->tmp, err);
        if (fd >= 0)
            sig_register(o->tmp);
        sigprocmask(SIG_SETMASK, &old, NULL);
    }
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

static void out_free(icpp_fs_out *o)
{
    sig_unregister(o->tmp);
    free(o->path);
    free(o->tmp);
    o->path = o->tmp = NULL;
    o->fd = -1;
    o->fp = NULL;
}

/* Flush, fsync (a new file) and close o: 0 or the errno of the first failure. */
static int out_finish(icpp_fs_out *o)
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
    o->fd = -1;
    o->fp = NULL;
    return e;
}

int icpp_fs_out_commit(icpp_fs_out *o, icpp_err *err)
{
    int e = out_finish(o);
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

/* Put a's new file at a's path so that it can be undone: 1 when the
 * previous file was exchanged with it (now at a->tmp), 2 when there was no
 * previous file, 3 when it was replaced for good (a file system without
 * RENAME_EXCHANGE); -errno when nothing changed. */
static int pair_first(icpp_fs_out *a)
{
    if (renameat2(AT_FDCWD, a->tmp, AT_FDCWD, a->path, RENAME_EXCHANGE) == 0)
        return 1;
    if (errno == ENOENT && renameat2(AT_FDCWD, a->tmp, AT_FDCWD, a->path, RENAME_NOREPLACE) == 0)
        return 2;
    if ((errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) && rename(a->tmp, a->path) == 0)
        return 3;
    return -errno;
}

int icpp_fs_out_commit_pair(icpp_fs_out *first, icpp_fs_out *last, icpp_err *err)
{
    icpp_fs_out *both[2] = {first, last};
    icpp_fs_out *bad = NULL;
    int e = 0;
    for (int i = 0; i < 2; i++) {
        int ei = out_finish(both[i]);
        if (ei && !e)
            e = ei, bad = both[i];
    }
    char *fp = first->path, *lp = last->path;
    if (e) {
        for (int i = 0; i < 2; i++)
            if (both[i]->tmp)
                unlink(both[i]->tmp);
        icpp_err_set(err, e, "%s: write failed: %s (neither %s nor %s was changed)", bad->path, strerror(e), fp, lp);
        out_free(first);
        out_free(last);
        return -e;
    }
    /* Both complete; no signal while they are renamed (it would remove the
     * second while the first is in place). */
    sigset_t old;
    sig_block(&old);
    int how = first->tmp ? pair_first(first) : 0;
    if (how < 0) {
        e = -how;
        unlink(first->tmp);
        if (last->tmp)
            unlink(last->tmp);
        icpp_err_set(err, e, "%s: cannot replace: %s (neither %s nor %s was changed)", fp, strerror(e), fp, lp);
    } else if (last->tmp && rename(last->tmp, last->path) < 0) {
        e = errno;
        unlink(last->tmp);
        /* Undo the first: its previous file back (or none, as before). */
        int undone = how == 1 ? renameat2(AT_FDCWD, first->tmp, AT_FDCWD, fp, RENAME_EXCHANGE) == 0
                   : how == 2 ? unlink(fp) == 0
                              : 0;
        if (undone) {
            if (how == 1)
                unlink(first->tmp);
            icpp_err_set(err, e, "%s: cannot replace: %s (neither %s nor %s was changed)", lp, strerror(e), fp, lp);
        } else {
            icpp_err_set(err, e, "%s: cannot replace: %s, and %s, already replaced, could not be put back: the two "
                                 "do not belong together; remove both",
                         lp, strerror(e), fp);
        }
    } else if (how == 1) {
        unlink(first->tmp);     /* the previous file */
    }
    out_free(first);
    out_free(last);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return e ? -e : 0;
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

/* Empty the directory open as `fd` (closed here), `depth` levels down. */
static void remove_below(int fd, int depth)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
            int sub = depth < 16 ? openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
            if (sub >= 0)
                remove_below(sub, depth + 1);
            unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
        } else {
            unlinkat(dirfd(d), de->d_name, 0);
        }
    }
    closedir(d);
}

void icpp_fs_remove_tree(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0)
        remove_below(fd, 0);
    rmdir(dir);
}
