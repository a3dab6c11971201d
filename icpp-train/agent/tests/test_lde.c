/* test_lde.c -- hand-written vectors for the length decoder (lde.c) and the reloc.c helpers built on it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

#include "lde.h"
#include "reloc.h"

/* Each vector: bytes (hex; spaces ignored), the expected length (0 =
 * invalid or incomplete), relative branch displacement size and value,
 * nop, rip-relative.  `avail` < the byte count tests truncation.  Every
 * vector is also decoded by Zydis, which must agree (length or failure,
 * branch displacement, NOP), so the expectations are checked twice. */
typedef struct vec {
    const char *hex;
    int         len;
    int         rel_size;
    int32_t     rel;
    int         nop;
    int         riprel;
    int         avail;          /* 0 = all the bytes */
    const char *what;
} vec;

static const vec vecs[] = {
    /* prefixes */
    {"90", 1, 0, 0, 1, 0, 0, "nop"},
    {"66 90", 2, 0, 0, 1, 0, 0, "xchg ax, ax = nop"},
    {"f3 90", 2, 0, 0, 0, 0, 0, "pause"},
    {"41 90", 2, 0, 0, 0, 0, 0, "xchg r8d, eax"},
    {"48 90", 2, 0, 0, 1, 0, 0, "REX.W nop"},
    {"41 66 90", 3, 0, 0, 1, 0, 0, "REX before 66 is ignored: nop"},
    {"f3 f2 90", 3, 0, 0, 1, 0, 0, "the last of F2/F3 counts: nop"},
    {"f2 f3 90", 3, 0, 0, 0, 0, 0, "the last of F2/F3 counts: pause"},
    {"0f 1f 00", 3, 0, 0, 1, 0, 0, "nopl (rax)"},
    {"0f 1f 40 00", 4, 0, 0, 1, 0, 0, "nopl 0(rax)"},
    {"0f 1f 44 00 00", 5, 0, 0, 1, 0, 0, "nopl 0(rax,rax,1)"},
    {"66 0f 1f 44 00 00", 6, 0, 0, 1, 0, 0, "nopw 0(rax,rax,1)"},
    {"0f 1f 80 00 00 00 00", 7, 0, 0, 1, 0, 0, "nopl 0(rax) disp32"},
    {"66 2e 0f 1f 84 00 00 00 00 00", 10, 0, 0, 1, 0, 0, "nopw cs:0(rax,rax,1)"},
    {"66 66 2e 0f 1f 84 00 00 00 00 00", 11, 0, 0, 1, 0, 0, "data16 nopw cs:..."},
    {"f3 0f 1e fa", 4, 0, 0, 0, 0, 0, "endbr64"},
    {"66 66 66 66 66 66 66 66 66 66 66 66 66 66 90", 15, 0, 0, 1, 0, 0, "14 prefixes + nop = 15 bytes"},
    {"66 66 66 66 66 66 66 66 66 66 66 66 66 66 66 90", 0, 0, 0, 0, 0, 0, "16 bytes: too long"},
    {"66 66 66 66 66 66 66 66 66 66 66 66 66 05 34 12", 0, 0, 0, 0, 0, 0, "add ax, imm16 past 15 bytes"},
    {"26 2e 36 3e 64 65 67 48 8b 04 24", 11, 0, 0, 0, 0, 0, "segment overrides, 67, REX.W mov rax, [esp]"},
    {"f0 48 0f b1 0e", 5, 0, 0, 0, 0, 0, "lock cmpxchg [rsi], rcx"},
    {"f0 83 00 01", 4, 0, 0, 0, 0, 0, "lock add dword [rax], 1"},
    {"f0 01 c0", 0, 0, 0, 0, 0, 0, "lock with a register destination"},
    {"f0 90", 0, 0, 0, 0, 0, 0, "lock nop"},
    {"f0 83 38 01", 0, 0, 0, 0, 0, 0, "lock cmp"},
    /* immediates sized by 66 / REX.W */
    {"05 78 56 34 12", 5, 0, 0, 0, 0, 0, "add eax, imm32"},
    {"66 05 34 12", 4, 0, 0, 0, 0, 0, "add ax, imm16"},
    {"66 81 c0 34 12", 5, 0, 0, 0, 0, 0, "add ax, imm16 (81 /0)"},
    {"66 48 81 c0 78 56 34 12", 8, 0, 0, 0, 0, 0, "REX.W wins over 66: imm32"},
    {"66 c7 00 34 12", 5, 0, 0, 0, 0, 0, "mov word [rax], imm16"},
    {"66 c7 44 24 08 34 12", 7, 0, 0, 0, 0, 0, "mov word [rsp+8], imm16"},
    {"c7 05 00 00 00 00 01 00 00 00", 10, 0, 0, 0, 1, 0, "mov dword [rip], imm32"},
    {"66 68 34 12", 4, 0, 0, 0, 0, 0, "push imm16"},
    {"68 78 56 34 12", 5, 0, 0, 0, 0, 0, "push imm32"},
    {"6a ff", 2, 0, 0, 0, 0, 0, "push imm8"},
    {"66 b8 34 12", 4, 0, 0, 0, 0, 0, "mov ax, imm16"},
    {"b8 01 00 00 00", 5, 0, 0, 0, 0, 0, "mov eax, imm32"},
    {"48 b8 88 77 66 55 44 33 22 11", 10, 0, 0, 0, 0, 0, "mov rax, imm64"},
    {"49 bf 88 77 66 55 44 33 22 11", 10, 0, 0, 0, 0, 0, "mov r15, imm64"},
    {"66 48 b8 88 77 66 55 44 33 22 11", 11, 0, 0, 0, 0, 0, "REX.W wins over 66: imm64"},
    {"f6 c1 01", 3, 0, 0, 0, 0, 0, "test cl, imm8 (F6 /0)"},
    {"f6 d1", 2, 0, 0, 0, 0, 0, "not cl (F6 /2): no immediate"},
    {"f7 04 24 01 00 00 00", 7, 0, 0, 0, 0, 0, "test dword [rsp], imm32"},
    {"66 f7 c0 34 12", 5, 0, 0, 0, 0, 0, "test ax, imm16"},
    {"48 f7 d8", 3, 0, 0, 0, 0, 0, "neg rax: no immediate"},
    {"f7 7c 24 08", 4, 0, 0, 0, 0, 0, "idiv dword [rsp+8]"},
    {"c8 10 00 01", 4, 0, 0, 0, 0, 0, "enter 16, 1"},
    {"c2 08 00", 3, 0, 0, 0, 0, 0, "ret 8"},
    {"6b c0 07", 3, 0, 0, 0, 0, 0, "imul eax, eax, imm8"},
    {"69 c0 78 56 34 12", 6, 0, 0, 0, 0, 0, "imul eax, eax, imm32"},
    {"c1 e0 04", 3, 0, 0, 0, 0, 0, "shl eax, 4"},
    /* moffs */
    {"a1 88 77 66 55 44 33 22 11", 9, 0, 0, 0, 0, 0, "mov eax, [moffs64]"},
    {"48 a3 88 77 66 55 44 33 22 11", 10, 0, 0, 0, 0, 0, "mov [moffs64], rax"},
    {"67 a1 44 33 22 11", 6, 0, 0, 0, 0, 0, "67: moffs32"},
    {"66 a0 88 77 66 55 44 33 22 11", 10, 0, 0, 0, 0, 0, "66 does not shorten moffs"},
    /* ModRM / SIB / displacement */
    {"8b 04 25 78 56 34 12", 7, 0, 0, 0, 0, 0, "SIB without base: disp32"},
    {"8b 44 25 08", 4, 0, 0, 0, 0, 0, "SIB base rbp, mod 1: disp8"},
    {"8b 84 24 00 01 00 00", 7, 0, 0, 0, 0, 0, "SIB, mod 2: disp32"},
    {"48 8b 05 00 10 00 00", 7, 0, 0, 0, 1, 0, "mov rax, [rip+0x1000]"},
    {"48 8d 3d f9 ff ff ff", 7, 0, 0, 0, 1, 0, "lea rdi, [rip-7]"},
    {"67 8b 05 00 10 00 00", 7, 0, 0, 0, 1, 0, "67: [eip+disp32]"},
    {"48 8d c0", 0, 0, 0, 0, 0, 0, "lea with a register source"},
    {"0f 20 c0", 3, 0, 0, 0, 0, 0, "mov rax, cr0"},
    {"0f 20 05", 3, 0, 0, 0, 0, 0, "mov cr: ModRM always registers, no disp32"},
    {"0f 20 c8", 0, 0, 0, 0, 0, 0, "mov rax, cr1"},
    /* 0F 38 / 0F 3A */
    {"66 0f 38 00 c1", 5, 0, 0, 0, 0, 0, "pshufb xmm0, xmm1"},
    {"0f 38 00 c1", 4, 0, 0, 0, 0, 0, "pshufb mm0, mm1"},
    {"f3 0f 38 00 c1", 0, 0, 0, 0, 0, 0, "pshufb has no F3 form"},
    {"66 0f 3a 0f c1 08", 6, 0, 0, 0, 0, 0, "palignr xmm0, xmm1, 8"},
    {"66 0f 3a 16 c0 01", 6, 0, 0, 0, 0, 0, "pextrd eax, xmm0, 1"},
    {"66 48 0f 3a 16 44 24 08 01", 9, 0, 0, 0, 0, 0, "pextrq [rsp+8], xmm0, 1"},
    {"f2 0f 38 f1 c1", 5, 0, 0, 0, 0, 0, "crc32 eax, ecx"},
    {"66 f2 0f 38 f1 c1", 6, 0, 0, 0, 0, 0, "crc32 eax, cx (66 = operand size, F2 mandatory)"},
    {"0f 38 f0 06", 4, 0, 0, 0, 0, 0, "movbe eax, [rsi]"},
    {"0f 38 f0 c0", 0, 0, 0, 0, 0, 0, "movbe has no register form"},
    {"66 0f 78 c0 01 02", 6, 0, 0, 0, 0, 0, "extrq xmm0, 1, 2 (imm8 imm8)"},
    {"0f 78 c0", 3, 0, 0, 0, 0, 0, "vmread rax, rax (no immediate)"},
    {"0f 0f c1 b4", 4, 0, 0, 0, 0, 0, "3DNow! pfmul mm0, mm1"},
    {"0f 0f 40 10 9e", 5, 0, 0, 0, 0, 0, "3DNow! pfadd mm0, [rax+16]"},
    {"0f 0f c1 00", 0, 0, 0, 0, 0, 0, "3DNow! suffix 00 undefined"},
    /* VEX */
    {"c5 f8 77", 3, 0, 0, 0, 0, 0, "vzeroupper"},
    {"c5 fd 6f 04 24", 5, 0, 0, 0, 0, 0, "vmovdqa ymm0, [rsp]"},
    {"c5 f9 70 c1 1b", 5, 0, 0, 0, 0, 0, "vpshufd xmm0, xmm1, 0x1b (VEX map 1 imm8)"},
    {"c4 e2 79 18 05 00 00 00 00", 9, 0, 0, 0, 1, 0, "vbroadcastss xmm0, [rip]"},
    {"c4 e3 79 0f c1 04", 6, 0, 0, 0, 0, 0, "vpalignr xmm0, xmm0, xmm1, 4 (VEX map 3)"},
    {"c4 e1 f9 7e c0", 5, 0, 0, 0, 0, 0, "vmovq rax, xmm0 (VEX.W1)"},
    {"c4 e2 78 f2 c1", 5, 0, 0, 0, 0, 0, "andn eax, eax, ecx"},
    {"c4 e3 7b f0 c1 05", 6, 0, 0, 0, 0, 0, "rorx eax, ecx, 5"},
    {"66 c5 f8 77", 0, 0, 0, 0, 0, 0, "66 before VEX"},
    {"48 c5 f8 77", 0, 0, 0, 0, 0, 0, "REX before VEX"},
    {"f0 c5 f8 77", 0, 0, 0, 0, 0, 0, "lock before VEX"},
    {"2e c5 f8 77", 4, 0, 0, 0, 0, 0, "a segment override before VEX is fine"},
    {"c4 e4 79 18 00", 0, 0, 0, 0, 0, 0, "VEX map 4 does not exist"},
    /* EVEX (disp8 is scaled by the operand size, but still one byte) */
    {"62 f1 7c 48 10 40 01", 7, 0, 0, 0, 0, 0, "vmovups zmm0, [rax+0x40]"},
    {"62 f1 fd 48 7f 44 24 02", 8, 0, 0, 0, 0, 0, "vmovdqa64 [rsp+0x80], zmm0"},
    {"62 f2 7d 48 18 05 00 00 00 00", 10, 0, 0, 0, 1, 0, "vbroadcastss zmm0, [rip]"},
    {"62 f3 7d 48 1f c1 00", 7, 0, 0, 0, 0, 0, "vpcmpd k0, zmm0, zmm1, 0 (EVEX map 3 imm8)"},
    {"62 f1 7d 48 72 e0 05", 7, 0, 0, 0, 0, 0, "vpsrad zmm0, zmm0, 5 (EVEX map 1 imm8)"},
    {"62 f1 7c c8 10 c1", 0, 0, 0, 0, 0, 0, "EVEX zeroing without a mask"},
    {"62 f4 7c 48 10 c1", 0, 0, 0, 0, 0, 0, "EVEX map 4 does not exist"},
    {"62 f5 7c 48 58 c1", 6, 0, 0, 0, 0, 0, "vaddph zmm0, zmm0, zmm1 (map 5)"},
    /* XOP */
    {"8f e8 78 c0 c1 05", 6, 0, 0, 0, 0, 0, "vprotb xmm0, xmm1, 5 (XOP map 8 imm8)"},
    {"8f e9 78 80 c1", 5, 0, 0, 0, 0, 0, "vfrczps xmm0, xmm1 (XOP map 9)"},
    {"8f ea 78 10 c0 04 00 00 00", 9, 0, 0, 0, 0, 0, "bextr eax, eax, imm32 (XOP map 10)"},
    {"8f c0", 2, 0, 0, 0, 0, 0, "pop rax (8F /0, map field < 8)"},
    {"8f c8", 0, 0, 0, 0, 0, 0, "8F /1: undefined"},
    /* relative branches */
    {"74 05", 2, 1, 5, 0, 0, 0, "je +5"},
    {"74 fe", 2, 1, -2, 0, 0, 0, "je self"},
    {"0f 84 00 01 00 00", 6, 4, 0x100, 0, 0, 0, "je rel32"},
    {"0f 85 fa ff ff ff", 6, 4, -6, 0, 0, 0, "jne rel32 self"},
    {"66 0f 84 10 00 00 00", 7, 4, 0x10, 0, 0, 0, "66 je: still rel32 in 64-bit mode"},
    {"eb 10", 2, 1, 0x10, 0, 0, 0, "jmp rel8"},
    {"e9 00 00 00 80", 5, 4, INT32_MIN, 0, 0, 0, "jmp rel32 -2^31"},
    {"66 e9 10 00 00 00", 6, 4, 0x10, 0, 0, 0, "66 jmp: still rel32"},
    {"48 e9 10 00 00 00", 6, 4, 0x10, 0, 0, 0, "REX.W jmp"},
    {"f2 e9 10 00 00 00", 6, 4, 0x10, 0, 0, 0, "bnd jmp"},
    {"e8 78 56 34 12", 5, 4, 0x12345678, 0, 0, 0, "call rel32"},
    {"66 e8 78 56 34 12", 6, 4, 0x12345678, 0, 0, 0, "66 call: still rel32"},
    {"3e 74 05", 3, 1, 5, 0, 0, 0, "je with a branch hint"},
    {"e3 fe", 2, 1, -2, 0, 0, 0, "jrcxz"},
    {"67 e3 00", 3, 1, 0, 0, 0, 0, "jecxz"},
    {"e2 f0", 2, 1, -16, 0, 0, 0, "loop"},
    {"e1 01", 2, 1, 1, 0, 0, 0, "loope"},
    {"e0 01", 2, 1, 1, 0, 0, 0, "loopne"},
    {"c7 f8 00 01 00 00", 6, 4, 0x100, 0, 0, 0, "xbegin rel32"},
    {"66 c7 f8 10 00", 5, 2, 0x10, 0, 0, 0, "66 xbegin: rel16"},
    {"66 48 c7 f8 10 00 00 00", 8, 4, 0x10, 0, 0, 0, "66 REX.W xbegin: rel32"},
    {"c7 f9 00 01 00 00", 0, 0, 0, 0, 0, 0, "C7 /7 other than F8"},
    {"c6 f8 01", 3, 0, 0, 0, 0, 0, "xabort 1 (no branch)"},
    {"ff 25 00 00 00 00", 6, 0, 0, 0, 1, 0, "jmp [rip]: indirect, no target"},
    {"ff d0", 2, 0, 0, 0, 0, 0, "call rax"},
    {"ff ff", 0, 0, 0, 0, 0, 0, "FF /7 undefined"},
    /* undefined in 64-bit mode, truncated */
    {"06", 0, 0, 0, 0, 0, 0, "push es"},
    {"d6", 0, 0, 0, 0, 0, 0, "salc"},
    {"0f 04", 0, 0, 0, 0, 0, 0, "0F 04"},
    {"e8 00 00 00 00", 0, 0, 0, 0, 0, 4, "call rel32 cut at 4 bytes"},
    {"48", 0, 0, 0, 0, 0, 0, "lone REX"},
    {"0f", 0, 0, 0, 0, 0, 0, "lone escape"},
    {"c4 e2", 0, 0, 0, 0, 0, 0, "VEX cut short"},
    {"90", 0, 0, 0, 0, 0, -1, "nothing available"},
};

