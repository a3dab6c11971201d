/* wrap.c -- call-site wrapping: which call sites may go through a stub that lowers the stack, the stubs, their CFI, and the choice of sites. */
#include "wrap.h"
#include "clone.h"

#include "ehwrite.h"
#include "cli.h"
#include "hmap.h"
#include "vec.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rw_site_cmp(const void *a, const void *b)
{
    const rw_site *x = a, *y = b;
    return x->ret < y->ret ? -1 : x->ret > y->ret;
}

static int range_cmp(const void *a, const void *b)
{
    const icpp_arr_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static rw_site *find_site(const rw_sites *s, uint64_t ret)
{
    rw_site key = {.ret = ret};
    return bsearch(&key, s->v, s->n, sizeof *s->v, rw_site_cmp);
}

/* The caller's CFI row at the call (libdw): CFA = rsp/rbp + offset, and
 * registers saved at CFA offsets.  Anything else is refused. */
static const char *cfi_row(Dwarf_CFI *dcfi, uint64_t at, rw_site *st)
{
    Dwarf_Frame *fr = NULL;
    if (!dcfi || dwarf_cfi_addrframe(dcfi, at, &fr) != 0 || !fr)
        return "no CFI covers the call";
    const char *why = NULL;
    Dwarf_Op *ops = NULL;
    size_t nops = 0;
    /* libdw gives a register + offset rule as DW_OP_bregx (reg, offset). */
    if (dwarf_frame_cfa(fr, &ops, &nops) != 0 || nops != 1 || !ops) {
        why = "the caller's CFA at the call is not rsp or rbp plus an offset";
        goto out;
    }
    if (ops[0].atom == DW_OP_bregx && (ops[0].number == 6 || ops[0].number == 7)) {
        st->cfa_reg = (uint8_t)ops[0].number;
        st->cfa_off = (int64_t)ops[0].number2;
    } else if (ops[0].atom == DW_OP_breg7 || ops[0].atom == DW_OP_breg6) {
        st->cfa_reg = ops[0].atom == DW_OP_breg7 ? 7 : 6;
        st->cfa_off = (int64_t)ops[0].number;
    } else {
        why = "the caller's CFA at the call is not rsp or rbp plus an offset";
        goto out;
    }
    if (st->cfa_off < 16 || st->cfa_off > 1 << 20) {
        why = "the caller's CFA offset at the call is out of range";
        goto out;
    }
    for (int reg = 0; reg <= 16; reg++) {
        if (reg == 7)
            continue;           /* rsp: the CFA */
        Dwarf_Op mem[3];
        ops = NULL;
        nops = 0;
        if (dwarf_frame_register(fr, reg, mem, &ops, &nops) != 0) {
            why = "the caller's CFI at the call cannot be read";
            goto out;
        }
        if (nops == 0)
            continue;           /* undefined or same value: the CIE's default */
        int64_t off;
        if (ops[0].atom == DW_OP_call_frame_cfa && nops == 2 && ops[1].atom == DW_OP_plus_uconst)
            off = (int64_t)ops[1].number;
        else if (ops[0].atom == DW_OP_call_frame_cfa && nops == 3 && ops[1].atom == DW_OP_consts &&
                 ops[2].atom == DW_OP_plus)
            off = (int64_t)ops[1].number;
        else if (ops[0].atom == DW_OP_call_frame_cfa && nops == 1)
            off = 0;
        else {
            why = "a register rule of the caller's CFI at the call is not a save at a CFA offset";
            goto out;
        }
        st->saved |= 1u << reg;
        st->save_off[reg] = off;
    }
    if (!(st->saved & (1u << 16)))
        why = "the caller's CFI at the call does not say where the return address is";
out:
    free(fr);
    return why;
}

static uint32_t uf_find(uint32_t *p, uint32_t x)
{
    while (p[x] != x)
        x = p[x] = p[p[x]];
    return x;
}

int rw_sites_find(rw_sites *s, const icpp_pathmap *pm, const icpp_module *m, const rw_image *img,
                  const rw_frames *fs, const icpp_arr_range *ranges, size_t nranges, icpp_err *err)
{
    memset(s, 0, sizeof *s);
    size_t nn = icpp_pathmap_nnodes(pm), cap = 0;
    uint32_t main = icpp_pathmap_main(pm);
    icpp_arr_range *r = malloc((nranges + 1) * sizeof *r);
    icpp_ehw_fde *fdes = NULL;
    size_t nfdes = 0;
    uint32_t *uf = NULL;
    uint8_t *mixed = NULL;
    Dwarf_CFI *dcfi = NULL;
    if (!r)
        goto oom;
    memcpy(r, ranges, nranges * sizeof *r);
    qsort(r, nranges, sizeof *r, range_cmp);
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t k = 0; k < nd->nsites; k++) {
            if (nd->sites[k].module != main)
                continue;
            if (icpp_vec_reserve((void **)&s->v, &cap, s->n + 1, sizeof *s->v, 64) < 0)
                goto oom;
            s->v[s->n++] = (rw_site){.ret = nd->sites[k].addr};
        }
    }
    if (s->n)
        qsort(s->v, s->n, sizeof *s->v, rw_site_cmp);
    size_t u = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!u || s->v[u - 1].ret != s->v[i].ret)
            s->v[u++] = s->v[i];
    s->n = u;

    /* Judge each site. */
    if (img->eh_frame.size &&
        icpp_ehw_list(img->bytes + img->eh_frame.off, img->eh_frame.size, img->eh_frame.addr, &fdes, &nfdes, err) < 0)
        goto fail;
    dcfi = dwarf_getcfi_elf(icpp_module_elf(m));
    for (size_t i = 0; i < s->n; i++) {
        rw_site *st = &s->v[i];
        size_t avail;
        const uint8_t *c = st->ret >= 5 ? rw_image_code(img, st->ret - 5, &avail) : NULL;
        const icpp_arr_range *own = icpp_arr_range_at(r, nranges, st->ret - 5);
        if (own) {
            st->owner = own->owner;
            const icpp_func *of = icpp_module_func_start(m, own->owner);
            st->owner_name = of ? (of->sym ? of->sym : of->name) : NULL;
        }
        if (!c || avail < 5 || c[0] != 0xe8) {
            st->why = "not a direct call (E8 rel32)";
            continue;
        }
        int32_t rel;
        memcpy(&rel, c + 1, 4);
        st->callee = st->ret + (uint64_t)(int64_t)rel;
        if (!own || !st->owner_name) {
            st->why = "the call is in no function of the program";
            continue;
        }
        const rw_frame *cf = rw_frames_find(fs, st->callee);
        if (!cf) {
            st->why = "the callee is not a function of the program (a PLT stub, a library)";
            continue;
        }
        if (cf->args != RW_ARGS_NONE) {
            st->why = cf->args == RW_ARGS_READ ? "the callee may read stack-passed arguments (the stub would move them)"
                                               : "the callee could not be analysed for stack-passed arguments";
            continue;
        }
        /* An exception table of the caller: a landing pad for this call would
         * be entered from the stub's frame at the wrong depth, and a call it
         * does not list must terminate.  Refused. */
        size_t lo = 0, hi = nfdes;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (fdes[mid].lo <= st->ret - 5)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && st->ret - 5 < fdes[lo - 1].hi && fdes[lo - 1].lsda) {
            st->why = "the caller has an exception table (LSDA)";
            continue;
        }
        if ((st->why = cfi_row(dcfi, st->ret - 5, st)) != NULL)
            continue;
    }

    /* Classes: sites that share a path; a path with sites elsewhere too
     * makes its class unwrappable. */
    uf = malloc((s->n + 1) * sizeof *uf);
    mixed = calloc(s->n + 1, 1);
    s->node_cls = malloc(nn * sizeof *s->node_cls);
    if (!uf || !mixed || !s->node_cls)
        goto oom;
    for (uint32_t i = 0; i < s->n; i++)
        uf[i] = i;
    for (size_t i = 0; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        int64_t first = -1;
        int other = 0;
        for (uint32_t k = 0; k < nd->nsites; k++) {
            if (nd->sites[k].module != main) {
                other = 1;
                continue;
            }
            uint32_t x = (uint32_t)(find_site(s, nd->sites[k].addr) - s->v);
            if (first < 0)
                first = x;
            else
                uf[uf_find(uf, x)] = uf_find(uf, (uint32_t)first);
        }
        if (first >= 0 && other)
            mixed[first] = 1;
        /* The path must enter the call's own target: a return address
         * after an indirect call may have E8 five bytes before it by
         * chance, and a call that tail-jumps elsewhere passes its
         * arguments on. */
        const icpp_pm_func *fn = i ? icpp_pathmap_func(pm, nd->func) : NULL;
        for (uint32_t k = 0; fn && k < nd->nsites; k++) {
            if (nd->sites[k].module != main)
                continue;
            rw_site *st = find_site(s, nd->sites[k].addr);
            if (st && !st->why && (fn->module != main || (fn->addr != st->callee &&
                                                          !rw_frames_tail_reaches(fs, st->callee, fn->addr))))
                st->why = "the paths through it enter another function than the call's target (or its tail calls)";
        }
        s->node_cls[i] = (int32_t)first;   /* a site for now */
    }
    uint32_t *cid = malloc((s->n + 1) * sizeof *cid);
    if (!cid)
        goto oom;
    for (uint32_t i = 0; i < s->n; i++)
        cid[i] = UINT32_MAX;
    for (uint32_t i = 0; i < s->n; i++) {
        uint32_t root = uf_find(uf, i);
        if (cid[root] == UINT32_MAX)
            cid[root] = s->ncls++;
        s->v[i].cls = cid[root];
    }
    free(cid);
    s->cls_ok = malloc(s->ncls + 1);
    s->cls_weight = calloc(s->ncls + 1, sizeof *s->cls_weight);
    if (!s->cls_ok || !s->cls_weight)
        goto oom;
    memset(s->cls_ok, 1, s->ncls + 1);
    for (uint32_t i = 0; i < s->n; i++)
        if (s->v[i].why || mixed[i])
            s->cls_ok[s->v[i].cls] = 0;
    for (size_t i = 0; i < nn; i++) {
        if (s->node_cls[i] < 0)
            continue;
        s->node_cls[i] = (int32_t)s->v[s->node_cls[i]].cls;
        s->cls_weight[s->node_cls[i]] += icpp_pathmap_node(pm, (uint32_t)i)->count;
    }
    int rc = 0;
    goto out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory judging call sites");
