/* replay.c -- replays a sample file: per-process mappings, modules, CFI tables and thread bases for each sample. */
#include "replay.h"

#include "hmap.h"
#include "perfdata.h"
#include "procmaps.h"
#include "vec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct rproc {
    uint32_t  pid;
    uint64_t  startstack;
    uint32_t  gen;              /* execs seen */
    icpp_maps maps;
    int32_t  *modix;            /* per mapping index: module (-2 = not looked up) -- rebuilt lazily */
    char     *exe;              /* executable of the current image (PROC record) */
    int32_t   exe_mod;          /* its module; -2 = not looked up since the last PROC/MMAP */
} rproc;

struct icpp_replay {
    icpp_sreader    *rd;
    icpp_perfdata   *pd;        /* instead of rd: a perf.data file */
    icpp_replay_info info;
    rproc           *procs;
    size_t           nprocs, capprocs;
    icpp_rmodule    *mods;
    size_t           nmods, capmods;
    uint32_t         learn_of[16];  /* learn event id -> profile event id + 1 (0: not a learn event) */
    unsigned         select;        /* ICPP_REPLAY_* (icpp_replay_select) */
    icpp_hmap        tstack;    /* (pid, tid) -> top of the thread's own stack mapping (0: exited) */
    /* The module and load bias of a mapping, for the next samples in it:
     * looking them up (module path, program headers) was a tenth of a
     * resolve's time.  Entries are valid while mgen (bumped by every change
     * to any process's mappings) is what they were made with. */
    struct mcache {
        uint64_t    gen, start, pgoff;
        uint32_t    pid;
        int32_t     mi;         /* module index, -1: get_module failed */
        int         ok;         /* bias found */
        uint64_t    bias;
    } mcache[64];
    uint64_t         mgen;
    uint64_t         declared[4];   /* event ids (< 256) an EVENT record declared */
};

void icpp_replay_select(icpp_replay *rp, unsigned what)
{
    rp->select = what;
    if (rp->rd)
        icpp_sreader_skip_frames(rp->rd, !!(what & ICPP_REPLAY_NO_FRAMES));
}

const char *icpp_rs_status_name(int s)
{
    static const char *n[ICPP_RS_MAX] = {"ok", "no mapping", "file unreadable", "file changed since recording",
                                         "vdso", "no function", "no CFI", "CFI not passive", "no thread base", "foreign stack",
                                         "no path map for this binary"};
    return s >= 0 && s < ICPP_RS_MAX ? n[s] : "?";
}

