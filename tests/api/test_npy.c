/* test_npy.c - .npy reading and writing (api/npy.c).
 *
 * Inputs are crafted byte by byte here (not produced by the writer under
 * test), so the reader is checked against the format, not against itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npy.h"

/* ---- helpers ------------------------------------------------------------ */

/* A .npy image: magic, version, header length (u16 for 1.0, u32 after),
 * `dict` padded with spaces to a multiple of 64 and '\n', then the data. */
static uint8_t *mk_npy_v(int major, const char *dict, const void *data, size_t dlen, size_t *len)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = (pre + dl + 1 + 63) / 64 * 64 - pre;
    *len = pre + hlen + dlen;
    uint8_t *b = malloc(*len + 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hlen - dl - 1);
    b[pre + hlen - 1] = '\n';
    if (dlen)
        memcpy(b + pre + hlen, data, dlen);
    return b;
}

static int decode_v(int major, const char *dict, const void *data, size_t dlen, struct tile_tensor *t,
                    struct tile_npy_header *h, struct tile_error *e)
{
    size_t len;
    uint8_t *b = mk_npy_v(major, dict, data, dlen, &len);
    tile_error_clear(e);
    int rc = tile_npy_decode(b, len, 0, 0, t, h, e);
    free(b);
    return rc;
}

static int decode(const char *dict, const void *data, size_t dlen, struct tile_tensor *t, struct tile_error *e)
{
    return decode_v(1, dict, data, dlen, t, NULL, e);
}

static void assert_error_has(const struct tile_error *e, enum tile_errcode code, const char *substr)
{
    if (!strstr(e->text, substr))
        fail_msg("error \"%s\" does not contain \"%s\"", e->text, substr);
    assert_int_equal(e->code, code);
}

/* Decoding `dict` + data must fail with `substr` in the message. */
static void expect_fail(const char *dict, const void *data, size_t dlen, enum tile_errcode code, const char *substr)
{
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(decode(dict, data, dlen, &t, &e), -1);
    assert_error_has(&e, code, substr);
    assert_null(t.data);
}

static void expect_fail_bytes(const void *buf, size_t len, enum tile_errcode code, const char *substr)
{
    struct tile_tensor t;
    struct tile_error e = {0};
    assert_int_equal(tile_npy_decode(buf, len, 0, 0, &t, NULL, &e), -1);
    assert_error_has(&e, code, substr);
}

/* Writes `t` through tile_npy_write_file into memory. */
static char *write_mem(const struct tile_tensor *t, enum tile_npy_strkind kind, uint64_t width, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    struct tile_error e = {0};
    int rc = tile_npy_write_file(f, t, kind, width, &e);
    fclose(f);
    if (rc < 0)
        fail_msg("write failed: %s", e.text);
    return buf;
}

/* True when the first `len` bytes of `buf` (NULs allowed) contain `needle`. */
static bool has(const void *buf, size_t len, const char *needle)
{
    return memmem(buf, len, needle, strlen(needle)) != NULL;
}

static void swap_bytes(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        uint8_t x = p[i];
        p[i] = p[n - 1 - i];
        p[n - 1 - i] = x;
    }
}

static struct tile_str S(const char *s)
{
    return (struct tile_str){s, strlen(s)};
}

static void assert_str(const struct tile_str *s, const char *want, size_t want_len)
{
    assert_int_equal(s->len, want_len);
    if (want_len)
        assert_memory_equal(s->ptr, want, want_len);
}

/* ---- round trips -------------------------------------------------------- */

static void round_trip_dtype(enum tile_dtype d)
{
    int64_t shape[2] = {2, 3};
    struct tile_tensor t, back;
    struct tile_error e = {0};
    assert_int_equal(tile_tensor_init(&t, d, 2, shape, 0, &e), 0);
    uint8_t *p = t.data;
    for (uint64_t i = 0; i < tile_tensor_nbytes(&t); i++)
        p[i] = d == TILE_BOOL ? (uint8_t)(i & 1) : (uint8_t)(i * 37 + 11);
    size_t len;
    char *img = write_mem(&t, TILE_NPY_STR_UNICODE, 0, &len);
    assert_memory_equal(img, "\x93NUMPY\x01\x00", 8);
    struct tile_npy_header h;
    assert_int_equal(tile_npy_decode(img, len, 0, 0, &back, &h, &e), 0);
    assert_int_equal(h.header_len % 64, 0);
    assert_int_equal(back.dtype, d);
    assert_int_equal(back.rank, 2);
    assert_int_equal(back.shape[0], 2);
    assert_int_equal(back.shape[1], 3);
    assert_memory_equal(back.data, t.data, tile_tensor_nbytes(&t));
    free(img);
    tile_tensor_free(&t);
    tile_tensor_free(&back);
}

static void test_round_trip_every_dtype(void **state)
{
    (void)state;
    int tested = 0;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = tile_dtype_traits((enum tile_dtype)d);
        if (!t->npy_kind)
            continue;
        round_trip_dtype((enum tile_dtype)d);
        tested++;
    }
    assert_int_equal(tested, 14); /* all but bfloat16 and strings */
}

