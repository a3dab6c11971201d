/* learn.c -- icpp-resolve: learned contexts: the frames of `icpp-sample --learn` samples become paths of the path map. */
#include "learn.h"

#include "hmap.h"
#include "module.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAXF ICPP_LEARN_MAX_FRAMES

typedef struct learner {
    icpp_pathmap *pm;
    int           all;          /* the map trained nothing: take every module */
    int32_t      *mod;          /* replay module -> pm module (-1 untrained, -2 not looked up) */
    size_t        nmod;
    uint8_t      *trained;      /* pm module has functions (before learning) */
    size_t        ntrained;
    icpp_hmap     cid;          /* (func, height) -> node + 1, or MANY; built on first need */
    int           have_cid;
    uint8_t      *novel;        /* per map function: learning found a context of it the map lacked */
    size_t        nnovel;
    icpp_hmap     frames;       /* (pid << 32 | exec generation, address) -> frame_func() + 3 */
} learner;

static int mark_novel(learner *L, uint32_t func)
{
    if (func >= L->nnovel) {
        size_t nc = func + 1 > 2 * L->nnovel ? func + 1 : 2 * L->nnovel;
        uint8_t *n = realloc(L->novel, nc);
        if (!n)
            return -1;
        memset(n + L->nnovel, 0, nc - L->nnovel);
        L->novel = n;
        L->nnovel = nc;
    }
    L->novel[func] = 1;
    return 0;
}

#define MANY UINT64_MAX

static int cid_note(learner *L, uint32_t func, int64_t height, uint32_t node)
{
    uint64_t *v = icpp_hmap_get(&L->cid, func, (uint64_t)height);
    if (!v)
        return icpp_hmap_put(&L->cid, func, (uint64_t)height, (uint64_t)node + 1);
    if (*v != (uint64_t)node + 1)
        *v = MANY;
    return 0;
}

/* The one node of func known at height, 0 if none or several. */
static uint32_t cid_unique(learner *L, uint32_t func, int64_t height)
{
    if (!L->have_cid) {
        L->have_cid = 1;
        for (uint32_t k = 1; k < icpp_pathmap_nnodes(L->pm); k++) {
            const icpp_pm_node *nd = icpp_pathmap_node(L->pm, k);
            for (uint32_t h = 0; h < nd->nheights; h++)
                if (cid_note(L, nd->func, nd->heights[h].height, k) < 0)
                    return 0;
        }
    }
    uint64_t *v = icpp_hmap_get(&L->cid, func, (uint64_t)height);
    return v && *v != MANY ? (uint32_t)(*v - 1) : 0;
}

/* The pm module of replay module mi, or -1 if it is not one the map trained. */
static int32_t pm_module(learner *L, const icpp_replay *rp, uint32_t mi)
{
    if (mi >= L->nmod) {
        size_t nc = mi + 16;
        int32_t *n = realloc(L->mod, nc * sizeof *n);
        if (!n)
            return -1;
        for (size_t i = L->nmod; i < nc; i++)
            n[i] = -2;
        L->mod = n;
        L->nmod = nc;
    }
    if (L->mod[mi] != -2)
        return L->mod[mi];
    const icpp_rmodule *rm = icpp_replay_module(rp, mi);
    L->mod[mi] = -1;
    if (!rm || !rm->mod)
        return -1;
    int32_t m = icpp_pathmap_find_module(L->pm, &rm->build_id);
    if (m >= 0) {
        if (L->all || ((size_t)m < L->ntrained && L->trained[m]))
            L->mod[mi] = m;
        return L->mod[mi];
    }
    if (L->all) {
        uint32_t idx;
        if (icpp_pathmap_add_module(L->pm, rm->path, &rm->build_id, (uint8_t)icpp_module_kind_of(rm->mod), &idx) == 0)
            L->mod[mi] = (int32_t)idx;
    }
    return L->mod[mi];
}

/* Per frame: the pm function, or -1 to leave the frame out; -2 to refuse
 * the sample (a module that cannot be read), -3 out of memory. */
