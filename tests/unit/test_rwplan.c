/* test_rwplan.c -- icpp-rewrite/plan.c: callers, conflicts, each function's largest padding, refusal
 * reasons and the padding list, on a hand-made map with hand-made verdicts. */
#include "plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static icpp_build_id bid(uint8_t seed)
{
    icpp_build_id b = {20, {0}};
    for (int i = 0; i < 20; i++)
        b.bytes[i] = (uint8_t)(seed + i);
    return b;
}

/* Functions of the main module: main 0x1000, g 0x2000, p 0x3000, n 0x4000,
 * r 0x5000 (recursive), x 0x6000; q in libc.  Paths (site in):
 *   1 main  2 main;g (main)  3 main;g;p (g)  4 main;g;p;n (g: p had returned)
 *   5 main;g;n (g)  6 main;r (main)  7 main;r;r (r)  8 main;r;r;q (r)
 *   9 main;g;p;x (g and p: p live on some entries only) */
static icpp_pathmap *sample(uint32_t f[7])
{
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_build_id b0 = bid(1), b1 = bid(50);
    uint32_t m0, m1, node[10];
    icpp_pathmap_add_module(pm, "/bin/prog", &b0, 2, &m0);
    icpp_pathmap_add_module(pm, "/lib/libc.so.6", &b1, 3, &m1);
    icpp_pathmap_set_main(pm, m0);
    static const char *names[] = {"main", "g", "p", "n", "r", "x"};
    for (int i = 0; i < 6; i++)
        icpp_pathmap_add_func(pm, m0, 0x1000 * (uint64_t)(i + 1), names[i], &f[i]);
    icpp_pathmap_add_func(pm, m1, 0x9000, "q", &f[6]);
    enum { MAIN, G, P, N, R, X, Q };
    icpp_pathmap_child(pm, 0, f[MAIN], &node[1]);
    icpp_pathmap_child(pm, node[1], f[G], &node[2]);
    icpp_pathmap_child(pm, node[2], f[P], &node[3]);
    icpp_pathmap_child(pm, node[3], f[N], &node[4]);
    icpp_pathmap_child(pm, node[2], f[N], &node[5]);
    icpp_pathmap_child(pm, node[1], f[R], &node[6]);
    icpp_pathmap_child(pm, node[6], f[R], &node[7]);
    icpp_pathmap_child(pm, node[7], f[Q], &node[8]);
    icpp_pathmap_child(pm, node[3], f[X], &node[9]);
    static const int64_t h[10] = {0, 264, 296, 328, 344, 328, 296, 344, 400, 360};
    for (int i = 1; i < 10; i++) {
        icpp_pathmap_add_count(pm, node[i], (uint64_t)i);
        icpp_pathmap_add_height(pm, node[i], h[i], (uint64_t)i);
    }
    icpp_pathmap_add_site(pm, node[2], m0, 0x1010, 1);
    icpp_pathmap_add_site(pm, node[3], m0, 0x2010, 1);
    icpp_pathmap_add_site(pm, node[4], m0, 0x2020, 1);
    icpp_pathmap_add_site(pm, node[5], m0, 0x2030, 1);
    icpp_pathmap_add_site(pm, node[6], m0, 0x1020, 1);
    icpp_pathmap_add_site(pm, node[7], m0, 0x5010, 1);
    icpp_pathmap_add_site(pm, node[8], m0, 0x5020, 1);
    icpp_pathmap_add_site(pm, node[9], m0, 0x2040, 1);
    icpp_pathmap_add_site(pm, node[9], m0, 0x3010, 1);
    return pm;
}

/* Verdicts: main and p may grow (sub, up to 64 and 48), g by enter up to 32,
 * r is refused, n and x have none (not function starts). */
static const rw_frame frames[] = {
    {.addr = 0x1000, .name = "main", .mode = RW_MODE_SUB, .frame = 32, .maxpad = 64},
    {.addr = 0x2000, .name = "g", .mode = RW_MODE_ENTER, .maxpad = 32},
    {.addr = 0x3000, .name = "p", .mode = RW_MODE_SUB, .frame = 16, .maxpad = 48},
    {.addr = 0x5000, .name = "r", .why = "no frame pointer"},
};

static const rw_frame *verdict(const void *ctx, uint64_t addr)
{
    (void)ctx;
    for (size_t i = 0; i < sizeof frames / sizeof *frames; i++)
        if (frames[i].addr == addr)
            return &frames[i];
    return NULL;
}

