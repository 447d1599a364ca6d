/* test_plan.c - tile_plan_init's rules, limits and messages, and the
 * examples from the specifications it follows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "ref.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define COUNT(...) ((int)(sizeof(I64(__VA_ARGS__)) / sizeof(int64_t)))
#define SHAPE(...) .rank = COUNT(__VA_ARGS__), .shape = I64(__VA_ARGS__)
#define REPS(...) .repeats = I64(__VA_ARGS__), .nrepeats = COUNT(__VA_ARGS__)
#define P2(n) ((int64_t)1 << (n))

/* All 1s (filled in main): shapes and repeats of any rank. */
static int64_t ones[TILE_MAX_RANK + 8];

/* A request as the tests state it: dtype, shape and spec. */
struct request {
    const char *name;
    enum tile_dtype dtype;
    int rank;
    const int64_t *shape;
    struct tile_spec spec;
};

static int plan_request(const struct request *q, struct tile_plan *pl, struct tile_error *e)
{
    tile_error_clear(e);
    return tile_plan_init(pl, q->dtype, q->rank, q->shape ? q->shape : ones, &q->spec, e);
}

static void expect_error(const struct request *q, enum tile_errcode code, const char *text)
{
    struct tile_plan pl;
    struct tile_error e;
    int rc = plan_request(q, &pl, &e);
    if (rc != -1 || e.code != code || !strstr(e.text, text))
        fail_msg("%s: rc %d, code %s, message \"%s\"; expected code %s with \"%s\"", q->name, rc,
                 tile_errcode_name(e.code), e.text, tile_errcode_name(code), text);
    /* Without an error struct the outcome is the same. */
    assert_int_equal(tile_plan_init(&pl, q->dtype, q->rank, q->shape ? q->shape : ones, &q->spec, NULL), -1);
}

static void expect_plan(const struct request *q, struct tile_plan *pl)
{
    struct tile_error e;
    if (plan_request(q, pl, &e) != 0)
        fail_msg("%s: rejected: %s", q->name, e.text);
}

/* ---- every rule's error ---- */

struct error_case {
    struct request q;
    enum tile_errcode code;
    const char *text;
};

#define ONNX(...) .semantics = TILE_SEM_ONNX, REPS(__VA_ARGS__)
#define DML(...) .semantics = TILE_SEM_DIRECTML, REPS(__VA_ARGS__)
#define NUMPY(...) .semantics = TILE_SEM_NUMPY, REPS(__VA_ARGS__)