static void round_trip_strings(enum tile_npy_strkind kind, uint64_t width, const char *descr)
{
    const char *words[] = {"", "a", "h\xc3\xa9llo", "\xe2\x82\xac", "\xf0\x9f\x98\x80!", "end"};
    struct tile_tensor t, back;
    struct tile_error e = {0};
    int64_t shape[1] = {6};
    assert_int_equal(tile_tensor_init(&t, TILE_STRING, 1, shape, 0, &e), 0);
    struct tile_str *s = t.data;
    for (int i = 0; i < 6; i++)
        s[i] = S(words[i]);
    size_t len;
    char *img = write_mem(&t, kind, width, &len);
    if (!has(img, len, descr))
        fail_msg("header lacks %s: %.60s", descr, img + 10);
    struct tile_npy_header h;
    assert_int_equal(tile_npy_decode(img, len, 0, 0, &back, &h, &e), 0);
    assert_int_equal(h.strkind, kind);
    const struct tile_str *b = back.data;
    for (int i = 0; i < 6; i++)
        assert_str(&b[i], words[i], strlen(words[i]));
    free(img);
    tile_tensor_free(&t);
    tile_tensor_free(&back);
}

static void test_round_trip_strings(void **state)
{
    (void)state;
    round_trip_strings(TILE_NPY_STR_UNICODE, 0, "'<U5'"); /* "h\xc3\xa9llo": 5 chars, 6 bytes */
    round_trip_strings(TILE_NPY_STR_UNICODE, 9, "'<U9'");  /* a given width is kept */
    round_trip_strings(TILE_NPY_STR_BYTES, 0, "'|S6'");
    round_trip_strings(TILE_NPY_STR_BYTES, 12, "'|S12'");
}

