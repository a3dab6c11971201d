/* procmaps.c -- a process's mappings and thread bases, from /proc or from mmap records. */
#include "procmaps.h"

#include "fsafe.h"
#include "vec.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void icpp_maps_init(icpp_maps *mm)
{
    memset(mm, 0, sizeof *mm);
}

static void clear(icpp_maps *mm)
{
    for (size_t i = 0; i < mm->n; i++)
        free(mm->v[i].path);
    mm->n = 0;
}

void icpp_maps_free(icpp_maps *mm)
{
    clear(mm);
    free(mm->v);
    icpp_maps_init(mm);
}

static int reserve(icpp_maps *mm, size_t extra, icpp_err *err)
{
    if (icpp_vec_reserve((void **)&mm->v, &mm->cap, mm->n + extra, sizeof *mm->v, 64) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory for mappings");
    return 0;
}

/* Index of the first mapping whose end > addr. */
static size_t first_ending_after(const icpp_maps *mm, uint64_t addr)
{
    size_t lo = 0, hi = mm->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (mm->v[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int icpp_maps_insert(icpp_maps *mm, const icpp_mapping *m, icpp_err *err)
{
    if (m->end <= m->start)
        return icpp_err_set(err, ICPP_EFORMAT, "empty or inverted mapping 0x%" PRIx64 "-0x%" PRIx64,
                            m->start, m->end);
    if (reserve(mm, 2, err) < 0)
        return -ENOMEM;
    char *path = m->path ? strdup(m->path) : NULL;
    if (m->path && !path)
        return icpp_err_set(err, ENOMEM, "out of memory for mappings");
    size_t i = first_ending_after(mm, m->start);
    /* Split a mapping that straddles m->start. */
    if (i < mm->n && mm->v[i].start < m->start) {
        icpp_mapping *o = &mm->v[i];
        if (o->end > m->end) {      /* m lies strictly inside o: three pieces */
            icpp_mapping tail = *o;
            tail.pgoff += m->end - o->start;
            tail.start = m->end;
            tail.path = o->path ? strdup(o->path) : NULL;
            memmove(&mm->v[i + 2], &mm->v[i + 1], (mm->n - i - 1) * sizeof *mm->v);
            mm->v[i + 1] = tail;
            mm->n++;
        }
        o->end = m->start;
        i++;
    }
    /* Drop or trim mappings covered by m. */
    size_t j = i;
    while (j < mm->n && mm->v[j].start < m->end) {
        if (mm->v[j].end <= m->end) {
            free(mm->v[j].path);
            j++;
        } else {
            mm->v[j].pgoff += m->end - mm->v[j].start;
            mm->v[j].start = m->end;
            break;
        }
    }
    memmove(&mm->v[i + 1], &mm->v[j], (mm->n - j) * sizeof *mm->v);
    mm->n = mm->n - (j - i) + 1;
    mm->v[i] = *m;
    mm->v[i].path = path;
    assert((!i || mm->v[i - 1].end <= mm->v[i].start) &&
           (i + 1 == mm->n || mm->v[i].end <= mm->v[i + 1].start));   /* procmaps.h: sorted, non-overlapping */
    return 0;
}

const icpp_mapping *icpp_maps_find(const icpp_maps *mm, uint64_t addr)
{
    size_t i = first_ending_after(mm, addr);
    return (i < mm->n && mm->v[i].start <= addr) ? &mm->v[i] : NULL;
}

uint64_t icpp_maps_stack_top(const icpp_maps *mm, uint64_t sp)
{
    const icpp_mapping *m = icpp_maps_find(mm, sp);
    return m ? m->end : 0;
}

static int parse_line(const char *s, const char *e, icpp_mapping *out)
{
    char buf[4096 + 256];
    size_t len = (size_t)(e - s);
    if (len >= sizeof buf)
        len = sizeof buf - 1;
    memcpy(buf, s, len);
    buf[len] = 0;
    unsigned long long start, end, off, inode;
    char perms[8] = "";     /* "%7s" may fill fewer than the 3 bytes read below */
    int pathpos = -1;
    if (sscanf(buf, "%llx-%llx %7s %llx %*x:%*x %llu %n", &start, &end, perms, &off, &inode,
               &pathpos) < 5)
        return -1;
    out->start = start;
    out->end = end;
    out->pgoff = off;
    out->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                (perms[2] == 'x' ? PROT_EXEC : 0);
    out->path = NULL;
    if (pathpos > 0 && buf[pathpos])
        out->path = strdup(buf + pathpos);
    return 0;
}

int icpp_maps_parse(icpp_maps *mm, const char *text, size_t len, icpp_err *err)
{
    clear(mm);
    const char *p = text, *end = text + len;
    size_t lineno = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        if (le > p) {
            icpp_mapping m;
            if (parse_line(p, le, &m) < 0)
                return icpp_err_set(err, ICPP_EFORMAT, "maps line %zu: cannot parse", lineno);
            int r = icpp_maps_insert(mm, &m, err);
            free(m.path);
            if (r < 0)
                return icpp_err_prefix(err, "maps line %zu", lineno);
        }
        p = le + 1;
    }
    return 0;
}

/* Read a whole /proc file (their st_size is 0, so read until EOF). */
static char *slurp(const char *path, size_t *len, icpp_err *err)
{
    int fd = icpp_fs_open_input(path, NULL, err);
    if (fd < 0)
        return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            close(fd);
            icpp_err_set(err, ENOMEM, "%s: out of memory", path);
            return NULL;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (icpp_vec_reserve((void **)&buf, &cap, n + 1, 1, 0) < 0) {
            free(buf);
            buf = NULL;
        }
    }
    close(fd);
    *len = n;
    return buf;
}

int icpp_maps_read(icpp_maps *mm, pid_t pid, icpp_err *err)
{
    char path[64];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/maps");
    size_t len;
    char *t = slurp(path, &len, err);
    if (!t)
        return -(err ? err->code : ENOENT);
    int r = icpp_maps_parse(mm, t, len, err);
    free(t);
    if (r < 0)
        icpp_err_prefix(err, "%s", path);
    return r;
}

int icpp_proc_parse_startstack(const char *text, size_t len, uint64_t *out, icpp_err *err)
{
    /* comm (field 2) may hold spaces and parentheses: fields resume after the last ')'. */
    const char *p = NULL;
    for (size_t i = len; i > 0; i--)
        if (text[i - 1] == ')') {
            p = text + i;
            break;
        }
    if (!p)
        return icpp_err_set(err, ICPP_EFORMAT, "stat: no ')' after the command name");
    const char *end = text + len;
    int field = 2;              /* we are just past field 2 */
    while (p < end && field < 28) {
        while (p < end && *p == ' ')
            p++;
        if (p >= end)
            break;
        field++;
        if (field == 28) {
            uint64_t v = 0;
            int digits = 0;
            for (; p < end && *p >= '0' && *p <= '9'; p++, digits++)
                v = v * 10 + (uint64_t)(*p - '0');
            if (!digits)
                break;
            *out = v;
            return 0;
        }
        while (p < end && *p != ' ')
            p++;
    }
    return icpp_err_set(err, ICPP_EFORMAT, "stat: field 28 (startstack) missing");
}

int icpp_proc_startstack(pid_t pid, uint64_t *out, icpp_err *err)
{
    char path[64];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    size_t len;
    char *t = slurp(path, &len, err);
    if (!t)
        return -(err ? err->code : ENOENT);
    int r = icpp_proc_parse_startstack(t, len, out, err);
    free(t);
    if (r < 0)
        return icpp_err_prefix(err, "%s", path);
    if (*out == 0)
        return icpp_err_set(err, EPERM,
                            "%s: startstack reads 0 (process exiting, or no permission to see it)", path);
    return 0;
}
