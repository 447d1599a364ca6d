/* test_v1_json.c - tensor data from JSON (jsondata.c) and the /v1/tile JSON
 * body (v1_json.c): shapes given and inferred, every dtype, and messages. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/harness/testrand.h"
#include "jsondata.h"
#include "jsonread.h"
#include "numfmt.h"
#include "request.h"

#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define COUNT(...) ((int)(sizeof(I64(__VA_ARGS__)) / sizeof(int64_t)))

static uint64_t rng_state = 0x5851F42D4C957F2Du;

static uint64_t rng(void)
{
    return testrand_next(&rng_state);
}

/* ---- jsondata ------------------------------------------------------------ */

struct data_case {
    enum tile_dtype dtype;
    int rank;              /* -1: infer */
    const int64_t *shape;
    enum tile_json_complex form;
    int max_rank, max_depth;
    uint64_t max_bytes;
};

/* Reads `json` (exactly strlen bytes, in a malloc'd copy so ASan sees
 * overreads) as data. */
static int read_data(const struct data_case *c, const char *json, struct tile_tensor *t, struct tile_error *e)
{
    size_t len = strlen(json);
    char *copy = malloc(len ? len : 1);
    memcpy(copy, json, len);
    struct tile_json_lexer lx;
    struct tile_json_token end;
    struct tile_json_data_opts o = {c->dtype, c->rank, c->shape, c->form, c->max_rank, c->max_bytes, NULL};
    tile_error_clear(e);
    tile_json_lexer_init(&lx, copy, len, c->max_depth);
    int rc = tile_json_read_data(&lx, &o, t, e);
    if (rc == 0)
        assert_int_equal(tile_json_next(&lx, &end, e), 0);
    if (rc == 0)
        assert_int_equal(end.type, TILE_JSON_END);
    free(copy);
    return rc;
}

static void expect_shape(const struct tile_tensor *t, int rank, const int64_t *shape)
{
    assert_int_equal(t->rank, rank);
    for (int i = 0; i < rank; i++)
        assert_int_equal(t->shape[i], shape[i]);
}

#define EXPECT_SHAPE(t, ...) expect_shape((t), COUNT(__VA_ARGS__), I64(__VA_ARGS__))

static void data_error(const struct data_case *c, const char *json, enum tile_errcode code, const char *msg)
{
    struct tile_tensor t;
    struct tile_error e;
    if (read_data(c, json, &t, &e) == 0)
        fail_msg("'%s' was accepted", json);
    assert_int_equal(t.data, NULL); /* left empty */
    assert_int_equal(e.code, code);
    if (!strstr(e.text, msg))
        fail_msg("'%s': message '%s' lacks '%s'", json, e.text, msg);
}

static void test_data_inferred(void **state)
{
    (void)state;
    struct data_case c = {TILE_INT32, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[[1,2,3],[4,5,6]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 3);
    assert_int_equal(t.dtype, TILE_INT32);
    assert_int_equal(t.nelem, 6);
    for (int i = 0; i < 6; i++)
        assert_int_equal(((int32_t *)t.data)[i], i + 1);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, " 42 ", &t, &e), 0);
    assert_int_equal(t.rank, 0);
    assert_int_equal(t.nelem, 1);
    assert_int_equal(((int32_t *)t.data)[0], 42);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[]", &t, &e), 0);
    EXPECT_SHAPE(&t, 0);
    assert_int_equal(t.nelem, 0);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 1, 0);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[],[]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 0);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[[[7]]]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 1, 1, 1, 1);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[[1,2],[3,4]],[[5,6],[7,8]],[[9,10],[11,12]]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 3, 2, 2);
    assert_int_equal(((int32_t *)t.data)[11], 12);
    tile_tensor_free(&t);
}