fail:
    rw_sites_free(s);
    rc = -1;
out:
    free(uf);
    free(mixed);
    free(r);
    free(fdes);
    if (dcfi)
        dwarf_cfi_end(dcfi);
    return rc;
}

void rw_sites_free(rw_sites *s)
{
    free(s->v);
    free(s->cls_ok);
    free(s->cls_weight);
    free(s->node_cls);
    memset(s, 0, sizeof *s);
}

/* ---- the choice of sites ---- */

typedef struct cx {
    uint32_t func;
    int64_t  h;
    uint64_t count;
} cx;

static int cx_cmp(const void *a, const void *b)
{
    const cx *x = a, *y = b;
    if (x->func != y->func)
        return x->func < y->func ? -1 : 1;
    return x->h < y->h ? -1 : x->h > y->h;
}

typedef struct ev {
    const icpp_pathmap *pm;
    const uint32_t *caller, *fpad;
    const rw_sites *s;
    uint32_t *nwrap;
    int64_t  *shift;
    cx       *v;
    size_t    nv;
    uint8_t  *rec;          /* per node: its subtree (itself too) holds a node of its parent's function */
} ev;

/* Score of class paddings cpad: weight and number of contexts alone in
 * their CID, and the largest height.  If amb is not NULL, marks the nodes
 * with an ambiguous context. */
