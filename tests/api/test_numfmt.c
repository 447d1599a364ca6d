/* test_numfmt.c - elements to JSON text and back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "api/harness/testrand.h"
#include "half.h"
#include "numfmt.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

static uint64_t rng(void)
{
    return testrand_next(&rng_state);
}

/* Formats one element and compares the text. */
static void expect_text(enum tile_dtype dtype, const void *elem, const char *want)
{
    char buf[TILE_NUMFMT_MAX + 1];
    size_t n = tile_json_format_element(dtype, elem, buf);
    assert_true(n <= TILE_NUMFMT_MAX);
    buf[n] = '\0';
    if (strcmp(buf, want) != 0)
        fail_msg("%s: got '%s', want '%s'", tile_dtype_name(dtype), buf, want);
}

static void expect_f32(float f, const char *want)
{
    expect_text(TILE_FLOAT32, &f, want);
}

static void expect_f64(double d, const char *want)
{
    expect_text(TILE_FLOAT64, &d, want);
}

static void expect_f16(uint16_t h, const char *want)
{
    expect_text(TILE_FLOAT16, &h, want);
}

static void expect_bf16(uint16_t h, const char *want)
{
    expect_text(TILE_BFLOAT16, &h, want);
}

static void test_format_ints(void **state)
{
    (void)state;
    uint8_t b = 1, b0 = 0, b7 = 7;
    expect_text(TILE_BOOL, &b, "true");
    expect_text(TILE_BOOL, &b0, "false");
    expect_text(TILE_BOOL, &b7, "true");
    int8_t i8 = -128, i8b = 127;
    expect_text(TILE_INT8, &i8, "-128");
    expect_text(TILE_INT8, &i8b, "127");
    int16_t i16 = -32768;
    expect_text(TILE_INT16, &i16, "-32768");
    int32_t i32 = INT32_MIN, z = 0;
    expect_text(TILE_INT32, &i32, "-2147483648");
    expect_text(TILE_INT32, &z, "0");
    int64_t i64 = INT64_MIN, i64b = INT64_MAX;
    expect_text(TILE_INT64, &i64, "-9223372036854775808");
    expect_text(TILE_INT64, &i64b, "9223372036854775807");
    uint8_t u8 = 255;
    expect_text(TILE_UINT8, &u8, "255");
    uint16_t u16 = 65535;
    expect_text(TILE_UINT16, &u16, "65535");
    uint32_t u32 = UINT32_MAX;
    expect_text(TILE_UINT32, &u32, "4294967295");
    uint64_t u64 = UINT64_MAX;
    expect_text(TILE_UINT64, &u64, "18446744073709551615");
    struct tile_str s = {"x", 1};
    char buf[TILE_NUMFMT_MAX];
    assert_int_equal(tile_json_format_element(TILE_STRING, &s, buf), 0);
    assert_int_equal(tile_json_format_element(TILE_DTYPE_INVALID, &s, buf), 0);
}

static void test_format_floats(void **state)
{
    (void)state;
    expect_f32(0.1f, "0.1");
    expect_f32(1.0f, "1.0");
    expect_f32(-0.0f, "-0.0");
    expect_f32(0.0f, "0.0");
    expect_f32(-2.5f, "-2.5");
    expect_f32(1e20f, "1e+20");
    expect_f32(1e16f, "1e+16");
    expect_f32(1e15f, "1000000000000000.0");
    expect_f32(16777216.0f, "16777216.0");
    expect_f32(16777218.0f, "16777218.0");
    expect_f32(1073741952.0f, "1073742000.0"); /* shortest digits, padded like numpy */
    expect_f32(3.4028235e38f, "3.4028235e+38");
    expect_f32(1.17549435e-38f, "1.1754944e-38");
    expect_f32(1.4e-45f, "1e-45");
    expect_f32(0.0001f, "0.0001");
    expect_f32(0.00001f, "1e-05");
    expect_f32(1.0f / 3, "0.33333334");
    expect_f32(16777217.0f, "16777216.0");
    expect_f32(NAN, "\"NaN\"");
    expect_f32(-NAN, "\"NaN\"");
    expect_f32(INFINITY, "\"Infinity\"");
    expect_f32(-INFINITY, "\"-Infinity\"");
    expect_f64(0.1, "0.1");
    expect_f64(1.0, "1.0");
    expect_f64(-0.0, "-0.0");
    expect_f64(123.456, "123.456");
    expect_f64(0.30000000000000004, "0.30000000000000004");
    expect_f64(1e16, "1e+16");
    expect_f64(1e15, "1000000000000000.0");
    expect_f64(9007199254740992.0, "9007199254740992.0");
    expect_f64(1e22, "1e+22");
    expect_f64(1.5e300, "1.5e+300");
    expect_f64(1e-5, "1e-05");
    expect_f64(1.5e-7, "1.5e-07");
    expect_f64(0.0001, "0.0001");
    expect_f64(5e-324, "5e-324");
    expect_f64(2.2250738585072014e-308, "2.2250738585072014e-308");
    expect_f64(1.7976931348623157e308, "1.7976931348623157e+308");
    expect_f64(-1e100, "-1e+100");
    expect_f64(NAN, "\"NaN\"");
    expect_f64(INFINITY, "\"Infinity\"");
    expect_f64(-INFINITY, "\"-Infinity\"");
}

