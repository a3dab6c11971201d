/* test_alias.c -- entry aliases (lib/alias.h): hand-written entries into another function's body, in this
 * binary, against what they are; then libc's, each checked against Zydis's reading of its first bytes. */
#include "alias.h"
#include "check.h"
#include "module.h"
#include "pathmap.h"

#include <Zydis/Zydis.h>
#include <string.h>

/* al_body: a function; al_entry: two instructions and a jmp three bytes into
 * it (glibc's __mempcpy shape); al_tail: a jmp to al_body's entry (a tail
 * call, no alias); al_call: a call first (no alias); al_far: the jmp after
 * more instructions than an alias takes; al_push, al_lea: the jmp in another
 * frame (a push, rsp moved by lea), whose entry SP the body's CFI would not
 * give (no alias). */
__asm__(".text\n"
        ".globl al_body\n.type al_body,@function\nal_body:\n.cfi_startproc\n"
        "mov %rdi,%rax\n"
        "add $1,%rax\n"
        "ret\n"
        ".cfi_endproc\n.size al_body,.-al_body\n"
        ".globl al_entry\n.type al_entry,@function\nal_entry:\n.cfi_startproc\n"
        "mov %rdi,%rax\n"
        "add %rsi,%rax\n"
        "jmp al_body+3\n"
        ".cfi_endproc\n.size al_entry,.-al_entry\n"
        ".globl al_tail\n.type al_tail,@function\nal_tail:\n.cfi_startproc\n"
        "jmp al_body\n"
        ".cfi_endproc\n.size al_tail,.-al_tail\n"
        ".globl al_call\n.type al_call,@function\nal_call:\n.cfi_startproc\n"
        "sub $8,%rsp\n.cfi_adjust_cfa_offset 8\n"
        "call al_body\n"
        "add $8,%rsp\n.cfi_adjust_cfa_offset -8\n"
        "jmp al_body+3\n"
        ".cfi_endproc\n.size al_call,.-al_call\n"
        ".globl al_far\n.type al_far,@function\nal_far:\n.cfi_startproc\n"
        "nop\nnop\nnop\nnop\n"
        "jmp al_body+3\n"
        ".cfi_endproc\n.size al_far,.-al_far\n"
        ".globl al_push\n.type al_push,@function\nal_push:\n.cfi_startproc\n"
        "push %rbx\n"
        "jmp al_body+3\n"
        ".cfi_endproc\n.size al_push,.-al_push\n"
        ".globl al_lea\n.type al_lea,@function\nal_lea:\n.cfi_startproc\n"
        "lea -8(%rsp),%rsp\n"
        "jmp al_body+3\n"
        ".cfi_endproc\n.size al_lea,.-al_lea\n");
long al_body(long), al_entry(long, long), al_tail(long), al_call(long), al_far(long), al_push(long), al_lea(long);

/* Zydis's reading: f's first ICPP_ALIAS_MAX_INSNS instructions end in a jmp
 * into g's code past its first byte (size gsz), with no branch before. */
static int zydis_alias(const icpp_module *m, uint64_t f, uint64_t g, uint64_t gsz)
{
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    uint8_t buf[64];
    size_t have = sizeof buf;
    while (have && icpp_module_read(m, f, buf, have) < 0)
        have /= 2;
    uint64_t at = f;
    for (size_t off = 0, k = 0; k < ICPP_ALIAS_MAX_INSNS && off < have; k++) {
        ZydisDecodedInstruction in;
        ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
        if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d, buf + off, have - off, &in, op)))
            return 0;
        if (in.meta.category == ZYDIS_CATEGORY_UNCOND_BR) {
            uint64_t t;
            return op[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&in, &op[0], at, &t)) &&
                   t > g && (!gsz || t < g + gsz);
        }
        if (in.meta.category == ZYDIS_CATEGORY_CALL || in.meta.category == ZYDIS_CATEGORY_RET ||
            in.meta.category == ZYDIS_CATEGORY_COND_BR)
            return 0;
        off += in.length;
        at += in.length;
    }
    return 0;
}

/* The height of node c at h (its count), or 0. */
static uint64_t count_at(const icpp_pathmap *pm, uint32_t c, int64_t h)
{
    const icpp_pm_node *n = icpp_pathmap_node(pm, c);
    for (uint32_t j = 0; c && j < n->nheights; j++)
        if (n->heights[j].height == h)
            return n->heights[j].count;
    return 0;
}

/* icpp_alias_expand on a map of this binary: main;al_entry at 64 (5 calls)
 * gains main;al_body at 64, with its count and call site; main;al_far (no
 * alias) gains nothing; a second expansion adds nothing; a map whose module
 * has another build-id is left alone. */
