/* recover.c -- icpp-train: a thread's path map from its live file, for a process that died before writing its part. */
#include "recover.h"

#include "codec.h"
#include "internal.h"      /* agent/: the node layout the live file holds */
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int icpp_recover_name(const char *name, const char *prefix, int *pid, int *tid, uint64_t *ns)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl))
        return -1;
    const char *p = name + pl;
    char *e;
    unsigned long long v[3];
    for (int i = 0; i < 3; i++) {
        if (*p < '0' || *p > '9')
            return -1;
        errno = 0;
        v[i] = strtoull(p, &e, 10);
        if (errno || (i < 2 && (*e != '.' || v[i] > INT32_MAX)))
            return -1;
        p = e + (i < 2);
    }
    if (*p && strcmp(p, ".icppmap"))
        return -1;
    *pid = (int)v[0];
    *tid = (int)v[1];
    *ns = v[2];
    return 0;
}

/* ---- the function table (syms.PID.NS) ---- */

typedef struct smod {
    int      present;
    uint8_t  kind;
    uint64_t bias, lo, hi;
    icpp_build_id bid;
    char    *path;
    uint32_t pm;            /* index in the path map */
} smod;

typedef struct sfunc {
    int      present;
    uint32_t module;
    uint64_t addr;
    char    *name;
    uint32_t pm;            /* UINT32_MAX until used */
} sfunc;

typedef struct syms {
    smod    *mods;
    uint32_t nmods;
    sfunc   *funcs;
    uint32_t nfuncs;
    char    *cmdline;
    uint32_t totals[4];
    int      have_totals;
} syms;

static void syms_free(syms *s)
{
    for (uint32_t i = 0; i < s->nmods; i++)
        free(s->mods[i].path);
    for (uint32_t i = 0; i < s->nfuncs; i++)
        free(s->funcs[i].name);
    free(s->mods);
    free(s->funcs);
    free(s->cmdline);
    memset(s, 0, sizeof *s);
}

static char *dup_bytes(const uint8_t *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = 0;
        for (size_t i = 0; i < n; i++)
            if (!s[i])
                s[i] = '?';
    }
    return s;
}

/* Grow *v (of *n items of size sz) to hold index i; new items zeroed. */
static int reserve(void **v, uint32_t *n, uint64_t i, size_t sz)
{
    if (i < *n)
        return 0;
    if (i >= (1u << 26))
        return -1;
    uint32_t nn = (uint32_t)i + 1;
    void *q = realloc(*v, (size_t)nn * sz);
    if (!q)
        return -1;
    memset((char *)q + (size_t)*n * sz, 0, (size_t)(nn - *n) * sz);
    *v = q;
    *n = nn;
    return 0;
}

