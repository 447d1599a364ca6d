/* test_dtype.c - dtype names in every family, sizes and the trait table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "tile.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

struct named {
    const char *name;
    enum tile_dtype dtype;
};

/* Names as the ONNX TensorProto, the Open Inference Protocol and NumPy
 * spell them. */
static const struct named family_names[] = {
    /* ONNX */
    {"FLOAT", TILE_FLOAT32},       {"DOUBLE", TILE_FLOAT64},         {"FLOAT16", TILE_FLOAT16},
    {"BFLOAT16", TILE_BFLOAT16},   {"STRING", TILE_STRING},          {"BOOL", TILE_BOOL},
    {"INT8", TILE_INT8},           {"INT16", TILE_INT16},            {"INT32", TILE_INT32},
    {"INT64", TILE_INT64},         {"UINT8", TILE_UINT8},            {"UINT16", TILE_UINT16},
    {"UINT32", TILE_UINT32},       {"UINT64", TILE_UINT64},          {"COMPLEX64", TILE_COMPLEX64},
    {"COMPLEX128", TILE_COMPLEX128},
    /* Open Inference Protocol (KServe v2, Triton) */
    {"FP32", TILE_FLOAT32},        {"FP16", TILE_FLOAT16},           {"BF16", TILE_BFLOAT16},
    {"FP64", TILE_FLOAT64},        {"BYTES", TILE_STRING},           {"INT64", TILE_INT64},
    {"BOOL", TILE_BOOL},           {"UINT8", TILE_UINT8},            {"INT8", TILE_INT8},
    {"UINT64", TILE_UINT64},
    /* NumPy dtype names and type codes */
    {"float32", TILE_FLOAT32},     {"float64", TILE_FLOAT64},        {"float16", TILE_FLOAT16},
    {"str", TILE_STRING},          {"string", TILE_STRING},          {"bool", TILE_BOOL},
    {"bool_", TILE_BOOL},          {"complex64", TILE_COMPLEX64},    {"complex128", TILE_COMPLEX128},
    {"int8", TILE_INT8},           {"uint16", TILE_UINT16},          {"half", TILE_FLOAT16},
    {"single", TILE_FLOAT32},      {"f4", TILE_FLOAT32},             {"f8", TILE_FLOAT64},
    {"i8", TILE_INT64},            {"u1", TILE_UINT8},               {"c16", TILE_COMPLEX128},
    {"?", TILE_BOOL},              {"bfloat16", TILE_BFLOAT16},
};

/* Writes `name` with its letters in one of three cases. */
static void recase(const char *name, int how, char *out, size_t cap)
{
    size_t i = 0;
    for (; name[i] && i + 1 < cap; i++) {
        int c = (unsigned char)name[i];
        out[i] = (char)(how == 0 ? tolower(c) : how == 1 ? toupper(c) : i % 2 ? toupper(c) : tolower(c));
    }
    out[i] = '\0';
}

static void expect_parse(const char *name, enum tile_dtype want)
{
    for (int how = 0; how < 3; how++) {
        char buf[64];
        recase(name, how, buf, sizeof(buf));
        enum tile_dtype got = tile_dtype_parse(buf, strlen(buf));
        if (got != want)
            fail_msg("\"%s\" parsed as %s, expected %s", buf, tile_dtype_name(got), tile_dtype_name(want));
    }
}

static void family_names_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(family_names); i++)
        expect_parse(family_names[i].name, family_names[i].dtype);
}

/* Every name in the trait table, aliases included, leads back to its own
 * dtype (so no two dtypes claim the same name). */
static void table_names_round_trip(void **state)
{
    (void)state;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = tile_dtype_traits((enum tile_dtype)d);
        assert_non_null(t);
        assert_string_equal(tile_dtype_name((enum tile_dtype)d), t->name);
        expect_parse(t->name, (enum tile_dtype)d);
        expect_parse(t->onnx, (enum tile_dtype)d);
        expect_parse(t->kserve, (enum tile_dtype)d);
        for (const char *p = t->aliases; *p;) {
            char word[32];
            size_t n = strcspn(p, " ");
            assert_in_range(n, 1, sizeof(word) - 1);
            memcpy(word, p, n);
            word[n] = '\0';
            expect_parse(word, (enum tile_dtype)d);
            p += n + strspn(p + n, " ");
        }
    }
}

