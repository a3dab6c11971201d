/* profile.c -- icpp-resolve's profile: resolved sample weights per call path (inlined frames expanded) and event, plus what did not resolve. */
#include "profile.h"

#include "escape.h"
#include "module.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int prof_init(profile *p, const icpp_pathmap *pm, const char *map_path, int inlines)
{
    memset(p, 0, sizeof *p);
    p->pm = pm;
    p->map_path = map_path;
    p->inlines = inlines;
    p->nnodes = icpp_pathmap_nnodes(pm);
    p->node_w = calloc(p->nnodes * PROF_MAX_EVENTS, sizeof *p->node_w);
    p->trained_nodes = p->nnodes;
    p->trained_funcs = icpp_pathmap_nfuncs(pm);
    p->chains = malloc((p->capchains = 64) * sizeof *p->chains);
    if (!p->node_w || !p->chains)
        return -ENOMEM;
    p->chains[0] = (prof_chain){0, 0};
    p->nchains = 1;
    icpp_hmap_init(&p->var_ix);
    icpp_hmap_init(&p->chain_ix);
    icpp_hmap_init(&p->name_ix);
    icpp_hmap_init(&p->at_chain);
    const icpp_pm_module *mm = icpp_pathmap_module(pm, icpp_pathmap_main(pm));
    if (mm) {
        snprintf(p->binary, sizeof p->binary, "%s", mm->path);
        icpp_build_id_hex(&mm->build_id, p->map_build_id, sizeof p->map_build_id);
    }
    return 0;
}

/* The node's most frequent call site, or NULL. */
static const icpp_pm_site *top_site(const icpp_pm_node *n)
{
    if (!n || !n->nsites)
        return NULL;
    const icpp_pm_site *best = &n->sites[0];
    for (uint32_t k = 1; k < n->nsites; k++)
        if (n->sites[k].count > best->count)
            best = &n->sites[k];
    return best;
}

/* The map's module i, opened on first use; NULL if it cannot be read or is
 * another file now (another build-id).  The replay's copy of the same file
 * is borrowed where it has one, so that its DWARF is read once. */
static icpp_module *map_module(profile *p, uint32_t i)
{
    size_t nm = icpp_pathmap_nmodules(p->pm);
    if (!p->mods) {
        p->mods = calloc(nm + 1, sizeof *p->mods);
        p->mods_tried = calloc(nm + 1, 1);
        if (!p->mods || !p->mods_tried)
            return NULL;
    }
    const icpp_pm_module *pmm = icpp_pathmap_module(p->pm, i);
    if (!pmm)
        return NULL;
    for (uint32_t k = 0; !p->mods_tried[i] && p->rp && k < icpp_replay_nmodules(p->rp); k++) {
        const icpp_rmodule *rm = icpp_replay_module(p->rp, k);
        if (rm->mod && icpp_build_id_match(&rm->build_id, rm->path, &pmm->build_id, pmm->path)) {
            p->mods[i] = rm->mod;
            p->mods_tried[i] = 2;       /* borrowed: prof_free leaves it */
        }
    }
    if (!p->mods_tried[i]) {
        p->mods_tried[i] = 1;
        icpp_module *m = icpp_module_open(pmm->path, NULL);
        const icpp_build_id *b = m ? icpp_module_build_id(m) : NULL;
        if (b && !icpp_build_id_match(b, pmm->path, &pmm->build_id, pmm->path)) {
            icpp_module_close(m);           /* another file now: no lines from it */
            m = NULL;
        }
        p->mods[i] = m;
    }
    return p->mods[i];
}

const char *prof_site(profile *p, uint32_t node, char *buf, size_t bufsz)
{
    const icpp_pm_site *best = top_site(icpp_pathmap_node(p->pm, node));
    buf[0] = 0;
    if (!best)
        return buf;
    const icpp_pm_module *pmm = icpp_pathmap_module(p->pm, best->module);
    if (!pmm)
        return buf;
    icpp_module *m = map_module(p, best->module);
    int line = 0;
    /* A call site is a return address: the call instruction ends there. */
    const char *file = m ? icpp_module_srcline(m, best->addr - 1, &line) : NULL;
    if (file) {
        const char *b = strrchr(file, '/');
        snprintf(buf, bufsz, "%s:%d", b ? b + 1 : file, line);
    } else {
        const char *b = strrchr(pmm->path, '/');
        snprintf(buf, bufsz, "%s+%#" PRIx64, b ? b + 1 : pmm->path, best->addr);
    }
    return buf;
}

