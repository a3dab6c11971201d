/* gt_proc.c -- icpp-gt's model of the sampled processes: mappings and bases. */
#include "gt_proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static gt_proc **procs;
static size_t nprocs, capprocs;
static char **paths;            /* interned mapping paths */
static size_t npaths, cappaths;

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "icpp-gt: out of memory\n");
        exit(125);
    }
    return p;
}

static const char *intern(const char *s)
{
    if (!s || strcmp(s, "//anon") == 0)
        return "";
    for (size_t i = npaths; i-- > 0;)
        if (strcmp(paths[i], s) == 0)
            return paths[i];
    if (npaths == cappaths) {
        cappaths = cappaths ? 2 * cappaths : 64;
        paths = xrealloc(paths, cappaths * sizeof *paths);
    }
    return paths[npaths++] = strdup(s);
}

gt_proc *gt_proc_get(int pid)
{
    static gt_proc *last;
    if (last && last->pid == pid)
        return last;
    for (size_t i = 0; i < nprocs; i++)
        if (procs[i]->pid == pid)
            return last = procs[i];
    gt_proc *p = xrealloc(NULL, sizeof *p);
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->base_kind = "unknown";
    if (nprocs == capprocs) {
        capprocs = capprocs ? 2 * capprocs : 16;
        procs = xrealloc(procs, capprocs * sizeof *procs);
    }
    procs[nprocs++] = p;
    return last = p;
}

static void insert_at(gt_proc *p, size_t i, const gt_map *m)
{
    if (p->nmaps == p->capmaps) {
        p->capmaps = p->capmaps ? 2 * p->capmaps : 64;
        p->maps = xrealloc(p->maps, p->capmaps * sizeof *p->maps);
    }
    memmove(&p->maps[i + 1], &p->maps[i], (p->nmaps - i) * sizeof *p->maps);
    p->maps[i] = *m;
    p->nmaps++;
}

void gt_proc_map(gt_proc *p, uint64_t start, uint64_t end, uint64_t pgoff,
                 uint32_t prot, const char *path)
{
    if (end <= start)
        return;
    /* Cut every overlapping mapping down to its parts outside [start, end). */
    size_t i = 0;
    while (i < p->nmaps && p->maps[i].end <= start)
        i++;
    while (i < p->nmaps && p->maps[i].start < end) {
        gt_map old = p->maps[i];
        memmove(&p->maps[i], &p->maps[i + 1], (p->nmaps - i - 1) * sizeof *p->maps);
        p->nmaps--;
        if (old.start < start) {
            gt_map lo = old;
            lo.end = start;
            insert_at(p, i++, &lo);
        }
        if (old.end > end) {
            gt_map hi = old;
            hi.pgoff += end - old.start;
            hi.start = end;
            hi.resolved = false;    /* bias is per mapping start: recompute */
            insert_at(p, i, &hi);
            break;
        }
    }
    gt_map m = {.start = start, .end = end, .pgoff = pgoff, .prot = prot,
                .path = intern(path)};
    i = 0;
    while (i < p->nmaps && p->maps[i].start < start)
        i++;
    insert_at(p, i, &m);
}

int gt_proc_read_maps(gt_proc *p)
{
    char fn[64], line[4096 + 128];
    snprintf(fn, sizeof fn, "/proc/%d/maps", p->pid);
    FILE *f = fopen(fn, "re");
    if (!f)
        return -errno;
    p->nmaps = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off;
        char perm[8];
        int n = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perm, &off, &n) < 4)
            continue;
        char *path = line + n;
        path[strcspn(path, "\n")] = 0;
        uint32_t prot = (perm[0] == 'r' ? PROT_READ : 0) |
                        (perm[1] == 'w' ? PROT_WRITE : 0) |
                        (perm[2] == 'x' ? PROT_EXEC : 0);
        gt_proc_map(p, lo, hi, off, prot, *path ? path : NULL);
    }
    fclose(f);
    return 0;
}

int gt_proc_read_startstack(int pid, uint64_t *out)
{
    char fn[64], buf[4096];
    snprintf(fn, sizeof fn, "/proc/%d/stat", pid);
    FILE *f = fopen(fn, "re");
    if (!f)
        return errno == ENOENT ? -ESRCH : -errno;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* comm may contain spaces and ')': fields restart after the last ')'.
     * The space after it precedes field 3; startstack is field 28. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -EINVAL;
    p++;
    for (int field = 3; field < 28; field++) {
        p = strchr(p + 1, ' ');
        if (!p)
            return -EINVAL;
    }
    unsigned long long v = strtoull(p + 1, NULL, 10);
    if (v == 0)
        return -ESRCH;
    *out = v;
    return 0;
}

int gt_proc_resync(void)
{
    int n = 0;
    for (size_t i = 0; i < nprocs; i++)
        if (gt_proc_read_maps(procs[i]) == 0)
            n++;
    return n;
}

gt_proc *gt_proc_fork(gt_proc *parent, int child)
{
    gt_proc *c = gt_proc_get(child);
    c->nmaps = 0;
    for (size_t i = 0; i < parent->nmaps; i++)
        insert_at(c, c->nmaps, &parent->maps[i]);
    c->startstack = parent->startstack;
    c->base_kind = parent->startstack ? "fork" : "unknown";
    c->exec_pending = parent->exec_pending;
    return c;
}

void gt_proc_exec(gt_proc *p)
{
    p->nmaps = 0;
    p->startstack = 0;
    p->base_kind = "unknown";
    p->exec_pending = true;
}

const gt_map *gt_proc_map_at(const gt_proc *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nmaps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->maps[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->nmaps && p->maps[lo].start <= addr)
        return &p->maps[lo];
    return NULL;
}

gt_module *gt_proc_module_at(void *ctx, uint64_t addr, uint64_t *bias)
{
    gt_map *m = (gt_map *)gt_proc_map_at(ctx, addr);
    if (!m || !(m->prot & PROT_EXEC))
        return NULL;
    if (!m->resolved) {
        m->resolved = true;
        m->mod = NULL;
        if (strcmp(m->path, "[vdso]") == 0)
            m->mod = gt_module_vdso();
        else if (m->path[0] == '/')
            m->mod = gt_module_get(m->path);
        if (m->mod && m->mod->ok)
            m->bias_ok = gt_module_bias(m->mod, m->start, m->pgoff, true, &m->bias);
    }
    if (!m->mod || (m->mod->ok && !m->bias_ok))
        return NULL;
    *bias = m->bias;
    return m->mod;
}

void gt_proc_free_all(void)
{
    for (size_t i = 0; i < nprocs; i++) {
        free(procs[i]->maps);
        free(procs[i]);
    }
    free(procs);
    procs = NULL;
    nprocs = capprocs = 0;
    for (size_t i = 0; i < npaths; i++)
        free(paths[i]);
    free(paths);
    paths = NULL;
    npaths = cappaths = 0;
}
