/* mapset.c -- icpp-resolve's path maps: one per executable of a recording, chosen by build-id, and their union for the profile. */
#include "mapset.h"

#include "fsafe.h"

#include "alias.h"

#include "module.h"
#include "names.h"
#include "escape.h"
#include "hmap.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mapset_init(mapset *ms)
{
    memset(ms, 0, sizeof *ms);
    ms->learn_map = -1;
    ms->evidence = -1;
}

void mapset_free(mapset *ms)
{
    for (size_t i = 0; i < ms->nmaps; i++) {
        free(ms->maps[i].path);
        for (size_t k = 0; k < ms->maps[i].nsrcs; k++)
            free(ms->maps[i].srcs[k]);
        free(ms->maps[i].srcs);
        icpp_pathmap_free(ms->maps[i].pm);
        icpp_completer_free(ms->maps[i].cpl);      /* before the map and index it uses */
        icpp_cidx_free(ms->maps[i].x);
        free(ms->maps[i].node);
        free(ms->maps[i].func);
        free(ms->maps[i].mod);
    }
    for (size_t i = 0; i < ms->nbins; i++)
        free(ms->bins[i].path);
    free(ms->maps);
    free(ms->bins);
    free(ms->dirs);
    free(ms->modbin);
    free(ms->cands);
    free(ms->stacks);
    free(ms->novel);
    icpp_learn_trail_free(ms->trail);
    icpp_pathmap_free(ms->all);
    icpp_replay_close(ms->pool);
    memset(ms, 0, sizeof *ms);
}

icpp_replay *mapset_replay_open(mapset *ms, const char *samples, icpp_err *err)
{
    icpp_replay *rp = icpp_replay_open(samples, err);
    if (rp && ms->pool)
        icpp_replay_take_modules(rp, ms->pool);
    return rp;
}

void mapset_replay_close(mapset *ms, icpp_replay *rp)
{
    if (!rp)
        return;
    if (!ms->pool)
        ms->pool = icpp_replay_live();
    if (ms->pool)       /* out of memory: the next pass opens them again */
        icpp_replay_take_modules(ms->pool, rp);
    icpp_replay_close(rp);
}

/* The build-id of a map's program; an empty one (which matches nothing) for
 * a map without modules. */
static const icpp_build_id *main_bid(const icpp_pathmap *pm)
{
    static const icpp_build_id none;
    const icpp_pm_module *m = icpp_pathmap_module(pm, icpp_pathmap_main(pm));
    return m ? &m->build_id : &none;
}

/* A sample in a body shared through an entry alias is the body's function,
 * under the context training filed as the alias's (lib/alias.h): those
 * contexts are added once per map, before it learns or resolves. */
static int expand_aliases(ms_map *m, icpp_err *err)
{
    size_t added;
    if (m->expanded)
        return 0;
    m->expanded = 1;
    return icpp_alias_expand(m->pm, &added) < 0 ? icpp_err_set(err, ENOMEM, "out of memory") : 0;
}