static void test_format_half(void **state)
{
    (void)state;
    expect_f16(0x2E66, "0.1");
    expect_f16(0x3C00, "1.0");
    expect_f16(0xBC00, "-1.0");
    expect_f16(0x8000, "-0.0");
    expect_f16(0x3555, "0.3333");
    expect_f16(0x7BFF, "65500.0");
    expect_f16(0x6800, "2048.0");
    expect_f16(0x0001, "6e-08");
    expect_f16(0x03FF, "6.1e-05");
    expect_f16(0x0400, "6.104e-05");
    expect_f16(0x3C01, "1.001");
    expect_f16(0x7C00, "\"Infinity\"");
    expect_f16(0xFC00, "\"-Infinity\"");
    expect_f16(0x7E00, "\"NaN\"");
    expect_f16(0x7C01, "\"NaN\"");
    expect_bf16(0x3DCD, "0.1");
    expect_bf16(0x3F80, "1.0");
    expect_bf16(0x4380, "256.0");
    expect_bf16(0x4381, "258.0");
    expect_bf16(0x7F7F, "3.39e+38");
    expect_bf16(0x0001, "9e-41");
    expect_bf16(0x7F80, "\"Infinity\"");
    expect_bf16(0xFFC0, "\"NaN\"");
}

static void test_format_complex(void **state)
{
    (void)state;
    float c64[2] = {1.5f, -0.1f};
    expect_text(TILE_COMPLEX64, c64, "[1.5,-0.1]");
    double c128[2] = {NAN, 1.0};
    expect_text(TILE_COMPLEX128, c128, "[\"NaN\",1.0]");
    double worst[2] = {-2.2250738585072014e-308, -1.7976931348623157e308};
    expect_text(TILE_COMPLEX128, worst, "[-2.2250738585072014e-308,-1.7976931348623157e+308]");
}

/* The text of every non-string dtype stays within TILE_NUMFMT_MAX. */
static void test_format_bound(void **state)
{
    (void)state;
    char buf[TILE_NUMFMT_MAX];
    size_t longest = 0;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        if (d == TILE_STRING)
            continue;
        for (int i = 0; i < 20000; i++) {
            uint64_t bits[2] = {rng(), rng()};
            size_t n = tile_json_format_element((enum tile_dtype)d, bits, buf);
            assert_true(n > 0 && n <= TILE_NUMFMT_MAX);
            if (n > longest)
                longest = n;
        }
    }
    assert_true(longest <= 51);
}

/* ---- escaping ----------------------------------------------------------- */

static void expect_escape(const char *s, size_t len, const char *want)
{
    char buf[256];
    long n = tile_json_escape_string(s, len, buf, sizeof(buf));
    assert_int_equal(n, (long)strlen(want));
    assert_memory_equal(buf, want, (size_t)n);
    assert_int_equal(tile_json_escape_string(s, len, NULL, 0), n);
}

