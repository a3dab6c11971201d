/* profile.c -- icpp-resolve's profile: resolved sample weights per path-map node and event, plus what did not resolve. */
#include "profile.h"

#include "module.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

int prof_init(profile *p, const icpp_pathmap *pm, const char *map_path)
{
    memset(p, 0, sizeof *p);
    p->pm = pm;
    p->map_path = map_path;
    p->nnodes = icpp_pathmap_nnodes(pm);
    p->self = calloc(p->nnodes * PROF_MAX_EVENTS, sizeof *p->self);
    p->self_amb = calloc(p->nnodes * PROF_MAX_EVENTS, sizeof *p->self_amb);
    p->incl = calloc(p->nnodes * PROF_MAX_EVENTS, sizeof *p->incl);
    if (!p->self || !p->self_amb || !p->incl)
        return -ENOMEM;
    const icpp_pm_module *mm = icpp_pathmap_module(pm, icpp_pathmap_main(pm));
    if (mm) {
        snprintf(p->binary, sizeof p->binary, "%s", mm->path);
        icpp_build_id_hex(&mm->build_id, p->map_build_id, sizeof p->map_build_id);
    }
    return 0;
}

const char *prof_site(profile *p, uint32_t node, char *buf, size_t bufsz)
{
    const icpp_pm_node *n = icpp_pathmap_node(p->pm, node);
    buf[0] = 0;
    if (!n || !n->nsites)
        return buf;
    const icpp_pm_site *best = &n->sites[0];
    for (uint32_t k = 1; k < n->nsites; k++)
        if (n->sites[k].count > best->count)
            best = &n->sites[k];
    size_t nm = icpp_pathmap_nmodules(p->pm);
    if (!p->mods) {
        p->mods = calloc(nm + 1, sizeof *p->mods);
        p->mods_tried = calloc(nm + 1, 1);
        if (!p->mods || !p->mods_tried)
            return buf;
    }
    const icpp_pm_module *pmm = icpp_pathmap_module(p->pm, best->module);
    if (!pmm)
        return buf;
    if (!p->mods_tried[best->module]) {
        p->mods_tried[best->module] = 1;
        icpp_module *m = icpp_module_open(pmm->path, NULL);
        const icpp_build_id *b = m ? icpp_module_build_id(m) : NULL;
        if (b && (b->len != pmm->build_id.len || memcmp(b->bytes, pmm->build_id.bytes, b->len))) {
            icpp_module_close(m);           /* another file now: no lines from it */
            m = NULL;
        }
        p->mods[best->module] = m;
    }
    int line = 0;
    /* A call site is a return address: the call instruction ends there. */
    const char *file = p->mods[best->module] ? icpp_module_srcline(p->mods[best->module], best->addr - 1, &line) : NULL;
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
        icpp_module_close(p->mods[i]);
    free(p->mods);
    free(p->mods_tried);
    free(p->self);
    free(p->self_amb);
    free(p->incl);
    for (size_t i = 0; i < p->nextra; i++)
        free(p->extra[i].label);
    free(p->extra);
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
    if (p->nextra == p->capextra) {
        size_t nc = p->capextra ? 2 * p->capextra : 64;
        prof_extra *n = realloc(p->extra, nc * sizeof *n);
        if (!n)
            return NULL;
        p->extra = n;
        p->capextra = nc;
    }
    prof_extra *e = &p->extra[p->nextra];
    memset(e, 0, sizeof *e);
    e->label = strdup(label);
    e->kind = kind;
    if (!e->label)
        return NULL;
    p->nextra++;
    return e;
}

