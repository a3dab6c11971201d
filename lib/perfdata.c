/* perfdata.c -- perf.data files (perf record) read as the same record stream as the ICPP sample reader. */
#include "perfdata.h"

#include "codec.h"
#include "fmap.h"
#include "fsafe.h"
#include "hmap.h"
#include "order.h"
#include "perfrec.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The file format is perf's (tools/perf/Documentation/perf.data-file-format.txt,
 * tools/perf/util/header.h); record layouts are the kernel's
 * (include/uapi/linux/perf_event.h).  Only little-endian files are read. */
#define MAGIC2          0x32454c4946524550ull   /* "PERFILE2" read as a little-endian u64 */
#define MAGIC2_SWAPPED  0x50455246494c4532ull   /* written on a big-endian machine */
#define HDR_SIZE        104                     /* struct perf_file_header */
#define HDR_SIZE_OLD    72                      /* before the feature bitmap */
#define PIPE_HDR_SIZE   16                      /* struct perf_pipe_file_header */
#define ATTR_VER0       64                      /* PERF_ATTR_SIZE_VER0 */
#define MAX_ATTRS       4096
#define MAX_CHAIN       4096

/* Records perf itself adds to the data section. */
enum { REC_FINISHED_ROUND = 68, REC_AUXTRACE = 71, REC_COMPRESSED = 81, REC_COMPRESSED2 = 83 };
/* Feature bits (HEADER_*). */
enum { FEAT_BUILD_ID = 2, FEAT_HOSTNAME = 3, FEAT_OSRELEASE = 4, FEAT_CMDLINE = 11, FEAT_EVENT_DESC = 12 };
#define MISC_BUILD_ID_SIZE (1u << 15)           /* build-id table: the size byte is valid */
/* x86-64 perf register numbers (asm/perf_regs.h). */
enum { REG_BP = 6, REG_SP = 7, REG_IP = 8 };
#define AUX_EMIT (1ull << 63)                   /* a COMM's aux: give a PROC record */
/* Reading the data section as a stream (docs/perfdata.md, "How the file is read"). */
#define CHUNK        ((uint64_t)1 << 20)        /* the first pass notes each MiB's smallest time */
#define RELEASE_LAG  ((uint64_t)32 << 20)       /* keep this much of the data behind the cursor mapped */

typedef struct pd_attr {
    uint32_t type;
    uint64_t config, period;
    icpp_perfrec_layout lay;    /* how its samples and sample_id trailers are laid out */
    uint8_t  freq, precise;
    int      usable;            /* its samples carry SP and BP in user or intr registers */
    char     name[128];
} pd_attr;

typedef struct pd_id {
    uint64_t id;
    uint32_t attr;
} pd_id;

typedef struct pd_bid {
    const char   *path;         /* NUL-terminated, inside the file buffer */
    icpp_build_id bid;
    size_t        order;
} pd_bid;

/* A COMM or an executable's MMAP, kept by the first pass to find each
 * exec's executable (find_executables). */
typedef struct pd_xent {
    uint64_t key, off;
    uint64_t aux;               /* COMM: AUX_EMIT | (offset of the executable's path + 1) */
} pd_xent;

enum { IDM_ONE, IDM_IDENTIFIER, IDM_POS };      /* how a sample names its event */
enum { TRL_NONE, TRL_UNIFORM, TRL_BYID };       /* how a non-sample record's time is found */

struct icpp_perfdata {
    icpp_fmap      map;         /* the file, mapped (or the caller's buffer) */
    const uint8_t *buf;
    size_t         len;
    pd_attr       *attrs;
    uint32_t       nattrs;
    pd_id         *ids;         /* sorted by id */
    size_t         nids;
    int            id_mode, trl_mode;
    pd_bid        *bids;        /* sorted by path */
    size_t         nbids;
    uint64_t       doff, dend;  /* data records: [doff, dend) (dend: before a truncated tail) */
    uint64_t       cur, key;    /* second pass: next record, key of the last timed record */
    uint64_t      *sufmin;      /* per CHUNK of the data: smallest key in it and after it */
    size_t         nchunks;
    uint64_t       safe;        /* no record after cur has a key below this */
    icpp_order     ord;         /* records read, waiting: (key, file offset), spilled past the window */
    icpp_hmap      comm_aux;    /* COMM record offset -> its aux (pd_xent) */
    size_t         truncated;
    int            clean;
    uint32_t       stage;       /* header records given out so far */
    char          *command, *kernel, *host;
    icpp_hmap      seen;        /* pid -> 1: a PROC record was given */
    uint64_t      *u64;         /* callchain and registers of the current sample */
    size_t         capu64;
    icpp_perfdata_stats st;
};

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

int icpp_perfdata_is(const uint8_t *buf, size_t len)
{
    if (len < 8)
        return 0;
    uint64_t m = get64(buf);
    return m == MAGIC2 || m == MAGIC2_SWAPPED;
}

int icpp_perfdata_file_is(const char *path)
{
    uint8_t b[8];
    int fd = icpp_fs_open_input(path, NULL, NULL);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, b, sizeof b);
    close(fd);
    return n == (ssize_t)sizeof b && icpp_perfdata_is(b, sizeof b);
}

/* A section [off, off+size) lies inside the file. */
static int in_file(const icpp_perfdata *pd, uint64_t off, uint64_t size)
{
    return off <= pd->len && size <= pd->len - off;
}

