/* test_reloc.c -- unit tests of reloc.c: typical prologues relocate to equivalent code with the same absolute targets. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <Zydis/Zydis.h>

#include "../agent.h"
#include "../reloc.h"

/* For each case: relocate from SRC to DST, then decode both with Zydis and
 * format them with their runtime addresses, so rip-relative operands and
 * branch targets print as absolute addresses.  Every moved instruction must
 * print identically (a jcc rel8 and its rel32 form print the same), except:
 * a call becomes `push qword ptr [lit]` (lit holds the original return
 * address) + `jmp target`; loop/jrcxz become `op +2; jmp +5; jmp target`;
 * a branch to a moved instruction goes to its copy.  The code ends with
 * `jmp SRC + src_len`.  A few cases are also executed. */

static int fails;
#define CHECK(c, ...)                                                                  \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fails++;                                                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
            printf(__VA_ARGS__);                                                       \
            printf("\n");                                                              \
        }                                                                              \
    } while (0)

static ZydisDecoder dec;
static ZydisFormatter fmt;

typedef struct dins {
    ZydisDecodedInstruction in;
    ZydisDecodedOperand     ops[ZYDIS_MAX_OPERAND_COUNT];
    char                    text[128];
    uint64_t                target;     /* branch target or rip-relative address, else 0 */
} dins;

static int decode_at(const uint8_t *p, size_t n, uint64_t ip, dins *d)
{
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, p, n, &d->in, d->ops)))
        return 0;
    ZydisFormatterFormatInstruction(&fmt, &d->in, d->ops, d->in.operand_count_visible, d->text,
                                    sizeof d->text, ip, NULL);
    d->target = 0;
    for (int i = 0; i < d->in.operand_count_visible; i++) {
        ZyanU64 a;
        const ZydisDecodedOperand *o = &d->ops[i];
        if ((o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE && o->imm.is_relative) ||
            (o->type == ZYDIS_OPERAND_TYPE_MEMORY && o->mem.base == ZYDIS_REGISTER_RIP))
            if (ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&d->in, o, ip, &a)))
                d->target = a;
    }
    return d->in.length;
}

typedef struct tcase {
    const char *name;
    const char *hex;       /* original bytes */
    int         min_len;
    int         want;      /* 0 or ICPP_AGENT_R_* */
    int         src_len;   /* expected bytes moved (when want == 0) */
} tcase;