static void test_escape(void **state)
{
    (void)state;
    expect_escape("", 0, "\"\"");
    expect_escape("abc", 3, "\"abc\"");
    expect_escape("a\"b\\c/", 6, "\"a\\\"b\\\\c/\"");
    expect_escape("\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"");
    expect_escape("\x01\x1f\x7f", 3, "\"\\u0001\\u001F\x7f\""); /* jansson's upper case */
    expect_escape("a\0b", 3, "\"a\\u0000b\"");
    expect_escape("caf\xc3\xa9 \xf0\x9f\x98\x80", 10, "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");
    char buf[8];
    assert_int_equal(tile_json_escape_string("\xc3\x28", 2, buf, sizeof(buf)), -1);
    assert_int_equal(tile_json_escape_string("\xed\xa0\x80", 3, NULL, 0), -1);
    assert_int_equal(tile_json_escape_string("ok\xff", 3, NULL, 0), -1);
}

/* tile_json_escape_text: the same escapes, and each byte that is not part
 * of valid UTF-8 (a stray continuation, a cut sequence, an overlong, a
 * surrogate) becomes U+FFFD, so a log line can show any bytes. */
static void test_escape_text(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        {"a\"b\n\x01", 5, "\"a\\\"b\\n\\u0001\""},
        {"caf\xc3\xa9", 5, "\"caf\xc3\xa9\""},
        {"\xc3\x28", 2, "\"\xef\xbf\xbd(\""},
        {"ok\xff", 3, "\"ok\xef\xbf\xbd\""},
        {"\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xe0\x80\x80x", 4, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdx\""},
        {"\xf0\x9f\x98", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        long n = tile_json_escape_text(cases[i].in, cases[i].len, buf, sizeof(buf));
        assert_int_equal(n, (long)strlen(cases[i].want));
        assert_memory_equal(buf, cases[i].want, (size_t)n);
        assert_int_equal(tile_json_escape_text(cases[i].in, cases[i].len, NULL, 0), n);
        assert_true(n <= 6 * (long)cases[i].len + 2);
    }
}

/* A short buffer gets the first `cap` bytes and nothing after them. */
static void test_escape_short_buffer(void **state)
{
    (void)state;
    const char *s = "ab\"cd\nef";
    const char *full = "\"ab\\\"cd\\nef\"";
    size_t need = strlen(full);
    for (size_t cap = 0; cap <= need; cap++) {
        char buf[32];
        memset(buf, '#', sizeof(buf));
        long n = tile_json_escape_string(s, strlen(s), buf, cap);
        assert_int_equal(n, (long)need);
        assert_memory_equal(buf, full, cap);
        for (size_t i = cap; i < sizeof(buf); i++)
            assert_int_equal(buf[i], '#');
    }
}

/* Against jansson, the JSON library the daemon's other documents come
 * from: random strings of every length from 0 to 40 (so that each byte
 * that needs an escape falls at every place in and across the eight-byte
 * steps of the plain-ASCII scan), drawn from printable ASCII, the quote,
 * the backslash, control bytes, DEL and two- to four-byte UTF-8
 * sequences; and each of the 256 byte values alone at every place of a
 * plain 24-byte run. Valid UTF-8 must quote exactly as json_dumps quotes
 * it; the text form must agree on it too. */
static void check_against_jansson(const char *s, size_t len)
{
    json_t *str = json_stringn(s, len);
    char got[6 * 64 + 3];
    long n = tile_json_escape_string(s, len, got, sizeof(got));
    if (!str) { /* jansson refuses it: not UTF-8 */
        assert_int_equal(n, -1);
        return;
    }
    char *want = json_dumps(str, JSON_ENCODE_ANY);
    assert_non_null(want);
    assert_int_equal(n, (long)strlen(want));
    assert_memory_equal(got, want, (size_t)n);
    assert_int_equal(tile_json_escape_text(s, len, got, sizeof(got)), n);
    assert_memory_equal(got, want, (size_t)n);
    free(want);
    json_decref(str);
}

static void test_escape_against_jansson(void **state)
{
    (void)state;
    static const char *const pieces[] = {"a", "Z", "0", " ", "~", "/", "\"", "\\", "\n", "\r", "\t", "\x01",
                                         "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    char s[64 * 4];
    for (int round = 0; round < 4000; round++) {
        size_t want_len = (size_t)(rng() % 41), len = 0;
        while (len < want_len) {
            const char *p = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t n = strlen(p);
            memcpy(s + len, p, n);
            len += n;
        }
        check_against_jansson(s, len);
    }
    for (int byte = 0; byte < 256; byte++) {
        for (size_t at = 0; at < 24; at++) {
            memset(s, 'x', 24);
            s[at] = (char)byte;
            check_against_jansson(s, 24);
        }
    }
}

/* tile_format_u64 against printf: every value to 100,000, each power of
 * ten and its neighbours, the largest value, and random ones. */
static void expect_u64(uint64_t v)
{
    char got[24], want[24];
    memset(got, 'Z', sizeof(got));
    size_t n = tile_format_u64(got, v);
    snprintf(want, sizeof(want), "%llu", (unsigned long long)v);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(got, want, n);
    assert_int_equal(got[n], 'Z'); /* no NUL, nothing past the digits */
}

static void test_format_u64(void **state)
{
    (void)state;
    for (uint64_t v = 0; v <= 100000; v++)
        expect_u64(v);
    for (uint64_t p = 10; p <= UINT64_C(10000000000000000000); p *= 10) {
        expect_u64(p - 1);
        expect_u64(p);
        expect_u64(p + 1);
        if (p > UINT64_MAX / 10)
            break;
    }
    expect_u64(UINT64_MAX);
    for (int i = 0; i < 100000; i++)
        expect_u64(((uint64_t)rng() << 32 | rng()) >> (rng() % 64));
}

/* tile_json_plain_end against the byte-by-byte definition: every byte
 * value at every place of every length up to 24 (across and inside the
 * eight-byte words, and in the short tail), from a few starts, each
 * followed by bytes a borrow or an XOR could mark falsely above it. */
static size_t plain_end_ref(const char *s, size_t i, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    while (i < len && u[i] >= 0x20 && u[i] < 0x80 && u[i] != '"' && u[i] != '\\')
        i++;
    return i;
}

static void test_plain_end(void **state)
{
    (void)state;
    static const unsigned char after[] = {'x', 0x01, 0x20, '#', ']'};
    static const size_t starts[] = {0, 1, 3, 8};
    char s[32];
    for (size_t len = 0; len <= 24; len++) {
        for (size_t f = 0; f < sizeof(starts) / sizeof(starts[0]) && starts[f] <= len; f++) {
            size_t from = starts[f];
            memset(s, 'x', sizeof(s));
            assert_int_equal(tile_json_plain_end(s, from, len), len);
            for (size_t at = from; at < len; at++) {
                for (int byte = 0; byte < 256; byte++) {
                    for (size_t k = 0; k < sizeof(after); k++) {
                        memset(s, 'x', sizeof(s));
                        s[at] = (char)byte;
                        if (at + 1 < len)
                            s[at + 1] = (char)after[k];
                        assert_int_equal(tile_json_plain_end(s, from, len), plain_end_ref(s, from, len));
                    }
                }
            }
        }
    }
}

/* ---- parsing ----------------------------------------------------------- */

/* Lexes `text` (one scalar) and converts it as element `idx` of "data". */
static int parse_text(enum tile_dtype dtype, const char *text, void *elem, uint64_t idx, struct tile_error *e)
{
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_json_path where = {"data", &idx, 1};
    tile_error_clear(e);
    tile_json_lexer_init(&lx, text, strlen(text), 0);
    if (tile_json_next(&lx, &t, e) < 0)
        return -1;
    return tile_json_parse_element(dtype, &t, elem, &where, e);
}

static void expect_parse_error(enum tile_dtype dtype, const char *text, uint64_t idx, const char *msg)
{
    struct tile_error e;
    unsigned char elem[16];
    if (parse_text(dtype, text, elem, idx, &e) == 0)
        fail_msg("%s '%s' was accepted", tile_dtype_name(dtype), text);
    assert_int_equal(e.code, TILE_EINVAL);
    if (!strstr(e.text, msg))
        fail_msg("%s '%s': message '%s' lacks '%s'", tile_dtype_name(dtype), text, e.text, msg);
}

static uint64_t parse_ok(enum tile_dtype dtype, const char *text)
{
    struct tile_error e;
    uint64_t elem[2] = {0, 0};
    if (parse_text(dtype, text, elem, 0, &e) < 0)
        fail_msg("%s '%s': %s", tile_dtype_name(dtype), text, e.text);
    return elem[0];
}

static void test_parse_ints(void **state)
{
    (void)state;
    assert_int_equal(parse_ok(TILE_BOOL, "true"), 1);
    assert_int_equal(parse_ok(TILE_BOOL, "false"), 0);
    assert_int_equal(parse_ok(TILE_UINT8, "255"), 255);
    assert_int_equal(parse_ok(TILE_UINT8, "-0"), 0);
    assert_int_equal(parse_ok(TILE_INT8, "-128"), 0x80);
    assert_int_equal(parse_ok(TILE_INT16, "-1"), 0xFFFF);
    assert_int_equal(parse_ok(TILE_INT32, "1e2"), 100);
    assert_int_equal(parse_ok(TILE_INT32, "7.0"), 7);
    assert_int_equal(parse_ok(TILE_INT32, "-2147483648"), 0x80000000u);
    assert_true(parse_ok(TILE_UINT64, "18446744073709551615") == UINT64_MAX);
    assert_true(parse_ok(TILE_INT64, "-9223372036854775808") == (uint64_t)INT64_MIN);
    assert_true(parse_ok(TILE_INT64, "9223372036854775807") == (uint64_t)INT64_MAX);
    expect_parse_error(TILE_UINT8, "300", 5, "value 300 is out of range for uint8 at data[5]");
    expect_parse_error(TILE_UINT8, "-1", 0, "value -1 is out of range for uint8 at data[0]");
    expect_parse_error(TILE_INT8, "128", 1, "value 128 is out of range for int8 at data[1]");
    expect_parse_error(TILE_INT8, "-129", 1, "value -129 is out of range for int8");
    expect_parse_error(TILE_INT16, "32768", 1, "out of range for int16");
    expect_parse_error(TILE_UINT32, "4294967296", 1, "out of range for uint32");
    expect_parse_error(TILE_INT64, "9223372036854775808", 1, "out of range for int64");
    expect_parse_error(TILE_UINT64, "18446744073709551616", 2, "value 18446744073709551616 is out of range for uint64");
    expect_parse_error(TILE_INT32, "1.5", 2, "value 1.5 at data[2] is not an integer (dtype int32)");
    expect_parse_error(TILE_INT32, "1e-3", 2, "is not an integer");
    expect_parse_error(TILE_INT32, "\"7\"", 3, "data[3] is a string, but dtype int32 needs numbers");
    expect_parse_error(TILE_INT32, "null", 3, "data[3] is null, but dtype int32 needs numbers");
    expect_parse_error(TILE_INT32, "true", 3, "data[3] is true, but dtype int32 needs numbers");
    expect_parse_error(TILE_INT32, "\"NaN\"", 4, "data[4] is \"NaN\", but dtype int32 has no NaN or Infinity");
    expect_parse_error(TILE_UINT8, "\"-Infinity\"", 4, "has no NaN or Infinity");
    expect_parse_error(TILE_BOOL, "1", 0, "data[0] is a number, but dtype bool needs true or false");
    expect_parse_error(TILE_BOOL, "\"true\"", 0, "data[0] is a string, but dtype bool needs true or false");
    expect_parse_error(TILE_STRING, "1", 6, "data[6] is a number, but dtype str needs strings");
    expect_parse_error(TILE_UINT8, "1234567890123456789012345678901234567890123456789", 0,
                       "value 1234567890123456789012345678901234567890... is out of range for uint8");
}

static float f32_of(uint64_t bits)
{
    uint32_t u = (uint32_t)bits;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static double f64_of(uint64_t bits)
{
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

static void test_parse_floats(void **state)
{
    (void)state;
    assert_true(f32_of(parse_ok(TILE_FLOAT32, "0.1")) == 0.1f);
    assert_true(f32_of(parse_ok(TILE_FLOAT32, "1.00000005960464477539062501")) == nextafterf(1.0f, 2.0f));
    assert_true(f32_of(parse_ok(TILE_FLOAT32, "3.4028235e38")) == 3.4028235e38f);
    assert_true(f64_of(parse_ok(TILE_FLOAT64, "0.1")) == 0.1);
    assert_true(f64_of(parse_ok(TILE_FLOAT64, "1e-400")) == 0.0);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"NaN\""), 0x7FC00000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"nan\""), 0x7FC00000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"Infinity\""), 0x7F800000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"-Infinity\""), 0xFF800000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"inf\""), 0x7F800000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"-INF\""), 0xFF800000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"+infinity\""), 0x7F800000u);
    assert_int_equal(parse_ok(TILE_FLOAT32, "\"\\u004eaN\""), 0x7FC00000u); /* escaped "NaN" */
    assert_true(parse_ok(TILE_FLOAT64, "\"NaN\"") == UINT64_C(0x7FF8000000000000));
    assert_true(parse_ok(TILE_FLOAT64, "\"-Infinity\"") == UINT64_C(0xFFF0000000000000));
    assert_int_equal(parse_ok(TILE_FLOAT16, "\"NaN\""), 0x7E00);
    assert_int_equal(parse_ok(TILE_FLOAT16, "\"Infinity\""), 0x7C00);
    assert_int_equal(parse_ok(TILE_BFLOAT16, "\"NaN\""), 0x7FC0);
    assert_int_equal(parse_ok(TILE_BFLOAT16, "\"-inf\""), 0xFF80);
    assert_int_equal(parse_ok(TILE_COMPLEX64, "0.1"), 0x3DCCCCCDu); /* one float32 part */
    assert_true(parse_ok(TILE_COMPLEX128, "0.1") == UINT64_C(0x3FB999999999999A));
    expect_parse_error(TILE_FLOAT32, "3.5e38", 0, "value 3.5e38 is out of range for float32 at data[0]");
    expect_parse_error(TILE_FLOAT64, "1e309", 0, "value 1e309 is out of range for float64");
    expect_parse_error(TILE_FLOAT32, "\"abc\"", 1, "data[1] is a string, but dtype float32 needs numbers");
    expect_parse_error(TILE_FLOAT32, "\"NaNa\"", 1, "is a string");
    expect_parse_error(TILE_FLOAT32, "\"\"", 1, "is a string");
    expect_parse_error(TILE_FLOAT64, "null", 2, "data[2] is null, but dtype float64 needs numbers");
    expect_parse_error(TILE_FLOAT64, "false", 2, "data[2] is false");
    expect_parse_error(TILE_COMPLEX64, "1e39", 2, "value 1e39 is out of range for complex64 at data[2]");
}