static void test_data_ragged(void **state)
{
    (void)state;
    struct data_case c = {TILE_FLOAT32, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    data_error(&c, "[[1,2,3],[4,5]]", TILE_EINVAL, "ragged nested data at data[1]: 2 elements where 3 were expected");
    data_error(&c, "[[1,2],[3,4,5]]", TILE_EINVAL,
               "ragged nested data at data[1]: more than 2 elements where 2 were expected");
    data_error(&c, "[[1,2],3]", TILE_EINVAL, "ragged nested data at data[1]: an element where an array was expected");
    data_error(&c, "[1,[2]]", TILE_EINVAL, "ragged nested data at data[1]: an array where an element was expected");
    data_error(&c, "[[[1],[2]],[[3],4]]", TILE_EINVAL, "ragged nested data at data[1][1]: an element where an array");
    data_error(&c, "[[[1],[2]],[[3]]]", TILE_EINVAL, "ragged nested data at data[1]: 1 elements where 2 were expected");
    data_error(&c, "[[],[1]]", TILE_EINVAL,
               "ragged nested data at data[1]: more than 0 elements where 0 were expected");
    data_error(&c, "[[1],[]]", TILE_EINVAL, "ragged nested data at data[1]: 0 elements where 1 were expected");
    data_error(&c, "[[], [[1]]]", TILE_EINVAL, "ragged nested data at data[1][0]: an array where an element");
    data_error(&c, "[{}]", TILE_EINVAL, "data[0] is an object; tensor data are arrays and scalars");
    data_error(&c, "{\"a\":1}", TILE_EINVAL, "data is an object");
    data_error(&c, "[[1,2],[3,\"x\"]]", TILE_EINVAL, "data[1][1] is a string, but dtype float32 needs numbers");
    data_error(&c, "[1,2,]", TILE_EINVAL, "invalid JSON: trailing comma before ']' at byte 5");
    c.dtype = TILE_UINT8;
    data_error(&c, "[[1,2],[3,300]]", TILE_EINVAL, "value 300 is out of range for uint8 at data[1][1]");
    data_error(&c, "[1,2,3,4,5,300]", TILE_EINVAL, "value 300 is out of range for uint8 at data[5]");
    data_error(&c, "300", TILE_EINVAL, "value 300 is out of range for uint8 at data");
}

static void test_data_depth(void **state)
{
    (void)state;
    struct data_case c = {TILE_INT8, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 3, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[[[1]]]", &t, &e), 0);
    tile_tensor_free(&t);
    data_error(&c, "[[[[1]]]]", TILE_EINVAL, "data[0][0][0] nests arrays deeper than the maximum rank 3");
    c.max_rank = 0;
    c.max_depth = 4;
    data_error(&c, "[[[[[1]]]]]", TILE_EINVAL, "JSON nesting deeper than 4 at byte 4");
    /* the structural rank cap */
    c.max_depth = 0;
    char deep[2 * (TILE_MAX_RANK + 1) + 2];
    memset(deep, '[', TILE_MAX_RANK + 1);
    deep[TILE_MAX_RANK + 1] = '1';
    memset(deep + TILE_MAX_RANK + 2, ']', TILE_MAX_RANK + 1);
    deep[2 * (TILE_MAX_RANK + 1) + 1] = '\0';
    data_error(&c, deep, TILE_EINVAL, "nests arrays deeper than the maximum rank 64");
    deep[0] = ' ';
    deep[2 * (TILE_MAX_RANK + 1)] = ' ';
    assert_int_equal(read_data(&c, deep, &t, &e), 0);
    assert_int_equal(t.rank, TILE_MAX_RANK);
    tile_tensor_free(&t);
}

static void test_data_known_shape(void **state)
{
    (void)state;
    struct data_case c = {TILE_INT16, 2, I64(2, 3), TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[1,2,3,4,5,6]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 3);
    assert_int_equal(((int16_t *)t.data)[5], 6);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[1,2,3],[4,5,6]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 3);
    assert_int_equal(((int16_t *)t.data)[3], 4);
    tile_tensor_free(&t);
    data_error(&c, "[1,2,3,4,5]", TILE_EINVAL, "data has 5 elements but shape [2,3] needs 6");
    data_error(&c, "[1,2,3,4,5,6,7]", TILE_EINVAL, "data has 7 elements but shape [2,3] needs 6");
    data_error(&c, "[[1,2],[3,4],[5,6]]", TILE_EINVAL, "data is nested as [3,2], which does not match shape [2,3]");
    data_error(&c, "[[[1,2,3],[4,5,6]]]", TILE_EINVAL, "data is nested as [1,2,3], which does not match shape [2,3]");
    data_error(&c, "[[1,2,3],[4,5]]", TILE_EINVAL, "ragged nested data at data[1]");
    data_error(&c, "5", TILE_EINVAL, "data has 1 elements but shape [2,3] needs 6");
    /* a scalar or a one-element list fits any one-element shape */
    c.rank = 0;
    assert_int_equal(read_data(&c, "[9]", &t, &e), 0);
    assert_int_equal(t.rank, 0);
    assert_int_equal(((int16_t *)t.data)[0], 9);
    tile_tensor_free(&t);
    c.rank = 3;
    c.shape = I64(1, 1, 1);
    assert_int_equal(read_data(&c, "9", &t, &e), 0);
    EXPECT_SHAPE(&t, 1, 1, 1);
    tile_tensor_free(&t);
    /* nesting cannot show axes after an empty one */
    c.shape = I64(2, 0, 5);
    assert_int_equal(read_data(&c, "[[],[]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 0, 5);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[]", &t, &e), 0);
    tile_tensor_free(&t);
    data_error(&c, "[[],[],[]]", TILE_EINVAL, "data is nested as [3,0], which does not match shape [2,0,5]");
}

static void test_data_apply_shape(void **state)
{
    (void)state;
    struct data_case c = {TILE_FLOAT64, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[1,2,3,4,5,6]", &t, &e), 0);
    assert_int_equal(tile_json_data_apply_shape(&t, 2, I64(3, 2), NULL, &e), 0);
    EXPECT_SHAPE(&t, 3, 2);
    tile_error_clear(&e);
    assert_int_equal(tile_json_data_apply_shape(&t, 1, I64(4), "data", &e), -1);
    assert_string_equal(e.text, "data has 6 elements but shape [4] needs 4");
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[1,2],[3,4]]", &t, &e), 0);
    assert_int_equal(tile_json_data_apply_shape(&t, 1, I64(4), NULL, &e), -1);
    assert_string_equal(e.text, "data is nested as [2,2], which does not match shape [4]");
    tile_error_clear(&e);
    assert_int_equal(tile_json_data_apply_shape(&t, 1, I64(-4), NULL, &e), -1);
    assert_non_null(strstr(e.text, "must be >= 0"));
    tile_error_clear(&e);
    assert_int_equal(tile_json_data_apply_shape(&t, 2, I64(2, 2), NULL, &e), 0);
    tile_tensor_free(&t);
}

static void test_data_complex_pairs(void **state)
{
    (void)state;
    struct data_case c = {TILE_COMPLEX64, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[[1,2],[3.5,\"-Infinity\"]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2);
    float *f = t.data;
    assert_true(f[0] == 1 && f[1] == 2 && f[2] == 3.5f && isinf(f[3]) && f[3] < 0);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[1,2]", &t, &e), 0); /* one element: rank 0 */
    assert_int_equal(t.rank, 0);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[[1,0],[0,1],[2,2]]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 1, 3);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[]", &t, &e), 0);
    EXPECT_SHAPE(&t, 0);
    tile_tensor_free(&t);
    assert_int_equal(read_data(&c, "[[],[]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 0);
    tile_tensor_free(&t);
    data_error(&c, "[1,2,3]", TILE_EINVAL, "complex element data must be a [re, im] pair (it has more than 2 values)");
    data_error(&c, "[[1]]", TILE_EINVAL, "complex element data[0] must be a [re, im] pair");
    data_error(&c, "[[1,[2]]]", TILE_EINVAL, "complex element data[0] must be a [re, im] pair");
    data_error(&c, "5", TILE_EINVAL, "data is a number, but complex64 elements are [re, im] pairs");
    data_error(&c, "[[1,2],3]", TILE_EINVAL, "data[1] is a number, but complex64 elements are [re, im] pairs");
    data_error(&c, "[[1,2],[[3,4]]]", TILE_EINVAL, "ragged nested data at data[1]: an array where an element");
    data_error(&c, "[[1,\"x\"]]", TILE_EINVAL, "data[0][1] is a string, but dtype complex64 needs numbers");
    data_error(&c, "[[1,1e39]]", TILE_EINVAL, "value 1e39 is out of range for complex64 at data[0][1]");
    c.dtype = TILE_COMPLEX128;
    c.rank = 2;
    c.shape = I64(2, 1);
    assert_int_equal(read_data(&c, "[[0.1,-0.2],[\"NaN\",1e300]]", &t, &e), 0);
    double *d = t.data;
    assert_true(d[0] == 0.1 && d[1] == -0.2 && isnan(d[2]) && d[3] == 1e300);
    tile_tensor_free(&t);
    data_error(&c, "[[1,2]]", TILE_EINVAL, "data has 1 elements but shape [2,1] needs 2");
}

static void test_data_complex_interleaved(void **state)
{
    (void)state;
    struct data_case c = {TILE_COMPLEX64, 1, I64(2), TILE_JSON_COMPLEX_INTERLEAVED, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[1,2,3,4]", &t, &e), 0);
    float *f = t.data;
    assert_true(f[0] == 1 && f[1] == 2 && f[2] == 3 && f[3] == 4);
    tile_tensor_free(&t);
    data_error(&c, "[1,2,3,4,5,6]", TILE_EINVAL, "data has 3 elements but shape [2] needs 2");
    data_error(&c, "[1,2,3]", TILE_EINVAL, "data has rows of 3 numbers, but complex64 elements are re, im numbers");
    data_error(&c, "[[1,2],[3,4]]", TILE_EINVAL, "data is nested as [2,1], which does not match shape [2]");
    data_error(&c, "7", TILE_EINVAL, "data is a single number, but complex64 elements are re, im numbers");
    c.rank = 2;
    c.shape = I64(2, 1);
    assert_int_equal(read_data(&c, "[[1,2],[3,4]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 1);
    tile_tensor_free(&t);
    c.rank = -1;
    assert_int_equal(read_data(&c, "[[1,2,3,4],[5,6,7,8]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 2);
    assert_true(((float *)t.data)[7] == 8);
    tile_tensor_free(&t);
}

static void test_data_strings(void **state)
{
    (void)state;
    struct data_case c = {TILE_STRING, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, "[[\"a\",\"b\\nc\"],[\"\",\"caf\\u00e9 \xf0\x9f\x98\x80\"]]", &t, &e), 0);
    EXPECT_SHAPE(&t, 2, 2);
    const struct tile_str *s = t.data;
    assert_int_equal(s[0].len, 1);
    assert_memory_equal(s[0].ptr, "a", 1);
    assert_int_equal(s[1].len, 3);
    assert_memory_equal(s[1].ptr, "b\nc", 3);
    assert_int_equal(s[2].len, 0);
    assert_int_equal(s[3].len, 10);
    assert_memory_equal(s[3].ptr, "caf\xc3\xa9 \xf0\x9f\x98\x80", 10);
    assert_non_null(t.blob);
    assert_int_equal(t.blob_len, 14);
    assert_int_equal(tile_tensor_string_bytes(&t), 14);
    tile_tensor_free(&t);
    /* known shape: views made in place */
    c.rank = 1;
    c.shape = I64(3);
    assert_int_equal(read_data(&c, "[\"x\",\"yy\",\"zzz\"]", &t, &e), 0);
    s = t.data;
    assert_int_equal(s[2].len, 3);
    assert_memory_equal(s[2].ptr, "zzz", 3);
    tile_tensor_free(&t);
    data_error(&c, "[\"x\",\"yy\",\"zzz\",\"w\"]", TILE_EINVAL, "data has 4 elements but shape [3] needs 3");
    data_error(&c, "[\"x\",2,\"z\"]", TILE_EINVAL, "data[1] is a number, but dtype str needs strings");
    data_error(&c, "[\"x\",\"\xc3\",\"z\"]", TILE_EINVAL, "invalid UTF-8 in a string at byte 6");
    /* a scalar string */
    c.rank = -1;
    assert_int_equal(read_data(&c, "\"solo\"", &t, &e), 0);
    assert_int_equal(t.rank, 0);
    assert_int_equal(((struct tile_str *)t.data)[0].len, 4);
    tile_tensor_free(&t);
    /* many strings: the blob moves while growing */
    size_t n = 5000;
    char *big = malloc(n * 12 + 8);
    size_t o = 0;
    big[o++] = '[';
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(big + o, 16, "%s\"s%zu\"", i ? "," : "", i);
    big[o++] = ']';
    big[o] = '\0';
    assert_int_equal(read_data(&c, big, &t, &e), 0);
    s = t.data;
    char want[16];
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(want, sizeof(want), "s%zu", i);
        assert_int_equal(s[i].len, w);
        assert_memory_equal(s[i].ptr, want, (size_t)w);
    }
    tile_tensor_free(&t);
    free(big);
}

static void test_data_limits(void **state)
{
    (void)state;
    struct data_case c = {TILE_FLOAT64, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 400};
    struct tile_tensor t;
    struct tile_error e;
    char body[1024];
    size_t o = 0;
    body[o++] = '[';
    for (int i = 0; i < 51; i++)
        o += (size_t)snprintf(body + o, sizeof(body) - o, "%s%d", i ? "," : "", i);
    snprintf(body + o, sizeof(body) - o, "]");
    data_error(&c, body, TILE_ETOOBIG, "the tensor data needs more than 400 bytes");
    c.max_bytes = 408;
    assert_int_equal(read_data(&c, body, &t, &e), 0);
    assert_int_equal(t.nelem, 51);
    tile_tensor_free(&t);
    c.max_bytes = 400;
    c.rank = 1;
    c.shape = I64(51);
    data_error(&c, body, TILE_ETOOBIG, "tensor needs 408 bytes, above the limit of 400");
    c.dtype = TILE_STRING;
    c.rank = -1;
    c.max_bytes = 1000;
    char text[1200];
    text[0] = '[';
    text[1] = '"';
    memset(text + 2, 'a', 1100);
    memcpy(text + 1102, "\"]", 3);
    data_error(&c, text, TILE_ETOOBIG, "the string data needs more than 1000 bytes");
}

/* A big flat array grows the buffer many times. */
static void test_data_large(void **state)
{
    (void)state;
    size_t n = 300000;
    char *body = malloc(n * 8 + 4);
    size_t o = 0;
    body[o++] = '[';
    for (size_t i = 0; i < n; i++)
        o += (size_t)snprintf(body + o, 12, "%s%zu", i ? "," : "", i % 1000);
    body[o++] = ']';
    body[o] = '\0';
    struct data_case c = {TILE_UINT16, -1, NULL, TILE_JSON_COMPLEX_PAIRS, 0, 0, 0};
    struct tile_tensor t;
    struct tile_error e;
    assert_int_equal(read_data(&c, body, &t, &e), 0);
    EXPECT_SHAPE(&t, (int64_t)n);
    for (size_t i = 0; i < n; i += 997)
        assert_int_equal(((uint16_t *)t.data)[i], i % 1000);
    tile_tensor_free(&t);
    free(body);
}

/* ---- /v1 bodies ------------------------------------------------------------ */

static const struct tile_limits test_limits = {
    .max_body = 1u << 24, .max_output = 1u << 26, .max_stream = 1u << 30, .max_rank = 8, .max_depth = 16};

static int decode(const char *body, const struct tile_limits *lim, struct tile_request *r, struct tile_error *e)
{
    size_t len = strlen(body);
    char *copy = malloc(len ? len : 1);
    memcpy(copy, body, len);
    tile_request_init(r);
    tile_error_clear(e);
    int rc = tile_v1_json_decode(copy, len, lim, r, e);
    free(copy); /* the request owns copies of everything */
    return rc;
}

static void decode_error_lim(const char *body, const struct tile_limits *lim, enum tile_errcode code,
                             const char *msg)
{
    struct tile_request r;
    struct tile_error e;
    if (decode(body, lim, &r, &e) == 0)
        fail_msg("accepted: %s", body);
    assert_int_equal(e.code, code);
    if (!strstr(e.text, msg))
        fail_msg("%s\n  message '%s' lacks '%s'", body, e.text, msg);
    tile_request_free(&r); /* freeable after any error */
}

static void decode_error(const char *body, enum tile_errcode code, const char *msg)
{
    decode_error_lim(body, &test_limits, code, msg);
}

static void test_v1_basic(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_error e;
    assert_int_equal(decode("{\"input\": {\"dtype\": \"float32\", \"shape\": [2,2], \"data\": [1,2,3,4]},"
                            " \"repeats\": [1,2], \"semantics\": \"onnx\"}",
                            &test_limits, &r, &e),
                     0);
    assert_int_equal(r.input.dtype, TILE_FLOAT32);
    EXPECT_SHAPE(&r.input, 2, 2);
    assert_true(((float *)r.input.data)[3] == 4.0f);
    assert_true(r.has_repeats);
    assert_int_equal(r.nrepeats, 2);
    assert_int_equal(r.repeats[0], 1);
    assert_int_equal(r.repeats[1], 2);
    assert_int_equal(r.semantics, TILE_SEM_ONNX);
    assert_false(r.has_tiles);
    assert_false(r.has_axis);
    struct tile_spec spec;
    assert_int_equal(tile_request_spec(&r, &test_limits, &spec, &e), 0);
    tile_request_free(&r);
    /* nested data, no shape, semantics omitted */
    assert_int_equal(decode("{\"repeats\":[2,1],\"input\":{\"data\":[[1,2],[3,4],[5,6]],\"dtype\":\"int64\"}}",
                            &test_limits, &r, &e),
                     0);
    EXPECT_SHAPE(&r.input, 3, 2);
    assert_int_equal(r.semantics, TILE_SEM_ONNX);
    assert_int_equal(((int64_t *)r.input.data)[5], 6);
    tile_request_free(&r);
    /* onnx1 */
    assert_int_equal(decode("{\"input\":{\"dtype\":\"FLOAT16\",\"data\":[0.1,65504]},\"semantics\":\"ONNX1\","
                            "\"tiles\":3,\"axis\":-1}",
                            &test_limits, &r, &e),
                     0);
    assert_int_equal(r.semantics, TILE_SEM_ONNX1);
    assert_true(r.has_tiles && r.has_axis && !r.has_repeats);
    assert_int_equal(r.tiles, 3);
    assert_int_equal(r.axis, -1);
    assert_int_equal(((uint16_t *)r.input.data)[0], 0x2E66);
    assert_int_equal(((uint16_t *)r.input.data)[1], 0x7BFF);
    tile_request_free(&r);
    /* lim NULL: no limits */
    assert_int_equal(decode("{\"input\":{\"dtype\":\"bool\",\"data\":true},\"repeats\":[]}", NULL, &r, &e), 0);
    assert_int_equal(r.input.rank, 0);
    assert_int_equal(((uint8_t *)r.input.data)[0], 1);
    assert_int_equal(r.nrepeats, 0);
    assert_true(r.has_repeats);
    tile_request_free(&r);
}

/* dtype, shape and data in every order give the same tensor. */
static void test_v1_key_orders(void **state)
{
    (void)state;
    const char *parts[3] = {"\"dtype\":\"uint8\"", "\"shape\":[3,2]", "\"data\":[1,2,3,4,5,6]"};
    const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    for (int k = 0; k < 6; k++) {
        char body[256];
        snprintf(body, sizeof(body), "{\"repeats\":[1,1],\"input\":{%s,%s,%s}}", parts[orders[k][0]],
                 parts[orders[k][1]], parts[orders[k][2]]);
        struct tile_request r;
        struct tile_error e;
        if (decode(body, &test_limits, &r, &e) < 0)
            fail_msg("%s: %s", body, e.text);
        EXPECT_SHAPE(&r.input, 3, 2);
        assert_memory_equal(r.input.data, "\1\2\3\4\5\6", 6);
        tile_request_free(&r);
        /* and nested data that does not fit the shape fails the same way */
        snprintf(body, sizeof(body), "{\"repeats\":[1,1],\"input\":{%s,%s,%s}}",
                 orders[k][0] == 2 ? "\"data\":[[1,2,3],[4,5,6]]" : parts[orders[k][0]],
                 orders[k][1] == 2 ? "\"data\":[[1,2,3],[4,5,6]]" : parts[orders[k][1]],
                 orders[k][2] == 2 ? "\"data\":[[1,2,3],[4,5,6]]" : parts[orders[k][2]]);
        decode_error(body, TILE_EINVAL, "data is nested as [2,3], which does not match shape [3,2]");
    }
}

static void test_v1_dtype_names(void **state)
{
    (void)state;
    const struct {
        const char *name;
        enum tile_dtype dtype;
    } names[] = {
        {"float32", TILE_FLOAT32}, {"FLOAT", TILE_FLOAT32},   {"fp32", TILE_FLOAT32},     {"f4", TILE_FLOAT32},
        {"Float64", TILE_FLOAT64}, {"DOUBLE", TILE_FLOAT64},  {"half", TILE_FLOAT16},     {"BF16", TILE_BFLOAT16},
        {"bfloat16", TILE_BFLOAT16}, {"bool_", TILE_BOOL},    {"BOOL", TILE_BOOL},        {"i1", TILE_INT8},
        {"UINT64", TILE_UINT64},   {"complex64", TILE_COMPLEX64}, {"c16", TILE_COMPLEX128}, {"string", TILE_STRING},
        {"BYTES", TILE_STRING},    {"\\u0066loat32", TILE_FLOAT32},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char body[200];
        snprintf(body, sizeof(body), "{\"input\":{\"dtype\":\"%s\",\"data\":[]},\"repeats\":[1]}", names[i].name);
        struct tile_request r;
        struct tile_error e;
        if (decode(body, &test_limits, &r, &e) < 0)
            fail_msg("%s: %s", names[i].name, e.text);
        assert_int_equal(r.input.dtype, names[i].dtype);
        tile_request_free(&r);
    }
}

static void test_v1_errors(void **state)
{
    (void)state;
    decode_error("", TILE_EINVAL, "invalid JSON: unexpected end of input at byte 0");
    decode_error("[1]", TILE_EINVAL, "the request body must be an object, not an array");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[1]} x", TILE_EINVAL,
                 "unexpected data after the top-level value at byte 52");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[1]}{}", TILE_EINVAL,
                 "unexpected data after the top-level value");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeat\":[1]}", TILE_EINVAL,
                 "unknown key 'repeat' in the request body (expected input, repeats, semantics, tiles or axis)");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"values\":[1]},\"repeats\":[1]}", TILE_EINVAL,
                 "unknown key 'values' in input (expected dtype, shape or data)");
    decode_error("{\"repeats\":[1],\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[2]}", TILE_EINVAL,
                 "duplicate key 'repeats' in the request body");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"dtype\":\"int8\",\"data\":[1]}}", TILE_EINVAL,
                 "duplicate key 'dtype' in input");
    decode_error("{\"input\":{\"data\":[1],\"dtype\":\"int8\",\"data\":[1]}}", TILE_EINVAL,
                 "duplicate key 'data' in input");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"input\":{}}", TILE_EINVAL,
                 "duplicate key 'input' in the request body");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[1.5]}", TILE_EINVAL,
                 "repeats[0] must be an integer, got 1.5");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[1,2e0]}", TILE_EINVAL,
                 "repeats[1] must be an integer, got 2e0");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[\"2\"]}", TILE_EINVAL,
                 "repeats[0] must be an integer, not a string");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":2}", TILE_EINVAL,
                 "repeats must be an array of integers, not a number");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1]},\"repeats\":[99999999999999999999]}", TILE_EINVAL,
                 "repeats[0] is 99999999999999999999, outside the 64-bit integer range");
    decode_error("{\"input\":{\"dtype\":\"float32\",\"data\":[1]},\"semantics\":\"onnx1\",\"tiles\":1.5,\"axis\":0}",
                 TILE_EINVAL, "tiles must be an integer, got 1.5");
    decode_error("{\"input\":{\"dtype\":\"float32\",\"data\":[1]},\"semantics\":\"onnx1\",\"tiles\":1,\"axis\":\"0\"}",
                 TILE_EINVAL, "axis must be an integer, not a string");
    decode_error("{\"input\":{\"dtype\":\"float32\",\"data\":[1]},\"semantics\":\"bogus\"}", TILE_EINVAL,
                 "unknown semantics 'bogus'");
    decode_error("{\"input\":{\"dtype\":\"float32\",\"data\":[1]},\"semantics\":1}", TILE_EINVAL,
                 "semantics must be a string, not a number");
    decode_error("{\"repeats\":[1]}", TILE_EINVAL, "the request body has no \"input\"");
    decode_error("{\"input\":{\"data\":[1]},\"repeats\":[1]}", TILE_EINVAL, "input.dtype is missing");
    decode_error("{\"input\":{\"dtype\":\"int8\"},\"repeats\":[1]}", TILE_EINVAL, "input.data is missing");
    decode_error("{\"input\":{\"dtype\":\"float128\",\"data\":[1]}}", TILE_EINVAL,
                 "unknown dtype 'float128' (known: bool, int8,");
    decode_error("{\"input\":{\"dtype\":7,\"data\":[1]}}", TILE_EINVAL, "dtype must be a string, not a number");
    decode_error("{\"input\":[1,2]}", TILE_EINVAL, "input must be an object, not an array");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"shape\":[2,-2],\"data\":[]}}", TILE_EINVAL,
                 "shape[1] is -2; dimensions must be >= 0");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data\":[1]}}", TILE_EINVAL,
                 "shape has more than 8 values");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"shape\":2,\"data\":[1]}}", TILE_EINVAL,
                 "shape must be an array of integers, not a number");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"shape\":[2.5],\"data\":[1]}}", TILE_EINVAL,
                 "shape[0] must be an integer, got 2.5");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"shape\":[2],\"data\":[1,2,3]}}", TILE_EINVAL,
                 "data has 3 elements but shape [2] needs 2");
    decode_error("{\"input\":{\"data\":[1,2,3],\"dtype\":\"int8\",\"shape\":[2]}}", TILE_EINVAL,
                 "data has 3 elements but shape [2] needs 2");
    decode_error("{\"input\":{\"data\":[1,2,300],\"dtype\":\"uint8\"}}", TILE_EINVAL,
                 "value 300 is out of range for uint8 at data[2]");
    decode_error("{\"input\":{\"dtype\":\"int32\",\"data\":[1,\"2\"]}}", TILE_EINVAL,
                 "data[1] is a string, but dtype int32 needs numbers");
    decode_error("{\"input\":{\"dtype\":\"int32\",\"data\":[[1,2],[3]]}}", TILE_EINVAL,
                 "ragged nested data at data[1]: 1 elements where 2 were expected");
    decode_error("{\"input\":{\"dtype\":\"str\",\"data\":[\"a\xff\"]}}", TILE_EINVAL,
                 "invalid UTF-8 in a string at byte 34");
    decode_error("{\"input\":{\"dtype\":\"str\",\"data\":[\"\\ud800\"]}}", TILE_EINVAL,
                 "lone high surrogate in a \\u escape at byte 33");
    decode_error("{\"in\\u0070ut\":{\"dtype\":\"int8\",\"data\":[1]},\"input\":{}}", TILE_EINVAL,
                 "duplicate key 'input'");
    /* an error after the data was read still leaves the request freeable */
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1,2]},\"bogus\":1}", TILE_EINVAL, "unknown key 'bogus'");
    decode_error("{\"input\":{\"dtype\":\"int8\",\"data\":[1,2]},\"repeats\":[1,]}", TILE_EINVAL,
                 "trailing comma before ']'");
}