int main(void)
{
    enum { MAIN, G, P, N, R, X, Q };
    uint32_t f[7];
    icpp_pathmap *pm = sample(f);
    /* the program's functions as icpp_module_funcs gives them: x has no size
     * (no range), main.cold (0x7000) runs in main's frame */
    const icpp_func funcs[] = {
        {.addr = 0x1000, .size = 0x100, .owner = 0x1000}, {.addr = 0x2000, .size = 0x100, .owner = 0x2000},
        {.addr = 0x3000, .size = 0x100, .owner = 0x3000}, {.addr = 0x4000, .size = 0x100, .owner = 0x4000},
        {.addr = 0x5000, .size = 0x100, .owner = 0x5000}, {.addr = 0x6000, .size = 0, .owner = 0x6000},
        {.addr = 0x7000, .size = 0x40, .owner = 0x1000},
    };
    rw_plan p;
    icpp_err err;
    CHECK(rw_plan_build(&p, pm, funcs, sizeof funcs / sizeof *funcs, verdict, NULL, &err) == 0, "build: %s", err.msg);
    CHECK(p.nranges == 6, "ranges: every function with a size (%zu)", p.nranges);
    CHECK(p.moved == 1, "one path entered below a returned frame (%ld)", p.moved);
    CHECK(p.conflict[f[P]] && !p.conflict[f[G]] && !p.conflict[f[MAIN]], "p: live and returned below main;g;p;x");
    /* callers on the paths: main, g, p (of x), r; n, x, q call nobody */
    CHECK(p.ncallers == 4 && p.ncallers_ok == 2, "callers %zu (want 4), enlargeable %zu (want 2: main, g)",
          p.ncallers, p.ncallers_ok);
    CHECK(p.maxpad[f[MAIN]] == 64 && p.maxpad[f[G]] == 32, "main and g keep their verdicts' maxpad");
    CHECK(p.maxpad[f[P]] == 0, "p: refused for the conflict, though its frame allows 48");
    CHECK(p.maxpad[f[R]] == 0 && p.maxpad[f[N]] == 0 && p.maxpad[f[X]] == 0 && p.maxpad[f[Q]] == 0,
          "r refused, n and x without a verdict, q not the program's: no padding");
    CHECK(p.nreasons == 2, "two reasons (%zu)", p.nreasons);
    int saw_r = 0, saw_p = 0;
    for (size_t i = 0; i < p.nreasons; i++) {
        saw_r += p.reasons[i].n == 1 && !strcmp(p.reasons[i].why, "no frame pointer") && !strcmp(p.reasons[i].eg[0], "r");
        saw_p += p.reasons[i].n == 1 && strstr(p.reasons[i].why, "both live and returned") && !strcmp(p.reasons[i].eg[0], "p");
    }
    CHECK(saw_r == 1 && saw_p == 1, "r's and p's reasons, each with its function");

    /* the padding list: function order, modes counted */
    uint32_t *pad = calloc(icpp_pathmap_nfuncs(pm), sizeof *pad);
    pad[f[G]] = 16;
    pad[f[MAIN]] = 48;
    icpp_arr_pad *pads;
    size_t npads, nsub, nenter;
    CHECK(rw_plan_pads(pm, pad, verdict, NULL, &pads, &npads, &nsub, &nenter, &err) == 0, "pads: %s", err.msg);
    CHECK(npads == 2 && pads[0].addr == 0x1000 && pads[0].pad == 48 && pads[1].addr == 0x2000 && pads[1].pad == 16,
          "main +48, g +16, in function order");
    CHECK(nsub == 1 && nenter == 1, "one sub, one enter (%zu, %zu)", nsub, nenter);
    free(pads);
    pad[f[N]] = 16;     /* the search's bug: n has no verdict */
    CHECK(rw_plan_pads(pm, pad, verdict, NULL, &pads, &npads, &nsub, &nenter, &err) == -EINVAL && !pads && !npads,
          "a padding without a verdict refused");

    /* the plan of an empty map */
    icpp_pathmap *empty = icpp_pathmap_new();
    rw_plan q;
    CHECK(rw_plan_build(&q, empty, funcs, 0, verdict, NULL, &err) == 0 && q.ncallers == 0 && q.nreasons == 0,
          "an empty map: nothing to plan");
    rw_plan_free(&q);
    icpp_pathmap_free(empty);

    free(pad);
    rw_plan_free(&p);
    icpp_pathmap_free(pm);
    return check_done("rwplan");
}