/* float16 / bfloat16 round from the decimal, not from the nearest double. */
static void test_parse_half_rounding(void **state)
{
    (void)state;
    assert_int_equal(parse_ok(TILE_FLOAT16, "0.1"), 0x2E66);
    assert_int_equal(parse_ok(TILE_FLOAT16, "65504"), 0x7BFF);
    assert_int_equal(parse_ok(TILE_FLOAT16, "65519"), 0x7BFF);
    assert_int_equal(parse_ok(TILE_FLOAT16, "65519.99"), 0x7BFF);
    /* rounds to the double 65520.0, a tie that would overflow */
    assert_int_equal(parse_ok(TILE_FLOAT16, "65519.9999999999999999999"), 0x7BFF);
    expect_parse_error(TILE_FLOAT16, "65520", 3, "value 65520 is out of range for float16 at data[3]");
    expect_parse_error(TILE_FLOAT16, "-70000", 3, "value -70000 is out of range for float16");
    expect_parse_error(TILE_FLOAT16, "65520.0000000000000000001", 3, "out of range for float16");
    /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10 */
    assert_int_equal(parse_ok(TILE_FLOAT16, "1.00048828125"), 0x3C00);
    assert_int_equal(parse_ok(TILE_FLOAT16, "1.00048828125000000000000001"), 0x3C01);
    assert_int_equal(parse_ok(TILE_FLOAT16, "1.00048828124999999999999999"), 0x3C00);
    assert_int_equal(parse_ok(TILE_FLOAT16, "-1.00048828125000000000000001"), 0xBC01);
    assert_int_equal(parse_ok(TILE_FLOAT16, "1.00146484375"), 0x3C02);
    assert_int_equal(parse_ok(TILE_FLOAT16, "1.00146484374999999999999999"), 0x3C01);
    /* half the smallest subnormal, 2^-25 */
    assert_int_equal(parse_ok(TILE_FLOAT16, "2.98023223876953125e-8"), 0x0000);
    assert_int_equal(parse_ok(TILE_FLOAT16, "2.98023223876953125000000001e-8"), 0x0001);
    assert_int_equal(parse_ok(TILE_FLOAT16, "2.9802322387695312e-8"), 0x0000);
    assert_int_equal(parse_ok(TILE_FLOAT16, "2.9802322387695313e-8"), 0x0001);
    assert_int_equal(parse_ok(TILE_FLOAT16, "1e-10"), 0x0000);
    assert_int_equal(parse_ok(TILE_FLOAT16, "-1e-10"), 0x8000);
    /* bfloat16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
    assert_int_equal(parse_ok(TILE_BFLOAT16, "1.00390625"), 0x3F80);
    assert_int_equal(parse_ok(TILE_BFLOAT16, "1.00390625000000000000000001"), 0x3F81);
    assert_int_equal(parse_ok(TILE_BFLOAT16, "0.1"), 0x3DCD);
    assert_int_equal(parse_ok(TILE_BFLOAT16, "3.3895313892515355e38"), 0x7F7F);
    expect_parse_error(TILE_BFLOAT16, "3.4e38", 0, "value 3.4e38 is out of range for bfloat16");
}

/* The exact decimal of a 16-bit tie (few digits), then decimals a hair above
 * and below it: all three round to the same double, the tie itself. */
static void tie_texts(double mid, char *exact, char *up, char *down, size_t cap)
{
    char m[160];
    snprintf(m, sizeof(m), "%.130e", mid); /* exact: a bfloat16 tie has at most ~100 digits */
    char *e = strchr(m, 'e');
    size_t n = (size_t)(e - m);
    while (m[n - 1] == '0')
        n--;
    snprintf(exact, cap, "%.*s0%s", (int)n, m, e);
    snprintf(up, cap, "%.*s00000000000000000001%s", (int)n, m, e);
    size_t last = m[n - 1] == '.' ? n - 2 : n - 1; /* the last non-zero digit */
    m[last]--;
    snprintf(down, cap, "%.*s99999999999999999999%s", (int)n, m, e);
}

static void check_ties(enum tile_dtype dtype, uint32_t last, uint32_t step, double (*value)(uint16_t))
{
    char exact[200], up[200], down[200];
    for (uint32_t a = 0; a < last; a += step) {
        double mid = (value((uint16_t)a) + value((uint16_t)(a + 1))) / 2;
        tie_texts(mid, exact, up, down, sizeof(exact));
        double d;
        tile_json_number_double(up, strlen(up), &d);
        assert_true(d == mid); /* the double alone cannot tell these apart */
        tile_json_number_double(down, strlen(down), &d);
        assert_true(d == mid);
        assert_int_equal(parse_ok(dtype, exact), (a & 1) ? a + 1 : a);
        assert_int_equal(parse_ok(dtype, up), a + 1);
        assert_int_equal(parse_ok(dtype, down), a);
    }
}

static double f16_value(uint16_t h)
{
    return tile_f16_to_f32(h);
}

static double bf16_value(uint16_t h)
{
    return tile_bf16_to_f32(h);
}

static void test_parse_half_ties(void **state)
{
    (void)state;
    check_ties(TILE_FLOAT16, 0x7BFF, 3, f16_value);
    check_ties(TILE_BFLOAT16, 0x7F7F, 11, bf16_value);
}

/* ---- round trips ------------------------------------------------------- */

/* Formats `elem`, lexes the text and parses it back (complex: both parts). */
static void round_trip(enum tile_dtype dtype, const void *elem, void *back)
{
    char buf[TILE_NUMFMT_MAX];
    size_t n = tile_json_format_element(dtype, elem, buf);
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e;
    tile_error_clear(&e);
    tile_json_lexer_init(&lx, buf, n, 0);
    size_t part = tile_dtype_size(dtype);
    int parts = 1;
    if (tile_dtype_traits(dtype)->cls == TILE_CLASS_COMPLEX) {
        assert_int_equal(tile_json_next(&lx, &t, &e), 0);
        assert_int_equal(t.type, TILE_JSON_ARRAY_BEGIN);
        part /= 2;
        parts = 2;
    }
    for (int p = 0; p < parts; p++) {
        if (tile_json_next(&lx, &t, &e) < 0 ||
            tile_json_parse_element(dtype, &t, (char *)back + p * part, NULL, &e) < 0)
            fail_msg("%s '%.*s': %s", tile_dtype_name(dtype), (int)n, buf, e.text);
    }
    if (parts == 2)
        assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_END);
}

