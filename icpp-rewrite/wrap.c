/* wrap.c -- call-site wrapping: which call sites may go through a stub that lowers the stack, the stubs, their CFI, and the choice of sites. */
#include "wrap.h"

#include "cli.h"
#include "ehwrite.h"
#include "greedy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Paddings a class may take: 0 (not wrapped) to WRAP_MAX bytes in steps of
 * 16, as the resizing search's.  The heights just above a crowded one are
 * often taken by the same leaf's other callers (sqlite3's allocator below a
 * dozen frameless helpers of one parser frame, 16 bytes apart), where a
 * small padding moves a path into another collision. */
#define WRAP_MAX 256

/* A trial of the wrap search (greedy.h): class k wrapped by p instead of
 * cpad[k] moves its own nodes by the difference, and every node called
 * below them with its caller. */
typedef struct wrap_trial_in {
    rw_greedy      *g;
    const uint32_t *cpad;
} wrap_trial_in;

static int32_t wrap_most(void *ctx, uint32_t k)
{
    return WRAP_MAX;
}

static int wrap_trial(void *ctx, uint32_t k, int32_t p, rw_trial *tr)
{
    const wrap_trial_in *in = ctx;
    rw_greedy *g = in->g;
    if ((uint32_t)p == in->cpad[k])
        return 0;
    int64_t dp = (int64_t)p - (int64_t)in->cpad[k];
    for (size_t v = 0; v < g->nvis; v++) {
        uint32_t i = g->vis[v], cn = g->caller[i];
        g->delta[i] = (g->mark[cn] ? g->delta[cn] : 0) + (g->s->node_cls[i] == (int32_t)k ? dp : 0);
    }
    return rw_greedy_score(g, 0, NULL, tr) < 0 ? -1 : 1;
}

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
            malloc((nctx + 1) * sizeof *e.v), nctx};
    rw_greedy g;
    int rc = -1;
    if (rw_greedy_init(&g, pm, caller, s) < 0)
        goto oom;
    if (!e.nwrap || !e.shift || !e.v)
        goto oom;
    wrap_trial_in in = {&g, cpad};
    static const rw_greedy_rules rules = {wrap_most, wrap_trial, 0, 1, 1};
    double t0 = icpp_cli_cpu_seconds();
    uint64_t w, c;
    int64_t hm;
    for (;;) {
        /* Candidates: wrappable classes on the way to an ambiguous context. */
        memset(g.amb, 0, nn);
        evaluate(&e, cpad, &w, &c, &hm, g.amb);
        memcpy(g.base, e.shift, nn * sizeof *g.base);
        memset(g.cand, 0, s->ncls + 1);
        for (size_t i = nn; i-- > 1;) {
            if (!g.amb[i])
                continue;
            uint32_t p = icpp_pathmap_node(pm, (uint32_t)i)->parent;
            if (p)
                g.amb[p] = 1;   /* its ancestors' sites matter too */
            int32_t k = s->node_cls[i];
            if (k >= 0 && s->cls_ok[k])
                g.cand[k] = 1;  /* a wrapped class may take another padding */
        }
        /* The CIDs of the current choice; the best single change, scored
         * by the contexts it moves. */
        int64_t hx, best;
        int32_t bestp;
        if (rw_greedy_fill(&g, NULL, &hx) < 0 ||
            rw_greedy_round(&g, &rules, &in, hm, max_height, t0, time_limit, &best, &bestp) < 0)
            goto oom;
        if (best < 0)
            break;
        cpad[best] = (uint32_t)bestp;
    }
    rc = 0;
    goto out;
oom:
    icpp_err_set(err, ENOMEM, "out of memory choosing call sites to wrap");
out:
    rw_greedy_free(&g);
    free(e.nwrap), free(e.shift), free(e.v);
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
        const rw_site *st = rw_sites_at(s, w[i].ret);
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

int rw_wrap_force(const rw_sites *s, uint64_t call, uint32_t *cpad, icpp_err *err)
{
    const rw_site *st = rw_sites_at(s, call + 5);
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