static int cmp_id(const void *a, const void *b)
{
    const pd_id *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_bid(const void *a, const void *b)
{
    const pd_bid *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int cmp_xent(const void *a, const void *b)
{
    const pd_xent *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->off > y->off) - (x->off < y->off);
}

/* Attribute index of event id `id`, or -1. */
static int attr_of_id(const icpp_perfdata *pd, uint64_t id)
{
    size_t lo = 0, hi = pd->nids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pd->ids[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < pd->nids && pd->ids[lo].id == id ? (int)pd->ids[lo].attr : -1;
}

static const icpp_build_id *bid_of_path(const icpp_perfdata *pd, const char *path)
{
    size_t lo = 0, hi = pd->nbids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(pd->bids[mid].path, path) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < pd->nbids && !strcmp(pd->bids[lo].path, path) ? &pd->bids[lo].bid : NULL;
}

/* A NUL-terminated string at [off, end) of the buffer, or NULL. */
static const char *str_at(const icpp_perfdata *pd, uint64_t off, uint64_t end)
{
    if (off >= end || end > pd->len)
        return NULL;
    const void *z = memchr(pd->buf + off, 0, (size_t)(end - off));
    return z ? (const char *)(pd->buf + off) : NULL;
}

static const char *event_name(uint32_t type, uint64_t config)
{
    static const char *sw[] = {"cpu-clock", "task-clock", "page-faults", "context-switches", "cpu-migrations",
                               "minor-faults", "major-faults", "alignment-faults", "emulation-faults", "dummy",
                               "bpf-output", "cgroup-switches"};
    static const char *hw[] = {"cycles", "instructions", "cache-references", "cache-misses", "branch-instructions",
                               "branch-misses", "bus-cycles", "stalled-cycles-frontend", "stalled-cycles-backend",
                               "ref-cycles"};
    if (type == PERF_TYPE_SOFTWARE && config < sizeof sw / sizeof *sw)
        return sw[config];
    if (type == PERF_TYPE_HARDWARE && config < sizeof hw / sizeof *hw)
        return hw[config];
    return NULL;
}

/* ---- header ---- */

static int read_attrs(icpp_perfdata *pd, const uint8_t *h, icpp_err *err)
{
    uint64_t attr_size = get64(h + 16), off = get64(h + 24), size = get64(h + 32);
    if (attr_size < ATTR_VER0 + 16 || attr_size > 65536 || size % attr_size)
        return icpp_err_set(err, ICPP_EFORMAT, "corrupt header: attribute size %llu, attribute section %llu bytes",
                            (unsigned long long)attr_size, (unsigned long long)size);
    if (!in_file(pd, off, size))
        return icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (the event attributes end at %llu)", pd->len,
                            (unsigned long long)(off + size));
    uint64_t n = size / attr_size;
    if (n == 0 || n > MAX_ATTRS)
        return icpp_err_set(err, ICPP_EFORMAT, "corrupt header: %llu event attributes", (unsigned long long)n);
    pd->attrs = calloc((size_t)n, sizeof *pd->attrs);
    if (!pd->attrs)
        return icpp_err_set(err, ENOMEM, "out of memory");
    pd->nattrs = (uint32_t)n;
    uint64_t nids = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *a = pd->buf + off + i * attr_size;
        uint64_t asz = get32(a + 4) ? get32(a + 4) : ATTR_VER0;
        if (asz != attr_size - 16)
            return icpp_err_set(err, ICPP_EFORMAT, "corrupt event attribute %u at offset %llu: size %llu in a %llu-byte slot",
                                i, (unsigned long long)(off + i * attr_size), (unsigned long long)asz,
                                (unsigned long long)attr_size);
        /* Fields past the attribute's own size are zero (an older perf). */
        uint8_t f[136] = {0};
        memcpy(f, a, asz < sizeof f ? (size_t)asz : sizeof f);
        pd_attr *t = &pd->attrs[i];
        uint64_t flags = get64(f + 40);
        t->type = get32(f);
        t->config = get64(f + 8);
        t->period = get64(f + 16);
        t->lay.sample_type = get64(f + 24);
        t->lay.read_format = get64(f + 32);
        t->freq = (flags >> 10) & 1;
        t->precise = (flags >> 15) & 3;
        t->lay.id_all = (flags >> 18) & 1;
        t->lay.branch_type = get64(f + 72);
        t->lay.regs_user = get64(f + 80);
        t->lay.regs_intr = get64(f + 96);
        uint64_t need = 1ull << REG_SP | 1ull << REG_BP;
        t->usable = ((t->lay.sample_type & PERF_SAMPLE_REGS_USER) && (t->lay.regs_user & need) == need) ||
                    ((t->lay.sample_type & PERF_SAMPLE_REGS_INTR) && (t->lay.regs_intr & need) == need);
        const char *nm = event_name(t->type, t->config);
        if (nm)
            snprintf(t->name, sizeof t->name, "%s", nm);
        else
            snprintf(t->name, sizeof t->name, "type%u:%#llx", t->type, (unsigned long long)t->config);
        uint64_t ioff = get64(a + attr_size - 16), isz = get64(a + attr_size - 8);
        if (isz % 8 || !in_file(pd, ioff, isz))
            return icpp_err_set(err, ICPP_EFORMAT, "event attribute %u: ids at offset %llu (%llu bytes) are outside the file",
                                i, (unsigned long long)ioff, (unsigned long long)isz);
        nids += isz / 8;
    }
    if (nids > pd->len / 8)     /* perf writes each attribute's ids once */
        return icpp_err_set(err, ICPP_EFORMAT, "corrupt header: %llu event ids in a file of %zu bytes",
                            (unsigned long long)nids, pd->len);
    pd->ids = malloc((size_t)(nids ? nids : 1) * sizeof *pd->ids);
    if (!pd->ids)
        return icpp_err_set(err, ENOMEM, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *a = pd->buf + off + i * attr_size;
        uint64_t ioff = get64(a + attr_size - 16), isz = get64(a + attr_size - 8);
        for (uint64_t k = 0; k < isz / 8; k++)
            pd->ids[pd->nids++] = (pd_id){get64(pd->buf + ioff + 8 * k), i};
    }
    qsort(pd->ids, pd->nids, sizeof *pd->ids, cmp_id);
    return 0;
}

