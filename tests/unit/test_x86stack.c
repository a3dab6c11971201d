/* test_x86stack.c -- the x86-64 stack model (lib/x86stack.h): hand-assembled instructions, their classes under
 * both rule sets, and their effect on rsp and rbp along prologues and epilogues. */
#include "check.h"
#include "x86stack.h"

#include <string.h>

#define CG ICPP_X86_RULES_CALLGRAPH
#define RW ICPP_X86_RULES_REWRITE

/* Decode bytes b (n of them) at address a under rules into *x, and as the
 * frame analysis does (RW) into *d; 0 if they do not decode. */
static icpp_x86_detail det;
static int dec(const uint8_t *b, size_t n, uint64_t a, unsigned rules, icpp_x86_insn *x)
{
    ZydisDecodedInstruction in;
    ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(icpp_x86_decoder(), b, n, &in, op)))
        return 0;
    icpp_x86_classify(&in, op, a, rules, x);
    if (rules == RW)
        icpp_x86_details(&in, op, x, &det);
    return 1;
}

typedef struct vec {
    const char *what;
    uint8_t     b[8];
    size_t      n;
    uint8_t     kind_cg, kind_rw;   /* under the call graph's and the rewriter's rules */
    int32_t     delta_cg, delta_rw; /* PUSH/POP/ADJ */
    int32_t     rdisp;
    uint16_t    flags;              /* all of these set (under both rules) */
} vec;