static const struct error_case error_cases[] = {
    {{"onnx: too many repeats", TILE_FLOAT32, SHAPE(2, 3), {ONNX(1, 2, 3)}}, TILE_EINVAL,
     "repeats has 3 values but input has rank 2 (semantics onnx requires one per axis)"},
    {{"onnx: no repeats", TILE_INT8, SHAPE(4), {.semantics = TILE_SEM_ONNX}}, TILE_EINVAL,
     "repeats has 0 values but input has rank 1 (semantics onnx requires one per axis)"},
    {{"directml: too few repeats", TILE_INT32, SHAPE(2, 3), {DML(2)}}, TILE_EINVAL,
     "repeats has 1 values but input has rank 2 (semantics directml requires one per axis)"},
    {{"onnx: negative repeat", TILE_FLOAT32, SHAPE(2, 3), {ONNX(1, -1)}}, TILE_EINVAL,
     "repeats[1] is -1 (semantics onnx requires every repeat >= 0)"},
    {{"numpy: negative repeat", TILE_FLOAT32, SHAPE(2, 3), {NUMPY(-2)}}, TILE_EINVAL,
     "repeats[0] is -2 (semantics numpy requires every repeat >= 0)"},
    {{"openvino: negative repeat", TILE_UINT8, SHAPE(5), {.semantics = TILE_SEM_OPENVINO, REPS(3, 1, -5)}},
     TILE_EINVAL, "repeats[2] is -5 (semantics openvino requires every repeat >= 0)"},
    {{"numpy: negative repeats length", TILE_FLOAT32, SHAPE(2), {.semantics = TILE_SEM_NUMPY, .nrepeats = -1}},
     TILE_EINVAL, "repeats has a negative length"},
    {{"directml: zero repeat", TILE_FLOAT16, SHAPE(2, 3), {DML(0, 1)}}, TILE_EINVAL,
     "repeats[0] is 0 (semantics directml requires every repeat >= 1)"},
    {{"directml: negative repeat", TILE_FLOAT16, SHAPE(2, 3), {DML(1, -1)}}, TILE_EINVAL,
     "repeats[1] is -1 (semantics directml requires every repeat >= 1)"},
    {{"directml: rank 0", TILE_FLOAT32, 0, NULL, {.semantics = TILE_SEM_DIRECTML}}, TILE_EINVAL,
     "input has rank 0 (semantics directml requires rank 1..8)"},
    {{"directml: rank 9", TILE_FLOAT32, 9, NULL, {.semantics = TILE_SEM_DIRECTML, .repeats = ones, .nrepeats = 9}},
     TILE_EINVAL, "input has rank 9 (semantics directml requires rank 1..8)"},
    {{"directml: bool", TILE_BOOL, SHAPE(2), {DML(2)}}, TILE_EINVAL,
     "dtype bool is not allowed by semantics directml (it accepts float16, float32 and the 8- to 64-bit integers)"},
    {{"onnx1: int32", TILE_INT32, SHAPE(2), {.semantics = TILE_SEM_ONNX1, .tiles = 2}}, TILE_EINVAL,
     "dtype int32 is not allowed by semantics onnx1 (it accepts float16, float32 and float64)"},
    {{"onnx1: axis too big", TILE_FLOAT32, SHAPE(2, 3), {.semantics = TILE_SEM_ONNX1, .tiles = 2, .axis = 2}},
     TILE_EINVAL, "axis 2 is out of range for rank 2 (semantics onnx1 allows -2..1)"},
    {{"onnx1: axis too negative", TILE_FLOAT64, SHAPE(2, 3), {.semantics = TILE_SEM_ONNX1, .tiles = 2, .axis = -3}},
     TILE_EINVAL, "axis -3 is out of range for rank 2 (semantics onnx1 allows -2..1)"},
    {{"onnx1: negative tiles", TILE_FLOAT16, SHAPE(2, 3), {.semantics = TILE_SEM_ONNX1, .tiles = -1}}, TILE_EINVAL,
     "tiles is -1 (semantics onnx1 requires tiles >= 0)"},
    {{"onnx1: rank 0", TILE_FLOAT32, 0, NULL, {.semantics = TILE_SEM_ONNX1, .tiles = 2}}, TILE_EINVAL,
     "input has rank 0 (semantics onnx1 needs an axis to tile along)"},
    {{"negative dimension", TILE_FLOAT32, SHAPE(3, -2), {ONNX(1, 1)}}, TILE_EINVAL,
     "shape[1] is -2; dimensions must be >= 0"},
    {{"negative dimension, numpy", TILE_FLOAT32, SHAPE(-1), {NUMPY(2, 2)}}, TILE_EINVAL,
     "shape[0] is -1; dimensions must be >= 0"},
    {{"shape product overflow", TILE_UINT8, SHAPE(P2(32), P2(32), 4), {ONNX(1, 1, 1)}}, TILE_ETOOBIG,
     "shape product overflows 64 bits"},
    {{"repeats product overflow", TILE_UINT8, SHAPE(1, 1, 1), {ONNX(P2(32), P2(32), 4)}}, TILE_ETOOBIG,
     "the product of repeats overflows 64 bits"},
    {{"output dimension overflow", TILE_UINT8, SHAPE(P2(62)), {ONNX(4)}}, TILE_ETOOBIG,
     "output dimension 0 (4611686018427387904 x 4) overflows 64 bits"},
    {{"output elements overflow", TILE_UINT8, SHAPE(P2(31), P2(31)), {ONNX(2, 2)}}, TILE_ETOOBIG,
     "shape product overflows 64 bits at axis 1"},
    {{"empty output past 64 bits", TILE_UINT8, SHAPE(P2(40), 0, P2(20)), {ONNX(P2(20), 7, 1)}}, TILE_ETOOBIG,
     "shape product overflows 64 bits at axis 2"},
    {{"empty input past 2^63 bytes", TILE_FLOAT64, SHAPE(0, P2(61)), {ONNX(1, 1)}}, TILE_ETOOBIG,
     "input byte size overflows 64 bits"},
    {{"empty output past 2^63 bytes", TILE_FLOAT64, SHAPE(0, P2(58)), {ONNX(1, 8)}}, TILE_ETOOBIG,
     "output byte size overflows 64 bits"},
    {{"output bytes overflow", TILE_FLOAT32, SHAPE(P2(60)), {ONNX(4)}}, TILE_ETOOBIG,
     "output byte size overflows 64 bits"},
    {{"input bytes overflow", TILE_FLOAT32, SHAPE(P2(62)), {ONNX(0)}}, TILE_ETOOBIG,
     "input byte size overflows 64 bits"},
    {{"output limit", TILE_FLOAT32, SHAPE(2, 3), {ONNX(2, 2), .max_output_bytes = 95}}, TILE_ETOOBIG,
     "output would be 96 bytes, above the limit of 95 bytes"},
    {{"max_rank on the input", TILE_FLOAT32, 5, NULL, {.semantics = TILE_SEM_ONNX, .repeats = ones, .nrepeats = 5,
                                                      .max_rank = 4}},
     TILE_EINVAL, "input rank 5 is outside 0..4"},
    {{"max_rank on repeats", TILE_FLOAT32, SHAPE(2), {NUMPY(1, 1, 1, 1, 2), .max_rank = 4}}, TILE_EINVAL,
     "repeats has 5 values, above the maximum rank of 4"},
    {{"structural rank limit", TILE_FLOAT32, TILE_MAX_RANK + 1, NULL, {.semantics = TILE_SEM_NUMPY, .max_rank = 100}},
     TILE_EINVAL, "input rank 65 is outside 0..64"},
    {{"negative rank", TILE_FLOAT32, -1, NULL, {.semantics = TILE_SEM_NUMPY}}, TILE_EINVAL,
     "input rank -1 is outside 0..64"},
    {{"invalid dtype", TILE_DTYPE_COUNT, SHAPE(2), {ONNX(2)}}, TILE_EINVAL, "invalid dtype"},
    {{"dtype -1", TILE_DTYPE_INVALID, SHAPE(2), {ONNX(2)}}, TILE_EINVAL, "invalid dtype"},
    {{"invalid semantics", TILE_FLOAT32, SHAPE(2), {.semantics = TILE_SEM_COUNT, REPS(2)}}, TILE_EINVAL,
     "invalid semantics"},
};