/* How samples and other records are tied to their attribute; the registers. */
static int check_attrs(icpp_perfdata *pd, icpp_err *err)
{
    const pd_attr *a0 = &pd->attrs[0];
    int all_ident = 1, all_idall = 1, same_type = 1, same_trl = 1, any_usable = 0, no_tid = 0;
    for (uint32_t i = 0; i < pd->nattrs; i++) {
        const pd_attr *a = &pd->attrs[i];
        uint64_t st = a->lay.sample_type, st0 = a0->lay.sample_type;
        all_ident &= !!(st & PERF_SAMPLE_IDENTIFIER);
        all_idall &= a->lay.id_all;
        same_type &= st == st0;
        same_trl &= (st & ICPP_PERFREC_TRAILER_BITS) == (st0 & ICPP_PERFREC_TRAILER_BITS) &&
                    a->lay.id_all == a0->lay.id_all;
        any_usable |= a->usable;
        no_tid |= a->usable && !(st & PERF_SAMPLE_TID);
    }
    if (!any_usable)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "samples carry no user registers: record with --user-regs=sp,bp,ip "
                                                    "(or --intr-regs=sp,bp,ip with a precise event)");
    if (no_tid)
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "samples carry no thread ids (PERF_SAMPLE_TID)");
    if (pd->nattrs == 1) {
        pd->id_mode = IDM_ONE;
    } else if (all_ident) {
        pd->id_mode = IDM_IDENTIFIER;
    } else if (same_type && (a0->lay.sample_type & PERF_SAMPLE_ID)) {
        pd->id_mode = IDM_POS;      /* the ID field, where every attribute's layout puts it */
    } else {
        return icpp_err_set(err, ICPP_EUNSUPPORTED, "%u events whose samples cannot be told apart "
                                                    "(neither PERF_SAMPLE_IDENTIFIER nor PERF_SAMPLE_ID)", pd->nattrs);
    }
    /* Non-sample records carry a sample_id trailer only with sample_id_all;
     * without a common layout, the trailing identifier names the event. */
    if (same_trl)
        pd->trl_mode = a0->lay.id_all ? TRL_UNIFORM : TRL_NONE;
    else
        pd->trl_mode = all_ident && all_idall ? TRL_BYID : TRL_NONE;
    return 0;
}

/* A perf string (u32 length, then that many bytes, NUL-padded) at *pos. */
static const char *feat_string(const icpp_perfdata *pd, uint64_t *pos, uint64_t end, size_t *slen)
{
    if (end - *pos < 4)
        return NULL;
    uint32_t n = get32(pd->buf + *pos);
    if (n > end - *pos - 4)
        return NULL;
    const char *s = (const char *)pd->buf + *pos + 4;
    *slen = strnlen(s, n);
    *pos += 4 + (uint64_t)n;
    return s;
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static int read_buildids(icpp_perfdata *pd, uint64_t pos, uint64_t end, icpp_err *err)
{
    size_t cap = (size_t)((end - pos) / 37 + 1);
    pd->bids = malloc(cap * sizeof *pd->bids);
    if (!pd->bids)
        return icpp_err_set(err, ENOMEM, "out of memory");
    while (end - pos >= 8) {
        const uint8_t *r = pd->buf + pos;
        uint16_t misc = get16(r + 4), size = get16(r + 6);
        if (size < 37 || size > end - pos)
            return icpp_err_set(err, ICPP_EFORMAT, "corrupt build-id table at offset %llu (record of %u bytes)",
                                (unsigned long long)pos, size);
        const char *path = str_at(pd, pos + 36, pos + size);
        if (!path)
            return icpp_err_set(err, ICPP_EFORMAT, "corrupt build-id table at offset %llu (unterminated name)",
                                (unsigned long long)pos);
        pd_bid *b = &pd->bids[pd->nbids];
        b->path = path;
        b->order = pd->nbids;
        b->bid.len = (misc & MISC_BUILD_ID_SIZE) ? (r[32] <= 20 ? r[32] : 20) : 20;
        memcpy(b->bid.bytes, r + 12, b->bid.len);
        pd->nbids++;
        pos += size;
    }
    qsort(pd->bids, pd->nbids, sizeof *pd->bids, cmp_bid);
    return 0;
}

static int read_event_desc(icpp_perfdata *pd, uint64_t pos, uint64_t end)
{
    if (end - pos < 8)
        return 0;
    uint32_t n = get32(pd->buf + pos), asz = get32(pd->buf + pos + 4);
    pos += 8;
    if (asz < ATTR_VER0)
        return 0;
    for (uint32_t i = 0; i < n && i < pd->nattrs; i++) {
        if (end - pos < (uint64_t)asz + 4)
            return 0;
        pos += asz;
        uint32_t nid = get32(pd->buf + pos);
        pos += 4;
        size_t sl;
        const char *s = feat_string(pd, &pos, end, &sl);
        if (!s || (uint64_t)nid * 8 > end - pos)
            return 0;
        pos += (uint64_t)nid * 8;
        if (sl)
            snprintf(pd->attrs[i].name, sizeof pd->attrs[i].name, "%.*s", (int)sl, s);
    }
    return 0;
}

static int read_cmdline(icpp_perfdata *pd, uint64_t pos, uint64_t end)
{
    if (end - pos < 4)
        return 0;
    uint32_t n = get32(pd->buf + pos);
    pos += 4;
    size_t cap = 4096, k = 0;
    char *c = malloc(cap);
    if (!c)
        return -1;
    for (uint32_t i = 0; i < n && i < 4096; i++) {
        size_t sl;
        const char *s = feat_string(pd, &pos, end, &sl);
        if (!s)
            break;
        if (k + sl + 2 > cap)
            break;
        if (k)
            c[k++] = ' ';
        memcpy(c + k, s, sl);
        k += sl;
    }
    c[k] = 0;
    pd->command = c;
    return 0;
}

/* Feature sections: an array of (offset, size) after the data, one per bit
 * set in the header's 256-bit feature map. */
static int read_features(icpp_perfdata *pd, const uint8_t *h, uint64_t at, icpp_err *err)
{
    int nset = 0, idx[256];
    for (int b = 0; b < 256; b++) {
        uint64_t w = get64(h + 72 + 8 * (b / 64));
        idx[b] = nset;
        nset += (w >> (b % 64)) & 1;
    }
    if (!nset)
        return 0;
    if (!in_file(pd, at, 16ull * nset))
        return icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (the feature sections' index ends at %llu)",
                            pd->len, (unsigned long long)(at + 16ull * nset));
    static const struct { int bit; const char *name; } want[] = {
        {FEAT_BUILD_ID, "build-id"}, {FEAT_HOSTNAME, "hostname"}, {FEAT_OSRELEASE, "os release"},
        {FEAT_CMDLINE, "command line"}, {FEAT_EVENT_DESC, "event description"}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int b = want[i].bit;
        if (!((get64(h + 72) >> b) & 1))
            continue;
        const uint8_t *s = pd->buf + at + 16ull * idx[b];
        uint64_t off = get64(s), size = get64(s + 8);
        if (!in_file(pd, off, size))
            return icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (the %s section ends at %llu)", pd->len,
                                want[i].name, (unsigned long long)(off + size));
        uint64_t end = off + size;
        size_t sl;
        const char *str;
        switch (b) {
        case FEAT_BUILD_ID:
            if (read_buildids(pd, off, end, err) < 0)
                return -1;
            break;
        case FEAT_HOSTNAME:
        case FEAT_OSRELEASE:
            if ((str = feat_string(pd, &off, end, &sl))) {
                char *d = dup_n(str, sl);
                if (b == FEAT_HOSTNAME)
                    pd->host = d;
                else
                    pd->kernel = d;
            }
            break;
        case FEAT_CMDLINE:
            if (read_cmdline(pd, off, end) < 0)
                return icpp_err_set(err, ENOMEM, "out of memory");
            break;
        case FEAT_EVENT_DESC:
            read_event_desc(pd, off, end);
            break;
        }
    }
    return 0;
}