/* Exactly numpy's header for a (2, 3) float32 array: 128 bytes. */
static void test_header_matches_numpy(void **state)
{
    (void)state;
    char buf[256];
    struct tile_error e = {0};
    int64_t shape[2] = {2, 3};
    long n = tile_npy_write_header(buf, sizeof(buf), TILE_FLOAT32, 2, shape, TILE_NPY_STR_UNICODE, 0, &e);
    assert_int_equal(n, 128);
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    assert_memory_equal(buf, "\x93NUMPY\x01\x00\x76\x00", 10);
    assert_memory_equal(buf + 10, dict, strlen(dict));
    for (size_t i = 10 + strlen(dict); i < 127; i++)
        assert_int_equal(buf[i], ' ');
    assert_int_equal(buf[127], '\n');

    int64_t one = 3;
    n = tile_npy_write_header(buf, sizeof(buf), TILE_BOOL, 1, &one, TILE_NPY_STR_UNICODE, 0, &e);
    assert_true(n > 0 && n % 64 == 0);
    assert_true(has(buf, (size_t)n, "'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"));
    n = tile_npy_write_header(buf, sizeof(buf), TILE_COMPLEX128, 0, NULL, TILE_NPY_STR_UNICODE, 0, &e);
    assert_true(n > 0 && n % 64 == 0);
    assert_true(has(buf, (size_t)n, "'descr': '<c16', 'fortran_order': False, 'shape': (), }"));
    n = tile_npy_write_header(buf, sizeof(buf), TILE_STRING, 1, &one, TILE_NPY_STR_BYTES, 7, &e);
    assert_true(has(buf, (size_t)n, "'descr': '|S7'"));

    /* A buffer too small is an error, not a truncated header. */
    assert_int_equal(tile_npy_write_header(buf, 100, TILE_FLOAT32, 2, shape, TILE_NPY_STR_UNICODE, 0, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "needs 128 bytes");
}

static void test_header_rank64(void **state)
{
    (void)state;
    int64_t shape[TILE_MAX_RANK];
    for (int i = 0; i < TILE_MAX_RANK; i++)
        shape[i] = INT64_MAX;
    static char buf[4096];
    struct tile_error e = {0};
    long n = tile_npy_write_header(buf, sizeof(buf), TILE_INT8, TILE_MAX_RANK, shape, TILE_NPY_STR_UNICODE, 0, &e);
    assert_true(n > 1024 && n % 64 == 0);
    struct tile_npy_header h;
    tile_error_clear(&e);
    /* The shape parses back (its product overflows, which is reported). */
    assert_int_equal(tile_npy_parse_header(buf, (size_t)n, 0, &h, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "overflows");
    assert_int_equal(h.rank, TILE_MAX_RANK);
    assert_int_equal(h.shape[63], INT64_MAX);
}

static void test_bfloat16_has_no_npy_form(void **state)
{
    (void)state;
    char buf[256];
    struct tile_error e = {0};
    int64_t shape[1] = {2};
    assert_int_equal(tile_npy_write_header(buf, sizeof(buf), TILE_BFLOAT16, 1, shape, TILE_NPY_STR_UNICODE, 0, &e), -1);
    assert_error_has(&e, TILE_ENOTACCEPT, "bfloat16 has no .npy form");
    assert_non_null(strstr(e.text, "raw binary or JSON"));

    struct tile_tensor t;
    tile_error_clear(&e);
    assert_int_equal(tile_tensor_init(&t, TILE_BFLOAT16, 1, shape, 0, &e), 0);
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    assert_int_equal(tile_npy_write_file(f, &t, TILE_NPY_STR_UNICODE, 0, &e), -1);
    fclose(f);
    assert_int_equal(len, 0);
    assert_int_equal(e.code, TILE_ENOTACCEPT);
    free(mem);
    tile_tensor_free(&t);
}

/* ---- versions ------------------------------------------------------------ */

static void test_versions(void **state)
{
    (void)state;
    int32_t data[3] = {7, -8, 9};
    for (int major = 1; major <= 3; major++) {
        struct tile_tensor t;
        struct tile_npy_header h;
        struct tile_error e;
        assert_int_equal(
            decode_v(major, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", data, sizeof(data), &t, &h, &e),
            0);
        assert_int_equal(h.major, major);
        assert_int_equal(h.header_len % 64, 0);
        assert_int_equal(t.dtype, TILE_INT32);
        assert_memory_equal(t.data, data, sizeof(data));
        tile_tensor_free(&t);
    }
}

static void test_bad_version(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = mk_npy_v(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", "\0\0\0\0", 4, &len);
    b[6] = 4;
    expect_fail_bytes(b, len, TILE_EUNSUPPORTED, "unsupported .npy format version 4.0");
    b[6] = 1;
    b[7] = 1;
    expect_fail_bytes(b, len, TILE_EUNSUPPORTED, "version 1.1");
    b[6] = 0;
    b[7] = 0;
    expect_fail_bytes(b, len, TILE_EUNSUPPORTED, "version 0.0");
    free(b);
}

static void test_bad_magic(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = mk_npy_v(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", "\0\0\0\0", 4, &len);
    b[1] = 'n';
    expect_fail_bytes(b, len, TILE_EINVAL, "not a .npy file");
    expect_fail_bytes("", 0, TILE_EINVAL, "not a .npy file");
    expect_fail_bytes("\x93NUM", 4, TILE_EINVAL, "not a .npy file");
    free(b);
}

static void test_truncated_header(void **state)
{
    (void)state;
    size_t len;
    uint8_t *b = mk_npy_v(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", "\0\0\0\0", 4, &len);
    expect_fail_bytes(b, 9, TILE_EINVAL, "ends inside the header length");
    expect_fail_bytes(b, 40, TILE_EINVAL, "header length 118 goes beyond the end of the file (40 bytes)");
    /* A header length claiming more than the file holds. */
    b[8] = 0xff;
    b[9] = 0xff;
    expect_fail_bytes(b, len, TILE_EINVAL, "header length 65535 goes beyond the end of the file");
    free(b);
    b = mk_npy_v(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (), }", "\0\0\0\0", 4, &len);
    b[11] = 0x80;
    expect_fail_bytes(b, len, TILE_EINVAL, "goes beyond the end of the file");
    free(b);
}

/* ---- header dict grammar ------------------------------------------------- */

static void test_dict_variants(void **state)
{
    (void)state;
    static const char *const dicts[] = {
        "{'shape': (2,), 'fortran_order': False, 'descr': '<u2'}",        /* any key order, no trailing comma */
        "{\"descr\":\"<u2\",\"fortran_order\":False,\"shape\":(2,)}",        /* double quotes, no spaces */
        " {  'descr' : '<u2' ,\n\t'fortran_order' : False , 'shape' : ( 2 , ) , } ", /* whitespace */
        "{'descr': 'u2', 'fortran_order': False, 'shape': (2L,), }",       /* no byte order; Python 2 long */
        "{'descr': '=u2', 'fortran_order': False, 'shape': (2,), }",       /* native order */
    };
    uint16_t data[2] = {513, 65535};
    for (size_t i = 0; i < sizeof(dicts) / sizeof(dicts[0]); i++) {
        struct tile_tensor t;
        struct tile_error e;
        if (decode(dicts[i], data, sizeof(data), &t, &e) < 0)
            fail_msg("dict %zu: %s", i, e.text);
        assert_int_equal(t.dtype, TILE_UINT16);
        assert_int_equal(t.rank, 1);
        assert_memory_equal(t.data, data, sizeof(data));
        tile_tensor_free(&t);
    }
}

static void test_malformed_dicts(void **state)
{
    (void)state;
    const uint8_t z[64] = {0};
    expect_fail("{'descr': '<i4', 'fortran_order': False}", z, 4, TILE_EINVAL, "has no 'shape' key");
    expect_fail("{'fortran_order': False, 'shape': ()}", z, 4, TILE_EINVAL, "has no 'descr' key");
    expect_fail("{'descr': '<i4', 'shape': ()}", z, 4, TILE_EINVAL, "has no 'fortran_order' key");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (), 'extra': 1}", z, 4, TILE_EINVAL,
                "unknown key 'extra'");
    expect_fail("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': ()}", z, 4, TILE_EINVAL,
                "key 'descr' appears twice");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (2, x)}", z, 8, TILE_EINVAL,
                "expected an integer in 'shape'");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (2 3)}", z, 24, TILE_EINVAL,
                "expected ',' or ')' in 'shape'");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': [2, 3]}", z, 24, TILE_EINVAL,
                "expected a tuple '(' for 'shape'");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (3)}", z, 12, TILE_EINVAL,
                "is an integer, not a tuple (write (3,))");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (2, -1)}", z, 8, TILE_EINVAL,
                "shape[1] is -1; dimensions must be >= 0");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}", z, 8, TILE_ETOOBIG,
                "shape[0] is beyond 64 bits");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", z, 8, TILE_ETOOBIG,
                "overflows");
    expect_fail("{'descr': '<i4', 'fortran_order': maybe, 'shape': ()}", z, 4, TILE_EINVAL,
                "'fortran_order' must be True or False");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': ()", z, 4, TILE_EINVAL,
                "expected ',' or '}' but the header dict ends");
    expect_fail("{'descr': '<i4', 'fortran_order': False, 'shape': ()} x", z, 4, TILE_EINVAL,
                "expected only padding after the header dict at byte 54");
    expect_fail("{'descr' '<i4', 'fortran_order': False, 'shape': ()}", z, 4, TILE_EINVAL,
                "expected ':' after a key at byte 9");
    expect_fail("{'descr': '<i4, 'fortran_order': False, 'shape': ()}", z, 4, TILE_EINVAL,
                "unsupported descr '<i4, '");
    expect_fail("{'descr': '<i4\\n', 'fortran_order': False, 'shape': ()}", z, 4, TILE_EINVAL, "escape sequences");
    expect_fail("{'descr': '<i4", z, 4, TILE_EINVAL, "unterminated string");
    expect_fail("['descr', '<i4']", z, 4, TILE_EINVAL, "expected '{' at byte 0");
    expect_fail("", z, 4, TILE_EINVAL, "expected '{'");
    expect_fail("{descr: '<i4'}", z, 4, TILE_EINVAL, "expected a quoted string at byte 1");
}

