/* dl_mod.c -- a module dlopen'd by dl_prog.c after threads exist (patched live by the test driver). */
__attribute__((noipa)) int mod_leaf(int x) { return x * 2 + 1; }
/* A loop back into byte 2 after dead padding: a short jmp, patched live. */
int mod_loop(int n);
__asm__(".text\n.p2align 4\n"
        ".type mod_pad,@function\nmod_pad:\n  mov $1,%eax\n  ret\n.size mod_pad,.-mod_pad\n"
        "  .fill 10,1,0x90\n"
        ".globl mod_loop\n.type mod_loop,@function\nmod_loop:\n"
        "  xor %eax,%eax\n1: add $1,%eax\n  cmp %edi,%eax\n  jl 1b\n  ret\n"
        ".size mod_loop,.-mod_loop\n");

__attribute__((noipa)) int mod_entry(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += mod_leaf(i);
    return s + mod_loop(1) - 1;
}
