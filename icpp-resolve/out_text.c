/* out_text.c -- the plain-text formats: hot path list, calling-context tree, folded stacks. */
#include "output.h"

#include "escape.h"
#include "mapset.h"
#include "sampstat.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One line per binary: its map and how its samples fared; and why, where
 * they could not be resolved. */
static void bins_report(const mapset *ms, FILE *out, const char *lead)
{
    for (size_t i = 0; i < ms->nbins; i++) {
        const ms_bin *bn = &ms->bins[i];
        char hex[2 * ICPP_BUILD_ID_MAX + 1];
        icpp_build_id_hex(&bn->bid, hex, sizeof hex);
        /* names from the recording and the file system, escaped (lib/escape.h) */
        fprintf(out, "%sbinary ", lead);
        icpp_escape_fputs(bn->path, out);
        fprintf(out, " (build-id %s): %" PRIu64 " samples, map ", hex, bn->samples);
        icpp_escape_fputs(bn->map >= 0 ? ms->maps[bn->map].path : "none", out);
        fprintf(out, ": precise %" PRIu64 ", ambiguous %" PRIu64 ", missing %" PRIu64 ", unresolved %" PRIu64,
                bn->by_kind[ICPP_RES_PRECISE],
                bn->by_kind[ICPP_RES_AMBIGUOUS], bn->by_kind[ICPP_RES_MISSING], bn->by_kind[ICPP_RES_UNRESOLVED]);
        if (bn->by_kind[ICPP_RES_UNCERTAIN])
            fprintf(out, ", uncertain %" PRIu64, bn->by_kind[ICPP_RES_UNCERTAIN]);
        if (bn->by_kind[ICPP_RES_INFERRED])
            fprintf(out, ", inferred %" PRIu64, bn->by_kind[ICPP_RES_INFERRED]);
        int first = 1;
        for (int s = 1; s < ICPP_RS_MAX; s++)
            if (bn->by_status[s]) {
                fprintf(out, "%s%s %" PRIu64, first ? " (" : ", ", icpp_rs_status_name(s), bn->by_status[s]);
                first = 0;
            }
        fprintf(out, "%s\n", first ? "" : ")");
        if (bn->map < 0 && bn->samples) {
            fprintf(out, "%s  no map: ", lead);
            icpp_escape_fputs(bn->why, out);
            fputc('\n', out);
        }
    }
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 0.0;
}

void out_header(const profile *p, FILE *out, const char *lead)
{
    uint64_t all = 0, k[ICPP_RES_MAX] = {0};
    for (uint32_t e = 0; e < p->nev; e++) {
        all += p->samples[e];
        for (int i = 0; i < ICPP_RES_MAX; i++)
            k[i] += p->by_kind[e][i];
    }
    fprintf(out, "%ssamples: %" PRIu64, lead, all);
    for (uint32_t e = 0; e < p->nev; e++) {
        fputs(e ? ", " : " (", out);
        icpp_escape_fputs(p->ev_names[e], out);
        fprintf(out, " %" PRIu64, p->samples[e]);
    }
    fprintf(out, ")  lost: %s%" PRIu64 "%s\n", p->lost_saturated ? "more than " : "", p->lost,
            p->lost_saturated ? " (the LOST records add up past 2^64: the file is damaged)"
            : p->lost        ? " (the sampler's ring buffer overflowed; shares may be biased)"
                             : "");
    fprintf(out, "%sprecise %.1f%%  ambiguous %.1f%%  missing %.1f%%  unresolved %.1f%%", lead,
            pct(k[ICPP_RES_PRECISE], all), pct(k[ICPP_RES_AMBIGUOUS], all), pct(k[ICPP_RES_MISSING], all),
            pct(k[ICPP_RES_UNRESOLVED], all));
    if (k[ICPP_RES_UNCERTAIN])
        fprintf(out, "  uncertain %.1f%%", pct(k[ICPP_RES_UNCERTAIN], all));
    if (k[ICPP_RES_INFERRED])
        fprintf(out, "  inferred %.1f%%", pct(k[ICPP_RES_INFERRED], all));
    int first = 1;
    for (int s = 1; s < ICPP_RS_MAX; s++)
        if (p->by_status[s]) {
            fprintf(out, "%s%s %.1f%%", first ? " (" : ", ", icpp_rs_status_name(s), pct(p->by_status[s], all));
            first = 0;
        }
    fprintf(out, "%s\n", first ? "" : ")");
    fprintf(out, "%smap: ", lead);
    icpp_escape_fputs(p->map_path, out);
    fputs("  binary: ", out);
    icpp_escape_fputs(p->binary, out);
    fprintf(out, "  build-id: %s\n", p->map_build_id);
    if (p->learn && p->learn->samples)
        fprintf(out, "%slearned: %" PRIu64 " of %" PRIu64 " learn samples (%" PRIu64 " contexts new to the map)\n", lead,
                p->learn->learned, p->learn->samples, p->learn->new_contexts);
    if (p->ms && p->ms->evidence_on && icpp_learn_trail_sparse(p->ms->trail))
        fprintf(out, "%s  %.0f%% of them took a path no other one took: too few for this program's paths, so more "
                     "samples are uncertain or inferred; sample faster (-c, -F) or longer (docs/resolve.md, "
                     "\"Recording size\")\n",
                lead, 100.0 * icpp_learn_trail_missing(p->ms->trail));
    if (p->ms)
        bins_report(p->ms, out, lead);
    if (p->ss)
        sampstat_describe(p->ss, out, lead);
    if (p->command[0]) {
        fprintf(out, "%srecorded: ", lead);
        icpp_escape_fputs(p->command, out);
        fputc('\n', out);
    }
    if (p->truncated)
        fprintf(out, "%swarning: the sample file ends in an incomplete block (%zu bytes): the sampler was killed\n",
                lead, p->truncated);
    else if (!p->clean_end)
        fprintf(out, "%swarning: the recording ended without its closing record (the sampler was killed?)\n", lead);
}

