/* learn.c -- learned contexts: the frames of `icpp-sample --learn` samples become paths of the path map. */
#include "learn.h"
#include "vec.h"

#include "alias.h"
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
    icpp_alias_index **alias;   /* per replay module: its entry aliases (lib/alias.h), built on first need */
    size_t        capalias;
    icpp_hmap     frames;       /* (pid << 32 | exec generation, address) -> frame_func() + 3 */
    /* Learn samples repeat: the same leaf function under the same return
     * addresses at the same heights.  The first of each is learned in full
     * and its effect -- the stats it counted, the (node, height) pairs it
     * gave a learn count -- kept; a repeat only adds to its chain's
     * repeats, applied to those pairs at the end.  A rooted walk needs no
     * anchor, so its effect does not depend on what was learned before it.
     * One that is not rooted is joined where the map knows a context as
     * exactly one path, which changes only when learning adds a context: its
     * effect holds while stats.new_contexts is what it was (else it is
     * learned again).  Either way the map comes out the same. */
    icpp_hmap     memo;         /* (key hash, 0) -> index into chains + 1 */
    struct lchain {
        uint64_t hash;
        uint32_t pid, gen, n;
        uint8_t  status;        /* the walk's (0: rooted) */
        uint8_t  outcome;       /* what learning it counted in the stats (OUT_*) */
        int64_t  fn0;           /* the leaf's map function (its pc varies, its function does not) */
        uint64_t base;
        size_t   key, eff, neff;    /* into words: pc[1..n), entry_sp[0..n); into eff: neff pairs */
        uint64_t repeats;       /* samples not yet applied */
        uint64_t contexts;      /* stats.new_contexts when it was learned (a walk that is not rooted) */
        uint8_t  seen;          /* learn samples that took it, up to 2 (the trail's missing mass) */
    } *chains;
    size_t        nchains, capchains;
    uint64_t     *words;        /* the chains' keys */
    size_t        nwords, capwords;
    struct leff { uint32_t node; int64_t height; } *eff;    /* the chains' effects (learn counts) */
    size_t        neff, capeff;
    int           recording;    /* learn_one appends what it counts to eff */
    /* The trail (icpp_learn_trail): each learned sample's thread, time and
     * chain, up to ICPP_TRAIL_MAX of them; threads by (pid, tid). */
    struct ltrail { uint64_t time; uint32_t thread, chain; } *trail;  /* chain: index + 1 */
    size_t        ntrail, captrail;
    icpp_hmap     threads;      /* (pid, tid) -> index + 1 into thr */
    struct lthr { uint32_t pid, tid; } *thr;
    size_t        nthr, capthr;
    uint32_t      last;         /* the thread of the last sample (learn samples come in runs of one thread) */
    uint64_t      cut;          /* time of the first sample the trail had no room for, or UINT64_MAX */
    uint64_t      nseen, nonce; /* learned samples with a remembered chain; of them, chains seen once */
} learner;

/* Memory the memo may hold (keys and effects); past it, samples are learned
 * one by one as before. */
#define MEMO_MAX_BYTES (64u << 20)

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
    if (icpp_replay_locate(rp, pid, addr, &mi, &link) < 0) {
        /* a file that is not the one recorded (another build at its path):
         * leaving its frames out would make a path of the frames around
         * them (__libc_start_main's alone), so the sample is refused */
        int32_t any = icpp_replay_module_at(rp, pid, addr);
        const icpp_rmodule *rm = any >= 0 ? icpp_replay_module(rp, (uint32_t)any) : NULL;
        if (rm && rm->status == ICPP_RS_CHANGED)
            return -2;
        return -1;      /* no file mapping: JIT or vdso code, which training never hooks either */
    }
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

/* One learn count for (node, height), and a note of it in the effect of
 * the chain being remembered (learner.recording). */
