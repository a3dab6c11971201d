/* out_pprof.c -- pprof's profile.proto, gzipped (loads in `go tool pprof` and pprof-compatible backends). */
#include "output.h"

#include "profile.pb-c.h"

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
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 64;
        char **nv = realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return 0;
        t->v = nv;
        t->cap = nc;
    }
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

int out_pprof(const profile *p, FILE *f, const out_opts *o)
{
    (void)o;
    strtab st = {0};
    str_ix(&st, "");
    size_t nf = icpp_pathmap_nfuncs(p->pm), nm = icpp_pathmap_nmodules(p->pm);
    /* Rows: path nodes with weight, then the unattributed labels. */
    size_t nrows = 0;
    uint32_t *nodes = malloc((p->nnodes + 1) * sizeof *nodes);
    for (uint32_t i = 1; nodes && i < p->nnodes; i++) {
        int any = 0;
        for (uint32_t e = 0; e < p->nev; e++)
            any |= p->self[(size_t)i * PROF_MAX_EVENTS + e] > 0;
        if (any)
            nodes[nrows++] = i;
    }
    size_t total_rows = nrows + p->nextra;
    double *w = calloc(total_rows + 1, sizeof *w);
    int64_t *vals = calloc((total_rows + 1) * PROF_MAX_EVENTS, sizeof *vals);
    int64_t *tmp = calloc(total_rows + 1, sizeof *tmp);
    Perftools__Profiles__Mapping *maps = calloc(nm + 1, sizeof *maps), **mapp = calloc(nm + 1, sizeof *mapp);
    Perftools__Profiles__Function *fns = calloc(nf + p->nextra + 1, sizeof *fns),
                                  **fnp = calloc(nf + p->nextra + 1, sizeof *fnp);
    Perftools__Profiles__Location *locs = calloc(nf + p->nextra + 1, sizeof *locs),
                                  **locp = calloc(nf + p->nextra + 1, sizeof *locp);
    Perftools__Profiles__Line *lines = calloc(nf + p->nextra + 1, sizeof *lines),
                              **linep = calloc(nf + p->nextra + 1, sizeof *linep);
    Perftools__Profiles__Sample *samp = calloc(total_rows + 1, sizeof *samp), **sampp = calloc(total_rows + 1, sizeof *sampp);
    uint64_t *locids = calloc((size_t)(total_rows + 1) * 64 + p->nnodes, sizeof *locids);
    Perftools__Profiles__ValueType *vt = calloc(p->nev + 1, sizeof *vt), **vtp = calloc(p->nev + 1, sizeof *vtp);
    int rc = -ENOMEM;
    if (!nodes || !w || !vals || !tmp || !maps || !mapp || !fns || !fnp || !locs || !locp || !lines || !linep || !samp ||
        !sampp || !locids || !vt || !vtp)
        goto out;
    for (uint32_t e = 0; e < p->nev; e++) {
        for (size_t r = 0; r < nrows; r++)
            w[r] = p->self[(size_t)nodes[r] * PROF_MAX_EVENTS + e];
        for (size_t r = 0; r < p->nextra; r++)
            w[nrows + r] = p->extra[r].w[e];
        round_weights(w, total_rows, tmp);
        for (size_t r = 0; r < total_rows; r++)
            vals[r * PROF_MAX_EVENTS + e] = tmp[r];
        perftools__profiles__value_type__init(&vt[e]);
        vt[e].type = str_ix(&st, p->ev_names[e]);
        vt[e].unit = str_ix(&st, "samples");
        vtp[e] = &vt[e];
    }
    for (size_t m = 0; m < nm; m++) {
        const icpp_pm_module *pmm = icpp_pathmap_module(p->pm, (uint32_t)m);
        char bid[2 * ICPP_BUILD_ID_MAX + 1];
        icpp_build_id_hex(&pmm->build_id, bid, sizeof bid);
        perftools__profiles__mapping__init(&maps[m]);
        maps[m].id = m + 1;
        maps[m].filename = str_ix(&st, pmm->path);
        maps[m].build_id = str_ix(&st, bid);
        maps[m].has_functions = 1;
        mapp[m] = &maps[m];
    }
    /* One function and one location per path-map function (addresses are
     * link-time starts), plus one per unattributed label. */
    size_t nloc = nf + p->nextra;
    for (size_t i = 0; i < nloc; i++) {
        perftools__profiles__function__init(&fns[i]);
        fns[i].id = i + 1;
        perftools__profiles__line__init(&lines[i]);
        lines[i].function_id = i + 1;
        linep[i] = &lines[i];
        perftools__profiles__location__init(&locs[i]);
        locs[i].id = i + 1;
        locs[i].n_line = 1;
        locs[i].line = &linep[i];
        if (i < nf) {
            const icpp_pm_func *pf = icpp_pathmap_func(p->pm, (uint32_t)i);
            fns[i].name = fns[i].system_name = str_ix(&st, prof_func_name(p, (uint32_t)i));
            fns[i].filename = str_ix(&st, icpp_pathmap_module(p->pm, pf->module)->path);
            locs[i].mapping_id = pf->module + 1;
            locs[i].address = pf->addr;
        } else {
            fns[i].name = fns[i].system_name = str_ix(&st, p->extra[i - nf].label);
        }
        fnp[i] = &fns[i];
        locp[i] = &locs[i];
    }
    uint64_t *lp = locids;
    for (size_t r = 0; r < total_rows; r++) {
        perftools__profiles__sample__init(&samp[r]);
        if (r < nrows) {
            uint32_t fs[4096];
            uint32_t d = icpp_pathmap_path(p->pm, nodes[r], fs, 4096);
            if (d > 4096)
                d = 4096;
            uint64_t *ids = malloc(d * sizeof *ids);
            if (!ids)
                goto out;
            for (uint32_t j = 0; j < d; j++)
                ids[j] = fs[d - 1 - j] + 1;        /* leaf first */
            samp[r].location_id = ids;
            samp[r].n_location_id = d;
        } else {
            *lp = nf + (r - nrows) + 1;
            samp[r].location_id = lp++;
            samp[r].n_location_id = 1;
        }
        samp[r].value = &vals[r * PROF_MAX_EVENTS];
        samp[r].n_value = p->nev;
        sampp[r] = &samp[r];
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
    pr.n_function = nloc;
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
    /* gzip it (windowBits 15 + 16 = gzip header). */
    z_stream z;
    memset(&z, 0, sizeof z);
    rc = -EIO;
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
    free(buf);
out_samples:
    for (size_t r = 0; r < nrows; r++)
        free(samp[r].location_id);
out:
    for (size_t i = 0; i < st.n; i++)
        free(st.v[i]);
    free(st.v);
    free(nodes);
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