/* ---- data section index ---- */

/* Attribute of a sample record (body p[0..n)): index, -1 unknown id, -2 too
 * short.  Several attributes share one id position (check_attrs): the first's. */
static int sample_attr(const icpp_perfdata *pd, const uint8_t *p, size_t n)
{
    uint64_t id;
    if (pd->id_mode == IDM_ONE)
        return 0;
    return icpp_perfrec_sample_id(&pd->attrs[0].lay, p, n, &id) < 0 ? -2 : attr_of_id(pd, id);
}

/* Time of a record, if it has one: by its attribute's layout (a non-sample
 * record's: the common trailer's, or the one its trailing id names). */
static int record_time(const icpp_perfdata *pd, uint32_t type, const uint8_t *r, size_t size, uint64_t *t)
{
    const uint8_t *p = r + 8;
    size_t n = size - 8;
    const icpp_perfrec_layout *l = NULL;
    uint64_t id;
    if (type == PERF_RECORD_SAMPLE) {
        int ai = sample_attr(pd, p, n);
        if (ai < 0)
            return 0;
        l = &pd->attrs[ai].lay;
    } else if (pd->trl_mode == TRL_UNIFORM) {
        l = &pd->attrs[0].lay;
    } else if (pd->trl_mode == TRL_BYID && icpp_perfrec_trailer_id(p, n, &id)) {
        int ai = attr_of_id(pd, id);
        l = ai >= 0 ? &pd->attrs[ai].lay : NULL;
    }
    return icpp_perfrec_time(l, type, p, n, t);
}

static int wanted(uint32_t type)
{
    switch (type) {
    case PERF_RECORD_MMAP: case PERF_RECORD_LOST: case PERF_RECORD_COMM: case PERF_RECORD_EXIT:
    case PERF_RECORD_FORK: case PERF_RECORD_SAMPLE: case PERF_RECORD_MMAP2: case PERF_RECORD_LOST_SAMPLES:
        return 1;
    default:
        return 0;
    }
}

/* An mmap record's file path (NULL if none or unusable) and its offset. */
static const char *mmap_path(const icpp_perfdata *pd, uint64_t off, uint64_t *poff)
{
    const uint8_t *r = pd->buf + off;
    uint32_t type = get32(r);
    uint16_t size = get16(r + 6);
    uint64_t at = off + (type == PERF_RECORD_MMAP ? 40 : 72);
    *poff = at;
    return at < off + size ? str_at(pd, at, off + size) : NULL;
}

static int exe_like(const char *p)
{
    return p && p[0] == '/' && p[1] != '/' && strncmp(p, "/anon_hugepage", 14) && strncmp(p, "/memfd:", 7) &&
           strncmp(p, "/SYSV", 5) && strncmp(p, "/dev/", 5);
}

/* First pass over the data section: check every record's framing (so a
 * corrupt or cut file fails at open, as before streaming), count records,
 * note each CHUNK's smallest key (pd->sufmin: what makes the second pass's
 * reorder window exact) and keep the COMMs and executable MMAPs for
 * find_executables.  Memory: the kept records and one u64 per MiB. */
