/* dl_prog.c -- dlopens dl_mod.so while a second thread runs, then calls into it. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static volatile int stop;
__attribute__((noipa)) static long spin_leaf(long x) { return x + 1; }
static void *spinner(void *p)
{
    long x = 0;
    while (!stop)
        x = spin_leaf(x);
    return p;
}

__attribute__((noipa)) static int dl_driver(const char *path)
{
    void *h = dlopen(path, RTLD_NOW);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return -1;
    }
    int (*entry)(int) = (int (*)(int))dlsym(h, "mod_entry");
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += entry(10);
    return s;
}

int main(int argc, char **argv)
{
    pthread_t th;
    pthread_create(&th, NULL, spinner, NULL);
    int r = dl_driver(argc > 1 ? argv[1] : "./dl_mod.so");
    stop = 1;
    pthread_join(th, NULL);
    printf("dl %d\n", r);
    return 0;
}
