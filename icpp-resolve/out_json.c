/* out_json.c -- JSON formats: icpp-resolve's own (everything, for scripts) and speedscope's file format. */
#include "mapset.h"
#include "output.h"
#include "sampstat.h"

#include <inttypes.h>
#include <stdlib.h>

void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; c && *c; c++) {
        switch (*c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*c < 0x20)
                fprintf(f, "\\u%04x", *c);
            else
                fputc(*c, f);
        }
    }
    fputc('"', f);
}

/* Per binary: its map, how its samples fared, why no map (an array). */
static void bins_json(const mapset *ms, FILE *f)
{
    fprintf(f, "[");
    for (size_t i = 0; i < ms->nbins; i++) {
        const ms_bin *bn = &ms->bins[i];
        char hex[2 * ICPP_BUILD_ID_MAX + 1];
        icpp_build_id_hex(&bn->bid, hex, sizeof hex);
        fprintf(f, "%s\n    {\"binary\": ", i ? "," : "");
        json_str(f, bn->path);
        fprintf(f, ", \"build_id\": \"%s\", \"map\": ", hex);
        if (bn->map >= 0)
            json_str(f, ms->maps[bn->map].path);
        else
            fprintf(f, "null");
        fprintf(f, ", \"samples\": %" PRIu64 ", \"precise\": %" PRIu64 ", \"ambiguous\": %" PRIu64
                   ", \"missing\": %" PRIu64 ", \"unresolved\": %" PRIu64 ", \"uncertain\": %" PRIu64
                   ", \"inferred\": %" PRIu64 ", \"unresolved_by_reason\": {",
                bn->samples, bn->by_kind[ICPP_RES_PRECISE], bn->by_kind[ICPP_RES_AMBIGUOUS],
                bn->by_kind[ICPP_RES_MISSING], bn->by_kind[ICPP_RES_UNRESOLVED], bn->by_kind[ICPP_RES_UNCERTAIN],
                bn->by_kind[ICPP_RES_INFERRED]);
        int first = 1;
        for (int s = 1; s < ICPP_RS_MAX; s++)
            if (bn->by_status[s]) {
                fprintf(f, "%s", first ? "" : ", ");
                json_str(f, icpp_rs_status_name(s));
                fprintf(f, ": %" PRIu64, bn->by_status[s]);
                first = 0;
            }
        fprintf(f, "}, \"no_map_reason\": ");
        json_str(f, bn->map < 0 ? bn->why : "");
        fprintf(f, "}");
    }
    fprintf(f, "]");
}

static void num(FILE *f, double v)
{
    fprintf(f, "%.10g", v);
}

/* "share_ci": one [LO, HI] per event: the 95% interval of the share
 * w[e] of the event's samples (sampstat.h). */
static void share_ci(const profile *p, FILE *f, const double *w)
{
    fprintf(f, ", \"share_ci\": [");
    for (uint32_t e = 0; e < p->nev; e++) {
        double lo, hi;
        sampstat_ci(w[e], prof_total(p, e), &lo, &hi);
        fprintf(f, "%s[", e ? ", " : "");
        num(f, lo);
        fprintf(f, ", ");
        num(f, hi);
        fprintf(f, "]");
    }
    fprintf(f, "]");
}