#define K(k) ICPP_X86_##k
/* what the call graph (no icpp_x86_details) leaves out */
#define REFS (ICPP_X86_F_RSP_MEM | ICPP_X86_F_RSP_IDX | ICPP_X86_F_RSP_PTR | ICPP_X86_F_RBP_REF | ICPP_X86_F_RBP_VAL)
static const vec vecs[] = {
    {"push %rbp", {0x55}, 1, K(PUSH), K(PUSH), 8, 8, 0, 0},
    {"push %rbx", {0x53}, 1, K(PUSH), K(PUSH), 8, 8, 0, 0},
    {"pushfq", {0x9c}, 1, K(PUSH), K(PUSH), 8, 8, 0, 0},
    {"push %ax (16 bits)", {0x66, 0x50}, 2, K(RSP_BAD), K(RSP_BAD), 8, 8, 0, 0},
    {"pop %rbp", {0x5d}, 1, K(POP), K(POP), -8, -8, 0, ICPP_X86_F_POP_RBP},
    {"pop %rbx", {0x5b}, 1, K(POP), K(POP), -8, -8, 0, 0},
    {"pop %rsp", {0x5c}, 1, K(RSP_BAD), K(RSP_BAD), 0, 0, 0, 0},
    {"sub $0x18,%rsp", {0x48, 0x83, 0xec, 0x18}, 4, K(ADJ), K(ADJ), 24, 24, 0, 0},
    {"add $0x18,%rsp", {0x48, 0x83, 0xc4, 0x18}, 4, K(ADJ), K(ADJ), -24, -24, 0, 0},
    {"sub $0x1000,%rsp", {0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00}, 7, K(ADJ), K(ADJ), 4096, 4096, 0, 0},
    /* the rule sets differ: an odd adjustment, a huge one, lea to rsp from rsp */
    {"sub $4,%rsp", {0x48, 0x83, 0xec, 0x04}, 4, K(ADJ), K(RSP_BAD), 4, 0, 0, 0},
    {"sub $0x7ffffff8,%rsp", {0x48, 0x81, 0xec, 0xf8, 0xff, 0xff, 0x7f}, 7, K(RSP_BAD), K(ADJ), 0, 0x7ffffff8, 0, 0},
    {"lea 0x10(%rsp),%rsp", {0x48, 0x8d, 0x64, 0x24, 0x10}, 5, K(ADJ), K(RSP_BAD), -16, 0, 0, 0},
    {"and $-16,%rsp", {0x48, 0x83, 0xe4, 0xf0}, 4, K(RSP_BAD), K(RSP_BAD), 0, 0, 0, 0},
    {"sub %rax,%rsp", {0x48, 0x29, 0xc4}, 3, K(RSP_BAD), K(RSP_BAD), 0, 0, 0, 0},
    {"mov %rsp,%rbp", {0x48, 0x89, 0xe5}, 3, K(RBP_FROM_RSP), K(RBP_FROM_RSP), 0, 0, 0, 0},
    {"mov %rsp,%rbp (8b)", {0x48, 0x8b, 0xec}, 3, K(RBP_FROM_RSP), K(RBP_FROM_RSP), 0, 0, 0, 0},
    {"mov %rbp,%rsp", {0x48, 0x89, 0xec}, 3, K(RSP_FROM_RBP), K(RSP_FROM_RBP), 0, 0, 0, 0},
    {"lea -0x8(%rbp),%rsp", {0x48, 0x8d, 0x65, 0xf8}, 4, K(RSP_FROM_RBP), K(RSP_FROM_RBP), 0, 0, -8, 0},
    {"lea 0x10(%rsp),%rbp", {0x48, 0x8d, 0x6c, 0x24, 0x10}, 5, K(RBP_FROM_RSP), K(RBP_FROM_RSP), 0, 0, 16, 0},
    {"lea (%rax),%rbp", {0x48, 0x8d, 0x28}, 3, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RBP_W},
    {"mov %rax,%rbp", {0x48, 0x89, 0xc5}, 3, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RBP_W},
    {"enter $0x10,$0", {0xc8, 0x10, 0x00, 0x00}, 4, K(RSP_BAD), K(RSP_BAD), 0, 0, 0, ICPP_X86_F_RBP_W},
    {"leave", {0xc9}, 1, K(LEAVE), K(LEAVE), 0, 0, 0, 0},
    {"nop", {0x90}, 1, K(OTHER), K(PAD), 0, 0, 0, 0},
    {"nopl 0x0(%rax)", {0x0f, 0x1f, 0x40, 0x00}, 4, K(OTHER), K(PAD), 0, 0, 0, 0},
    {"int3", {0xcc}, 1, K(STOP), K(PAD), 0, 0, 0, 0},
    {"ud2", {0x0f, 0x0b}, 2, K(STOP), K(STOP), 0, 0, 0, 0},
    {"hlt", {0xf4}, 1, K(STOP), K(STOP), 0, 0, 0, 0},
    {"endbr64", {0xf3, 0x0f, 0x1e, 0xfa}, 4, K(OTHER), K(OTHER), 0, 0, 0, 0},
    {"ret", {0xc3}, 1, K(RET), K(RET), 0, 0, 0, 0},
    {"jmp *%rax", {0xff, 0xe0}, 2, K(JMP_IND), K(JMP_IND), 0, 0, 0, 0},
    {"mov %rsp,%rax", {0x48, 0x89, 0xe0}, 3, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RSP_PTR},
    {"mov %rbp,%rax", {0x48, 0x89, 0xe8}, 3, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RBP_VAL},
    {"mov 0x8(%rsp),%rax", {0x48, 0x8b, 0x44, 0x24, 0x08}, 5, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RSP_MEM},
    {"mov (%rsp,%rbx,8),%rax", {0x48, 0x8b, 0x04, 0xdc}, 4, K(OTHER), K(OTHER), 0, 0, 0,
     ICPP_X86_F_RSP_MEM | ICPP_X86_F_RSP_IDX},
    {"lea 0x20(%rsp),%rdi", {0x48, 0x8d, 0x7c, 0x24, 0x20}, 5, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RSP_PTR},
    {"mov -0x8(%rbp),%rax", {0x48, 0x8b, 0x45, 0xf8}, 4, K(OTHER), K(OTHER), 0, 0, 0, ICPP_X86_F_RBP_REF},
};

