/* verify.c -- --verify: run PROG and OUT alike, compare their output, train OUT and check every height against the prediction. */
#include "verify.h"

#include "codec.h"
#include "fsafe.h"
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

/* One --verify: its files, its runs and trainings, what they gave. */
typedef struct vrun {
    const rw_verify_opts *o;
    char         *prog_real, *out_real, *train;
    char          tdir[sizeof "/tmp/icpp-rewrite-verify.XXXXXX"];
    char          xp[PATH_MAX + 256], xo[PATH_MAX + 256];  /* the copies of PROG and OUT */
    char        **av;                   /* argv of a run */
    icpp_pathmap *pk[NOFF];             /* PROG's trainings, at four stack offsets */
    icpp_pathmap *pred[NOFF];           /* ... each padded as OUT is: the predictions */
    icpp_pathmap *got, *omap;           /* OUT's training, OUT's map */
    uint32_t     *mk[NOFF], *mt, *mo;   /* node matches: pred[k] -> pred[0], got -> pred[0], got -> omap */
    uint8_t      *unstable;             /* per node of pred[0]: its heights differ across offsets */
    char         *outs[3];              /* stdout of the plain runs */
    size_t        lens[3];
    int           s_prog, s_out;        /* their exit status */
    int           bad, out_differs;
} vrun;

static int verify_oom(void)
{
    fprintf(stderr, "icpp-rewrite: --verify: out of memory\n");
    return -1;
}

/* Copies of PROG and OUT at paths of equal length: T/p/NAME and T/o/NAME.
 * 0, or -1 (said on stderr). */
static int verify_setup(vrun *v)
{
    const rw_verify_opts *o = v->o;
    v->prog_real = realpath(o->prog, NULL), v->out_real = realpath(o->out, NULL), v->train = train_path();
    v->av = calloc((size_t)o->nargs + 16, sizeof *v->av);
    if (!v->prog_real || !v->out_real || !v->train || !v->av || !mkdtemp(v->tdir)) {
        fprintf(stderr, "icpp-rewrite: --verify: cannot set up: %s\n", strerror(errno));
        return -1;
    }
    const char *name = strrchr(v->prog_real, '/') ? strrchr(v->prog_real, '/') + 1 : v->prog_real;
    char dp[PATH_MAX], dox[PATH_MAX];
    snprintf(dp, sizeof dp, "%s/p", v->tdir);
    snprintf(dox, sizeof dox, "%s/o", v->tdir);
    snprintf(v->xp, sizeof v->xp, "%s/%s", dp, name);
    snprintf(v->xo, sizeof v->xo, "%s/%s", dox, name);
    if (mkdir(dp, 0700) < 0 || mkdir(dox, 0700) < 0 || copy_file(v->prog_real, v->xp) < 0 ||
        copy_file(v->out_real, v->xo) < 0) {
        fprintf(stderr, "icpp-rewrite: --verify: cannot copy the programs into %s\n", v->tdir);
        return -1;
    }
    link_siblings(v->prog_real, dp);
    link_siblings(v->prog_real, dox);
    return 0;
}

/* 1. Plain runs of PROG and OUT.  0, or -1 (said on stderr). */
static int verify_plain_runs(vrun *v)
{
    const rw_verify_opts *o = v->o;
    char **av = v->av;
    for (int i = 0; i < o->nargs; i++)
        av[1 + i] = o->args[i];
    av[0] = v->xp;
    v->s_prog = run(av, 0, &v->outs[0], &v->lens[0]);
    av[0] = v->xo;
    v->s_out = run(av, 0, &v->outs[1], &v->lens[1]);
    if (v->s_prog < 0 || v->s_out < 0) {
        fprintf(stderr, "icpp-rewrite: --verify: cannot run the programs\n");
        return -1;
    }
    if (v->s_prog != v->s_out || v->lens[0] != v->lens[1] || (v->lens[0] && memcmp(v->outs[0], v->outs[1], v->lens[0]))) {
        printf("verify: FAIL: %s and %s differ: exit %d vs %d, %zu vs %zu bytes of output%s\n", o->prog, o->out,
               v->s_prog, v->s_out, v->lens[0], v->lens[1], v->lens[0] == v->lens[1] ? " (other bytes)" : "");
        v->bad = 1;
        v->out_differs = 1;
    }
    return 0;
}

/* PROG's training m (at offset k) padded as OUT is: v->pred[k].  0, or -1
 * (said on stderr). */
