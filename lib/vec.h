/* vec.h -- growable arrays: room for more elements, doubling, new elements zeroed. */
#ifndef ICPP_VEC_H
#define ICPP_VEC_H

#include <stddef.h>

/* Room for `need` elements of `elem` bytes in *v, whose capacity is *cap
 * (doubled from `first` when 0).  Elements past the old capacity are zeroed.
 * 0, or -ENOMEM with *v and *cap unchanged (also when the size would
 * overflow). */
int icpp_vec_reserve(void **v, size_t *cap, size_t need, size_t elem, size_t first);

#endif
