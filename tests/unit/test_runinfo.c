/* test_runinfo.c -- lib/runinfo.c: NAME=VALUE, the default bytes= feature, features and event costs read back from a written sample file. */
#include "check.h"
#include "runinfo.h"
#include "samples.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void parse(void)
{
    icpp_feature f;
    icpp_err err;
    CHECK(icpp_feature_parse("n=1000", &f, &err) == 0 && !strcmp(f.name, "n") && f.value == 1000, "n=1000");
    CHECK(icpp_feature_parse("in.bytes-2=1.5e6", &f, &err) == 0 && f.value == 1.5e6, "dots, dashes, exponent");
    CHECK(icpp_feature_parse("_x=-3", &f, &err) == 0 && f.value == -3, "negative values parse (a trend refuses them)");
    const char *bad[] = {"n", "=3", "1n=3", "n m=3", "n=", "n=3x", "n=inf", "n=nan", "n=1e999", "n=3 "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(icpp_feature_parse(bad[i], &f, &err) < 0 && strstr(err.msg, bad[i][0] == '=' ? "NAME" : "feature"),
              "'%s' refused: %s", bad[i], err.msg);
    char longname[100];
    memset(longname, 'a', 70);
    strcpy(longname + 70, "=1");
    CHECK(icpp_feature_parse(longname, &f, &err) < 0, "a name longer than %d bytes", ICPP_FEATURE_NAME_MAX - 1);
}

static void default_bytes(const char *dir)
{
    char a[4096], b[4096];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    FILE *f = fopen(a, "w");
    fputs("12345", f);
    fclose(f);
    f = fopen(b, "w");
    fputs("1234567", f);
    fclose(f);
    double bytes = 0;
    const char *what = NULL;
    char *one[] = {"prog", "-x", a, (char *)dir, NULL};
    CHECK(icpp_feature_default_bytes(4, one, &bytes, &what) == 1 && bytes == 5 && what == one[2],
          "one file argument (a directory and an option are not files): %g", bytes);
    char *two[] = {"prog", a, b, NULL};
    CHECK(icpp_feature_default_bytes(3, two, &bytes, &what) == 0, "two files: not obvious");
    /* no file argument: standard input, from its offset */
    int saved = dup(0), fd = open(b, O_RDONLY);
    dup2(fd, 0);
    lseek(0, 2, SEEK_SET);
    char *none[] = {"prog", "10", NULL};
    CHECK(icpp_feature_default_bytes(2, none, &bytes, &what) == 1 && bytes == 5 && !strcmp(what, "<stdin>"),
          "stdin a regular file: %g", bytes);
    dup2(saved, 0);
    close(fd);
    close(saved);
}

static void header(const char *dir)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/s", dir);
    icpp_err err;
    icpp_swriter *w = icpp_swriter_open(p, &err);
    CHECK(w != NULL, "writer: %s", err.msg);
    if (!w)
        return;
    icpp_swriter_info(w, "command", "prog 1000");
    icpp_swriter_info(w, ICPP_FEATURE_KEY, "n=1000");
    icpp_swriter_info(w, ICPP_FEATURE_KEY, "bytes=65536");
    icpp_swriter_event(w, 0, "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 4000, 1, 0, 0, 0);
    icpp_swriter_event(w, 1, "cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 16000, 1, 0, 1, 0);
    icpp_swriter_event(w, 2, "cycles", PERF_TYPE_HARDWARE, 0, 1000003, 0, 1, 0, 0);
    icpp_swriter_sample(w, 1, 1, 0, 1, 0x1000, 0x7ff0, 0, NULL);
    icpp_swriter_info(w, ICPP_FEATURE_KEY, "late=1");      /* after the first sample: not read */
    CHECK(icpp_swriter_close(w, 1, 0, &err) == 0, "close");
    icpp_runinfo ri;
    CHECK(icpp_runinfo_read(p, &ri, &err) == 0, "read: %s", err.msg);
    CHECK(ri.nfeat == 2 && icpp_runinfo_feature(&ri, "n")->value == 1000 &&
              icpp_runinfo_feature(&ri, "bytes")->value == 65536 && !icpp_runinfo_feature(&ri, "late"),
          "features: %zu", ri.nfeat);
    CHECK(!strcmp(ri.command, "prog 1000") && ri.nevents == 3, "command, events %u", ri.nevents);
    const char *unit;
    CHECK(icpp_run_event_cost(&ri.ev[0], &unit) == 250000 && !strcmp(unit, "ns"), "4000 Hz cpu-clock: 250 us a sample");
    CHECK(icpp_run_event_cost(&ri.ev[2], &unit) == 1000003 && !strcmp(unit, "events"), "fixed period");
    icpp_run_event hz = {.type = PERF_TYPE_HARDWARE, .period = 1000, .freq = 1};
    CHECK(icpp_run_event_cost(&hz, &unit) == 1 && !strcmp(unit, "samples"), "hardware by frequency: samples");

    /* a bad feature record makes the file bad, naming it */
    w = icpp_swriter_open(p, &err);
    icpp_swriter_info(w, ICPP_FEATURE_KEY, "n=ten");
    icpp_swriter_close(w, 0, 0, &err);
    CHECK(icpp_runinfo_read(p, &ri, &err) == -ICPP_EFORMAT && strstr(err.msg, p) && strstr(err.msg, "n=ten"),
          "bad record: %s", err.msg);
    w = icpp_swriter_open(p, &err);
    icpp_swriter_info(w, ICPP_FEATURE_KEY, "n=1");
    icpp_swriter_info(w, ICPP_FEATURE_KEY, "n=2");
    icpp_swriter_close(w, 0, 0, &err);
    CHECK(icpp_runinfo_read(p, &ri, &err) < 0 && strstr(err.msg, "twice"), "twice: %s", err.msg);
    CHECK(icpp_runinfo_read(dir, &ri, &err) < 0 && err.msg[0], "a directory: %s", err.msg);
}

int main(void)
{
    char dir[] = "/tmp/icpp-runinfo-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    parse();
    default_bytes(dir);
    header(dir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    return check_done("runinfo");
}