static int64_t frame_func(learner *L, const icpp_replay *rp, uint32_t pid, uint64_t addr)
{
    int32_t mi;
    uint64_t link;
    if (icpp_replay_locate(rp, pid, addr, &mi, &link) < 0)
        return -1;      /* no file mapping: JIT or vdso code, which training never hooks either */
    int32_t pmm = pm_module(L, rp, (uint32_t)mi);
    if (pmm < 0)
        return -1;
    const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)mi);
    const icpp_func *f = icpp_module_func_at(rm->mod, link);
    if (!f)
        return -2;
    if (f->plt)
        return -1;      /* a PLT stub is no function: its frame is its caller's context */
    const icpp_func *o = f->owner != f->addr ? icpp_module_func_start(rm->mod, f->owner) : f;
    uint32_t idx;
    if (icpp_pathmap_add_func(L->pm, (uint32_t)pmm, f->owner, o ? o->name : f->name, &idx) < 0)
        return -3;
    return idx;
}

/* frame_func, cached: learn samples repeat the same return addresses. */
static int64_t frame_func_cached(learner *L, const icpp_replay *rp, const icpp_rsample *s, uint64_t addr)
{
    uint64_t key = (uint64_t)s->pid << 32 | s->exec_gen;
    uint64_t *v = icpp_hmap_get(&L->frames, key, addr);
    if (v)
        return (int64_t)*v - 3;
    int64_t f = frame_func(L, rp, s->pid, addr);
    if (f != -3 && icpp_hmap_put(&L->frames, key, addr, (uint64_t)(f + 3)) < 0)
        return -3;
    return f;
}

static int learn_one(learner *L, const icpp_replay *rp, const icpp_rsample *s, icpp_learn_stats *st)
{
    static int64_t fn[MAXF];
    static int64_t ht[MAXF];
    const icpp_learn_chain *l = &s->l;
    if (!s->base) {
        st->no_base++;
        return 0;
    }
    uint32_t n = l->n < MAXF ? l->n : MAXF;
    int any = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* caller frames: the call instruction is at ra - 1 */
        fn[i] = frame_func_cached(L, rp, s, i ? l->pc[i] - 1 : l->pc[i]);
        if (fn[i] == -3)
            return -ENOMEM;
        if (fn[i] == -2) {
            st->unreadable++;
            return 0;
        }
        ht[i] = icpp_height(s->base, l->entry_sp[i]);
        any |= fn[i] >= 0;
    }
    if (!any) {
        st->untrained_only++;
        return 0;
    }
    /* Where the path starts: the root, or a known context to join. */
    uint32_t node = 0;
    int64_t top;        /* outermost frame index taken */
    int rooted = l->status == 0 && n == l->n;
    if (rooted) {
        top = (int64_t)n - 1;
    } else {
        top = -1;
        for (int64_t i = (int64_t)n - 1; i >= 0 && top < 0; i--) {
            if (fn[i] < 0)
                continue;
            /* exactly one node of function fn[i] known at height ht[i] */
            uint32_t found = cid_unique(L, (uint32_t)fn[i], ht[i]);
            if (found) {
                node = found;
                top = i;
            }
        }
        if (top < 0) {
            st->not_rooted++;
            return 0;
        }
        st->anchored++;
    }
    size_t before = icpp_pathmap_nnodes(L->pm);
    int64_t first = rooted ? top : top - 1;     /* an anchor is a node already */
    if (!rooted && icpp_pathmap_add_learned(L->pm, node, ht[top], 1) < 0)
        return -ENOMEM;
    for (int64_t i = first; i >= 0; i--) {
        if (fn[i] < 0)
            continue;
        if (icpp_pathmap_child(L->pm, node, (uint32_t)fn[i], &node) < 0)
            return -ENOMEM;
        /* the root frame's entry SP has no caller's CFA to come from */
        if (rooted && i == top)
            continue;
        const icpp_pm_node *nd = icpp_pathmap_node(L->pm, node);
        int known = 0;
        for (uint32_t h = 0; h < nd->nheights && !known; h++)
            known = nd->heights[h].height == ht[i];
        st->new_contexts += !known;
        if ((!known && mark_novel(L, (uint32_t)fn[i]) < 0) || icpp_pathmap_add_learned(L->pm, node, ht[i], 1) < 0 ||
            (L->have_cid && !known && cid_note(L, (uint32_t)fn[i], ht[i], node) < 0))
            return -ENOMEM;
    }
    st->new_paths += icpp_pathmap_nnodes(L->pm) - before;
    st->learned++;
    return 0;
}

