/* fuzz_debuginfo.c -- libFuzzer harness for the separate-debug-file links (lib/debuginfo.c): .gnu_debuglink and .gnu_debugaltlink contents, raw and as found in an ELF image by icpp_functab_section.
 *
 * The input is a whole ELF file (seeds: the function table's, real binaries
 * that carry a .gnu_debuglink) and is also parsed as the bare contents of
 * either section.  An accepted debuglink name lies inside the input, is
 * NUL-terminated there, is a plain file name (no '/', not "." or ".."), and
 * its CRC is the 4 bytes after the padding; an accepted altlink has a
 * terminated name and a build-id of 1..ICPP_BUILD_ID_MAX bytes, the rest of
 * the input. */
#include "debuginfo.h"
#include "functab.h"
#include "fuzz.h"

static void links(const uint8_t *p, size_t n)
{
    const char *name;
    uint32_t crc;
    if (icpp_debuginfo_parse_debuglink(p, n, &name, &crc) == 0) {
        const uint8_t *s = (const uint8_t *)name;
        FUZZ_CHECK(s == p, "debuglink name not at the start");
        size_t len = strnlen(name, n);
        FUZZ_CHECK(len > 0 && len < n, "debuglink name not terminated inside");
        FUZZ_CHECK(!memchr(name, '/', len) && strcmp(name, ".") && strcmp(name, ".."), "debuglink name %s", name);
        size_t at = (len + 1 + 3) & ~(size_t)3;
        FUZZ_CHECK(at + 4 <= n && crc == fuzz_le32(p + at), "debuglink CRC not the 4 bytes after the padding");
    }
    icpp_build_id b;
    if (icpp_debuginfo_parse_altlink(p, n, &name, &b) == 0) {
        size_t len = strnlen(name, n);
        FUZZ_CHECK((const uint8_t *)name == p && len > 0 && len < n, "altlink name");
        FUZZ_CHECK(b.len >= 1 && b.len <= ICPP_BUILD_ID_MAX && b.len == n - len - 1 && !memcmp(b.bytes, p + len + 1, b.len),
                   "altlink build-id");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    links(data, size);
    static const char *const secs[] = {".gnu_debuglink", ".gnu_debugaltlink", ".symtab", ".debug_info"};
    for (size_t i = 0; i < sizeof secs / sizeof *secs; i++) {
        const uint8_t *s;
        size_t n;
        if (icpp_functab_section(data, size, secs[i], &s, &n) == 0) {
            FUZZ_CHECK(s >= data && n <= size && (size_t)(s - data) <= size - n, "%s outside the image", secs[i]);
            links(s, n);
        }
    }
    return 0;
}