static int syms_read(const char *path, syms *s, icpp_err *err)
{
    uint8_t *buf;
    size_t len;
    memset(s, 0, sizeof *s);
    if (icpp_read_file(path, (size_t)1 << 30, &buf, &len, err) < 0)
        return -1;
    if (len < 8 || memcmp(buf, ICPP_SYMS_MAGIC, 8)) {
        free(buf);
        return icpp_err_set(err, ICPP_EFORMAT, "%s: not a function table of this agent", path);
    }
    icpp_rbuf r;
    icpp_rbuf_init(&r, buf + 8, len - 8);
    while (icpp_rbuf_left(&r) >= 5) {
        uint32_t size = icpp_rbuf_u32le(&r);
        const uint8_t *type = icpp_rbuf_bytes(&r, 1);
        if (!type || size > icpp_rbuf_left(&r))
            break;                      /* cut short by the kill: the table ends here */
        icpp_rbuf b;
        icpp_rbuf_init(&b, icpp_rbuf_bytes(&r, size), size);
        if (*type == 'C') {
            free(s->cmdline);
            s->cmdline = dup_bytes(b.p, size);
        } else if (*type == 'T' && size == 16) {
            for (int i = 0; i < 4; i++)
                s->totals[i] = icpp_rbuf_u32le(&b);
            s->have_totals = 1;
        } else if (*type == 'M') {
            uint32_t idx = icpp_rbuf_u32le(&b);
            const uint8_t *kind = icpp_rbuf_bytes(&b, 1);
            uint64_t bias = icpp_rbuf_u64le(&b), lo = icpp_rbuf_u64le(&b), hi = icpp_rbuf_u64le(&b);
            const uint8_t *bl = icpp_rbuf_bytes(&b, 1);
            const uint8_t *bid = bl && *bl <= ICPP_BUILD_ID_MAX ? icpp_rbuf_bytes(&b, *bl) : NULL;
            if (b.bad || !bid || reserve((void **)&s->mods, &s->nmods, idx, sizeof *s->mods) < 0 ||
                s->mods[idx].present)
                goto corrupt;
            smod *m = &s->mods[idx];
            m->present = 1;
            m->kind = *kind;
            m->bias = bias;
            m->lo = lo;
            m->hi = hi;
            m->bid.len = *bl;
            memcpy(m->bid.bytes, bid, *bl);
            m->path = dup_bytes(b.p, icpp_rbuf_left(&b));
            if (!m->path)
                goto corrupt;
        } else if (*type == 'F') {
            uint32_t mod = icpp_rbuf_u32le(&b), first = icpp_rbuf_u32le(&b), n = icpp_rbuf_u32le(&b);
            if (b.bad || mod >= s->nmods || !s->mods[mod].present || (uint64_t)first + n > (1u << 26) ||
                (n && reserve((void **)&s->funcs, &s->nfuncs, (uint64_t)first + n - 1, sizeof *s->funcs) < 0))
                goto corrupt;
            for (uint32_t i = 0; i < n; i++) {
                uint64_t addr = icpp_rbuf_u64le(&b);
                const uint8_t *l = icpp_rbuf_bytes(&b, 2);
                const uint8_t *name = l ? icpp_rbuf_bytes(&b, (size_t)(l[0] | l[1] << 8)) : NULL;
                sfunc *f = &s->funcs[first + i];
                if (!name || f->present)
                    goto corrupt;
                f->present = 1;
                f->module = mod;
                f->addr = addr;
                f->pm = UINT32_MAX;
                f->name = dup_bytes(name, (size_t)(l[0] | l[1] << 8));
                if (!f->name)
                    goto corrupt;
            }
        }                               /* other types: added later, skipped */
    }
    free(buf);
    if (!s->nmods || !s->mods[0].present) {
        syms_free(s);
        return icpp_err_set(err, ICPP_EFORMAT, "%s: no module in the function table", path);
    }
    return 0;
corrupt:
    free(buf);
    syms_free(s);
    return icpp_err_set(err, ICPP_EFORMAT, "%s: corrupt function table (a bad record)", path);
}

/* ---- the live file ---- */

typedef struct live {
    const uint8_t          *p;
    size_t                  size;
    const icpp_live_header *h;
    uint32_t                nchunks;
} live;

/* The file bytes of an object of n bytes at agent address va, or NULL if
 * it is not wholly inside one committed chunk; *lost = 1 (and NULL) if it
 * is inside a chunk the file could not hold (ICPP_LIVE_ANON). */
static const void *at(const live *L, uint64_t va, size_t n, int *lost)
{
    *lost = 0;
    for (uint32_t i = 0; i < L->nchunks; i++) {
        const icpp_live_chunk *c = &L->h->chunk[i];
        if (va >= c->vaddr && va - c->vaddr <= c->len && c->len - (va - c->vaddr) >= n) {
            if (c->off == ICPP_LIVE_ANON) {
                *lost = 1;
                return NULL;
            }
            return L->p + c->off + (va - c->vaddr);
        }
    }
    return NULL;
}

/* The (key, count) pairs of a pair set: inline slots, then the blocks.
 * fn(arg, key, count) for each; -1 if a block pointer is bad. */
static int pairs_each(const live *L, const icpp_agent_pairset *ps, uint64_t *budget,
                      int (*fn)(void *, uint64_t, uint64_t), void *arg)
{
    for (int i = 0; i < ICPP_AGENT_INLINE_PAIRS; i++) {
        if (!ps->in[i].count)
            return 0;
        if (fn(arg, ps->in[i].key, ps->in[i].count) < 0)
            return -1;
    }
    for (uint64_t va = (uint64_t)(uintptr_t)ps->ext; va;) {
        icpp_agent_pairext b;
        int lost;
        const void *q = at(L, va, sizeof b, &lost);
        if (lost)
            return 0;                   /* the rest of the set was not in the file */
        if (!q || !*budget)
            return -1;
        (*budget)--;
        memcpy(&b, q, sizeof b);
        for (int i = 0; i < ICPP_AGENT_EXT_PAIRS && b.p[i].count; i++)
            if (fn(arg, b.p[i].key, b.p[i].count) < 0)
                return -1;
        va = (uint64_t)(uintptr_t)b.next;
    }
    return 0;
}

typedef struct nodectx {
    icpp_pathmap *pm;
    uint32_t      node;
    const syms   *s;
} nodectx;

