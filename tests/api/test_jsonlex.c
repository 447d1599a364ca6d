/* test_jsonlex.c - the strict JSON pull parser and its number conversions. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/harness/testrand.h"
#include "jsonlex.h"

/* Lexes all of `doc` (no NUL passed to the lexer); returns the number of
 * tokens before END, or -1 with `e` filled. Types go to `types`. */
static int lex_all(const char *doc, int depth, enum tile_json_type *types, int max, struct tile_error *e)
{
    struct tile_json_lexer lx;
    struct tile_json_token t;
    size_t len = strlen(doc);
    char *copy = malloc(len ? len : 1); /* exactly len bytes: ASan catches overreads */
    memcpy(copy, doc, len);
    tile_json_lexer_init(&lx, copy, len, depth);
    int n = 0;
    tile_error_clear(e);
    for (;;) {
        if (tile_json_next(&lx, &t, e) < 0) {
            n = -1;
            break;
        }
        if (t.type == TILE_JSON_END)
            break;
        if (types && n < max)
            types[n] = t.type;
        n++;
    }
    free(copy);
    return n;
}

static void expect_ok(const char *doc, int ntokens)
{
    struct tile_error e;
    int n = lex_all(doc, 0, NULL, 0, &e);
    if (n != ntokens)
        fail_msg("'%s': got %d tokens (%s), wanted %d", doc, n, e.text, ntokens);
}

static void expect_error(const char *doc, int depth, const char *msg)
{
    struct tile_error e;
    int n = lex_all(doc, depth, NULL, 0, &e);
    if (n != -1)
        fail_msg("'%s' was accepted (%d tokens)", doc, n);
    assert_int_equal(e.code, TILE_EINVAL);
    if (!strstr(e.text, msg))
        fail_msg("'%s': message '%s' lacks '%s'", doc, e.text, msg);
}

static void test_tokens(void **state)
{
    (void)state;
    enum tile_json_type want[] = {
        TILE_JSON_OBJECT_BEGIN, TILE_JSON_KEY,   TILE_JSON_ARRAY_BEGIN, TILE_JSON_NUMBER,      TILE_JSON_STRING,
        TILE_JSON_TRUE,         TILE_JSON_FALSE, TILE_JSON_NULL,        TILE_JSON_OBJECT_BEGIN, TILE_JSON_OBJECT_END,
        TILE_JSON_ARRAY_BEGIN,  TILE_JSON_ARRAY_END, TILE_JSON_ARRAY_END, TILE_JSON_KEY,        TILE_JSON_NUMBER,
        TILE_JSON_OBJECT_END,
    };
    enum tile_json_type got[32];
    struct tile_error e;
    int n = lex_all(" {\"a\" : [ -1.5e+3, \"x\", true, false, null, {}, [] ],\r\n\t\"b\":0 } ", 0, got, 32, &e);
    assert_int_equal(n, (int)(sizeof(want) / sizeof(want[0])));
    for (int i = 0; i < n; i++)
        assert_int_equal(got[i], want[i]);
}

static void test_token_text(void **state)
{
    (void)state;
    const char *doc = "{\"key\":[12.5e-1,\"a\\nb\"]}";
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e;
    tile_error_clear(&e);
    tile_json_lexer_init(&lx, doc, strlen(doc), 8);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.pos, 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_KEY);
    assert_int_equal(t.pos, 1);
    assert_int_equal(t.len, 3);
    assert_memory_equal(t.ptr, "key", 3);
    assert_true(tile_json_string_equals(&t, "key"));
    assert_false(tile_json_string_equals(&t, "ke"));
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_ARRAY_BEGIN);
    assert_int_equal(t.pos, 7);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_NUMBER);
    assert_int_equal(t.pos, 8);
    assert_int_equal(t.len, 7);
    assert_memory_equal(t.ptr, "12.5e-1", 7);
    assert_int_equal(t.flags, TILE_JSON_TOK_FRAC | TILE_JSON_TOK_EXP);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_STRING);
    assert_int_equal(t.flags, TILE_JSON_TOK_ESCAPED);
    char out[16];
    assert_int_equal(tile_json_unescape(&t, out), 3);
    assert_memory_equal(out, "a\nb", 3);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_OBJECT_END);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_END);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0); /* END repeats */
    assert_int_equal(t.type, TILE_JSON_END);
}