/* Add path to the files m was read from. */
static int add_source(ms_map *m, const char *path, icpp_err *err)
{
    char **ns = realloc(m->srcs, (m->nsrcs + 1) * sizeof *ns);
    if (!ns || !(ns[m->nsrcs] = strdup(path))) {
        if (ns)
            m->srcs = ns;
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    m->srcs = ns;
    m->nsrcs++;
    return 0;
}

/* Keep a map read from path (a file unless `file` is 0); one of a build-id
 * already kept is merged into it. */
static int keep(mapset *ms, const char *path, int file, icpp_pathmap *pm, icpp_err *err)
{
    const icpp_build_id *b = main_bid(pm);
    for (size_t i = 0; b && i < ms->nmaps; i++)
        if (icpp_build_id_eq(main_bid(ms->maps[i].pm), b)) {
            int rc = icpp_pathmap_merge(ms->maps[i].pm, pm, err);
            icpp_pathmap_free(pm);
            return rc < 0 ? rc : file ? add_source(&ms->maps[i], path, err) : 0;
        }
    ms_map *nm = realloc(ms->maps, (ms->nmaps + 1) * sizeof *nm);
    if (!nm) {
        icpp_pathmap_free(pm);
        return icpp_err_set(err, ENOMEM, "out of memory");
    }
    ms->maps = nm;
    memset(&nm[ms->nmaps], 0, sizeof *nm);
    nm[ms->nmaps].pm = pm;
    nm[ms->nmaps].path = strdup(path);
    if (!nm[ms->nmaps].path)
        return icpp_err_set(err, ENOMEM, "out of memory");
    ms->nmaps++;
    return file ? add_source(&nm[ms->nmaps - 1], path, err) : 0;
}

int mapset_add_map(mapset *ms, const char *path, icpp_err *err)
{
    icpp_pathmap *pm = icpp_pathmap_read(path, err);
    return pm ? keep(ms, path, 1, pm, err) : -1;
}

int mapset_add_dir(mapset *ms, const char *dir, icpp_err *err)
{
    const char **nd = realloc(ms->dirs, (ms->ndirs + 1) * sizeof *nd);
    if (!nd)
        return icpp_err_set(err, ENOMEM, "out of memory");
    ms->dirs = nd;
    ms->dirs[ms->ndirs++] = dir;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.icppmap of the --map-dir directories, in name order.  A directory
 * that cannot be read is an error: the user named it.  A file in it that is
 * no readable map (corrupt, a FIFO, a directory) is skipped with a warning:
 * the maps beside it still serve (docs/resolve.md). */
static int read_dirs(mapset *ms, icpp_err *err)
{
    for (size_t d = 0; d < ms->ndirs; d++) {
        DIR *dp = opendir(ms->dirs[d]);
        if (!dp) {
            int e = errno;
            char e1[1024];
            return icpp_err_set(err, e, "%s: cannot read the --map-dir directory: %s",
                                icpp_escape(ms->dirs[d], e1, sizeof e1), strerror(e));
        }
        char **names = NULL, e2[1024];
        size_t n = 0;
        struct dirent *e;
        int rc = 0;
        while ((e = readdir(dp))) {
            size_t l = strlen(e->d_name);
            if (l <= 8 || strcmp(e->d_name + l - 8, ".icppmap"))
                continue;
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn || asprintf(&nn[n], "%s/%s", ms->dirs[d], e->d_name) < 0) {
                names = nn ? nn : names;
                rc = icpp_err_set(err, ENOMEM, "out of memory");
                break;
            }
            names = nn;
            n++;
        }
        closedir(dp);
        if (names)
            qsort(names, n, sizeof *names, name_cmp);
        for (size_t i = 0; i < n; i++) {
            icpp_err e1;
            if (rc == 0 && mapset_add_map(ms, names[i], &e1) < 0) {
                if (e1.code == ENOMEM) {
                    *err = e1;
                    rc = -1;
                } else {
                    /* one bad file (junk, a FIFO, a directory) does not hide the good maps beside it */
                    char eb[2048];
                    fprintf(stderr, "icpp-resolve: warning: %s; skipped it (--map-dir %s): remove or replace it\n",
                            icpp_escape(e1.msg, eb, sizeof eb), icpp_escape(ms->dirs[d], e2, sizeof e2));
                }
            }
            free(names[i]);
        }
        free(names);
        if (rc < 0)
            return rc;
    }
    ms->dirs_read = 1;
    return 0;
}

static int32_t find_map(const mapset *ms, const icpp_build_id *b)
{
    for (size_t i = 0; i < ms->nmaps; i++)
        if (icpp_build_id_eq(main_bid(ms->maps[i].pm), b))
            return (int32_t)i;
    return -1;
}

/* A map file named after the binary (steps 3 and 4): kept if it is of
 * this build-id, else named in the reason. */
static int32_t try_file(mapset *ms, ms_bin *bn, const char *path)
{
    icpp_err err;
    /* named by the recording (beside its binary): read with its owner's rights (lib/fsafe.h) */
    icpp_pathmap *pm = NULL;
    if (icpp_fs_named_begin(&err) == 0) {
        pm = icpp_pathmap_read(path, &err);
        icpp_fs_named_end();
    }
    size_t o = strlen(bn->why);
    if (!pm) {
        if (err.code != ENOENT)
            snprintf(bn->why + o, sizeof bn->why - o, "%s%s", o ? "; " : "", err.msg);
        return -1;
    }
    if (!icpp_build_id_eq(main_bid(pm), &bn->bid)) {
        snprintf(bn->why + o, sizeof bn->why - o, "%s%s is of another build", o ? "; " : "", path);   /* escaped when shown */
        icpp_pathmap_free(pm);
        return -1;
    }
    if (keep(ms, path, 1, pm, &err) < 0)
        return -1;
    return (int32_t)ms->nmaps - 1;
}

static void choose_map(mapset *ms, ms_bin *bn)
{
    bn->map = find_map(ms, &bn->bid);       /* -m and --map-dir */
    if (bn->map >= 0)
        return;
    char *p = NULL;
    if (!ms->explicit && asprintf(&p, "%s.icppmap", bn->path) >= 0) {
        bn->map = try_file(ms, bn, p);
        free(p);
    }
    const char *base = strrchr(bn->path, '/');
    base = base ? base + 1 : bn->path;
    if (bn->map < 0 && !ms->explicit && strcmp(base, bn->path) && asprintf(&p, "%s.icppmap", base) >= 0) {
        bn->map = try_file(ms, bn, p);
        free(p);
    }
    if (bn->map < 0) {
        char hex[2 * ICPP_BUILD_ID_MAX + 1];
        icpp_build_id_hex(&bn->bid, hex, sizeof hex);
        size_t o = strlen(bn->why);
        snprintf(bn->why + o, sizeof bn->why - o, "%sno map for build-id %s (give -m, --map-dir, or train it)",
                 o ? "; " : "", hex);
    }
}

int32_t mapset_bin_of(mapset *ms, const icpp_replay *rp, const icpp_rsample *s)
{
    if (s->exe_module < 0)
        return -1;
    size_t mi = (size_t)s->exe_module;
    if (mi >= ms->nmodbin) {
        size_t nn = icpp_replay_nmodules(rp) + 16;
        int32_t *v = realloc(ms->modbin, nn * sizeof *v);
        if (!v)
            return -1;
        for (size_t i = ms->nmodbin; i < nn; i++)
            v[i] = -2;
        ms->modbin = v;
        ms->nmodbin = nn;
    }
    if (ms->modbin[mi] != -2)
        return ms->modbin[mi];
    const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)mi);
    ms->modbin[mi] = -1;
    if (!rm || !rm->build_id.len)
        return -1;
    for (size_t i = 0; i < ms->nbins; i++)
        if (icpp_build_id_eq(&ms->bins[i].bid, &rm->build_id))
            return ms->modbin[mi] = (int32_t)i;
    ms_bin *nb = realloc(ms->bins, (ms->nbins + 1) * sizeof *nb);
    if (!nb)
        return -1;
    ms->bins = nb;
    ms_bin *bn = &nb[ms->nbins];
    memset(bn, 0, sizeof *bn);
    bn->path = strdup(rm->path);
    if (!bn->path)
        return -1;
    bn->bid = rm->build_id;
    choose_map(ms, bn);
    return ms->modbin[mi] = (int32_t)ms->nbins++;
}