static void test_refused_descrs(void **state)
{
    (void)state;
    const uint8_t z[64] = {0};
    expect_fail("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", z, 8, TILE_EUNSUPPORTED,
                "object arrays (pickled Python objects) are not supported");
    expect_fail("{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, 'shape': (1,)}", z, 12,
                TILE_EUNSUPPORTED, "structured dtypes (a list descr) are not supported");
    expect_fail("{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,)}", z, 8, TILE_EUNSUPPORTED,
                "descr '<M8[ns]': datetime64");
    expect_fail("{'descr': '<m8', 'fortran_order': False, 'shape': (1,)}", z, 8, TILE_EUNSUPPORTED, "timedelta64");
    expect_fail("{'descr': '|V8', 'fortran_order': False, 'shape': (1,)}", z, 8, TILE_EUNSUPPORTED, "void");
    expect_fail("{'descr': '<f3', 'fortran_order': False, 'shape': (1,)}", z, 3, TILE_EUNSUPPORTED,
                "unsupported descr '<f3'");
    expect_fail("{'descr': '<i16', 'fortran_order': False, 'shape': (1,)}", z, 16, TILE_EUNSUPPORTED,
                "unsupported descr '<i16'");
    expect_fail("{'descr': '<f16', 'fortran_order': False, 'shape': (1,)}", z, 16, TILE_EUNSUPPORTED,
                "unsupported descr '<f16'");
    expect_fail("{'descr': '<x4', 'fortran_order': False, 'shape': (1,)}", z, 4, TILE_EUNSUPPORTED,
                "unsupported descr '<x4'");
    expect_fail("{'descr': '<f4x', 'fortran_order': False, 'shape': (1,)}", z, 4, TILE_EINVAL,
                "unsupported descr '<f4x'");
    expect_fail("{'descr': '<', 'fortran_order': False, 'shape': (1,)}", z, 4, TILE_EINVAL, "names no type");
    expect_fail("{'descr': '<U', 'fortran_order': False, 'shape': (1,)}", z, 4, TILE_EINVAL, "has no item size");
    expect_fail("{'descr': 3, 'fortran_order': False, 'shape': (1,)}", z, 4, TILE_EINVAL, "expected a quoted string");
}

