/* test_cli.c -- lib/cli: --version's line, and the progress line only on a terminal, only without -q. */
#include "check.h"
#include "cli.h"
#include "config.h"

#include <fcntl.h>
#include <pty.h>
#include <string.h>
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

int main(void)
{
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