static void evaluate(ev *e, const uint32_t *cpad, uint64_t *uw, uint64_t *uc, int64_t *hmax, uint8_t *amb)
{
    size_t nn = icpp_pathmap_nnodes(e->pm), k = 0;
    for (size_t i = 0; i < nn; i++)
        e->nwrap[i] = e->s->node_cls[i] >= 0 ? cpad[e->s->node_cls[i]] : 0;
    icpp_arr_shifts(e->pm, e->caller, e->fpad, e->nwrap, e->shift);
    *hmax = 0;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(e->pm, (uint32_t)i);
        for (uint32_t j = 0; j < nd->nheights; j++) {
            int64_t h = nd->heights[j].height + e->shift[i];
            e->v[k++] = (cx){nd->func, h, amb ? i : nd->heights[j].count};
            if (h > *hmax)
                *hmax = h;
        }
    }
    if (amb) {
        /* counts hold node indices here */
        qsort(e->v, k, sizeof *e->v, cx_cmp);
        for (size_t a = 0; a < k;) {
            size_t b = a + 1;
            while (b < k && e->v[b].func == e->v[a].func && e->v[b].h == e->v[a].h)
                b++;
            if (b - a > 1)
                for (size_t c = a; c < b; c++)
                    amb[e->v[c].count] = 1;
            a = b;
        }
        *uw = *uc = 0;
        return;
    }
    qsort(e->v, k, sizeof *e->v, cx_cmp);
    *uw = *uc = 0;
    for (size_t a = 0; a < k;) {
        size_t b = a + 1;
        while (b < k && e->v[b].func == e->v[a].func && e->v[b].h == e->v[a].h)
            b++;
        if (b - a == 1) {
            *uw += e->v[a].count;
            (*uc)++;
        }
        a = b;
    }
}

/* The training agent pops a frame only when a later entry is at or above
 * it (docs/rewrite.md, "Returned frames"), so which returned frames a path
 * records depends on the order of entry heights.  A wrap must keep that
 * order, or a training of OUT would record other paths than OUT's map
 * (orders.c: main calls strtol, then a; wrapping main's call of a would
 * enter a below strtol's returned frame, recorded as main;strtol;a).  For
 * every node N whose shift moved relative to a frame the agent compares it
 * with -- the returned frames on its path below its caller, and the
 * children of those and of its caller (frames its entry may pop) -- the
 * order of their heights under `shift` must be the one under `base`.
 * Except a child Q of N's caller C when N is called from C's own frame (C
 * its parent) and no frame of C's function lies in Q's subtree: the agent
 * takes a call from C's code or from a stub of C (a cold part of C) as
 * C's, and drops every frame above C's topmost frame at N's entry whatever
 * its height (the caller check, docs/train.md "The record"), so Q's height
 * against N's does not matter.  (A returned frame of C's function above N
 * -- recursion, sqlite3's walkers -- would be taken for C: there the rule
 * holds.)
 * Without this exception no call after a sibling at the same height could
 * be wrapped (sqlite3 without frame pointers: 48 of the 50 wrappable
 * classes that would have separated paths were refused for it). */
static int order_kept(const ev *e, const uint32_t *first, const uint32_t *next, const int64_t *base,
                      const int64_t *shift)
{
    size_t nn = icpp_pathmap_nnodes(e->pm);
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *n = icpp_pathmap_node(e->pm, (uint32_t)i);
        int64_t dn = shift[i] - base[i];
        uint32_t stop = e->caller[i], on = (uint32_t)i;
        for (uint32_t a = n->parent;; on = a, a = icpp_pathmap_node(e->pm, a)->parent) {
            const icpp_pm_node *an = icpp_pathmap_node(e->pm, a);
            if (a != stop && a && shift[a] - base[a] != dn) {   /* a returned frame on the path: stays above */
                for (uint32_t x = 0; x < an->nheights; x++)
                    for (uint32_t y = 0; y < n->nheights; y++)
                        if ((an->heights[x].height + base[a] < n->heights[y].height + base[i]) !=
                            (an->heights[x].height + shift[a] < n->heights[y].height + shift[i]))
                            return 0;
            }
            int own_call = a && a == stop && a == n->parent;
            for (uint32_t q = a ? first[a] : 0; q; q = next[q]) {
                if (q == on || shift[q] - base[q] == dn || (own_call && !e->rec[q]))
                    continue;
                const icpp_pm_node *qn = icpp_pathmap_node(e->pm, q);
                for (uint32_t x = 0; x < qn->nheights; x++)
                    for (uint32_t y = 0; y < n->nheights; y++)
                        if ((qn->heights[x].height + base[q] >= n->heights[y].height + base[i]) !=
                            (qn->heights[x].height + shift[q] >= n->heights[y].height + shift[i]))
                            return 0;
            }
            if (!a || a == stop)
                break;
        }
    }
    return 1;
}

/* order_kept for the nodes vis[0..nvis) moved by delta from base (trial:
 * scratch, one per node). */
static int moved_order_kept(const ev *e, const uint32_t *first, const uint32_t *next, const int64_t *base,
                            const int64_t *delta, const uint32_t *vis, size_t nvis, int64_t *trial)
{
    memcpy(trial, base, icpp_pathmap_nnodes(e->pm) * sizeof *trial);
    for (size_t v = 0; v < nvis; v++)
        trial[vis[v]] += delta[vis[v]];
    return order_kept(e, first, next, base, trial);
}

/* e->rec (see ev) in one walk of the tree: on entering node d, the nearest
 * ancestor A of d's function (its depth kept per function) makes A's child
 * on the path recursive; a farther one is marked by the nearest node of its
 * function below it, which lies in the same subtree. */
static int mark_recursion(ev *e, const uint32_t *first, const uint32_t *next)
{
    const icpp_pathmap *pm = e->pm;
    size_t nn = icpp_pathmap_nnodes(pm), nf = icpp_pathmap_nfuncs(pm);
    uint32_t *path = malloc((nn + 1) * sizeof *path), *it = malloc((nn + 1) * sizeof *it);
    int64_t *near = malloc((nf + 1) * sizeof *near), *prev = malloc((nn + 1) * sizeof *prev);
    if (!path || !it || !near || !prev) {
        free(path), free(it), free(near), free(prev);
        return -1;
    }
    memset(e->rec, 0, nn);
    for (size_t f = 0; f <= nf; f++)
        near[f] = -1;
    size_t k = 0;           /* path[0..k]: the nodes from the virtual root; it[j]: path[j]'s next child */
    path[0] = 0;
    it[0] = first[0];
    while (1) {
        uint32_t d = it[k];
        if (!d) {           /* path[k] done: leave it */
            if (!k)
                break;
            uint32_t u = path[k];
            near[icpp_pathmap_node(pm, u)->func] = prev[u];
            k--;
            continue;
        }
        it[k] = next[d];
        uint32_t f = icpp_pathmap_node(pm, d)->func;
        path[++k] = d;
        it[k] = first[d];
        if (near[f] >= 0)
            e->rec[path[near[f] + 1]] = 1;
        prev[d] = near[f];
        near[f] = (int64_t)k;
    }
    free(path), free(it), free(near), free(prev);
    return 0;
}