/* Add to the union what map m has and the union does not yet: its
 * modules, functions and nodes from m->nmod, m->nfunc, m->nnode on (all of
 * them the first time; later those completion added), with the index
 * arrays grown to match.  0, or -ENOMEM. */
static int sync_map(mapset *ms, ms_map *m)
{
    const icpp_pathmap *pm = m->pm;
    size_t nmod = icpp_pathmap_nmodules(pm), nf = icpp_pathmap_nfuncs(pm), nn = icpp_pathmap_nnodes(pm);
    if (nmod > m->nmod) {
        uint32_t *v = realloc(m->mod, (nmod + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        m->mod = v;
        for (size_t i = m->nmod; i < nmod; i++) {
            const icpp_pm_module *pmm = icpp_pathmap_module(pm, (uint32_t)i);
            if (icpp_pathmap_add_module(ms->all, pmm->path, &pmm->build_id, pmm->kind, &m->mod[i]) < 0)
                return -ENOMEM;
            m->nmod = i + 1;
        }
    }
    if (nf > m->nfunc) {
        uint32_t *v = realloc(m->func, (nf + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        m->func = v;
        for (size_t i = m->nfunc; i < nf; i++) {
            const icpp_pm_func *f = icpp_pathmap_func(pm, (uint32_t)i);
            if (f->module >= m->nmod ||
                icpp_pathmap_add_func(ms->all, m->mod[f->module], f->addr, f->name, &m->func[i]) < 0)
                return -ENOMEM;
            m->nfunc = i + 1;
        }
    }
    if (nn > m->nnode) {
        uint32_t *v = realloc(m->node, (nn + 1) * sizeof *v);
        if (!v)
            return -ENOMEM;
        m->node = v;
        if (m->nnode == 0) {
            m->node[0] = 0;     /* the root */
            m->nnode = 1;
        }
        for (size_t i = m->nnode; i < nn; i++) {
            const icpp_pm_node *n = icpp_pathmap_node(pm, (uint32_t)i);
            /* a parent is made before its children: n->parent < i */
            if (n->parent >= i || n->func >= m->nfunc ||
                icpp_pathmap_child(ms->all, m->node[n->parent], m->func[n->func], &m->node[i]) < 0)
                return -ENOMEM;
            icpp_pathmap_add_count(ms->all, m->node[i], n->count);
            for (uint32_t h = 0; h < n->nheights; h++)
                if (icpp_pathmap_add_height(ms->all, m->node[i], n->heights[h].height, n->heights[h].count) < 0)
                    return -ENOMEM;
            for (uint32_t c = 0; c < n->nsites; c++)
                if (n->sites[c].module >= m->nmod ||
                    icpp_pathmap_add_site(ms->all, m->node[i], m->mod[n->sites[c].module], n->sites[c].addr,
                                          n->sites[c].count) < 0)
                    return -ENOMEM;
            m->nnode = i + 1;
        }
    }
    return 0;
}

/* The union: every used map's tree copied under the one root (paths that
 * are equal function by function, such as a shared library's, meet). */
static int build_union(mapset *ms, icpp_err *err)
{
    ms->all = icpp_pathmap_new();
    if (!ms->all)
        return icpp_err_set(err, ENOMEM, "out of memory");
    int main_set = 0;
    for (size_t k = 0; k < ms->nmaps; k++) {
        ms_map *m = &ms->maps[k];
        if (!m->used)
            continue;
        if (expand_aliases(m, err) < 0)
            return -1;
        m->x = icpp_cidx_build(m->pm, err);
        if (!m->x)
            return -1;
        if (sync_map(ms, m) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory");
        if (!main_set && icpp_pathmap_main(m->pm) < m->nmod) {
            icpp_pathmap_set_main(ms->all, m->mod[icpp_pathmap_main(m->pm)]);
            main_set = 1;
        }
    }
    return 0;
}

/* Per candidate (thread, mapping top): samples and how many found their CID. */
typedef struct vote {
    uint32_t pid, tid;
    uint64_t top, samples, hits;
} vote;

/* The second pass: vote each non-main thread's own stack (mapset.h). */
static int vote_stacks(mapset *ms, const char *samples, icpp_err *err)
{
    if (!ms->thread_samples)
        return 0;       /* main threads only: nothing to vote */
    icpp_replay *rp = mapset_replay_open(ms, samples, err);
    if (!rp)
        return -1;
    icpp_replay_select(rp, ICPP_REPLAY_OTHER_THREADS);
    icpp_hmap ix;               /* (pid << 32 | tid, top) -> index into v */
    icpp_hmap_init(&ix);
    vote *v = NULL;
    size_t nv = 0, cap = 0;
    icpp_rsample s;
    int rc;
    while ((rc = icpp_replay_next(rp, &s, err)) > 0) {
        if (s.tid == s.pid || !s.base || !s.func || (s.status != ICPP_RS_OK && s.status != ICPP_RS_FOREIGN))
            continue;
        int32_t b = mapset_bin_of(ms, rp, &s);
        int32_t k = b >= 0 ? ms->bins[b].map : -1;
        if (k < 0 || !ms->maps[k].x)
            continue;
        uint64_t key = (uint64_t)s.pid << 32 | s.tid;
        uint64_t *i = icpp_hmap_get(&ix, key, s.base);
        if (!i) {
            if (icpp_vec_reserve((void **)&v, &cap, nv + 1, sizeof *v, 16) < 0) {
                rc = icpp_err_set(err, ENOMEM, "out of memory");
                break;
            }
            v[nv] = (vote){s.pid, s.tid, s.base, 0, 0};
            if (icpp_hmap_put(&ix, key, s.base, nv) < 0) {
                rc = icpp_err_set(err, ENOMEM, "out of memory");
                break;
            }
            i = icpp_hmap_get(&ix, key, s.base);
            nv++;
        }
        /* the height this sample would have if this mapping were its own stack */
        s.status = ICPP_RS_OK;
        s.height = icpp_height(s.base, s.entry_sp);
        icpp_resolution r;
        icpp_resolve_sample(ms->maps[k].x, rp, &s, &r);
        v[*i].samples++;
        v[*i].hits += r.kind == ICPP_RES_PRECISE || r.kind == ICPP_RES_AMBIGUOUS;
    }
    mapset_replay_close(ms, rp);
    icpp_hmap_free(&ix);
    free(ms->modbin);       /* replay module numbers are per replay */
    ms->modbin = NULL;
    ms->nmodbin = 0;
    /* per thread, the candidate with the most hits (then the most samples;
     * then the first seen) */
    for (size_t i = 0; rc >= 0 && i < nv; i++) {
        size_t best = i;
        int first = 1;
        for (size_t j = 0; j < nv; j++) {
            if (v[j].pid != v[i].pid || v[j].tid != v[i].tid)
                continue;
            if (j < i) {
                first = 0;      /* this thread was decided at its first candidate */
                break;
            }
            if (v[j].hits > v[best].hits || (v[j].hits == v[best].hits && v[j].samples > v[best].samples))
                best = j;
        }
        if (!first)
            continue;
        ms_stack *ns = realloc(ms->stacks, (ms->nstacks + 1) * sizeof *ns);
        if (!ns) {
            rc = icpp_err_set(err, ENOMEM, "out of memory");
            break;
        }
        ms->stacks = ns;
        ns[ms->nstacks++] = (ms_stack){v[best].pid, v[best].tid, v[best].top};
    }
    free(v);
    return rc < 0 ? -1 : 0;
}

int mapset_apply_stacks(const mapset *ms, icpp_replay *rp)
{
    for (size_t i = 0; i < ms->nstacks; i++)
        if (icpp_replay_set_own_stack(rp, ms->stacks[i].pid, ms->stacks[i].tid, ms->stacks[i].top) < 0)
            return -ENOMEM;
    return 0;
}

/* The map learned into: the map of the recording's executable (mapset.h);
 * the one map given otherwise (lib/learn.c refuses, counted, another
 * program's samples); -1 if none. */
static int32_t learn_target(const mapset *ms, const icpp_build_id *rec_bid)
{
    int32_t k = rec_bid->len ? find_map(ms, rec_bid) : -1;
    if (k < 0 && ms->nmaps == 1)
        k = 0;
    return k;
}

/* Learn samples refused because a module of theirs is another build now
 * (lib/learn.c): which file, and what to do. */
static void warn_changed(const mapset *ms)
{
    if (!ms->ls.unreadable || !ms->changed[0])
        return;
    char e1[1024];
    fprintf(stderr, "icpp-resolve: warning: %s is not the file the recording mapped (its build-id differs): "
                    "%" PRIu64 " learn samples through it were not learned, and --save-map keeps nothing of them; "
                    "put the recorded build back at that path and resolve again\n",
            icpp_escape(ms->changed, e1, sizeof e1), ms->ls.unreadable);
}

/* After the prepare pass (which learned into ms->learn_map where the
 * recording's executable had its map from the start): with no map at all
 * and none named, learn into a new one; where the map the pass learned
 * into is not the one learn_target now names (only when the executable's
 * map was found after the first learn sample), learn again from the file. */
static int learn_rest(mapset *ms, const char *samples, const icpp_build_id *rec_bid, icpp_learner *lr, icpp_err *err)
{
    int32_t k = learn_target(ms, rec_bid);
    if (lr && k == ms->learn_map) {
        if (icpp_learner_end(lr, &ms->ls, &ms->novel, &ms->nnovel, &ms->trail) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory learning contexts from %s", samples);
        warn_changed(ms);
        return 0;
    }
    icpp_learner_free(lr);      /* not reached with lr set: a pass learns only into learn_target's map */
    int any = 0, learned_only = 0;
    for (size_t i = 0; i < ms->nbins; i++)
        any |= ms->bins[i].map >= 0;
    ms->learn_map = k;
    if (!any && !ms->explicit && ms->learn_map < 0) {
        icpp_pathmap *pm = icpp_pathmap_new();
        if (!pm)
            return icpp_err_set(err, ENOMEM, "out of memory");
        if (keep(ms, "(learned)", 0, pm, err) < 0)
            return -1;
        ms->learn_map = (int32_t)ms->nmaps - 1;
        learned_only = 1;
    }
    if (ms->learn_map < 0)
        return 0;
    if (expand_aliases(&ms->maps[ms->learn_map], err) < 0)
        return -1;
    if (icpp_learn_file_novel(samples, ms->maps[ms->learn_map].pm, &ms->ls, &ms->novel, &ms->nnovel,
                              &ms->trail, err) < 0)
        return -1;
    warn_changed(ms);
    if (learned_only) {
        char e1[1024];
        if (!ms->ls.learned && ms->ls.unreadable && ms->changed[0])
            return icpp_err_set(err, ENOENT, "no path map for %s, and none of its learn samples could be learned "
                                "(the warning above says why)", icpp_escape(samples, e1, sizeof e1));
        if (!ms->ls.learned)
            return icpp_err_set(err, ENOENT, "no path map for %s, and it has no learn samples to resolve with: train "
                                "the program with icpp-train, or record with icpp-sample --learn",
                                icpp_escape(samples, e1, sizeof e1));
        fprintf(stderr, "icpp-resolve: no path map: resolving with the contexts this recording learned "
                        "(train the program with icpp-train for more)\n");
        for (size_t i = 0; i < ms->nbins; i++)
            if (ms->bins[i].map < 0 && (ms->bins[i].map = find_map(ms, &ms->bins[i].bid)) >= 0)
                ms->bins[i].why[0] = 0;
    }
    return 0;
}

/* The map --save-map writes, built under the lock of its path (lib/pathmap.h):
 * the files the learn map was read from, each as it is now -- the saved
 * map's own file among them when it is saved onto itself, so whatever a
 * training run or another --save-map added to it meanwhile stays -- plus
 * what this recording learned.  The contexts added by expanding entry
 * aliases (lib/alias.h) are left out: every reader adds them again. */
typedef struct save_ctx {
    const ms_map *m;
    icpp_pathmap *res;          /* the map written, freed by mapset_save_learned */
} save_ctx;

static int save_merge(void *arg, icpp_pathmap *cur, const icpp_pathmap **out, icpp_err *err)
{
    save_ctx *c = arg;
    const ms_map *m = c->m;
    icpp_pathmap *res = icpp_pathmap_learned_part(m->pm);
    if (!res)
        return icpp_err_set(err, ENOMEM, "out of memory");
    for (size_t i = 0; i < m->nsrcs; i++) {
        icpp_pathmap *src = icpp_pathmap_read(m->srcs[i], err);
        if (!src && err->code == ENOENT)
            continue;       /* removed meanwhile: nothing of it to keep */
        /* Into the source, so its metadata and main module stay. */
        if (!src || icpp_pathmap_merge(src, res, err) < 0) {
            if (src) {
                char e1[1024];
                icpp_err_prefix(err, "--save-map: %s changed while the recording was learned",
                                icpp_escape(m->srcs[i], e1, sizeof e1));
            }
            icpp_pathmap_free(src);
            icpp_pathmap_free(res);
            return -1;
        }
        icpp_pathmap_free(res);
        res = src;
    }
    c->res = res;
    *out = res;
    return 0;
}

int mapset_save_learned(const mapset *ms, const char *path, icpp_err *err)
{
    if (ms->learn_map < 0)
        return icpp_err_set(err, EINVAL, "--save-map: nothing was learned into a map (no map of the recording's "
                            "executable, or --no-learn)");
    save_ctx c = {&ms->maps[ms->learn_map], NULL};
    int rc = icpp_pathmap_update(path, 1, save_merge, &c, NULL, err);
    icpp_pathmap_free(c.res);
    return rc;
}

int mapset_prepare(mapset *ms, const char *samples, icpp_err *err)
{
    ms->explicit = ms->nmaps || ms->ndirs;
    if (!ms->dirs_read && read_dirs(ms, err) < 0)
        return -1;
    icpp_replay *rp = mapset_replay_open(ms, samples, err);
    if (!rp)
        return -1;
    /* One pass: the executables sampled (pid-level fields are enough), and
     * the learn samples learned -- into the map of the recording's
     * executable, when it is known at the first learn sample (else
     * learn_rest reads the file again). */
    icpp_replay_select(rp, ICPP_REPLAY_PROCESS_ONLY);
    icpp_rsample s;
    int rc;
    icpp_learner *lr = NULL;
    int decided = !ms->learn;
    ms->learn_map = -1;
    ms->thread_samples = 0;
    while ((rc = icpp_replay_next(rp, &s, err)) > 0) {
        mapset_bin_of(ms, rp, &s);
        ms->thread_samples += s.tid != s.pid;
        if (!s.learn)
            continue;
        if (!decided) {
            decided = 1;
            const icpp_rmodule *rex = icpp_replay_exe_module(rp);
            int32_t k = rex && rex->build_id.len ? find_map(ms, &rex->build_id) : -1;
            if (k >= 0) {
                if (expand_aliases(&ms->maps[k], err) < 0) {
                    rc = -1;
                    break;
                }
                if (!(lr = icpp_learner_new(ms->maps[k].pm))) {
                    rc = icpp_err_set(err, ENOMEM, "out of memory");
                    break;
                }
                ms->learn_map = k;
            }
        }
        if (lr && icpp_learner_add(lr, rp, &s) < 0) {
            rc = icpp_err_set(err, ENOMEM, "out of memory learning contexts from %s", samples);
            break;
        }
    }
    const icpp_rmodule *rex = icpp_replay_exe_module(rp);
    icpp_build_id rec_bid = rex ? rex->build_id : (icpp_build_id){0, {0}};
    ms->changed[0] = 0;
    for (uint32_t i = 0; i < icpp_replay_nmodules(rp) && !ms->changed[0]; i++)
        if (icpp_replay_module(rp, i)->status == ICPP_RS_CHANGED)
            snprintf(ms->changed, sizeof ms->changed, "%s", icpp_replay_module(rp, i)->path);
    mapset_replay_close(ms, rp);
    if (rc < 0) {
        icpp_learner_free(lr);
        return -1;
    }
    if (ms->learn && learn_rest(ms, samples, &rec_bid, lr, err) < 0)
        return -1;
    free(ms->modbin);       /* replay module numbers are per replay */
    ms->modbin = NULL;
    ms->nmodbin = 0;
    int any = 0;
    for (size_t i = 0; i < ms->nbins; i++)
        if (ms->bins[i].map >= 0)
            any = ms->maps[ms->bins[i].map].used = 1;
    if (!any && !ms->nbins && ms->nmaps == 1)
        any = ms->maps[0].used = 1;     /* no executable named: the one map given */
    if (!any && !ms->allow_unmapped) {
        /* The old single-map message where it applies: one map, another binary. */
        if (ms->nmaps == 1 && ms->nbins >= 1) {
            const icpp_pm_module *mm = icpp_pathmap_module(ms->maps[0].pm, icpp_pathmap_main(ms->maps[0].pm));
            char a[2 * ICPP_BUILD_ID_MAX + 1], b[2 * ICPP_BUILD_ID_MAX + 1];
            icpp_build_id_hex(&mm->build_id, a, sizeof a);
            icpp_build_id_hex(&ms->bins[0].bid, b, sizeof b);
            char e1[1024], e2[1024], e3[1024];
            return icpp_err_set(err, EINVAL, "%s is the map of %s (build-id %s) but the samples are of %s (build-id %s): "
                                "train this binary, or give its map with -m", icpp_escape(ms->maps[0].path, e1, sizeof e1),
                                icpp_escape(mm->path, e2, sizeof e2), a, icpp_escape(ms->bins[0].path, e3, sizeof e3), b);
        }
        char e1[1024], e2[1024], e3[1024];
        if (!ms->nbins)
            return icpp_err_set(err, EINVAL, "%s: no sample of a known executable: nothing to resolve",
                                icpp_escape(samples, e1, sizeof e1));
        return icpp_err_set(err, ENOENT, "%s: no path map for %s: %s", icpp_escape(samples, e1, sizeof e1),
                            icpp_escape(ms->bins[0].path, e2, sizeof e2), icpp_escape(ms->bins[0].why, e3, sizeof e3));
    }
    /* names from symbols or a separate debug file installed since training */
    for (size_t i = 0; i < ms->nmaps; i++) {
        char note[1024];
        if (icpp_names_refresh(ms->maps[i].pm, note, sizeof note, err) < 0)
            return -1;
        if (note[0])
            fprintf(stderr, "icpp-resolve: note: %s\n", note);
    }
    if (build_union(ms, err) < 0)
        return -1;
    for (size_t i = 0; i < ms->nmaps; i++)
        if (ms->maps[i].x) {
            icpp_cidx_set_votes(ms->maps[i].x, ms->votes);
            if ((int32_t)i == ms->learn_map) {
                icpp_cidx_set_novel(ms->maps[i].x, ms->novel, ms->nnovel);
                icpp_cidx_set_trail(ms->maps[i].x, ms->trail);
                ms->evidence_on = ms->ls.learned > 0 && (ms->evidence > 0 || (ms->evidence < 0 && icpp_learn_run_is_new(&ms->ls)));
                icpp_cidx_set_evidence(ms->maps[i].x, ms->evidence_on);
            }
        }
    if (vote_stacks(ms, samples, err) < 0)
        return -1;
    /* Completion after the vote: the vote's resolutions must not complete
     * (and add inferred nodes to the maps). */
    for (size_t i = 0; ms->complete && i < ms->nmaps; i++)
        if (ms->maps[i].x) {
            ms->maps[i].cpl = icpp_completer_new(ms->maps[i].pm, ms->maps[i].x, NULL, err);
            if (!ms->maps[i].cpl)
                return -1;
            icpp_cidx_set_completer(ms->maps[i].x, ms->maps[i].cpl);
        }
    return 0;
}

int mapset_cpl_stats(const mapset *ms, icpp_cpl_stats *st)
{
    memset(st, 0, sizeof *st);
    int any = 0;
    for (size_t i = 0; i < ms->nmaps; i++) {
        if (!ms->maps[i].cpl)
            continue;
        icpp_cpl_stats c;
        icpp_completer_get_stats(ms->maps[i].cpl, &c);
        st->queries += c.queries;
        st->found += c.found;
        st->unique += c.unique;
        st->truncated += c.truncated;
        st->cut += c.cut;
        st->open += c.open;
        st->expansions += c.expansions;
        st->total_us += c.total_us;
        st->max_us = c.max_us > st->max_us ? c.max_us : st->max_us;
        st->graph_ms += c.graph_ms;
        st->graphs += c.graphs;
        any = 1;
    }
    return any;
}

int32_t mapset_resolve(mapset *ms, const icpp_replay *rp, icpp_rsample *s, icpp_resolution *r, icpp_resolution *r_own)
{
    int32_t b = mapset_bin_of(ms, rp, s);
    ms_bin *bn = b >= 0 ? &ms->bins[b] : NULL;
    int32_t k = bn ? bn->map : -1;
    if (b < 0 && ms->nmaps == 1)
        k = 0;          /* executable unknown (perf.data without names): the one map given */
    if (k < 0 || !ms->maps[k].x) {
        memset(r, 0, sizeof *r);
        r->kind = ICPP_RES_UNRESOLVED;
        r->func = -1;
        if (s->status == ICPP_RS_OK)
            s->status = ICPP_RS_NOPATHMAP;
        k = -1;
    } else {
        ms_map *m = &ms->maps[k];
        icpp_resolve_sample(m->x, rp, s, r);
        /* completion may have added nodes and functions to m->pm: the union
         * gets them before r is translated (else m->node[] is read past its end) */
        if ((icpp_pathmap_nnodes(m->pm) > m->nnode || icpp_pathmap_nfuncs(m->pm) > m->nfunc) &&
            sync_map(ms, m) < 0) {
            memset(r, 0, sizeof *r);
            r->kind = ICPP_RES_MISSING;         /* out of memory: counted as missing */
            r->func = -1;
        }
        if (r->ncand > ms->capcands) {
            size_t nc = r->ncand * 2;
            icpp_cand *v = realloc(ms->cands, nc * sizeof *v);
            if (v) {
                ms->cands = v;
                ms->capcands = nc;
            }
        }
        if (r_own)
            *r_own = *r;
        if (r->ncand > ms->capcands) {      /* out of memory: counted as missing */
            r->ncand = 0;
            r->kind = ICPP_RES_MISSING;
        }
        for (uint32_t i = 0; i < r->ncand; i++) {
            ms->cands[i] = r->cand[i];
            ms->cands[i].node = r->cand[i].node < m->nnode ? m->node[r->cand[i].node] : 0;
        }
        r->cand = ms->cands;
        if (r->func >= 0)
            r->func = (size_t)r->func < m->nfunc ? (int64_t)m->func[r->func] : -1;
    }
    if (r_own && k < 0)
        *r_own = *r;
    if (bn) {
        bn->samples++;
        bn->by_kind[r->kind < ICPP_RES_MAX ? r->kind : 0]++;
        if (r->kind == ICPP_RES_UNRESOLVED)
            bn->by_status[s->status < ICPP_RS_MAX ? s->status : 0]++;
    }
    return k;
}

icpp_basevote *mapset_infer_bases(const mapset *ms, const char *samples, FILE *log, icpp_err *err)
{
    icpp_basevote *bv = icpp_basevote_infer(samples, ms->all, 0, 0, err);
    for (size_t i = 0; bv && log && i < icpp_basevote_nthreads(bv); i++) {
        char line[512];
        icpp_basevote_describe(bv, i, line, sizeof line);
        fprintf(log, "icpp-resolve: %s: %s\n", samples, line);
    }
    return bv;
}

void mapset_names(const mapset *ms, char *buf, size_t sz)
{
    size_t o = 0;
    buf[0] = 0;
    for (size_t i = 0; i < ms->nmaps && o + 1 < sz; i++)
        if (ms->maps[i].used)
            o += (size_t)snprintf(buf + o, sz - o, "%s%s", o ? ", " : "", ms->maps[i].path);
}
