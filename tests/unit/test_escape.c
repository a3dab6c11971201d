/* test_escape.c -- text escaping of names from files, against glibc's UTF-8 decoder (mbrtowc) as the reference. */
#include "check.h"
#include "escape.h"

#include <locale.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>

/* The reference: is s (n bytes, one character) a valid, printable-or-not
 * UTF-8 character that the escaper must keep?  glibc decodes; the rule on
 * top: no C0 control, no DEL, no C1 control, nothing above U+10FFFF. */
static int ref_keep(const char *s, size_t n)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    wchar_t w;
    size_t r = mbrtowc(&w, s, n, &st);
    if (r != n)
        return 0;
    return !(w < 0x20 || w == 0x7f || (w >= 0x80 && w <= 0x9f) || w > 0x10ffff);
}

/* What escaping s must give when no character is kept: every byte as \xNN. */
static void all_hex(const unsigned char *s, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 4 * i, "\\x%02x", s[i]);
}

int main(void)
{
    CHECK(setlocale(LC_ALL, "C.UTF-8") != NULL, "no C.UTF-8 locale");
    char buf[64], want[64];

    /* Clean strings come back as themselves (no copy). */
    const char *clean = "main -> std::vector<int>::push_back \xc3\xbc \xe2\x82\xac \xf0\x9f\x98\x80";
    CHECK(icpp_escape(clean, buf, sizeof buf) == clean && !icpp_escape_needed(clean), "clean string rewritten");

    /* Every single byte. */
    for (int b = 1; b < 256; b++) {
        char s[2] = {(char)b, 0};
        const char *e = icpp_escape(s, buf, sizeof buf);
        if (ref_keep(s, 1)) {
            CHECK(e == s, "byte %#x escaped", b);
        } else {
            all_hex((const unsigned char *)s, 1, want);
            CHECK(!strcmp(e, want), "byte %#x: got '%s', want '%s'", b, e, want);
        }
    }
    /* Every 2-byte and every 3-byte sequence with a 3-byte lead, and 4-byte
     * sequences over all leads and second bytes: kept exactly when the
     * reference decodes them as one allowed character; else nothing of the
     * sequence survives unescaped as a control. */
    size_t n2 = 0, n3 = 0, n4 = 0, bad = 0;
    for (int a = 0xc0; a < 0x100; a++)
        for (int b = 1; b < 0x100; b++) {
            char s[3] = {(char)a, (char)b, 0};
            int keep = ref_keep(s, 2) && a < 0xe0;
            const char *e = icpp_escape(s, buf, sizeof buf);
            if (keep != (e == s))
                bad++;
            n2 += keep;
        }
    for (int a = 0xe0; a < 0xf0; a++)
        for (int b = 0x80; b < 0xc0; b++)
            for (int d = 1; d < 0x100; d++) {
                char s[4] = {(char)a, (char)b, (char)d, 0};
                int keep = ref_keep(s, 3);
                const char *e = icpp_escape(s, buf, sizeof buf);
                if (keep != (e == s))
                    bad++;
                n3 += keep;
            }
    for (int a = 0xf0; a < 0x100; a++)
        for (int b = 0x80; b < 0xc0; b++)
            for (int d = 0x80; d < 0xc0; d += 7)
                for (int f = 0x70; f < 0xd0; f += 3) {
                    char s[5] = {(char)a, (char)b, (char)d, (char)f, 0};
                    int keep = ref_keep(s, 4);
                    const char *e = icpp_escape(s, buf, sizeof buf);
                    if (keep != (e == s))
                        bad++;
                    n4 += keep;
                }
    CHECK(bad == 0, "%zu sequences disagree with glibc's decoder", bad);
    CHECK(n2 == 0x7ff - 0x9f && n3 > 50000 && n4 > 1000, "kept %zu/%zu/%zu 2/3/4-byte characters", n2, n3, n4);

    /* The cases of the issue: OSC title, colour, newline, C1 NEL, DEL. */
    const char *evil = "f\x1b]0;pwned\x07\x1b[31m\ninjected\xc2\x85\x7f";
    CHECK(!strcmp(icpp_escape(evil, buf, sizeof buf), "f\\x1b]0;pwned\\x07\\x1b[31m\\x0ainjected\\xc2\\x85\\x7f"),
          "evil: %s", buf);
    /* Cut to fit, never inside an escape or a character. */
    CHECK(!strcmp(icpp_escape("\x01\x02", buf, 6), "\\x01"), "cut: '%s'", buf);
    CHECK(!strcmp(icpp_escape("\x01\xc3\xbc", buf, 6), "\\x01"), "cut before a character: '%s'", buf);
    CHECK(!strcmp(icpp_escape("\x01", buf, 1), ""), "bufsz 1: '%s'", buf);

    /* The stream form writes the same text, whole. */
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    icpp_escape_fputs(evil, f);
    fclose(f);
    CHECK(!strcmp(mem, icpp_escape(evil, buf, sizeof buf)), "fputs: '%s'", mem);
    free(mem);
    return check_done("escape");
}
