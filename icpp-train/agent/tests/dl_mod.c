/* dl_mod.c -- a module dlopen'd by dl_prog.c after threads exist (patched live by the test driver). */
__attribute__((noipa)) int mod_leaf(int x) { return x * 2 + 1; }
__attribute__((noipa)) int mod_entry(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += mod_leaf(i);
    return s;
}
