/* test_request.c - request building: integers, query parameters, the spec
 * rules per semantics, and the raw and .npy body decoders (api/request.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npy.h"
#include "request.h"

static void assert_error_has(const struct tile_error *e, enum tile_errcode code, const char *substr)
{
    if (!strstr(e->text, substr))
        fail_msg("error \"%s\" does not contain \"%s\"", e->text, substr);
    assert_int_equal(e->code, code);
}

/* ---- integers ---------------------------------------------------------- */

static int64_t int_ok(const char *s)
{
    int64_t v = 12345;
    struct tile_error e = {0};
    if (tile_parse_int64(s, strlen(s), &v, "x", &e) < 0)
        fail_msg("'%s': %s", s, e.text);
    return v;
}

static void int_bad(const char *s, const char *substr)
{
    int64_t v = 777;
    struct tile_error e = {0};
    assert_int_equal(tile_parse_int64(s, strlen(s), &v, "tiles", &e), -1);
    assert_error_has(&e, TILE_EINVAL, substr);
    assert_int_equal(v, 777);
}

static void test_parse_int64(void **state)
{
    (void)state;
    assert_int_equal(int_ok("0"), 0);
    assert_int_equal(int_ok("-0"), 0);
    assert_int_equal(int_ok("42"), 42);
    assert_int_equal(int_ok("-7"), -7);
    assert_int_equal(int_ok("007"), 7);
    assert_true(int_ok("9223372036854775807") == INT64_MAX);
    assert_true(int_ok("-9223372036854775808") == INT64_MIN);
    int_bad("9223372036854775808", "tiles: '9223372036854775808' is outside the 64-bit integer range");
    int_bad("-9223372036854775809", "outside the 64-bit integer range");
    int_bad("99999999999999999999999", "outside the 64-bit integer range");
    int_bad("", "tiles: '' is not an integer");
    int_bad("-", "tiles: '-' is not an integer");
    int_bad("+1", "tiles: '+1' is not a decimal integer");
    int_bad("1x", "'1x' is not a decimal integer");
    int_bad(" 1", "' 1' is not a decimal integer");
    int_bad("1.0", "'1.0' is not a decimal integer");
    int_bad("0x10", "'0x10' is not a decimal integer");
    int_bad("--1", "'--1' is not a decimal integer");

    /* Only `len` bytes are read; NULL error structs are fine. */
    int64_t v;
    assert_int_equal(tile_parse_int64("123K", 3, &v, "size", NULL), 0);
    assert_int_equal(v, 123);
    assert_int_equal(tile_parse_int64("12", 2, &v, NULL, NULL), 0);
    struct tile_error e = {0};
    assert_int_equal(tile_parse_int64("x", 1, &v, NULL, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "value: 'x'");
}

static void list_bad(const char *s, int max, const char *substr)
{
    int64_t out[8];
    int n = -1;
    struct tile_error e = {0};
    assert_int_equal(tile_parse_int_list(s, out, max, &n, "repeats", &e), -1);
    assert_error_has(&e, TILE_EINVAL, substr);
}

static void test_parse_int_list(void **state)
{
    (void)state;
    int64_t out[8];
    int n = -1;
    struct tile_error e = {0};
    assert_int_equal(tile_parse_int_list("", out, 8, &n, "repeats", &e), 0);
    assert_int_equal(n, 0);
    assert_int_equal(tile_parse_int_list("2,3", out, 8, &n, "repeats", &e), 0);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    assert_int_equal(tile_parse_int_list(" 4 ,\t-0 , -5", out, 8, &n, "repeats", &e), 0);
    assert_int_equal(n, 3);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 0);
    assert_int_equal(out[2], -5);
    assert_int_equal(tile_parse_int_list("7", out, 1, &n, "repeats", &e), 0);
    assert_int_equal(n, 1);

    list_bad("1,,2", 8, "repeats: item 1 is empty");
    list_bad("1,", 8, "repeats: item 1 is empty");
    list_bad(",1", 8, "repeats: item 0 is empty");
    list_bad(" ", 8, "repeats: item 0 is empty");
    list_bad(",", 8, "repeats: item 0 is empty");
    list_bad("+1", 8, "repeats item 0: '+1' is not a decimal integer");
    list_bad("1,2x", 8, "repeats item 1: '2x' is not a decimal integer");
    list_bad("1,99999999999999999999", 8, "repeats item 1: '99999999999999999999' is outside the 64-bit integer range");
    list_bad("1 2", 8, "repeats item 0: '1 2' is not a decimal integer");
    list_bad("[1,2]", 8, "'[1' is not a decimal integer");
    list_bad("1,2,3", 2, "repeats has more than 2 items");
}