static void test_descr_mapping(void **state)
{
    (void)state;
    static const struct {
        const char *descr;
        enum tile_dtype dtype;
    } cases[] = {
        {"|b1", TILE_BOOL},      {"|i1", TILE_INT8},     {"|u1", TILE_UINT8},     {"<i2", TILE_INT16},
        {"<i4", TILE_INT32},     {"<i8", TILE_INT64},    {"<u2", TILE_UINT16},    {"<u4", TILE_UINT32},
        {"<u8", TILE_UINT64},    {"<f2", TILE_FLOAT16},  {"<f4", TILE_FLOAT32},   {"<f8", TILE_FLOAT64},
        {"<c8", TILE_COMPLEX64}, {"<c16", TILE_COMPLEX128}, {">f8", TILE_FLOAT64}, {"=i4", TILE_INT32},
        {"<U5", TILE_STRING},    {"|S3", TILE_STRING},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char dict[128];
        snprintf(dict, sizeof(dict), "{'descr': '%s', 'fortran_order': False, 'shape': (0,)}", cases[i].descr);
        size_t len;
        uint8_t *b = mk_npy_v(1, dict, NULL, 0, &len);
        struct tile_npy_header h;
        struct tile_error e = {0};
        if (tile_npy_parse_header(b, len, 0, &h, &e) < 0)
            fail_msg("%s: %s", cases[i].descr, e.text);
        assert_int_equal(h.dtype, cases[i].dtype);
        assert_int_equal(h.big_endian, cases[i].descr[0] == '>');
        free(b);
    }
}

/* ---- data length, limits ---------------------------------------------- */

static void test_data_length(void **state)
{
    (void)state;
    const uint8_t z[64] = {0};
    const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    expect_fail(dict, z, 20, TILE_EINVAL,
                "truncated .npy data: shape (2, 3) of '<f4' needs 24 bytes after the header, the file has 20");
    expect_fail(dict, z, 0, TILE_EINVAL, "needs 24 bytes after the header, the file has 0");
    expect_fail(dict, z, 32, TILE_EINVAL, "the .npy file has 8 bytes after its data (shape (2, 3) of '<f4' needs exactly 24)");
    expect_fail("{'descr': '<U2', 'fortran_order': False, 'shape': (3,), }", z, 23, TILE_EINVAL,
                "shape (3,) of '<U2' needs 24 bytes");
}

