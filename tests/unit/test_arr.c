/* test_arr.c -- activation record resizing on a path map: callers, shifts, the padded map and its build-id. */
#include "arr.h"
#include "check.h"
#include "pathmap.h"

#include <stdlib.h>
#include <string.h>

static icpp_build_id bid(uint8_t seed)
{
    icpp_build_id b = {20, {0}};
    for (int i = 0; i < 20; i++)
        b.bytes[i] = (uint8_t)(seed + i);
    return b;
}

/* Functions of the main module: main 0x1000, g 0x2000, p 0x3000, n 0x4000,
 * r 0x5000 (recursive); q in libc.  Paths:
 *   1 main            264
 *   2 main;g          296        site in main
 *   3 main;g;p        328        site in g
 *   4 main;g;p;n      344        site in g: p had returned (stack arguments)
 *   5 main;g;n        328        site in g
 *   6 main;r          296, 312   site in main (two heights)
 *   7 main;r;r        344        site in r
 *   8 main;r;r;q      400        site in r
 *   9 main;g;p;x      360        sites in g and in p: p live on some entries only */
static icpp_pathmap *sample(uint32_t node[10])
{
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_build_id b0 = bid(1), b1 = bid(50);
    uint32_t m0, m1, fmain, fg, fp, fn, fr, fq, fx;
    icpp_pathmap_add_module(pm, "/bin/prog", &b0, 2, &m0);
    icpp_pathmap_add_module(pm, "/lib/libc.so.6", &b1, 3, &m1);
    icpp_pathmap_set_main(pm, m0);
    icpp_pathmap_add_func(pm, m0, 0x1000, "main", &fmain);
    icpp_pathmap_add_func(pm, m0, 0x2000, "g", &fg);
    icpp_pathmap_add_func(pm, m0, 0x3000, "p", &fp);
    icpp_pathmap_add_func(pm, m0, 0x4000, "n", &fn);
    icpp_pathmap_add_func(pm, m0, 0x5000, "r", &fr);
    icpp_pathmap_add_func(pm, m1, 0x9000, "q", &fq);
    icpp_pathmap_add_func(pm, m0, 0x6000, "x", &fx);
    icpp_pathmap_child(pm, 0, fmain, &node[1]);
    icpp_pathmap_child(pm, node[1], fg, &node[2]);
    icpp_pathmap_child(pm, node[2], fp, &node[3]);
    icpp_pathmap_child(pm, node[3], fn, &node[4]);
    icpp_pathmap_child(pm, node[2], fn, &node[5]);
    icpp_pathmap_child(pm, node[1], fr, &node[6]);
    icpp_pathmap_child(pm, node[6], fr, &node[7]);
    icpp_pathmap_child(pm, node[7], fq, &node[8]);
    icpp_pathmap_child(pm, node[3], fx, &node[9]);
    static const int64_t h[10] = {0, 264, 296, 328, 344, 328, 296, 344, 400, 360};
    for (int i = 1; i < 10; i++) {
        icpp_pathmap_add_count(pm, node[i], (uint64_t)i);
        icpp_pathmap_add_height(pm, node[i], h[i], (uint64_t)i);
    }
    icpp_pathmap_add_height(pm, node[6], 312, 1);
    icpp_pathmap_add_site(pm, node[2], m0, 0x1010, 1);
    icpp_pathmap_add_site(pm, node[3], m0, 0x2010, 1);
    icpp_pathmap_add_site(pm, node[4], m0, 0x2020, 1);
    icpp_pathmap_add_site(pm, node[5], m0, 0x2030, 1);
    icpp_pathmap_add_site(pm, node[6], m0, 0x1020, 1);
    icpp_pathmap_add_site(pm, node[7], m0, 0x5010, 1);
    icpp_pathmap_add_site(pm, node[8], m0, 0x5020, 1);
    icpp_pathmap_add_site(pm, node[9], m0, 0x2040, 1);
    icpp_pathmap_add_site(pm, node[9], m0, 0x3010, 1);
    icpp_pathmap_set_meta(pm, "program", "/bin/prog");
    icpp_pathmap_set_meta(pm, "runs", "2");
    return pm;
}