static int fails;

static size_t parse(const char *hex, uint8_t *b)
{
    size_t n = 0;
    for (const char *s = hex; *s;) {
        if (*s == ' ') {
            s++;
            continue;
        }
        char t[3] = {s[0], s[1], 0};
        b[n++] = (uint8_t)strtoul(t, NULL, 16);
        s += 2;
    }
    return n;
}

#define FAIL(v, ...)                                                   \
    do {                                                               \
        fails++;                                                       \
        printf("FAIL [%s] %s: ", (v)->hex, (v)->what);                 \
        printf(__VA_ARGS__);                                           \
        printf("\n");                                                  \
    } while (0)

int main(void)
{
    ZydisDecoder dec;
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    size_t nv = sizeof vecs / sizeof *vecs;

    for (size_t i = 0; i < nv; i++) {
        const vec *v = &vecs[i];
        uint8_t b[32];
        size_t n = parse(v->hex, b);
        size_t avail = v->avail < 0 ? 0 : v->avail ? (size_t)v->avail : n;
        icpp_lde_insn in;
        memset(&in, 0xa5, sizeof in);
        size_t len = icpp_lde_decode(b, avail, &in);
        if ((int)len != v->len) {
            FAIL(v, "length %zu, want %d", len, v->len);
            continue;
        }
        if (len && (in.len != len || in.rel_size != v->rel_size || in.rel != v->rel ||
                    icpp_lde_is_nop(&in) != v->nop || in.riprel != v->riprel))
            FAIL(v, "rel_size %d rel %d nop %d riprel %d, want %d %d %d %d", in.rel_size, in.rel,
                 icpp_lde_is_nop(&in), in.riprel, v->rel_size, v->rel, v->nop, v->riprel);

        /* reloc.c's helper: the branch target */
        uint64_t t;
        size_t l2 = icpp_agent_branch_target(b, avail, 0x400000, &t);
        uint64_t want_t = v->rel_size ? 0x400000 + (uint64_t)v->len + (uint64_t)(int64_t)v->rel : 0;
        if (l2 != len || t != want_t)
            FAIL(v, "branch_target: len %zu target %#llx, want %zu %#llx", l2, (unsigned long long)t, len,
                 (unsigned long long)want_t);

        /* Zydis must agree with the expectation. */
        ZydisDecodedInstruction zi;
        int zok = ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, b, avail, &zi));
        if (zok != (v->len != 0) || (zok && zi.length != v->len))
            FAIL(v, "Zydis: %s, length %d", zok ? "decodes" : "fails", zok ? zi.length : 0);
        else if (zok) {
            int zrel = 0;
            int64_t zval = 0;
            for (int k = 0; k < 2; k++)
                if (zi.raw.imm[k].size && zi.raw.imm[k].is_relative) {
                    zrel = zi.raw.imm[k].size / 8;
                    zval = zi.raw.imm[k].value.s;
                }
            if (zrel != v->rel_size || zval != v->rel || (zi.mnemonic == ZYDIS_MNEMONIC_NOP) != v->nop)
                FAIL(v, "Zydis: rel_size %d rel %lld nop %d", zrel, (long long)zval,
                     zi.mnemonic == ZYDIS_MNEMONIC_NOP);
        }
    }

    /* padding(): nops and int3 up to the first other instruction */
    static const struct {
        const char *hex;
        size_t      want;
    } pads[] = {
        {"90 66 90 0f 1f 00 cc cc 55", 8},
        {"cc cc cc cc cc cc cc cc", 8},
        {"66 2e 0f 1f 84 00 00 00 00 00 0f 1f 40 00", 14},
        {"0f 1f 44 00", 0},                     /* incomplete nop: not padding */
        {"f3 90 90", 0},                        /* pause is not padding */
        {"c3", 0},
    };
    for (size_t i = 0; i < sizeof pads / sizeof *pads; i++) {
        uint8_t b[32];
        size_t n = parse(pads[i].hex, b);
        size_t got = icpp_agent_padding(b, n);
        if (got != pads[i].want) {
            fails++;
            printf("FAIL padding [%s]: %zu, want %zu\n", pads[i].hex, got, pads[i].want);
        }
    }

    /* A jmp/jcc sweep like patch.c's: the targets of a small function. */
    static const char *fn = "55 48 89 e5 74 04 eb 02 0f 0b e8 00 00 00 00 0f 85 eb ff ff ff 5d c3";
    static const uint64_t want_targets[] = {0x100a, 0x100a, 0x100f, 0x1000};
    uint8_t b[64];
    size_t n = parse(fn, b), k = 0;
    for (size_t off = 0; off < n;) {
        uint64_t t;
        size_t len = icpp_agent_branch_target(b + off, n - off, 0x1000 + off, &t);
        if (!len) {
            fails++;
            printf("FAIL sweep: undecodable at +%zu\n", off);
            break;
        }
        if (t) {
            if (k < 4 && t != want_targets[k]) {
                fails++;
                printf("FAIL sweep: target %zu is %#llx, want %#llx\n", k, (unsigned long long)t,
                       (unsigned long long)want_targets[k]);
            }
            k++;
        }
        off += len;
    }
    if (k != 4) {
        fails++;
        printf("FAIL sweep: %zu targets, want 4\n", k);
    }

    /* Never a byte past `avail`: every vector and 2M random byte strings
     * (prefix-heavy), at every available length, end at a page followed by
     * an inaccessible one (a read past the end would crash the test). */
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *pg = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pg == MAP_FAILED || mprotect(pg + page, (size_t)page, PROT_NONE) < 0) {
        fails++;
        printf("FAIL cannot set up a guard page\n");
    } else {
        uint8_t *edge = pg + page;
        long tried = 0;
        uint64_t rng = 0x2545f4914f6cdd1dull;
        for (size_t i = 0; i < nv + 2000000; i++) {
            uint8_t r[16];
            size_t rn;
            if (i < nv) {
                rn = parse(vecs[i].hex, r);
            } else {
                static const uint8_t pf[] = {0x66, 0x67, 0xf0, 0xf2, 0xf3, 0x2e, 0x48, 0x41, 0x0f, 0x0f,
                                             0x38, 0x3a, 0xc4, 0xc5, 0x62, 0x8f};
                rn = 1 + i % 16;
                for (size_t j = 0; j < rn; j++) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    r[j] = j < 4 && (rng & 0x100) ? pf[(rng >> 12) % sizeof pf] : (uint8_t)(rng >> 24);
                }
            }
            for (size_t avail = 0; avail <= rn; avail++) {
                icpp_lde_insn in;
                memcpy(edge - avail, r, avail);
                size_t len = icpp_lde_decode(edge - avail, avail, &in);
                if (len > avail) {
                    fails++;
                    printf("FAIL length %zu > avail %zu\n", len, avail);
                }
                tried++;
            }
        }
        printf("guard page: %ld decodes ending at an inaccessible page\n", tried);
        munmap(pg, 2 * (size_t)page);
    }

    printf("test_lde: %zu vectors, %d failures\n", nv, fails);
    return fails ? 1 : 0;
}
