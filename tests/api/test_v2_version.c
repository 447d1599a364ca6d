/* test_v2_version.c - a model version as a request writes it
 * (tile_v2_version_parse, the one reader of HTTP's /versions/ segment and
 * gRPC's model_version): "" is the newest, decimal digits with an optional
 * '+' are a number (leading zeros too, as Triton's std::stol reads them),
 * a number not served (0, 7, one too large for any int) is -1, and
 * anything else (a sign '-', spaces, a lone '+', letters) is no version. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "v2.h"

/* The version `s` reads as, or -2 when it is no version number. */
static int parse(const char *s)
{
    int v = 12345;
    if (tile_v2_version_parse(s, strlen(s), &v) < 0) {
        assert_int_equal(v, 0); /* set either way */
        return -2;
    }
    return v;
}

static void served_versions(void **state)
{
    (void)state;
    assert_int_equal(parse(""), 0); /* the newest */
    for (int i = 0; i < TILE_V2_NVERSIONS; i++) {
        char s[16];
        snprintf(s, sizeof(s), "%d", tile_v2_versions[i]);
        assert_int_equal(parse(s), tile_v2_versions[i]);
    }
    assert_int_equal(parse("13"), 13);
    assert_int_equal(parse("+13"), 13);
    assert_int_equal(parse("013"), 13);
    assert_int_equal(parse("0000006"), 6);
    assert_int_equal(parse("+01"), 1);
}

static void numbers_not_served(void **state)
{
    (void)state;
    assert_int_equal(parse("0"), -1);
    assert_int_equal(parse("+0"), -1);
    assert_int_equal(parse("7"), -1);
    assert_int_equal(parse("2147483647"), -1);
    assert_int_equal(parse("2147483648"), -1);            /* above INT_MAX */
    assert_int_equal(parse("4294967309"), -1);            /* 13 + 2^32: no wrap to 13 */
    assert_int_equal(parse("18446744073709551629"), -1);  /* 13 + 2^64 */
    assert_int_equal(parse("99999999999999999999999999999999999999999"), -1);
    assert_int_equal(parse("100000013"), -1);
}

static void not_version_numbers(void **state)
{
    (void)state;
    static const char *bad[] = {"-1", "-13", " 1", "1 ", "+", "++13", "+-13", "1.0", "13a", "x", "latest", "0x0d",
                                "\t13", "1e1", "%31"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (parse(bad[i]) != -2)
            fail_msg("'%s' read as a version", bad[i]);
    }
    /* The length is the string's: a NUL inside is a byte like any other. */
    int v;
    assert_int_equal(tile_v2_version_parse("1\0" "3", 3, &v), -1);
    assert_int_equal(tile_v2_version_parse("13", 1, &v), 0);
    assert_int_equal(v, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(served_versions),
        cmocka_unit_test(numbers_not_served),
        cmocka_unit_test(not_version_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