/* A NaN comes back as the canonical quiet NaN; everything else bit-exact. */
static bool same_value(enum tile_dtype dtype, const uint64_t *a, const uint64_t *b, size_t size)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(dtype);
    if (tr->cls == TILE_CLASS_BOOL)
        return (*(const uint8_t *)a != 0) == (*(const uint8_t *)b != 0);
    if (memcmp(a, b, size) == 0)
        return true;
    if (tr->cls == TILE_CLASS_INT || tr->cls == TILE_CLASS_UINT)
        return false;
    char ta[TILE_NUMFMT_MAX], tb[TILE_NUMFMT_MAX];
    size_t na = tile_json_format_element(dtype, a, ta), nb = tile_json_format_element(dtype, b, tb);
    return na == nb && memcmp(ta, tb, na) == 0 && memchr(ta, 'N', na); /* only NaNs may differ */
}

static void round_trip_dtype(enum tile_dtype dtype, int count)
{
    size_t size = tile_dtype_size(dtype);
    for (int i = 0; i < count; i++) {
        uint64_t elem[2] = {rng(), rng()}, back[2] = {0, 0};
        if (size < 8)
            elem[0] &= (UINT64_C(1) << (8 * size)) - 1;
        round_trip(dtype, elem, back);
        if (!same_value(dtype, elem, back, size))
            fail_msg("%s: %016llx %016llx came back as %016llx %016llx", tile_dtype_name(dtype),
                     (unsigned long long)elem[0], (unsigned long long)elem[1], (unsigned long long)back[0],
                     (unsigned long long)back[1]);
    }
}