static void every_rule_error(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(error_cases); i++)
        expect_error(&error_cases[i].q, error_cases[i].code, error_cases[i].text);
}

/* The limits accept what is exactly at them. */
static void limits_are_inclusive(void **state)
{
    const struct request ok[] = {
        {"output at the limit", TILE_FLOAT32, SHAPE(2, 3), {ONNX(2, 2), .max_output_bytes = 96}},
        {"rank at max_rank", TILE_FLOAT32, 4, NULL, {.semantics = TILE_SEM_ONNX, .repeats = ones, .nrepeats = 4,
                                                     .max_rank = 4}},
        {"rank 64", TILE_INT8, TILE_MAX_RANK, NULL, {.semantics = TILE_SEM_NUMPY}},
        {"directml rank 8", TILE_INT8, 8, NULL, {.semantics = TILE_SEM_DIRECTML, .repeats = ones, .nrepeats = 8}},
        {"onnx1 axis -rank", TILE_FLOAT32, SHAPE(2, 3), {.semantics = TILE_SEM_ONNX1, .tiles = 0, .axis = -2}},
        {"biggest dimension", TILE_BOOL, SHAPE(INT64_MAX), {ONNX(1)}},
    };
    struct tile_plan pl;
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(ok); i++)
        expect_plan(&ok[i], &pl);
}

/* A limit that is exceeded fails before any allocation: a 4 PiB output
 * would otherwise fail with TILE_ENOMEM (or not at all). */
static void limit_checked_before_allocating(void **state)
{
    struct tile_tensor in = {.dtype = TILE_FLOAT32, .rank = 2, .shape = {P2(20), P2(20)}, .nelem = P2(40)};
    struct tile_tensor out;
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, REPS(P2(10), 1), .max_output_bytes = 1u << 20};
    struct tile_error e = {0};
    (void)state;
    assert_int_equal(tile_run(&in, &spec, &out, NULL, &e), -1);
    assert_int_equal(e.code, TILE_ETOOBIG);
    assert_non_null(strstr(e.text, "above the limit of 1048576 bytes"));
    assert_null(out.data);
    assert_int_equal(out.dtype, TILE_DTYPE_INVALID);
}

/* ---- dtypes each semantics accepts ---- */

struct dtype_rule {
    enum tile_semantics sem;
    const char *accepts; /* canonical names, space separated */
};

static const struct dtype_rule dtype_rules[] = {
    {TILE_SEM_DIRECTML, " float16 float32 int8 int16 int32 int64 uint8 uint16 uint32 uint64 "},
    {TILE_SEM_ONNX1, " float16 float32 float64 "},
    {TILE_SEM_ONNX, " bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 "
                    "complex64 complex128 str "},
    {TILE_SEM_NUMPY, " bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 float64 "
                     "complex64 complex128 str "},
    {TILE_SEM_OPENVINO, " bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float16 bfloat16 float32 "
                        "float64 complex64 complex128 str "},
};