static int verify_predict(vrun *v, int k, icpp_pathmap *m)
{
    const rw_verify_opts *o = v->o;
    icpp_err err;
    v->pk[k] = m;
    const icpp_pm_module *mm = icpp_pathmap_module(m, icpp_pathmap_main(m));
    icpp_build_id nb;
    if (icpp_elf_build_id(v->xo, &nb, &err) < 0) {
        fprintf(stderr, "icpp-rewrite: --verify: %s\n", err.msg);
        return -1;
    }
    uint32_t *cl = malloc(icpp_pathmap_nnodes(m) * sizeof *cl);
    if (!cl || icpp_arr_callers(m, o->ranges, o->nranges, cl, NULL) < 0) {
        free(cl);
        return verify_oom();
    }
    icpp_pathmap *cm = icpp_arr_clone_map(m, o->clones, o->nclones, NULL, &err);
    v->pred[k] = cm ? icpp_arr_apply(cm, cl, o->pads, o->npads, o->wraps, o->nwraps, mm->path, &nb, &err) : NULL;
    icpp_pathmap_free(cm);
    free(cl);
    if (!v->pred[k]) {
        fprintf(stderr, "icpp-rewrite: --verify: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* 2. Trainings: PROG at four stack offsets, OUT at the first; and OUT's
 * map.  0, 1 (no training came back: said on stdout), or -1 (on stderr). */
static int verify_trainings(vrun *v)
{
    const rw_verify_opts *o = v->o;
    char mapf[PATH_MAX + 64], **av = v->av;
    icpp_err err;
    for (int k = 0; k <= NOFF; k++) {
        int n = 0;
        snprintf(mapf, sizeof mapf, "%s/map%d", v->tdir, k);
        av[n++] = v->train;
        av[n++] = "--fresh";
        av[n++] = "-q";
        av[n++] = "-o";
        av[n++] = mapf;
        av[n++] = "--";
        av[n++] = k < NOFF ? v->xp : v->xo;
        for (int i = 0; i < o->nargs; i++)
            av[n++] = o->args[i];
        av[n] = NULL;
        char *tout;
        size_t tlen;
        int st = run(av, k < NOFF ? 16 * k : 0, &tout, &tlen);
        if (k == NOFF && (st != v->s_prog || tlen != v->lens[0] || (tlen && memcmp(tout, v->outs[0], tlen)))) {
            printf("verify: FAIL: %s under icpp-train: exit %d vs %d, %zu vs %zu bytes of output\n", o->out, st,
                   v->s_prog, tlen, v->lens[0]);
            v->bad = 1;
            v->out_differs = 1;
        }
        free(tout);
        icpp_pathmap *m = icpp_pathmap_read(mapf, &err);
        if (!m) {
            printf("verify: FAIL: no training came back (%s)\n", err.msg);
            return 1;
        }
        if (k == NOFF)
            v->got = m;
        else if (verify_predict(v, k, m) < 0)
            return -1;
    }
    if (!(v->omap = icpp_pathmap_read(o->out_map, &err))) {
        fprintf(stderr, "icpp-rewrite: --verify: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* 3. Stable paths of the prediction: the same heights at every offset
 * (v->unstable marks the others).  0, or -1 out of memory. */
static int verify_stable(vrun *v)
{
    size_t n0 = icpp_pathmap_nnodes(v->pred[0]);
    v->unstable = calloc(n0, 1);
    uint8_t *seen = calloc(n0, 1);
    if (!v->unstable || !seen) {
        free(seen);
        return verify_oom();
    }
    for (int k = 1; k < NOFF; k++) {
        if (!(v->mk[k] = match_nodes(v->pred[0], v->pred[k]))) {
            free(seen);
            return verify_oom();
        }
        memset(seen, 0, n0);
        for (uint32_t j = 1; j < icpp_pathmap_nnodes(v->pred[k]); j++) {
            uint32_t q = v->mk[k][j];
            if (q == NONE)
                continue;
            seen[q] = 1;
            if (!same_heights(icpp_pathmap_node(v->pred[0], q), icpp_pathmap_node(v->pred[k], j)))
                v->unstable[q] = 1;
        }
        for (uint32_t q = 1; q < n0; q++)
            if (!seen[q])
                v->unstable[q] = 1;    /* not in every run */
    }
    free(seen);
    return 0;
}

/* What step 4 counts. */
typedef struct vcounts {
    size_t nst, st_ok, st_map_ok, st_nomap, st_unrepro;    /* stable paths: all, as trained, as in OUT's map, ... */
    size_t nal, al_ok, al_map_ok;                           /* alignment-dependent paths */
    size_t only_train, only_map;
} vcounts;

/* Whether each trained height of OUT's node g is one of the four predictions of pred[0]'s node q. */
static int within_predictions(const vrun *v, const icpp_pm_node *g, uint32_t q)
{
    const icpp_pm_node *p0 = icpp_pathmap_node(v->pred[0], q);
    int all = 1;
    for (uint32_t h = 0; h < g->nheights && all; h++) {
        int found = has_height(p0, g->heights[h].height);
        for (int k = 1; k < NOFF && !found; k++)
            for (uint32_t j = 1; j < icpp_pathmap_nnodes(v->pred[k]) && !found; j++)
                if (v->mk[k][j] == q)
                    found = has_height(icpp_pathmap_node(v->pred[k], j), g->heights[h].height);
        all = found;
    }
    return all;
}

/* 4. OUT's training against both predictions.  0, or -1 out of memory. */
static int verify_compare(vrun *v, vcounts *c)
{
    icpp_pathmap *got = v->got, *omap = v->omap;
    if (!(v->mt = match_nodes(v->pred[0], got)) || !(v->mo = match_nodes(omap, got)))
        return verify_oom();
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(got); i++) {
        const icpp_pm_node *g = icpp_pathmap_node(got, i);
        uint32_t q = v->mt[i];
        if (q == NONE) {
            c->only_train++;
            continue;
        }
        const icpp_pm_node *p0 = icpp_pathmap_node(v->pred[0], q);
        const icpp_pm_node *pm = v->mo[i] != NONE ? icpp_pathmap_node(omap, v->mo[i]) : NULL;
        if (!v->unstable[q]) {
            c->nst++;
            if (same_heights(g, p0)) {
                c->st_ok++;
            } else {
                report_path("heights differ from PROG's training shifted by the paddings", got, i, p0);
                v->bad = 1;
            }
            if (!pm) {
                c->st_nomap++;  /* a path the original training did not take */
            } else if (same_heights(g, pm)) {
                c->st_map_ok++;
            } else if (!same_heights(p0, pm)) {
                /* PROG's fresh training differs from MAP here too: MAP was
                 * made under other conditions (another agent build, another
                 * environment); the comparison with the fresh training above
                 * is the one that holds. */
                c->st_unrepro++;
            } else {
                report_path("heights differ from OUT's map", got, i, pm);
                v->bad = 1;
            }
        } else {
            c->nal++;
            /* Each trained height must be one of the four predictions. */
            if (within_predictions(v, g, q))
                c->al_ok++;
            else {
                report_path("alignment-dependent heights outside every prediction", got, i, p0);
                v->bad = 1;
            }
            c->al_map_ok += pm && same_heights(g, pm);
        }
    }
    uint8_t *hit = calloc(icpp_pathmap_nnodes(omap), 1);
    if (!hit)
        return verify_oom();
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(got); i++)
        if (v->mo[i] != NONE)
            hit[v->mo[i]] = 1;
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(omap); i++)
        c->only_map += !hit[i];
    free(hit);
    return 0;
}

static void verify_summary(const vrun *v, const vcounts *c)
{
    printf("verify: output and exit status (%d): %s\n", v->s_out, v->out_differs ? "DIFFER" : "identical");
    printf("verify: %zu stable paths: %zu exactly as PROG's training shifted by the paddings; %zu of %zu in OUT's "
           "map exactly as it predicts\n",
           c->nst, c->st_ok, c->st_map_ok, c->nst - c->st_nomap - c->st_unrepro);
    if (c->st_unrepro)
        printf("verify: %zu stable paths where MAP itself is not reproduced by training PROG here (another agent "
               "build or environment): checked against this training only\n",
               c->st_unrepro);
    printf("verify: %zu alignment-dependent paths (below lazy binding or signal frames): %zu within the "
           "predictions, %zu equal to OUT's map in this run\n",
           c->nal, c->al_ok, c->al_map_ok);
    printf("verify: %zu paths only in OUT's training, %zu only in OUT's map (runs that take other paths)\n",
           c->only_train, c->only_map);
    if (!v->bad && !v->o->quiet)
        printf("verify: OK\n");
    if (v->bad)
        printf("verify: FAILED\n");
}

static void verify_free(vrun *v)
{
    for (int k = 0; k < NOFF; k++) {
        icpp_pathmap_free(v->pk[k]);
        icpp_pathmap_free(v->pred[k]);
        free(v->mk[k]);
    }
    icpp_pathmap_free(v->got);
    icpp_pathmap_free(v->omap);
    free(v->mt);
    free(v->mo);
    free(v->unstable);
    for (int i = 0; i < 3; i++)
        free(v->outs[i]);
    if (v->tdir[strlen(v->tdir) - 1] != 'X')
        icpp_fs_remove_tree(v->tdir);
    free(v->prog_real);
    free(v->out_real);
    free(v->train);
    free(v->av);
}

int rw_verify(const rw_verify_opts *o)
{
    vrun v = {.o = o, .tdir = "/tmp/icpp-rewrite-verify.XXXXXX"};
    vcounts c = {0};
    int rc = verify_setup(&v);
    if (!rc)
        rc = verify_plain_runs(&v);
    if (!rc)
        rc = verify_trainings(&v);
    if (!rc)
        rc = verify_stable(&v);
    if (!rc)
        rc = verify_compare(&v, &c);
    if (!rc) {
        verify_summary(&v, &c);
        rc = v.bad ? 1 : 0;
    }
    verify_free(&v);
    return rc;
}