static void test_valid_documents(void **state)
{
    (void)state;
    expect_ok("0", 1);
    expect_ok("-0", 1);
    expect_ok(" \"\" ", 1);
    expect_ok("true", 1);
    expect_ok("null\n", 1);
    expect_ok("[]", 2);
    expect_ok("{}", 2);
    expect_ok("[[],[[]],{}]", 10);
    expect_ok("{\"a\":{\"b\":{\"c\":[1,2,{\"d\":null}]}}}", 17);
    expect_ok("[1e5,1E5,1e+5,1e-5,0.5,-0.0e0,123456789012345678901234567890]", 9);
    expect_ok("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\ud83d\\ude00\"", 1);
    expect_ok("\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf \xf4\x8f\xbf\xbf\"", 1);
    expect_ok("[\"\x7f\"]", 3);
}

static void test_structure_errors(void **state)
{
    (void)state;
    expect_error("", 0, "unexpected end of input at byte 0");
    expect_error("   ", 0, "unexpected end of input at byte 3");
    expect_error("[1,2", 0, "unexpected end of input at byte 4");
    expect_error("[1,2,]", 0, "trailing comma before ']' at byte 5");
    expect_error("{\"a\":1,}", 0, "trailing comma before '}' at byte 7");
    expect_error("[1 2]", 0, "expected ',' or ']' but found '2' at byte 3");
    expect_error("{\"a\":1 \"b\":2}", 0, "expected ',' or '}' but found '\"' at byte 7");
    expect_error("{\"a\" 1}", 0, "expected ':' after an object key but found '1' at byte 5");
    expect_error("{\"a\"", 0, "unexpected end of input at byte 4");
    expect_error("{1:2}", 0, "expected a string key but found '1' at byte 1");
    expect_error("{,}", 0, "expected a string key but found ',' at byte 1");
    expect_error("[,1]", 0, "expected a value but found ',' at byte 1");
    expect_error("[1,,2]", 0, "expected a value but found ',' at byte 3");
    expect_error("1 2", 0, "unexpected data after the top-level value at byte 2");
    expect_error("{} x", 0, "unexpected data after the top-level value at byte 3");
    expect_error("[]]", 0, "unexpected data after the top-level value at byte 2");
    expect_error("[}", 0, "expected a value but found '}' at byte 1");
    expect_error("{]", 0, "expected a string key but found ']' at byte 1");
    expect_error("[1}", 0, "expected ',' or ']' but found '}' at byte 2");
    expect_error("{\"a\":}", 0, "expected a value but found '}' at byte 5");
    expect_error("\x01", 0, "expected a value but found byte 0x01 at byte 0");
    expect_error("[\x00]", 0, "unexpected end of input at byte 1"); /* strlen stops at the NUL */
    expect_error("tru", 0, "invalid literal (expected true, false or null) at byte 0");
    expect_error("truex", 0, "invalid literal");
    expect_error("nul", 0, "invalid literal");
    expect_error("[True]", 0, "expected a value but found 'T' at byte 1");
    expect_error("NaN", 0, "expected a value but found 'N' at byte 0");
    expect_error("'a'", 0, "expected a value but found ''' at byte 0");
}

static void test_number_errors(void **state)
{
    (void)state;
    expect_error("01", 0, "invalid number at byte 0");
    expect_error("[-01]", 0, "invalid number at byte 1");
    expect_error("-", 0, "invalid number at byte 0");
    expect_error("[-a]", 0, "invalid number at byte 1");
    expect_error("1.", 0, "digits must follow '.'");
    expect_error("1.e5", 0, "digits must follow '.'");
    expect_error(".5", 0, "expected a value but found '.' at byte 0");
    expect_error("+1", 0, "expected a value but found '+' at byte 0");
    expect_error("1e", 0, "digits must follow the exponent");
    expect_error("1e+", 0, "digits must follow the exponent");
    expect_error("0x10", 0, "invalid number at byte 0");
    expect_error("1.5.2", 0, "invalid number at byte 0");
    expect_error("1e5e5", 0, "invalid number");
    expect_error("-Infinity", 0, "invalid number at byte 0");
    expect_error("[1,2a]", 0, "invalid number at byte 3");
}

