/* vec.c -- growable arrays: room for more elements, doubling, new elements zeroed. */
#include "vec.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int icpp_vec_reserve(void **v, size_t *cap, size_t need, size_t elem, size_t first)
{
    assert(v && cap && (*v || !*cap || need <= *cap));     /* a capacity without an array is a caller's bug */
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : (first ? first : 1);
    while (nc < need) {
        if (nc > SIZE_MAX / 2)
            return -ENOMEM;
        nc *= 2;
    }
    if (elem && nc > SIZE_MAX / elem)
        return -ENOMEM;
    void *nv = realloc(*v, nc * elem);
    if (!nv)
        return -ENOMEM;
    memset((char *)nv + *cap * elem, 0, (nc - *cap) * elem);
    *v = nv;
    *cap = nc;
    return 0;
}