static void test_classes(void)
{
    for (size_t i = 0; i < sizeof vecs / sizeof *vecs; i++) {
        const vec *v = &vecs[i];
        icpp_x86_insn cg, rw;
        CHECK(dec(v->b, v->n, 0x1000, CG, &cg) && dec(v->b, v->n, 0x1000, RW, &rw), "%s: decodes", v->what);
        CHECK(cg.len == v->n && rw.len == v->n && cg.addr == 0x1000, "%s: length %u", v->what, cg.len);
        CHECK(cg.kind == v->kind_cg, "%s: call graph kind %u, want %u", v->what, cg.kind, v->kind_cg);
        CHECK(rw.kind == v->kind_rw, "%s: rewrite kind %u, want %u", v->what, rw.kind, v->kind_rw);
        if (cg.kind == K(PUSH) || cg.kind == K(POP) || cg.kind == K(ADJ))
            CHECK(cg.delta == v->delta_cg, "%s: call graph delta %d, want %d", v->what, cg.delta, v->delta_cg);
        if (rw.kind == K(PUSH) || rw.kind == K(POP) || rw.kind == K(ADJ))
            CHECK(rw.delta == v->delta_rw, "%s: rewrite delta %d, want %d", v->what, rw.delta, v->delta_rw);
        if (cg.kind == K(RSP_FROM_RBP) || cg.kind == K(RBP_FROM_RSP))
            CHECK(cg.rdisp == v->rdisp && rw.rdisp == v->rdisp, "%s: rdisp %d/%d, want %d", v->what, cg.rdisp,
                  rw.rdisp, v->rdisp);
        CHECK((rw.flags & v->flags) == v->flags, "%s: rewrite flags %#x, want %#x", v->what, rw.flags, v->flags);
        CHECK((cg.flags & v->flags & ~REFS) == (v->flags & ~REFS) && !(cg.flags & REFS),
              "%s: call graph flags %#x, want %#x without stack references", v->what, cg.flags, v->flags & ~REFS);
        CHECK(!(rw.flags & ICPP_X86_F_ENDBR), "%s: F_ENDBR is never set (endbr64 is Zydis's CET)", v->what);
    }
    /* what the frame patcher needs of an adjustment: its immediate and its size */
    icpp_x86_insn x;
    dec((const uint8_t[]){0x48, 0x83, 0xec, 0x18}, 4, 0, RW, &x);
    CHECK(det.imm == 24 && det.imm_size == 8, "sub $0x18: imm %d, %u bits", det.imm, det.imm_size);
    dec((const uint8_t[]){0x48, 0x81, 0xc4, 0x00, 0x10, 0x00, 0x00}, 7, 0, RW, &x);
    CHECK(det.imm == 4096 && det.imm_size == 32 && x.delta == -4096, "add $0x1000: imm %d, %u bits", det.imm,
          det.imm_size);
    dec((const uint8_t[]){0x48, 0x8b, 0x44, 0x24, 0x08}, 5, 0, RW, &x);
    CHECK(det.sdisp == 8 && det.ssize == 8 && det.disp_size == 1 && det.imm == 0,
          "mov 0x8(%%rsp): sdisp %d size %u disp %u", det.sdisp, det.ssize, det.disp_size);
    dec((const uint8_t[]){0x48, 0x8b, 0x45, 0xf8}, 4, 0, RW, &x);
    CHECK(det.bdisp == -8 && det.sdisp == 0, "mov -0x8(%%rbp): bdisp %d", det.bdisp);
}