static int scan_data(icpp_perfdata *pd, uint64_t off, uint64_t end, pd_xent **xv, size_t *nx, icpp_err *err)
{
    size_t capx = 0;
    pd->doff = off;
    pd->nchunks = (size_t)((end - off) / CHUNK) + 1;
    pd->sufmin = malloc(pd->nchunks * sizeof *pd->sufmin);
    if (!pd->sufmin)
        return icpp_err_set(err, ENOMEM, "out of memory");
    for (size_t c = 0; c < pd->nchunks; c++)
        pd->sufmin[c] = UINT64_MAX;
    uint64_t key = 0;
    while (off < end) {
        if (end - off < 8) {
            if (pd->clean)
                return icpp_err_set(err, ICPP_EFORMAT, "corrupt record at offset %llu: %llu bytes left in the data section",
                                    (unsigned long long)off, (unsigned long long)(end - off));
            pd->truncated = (size_t)(end - off);
            break;
        }
        const uint8_t *r = pd->buf + off;
        uint32_t type = get32(r);
        uint16_t size = get16(r + 6);
        uint64_t extra = 0;
        if (size < 8)
            return icpp_err_set(err, ICPP_EFORMAT, "corrupt record at offset %llu (type %u, size %u)",
                                (unsigned long long)off, type, size);
        if (type == REC_AUXTRACE && size >= 16)
            extra = get64(r + 8);           /* AUX area data follows the record */
        if (size > end - off || extra > end - off - size) {
            if (pd->clean)
                return icpp_err_set(err, ICPP_EFORMAT, "corrupt record at offset %llu (type %u, size %u): it runs past "
                                    "the end of the data section at %llu", (unsigned long long)off, type, size,
                                    (unsigned long long)end);
            pd->truncated = (size_t)(end - off);
            break;
        }
        if (type == REC_COMPRESSED || type == REC_COMPRESSED2)
            return icpp_err_set(err, ICPP_EUNSUPPORTED, "compressed records (perf record -z) at offset %llu: "
                                "record without -z", (unsigned long long)off);
        pd->st.records++;
        if (wanted(type)) {
            uint64_t t;
            if (record_time(pd, type, r, size, &t))
                key = t;
            uint64_t *m = &pd->sufmin[(off - pd->doff) / CHUNK];
            if (key < *m)
                *m = key;
            uint64_t poff;
            int keep = size >= 16 && ((type == PERF_RECORD_COMM && get32(r + 8) == get32(r + 12)) ||
                                      ((type == PERF_RECORD_MMAP || type == PERF_RECORD_MMAP2) &&
                                       exe_like(mmap_path(pd, off, &poff))));
            if (keep) {
                if (icpp_vec_reserve((void **)xv, &capx, *nx + 1, sizeof **xv, 256) < 0)
                    return icpp_err_set(err, ENOMEM, "out of memory");
                (*xv)[(*nx)++] = (pd_xent){key, off, 0};
            }
        }
        off += size + extra;
        icpp_fmap_release(&pd->map, off);
    }
    pd->dend = off;
    for (size_t c = pd->nchunks - 1; c-- > 0;)
        if (pd->sufmin[c + 1] < pd->sufmin[c])
            pd->sufmin[c] = pd->sufmin[c + 1];
    return 0;
}

/* Each exec's executable: the first file the new image maps (the kernel
 * maps the executable first, then the interpreter).  A backward pass over
 * the COMMs and executable MMAPs in time order keeps, per pid, the nearest
 * later file mapping and whether an exec follows.  The COMMs that give a
 * PROC record go to pd->comm_aux. */
static int find_executables(icpp_perfdata *pd, pd_xent *xv, size_t nx, icpp_err *err)
{
    icpp_hmap m;        /* pid -> (exec follows) << 63 | (path offset + 1) */
    icpp_hmap_init(&m);
    if (nx)
        qsort(xv, nx, sizeof *xv, cmp_xent);
    for (size_t i = nx; i-- > 0;) {
        pd_xent *e = &xv[i];
        const uint8_t *r = pd->buf + e->off;
        uint32_t type = get32(r);
        uint32_t pid = get32(r + 8);
        uint64_t *v = icpp_hmap_get(&m, pid, 0), cur = v ? *v : 0;
        if (type == PERF_RECORD_MMAP || type == PERF_RECORD_MMAP2) {
            uint64_t poff;
            mmap_path(pd, e->off, &poff);
            if (icpp_hmap_put(&m, pid, 0, (cur & AUX_EMIT) | (poff + 1)) < 0)
                goto oom;
        } else {
            int exec = !!(get16(r + 4) & PERF_RECORD_MISC_COMM_EXEC);
            if ((exec || !(cur & AUX_EMIT)) && icpp_hmap_put(&pd->comm_aux, e->off, 0, AUX_EMIT | (cur & ~AUX_EMIT)) < 0)
                goto oom;
            if (exec && icpp_hmap_put(&m, pid, 0, AUX_EMIT) < 0)
                goto oom;
        }
    }
    icpp_hmap_free(&m);
    return 0;
oom:
    icpp_hmap_free(&m);
    return icpp_err_set(err, ENOMEM, "out of memory");
}

/* ---- second pass: the reorder window ---- */

/* Read the records of the next CHUNK of the data section into the window. */
static int read_chunk(icpp_perfdata *pd, icpp_err *err)
{
    size_t c = (size_t)((pd->cur - pd->doff) / CHUNK);
    uint64_t bound = pd->doff + (uint64_t)(c + 1) * CHUNK;
    while (pd->cur < pd->dend && pd->cur < bound) {
        const uint8_t *r = pd->buf + pd->cur;
        uint32_t type = get32(r);
        uint16_t size = get16(r + 6);
        uint64_t extra = type == REC_AUXTRACE && size >= 16 ? get64(r + 8) : 0;
        if (size < 8 || size > pd->dend - pd->cur || extra > pd->dend - pd->cur - size)
            return icpp_err_set(err, ICPP_EFORMAT, "record at offset %llu changed while the file was read",
                                (unsigned long long)pd->cur);
        if (type == REC_FINISHED_ROUND)
            icpp_order_round(&pd->ord);     /* perf record wrote every CPU's buffer (lib/order.h) */
        if (wanted(type)) {
            uint64_t t;
            if (record_time(pd, type, r, size, &t))
                pd->key = t;
            int rc = icpp_order_push(&pd->ord, pd->key, pd->cur, 0, err);
            pd->st.held_max = pd->ord.held_max;
            pd->st.spilled = pd->ord.spilled;
            if (rc < 0)
                return -1;
        }
        pd->cur += size + extra;
    }
    /* Both bounds hold for every record not read yet: the first pass's
     * (exact; stuck low by a record perf wrote at the end with time 0, such
     * as LOST_SAMPLES) and perf's rounds (those records come out late, as
     * in perf report). */
    pd->safe = pd->cur >= pd->dend || c + 1 >= pd->nchunks ? UINT64_MAX : pd->sufmin[c + 1];
    if (pd->ord.limit > pd->safe)
        pd->safe = pd->ord.limit;
    icpp_fmap_release(&pd->map, pd->cur > RELEASE_LAG ? pd->cur - RELEASE_LAG : 0);
    return 0;
}

/* The next record in time order: 1, 0 at the end, negative on error.  A
 * record is given once no record still unread can come before it. */