void out_json(const profile *p, FILE *f, const out_opts *o)
{
    (void)o;
    uint64_t all = 0, k[ICPP_RES_MAX] = {0};
    for (uint32_t e = 0; e < p->nev; e++) {
        all += p->samples[e];
        for (int i = 0; i < ICPP_RES_MAX; i++)
            k[i] += p->by_kind[e][i];
    }
    fprintf(f, "{\n  \"format\": \"icpp-resolve\", \"version\": 1,\n  \"map\": ");
    json_str(f, p->map_path);
    fprintf(f, ", \"binary\": ");
    json_str(f, p->binary);
    fprintf(f, ", \"build_id\": ");
    json_str(f, p->map_build_id);
    fprintf(f, ",\n  \"recorded\": ");
    json_str(f, p->command);
    fprintf(f, ",\n  \"events\": [");
    for (uint32_t e = 0; e < p->nev; e++) {
        fprintf(f, "%s{\"name\": ", e ? ", " : "");
        json_str(f, p->ev_names[e]);
        fprintf(f, ", \"samples\": %" PRIu64 ", \"precise\": %" PRIu64 ", \"ambiguous\": %" PRIu64
                   ", \"missing\": %" PRIu64 ", \"unresolved\": %" PRIu64 ", \"uncertain\": %" PRIu64
                   ", \"inferred\": %" PRIu64 "}",
                p->samples[e], p->by_kind[e][ICPP_RES_PRECISE], p->by_kind[e][ICPP_RES_AMBIGUOUS],
                p->by_kind[e][ICPP_RES_MISSING], p->by_kind[e][ICPP_RES_UNRESOLVED], p->by_kind[e][ICPP_RES_UNCERTAIN],
                p->by_kind[e][ICPP_RES_INFERRED]);
    }
    fprintf(f, "],\n  \"samples\": %" PRIu64 ", \"lost\": %" PRIu64 ",%s \"truncated_bytes\": %zu,\n", all, p->lost,
            p->lost_saturated ? " \"lost_saturated\": true," : "", p->truncated);
    if (p->learn)
        fprintf(f, "  \"learning\": {\"learn_samples\": %" PRIu64 ", \"learned\": %" PRIu64 ", \"new_contexts\": %" PRIu64
                   ", \"new_paths\": %" PRIu64 ", \"foreign\": %" PRIu64 "},\n",
                p->learn->samples, p->learn->learned, p->learn->new_contexts, p->learn->new_paths, p->learn->foreign);
    fprintf(f, "  \"shares\": {\"precise\": ");
    num(f, all ? (double)k[0] / (double)all : 0);
    fprintf(f, ", \"ambiguous\": ");
    num(f, all ? (double)k[1] / (double)all : 0);
    fprintf(f, ", \"missing\": ");
    num(f, all ? (double)k[2] / (double)all : 0);
    fprintf(f, ", \"unresolved\": ");
    num(f, all ? (double)k[3] / (double)all : 0);
    fprintf(f, ", \"uncertain\": ");
    num(f, all ? (double)k[ICPP_RES_UNCERTAIN] / (double)all : 0);
    fprintf(f, ", \"inferred\": ");
    num(f, all ? (double)k[ICPP_RES_INFERRED] / (double)all : 0);
    fprintf(f, "},\n  \"unresolved_by_reason\": {");
    int first = 1;
    for (int s = 1; s < ICPP_RS_MAX; s++)
        if (p->by_status[s]) {
            fprintf(f, "%s", first ? "" : ", ");
            json_str(f, icpp_rs_status_name(s));
            fprintf(f, ": %" PRIu64, p->by_status[s]);
            first = 0;
        }
    fprintf(f, "},\n  \"binaries\": ");
    if (p->ms)
        bins_json(p->ms, f);
    else
        fprintf(f, "[]");
    fprintf(f, ",\n  \"paths\": [");
    first = 1;
    for (uint32_t i = 1; i < p->nframes; i++) {
        const double *w = &p->self[(size_t)i * PROF_MAX_EVENTS];
        const double *in = &p->incl[(size_t)i * PROF_MAX_EVENTS];
        int any = 0;
        for (uint32_t e = 0; e < p->nev; e++)
            any |= in[e] > 0;
        if (!any)
            continue;
        fprintf(f, "%s\n    {\"node\": %u, \"path\": [", first ? "" : ",", p->frames[i].node);
        uint32_t fs[4096];
        uint32_t d = prof_path(p, i, fs, 4096);
        if (d > 4096)
            d = 4096;
        for (uint32_t j = 0; j < d; j++) {
            fprintf(f, "%s", j ? ", " : "");
            json_str(f, p->frames[fs[j]].name);
        }
        fprintf(f, "], \"inlined\": [");
        for (uint32_t j = 0; j < d; j++)
            fprintf(f, "%s%s", j ? ", " : "", p->frames[fs[j]].chain ? "true" : "false");
        fprintf(f, "], \"self\": [");
        for (uint32_t e = 0; e < p->nev; e++) {
            fprintf(f, "%s", e ? ", " : "");
            num(f, w[e]);
        }
        fprintf(f, "], \"inclusive\": [");
        for (uint32_t e = 0; e < p->nev; e++) {
            fprintf(f, "%s", e ? ", " : "");
            num(f, in[e]);
        }
        fprintf(f, "], \"call_sites\": [");
        /* where each function on the path was called from (root first; "" for
         * the root and for inlined functions) */
        for (uint32_t j = 0; j < d; j++) {
            char site[1024] = "";
            fprintf(f, "%s", j ? ", " : "");
            json_str(f, j && !p->frames[fs[j]].chain ? prof_site((profile *)p, p->frames[fs[j]].node, site, sizeof site) : "");
        }
        fprintf(f, "], \"ambiguous\": [");
        for (uint32_t e = 0; e < p->nev; e++) {
            fprintf(f, "%s", e ? ", " : "");
            num(f, p->self_amb[(size_t)i * PROF_MAX_EVENTS + e]);
        }
        fprintf(f, "], \"inferred\": [");
        for (uint32_t e = 0; e < p->nev; e++) {
            fprintf(f, "%s", e ? ", " : "");
            num(f, p->self_inf[(size_t)i * PROF_MAX_EVENTS + e]);
        }
        fprintf(f, "], \"inferred_frames\": [");
        for (uint32_t j = 0; j < d; j++)
            fprintf(f, "%s%s", j ? ", " : "", p->frames[fs[j]].inferred ? "true" : "false");
        fprintf(f, "]");
        share_ci(p, f, w);
        fprintf(f, "}");
        first = 0;
    }
    fprintf(f, "\n  ],\n  \"unattributed\": [");
    for (size_t i = 0; i < p->nextra; i++) {
        fprintf(f, "%s\n    {\"kind\": \"%s\", \"label\": ", i ? "," : "", icpp_res_kind_name(p->extra[i].kind));
        json_str(f, p->extra[i].label);
        fprintf(f, ", \"self\": [");
        for (uint32_t e = 0; e < p->nev; e++) {
            fprintf(f, "%s", e ? ", " : "");
            num(f, p->extra[i].w[e]);
        }
        fprintf(f, "]");
        share_ci(p, f, p->extra[i].w);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ]");
    if (p->ss) {
        fprintf(f, ",\n  \"sampling\": ");
        sampstat_json(p->ss, f);
    }
    fprintf(f, "\n}\n");
}