static size_t unhex(const char *h, uint8_t *out)
{
    size_t n = 0;
    while (*h) {
        if (*h == ' ') {
            h++;
            continue;
        }
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

static const tcase cases[] = {
    { "O0 push/mov/sub", "55 48 89 e5 48 83 ec 10 89 7d fc", 5, 0, 8 },
    { "endbr64 push mov", "f3 0f 1e fa 55 48 89 e5", 5, 0, 5 },
    { "endbr64 jmp rel32 (frame_dummy)", "f3 0f 1e fa e9 10 00 00 00", 5, 0, 9 },
    { "lea rip", "48 8d 05 34 12 00 00 c3", 5, 0, 7 },
    { "mov rip", "8b 05 10 00 00 00 c3", 5, 0, 6 },
    { "cmp rip-rel + imm8", "83 3d 20 30 00 00 00 74 05 c3", 5, 0, 7 },
    { "vmovdqu ymm rip (VEX)", "c5 fe 6f 05 00 01 00 00 c3", 5, 0, 8 },
    { "jmp [rip] (plt-like)", "ff 25 f2 2f 00 00", 5, 0, 6 },
    { "cmp + jle rel8 out", "83 ff 01 7e 0a 48 89 f8 c3", 5, 0, 5 },
    { "xor test je rel8", "31 c0 85 ff 74 05 b8 01 00 00 00 c3", 5, 0, 6 },
    { "jne back to start", "31 c0 75 fc 90 90", 5, 0, 5 },
    { "push r12 rbp rbx sub", "41 54 55 53 48 83 ec 20", 5, 0, 8 },
    { "sub rsp imm32", "48 81 ec 00 10 00 00", 5, 0, 7 },
    { "stack protector fs:0x28", "64 48 8b 04 25 28 00 00 00", 5, 0, 9 },
    { "call rel32 first", "e8 00 01 00 00 83 c0 01 c3", 5, 0, 5 },
    { "nop + call rel32", "90 e8 00 01 00 00 c3", 5, 0, 6 },
    { "jmp rel32 first", "e9 00 10 00 00", 5, 0, 5 },
    { "jmp rel8 first", "eb 10 90 90 90", 5, 0, 5 },
    { "loop rel8", "e2 10 90 90 90", 5, 0, 5 },
    { "jrcxz rel8", "e3 10 90 90 90", 5, 0, 5 },
    { "mov eax imm; ret (6 bytes)", "b8 01 00 00 00 c3", 5, 0, 5 },
    { "test; jcc rel32 first bytes", "85 ff 0f 84 00 02 00 00", 5, 0, 8 },
    { "int3 fallback: first insn only", "48 8b 05 00 10 00 00 c3", 1, 0, 7 },
    { "int3 fallback: ret only", "c3", 1, 0, 1 },
    /* refused */
    { "call rax (indirect)", "ff d0 90 90 90", 5, ICPP_AGENT_R_UNRELOCATABLE, 0 },
    { "call [rip] (indirect)", "ff 15 00 10 00 00", 5, ICPP_AGENT_R_UNRELOCATABLE, 0 },
    { "xbegin", "c7 f8 00 01 00 00", 5, ICPP_AGENT_R_UNRELOCATABLE, 0 },
    { "undecodable", "06 90 90 90 90", 5, ICPP_AGENT_R_UNRELOCATABLE, 0 },
    { "branch into moved insn", "31 c0 75 fd 90", 5, ICPP_AGENT_R_UNRELOCATABLE, 0 },
    { "xor; ret (3 bytes)", "31 c0 c3", 5, ICPP_AGENT_R_TOO_SHORT, 0 },
    { "insn runs past the end", "90 90 90 b8 01 00", 5, ICPP_AGENT_R_TOO_SHORT, 0 },
};

static void check_case(const tcase *c, uint64_t src, uint64_t dst)
{
    uint8_t code[64];
    size_t n = unhex(c->hex, code);
    icpp_agent_reloc r;
    const char *why = NULL;
    int rc = icpp_agent_relocate(code, n, src, (size_t)c->min_len, dst, &r, &why);
    CHECK(rc == c->want, "%s: rc %d (%s), want %d", c->name, rc, why ? why : "", c->want);
    if (rc || c->want)
        return;
    CHECK((int)r.src_len == c->src_len, "%s: src_len %u want %d", c->name, r.src_len, c->src_len);
    /* size must not depend on the destination */
    icpp_agent_reloc r2;
    CHECK(icpp_agent_relocate(code, n, src, (size_t)c->min_len, src + 0x1000, &r2, NULL) == 0 &&
              r2.size == r.size,
          "%s: size depends on destination", c->name);

    size_t so = 0, dof = 0;
    for (uint32_t k = 0; k < r.ninsn; k++) {
        dins o, x;
        CHECK(decode_at(code + so, n - so, src + so, &o), "%s: decode original", c->name);
        CHECK(r.src_off[k] == so && r.dst_off[k] == dof, "%s: offsets", c->name);
        CHECK(decode_at(r.code + dof, r.size - dof, dst + dof, &x), "%s: decode copy", c->name);
        int intra = o.target >= src && o.target < src + r.src_len &&
                    o.in.meta.category != ZYDIS_CATEGORY_CALL && o.ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE;
        if (o.in.meta.category == ZYDIS_CATEGORY_CALL) {
            /* push qword ptr [lit]; jmp target */
            CHECK(x.in.mnemonic == ZYDIS_MNEMONIC_PUSH && x.target, "%s: call -> push (%s)", c->name,
                  x.text);
            uint64_t lit;
            memcpy(&lit, r.code + (x.target - dst), 8);
            CHECK(lit == src + so + o.in.length, "%s: pushed return address %#llx", c->name,
                  (unsigned long long)lit);
            dins j;
            decode_at(r.code + dof + x.in.length, r.size, dst + dof + x.in.length, &j);
            CHECK(j.in.mnemonic == ZYDIS_MNEMONIC_JMP && j.target == o.target,
                  "%s: call target %s vs %s", c->name, j.text, o.text);
            dof += x.in.length + j.in.length;
        } else if (o.in.mnemonic == ZYDIS_MNEMONIC_LOOP || o.in.mnemonic == ZYDIS_MNEMONIC_JRCXZ) {
            dins s, j;
            decode_at(r.code + dof + x.in.length, 16, dst + dof + x.in.length, &s);
            decode_at(r.code + dof + x.in.length + s.in.length, 16,
                      dst + dof + x.in.length + s.in.length, &j);
            CHECK(x.in.mnemonic == o.in.mnemonic && x.target == dst + dof + x.in.length + 2,
                  "%s: loop head %s", c->name, x.text);
            CHECK(s.in.mnemonic == ZYDIS_MNEMONIC_JMP &&
                      s.target == dst + dof + x.in.length + s.in.length + 5,
                  "%s: loop skip %s", c->name, s.text);
            CHECK(j.in.mnemonic == ZYDIS_MNEMONIC_JMP && j.target == o.target, "%s: loop target %s",
                  c->name, j.text);
            dof += x.in.length + s.in.length + j.in.length;
        } else if (intra) {
            size_t m;
            for (m = 0; m < r.ninsn && src + r.src_off[m] != o.target; m++)
                ;
            CHECK(m < r.ninsn && x.in.mnemonic == o.in.mnemonic && x.target == dst + r.dst_off[m],
                  "%s: intra-range branch %s -> %s", c->name, o.text, x.text);
            dof += x.in.length;
        } else {
            CHECK(!strcmp(o.text, x.text), "%s: '%s' became '%s'", c->name, o.text, x.text);
            CHECK(o.target == x.target, "%s: target", c->name);
            dof += x.in.length;
        }
        so += o.in.length;
    }
    dins back;
    decode_at(r.code + dof, 16, dst + dof, &back);
    CHECK(back.in.mnemonic == ZYDIS_MNEMONIC_JMP && back.target == src + r.src_len,
          "%s: jmp back %s", c->name, back.text);
    CHECK(r.ref_lo <= src + r.src_len && r.ref_hi >= src + r.src_len, "%s: reach", c->name);
}

/* ---- executed cases ---------------------------------------------------------- */

static uint8_t *map_at(uint64_t hint, size_t size)
{
    void *p = mmap((void *)hint, size, PROT_READ | PROT_WRITE | PROT_EXEC,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void *make_stub(uint8_t *fn, size_t avail, uint8_t *stub)
{
    icpp_agent_reloc r;
    const char *why = NULL;
    int rc = icpp_agent_relocate(fn, avail, (uint64_t)(uintptr_t)fn, 5, (uint64_t)(uintptr_t)stub,
                                 &r, &why);
    CHECK(rc == 0, "exec relocate: %s", why ? why : "");
    memcpy(stub, r.code, r.size);
    return stub;
}

static void exec_tests(void)
{
    uint8_t *code = map_at(0x200000000ull, 1 << 16);
    uint8_t *stubs = map_at(0x200000000ull + (1ull << 30) + (3u << 28), 1 << 16);  /* 1.75 GiB away */
    if (!code || !stubs) {
        printf("SKIP exec tests: cannot map test memory\n");
        return;
    }
    uint8_t b[64];
    size_t n;

    /* jcc rel8 inside the moved bytes: f(x) = x ? 7 : 3 */
    n = unhex("85 ff 74 06 b8 07 00 00 00 c3 b8 03 00 00 00 c3", b);
    memcpy(code, b, n);
    int (*f1)(int) = (int (*)(int))make_stub(code, n, stubs);
    CHECK(f1(0) == 3 && f1(1) == 7, "exec jcc: %d %d", f1(0), f1(1));

    /* rip-relative load of a value 0x100 bytes on */
    uint8_t *f = code + 0x400;
    n = unhex("8b 05 fa 00 00 00 c3", b);      /* mov eax,[rip+0xfa] -> f+0x100 */
    memcpy(f, b, n);
    *(int *)(f + 0x100) = 1234;
    int (*f2)(void) = (int (*)(void))make_stub(f, n, stubs + 0x100);
    CHECK(f2() == 1234, "exec rip: %d", f2());

    /* call first: the helper returns its return address + 1 */
    f = code + 0x800;
    uint8_t *helper = code + 0xa00;
    n = unhex("48 8b 04 24 48 ff c0 c3", b);   /* mov rax,[rsp]; inc rax; ret */
    memcpy(helper, b, n);
    int32_t rel = (int32_t)(helper - (f + 5));
    f[0] = 0xe8;
    memcpy(f + 1, &rel, 4);
    f[5] = 0xc3;
    uint64_t (*f3)(void) = (uint64_t (*)(void))make_stub(f, 6, stubs + 0x200);
    CHECK(f3() == (uint64_t)(uintptr_t)(f + 5) + 1, "exec call: callee saw ra %#llx, want %p",
          (unsigned long long)f3() - 1, (void *)(f + 5));

    /* jrcxz: f(x) = x ? 1 : 2 */
    f = code + 0xc00;
    n = unhex("48 89 f9 e3 06 b8 01 00 00 00 c3 b8 02 00 00 00 c3", b);
    memcpy(f, b, n);
    int (*f4)(long) = (int (*)(long))make_stub(f, n, stubs + 0x300);
    CHECK(f4(0) == 2 && f4(5) == 1, "exec jrcxz: %d %d", f4(0), f4(5));

    /* backward branch within the moved bytes: f(n, s) = max(s + 1, n) */
    f = code + 0xe00;
    n = unhex("ff c6 39 fe 7c fa 89 f0 c3", b);
    memcpy(f, b, n);
    int (*f5)(int, int) = (int (*)(int, int))make_stub(f, n, stubs + 0x400);
    CHECK(f5(10, 0) == 10 && f5(3, 7) == 8, "exec loop: %d %d", f5(10, 0), f5(3, 7));
}

int main(void)
{
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    ZydisFormatterInit(&fmt, ZYDIS_FORMATTER_STYLE_INTEL);
    size_t nc = sizeof cases / sizeof cases[0];
    /* destinations below, above, and ~1.9 GiB away */
    const uint64_t src = 0x555555554000ull + 0x1200;
    const uint64_t dsts[] = { src - 0x10000, src + 0x7000000, src - 0x78000000ull };
    for (size_t d = 0; d < 3; d++)
        for (size_t i = 0; i < nc; i++)
            check_case(&cases[i], src, dsts[d]);
    /* out of reach: rip target 3 GiB from the destination */
    {
        uint8_t code[16];
        size_t n = unhex("8b 05 10 00 00 00 c3", code);
        icpp_agent_reloc r;
        CHECK(icpp_agent_relocate(code, n, src, 5, src + (3ull << 30), &r, NULL) ==
                  ICPP_AGENT_R_UNRELOCATABLE,
              "out-of-reach rip operand accepted");
    }
    /* branch scan helper */
    {
        uint8_t code[16];
        uint64_t t;
        size_t n = unhex("7e 0a", code);
        CHECK(icpp_agent_branch_target(code, n, 0x1000, &t) == 2 && t == 0x100c, "jle target %#llx",
              (unsigned long long)t);
        n = unhex("0f 84 00 01 00 00", code);
        CHECK(icpp_agent_branch_target(code, n, 0x1000, &t) == 6 && t == 0x1106, "je32 target");
        n = unhex("48 89 e5", code);
        CHECK(icpp_agent_branch_target(code, n, 0x1000, &t) == 3 && t == 0, "mov has no target");
    }
    /* alignment padding after a short function */
    {
        uint8_t code[16];
        size_t n = unhex("0f 1f 40 00 cc cc 90 55 90", code);
        CHECK(icpp_agent_padding(code, n) == 7, "padding %zu", icpp_agent_padding(code, n));
        n = unhex("66 2e 0f 1f 84 00 00 00 00 00", code);
        CHECK(icpp_agent_padding(code, n) == 10, "long nop padding");
        n = unhex("f3 0f 1e fa 90", code);
        CHECK(icpp_agent_padding(code, n) == 0, "endbr64 is not padding");
    }
    exec_tests();
    printf("test_reloc: %zu cases x 3 destinations + exec tests, %d failure(s)\n", nc, fails);
    return fails != 0;
}