static int add_height(void *arg, uint64_t key, uint64_t count)
{
    nodectx *c = arg;
    return icpp_pathmap_add_height(c->pm, c->node, (int64_t)key, count) < 0 ? -1 : 0;
}

static int add_site(void *arg, uint64_t ra, uint64_t count)
{
    nodectx *c = arg;
    for (uint32_t m = 0; m < c->s->nmods; m++) {
        const smod *sm = &c->s->mods[m];
        if (sm->present && ra >= sm->lo && ra < sm->hi)
            return icpp_pathmap_add_site(c->pm, c->node, sm->pm, ra - sm->bias, count) < 0 ? -1 : 0;
    }
    return 0;                           /* in a module not trained: no site, as in a part */
}

typedef struct item {
    uint64_t va;            /* the node */
    uint64_t parent_va;     /* what its parent field must say */
    uint32_t pm_parent;     /* map node of the parent */
} item;

typedef struct stack {
    item  *v;
    size_t n, cap;
} stack;

/* Push the children of the node at parent_va (map node pm_parent), the
 * list starting at first.  Returns NULL or why the file is corrupt. */
static const char *push_children(const live *L, stack *st, uint64_t first, uint64_t parent_va, uint32_t pm_parent,
                                 uint64_t *budget, uint64_t *lost_lists)
{
    for (uint64_t c = first; c;) {
        icpp_agent_node y;
        int lost;
        const void *r = at(L, c, sizeof y, &lost);
        if (lost) {
            (*lost_lists)++;            /* this child and its older siblings were not in the file */
            return NULL;
        }
        if (!r)
            return "a node pointer outside the committed chunks";
        if (!*budget)
            return "more nodes than the file holds (a cycle)";
        (*budget)--;
        if (icpp_vec_reserve((void **)&st->v, &st->cap, st->n + 1, sizeof *st->v, 1024) < 0)
            return "out of memory";
        memcpy(&y, r, sizeof y);
        st->v[st->n++] = (item){c, parent_va, pm_parent};
        c = (uint64_t)(uintptr_t)y.next_sibling;
    }
    return NULL;
}

/* Walk the tree from the root into pm.  Returns NULL or why the file is corrupt. */
static const char *walk(const live *L, syms *s, icpp_pathmap *pm, uint64_t *entries, uint64_t *skipped,
                        uint64_t *lost)
{
    uint64_t budget = 2 * (L->size / 64) + 2;   /* each node is counted twice (pushed, read) */
    stack st = {0};
    icpp_agent_node x;
    int rl;
    const void *q = at(L, L->h->root, sizeof x, &rl);
    if (!q && rl) {
        (*lost)++;                      /* not even the root fit in the file */
        return NULL;
    }
    if (!q)
        return "the root is outside the committed chunks";
    memcpy(&x, q, sizeof x);
    if (x.func != ICPP_AGENT_FUNC_ROOT)
        return "the root node is not a root";
    const char *why = push_children(L, &st, (uint64_t)(uintptr_t)x.first_child, L->h->root, 0, &budget, lost);
    while (!why && st.n) {
        item it = st.v[--st.n];
        memcpy(&x, at(L, it.va, sizeof x, &rl), sizeof x);   /* checked when pushed */
        if ((uint64_t)(uintptr_t)x.parent != it.parent_va) {
            why = "a node whose parent field disagrees with the tree";
            break;
        }
        if (x.func >= s->nfuncs || !s->funcs[x.func].present) {
            (*skipped)++;               /* not in the table: cannot be named */
            continue;
        }
        sfunc *f = &s->funcs[x.func];
        uint32_t node;
        if ((f->pm == UINT32_MAX && icpp_pathmap_add_func(pm, s->mods[f->module].pm, f->addr, f->name, &f->pm) < 0) ||
            icpp_pathmap_child(pm, it.pm_parent, f->pm, &node) < 0) {
            why = "out of memory";
            break;
        }
        icpp_pathmap_add_count(pm, node, x.count);
        *entries += x.count;
        nodectx ctx = {pm, node, s};
        if (pairs_each(L, &x.heights, &budget, add_height, &ctx) < 0 ||
            pairs_each(L, &x.sites, &budget, add_site, &ctx) < 0) {
            why = "a bad pair block";
            break;
        }
        why = push_children(L, &st, (uint64_t)(uintptr_t)x.first_child, it.va, node, &budget, lost);
    }
    free(st.v);
    return why;
}