/* The contexts of each CID under the current choice, for scoring a change
 * by the contexts it moves only: per CID how many contexts and their
 * weight; u and c are the weight and number of contexts alone in theirs. */
typedef struct cidtab {
    icpp_hmap h;            /* (function, height) -> index + 1 */
    uint64_t *cnt, *ws;
    size_t    n, cap;
    uint64_t  u, c;
} cidtab;

static int cid_move(cidtab *t, uint32_t f, int64_t h, int dir, uint64_t w)
{
    uint64_t *v = icpp_hmap_get(&t->h, f, (uint64_t)h);
    size_t i;
    if (v) {
        i = (size_t)*v - 1;
    } else {
        if (t->n == t->cap) {
            size_t nc = t->cap ? 2 * t->cap : 1024;
            uint64_t *a = realloc(t->cnt, nc * sizeof *a), *b = a ? realloc(t->ws, nc * sizeof *b) : NULL;
            if (a)
                t->cnt = a;
            if (!b)
                return -1;
            t->ws = b;
            t->cap = nc;
        }
        i = t->n++;
        t->cnt[i] = t->ws[i] = 0;
        if (icpp_hmap_put(&t->h, f, (uint64_t)h, i + 1) < 0)
            return -1;
    }
    if (t->cnt[i] == 1)
        t->u -= t->ws[i], t->c--;
    t->cnt[i] += (uint64_t)(int64_t)dir;
    t->ws[i] += dir > 0 ? w : -w;
    if (t->cnt[i] == 1)
        t->u += t->ws[i], t->c++;
    return 0;
}

/* Move every context of the nodes vis[0..nvis) by delta[node] (dir 1), or
 * back (dir -1); *hmax gets the largest moved height. */
static int move_all(const icpp_pathmap *pm, cidtab *t, const int64_t *base, const int64_t *delta,
                    const uint32_t *vis, size_t nvis, int dir, int64_t *hmax, const uint32_t *func)
{
    for (size_t v = 0; v < nvis; v++) {
        uint32_t i = vis[v];
        if (!delta[i])
            continue;
        const icpp_pm_node *nd = icpp_pathmap_node(pm, i);
        for (uint32_t j = 0; j < nd->nheights; j++) {
            int64_t h0 = icpp_height_add(nd->heights[j].height, base[i]), h1 = icpp_height_add(h0, delta[i]);
            uint64_t w = nd->heights[j].count;
            uint32_t f = func ? func[i] : nd->func;
            if (cid_move(t, f, dir > 0 ? h0 : h1, -1, w) < 0 || cid_move(t, f, dir > 0 ? h1 : h0, 1, w) < 0)
                return -1;
            if (h1 > *hmax)
                *hmax = h1;
        }
    }
    return 0;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Children lists of every node: by parent (first/next), by the frame it was
 * called from (cfirst/cnext) and by class (kfirst/knext); 0 ends a list. */
static void node_lists(const icpp_pathmap *pm, const uint32_t *caller, const rw_sites *s, uint32_t *first,
                       uint32_t *next, uint32_t *cfirst, uint32_t *cnext, uint32_t *kfirst, uint32_t *knext)
{
    for (size_t i = icpp_pathmap_nnodes(pm); i-- > 1;) {
        uint32_t p = icpp_pathmap_node(pm, (uint32_t)i)->parent;
        next[i] = first[p];
        first[p] = (uint32_t)i;
        cnext[i] = cfirst[caller[i]];
        cfirst[caller[i]] = (uint32_t)i;
        if (s->node_cls[i] >= 0) {
            knext[i] = kfirst[s->node_cls[i]];
            kfirst[s->node_cls[i]] = (uint32_t)i;
        }
    }
}

/* The CID table of every context at height + base[node], of function
 * func[node] (NULL: the node's own); *hmax gets the largest height. */
static int cid_fill(cidtab *t, const icpp_pathmap *pm, const int64_t *base, const uint32_t *func, int64_t *hmax)
{
    icpp_hmap_free(&t->h);
    icpp_hmap_init(&t->h);
    t->n = 0;
    t->u = t->c = 0;
    *hmax = 0;
    for (size_t i = 1; i < icpp_pathmap_nnodes(pm); i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t j = 0; j < nd->nheights; j++) {
            int64_t h = nd->heights[j].height + base[i];
            if (cid_move(t, func ? func[i] : nd->func, h, 1, nd->heights[j].count) < 0)
                return -1;
            *hmax = h > *hmax ? h : *hmax;
        }
    }
    return 0;
}

/* The nodes a change of class k moves, into vis (marked in mark): its own
 * first (*nown of them), then every node called below them, in index order
 * (callers before the nodes they call).  Returns how many. */
static size_t class_reach(uint32_t k, const uint32_t *kfirst, const uint32_t *knext, const uint32_t *cfirst,
                          const uint32_t *cnext, uint8_t *mark, uint32_t *vis, size_t *nown)
{
    size_t nvis = 0;
    for (uint32_t i = kfirst[k]; i; i = knext[i])
        if (!mark[i])
            mark[i] = 1, vis[nvis++] = i;
    *nown = nvis;
    for (size_t v = 0; v < nvis; v++)
        for (uint32_t ch = cfirst[vis[v]]; ch; ch = cnext[ch])
            if (!mark[ch])
                mark[ch] = 1, vis[nvis++] = ch;
    qsort(vis + *nown, nvis - *nown, sizeof *vis, u32_cmp);
    return nvis;
}

/* Paddings a class may take: 0 (not wrapped) to WRAP_MAX bytes in steps of
 * 16, as the resizing search's.  The heights just above a crowded one are
 * often taken by the same leaf's other callers (sqlite3's allocator below a
 * dozen frameless helpers of one parser frame, 16 bytes apart), where a
 * small padding moves a path into another collision. */