static double exact_value(enum tile_dtype dtype, uint64_t bits)
{
    if (dtype == TILE_FLOAT16)
        return tile_f16_to_f32((uint16_t)bits);
    if (dtype == TILE_BFLOAT16)
        return tile_bf16_to_f32((uint16_t)bits);
    return dtype == TILE_FLOAT32 ? (double)f32_of(bits) : f64_of(bits);
}

/* The output is the shortest: one digit fewer, correctly rounded, does not
 * read back to the same value. */
static void check_shortest(enum tile_dtype dtype, uint64_t bits)
{
    char buf[TILE_NUMFMT_MAX + 1];
    size_t n = tile_json_format_element(dtype, &bits, buf);
    buf[n] = '\0';
    if (buf[0] == '"')
        return;
    int digits = 0;
    bool leading = true;
    const char *c = buf;
    for (; *c && *c != 'e'; c++) {
        if (*c >= '1' && *c <= '9')
            leading = false;
        if (*c >= '0' && *c <= '9' && !leading)
            digits++;
    }
    /* drop the ".0" of integral values and trailing zeros of positional text */
    for (const char *p = c - 1; p > buf && (*p == '0' || *p == '.') && digits > 1; p--) {
        if (*p == '0')
            digits--;
    }
    if (digits <= 1)
        return;
    double v = exact_value(dtype, bits);
    char shorter[64];
    snprintf(shorter, sizeof(shorter), "%.*e", digits - 2, v);
    struct tile_error e;
    uint64_t back[2] = {0, 0};
    if (parse_text(dtype, shorter, back, 0, &e) < 0) /* rounded up out of range */
        return;
    if (back[0] == bits)
        fail_msg("%s %llx: '%s' but '%s' also reads back", tile_dtype_name(dtype), (unsigned long long)bits, buf,
                 shorter);
}

