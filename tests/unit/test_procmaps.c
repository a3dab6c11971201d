/* test_procmaps.c -- /proc maps parsing, mmap-record inserts, startstack. */
#include "check.h"
#include "procmaps.h"

#include <string.h>
#include <sys/mman.h>

static const char *maps_text =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 1234 /usr/bin/my prog (deleted)\n"
    "55d0c0a02000-55d0c0a05000 r-xp 00002000 fe:01 1234 /usr/bin/my prog (deleted)\n"
    "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n";

int main(void)
{
    icpp_maps mm;
    icpp_err err = {0};
    icpp_maps_init(&mm);
    CHECK(icpp_maps_parse(&mm, maps_text, strlen(maps_text), &err) == 0, "parse: %s", err.msg);
    CHECK(mm.n == 4, "n=%zu", mm.n);
    const icpp_mapping *m = icpp_maps_find(&mm, 0x55d0c0a03000);
    CHECK(m && m->pgoff == 0x2000 && m->prot == (PROT_READ | PROT_EXEC), "text mapping");
    CHECK(m && m->path && strcmp(m->path, "/usr/bin/my prog (deleted)") == 0, "path with spaces: %s",
          m && m->path ? m->path : "NULL");
    m = icpp_maps_find(&mm, 0x7f0000000010);
    CHECK(m && m->path == NULL, "anonymous mapping has no path");
    CHECK(icpp_maps_find(&mm, 0x55d0c0a05000) == NULL, "end is exclusive");
    CHECK(icpp_maps_stack_top(&mm, 0x7ffd00010000) == 0x7ffd00021000, "stack top");

    /* An mmap record in the middle of the anonymous mapping splits it. */
    icpp_mapping ins = {0x7f0000010000, 0x7f0000011000, 0x3000, PROT_READ, (char *)"/lib/x.so"};
    CHECK(icpp_maps_insert(&mm, &ins, &err) == 0, "insert");
    CHECK(mm.n == 6, "after split n=%zu", mm.n);
    m = icpp_maps_find(&mm, 0x7f0000010800);
    CHECK(m && m->pgoff == 0x3000 && m->path && strcmp(m->path, "/lib/x.so") == 0, "inserted");
    m = icpp_maps_find(&mm, 0x7f0000011000);
    CHECK(m && m->start == 0x7f0000011000 && m->end == 0x7f0000021000 && m->pgoff == 0x11000, "tail piece");
    m = icpp_maps_find(&mm, 0x7f000000ffff);
    CHECK(m && m->end == 0x7f0000010000, "head piece");
    /* A mapping replacing two whole ones and part of a third. */
    icpp_mapping big = {0x55d0c0a00000, 0x55d0c0a04000, 0, PROT_READ, NULL};
    CHECK(icpp_maps_insert(&mm, &big, &err) == 0, "insert big");
    m = icpp_maps_find(&mm, 0x55d0c0a04000);
    CHECK(m && m->start == 0x55d0c0a04000 && m->pgoff == 0x4000, "trimmed third: pgoff advanced");
    CHECK(icpp_maps_parse(&mm, "zzz\n", 4, &err) < 0 && strstr(err.msg, "line 1"), "garbage: %s", err.msg);

    /* startstack: comm with spaces and parentheses. */
    const char *stat = "1234 (a) b) c) S 1 1234 1234 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 "
                       "12345 1000000 100 18446744073709551615 1 1 140737488347136 0 0";
    uint64_t ss = 0;
    CHECK(icpp_proc_parse_startstack(stat, strlen(stat), &ss, &err) == 0 && ss == 140737488347136ULL,
          "startstack %llu: %s", (unsigned long long)ss, err.msg);
    CHECK(icpp_proc_parse_startstack("1 (x) S 1", 9, &ss, &err) < 0, "short stat accepted");

    /* Our own startstack is above our current stack pointer and in [stack]. */
    CHECK(icpp_proc_startstack(0, &ss, &err) == 0, "self startstack: %s", err.msg);
    CHECK(icpp_maps_read(&mm, 0, &err) == 0, "self maps: %s", err.msg);
    m = icpp_maps_find(&mm, ss);
    CHECK(m && m->path && strcmp(m->path, "[stack]") == 0, "startstack not in [stack]");
    CHECK(ss > (uint64_t)(uintptr_t)&ss && ss % 16 == 0, "startstack below our frame or unaligned");
    icpp_maps_free(&mm);
    return check_done("test_procmaps");
}