int icpp_learn_file(const char *samples, icpp_pathmap *pm, icpp_learn_stats *st, icpp_err *err)
{
    return icpp_learn_file_novel(samples, pm, st, NULL, NULL, err);
}

int icpp_learn_file_novel(const char *samples, icpp_pathmap *pm, icpp_learn_stats *st, uint8_t **novel,
                          size_t *nnovel, icpp_err *err)
{
    memset(st, 0, sizeof *st);
    icpp_replay *rp = icpp_replay_open(samples, err);
    if (!rp)
        return -1;
    icpp_replay_learn_only(rp, 1);
    learner L;
    memset(&L, 0, sizeof L);
    L.pm = pm;
    L.all = icpp_pathmap_nfuncs(pm) == 0;
    icpp_hmap_init(&L.cid);
    icpp_hmap_init(&L.frames);
    L.ntrained = icpp_pathmap_nmodules(pm);
    L.trained = calloc(L.ntrained + 1, 1);
    int rc = L.trained ? 0 : -ENOMEM;
    for (size_t f = 0; f < icpp_pathmap_nfuncs(pm); f++)
        L.trained[icpp_pathmap_func(pm, (uint32_t)f)->module] = 1;
    int checked = 0, foreign = 0;
    icpp_rsample s;
    while (rc == 0 && (rc = icpp_replay_next(rp, &s, err)) > 0) {
        rc = 0;
        if (!s.learn)
            continue;
        st->samples++;
        if (!checked) {
            /* One map, one program: learn samples of another are never merged. */
            const icpp_rmodule *em = icpp_replay_exe_module(rp);
            checked = 1;
            if (em && L.all && icpp_pathmap_nmodules(pm) == 0) {
                uint32_t idx;
                if (icpp_pathmap_add_module(pm, em->path, &em->build_id,
                                            em->mod ? (uint8_t)icpp_module_kind_of(em->mod) : 0, &idx) < 0) {
                    rc = -ENOMEM;
                    break;
                }
                icpp_pathmap_set_main(pm, idx);
            } else if (em && icpp_pathmap_nmodules(pm) &&
                       !icpp_build_id_match(&icpp_pathmap_module(pm, icpp_pathmap_main(pm))->build_id,
                                            icpp_pathmap_module(pm, icpp_pathmap_main(pm))->path,
                                            &em->build_id, em->path)) {
                foreign = 1;
            }
        }
        if (foreign) {
            st->foreign++;
            continue;
        }
        rc = learn_one(&L, rp, &s, st);
    }
    if (rc == -ENOMEM)
        icpp_err_set(err, ENOMEM, "out of memory learning contexts from %s", samples);
    free(L.mod);
    free(L.trained);
    icpp_hmap_free(&L.cid);
    icpp_hmap_free(&L.frames);
    if (novel && rc >= 0) {
        /* one byte per function of the map as it is now */
        size_t nf = icpp_pathmap_nfuncs(pm);
        uint8_t *n = calloc(nf + 1, 1);
        if (n && L.novel)
            memcpy(n, L.novel, L.nnovel < nf ? L.nnovel : nf);
        *novel = n;
        *nnovel = n ? nf : 0;
        if (!n)
            rc = -ENOMEM;
    }
    free(L.novel);
    icpp_replay_close(rp);
    return rc < 0 ? -1 : 0;
}