static int count_learned(learner *L, uint32_t node, int64_t height)
{
    if (icpp_pathmap_add_learned(L->pm, node, height, 1) < 0)
        return -ENOMEM;
    if (!L->recording)
        return 0;
    if (icpp_vec_reserve((void **)&L->eff, &L->capeff, L->neff + 1, sizeof *L->eff, 1024) < 0)
        return -ENOMEM;
    L->eff[L->neff++] = (struct leff){node, height};
    return 0;
}

/* Is the leaf context (g at height h below parent), which the map lacks,
 * one training recorded under another name?  Code that enters g's body
 * through an entry alias f (lib/alias.h: glibc's __mempcpy jumping into
 * __memcpy) runs in g's code, so an unwinder names g; training hooked f.
 * Then parent's child f trained at h is the same context: g is not novel
 * for it (docs/resolve.md, "Code entered by a jump into
 * another function's middle").  -ENOMEM when out of memory. */
static int alias_trained(learner *L, const icpp_replay *rp, const icpp_rsample *s, uint32_t parent, uint32_t g,
                         int64_t h)
{
    int32_t mi;
    uint64_t link;
    if (icpp_replay_locate(rp, s->pid, s->l.pc[0], &mi, &link) < 0 || mi < 0)
        return 0;
    const icpp_rmodule *rm = icpp_replay_module(rp, (uint32_t)mi);
    if (!rm || !rm->mod)
        return 0;
    if (icpp_vec_reserve((void **)&L->alias, &L->capalias, (size_t)mi + 1, sizeof *L->alias, 16) < 0 ||
        (!L->alias[mi] && !(L->alias[mi] = icpp_alias_index_build(rm->mod))))
        return -ENOMEM;
    const icpp_pm_func *gf = icpp_pathmap_func(L->pm, g);
    const uint64_t *fs;
    size_t n = icpp_alias_entries(L->alias[mi], gf->addr, &fs);
    for (size_t k = 0; k < n; k++) {
        int64_t fi = icpp_pathmap_find_func(L->pm, gf->module, fs[k]);
        uint32_t c = fi < 0 ? 0 : icpp_pathmap_find_child(L->pm, parent, (uint32_t)fi);
        const icpp_pm_node *nd = c ? icpp_pathmap_node(L->pm, c) : NULL;
        for (uint32_t j = 0; nd && j < nd->nheights; j++)
            if (nd->heights[j].height == h)
                return 1;
    }
    return 0;
}

/* One learn sample into the map: 1 if it was learned, 0 if not (counted in
 * st by why), -ENOMEM. */
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
        if (!icpp_height_ok(ht[i])) {
            /* farther from the base than any stack is long (a crafted
             * recording): the base is not this stack's */
            st->no_base++;
            return 0;
        }
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
    if (!rooted && count_learned(L, node, ht[top]) < 0)
        return -ENOMEM;
    for (int64_t i = first; i >= 0; i--) {
        if (fn[i] < 0)
            continue;
        uint32_t parent = node;
        if (icpp_pathmap_child(L->pm, node, (uint32_t)fn[i], &node) < 0)
            return -ENOMEM;
        /* the root frame's entry SP has no caller's CFA to come from */
        if (rooted && i == top)
            continue;
        const icpp_pm_node *nd = icpp_pathmap_node(L->pm, node);
        int known = 0, aliased = 0;
        for (uint32_t h = 0; h < nd->nheights && !known; h++)
            known = nd->heights[h].height == ht[i];
        if (!known && i == 0 && (aliased = alias_trained(L, rp, s, parent, (uint32_t)fn[0], ht[0])) < 0)
            return -ENOMEM;
        st->new_contexts += !known;     /* aliased too: the map grew (the memo's validity counts on it) */
        if ((!known && !aliased && mark_novel(L, (uint32_t)fn[i]) < 0) || count_learned(L, node, ht[i]) < 0 ||
            (L->have_cid && !known && cid_note(L, (uint32_t)fn[i], ht[i], node) < 0))
            return -ENOMEM;
    }
    st->new_paths += icpp_pathmap_nnodes(L->pm) - before;
    st->learned++;
    return 1;
}