static void test_round_trip_half_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = 0, bback = 0, x = (uint16_t)h;
        round_trip(TILE_FLOAT16, &x, &back);
        round_trip(TILE_BFLOAT16, &x, &bback);
        bool nan16 = (h & 0x7C00) == 0x7C00 && (h & 0x3FF), nanb = (h & 0x7F80) == 0x7F80 && (h & 0x7F);
        assert_int_equal(back, nan16 ? 0x7E00 : h);
        assert_int_equal(bback, nanb ? 0x7FC0 : h);
        check_shortest(TILE_FLOAT16, h);
        check_shortest(TILE_BFLOAT16, h);
    }
}

static void test_round_trip_f32(void **state)
{
    (void)state;
    round_trip_dtype(TILE_FLOAT32, 100000);
    for (int i = 0; i < 20000; i++)
        check_shortest(TILE_FLOAT32, rng() & 0xFFFFFFFFu);
    /* decimals of up to 6 digits (FLT_DIG) come back as written */
    for (int i = 0; i < 20000; i++) {
        char text[32], buf[TILE_NUMFMT_MAX + 1];
        snprintf(text, sizeof(text), "%d.%02de%d", (int)(rng() % 10000), (int)(rng() % 100), (int)(rng() % 60) - 30);
        uint64_t bits = parse_ok(TILE_FLOAT32, text);
        size_t n = tile_json_format_element(TILE_FLOAT32, &bits, buf);
        buf[n] = '\0';
        double a = strtod(text, NULL), b = strtod(buf, NULL);
        assert_true(a == b); /* same decimal value, possibly fewer zeros */
    }
}

static void test_round_trip_f64(void **state)
{
    (void)state;
    round_trip_dtype(TILE_FLOAT64, 100000);
    for (int i = 0; i < 20000; i++)
        check_shortest(TILE_FLOAT64, rng());
}

static void test_round_trip_others(void **state)
{
    (void)state;
    static const enum tile_dtype dtypes[] = {TILE_BOOL,   TILE_INT8,   TILE_INT16,  TILE_INT32,
                                             TILE_INT64,  TILE_UINT8,  TILE_UINT16, TILE_UINT32,
                                             TILE_UINT64, TILE_FLOAT16, TILE_BFLOAT16};
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        round_trip_dtype(dtypes[i], 100000);
    round_trip_dtype(TILE_COMPLEX64, 50000);
    round_trip_dtype(TILE_COMPLEX128, 50000);
}

static void test_path_format(void **state)
{
    (void)state;
    uint64_t idx[3] = {1, 2, 18446744073709551615u};
    struct tile_json_path p = {"data", idx, 3};
    char buf[64];
    assert_int_equal(tile_json_path_format(&p, buf, sizeof(buf)), strlen("data[1][2][18446744073709551615]"));
    assert_string_equal(buf, "data[1][2][18446744073709551615]");
    p.depth = 0;
    tile_json_path_format(&p, buf, sizeof(buf));
    assert_string_equal(buf, "data");
    p.depth = 3;
    assert_int_equal(tile_json_path_format(&p, buf, 8), 7);
    assert_string_equal(buf, "data[1]");
    tile_json_path_format(NULL, buf, sizeof(buf));
    assert_string_equal(buf, "value");
}

