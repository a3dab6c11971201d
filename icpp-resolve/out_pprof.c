/* out_pprof.c -- pprof's profile.proto, gzipped (loads in `go tool pprof` and pprof-compatible backends). */
#include "output.h"

#include "profile.pb-c.h"
#include "vec.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct strtab {
    char  **v;
    size_t  n, cap;
} strtab;

/* Index of s in the table (linear search is fine: names are few thousand at most). */
static int64_t str_ix(strtab *t, const char *s)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i], s))
            return (int64_t)i;
    if (icpp_vec_reserve((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v, 64) < 0)
        return 0;
    t->v[t->n] = strdup(s);
    return t->v[t->n] ? (int64_t)t->n++ : 0;
}

/* Round weights to integers so that, per event, they add up to the sample
 * count (largest remainder): pprof values are integers, and ambiguous
 * samples are shared in fractions. */
static void round_weights(const double *w, size_t n, int64_t *out)
{
    double total = 0;
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        total += w[i];
        out[i] = (int64_t)floor(w[i]);
        sum += out[i];
    }
    int64_t want = llround(total);
    while (sum < want) {
        size_t best = 0;
        double bf = -1;
        for (size_t i = 0; i < n; i++) {
            double fr = w[i] - (double)out[i];
            if (fr > bf) {
                bf = fr;
                best = i;
            }
        }
        if (bf <= 0)
            break;
        out[best]++;
        sum++;
    }
}

/* Locations of functions with inlined frames: one per (function, inline
 * chain), its lines the chain's functions innermost first, then the
 * function (profile.proto: "the last entry represents the caller into which
 * the preceding entries were inlined"). */
typedef struct ilocs {
    uint32_t *func, *chain;     /* path-map function, chain */
    size_t    n, cap;
    icpp_hmap ix;               /* (func, chain) -> index */
} ilocs;

/* Index of (func, chain) in l, added if new; -1 when out of memory. */
static int64_t iloc_ix(ilocs *l, uint32_t func, uint32_t chain)
{
    uint64_t *v = icpp_hmap_get(&l->ix, func, chain);
    if (v)
        return (int64_t)*v;
    size_t capf = l->cap;       /* two arrays of one capacity: l->cap grows when both have */
    if (icpp_vec_reserve((void **)&l->func, &capf, l->n + 1, sizeof *l->func, 64) < 0 ||
        icpp_vec_reserve((void **)&l->chain, &l->cap, l->n + 1, sizeof *l->chain, 64) < 0)
        return -1;
    if (icpp_hmap_put(&l->ix, func, chain, l->n) < 0)
        return -1;
    l->func[l->n] = func;
    l->chain[l->n] = chain;
    return (int64_t)l->n++;
}

/* Event e's values of the rows (frames rowf[0..nrows), then the
 * labels) into vals[row * PROF_MAX_EVENTS + e], rounded (round_weights);
 * w and tmp: scratch of a value per row. */
static void event_values(const profile *p, uint32_t e, const uint32_t *rowf, size_t nrows, double *w, int64_t *tmp,
                         int64_t *vals)
{
    size_t total_rows = nrows + p->nextra;
    for (size_t r = 0; r < nrows; r++)
        w[r] = p->self[(size_t)rowf[r] * PROF_MAX_EVENTS + e];
    for (size_t r = 0; r < p->nextra; r++)
        w[nrows + r] = p->extra[r].w[e];
    round_weights(w, total_rows, tmp);
    for (size_t r = 0; r < total_rows; r++)
        vals[r * PROF_MAX_EVENTS + e] = tmp[r];
}

/* Mapping m (ids from 1): the map's module m, its file and build-id. */
static void fill_mapping(const profile *p, strtab *st, Perftools__Profiles__Mapping *map, size_t m)
{
    const icpp_pm_module *pmm = icpp_pathmap_module(p->pm, (uint32_t)m);
    char bid[2 * ICPP_BUILD_ID_MAX + 1];
    icpp_build_id_hex(&pmm->build_id, bid, sizeof bid);
    perftools__profiles__mapping__init(map);
    map->id = m + 1;
    map->filename = str_ix(st, pmm->path);
    map->build_id = str_ix(st, bid);
    map->has_functions = 1;
}