int prof_add(profile *p, const icpp_replay *rp, const icpp_rsample *s, const icpp_resolution *r)
{
    uint32_t ev = s->event < PROF_MAX_EVENTS ? s->event : 0;
    p->samples[ev]++;
    p->by_kind[ev][r->kind]++;
    if (r->kind == ICPP_RES_PRECISE) {
        p->self[(size_t)r->cand[0].node * PROF_MAX_EVENTS + ev] += 1.0;
        return 0;
    }
    if (r->kind == ICPP_RES_AMBIGUOUS) {
        /* Share the sample among the candidates in proportion to how often
         * each was entered at this height in training. */
        for (uint32_t i = 0; i < r->ncand; i++) {
            double share = r->cand_total ? (double)r->cand[i].count / (double)r->cand_total : 1.0 / r->ncand;
            size_t k = (size_t)r->cand[i].node * PROF_MAX_EVENTS + ev;
            p->self[k] += share;
            p->self_amb[k] += share;
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

void prof_finish(profile *p, const icpp_replay *rp)
{
    const icpp_replay_info *in = icpp_replay_info_get(rp);
    p->nev = in->nevents ? in->nevents : 1;
    if (p->nev > PROF_MAX_EVENTS)
        p->nev = PROF_MAX_EVENTS;
    for (uint32_t e = 0; e < p->nev; e++)
        snprintf(p->ev_names[e], sizeof p->ev_names[e], "%s", in->event_names[e][0] ? in->event_names[e] : "samples");
    p->lost = in->lost;
    p->truncated = in->truncated;
    p->clean_end = in->clean_end;
    snprintf(p->command, sizeof p->command, "%s", in->command);
    /* Children come after parents: sum up from the end. */
    memcpy(p->incl, p->self, p->nnodes * PROF_MAX_EVENTS * sizeof *p->incl);
    for (size_t n = p->nnodes; n-- > 1;) {
        uint32_t par = icpp_pathmap_node(p->pm, (uint32_t)n)->parent;
        for (uint32_t e = 0; e < PROF_MAX_EVENTS; e++)
            p->incl[(size_t)par * PROF_MAX_EVENTS + e] += p->incl[n * PROF_MAX_EVENTS + e];
    }
}

double prof_total(const profile *p, uint32_t ev)
{
    return (double)p->samples[ev];
}

const char *prof_path_str(const profile *p, uint32_t node, const char *sep, char *buf, size_t bufsz)
{
    uint32_t fs[4096];
    uint32_t d = icpp_pathmap_path(p->pm, node, fs, 4096);
    size_t o = 0;
    buf[0] = 0;
    for (uint32_t i = 0; i < d && i < 4096 && o + 1 < bufsz; i++)
        o += (size_t)snprintf(buf + o, bufsz - o, "%s%s", i ? sep : "", prof_func_name(p, fs[i]));
    return buf;
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

void prof_header(const profile *p, FILE *out, const char *lead)
{
    uint64_t all = 0, k[ICPP_RES_MAX] = {0};
    for (uint32_t e = 0; e < p->nev; e++) {
        all += p->samples[e];
        for (int i = 0; i < ICPP_RES_MAX; i++)
            k[i] += p->by_kind[e][i];
    }
    fprintf(out, "%ssamples: %" PRIu64, lead, all);
    for (uint32_t e = 0; e < p->nev; e++)
        fprintf(out, "%s%s %" PRIu64, e ? ", " : " (", p->ev_names[e], p->samples[e]);
    fprintf(out, ")  lost: %" PRIu64 "%s\n", p->lost,
            p->lost ? " (the sampler's ring buffer overflowed; shares may be biased)" : "");
    fprintf(out, "%sprecise %.1f%%  ambiguous %.1f%%  missing %.1f%%  unresolved %.1f%%", lead,
            pct(k[ICPP_RES_PRECISE], all), pct(k[ICPP_RES_AMBIGUOUS], all), pct(k[ICPP_RES_MISSING], all),
            pct(k[ICPP_RES_UNRESOLVED], all));
    int first = 1;
    for (int s = 1; s < ICPP_RS_MAX; s++)
        if (p->by_status[s]) {
            fprintf(out, "%s%s %.1f%%", first ? " (" : ", ", icpp_rs_status_name(s), pct(p->by_status[s], all));
            first = 0;
        }
    fprintf(out, "%s\n", first ? "" : ")");
    fprintf(out, "%smap: %s  binary: %s  build-id: %s\n", lead, p->map_path, p->binary, p->map_build_id);
    if (p->command[0])
        fprintf(out, "%srecorded: %s\n", lead, p->command);
    if (p->truncated)
        fprintf(out, "%swarning: the sample file ends in an incomplete block (%zu bytes): the sampler was killed\n",
                lead, p->truncated);
}