static void meta_u(icpp_pathmap *pm, const char *k, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%" PRIu64, v);
    icpp_pathmap_set_meta(pm, k, b);
}

icpp_pathmap *icpp_recover_live(const char *dir, const char *name, int *empty, icpp_err *err)
{
    char path[4096 + 256];
    *empty = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        icpp_err_set(err, errno, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size < sizeof(icpp_live_header)) {
        close(fd);
        *empty = 1;
        return NULL;
    }
    live L = {0};
    L.size = (size_t)st.st_size;
    void *m = mmap(NULL, L.size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        icpp_err_set(err, errno, "%s: cannot map: %s", path, strerror(errno));
        return NULL;
    }
    L.p = m;
    L.h = m;
    icpp_pathmap *pm = NULL;
    syms s;
    memset(&s, 0, sizeof s);
    const icpp_live_header *h = L.h;
    if (memcmp(h->magic, ICPP_LIVE_MAGIC, 8)) {
        *empty = 1;                     /* killed before its header was complete */
        goto out;
    }
    if (h->version != ICPP_LIVE_VERSION || h->node_size != sizeof(icpp_agent_node) ||
        h->pairext_size != sizeof(icpp_agent_pairext)) {
        icpp_err_set(err, ICPP_EVERSION, "%s: written by another version of the agent (version %u): not recovered",
                     path, h->version);
        goto out;
    }
    if (h->header_size < sizeof *h + (uint64_t)h->max_chunks * sizeof(icpp_live_chunk) || h->header_size > L.size) {
        icpp_err_set(err, ICPP_EFORMAT, "%s: corrupt live file (header size %u)", path, h->header_size);
        goto out;
    }
    L.nchunks = h->nchunks < h->max_chunks ? h->nchunks : h->max_chunks;
    for (uint32_t i = 0; i < L.nchunks; i++) {
        const icpp_live_chunk *c = &h->chunk[i];
        if ((c->off != ICPP_LIVE_ANON && (c->off < h->header_size || c->off > L.size || c->len > L.size - c->off)) ||
            !c->len || c->vaddr + c->len < c->vaddr) {
            icpp_err_set(err, ICPP_EFORMAT, "%s: corrupt live file (chunk %u outside the file)", path, i);
            goto out;
        }
    }
    if (!L.nchunks) {
        *empty = 1;
        goto out;
    }
    char spath[4096 + 256];
    snprintf(spath, sizeof spath, "%s/syms.%d.%" PRIu64, dir, h->pid, h->syms_ns);
    if (syms_read(spath, &s, err) < 0)
        goto out;
    pm = icpp_pathmap_new();
    if (!pm) {
        icpp_err_set(err, ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < s.nmods; i++)
        if (s.mods[i].present &&
            icpp_pathmap_add_module(pm, s.mods[i].path, &s.mods[i].bid, s.mods[i].kind, &s.mods[i].pm) < 0) {
            icpp_err_set(err, ENOMEM, "out of memory");
            goto fail;
        }
    icpp_pathmap_set_main(pm, s.mods[0].pm);
    uint64_t entries = 0, skipped = 0, lost = 0;
    const char *why = walk(&L, &s, pm, &entries, &skipped, &lost);
    if (why) {
        icpp_err_set(err, ICPP_EFORMAT, "%s: corrupt live file: %s", path, why);
        goto fail;
    }
    icpp_pathmap_set_meta(pm, "program", s.cmdline ? s.cmdline : "");
    meta_u(pm, "pid", (uint64_t)(uint32_t)h->pid);
    meta_u(pm, "tid", (uint64_t)(uint32_t)h->tid);
    icpp_pathmap_set_meta(pm, "base", h->base_kind == ICPP_AGENT_BASE_STARTSTACK ? "startstack"
                                      : h->base_kind == ICPP_AGENT_BASE_MAPTOP   ? "maptop"
                                                                                 : "none");
    meta_u(pm, "entries", entries);
    meta_u(pm, "node-overflow", skipped);
    meta_u(pm, "recovered", 1);
    meta_u(pm, "recovered-lost-lists", lost);   /* child lists cut where the file could not grow */
    if (s.have_totals) {
        meta_u(pm, "patched-jmp", s.totals[0]);
        meta_u(pm, "patched-short-jmp", s.totals[1]);
        meta_u(pm, "patched-int3", s.totals[2]);
        meta_u(pm, "patched-none", s.totals[3]);
    }
    goto out;
fail:
    icpp_pathmap_free(pm);
    pm = NULL;
out:
    syms_free(&s);
    munmap(m, L.size);
    return pm;
}
