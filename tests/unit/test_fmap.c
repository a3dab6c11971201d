/* test_fmap.c -- lib/fmap: a mapped file reads back byte for byte across releases; a caller's buffer is never released; non-regular files are refused. */
#include "check.h"
#include "fmap.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Resident bytes of m's mapping in this process (its Rss line in
 * /proc/self/smaps): the pages mapped in, not the page cache. */
static size_t resident(const icpp_fmap *m)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)m->p >= lo && (uintptr_t)m->p < hi;
        else if (in && !strncmp(line, "Rss:", 4))
            kib = strtoul(line + 4, NULL, 10);
    }
    if (f)
        fclose(f);
    return kib << 10;
}

static uint8_t byte_at(size_t i) { return (uint8_t)(i * 2654435761u >> 13); }

int main(void)
{
    char dir[] = "/tmp/icpp-fmap-XXXXXX", path[256], fifo[256], empty[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/f", dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(empty, sizeof empty, "%s/empty", dir);
    const size_t len = (size_t)24 << 20;    /* 6 release steps */
    uint8_t *b = malloc(len);
    for (size_t i = 0; i < len; i++)
        b[i] = byte_at(i);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, b, len) == (ssize_t)len && close(fd) == 0, "write %s", path);

    /* A pass reads every byte; what it passed is released (mincore says
     * which pages are mapped in: with MAP_PRIVATE, only ours). */
    icpp_fmap m;
    icpp_err err = {0};
    CHECK(icpp_fmap_open(&m, path, &err) == 0 && m.len == len, "open: %s", err.msg);
    size_t bad = 0, most = 0;
    for (size_t i = 0; i < m.len; i++) {
        bad += m.p[i] != byte_at(i);
        if (i % (1 << 20) == 0) {
            icpp_fmap_release(&m, i);
            size_t r = resident(&m);
            most = r > most ? r : most;
        }
    }
    CHECK(bad == 0, "%zu bytes differ", bad);
    CHECK(most > 0 && most <= ((size_t)12 << 20), "%zu KiB of the file mapped in at once: pages are not released",
          most >> 10);
    CHECK(m.released >= len - ((size_t)9 << 20), "released up to %zu of %zu", m.released, len);
    printf("fmap: %zu MiB read, at most %zu KiB of it mapped in at once\n", len >> 20, most >> 10);
    /* The same bytes on a second pass, released pages included. */
    icpp_fmap_rewind(&m);
    bad = 0;
    for (size_t i = 0; i < m.len; i += 4093)
        bad += m.p[i] != byte_at(i);
    CHECK(bad == 0 && m.released == 0, "second pass: %zu bytes differ", bad);
    icpp_fmap_close(&m);

    /* A caller's buffer: release must never drop it (MADV_DONTNEED would
     * zero anonymous memory). */
    icpp_fmap_mem(&m, b, len);
    icpp_fmap_release(&m, len);
    bad = 0;
    for (size_t i = 0; i < len; i += 4093)
        bad += b[i] != byte_at(i);
    CHECK(bad == 0 && m.released == 0, "the caller's buffer changed: %zu bytes", bad);
    icpp_fmap_close(&m);

    /* Not regular files: refused with the path, never waited on. */
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    CHECK(icpp_fmap_open(&m, fifo, &err) < 0 && strstr(err.msg, fifo) && strstr(err.msg, "regular"),
          "fifo: %s", err.msg);
    CHECK(icpp_fmap_open(&m, dir, &err) < 0 && strstr(err.msg, "regular"), "directory: %s", err.msg);
    snprintf(fifo + strlen(fifo), 8, ".none");
    CHECK(icpp_fmap_open(&m, fifo, &err) < 0 && strstr(err.msg, fifo), "missing: %s", err.msg);
    /* An empty file maps to zero bytes. */
    fd = open(empty, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    close(fd);
    CHECK(icpp_fmap_open(&m, empty, &err) == 0 && m.len == 0 && m.p, "empty: %s", err.msg);
    icpp_fmap_close(&m);

    unlink(path);
    unlink(empty);
    fifo[strlen(fifo) - 5] = 0;
    unlink(fifo);
    rmdir(dir);
    free(b);
    return check_done("fmap");
}
