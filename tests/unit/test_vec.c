/* test_vec.c -- icpp_vec_reserve: doubling from `first`, new elements zeroed, overflow refused. */
#include "check.h"
#include "vec.h"

#include <errno.h>
#include <stdint.h>

int main(void)
{
    uint32_t *v = NULL;
    size_t cap = 0;
    CHECK(icpp_vec_reserve((void **)&v, &cap, 1, sizeof *v, 4) == 0 && v && cap == 4, "first: cap %zu", cap);
    for (size_t i = 0; i < cap; i++)
        v[i] = 0xdeadbeef;
    CHECK(icpp_vec_reserve((void **)&v, &cap, 4, sizeof *v, 4) == 0 && cap == 4, "enough room: cap %zu", cap);
    CHECK(icpp_vec_reserve((void **)&v, &cap, 9, sizeof *v, 4) == 0 && cap == 16, "doubled to 16: cap %zu", cap);
    int kept = 1, zero = 1;
    for (size_t i = 0; i < 4; i++)
        kept &= v[i] == 0xdeadbeef;
    for (size_t i = 4; i < cap; i++)
        zero &= v[i] == 0;
    CHECK(kept && zero, "old elements kept %d, new ones zeroed %d", kept, zero);
    uint32_t *before = v;
    size_t cap0 = cap;
    CHECK(icpp_vec_reserve((void **)&v, &cap, SIZE_MAX / 2, sizeof *v, 4) == -ENOMEM && v == before && cap == cap0,
          "a size that overflows is refused and nothing changes");
    CHECK(icpp_vec_reserve((void **)&v, &cap, SIZE_MAX, 1, 4) == -ENOMEM && cap == cap0, "doubling past SIZE_MAX refused");
    free(v);
    return check_done("vec");
}