/* tile_json_parse_plain_int, the short path for plain integer literals,
 * against references that do not use it: strtoll/strtoull for the integer
 * types (with their ranges), glibc's correctly rounded strtof/strtod for
 * float32/float64 and complex parts; every other dtype, every literal of
 * more than 15 digits and every out-of-range value must be left to the
 * general path (false, nothing stored). */
static void expect_plain_int(const char *text)
{
    struct tile_json_lexer lx;
    struct tile_json_token t;
    struct tile_error e;
    tile_json_lexer_init(&lx, text, strlen(text), 0);
    assert_int_equal(tile_json_next(&lx, &t, &e), 0);
    assert_int_equal(t.type, TILE_JSON_NUMBER);
    bool neg = text[0] == '-';
    size_t digits = strlen(text) - neg;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *tr = tile_dtype_traits((enum tile_dtype)d);
        unsigned char got[16], want[16];
        memset(got, 0xA5, sizeof(got));
        memset(want, 0xA5, sizeof(want));
        bool ok = tile_json_parse_plain_int(tr, &t, got);
        bool expect = false;
        size_t width = tr->size / tr->parts;
        if (digits <= 15 && (tr->cls == TILE_CLASS_INT || tr->cls == TILE_CLASS_UINT)) {
            unsigned bits = (unsigned)(8 * tr->size);
            long long v = strtoll(text, NULL, 10); /* at most 15 digits: no overflow */
            long long lo = tr->cls == TILE_CLASS_UINT ? 0 : bits == 64 ? INT64_MIN : -(1LL << (bits - 1));
            unsigned long long hi = tr->cls == TILE_CLASS_UINT ? (bits == 64 ? UINT64_MAX : (1ULL << bits) - 1)
                                                               : (bits == 64 ? INT64_MAX : (1ULL << (bits - 1)) - 1);
            expect = v >= lo && (v < 0 || (unsigned long long)v <= hi);
            if (expect)
                memcpy(want, &v, tr->size); /* little-endian: the low bytes */
        } else if (digits <= 15 && (tr->cls == TILE_CLASS_FLOAT || tr->cls == TILE_CLASS_COMPLEX) &&
                   (width == 4 || width == 8)) {
            expect = true;
            if (width == 4) {
                float f = strtof(text, NULL);
                memcpy(want, &f, 4);
            } else {
                double v = strtod(text, NULL);
                memcpy(want, &v, 8);
            }
        }
        if (ok != expect)
            fail_msg("'%s' as %s: short path %s, expected %s", text, tr->name, ok ? "taken" : "refused",
                     expect ? "taken" : "refused");
        if (memcmp(got, want, sizeof(got)) != 0)
            fail_msg("'%s' as %s: short path stored other bytes than the reference", text, tr->name);
    }
}

static void test_plain_int_elements(void **state)
{
    (void)state;
    static const char *const edges[] = {
        "0",
        "-0",
        "1",
        "-1",
        "127",
        "128",
        "-128",
        "-129",
        "255",
        "256",
        "32767",
        "32768",
        "-32768",
        "-32769",
        "65535",
        "65536",
        "2147483647",
        "2147483648",
        "-2147483648",
        "-2147483649",
        "4294967295",
        "4294967296",
        "16777216",
        "16777217",
        "16777219",
        "-16777217",
        "999999999999999",
        "-999999999999999",
        "1000000000000000",
        "9007199254740993",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
    };
    for (size_t k = 0; k < sizeof(edges) / sizeof(edges[0]); k++)
        expect_plain_int(edges[k]);
    char s[32];
    for (int i = 0; i < 20000; i++) {
        testrand_int_literal(s, &rng_state, 17);
        expect_plain_int(s);
    }
    /* Not plain integers: the general path decides. */
    static const char *const others[] = {"1.0", "1e3", "-2.5", "0.5e1"};
    for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++) {
        struct tile_json_lexer lx;
        struct tile_json_token t;
        struct tile_error e;
        unsigned char got[16];
        tile_json_lexer_init(&lx, others[k], strlen(others[k]), 0);
        assert_int_equal(tile_json_next(&lx, &t, &e), 0);
        for (int d = 0; d < TILE_DTYPE_COUNT; d++)
            assert_false(tile_json_parse_plain_int(tile_dtype_traits((enum tile_dtype)d), &t, got));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_ints),         cmocka_unit_test(test_format_floats),
        cmocka_unit_test(test_format_half),         cmocka_unit_test(test_format_complex),
        cmocka_unit_test(test_format_bound),        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_escape_text),         cmocka_unit_test(test_escape_short_buffer),
        cmocka_unit_test(test_escape_against_jansson), cmocka_unit_test(test_plain_end),
        cmocka_unit_test(test_format_u64),
        cmocka_unit_test(test_parse_ints),          cmocka_unit_test(test_parse_floats),
        cmocka_unit_test(test_parse_half_rounding), cmocka_unit_test(test_parse_half_ties),
        cmocka_unit_test(test_round_trip_half_all), cmocka_unit_test(test_round_trip_f32),
        cmocka_unit_test(test_round_trip_f64),      cmocka_unit_test(test_round_trip_others),
        cmocka_unit_test(test_path_format),         cmocka_unit_test(test_plain_int_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