static void test_limits(void **state)
{
    (void)state;
    const uint8_t z[64] = {0};
    size_t len;
    uint8_t *b = mk_npy_v(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (1, 2, 3, 1), }", z, 12, &len);
    struct tile_tensor t;
    struct tile_error e = {0};
    assert_int_equal(tile_npy_decode(b, len, 3, 0, &t, NULL, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "rank 4, above the maximum rank of 3");
    tile_error_clear(&e);
    assert_int_equal(tile_npy_decode(b, len, 4, 11, &t, NULL, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "above the limit of 11");
    tile_error_clear(&e);
    assert_int_equal(tile_npy_decode(b, len, 4, 12, &t, NULL, &e), 0);
    tile_tensor_free(&t);
    free(b);

    /* 65 dimensions: beyond the structural maximum. */
    char dict[512];
    int used = snprintf(dict, sizeof(dict), "{'descr': '|u1', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < 65; i++)
        used += snprintf(dict + used, sizeof(dict) - (size_t)used, "1,");
    snprintf(dict + used, sizeof(dict) - (size_t)used, ")}");
    expect_fail(dict, z, 1, TILE_EINVAL, "more than 64 dimensions");
}

/* ---- byte order ---------------------------------------------------------- */

/* Every multi-byte numeric dtype read from '>' data equals the '<' read. */
static void test_big_endian_every_width(void **state)
{
    (void)state;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *tr = tile_dtype_traits((enum tile_dtype)d);
        if (!tr->npy_kind || tr->size == 1)
            continue;
        size_t unit = tr->cls == TILE_CLASS_COMPLEX ? tr->size / 2 : tr->size, n = 3 * tr->size;
        uint8_t little[48], big[48];
        for (size_t i = 0; i < n; i++)
            little[i] = (uint8_t)(i * 29 + 5);
        memcpy(big, little, n);
        for (size_t off = 0; off < n; off += unit)
            swap_bytes(big + off, unit);
        char dict[128];
        snprintf(dict, sizeof(dict), "{'descr': '>%c%zu', 'fortran_order': False, 'shape': (3,), }", tr->npy_kind,
                 tr->size);
        struct tile_tensor t;
        struct tile_error e;
        if (decode(dict, big, n, &t, &e) < 0)
            fail_msg("%s: %s", tr->name, e.text);
        assert_int_equal(t.dtype, d);
        assert_memory_equal(t.data, little, n);
        tile_tensor_free(&t);
    }
}

/* Known values written out by hand in big-endian order. */
static void test_big_endian_values(void **state)
{
    (void)state;
    struct tile_tensor t;
    struct tile_error e;
    const uint8_t i2[] = {0x01, 0x02, 0xff, 0xfe};
    assert_int_equal(decode("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", i2, 4, &t, &e), 0);
    assert_int_equal(((int16_t *)t.data)[0], 258);
    assert_int_equal(((int16_t *)t.data)[1], -2);
    tile_tensor_free(&t);

    const uint8_t f2[] = {0x3c, 0x00, 0xc0, 0x00}; /* 1.0, -2.0 */
    assert_int_equal(decode("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", f2, 4, &t, &e), 0);
    assert_int_equal(((uint16_t *)t.data)[0], 0x3c00);
    assert_int_equal(((uint16_t *)t.data)[1], 0xc000);
    tile_tensor_free(&t);

    const uint8_t c8[] = {0x3f, 0x80, 0, 0, 0xc0, 0x00, 0, 0}; /* 1 - 2j */
    assert_int_equal(decode("{'descr': '>c8', 'fortran_order': False, 'shape': (), }", c8, 8, &t, &e), 0);
    assert_int_equal(t.rank, 0);
    assert_true(((float *)t.data)[0] == 1.0f && ((float *)t.data)[1] == -2.0f);
    tile_tensor_free(&t);

    const uint8_t c16[] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18};
    assert_int_equal(decode("{'descr': '>c16', 'fortran_order': False, 'shape': (1,), }", c16, 16, &t, &e), 0);
    assert_true(((double *)t.data)[0] == 1.5 && ((double *)t.data)[1] == 3.141592653589793);
    tile_tensor_free(&t);

    const uint8_t f8[] = {0xc0, 0x24, 0, 0, 0, 0, 0, 0}; /* -10.0 */
    assert_int_equal(decode("{'descr': '>f8', 'fortran_order': False, 'shape': (), }", f8, 8, &t, &e), 0);
    assert_true(*(double *)t.data == -10.0);
    tile_tensor_free(&t);

    const uint8_t u8[] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_int_equal(decode("{'descr': '>u8', 'fortran_order': False, 'shape': (1,), }", u8, 8, &t, &e), 0);
    assert_true(*(uint64_t *)t.data == 0x0102030405060708ull);
    tile_tensor_free(&t);

    /* One-byte types ignore the byte order. */
    const uint8_t i1[] = {0x80};
    assert_int_equal(decode("{'descr': '>i1', 'fortran_order': False, 'shape': (1,), }", i1, 1, &t, &e), 0);
    assert_int_equal(*(int8_t *)t.data, -128);
    tile_tensor_free(&t);
}

/* ---- Fortran order ------------------------------------------------------- */

/* A Fortran-order int32 file whose element at C index k holds k. */
static int32_t *fortran_data(const int64_t *shape, int rank, uint64_t *n)
{
    uint64_t total = 1;
    for (int i = 0; i < rank; i++)
        total *= (uint64_t)shape[i];
    int32_t *f = malloc(total * sizeof(int32_t));
    int64_t idx[8] = {0};
    for (uint64_t k = 0; k < total; k++) {
        uint64_t off = 0, stride = 1;
        for (int i = 0; i < rank; i++) {
            off += (uint64_t)idx[i] * stride;
            stride *= (uint64_t)shape[i];
        }
        f[off] = (int32_t)k;
        for (int i = rank - 1; i >= 0 && ++idx[i] == shape[i]; i--)
            idx[i] = 0;
    }
    *n = total;
    return f;
}

static void check_fortran(const int64_t *shape, int rank, const char *tuple)
{
    uint64_t n;
    int32_t *f = fortran_data(shape, rank, &n);
    char dict[160];
    snprintf(dict, sizeof(dict), "{'descr': '<i4', 'fortran_order': True, 'shape': %s, }", tuple);
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(decode(dict, f, n * 4, &t, &e), 0);
    assert_int_equal(t.rank, rank);
    for (uint64_t k = 0; k < n; k++)
        assert_int_equal(((int32_t *)t.data)[k], (int32_t)k);
    tile_tensor_free(&t);
    free(f);
}

static void test_fortran_order(void **state)
{
    (void)state;
    /* Rank 2 by hand: [[0 1 2] [3 4 5]] stored column by column. */
    const int32_t f23[] = {0, 3, 1, 4, 2, 5};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(decode("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", f23, 24, &t, &e), 0);
    for (int k = 0; k < 6; k++)
        assert_int_equal(((int32_t *)t.data)[k], k);
    tile_tensor_free(&t);

    const int64_t s2[] = {4, 7}, s3[] = {2, 3, 4}, s5[] = {2, 3, 1, 4, 5}, s1[] = {5};
    check_fortran(s2, 2, "(4, 7)");
    check_fortran(s3, 3, "(2, 3, 4)");
    check_fortran(s5, 5, "(2, 3, 1, 4, 5)");
    check_fortran(s1, 1, "(5,)");

    /* Fortran order and big-endian together. */
    const uint8_t be[] = {0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2, 0, 0, 0, 5};
    assert_int_equal(decode("{'descr': '>i4', 'fortran_order': True, 'shape': (2, 3), }", be, 24, &t, &e), 0);
    for (int k = 0; k < 6; k++)
        assert_int_equal(((int32_t *)t.data)[k], k);
    tile_tensor_free(&t);

    /* Empty Fortran arrays decode to empty tensors. */
    assert_int_equal(decode("{'descr': '<i4', 'fortran_order': True, 'shape': (0, 3), }", NULL, 0, &t, &e), 0);
    assert_int_equal(t.nelem, 0);
    tile_tensor_free(&t);
}

/* ---- strings ------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v, bool big)
{
    for (int i = 0; i < 4; i++)
        p[big ? 3 - i : i] = (uint8_t)(v >> (8 * i));
}

static void test_unicode_strings(void **state)
{
    (void)state;
    /* '<U3': "ab", "é€😀", "", "a\0b" (inner NUL kept), "x" (+ 2 NULs). */
    const uint32_t cps[5][3] = {{'a', 'b', 0}, {0xE9, 0x20AC, 0x1F600}, {0, 0, 0}, {'a', 0, 'b'}, {'x', 0, 0}};
    for (int big = 0; big < 2; big++) {
        uint8_t data[60];
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 3; j++)
                put_u32(data + 12 * i + 4 * j, cps[i][j], big);
        struct tile_tensor t;
        struct tile_npy_header h;
        struct tile_error e;
        const char *dict = big ? "{'descr': '>U3', 'fortran_order': False, 'shape': (5,), }"
                                : "{'descr': '<U3', 'fortran_order': False, 'shape': (5,), }";
        assert_int_equal(decode_v(1, dict, data, sizeof(data), &t, &h, &e), 0);
        assert_int_equal(t.dtype, TILE_STRING);
        assert_int_equal(h.strkind, TILE_NPY_STR_UNICODE);
        assert_int_equal(h.strwidth, 3);
        const struct tile_str *s = t.data;
        assert_str(&s[0], "ab", 2);
        assert_str(&s[1], "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
        assert_str(&s[2], "", 0);
        assert_str(&s[3], "a\0b", 3);
        assert_str(&s[4], "x", 1);
        assert_int_equal(t.blob_len, 15);
        tile_tensor_free(&t);
    }
}