#define WRAP_MAX 256

int rw_wrap_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                   int64_t max_height, double time_limit, uint32_t *cpad, icpp_err *err)
{
    size_t nn = icpp_pathmap_nnodes(pm), nctx = 0;
    memset(cpad, 0, (s->ncls + 1) * sizeof *cpad);
    if (!s->ncls)
        return 0;
    for (size_t i = 1; i < nn; i++)
        nctx += icpp_pathmap_node(pm, (uint32_t)i)->nheights;
    ev e = {pm, caller, fpad, s, malloc(nn * sizeof *e.nwrap), malloc(nn * sizeof *e.shift),
            malloc((nctx + 1) * sizeof *e.v), nctx, malloc(nn + 1)};
    uint8_t *amb = calloc(nn, 1), *cand = calloc(s->ncls + 1, 1);
    uint32_t *first = calloc(nn, sizeof *first), *next = calloc(nn, sizeof *next);
    int64_t *base = malloc(nn * sizeof *base), *delta = calloc(nn, sizeof *delta), *trial = malloc(nn * sizeof *trial);
    /* the nodes called from each node's frame, and each class's nodes */
    uint32_t *cfirst = calloc(nn, sizeof *cfirst), *cnext = calloc(nn, sizeof *cnext);
    uint32_t *kfirst = calloc(s->ncls + 1, sizeof *kfirst), *knext = calloc(nn, sizeof *knext);
    uint32_t *vis = malloc((nn + 1) * sizeof *vis);
    uint8_t *mark = calloc(nn, 1);
    cidtab t = {0};
    icpp_hmap_init(&t.h);
    int rc = -1;
    if (!e.nwrap || !e.shift || !e.v || !e.rec || !amb || !cand || !first || !next || !base || !delta || !trial ||
        !cfirst || !cnext || !kfirst || !knext || !vis || !mark)
        goto oom;
    node_lists(pm, caller, s, first, next, cfirst, cnext, kfirst, knext);
    if (mark_recursion(&e, first, next) < 0)
        goto oom;
    double t0 = icpp_cli_cpu_seconds();
    uint64_t w, c;
    int64_t hm;
    for (;;) {
        /* Candidates: wrappable classes on the way to an ambiguous context. */
        memset(amb, 0, nn);
        evaluate(&e, cpad, &w, &c, &hm, amb);
        memcpy(base, e.shift, nn * sizeof *base);
        memset(cand, 0, s->ncls + 1);
        for (size_t i = nn; i-- > 1;) {
            if (!amb[i])
                continue;
            uint32_t p = icpp_pathmap_node(pm, (uint32_t)i)->parent;
            if (p)
                amb[p] = 1;     /* its ancestors' sites matter too */
            int32_t k = s->node_cls[i];
            if (k >= 0 && s->cls_ok[k])
                cand[k] = 1;    /* a wrapped class may take another padding */
        }
        /* The CIDs of the current choice. */
        int64_t hx;
        if (cid_fill(&t, pm, base, NULL, &hx) < 0)
            goto oom;
        uint64_t bw = t.u, bc = t.c;
        /* Best single change, scored by the contexts it moves. */
        int64_t best = -1;
        uint32_t bestp = 0;
        uint64_t nbw = bw, nbc = bc;
        for (uint32_t k = 0; k < s->ncls && icpp_cli_cpu_seconds() - t0 < time_limit; k++) {
            if (!cand[k])
                continue;
            /* The nodes it moves: its own and those called below them. */
            size_t nown, nvis = class_reach(k, kfirst, knext, cfirst, cnext, mark, vis, &nown);
            qsort(vis, nvis, sizeof *vis, u32_cmp);     /* callers before the nodes they call */
            for (uint32_t p = 0; p <= WRAP_MAX; p += 16) {
                if (p == cpad[k])
                    continue;
                int64_t dp = (int64_t)p - (int64_t)cpad[k];
                for (size_t v = 0; v < nvis; v++) {
                    uint32_t i = vis[v], cn = caller[i];
                    delta[i] = (mark[cn] ? delta[cn] : 0) + (s->node_cls[i] == (int32_t)k ? dp : 0);
                }
                int64_t hmax = hm;
                if (move_all(pm, &t, base, delta, vis, nvis, 1, &hmax, NULL) < 0)
                    goto oom;
                uint64_t tw = t.u, tc = t.c;
                if (move_all(pm, &t, base, delta, vis, nvis, -1, &hmax, NULL) < 0)
                    goto oom;
                if (hmax > max_height || !(tw > nbw || (tw == nbw && tc > nbc) ||
                                           (best >= 0 && tw == nbw && tc == nbc &&
                                            s->cls_weight[k] < s->cls_weight[best])))
                    continue;
                if (!moved_order_kept(&e, first, next, base, delta, vis, nvis, trial))
                    continue;
                best = k;
                bestp = p;
                nbw = tw;
                nbc = tc;
            }
            for (size_t v = 0; v < nvis; v++)
                mark[vis[v]] = 0, delta[vis[v]] = 0;
        }
        if (best < 0)
            break;
        cpad[best] = bestp;
    }
    rc = 0;
    goto out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory choosing call sites to wrap");
out:
    icpp_hmap_free(&t.h);
    free(t.cnt), free(t.ws);
    free(e.nwrap), free(e.shift), free(e.v), free(e.rec), free(amb), free(cand), free(first), free(next), free(base), free(delta),
        free(trial), free(cfirst), free(cnext), free(kfirst), free(knext), free(vis), free(mark);
    return rc;
}

/* ---- the choice of clones ---- */

/* Shifts with clones: shift[i] = shift[c] + (the padding of c's frame: its
 * clone's if c was cloned, else its function's) + the wrap of i. */
static void clone_shifts(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const uint32_t *nwrap,
                         const int32_t *ncq, int64_t *shift)
{
    size_t nn = icpp_pathmap_nnodes(pm);
    shift[0] = 0;
    for (size_t i = 1; i < nn; i++) {
        uint32_t c = caller[i];
        int64_t p = !c ? 0 : ncq[c] >= 0 ? (int64_t)ncq[c] : (int64_t)fpad[icpp_pathmap_node(pm, c)->func];
        shift[i] = (c ? shift[c] + p : 0) + nwrap[i];
    }
}