/* ---- query parameters -------------------------------------------------- */

struct qfix {
    struct tile_request r;
    struct tile_query_tensor qt;
    struct tile_limits lim;
    struct tile_error e;
};

static int q(struct qfix *f, bool tensor, const char *key, const char *value)
{
    tile_error_clear(&f->e);
    return tile_request_query_param(&f->r, &f->qt, tensor, key, value, &f->lim, &f->e);
}

static void qfix_init(struct qfix *f)
{
    memset(f, 0, sizeof(*f));
    tile_request_init(&f->r);
}

static void test_query_params(void **state)
{
    (void)state;
    struct qfix f;
    qfix_init(&f);
    assert_int_equal(f.r.semantics, TILE_SEM_ONNX);
    assert_int_equal(q(&f, true, "repeats", "2,1,3"), 0);
    assert_true(f.r.has_repeats);
    assert_int_equal(f.r.nrepeats, 3);
    assert_int_equal(f.r.repeats[2], 3);
    assert_int_equal(q(&f, true, "semantics", "NumPy"), 0);
    assert_int_equal(f.r.semantics, TILE_SEM_NUMPY);
    assert_int_equal(q(&f, true, "tiles", "4"), 0);
    assert_int_equal(q(&f, true, "axis", "-1"), 0);
    assert_true(f.r.has_tiles && f.r.has_axis);
    assert_int_equal(f.r.tiles, 4);
    assert_int_equal(f.r.axis, -1);
    assert_int_equal(q(&f, true, "dtype", "FP32"), 0);
    assert_true(f.qt.has_dtype);
    assert_int_equal(f.qt.dtype, TILE_FLOAT32);
    assert_int_equal(q(&f, true, "shape", "2,0,3"), 0);
    assert_true(f.qt.has_shape);
    assert_int_equal(f.qt.rank, 3);
    assert_int_equal(f.qt.shape[1], 0);

    /* Every parameter may appear once. */
    static const char *const keys[] = {"repeats", "semantics", "tiles", "axis", "dtype", "shape"};
    static const char *const values[] = {"1", "onnx", "1", "0", "int8", "1"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(q(&f, true, keys[i], values[i]), -1);
        char want[64];
        snprintf(want, sizeof(want), "duplicate query parameter '%s'", keys[i]);
        assert_error_has(&f.e, TILE_EINVAL, want);
    }
    tile_request_free(&f.r);
}