static void expand_check(icpp_module *self, uint64_t body, uint64_t entry, uint64_t far)
{
    for (int other = 0; other < 2; other++) {
        icpp_pathmap *pm = icpp_pathmap_new();
        icpp_build_id bid = *icpp_module_build_id(self);
        if (other)
            bid.bytes[0] ^= 1;
        uint32_t mi, fm, fe, ff, nm, ne, nf;
        int ok = pm && icpp_pathmap_add_module(pm, icpp_module_path(self), &bid, 0, &mi) == 0 &&
                 icpp_pathmap_add_func(pm, mi, 0x10, "main", &fm) == 0 &&
                 icpp_pathmap_add_func(pm, mi, entry, "al_entry", &fe) == 0 &&
                 icpp_pathmap_add_func(pm, mi, far, "al_far", &ff) == 0 &&
                 icpp_pathmap_child(pm, 0, fm, &nm) == 0 && icpp_pathmap_add_height(pm, nm, 0, 1) == 0 &&
                 icpp_pathmap_child(pm, nm, fe, &ne) == 0 && icpp_pathmap_add_height(pm, ne, 64, 5) == 0 &&
                 icpp_pathmap_add_site(pm, ne, mi, 0x1234, 5) == 0 &&
                 icpp_pathmap_child(pm, nm, ff, &nf) == 0 && icpp_pathmap_add_height(pm, nf, 80, 2) == 0;
        CHECK(ok, "build the map");
        if (!ok) {
            icpp_pathmap_free(pm);
            continue;
        }
        icpp_pathmap_add_count(pm, ne, 5);
        size_t before = icpp_pathmap_nnodes(pm), added = 99, again = 99;
        CHECK(icpp_alias_expand(pm, &added) == 0, "expand");
        int64_t g = icpp_pathmap_find_func(pm, mi, body);
        uint32_t c = g >= 0 ? icpp_pathmap_find_child(pm, nm, (uint32_t)g) : 0;
        if (other) {
            CHECK(added == 0 && icpp_pathmap_nnodes(pm) == before && c == 0,
                  "another build-id: nothing added (%zu, %zu nodes)", added, icpp_pathmap_nnodes(pm));
        } else {
            const icpp_pm_node *n = c ? icpp_pathmap_node(pm, c) : NULL;
            CHECK(added == 1 && n && count_at(pm, c, 64) == 5 && n->count == 5 && n->nheights == 1 && n->nsites == 1 &&
                      n->sites[0].addr == 0x1234 && icpp_pathmap_nnodes(pm) == before + 1,
                  "main;al_body at 64 with al_entry's calls and site (added %zu, node %u)", added, c);
            CHECK(icpp_alias_expand(pm, &again) == 0 && again == 0 && count_at(pm, c, 64) == 5 &&
                      icpp_pathmap_nnodes(pm) == before + 1,
                  "a second expansion adds nothing (%zu)", again);
        }
        icpp_pathmap_free(pm);
    }
}

int main(int argc, char **argv)
{
    icpp_err err;
    icpp_module *self = icpp_module_open("/proc/self/exe", &err);
    CHECK(self != NULL, "open self: %s", self ? "" : err.msg);
    if (self) {
        icpp_alias_index *x = icpp_alias_index_build(self);
        CHECK(x != NULL, "index");
        /* link-time addresses of the subjects: runtime minus the load bias (al_body's symbol) */
        const icpp_func *b = NULL;
        for (size_t i = 0; i < icpp_module_nfuncs(self); i++)
            if (!strcmp(icpp_module_funcs(self)[i].name, "al_body"))
                b = &icpp_module_funcs(self)[i];
        CHECK(b != NULL, "al_body in the function table");
        if (x && b) {
            uint64_t bias = (uint64_t)(uintptr_t)al_body - b->addr;
            const uint64_t *fs;
            size_t n = icpp_alias_entries(x, b->addr, &fs);
            CHECK(n == 1 && fs[0] == (uint64_t)(uintptr_t)al_entry - bias,
                  "al_body's one alias is al_entry (not al_tail, al_call, al_far, al_push, al_lea): %zu", n);
            CHECK(icpp_alias_entries(x, (uint64_t)(uintptr_t)al_entry - bias, &fs) == 0, "al_entry has none");
            CHECK(al_entry(2, 3) == 6 && al_body(4) == 5, "the subjects run");
            expand_check(self, b->addr, (uint64_t)(uintptr_t)al_entry - bias, (uint64_t)(uintptr_t)al_far - bias);
        }
        icpp_alias_index_free(x);
        icpp_module_close(self);
    }
    /* libc: x86-64 glibc's mempcpy variants enter memmove's bodies; every alias found is one by Zydis. */
    const char *libc = argc > 1 ? argv[1] : NULL;
    icpp_module *lm = libc ? icpp_module_open(libc, &err) : NULL;
    CHECK(!libc || lm, "open %s: %s", libc ? libc : "", lm ? "" : err.msg);
    if (lm) {
        icpp_alias_index *x = icpp_alias_index_build(lm);
        size_t n = x ? icpp_alias_count(x) : 0, ok = 0, seen = 0;
        const icpp_func *fs = icpp_module_funcs(lm);
        for (size_t i = 0; x && i < icpp_module_nfuncs(lm); i++) {
            const uint64_t *as;
            size_t k = icpp_alias_entries(x, fs[i].addr, &as);
            if (fs[i].owner != fs[i].addr)
                continue;
            for (size_t j = 0; j < k; j++, seen++)
                ok += zydis_alias(lm, as[j], fs[i].addr, fs[i].size);
        }
        CHECK(n >= 2 && seen == n && ok == n, "libc: %zu aliases, %zu listed under their bodies, %zu confirmed by Zydis",
              n, seen, ok);
        icpp_alias_index_free(x);
        icpp_module_close(lm);
    }
    return check_done("test_alias");
}