static void test_v1_limits(void **state)
{
    (void)state;
    /* depth: 16 levels in all, the body object and input take two */
    char body[512];
    int depth = 15;
    int o = snprintf(body, sizeof(body), "{\"input\":{\"dtype\":\"int8\",\"data\":");
    for (int i = 0; i < depth; i++)
        body[o++] = '[';
    body[o++] = '1';
    for (int i = 0; i < depth; i++)
        body[o++] = ']';
    snprintf(body + o, sizeof(body) - (size_t)o, "}}");
    struct tile_limits lim = test_limits;
    lim.max_rank = 0;
    decode_error_lim(body, &lim, TILE_EINVAL, "JSON nesting deeper than 16 at byte 46");
    lim.max_depth = 32;
    lim.max_rank = 8;
    decode_error_lim(body, &lim, TILE_EINVAL,
                     "data[0][0][0][0][0][0][0][0] nests arrays deeper than the maximum rank 8");
    lim.max_rank = 0;
    struct tile_request r;
    struct tile_error e;
    assert_int_equal(decode(body, &lim, &r, &e), 0);
    assert_int_equal(r.input.rank, 15);
    tile_request_free(&r);
    /* the decoded tensor's size */
    lim.max_body = 16;
    assert_int_equal(decode("{\"input\":{\"dtype\":\"float64\",\"data\":[1,2]}}", &lim, &r, &e), 0);
    tile_request_free(&r);
    assert_int_equal(decode("{\"input\":{\"dtype\":\"float64\",\"data\":[1,2,3]}}", &lim, &r, &e), -1);
    assert_int_equal(e.code, TILE_ETOOBIG);
    tile_request_free(&r);
    assert_int_equal(decode("{\"input\":{\"dtype\":\"float64\",\"shape\":[3],\"data\":[1,2,3]}}", &lim, &r, &e), -1);
    assert_int_equal(e.code, TILE_ETOOBIG);
    assert_non_null(strstr(e.text, "tensor needs 24 bytes, above the limit of 16"));
    tile_request_free(&r);
}