typedef struct row {
    uint32_t node;          /* frame; 0 for an extra row */
    size_t   extra;
    double   w;
} row;

static int row_cmp(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return x->node < y->node ? -1 : x->node > y->node;
}

static double wsum(const double *v, uint32_t nev)
{
    double s = 0;
    for (uint32_t e = 0; e < nev; e++)
        s += v[e];
    return s;
}

/* A long path folded in the middle: first 3, "... N more ...", last 4.
 * With sites, each function after the root shows where it was called. */
static void print_path(const profile *p, FILE *f, uint32_t frame, int full, int sites)
{
    uint32_t fs[4096];
    uint32_t d = prof_path(p, frame, fs, 4096);
    if (d > 4096)
        d = 4096;
    for (uint32_t i = 0; i < d; i++) {
        if (!full && d > 9 && i == 3) {
            fprintf(f, " -> ... %u more ...", d - 7);
            i = d - 5;
            continue;
        }
        char lb[1024], site[1024];
        fputs(i ? " -> " : "", f);
        icpp_escape_fputs(prof_label(p, fs[i], lb, sizeof lb), f);
        if (sites && i && !p->frames[fs[i]].chain && *prof_site((profile *)p, p->frames[fs[i]].node, site, sizeof site)) {
            fputs(" (", f);
            icpp_escape_fputs(site, f);
            fputc(')', f);
        }
    }
}