/* Function i of the profile (ids from 1): the map's (i < nf), the
 * unattributed labels (from nf), the inlined functions' names (from
 * fn_names0), the map's marked inferred (from fn_inf0). */
static void fill_function(const profile *p, strtab *st, Perftools__Profiles__Function *fn, size_t i, size_t nf,
                          size_t fn_names0, size_t fn_inf0)
{
    perftools__profiles__function__init(fn);
    fn->id = i + 1;
    if (i < nf || i >= fn_inf0) {
        uint32_t fi = (uint32_t)(i < nf ? i : i - fn_inf0);
        const icpp_pm_func *pf = icpp_pathmap_func(p->pm, fi);
        char lb[1024];
        snprintf(lb, sizeof lb, "%s%s", prof_func_name(p, fi), i >= fn_inf0 ? PROF_INFERRED_MARK : "");
        fn->name = fn->system_name = str_ix(st, lb);
        fn->filename = str_ix(st, icpp_pathmap_module(p->pm, pf->module)->path);
    } else if (i < fn_names0) {
        fn->name = fn->system_name = str_ix(st, p->extra[i - nf].label);
    } else {
        fn->name = fn->system_name = str_ix(st, p->names[i - fn_names0]);
    }
}

/* The locations of frame row's path, leaf first, into sm (its own
 * array): each function with the frames inlined into it folded into one
 * location (il).  Locations: per map function, per label, per map
 * function's inferred frames, then per il entry (out_pprof).  0, or -1 out
 * of memory. */
static int sample_locations(const profile *p, ilocs *il, uint32_t row, size_t nf, Perftools__Profiles__Sample *sm)
{
    size_t loc_inf0 = nf + p->nextra, loc_chain0 = loc_inf0 + nf;
    uint64_t *ids = malloc(p->frames[row].depth * sizeof *ids);
    if (!ids)
        return -1;
    size_t k = 0;
    for (uint32_t fr = row; fr;) {
        uint32_t chain = p->frames[fr].chain;
        while (p->frames[fr].chain)
            fr = p->frames[fr].parent;
        uint32_t func = icpp_pathmap_node(p->pm, p->frames[fr].node)->func;
        int inf = p->frames[fr].inferred;
        /* il's functions: the map's, then nf + f for f's inferred frames */
        int64_t ix = chain ? iloc_ix(il, func + (inf ? (uint32_t)nf : 0), chain) : 0;
        if (ix < 0) {
            free(ids);
            return -1;
        }
        ids[k++] = chain ? loc_chain0 + (uint64_t)ix + 1 : (inf ? loc_inf0 : 0) + func + 1;
        fr = p->frames[fr].parent;
    }
    sm->location_id = ids;
    sm->n_location_id = k;
    return 0;
}

/* Location i (ids from 1) with its lines from lines[*ln] on: an inline
 * chain's functions innermost first, then the function (or label). */
static void fill_location(const profile *p, const ilocs *il, Perftools__Profiles__Location *loc, size_t i, size_t nf,
                          size_t fn_names0, Perftools__Profiles__Line *lines, Perftools__Profiles__Line **linep,
                          size_t *ln)
{
    size_t loc_inf0 = nf + p->nextra, loc_chain0 = loc_inf0 + nf, fn_inf0 = fn_names0 + p->nnames;
    perftools__profiles__location__init(loc);
    loc->id = i + 1;
    loc->line = &linep[*ln];
    /* func: the map's function (UINT32_MAX: a label), inferred: its inferred frames' */
    uint32_t func = i < nf ? (uint32_t)i : i < loc_inf0 ? UINT32_MAX : i < loc_chain0 ? (uint32_t)(i - loc_inf0)
                                                                                 : il->func[i - loc_chain0] % (uint32_t)nf;
    int inferred = i >= loc_chain0 ? il->func[i - loc_chain0] >= nf : i >= loc_inf0;
    for (uint32_t c = i < loc_chain0 ? 0 : il->chain[i - loc_chain0]; c; c = p->chains[c].parent) {
        perftools__profiles__line__init(&lines[*ln]);
        lines[*ln].function_id = fn_names0 + p->chains[c].name + 1;
        linep[*ln] = &lines[*ln];
        (*ln)++;
        loc->n_line++;
    }
    perftools__profiles__line__init(&lines[*ln]);
    lines[*ln].function_id = func == UINT32_MAX ? i + 1 : (inferred ? fn_inf0 : 0) + func + 1;
    linep[*ln] = &lines[*ln];
    (*ln)++;
    loc->n_line++;
    if (func != UINT32_MAX) {
        const icpp_pm_func *pf = icpp_pathmap_func(p->pm, func);
        loc->mapping_id = pf->module + 1;
        loc->address = pf->addr;
    }
}

