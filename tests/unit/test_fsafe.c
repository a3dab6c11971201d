/* test_fsafe.c -- inputs opened without blocking, and the output rule: links, FIFOs, devices, sticky directories, modes, replacement, write errors. */
#include "check.h"
#include "fsafe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[] = "/tmp/icpp-fsafe-XXXXXX";

static const char *P(const char *name)
{
    static char b[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(b[i], sizeof b[i], "%s/%s", dir, name);
    return b[i];
}

static void put(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");
    fputs(s, f);
    fclose(f);
}

static int has(const char *path, const char *s)
{
    char b[256] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = 0;
    return !strcmp(b, s);
}

/* Files of dir whose name contains ".tmp." (left-over temporaries). */
static int temporaries(const char *d)
{
    DIR *dh = opendir(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dh)) != NULL)
        n += strstr(de->d_name, ".tmp.") != NULL;
    closedir(dh);
    return n;
}

static int mode_of(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

int main(void)
{
    icpp_err err = {0};
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    chmod(dir, 0755);
    umask(022);

    /* ---- inputs ---- */
    put(P("in"), "hello");
    struct stat st;
    int fd = icpp_fs_open_input(P("in"), &st, &err);
    char b[16] = "";
    CHECK(fd >= 0 && read(fd, b, sizeof b) == 5 && !strcmp(b, "hello") && st.st_size == 5, "regular input: %s", err.msg);
    CHECK(fd < 0 || !(fcntl(fd, F_GETFL) & O_NONBLOCK), "O_NONBLOCK left set on an input");
    if (fd >= 0)
        close(fd);
    CHECK(mkfifo(P("fifo"), 0600) == 0, "mkfifo");
    time_t t0 = time(NULL);
    CHECK(icpp_fs_open_input(P("fifo"), NULL, &err) == -EINVAL && strstr(err.msg, "FIFO") &&
          strstr(err.msg, P("fifo")), "FIFO input: %s", err.msg);
    CHECK(time(NULL) - t0 < 2, "a FIFO input blocked");
    CHECK(icpp_fs_open_input(dir, NULL, &err) == -EINVAL && strstr(err.msg, "directory"), "dir input: %s", err.msg);
    CHECK(icpp_fs_open_input("/dev/null", NULL, &err) == -EINVAL && strstr(err.msg, "character device"),
          "device input: %s", err.msg);
    CHECK(icpp_fs_open_input(P("nope"), NULL, &err) == -ENOENT && strstr(err.msg, "No such file"), "missing: %s",
          err.msg);
    CHECK(symlink(P("in"), P("in-link")) == 0, "symlink");
    fd = icpp_fs_open_input(P("in-link"), NULL, &err);
    CHECK(fd >= 0, "a link to a regular file is a fine input: %s", err.msg);
    if (fd >= 0)
        close(fd);
    CHECK(icpp_fs_check_regular(P("in"), &err) == 0 && icpp_fs_check_regular(P("fifo"), &err) == -EINVAL,
          "check_regular: %s", err.msg);

    /* ---- the output rule ---- */
    CHECK(icpp_fs_output_check(P("new"), &err) == ICPP_FS_ABSENT, "absent: %s", err.msg);
    CHECK(icpp_fs_output_check(P("in"), &err) == ICPP_FS_REGULAR, "regular: %s", err.msg);
    CHECK(icpp_fs_output_check("/dev/null", &err) == ICPP_FS_CHARDEV, "device: %s", err.msg);
    CHECK(icpp_fs_output_check(P("in-link"), &err) == -ELOOP && strstr(err.msg, "symbolic link"), "link: %s",
          err.msg);
    CHECK(icpp_fs_output_check(P("fifo"), &err) == -EINVAL && strstr(err.msg, "FIFO"), "fifo: %s", err.msg);
    CHECK(icpp_fs_output_check(dir, &err) == -EINVAL && strstr(err.msg, "directory"), "dir: %s", err.msg);

    /* Replacement: new content, the mode asked (umask applied), no temporary left. */
    put(P("out"), "old");
    chmod(P("out"), 0600);
    CHECK(icpp_fs_write_file(P("out"), "new", 3, 0664, &err) == 0 && has(P("out"), "new"), "replace: %s", err.msg);
    CHECK(mode_of(P("out")) == 0644, "mode %o, want 0644 (0664 & ~022)", mode_of(P("out")));
    CHECK(icpp_fs_write_file(P("made"), "x", 1, ICPP_FS_MODE_MEMORY, &err) == 0 && mode_of(P("made")) == 0600,
          "memory mode %o", mode_of(P("made")));
    /* Through a link: refused, the target untouched, the link kept. */
    put(P("target"), "precious");
    chmod(P("target"), 0600);
    CHECK(symlink(P("target"), P("lnk")) == 0, "symlink");
    CHECK(icpp_fs_write_file(P("lnk"), "evil", 4, 0755, &err) == -ELOOP, "write through a link: %s", err.msg);
    CHECK(has(P("target"), "precious") && mode_of(P("target")) == 0600 && mode_of(P("lnk")) == 0777,
          "the link's target changed");
    /* A device is written in place and stays a device. */
    CHECK(icpp_fs_write_file("/dev/null", "x", 1, 0644, &err) == 0 && stat("/dev/null", &st) == 0 &&
          S_ISCHR(st.st_mode), "/dev/null: %s", err.msg);
    /* Abort keeps the previous file. */
    icpp_fs_out o;
    CHECK(icpp_fs_out_begin(&o, P("out"), 0644, &err) == 0, "begin: %s", err.msg);
    FILE *f = icpp_fs_out_fopen(&o);
    fputs("half", f);
    icpp_fs_out_abort(&o);
    CHECK(has(P("out"), "new") && temporaries(dir) == 0, "abort: previous lost or temporary left");
    /* A write error at commit (a full disk: RLIMIT_FSIZE) keeps the previous file. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old_lim, lim = {100, 100};
    getrlimit(RLIMIT_FSIZE, &old_lim);
    CHECK(icpp_fs_out_begin(&o, P("out"), 0644, &err) == 0, "begin: %s", err.msg);
    f = icpp_fs_out_fopen(&o);
    setrlimit(RLIMIT_FSIZE, &lim);
    for (int i = 0; i < 100; i++)
        fputs("0123456789", f);
    int r = icpp_fs_out_commit(&o, &err);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    CHECK(r == -EFBIG && strstr(err.msg, "write failed") && strstr(err.msg, "kept"), "full: %d %s", r, err.msg);
    CHECK(has(P("out"), "new") && temporaries(dir) == 0, "full: previous lost or temporary left");

    /* A signal before commit removes the new file and still ends the process
     * by that signal; the previous file stays. */
    pid_t pid = fork();
    if (pid == 0) {
        icpp_fs_out so;
        if (icpp_fs_out_begin(&so, P("out"), 0644, NULL) < 0)
            _exit(3);
        icpp_fs_out_remove_on_signal(&so);
        fputs("partial", icpp_fs_out_fopen(&so));
        raise(SIGTERM);
        _exit(4);
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    CHECK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGTERM, "signalled writer: status %#x", wst);
    CHECK(has(P("out"), "new") && temporaries(dir) == 0, "signal: previous lost or temporary left");

    /* Streams: the old file becomes .old, the new one is created 0600. */
    int kind;
    fd = icpp_fs_create_stream(P("out"), ICPP_FS_MODE_MEMORY, &kind, &err);
    CHECK(fd >= 0 && kind == ICPP_FS_REGULAR && has(P("out.old"), "new") && mode_of(P("out")) == 0600,
          "stream: %s", err.msg);
    if (fd >= 0)
        close(fd);
    CHECK(icpp_fs_create_stream(P("lnk"), 0600, &kind, &err) == -ELOOP && has(P("target"), "precious"),
          "stream through a link: %s", err.msg);
    CHECK(icpp_fs_create_stream(P("fifo"), 0600, &kind, &err) == -EINVAL, "stream into a FIFO: %s", err.msg);
    fd = icpp_fs_create_stream("/dev/null", 0600, &kind, &err);
    CHECK(fd >= 0 && kind == ICPP_FS_CHARDEV, "stream to /dev/null: %s", err.msg);
    if (fd >= 0)
        close(fd);

    /* Sticky directories: another user's file is not ours to replace (as root
     * too); our own is.  Needs root to give a file to another user. */
    mkdir(P("sticky"), 01777);
    chmod(P("sticky"), 01777);
    put(P("sticky/theirs"), "theirs");
    put(P("sticky/mine"), "mine");
    if (geteuid() == 0) {
        CHECK(chown(P("sticky/theirs"), 65534, 65534) == 0, "chown");
        CHECK(icpp_fs_output_check(P("sticky/theirs"), &err) == -EPERM && strstr(err.msg, "another user") &&
              strstr(err.msg, "sticky"), "theirs: %s", err.msg);
        CHECK(icpp_fs_write_file(P("sticky/theirs"), "x", 1, 0644, &err) == -EPERM && has(P("sticky/theirs"), "theirs"),
              "theirs replaced: %s", err.msg);
        /* A stream's PATH.old of another user is refused before anything moves. */
        put(P("sticky/s"), "s");
        put(P("sticky/s.old"), "their old");
        CHECK(chown(P("sticky/s.old"), 65534, 65534) == 0, "chown");
        CHECK(icpp_fs_create_stream(P("sticky/s"), 0600, &kind, &err) == -EPERM && has(P("sticky/s"), "s") &&
              has(P("sticky/s.old"), "their old"), "stream over their .old: %s", err.msg);
        /* Outside a sticky directory, another user's file is replaced (rename, never written into). */
        put(P("plain"), "p");
        CHECK(chown(P("plain"), 65534, 65534) == 0, "chown");
        CHECK(icpp_fs_write_file(P("plain"), "q", 1, 0644, &err) == 0 && has(P("plain"), "q"), "plain: %s", err.msg);
    } else {
        printf("test_fsafe: not root: the other-user cases run in e2e-file-safety\n");
    }
    CHECK(icpp_fs_write_file(P("sticky/mine"), "new", 3, 0644, &err) == 0 && has(P("sticky/mine"), "new"),
          "own file in a sticky directory: %s", err.msg);
    CHECK(temporaries(dir) == 0 && temporaries(P("sticky")) == 0, "temporaries left");

    /* The same-file rule: an output that is an input (the same path, a hard
     * link) is refused, naming both; another file or an absent output is not. */
    put(P("input"), "input");
    CHECK(link(P("input"), P("hardlink")) == 0, "link");
    char in_other[512], in_input[512];     /* P()'s buffers are reused */
    snprintf(in_other, sizeof in_other, "%s", P("other"));
    snprintf(in_input, sizeof in_input, "%s", P("input"));
    const char *ins[] = {in_other, NULL, in_input};
    put(P("other"), "other");
    CHECK(icpp_fs_output_not_input(P("input"), ins, 3, &err) == -EINVAL && strstr(err.msg, "same file") &&
          strstr(err.msg, "input"), "output = input: %s", err.msg);
    CHECK(icpp_fs_output_not_input(P("hardlink"), ins, 3, &err) == -EINVAL && strstr(err.msg, P("hardlink")) &&
          strstr(err.msg, P("input")), "output = a hard link of an input: %s", err.msg);
    CHECK(icpp_fs_output_not_input(P("fresh"), ins, 3, &err) == 0, "absent output refused: %s", err.msg);
    CHECK(icpp_fs_output_not_input(P("out"), ins, 3, &err) == 0, "another file refused: %s", err.msg);

    /* Pairs: both or neither. */
    mkdir(P("pair"), 0755);
    icpp_fs_out pa, pb;
    put(P("pair/a"), "old a");
    put(P("pair/b"), "old b");
    CHECK(icpp_fs_out_begin(&pa, P("pair/a"), 0644, &err) == 0 && icpp_fs_out_begin(&pb, P("pair/b"), 0644, &err) == 0,
          "pair begin: %s", err.msg);
    fputs("new a", icpp_fs_out_fopen(&pa));
    fputs("new b", icpp_fs_out_fopen(&pb));
    CHECK(icpp_fs_out_commit_pair(&pa, &pb, &err) == 0 && has(P("pair/a"), "new a") && has(P("pair/b"), "new b") &&
          temporaries(P("pair")) == 0, "pair: %s", err.msg);
    /* The second rename fails (its path became a non-empty directory): the
     * first is put back, as it was or absent as it was. */
    for (int absent = 0; absent < 2; absent++) {
        if (absent)
            unlink(P("pair/a"));
        else
            put(P("pair/a"), "old a");
        CHECK(icpp_fs_out_begin(&pa, P("pair/a"), 0644, &err) == 0 && icpp_fs_out_begin(&pb, P("pair/c"), 0644, &err) == 0,
              "pair begin: %s", err.msg);
        fputs("new a", icpp_fs_out_fopen(&pa));
        fputs("new c", icpp_fs_out_fopen(&pb));
        mkdir(P("pair/c"), 0755);
        put(P("pair/c/x"), "x");
        r = icpp_fs_out_commit_pair(&pa, &pb, &err);
        CHECK(r < 0 && strstr(err.msg, "neither") && (absent ? access(P("pair/a"), F_OK) != 0 : has(P("pair/a"), "old a")) &&
              temporaries(P("pair")) == 0, "second rename failed (%s): %d %s",
              absent ? "no previous first" : "a previous first", r, err.msg);
        unlink(P("pair/c/x"));
        rmdir(P("pair/c"));
    }
    /* A write error in either: neither is replaced. */
    put(P("pair/a"), "old a");
    CHECK(icpp_fs_out_begin(&pa, P("pair/a"), 0644, &err) == 0 && icpp_fs_out_begin(&pb, P("pair/b"), 0644, &err) == 0,
          "pair begin: %s", err.msg);
    fputs("new a", icpp_fs_out_fopen(&pa));
    f = icpp_fs_out_fopen(&pb);
    setrlimit(RLIMIT_FSIZE, &lim);
    for (int i = 0; i < 100; i++)
        fputs("0123456789", f);
    r = icpp_fs_out_commit_pair(&pa, &pb, &err);
    setrlimit(RLIMIT_FSIZE, &old_lim);
    CHECK(r == -EFBIG && strstr(err.msg, "neither") && has(P("pair/a"), "old a") && has(P("pair/b"), "new b") &&
          temporaries(P("pair")) == 0, "pair, full: %d %s", r, err.msg);

    /* Once a tool asks (icpp_fs_remove_temps_on_signal), every new file not
     * yet in place is removed by SIGINT, which still ends the process. */
    pid = fork();
    if (pid == 0) {
        icpp_fs_remove_temps_on_signal();
        if (icpp_fs_out_begin(&pa, P("pair/a"), 0644, NULL) < 0 || icpp_fs_out_begin(&pb, P("pair/b"), 0644, NULL) < 0)
            _exit(3);
        fputs("partial", icpp_fs_out_fopen(&pa));
        fputs("partial", icpp_fs_out_fopen(&pb));
        raise(SIGINT);
        _exit(4);
    }
    waitpid(pid, &wst, 0);
    CHECK(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGINT, "signalled pair writer: status %#x", wst);
    CHECK(has(P("pair/a"), "old a") && has(P("pair/b"), "new b") && temporaries(P("pair")) == 0,
          "signal: previous lost or temporaries left");

    /* ---- the lock beside a map (icpp_fs_lock_beside) ---- */
    icpp_fs_lock lk;
    struct stat ls;
    CHECK(icpp_fs_lock_beside(&lk, P("m"), &err) == 0 && lk.fd >= 0, "lock: %s", err.msg);
    CHECK(lstat(P("m.lock"), &ls) == 0 && S_ISREG(ls.st_mode) && (ls.st_mode & 0777) == 0644, "no 0644 m.lock");
    /* A second taker waits for the first, then holds a lock on the file
     * named m.lock -- not on the one the first removed. */
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    pid_t kid = fork();
    if (kid == 0) {
        close(lk.fd);       /* the parent's lock, not the child's (flock: per open file) */
        icpp_fs_lock k2;
        struct stat a, bs;
        int ok = icpp_fs_lock_beside(&k2, P("m"), &err) == 0;
        char v = ok && fstat(k2.fd, &a) == 0 && lstat(P("m.lock"), &bs) == 0 && a.st_ino == bs.st_ino ? 'y' : 'n';
        if (write(pfd[1], &v, 1) != 1)
            _exit(2);
        icpp_fs_unlock(&k2);
        _exit(0);
    }
    struct timespec nap = {0, 200 * 1000 * 1000};
    nanosleep(&nap, NULL);
    char got = 0;
    fcntl(pfd[0], F_SETFL, O_NONBLOCK);
    CHECK(read(pfd[0], &got, 1) < 0, "a second writer took a held lock");
    icpp_fs_unlock(&lk);
    CHECK(lk.fd == -1 && lstat(P("m.lock"), &ls) < 0, "unlock left m.lock");
    fcntl(pfd[0], F_SETFL, 0);
    CHECK(read(pfd[0], &got, 1) == 1 && got == 'y', "the waiter's lock is not on the file named m.lock (%c)", got);

    CHECK(waitpid(kid, &wst, 0) == kid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "lock child");
    CHECK(lstat(P("m.lock"), &ls) < 0, "m.lock left");
    /* A lock left by a killed holder is no lock: taken at once. */
    put(P("m.lock"), "");
    CHECK(icpp_fs_lock_beside(&lk, P("m"), &err) == 0, "leftover m.lock: %s", err.msg);
    icpp_fs_unlock(&lk);
    /* Never through a link, never a FIFO. */
    CHECK(symlink(P("victim"), P("l.lock")) == 0, "symlink");
    CHECK(icpp_fs_lock_beside(&lk, P("l"), &err) == -ELOOP && strstr(err.msg, "symbolic link") &&
          lstat(P("victim"), &ls) < 0, "lock through a link: %s", err.msg);
    CHECK(mkfifo(P("f.lock"), 0600) == 0, "mkfifo");
    CHECK(icpp_fs_lock_beside(&lk, P("f"), &err) == -EINVAL && strstr(err.msg, "FIFO"), "FIFO lock: %s", err.msg);

    /* A scratch tree removed whole, a link in it removed, not followed. */
    CHECK(mkdir(P("t"), 0700) == 0 && mkdir(P("t/a"), 0700) == 0 && mkdir(P("t/a/b"), 0700) == 0, "mkdir t");
    put(P("t/f"), "x");
    put(P("t/a/b/g"), "y");
    put(P("outside"), "keep");
    CHECK(mkdir(P("outdir"), 0700) == 0, "mkdir outdir");
    put(P("outdir/h"), "keep");
    CHECK(symlink(P("outside"), P("t/a/l")) == 0 && symlink(P("outdir"), P("t/ld")) == 0, "symlinks");
    icpp_fs_remove_tree(P("t"));
    CHECK(lstat(P("t"), &ls) < 0, "remove_tree left t");
    CHECK(has(P("outside"), "keep") && has(P("outdir/h"), "keep"), "remove_tree followed a link");
    icpp_fs_remove_tree(P("t"));   /* gone already: nothing happens */
    return check_done("fsafe");
}