static void test_v1_values(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_error e;
    assert_int_equal(decode("{\"input\":{\"dtype\":\"uint64\",\"data\":[18446744073709551615,0]}}", &test_limits,
                            &r, &e),
                     0);
    assert_true(((uint64_t *)r.input.data)[0] == UINT64_MAX);
    tile_request_free(&r);
    assert_int_equal(decode("{\"input\":{\"dtype\":\"int64\",\"data\":[-9223372036854775808,9223372036854775807]}}",
                            &test_limits, &r, &e),
                     0);
    assert_true(((int64_t *)r.input.data)[0] == INT64_MIN);
    assert_true(((int64_t *)r.input.data)[1] == INT64_MAX);
    tile_request_free(&r);
    assert_int_equal(decode("{\"input\":{\"dtype\":\"float32\",\"data\":[\"NaN\",\"Infinity\",\"-Infinity\",0.1]}}",
                            &test_limits, &r, &e),
                     0);
    float *f = r.input.data;
    assert_true(isnan(f[0]) && isinf(f[1]) && f[1] > 0 && isinf(f[2]) && f[2] < 0 && f[3] == 0.1f);
    tile_request_free(&r);
    assert_int_equal(decode("{\"input\":{\"dtype\":\"str\",\"shape\":[1,2],\"data\":[[\"a\",\"\\u00e9\"]]}}",
                            &test_limits, &r, &e),
                     0);
    const struct tile_str *s = r.input.data;
    assert_int_equal(s[1].len, 2);
    assert_memory_equal(s[1].ptr, "\xc3\xa9", 2);
    tile_request_free(&r);
    assert_int_equal(decode("{\"input\":{\"dtype\":\"complex128\",\"data\":[[1,2],[3,4]]}}", &test_limits, &r, &e),
                     0);
    EXPECT_SHAPE(&r.input, 2);
    assert_true(((double *)r.input.data)[3] == 4.0);
    tile_request_free(&r);
}