static void dtypes_per_semantics(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(dtype_rules); i++) {
        for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
            struct request q = {tile_dtype_name((enum tile_dtype)d), (enum tile_dtype)d, SHAPE(2, 3),
                                {.semantics = dtype_rules[i].sem, REPS(2, 1), .tiles = 2, .axis = 1}};
            char word[32], text[120];
            snprintf(word, sizeof(word), " %s ", tile_dtype_name(q.dtype));
            snprintf(text, sizeof(text), "dtype %s is not allowed by semantics %s (it accepts ",
                     tile_dtype_name(q.dtype), tile_semantics_name(q.spec.semantics));
            struct tile_plan pl;
            if (strstr(dtype_rules[i].accepts, word))
                expect_plan(&q, &pl);
            else
                expect_error(&q, TILE_EINVAL, text);
        }
    }
}

/* ---- shapes from the specifications' examples ---- */

struct shape_example {
    struct request q;
    int out_rank;
    const int64_t *out_shape;
};

#define ONNX1(t, a) .semantics = TILE_SEM_ONNX1, .tiles = (t), .axis = (a)
#define OUT(...) COUNT(__VA_ARGS__), I64(__VA_ARGS__)

static const struct shape_example shape_examples[] = {
    /* OpenVINO Tile-1 and numpy.tile promote the shorter side. */
    {{"numpy (2,3) x [2,2,2]", TILE_FLOAT32, SHAPE(2, 3), {NUMPY(2, 2, 2)}}, OUT(2, 4, 6)},
    {{"numpy (4,2,3) x [2,2]", TILE_FLOAT32, SHAPE(4, 2, 3), {NUMPY(2, 2)}}, OUT(4, 4, 6)},
    {{"openvino (2,3) x [2,2,2]", TILE_INT32, SHAPE(2, 3), {.semantics = TILE_SEM_OPENVINO, REPS(2, 2, 2)}},
     OUT(2, 4, 6)},
    {{"openvino (4,2,3) x [2,2]", TILE_INT32, SHAPE(4, 2, 3), {.semantics = TILE_SEM_OPENVINO, REPS(2, 2)}},
     OUT(4, 4, 6)},
    {{"openvino (2,3,4) x [1,2,3]", TILE_INT32, SHAPE(2, 3, 4), {.semantics = TILE_SEM_OPENVINO, REPS(1, 2, 3)}},
     OUT(2, 6, 12)},
    {{"numpy scalar x [3]", TILE_FLOAT32, 0, NULL, {NUMPY(3)}}, OUT(3)},
    {{"numpy (2,3) x []", TILE_FLOAT32, SHAPE(2, 3), {.semantics = TILE_SEM_NUMPY}}, OUT(2, 3)},
    {{"numpy (3) x [0,2]", TILE_FLOAT32, SHAPE(3), {NUMPY(0, 2)}}, OUT(0, 6)},
    {{"onnx (2,2) x [1,2]", TILE_FLOAT32, SHAPE(2, 2), {ONNX(1, 2)}}, OUT(2, 4)},
    {{"onnx (2,0,3) x [2,5,0]", TILE_FLOAT32, SHAPE(2, 0, 3), {ONNX(2, 5, 0)}}, OUT(4, 0, 0)},
    {{"directml {1,1,2,3} x {1,1,3,3}", TILE_FLOAT32, SHAPE(1, 1, 2, 3), {DML(1, 1, 3, 3)}}, OUT(1, 1, 6, 9)},
    {{"onnx1 (2,3) tiles 3 axis -1", TILE_FLOAT32, SHAPE(2, 3), {ONNX1(3, -1)}}, OUT(2, 9)},
    {{"onnx1 (2,3) tiles 3 axis 0", TILE_FLOAT16, SHAPE(2, 3), {ONNX1(3, 0)}}, OUT(6, 3)},
    {{"onnx1 (2,3) tiles 0 axis 1", TILE_FLOAT64, SHAPE(2, 3), {ONNX1(0, 1)}}, OUT(2, 0)},
};

static struct ref_case case_of(const struct request *q)
{
    struct ref_case c = {.sem = q->spec.semantics, .dtype = q->dtype, .rank = q->rank,
                         .nrepeats = q->spec.nrepeats, .tiles = q->spec.tiles, .axis = q->spec.axis};
    memcpy(c.shape, q->shape ? q->shape : ones, sizeof(int64_t) * (size_t)q->rank);
    if (q->spec.nrepeats > 0)
        memcpy(c.repeats, q->spec.repeats, sizeof(int64_t) * (size_t)q->spec.nrepeats);
    return c;
}