static void test_string_errors(void **state)
{
    (void)state;
    expect_error("\"abc", 0, "unterminated string starting at byte 0");
    expect_error("[\"a\\", 0, "unterminated string at byte 3");
    expect_error("\"a\nb\"", 0, "unescaped control character 0x0a in a string at byte 2");
    expect_error("\"\t\"", 0, "unescaped control character 0x09 in a string at byte 1");
    expect_error("\"\\x\"", 0, "invalid escape '\\x' at byte 1");
    expect_error("\"\\u12\"", 0, "invalid \\u escape (4 hex digits needed) at byte 1");
    expect_error("\"\\u12G4\"", 0, "invalid \\u escape");
    expect_error("\"\\ud800\"", 0, "lone high surrogate in a \\u escape at byte 1");
    expect_error("\"ab\\uDBFF\\u0041\"", 0, "lone high surrogate in a \\u escape at byte 3");
    expect_error("\"\\ud800\\ud800\"", 0, "lone high surrogate");
    expect_error("\"\\udc00\"", 0, "lone low surrogate in a \\u escape at byte 1");
    expect_error("\"\\ud83d\\u\"", 0, "lone high surrogate");
    /* invalid UTF-8 */
    expect_error("\"a\xc3\x28\"", 0, "invalid UTF-8 in a string at byte 2");
    expect_error("\"\xc0\x80\"", 0, "invalid UTF-8 in a string at byte 1");        /* overlong NUL */
    expect_error("\"\xe0\x80\xaf\"", 0, "invalid UTF-8 in a string at byte 1");    /* overlong '/' */
    expect_error("\"\xed\xa0\x80\"", 0, "invalid UTF-8 in a string at byte 1");    /* UTF-16 surrogate */
    expect_error("\"\xf4\x90\x80\x80\"", 0, "invalid UTF-8 in a string at byte 1"); /* above U+10FFFF */
    expect_error("\"\xf5\x80\x80\x80\"", 0, "invalid UTF-8");
    expect_error("\"\xff\"", 0, "invalid UTF-8 in a string at byte 1");
    expect_error("\"\x80\"", 0, "invalid UTF-8 in a string at byte 1");
    expect_error("\"ok\xe2\x82\"", 0, "invalid UTF-8 in a string at byte 3");      /* truncated */
    expect_error("{\"k\xe2\x82\":1}", 0, "invalid UTF-8 in a string at byte 3");  /* in a key */
    /* a sequence cut by the end of the buffer */
    expect_error("\"\xe2\x82", 0, "invalid UTF-8 in a string at byte 1");
}

