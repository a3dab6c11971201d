/* test_alias.c -- entry aliases (lib/alias.h): hand-written entries into another function's body, in this
 * binary, against what they are; then libc's, each checked against Zydis's reading of its first bytes. */
#include "alias.h"
#include "check.h"
#include "module.h"

#include <Zydis/Zydis.h>
#include <string.h>

/* al_body: a function; al_entry: two instructions and a jmp three bytes into
 * it (glibc's __mempcpy shape); al_tail: a jmp to al_body's entry (a tail
 * call, no alias); al_call: a call first (no alias); al_far: the jmp after
 * more instructions than an alias takes. */
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
        ".cfi_endproc\n.size al_far,.-al_far\n");
long al_body(long), al_entry(long, long), al_tail(long), al_call(long), al_far(long);

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
                  "al_body's one alias is al_entry (not al_tail, al_call, al_far): %zu", n);
            CHECK(icpp_alias_entries(x, (uint64_t)(uintptr_t)al_entry - bias, &fs) == 0, "al_entry has none");
            CHECK(al_entry(2, 3) == 6 && al_body(4) == 5, "the subjects run");
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