void prof_free(profile *p)
{
    for (size_t i = 0; p->mods && i < icpp_pathmap_nmodules(p->pm); i++)
        if (p->mods_tried[i] == 1)
            icpp_module_close(p->mods[i]);
    free(p->mods);
    free(p->mods_tried);
    if (p->folder.pm)
        icpp_folder_free(&p->folder);
    free(p->node_w);
    free(p->var);
    icpp_hmap_free(&p->var_ix);
    free(p->chains);
    icpp_hmap_free(&p->chain_ix);
    for (size_t i = 0; i < p->nnames; i++)
        free(p->names[i]);
    free(p->names);
    icpp_hmap_free(&p->name_ix);
    icpp_hmap_free(&p->at_chain);
    free(p->frames);
    free(p->self);
    free(p->self_amb);
    free(p->self_inf);
    free(p->incl);
    for (size_t i = 0; i < p->nextra; i++)
        free(p->extra[i].label);
    free(p->extra);
}

/* ---- inline chains ---- */

/* Grow *v (n used of *cap elements of size sz) to hold one more; 0 or -ENOMEM. */
static int grow(void **v, size_t n, size_t *cap, size_t sz)
{
    return icpp_vec_reserve(v, cap, n + 1, sz, 64);
}

static uint64_t str_hash(const char *s)
{
    uint64_t h = 14695981039346656037ull;      /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Index of name in p->names, added if new; -ENOMEM. */
static int64_t name_id(profile *p, const char *name)
{
    uint64_t h = str_hash(name), probe = 0;
    for (uint64_t *v; (v = icpp_hmap_get(&p->name_ix, h, probe)); probe++)
        if (!strcmp(p->names[*v], name))
            return (int64_t)*v;
    char *copy = NULL;
    if (grow((void **)&p->names, p->nnames, &p->capnames, sizeof *p->names) < 0 || !(copy = strdup(name)) ||
        icpp_hmap_put(&p->name_ix, h, probe, p->nnames) < 0) {
        free(copy);
        return -ENOMEM;
    }
    p->names[p->nnames] = copy;
    return (int64_t)p->nnames++;
}

/* The chain `parent` extended by name (innermost); -ENOMEM. */
static int64_t chain_child(profile *p, uint32_t parent, const char *name)
{
    int64_t nm = name_id(p, name);
    if (nm < 0)
        return nm;
    uint64_t *v = icpp_hmap_get(&p->chain_ix, parent, (uint64_t)nm);
    if (v)
        return (int64_t)*v;
    if (grow((void **)&p->chains, p->nchains, &p->capchains, sizeof *p->chains) < 0 ||
        icpp_hmap_put(&p->chain_ix, parent, (uint64_t)nm, p->nchains) < 0)
        return -ENOMEM;
    p->chains[p->nchains] = (prof_chain){parent, (uint32_t)nm};
    return (int64_t)p->nchains++;
}

/* The inline chain at link-time address addr of module m (0: none), looked
 * up in DWARF once per (module, address); -ENOMEM. */
static int64_t chain_at(profile *p, icpp_module *m, uint64_t addr)
{
    uint64_t *v = icpp_hmap_get(&p->at_chain, (uint64_t)(uintptr_t)m, addr);
    if (v)
        return (int64_t)*v;
    const char *names[PROF_MAX_INLINE];
    int n = icpp_module_inlines(m, addr, names, PROF_MAX_INLINE);
    int64_t c = 0;
    for (int i = 0; i < n && c >= 0; i++)
        c = chain_child(p, (uint32_t)c, names[i]);
    if (c < 0 || icpp_hmap_put(&p->at_chain, (uint64_t)(uintptr_t)m, addr, (uint64_t)c) < 0)
        return -ENOMEM;
    return c;
}

/* The inline chain at node's most frequent call site in its caller: the
 * functions inlined into the caller that made the call (0: none, or the
 * site is not in the caller's own code). */
static int64_t site_chain(profile *p, uint32_t node)
{
    const icpp_pm_node *nd = icpp_pathmap_node(p->pm, node);
    const icpp_pm_site *s = top_site(nd);
    const icpp_pm_func *caller = nd->parent ? icpp_pathmap_func(p->pm, icpp_pathmap_node(p->pm, nd->parent)->func) : NULL;
    if (!s || !caller || s->module != caller->module)
        return 0;
    icpp_module *m = map_module(p, s->module);
    const icpp_func *f = m ? icpp_module_func_at(m, s->addr - 1) : NULL;
    if (!f || f->owner != caller->addr)
        return 0;
    return chain_at(p, m, s->addr - 1);
}

/* Add w to node's leaf weight in chain (0: outside inlined code). */
/* Completion adds nodes to the map while samples are added: grow the
 * per-node arrays to the map's size. */
static int grow_nodes(profile *p)
{
    size_t n = icpp_pathmap_nnodes(p->pm);
    if (n <= p->nnodes)
        return 0;
    prof_nw *a = realloc(p->node_w, n * PROF_MAX_EVENTS * sizeof *a);
    if (!a)
        return -ENOMEM;
    memset(a + p->nnodes * PROF_MAX_EVENTS, 0, (n - p->nnodes) * PROF_MAX_EVENTS * sizeof *a);
    p->node_w = a;
    p->nnodes = n;
    return 0;
}

/* how: 1 the weight is ambiguous, 2 inferred (both may be set) */
static int add_weight(profile *p, uint32_t node, uint32_t chain, uint32_t ev, double w, int how)
{
    if (node >= p->nnodes && grow_nodes(p) < 0)
        return -ENOMEM;
    prof_nw *nw = &p->node_w[(size_t)node * PROF_MAX_EVENTS + ev];
    double *self = &nw->self, *ambw = &nw->amb, *infw = &nw->inf;
    if (chain) {
        uint64_t *v = icpp_hmap_get(&p->var_ix, node, chain);
        if (!v) {
            if (grow((void **)&p->var, p->nvar, &p->capvar, sizeof *p->var) < 0 ||
                icpp_hmap_put(&p->var_ix, node, chain, p->nvar) < 0)
                return -ENOMEM;
            memset(&p->var[p->nvar], 0, sizeof *p->var);
            p->var[p->nvar].node = node;
            p->var[p->nvar].chain = chain;
            v = icpp_hmap_get(&p->var_ix, node, chain);
            p->nvar++;
        }
        self = &p->var[*v].w[ev];
        ambw = &p->var[*v].amb[ev];
        infw = &p->var[*v].inf[ev];
    }
    *self += w;
    if (how & 1)
        *ambw += w;
    if (how & 2)
        *infw += w;
    return 0;
}

const char *prof_func_name(const profile *p, uint32_t func)
{
    const icpp_pm_func *f = icpp_pathmap_func(p->pm, func);
    return f && f->name[0] ? f->name : "?";
}

static prof_extra *extra_for(profile *p, const char *label, int kind)
{
    for (size_t i = 0; i < p->nextra; i++)
        if (p->extra[i].kind == kind && !strcmp(p->extra[i].label, label))
            return &p->extra[i];
    if (grow((void **)&p->extra, p->nextra, &p->capextra, sizeof *p->extra) < 0)
        return NULL;
    prof_extra *e = &p->extra[p->nextra];
    memset(e, 0, sizeof *e);
    e->label = strdup(label);
    e->kind = kind;
    if (!e->label)
        return NULL;
    p->nextra++;
    return e;
}

/* Do all of r's candidates fold to the same path (lib/fold.h)? */
static int fold_one(profile *p, const icpp_resolution *r)
{
    if (!p->folder.pm)
        icpp_folder_init(&p->folder, p->pm);
    uint64_t h = icpp_folder_hash(&p->folder, r->cand[0].node);
    for (uint32_t i = 1; i < r->ncand && h; i++)
        if (icpp_folder_hash(&p->folder, r->cand[i].node) != h)
            return 0;
    return h != 0;
}

int prof_add(profile *p, const icpp_replay *rp, const icpp_rsample *s, const icpp_resolution *r)
{
    uint32_t ev = s->event < PROF_MAX_EVENTS ? s->event : 0;
    p->samples[ev]++;
    p->by_kind[ev][r->kind]++;
    if (r->kind == ICPP_RES_PRECISE || r->kind == ICPP_RES_AMBIGUOUS || r->kind == ICPP_RES_UNCERTAIN ||
        r->kind == ICPP_RES_INFERRED) {
        /* The functions inlined at the sample's address extend its path. */
        int64_t chain = 0;
        const icpp_rmodule *rm = p->inlines && s->module >= 0 ? icpp_replay_module(rp, (uint32_t)s->module) : NULL;
        if (rm && rm->mod && (chain = chain_at(p, rm->mod, s->addr)) < 0)
            return -ENOMEM;
        int inf = r->kind == ICPP_RES_INFERRED ? 2 : 0;
        if (r->ncand == 1 && r->kind != ICPP_RES_UNCERTAIN)
            return add_weight(p, r->cand[0].node, (uint32_t)chain, ev, 1.0, inf);
        if (p->fold && r->kind == ICPP_RES_AMBIGUOUS && fold_one(p, r)) {
            /* every candidate folds to one path: precise in the folded view */
            p->by_kind[ev][r->kind]--;
            p->by_kind[ev][ICPP_RES_PRECISE]++;
            return add_weight(p, r->cand[0].node, (uint32_t)chain, ev, 1.0, 0);
        }
        /* ambiguous, or uncertain (counted with the ambiguous weight: not a sure path), or
         * several inferred paths (equal shares: completion has no counts) */
        /* Share the sample among the candidates in proportion to how often
         * each was entered at this height in training. */
        for (uint32_t i = 0; i < r->ncand; i++) {
            double share = icpp_cand_share(r, i);
            if (add_weight(p, r->cand[i].node, (uint32_t)chain, ev, share, 1 | inf) < 0)
                return -ENOMEM;
        }
        return 0;
    }
    char label[1024];
    const icpp_rmodule *m = s->module >= 0 ? icpp_replay_module(rp, (uint32_t)s->module) : NULL;
    const char *mod = m ? strrchr(m->path, '/') : NULL;
    mod = mod ? mod + 1 : (m ? m->path : "?");
    if (r->kind == ICPP_RES_MISSING) {
        snprintf(label, sizeof label, "[missing] %s", s->func ? s->func->name : "?");
    } else {
        p->by_status[s->status < ICPP_RS_MAX ? s->status : 0]++;
        snprintf(label, sizeof label, "[unresolved: %s] %s:%s", icpp_rs_status_name(s->status), mod,
                 s->func ? s->func->name : "?");
    }
    prof_extra *e = extra_for(p, label, r->kind);
    if (!e)
        return -ENOMEM;
    e->w[ev] += 1.0;
    return 0;
}

/* A new frame under parent; its index, or -ENOMEM. */
static int64_t new_frame(profile *p, uint32_t parent, uint32_t node, uint32_t chain, const char *name)
{
    if (grow((void **)&p->frames, p->nframes, &p->capframes, sizeof *p->frames) < 0)
        return -ENOMEM;
    uint32_t depth = p->nframes ? p->frames[parent].depth + 1 : 0;
    p->frames[p->nframes] = (prof_frame){parent, node, depth, chain, name, !chain && node >= p->trained_nodes};
    return (int64_t)p->nframes++;
}

/* The frames of chain (outermost first) under frame `under`, shared with
 * any that exist (ix: (parent frame, chain) -> frame); the innermost's
 * index, `under` for chain 0, or -ENOMEM. */
static int64_t chain_frames(profile *p, icpp_hmap *ix, uint32_t under, uint32_t node, uint32_t chain)
{
    if (!chain)
        return under;
    int64_t par = chain_frames(p, ix, under, node, p->chains[chain].parent);
    if (par < 0)
        return par;
    uint64_t *v = icpp_hmap_get(ix, (uint64_t)par, chain);
    if (v)
        return (int64_t)*v;
    int64_t f = new_frame(p, (uint32_t)par, node, chain, p->names[p->chains[chain].name]);
    if (f < 0 || icpp_hmap_put(ix, (uint64_t)par, chain, (uint64_t)f) < 0)
        return -ENOMEM;
    return f;
}

/* --fold-recursion: node n's frame is its folded path's (lib/fold.h), shared
 * by every node that folds to the same path (fx: (parent frame, function)
 * -> frame), below the functions inlined at its call site (ix, as
 * chain_frames); each frame keeps the first node on n's path with its
 * function for call sites.  1 + the frame, 0 if the folded path is deeper than the
 * outputs show (the caller places it unfolded), or -ENOMEM. */
static int64_t folded_frame(profile *p, icpp_hmap *ix, icpp_hmap *fx, uint32_t n)
{
    if (!p->folder.pm)
        icpp_folder_init(&p->folder, p->pm);
    const int64_t *g;
    int64_t ng = icpp_folder_path(&p->folder, n, &g);
    if (ng < 0)
        return -ENOMEM;
    if (ng > PROF_MAX_DEPTH)
        return 0;
    uint32_t d = icpp_pathmap_node(p->pm, n)->depth, *nodes = malloc((d + 1) * sizeof *nodes);
    if (!nodes)
        return -ENOMEM;
    for (uint32_t k = n, i = d; k && i > 0; k = icpp_pathmap_node(p->pm, k)->parent)
        nodes[--i] = k;
    uint32_t f = 0, i = 0;
    for (int64_t j = 0; j < ng; j++) {
        while (i + 1 < d && icpp_pathmap_node(p->pm, nodes[i])->func != (uint32_t)g[j])
            i++;                        /* g is a subsequence of the path: match greedily */
        uint32_t node = j == ng - 1 ? n : nodes[i++];
        /* the functions inlined at its call site, where its caller is the
         * folded path's previous function (not one folding removed) */
        const icpp_pm_node *nd = icpp_pathmap_node(p->pm, node);
        if (j > 0 && p->inlines && nd->parent && icpp_pathmap_node(p->pm, nd->parent)->func == (uint32_t)g[j - 1]) {
            int64_t c = site_chain(p, node), par = c < 0 ? c : chain_frames(p, ix, f, nd->parent, (uint32_t)c);
            if (par < 0) {
                free(nodes);
                return -ENOMEM;
            }
            f = (uint32_t)par;
        }
        uint64_t *v = icpp_hmap_get(fx, f, (uint64_t)g[j]);
        if (v) {
            f = (uint32_t)*v;
            continue;
        }
        int64_t nf = new_frame(p, f, node, 0, prof_func_name(p, (uint32_t)g[j]));
        if (nf < 0 || icpp_hmap_put(fx, f, (uint64_t)g[j], (uint64_t)nf) < 0) {
            free(nodes);
            return -ENOMEM;
        }
        f = (uint32_t)nf;
    }
    free(nodes);
    return (int64_t)f + 1;
}

/* The frames: each node's function under its caller's frame -- below the
 * functions inlined at the call site, if any -- and below each node's frame,
 * the functions inlined where its samples were.  Parents precede children. */
static int build_frames(profile *p)
{
    icpp_hmap ix, fx;
    icpp_hmap_init(&ix);
    icpp_hmap_init(&fx);
    if (grow_nodes(p) < 0)
        return -ENOMEM;
    uint32_t *node_frame = malloc(p->nnodes * sizeof *node_frame);
    uint32_t *var_frame = malloc((p->nvar + 1) * sizeof *var_frame);
    int rc = -ENOMEM;
    if (!node_frame || !var_frame || new_frame(p, 0, 0, 0, "") < 0)
        goto out;
    node_frame[0] = 0;
    for (uint32_t n = 1; n < p->nnodes; n++) {
        const icpp_pm_node *nd = icpp_pathmap_node(p->pm, n);
        int64_t ff = p->fold ? folded_frame(p, &ix, &fx, n) : 0;
        if (ff < 0)
            goto out;
        if (ff > 0) {
            node_frame[n] = (uint32_t)(ff - 1);
            continue;
        }
        if (nd->depth > PROF_MAX_DEPTH) {
            /* Deeper than any output shows: every deeper node of this branch
             * shares one frame (a crafted chain stays one line, not N^2). */
            if (icpp_pathmap_node(p->pm, nd->parent)->depth > PROF_MAX_DEPTH) {
                node_frame[n] = node_frame[nd->parent];
                continue;
            }
            int64_t f = new_frame(p, node_frame[nd->parent], n, 0, PROF_DEEPER);
            if (f < 0)
                goto out;
            node_frame[n] = (uint32_t)f;
            continue;
        }
        int64_t par = node_frame[nd->parent], c = p->inlines ? site_chain(p, n) : 0, f;
        if (c < 0 || (par = chain_frames(p, &ix, (uint32_t)par, nd->parent, (uint32_t)c)) < 0 ||
            (f = new_frame(p, (uint32_t)par, n, 0, prof_func_name(p, nd->func))) < 0)
            goto out;
        node_frame[n] = (uint32_t)f;
    }
    for (size_t i = 0; i < p->nvar; i++) {
        int64_t f = chain_frames(p, &ix, node_frame[p->var[i].node], p->var[i].node, p->var[i].chain);
        if (f < 0)
            goto out;
        var_frame[i] = (uint32_t)f;
    }
    size_t nw = p->nframes * PROF_MAX_EVENTS;
    p->self = calloc(nw, sizeof *p->self);
    p->self_amb = calloc(nw, sizeof *p->self_amb);
    p->self_inf = calloc(nw, sizeof *p->self_inf);
    p->incl = calloc(nw, sizeof *p->incl);
    if (!p->self || !p->self_amb || !p->self_inf || !p->incl)
        goto out;
    for (uint32_t n = 1; n < p->nnodes; n++) {
        size_t to = (size_t)node_frame[n] * PROF_MAX_EVENTS, from = (size_t)n * PROF_MAX_EVENTS;
        for (uint32_t e = 0; e < PROF_MAX_EVENTS; e++) {     /* += : deep nodes share a frame */
            p->self[to + e] += p->node_w[from + e].self;
            p->self_amb[to + e] += p->node_w[from + e].amb;
            p->self_inf[to + e] += p->node_w[from + e].inf;
        }
    }
    for (size_t i = 0; i < p->nvar; i++)
        for (uint32_t e = 0; e < PROF_MAX_EVENTS; e++) {
            p->self[(size_t)var_frame[i] * PROF_MAX_EVENTS + e] += p->var[i].w[e];
            p->self_amb[(size_t)var_frame[i] * PROF_MAX_EVENTS + e] += p->var[i].amb[e];
            p->self_inf[(size_t)var_frame[i] * PROF_MAX_EVENTS + e] += p->var[i].inf[e];
        }
    rc = 0;
out:
    free(node_frame);
    free(var_frame);
    icpp_hmap_free(&ix);
    icpp_hmap_free(&fx);
    return rc;
}

int prof_finish(profile *p, const icpp_replay *rp)
{
    const icpp_replay_info *in = icpp_replay_info_get(rp);
    p->nev = in->nevents ? in->nevents : 1;
    if (p->nev > PROF_MAX_EVENTS)
        p->nev = PROF_MAX_EVENTS;
    for (uint32_t e = 0; e < p->nev; e++)
        snprintf(p->ev_names[e], sizeof p->ev_names[e], "%s", in->event_names[e][0] ? in->event_names[e] : "samples");
    p->lost = in->lost;
    p->lost_saturated = in->lost_saturated;
    p->truncated = in->truncated;
    p->clean_end = in->clean_end;
    snprintf(p->command, sizeof p->command, "%s", in->command);
    p->rp = rp;
    if (build_frames(p) < 0)
        return -ENOMEM;
    /* Children come after parents: sum up from the end. */
    memcpy(p->incl, p->self, p->nframes * PROF_MAX_EVENTS * sizeof *p->incl);
    for (size_t f = p->nframes; f-- > 1;) {
        uint32_t par = p->frames[f].parent;
        for (uint32_t e = 0; e < PROF_MAX_EVENTS; e++)
            p->incl[(size_t)par * PROF_MAX_EVENTS + e] += p->incl[f * PROF_MAX_EVENTS + e];
    }
    return 0;
}

void prof_warn_incomplete(FILE *f, const char *path, const icpp_replay_info *in)
{
    if (in->truncated)
        fprintf(f, "icpp-resolve: %s: the last %zu bytes are an incomplete block (the sampler was killed?); "
                   "read what came before\n", path, in->truncated);
    else if (!in->clean_end)
        fprintf(f, "icpp-resolve: %s: the recording ended without its closing record (the sampler was killed?); "
                   "read all it holds\n", path);
    /* What does not add up in the file (docs/samples-format.md, "What a reader checks") */
    if (in->lost_saturated)
        fprintf(f, "icpp-resolve: warning: %s: its LOST records add up to more than %" PRIu64 " lost samples, which "
                   "no sampler loses: the file is damaged or forged; shares are not to be trusted\n", path, UINT64_MAX);
    if (in->clean_end && in->end_samples != in->before_end)
        fprintf(f, "icpp-resolve: warning: %s: its closing record counts %" PRIu64 " samples, the file holds %" PRIu64
                   ": %s; shares are not to be trusted\n", path, in->end_samples, in->before_end,
                in->end_samples > in->before_end ? "samples are missing (the file was cut or altered)"
                                                 : "samples were added (the file was altered)");
    if (in->after_end)
        fprintf(f, "icpp-resolve: warning: %s: %" PRIu64 " samples after its closing record were left out (the file "
                   "was appended to)\n", path, in->after_end);
    if (in->after_exit)
        fprintf(f, "icpp-resolve: warning: %s: %" PRIu64 " samples of threads after their exit record were left "
                   "out (the file was altered)\n", path, in->after_exit);
    if (in->unknown_event)
        fprintf(f, "icpp-resolve: warning: %s: %" PRIu64 " samples of an event no EVENT record declares (id %" PRIu32
                   "%s) were left out (the file was altered)\n", path, in->unknown_event, in->first_unknown,
                in->unknown_event > 1 ? " and others" : "");
}

double prof_total(const profile *p, uint32_t ev)
{
    return (double)p->samples[ev];
}

uint32_t prof_path(const profile *p, uint32_t f, uint32_t *out, uint32_t max)
{
    uint32_t d = f < p->nframes ? p->frames[f].depth : 0;
    for (uint32_t k = d; f && k; f = p->frames[f].parent)
        if (--k < max)
            out[k] = f;
    return d;
}

const char *prof_label(const profile *p, uint32_t f, char *buf, size_t bufsz)
{
    const prof_frame *fr = &p->frames[f];
    if (!fr->chain && !fr->inferred)
        return fr->name;
    snprintf(buf, bufsz, "%s%s", fr->name, fr->chain ? PROF_INLINED_MARK : PROF_INFERRED_MARK);
    return buf;
}

const char *prof_path_str(const profile *p, uint32_t f, const char *sep, char *buf, size_t bufsz)
{
    uint32_t fs[4096];
    uint32_t d = prof_path(p, f, fs, 4096);
    size_t o = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < d && i < 4096 && o + 1 < bufsz; i++) {
        char lb[1024], eb[4096];
        size_t at = o + (i ? strlen(sep) : 0);
        o += (size_t)snprintf(buf + o, bufsz - o, "%s%s", i ? sep : "",
                              icpp_escape(prof_label(p, fs[i], lb, sizeof lb), eb, sizeof eb));
        /* A separator inside a name would split the frame: ',' instead. */
        for (size_t k = at; k < o && k < bufsz && buf[k]; k++)
            if (buf[k] == sep[0])
                buf[k] = ',';
    }
    return buf;
}
