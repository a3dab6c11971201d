/* fuzz_procmaps.c -- libFuzzer harness for lib/procmaps.c: /proc/PID/maps and /proc/PID/stat text, and mmap-record insertion.
 *
 * Every input goes three ways:
 *   1. icpp_maps_parse as maps text: the result must be sorted, without
 *      overlaps or empty mappings, and icpp_maps_find must find each one;
 *   2. icpp_proc_parse_startstack as stat text;
 *   3. as a list of 3-byte mmap records (start, length, -) inserted with
 *      icpp_maps_insert into a small address space, checked page by page
 *      against a model where a later mapping replaces what it overlaps. */
#include "fuzz.h"
#include "procmaps.h"

#include <stdio.h>

static void check_sorted(const icpp_maps *mm)
{
    for (size_t i = 0; i < mm->n; i++) {
        FUZZ_CHECK(mm->v[i].start < mm->v[i].end, "mapping %zu is empty or inverted", i);
        FUZZ_CHECK(i == 0 || mm->v[i - 1].end <= mm->v[i].start, "mapping %zu overlaps mapping %zu", i, i - 1);
        FUZZ_CHECK(icpp_maps_find(mm, mm->v[i].start) == &mm->v[i], "find(start of %zu)", i);
        FUZZ_CHECK(icpp_maps_find(mm, mm->v[i].end - 1) == &mm->v[i], "find(end of %zu)", i);
        FUZZ_CHECK(icpp_maps_stack_top(mm, mm->v[i].start) == mm->v[i].end, "stack_top of %zu", i);
    }
}

#define PAGE  0x1000ull
#define SPACE 320           /* pages in the model */

static void insert_model(const uint8_t *data, size_t size)
{
    int owner[SPACE];       /* which record maps each page, -1 none */
    uint64_t rec_start[SPACE / 3 + 1];
    for (int i = 0; i < SPACE; i++)
        owner[i] = -1;
    icpp_maps mm;
    icpp_maps_init(&mm);
    size_t nrec = size / 3 > SPACE / 3 ? SPACE / 3 : size / 3;
    for (size_t k = 0; k < nrec; k++) {
        const uint8_t *p = data + 3 * k;
        uint64_t s = p[0], e = s + p[1] % 64;
        char path[32];
        snprintf(path, sizeof path, "m%zu", k);
        /* pgoff runs with the page, so every piece keeps file offset = address + const. */
        icpp_mapping m = {s * PAGE, e * PAGE, (uint64_t)k << 32, (uint32_t)(p[2] & 7), (p[2] & 8) ? NULL : path};
        rec_start[k] = m.start;
        icpp_err err = {0};
        int rc = icpp_maps_insert(&mm, &m, &err);
        if (e <= s) {
            FUZZ_CHECK(rc < 0, "empty mapping accepted");
            continue;
        }
        FUZZ_CHECK(rc == 0, "insert: %s", err.msg);
        for (uint64_t a = s; a < e; a++)
            owner[a] = (int)k;
        for (size_t i = 0; i < mm.n; i++)   /* cheap part of check_sorted, after every insert */
            FUZZ_CHECK(mm.v[i].start < mm.v[i].end && (i == 0 || mm.v[i - 1].end <= mm.v[i].start),
                       "after insert %zu: mapping %zu empty or overlapping", k, i);
    }
    check_sorted(&mm);
    for (uint64_t a = 0; a < SPACE; a++) {
        const icpp_mapping *m = icpp_maps_find(&mm, a * PAGE + 7);
        if (owner[a] < 0) {
            FUZZ_CHECK(m == NULL, "page %#llx should be unmapped", (unsigned long long)a);
            continue;
        }
        int k = owner[a];
        FUZZ_CHECK(m != NULL, "page %#llx should be mapped by record %d", (unsigned long long)a, k);
        uint64_t want_off = ((uint64_t)k << 32) + (a * PAGE - rec_start[k]);
        FUZZ_CHECK(m->pgoff + (a * PAGE - m->start) == want_off, "page %#llx: file offset", (unsigned long long)a);
        FUZZ_CHECK(m->prot == (uint32_t)(data[3 * k + 2] & 7), "page %#llx: protection", (unsigned long long)a);
        char path[32];
        snprintf(path, sizeof path, "m%d", k);
        if (data[3 * k + 2] & 8)
            FUZZ_CHECK(m->path == NULL, "page %#llx: anonymous mapping has a path", (unsigned long long)a);
        else
            FUZZ_CHECK(m->path && !strcmp(m->path, path), "page %#llx: path %s, want %s", (unsigned long long)a,
                       m->path ? m->path : "(null)", path);
    }
    icpp_maps_free(&mm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly the text (no NUL after it), so ASan flags overreads. */
    char *text = (char *)fuzz_dup(data, size);
    icpp_maps mm;
    icpp_maps_init(&mm);
    icpp_err err = {0};
    if (icpp_maps_parse(&mm, text, size, &err) < 0)
        FUZZ_CHECK(err.code && err.msg[0], "failure without a message");
    check_sorted(&mm);
    icpp_maps_free(&mm);

    uint64_t ss = 0;
    if (icpp_proc_parse_startstack(text, size, &ss, &err) < 0)
        FUZZ_CHECK(err.code && err.msg[0], "failure without a message");
    free(text);

    insert_model(data, size);
    return 0;
}
