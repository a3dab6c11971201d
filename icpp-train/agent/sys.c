/* sys.c -- /proc readers on raw system calls: no malloc, no libc, signal-safe. */
#include "sys.h"

#include <fcntl.h>
#include <sys/mman.h>

/* Compiled with the recorder's flags (-mgeneral-regs-only -fno-builtin
 * -fno-tree-loop-distribute-patterns): no call may leave this file except
 * raw syscalls, because it runs inside the recorder on a thread's first
 * entry, when any libc function may be patched. */

typedef struct rd {
    int  fd;
    int  pos, len;
    char buf[2048];
} rd;

static int rd_open(rd *r, const char *path)
{
    long fd = icpp_sys6(ICPP_SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return (int)fd;
    r->fd = (int)fd;
    r->pos = r->len = 0;
    return 0;
}

static void rd_close(rd *r)
{
    icpp_sys3(ICPP_SYS_close, r->fd, 0, 0);
}

/* Next byte, or -1 at end of file or on error. */
static int rd_getc(rd *r)
{
    if (r->pos == r->len) {
        long n;
        do
            n = icpp_sys3(ICPP_SYS_read, r->fd, r->buf, sizeof r->buf);
        while (n == -4 /* EINTR */);
        if (n <= 0)
            return -1;
        r->pos = 0;
        r->len = (int)n;
    }
    return (unsigned char)r->buf[r->pos++];
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parse hex digits; *c holds the first non-hex character on return. */
static uint64_t rd_hex(rd *r, int *c)
{
    uint64_t v = 0;
    int ch, d;
    while ((ch = rd_getc(r)) >= 0 && (d = hexval(ch)) >= 0)
        v = v << 4 | (uint64_t)d;
    *c = ch;
    return v;
}

static int rd_skip_line(rd *r, int c)
{
    while (c >= 0 && c != '\n')
        c = rd_getc(r);
    return c;
}

char *icpp_agent_utoa(char *p, uint64_t v)
{
    char t[24];
    int n = 0;
    do {
        t[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = t[--n];
    *p = 0;
    return p;
}

int icpp_agent_maps_each(icpp_agent_maps_cb cb, void *ctx)
{
    rd r;
    int e = rd_open(&r, "/proc/self/maps");
    if (e < 0)
        return e;
    for (;;) {
        icpp_agent_maprow row;
        int c;
        row.start = rd_hex(&r, &c);
        if (c != '-')
            break;
        row.end = rd_hex(&r, &c);
        if (c != ' ')
            break;
        row.prot = 0;
        if (rd_getc(&r) == 'r')
            row.prot |= PROT_READ;
        if (rd_getc(&r) == 'w')
            row.prot |= PROT_WRITE;
        if (rd_getc(&r) == 'x')
            row.prot |= PROT_EXEC;
        c = rd_skip_line(&r, rd_getc(&r));
        if (cb(&row, ctx) || c < 0)
            break;
    }
    rd_close(&r);
    return 0;
}

typedef struct find_ctx {
    uint64_t          addr;
    icpp_agent_maprow *out;
    int               found;
} find_ctx;

static int find_cb(const icpp_agent_maprow *row, void *p)
{
    find_ctx *f = p;
    if (f->addr >= row->start && f->addr < row->end) {
        *f->out = *row;
        f->found = 1;
        return 1;
    }
    return row->start > f->addr;
}

int icpp_agent_maps_find(uint64_t addr, icpp_agent_maprow *out)
{
    find_ctx f = { addr, out, 0 };
    if (icpp_agent_maps_each(find_cb, &f) < 0)
        return -1;
    return f.found ? 0 : -1;
}

uint64_t icpp_agent_startstack(void)
{
    rd r;
    if (rd_open(&r, "/proc/self/stat") < 0)
        return 0;
    /* The comm field (2) may hold spaces and ')': fields restart after the
     * last ')' in the line.  Read the whole line, remembering that point. */
    char line[1024];
    int n = 0, c, close_at = -1;
    while (n < (int)sizeof line - 1 && (c = rd_getc(&r)) >= 0 && c != '\n') {
        if (c == ')')
            close_at = n;
        line[n++] = (char)c;
    }
    rd_close(&r);
    if (close_at < 0)
        return 0;
    /* After ')' comes " S ..." = field 3; startstack is field 28. */
    int field = 2, i = close_at + 1;
    uint64_t v = 0;
    while (i < n) {
        while (i < n && line[i] == ' ')
            i++;
        field++;
        if (field == 28) {
            while (i < n && line[i] >= '0' && line[i] <= '9')
                v = v * 10 + (uint64_t)(line[i++] - '0');
            return v;
        }
        while (i < n && line[i] != ' ')
            i++;
    }
    return 0;
}

int icpp_agent_list_threads(int *tids, int max)
{
    long fd = icpp_sys6(ICPP_SYS_openat, AT_FDCWD, (long)"/proc/self/task",
                        O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, 0, 0);
    if (fd < 0)
        return (int)fd;
    char buf[2048] __attribute__((aligned(8)));
    int count = 0;
    for (;;) {
        long n = icpp_sys3(ICPP_SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
            unsigned short reclen = *(unsigned short *)(buf + off + 16);
            const char *name = buf + off + 19;
            if (name[0] >= '0' && name[0] <= '9') {
                int tid = 0;
                for (const char *c = name; *c >= '0' && *c <= '9'; c++)
                    tid = tid * 10 + (*c - '0');
                if (tids && count < max)
                    tids[count] = tid;
                count++;
            }
            off += reclen;
        }
    }
    icpp_sys3(ICPP_SYS_close, fd, 0, 0);
    return count;
}
