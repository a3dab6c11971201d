/* test_defs.c -- lib/defs.h: the one "same module" rule (icpp_build_id_match), heights, the main stack's span. */
#include "defs.h"

#include <string.h>

#include "check.h"

static icpp_build_id bid(const char *bytes, uint8_t len)
{
    icpp_build_id b = {len, {0}};
    memcpy(b.bytes, bytes, len);
    return b;
}

int main(void)
{
    icpp_build_id a = bid("\x01\x02\x03\x04", 4), a2 = bid("\x01\x02\x03\x04", 4);
    icpp_build_id b = bid("\x01\x02\x03\x05", 4), pre = bid("\x01\x02\x03", 3), none = bid("", 0);
    icpp_build_id full = bid("0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij0123", ICPP_BUILD_ID_MAX);
    icpp_build_id full2 = full;

    /* both present: the bytes decide, paths do not */
    CHECK(icpp_build_id_match(&a, "/x", &a2, "/y"), "equal build-ids at other paths are one module");
    CHECK(icpp_build_id_match(&a, NULL, &a2, NULL), "equal build-ids without paths are one module");
    CHECK(!icpp_build_id_match(&a, "/x", &b, "/x"), "another build-id at the same path is another module");
    CHECK(!icpp_build_id_match(&a, "/x", &pre, "/x"), "a prefix is another build-id");
    CHECK(!icpp_build_id_match(&pre, "/x", &a, "/x"), "a prefix is another build-id (swapped)");
    CHECK(icpp_build_id_match(&full, NULL, &full2, NULL), "a maximal build-id equals its copy");
    full2.bytes[ICPP_BUILD_ID_MAX - 1] ^= 1;
    CHECK(!icpp_build_id_match(&full, NULL, &full2, NULL), "the last byte counts");

    /* one present: never the same module */
    CHECK(!icpp_build_id_match(&a, "/x", &none, "/x"), "with and without a build-id, same path");
    CHECK(!icpp_build_id_match(&none, "/x", &a, "/x"), "without and with a build-id, same path");

    /* neither present: the paths decide, and only when both are given */
    CHECK(icpp_build_id_match(&none, "/lib/x.so", &none, "/lib/x.so"), "no build-ids, same path");
    CHECK(!icpp_build_id_match(&none, "/lib/x.so", &none, "/lib/y.so"), "no build-ids, other paths");
    CHECK(!icpp_build_id_match(&none, "/lib/x.so", &none, "/lib/x.s"), "no build-ids, a path's prefix");
    CHECK(!icpp_build_id_match(&none, NULL, &none, "/x"), "no build-id and no path matches nothing");
    CHECK(!icpp_build_id_match(&none, "/x", &none, NULL), "no build-id and no path matches nothing (swapped)");
    CHECK(!icpp_build_id_match(&none, NULL, &none, NULL), "two empty build-ids without paths differ");
    CHECK(icpp_build_id_match(&none, "", &none, ""), "no build-ids, the same (empty) path");

    /* the path-less form */
    CHECK(icpp_build_id_eq(&a, &a2) && !icpp_build_id_eq(&a, &b), "icpp_build_id_eq: bytes");
    CHECK(!icpp_build_id_eq(&none, &none), "icpp_build_id_eq: an empty build-id matches nothing");

    /* heights and the main stack (docs/definitions.md) */
    CHECK(icpp_height(0x7ffc0000, 0x7ffbff00) == 0x100, "height = base - entry SP");
    CHECK(icpp_height(0x1000, 0x1010) == -0x10, "an entry SP above the base: a negative height");
    CHECK(icpp_entry_sp_from_cfa(0x7ffc0010) == 0x7ffc0008, "entry SP = CFA - 8");
    CHECK(icpp_main_stack_holds(0x7ffc0000, 0x7ffc0000 - 8), "just below startstack");
    CHECK(!icpp_main_stack_holds(0x7ffc0000, 0x7ffc0008), "above startstack: foreign");
    CHECK(!icpp_main_stack_holds(0x7ffc0000, 0x7ffc0000 - ICPP_MAIN_STACK_SPAN), "a span below: foreign");
    CHECK(icpp_main_stack_holds(0x7ffc0000, 0x7ffc0000 - ICPP_MAIN_STACK_SPAN + 1), "just within the span");
    return check_done("defs");
}