/* Only `len` bytes count: no NUL is needed and a longer buffer is fine. */
static void parse_uses_len(void **state)
{
    (void)state;
    assert_int_equal(tile_dtype_parse("float32xyz", 7), TILE_FLOAT32);
    assert_int_equal(tile_dtype_parse("int8 int16", 4), TILE_INT8);
    assert_int_equal(tile_dtype_parse("float32", 6), TILE_DTYPE_INVALID); /* "float3" */
    assert_int_equal(tile_dtype_parse("FP16,", 4), TILE_FLOAT16);
    /* A NUL inside the name (JSON's \u0000) is a byte like any other. */
    assert_int_equal(tile_dtype_parse("int8\0", 5), TILE_DTYPE_INVALID);
    assert_int_equal(tile_dtype_parse("f4\0\0", 4), TILE_DTYPE_INVALID);
    assert_int_equal(tile_dtype_parse("b1\0?", 4), TILE_DTYPE_INVALID);
}

static void unknown_names(void **state)
{
    static const char *const bad[] = {
        "", " ", "int", "uint", "float8", "fp8", "int128", "float128", "complex", "bfloat", "FP",
        "float32 ", " float32", "i1 byte", "bool_ b1", "utf8", "object", "o", "x",
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        if (tile_dtype_parse(bad[i], strlen(bad[i])) != TILE_DTYPE_INVALID)
            fail_msg("\"%s\" should not name a dtype", bad[i]);
    }
    assert_int_equal(tile_dtype_parse(NULL, 0), TILE_DTYPE_INVALID);
    assert_int_equal(tile_dtype_parse("float32", 0), TILE_DTYPE_INVALID);
}

static int kserve_ref(const char *s, size_t len)
{
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const char *k = tile_dtype_traits((enum tile_dtype)d)->kserve;
        if (strlen(k) == len && memcmp(k, s, len) == 0)
            return d;
    }
    return TILE_DTYPE_INVALID;
}

/* The Open Inference Protocol parser takes its own names only, spelled
 * exactly (that protocol is case-sensitive). */
static void kserve_names_exact(void **state)
{
    static const char *const bad[] = {"fp32", "Fp16", "bytes", "float32", "FLOAT", "DOUBLE", "STRING", "str", "",
                                      "FP32 ", "BF"};
    (void)state;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const char *name = tile_dtype_traits((enum tile_dtype)d)->kserve;
        assert_int_equal(tile_dtype_parse_kserve(name, strlen(name)), d);
    }
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        if (tile_dtype_parse_kserve(bad[i], strlen(bad[i])) != TILE_DTYPE_INVALID)
            fail_msg("\"%s\" should not be an Open Inference Protocol datatype", bad[i]);
    }
    /* Against the definition (the row whose name is exactly those bytes):
     * every prefix of every name, and every name with each byte value put
     * at each place or added at its end. */
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const char *name = tile_dtype_traits((enum tile_dtype)d)->kserve;
        size_t n = strlen(name);
        char s[24];
        for (size_t cut = 0; cut <= n; cut++)
            assert_int_equal(tile_dtype_parse_kserve(name, cut), kserve_ref(name, cut));
        for (size_t at = 0; at <= n; at++) {
            for (int byte = 0; byte < 256; byte++) {
                memcpy(s, name, n + 1);
                s[at] = (char)byte;
                size_t len = at == n ? n + 1 : n;
                assert_int_equal(tile_dtype_parse_kserve(s, len), kserve_ref(s, len));
            }
        }
    }
    assert_int_equal(tile_dtype_parse_kserve("FP16,FP32", 4), TILE_FLOAT16);
    assert_int_equal(tile_dtype_parse_kserve("INT64", 4), TILE_DTYPE_INVALID);
    assert_int_equal(tile_dtype_parse_kserve("FP32\0\0", 6), TILE_DTYPE_INVALID);
}

