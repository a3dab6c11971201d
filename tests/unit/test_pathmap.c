/* test_pathmap.c -- path map: building, encode/decode round trip, merge, corruption, statistics. */
#include "check.h"
#include "codec.h"
#include "pathmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static icpp_build_id bid(uint8_t seed)
{
    icpp_build_id b = {20, {0}};
    for (int i = 0; i < 20; i++)
        b.bytes[i] = (uint8_t)(seed + i);
    return b;
}

/* main -> a -> d, main -> b -> d (d at the same height: ambiguous), main -> b -> e */
static icpp_pathmap *sample_map(uint8_t seed, uint64_t scale)
{
    icpp_pathmap *pm = icpp_pathmap_new();
    icpp_build_id b0 = bid(seed), b1 = bid(99);
    uint32_t m0, m1, fmain, fa, fb, fd, fe, n1, n2, n3, n4, n5, n6;
    icpp_pathmap_add_module(pm, "/bin/prog", &b0, 2, &m0);
    icpp_pathmap_add_module(pm, "/lib/libc.so.6", &b1, 3, &m1);
    icpp_pathmap_set_main(pm, m0);
    icpp_pathmap_add_func(pm, m0, 0x1100, "main", &fmain);
    icpp_pathmap_add_func(pm, m0, 0x1200, "a", &fa);
    icpp_pathmap_add_func(pm, m0, 0x1300, "b", &fb);
    icpp_pathmap_add_func(pm, m1, 0x9000, "d", &fd);
    icpp_pathmap_add_func(pm, m0, 0x1500, "e", &fe);
    icpp_pathmap_child(pm, 0, fmain, &n1);
    icpp_pathmap_child(pm, n1, fa, &n2);
    icpp_pathmap_child(pm, n2, fd, &n3);
    icpp_pathmap_child(pm, n1, fb, &n4);
    icpp_pathmap_child(pm, n4, fd, &n5);
    icpp_pathmap_child(pm, n4, fe, &n6);
    icpp_pathmap_add_count(pm, n1, 1 * scale);
    icpp_pathmap_add_height(pm, n1, 264, 1 * scale);
    icpp_pathmap_add_count(pm, n2, 10 * scale);
    icpp_pathmap_add_height(pm, n2, 296, 10 * scale);
    icpp_pathmap_add_count(pm, n3, 100 * scale);
    icpp_pathmap_add_height(pm, n3, 328, 100 * scale);
    icpp_pathmap_add_site(pm, n3, m0, 0x1234, 100 * scale);
    icpp_pathmap_add_count(pm, n4, 5 * scale);
    icpp_pathmap_add_height(pm, n4, 296, 5 * scale);
    icpp_pathmap_add_count(pm, n5, 50 * scale);
    icpp_pathmap_add_height(pm, n5, 328, 40 * scale);
    icpp_pathmap_add_height(pm, n5, 344, 10 * scale);   /* alloca in b: two heights */
    icpp_pathmap_add_site(pm, n5, m0, 0x1334, 50 * scale);
    icpp_pathmap_add_count(pm, n6, 7 * scale);
    icpp_pathmap_add_height(pm, n6, -8, 7 * scale);     /* negative heights must survive */
    icpp_pathmap_set_meta(pm, "program", "/bin/prog --x");
    return pm;
}

static int same_map(const icpp_pathmap *a, const icpp_pathmap *b)
{
    if (icpp_pathmap_nnodes(a) != icpp_pathmap_nnodes(b) || icpp_pathmap_nfuncs(a) != icpp_pathmap_nfuncs(b) ||
        icpp_pathmap_nmodules(a) != icpp_pathmap_nmodules(b))
        return 0;
    for (uint32_t i = 1; i < icpp_pathmap_nnodes(a); i++) {
        const icpp_pm_node *x = icpp_pathmap_node(a, i), *y = icpp_pathmap_node(b, i);
        if (x->parent != y->parent || x->func != y->func || x->count != y->count || x->nheights != y->nheights ||
            x->nsites != y->nsites || x->depth != y->depth)
            return 0;
        for (uint32_t k = 0; k < x->nheights; k++)
            if (x->heights[k].height != y->heights[k].height || x->heights[k].count != y->heights[k].count)
                return 0;
        for (uint32_t k = 0; k < x->nsites; k++)
            if (x->sites[k].addr != y->sites[k].addr || x->sites[k].count != y->sites[k].count)
                return 0;
    }
    return 1;
}