/* buf[0..len) gzipped to f (windowBits 15 + 16 = gzip header); 0 or -EIO. */
static int gzip_write(FILE *f, uint8_t *buf, size_t len)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    int rc = -EIO;
    if (deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) == Z_OK) {
        uint8_t chunk[65536];
        z.next_in = buf;
        z.avail_in = (uInt)len;
        int zr;
        rc = 0;
        do {
            z.next_out = chunk;
            z.avail_out = sizeof chunk;
            zr = deflate(&z, Z_FINISH);
            size_t have = sizeof chunk - z.avail_out;
            if (have && fwrite(chunk, 1, have, f) != have)
                rc = -EIO;
        } while (zr == Z_OK);
        if (zr != Z_STREAM_END)
            rc = -EIO;
        deflateEnd(&z);
    }
    return rc;
}

int out_pprof(const profile *p, FILE *f, const out_opts *o)
{
    (void)o;
    strtab st = {0};
    str_ix(&st, "");
    ilocs il = {0};
    icpp_hmap_init(&il.ix);
    /* Functions: the map's, the unattributed labels, the inlined functions,
     * then the map's again marked " [inferred]" (a frame completion placed:
     * prof_label's mark, per frame as in the text formats).
     * Locations: one per map function (addresses are link-time starts), per
     * label, per map function's inferred frames, then per (function or its
     * inferred frames, inline chain). */
    size_t nf = icpp_pathmap_nfuncs(p->pm), nm = icpp_pathmap_nmodules(p->pm);
    size_t fn_names0 = nf + p->nextra, fn_inf0 = fn_names0 + p->nnames, nfn = fn_inf0 + nf;
    size_t loc_inf0 = nf + p->nextra, loc_chain0 = loc_inf0 + nf;
    /* Rows: frames with weight, then the unattributed labels. */
    size_t nrows = 0;
    uint32_t *rowf = malloc((p->nframes + 1) * sizeof *rowf);
    for (uint32_t i = 1; rowf && i < p->nframes; i++) {
        int any = 0;
        for (uint32_t e = 0; e < p->nev; e++)
            any |= p->self[(size_t)i * PROF_MAX_EVENTS + e] > 0;
        if (any)
            rowf[nrows++] = i;
    }
    size_t total_rows = nrows + p->nextra;
    double *w = calloc(total_rows + 1, sizeof *w);
    int64_t *vals = calloc((total_rows + 1) * PROF_MAX_EVENTS, sizeof *vals);
    int64_t *tmp = calloc(total_rows + 1, sizeof *tmp);
    Perftools__Profiles__Mapping *maps = calloc(nm + 1, sizeof *maps), **mapp = calloc(nm + 1, sizeof *mapp);
    Perftools__Profiles__Function *fns = calloc(nfn + 1, sizeof *fns), **fnp = calloc(nfn + 1, sizeof *fnp);
    Perftools__Profiles__Sample *samp = calloc(total_rows + 1, sizeof *samp), **sampp = calloc(total_rows + 1, sizeof *sampp);
    uint64_t *locids = calloc(total_rows + 1, sizeof *locids);
    Perftools__Profiles__ValueType *vt = calloc(p->nev + 1, sizeof *vt), **vtp = calloc(p->nev + 1, sizeof *vtp);
    Perftools__Profiles__Location *locs = NULL, **locp = NULL;
    Perftools__Profiles__Line *lines = NULL, **linep = NULL;
    size_t nloc = 0;
    int rc = -ENOMEM;
    if (!rowf || !w || !vals || !tmp || !maps || !mapp || !fns || !fnp || !samp || !sampp || !locids || !vt || !vtp)
        goto out;
    for (uint32_t e = 0; e < p->nev; e++) {
        event_values(p, e, rowf, nrows, w, tmp, vals);
        perftools__profiles__value_type__init(&vt[e]);
        vt[e].type = str_ix(&st, p->ev_names[e]);
        vt[e].unit = str_ix(&st, "samples");
        vtp[e] = &vt[e];
    }
    for (size_t m = 0; m < nm; m++) {
        fill_mapping(p, &st, &maps[m], m);
        mapp[m] = &maps[m];
    }
    for (size_t i = 0; i < nfn; i++) {
        fill_function(p, &st, &fns[i], i, nf, fn_names0, fn_inf0);
        fnp[i] = &fns[i];
    }
    /* Samples: a row's locations leaf first, each function with the frames
     * inlined into it folded into one location. */
    for (size_t r = 0; r < total_rows; r++) {
        perftools__profiles__sample__init(&samp[r]);
        if (r < nrows) {
            if (sample_locations(p, &il, rowf[r], nf, &samp[r]) < 0)
                goto out_samples;
        } else {
            locids[r] = nf + (r - nrows) + 1;
            samp[r].location_id = &locids[r];
            samp[r].n_location_id = 1;
        }
        samp[r].value = &vals[r * PROF_MAX_EVENTS];
        samp[r].n_value = p->nev;
        sampp[r] = &samp[r];
    }
    size_t nlines = loc_chain0;
    for (size_t i = 0; i < il.n; i++)
        for (uint32_t c = il.chain[i]; ; c = p->chains[c].parent) {
            nlines++;
            if (!c)
                break;
        }
    nloc = loc_chain0 + il.n;
    locs = calloc(nloc + 1, sizeof *locs);
    locp = calloc(nloc + 1, sizeof *locp);
    lines = calloc(nlines + 1, sizeof *lines);
    linep = calloc(nlines + 1, sizeof *linep);
    if (!locs || !locp || !lines || !linep)
        goto out_samples;
    size_t ln = 0;
    for (size_t i = 0; i < nloc; i++) {
        fill_location(p, &il, &locs[i], i, nf, fn_names0, lines, linep, &ln);
        locp[i] = &locs[i];
    }
    Perftools__Profiles__Profile pr;
    perftools__profiles__profile__init(&pr);
    pr.n_sample_type = p->nev;
    pr.sample_type = vtp;
    pr.n_sample = total_rows;
    pr.sample = sampp;
    pr.n_mapping = nm;
    pr.mapping = mapp;
    pr.n_location = nloc;
    pr.location = locp;
    pr.n_function = nfn;
    pr.function = fnp;
    int64_t comment = str_ix(&st, "icpp-resolve: inferred call paths; ambiguous samples shared by training counts");
    pr.n_comment = 1;
    pr.comment = &comment;
    pr.n_string_table = st.n;
    pr.string_table = st.v;
    size_t len = perftools__profiles__profile__get_packed_size(&pr);
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        goto out_samples;
    perftools__profiles__profile__pack(&pr, buf);
    rc = gzip_write(f, buf, len);
    free(buf);
out_samples:
    for (size_t r = 0; r < nrows; r++)
        free(samp[r].location_id);
out:
    for (size_t i = 0; i < st.n; i++)
        free(st.v[i]);
    free(st.v);
    free(il.func);
    free(il.chain);
    icpp_hmap_free(&il.ix);
    free(rowf);
    free(w);
    free(vals);
    free(tmp);
    free(maps);
    free(mapp);
    free(fns);
    free(fnp);
    free(locs);
    free(locp);
    free(lines);
    free(linep);
    free(samp);
    free(sampp);
    free(locids);
    free(vt);
    free(vtp);
    return rc;
}