icpp_replay *icpp_replay_open(const char *path, icpp_err *err)
{
    icpp_replay *rp = calloc(1, sizeof *rp);
    if (!rp) {
        icpp_err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    if (icpp_perfdata_file_is(path))
        rp->pd = icpp_perfdata_open(path, err);
    else
        rp->rd = icpp_sreader_open(path, err);
    if (!rp->rd && !rp->pd) {
        free(rp);
        return NULL;
    }
    return rp;
}

icpp_replay *icpp_replay_live(void)
{
    return calloc(1, sizeof(icpp_replay));
}

void icpp_replay_close(icpp_replay *rp)
{
    if (!rp)
        return;
    for (size_t i = 0; i < rp->nprocs; i++) {
        icpp_maps_free(&rp->procs[i].maps);
        free(rp->procs[i].exe);
    }
    icpp_hmap_free(&rp->tstack);
    for (size_t i = 0; i < rp->nmods; i++) {
        free(rp->mods[i].path);
        icpp_cfi_free(rp->mods[i].cfi);
        icpp_module_close(rp->mods[i].mod);
    }
    free(rp->procs);
    free(rp->mods);
    icpp_sreader_close(rp->rd);
    icpp_perfdata_close(rp->pd);
    free(rp);
}

int icpp_replay_take_modules(icpp_replay *dst, icpp_replay *src)
{
    if (dst->nmods || dst->mods)
        return -1;
    dst->mods = src->mods;
    dst->nmods = src->nmods;
    dst->capmods = src->capmods;
    src->mods = NULL;
    src->nmods = src->capmods = 0;
    src->mgen++;        /* its mapping cache named modules by index */
    return 0;
}

const icpp_replay_info *icpp_replay_info_get(const icpp_replay *rp) { return &rp->info; }
size_t icpp_replay_nmodules(const icpp_replay *rp) { return rp->nmods; }
void icpp_replay_position(const icpp_replay *rp, size_t *done, size_t *len)
{
    if (rp->pd)
        icpp_perfdata_position(rp->pd, done, len);
    else
        icpp_sreader_position(rp->rd, done, len);
}
const icpp_rmodule *icpp_replay_module(const icpp_replay *rp, uint32_t i) { return i < rp->nmods ? &rp->mods[i] : NULL; }

int icpp_replay_set_own_stack(icpp_replay *rp, uint32_t pid, uint32_t tid, uint64_t top)
{
    return icpp_hmap_put(&rp->tstack, pid, tid, top);
}

static rproc *get_proc(icpp_replay *rp, uint32_t pid, int create)
{
    for (size_t i = 0; i < rp->nprocs; i++)
        if (rp->procs[i].pid == pid)
            return &rp->procs[i];
    if (!create)
        return NULL;
    if (icpp_vec_reserve((void **)&rp->procs, &rp->capprocs, rp->nprocs + 1, sizeof *rp->procs, 8) < 0)
        return NULL;
    rproc *p = &rp->procs[rp->nprocs++];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->exe_mod = -2;
    icpp_maps_init(&p->maps);
    return p;
}

/* The module for (path, build-id), opened once. */
static int32_t get_module(icpp_replay *rp, const char *path, const icpp_build_id *bid)
{
    for (size_t i = 0; i < rp->nmods; i++)
        if (!strcmp(rp->mods[i].path, path) &&      /* no recorded build-id: the path alone names it */
            (!bid->len || icpp_build_id_eq(&rp->mods[i].build_id, bid)))
            return (int32_t)i;
    if (icpp_vec_reserve((void **)&rp->mods, &rp->capmods, rp->nmods + 1, sizeof *rp->mods, 16) < 0)
        return -1;
    icpp_rmodule *m = &rp->mods[rp->nmods];
    memset(m, 0, sizeof *m);
    m->path = strdup(path);
    if (!m->path)
        return -1;
    icpp_err err;
    m->mod = icpp_module_open(path, &err);
    m->build_id = *bid;
    if (!m->mod) {
        m->status = ICPP_RS_NOFILE;
    } else {
        const icpp_build_id *fb = icpp_module_build_id(m->mod);
        if (bid->len && !icpp_build_id_eq(fb, bid)) {     /* none recorded: nothing to check */
            m->status = ICPP_RS_CHANGED;
            icpp_module_close(m->mod);
            m->mod = NULL;
        } else if (!bid->len) {
            m->build_id = *fb;
        }
    }
    return (int32_t)rp->nmods++;
}

/* Build-ids recorded per mapping: kept beside the maps by start address. */
static int on_mmap(icpp_replay *rp, const icpp_srec *r)
{
    rproc *p = get_proc(rp, r->u.mmap.pid, 1);
    if (!p)
        return -ENOMEM;
    icpp_mapping m = {r->u.mmap.start, r->u.mmap.start + r->u.mmap.len, r->u.mmap.pgoff, r->u.mmap.prot,
                      (char *)(r->u.mmap.path && r->u.mmap.path[0] ? r->u.mmap.path : NULL)};
    if (m.end <= m.start)
        return 0;
    rp->mgen++;
    if (icpp_maps_insert(&p->maps, &m, NULL) < 0)
        return -ENOMEM;
    p->exe_mod = -2;
    /* Register the module now so the recorded build-id is the one checked. */
    if (m.path && m.path[0] == '/' && (m.prot & PROT_EXEC))
        get_module(rp, m.path, &r->u.mmap.build_id);
    return 0;
}

static void on_proc(icpp_replay *rp, const icpp_srec *r)
{
    rproc *p = get_proc(rp, r->u.proc.pid, 1);
    if (!p)
        return;
    if (!rp->info.exe[0] && r->u.proc.path)
        snprintf(rp->info.exe, sizeof rp->info.exe, "%s", r->u.proc.path);
    p->startstack = r->u.proc.startstack;
    p->exe_mod = -2;
    if (r->u.proc.path && r->u.proc.path[0]) {
        free(p->exe);
        p->exe = strdup(r->u.proc.path);
    } else if (r->u.proc.ppid) {
        rproc *pp = get_proc(rp, r->u.proc.ppid, 0);
        p = get_proc(rp, r->u.proc.pid, 0);
        if (pp && pp->exe && !p->exe)
            p->exe = strdup(pp->exe);
    }
    rp->mgen++;
    if (r->u.proc.flags & ICPP_PROC_EXEC) {
        p->gen++;
        icpp_maps_free(&p->maps);
        icpp_maps_init(&p->maps);
    } else if (r->u.proc.ppid) {
        rproc *pp = get_proc(rp, r->u.proc.ppid, 0);
        p = get_proc(rp, r->u.proc.pid, 0);     /* pointers may have moved */
        if (pp && p && pp != p) {
            icpp_maps_free(&p->maps);
            icpp_maps_init(&p->maps);
            for (size_t i = 0; i < pp->maps.n; i++)
                icpp_maps_insert(&p->maps, &pp->maps.v[i], NULL);
        }
    }
}

int icpp_replay_locate(const icpp_replay *crp, uint32_t pid, uint64_t addr, int32_t *module, uint64_t *link_addr)
{
    icpp_replay *rp = (icpp_replay *)crp;     /* opening a module on first use caches it */
    rproc *p = get_proc(rp, pid, 0);
    const icpp_mapping *m = p ? icpp_maps_find(&p->maps, addr) : NULL;
    if (!m || !m->path || m->path[0] != '/')
        return -1;
    icpp_build_id none = {0, {0}};
    int32_t mi = get_module(rp, m->path, &none);
    uint64_t bias;
    if (mi < 0 || rp->mods[mi].status != ICPP_RS_OK ||
        icpp_module_bias(rp->mods[mi].mod, m->start, m->pgoff, &bias, NULL) < 0)
        return -1;
    *module = mi;
    *link_addr = addr - bias;
    return 0;
}

int32_t icpp_replay_module_at(const icpp_replay *crp, uint32_t pid, uint64_t addr)
{
    icpp_replay *rp = (icpp_replay *)crp;
    rproc *p = get_proc(rp, pid, 0);
    const icpp_mapping *m = p ? icpp_maps_find(&p->maps, addr) : NULL;
    if (!m || !m->path || m->path[0] != '/')
        return -1;
    icpp_build_id none = {0, {0}};
    return get_module(rp, m->path, &none);
}

const icpp_cfi *icpp_replay_cfi(icpp_replay *rp, uint32_t i)
{
    if (i >= rp->nmods || !rp->mods[i].mod)
        return NULL;
    if (!rp->mods[i].cfi)
        rp->mods[i].cfi = icpp_cfi_build(rp->mods[i].mod, NULL);
    return rp->mods[i].cfi;
}

const icpp_rmodule *icpp_replay_exe_module(const icpp_replay *rp)
{
    for (uint32_t i = 0; i < rp->nmods; i++)
        if (!strcmp(rp->mods[i].path, rp->info.exe))
            return &rp->mods[i];
    return NULL;
}

const icpp_cfi *icpp_replay_sw_lookup(void *ctx, uint64_t addr, uint64_t *link_addr)
{
    icpp_replay_at *at = ctx;
    int32_t mi;
    if (icpp_replay_locate(at->rp, at->pid, addr, &mi, link_addr) < 0)
        return NULL;
    return icpp_replay_cfi(at->rp, (uint32_t)mi);
}

/* The module of process p's executable: the module of an executable
 * mapping of the PROC record's path (so its recorded build-id), cached. */
static int32_t exe_module(icpp_replay *rp, rproc *p)
{
    if (p->exe_mod != -2)
        return p->exe_mod;
    p->exe_mod = -1;
    for (size_t i = 0; p->exe && i < p->maps.n; i++) {
        const icpp_mapping *m = &p->maps.v[i];
        if (m->path && (m->prot & PROT_EXEC) && !strcmp(m->path, p->exe)) {
            icpp_build_id none = {0, {0}};
            p->exe_mod = get_module(rp, m->path, &none);
            break;
        }
    }
    return p->exe_mod;
}

/* Is the sample's SP on a stack other than its thread's own
 * (docs/definitions.md)?  Main thread: outside the span below startstack,
 * or inside a recorded mapping that does not hold startstack.  Other
 * threads: their own stack is the mapping given by
 * icpp_replay_set_own_stack, else the one their first sample with a
 * mapping was on; an SP in another mapping, or in none, is foreign. */
static int foreign_stack(icpp_replay *rp, rproc *p, const icpp_rsample *s)
{
    if (s->tid == s->pid) {
        if (!p->startstack)
            return 0;
        if (!icpp_main_stack_holds(p->startstack, s->sp))
            return 1;
        const icpp_mapping *m = icpp_maps_find(&p->maps, s->sp);
        return m && !(p->startstack >= m->start && p->startstack < m->end);
    }
    uint64_t *own = icpp_hmap_get(&rp->tstack, s->pid, s->tid);
    if (own && *own)
        return *own != s->base;     /* also an SP in no recorded mapping (a brk heap) */
    if (s->base)
        icpp_hmap_put(&rp->tstack, s->pid, s->tid, s->base);    /* on failure: no foreign test */
    return 0;
}

static void resolve(icpp_replay *rp, icpp_rsample *s)
{
    s->module = -1;
    s->exe_module = -1;
    rproc *p = get_proc(rp, s->pid, 0);
    s->exec_gen = p ? p->gen : 0;
    /* The thread base depends only on the thread and its SP. */
    if (p && s->tid == s->pid) {
        s->base = p->startstack;
        s->base_kind = s->base ? ICPP_BASE_STARTSTACK : ICPP_BASE_NONE;
    } else if (p) {
        s->base = icpp_maps_stack_top(&p->maps, s->sp);
        s->base_kind = s->base ? ICPP_BASE_MAPTOP : ICPP_BASE_NONE;
    }
    if (rp->select & ICPP_REPLAY_PROCESS_ONLY) {
        s->exe_module = p ? exe_module(rp, p) : -1;
        s->status = ICPP_RS_OK;
        return;
    }
    int foreign = p && foreign_stack(rp, p, s);
    if (p)
        s->exe_module = exe_module(rp, p);
    const icpp_mapping *m = p ? icpp_maps_find(&p->maps, s->ip) : NULL;
    if (!m || !m->path) {
        s->status = ICPP_RS_NOMAP;
        return;
    }
    if (m->path[0] != '/' || m->path[1] == '/') {
        /* not a file: the kernel's code, or anonymous memory -- perf names
         * JIT code "//anon", prctl-named mappings are "[anon:NAME]" */
        s->status = !strcmp(m->path, "[vdso]") || !strcmp(m->path, "[vsyscall]") ? ICPP_RS_VDSO : ICPP_RS_NOMAP;
        return;
    }
    struct mcache *mc = &rp->mcache[(m->start >> 12 ^ s->pid * 31u) & 63];
    if (mc->gen != rp->mgen + 1 || mc->pid != s->pid || mc->start != m->start || mc->pgoff != m->pgoff) {
        icpp_build_id none = {0, {0}};
        int32_t mi = get_module(rp, m->path, &none);
        *mc = (struct mcache){rp->mgen + 1, m->start, m->pgoff, s->pid, mi, 0, 0};
        if (mi >= 0 && rp->mods[mi].status == ICPP_RS_OK)
            mc->ok = icpp_module_bias(rp->mods[mi].mod, m->start, m->pgoff, &mc->bias, NULL) == 0;
    }
    int32_t mi = mc->mi;
    if (mi < 0) {
        s->status = ICPP_RS_NOFILE;
        return;
    }
    icpp_rmodule *rm = &rp->mods[mi];
    s->module = mi;
    if (rm->status != ICPP_RS_OK) {
        s->status = rm->status;
        return;
    }
    if (!mc->ok) {
        s->status = ICPP_RS_CHANGED;
        return;
    }
    uint64_t bias = mc->bias;
    s->addr = s->ip - bias;
    icpp_module_need(rm->mod);      /* its debug file may be asked of debuginfod (lib/debuginfo.h) */
    if (rm->last && s->addr >= rm->last_lo && s->addr < rm->last_hi)
        s->func = rm->last;     /* the function of the sample before, as is common */
    else if ((s->func = icpp_module_func_span(rm->mod, s->addr, &rm->last_lo, &rm->last_hi)))
        rm->last = s->func;
    if (!rm->cfi) {
        rm->cfi = icpp_cfi_build(rm->mod, NULL);
        if (!rm->cfi) {
            s->status = ICPP_RS_NOFDE;
            return;
        }
    }
    int r = icpp_cfi_entry_sp(rm->cfi, s->addr, s->sp, s->bp, &s->entry_sp);
    if (r != 0) {
        s->status = r < 0 ? ICPP_RS_NOFDE : ICPP_RS_NOTPASSIVE;
        return;
    }
    if (foreign) {
        s->status = ICPP_RS_FOREIGN;
        return;
    }
    if (!s->base) {
        s->status = ICPP_RS_NOBASE;
        return;
    }
    s->height = icpp_height(s->base, s->entry_sp);
    s->status = s->func ? ICPP_RS_OK : ICPP_RS_NOFUNC;
}

int icpp_replay_feed(icpp_replay *rp, const icpp_srec *r, icpp_err *err)
{
    switch (r->type) {
    case ICPP_SREC_INFO:
        if (!strcmp(r->u.info.key, "command"))
            snprintf(rp->info.command, sizeof rp->info.command, "%s", r->u.info.val);
        break;
    case ICPP_SREC_EVENT:
        if (r->u.event.role == ICPP_EVENT_LEARN && r->u.event.id < 16)
            rp->learn_of[r->u.event.id] = r->u.event.of + 1;
        if (r->u.event.id < 256)
            rp->declared[r->u.event.id / 64] |= 1ull << (r->u.event.id % 64);
        if (r->u.event.id < 8 && !r->u.event.role) {
            snprintf(rp->info.event_names[r->u.event.id], 128, "%s", r->u.event.name);
            if (r->u.event.id + 1 > rp->info.nevents)
                rp->info.nevents = r->u.event.id + 1;
        }
        break;
    case ICPP_SREC_PROC:
        on_proc(rp, r);
        break;
    case ICPP_SREC_MMAP:
        if (on_mmap(rp, r) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory");
        break;
    case ICPP_SREC_EXIT: {
        uint64_t *own = icpp_hmap_get(&rp->tstack, r->u.exit.pid, r->u.exit.tid);
        if (own)
            *own = 0;       /* the tid may be reused by a new thread */
        break;
    }
    case ICPP_SREC_LOST:
        if (rp->info.lost + r->u.lost.count < rp->info.lost) {
            rp->info.lost = UINT64_MAX;     /* no kernel loses 2^64 samples: said, not wrapped */
            rp->info.lost_saturated = 1;
        } else {
            rp->info.lost += r->u.lost.count;
        }
        break;
    default:
        break;
    }
    return 0;
}

int icpp_replay_next(icpp_replay *rp, icpp_rsample *out, icpp_err *err)
{
    icpp_srec r;
    for (;;) {
        int rc = rp->pd ? icpp_perfdata_next(rp->pd, &r, err) : icpp_sreader_next(rp->rd, &r, err);
        if (rc <= 0) {
            rp->info.truncated = rp->pd ? icpp_perfdata_truncated(rp->pd) : icpp_sreader_truncated(rp->rd);
            rp->info.clean_end = rp->pd ? icpp_perfdata_clean_end(rp->pd) : icpp_sreader_clean_end(rp->rd);
            if (rp->rd) {
                icpp_sreader_tally t;
                icpp_sreader_get_tally(rp->rd, &t);
                rp->info.end_samples = t.end_samples;
                rp->info.before_end = t.before_end;
                rp->info.after_end = t.after_end;
                rp->info.after_exit = t.after_exit;
            }
            return rc;
        }
        if ((r.type == ICPP_SREC_SAMPLE || r.type == ICPP_SREC_LSAMPLE) &&
            (r.u.sample.event >= 256 || !(rp->declared[r.u.sample.event / 64] >> (r.u.sample.event % 64) & 1))) {
            /* no EVENT record says what it counts: not taken for event 0 */
            if (!rp->info.unknown_event++)
                rp->info.first_unknown = r.u.sample.event;
            continue;
        }
        if (r.type == ICPP_SREC_LSAMPLE)
            rp->info.learn_samples++;
        if ((r.type == ICPP_SREC_SAMPLE && (rp->select & ICPP_REPLAY_LEARN_ONLY)) ||
            ((r.type == ICPP_SREC_SAMPLE || r.type == ICPP_SREC_LSAMPLE) && (rp->select & ICPP_REPLAY_OTHER_THREADS) &&
             r.u.sample.tid == r.u.sample.pid)) {
            rp->info.samples++;
            continue;
        }
        if (r.type != ICPP_SREC_SAMPLE && r.type != ICPP_SREC_LSAMPLE) {
            if (icpp_replay_feed(rp, &r, err) < 0)
                return -1;
            continue;
        }
        memset(out, 0, sizeof *out);
        out->pid = r.u.sample.pid;
        out->tid = r.u.sample.tid;
        out->event = r.u.sample.event;
        out->time = r.u.sample.time;
        out->ip = r.u.sample.ip;
        out->sp = r.u.sample.sp;
        out->bp = r.u.sample.bp;
        out->learn = r.type == ICPP_SREC_LSAMPLE;
        if (out->learn && out->event < 16 && rp->learn_of[out->event])
            out->event = rp->learn_of[out->event] - 1;     /* a profile sample of that event too */
        rp->info.samples++;
        resolve(rp, out);
        out->x = r.u.sample.x;
        out->l = r.u.sample.l;
        return 1;
    }
}