int main(void)
{
    uint32_t nd[10];
    icpp_pathmap *pm = sample(nd);
    size_t nn = icpp_pathmap_nnodes(pm), nf = icpp_pathmap_nfuncs(pm);
    const icpp_arr_range ranges[] = {
        {0x1000, 0x1100, 0x1000}, {0x2000, 0x2100, 0x2000}, {0x3000, 0x3100, 0x3000},
        {0x4000, 0x4100, 0x4000}, {0x5000, 0x5100, 0x5000}, {0x6000, 0x6100, 0x6000},
    };
    uint32_t *caller = malloc(nn * sizeof *caller), *far = malloc(nn * sizeof *far);
    uint32_t *fpad = malloc(nf * sizeof *fpad);
    int64_t *shift = malloc(nn * sizeof *shift);

    /* Callers: the frame each node was called from. */
    long moved = icpp_arr_callers(pm, ranges, sizeof ranges / sizeof *ranges, caller, far);
    CHECK(moved == 1, "one node below a returned frame, got %ld", moved);
    CHECK(caller[nd[4]] == nd[2], "main;g;p;n was called from g (p had returned)");
    CHECK(caller[nd[3]] == nd[2] && caller[nd[5]] == nd[2] && caller[nd[2]] == nd[1], "plain calls: the parent");
    CHECK(caller[nd[8]] == nd[7], "a libc callee of r: its caller is the nearest r");
    CHECK(caller[nd[9]] == nd[3] && far[nd[9]] == nd[2], "sites in p and g: nearest p, farthest g");
    CHECK(far[nd[4]] == 0 && far[nd[3]] == 0, "no conflict where the sites agree");

    /* Shifts: paddings g 16, p 32, r 48, main 64; q is in libc. */
    icpp_arr_pad pads[] = {{0x2000, 16}, {0x3000, 32}, {0x5000, 48}, {0x1000, 64}, {0x9000, 80}};
    icpp_arr_func_pads(pm, pads, sizeof pads / sizeof *pads, fpad);
    icpp_arr_shifts(pm, caller, fpad, NULL, shift);
    CHECK(shift[nd[1]] == 0, "main: nothing above it");
    CHECK(shift[nd[2]] == 64, "main;g: main's padding (%lld)", (long long)shift[nd[2]]);
    CHECK(shift[nd[3]] == 80, "main;g;p: main + g");
    CHECK(shift[nd[4]] == 80, "main;g;p;n: p returned, so main + g only (%lld)", (long long)shift[nd[4]]);
    CHECK(shift[nd[5]] == 80, "main;g;n: main + g");
    CHECK(shift[nd[7]] == 64 + 48, "main;r;r: main + r");
    CHECK(shift[nd[8]] == 64 + 48 + 48, "recursion multiplies: main + r + r (%lld)", (long long)shift[nd[8]]);
    icpp_arr_shifts(pm, NULL, fpad, NULL, shift);
    CHECK(shift[nd[4]] == 112, "along parents p counts (%lld)", (long long)shift[nd[4]]);

    /* The padded map. */
    icpp_build_id nb;
    const icpp_build_id *ob = &icpp_pathmap_module(pm, icpp_pathmap_main(pm))->build_id;
    icpp_arr_build_id(ob, pads, sizeof pads / sizeof *pads, NULL, 0, &nb);
    CHECK(nb.len == 20 && memcmp(nb.bytes, ob->bytes, 20) != 0, "a new build-id of the same length");
    icpp_build_id nb2;
    icpp_arr_pad rev[] = {pads[4], pads[3], pads[2], pads[1], pads[0], {0x7000, 0}};
    icpp_arr_build_id(ob, rev, sizeof rev / sizeof *rev, NULL, 0, &nb2);
    CHECK(!memcmp(nb.bytes, nb2.bytes, 20), "the build-id ignores order and zero paddings");
    icpp_arr_pad other[] = {{0x2000, 32}};
    icpp_arr_build_id(ob, other, 1, NULL, 0, &nb2);
    CHECK(memcmp(nb.bytes, nb2.bytes, 20) != 0, "other paddings, another build-id");
    icpp_build_id none = {0, {0}};
    icpp_arr_build_id(&none, NULL, 0, NULL, 0, &nb2);
    CHECK(nb2.len == 20, "no old build-id: 20 bytes");

    icpp_err err;
    icpp_pathmap *out = icpp_arr_apply(pm, caller, pads, sizeof pads / sizeof *pads, NULL, 0, "/bin/prog.arr", &nb, &err);
    CHECK(out != NULL, "apply: %s", out ? "" : err.msg);
    if (out) {
        CHECK(icpp_pathmap_nnodes(out) == nn, "same paths");
        const icpp_pm_module *mm = icpp_pathmap_module(out, icpp_pathmap_main(out));
        CHECK(!strcmp(mm->path, "/bin/prog.arr") && !memcmp(mm->build_id.bytes, nb.bytes, 20), "main module renamed");
        CHECK(!memcmp(icpp_pathmap_module(out, 1)->build_id.bytes, icpp_pathmap_module(pm, 1)->build_id.bytes, 20),
              "libc unchanged");
        const icpp_pm_node *n4 = icpp_pathmap_node(out, nd[4]), *n6 = icpp_pathmap_node(out, nd[6]);
        CHECK(n4->nheights == 1 && n4->heights[0].height == 344 + 80, "heights shifted");
        CHECK(n4->nsites == 1 && n4->sites[0].addr == 0x2020 && n4->count == 4, "sites and counts kept");
        int found296 = 0, found312 = 0;
        for (uint32_t k = 0; k < n6->nheights; k++) {
            found296 |= n6->heights[k].height == 296 + 64;
            found312 |= n6->heights[k].height == 312 + 64;
        }
        CHECK(n6->nheights == 2 && found296 && found312, "every height of a node moves");
        CHECK(icpp_pathmap_meta(out, "program") && !strcmp(icpp_pathmap_meta(out, "program"), "/bin/prog"),
              "metadata kept");
        CHECK(icpp_pathmap_meta(out, "runs") && !strcmp(icpp_pathmap_meta(out, "runs"), "2"), "all metadata kept");
        CHECK(icpp_pathmap_meta(out, "arr-paddings") && !strcmp(icpp_pathmap_meta(out, "arr-paddings"), "5"),
              "arr-paddings");
        CHECK(icpp_pathmap_meta(out, "arr-source") && strlen(icpp_pathmap_meta(out, "arr-source")) == 40,
              "arr-source");
        /* The old map and the new one are of different binaries. */
        icpp_pathmap *copy = icpp_pathmap_new();
        CHECK(icpp_pathmap_merge(copy, pm, &err) == 0, "merge into empty");
        CHECK(icpp_pathmap_merge(copy, out, &err) < 0 && err.code == ICPP_EMISMATCH, "maps of PROG and OUT do not mix");
        icpp_pathmap_free(copy);
        icpp_pathmap_free(out);
    }
    /* Wrapped call sites: g's call at return address 0x2030 (path 5, main;g;n)
     * with 32, r's 0x5010 (path 7) with 16.  Path 9 has sites 0x2040 and
     * 0x3010: wrapping one of them only is a partial wrap. */
    icpp_arr_wrap wr[] = {{0x2030, 0x7010, 32}, {0x5010, 0x7028, 16}};
    uint32_t *nw = calloc(nn, sizeof *nw);
    CHECK(icpp_arr_node_wraps(pm, wr, 2, nw) == 0, "no partial wrap");
    CHECK(nw[nd[5]] == 32 && nw[nd[7]] == 16 && nw[nd[4]] == 0 && nw[nd[8]] == 0, "node wraps by sites");
    memset(fpad, 0, nf * sizeof *fpad);
    icpp_arr_shifts(pm, NULL, fpad, nw, shift);
    CHECK(shift[nd[5]] == 32 && shift[nd[7]] == 16 && shift[nd[8]] == 16 && shift[nd[4]] == 0 && shift[nd[6]] == 0,
          "a wrap moves its path and the paths below it");
    icpp_arr_wrap part[] = {{0x2040, 0x7040, 16}};
    CHECK(icpp_arr_node_wraps(pm, part, 1, nw) == 1 && nw[nd[9]] == 0, "path 9 partly wrapped: counted, not moved");
    icpp_arr_wrap two[] = {{0x2040, 0x7040, 16}, {0x3010, 0x7058, 32}};
    CHECK(icpp_arr_node_wraps(pm, two, 2, nw) == 1 && nw[nd[9]] == 0, "path 9 wrapped with two paddings: counted");
    icpp_build_id w1, w0;
    icpp_arr_build_id(ob, NULL, 0, NULL, 0, &w0);
    icpp_arr_build_id(ob, NULL, 0, wr, 2, &w1);
    CHECK(memcmp(w0.bytes, w1.bytes, 20) != 0, "wraps change the build-id");
    icpp_pathmap *wo = icpp_arr_apply(pm, caller, NULL, 0, wr, 2, "/bin/prog.arr", &w1, &err);
    CHECK(wo != NULL, "apply with wraps: %s", wo ? "" : err.msg);
    if (wo) {
        const icpp_pm_node *n5 = icpp_pathmap_node(wo, nd[5]), *n8 = icpp_pathmap_node(wo, nd[8]);
        CHECK(n5->heights[0].height == 328 + 32 && n5->nsites == 1 && n5->sites[0].addr == 0x7010,
              "wrapped path: moved, its site is the stub's return address");
        CHECK(n8->heights[0].height == 400 + 16 && n8->sites[0].addr == 0x5020, "below it: moved, own site kept");
        CHECK(icpp_pathmap_meta(wo, "arr-wraps") && !strcmp(icpp_pathmap_meta(wo, "arr-wraps"), "2"), "arr-wraps");
        icpp_pathmap_free(wo);
    }
    wo = icpp_arr_apply(pm, caller, NULL, 0, part, 1, "/bin/prog.arr", &w1, &err);
    CHECK(!wo && err.code == ICPP_EFORMAT, "a partly wrapped path is refused");
    /* arr-unpaddable: the main module's functions with maxpad < 16 (main 0x1000, g 0x2000 can be padded) */
    {
        size_t nfn = icpp_pathmap_nfuncs(pm);
        uint32_t *mp = calloc(nfn, sizeof *mp);
        uint8_t *mask = malloc(nfn);
        icpp_pathmap *cp = icpp_pathmap_new();
        for (size_t f = 0; mp && f < nfn; f++) {
            uint64_t a = icpp_pathmap_func(pm, (uint32_t)f)->addr;
            mp[f] = a == 0x1000 ? 64 : a == 0x2000 ? 16 : a == 0x3000 ? 8 : 0;
        }
        CHECK(mp && mask && cp && icpp_arr_unpaddable(cp, mask, &err) == 0, "no list: not a rewritten map");
        CHECK(icpp_arr_set_unpaddable(cp, pm, mp, &err) == 0 && icpp_pathmap_meta(cp, "arr-unpaddable") &&
                  !strcmp(icpp_pathmap_meta(cp, "arr-unpaddable"), "3000,4000,5000,6000"),
              "arr-unpaddable lists p (maxpad 8), n, r, x; not q (another module): %s",
              icpp_pathmap_meta(cp, "arr-unpaddable"));
        icpp_pathmap_set_meta(pm, "arr-unpaddable", icpp_pathmap_meta(cp, "arr-unpaddable"));
        CHECK(icpp_arr_unpaddable(pm, mask, &err) == 1, "the list reads back: %s", err.msg);
        int ok = 1;
        for (size_t f = 0; f < nfn; f++) {
            const icpp_pm_func *fn = icpp_pathmap_func(pm, (uint32_t)f);
            int want = fn->module != icpp_pathmap_main(pm) ? 2 : mp[f] < 16;
            ok &= mask[f] == want;
        }
        CHECK(ok, "mask: 1 listed, 2 other modules, 0 the rest");
        static const char *bad[] = {"3000,", ",3000", "3000;4000", "zz", "3000,,4000", "1ffffffffffffffff"};
        for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
            icpp_pathmap_set_meta(pm, "arr-unpaddable", bad[i]);
            CHECK(icpp_arr_unpaddable(pm, mask, &err) == -1 && err.code == ICPP_EFORMAT, "malformed %s refused",
                  bad[i]);
        }
        icpp_pathmap_set_meta(pm, "arr-unpaddable", "");
        CHECK(icpp_arr_unpaddable(pm, mask, &err) == 1, "an empty list: every function of the program paddable");
        icpp_pathmap_set_meta(pm, "arr-unpaddable", "ffff");
        CHECK(icpp_arr_unpaddable(pm, mask, &err) == 1 && mask[0] == 0, "an address with no function: skipped");
        icpp_pathmap_free(cp);
        free(mask);
        free(mp);
    }
    /* Clones (docs/rewrite.md, "Cloning"): g (0x2000, 0x100 bytes) copied to
     * 0x8000 for main's call 0x1010 (path 2), padded 32; r copied for
     * main's call 0x1020 and for r's own call 0x5010 -- path 7 is r called
     * from r: its site is in the copy of r, so it is not a call of the
     * clone's class (left as r).  A clone of x listing p's call (one of path
     * 9's two sites) counts as partly. */
    {
        static const uint64_t rg[] = {0x1010}, rr[] = {0x1020, 0x5010}, rx[] = {0x3010};
        static const icpp_arr_part pg[] = {{0x2000, 0x2100, 0x8000}, {0x7000, 0x7040, 0x8900}},
                                   pr[] = {{0x5000, 0x5040, 0x8100}}, px[] = {{0x6000, 0x6010, 0x8200}};
        icpp_arr_clone cl[] = {{0x2000, 0x100, 0x8000, "g", "g.icpp_clone.0", 32, rg, 1, pg, 2},
                               {0x5000, 0x40, 0x8100, "r", "r.icpp_clone.1", 0, rr, 2, pr, 1},
                               {0x6000, 0x10, 0x8200, "x", "x.icpp_clone.2", 0, rx, 1, px, 1}};
        size_t partly = 9;
        icpp_pathmap *cm = icpp_arr_clone_map(pm, cl, 3, &partly, &err);
        CHECK(cm != NULL, "clone map: %s", cm ? "" : err.msg);
        if (cm) {
            CHECK(icpp_pathmap_nfuncs(cm) == nf + 3 && icpp_pathmap_nnodes(cm) == nn, "one function per clone, same nodes");
            const icpp_pm_func *g2 = icpp_pathmap_func(cm, icpp_pathmap_node(cm, nd[2])->func);
            CHECK(g2->addr == 0x8000 && !strcmp(g2->name, "g") && g2->module == 0,
                  "path 2 enters g's copy (named g: profiles show the program's functions)");
            const icpp_pm_node *n3 = icpp_pathmap_node(cm, nd[3]), *n4 = icpp_pathmap_node(cm, nd[4]);
            const icpp_pm_node *n9 = icpp_pathmap_node(cm, nd[9]), *n7 = icpp_pathmap_node(cm, nd[7]);
            CHECK(n3->sites[0].addr == 0x8010 && n4->sites[0].addr == 0x8020 &&
                      icpp_pathmap_node(cm, nd[5])->sites[0].addr == 0x8030,
                  "calls made in g's copy return into it (p's, n's below returned p, n's)");
            int in_copy = 0, in_p = 0;
            for (uint32_t k = 0; k < n9->nsites; k++)
                in_copy |= n9->sites[k].addr == 0x8040, in_p |= n9->sites[k].addr == 0x3010;
            CHECK(in_copy && in_p && icpp_pathmap_func(cm, n9->func)->addr == 0x6000,
                  "path 9: its site in g moves into the copy, its site in p stays; x partly cloned, kept");
            CHECK(partly == 1, "one partly cloned node (path 9), got %zu", partly);
            CHECK(icpp_pathmap_func(cm, icpp_pathmap_node(cm, nd[6])->func)->addr == 0x8100 &&
                      icpp_pathmap_func(cm, n7->func)->addr == 0x5000 && n7->sites[0].addr == 0x8110 &&
                      icpp_pathmap_node(cm, nd[8])->sites[0].addr == 0x5020,
                  "path 6 enters r's copy; path 7 is called from the copy (not the clone: the copy calls r); "
                  "path 8's call is made in r (path 7), not in the copy");
            CHECK(icpp_pathmap_node(cm, nd[3])->heights[0].height == 328 && n3->count == 3, "heights and counts kept");
            /* padded: g's copy by 32, g itself by 64 (pads) -> below path 2, the copy's 32 */
            icpp_arr_pad cp2[] = {{0x2000, 64}, {0x8000, 32}};
            uint32_t *cc = malloc(nn * sizeof *cc);
            CHECK(cc && icpp_arr_callers(pm, ranges, sizeof ranges / sizeof *ranges, cc, NULL) >= 0, "callers");
            icpp_pathmap *po = cc ? icpp_arr_apply(cm, cc, cp2, 2, NULL, 0, "/bin/prog.arr", &nb, &err) : NULL;
            CHECK(po && icpp_pathmap_node(po, nd[5])->heights[0].height == 328 + 32,
                  "below the copy: its padding, not g's");
            icpp_pathmap_free(po);
            free(cc);
            icpp_pathmap_free(cm);
        }
    }
    free(nw);
    free(caller);
    free(far);
    free(fpad);
    free(shift);
    icpp_pathmap_free(pm);
    return check_done("test_arr");
}