int main(void)
{
    icpp_err err = {0};
    icpp_pathmap *pm = sample_map(1, 1);

    /* Paths. */
    uint32_t path[8];
    uint32_t d = icpp_pathmap_path(pm, 5, path, 8);
    CHECK(d == 3 && !strcmp(icpp_pathmap_func(pm, path[0])->name, "main") &&
              !strcmp(icpp_pathmap_func(pm, path[1])->name, "b") && !strcmp(icpp_pathmap_func(pm, path[2])->name, "d"),
          "path of node 5");

    /* Round trip. */
    uint8_t *buf;
    size_t len;
    CHECK(icpp_pathmap_encode(pm, &buf, &len, &err) == 0, "encode: %s", err.msg);
    icpp_pathmap *back = icpp_pathmap_decode(buf, len, &err);
    CHECK(back && same_map(pm, back), "round trip differs: %s", err.msg);
    CHECK(back && !strcmp(icpp_pathmap_meta(back, "program"), "/bin/prog --x"), "metadata");
    icpp_pathmap_free(back);

    /* Every truncation and every single-bit flip is an error, never a crash. */
    int undetected = 0;
    for (size_t cut = 0; cut < len; cut++) {
        icpp_pathmap *t = icpp_pathmap_decode(buf, cut, &err);
        if (t)
            undetected++;
        icpp_pathmap_free(t);
    }
    CHECK(undetected == 0, "%d truncations accepted", undetected);
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1 << bit);
            icpp_pathmap *t = icpp_pathmap_decode(buf, len, &err);
            if (t)
                undetected++;
            icpp_pathmap_free(t);
            buf[i] ^= (uint8_t)(1 << bit);
        }
    CHECK(undetected == 0, "%d bit flips accepted", undetected);
    /* The same flips with the checksum fixed up, so the body parser itself
     * sees them (ASan/UBSan builds catch what a crash check would miss). */
    size_t decoded = 0;
    for (size_t i = 24; i + 4 < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1 << bit);
            uint32_t c = icpp_crc32(0, buf, len - 4);
            for (int k = 0; k < 4; k++)
                buf[len - 4 + k] = (uint8_t)(c >> (8 * k));
            icpp_pathmap *t2 = icpp_pathmap_decode(buf, len, &err);
            decoded += t2 != NULL;
            icpp_pathmap_free(t2);
            buf[i] ^= (uint8_t)(1 << bit);
        }
    uint32_t c0 = icpp_crc32(0, buf, len - 4);
    for (int k = 0; k < 4; k++)
        buf[len - 4 + k] = (uint8_t)(c0 >> (8 * k));
    printf("body bit flips with a valid checksum: %zu of %zu decoded (the rest rejected)\n", decoded,
           (len - 28) * 8);
    buf[8] = 7;   /* version */
    icpp_pathmap *t = icpp_pathmap_decode(buf, len, &err);
    CHECK(!t && err.code == ICPP_EVERSION && strstr(err.msg, "version 7"), "version: %s", err.msg);
    free(buf);

    /* Statistics: contexts (node,height): main 264, a 296, a>d 328, b 296, b>d 328, b>d 344, e -8.
     * CID (d,328) is shared by a>d and b>d; (a,296) and (b,296) are different functions. */
    icpp_pm_stats st;
    CHECK(icpp_pathmap_stats(pm, &st, &err) == 0, "stats");
    CHECK(st.paths == 6 && st.contexts == 7 && st.cids == 6, "paths %zu contexts %zu cids %zu", st.paths,
          st.contexts, st.cids);
    CHECK(st.unique_contexts == 5 && st.unique_paths == 4, "unique contexts %zu paths %zu", st.unique_contexts,
          st.unique_paths);
    CHECK(st.calls == 173 && st.unique_calls == 173 - 140, "calls %llu unique %llu", (unsigned long long)st.calls,
          (unsigned long long)st.unique_calls);
    CHECK(st.hist_paths[0] == 5 && st.hist_paths[1] == 2 && st.hist_calls[1] == 140, "histogram");
    CHECK(st.max_depth == 3, "max depth");

    /* Merge: counts add, structure stays. */
    icpp_pathmap *two = sample_map(1, 2);
    CHECK(icpp_pathmap_merge(two, pm, &err) == 0, "merge: %s", err.msg);
    icpp_pathmap *three = sample_map(1, 3);
    CHECK(same_map(two, three), "merge of x1 into x2 is not x3");
    /* Merging into an empty map gives the same map. */
    icpp_pathmap *empty = icpp_pathmap_new();
    CHECK(icpp_pathmap_merge(empty, pm, &err) == 0 && same_map(empty, pm), "merge into empty");
    /* Another main binary is refused and dst is untouched. */
    icpp_pathmap *other = sample_map(50, 1);
    CHECK(icpp_pathmap_merge(two, other, &err) < 0 && err.code == ICPP_EMISMATCH && strstr(err.msg, "--fresh"),
          "mismatch: %s", err.msg);
    CHECK(same_map(two, three), "refused merge changed the map");

    /* Files: atomic write; an unwritable path fails and keeps nothing half-written. */
    char dir[] = "/tmp/icpp-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char file[256];
    snprintf(file, sizeof file, "%s/m.icppmap", dir);
    CHECK(icpp_pathmap_write(pm, file, &err) == 0, "write: %s", err.msg);
    icpp_pathmap *rd = icpp_pathmap_read(file, &err);
    CHECK(rd && same_map(rd, pm), "read back: %s", err.msg);
    icpp_pathmap_free(rd);
    CHECK(icpp_pathmap_write(pm, "/nonexistent-dir/x.icppmap", &err) < 0 && strstr(err.msg, "/nonexistent-dir"),
          "unwritable: %s", err.msg);
    CHECK(icpp_pathmap_read("/etc/hostname", &err) == NULL && strstr(err.msg, "bad magic"), "not a map: %s", err.msg);
    /* A device given as the output is written into, never replaced: as root a
     * rename over /dev/null would turn it into a regular file. */
    struct stat dn;
    if (stat("/dev/null", &dn) == 0 && S_ISCHR(dn.st_mode)) {
        CHECK(icpp_pathmap_write(pm, "/dev/null", &err) == 0, "write to /dev/null: %s", err.msg);
        CHECK(stat("/dev/null", &dn) == 0 && S_ISCHR(dn.st_mode), "/dev/null is no longer a device!");
    }
    /* A symlink as the output: refused (docs/file-safety.md), the map it
     * points to and the link itself unchanged. */
    char link[300];
    snprintf(link, sizeof link, "%s/link.icppmap", dir);
    CHECK(symlink(file, link) == 0, "symlink");
    struct stat before, after, ls;
    stat(file, &before);
    CHECK(icpp_pathmap_write(pm, link, &err) == -ELOOP && strstr(err.msg, "symbolic link"),
          "write through a link: %s", err.msg);
    CHECK(stat(file, &after) == 0 && after.st_ino == before.st_ino && after.st_mtime == before.st_mtime,
          "the link's target was replaced");
    CHECK(lstat(link, &ls) == 0 && S_ISLNK(ls.st_mode), "the symlink was replaced by a file");
    unlink(link);
    unlink(file);
    rmdir(dir);

    /* A node with 200,000 heights and as many call sites, each listed twice:
     * decoding merges the repeats (counts add, first-seen order kept) and
     * stays linear -- it used to scan every node's list per entry, which a
     * crafted file turned into hours (the test's timeout would catch that). */
    {
        enum { N = 200000 };
        icpp_pm_height *hs = malloc(2 * N * sizeof *hs);
        icpp_pm_site *ss = malloc(2 * N * sizeof *ss);
        for (uint32_t i = 0; i < 2 * N; i++) {
            hs[i] = (icpp_pm_height){(int64_t)(i % N) * 8 - 64, 1 + (i >= N), 0};
            ss[i] = (icpp_pm_site){0, 0x1000 + (i % N), 1 + (i >= N)};
        }
        icpp_wbuf wb = {0};
        icpp_pmenc e;
        icpp_build_id b1 = bid(3);
        icpp_pmenc_begin(&e, &wb, 0);
        icpp_pmenc_module(&e, 1, "/bin/many", &b1);
        icpp_pmenc_funcs(&e);
        icpp_pmenc_func(&e, 0, 0x1000, "f");
        icpp_pmenc_nodes(&e);
        icpp_pmenc_node(&e, 1, 0, 2 * N, hs, 2 * N, ss, 2 * N);
        icpp_pmenc_metas(&e);
        CHECK(icpp_pmenc_end(&e) == 0, "encode the big node");
        icpp_pathmap *big = icpp_pathmap_decode(wb.p, wb.len, &err);
        const icpp_pm_node *bn = big ? icpp_pathmap_node(big, 1) : NULL;
        int ok = bn && bn->nheights == N && bn->nsites == N;
        for (uint32_t i = 0; ok && i < N; i++)
            ok = bn->heights[i].height == (int64_t)i * 8 - 64 && bn->heights[i].count == 3 &&
                 bn->sites[i].addr == 0x1000 + i && bn->sites[i].count == 3;
        CHECK(ok, "big node: %s", big ? "heights/sites wrong" : err.msg);
        /* merging it into itself doubles every count through the same index */
        icpp_pathmap *copy = icpp_pathmap_decode(wb.p, wb.len, &err);
        CHECK(copy && big && icpp_pathmap_merge(big, copy, &err) == 0, "merge big: %s", err.msg);
        bn = big ? icpp_pathmap_node(big, 1) : NULL;
        CHECK(bn && bn->nheights == N && bn->heights[N - 1].count == 6 && bn->sites[N / 2].count == 6,
              "merged big node");
        icpp_pathmap_free(copy);
        icpp_pathmap_free(big);
        icpp_wbuf_free(&wb);
        free(hs);
        free(ss);
    }

    icpp_pathmap_free(pm);
    icpp_pathmap_free(two);
    icpp_pathmap_free(three);
    icpp_pathmap_free(empty);
    icpp_pathmap_free(other);
    return check_done("test_pathmap");
}