/* A chain's key hashed: four lanes of multiply-xor over its words (chains
 * run to hundreds of frames, so one dependent chain of icpp_hash2 per word
 * would be most of learning's time), mixed at the end. */
static uint64_t chain_hash(uint32_t pid, uint32_t gen, uint64_t base, int64_t fn0, const icpp_learn_chain *l)
{
    const uint64_t K = 0x9e3779b97f4a7c15ull;
    uint64_t h[4] = {(uint64_t)pid << 32 | gen, base, (uint64_t)fn0 ^ (uint64_t)l->n << 40 ^ (uint64_t)l->status << 56,
                     0x632be59bd9b4e019ull};
    uint32_t k = 0;
    for (uint32_t i = 1; i < l->n; i++, k++)
        h[k & 3] = (h[k & 3] ^ l->pc[i]) * K;
    for (uint32_t i = 0; i < l->n; i++, k++)
        h[k & 3] = (h[k & 3] ^ l->entry_sp[i]) * K;
    return icpp_hash2(icpp_hash2(h[0], h[1]), icpp_hash2(h[2], h[3]));
}

static int chain_same(const learner *L, const struct lchain *c, uint32_t pid, uint32_t gen, uint64_t base,
                      int64_t fn0, const icpp_learn_chain *l)
{
    if (c->pid != pid || c->gen != gen || c->base != base || c->fn0 != fn0 || c->n != l->n || c->status != l->status)
        return 0;
    const uint64_t *w = L->words + c->key;
    return (l->n < 2 || !memcmp(w, l->pc + 1, (l->n - 1) * sizeof *w)) &&
           !memcmp(w + l->n - 1, l->entry_sp, l->n * sizeof *w);
}

enum { OUT_LEARNED, OUT_ANCHORED, OUT_NOT_ROOTED, OUT_NO_BASE, OUT_UNREADABLE, OUT_UNTRAINED_ONLY, OUT_OTHER };

/* What learn_one counted, from the stats before and after. */
static uint8_t outcome_of(const icpp_learn_stats *a, const icpp_learn_stats *b)
{
    if (b->learned != a->learned)
        return b->anchored != a->anchored ? OUT_ANCHORED : OUT_LEARNED;
    if (b->not_rooted != a->not_rooted)
        return OUT_NOT_ROOTED;
    if (b->no_base != a->no_base)
        return OUT_NO_BASE;
    if (b->unreadable != a->unreadable)
        return OUT_UNREADABLE;
    if (b->untrained_only != a->untrained_only)
        return OUT_UNTRAINED_ONLY;
    return OUT_OTHER;
}

static void count_outcome(icpp_learn_stats *st, uint8_t out)
{
    switch (out) {
    case OUT_ANCHORED: st->anchored++; /* fall through */
    case OUT_LEARNED: st->learned++; break;
    case OUT_NOT_ROOTED: st->not_rooted++; break;
    case OUT_NO_BASE: st->no_base++; break;
    case OUT_UNREADABLE: st->unreadable++; break;
    case OUT_UNTRAINED_ONLY: st->untrained_only++; break;
    default: break;
    }
}

/* A chain's repeats, applied to the pairs it counted. */
static int chain_apply(learner *L, struct lchain *c)
{
    for (size_t k = 0; c->repeats && k < c->neff; k++)
        if (icpp_pathmap_add_learned(L->pm, L->eff[c->eff + k].node, L->eff[c->eff + k].height, c->repeats) < 0)
            return -ENOMEM;
    c->repeats = 0;
    return 0;
}

/* learn_one through the memo (learner.memo): a sample seen before whose
 * effect still holds only counts; any other is learned and remembered.
 * *chain: the sample's chain (index + 1), 0 if it was not remembered. */
