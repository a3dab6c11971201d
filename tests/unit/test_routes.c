/* test_routes.c -- icpp_cidx_routes: routes to a CID through contexts learn samples saw, on hand-made maps. */
#include "check.h"
#include "pathmap.h"
#include "cidx.h"

#include <string.h>

static icpp_pathmap *pm;
static uint32_t F[8];

static int seen = 1;     /* contexts made by at() got a learn sample */

/* A child of parent running function f, entered at height h. */
static uint32_t at(uint32_t parent, int f, int64_t h)
{
    uint32_t k = 0;
    CHECK(icpp_pathmap_child(pm, parent, F[f], &k) == 0 && icpp_pathmap_add_height(pm, k, h, 1) == 0 &&
              (!seen || icpp_pathmap_add_learned(pm, k, h, 1) == 0), "build");
    return k;
}

enum { MAIN, A, B, X, LEAF, Y, Z, G };

/* A new map of one module with the functions above. */
static void fresh(void)
{
    static const char *names[8] = {"main", "a", "b", "x", "leaf", "y", "z", "g"};
    icpp_build_id bid = {.len = 4, .bytes = {1, 2, 3, 4}};
    uint32_t mod = 0;
    pm = icpp_pathmap_new();
    CHECK(pm && icpp_pathmap_add_module(pm, "/bin/p", &bid, 0, &mod) == 0, "module");
    for (int i = 0; i < 8; i++)
        CHECK(icpp_pathmap_add_func(pm, mod, 0x1000 + 0x100 * (uint64_t)i, names[i], &F[i]) == 0, "func");
}

int main(void)
{
    icpp_err err;

    /* main;a;x;leaf and main;b;x;y, with a and b of equal frames: x is
     * reached at 200 from both, so (leaf, 300) -- known on one path only --
     * has two routes (main;b;x;leaf recombines them); main;a;z does not. */
    fresh();
    uint32_t m = at(0, MAIN, 8), a = at(m, A, 100), b = at(m, B, 100);
    at(at(a, X, 200), LEAF, 300);
    at(at(b, X, 200), Y, 300);
    at(a, Z, 150);
    icpp_cidx *x = icpp_cidx_build(pm, &err);
    CHECK(x != NULL, "index: %s", err.msg);
    if (!x)
        return check_done("routes");
    uint64_t r_leaf = icpp_cidx_routes(x, F[LEAF], 300), r_y = icpp_cidx_routes(x, F[Y], 300),
             r_x = icpp_cidx_routes(x, F[X], 200), r_a = icpp_cidx_routes(x, F[A], 100),
             r_z = icpp_cidx_routes(x, F[Z], 150), r_main = icpp_cidx_routes(x, F[MAIN], 8);
    CHECK(r_leaf == 2 && r_y == 2 && r_x == 2, "recombined: leaf %llu, y %llu, x %llu (want 2)",
          (unsigned long long)r_leaf, (unsigned long long)r_y, (unsigned long long)r_x);
    CHECK(r_a == 1 && r_z == 1 && r_main == 1, "one route: a %llu, z %llu, main %llu", (unsigned long long)r_a,
          (unsigned long long)r_z, (unsigned long long)r_main);
    CHECK(icpp_cidx_routes(x, F[LEAF], 300) == 2, "memoized: the same answer again");
    icpp_cidx_free(x);
    icpp_pathmap_free(pm);

    /* The same map, but no learn sample went through main;b: the route
     * through it is not one this run was seen in. */
    fresh();
    m = at(0, MAIN, 8);
    at(at(at(m, A, 100), X, 200), LEAF, 300);
    seen = 0;
    at(at(at(m, B, 100), X, 200), Y, 300);
    seen = 1;
    x = icpp_cidx_build(pm, &err);
    CHECK(x && icpp_cidx_routes(x, F[LEAF], 300) == 1, "a route through unseen contexts does not count");
    icpp_cidx_free(x);
    icpp_pathmap_free(pm);

    /* An unseen known path listed first at a CID does not hide a seen one
     * whose parent is at the same CID: main;b;x;leaf (unseen) and
     * main;a;x;leaf (seen) both have their parent at (x, 200), which two
     * seen routes reach (main;b;x;y was seen). */
    fresh();
    m = at(0, MAIN, 8);
    a = at(m, A, 100);
    b = at(m, B, 100);
    uint32_t bx = at(b, X, 200);
    seen = 0;
    at(bx, LEAF, 300);
    seen = 1;
    at(bx, Y, 300);
    at(at(a, X, 200), LEAF, 300);
    x = icpp_cidx_build(pm, &err);
    uint64_t r_l = x ? icpp_cidx_routes(x, F[LEAF], 300) : 0;
    CHECK(r_l == 2, "an unseen candidate first: (leaf, 300) has %llu routes, want 2", (unsigned long long)r_l);
    icpp_cidx_free(x);
    icpp_pathmap_free(pm);

    /* b's frame 16 bytes larger: x at 200 and 216, distinct CIDs, one route each. */
    fresh();
    m = at(0, MAIN, 8);
    at(at(at(m, A, 100), X, 200), LEAF, 300);
    at(at(at(m, B, 100), X, 216), Y, 316);
    x = icpp_cidx_build(pm, &err);
    CHECK(x && icpp_cidx_routes(x, F[LEAF], 300) == 1 && icpp_cidx_routes(x, F[Y], 316) == 1,
          "separate heights: one route each");
    icpp_cidx_free(x);
    icpp_pathmap_free(pm);

    /* A cycle of CIDs (main;g;a and main;a;g with g and a at the same
     * height, as a frameless tail-called pair can give): finite answers. */
    fresh();
    m = at(0, MAIN, 8);
    at(at(m, G, 100), A, 100);
    at(at(m, A, 100), G, 100);
    x = icpp_cidx_build(pm, &err);
    uint64_t rg = x ? icpp_cidx_routes(x, F[G], 100) : 0, ra = x ? icpp_cidx_routes(x, F[A], 100) : 0;
    CHECK(rg >= 1 && rg <= 3 && ra >= 1 && ra <= 3, "cycle: g %llu, a %llu routes", (unsigned long long)rg,
          (unsigned long long)ra);
    icpp_cidx_free(x);
    icpp_pathmap_free(pm);
    return check_done("routes");
}