static void test_unicode_invalid(void **state)
{
    (void)state;
    uint8_t data[8];
    put_u32(data, 'a', false);
    put_u32(data + 4, 0x110000, false);
    expect_fail("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", data, 8, TILE_EINVAL,
                "string element 0 holds 0x110000 at character 1");
    put_u32(data + 4, 0xD800, false);
    expect_fail("{'descr': '<U2', 'fortran_order': False, 'shape': (1,), }", data, 8, TILE_EINVAL,
                "0xD800 at character 1, which is not a Unicode scalar value");
}

static void test_byte_strings(void **state)
{
    (void)state;
    const uint8_t data[] = "ab\0\0" "\0\0\0\0" "abcd" "\xff\x00z\x00";
    struct tile_tensor t;
    struct tile_npy_header h;
    struct tile_error e;
    assert_int_equal(decode_v(1, "{'descr': '|S4', 'fortran_order': False, 'shape': (2, 2), }", data, 16, &t, &h, &e),
                     0);
    assert_int_equal(h.strkind, TILE_NPY_STR_BYTES);
    assert_int_equal(h.strwidth, 4);
    const struct tile_str *s = t.data;
    assert_str(&s[0], "ab", 2);
    assert_str(&s[1], "", 0);
    assert_str(&s[2], "abcd", 4);
    assert_str(&s[3], "\xff\0z", 3); /* bytes as they are; only trailing NULs go */
    tile_tensor_free(&t);

    /* Fortran-order strings come out in C order. */
    assert_int_equal(decode("{'descr': '|S4', 'fortran_order': True, 'shape': (2, 2), }", data, 16, &t, &e), 0);
    s = t.data;
    assert_str(&s[0], "ab", 2);
    assert_str(&s[1], "abcd", 4);
    assert_str(&s[2], "", 0);
    tile_tensor_free(&t);

    /* Zero-width strings are all empty. */
    assert_int_equal(decode("{'descr': '|S0', 'fortran_order': False, 'shape': (2,), }", NULL, 0, &t, &e), 0);
    assert_int_equal(t.nelem, 2);
    assert_int_equal(((struct tile_str *)t.data)[1].len, 0);
    tile_tensor_free(&t);
}