/* Encodings tiled never writes but JSON allows, found by the differential
 * test against Python's json (tests/api/test_json_differential.py). */
static void test_v1_escaped_spellings(void **state)
{
    (void)state;
    struct tile_request r;
    struct tile_error e;
    /* The NaN / Infinity strings with escapes, longer than 15 bytes as written. */
    assert_int_equal(
        decode("{\"input\":{\"dtype\":\"float64\",\"data\":[\"\\u0049nfinit\\u0079\","
               "\"-\\u0069\\u006e\\u0066\\u0069\\u006e\\u0069\\u0074\\u0079\",\"\\u004e\\u0061\\u004e\"]}}",
               &test_limits, &r, &e),
        0);
    const double *d = r.input.data;
    assert_true(isinf(d[0]) && d[0] > 0 && isinf(d[1]) && d[1] < 0 && isnan(d[2]));
    tile_request_free(&r);
    decode_error("{\"input\":{\"dtype\":\"float64\",\"data\":[\"\\u0049nfinit\\u0079!\"]}}", TILE_EINVAL,
                 "data[0] is a string");
}

/* A string field's bound counts its unescaped bytes ("\u0069" is one). */
static void test_jr_string_escaped(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int ok;
        const char *text;
    } cases[] = {
        {"\"\\u0072\\u0065\\u0070\\u0065\\u0061\\u0074\\u0073\"", 1, "repeats"}, /* 42 bytes, 7 unescaped */
        {"\"\\ud83d\\ude00abcd\"", 1,
         "\xf0\x9f\x98\x80"
         "abcd"},                                                             /* 8 unescaped */
        {"\"\\u0072\\u0065\\u0070\\u0065\\u0061\\u0074\\u0073xy\"", 0, NULL}, /* 9 unescaped */
        {"\"abcdefghi\"", 0, NULL},
        {"\"\\u0061\\u0061\\u0061\\u0061\\u0061\\u0061\\u0061\\u0061\\u0061\"", 0, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct tile_jr jr;
        struct tile_error e;
        char buf[8];
        size_t len = 0;
        tile_error_clear(&e);
        jr.e = &e;
        tile_json_lexer_init(&jr.lx, cases[i].json, strlen(cases[i].json), 8);
        int rc = tile_jr_string(&jr, "name", buf, sizeof(buf), &len);
        if (!cases[i].ok) {
            assert_int_equal(rc, -1);
            assert_non_null(strstr(e.text, "is too long (at most 8 bytes)"));
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(len, strlen(cases[i].text));
        assert_memory_equal(buf, cases[i].text, len);
    }
}

/* Every dtype: random elements formatted to JSON, decoded, formatted again:
 * the same text, and the same bits except for NaN payloads. */
static void round_trip_body(enum tile_dtype dtype, int n, bool nested)
{
    size_t size = tile_dtype_size(dtype);
    uint8_t *elems = malloc(size * (size_t)n);
    for (size_t i = 0; i < size * (size_t)n; i++)
        elems[i] = (uint8_t)rng();
    if (dtype == TILE_BOOL) {
        for (int i = 0; i < n; i++)
            elems[i] &= 1;
    }
    size_t cap = (size_t)n * (TILE_NUMFMT_MAX + 4) + 128, o;
    char *body = malloc(cap);
    o = (size_t)snprintf(body, cap, "{\"repeats\":[1],\"input\":{\"data\":[");
    for (int i = 0; i < n; i++) {
        if (i)
            body[o++] = ',';
        if (nested && i % 2 == 0)
            body[o++] = '[';
        o += tile_json_format_element(dtype, elems + (size_t)i * size, body + o);
        if (nested && i % 2 == 1)
            body[o++] = ']';
    }
    o += (size_t)snprintf(body + o, cap - o, "],\"dtype\":\"%s\"}}", tile_dtype_name(dtype));
    struct tile_request r;
    struct tile_error e;
    if (decode(body, &test_limits, &r, &e) < 0)
        fail_msg("%s: %s", tile_dtype_name(dtype), e.text);
    if (nested)
        EXPECT_SHAPE(&r.input, n / 2, 2);
    else
        EXPECT_SHAPE(&r.input, n);
    for (int i = 0; i < n; i++) {
        const uint8_t *a = elems + (size_t)i * size, *b = (const uint8_t *)r.input.data + (size_t)i * size;
        char ta[TILE_NUMFMT_MAX], tb[TILE_NUMFMT_MAX];
        size_t na = tile_json_format_element(dtype, a, ta), nb = tile_json_format_element(dtype, b, tb);
        if (na != nb || memcmp(ta, tb, na) != 0)
            fail_msg("%s[%d]: '%.*s' came back as '%.*s'", tile_dtype_name(dtype), i, (int)na, ta, (int)nb, tb);
        if (memcmp(a, b, size) != 0 && !memchr(ta, 'N', na))
            fail_msg("%s[%d]: '%.*s' changed bits", tile_dtype_name(dtype), i, (int)na, ta);
    }
    tile_request_free(&r);
    free(elems);
    free(body);
}

static void test_v1_round_trip_all_dtypes(void **state)
{
    (void)state;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        if (d == TILE_STRING)
            continue;
        round_trip_body((enum tile_dtype)d, 20000, false);
        round_trip_body((enum tile_dtype)d, 2000, true);
    }
}