/* The plan and the oracle both give the output shape the specs state. */
static void specification_shapes(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(shape_examples); i++) {
        const struct shape_example *x = &shape_examples[i];
        struct ref_case c = case_of(&x->q);
        struct ref_problem p;
        struct tile_plan pl;
        expect_plan(&x->q, &pl);
        assert_int_equal(ref_expand(&c, &p), 0);
        assert_int_equal(pl.out_rank, x->out_rank);
        assert_int_equal(p.rank, x->out_rank);
        assert_memory_equal(pl.out_shape, x->out_shape, sizeof(int64_t) * (size_t)x->out_rank);
        assert_memory_equal(p.out_shape, x->out_shape, sizeof(int64_t) * (size_t)x->out_rank);
    }
}

/* ---- values from the specifications' examples ---- */

struct value_example {
    struct request q;
    const float *in, *out;
    uint64_t nout;
};

#define F32(...) ((const float[]){__VA_ARGS__})
#define R3 1, 2, 3, 1, 2, 3, 1, 2, 3
#define R6 4, 5, 6, 4, 5, 6, 4, 5, 6

static const struct value_example value_examples[] = {
    /* ONNX Tile: A = [[1,2],[3,4]], B = [1,2]. */
    {{"onnx", TILE_FLOAT32, SHAPE(2, 2), {ONNX(1, 2)}}, F32(1, 2, 3, 4), F32(1, 2, 1, 2, 3, 4, 3, 4), 8},
    /* DirectML DML_TILE_OPERATOR_DESC. */
    {{"directml", TILE_FLOAT32, SHAPE(1, 1, 2, 3), {DML(1, 1, 3, 3)}}, F32(1, 2, 3, 4, 5, 6),
     F32(R3, R6, R3, R6, R3, R6), 54},
    /* numpy.tile docs: np.tile([0,1,2], 2) and np.tile(b, (2,1)) with b = [[1,2],[3,4]]. */
    {{"numpy", TILE_FLOAT32, SHAPE(3), {NUMPY(2)}}, F32(0, 1, 2), F32(0, 1, 2, 0, 1, 2), 6},
    {{"numpy (2,1)", TILE_FLOAT32, SHAPE(2, 2), {NUMPY(2, 1)}}, F32(1, 2, 3, 4), F32(1, 2, 3, 4, 1, 2, 3, 4), 8},
    {{"numpy promotes", TILE_FLOAT32, SHAPE(3), {NUMPY(2, 2)}}, F32(0, 1, 2),
     F32(0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2), 12},
    {{"onnx1 axis 0", TILE_FLOAT32, SHAPE(2, 2), {ONNX1(2, 0)}}, F32(1, 2, 3, 4), F32(1, 2, 3, 4, 1, 2, 3, 4), 8},
    {{"onnx1 axis -1", TILE_FLOAT32, SHAPE(2, 2), {ONNX1(2, -1)}}, F32(1, 2, 3, 4), F32(1, 2, 1, 2, 3, 4, 3, 4), 8},
    {{"scalar", TILE_FLOAT32, 0, NULL, {.semantics = TILE_SEM_ONNX}}, F32(7), F32(7), 1},
};

static void specification_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(value_examples); i++) {
        const struct value_example *x = &value_examples[i];
        struct tile_tensor in = {.dtype = x->q.dtype, .rank = x->q.rank, .data = (void *)x->in}, out;
        struct tile_error e = {0};
        uint64_t n = 1;
        for (int d = 0; d < x->q.rank; d++)
            n *= (uint64_t)(in.shape[d] = x->q.shape[d]);
        in.nelem = n;
        if (tile_run(&in, &x->q.spec, &out, NULL, &e) != 0)
            fail_msg("%s: %s", x->q.name, e.text);
        assert_int_equal(out.nelem, x->nout);
        assert_memory_equal(out.data, x->out, sizeof(float) * x->nout);
        tile_tensor_free(&out);
    }
}

/* ---- empty outputs ---- */

