/* limits.c -- a program that lowers its own RLIMIT_NOFILE or RLIMIT_FSIZE, then runs a thread and a
 * fork child: under icpp-train it must run as without (no descriptor of the agent's it could see,
 * no SIGXFSZ, its limits as it set them, same output and exit status), and what the agent could not
 * save must be said precisely (docs/train.md, "Limits").
 *
 * usage: limits nofile|nofile-soft|fsize
 *   nofile       RLIMIT_NOFILE 3 (soft and hard, as `ulimit -n 3`): with 0, 1, 2 open no file can
 *                be opened, so the thread's and the child's parts cannot be written
 *   nofile-soft  soft limit 3, hard unchanged: the agent may raise it for its writes: nothing lost
 *   fsize        RLIMIT_FSIZE 4096 bytes (soft and hard, as `ulimit -f 8`)
 *
 * LIMIT-PATHS:
 *   main;main_work
 *   thread_main;thread_work
 *   main;child_work
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long sink;

__attribute__((noipa)) static void main_work(int n)
{
    for (int i = 0; i < n; i++)
        sink += i;
}

__attribute__((noipa)) static void thread_work(int n)
{
    for (int i = 0; i < n; i++)
        sink ^= i;
}

__attribute__((noipa)) static void child_work(int n)
{
    for (int i = 0; i < n; i++)
        sink -= i;
}

static void *thread_main(void *arg)
{
    thread_work(1000);
    return arg;
}

/* What the program can see of its limits and descriptors. */
static void look(const char *when)
{
    struct rlimit nf, fs;
    getrlimit(RLIMIT_NOFILE, &nf);
    getrlimit(RLIMIT_FSIZE, &fs);
    int fd = dup(2);
    printf("%s: nofile %lld/%lld fsize %lld/%lld dup %s\n", when, (long long)nf.rlim_cur, (long long)nf.rlim_max,
           (long long)fs.rlim_cur, (long long)fs.rlim_max, fd < 0 ? strerror(errno) : "ok");
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "nofile";
    struct rlimit rl;
    int lim = !strcmp(mode, "fsize") ? RLIMIT_FSIZE : RLIMIT_NOFILE;
    getrlimit(lim, &rl);
    rl.rlim_cur = lim == RLIMIT_FSIZE ? 4096 : 3;
    if (strcmp(mode, "nofile-soft"))
        rl.rlim_max = rl.rlim_cur;
    if (setrlimit(lim, &rl) < 0) {
        perror("setrlimit");
        return 2;
    }
    /* stdout is a pipe or a file: keep it unbuffered so the child does not repeat it */
    setvbuf(stdout, NULL, _IONBF, 0);
    look("start");
    main_work(1000);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0)
        return 3;
    pthread_join(t, NULL);
    pid_t c = fork();
    if (c == 0) {
        child_work(1000);
        look("child");
        exit(7);
    }
    int st = 0;
    waitpid(c, &st, 0);
    look("end");
    printf("child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return 5;
}