/* Random UTF-8 strings escaped with tile_json_escape_string come back byte
 * for byte. */
static void test_v1_round_trip_strings(void **state)
{
    (void)state;
    static const char *const pieces[] = {"a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x01", "\x1f", "\x7f",
                                         "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbf", "\0"};
    int n = 3000;
    struct tile_str *want = calloc((size_t)n, sizeof(*want));
    char *text = malloc((size_t)n * 40), *body = malloc((size_t)n * 240 + 100);
    size_t t = 0, o = (size_t)snprintf(body, 100, "{\"repeats\":[1],\"input\":{\"dtype\":\"str\",\"data\":[");
    for (int i = 0; i < n; i++) {
        want[i].ptr = text + t;
        int len = (int)(rng() % 10);
        for (int k = 0; k < len; k++) {
            const char *p = pieces[rng() % (sizeof(pieces) / sizeof(pieces[0]))];
            size_t pl = p[0] ? strlen(p) : 1;
            memcpy(text + t, p, pl);
            t += pl;
        }
        want[i].len = (uint64_t)(text + t - want[i].ptr);
        if (i)
            body[o++] = ',';
        long w = tile_json_escape_string(want[i].ptr, want[i].len, body + o, 240);
        assert_true(w > 0);
        o += (size_t)w;
    }
    snprintf(body + o, 100, "]}}");
    struct tile_request r;
    struct tile_error e;
    if (decode(body, &test_limits, &r, &e) < 0)
        fail_msg("%s", e.text);
    const struct tile_str *got = r.input.data;
    for (int i = 0; i < n; i++) {
        assert_int_equal(got[i].len, want[i].len);
        if (want[i].len)
            assert_memory_equal(got[i].ptr, want[i].ptr, want[i].len);
    }
    tile_request_free(&r);
    free(want);
    free(text);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_inferred),
        cmocka_unit_test(test_data_ragged),
        cmocka_unit_test(test_data_depth),
        cmocka_unit_test(test_data_known_shape),
        cmocka_unit_test(test_data_apply_shape),
        cmocka_unit_test(test_data_complex_pairs),
        cmocka_unit_test(test_data_complex_interleaved),
        cmocka_unit_test(test_data_strings),
        cmocka_unit_test(test_data_limits),
        cmocka_unit_test(test_data_large),
        cmocka_unit_test(test_v1_basic),
        cmocka_unit_test(test_v1_key_orders),
        cmocka_unit_test(test_v1_dtype_names),
        cmocka_unit_test(test_v1_errors),
        cmocka_unit_test(test_v1_limits),
        cmocka_unit_test(test_v1_values),
        cmocka_unit_test(test_v1_escaped_spellings),
        cmocka_unit_test(test_jr_string_escaped),
        cmocka_unit_test(test_v1_round_trip_all_dtypes),
        cmocka_unit_test(test_v1_round_trip_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