int rw_clone_search(const icpp_pathmap *pm, const uint32_t *caller, const uint32_t *fpad, const rw_sites *s,
                    const uint32_t *cpad, const int32_t *cmax, int64_t max_height, double time_limit,
                    size_t max_clones, int32_t *cq, icpp_err *err)
{
    size_t nn = icpp_pathmap_nnodes(pm), nf = icpp_pathmap_nfuncs(pm), nclones = 0;
    for (uint32_t k = 0; k <= s->ncls; k++)
        cq[k] = -1;
    if (!s->ncls || !max_clones)
        return 0;
    /* only order_kept's and mark_recursion's part of ev: no evaluate() here */
    ev e = {pm, caller, fpad, s, malloc(nn * sizeof *e.nwrap), NULL, NULL, 0, malloc(nn + 1)};
    int32_t *ncq = malloc(nn * sizeof *ncq);            /* per node: its clone's padding, -1 if not cloned */
    uint8_t *amb = calloc(nn, 1), *cand = calloc(s->ncls + 1, 1), *mark = calloc(nn, 1);
    uint32_t *first = calloc(nn, sizeof *first), *next = calloc(nn, sizeof *next);
    uint32_t *cfirst = calloc(nn, sizeof *cfirst), *cnext = calloc(nn, sizeof *cnext);
    uint32_t *kfirst = calloc(s->ncls + 1, sizeof *kfirst), *knext = calloc(nn, sizeof *knext);
    uint32_t *vis = malloc((nn + 1) * sizeof *vis), *func = malloc(nn * sizeof *func);
    int64_t *base = malloc(nn * sizeof *base), *delta = calloc(nn, sizeof *delta), *trial = malloc(nn * sizeof *trial);
    cidtab t = {0};
    icpp_hmap_init(&t.h);
    int rc = -1;
    if (!e.nwrap || !e.rec || !ncq || !amb || !cand || !mark || !first || !next || !cfirst ||
        !cnext || !kfirst || !knext || !vis || !func || !base || !delta || !trial)
        goto oom;
    node_lists(pm, caller, s, first, next, cfirst, cnext, kfirst, knext);
    if (mark_recursion(&e, first, next) < 0)
        goto oom;
    for (size_t i = 0; i < nn; i++) {
        e.nwrap[i] = i && s->node_cls[i] >= 0 ? cpad[s->node_cls[i]] : 0;
        ncq[i] = -1;
        func[i] = i ? icpp_pathmap_node(pm, (uint32_t)i)->func : 0;
    }
    /* A copy of a whole function for a gain below 0.01% of the calls is
     * not worth its code (lua: two dozen clones for 5e-6 of them). */
    uint64_t total = 0;
    for (size_t i = 1; i < nn; i++) {
        const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
        for (uint32_t j = 0; j < nd->nheights; j++)
            total += nd->heights[j].count;
    }
    uint64_t min_gain = total / 10000 ? total / 10000 : 1;
    double t0 = icpp_cli_cpu_seconds();
    while (nclones < max_clones) {
        clone_shifts(pm, caller, fpad, e.nwrap, ncq, base);
        /* The CIDs of the current choice, and the nodes in a shared one. */
        int64_t hm;
        if (cid_fill(&t, pm, base, func, &hm) < 0)
            goto oom;
        memset(amb, 0, nn);
        memset(cand, 0, s->ncls + 1);
        for (size_t i = nn; i-- > 1;) {
            const icpp_pm_node *nd = icpp_pathmap_node(pm, (uint32_t)i);
            for (uint32_t j = 0; j < nd->nheights && !amb[i]; j++) {
                uint64_t *v = icpp_hmap_get(&t.h, func[i], (uint64_t)(nd->heights[j].height + base[i]));
                amb[i] = v && t.cnt[*v - 1] > 1;
            }
            if (!amb[i])
                continue;
            if (nd->parent)
                amb[nd->parent] = 1;
            int32_t k = s->node_cls[i];
            if (k >= 0 && cmax[k] >= 0 && cq[k] < 0)
                cand[k] = 1;
        }
        uint64_t bw = t.u, bc = t.c, nbw = bw, nbc = bc;
        int64_t best = -1;
        int32_t bestq = 0;
        for (uint32_t k = 0; k < s->ncls && icpp_cli_cpu_seconds() - t0 < time_limit; k++) {
            if (!cand[k])
                continue;
            /* Its nodes must run in PROG's code (not called from a clone,
             * nor from another node of the class: the copy calls the
             * original). */
            int ok = kfirst[k] != 0;
            for (uint32_t i = kfirst[k]; i && ok; i = knext[i]) {
                ok = ncq[caller[i]] < 0 && s->node_cls[caller[i]] != (int32_t)k;
                for (uint32_t ch = cfirst[i]; ch && ok; ch = cnext[ch])
                    ok = ncq[ch] < 0;   /* its callees' sites would be in the copy, not redirected */
            }
            if (!ok)
                continue;
            size_t nown, nvis = class_reach(k, kfirst, knext, cfirst, cnext, mark, vis, &nown);
            uint32_t f = func[kfirst[k]];
            uint32_t fid = (uint32_t)(nf + k);
            for (int32_t q = 0; q <= cmax[k]; q += 16) {
                int64_t dq = (int64_t)q - (int64_t)fpad[f];
                for (size_t v = nown; v < nvis; v++) {   /* callers first: delta[cn] is final */
                    uint32_t i = vis[v], cn = caller[i];
                    delta[i] = !mark[cn] ? 0 : delta[cn] + (s->node_cls[cn] == (int32_t)k ? dq : 0);
                }
                /* the class's nodes change function, the rest move */
                int64_t hmax = hm;
                for (size_t v = 0; v < nown; v++) {
                    const icpp_pm_node *nd = icpp_pathmap_node(pm, vis[v]);
                    for (uint32_t j = 0; j < nd->nheights; j++) {
                        int64_t h = nd->heights[j].height + base[vis[v]];
                        if (cid_move(&t, func[vis[v]], h, -1, nd->heights[j].count) < 0 ||
                            cid_move(&t, fid, h, 1, nd->heights[j].count) < 0)
                            goto oom;
                    }
                }
                if (move_all(pm, &t, base, delta, vis + nown, nvis - nown, 1, &hmax, func) < 0)
                    goto oom;
                uint64_t tw = t.u, tc = t.c;
                if (move_all(pm, &t, base, delta, vis + nown, nvis - nown, -1, &hmax, func) < 0)
                    goto oom;
                for (size_t v = 0; v < nown; v++) {
                    const icpp_pm_node *nd = icpp_pathmap_node(pm, vis[v]);
                    for (uint32_t j = 0; j < nd->nheights; j++) {
                        int64_t h = nd->heights[j].height + base[vis[v]];
                        if (cid_move(&t, fid, h, -1, nd->heights[j].count) < 0 ||
                            cid_move(&t, func[vis[v]], h, 1, nd->heights[j].count) < 0)
                            goto oom;
                    }
                }
                if (hmax > max_height || tw < bw + min_gain || !(tw > nbw || (tw == nbw && tc > nbc)))
                    continue;
                if (!moved_order_kept(&e, first, next, base, delta, vis, nvis, trial))
                    continue;
                best = k;
                bestq = q;
                nbw = tw;
                nbc = tc;
            }
            for (size_t v = 0; v < nvis; v++)
                mark[vis[v]] = 0, delta[vis[v]] = 0;
        }
        if (best < 0)
            break;
        cq[best] = bestq;
        nclones++;
        for (uint32_t i = kfirst[best]; i; i = knext[i]) {
            ncq[i] = bestq;
            func[i] = (uint32_t)(nf + (size_t)best);
        }
    }
    rc = 0;
    goto out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory choosing functions to clone");
out:
    icpp_hmap_free(&t.h);
    free(t.cnt), free(t.ws);
    free(e.nwrap), free(e.rec), free(ncq), free(amb), free(cand), free(mark), free(first),
        free(next), free(cfirst), free(cnext), free(kfirst), free(knext), free(vis), free(func), free(base), free(delta),
        free(trial);
    return rc;
}