static void empty_outputs(void **state)
{
    const struct request empty[] = {
        {"zero dimension", TILE_FLOAT32, SHAPE(0, 3), {ONNX(2, 2)}},
        {"zero repeat", TILE_FLOAT64, SHAPE(2, 3), {ONNX(0, 1)}},
        {"zero inner repeat", TILE_STRING, SHAPE(2, 3), {ONNX(1, 0)}},
        {"numpy zero promoted repeat", TILE_INT8, SHAPE(2, 3), {NUMPY(0, 1, 1)}},
        {"onnx1 zero tiles", TILE_FLOAT16, SHAPE(4, 5), {ONNX1(0, -1)}},
        {"huge but empty", TILE_COMPLEX128, SHAPE(P2(30), 0, P2(10)), {ONNX(P2(10), 7, 1)}},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(empty); i++) {
        struct tile_plan pl;
        expect_plan(&empty[i], &pl);
        assert_int_equal(pl.nlev, 0);
        assert_int_equal(pl.out_elems, 0);
        assert_int_equal(pl.out_bytes, 0);
        /* Nothing may be read or written. */
        tile_execute(&pl, NULL, NULL, NULL);
        tile_read(&pl, NULL, 0, 0, NULL);
    }
}

/* ---- semantics names ---- */

static void semantics_parse(void **state)
{
    static const struct {
        const char *name;
        enum tile_semantics sem;
    } names[] = {
        {"onnx", TILE_SEM_ONNX},         {"ONNX", TILE_SEM_ONNX},         {"Onnx1", TILE_SEM_ONNX1},
        {"numpy", TILE_SEM_NUMPY},       {"NumPy", TILE_SEM_NUMPY},       {"OpenVINO", TILE_SEM_OPENVINO},
        {"openvino", TILE_SEM_OPENVINO}, {"DirectML", TILE_SEM_DIRECTML}, {"DIRECTML", TILE_SEM_DIRECTML},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(names); i++) {
        enum tile_semantics s = TILE_SEM_COUNT;
        struct tile_error e = {0};
        assert_int_equal(tile_semantics_parse(names[i].name, strlen(names[i].name), &s, &e), 0);
        assert_int_equal(s, names[i].sem);
        assert_int_equal(e.code, TILE_OK);
    }
    for (int s = 0; s < TILE_SEM_COUNT; s++) {
        const char *name = tile_semantics_name((enum tile_semantics)s);
        enum tile_semantics got = TILE_SEM_COUNT;
        assert_int_equal(tile_semantics_parse(name, strlen(name), &got, NULL), 0);
        assert_int_equal(got, s);
    }
    assert_string_equal(tile_semantics_name(TILE_SEM_COUNT), "invalid");
}

static void semantics_parse_errors(void **state)
{
    static const struct {
        const char *name;
        size_t len;
        const char *quoted;
    } bad[] = {
        {"onnx2", 5, "'onnx2'"},
        {"", 0, "''"},
        {"onn", 3, "'onn'"},
        {"numpy ", 6, "'numpy '"},
        {"onnx1", 4, NULL}, /* "onnx" within a longer buffer is fine */
        {"0123456789012345678901234567890123456789TAIL", 44, "'0123456789012345678901234567890123456789'"},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        enum tile_semantics s = TILE_SEM_COUNT;
        struct tile_error e = {0};
        int rc = tile_semantics_parse(bad[i].name, bad[i].len, &s, &e);
        if (!bad[i].quoted) {
            assert_int_equal(rc, 0);
            assert_int_equal(s, TILE_SEM_ONNX);
            continue;
        }
        assert_int_equal(rc, -1);
        assert_int_equal(e.code, TILE_EINVAL);
        assert_non_null(strstr(e.text, bad[i].quoted));
        assert_non_null(strstr(e.text, "(expected onnx, onnx1, numpy, openvino or directml)"));
    }
}

/* ---- string wire sizes ---- */

struct wire_case {
    struct request q;
    uint64_t in_string_bytes, limit;
    int rc;
    uint64_t bytes;   /* when rc == 0 */
    const char *text; /* when rc == -1 */
};

static const struct wire_case wire_cases[] = {
    /* 12 outputs, each input string twice: 10 * 2 + 12 * 4. */
    {{"plain", TILE_STRING, SHAPE(2, 3), {ONNX(2, 1)}}, 10, 0, 0, 68, NULL},
    {{"at the limit", TILE_STRING, SHAPE(2, 3), {ONNX(2, 1)}}, 10, 68, 0, 68, NULL},
    {{"above the limit", TILE_STRING, SHAPE(2, 3), {ONNX(2, 1)}}, 10, 67, -1, 0,
     "string output would be 68 bytes, above the limit of 67 bytes"},
    {{"empty strings", TILE_STRING, SHAPE(3), {NUMPY(2, 2)}}, 0, 0, 0, 48, NULL},
    {{"empty output", TILE_STRING, SHAPE(2, 3), {ONNX(0, 1)}}, 1000, 1, 0, 0, NULL},
    {{"payload overflow", TILE_STRING, SHAPE(2), {ONNX(2)}}, (UINT64_MAX >> 1) + 1, 0, -1, 0,
     "string output size overflows 64 bits"},
    {{"sum overflow", TILE_STRING, SHAPE(2), {ONNX(2)}}, (UINT64_MAX >> 1) - 3, 0, -1, 0,
     "string output size overflows 64 bits"},
    {{"prefix overflow", TILE_BOOL, SHAPE(P2(62)), {ONNX(1)}}, 0, 0, -1, 0, "string output size overflows 64 bits"},
};