static int learn_memo(learner *L, const icpp_replay *rp, const icpp_rsample *s, icpp_learn_stats *st, uint32_t *chain)
{
    *chain = 0;
    const icpp_learn_chain *l = &s->l;
    if (!l->n || l->n > MAXF)
        return learn_one(L, rp, s, st) < 0 ? -ENOMEM : 0;
    int64_t fn0 = frame_func_cached(L, rp, s, l->pc[0]);
    if (fn0 == -3)
        return -ENOMEM;
    uint64_t h = chain_hash(s->pid, s->exec_gen, s->base, fn0, l);
    uint64_t *v = icpp_hmap_get(&L->memo, h, 0);
    struct lchain *c = NULL;
    if (v) {
        c = &L->chains[*v - 1];
        if (!chain_same(L, c, s->pid, s->exec_gen, s->base, fn0, l))
            return learn_one(L, rp, s, st) < 0 ? -ENOMEM : 0;     /* a hash collision: not remembered */
        *chain = (uint32_t)*v;
        if (c->status == 0 || c->contexts == st->new_contexts) {
            c->repeats++;
            count_outcome(st, c->outcome);
            return 0;
        }
        if (chain_apply(L, c) < 0)      /* the map has changed since: learn it again */
            return -ENOMEM;
    }
    size_t eff0 = L->neff;
    int room = (L->nwords + 2 * (size_t)l->n) * sizeof *L->words + (L->neff + l->n) * sizeof *L->eff <= MEMO_MAX_BYTES;
    icpp_learn_stats before = *st;
    L->recording = room;
    int r = learn_one(L, rp, s, st);
    L->recording = 0;
    if (r < 0)
        return -ENOMEM;
    if (!room) {
        L->neff = eff0;
        if (c) {
            c->contexts = UINT64_MAX;   /* stale for good (status != 0: a rooted walk is never relearned) */
            c->neff = 0;                /* its effect is no longer known: it confirms nothing */
        }
        return 0;
    }
    if (c) {            /* learned again: the new effect replaces the old */
        c->eff = eff0;
        c->neff = L->neff - eff0;
        c->outcome = outcome_of(&before, st);
        c->contexts = st->new_contexts;
        return 0;
    }
    size_t nw = 2 * (size_t)l->n - 1;
    if (icpp_vec_reserve((void **)&L->words, &L->capwords, L->nwords + nw, sizeof *L->words, 4096) < 0 ||
        icpp_vec_reserve((void **)&L->chains, &L->capchains, L->nchains + 1, sizeof *L->chains, 256) < 0)
        return -ENOMEM;
    if (icpp_hmap_put(&L->memo, h, 0, L->nchains + 1) < 0)
        return -ENOMEM;
    c = &L->chains[L->nchains++];
    *chain = (uint32_t)L->nchains;
    *c = (struct lchain){h, s->pid, s->exec_gen, l->n, l->status, outcome_of(&before, st), fn0, s->base,
                         L->nwords, eff0, L->neff - eff0, 0, st->new_contexts, 0};
    if (l->n > 1)
        memcpy(L->words + L->nwords, l->pc + 1, (l->n - 1) * sizeof *L->words);
    memcpy(L->words + L->nwords + l->n - 1, l->entry_sp, l->n * sizeof *L->words);
    L->nwords += nw;
    return 0;
}

/* The repeats the memo counted, added to the map. */
static int memo_apply(learner *L)
{
    for (size_t i = 0; i < L->nchains; i++)
        if (chain_apply(L, &L->chains[i]) < 0)
            return -ENOMEM;
    return 0;
}

int icpp_learn_file(const char *samples, icpp_pathmap *pm, icpp_learn_stats *st, icpp_err *err)
{
    return icpp_learn_file_novel(samples, pm, st, NULL, NULL, NULL, err);
}

struct icpp_learner {
    learner          L;
    icpp_learn_stats st;
    int              checked, foreign;
};