static void sizes(void **state)
{
    static const struct {
        enum tile_dtype dtype;
        size_t size, wire;
    } want[] = {
        {TILE_BOOL, 1, 1},     {TILE_INT8, 1, 1},      {TILE_INT16, 2, 2},       {TILE_INT32, 4, 4},
        {TILE_INT64, 8, 8},    {TILE_UINT8, 1, 1},     {TILE_UINT16, 2, 2},      {TILE_UINT32, 4, 4},
        {TILE_UINT64, 8, 8},   {TILE_FLOAT16, 2, 2},   {TILE_BFLOAT16, 2, 2},    {TILE_FLOAT32, 4, 4},
        {TILE_FLOAT64, 8, 8},  {TILE_COMPLEX64, 8, 8}, {TILE_COMPLEX128, 16, 16}, {TILE_STRING, 16, 0},
    };
    (void)state;
    assert_int_equal(ARRAY_LEN(want), TILE_DTYPE_COUNT);
    for (size_t i = 0; i < ARRAY_LEN(want); i++) {
        assert_int_equal(tile_dtype_size(want[i].dtype), want[i].size);
        assert_int_equal(tile_dtype_traits(want[i].dtype)->wire_size, want[i].wire);
        assert_int_equal(tile_dtype_is_string(want[i].dtype), want[i].dtype == TILE_STRING);
    }
    assert_int_equal(tile_dtype_size(TILE_STRING), sizeof(struct tile_str));
}

/* Scalars per element: a complex element is two floats of half its width,
 * everything else is one scalar of its full width. */
static void parts(void **state)
{
    (void)state;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = tile_dtype_traits((enum tile_dtype)d);
        assert_int_equal(t->parts, d == TILE_COMPLEX64 || d == TILE_COMPLEX128 ? 2 : 1);
        assert_int_equal(t->size % t->parts, 0);
    }
    assert_int_equal(tile_dtype_size(TILE_COMPLEX64) / tile_dtype_traits(TILE_COMPLEX64)->parts, 4);
    assert_int_equal(tile_dtype_size(TILE_COMPLEX128) / tile_dtype_traits(TILE_COMPLEX128)->parts, 8);
}

static void out_of_range(void **state)
{
    static const int bad[] = {TILE_DTYPE_INVALID, TILE_DTYPE_COUNT, TILE_DTYPE_COUNT + 1, -1000, 1 << 30};
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
        assert_null(tile_dtype_traits((enum tile_dtype)bad[i]));
        assert_int_equal(tile_dtype_size((enum tile_dtype)bad[i]), 0);
        assert_string_equal(tile_dtype_name((enum tile_dtype)bad[i]), "invalid");
    }
}

/* The list names every dtype, and stays a terminated string when cut. */
static void name_list(void **state)
{
    char buf[512], small[12];
    (void)state;
    tile_dtype_list(buf, sizeof(buf));
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        char item[40];
        snprintf(item, sizeof(item), "%s%s%s", d ? ", " : "", tile_dtype_name((enum tile_dtype)d),
                 d + 1 < TILE_DTYPE_COUNT ? "," : "");
        assert_non_null(strstr(buf, item));
    }
    memset(small, 'x', sizeof(small));
    assert_ptr_equal(tile_dtype_list(small, sizeof(small)), small);
    assert_true(strlen(small) < sizeof(small));
    assert_int_equal(strncmp(small, "bool, int8, int16", strlen(small)), 0);
    small[0] = 'x';
    tile_dtype_list(small, 0);
    assert_int_equal(small[0], 'x');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(family_names_parse), cmocka_unit_test(table_names_round_trip),
        cmocka_unit_test(parse_uses_len),     cmocka_unit_test(unknown_names),
        cmocka_unit_test(kserve_names_exact), cmocka_unit_test(sizes),
        cmocka_unit_test(out_of_range),       cmocka_unit_test(name_list),
        cmocka_unit_test(parts),
    };
    return cmocka_run_group_tests_name("dtype", tests, NULL, NULL);
}
