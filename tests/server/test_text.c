/* test_text.c - tiled_json_quote() against jansson: the access line's
 * string writer must write, for any bytes a client sends, exactly what
 * jansson writes for tiled_json_text() of them (the document the line was
 * built as before), and what it writes must parse back to that text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "text.h"

/* jansson's serialisation of tiled_json_text(s). */
static char *reference(const char *s)
{
    json_t *j = tiled_json_text(s);
    assert_non_null(j);
    char *text = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(j);
    assert_non_null(text);
    return text;
}

static void check(const char *s)
{
    char *want = reference(s);
    char *got = malloc(TILED_JSON_QUOTED_MAX(strlen(s)) + 1);
    assert_non_null(got);
    size_t n = tiled_json_quote(got, s);
    assert_true(n <= TILED_JSON_QUOTED_MAX(strlen(s)));
    got[n] = '\0';
    assert_string_equal(got, want);
    json_error_t err;
    json_t *back = json_loads(got, JSON_DECODE_ANY, &err);
    assert_non_null(back);
    json_decref(back);
    free(got);
    free(want);
}

static void named_cases(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "", "plain /v2/models/tile/infer", "quote \" and backslash \\", "tab\tnl\ncr\rbs\bff\f",
        "\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\xff\xfe", "cut \xc3", "\xe0\x80\xaf",
        "\xed\xa0\x80 surrogate", "\xf4\x90\x80\x80 above", "\xc0\xaf overlong", "/no/\xff\xfe\xc3/x\xc3(/\xc3\xa9",
        "\xe2\x80\xa8 line separator", "\xf5\xa7\xb2 lead byte above f4", "\xff\xbf\xbf",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        check(cases[i]);
}

/* Seeded random byte strings, weighted towards what the escaper branches on. */
static void random_bytes(void **state)
{
    (void)state;
    static const unsigned char pool[] = {'a', '"', '\\', '/', '\n', 0x01, 0x1f, 0x7f, 0x80, 0xbf, 0xc2, 0xc3,
                                         0xdf, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff, 0x9f, 0xa0};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char buf[40];
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = (size_t)(iter % 39);
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            unsigned char c = (x >> 32) & 1 ? pool[(x >> 8) % sizeof(pool)] : (unsigned char)(x >> 16);
            buf[i] = (char)(c ? c : 'z');
        }
        buf[len] = '\0';
        check(buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(named_cases),
        cmocka_unit_test(random_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
