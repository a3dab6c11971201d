/* lde_gen.c -- prints lde.c's form_* validity tables from Zydis (developer tool; paste its output into lde.c). */
#include <stdio.h>
#include <string.h>

#include <Zydis/Zydis.h>

/* For every map, mandatory prefix (or pp) and opcode: does Zydis accept a
 * memory form (some ModRM with mod != 3) and a register form (mod = 3)?
 * Each opcode is tried with all 256 ModRM bytes, zeros after them, and
 * every combination of the bits that do not change the length: REX (none,
 * 48, 4F, 44) and an extra 66 before F2/F3 for legacy maps; W, L, vvvv for
 * VEX and XOP; W, L'L, b, vvvv, aaa for EVEX; W, E, SSS, kkk for MVEX.  A
 * form is valid if any combination is: the tables err on accepting. */

static ZydisDecoder dec;
static uint8_t form[256];

static void try(const uint8_t *b, unsigned cls, unsigned op, unsigned modrm)
{
    ZydisDecodedInstruction in;
    if (ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec, NULL, b, ZYDIS_MAX_INSTRUCTION_LENGTH, &in)))
        form[op] |= (modrm >= 0xc0 ? 2 : 1) << (2 * cls);
}

static void print(const char *name)
{
    printf("  { /* %s */\n", name);
    for (int r = 0; r < 16; r++) {
        printf("   ");
        for (int c = 0; c < 16; c++)
            printf(" 0x%02x,", form[r * 16 + c]);
        printf("  /* %x */\n", r);
    }
    printf("  },\n");
    memset(form, 0, sizeof form);
}

int main(void)
{
    ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    uint8_t b[32];

    static const char *legacy[] = {"0F", "0F 38", "0F 3A"};
    printf("static const uint8_t form_legacy[3][256] = {\n");
    for (int map = 1; map <= 3; map++) {
        for (unsigned cls = 0; cls < 4; cls++)
            for (unsigned op = 0; op < 256; op++)
                for (int v = 0; v < 8; v++)
                    for (unsigned m = 0; m < 256; m++) {
                        static const uint8_t pfx[] = {0, 0x66, 0xf3, 0xf2}, rexes[] = {0, 0x48, 0x4f, 0x44};
                        int n = 0;
                        if (v >= 4 && cls < 2)
                            continue;
                        memset(b, 0, sizeof b);
                        if (v >= 4)
                            b[n++] = 0x66;
                        if (cls)
                            b[n++] = pfx[cls];
                        if (rexes[v % 4])
                            b[n++] = rexes[v % 4];
                        b[n++] = 0x0f;
                        if (map > 1)
                            b[n++] = map == 2 ? 0x38 : 0x3a;
                        b[n++] = (uint8_t)op;
                        b[n] = (uint8_t)m;
                        try(b, cls, op, m);
                    }
        print(legacy[map - 1]);
    }
    printf("};\n\n");

    static const char *vex[] = {"VEX map 1", "VEX map 2", "VEX map 3"};
    static const char *xop[] = {"XOP map 8", "XOP map 9", "XOP map 10"};
    for (int x = 0; x < 2; x++) {
        printf("static const uint8_t form_%s[3][256] = {\n", x ? "xop" : "vex");
        for (int i = 0; i < 3; i++) {
            unsigned map = x ? 8 + i : 1 + i;
            for (unsigned pp = 0; pp < 4; pp++)
                for (unsigned op = 0; op < 256; op++)
                    for (unsigned v = 0; v < 12; v++)
                        for (unsigned m = 0; m < 256; m++) {
                            unsigned w = v & 1, l = (v >> 1) & 1, vvvv = v < 4 ? 0xf : v < 8 ? 0xe : 0x7;
                            memset(b, 0, sizeof b);
                            b[0] = x ? 0x8f : 0xc4;
                            b[1] = (uint8_t)(0xe0 | map);
                            b[2] = (uint8_t)(w << 7 | vvvv << 3 | l << 2 | pp);
                            b[3] = (uint8_t)op;
                            b[4] = (uint8_t)m;
                            try(b, pp, op, m);
                        }
            print(x ? xop[i] : vex[i]);
        }
        printf("};\n\n");
    }

    static const unsigned emaps[] = {1, 2, 3, 5, 6};
    printf("static const uint8_t form_evex[5][256] = {\n");
    for (int i = 0; i < 5; i++) {
        for (unsigned pp = 0; pp < 4; pp++)
            for (unsigned op = 0; op < 256; op++)
                for (unsigned v = 0; v < 48; v++)
                    for (unsigned m = 0; m < 256; m++) {
                        unsigned w = v & 1, ll = (v >> 1) % 3, bc = (v / 6) & 1, vvvv = (v / 12) & 1 ? 0xe : 0xf,
                                 aaa = (v / 24) & 1;
                        memset(b, 0, sizeof b);
                        b[0] = 0x62;
                        b[1] = (uint8_t)(0xf0 | emaps[i]);
                        b[2] = (uint8_t)(w << 7 | vvvv << 3 | 4 | pp);
                        b[3] = (uint8_t)(ll << 5 | bc << 4 | 8 | aaa);
                        b[4] = (uint8_t)op;
                        b[5] = (uint8_t)m;
                        try(b, pp, op, m);
                    }
        char name[32];
        snprintf(name, sizeof name, "EVEX map %u", emaps[i]);
        print(name);
    }
    printf("};\n\n");

    printf("static const uint8_t form_mvex[3][256] = {\n");
    for (unsigned map = 1; map <= 3; map++) {
        for (unsigned pp = 0; pp < 4; pp++)
            for (unsigned op = 0; op < 256; op++)
                for (unsigned v = 0; v < 64; v++)
                    for (unsigned m = 0; m < 256; m++) {
                        unsigned w = v & 1, e = (v >> 1) & 1, kkk = (v >> 2) & 1, sss = v >> 3;
                        memset(b, 0, sizeof b);
                        b[0] = 0x62;
                        b[1] = (uint8_t)(0xf0 | map);
                        b[2] = (uint8_t)(w << 7 | 0xf << 3 | pp);
                        b[3] = (uint8_t)(e << 7 | sss << 4 | 8 | kkk);
                        b[4] = (uint8_t)op;
                        b[5] = (uint8_t)m;
                        try(b, pp, op, m);
                    }
        char name[32];
        snprintf(name, sizeof name, "MVEX map %u", map);
        print(name);
    }
    printf("};\n");
    return 0;
}
