/* fmap.c -- a file mapped read-only for sequential passes, with the pages behind the cursor released. */
#include "fmap.h"

#include "fsafe.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define RELEASE_STEP ((size_t)4 << 20)     /* release in steps of this many bytes */

int icpp_fmap_open(icpp_fmap *m, const char *path, icpp_err *err)
{
    memset(m, 0, sizeof *m);
    m->p = (const uint8_t *)"";
    /* The input rule: a FIFO or device is refused, never waited on. */
    struct stat st;
    int fd = icpp_fs_open_input(path, &st, err);
    if (fd < 0)
        return fd;
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return icpp_err_set(err, e, "%s: cannot map %lld bytes: %s", path, (long long)st.st_size, strerror(e));
        }
        madvise(p, (size_t)st.st_size, MADV_SEQUENTIAL);
        m->map = p;
        m->p = p;
        m->len = (size_t)st.st_size;
    }
    close(fd);
    return 0;
}

void icpp_fmap_mem(icpp_fmap *m, const uint8_t *buf, size_t len)
{
    memset(m, 0, sizeof *m);
    m->p = buf;
    m->len = len;
}

void icpp_fmap_release(icpp_fmap *m, size_t pos)
{
    if (!m->map || pos > m->len || pos < m->released + RELEASE_STEP)
        return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t to = pos / page * page;
    /* The pages stay in the page cache: dropping them only unmaps them. */
    madvise((uint8_t *)m->map + m->released, to - m->released, MADV_DONTNEED);
    m->released = to;
}

void icpp_fmap_rewind(icpp_fmap *m)
{
    m->released = 0;
}

void icpp_fmap_close(icpp_fmap *m)
{
    if (m->map)
        munmap(m->map, m->len);
    memset(m, 0, sizeof *m);
}