static void test_branches(void)
{
    icpp_x86_insn x;
    for (int r = 0; r < 2; r++) {
        unsigned rules = r ? RW : CG;
        dec((const uint8_t[]){0xe8, 0x10, 0x00, 0x00, 0x00}, 5, 0x1000, rules, &x);
        CHECK(x.kind == K(CALL) && (x.flags & ICPP_X86_F_DIRECT) && x.target == 0x1015, "call rel32: target %#lx",
              (unsigned long)x.target);
        dec((const uint8_t[]){0xff, 0x15, 0x10, 0x00, 0x00, 0x00}, 6, 0x1000, rules, &x);
        CHECK(x.kind == K(CALL) && !(x.flags & ICPP_X86_F_DIRECT) && x.target == 0x1016,
              "call *0x10(%%rip): the slot %#lx", (unsigned long)x.target);
        dec((const uint8_t[]){0xff, 0xd0}, 2, 0x1000, rules, &x);
        CHECK(x.kind == K(CALL) && !(x.flags & ICPP_X86_F_DIRECT) && x.target == 0, "call *%%rax");
        dec((const uint8_t[]){0xe9, 0x00, 0x01, 0x00, 0x00}, 5, 0x1000, rules, &x);
        CHECK(x.kind == K(JMP) && (x.flags & ICPP_X86_F_DIRECT) && x.target == 0x1105, "jmp rel32");
        dec((const uint8_t[]){0xff, 0x25, 0x00, 0x02, 0x00, 0x00}, 6, 0x1000, rules, &x);
        CHECK(x.kind == K(JMP_IND) && x.target == 0x1206, "jmp *0x200(%%rip): the slot");
        dec((const uint8_t[]){0x75, 0x02}, 2, 0x1000, rules, &x);
        CHECK(x.kind == K(JCC) && (x.flags & ICPP_X86_F_DIRECT) && x.target == 0x1004, "jne rel8");
        dec((const uint8_t[]){0xff, 0x54, 0x24, 0x08}, 4, 0x1000, rules, &x);
        CHECK(x.kind == K(CALL) && (x.flags & REFS) == (rules == RW ? ICPP_X86_F_RSP_MEM : 0),
              "call *0x8(%%rsp): reads the stack (flags %#x)", x.flags);
    }
}

/* Run bytes b through the model from regs s under rules; the regs after. */
static icpp_x86_regs run(const uint8_t *b, size_t n, unsigned rules, icpp_x86_regs s)
{
    for (size_t o = 0; o < n;) {
        icpp_x86_insn x;
        if (!dec(b + o, n - o, o, rules, &x)) {
            CHECK(0, "undecodable at %zu", o);
            break;
        }
        s = icpp_x86_effect(&x, s);
        o += x.len;
    }
    return s;
}