static int next_ent(icpp_perfdata *pd, icpp_order_ent *out, icpp_err *err)
{
    for (;;) {
        int rc = icpp_order_next(&pd->ord, pd->safe, out, NULL, err);
        if (rc != 0)
            return rc;
        if (pd->cur >= pd->dend)
            return 0;
        if (read_chunk(pd, err) < 0)
            return -1;
    }
}

/* Open the file m holds; m stays the caller's on failure. */
static icpp_perfdata *pd_open(const icpp_fmap *m, icpp_err *err)
{
    const uint8_t *buf = m->p;
    size_t len = m->len;
    if (len >= 8 && get64(buf) == MAGIC2_SWAPPED) {
        icpp_err_set(err, ICPP_EUNSUPPORTED, "a perf.data of a big-endian machine: not supported");
        return NULL;
    }
    if (!icpp_perfdata_is(buf, len)) {
        icpp_err_set(err, ICPP_EFORMAT, len >= 8 && !memcmp(buf, "PERFFILE", 8)
                                            ? "a perf.data of the first format version (PERFFILE): too old"
                                            : "not a perf.data file");
        return NULL;
    }
    if (len < 16) {
        icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (in the header)", len);
        return NULL;
    }
    uint64_t hsize = get64(buf + 8);
    if (hsize == PIPE_HDR_SIZE) {
        icpp_err_set(err, ICPP_EUNSUPPORTED, "a perf.data written to a pipe (perf record -o -): not supported; "
                                             "record to a file (perf record -o FILE)");
        return NULL;
    }
    if (hsize != HDR_SIZE && hsize != HDR_SIZE_OLD) {
        icpp_err_set(err, ICPP_EFORMAT, "corrupt header: header size %llu (expected %d)", (unsigned long long)hsize,
                     HDR_SIZE);
        return NULL;
    }
    if (len < hsize) {
        icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (in the header)", len);
        return NULL;
    }
    icpp_perfdata *pd = calloc(1, sizeof *pd);
    if (!pd) {
        icpp_err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    pd->map = *m;
    pd->buf = buf;
    pd->len = len;
    icpp_order_init(&pd->ord, ICPP_ORDER_SPILL);
    icpp_hmap_init(&pd->comm_aux);
    uint8_t h[HDR_SIZE] = {0};
    memcpy(h, buf, (size_t)hsize);
    uint64_t doff = get64(h + 40), dsize = get64(h + 48);
    if (read_attrs(pd, h, err) < 0 || check_attrs(pd, err) < 0)
        goto fail;
    if (doff < hsize || doff > len) {
        if (doff > len)
            icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (the data section starts at %llu)", len,
                         (unsigned long long)doff);
        else
            icpp_err_set(err, ICPP_EFORMAT, "corrupt header: the data section starts at %llu, inside the header",
                         (unsigned long long)doff);
        goto fail;
    }
    /* perf writes the data size and the feature sections when it finishes;
     * a killed perf leaves 0: read up to the end of the file. */
    pd->clean = dsize != 0;
    uint64_t dend = dsize ? doff + dsize : len;
    if (dsize && !in_file(pd, doff, dsize)) {
        icpp_err_set(err, ICPP_EFORMAT, "truncated at offset %zu (the data section ends at %llu)", len,
                     (unsigned long long)(doff + dsize));
        goto fail;
    }
    if (pd->clean && hsize == HDR_SIZE && read_features(pd, h, dend, err) < 0)
        goto fail;
    pd_xent *xv = NULL;
    size_t nx = 0;
    int rc = scan_data(pd, doff, dend, &xv, &nx, err);
    if (rc == 0)
        rc = find_executables(pd, xv, nx, err);
    free(xv);
    if (rc < 0)
        goto fail;
    /* The second pass starts at the data section (icpp_perfdata_next). */
    icpp_fmap_rewind(&pd->map);
    pd->cur = doff;
    return pd;
fail:
    memset(&pd->map, 0, sizeof pd->map);        /* the caller's */
    icpp_perfdata_close(pd);
    return NULL;
}

icpp_perfdata *icpp_perfdata_mem(const uint8_t *buf, size_t len, icpp_err *err)
{
    icpp_fmap m;
    icpp_fmap_mem(&m, buf, len);
    return pd_open(&m, err);
}

/* The file is mapped, not read: two passes over it (lib/fmap.h) keep only a
 * window of it in memory. */
icpp_perfdata *icpp_perfdata_open(const char *path, icpp_err *err)
{
    icpp_fmap m;
    if (icpp_fmap_open(&m, path, err) < 0)
        return NULL;
    icpp_perfdata *pd = pd_open(&m, err);
    if (!pd) {
        icpp_fmap_close(&m);
        icpp_err_prefix(err, "%s", path);
        return NULL;
    }
    return pd;
}

int icpp_perfdata_set_window(icpp_perfdata *pd, size_t records)
{
    if (pd->cur != pd->doff)
        return -EINVAL;
    return icpp_order_set_window(&pd->ord, records);
}

void icpp_perfdata_close(icpp_perfdata *pd)
{
    if (!pd)
        return;
    free(pd->attrs);
    free(pd->ids);
    free(pd->bids);
    free(pd->sufmin);
    icpp_order_free(&pd->ord);
    icpp_hmap_free(&pd->comm_aux);
    free(pd->command);
    free(pd->kernel);
    free(pd->host);
    free(pd->u64);
    icpp_hmap_free(&pd->seen);
    icpp_fmap_close(&pd->map);
    free(pd);
}

size_t icpp_perfdata_truncated(const icpp_perfdata *pd) { return pd->truncated; }
void icpp_perfdata_position(const icpp_perfdata *pd, size_t *done, size_t *len)
{
    *done = (size_t)(pd->cur > pd->doff ? pd->cur : pd->doff);
    *len = pd->len;
}
int icpp_perfdata_clean_end(const icpp_perfdata *pd) { return pd->clean; }
const icpp_perfdata_stats *icpp_perfdata_stats_get(const icpp_perfdata *pd) { return &pd->st; }