static void string_wire_bytes(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(wire_cases); i++) {
        const struct wire_case *w = &wire_cases[i];
        struct tile_plan pl;
        struct tile_error e = {0};
        uint64_t got = 12345;
        expect_plan(&w->q, &pl);
        int rc = tile_plan_string_wire_bytes(&pl, w->in_string_bytes, w->limit, &got, &e);
        if (rc != w->rc || (rc == 0 && got != w->bytes) || (rc < 0 && !strstr(e.text, w->text)))
            fail_msg("%s: rc %d, %llu bytes, \"%s\"", w->q.name, rc, (unsigned long long)got, e.text);
        assert_int_equal(e.code, rc == 0 ? TILE_OK : TILE_ETOOBIG);
    }
}

/* The wire size matches the strings tile_run actually produces. */
static void string_wire_bytes_match_output(void **state)
{
    static const char text[] = "tiled strings: \xc3\xa9\xe6\x97\xa5 and more";
    (void)state;
    for (uint64_t i = 0; i < 200; i++) {
        struct ref_rng r;
        struct ref_case c;
        struct ref_problem p;
        struct tile_plan pl;
        struct tile_spec spec;
        ref_rng_seed(&r, ref_case_seed(0x3713E, i));
        ref_random_case(&r, TILE_STRING, 512, &c);
        c.sem = TILE_SEM_NUMPY;
        if (ref_expand(&c, &p) < 0)
            continue;
        struct tile_tensor in = {.dtype = TILE_STRING, .rank = c.rank, .nelem = p.in_elems}, out;
        struct tile_str views[512];
        for (uint64_t k = 0; k < p.in_elems; k++)
            views[k] = (struct tile_str){text, ref_rng_below(&r, sizeof(text))};
        in.data = views;
        memcpy(in.shape, c.shape, sizeof(in.shape));
        spec = ref_spec(&c);
        uint64_t want, in_bytes = tile_tensor_string_bytes(&in);
        assert_int_equal(tile_plan_init(&pl, TILE_STRING, c.rank, c.shape, &spec, NULL), 0);
        assert_int_equal(tile_plan_string_wire_bytes(&pl, in_bytes, 0, &want, NULL), 0);
        assert_int_equal(tile_run(&in, &spec, &out, NULL, NULL), 0);
        assert_int_equal(tile_tensor_string_bytes(&out) + 4 * out.nelem, want);
        tile_tensor_free(&out);
    }
}

/* Folding the innermost level: the rank-6 case's 28-byte rows, each
 * repeated 4 times, become a scratch input of 112-byte blocks that the
 * level above reads as one 672-byte row; folding again is possible while
 * two levels remain. */
static void fold_inner_levels(void **state)
{
    (void)state;
    const int64_t shape[6] = {2, 3, 4, 5, 6, 7}, reps[6] = {3, 2, 2, 2, 2, 4};
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = reps, .nrepeats = 6};
    struct tile_plan p, f, g;
    assert_int_equal(tile_plan_init(&p, TILE_FLOAT32, 6, shape, &spec, NULL), 0);
    assert_int_equal(p.nlev, 6);
    assert_true(tile_plan_can_fold_inner(&p));
    assert_int_equal(tile_plan_folded_in_bytes(&p), 2 * 3 * 4 * 5 * 6 * 7 * 4 * 4);
    tile_plan_fold_inner(&p, &f);
    assert_int_equal(f.nlev, 5);
    assert_int_equal(f.in_bytes, tile_plan_folded_in_bytes(&p));
    assert_int_equal(f.lev_tile[4], 6 * 28 * 4); /* one contiguous row of the scratch input */
    assert_int_equal(f.lev_rep[4], 2);
    assert_int_equal(f.out_bytes, p.out_bytes);
    for (int l = 0; l < 4; l++) { /* outer levels write the same blocks, read a 4x bigger input */
        assert_int_equal(f.lev_tile[l] * f.lev_rep[l], p.lev_tile[l] * p.lev_rep[l]);
        assert_int_equal(f.lev_in_stride[l], p.lev_in_stride[l] * 4);
    }
    assert_true(tile_plan_can_fold_inner(&f));
    tile_plan_fold_inner(&f, &g);
    assert_int_equal(g.nlev, 4);
    assert_int_equal(g.lev_tile[3], 5 * 6 * 28 * 4 * 2);

    /* [3,7]x[2,1]: the unrepeated axis merges into its outer one, leaving
     * one level, which has nothing inside it to fold. */
    const int64_t col[2] = {3, 7}, rcol[2] = {2, 1};
    spec.repeats = rcol;
    spec.nrepeats = 2;
    assert_int_equal(tile_plan_init(&p, TILE_FLOAT32, 2, col, &spec, NULL), 0);
    assert_int_equal(p.nlev, 1);
    assert_false(tile_plan_can_fold_inner(&p));
}