static void test_effects(void)
{
    const icpp_x86_regs entry = {-8, 0, 1, 0};     /* offsets from the CFA: rsp = CFA - 8, rbp the caller's */
    /* push %rbp; mov %rsp,%rbp; sub $0x20,%rsp */
    static const uint8_t pro[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20};
    icpp_x86_regs s = run(pro, sizeof pro, CG, entry);
    CHECK(s.rsp_known && s.rsp == -48 && s.rbp_known && s.rbp == -16, "prologue: rsp %ld rbp %ld",
          (long)s.rsp, (long)s.rbp);
    icpp_x86_regs t = run(pro, sizeof pro, RW, entry);
    CHECK(memcmp(&s, &t, sizeof s) == 0, "prologue: the same under both rule sets");
    /* ... leave */
    icpp_x86_regs l = run((const uint8_t[]){0xc9}, 1, CG, s);
    CHECK(l.rsp_known && l.rsp == -8 && !l.rbp_known, "leave: rsp %ld, rbp the caller's", (long)l.rsp);
    /* ... lea -0x8(%rbp),%rsp (past a saved %rbx); pop %rbx; pop %rbp */
    l = run((const uint8_t[]){0x48, 0x8d, 0x65, 0xf8, 0x5b, 0x5d}, 6, CG, s);
    CHECK(l.rsp_known && l.rsp == -8 && !l.rbp_known, "lea -8(%%rbp),%%rsp; pop %%rbx; pop %%rbp: rsp %ld",
          (long)l.rsp);
    /* ... mov %rbp,%rsp; pop %rbp */
    l = run((const uint8_t[]){0x48, 0x89, 0xec, 0x5d}, 4, RW, s);
    CHECK(l.rsp_known && l.rsp == -8 && !l.rbp_known, "mov %%rbp,%%rsp; pop %%rbp: rsp %ld", (long)l.rsp);
    /* without a frame pointer: push %rbx; sub $0x10; add $0x10; pop %rbx */
    l = run((const uint8_t[]){0x53, 0x48, 0x83, 0xec, 0x10, 0x48, 0x83, 0xc4, 0x10, 0x5b}, 10, RW, entry);
    CHECK(l.rsp_known && l.rsp == -8, "push; sub; add; pop: rsp %ld", (long)l.rsp);
    /* lea -0x18(%rsp),%rsp is an adjustment to the call graph, an unknown write to the rewriter */
    static const uint8_t lea[] = {0x48, 0x8d, 0x64, 0x24, 0xe8};
    l = run(lea, sizeof lea, CG, entry);
    CHECK(l.rsp_known && l.rsp == -32, "lea -0x18(%%rsp),%%rsp (call graph): rsp %ld", (long)l.rsp);
    l = run(lea, sizeof lea, RW, entry);
    CHECK(!l.rsp_known, "lea -0x18(%%rsp),%%rsp (rewrite): rsp unknown");
    /* realignment loses rsp, and what derives from it */
    l = run((const uint8_t[]){0x48, 0x83, 0xe4, 0xf0, 0x48, 0x89, 0xe5, 0x55}, 8, CG, entry);
    CHECK(!l.rsp_known && !l.rbp_known, "and $-16,%%rsp; mov %%rsp,%%rbp; push: both unknown");
    /* rsp from an unknown rbp is unknown; leave too */
    l = run((const uint8_t[]){0x48, 0x89, 0xec}, 3, CG, entry);
    CHECK(!l.rsp_known, "mov %%rbp,%%rsp with rbp the caller's: rsp unknown");
    l = run((const uint8_t[]){0xc9}, 1, CG, entry);
    CHECK(!l.rsp_known && !l.rbp_known, "leave without a frame pointer: both unknown");
    /* a write to rbp forgets it; enter forgets rsp and (as the call graph always did) keeps rbp */
    l = run((const uint8_t[]){0x48, 0x89, 0xc5}, 3, CG, s);
    CHECK(l.rsp_known && l.rsp == -48 && !l.rbp_known, "mov %%rax,%%rbp: rbp unknown");
    l = run((const uint8_t[]){0xc8, 0x10, 0x00, 0x00}, 4, CG, s);
    CHECK(!l.rsp_known && l.rbp_known && l.rbp == -16, "enter: rsp unknown, rbp kept");
    /* branches, calls and other instructions change nothing */
    l = run((const uint8_t[]){0xe8, 0, 0, 0, 0, 0x48, 0x89, 0xc0, 0xff, 0xe0, 0xc3}, 11, CG, s);
    CHECK(memcmp(&l, &s, sizeof s) == 0, "call; mov %%rax,%%rax; jmp *%%rax; ret: nothing changes");
}

static void test_find(void)
{
    icpp_x86_insn v[4] = {{.addr = 0x10}, {.addr = 0x11}, {.addr = 0x15}, {.addr = 0x20}};
    CHECK(icpp_x86_find(v, 4, 0x10) == 0 && icpp_x86_find(v, 4, 0x15) == 2 && icpp_x86_find(v, 4, 0x20) == 3,
          "find: every start");
    CHECK(icpp_x86_find(v, 4, 0x12) == SIZE_MAX && icpp_x86_find(v, 4, 0x8) == SIZE_MAX &&
              icpp_x86_find(v, 4, 0x21) == SIZE_MAX && icpp_x86_find(v, 0, 0x10) == SIZE_MAX,
          "find: no instruction starts there");
    CHECK(icpp_x86_decoder() == icpp_x86_decoder(), "one decoder");
}

int main(void)
{
    test_classes();
    test_branches();
    test_effects();
    test_find();
    return check_done("x86stack");
}