static void test_encode_strings(void **state)
{
    (void)state;
    struct tile_str s[3] = {S("h\xc3\xa9"), S(""), S("\xf0\x9f\x98\x80xy")};
    uint64_t width;
    assert_int_equal(tile_npy_string_itemsize(s, 3, TILE_NPY_STR_UNICODE, &width), 12);
    assert_int_equal(width, 3);
    assert_int_equal(tile_npy_string_itemsize(s, 3, TILE_NPY_STR_BYTES, &width), 6);
    assert_int_equal(width, 6);
    assert_int_equal(tile_npy_string_itemsize(s + 1, 1, TILE_NPY_STR_BYTES, &width), 1); /* at least 1 */
    assert_int_equal(tile_npy_string_itemsize(NULL, 0, TILE_NPY_STR_UNICODE, &width), 4);

    uint32_t u[9];
    struct tile_error e = {0};
    assert_int_equal(tile_npy_encode_strings(s, 3, TILE_NPY_STR_UNICODE, 3, u, &e), 0);
    const uint32_t want[9] = {'h', 0xE9, 0, 0, 0, 0, 0x1F600, 'x', 'y'};
    assert_memory_equal(u, want, sizeof(want));

    char b[18];
    assert_int_equal(tile_npy_encode_strings(s, 3, TILE_NPY_STR_BYTES, 6, b, &e), 0);
    assert_memory_equal(b, "h\xc3\xa9\0\0\0\0\0\0\0\0\0\xf0\x9f\x98\x80xy", 18);

    assert_int_equal(tile_npy_encode_strings(s, 3, TILE_NPY_STR_UNICODE, 2, u, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "string element 2 is longer than the .npy width of 2 characters");
    tile_error_clear(&e);
    assert_int_equal(tile_npy_encode_strings(s, 3, TILE_NPY_STR_BYTES, 5, b, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "string element 2 has 6 bytes, more than the .npy width of 5");
    tile_error_clear(&e);
    struct tile_str bad = {"a\xc3", 2};
    assert_int_equal(tile_npy_encode_strings(&bad, 1, TILE_NPY_STR_UNICODE, 4, u, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "string element 0 is not valid UTF-8 (byte 1)");
}

/* More strings than one write chunk holds, with the element index of a
 * failure counted across chunks. */
static void test_write_strings_chunked(void **state)
{
    (void)state;
    enum { N = 100000 };
    int64_t shape[1] = {N};
    struct tile_tensor t, back;
    struct tile_error e = {0};
    assert_int_equal(tile_tensor_init(&t, TILE_STRING, 1, shape, 0, &e), 0);
    struct tile_str *s = t.data;
    static const char *const words[] = {"abc", "\xc3\xa9t\xc3\xa9", "", "z"};
    for (int i = 0; i < N; i++)
        s[i] = S(words[i % 4]);
    size_t len;
    char *img = write_mem(&t, TILE_NPY_STR_UNICODE, 0, &len);
    assert_int_equal(len, 128 + (size_t)N * 12);
    assert_int_equal(tile_npy_decode(img, len, 0, 0, &back, NULL, &e), 0);
    const struct tile_str *b = back.data;
    for (int i = 0; i < N; i++)
        assert_str(&b[i], words[i % 4], strlen(words[i % 4]));
    free(img);
    tile_tensor_free(&back);

    s[N - 1] = (struct tile_str){"\xff", 1};
    char *mem = NULL;
    FILE *f = open_memstream(&mem, &len);
    assert_int_equal(tile_npy_write_file(f, &t, TILE_NPY_STR_UNICODE, 3, &e), -1);
    fclose(f);
    assert_error_has(&e, TILE_EINVAL, "string element 99999 is not valid UTF-8");
    free(mem);
    tile_tensor_free(&t);
}

/* ---- scalars and empty arrays -------------------------------------------- */

static void test_scalar_and_empty(void **state)
{
    (void)state;
    struct tile_tensor t;
    struct tile_error e;
    double v = 2.5;
    assert_int_equal(decode("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", &v, 8, &t, &e), 0);
    assert_int_equal(t.rank, 0);
    assert_int_equal(t.nelem, 1);
    assert_true(*(double *)t.data == 2.5);
    size_t len;
    char *img = write_mem(&t, TILE_NPY_STR_UNICODE, 0, &len);
    assert_true(has(img, len, "'shape': (), }"));
    assert_int_equal(len, 128 + 8);
    free(img);
    tile_tensor_free(&t);

    assert_int_equal(decode("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 3), }", NULL, 0, &t, &e), 0);
    assert_int_equal(t.rank, 2);
    assert_int_equal(t.shape[0], 0);
    assert_int_equal(t.shape[1], 3);
    assert_int_equal(t.nelem, 0);
    img = write_mem(&t, TILE_NPY_STR_UNICODE, 0, &len);
    assert_true(has(img, len, "'shape': (0, 3), }"));
    assert_int_equal(len, 128);
    free(img);
    tile_tensor_free(&t);

    assert_int_equal(decode("{'descr': '<U4', 'fortran_order': False, 'shape': (3, 0), }", NULL, 0, &t, &e), 0);
    assert_int_equal(t.dtype, TILE_STRING);
    assert_int_equal(t.nelem, 0);
    img = write_mem(&t, TILE_NPY_STR_UNICODE, 4, &len);
    assert_true(has(img, len, "'<U4'"));
    free(img);
    tile_tensor_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dtype),
        cmocka_unit_test(test_round_trip_strings),
        cmocka_unit_test(test_header_matches_numpy),
        cmocka_unit_test(test_header_rank64),
        cmocka_unit_test(test_bfloat16_has_no_npy_form),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_truncated_header),
        cmocka_unit_test(test_dict_variants),
        cmocka_unit_test(test_malformed_dicts),
        cmocka_unit_test(test_refused_descrs),
        cmocka_unit_test(test_descr_mapping),
        cmocka_unit_test(test_data_length),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_big_endian_every_width),
        cmocka_unit_test(test_big_endian_values),
        cmocka_unit_test(test_fortran_order),
        cmocka_unit_test(test_unicode_strings),
        cmocka_unit_test(test_unicode_invalid),
        cmocka_unit_test(test_byte_strings),
        cmocka_unit_test(test_encode_strings),
        cmocka_unit_test(test_write_strings_chunked),
        cmocka_unit_test(test_scalar_and_empty),
    };
    return cmocka_run_group_tests_name("npy", tests, NULL, NULL);
}