icpp_learner *icpp_learner_new(icpp_pathmap *pm)
{
    icpp_learner *lr = calloc(1, sizeof *lr);
    if (!lr)
        return NULL;
    learner *L = &lr->L;
    L->pm = pm;
    L->all = icpp_pathmap_nfuncs(pm) == 0;
    icpp_hmap_init(&L->cid);
    icpp_hmap_init(&L->frames);
    icpp_hmap_init(&L->memo);
    icpp_hmap_init(&L->threads);
    L->cut = UINT64_MAX;
    L->ntrained = icpp_pathmap_nmodules(pm);
    L->trained = calloc(L->ntrained + 1, 1);
    if (!L->trained) {
        free(lr);
        return NULL;
    }
    for (size_t f = 0; f < icpp_pathmap_nfuncs(pm); f++)
        L->trained[icpp_pathmap_func(pm, (uint32_t)f)->module] = 1;
    return lr;
}

int icpp_learner_add(icpp_learner *lr, const icpp_replay *rp, const icpp_rsample *s)
{
    if (!s->learn)
        return 0;
    learner *L = &lr->L;
    lr->st.samples++;
    if (!lr->checked) {
        /* One map, one program: learn samples of another are never merged. */
        const icpp_rmodule *em = icpp_replay_exe_module(rp);
        lr->checked = 1;
        if (em && L->all && icpp_pathmap_nmodules(L->pm) == 0) {
            uint32_t idx;
            if (icpp_pathmap_add_module(L->pm, em->path, &em->build_id,
                                        em->mod ? (uint8_t)icpp_module_kind_of(em->mod) : 0, &idx) < 0)
                return -ENOMEM;
            icpp_pathmap_set_main(L->pm, idx);
        } else if (em && icpp_pathmap_nmodules(L->pm) &&
                   !icpp_build_id_match(&icpp_pathmap_module(L->pm, icpp_pathmap_main(L->pm))->build_id,
                                        icpp_pathmap_module(L->pm, icpp_pathmap_main(L->pm))->path,
                                        &em->build_id, em->path)) {
            lr->foreign = 1;
        }
    }
    if (lr->foreign) {
        lr->st.foreign++;
        return 0;
    }
    uint32_t chain;
    if (learn_memo(L, rp, s, &lr->st, &chain) < 0)
        return -ENOMEM;
    if (!chain || !L->chains[chain - 1].neff)
        return 0;       /* not learned, or its effect not remembered: it confirms nothing */
    /* Good-Turing's count: a chain seen once is one learned sample of a path no other took */
    struct lchain *c = &L->chains[chain - 1];
    L->nseen++;
    L->nonce += c->seen == 0 ? 1 : c->seen == 1 ? (uint64_t)-1 : 0;
    c->seen += c->seen < 2;
    if (L->cut != UINT64_MAX)
        return 0;
    if (L->ntrail >= ICPP_TRAIL_MAX) {
        L->cut = s->time;
        return 0;
    }
    if (!L->nthr || L->thr[L->last].pid != s->pid || L->thr[L->last].tid != s->tid) {
        uint64_t *v = icpp_hmap_get(&L->threads, s->pid, s->tid);
        if (!v) {
            if (icpp_vec_reserve((void **)&L->thr, &L->capthr, L->nthr + 1, sizeof *L->thr, 16) < 0 ||
                icpp_hmap_put(&L->threads, s->pid, s->tid, L->nthr + 1) < 0)
                return -ENOMEM;
            L->thr[L->nthr++] = (struct lthr){s->pid, s->tid};
            v = icpp_hmap_get(&L->threads, s->pid, s->tid);
        }
        L->last = (uint32_t)(*v - 1);
    }
    if (icpp_vec_reserve((void **)&L->trail, &L->captrail, L->ntrail + 1, sizeof *L->trail, 1024) < 0)
        return -ENOMEM;
    L->trail[L->ntrail++] = (struct ltrail){s->time, L->last, chain};
    return 0;
}