int rw_wrap_list(const rw_sites *s, const uint32_t *cpad, uint64_t code_addr, icpp_arr_wrap **out, size_t *n,
                 icpp_err *err)
{
    *out = malloc((s->n + 1) * sizeof **out);
    *n = 0;
    if (!*out)
        return icpp_err_set(err, ENOMEM, "out of memory listing wrapped call sites");
    for (size_t i = 0; i < s->n; i++)
        if (cpad[s->v[i].cls]) {
            (*out)[*n] = (icpp_arr_wrap){s->v[i].ret, code_addr + RW_WRAP_STUB * *n + RW_WRAP_RET,
                                         cpad[s->v[i].cls]};
            (*n)++;
        }
    return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static int rel32(uint64_t to, uint64_t from_next, uint8_t *p)
{
    int64_t d = (int64_t)(to - from_next);
    if (d != (int32_t)d)
        return -1;
    put32(p, (uint32_t)(int32_t)d);
    return 0;
}

int rw_wrap_emit(const rw_sites *s, const icpp_arr_wrap *w, size_t n, const icpp_arr_pad *pads, size_t npads,
                 uint64_t code_addr, uint8_t *code, rw_image *img, struct icpp_ehw *eh, icpp_err *err)
{
    size_t cie;
    if (n && icpp_ehw_add_cie(eh, NULL, 0, &cie, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const rw_site *st = find_site(s, w[i].ret);
        uint64_t a = code_addr + RW_WRAP_STUB * i, call = w[i].ret - 5;
        uint8_t *c = code + RW_WRAP_STUB * i;
        size_t avail;
        uint8_t *site = rw_image_code(img, call, &avail);
        if (!st || st->why || !site || avail < 5 || site[0] != 0xe8)
            return icpp_err_set(err, EINVAL, "internal error: the call at %#llx cannot be wrapped",
                                (unsigned long long)call);
        /* sub $P,%rsp; call f; add $P,%rsp; jmp call+5 */
        c[0] = 0x48, c[1] = 0x81, c[2] = 0xec;
        put32(c + 3, w[i].pad);
        c[7] = 0xe8;
        c[12] = 0x48, c[13] = 0x81, c[14] = 0xc4;
        put32(c + 15, w[i].pad);
        c[19] = 0xe9;
        if (rel32(st->callee, a + 12, c + 8) < 0 || rel32(w[i].ret, a + 24, c + 20) < 0 ||
            rel32(a, w[i].ret, site + 1) < 0)
            return icpp_err_set(err, ICPP_EUNSUPPORTED, "the stub of the call at %#llx is out of reach",
                                (unsigned long long)call);
        site[0] = 0xe9;
        /* Its CFI: the caller's row at the call, the CFA P further while
         * rsp is lowered (if the CFA is rsp-based). */
        /* A resized caller's CFA offsets grew by its padding where the CFA
         * is rsp-based (every call of a resized function is inside its
         * frame: frame.c refuses calls outside it); saves stay CFA-relative. */
        int64_t cfa_off = st->cfa_off;
        for (size_t k = 0; k < npads && st->cfa_reg == 7; k++)
            if (pads[k].addr == st->owner)
                cfa_off += pads[k].pad;
        uint8_t ins[128];
        size_t len = 0;
        int bad = icpp_ehw_cfa_def(ins, &len, sizeof ins, st->cfa_reg, (uint64_t)cfa_off) < 0;
        for (int r = 0; r <= 16; r++)
            if (st->saved & (1u << r))
                bad |= icpp_ehw_cfa_saved(ins, &len, sizeof ins, (unsigned)r, st->save_off[r]) < 0;
        if (st->cfa_reg == 7) {
            bad |= icpp_ehw_cfa_advance(ins, &len, sizeof ins, 7) < 0;
            bad |= icpp_ehw_cfa_offset(ins, &len, sizeof ins, (uint64_t)cfa_off + w[i].pad) < 0;
            bad |= icpp_ehw_cfa_advance(ins, &len, sizeof ins, 12) < 0;
            bad |= icpp_ehw_cfa_offset(ins, &len, sizeof ins, (uint64_t)cfa_off) < 0;
        }
        if (bad)
            return icpp_err_set(err, EINVAL, "internal error: the stub's CFI for %#llx does not fit",
                                (unsigned long long)call);
        if (icpp_ehw_add_fde(eh, cie, a, RW_WRAP_STUB, ins, len, err) < 0)
            return -1;
    }
    return 0;
}

uint64_t rw_wrap_code_addr(const rw_image *img)
{
    uint64_t v = rw_image_new_vaddr(img);
    return v ? v + rw_image_phdr_room(img) : 0;
}

int rw_wrap_apply(rw_image *img, const rw_sites *s, const icpp_arr_wrap *w, size_t n, const icpp_arr_pad *pads,
                  size_t npads, const rw_clones_in *ci, icpp_err *err)
{
    size_t nc = ci ? ci->n : 0;
    if (!n && !nc)
        return 0;
    uint64_t v = rw_image_new_vaddr(img), code_addr = rw_wrap_code_addr(img);
    if (!v)
        return icpp_err_set(err, ICPP_EFORMAT, "its ELF headers cannot be read");
    if (!img->eh_frame.size || img->eh_frame.compressed)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "it has no .eh_frame to give the stubs their CFI");
    size_t ncode = RW_WRAP_STUB * n;
    if (nc)
        ncode = (size_t)(ci->c[nc - 1].addr + ci->c[nc - 1].size - code_addr);
    uint64_t eh_addr = (code_addr + ncode + 7) & ~7ull;
    icpp_ehw eh;
    uint8_t *code = calloc(1, ncode), *hdr = NULL, *data = NULL;
    size_t nparts = 0;      /* symbols of the clones: one per part */
    for (size_t i = 0; i < nc; i++)
        nparts += ci->c[i].nparts;
    rw_newsym *syms = calloc(n + nparts, sizeof *syms);
    char *names = calloc(n + nparts, 512);
    size_t hdrlen = 0;
    int rc = -1;
    if (!code || !syms || !names) {
        free(code), free(syms), free(names);
        return icpp_err_set(err, ENOMEM, "out of memory writing the stubs");
    }
    if (icpp_ehw_relocate(&eh, img->bytes + img->eh_frame.off, img->eh_frame.size, img->eh_frame.addr, eh_addr,
                          err) < 0) {
        free(code), free(syms), free(names);
        return -1;
    }
    if (rw_wrap_emit(s, w, n, pads, npads, code_addr, code, img, &eh, err) < 0)
        goto out;
    for (size_t i = 0; i < nc; i++) {
        const icpp_arr_clone *c = &ci->c[i];
        if (rw_clone_emit(ci->cloner, c->orig, rw_frames_find(ci->fs, c->orig), c->pad, c->addr,
                          code + (c->addr - code_addr), &eh, err) < 0)
            goto out;
        for (size_t k = 0; k < c->nrets; k++)
            if (rw_clone_redirect(img, c->rets[k], c->addr, err) < 0)
                goto out;
    }
    if (icpp_ehw_finish(&eh, err) < 0)
        goto out;
    uint64_t hdr_addr = (eh_addr + eh.len + 3) & ~3ull;
    if (icpp_ehw_hdr(eh.buf, eh.len, eh_addr, hdr_addr, &hdr, &hdrlen, err) < 0)
        goto out;
    size_t len = (size_t)(hdr_addr + hdrlen - v);
    if (!(data = calloc(1, len))) {
        icpp_err_set(err, ENOMEM, "out of memory writing the new segment");
        goto out;
    }
    memcpy(data + (code_addr - v), code, ncode);
    memcpy(data + (eh_addr - v), eh.buf, eh.len);
    memcpy(data + (hdr_addr - v), hdr, hdrlen);
    /* CALLER.cold.icpp_wrap.N: the cold-part rule (docs/definitions.md)
     * makes the stub code of CALLER's frame for every ICPP tool. */
    for (size_t i = 0; i < n; i++) {
        const rw_site *st = find_site(s, w[i].ret);
        char *nm = names + 512 * i;
        snprintf(nm, 512, "%.470s.cold.icpp_wrap.%zu", st && st->owner_name ? st->owner_name : "fn", i);
        syms[i] = (rw_newsym){nm, code_addr + RW_WRAP_STUB * i, RW_WRAP_STUB};
    }
    /* NAME.icpp_clone.N: an ordinary function for every tool (gcc's
     * NAME.constprop.N clones are shown the same way). */
    size_t ns_ = n;
    for (size_t i = 0; i < nc; i++)
        for (size_t j = 0; j < ci->c[i].nparts; j++, ns_++) {
            const icpp_arr_part *pt = &ci->c[i].parts[j];
            char *nm = names + 512 * ns_;
            /* a part's copy is the copy's cold part (docs/definitions.md) */
            snprintf(nm, 512, j ? (j > 1 ? "%.480s.cold.%zu" : "%.480s.cold") : "%.480s", ci->c[i].sym, j - 1);
            syms[ns_] = (rw_newsym){nm, pt->addr, pt->hi - pt->lo};
        }
    rw_newseg ns = {v, data, len, code_addr, ncode, eh_addr, eh.len, hdr_addr, hdrlen, syms, ns_};
    rc = rw_image_add_segment(img, &ns, err);
out:
    icpp_ehw_free(&eh);
    free(code), free(hdr), free(data), free(syms), free(names);
    return rc;
}

int rw_wrap_force(const rw_sites *s, uint64_t call, uint32_t *cpad, icpp_err *err)
{
    const rw_site *st = find_site(s, call + 5);
    if (!st)
        return icpp_err_set(err, EINVAL, "--wrap %#llx: no path of the map goes through a call there",
                            (unsigned long long)call);
    if (!s->cls_ok[st->cls]) {
        const char *why = st->why;
        for (size_t i = 0; i < s->n && !why; i++)
            if (s->v[i].cls == st->cls)
                why = s->v[i].why;
        return icpp_err_set(err, EINVAL, "--wrap %#llx: cannot be wrapped: %s", (unsigned long long)call,
                            why ? why : "a path through it also has call sites in another module");
    }
    if (!cpad[st->cls])
        cpad[st->cls] = 16;
    return 0;
}
