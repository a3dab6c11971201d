/* alias.h -- entry points that share another function's body: a few instructions, then a jump into its middle. */
#ifndef ICPP_ALIAS_H
#define ICPP_ALIAS_H
#include <stddef.h>
#include <stdint.h>
#include "module.h"
#include "pathmap.h"
/* Hand-written code shares a body between entry points by jumping into the
 * middle of another function in the same frame: glibc's
 * `__mempcpy_avx512_unaligned_erms` is `mov %rdi,%rax; add %rdx,%rax; jmp`
 * to three bytes past `__memmove_avx512_unaligned_erms`'s start.  Training
 * records the entry it hooks (mempcpy); a sample or a learn sample in the
 * shared body is in the other function's code (docs/resolve.md, "Code
 * entered by a jump into another function's middle").  An
 * *entry alias* of G is a function F of the same module whose first
 * instructions (at most ICPP_ALIAS_MAX_INSNS, no call, return or other
 * branch among them) end in an unconditional direct jmp past G's first
 * byte, inside G (G's owner, for a cold part), and none of which may move
 * rsp (the body runs in F's frame).  Read from the module's
 * bytes only; untrusted input: bounds-checked reads, undecodable bytes end
 * the scan. */
#define ICPP_ALIAS_MAX_INSNS 4
typedef struct icpp_alias_index icpp_alias_index;
/* Every entry alias of m's functions; NULL only when out of memory. */
icpp_alias_index *icpp_alias_index_build(const icpp_module *m);
void              icpp_alias_index_free(icpp_alias_index *x);
/* The entry aliases of the function starting at g (link-time addresses,
 * sorted): their count, *out pointing at them. */
size_t icpp_alias_entries(const icpp_alias_index *x, uint64_t g, const uint64_t **out);
/* How many aliases the module has (for tests and statistics). */
size_t icpp_alias_count(const icpp_alias_index *x);

/* Training hooks an entry alias F of G and files a call through it as
 * `...;caller;F` at height h, while a sample in the shared body is G's at
 * h: its true path is `...;caller;G`, which nothing hooks.  Add those
 * contexts to pm: for every node of an alias F, its sibling for G (created,
 * G added to the functions if need be) with F's heights, counts and call
 * sites -- only heights G's node lacks, so a map expanded, saved and
 * expanded again gains nothing.  Modules are read from the paths pm
 * records (build-id checked; one that is gone or changed is skipped).
 * *added: the contexts that grew.  0, or -ENOMEM (pm may be part done). */
int icpp_alias_expand(icpp_pathmap *pm, size_t *added);
#endif