struct icpp_learn_trail {
    struct ltrail *e;           /* sorted by (thread, time) */
    size_t         n;
    icpp_hmap      threads;     /* (pid, tid) -> index + 1 */
    struct lthr   *thr;
    struct lchain *chains;
    struct leff   *eff;
    uint64_t       cut;         /* no learn sample kept from this time on */
    double         missing;     /* icpp_learn_trail_missing */
    icpp_hmap      procnode;    /* (pid << 32 | exec generation, node) -> 1: a learn sample of it passed */
    size_t         nprocs;      /* process images among the chains: 0, 1, or 2 for more */
};

static int trail_cmp(const void *a, const void *b)
{
    const struct ltrail *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    return x->time < y->time ? -1 : x->time > y->time;
}

/* t->procnode: which process images (pid, exec generation) each remembered
 * chain's contexts were seen in -- every chain, also those past the trail's
 * cut -- and t->nprocs, 1 or 2 (more than one image).  Out of memory:
 * nothing per process (the map's learn counts serve). */
static void trail_procs(icpp_learn_trail *t, const learner *L)
{
    icpp_hmap_init(&t->procnode);
    uint64_t first = 0;
    for (size_t i = 0; i < L->nchains; i++) {
        const struct lchain *c = &L->chains[i];
        uint64_t pk = (uint64_t)c->pid << 32 | c->gen;
        if (!c->neff)
            continue;
        if (!t->nprocs)
            first = pk, t->nprocs = 1;
        else if (pk != first)
            t->nprocs = 2;
        for (size_t k = 0; k < c->neff; k++)
            if (icpp_hmap_put(&t->procnode, pk, L->eff[c->eff + k].node, 1) < 0) {
                icpp_hmap_free(&t->procnode);
                icpp_hmap_init(&t->procnode);
                t->nprocs = 0;
                return;
            }
    }
}

/* The trail out of L (which gives up its entries, threads, chains and effects). */
static icpp_learn_trail *trail_take(learner *L)
{
    icpp_learn_trail *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    /* one thread's samples, in time order, need no sorting (the common case) */
    int sorted = 1;
    for (size_t i = 1; i < L->ntrail && sorted; i++)
        sorted = trail_cmp(&L->trail[i - 1], &L->trail[i]) <= 0;
    if (!sorted)
        qsort(L->trail, L->ntrail, sizeof *L->trail, trail_cmp);
    *t = (icpp_learn_trail){L->trail, L->ntrail, L->threads, L->thr, L->chains, L->eff, L->cut,
                            L->nseen ? (double)L->nonce / (double)L->nseen : 0.0, {0}, 0};
    trail_procs(t, L);
    L->trail = NULL;
    L->thr = NULL;
    icpp_hmap_init(&L->threads);
    L->chains = NULL;
    L->eff = NULL;
    L->ntrail = L->nthr = L->nchains = L->neff = 0;
    return t;
}

int icpp_learn_trail_process_saw(const icpp_learn_trail *t, uint32_t pid, uint32_t gen, uint32_t node)
{
    if (!t || t->nprocs < 2)
        return -1;
    return icpp_hmap_get(&t->procnode, (uint64_t)pid << 32 | gen, node) != NULL;
}

static int chain_has(const icpp_learn_trail *t, uint32_t chain, uint32_t node, int64_t height)
{
    if (!chain)
        return 0;
    const struct lchain *c = &t->chains[chain - 1];
    for (size_t k = 0; k < c->neff; k++)
        if (t->eff[c->eff + k].node == node && t->eff[c->eff + k].height == height)
            return 1;
    return 0;
}

