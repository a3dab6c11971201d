/* verify.c -- --verify: run PROG and OUT alike, compare their output, train OUT and check every height against the prediction. */
#include "verify.h"

#include "codec.h"
#include "hmap.h"
#include "module.h"
#include "pathmap.h"
#include "search.h"
#include "sibling.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Why not simply train OUT and compare with OUT.icppmap?  Some heights are
 * not properties of the binary: below a frame that realigns the stack at
 * run time (ld.so's lazy-binding trampoline saves registers with xsave at a
 * 64-byte boundary; the kernel puts signal frames on 64-byte boundaries) a
 * height depends on where the stack starts modulo 64, which ASLR and the
 * size of the environment change from run to run.  So the runs here use one
 * stack layout: ASLR off (personality), copies of PROG and OUT at paths of
 * equal length, the same environment.  PROG is trained at four stack offsets
 * (an environment variable of 0, 16, 32, 48 bytes): a path whose heights
 * agree at all four is "stable" and must come out of OUT's training exactly
 * as predicted -- from this training of PROG and from OUT.icppmap alike; an
 * "alignment-dependent" path must come out as one of its four predictions. */

#define NONE UINT32_MAX
#define NOFF 4

/* icpp-train: $ICPP_TRAIN, else beside icpp-rewrite (the build tree, an
 * install), else from PATH. */
static char *train_path(void)
{
    static const char *const rel[] = {"../icpp-train/icpp-train", "icpp-train"};
    char *p = icpp_sibling_find("ICPP_TRAIN", rel, sizeof rel / sizeof *rel, X_OK);
    return p ? p : strdup("icpp-train");    /* from PATH */
}

/* Run argv (stdin /dev/null, ASLR off, ICPP_REWRITE_STACK_PAD of `pad`
 * bytes in the environment); stdout goes into *out.  Returns the exit status
 * (128+N for signal N), or -1 if it could not run. */
static int run(char *const *argv, int pad, char **out, size_t *outlen)
{
    char tmpl[] = "/tmp/icpp-rewrite-out.XXXXXX";
    int fd = mkstemp(tmpl);
    *out = NULL;
    *outlen = 0;
    if (fd < 0)
        return -1;
    unlink(tmpl);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return -1;
    }
    if (pid == 0) {
        char val[64];
        memset(val, 'x', (size_t)pad);
        val[pad] = 0;
        setenv("ICPP_REWRITE_STACK_PAD", val, 1);
        personality(ADDR_NO_RANDOMIZE);     /* inherited across exec */
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
        dup2(fd, 1);
        execvp(argv[0], argv);
        fprintf(stderr, "icpp-rewrite: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int wst;
    while (waitpid(pid, &wst, 0) < 0)
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    off_t len = lseek(fd, 0, SEEK_END);
    *out = malloc((size_t)len + 1);
    if (*out && len > 0 && pread(fd, *out, (size_t)len, 0) == len)
        *outlen = (size_t)len;
    close(fd);
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
}

static int copy_file(const char *from, const char *to)
{
    uint8_t *buf;
    size_t len;
    icpp_err err;
    if (icpp_read_file(from, (size_t)1 << 34, &buf, &len, &err) < 0)
        return -1;
    int fd = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0755);   /* a private directory */
    ssize_t w = fd >= 0 ? write(fd, buf, len) : -1;
    free(buf);
    if (fd >= 0)
        close(fd);
    return w == (ssize_t)len ? 0 : -1;
}

/* Shared objects beside PROG (plugins a program dlopens from its own
 * directory) are linked beside the copies too. */
static void link_siblings(const char *prog_real, const char *dir)
{
    char *d = strdup(prog_real), *pd = dirname(d);
    DIR *dh = opendir(pd);
    struct dirent *de;
    while (dh && (de = readdir(dh)) != NULL) {
        size_t n = strlen(de->d_name);
        if (!(n > 3 && !strcmp(de->d_name + n - 3, ".so")) && !strstr(de->d_name, ".so."))
            continue;
        char src[PATH_MAX + 256], dst[PATH_MAX + 256];
        snprintf(src, sizeof src, "%s/%s", pd, de->d_name);
        snprintf(dst, sizeof dst, "%s/%s", dir, de->d_name);
        if (symlink(src, dst) < 0) {
            /* best effort: a program that needs it will show the difference */
        }
    }
    if (dh)
        closedir(dh);
    free(d);
}

