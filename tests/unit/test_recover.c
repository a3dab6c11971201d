/* test_recover.c -- icpp-train/recover.c: live files of a SIGKILLed target recovered exactly, and corrupt ones refused without a crash. */
#include "check.h"
#include "recover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* usage: test_recover AGENT_SO KILLEE
 * Runs `KILLEE main` (tests/e2e/killee.c) with the agent, SIGKILLs it at
 * its marker, and checks what icpp_recover_live makes of its live file
 * against the program's source: run_main calls stage_a and stage_b 10
 * times each, each calls its leaf once.  Then damages copies of the files
 * (random bytes, truncation) and checks each is either recovered or
 * refused with a message naming it -- under ASan in the sanitized build. */

static char dir[] = "/tmp/icpp-test-recover.XXXXXX";

static void rm_dir(const char *d)
{
    DIR *dd = opendir(d);
    struct dirent *de;
    while (dd && (de = readdir(dd)) != NULL) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", d, de->d_name);
        if (de->d_name[0] != '.')
            unlink(p);
    }
    if (dd)
        closedir(dd);
    rmdir(d);
}

static int run_killee(const char *agent, const char *killee)
{
    int p[2];
    if (pipe(p) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        setenv("LD_PRELOAD", agent, 1);
        setenv("ICPP_TRAIN_DIR", dir, 1);
        setenv("ICPP_TRAIN_MODULES", "main", 1);
        unsetenv("ASAN_OPTIONS");
        execl(killee, killee, "main", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char buf[256];
    ssize_t n = read(p[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(p[0]);
    usleep(200000);     /* the marker is printed just before main;block is entered */
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    return strstr(buf, "killee ready") && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? 0 : -1;
}

/* The node for names[0];...;names[n-1] (a suffix after the map's roots,
 * e.g. _start), or 0. */
static uint32_t find_path(const icpp_pathmap *pm, const char *const *names, uint32_t n)
{
    uint32_t f[64];
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(pm); i++) {
        uint32_t d = icpp_pathmap_path(pm, i, f, 64);
        if (d < n || d > 64)
            continue;
        uint32_t k = 0;
        while (k < n && !strcmp(icpp_pathmap_func(pm, f[d - n + k])->name, names[k]))
            k++;
        if (k == n)
            return i;
    }
    return 0;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(b, 1, n, f);
        fclose(f);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_recover AGENT_SO KILLEE\n");
        return 2;
    }
    /* names */
    int pid, tid;
    uint64_t ns;
    CHECK(icpp_recover_name("live.12.34.5678", "live.", &pid, &tid, &ns) == 0 && pid == 12 && tid == 34 && ns == 5678,
          "live name");
    CHECK(icpp_recover_name("part.1.2.3.icppmap", "part.", &pid, &tid, &ns) == 0 && ns == 3, "part name");
    CHECK(icpp_recover_name("part.1.2.3.icppmap", "live.", &pid, &tid, &ns) < 0, "wrong prefix");
    CHECK(icpp_recover_name("live.1.2", "live.", &pid, &tid, &ns) < 0, "too few fields");
    CHECK(icpp_recover_name("live.1.2.3x", "live.", &pid, &tid, &ns) < 0, "trailing junk");
    CHECK(icpp_recover_name("live.99999999999.2.3", "live.", &pid, &tid, &ns) < 0, "pid too large");

    if (!mkdtemp(dir) || run_killee(argv[1], argv[2]) < 0) {
        CHECK(0, "could not run %s with %s and kill it at its marker", argv[2], argv[1]);
        rm_dir(dir);
        return check_done("recover");
    }
    char live[256] = "", syms[256] = "";
    DIR *d = opendir(dir);
    struct dirent *de;
    int nlive = 0;
    while (d && (de = readdir(d)) != NULL) {
        if (!strncmp(de->d_name, "live.", 5) && ++nlive)
            snprintf(live, sizeof live, "%s", de->d_name);
        if (!strncmp(de->d_name, "syms.", 5))
            snprintf(syms, sizeof syms, "%s", de->d_name);
    }
    if (d)
        closedir(d);
    CHECK(nlive == 1 && syms[0], "want one live file and a function table, got %d live, syms '%s'", nlive, syms);

    /* The intact file: the program's counts. */
    icpp_err err;
    int empty;
    icpp_pathmap *pm = icpp_recover_live(dir, live, &empty, &err);
    CHECK(pm != NULL, "intact live file: %s", pm ? "" : err.msg);
    if (pm) {
        static const char *const a[] = {"main", "run_main", "stage_a", "leaf_a"};
        static const char *const b[] = {"main", "run_main", "stage_b", "leaf_b"};
        static const char *const blk[] = {"main", "block"};
        uint32_t na = find_path(pm, a, 4), nb = find_path(pm, b, 4), nblk = find_path(pm, blk, 2);
        CHECK(na && icpp_pathmap_node(pm, na)->count == 10, "main;run_main;stage_a;leaf_a: want count 10");
        CHECK(nb && icpp_pathmap_node(pm, nb)->count == 10, "main;run_main;stage_b;leaf_b: want count 10");
        CHECK(nblk && icpp_pathmap_node(pm, nblk)->count == 1, "main;block: want count 1");
        /* each leaf was entered at one height, 10 times */
        CHECK(na && icpp_pathmap_node(pm, na)->nheights == 1 && icpp_pathmap_node(pm, na)->heights[0].count == 10,
              "leaf_a: want one height counted 10 times");
        const char *rec = icpp_pathmap_meta(pm, "recovered");
        CHECK(rec && !strcmp(rec, "1"), "meta recovered");
        CHECK(icpp_pathmap_main(pm) < icpp_pathmap_nmodules(pm), "main module");
        icpp_pathmap_free(pm);
    }

    /* Damaged copies, in a second directory (same names). */
    char dir2[] = "/tmp/icpp-test-recover2.XXXXXX", lp[512], sp[512], lp2[512], sp2[512];
    CHECK(mkdtemp(dir2) != NULL, "mkdtemp");
    snprintf(lp, sizeof lp, "%s/%s", dir, live);
    snprintf(sp, sizeof sp, "%s/%s", dir, syms);
    snprintf(lp2, sizeof lp2, "%s/%s", dir2, live);
    snprintf(sp2, sizeof sp2, "%s/%s", dir2, syms);
    size_t ll, sl;
    uint8_t *lb = slurp(lp, &ll), *sb = slurp(sp, &sl);
    CHECK(lb && sb && ll > 4096 && sl > 8, "read the files");
    if (lb && sb) {
        uint8_t *w = malloc(ll > sl ? ll : sl);
        unsigned seed = 12345;
        int ok = 0, refused = 0, bad_msg = 0;
        for (int it = 0; it < 3000; it++) {
            int what = it % 3;      /* 0: live bytes, 1: live truncated, 2: syms bytes or cut */
            memcpy(w, lb, ll);
            size_t wl = ll;
            if (what == 0) {
                int k = 1 + (int)(rand_r(&seed) % 8);
                for (int j = 0; j < k; j++) {
                    /* mostly the header and the first chunk, where the tree is */
                    size_t span = rand_r(&seed) % 2 ? 8192 : ll;
                    w[rand_r(&seed) % (span < ll ? span : ll)] ^= (uint8_t)(1 + rand_r(&seed) % 255);
                }
            } else if (what == 1) {
                wl = rand_r(&seed) % ll;
            }
            spit(lp2, w, wl);
            if (what == 2) {
                memcpy(w, sb, sl);
                size_t swl = sl;
                if (rand_r(&seed) % 2)
                    swl = rand_r(&seed) % sl;
                else
                    w[rand_r(&seed) % sl] ^= (uint8_t)(1 + rand_r(&seed) % 255);
                spit(sp2, w, swl);
            } else {
                spit(sp2, sb, sl);
            }
            pm = icpp_recover_live(dir2, live, &empty, &err);
            if (pm) {
                ok++;
                icpp_pathmap_free(pm);
            } else if (!empty) {
                refused++;
                if (!strstr(err.msg, dir2))
                    bad_msg++;
            }
        }
        printf("recover: 3000 damaged copies: %d recovered, %d refused, %d empty\n", ok, refused, 3000 - ok - refused);
        CHECK(bad_msg == 0, "%d refusals do not name the file", bad_msg);
        CHECK(refused > 100 && ok > 100, "want both outcomes among damaged copies: %d recovered, %d refused", ok,
              refused);
        free(w);
    }
    free(lb);
    free(sb);
    rm_dir(dir2);
    rm_dir(dir);
    return check_done("recover");
}
