/* test_cli.c -- lib/cli: --version's line, option numbers, die, and the progress line only on a terminal, only without -q. */
#include "check.h"
#include "cli.h"
#include "config.h"

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pty.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Everything readable on fd now (non-blocking), into buf (NUL-terminated). */
static size_t drain(int fd, char *buf, size_t sz)
{
    size_t n = 0;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        ssize_t r = read(fd, buf + n, sz - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    return n;
}

/* One progress session on stderr = fd: init, a line forced due, end. */
static void session(int quiet, const char *what)
{
    icpp_cli_progress p;
    icpp_cli_progress_init(&p, "icpp-test", quiet);
    CHECK(!icpp_cli_progress_due(&p), "%s: nothing is due before a second has passed", what);
    p.next = 0;     /* as if a second had passed */
    if (icpp_cli_progress_due(&p))
        icpp_cli_progress_show(&p, "%d things", 42);
    CHECK(!icpp_cli_progress_due(&p), "%s: due at most once a second", what);
    icpp_cli_progress_end(&p);
    fflush(stderr);
}

/* Option numbers: the whole string is the number, in range; the rest refused. */
static void numbers(void)
{
    uint64_t u = 7;
    static const char *const bad_u[] = {"", " ", "abc", "12x", "-1", "-0", " -5", "1-", "18446744073709551616", "0x10"};
    for (size_t i = 0; i < sizeof bad_u / sizeof *bad_u; i++)
        CHECK(icpp_cli_u64(bad_u[i], 10, 0, UINT64_MAX, &u) < 0 && u == 7, "u64 '%s' refused, *out untouched",
              bad_u[i]);
    CHECK(icpp_cli_u64("18446744073709551615", 10, 0, UINT64_MAX, &u) == 0 && u == UINT64_MAX, "u64 max");
    CHECK(icpp_cli_u64(" +42", 10, 42, 42, &u) == 0 && u == 42, "u64 leading blank and '+' (strtoull's)");
    CHECK(icpp_cli_u64("0x10", 0, 0, 100, &u) == 0 && u == 16, "u64 base 0 takes 0x");
    CHECK(icpp_cli_u64("0", 10, 1, 10, &u) < 0 && icpp_cli_u64("11", 10, 1, 10, &u) < 0, "u64 range");
    long l = 7;
    CHECK(icpp_cli_long("-0", 0, 5, &l) == 0 && l == 0, "long -0 (strtol's)");
    CHECK(icpp_cli_long("-1", 0, 5, &l) < 0 && icpp_cli_long("6", 0, 5, &l) < 0 && icpp_cli_long("", 0, 5, &l) < 0 &&
              icpp_cli_long("99999999999999999999", 0, LONG_MAX, &l) < 0 && l == 0,
          "long range, empty, overflow");
    double d = 7;
    CHECK(icpp_cli_double("", &d) < 0 && icpp_cli_double("1.5x", &d) < 0 && icpp_cli_double(" ", &d) < 0 && d == 7,
          "double: not numbers");
    CHECK(icpp_cli_double("1.5", &d) == 0 && d == 1.5, "double 1.5");
    CHECK(icpp_cli_double("1e999", &d) == 1 && isinf(d), "double overflow: 1 (ERANGE), +inf");
    CHECK(icpp_cli_double("nan", &d) == 0 && isnan(d), "double nan parses");
    CHECK(icpp_cli_opt_u64("icpp-test", "-F", "99", 1, 100) == 99, "opt_u64");
    CHECK(icpp_cli_opt_fraction("icpp-test", "--jitter", "0.5", 0, 1) == 0.5, "opt_fraction");
}

/* stderr and exit status of fn() run in a child. */
static int child_stderr(void (*fn)(void), char *out, size_t sz)
{
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 2);
        fn();
        _exit(99);
    }
    close(pfd[1]);
    int st = 0;
    waitpid(pid, &st, 0);
    drain(pfd[0], out, sz);
    close(pfd[0]);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
static void die_3(void) { icpp_cli_die("icpp-test", 3, "%s: %d", "gone", 42); }
static void bad_u64(void) { icpp_cli_opt_u64("icpp-test", "-c", "-1", 1, 1000); }
static void bad_fraction(void) { icpp_cli_opt_fraction("icpp-test", "--jitter", "1e-320", 0, 1); }

int main(void)
{
    numbers();
    char msg[512];
    CHECK(child_stderr(die_3, msg, sizeof msg) == 3 && !strcmp(msg, "icpp-test: gone: 42\n"), "die: '%s'", msg);
    CHECK(child_stderr(bad_u64, msg, sizeof msg) == 2 &&
              !strcmp(msg, "icpp-test: -c wants a number from 1 to 1000, not '-1'\n"), "opt_u64: '%s'", msg);
    CHECK(child_stderr(bad_fraction, msg, sizeof msg) == 2 &&
              !strcmp(msg, "icpp-test: --jitter wants a number above 0 and below 1, not '1e-320'\n"),
          "opt_fraction refuses ERANGE: '%s'", msg);

    /* --version */
    char vb[64];
    FILE *m = fmemopen(vb, sizeof vb, "w");
    icpp_cli_version(m, "icpp-test");
    fclose(m);
    CHECK(!strcmp(vb, "icpp-test " ICPP_VERSION "\n"), "version line '%s'", vb);
    CHECK(strlen(ICPP_VERSION) >= 5 && strchr(ICPP_VERSION, '.'), "ICPP_VERSION '%s'", ICPP_VERSION);

    int saved = dup(2);
    char out[4096];

    /* stderr a pipe: silent */
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    dup2(pfd[1], 2);
    session(0, "pipe");
    dup2(saved, 2);
    close(pfd[1]);
    CHECK(drain(pfd[0], out, sizeof out) == 0, "not a terminal: nothing written, got '%s'", out);
    close(pfd[0]);

    /* stderr a terminal: the line, then cleared */
    int master, slave;
    if (openpty(&master, &slave, NULL, NULL, NULL) < 0) {
        fprintf(stderr, "test_cli: no pseudo-terminal: the terminal cases are skipped\n");
        return check_done("cli");
    }
    struct termios t;           /* raw: the bytes as written (no \n -> \r\n) */
    tcgetattr(slave, &t);
    cfmakeraw(&t);
    tcsetattr(slave, TCSANOW, &t);
    dup2(slave, 2);
    session(0, "terminal");
    dup2(saved, 2);
    drain(master, out, sizeof out);
    CHECK(!strcmp(out, "\ricpp-test: 0s, 42 things\033[K\r\033[K"), "terminal: '%s'", out);

    /* a terminal and -q: silent */
    dup2(slave, 2);
    session(1, "terminal, quiet");
    dup2(saved, 2);
    CHECK(drain(master, out, sizeof out) == 0, "terminal with -q: nothing written, got '%s'", out);

    /* NULL progress (a caller without one) is a no-op */
    CHECK(!icpp_cli_progress_due(NULL), "NULL: never due");
    close(slave);
    close(master);
    return check_done("cli");
}