static void rm_tree(const char *dir)
{
    DIR *dh = opendir(dir);
    struct dirent *de;
    while (dh && (de = readdir(dh)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char p[PATH_MAX + 256];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            rm_tree(p);
        else
            unlink(p);
    }
    if (dh)
        closedir(dh);
    rmdir(dir);
}

/* ---- matching paths of two maps ---- */

static uint64_t bid_key(const icpp_build_id *b)
{
    uint64_t h = b->len;
    for (uint8_t i = 0; i < b->len; i++)
        h = icpp_hash2(h, b->bytes[i]);
    return h;
}

/* For every node of `other`, the node of `ref` with the same path (functions
 * named by module build-id and address), or NONE.  malloc'd. */
static uint32_t *match_nodes(const icpp_pathmap *ref, const icpp_pathmap *other)
{
    icpp_hmap fix, cix;
    icpp_hmap_init(&fix);
    icpp_hmap_init(&cix);
    size_t nof = icpp_pathmap_nfuncs(other), non = icpp_pathmap_nnodes(other);
    uint32_t *fmap = malloc((nof + 1) * sizeof *fmap), *nmap = malloc(non * sizeof *nmap);
    int ok = fmap && nmap;
    for (uint32_t f = 0; ok && f < icpp_pathmap_nfuncs(ref); f++) {
        const icpp_pm_func *pf = icpp_pathmap_func(ref, f);
        ok = icpp_hmap_put(&fix, bid_key(&icpp_pathmap_module(ref, pf->module)->build_id), pf->addr, f) == 0;
    }
    for (uint32_t i = 1; ok && i < icpp_pathmap_nnodes(ref); i++) {
        const icpp_pm_node *n = icpp_pathmap_node(ref, i);
        ok = icpp_hmap_put(&cix, n->parent, n->func, i) == 0;
    }
    for (uint32_t f = 0; ok && f < nof; f++) {
        const icpp_pm_func *gf = icpp_pathmap_func(other, f);
        uint64_t *p = icpp_hmap_get(&fix, bid_key(&icpp_pathmap_module(other, gf->module)->build_id), gf->addr);
        fmap[f] = p ? (uint32_t)*p : NONE;
    }
    if (ok) {
        nmap[0] = 0;
        for (uint32_t i = 1; i < non; i++) {
            const icpp_pm_node *n = icpp_pathmap_node(other, i);
            uint32_t q = NONE;
            if (nmap[n->parent] != NONE && fmap[n->func] != NONE) {
                uint64_t *p = icpp_hmap_get(&cix, nmap[n->parent], fmap[n->func]);
                if (p)
                    q = (uint32_t)*p;
            }
            nmap[i] = q;
        }
    }
    free(fmap);
    icpp_hmap_free(&fix);
    icpp_hmap_free(&cix);
    if (!ok) {
        free(nmap);
        return NULL;
    }
    return nmap;
}

static int has_height(const icpp_pm_node *n, int64_t h)
{
    for (uint32_t k = 0; k < n->nheights; k++)
        if (n->heights[k].height == h)
            return 1;
    return 0;
}

/* Same set of heights. */
static int same_heights(const icpp_pm_node *a, const icpp_pm_node *b)
{
    if (a->nheights != b->nheights)
        return 0;
    for (uint32_t k = 0; k < a->nheights; k++)
        if (!has_height(b, a->heights[k].height))
            return 0;
    return 1;
}

/* "h1,h2,..." of node n's heights, ascending (at most what fits in buf). */
static void heights_text(const icpp_pm_node *n, char *buf, size_t cap)
{
    int64_t prev = INT64_MIN;
    size_t at = 0;
    buf[0] = 0;
    for (uint32_t done = 0; n && done < n->nheights; done++) {
        int64_t next = INT64_MAX;
        for (uint32_t k = 0; k < n->nheights; k++)
            if (n->heights[k].height > prev && n->heights[k].height < next)
                next = n->heights[k].height;
        if (next == INT64_MAX)
            break;
        int w = snprintf(buf + at, cap - at, "%s%" PRId64, at ? "," : "", next);
        if (w < 0 || (size_t)w >= cap - at) {
            snprintf(buf + at, cap - at, ",...");
            break;
        }
        at += (size_t)w;
        prev = next;
    }
    if (!at)
        snprintf(buf, cap, "none");
}

static void report_path(const char *what, const icpp_pathmap *pm, uint32_t node, const icpp_pm_node *want)
{
    char pn[2048], got[256], exp[256];
    rw_path_name(pm, node, pn, sizeof pn);
    heights_text(icpp_pathmap_node(pm, node), got, sizeof got);
    heights_text(want, exp, sizeof exp);
    printf("verify: FAIL: %s: %s trained at heights %s, predicted %s\n", what, pn, got, exp);
}

int rw_verify(const rw_verify_opts *o)
{
    int rc = -1;
    char *prog_real = realpath(o->prog, NULL), *out_real = realpath(o->out, NULL), *train = train_path();
    char tdir[] = "/tmp/icpp-rewrite-verify.XXXXXX";
    char **av = calloc((size_t)o->nargs + 16, sizeof *av);
    icpp_pathmap *pk[NOFF] = {0}, *pred[NOFF] = {0}, *got = NULL, *omap = NULL;
    uint32_t *mk[NOFF] = {0}, *mt = NULL, *mo = NULL;
    uint8_t *unstable = NULL;
    char *outs[3] = {0};
    size_t lens[3] = {0};
    if (!prog_real || !out_real || !train || !av || !mkdtemp(tdir)) {
        fprintf(stderr, "icpp-rewrite: --verify: cannot set up: %s\n", strerror(errno));
        goto out;
    }
    /* Copies at paths of equal length: T/p/NAME and T/o/NAME. */
    const char *name = strrchr(prog_real, '/') ? strrchr(prog_real, '/') + 1 : prog_real;
    char dp[PATH_MAX], dox[PATH_MAX], xp[PATH_MAX + 256], xo[PATH_MAX + 256];
    snprintf(dp, sizeof dp, "%s/p", tdir);
    snprintf(dox, sizeof dox, "%s/o", tdir);
    snprintf(xp, sizeof xp, "%s/%s", dp, name);
    snprintf(xo, sizeof xo, "%s/%s", dox, name);
    if (mkdir(dp, 0700) < 0 || mkdir(dox, 0700) < 0 || copy_file(prog_real, xp) < 0 || copy_file(out_real, xo) < 0) {
        fprintf(stderr, "icpp-rewrite: --verify: cannot copy the programs into %s\n", tdir);
        goto out;
    }
    link_siblings(prog_real, dp);
    link_siblings(prog_real, dox);

    /* 1. Plain runs. */
    for (int i = 0; i < o->nargs; i++)
        av[1 + i] = o->args[i];
    av[0] = xp;
    int s_prog = run(av, 0, &outs[0], &lens[0]);
    av[0] = xo;
    int s_out = run(av, 0, &outs[1], &lens[1]);
    int bad = 0, out_differs = 0;
    if (s_prog < 0 || s_out < 0) {
        fprintf(stderr, "icpp-rewrite: --verify: cannot run the programs\n");
        goto out;
    }
    if (s_prog != s_out || lens[0] != lens[1] || (lens[0] && memcmp(outs[0], outs[1], lens[0]))) {
        printf("verify: FAIL: %s and %s differ: exit %d vs %d, %zu vs %zu bytes of output%s\n", o->prog, o->out,
               s_prog, s_out, lens[0], lens[1], lens[0] == lens[1] ? " (other bytes)" : "");
        bad = 1;
        out_differs = 1;
    }

    /* 2. Trainings: PROG at four stack offsets, OUT at the first. */
    char mapf[PATH_MAX + 64];
    icpp_err err;
    for (int k = 0; k <= NOFF; k++) {
        int n = 0;
        snprintf(mapf, sizeof mapf, "%s/map%d", tdir, k);
        av[n++] = train;
        av[n++] = "--fresh";
        av[n++] = "-q";
        av[n++] = "-o";
        av[n++] = mapf;
        av[n++] = "--";
        av[n++] = k < NOFF ? xp : xo;
        for (int i = 0; i < o->nargs; i++)
            av[n++] = o->args[i];
        av[n] = NULL;
        char *tout;
        size_t tlen;
        int st = run(av, k < NOFF ? 16 * k : 0, &tout, &tlen);
        if (k == NOFF && (st != s_prog || tlen != lens[0] || (tlen && memcmp(tout, outs[0], tlen)))) {
            printf("verify: FAIL: %s under icpp-train: exit %d vs %d, %zu vs %zu bytes of output\n", o->out, st,
                   s_prog, tlen, lens[0]);
            bad = 1;
            out_differs = 1;
        }
        free(tout);
        icpp_pathmap *m = icpp_pathmap_read(mapf, &err);
        if (!m) {
            printf("verify: FAIL: no training came back (%s)\n", err.msg);
            rc = 1;
            goto out;
        }
        if (k < NOFF) {
            pk[k] = m;
            const icpp_pm_module *mm = icpp_pathmap_module(m, icpp_pathmap_main(m));
            icpp_build_id nb;
            if (icpp_elf_build_id(xo, &nb, &err) < 0) {
                fprintf(stderr, "icpp-rewrite: --verify: %s\n", err.msg);
                goto out;
            }
            uint32_t *cl = malloc(icpp_pathmap_nnodes(m) * sizeof *cl);
            if (!cl || icpp_arr_callers(m, o->ranges, o->nranges, cl, NULL) < 0) {
                free(cl);
                goto oom;
            }
            icpp_pathmap *cm = icpp_arr_clone_map(m, o->clones, o->nclones, NULL, &err);
            pred[k] = cm ? icpp_arr_apply(cm, cl, o->pads, o->npads, o->wraps, o->nwraps, mm->path, &nb, &err) : NULL;
            icpp_pathmap_free(cm);
            free(cl);
            if (!pred[k]) {
                fprintf(stderr, "icpp-rewrite: --verify: %s\n", err.msg);
                goto out;
            }
        } else {
            got = m;
        }
    }
    omap = icpp_pathmap_read(o->out_map, &err);
    if (!omap) {
        fprintf(stderr, "icpp-rewrite: --verify: %s\n", err.msg);
        goto out;
    }

    /* 3. Stable paths of the prediction: the same heights at every offset. */
    size_t n0 = icpp_pathmap_nnodes(pred[0]);
    unstable = calloc(n0, 1);
    uint8_t *seen = calloc(n0, 1);
    if (!unstable || !seen)
        goto oom;
    for (int k = 1; k < NOFF; k++) {
        if (!(mk[k] = match_nodes(pred[0], pred[k])))
            goto oom;
        memset(seen, 0, n0);
        for (uint32_t j = 1; j < icpp_pathmap_nnodes(pred[k]); j++) {
            uint32_t q = mk[k][j];
            if (q == NONE)
                continue;
            seen[q] = 1;
            if (!same_heights(icpp_pathmap_node(pred[0], q), icpp_pathmap_node(pred[k], j)))
                unstable[q] = 1;
        }
        for (uint32_t q = 1; q < n0; q++)
            if (!seen[q])
                unstable[q] = 1;    /* not in every run */
    }
    free(seen);

    /* 4. OUT's training against both predictions. */
    if (!(mt = match_nodes(pred[0], got)) || !(mo = match_nodes(omap, got)))
        goto oom;
    size_t nst = 0, st_ok = 0, st_map_ok = 0, st_nomap = 0, st_unrepro = 0, nal = 0, al_ok = 0, al_map_ok = 0, only_train = 0;
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(got); i++) {
        const icpp_pm_node *g = icpp_pathmap_node(got, i);
        uint32_t q = mt[i];
        if (q == NONE) {
            only_train++;
            continue;
        }
        const icpp_pm_node *p0 = icpp_pathmap_node(pred[0], q);
        const icpp_pm_node *pm = mo[i] != NONE ? icpp_pathmap_node(omap, mo[i]) : NULL;
        if (!unstable[q]) {
            nst++;
            if (same_heights(g, p0)) {
                st_ok++;
            } else {
                report_path("heights differ from PROG's training shifted by the paddings", got, i, p0);
                bad = 1;
            }
            if (!pm) {
                st_nomap++;     /* a path the original training did not take */
            } else if (same_heights(g, pm)) {
                st_map_ok++;
            } else if (!same_heights(p0, pm)) {
                /* PROG's fresh training differs from MAP here too: MAP was
                 * made under other conditions (another agent build, another
                 * environment); the comparison with the fresh training above
                 * is the one that holds. */
                st_unrepro++;
            } else {
                report_path("heights differ from OUT's map", got, i, pm);
                bad = 1;
            }
        } else {
            nal++;
            /* Each trained height must be one of the four predictions. */
            int all = 1;
            for (uint32_t h = 0; h < g->nheights && all; h++) {
                int found = has_height(p0, g->heights[h].height);
                for (int k = 1; k < NOFF && !found; k++)
                    for (uint32_t j = 1; j < icpp_pathmap_nnodes(pred[k]) && !found; j++)
                        if (mk[k][j] == q)
                            found = has_height(icpp_pathmap_node(pred[k], j), g->heights[h].height);
                all = found;
            }
            if (all)
                al_ok++;
            else {
                report_path("alignment-dependent heights outside every prediction", got, i, p0);
                bad = 1;
            }
            al_map_ok += pm && same_heights(g, pm);
        }
    }
    size_t only_map = 0;
    {
        uint8_t *hit = calloc(icpp_pathmap_nnodes(omap), 1);
        if (!hit)
            goto oom;
        for (uint32_t i = 1; i < icpp_pathmap_nnodes(got); i++)
            if (mo[i] != NONE)
                hit[mo[i]] = 1;
        for (uint32_t i = 1; i < icpp_pathmap_nnodes(omap); i++)
            only_map += !hit[i];
        free(hit);
    }
    printf("verify: output and exit status (%d): %s\n", s_out, out_differs ? "DIFFER" : "identical");
    printf("verify: %zu stable paths: %zu exactly as PROG's training shifted by the paddings; %zu of %zu in OUT's "
           "map exactly as it predicts\n",
           nst, st_ok, st_map_ok, nst - st_nomap - st_unrepro);
    if (st_unrepro)
        printf("verify: %zu stable paths where MAP itself is not reproduced by training PROG here (another agent "
               "build or environment): checked against this training only\n",
               st_unrepro);
    printf("verify: %zu alignment-dependent paths (below lazy binding or signal frames): %zu within the "
           "predictions, %zu equal to OUT's map in this run\n",
           nal, al_ok, al_map_ok);
    printf("verify: %zu paths only in OUT's training, %zu only in OUT's map (runs that take other paths)\n",
           only_train, only_map);
    if (!bad && !o->quiet)
        printf("verify: OK\n");
    if (bad)
        printf("verify: FAILED\n");
    rc = bad ? 1 : 0;
    goto out;
oom:
    fprintf(stderr, "icpp-rewrite: --verify: out of memory\n");
    rc = -1;
out:
    for (int k = 0; k < NOFF; k++) {
        icpp_pathmap_free(pk[k]);
        icpp_pathmap_free(pred[k]);
        free(mk[k]);
    }
    icpp_pathmap_free(got);
    icpp_pathmap_free(omap);
    free(mt);
    free(mo);
    free(unstable);
    for (int i = 0; i < 3; i++)
        free(outs[i]);
    if (tdir[strlen(tdir) - 1] != 'X')
        rm_tree(tdir);
    free(prog_real);
    free(out_real);
    free(train);
    free(av);
    return rc;
}