/* Speedscope's frame index of frame f: the map's functions, then the
 * inlined functions (marked), then the unattributed labels, then the map's
 * functions again for frames completion placed (marked " [inferred]", as
 * prof_label marks them). */
static size_t ss_frame(const profile *p, uint32_t f)
{
    const prof_frame *fr = &p->frames[f];
    size_t nf = icpp_pathmap_nfuncs(p->pm);
    if (fr->chain)
        return nf + p->chains[fr->chain].name;
    return (fr->inferred ? nf + p->nnames + p->nextra : 0) + icpp_pathmap_node(p->pm, fr->node)->func;
}

void out_speedscope(const profile *p, FILE *f, const out_opts *o)
{
    (void)o;
    size_t nf = icpp_pathmap_nfuncs(p->pm), nx = nf + p->nnames;
    fprintf(f, "{\"$schema\": \"https://www.speedscope.app/file-format-schema.json\",\n");
    fprintf(f, " \"exporter\": \"icpp-resolve 0.1.0\", \"name\": ");
    json_str(f, p->binary);
    fprintf(f, ",\n \"shared\": {\"frames\": [");
    for (size_t i = 0; i < nf; i++) {
        fprintf(f, "%s{\"name\": ", i ? ", " : "");
        json_str(f, prof_func_name(p, (uint32_t)i));
        fprintf(f, "}");
    }
    for (size_t i = 0; i < p->nnames; i++) {
        char lb[1024];
        snprintf(lb, sizeof lb, "%s" PROF_INLINED_MARK, p->names[i]);
        fprintf(f, "%s{\"name\": ", nf + i ? ", " : "");
        json_str(f, lb);
        fprintf(f, "}");
    }
    for (size_t i = 0; i < p->nextra; i++) {
        fprintf(f, "%s{\"name\": ", nx + i ? ", " : "");
        json_str(f, p->extra[i].label);
        fprintf(f, "}");
    }
    for (size_t i = 0; i < nf; i++) {
        char lb[1024];
        snprintf(lb, sizeof lb, "%s" PROF_INFERRED_MARK, prof_func_name(p, (uint32_t)i));
        fprintf(f, "%s{\"name\": ", nx + p->nextra + i ? ", " : "");
        json_str(f, lb);
        fprintf(f, "}");
    }
    fprintf(f, "]},\n \"profiles\": [");
    for (uint32_t e = 0; e < p->nev; e++) {
        double total = 0;
        fprintf(f, "%s\n  {\"type\": \"sampled\", \"name\": ", e ? "," : "");
        json_str(f, p->ev_names[e]);
        fprintf(f, ", \"unit\": \"none\", \"startValue\": 0, \"samples\": [");
        int first = 1;
        for (uint32_t i = 1; i < p->nframes; i++) {
            if (p->self[(size_t)i * PROF_MAX_EVENTS + e] <= 0)
                continue;
            uint32_t fs[4096];
            uint32_t d = prof_path(p, i, fs, 4096);
            fprintf(f, "%s[", first ? "" : ", ");
            for (uint32_t j = 0; j < d && j < 4096; j++)
                fprintf(f, "%s%zu", j ? "," : "", ss_frame(p, fs[j]));
            fprintf(f, "]");
            first = 0;
        }
        for (size_t i = 0; i < p->nextra; i++)
            if (p->extra[i].w[e] > 0) {
                fprintf(f, "%s[%zu]", first ? "" : ", ", nx + i);
                first = 0;
            }
        fprintf(f, "], \"weights\": [");
        first = 1;
        for (uint32_t i = 1; i < p->nframes; i++) {
            double w = p->self[(size_t)i * PROF_MAX_EVENTS + e];
            if (w <= 0)
                continue;
            fprintf(f, "%s", first ? "" : ", ");
            num(f, w);
            total += w;
            first = 0;
        }
        for (size_t i = 0; i < p->nextra; i++)
            if (p->extra[i].w[e] > 0) {
                fprintf(f, "%s", first ? "" : ", ");
                num(f, p->extra[i].w[e]);
                total += p->extra[i].w[e];
                first = 0;
            }
        fprintf(f, "], \"endValue\": ");
        num(f, total);
        fprintf(f, "}");
    }
    fprintf(f, "\n ]}\n");
}