static void test_unescape(void **state)
{
    (void)state;
    const char *doc = "\"\\u0041\\u00e9\\u20ac\\ud83d\\ude00\\\"\\\\\\/\\b\\f\\n\\r\\tz\"";
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e;
    tile_error_clear(&e);
    tile_json_lexer_init(&lx, doc, strlen(doc), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    char out[64];
    size_t n = tile_json_unescape(&t, out);
    const char want[] = "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"\\/\b\f\n\r\tz";
    assert_int_equal(n, sizeof(want) - 1);
    assert_memory_equal(out, want, n);
    /* \u0000 is allowed and becomes a NUL byte */
    const char *nul = "\"a\\u0000b\"";
    tile_json_lexer_init(&lx, nul, strlen(nul), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_unescape(&t, out), 3);
    assert_memory_equal(out, "a\0b", 3);
    /* escaped key compares by its unescaped bytes */
    const char *key = "{\"\\u0069np\\u0075t\":1}";
    tile_json_lexer_init(&lx, key, strlen(key), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_true(tile_json_string_equals(&t, "input"));
    assert_false(tile_json_string_equals(&t, "inputs"));
}

static void test_depth(void **state)
{
    (void)state;
    expect_ok("[[[1]]]", 7);
    expect_error("[[[[1]]]]", 3, "JSON nesting deeper than 3 at byte 3");
    expect_error("{\"a\":{\"b\":{\"c\":{}}}}", 3, "JSON nesting deeper than 3 at byte 15");
    struct tile_error e;
    assert_int_equal(lex_all("[[[1]]]", 3, NULL, 0, &e), 7);
    assert_int_equal(lex_all("1", 1, NULL, 0, &e), 1);
    assert_int_equal(lex_all("[1]", 1, NULL, 0, &e), 3);
    /* the structural cap applies when no depth is configured */
    char *deep = malloc(2 * TILE_JSON_MAX_DEPTH + 3);
    memset(deep, '[', TILE_JSON_MAX_DEPTH + 1);
    memset(deep + TILE_JSON_MAX_DEPTH + 1, ']', TILE_JSON_MAX_DEPTH + 1);
    deep[2 * TILE_JSON_MAX_DEPTH + 2] = '\0';
    expect_error(deep, 0, "JSON nesting deeper than 1024 at byte 1024");
    deep[TILE_JSON_MAX_DEPTH] = ' ';
    deep[TILE_JSON_MAX_DEPTH + 1] = ' ';
    assert_int_equal(lex_all(deep, 0, NULL, 0, &e), 2 * TILE_JSON_MAX_DEPTH);
    free(deep);
}

static void test_sticky_error(void **state)
{
    (void)state;
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e;
    tile_error_clear(&e);
    tile_json_lexer_init(&lx, "[1,]", 4, 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), -1);
    assert_non_null(strstr(e.text, "trailing comma"));
    tile_error_clear(&e);
    assert_int_equal(tile_json_next(&lx, &t, &e), -1);
    assert_non_null(strstr(e.text, "earlier error"));
}

static void test_skip_and_copy(void **state)
{
    (void)state;
    const char *doc = "{\"skip\":{\"a\":[1,{\"b\":[]}],\"c\":\"]\"},\"s\":5,\"keep\":[7]}";
    struct tile_json_lexer lx, saved;
    struct tile_json_token t;
    struct tile_error e;
    tile_error_clear(&e);
    tile_json_lexer_init(&lx, doc, strlen(doc), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_true(tile_json_string_equals(&t, "skip"));
    saved = lx; /* a copy remembers the position */
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_skip_value(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_true(tile_json_string_equals(&t, "s"));
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_skip_value(&lx, &t, &e), 0); /* a scalar: nothing more */
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_true(tile_json_string_equals(&t, "keep"));
    assert_int_equal(tile_json_next(&saved, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_OBJECT_BEGIN);
    assert_int_equal(t.pos, 8);
    /* skipping finds errors inside the skipped value */
    tile_json_lexer_init(&lx, "[[1,]]", 6, 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_skip_value(&lx, &t, &e), -1);
    assert_non_null(strstr(e.text, "trailing comma before ']' at byte 4"));
}

/* ---- numbers ---------------------------------------------------------------- */

static int int64_of(const char *s, unsigned flags, int64_t *v)
{
    return tile_json_number_int64(s, strlen(s), flags, v);
}

static int uint64_of(const char *s, unsigned flags, uint64_t *v)
{
    return tile_json_number_uint64(s, strlen(s), flags, v);
}

static void test_integers(void **state)
{
    (void)state;
    int64_t i;
    uint64_t u;
    assert_int_equal(uint64_of("18446744073709551615", 0, &u), TILE_JSON_NUM_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(uint64_of("18446744073709551616", 0, &u), TILE_JSON_NUM_RANGE);
    assert_int_equal(uint64_of("99999999999999999999999", 0, &u), TILE_JSON_NUM_RANGE);
    assert_int_equal(uint64_of("-1", 0, &u), TILE_JSON_NUM_RANGE);
    assert_int_equal(uint64_of("-0", 0, &u), TILE_JSON_NUM_OK);
    assert_true(u == 0);
    assert_int_equal(int64_of("-9223372036854775808", 0, &i), TILE_JSON_NUM_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(int64_of("9223372036854775807", 0, &i), TILE_JSON_NUM_OK);
    assert_true(i == INT64_MAX);
    assert_int_equal(int64_of("9223372036854775808", 0, &i), TILE_JSON_NUM_RANGE);
    assert_int_equal(int64_of("-9223372036854775809", 0, &i), TILE_JSON_NUM_RANGE);
    assert_int_equal(int64_of("0", 0, &i), TILE_JSON_NUM_OK);
    assert_true(i == 0);
    assert_int_equal(int64_of("-42", 0, &i), TILE_JSON_NUM_OK);
    assert_true(i == -42);
    /* fractions and exponents */
    assert_int_equal(int64_of("1e3", 0, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("1.0", 0, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("2e0", 0, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("2E-0", 0, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("1e3", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_true(i == 1000);
    assert_int_equal(int64_of("1.0", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_true(i == 1);
    assert_int_equal(int64_of("-2.50e1", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_true(i == -25);
    assert_int_equal(int64_of("1000e-3", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_true(i == 1);
    assert_int_equal(int64_of("1001e-3", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("1.5", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("0.0000001", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_NOT_INTEGER);
    assert_int_equal(int64_of("0.000e-999999999999999999999", TILE_JSON_INT_INTEGRAL_FLOATS, &i),
                     TILE_JSON_NUM_OK);
    assert_true(i == 0);
    assert_int_equal(int64_of("0e999999999999", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_int_equal(int64_of("1e999999999999", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_RANGE);
    assert_int_equal(int64_of("9.223372036854775807e18", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_true(i == INT64_MAX);
    assert_int_equal(int64_of("-9.223372036854775808e18", TILE_JSON_INT_INTEGRAL_FLOATS, &i), TILE_JSON_NUM_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(uint64_of("1.8446744073709551615e19", TILE_JSON_INT_INTEGRAL_FLOATS, &u), TILE_JSON_NUM_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(uint64_of("1.8446744073709551616e19", TILE_JSON_INT_INTEGRAL_FLOATS, &u), TILE_JSON_NUM_RANGE);
    assert_int_equal(uint64_of("1e19", TILE_JSON_INT_INTEGRAL_FLOATS, &u), TILE_JSON_NUM_OK);
    assert_true(u == UINT64_C(10000000000000000000));
    assert_int_equal(uint64_of("1e20", TILE_JSON_INT_INTEGRAL_FLOATS, &u), TILE_JSON_NUM_RANGE);
    bool neg;
    assert_int_equal(tile_json_number_integer("-0", 2, 0, &neg, &u), TILE_JSON_NUM_OK);
    assert_true(neg);
    assert_true(u == 0);
    assert_int_equal(tile_json_number_integer("-18446744073709551615", 21, 0, &neg, &u), TILE_JSON_NUM_OK);
    assert_true(neg && u == UINT64_MAX);
}

static double strtod_ref(const char *s)
{
    return strtod(s, NULL);
}

static void expect_double(const char *s)
{
    double got, want = strtod_ref(s);
    int rc = tile_json_number_double(s, strlen(s), &got);
    if (memcmp(&got, &want, sizeof(got)) != 0)
        fail_msg("%s: got %.17g, want %.17g", s, got, want);
    assert_int_equal(rc, isinf(want) ? TILE_JSON_NUM_RANGE : TILE_JSON_NUM_OK);
}

static void expect_float(const char *s)
{
    float got, want = strtof(s, NULL);
    int rc = tile_json_number_float(s, strlen(s), &got);
    if (memcmp(&got, &want, sizeof(got)) != 0)
        fail_msg("%s: got %.9g, want %.9g", s, (double)got, (double)want);
    assert_int_equal(rc, isinf(want) ? TILE_JSON_NUM_RANGE : TILE_JSON_NUM_OK);
}

static void test_doubles(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "0", "-0", "0.0", "1", "-1", "0.1", "0.3", "1.5", "123.456", "1e22", "1e23", "1e-22", "1e-23",
        "9007199254740993", "9007199254740992", "9007199254740995", "2.2250738585072011e-308",
        "2.2250738585072014e-308", "4.9406564584124654e-324", "2.4703282292062327e-324",
        "2.4703282292062328e-324", "1e-400", "-1e-400", "1.7976931348623157e308", "1.7976931348623158e308",
        "1.7976931348623159e308", "1e309", "-1e400", "123456789012345678901234567890", "0.000001",
        "3.141592653589793238462643383279502884197169399375105820974944", "1e-5", "100000000000000000000e-20",
        "0.30000000000000004", "7.2057594037927933e16", "8.98846567431158e307", "5e-324", "1e0", "1E+2",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_double(cases[i]);
    double d;
    assert_int_equal(tile_json_number_double("-0", 2, &d), TILE_JSON_NUM_OK);
    assert_true(d == 0 && signbit(d));
}

static void test_floats(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "0", "-0", "0.1", "1.5", "3.4028235e38", "3.4028236e38", "3.40282357e38", "3.5e38", "1e39",
        "1.17549435e-38", "1.4e-45", "7e-46", "7.1e-46", "1e-46", "16777217", "16777219", "7.038531e-26",
        "1.00000005960464477539062499", "1.000000059604644775390625", "1.0000000596046447753906251",
        "123456.7", "0.000123", "1e10", "1e-10", "4294967295", "8388608.5", "8388609.5",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_float(cases[i]);
}

static void put(char *dst, const char *src)
{
    memcpy(dst, src, strlen(src) + 1);
}

/* Very long numbers: digits past the 800th still decide halfway cases. */
static void test_long_numbers(void **state)
{
    (void)state;
    char *s = malloc(3000);
    /* 9007199254740993 is halfway between two doubles; a 1 far behind it
     * makes it round up */
    put(s, "9007199254740993.");
    size_t n = strlen(s);
    memset(s + n, '0', 2000);
    s[n + 2000] = '\0';
    expect_double(s);
    s[n + 1999] = '1';
    expect_double(s);
    double d;
    tile_json_number_double(s, strlen(s), &d);
    assert_true(d == 9007199254740994.0);
    /* 0.000...0001 with many leading zeros */
    put(s, "0.");
    memset(s + 2, '0', 1500);
    put(s + 1502, "1e1600");
    expect_double(s);
    /* many significant digits, float */
    put(s, "1.");
    memset(s + 2, '3', 2500);
    s[2502] = '\0';
    expect_float(s);
    expect_double(s);
    free(s);
}

static uint64_t rng_state = 88172645463325252u;

static uint64_t rng(void)
{
    return testrand_next(&rng_state);
}

/* Random decimal strings against glibc's correctly rounded strtod/strtof. */
static void test_random_decimals(void **state)
{
    (void)state;
    char s[64];
    for (int i = 0; i < 200000; i++) {
        int ndig = 1 + (int)(rng() % 20), point = (int)(rng() % (uint64_t)(ndig + 1));
        size_t o = 0;
        if (rng() & 1)
            s[o++] = '-';
        for (int k = 0; k < ndig; k++) {
            if (k == point && k > 0)
                s[o++] = '.';
            char c = (char)('0' + rng() % 10);
            if (k == 0 && c == '0' && point != 1)
                c = '1';
            s[o++] = c;
        }
        if (rng() % 3 == 0)
            o += (size_t)snprintf(s + o, sizeof(s) - o, "e%d", (int)(rng() % 700) - 350);
        s[o] = '\0';
        expect_double(s);
        expect_float(s);
    }
}

/* Plain integer literals, which take the short paths (one pass without
 * struct decimal), against the C library: boundaries (2^53 +- 1, 2^63,
 * 2^64, 19 and 20 digits, -0) and random ones of every length from 1 to 20
 * digits. Each is first checked to be one number token, as the conversions
 * only see the lexer's tokens. */
static void expect_plain_integer(const char *s)
{
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e;
    size_t len = strlen(s);
    tile_json_lexer_init(&lx, s, len, 0);
    if (tile_json_next(&lx, &t, &e) < 0 || t.type != TILE_JSON_NUMBER || t.len != len)
        fail_msg("'%s' is not one number token", s);
    bool neg = s[0] == '-';
    errno = 0;
    unsigned long long umag = strtoull(neg ? s + 1 : s, NULL, 10);
    bool uover = errno == ERANGE;
    int64_t i;
    uint64_t u, mag;
    bool n;
    int rc = tile_json_number_integer(s, len, 0, &n, &mag);
    if (uover) {
        assert_int_equal(rc, TILE_JSON_NUM_RANGE);
    } else {
        assert_int_equal(rc, TILE_JSON_NUM_OK);
        assert_true(n == neg && mag == umag);
    }
    errno = 0;
    long long ref = strtoll(s, NULL, 10);
    int want = errno == ERANGE ? TILE_JSON_NUM_RANGE : TILE_JSON_NUM_OK;
    assert_int_equal(tile_json_number_int64(s, len, 0, &i), want);
    if (want == TILE_JSON_NUM_OK && i != ref)
        fail_msg("'%s': int64 %lld, strtoll %lld", s, (long long)i, ref);
    want = uover || (neg && umag) ? TILE_JSON_NUM_RANGE : TILE_JSON_NUM_OK;
    assert_int_equal(tile_json_number_uint64(s, len, 0, &u), want);
    if (want == TILE_JSON_NUM_OK && u != umag)
        fail_msg("'%s': uint64 %llu, strtoull %llu", s, (unsigned long long)u, umag);
    expect_double(s);
    expect_float(s);
}

static void test_plain_integers(void **state)
{
    (void)state;
    static const char *const edges[] = {
        "0",
        "-0",
        "1",
        "-1",
        "9",
        "10",
        "15",
        "16777216",
        "16777217",
        "-16777217",
        "33554433",
        "999999999999999",
        "1000000000000000",
        "9007199254740991",
        "9007199254740992",
        "9007199254740993",
        "-9007199254740993",
        "999999999999999999",
        "1000000000000000000",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775808",
        "-9223372036854775809",
        "9999999999999999999",
        "10000000000000000000",
        "18446744073709551615",
        "18446744073709551616",
        "-18446744073709551615",
        "99999999999999999999",
        "100000000000000000000",
        "340282356779733661637539395458142568448",
    };
    for (size_t k = 0; k < sizeof(edges) / sizeof(edges[0]); k++)
        expect_plain_integer(edges[k]);
    char s[32];
    for (int i = 0; i < 100000; i++) {
        testrand_int_literal(s, &rng_state, 20);
        expect_plain_integer(s);
    }
    /* Leading zeros are not JSON: the lexer refuses them before any conversion. */
    static const char *const refused[] = {"00", "01", "-01", "007", "-00"};
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        struct tile_error e;
        assert_int_equal(lex_all(refused[k], 0, NULL, 0, &e), -1);
        assert_non_null(strstr(e.text, "invalid number"));
    }
}

static void test_compare(void **state)
{
    (void)state;
    assert_int_equal(tile_json_number_compare("0.1", 3, 0.1), -1); /* the double is a bit above 1/10 */
    assert_int_equal(tile_json_number_compare("0.5", 3, 0.5), 0);
    assert_int_equal(tile_json_number_compare("5e-1", 4, 0.5), 0);
    assert_int_equal(tile_json_number_compare("-0.5", 4, -0.5), 0);
    assert_int_equal(tile_json_number_compare("0.50000000000000000000001", 25, 0.5), 1);
    assert_int_equal(tile_json_number_compare("-0.50000000000000000000001", 26, -0.5), -1);
    assert_int_equal(tile_json_number_compare("0.49999999999999999999999", 25, 0.5), -1);
    assert_int_equal(tile_json_number_compare("0", 1, 0.0), 0);
    assert_int_equal(tile_json_number_compare("-0", 2, 0.0), 0);
    assert_int_equal(tile_json_number_compare("1e-400", 6, 0.0), 1);
    assert_int_equal(tile_json_number_compare("-1", 2, 1.0), -1);
    assert_int_equal(tile_json_number_compare("65520", 5, 65520.0), 0);
    assert_int_equal(tile_json_number_compare("65519.99999999999999999", 23, 65520.0), -1);
    assert_int_equal(tile_json_number_compare("4.9406564584124654e-324", 23, 5e-324), -1);
    assert_int_equal(tile_json_number_compare("1e308", 5, 1e308), -1);
    assert_int_equal(tile_json_number_compare("1e307", 5, 1e308), -1);
    assert_int_equal(tile_json_number_compare("1e309", 5, 1e308), 1);
}

/* Conversions must not follow the process locale's decimal point. */
static void test_locale(void **state)
{
    (void)state;
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "ru_RU.UTF-8"};
    const char *set = NULL;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !set; i++)
        set = setlocale(LC_NUMERIC, names[i]);
    double d;
    float f;
    tile_json_number_double("0.12345678901234567890", 22, &d);
    assert_true(d == 0.12345678901234568);
    tile_json_number_float("0.123456789012", 14, &f);
    assert_true(f == 0.123456789012f);
    setlocale(LC_NUMERIC, "C");
    if (!set)
        print_message("(no comma-decimal locale installed; checked the C locale only)\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens),          cmocka_unit_test(test_token_text),
        cmocka_unit_test(test_valid_documents), cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_number_errors),   cmocka_unit_test(test_string_errors),
        cmocka_unit_test(test_unescape),        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_sticky_error),    cmocka_unit_test(test_skip_and_copy),
        cmocka_unit_test(test_integers),        cmocka_unit_test(test_doubles),
        cmocka_unit_test(test_floats),          cmocka_unit_test(test_long_numbers),
        cmocka_unit_test(test_random_decimals), cmocka_unit_test(test_plain_integers),
        cmocka_unit_test(test_compare),         cmocka_unit_test(test_locale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