void out_text(const profile *p, FILE *f, const out_opts *o)
{
    out_header(p, f, "# ");
    size_t n = 0;
    row *rows = malloc((p->nframes + p->nextra + 1) * sizeof *rows);
    if (!rows)
        return;
    uint32_t ev = o->sort_ev < p->nev ? o->sort_ev : 0;
    for (uint32_t i = 1; i < p->nframes; i++) {
        const double *w = &p->self[(size_t)i * PROF_MAX_EVENTS];
        if (wsum(w, p->nev) > 0)
            rows[n++] = (row){i, 0, w[ev] + 1e-9 * wsum(w, p->nev)};
    }
    for (size_t i = 0; i < p->nextra; i++)
        rows[n++] = (row){0, i, p->extra[i].w[ev] + 1e-9 * wsum(p->extra[i].w, p->nev)};
    qsort(rows, n, sizeof *rows, row_cmp);
    fprintf(f, "%5s", "rank");
    for (uint32_t e = 0; e < p->nev; e++) {
        char eb[64];
        fprintf(f, " %12.12s %6s %13s", icpp_escape(p->ev_names[e], eb, sizeof eb), "%", "95% interval");
    }
    fprintf(f, " %5s %s  %s\n", "amb%", "o", "call path (root -> leaf)");
    /* ties: ranks not statistically ahead of the next one (column o: '~') */
    char ties[1024];
    size_t tl = 0;
    double nev_total = prof_total(p, ev);
    for (size_t r = 0; r < n && (o->top <= 0 || r < (size_t)o->top); r++) {
        fprintf(f, "%5zu", r + 1);
        const double *w = rows[r].node ? &p->self[(size_t)rows[r].node * PROF_MAX_EVENTS] : p->extra[rows[r].extra].w;
        for (uint32_t e = 0; e < p->nev; e++) {
            double t = prof_total(p, e), lo, hi;
            char ci[64];
            sampstat_ci(w[e], t, &lo, &hi);
            snprintf(ci, sizeof ci, "%.1f-%.1f%%", 100 * lo, 100 * hi);
            fprintf(f, " %12.1f %5.1f%% %13s", w[e], t > 0 ? 100.0 * w[e] / t : 0.0, ci);
        }
        char mark = ' ';
        if (r + 1 < n) {
            const double *wn = rows[r + 1].node ? &p->self[(size_t)rows[r + 1].node * PROF_MAX_EVENTS]
                                                : p->extra[rows[r + 1].extra].w;
            double more;
            mark = sampstat_ordered(w[ev], wn[ev], nev_total, &more) ? '>' : '~';
            if (mark == '~' && tl < sizeof ties - 64) {
                if (isinf(more))
                    tl += (size_t)snprintf(ties + tl, sizeof ties - tl, "%s%zu: equal", tl ? ", " : "", r + 1);
                else
                    tl += (size_t)snprintf(ties + tl, sizeof ties - tl, "%s%zu: +%.0f", tl ? ", " : "", r + 1, more);
            }
        }
        if (rows[r].node) {
            const double *a = &p->self_amb[(size_t)rows[r].node * PROF_MAX_EVENTS];
            double ws = wsum(w, p->nev);
            fprintf(f, " %4.0f%% %c  ", ws > 0 ? 100.0 * wsum(a, p->nev) / ws : 0.0, mark);
            print_path(p, f, rows[r].node, o->full, o->sites);
            /* weight from completion: never trained, said so at the path */
            double inf = wsum(&p->self_inf[(size_t)rows[r].node * PROF_MAX_EVENTS], p->nev);
            if (inf > 0 && ws > 0)
                fprintf(f, inf >= ws * 0.9995 ? "  [inferred]" : "  [inferred %.0f%%]", 100.0 * inf / ws);
        } else {
            fprintf(f, " %5s %c  ", "-", mark);
            icpp_escape_fputs(p->extra[rows[r].extra].label, f);
        }
        fputc('\n', f);
    }
    if (o->top > 0 && n > (size_t)o->top)
        fprintf(f, "# %zu more paths (-n 0 shows all; --full-paths unfolds long paths)\n", n - (size_t)o->top);
    if (tl)
        fprintf(f, "# o: '>' ahead of the next rank at 95%%, '~' not (their shares' intervals overlap); samples that "
                   "would order them at these shares: %s%s\n", ties, tl >= sizeof ties - 64 ? ", ..." : "");
    free(rows);
}

/* ---- tree ---- */

typedef struct kids {
    uint32_t *first, *next;     /* child lists, sorted by inclusive weight */
} kids;

static const profile *sort_p;
static uint32_t sort_ev_g;
static int kid_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    double wx = sort_p->incl[(size_t)x * PROF_MAX_EVENTS + sort_ev_g], wy = sort_p->incl[(size_t)y * PROF_MAX_EVENTS + sort_ev_g];
    if (wx != wy)
        return wx > wy ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int build_kids(const profile *p, uint32_t ev, kids *k)
{
    size_t n = p->nframes;
    uint32_t *order = malloc(n * sizeof *order);
    k->first = malloc(n * sizeof *k->first);
    k->next = malloc(n * sizeof *k->next);
    if (!order || !k->first || !k->next) {
        free(order);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        order[i] = (uint32_t)i;
        k->first[i] = k->next[i] = 0;
    }
    sort_p = p;
    sort_ev_g = ev;
    qsort(order + 1, n - 1, sizeof *order, kid_cmp);
    /* Insert in reverse so each list ends up heaviest first. */
    for (size_t i = n; i-- > 1;) {
        uint32_t c = order[i], par = p->frames[c].parent;
        k->next[c] = k->first[par];
        k->first[par] = c;
    }
    free(order);
    return 0;
}