/* A plan holds what its out_rank axes and nlev levels say and nothing
 * else: one planned over a plan full of other values (as a reused struct
 * is), or copied over one, tiles exactly as one planned into zeroed
 * memory, and agrees with it on every field that is read. */
static void plans_hold_only_their_axes(void **state)
{
    (void)state;
    const int64_t shape[4] = {2, 3, 1, 5}, reps[4] = {2, 1, 4, 3};
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = reps, .nrepeats = 4};
    static struct tile_plan zeroed, dirty, copied;
    memset(&dirty, 0xa5, sizeof(dirty));
    memset(&copied, 0x5a, sizeof(copied));
    assert_int_equal(tile_plan_init(&zeroed, TILE_INT16, 4, shape, &spec, NULL), 0);
    assert_int_equal(tile_plan_init(&dirty, TILE_INT16, 4, shape, &spec, NULL), 0);
    tile_plan_copy(&dirty, &copied);
    const struct tile_plan *ps[2] = {&dirty, &copied};
    for (int k = 0; k < 2; k++) {
        const struct tile_plan *p = ps[k];
        assert_int_equal(p->dtype, zeroed.dtype);
        assert_int_equal(p->elem_size, zeroed.elem_size);
        assert_int_equal(p->out_rank, zeroed.out_rank);
        assert_memory_equal(p->in_shape, zeroed.in_shape, 4 * sizeof(int64_t));
        assert_memory_equal(p->repeats, zeroed.repeats, 4 * sizeof(int64_t));
        assert_memory_equal(p->out_shape, zeroed.out_shape, 4 * sizeof(int64_t));
        assert_int_equal(p->in_bytes, zeroed.in_bytes);
        assert_int_equal(p->out_bytes, zeroed.out_bytes);
        assert_int_equal(p->repeat_product, zeroed.repeat_product);
        assert_int_equal(p->nlev, zeroed.nlev);
        size_t lev = (size_t)zeroed.nlev * sizeof(uint64_t);
        assert_memory_equal(p->lev_in, zeroed.lev_in, lev);
        assert_memory_equal(p->lev_rep, zeroed.lev_rep, lev);
        assert_memory_equal(p->lev_sub, zeroed.lev_sub, lev);
        assert_memory_equal(p->lev_in_stride, zeroed.lev_in_stride, lev);
        assert_memory_equal(p->lev_tile, zeroed.lev_tile, lev);
        int16_t in[30], want[30 * 24], got[30 * 24];
        for (int i = 0; i < 30; i++)
            in[i] = (int16_t)(i * 7 + 1);
        tile_execute(&zeroed, in, want, NULL);
        memset(got, 0, sizeof(got));
        tile_execute(p, in, got, NULL);
        assert_memory_equal(got, want, zeroed.out_bytes);
    }
}

int main(void)
{
    for (size_t i = 0; i < ARRAY_LEN(ones); i++)
        ones[i] = 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_rule_error),
        cmocka_unit_test(limits_are_inclusive),
        cmocka_unit_test(limit_checked_before_allocating),
        cmocka_unit_test(dtypes_per_semantics),
        cmocka_unit_test(specification_shapes),
        cmocka_unit_test(specification_values),
        cmocka_unit_test(empty_outputs),
        cmocka_unit_test(semantics_parse),
        cmocka_unit_test(semantics_parse_errors),
        cmocka_unit_test(string_wire_bytes),
        cmocka_unit_test(string_wire_bytes_match_output),
        cmocka_unit_test(fold_inner_levels),
        cmocka_unit_test(plans_hold_only_their_axes),
    };
    return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