static void test_query_errors(void **state)
{
    (void)state;
    struct qfix f;
    qfix_init(&f);
    assert_int_equal(q(&f, true, "foo", "1"), -1);
    assert_error_has(&f.e, TILE_EINVAL,
                     "unknown query parameter 'foo' (expected dtype, shape, repeats, semantics, tiles or axis)");
    assert_int_equal(q(&f, false, "foo", "1"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "unknown query parameter 'foo' (expected repeats, semantics, tiles or axis");
    /* dtype and shape come from the body unless the tensor is in the query. */
    assert_int_equal(q(&f, false, "dtype", "int8"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "unknown query parameter 'dtype'");
    assert_false(f.qt.has_dtype);
    assert_int_equal(q(&f, false, "shape", "1"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "the body carries its own dtype and shape");
    /* NULL qt means no tensor parameters either. */
    tile_error_clear(&f.e);
    assert_int_equal(tile_request_query_param(&f.r, NULL, true, "dtype", "int8", NULL, &f.e), -1);
    assert_error_has(&f.e, TILE_EINVAL, "unknown query parameter 'dtype'");

    assert_int_equal(q(&f, true, "dtype", "float128"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "unknown dtype 'float128' (expected one of bool, int8,");
    assert_int_equal(q(&f, true, "semantics", "tensorflow"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "unknown semantics 'tensorflow'");
    assert_int_equal(q(&f, true, "shape", "2,-1"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "shape item 1 is -1; dimensions must be >= 0");
    assert_int_equal(q(&f, true, "tiles", "two"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "tiles: 'two' is not a decimal integer");
    assert_int_equal(q(&f, true, "axis", ""), -1);
    assert_error_has(&f.e, TILE_EINVAL, "axis: '' is not an integer");
    assert_int_equal(q(&f, true, "repeats", "1,,1"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "repeats: item 1 is empty");
    tile_request_free(&f.r);

    /* Lists are bounded by the configured rank. */
    qfix_init(&f);
    f.lim.max_rank = 2;
    assert_int_equal(q(&f, true, "repeats", "1,2,3"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "repeats has more than 2 items");
    assert_int_equal(q(&f, true, "shape", "1,1,1"), -1);
    assert_error_has(&f.e, TILE_EINVAL, "shape has more than 2 items");
    assert_false(f.qt.has_shape); /* a refused value does not count as given */
    assert_int_equal(q(&f, true, "shape", ""), 0); /* a scalar */
    assert_true(f.qt.has_shape);
    assert_int_equal(f.qt.rank, 0);
    tile_request_free(&f.r);
}

/* ---- spec rules -------------------------------------------------------- */

static int spec_of(struct tile_request *r, struct tile_spec *spec, struct tile_error *e)
{
    struct tile_limits lim = {.max_body = 1, .max_output = 1000, .max_rank = 9};
    tile_error_clear(e);
    return tile_request_spec(r, &lim, spec, e);
}

static void test_spec_rules(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_spec spec;
    struct tile_error e;
    static const struct {
        enum tile_semantics sem;
        const char *missing;
    } needs_repeats[] = {
        {TILE_SEM_ONNX, "missing 'repeats' (semantics onnx needs one repeat per axis)"},
        {TILE_SEM_NUMPY, "missing 'repeats' (semantics numpy needs a list of repeats)"},
        {TILE_SEM_OPENVINO, "missing 'repeats' (semantics openvino needs a list of repeats)"},
        {TILE_SEM_DIRECTML, "missing 'repeats' (semantics directml needs one repeat per axis)"},
    };
    for (size_t i = 0; i < sizeof(needs_repeats) / sizeof(needs_repeats[0]); i++) {
        tile_request_init(&r);
        r.semantics = needs_repeats[i].sem;
        assert_int_equal(spec_of(&r, &spec, &e), -1);
        assert_error_has(&e, TILE_EINVAL, needs_repeats[i].missing);
        r.has_repeats = true;
        r.nrepeats = 2;
        r.repeats[0] = 3;
        r.repeats[1] = 4;
        assert_int_equal(spec_of(&r, &spec, &e), 0);
        assert_int_equal(spec.semantics, needs_repeats[i].sem);
        assert_ptr_equal(spec.repeats, r.repeats);
        assert_int_equal(spec.nrepeats, 2);
        assert_int_equal(spec.max_output_bytes, 1000);
        assert_int_equal(spec.max_rank, 9);
        r.has_tiles = true;
        assert_int_equal(spec_of(&r, &spec, &e), -1);
        assert_error_has(&e, TILE_EINVAL, "'tiles' is not used by semantics");
        r.has_tiles = false;
        r.has_axis = true;
        assert_int_equal(spec_of(&r, &spec, &e), -1);
        assert_error_has(&e, TILE_EINVAL, "'axis' is not used by semantics");
    }

    tile_request_init(&r);
    r.semantics = TILE_SEM_ONNX1;
    assert_int_equal(spec_of(&r, &spec, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "missing 'tiles' (semantics onnx1 needs tiles and axis)");
    r.has_tiles = true;
    r.tiles = 3;
    assert_int_equal(spec_of(&r, &spec, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "missing 'axis' (semantics onnx1 needs tiles and axis)");
    r.has_axis = true;
    r.axis = -1;
    assert_int_equal(spec_of(&r, &spec, &e), 0);
    assert_int_equal(spec.tiles, 3);
    assert_int_equal(spec.axis, -1);
    assert_int_equal(spec.nrepeats, 0);
    r.has_repeats = true;
    assert_int_equal(spec_of(&r, &spec, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "'repeats' is not used by semantics onnx1 (it takes tiles and axis)");

    /* No limits: none in the spec. */
    tile_request_init(&r);
    r.has_repeats = true;
    assert_int_equal(tile_request_spec(&r, NULL, &spec, NULL), 0);
    assert_int_equal(spec.max_output_bytes, 0);
    assert_int_equal(spec.max_rank, 0);
}

/* ---- raw bodies ---------------------------------------------------------- */

static struct tile_query_tensor qt_of(enum tile_dtype d, int rank, const int64_t *shape)
{
    struct tile_query_tensor qt = {.has_dtype = true, .has_shape = true, .dtype = d, .rank = rank};
    for (int i = 0; i < rank; i++)
        qt.shape[i] = shape[i];
    return qt;
}

static void test_raw_every_fixed_dtype(void **state)
{
    (void)state;
    const int64_t shape[2] = {2, 3};
    struct tile_limits lim = {.max_body = 1 << 20};
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = tile_dtype_traits((enum tile_dtype)d);
        if (!t->wire_size)
            continue;
        uint8_t body[6 * 16];
        size_t len = 6 * t->wire_size;
        for (size_t i = 0; i < len; i++)
            body[i] = (uint8_t)(i * 13 + d);
        struct tile_query_tensor qt = qt_of((enum tile_dtype)d, 2, shape);
        struct tile_request r;
        struct tile_error e = {0};
        tile_request_init(&r);
        if (tile_raw_decode(body, len, &qt, &lim, &r, &e) < 0)
            fail_msg("%s: %s", t->name, e.text);
        assert_int_equal(r.input.dtype, d);
        assert_int_equal(r.input.rank, 2);
        assert_int_equal(r.input.nelem, 6);
        assert_true(r.input.owns_data);
        assert_ptr_not_equal(r.input.data, body);
        assert_memory_equal(r.input.data, body, len);

        /* One byte short or long. */
        char want[128];
        snprintf(want, sizeof(want), "body has %zu bytes but dtype %s and shape [2,3] need %zu", len - 1, t->name, len);
        assert_int_equal(tile_raw_decode(body, len - 1, &qt, &lim, &r, &e), -1);
        assert_error_has(&e, TILE_EINVAL, want);
        assert_null(r.input.data);
        tile_error_clear(&e);
        snprintf(want, sizeof(want), "body has %zu bytes but dtype %s and shape [2,3] need %zu", len + 1, t->name, len);
        assert_int_equal(tile_raw_decode(body, len + 1, &qt, &lim, &r, &e), -1);
        assert_error_has(&e, TILE_EINVAL, want);
        tile_request_free(&r);
    }
}

static void test_raw_scalar_and_empty(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_error e = {0};
    struct tile_query_tensor qt = qt_of(TILE_INT16, 0, NULL);
    tile_request_init(&r);
    int16_t v = -3;
    assert_int_equal(tile_raw_decode(&v, 2, &qt, NULL, &r, &e), 0);
    assert_int_equal(r.input.rank, 0);
    assert_int_equal(r.input.nelem, 1);
    assert_int_equal(*(int16_t *)r.input.data, -3);
    assert_int_equal(tile_raw_decode(&v, 0, &qt, NULL, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "body has 0 bytes but dtype int16 and shape [] need 2");

    const int64_t empty[2] = {0, 3};
    qt = qt_of(TILE_FLOAT64, 2, empty);
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode(NULL, 0, &qt, NULL, &r, &e), 0);
    assert_int_equal(r.input.nelem, 0);
    assert_int_equal(r.input.shape[1], 3);
    tile_request_free(&r);
}

static void test_raw_missing_and_limits(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_error e = {0};
    struct tile_query_tensor qt = {0};
    tile_request_init(&r);
    assert_int_equal(tile_raw_decode("ab", 2, &qt, NULL, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "missing query parameter 'dtype'");
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode("ab", 2, NULL, NULL, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "missing query parameter 'dtype'");
    qt.has_dtype = true;
    qt.dtype = TILE_UINT8;
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode("ab", 2, &qt, NULL, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "missing query parameter 'shape' (comma-separated dims; empty for a scalar)");

    /* A shape whose byte size overflows is refused before any allocation. */
    const int64_t huge[2] = {INT64_MAX / 2, 3};
    qt = qt_of(TILE_FLOAT32, 2, huge);
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode("ab", 2, &qt, NULL, &r, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "");

    /* The decoded tensor is bounded by max_body. */
    struct tile_limits lim = {.max_body = 3};
    const int64_t four[1] = {4};
    qt = qt_of(TILE_UINT8, 1, four);
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode("abcd", 4, &qt, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "above the limit of 3");
    tile_request_free(&r);
}

/* ---- strings on the wire --------------------------------------------------- */

static size_t wire(uint8_t *out, const char *const *s, int n)
{
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(s[i]);
        memcpy(out + pos, &len, 4);
        memcpy(out + pos + 4, s[i], len);
        pos += 4 + len;
    }
    return pos;
}

static void test_raw_strings(void **state)
{
    (void)state;
    static const char *const words[] = {"ab", "", "h\xc3\xa9llo", "\xff\xfe"};
    uint8_t body[64];
    size_t len = wire(body, words, 4);
    const int64_t shape[2] = {2, 2};
    struct tile_query_tensor qt = qt_of(TILE_STRING, 2, shape);
    struct tile_limits lim = {.max_body = 64};
    struct tile_request r;
    struct tile_error e = {0};
    tile_request_init(&r);
    assert_int_equal(tile_raw_decode(body, len, &qt, &lim, &r, &e), 0);
    assert_int_equal(r.input.dtype, TILE_STRING);
    assert_int_equal(r.input.blob_len, 2 + 0 + 6 + 2);
    const struct tile_str *s = r.input.data;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(s[i].len, strlen(words[i]));
        assert_memory_equal(s[i].ptr, words[i], s[i].len);
        assert_true(s[i].ptr >= r.input.blob && s[i].ptr <= r.input.blob + r.input.blob_len);
    }

    /* Broken layouts. */
    assert_int_equal(tile_raw_decode(body, len - 1, &qt, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "string element 3 claims 2 bytes but only 1 remain");
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode(body, 22, &qt, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "string element 3: its 4-byte length prefix at byte 20 runs past the end (22 bytes)");
    tile_error_clear(&e);
    uint8_t longer[70];
    memcpy(longer, body, len);
    memcpy(longer + len, "xyz", 3);
    assert_int_equal(tile_raw_decode(longer, len + 3, &qt, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "3 bytes follow the last of the 4 strings");
    tile_error_clear(&e);
    assert_int_equal(tile_raw_decode(body, 15, &qt, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "body has 15 bytes but shape [2,2] holds 4 strings, which need at least 16");
    tile_error_clear(&e);

    /* Many empty strings: the views (16 bytes each) may exceed the body
     * limit four times over; that is still a body within the limit. */
    static uint8_t zeros[4 * 1000];
    const int64_t n1000[1] = {1000};
    qt = qt_of(TILE_STRING, 1, n1000);
    lim.max_body = sizeof(zeros);
    assert_int_equal(tile_raw_decode(zeros, sizeof(zeros), &qt, &lim, &r, &e), 0);
    assert_int_equal(r.input.nelem, 1000);
    assert_int_equal(((struct tile_str *)r.input.data)[999].len, 0);
    tile_request_free(&r);
}

static void test_strings_from_wire(void **state)
{
    (void)state;
    static const char *const words[] = {"one", "two!"};
    uint8_t body[32];
    size_t len = wire(body, words, 2);
    struct tile_tensor t;
    struct tile_error e = {0};
    const int64_t shape[1] = {2};
    assert_int_equal(tile_tensor_init(&t, TILE_STRING, 1, shape, 0, &e), 0);
    assert_int_equal(tile_strings_from_wire(body, len, &t, &e), 0);
    assert_int_equal(t.blob_len, 7);
    assert_memory_equal(t.blob, "onetwo!", 7);
    assert_int_equal(((struct tile_str *)t.data)[1].len, 4);
    tile_tensor_free(&t);

    /* On error no blob is kept and the views stay empty. */
    assert_int_equal(tile_tensor_init(&t, TILE_STRING, 1, shape, 0, &e), 0);
    assert_int_equal(tile_strings_from_wire(body, len - 2, &t, &e), -1);
    assert_null(t.blob);
    assert_int_equal(((struct tile_str *)t.data)[0].len, 0);
    tile_tensor_free(&t);

    /* Zero strings fill zero bytes. */
    const int64_t none[1] = {0};
    assert_int_equal(tile_tensor_init(&t, TILE_STRING, 1, none, 0, &e), 0);
    tile_error_clear(&e);
    assert_int_equal(tile_strings_from_wire(NULL, 0, &t, &e), 0);
    tile_tensor_free(&t);
}

/* ---- .npy bodies --------------------------------------------------------- */

static uint8_t *npy_image(const char *dict, const void *data, size_t dlen, size_t *len)
{
    size_t dl = strlen(dict), hlen = (10 + dl + 1 + 63) / 64 * 64 - 10;
    *len = 10 + hlen + dlen;
    uint8_t *b = malloc(*len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hlen;
    b[9] = (uint8_t)(hlen >> 8);
    memcpy(b + 10, dict, dl);
    memset(b + 10 + dl, ' ', hlen - dl - 1);
    b[9 + hlen] = '\n';
    memcpy(b + 10 + hlen, data, dlen);
    return b;
}

static void test_npy_decode(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_error e = {0};
    struct tile_limits lim = {.max_body = 1 << 20, .max_rank = 4};
    size_t len;
    tile_request_init(&r);

    uint8_t *b = npy_image("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }", "ab\0xyz", 6, &len);
    assert_int_equal(tile_v1_npy_decode(b, len, &lim, &r, &e), 0);
    assert_int_equal(r.input.dtype, TILE_STRING);
    assert_int_equal(r.npy_strkind, TILE_NPY_STR_BYTES);
    assert_int_equal(r.npy_strwidth, 3);
    assert_int_equal(((struct tile_str *)r.input.data)[1].len, 3);
    free(b);

    /* Decoding again replaces the input (no leak) and keeps the kind. */
    const int16_t v[2] = {5, -6};
    b = npy_image("{'descr': '<i2', 'fortran_order': False, 'shape': (1, 2), }", v, 4, &len);
    assert_int_equal(tile_v1_npy_decode(b, len, &lim, &r, &e), 0);
    assert_int_equal(r.input.dtype, TILE_INT16);
    assert_memory_equal(r.input.data, v, 4);
    free(b);

    lim.max_rank = 1;
    b = npy_image("{'descr': '<i2', 'fortran_order': False, 'shape': (1, 2), }", v, 4, &len);
    assert_int_equal(tile_v1_npy_decode(b, len, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "above the maximum rank of 1");
    assert_null(r.input.data);
    free(b);

    /* String views are bounded at 5 bytes per byte of --max-body, however
     * few body bytes their elements take: '|S0' takes none, '|S1' one. */
    lim.max_rank = 4;
    lim.max_body = 1000;
    b = npy_image("{'descr': '|S0', 'fortran_order': False, 'shape': (100000000,), }", "", 0, &len);
    tile_error_clear(&e);
    assert_int_equal(tile_v1_npy_decode(b, len, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "tensor needs 1600000000 bytes, above the limit of 5000");
    assert_null(r.input.data);
    free(b);
    char ones[400];
    memset(ones, 'a', sizeof(ones));
    b = npy_image("{'descr': '|S1', 'fortran_order': False, 'shape': (312,), }", ones, 312, &len);
    assert_int_equal(tile_v1_npy_decode(b, len, &lim, &r, &e), 0); /* 4,992 bytes of views */
    assert_int_equal(r.input.nelem, 312);
    free(b);
    b = npy_image("{'descr': '|S1', 'fortran_order': False, 'shape': (313,), }", ones, 313, &len);
    tile_error_clear(&e);
    assert_int_equal(tile_v1_npy_decode(b, len, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_ETOOBIG, "tensor needs 5008 bytes, above the limit of 5000");
    free(b);
    lim.max_body = 1 << 20;

    tile_error_clear(&e);
    assert_int_equal(tile_v1_npy_decode("", 0, &lim, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "not a .npy file");
    tile_request_free(&r);
    assert_int_equal(r.semantics, TILE_SEM_ONNX);
    assert_int_equal(r.input.dtype, TILE_DTYPE_INVALID);
}

/* ---- a query beside a JSON body ----------------------------------------- */

static void test_merge_query(void **state)
{
    (void)state;
    struct tile_limits lim = {.max_body = 1 << 20, .max_rank = 4};
    struct tile_error e = {0};
    struct tile_request body, query;
    struct tile_query_tensor qt = {0};
    const char *doc = "{\"input\": {\"dtype\": \"int8\", \"shape\": [2], \"data\": [1, 2]}, \"tiles\": 3}";
    tile_request_init(&body);
    tile_request_init(&query);
    assert_int_equal(tile_v1_json_decode(doc, strlen(doc), &lim, &body, &e), 0);

    /* Fields only the query gives are taken; one both give alike is kept. */
    assert_int_equal(tile_request_query_param(&query, &qt, true, "repeats", "4", &lim, &e), 0);
    assert_int_equal(tile_request_query_param(&query, &qt, true, "semantics", "numpy", &lim, &e), 0);
    assert_int_equal(tile_request_query_param(&query, &qt, true, "tiles", "3", &lim, &e), 0);
    assert_int_equal(tile_request_query_param(&query, &qt, true, "dtype", "int8", &lim, &e), 0);
    assert_int_equal(tile_request_query_param(&query, &qt, true, "shape", "2", &lim, &e), 0);
    assert_int_equal(tile_request_merge_query(&body, &query, &qt, &e), 0);
    assert_true(body.has_repeats && body.has_semantics && body.has_tiles);
    assert_int_equal(body.nrepeats, 1);
    assert_int_equal(body.repeats[0], 4);
    assert_int_equal(body.semantics, TILE_SEM_NUMPY);
    assert_int_equal(body.tiles, 3);
    assert_false(body.has_axis);

    /* A field both give differently names itself; so do dtype and shape. */
    query.repeats[0] = 5;
    assert_int_equal(tile_request_merge_query(&body, &query, &qt, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "'repeats' is given in the query and in the JSON body");
    query.repeats[0] = 4;
    tile_error_clear(&e);
    query.tiles = 2;
    assert_int_equal(tile_request_merge_query(&body, &query, &qt, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "'tiles' is given");
    query.tiles = 3;
    tile_error_clear(&e);
    query.semantics = TILE_SEM_OPENVINO;
    assert_int_equal(tile_request_merge_query(&body, &query, &qt, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "'semantics' is given");
    query.semantics = TILE_SEM_NUMPY;
    tile_error_clear(&e);
    qt.dtype = TILE_UINT8;
    assert_int_equal(tile_request_merge_query(&body, &query, &qt, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "query dtype 'uint8' does not match the JSON body's dtype 'int8'");
    qt.dtype = TILE_INT8;
    tile_error_clear(&e);
    qt.shape[0] = 3;
    assert_int_equal(tile_request_merge_query(&body, &query, &qt, &e), -1);
    assert_error_has(&e, TILE_EINVAL, "query shape [3] does not match the JSON body's input shape [2]");
    tile_request_free(&query);
    tile_request_free(&body);
}

/* tile_request_init gives the defaults over whatever was there, and
 * tile_request_move carries every field (the arrays as far as their
 * counts go) and leaves the source owning nothing. */
static void test_init_and_move(void **state)
{
    (void)state;
    static struct tile_request src, dst;
    memset(&src, 0x5a, sizeof(src));
    memset(&dst, 0xa5, sizeof(dst));
    tile_request_init(&src);
    assert_int_equal(src.input.dtype, TILE_DTYPE_INVALID);
    assert_int_equal(src.input.rank, 0);
    assert_null(src.input.data);
    assert_null(src.input.blob);
    assert_false(src.input.owns_data);
    assert_int_equal(src.semantics, TILE_SEM_ONNX);
    assert_false(src.has_semantics || src.has_repeats || src.has_tiles || src.has_axis);
    assert_int_equal(src.nrepeats, 0);
    assert_int_equal(src.tiles, 0);
    assert_int_equal(src.axis, 0);
    assert_int_equal(src.npy_strkind, TILE_NPY_STR_UNICODE);
    assert_int_equal(src.npy_strwidth, 0);

    const int64_t shape[3] = {2, 3, 4};
    assert_int_equal(tile_tensor_init(&src.input, TILE_INT32, 3, shape, 0, NULL), 0);
    src.input.blob = malloc(5);
    src.input.blob_len = 5;
    src.semantics = TILE_SEM_NUMPY;
    src.has_semantics = src.has_repeats = src.has_tiles = src.has_axis = true;
    src.nrepeats = 2;
    src.repeats[0] = 7;
    src.repeats[1] = 9;
    src.tiles = 11;
    src.axis = -1;
    src.npy_strkind = TILE_NPY_STR_BYTES;
    src.npy_strwidth = 13;
    void *data = src.input.data, *blob = src.input.blob;
    tile_request_move(&dst, &src);
    assert_int_equal(dst.input.dtype, TILE_INT32);
    assert_int_equal(dst.input.rank, 3);
    assert_memory_equal(dst.input.shape, shape, sizeof(shape));
    assert_ptr_equal(dst.input.data, data);
    assert_int_equal(dst.input.nelem, 24);
    assert_true(dst.input.owns_data);
    assert_ptr_equal(dst.input.blob, blob);
    assert_int_equal(dst.input.blob_len, 5);
    assert_int_equal(dst.semantics, TILE_SEM_NUMPY);
    assert_true(dst.has_semantics && dst.has_repeats && dst.has_tiles && dst.has_axis);
    assert_int_equal(dst.nrepeats, 2);
    assert_int_equal(dst.repeats[0], 7);
    assert_int_equal(dst.repeats[1], 9);
    assert_int_equal(dst.tiles, 11);
    assert_int_equal(dst.axis, -1);
    assert_int_equal(dst.npy_strkind, TILE_NPY_STR_BYTES);
    assert_int_equal(dst.npy_strwidth, 13);
    assert_null(src.input.data);
    assert_null(src.input.blob);
    assert_false(src.input.owns_data);
    tile_request_free(&src); /* frees nothing of dst's */
    tile_request_free(&dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_int64),
        cmocka_unit_test(test_parse_int_list),
        cmocka_unit_test(test_query_params),
        cmocka_unit_test(test_query_errors),
        cmocka_unit_test(test_spec_rules),
        cmocka_unit_test(test_raw_every_fixed_dtype),
        cmocka_unit_test(test_raw_scalar_and_empty),
        cmocka_unit_test(test_raw_missing_and_limits),
        cmocka_unit_test(test_raw_strings),
        cmocka_unit_test(test_strings_from_wire),
        cmocka_unit_test(test_npy_decode),
        cmocka_unit_test(test_merge_query),
        cmocka_unit_test(test_init_and_move),
    };
    return cmocka_run_group_tests_name("request", tests, NULL, NULL);
}