static void tree_rec(const profile *p, FILE *f, const out_opts *o, const kids *k, uint32_t node, int depth,
                     char *prefix, size_t plen)
{
    uint32_t ev = o->sort_ev < p->nev ? o->sort_ev : 0;
    double t = prof_total(p, ev);
    for (uint32_t c = k->first[node]; c; c = k->next[c]) {
        double in = p->incl[(size_t)c * PROF_MAX_EVENTS + ev], se = p->self[(size_t)c * PROF_MAX_EVENTS + ev];
        if (t <= 0 || 100.0 * in / t < o->min_pct)
            continue;
        int last = 1;
        for (uint32_t d = k->next[c]; d; d = k->next[d])
            if (100.0 * p->incl[(size_t)d * PROF_MAX_EVENTS + ev] / t >= o->min_pct)
                last = 0;
        char lb[1024];
        fprintf(f, "%7.2f%% %7.2f%%  %s%s", 100.0 * in / t, 100.0 * se / t, prefix, depth ? (last ? "`- " : "|- ") : "");
        icpp_escape_fputs(prof_label(p, c, lb, sizeof lb), f);
        fputc('\n', f);
        if (plen + 4 < 4096) {
            size_t add = depth ? 3 : 0;
            memcpy(prefix + plen, last ? "   " : "|  ", add);
            prefix[plen + add] = 0;
            tree_rec(p, f, o, k, c, depth + 1, prefix, plen + add);
            prefix[plen] = 0;
        }
    }
}

void out_tree(const profile *p, FILE *f, const out_opts *o)
{
    out_header(p, f, "# ");
    uint32_t ev = o->sort_ev < p->nev ? o->sort_ev : 0;
    fputs("# ", f);
    icpp_escape_fputs(p->ev_names[ev], f);
    fprintf(f, ", %% of all samples; children sorted by inclusive weight; nodes under %.2f%% hidden\n", o->min_pct);
    fprintf(f, "%8s %8s  %s\n", "incl", "self", "function");
    kids k;
    if (build_kids(p, ev, &k) < 0)
        return;
    char prefix[4096] = "";
    tree_rec(p, f, o, &k, 0, 0, prefix, 0);
    double t = prof_total(p, ev);
    for (size_t i = 0; i < p->nextra; i++)
        if (t > 0 && 100.0 * p->extra[i].w[ev] / t >= o->min_pct)
        {
            fprintf(f, "%7.2f%% %7.2f%%  ", 100.0 * p->extra[i].w[ev] / t, 100.0 * p->extra[i].w[ev] / t);
            icpp_escape_fputs(p->extra[i].label, f);
            fputc('\n', f);
        }
    free(k.first);
    free(k.next);
}

/* A folded-stack weight: digits and an optional fraction, never an exponent
 * (flamegraph.pl reads /(\d+(?:\.\d*)?)$/; "%g" gave 1.23457e+06). */
static void put_weight(FILE *f, double w)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%.6f", w);
    char *e = buf + strlen(buf);
    while (e[-1] == '0')
        *--e = 0;
    if (e[-1] == '.')
        e[-1] = 0;
    fputs(buf, f);
}

void out_folded(const profile *p, FILE *f, const out_opts *o)
{
    uint32_t ev = o->sort_ev < p->nev ? o->sort_ev : 0;
    char buf[65536];
    for (uint32_t i = 1; i < p->nframes; i++) {
        double w = p->self[(size_t)i * PROF_MAX_EVENTS + ev];
        if (w > 0) {
            fprintf(f, "%s ", prof_path_str(p, i, ";", buf, sizeof buf));
            put_weight(f, w);
            fputc('\n', f);
        }
    }
    for (size_t i = 0; i < p->nextra; i++)
        if (p->extra[i].w[ev] > 0) {
            /* ';' separates frames: keep it out of the label */
            snprintf(buf, sizeof buf, "%s", p->extra[i].label);
            for (char *c = buf; *c; c++)
                if (*c == ';')
                    *c = ',';
            icpp_escape_fputs(buf, f);
            fputc(' ', f);
            put_weight(f, p->extra[i].w[ev]);
            fputc('\n', f);
        }
}