int icpp_learn_trail_confirms(const icpp_learn_trail *t, uint32_t pid, uint32_t tid, uint64_t time, uint32_t node,
                              int64_t height)
{
    if (!t || !t->n || time >= t->cut)
        return 0;       /* past the trail's end, the learn sample after is unknown: nothing is confirmed */
    const uint64_t *v = icpp_hmap_get(&t->threads, pid, tid);
    if (!v)
        return 0;
    /* first entry after (thread, time) */
    struct ltrail key = {time, (uint32_t)(*v - 1), 0};
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (trail_cmp(&t->e[mid], &key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int before = lo > 0 && t->e[lo - 1].thread == key.thread && chain_has(t, t->e[lo - 1].chain, node, height);
    int after = lo < t->n && t->e[lo].thread == key.thread && chain_has(t, t->e[lo].chain, node, height);
    return before | after << 1;
}

size_t icpp_learn_trail_len(const icpp_learn_trail *t)
{
    return t ? t->n : 0;
}

double icpp_learn_trail_missing(const icpp_learn_trail *t)
{
    return t ? t->missing : 0.0;
}

int icpp_learn_trail_sparse(const icpp_learn_trail *t)
{
    return t && t->missing >= ICPP_LEARN_SPARSE;
}

void icpp_learn_trail_free(icpp_learn_trail *t)
{
    if (!t)
        return;
    free(t->e);
    icpp_hmap_free(&t->threads);
    icpp_hmap_free(&t->procnode);
    free(t->thr);
    free(t->chains);
    free(t->eff);
    free(t);
}

int icpp_learner_end(icpp_learner *lr, icpp_learn_stats *st, uint8_t **novel, size_t *nnovel,
                     icpp_learn_trail **trail)
{
    if (trail)
        *trail = NULL;
    if (!lr)
        return -ENOMEM;
    learner *L = &lr->L;
    int rc = memo_apply(L);
    if (st)
        *st = lr->st;
    if (novel && rc >= 0) {
        /* one byte per function of the map as it is now */
        size_t nf = icpp_pathmap_nfuncs(L->pm);
        uint8_t *n = calloc(nf + 1, 1);
        if (n && L->novel)
            memcpy(n, L->novel, L->nnovel < nf ? L->nnovel : nf);
        *novel = n;
        *nnovel = n ? nf : 0;
        if (!n)
            rc = -ENOMEM;
    }
    if (trail && rc >= 0 && !(*trail = trail_take(L)))
        rc = -ENOMEM;
    icpp_learner_free(lr);
    return rc;
}

void icpp_learner_free(icpp_learner *lr)
{
    if (!lr)
        return;
    learner *L = &lr->L;
    free(L->mod);
    free(L->trained);
    icpp_hmap_free(&L->cid);
    icpp_hmap_free(&L->frames);
    icpp_hmap_free(&L->memo);
    free(L->chains);
    free(L->words);
    free(L->eff);
    free(L->novel);
    for (size_t i = 0; i < L->capalias; i++)
        icpp_alias_index_free(L->alias[i]);
    free(L->alias);
    free(L->trail);
    icpp_hmap_free(&L->threads);
    free(L->thr);
    free(lr);
}

int icpp_learn_file_novel(const char *samples, icpp_pathmap *pm, icpp_learn_stats *st, uint8_t **novel,
                          size_t *nnovel, icpp_learn_trail **trail, icpp_err *err)
{
    if (trail)
        *trail = NULL;
    memset(st, 0, sizeof *st);
    icpp_replay *rp = icpp_replay_open(samples, err);
    if (!rp)
        return -1;
    icpp_replay_select(rp, ICPP_REPLAY_LEARN_ONLY);
    icpp_learner *lr = icpp_learner_new(pm);
    int rc = lr ? 0 : -ENOMEM;
    icpp_rsample s;
    while (rc == 0 && (rc = icpp_replay_next(rp, &s, err)) > 0)
        rc = icpp_learner_add(lr, rp, &s);
    if (rc == 0)
        rc = icpp_learner_end(lr, st, novel, nnovel, trail);
    else
        icpp_learner_free(lr);
    if (rc == -ENOMEM)
        icpp_err_set(err, ENOMEM, "out of memory learning contexts from %s", samples);
    icpp_replay_close(rp);
    return rc < 0 ? -1 : 0;
}