/* ---- records ---- */

/* The header's records: INFO, then one EVENT per attribute.  0 when done. */
static int header_record(icpp_perfdata *pd, icpp_srec *rec)
{
    for (;;) {
        uint32_t s = pd->stage++;
        rec->type = ICPP_SREC_INFO;
        switch (s) {
        case 0: rec->u.info.key = "tool"; rec->u.info.val = "perf"; return 1;
        case 1: if (!pd->command) continue; rec->u.info.key = "command"; rec->u.info.val = pd->command; return 1;
        case 2: if (!pd->kernel) continue; rec->u.info.key = "kernel"; rec->u.info.val = pd->kernel; return 1;
        case 3: if (!pd->host) continue; rec->u.info.key = "host"; rec->u.info.val = pd->host; return 1;
        case 4: rec->u.info.key = "startstack"; rec->u.info.val = "unknown"; return 1;
        default:
            if (s - 5 >= pd->nattrs) {
                pd->stage--;
                return 0;
            }
            const pd_attr *a = &pd->attrs[s - 5];
            rec->type = ICPP_SREC_EVENT;
            rec->u.event.id = s - 5;
            rec->u.event.name = a->name;
            rec->u.event.type = a->type;
            rec->u.event.config = a->config;
            rec->u.event.period = a->period;
            rec->u.event.freq = a->freq;
            rec->u.event.precise = a->precise;
            return 1;
        }
    }
}

static int need_u64(icpp_perfdata *pd, size_t n)
{
    if (n > pd->capu64) {
        uint64_t *nv = realloc(pd->u64, n * sizeof *nv);
        if (!nv)
            return -1;
        pd->u64 = nv;
        pd->capu64 = n;
    }
    return 0;
}

/* "corrupt record at offset N: ..." */
static int bad_record(icpp_err *err, uint64_t off, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad_record(icpp_err *err, uint64_t off, const char *fmt, ...)
{
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    return icpp_err_set(err, ICPP_EFORMAT, "corrupt record at offset %llu: %s", (unsigned long long)off, m);
}
#define BAD(off, ...) bad_record(err, (off), __VA_ARGS__)

/* A SAMPLE record to rec: 1, 0 if dropped, negative on error. */
static int on_sample(icpp_perfdata *pd, uint64_t off, uint16_t misc, const uint8_t *p, size_t n, icpp_srec *rec,
                     icpp_err *err)
{
    int ai = sample_attr(pd, p, n);
    if (ai == -2)
        return BAD(off, "sample of %zu bytes", n + 8);
    if (ai < 0) {
        pd->st.unknown_id++;
        return 0;
    }
    const pd_attr *a = &pd->attrs[ai];
    const icpp_perfrec_layout *l = &a->lay;
    icpp_perfrec_sample s;
    if (icpp_perfrec_sample_parse(l, p, n, &s) < 0)
        return BAD(off, "sample of %zu bytes is shorter than its layout (sample_type %#llx)", n + 8,
                   (unsigned long long)l->sample_type);
    int has_ip = !!(s.have & PERF_SAMPLE_IP);
    unsigned mode = misc & PERF_RECORD_MISC_CPUMODE_MASK;
    int kernel = mode == PERF_RECORD_MISC_KERNEL || mode == PERF_RECORD_MISC_HYPERVISOR ||
                 (mode == PERF_RECORD_MISC_CPUMODE_UNKNOWN && has_ip && s.ip >= 0xffff800000000000ull);
    if (mode == PERF_RECORD_MISC_GUEST_KERNEL || mode == PERF_RECORD_MISC_GUEST_USER) {
        pd->st.noregs++;
        return 0;
    }
    uint64_t ip = s.ip, sp = 0, bp = 0, rip = 0;
    int has_rip = 0, ok;
    int user = icpp_perfrec_reg(s.uregs, l->regs_user, REG_SP, &sp) &&
               icpp_perfrec_reg(s.uregs, l->regs_user, REG_BP, &bp);
    if (user) {
        has_rip = icpp_perfrec_reg(s.uregs, l->regs_user, REG_IP, &rip);
    } else if (!kernel && icpp_perfrec_reg(s.iregs, l->regs_intr, REG_SP, &sp) &&
               icpp_perfrec_reg(s.iregs, l->regs_intr, REG_BP, &bp)) {
        has_rip = icpp_perfrec_reg(s.iregs, l->regs_intr, REG_IP, &rip);
    } else {
        pd->st.noregs++;
        return 0;
    }
    if (kernel) {
        /* In the kernel on behalf of the user context the user registers hold. */
        ok = user && has_rip;
        ip = rip;
    } else {
        ok = has_ip || has_rip;
        if (!has_ip || (a->precise >= 2 && has_rip))
            ip = rip;
    }
    if (!ok) {
        pd->st.noregs++;
        return 0;
    }
    rec->type = ICPP_SREC_SAMPLE;
    rec->u.sample.pid = s.pid;
    rec->u.sample.tid = s.tid;
    rec->u.sample.event = (uint32_t)ai;
    rec->u.sample.time = s.time;
    rec->u.sample.ip = ip;
    rec->u.sample.sp = sp;
    rec->u.sample.bp = bp;
    if ((s.have & PERF_SAMPLE_STACK_USER) && user) {
        /* A --call-graph dwarf recording: the extras of an icpp-sample --validate one. */
        size_t nr = (size_t)__builtin_popcountll(l->regs_user);
        if (need_u64(pd, s.nchain + nr + 1) < 0)
            return icpp_err_set(err, ENOMEM, "out of memory");
        size_t k = icpp_perfrec_chain(&s, 1, pd->u64, MAX_CHAIN);
        for (size_t i = 0; i < nr; i++)
            pd->u64[k + i] = icpp_perfrec_u64(s.uregs + 8 * i);
        icpp_sample_extra *x = &rec->u.sample.x;
        x->nchain = (uint32_t)k;
        x->chain = pd->u64;
        x->nregs = (uint32_t)nr;
        x->regs = pd->u64 + k;
        x->regs_mask = l->regs_user;
        x->stack_size = (uint32_t)(s.stack_size < UINT32_MAX ? s.stack_size : UINT32_MAX);
        x->stack = s.stack;
    }
    pd->st.samples++;
    pd->st.kernel += kernel;
    return 1;
}

static int mark_seen(icpp_perfdata *pd, uint32_t pid, icpp_err *err)
{
    if (icpp_hmap_put(&pd->seen, pid, 0, 1) < 0)
        return icpp_err_set(err, ENOMEM, "out of memory");
    return 0;
}

/* One data record to rec: 1, 0 if it gives nothing, negative on error. */
static int on_record(icpp_perfdata *pd, uint64_t off, icpp_srec *rec, icpp_err *err)
{
    const uint8_t *r = pd->buf + off, *p = r + 8;
    uint32_t type = get32(r);
    uint16_t misc = get16(r + 4), size = get16(r + 6);
    size_t n = size - 8u;
    memset(rec, 0, sizeof *rec);
    switch (type) {
    case PERF_RECORD_SAMPLE:
        return on_sample(pd, off, misc, p, n, rec, err);
    case PERF_RECORD_MMAP:
    case PERF_RECORD_MMAP2: {
        uint64_t poff;
        if (n < (type == PERF_RECORD_MMAP ? 33u : 65u) || !mmap_path(pd, off, &poff))
            return BAD(off, "mmap record of %u bytes without a terminated file name", size);
        unsigned mode = misc & PERF_RECORD_MISC_CPUMODE_MASK;
        uint32_t pid = get32(p);
        if (pid == UINT32_MAX || mode == PERF_RECORD_MISC_KERNEL || mode == PERF_RECORD_MISC_GUEST_KERNEL ||
            mode == PERF_RECORD_MISC_GUEST_USER)
            return 0;                       /* the kernel's own mappings, or a guest's */
        const char *path = (const char *)pd->buf + poff;
        uint32_t prot;
        if (type == PERF_RECORD_MMAP) {
            prot = (misc & PERF_RECORD_MISC_MMAP_DATA) ? PROT_READ | PROT_WRITE : PROT_READ | PROT_EXEC;
        } else {
            prot = get32(p + 56) & 7;
        }
        rec->type = ICPP_SREC_MMAP;
        rec->u.mmap.pid = pid;
        rec->u.mmap.start = get64(p + 8);
        rec->u.mmap.len = get64(p + 16);
        rec->u.mmap.pgoff = get64(p + 24);
        rec->u.mmap.prot = prot;
        if (!strncmp(path, "//anon", 6) || !strncmp(path, "/anon_hugepage", 14))
            path = "";
        rec->u.mmap.path = path;
        if (type == PERF_RECORD_MMAP2 && (misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) {
            uint8_t bl = p[32];
            rec->u.mmap.build_id.len = bl <= 20 ? bl : 20;
            memcpy(rec->u.mmap.build_id.bytes, p + 36, rec->u.mmap.build_id.len);
        } else if (path[0]) {
            const icpp_build_id *b = bid_of_path(pd, path);
            if (b)
                rec->u.mmap.build_id = *b;
        }
        if (!(prot & PROT_EXEC))
            pd->st.data_mmaps++;
        return 1;
    }
    case PERF_RECORD_COMM: {
        if (n < 8)
            return BAD(off, "comm record of %u bytes", size);
        uint32_t pid = get32(p), tid = get32(p + 4);
        int exec = !!(misc & PERF_RECORD_MISC_COMM_EXEC);
        const uint64_t *aux = pid == tid ? icpp_hmap_get(&pd->comm_aux, off, 0) : NULL;
        if (!aux || (!exec && icpp_hmap_get(&pd->seen, pid, 0)))
            return 0;
        uint64_t poff = *aux & ~AUX_EMIT;
        rec->type = ICPP_SREC_PROC;
        rec->u.proc.pid = pid;
        rec->u.proc.startstack = 0;         /* unknown: lib/basevote.h infers it */
        rec->u.proc.path = poff ? (const char *)pd->buf + poff - 1 : "";
        rec->u.proc.flags = exec ? ICPP_PROC_EXEC : 0;
        return mark_seen(pd, pid, err) < 0 ? -1 : 1;
    }
    case PERF_RECORD_FORK: {
        if (n < 16)
            return BAD(off, "fork record of %u bytes", size);
        uint32_t pid = get32(p), ppid = get32(p + 4), tid = get32(p + 8);
        if (pid != tid || pid == ppid)
            return 0;                       /* a new thread, not a new process */
        rec->type = ICPP_SREC_PROC;
        rec->u.proc.pid = pid;
        rec->u.proc.ppid = ppid;
        rec->u.proc.path = "";
        return mark_seen(pd, pid, err) < 0 ? -1 : 1;
    }
    case PERF_RECORD_EXIT:
        if (n < 16)
            return BAD(off, "exit record of %u bytes", size);
        rec->type = ICPP_SREC_EXIT;
        rec->u.exit.pid = get32(p);
        rec->u.exit.tid = get32(p + 8);
        return 1;
    case PERF_RECORD_LOST:
        if (n < 16)
            return BAD(off, "lost record of %u bytes", size);
        rec->type = ICPP_SREC_LOST;
        rec->u.lost.count = get64(p + 8);
        return 1;
    case PERF_RECORD_LOST_SAMPLES:
        if (n < 8)
            return BAD(off, "lost-samples record of %u bytes", size);
        rec->type = ICPP_SREC_LOST;
        rec->u.lost.count = get64(p);
        return 1;
    default:
        return 0;
    }
}

int icpp_perfdata_next(icpp_perfdata *pd, icpp_srec *rec, icpp_err *err)
{
    memset(rec, 0, sizeof *rec);
    if (header_record(pd, rec))
        return 1;
    icpp_order_ent e;               /* (key, file offset) */
    int rc;
    while ((rc = next_ent(pd, &e, err)) > 0) {
        rc = on_record(pd, e.seq, rec, err);
        if (rc != 0)
            return rc;
    }
    return rc;
}
