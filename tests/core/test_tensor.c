/* test_tensor.c - shape arithmetic, tensor allocation and string sums. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "tile.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define I64(...) ((const int64_t[]){__VA_ARGS__})
#define COUNT(...) ((int)(sizeof(I64(__VA_ARGS__)) / sizeof(int64_t)))
#define SHAPE(...) COUNT(__VA_ARGS__), I64(__VA_ARGS__)
#define P2(n) ((int64_t)1 << (n))

struct elems_case {
    int rank;
    const int64_t *shape;
    int rc;
    uint64_t elems;               /* when rc == 0 */
    enum tile_errcode code;       /* when rc == -1 */
    const char *text;
};

static void shape_elems(void **state)
{
    const struct elems_case cases[] = {
        {0, NULL, 0, 1, TILE_OK, NULL},
        {SHAPE(7), 0, 7, TILE_OK, NULL},
        {SHAPE(2, 3, 4), 0, 24, TILE_OK, NULL},
        {SHAPE(2, 0, 4), 0, 0, TILE_OK, NULL},
        {SHAPE(INT64_MAX, 1), 0, INT64_MAX, TILE_OK, NULL},
        {SHAPE(P2(31), P2(31)), 0, (uint64_t)1 << 62, TILE_OK, NULL},
        {SHAPE(0, P2(40), P2(20)), 0, 0, TILE_OK, NULL},
        {SHAPE(P2(40), P2(22), 0), 0, 0, TILE_OK, NULL},
        /* empty, but the other dims overflow: numpy refuses it too */
        {SHAPE(0, P2(40), P2(40)), -1, 0, TILE_ETOOBIG, "shape product overflows 64 bits at axis 2"},
        {SHAPE(3, P2(62), 0), -1, 0, TILE_ETOOBIG, "shape product overflows 64 bits at axis 1"},
        {SHAPE(3, -1), -1, 0, TILE_EINVAL, "shape[1] is -1; dimensions must be >= 0"},
        {SHAPE(0, -4), -1, 0, TILE_EINVAL, "shape[1] is -4; dimensions must be >= 0"},
        {SHAPE(INT64_MIN), -1, 0, TILE_EINVAL, "shape[0] is -9223372036854775808"},
        {SHAPE(P2(32), P2(32)), -1, 0, TILE_ETOOBIG, "shape product overflows 64 bits at axis 1"},
        {SHAPE(INT64_MAX, 2), -1, 0, TILE_ETOOBIG, "shape product overflows 64 bits at axis 1"},
        {SHAPE(P2(32), P2(30), 2), -1, 0, TILE_ETOOBIG, "shape product overflows 64 bits at axis 2"},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const struct elems_case *c = &cases[i];
        struct tile_error e = {0};
        uint64_t n = 12345;
        assert_int_equal(tile_shape_elems(c->shape, c->rank, &n, &e), c->rc);
        assert_int_equal(e.code, c->code);
        if (c->rc == 0)
            assert_int_equal(n, c->elems);
        else if (!strstr(e.text, c->text))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, e.text, c->text);
        assert_int_equal(tile_shape_elems(c->shape, c->rank, &n, NULL), c->rc); /* NULL error is fine */
    }
}

static void expect_empty(const struct tile_tensor *t)
{
    assert_null(t->data);
    assert_int_equal(t->dtype, TILE_DTYPE_INVALID);
    assert_int_equal(t->nelem, 0);
    assert_false(t->owns_data);
}

struct init_case {
    const char *name;
    enum tile_dtype dtype;
    int rank;
    const int64_t *shape;
    uint64_t max_bytes;
    enum tile_errcode code;
    const char *text;
};

static void tensor_init_errors(void **state)
{
    const struct init_case cases[] = {
        {"limit", TILE_FLOAT32, SHAPE(2, 3, 4), 95, TILE_ETOOBIG, "tensor needs 96 bytes, above the limit of 95"},
        {"string limit", TILE_STRING, SHAPE(4), 63, TILE_ETOOBIG, "tensor needs 64 bytes"},
        {"invalid dtype", TILE_DTYPE_COUNT, SHAPE(2), 0, TILE_EINVAL, "invalid dtype"},
        {"rank 65", TILE_INT8, TILE_MAX_RANK + 1, NULL, 0, TILE_EINVAL, "rank 65 is outside 0..64"},
        {"rank -1", TILE_INT8, -1, NULL, 0, TILE_EINVAL, "rank -1 is outside 0..64"},
        {"negative dim", TILE_INT8, SHAPE(2, -2), 0, TILE_EINVAL, "shape[1] is -2"},
        {"elements overflow", TILE_INT8, SHAPE(P2(32), P2(32)), 0, TILE_ETOOBIG, "shape product overflows"},
        {"bytes overflow", TILE_FLOAT32, SHAPE(P2(62)), 0, TILE_ETOOBIG, "tensor byte size overflows 64 bits"},
        /* empty, but numpy could not hold it: 2^61 x 8 bytes */
        {"empty past 2^63 bytes", TILE_FLOAT64, SHAPE(0, P2(61)), 0, TILE_ETOOBIG, "tensor byte size overflows 64 bits"},
        {"unallocatable", TILE_COMPLEX128, SHAPE(P2(58)), 0, TILE_ENOMEM, "cannot allocate"},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const struct init_case *c = &cases[i];
        struct tile_tensor t;
        struct tile_error e = {0};
        memset(&t, 0x5A, sizeof(t));
        assert_int_equal(tile_tensor_init(&t, c->dtype, c->rank, c->shape, c->max_bytes, &e), -1);
        if (e.code != c->code || !strstr(e.text, c->text))
            fail_msg("%s: %s \"%s\"", c->name, tile_errcode_name(e.code), e.text);
        expect_empty(&t);
        tile_tensor_free(&t);
    }
}

/* Small and large tensors come zeroed, aligned, writable and with their
 * shape; the limit is inclusive. */
static void tensor_init_sizes(void **state)
{
    const struct init_case cases[] = {
        {"scalar", TILE_FLOAT64, 0, NULL, 8, TILE_OK, NULL},
        {"at the limit", TILE_FLOAT32, SHAPE(2, 3, 4), 96, TILE_OK, NULL},
        {"empty", TILE_STRING, SHAPE(3, 0), 1, TILE_OK, NULL},
        {"just below mmap", TILE_UINT8, SHAPE((1 << 21) - 1), 0, TILE_OK, NULL},
        {"8 MiB", TILE_FLOAT32, SHAPE(1024, 2048), 8u << 20, TILE_OK, NULL},
        {"odd big", TILE_COMPLEX128, SHAPE(3, 5, 7, 1001), 0, TILE_OK, NULL},
    };
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
        const struct init_case *c = &cases[i];
        struct tile_tensor t;
        struct tile_error e = {0};
        if (tile_tensor_init(&t, c->dtype, c->rank, c->shape, c->max_bytes, &e) != 0)
            fail_msg("%s: %s", c->name, e.text);
        uint64_t n = 1;
        for (int d = 0; d < c->rank; d++)
            n *= (uint64_t)c->shape[d];
        assert_int_equal(t.dtype, c->dtype);
        assert_int_equal(t.rank, c->rank);
        assert_int_equal(t.nelem, n);
        assert_true(t.owns_data);
        assert_int_equal(tile_tensor_nbytes(&t), n * tile_dtype_size(c->dtype));
        assert_int_equal((uintptr_t)t.data % (tile_tensor_nbytes(&t) < TILE_SMALL_BUFFER ? 16 : 64), 0);
        if (c->rank)
            assert_memory_equal(t.shape, c->shape, sizeof(int64_t) * (size_t)c->rank);
        const uint8_t *b = t.data;
        for (uint64_t k = 0; k < tile_tensor_nbytes(&t); k++)
            if (b[k])
                fail_msg("%s: byte %llu is not zero", c->name, (unsigned long long)k);
        memset(t.data, 0xC3, tile_tensor_nbytes(&t));
        tile_tensor_free(&t);
        expect_empty(&t);
    }
}

static void buffers(void **state)
{
    static const uint64_t sizes[] = {0, 1, 63, 64, 65, 4095, 4096, 4097, (1u << 21) - 1, 1u << 21, (8u << 20) + 3};
    (void)state;
    for (size_t i = 0; i < ARRAY_LEN(sizes); i++) {
        uint8_t *p = tile_alloc_buffer(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % (sizes[i] < TILE_SMALL_BUFFER ? 16 : 64), 0);
        memset(p, 0x7E, sizes[i]);
        for (uint64_t k = 0; k < sizes[i]; k += 4093)
            assert_int_equal(p[k], 0x7E);
        tile_free_buffer(p, sizes[i]);
    }
    assert_null(tile_alloc_buffer(UINT64_MAX));
    assert_null(tile_alloc_buffer((uint64_t)SIZE_MAX / 2 + 1));
    tile_free_buffer(NULL, 100);
}

/* Freeing releases only what the tensor owns: borrowed data stays, an
 * owned blob goes (LeakSanitizer checks the latter). */
static void free_ownership(void **state)
{
    int64_t data[4] = {1, 2, 3, 4};
    struct tile_tensor t = {.dtype = TILE_INT64, .rank = 1, .shape = {4}, .data = data, .nelem = 4};
    (void)state;
    t.blob = malloc(100);
    t.blob_len = 100;
    assert_non_null(t.blob);
    tile_tensor_free(&t);
    expect_empty(&t);
    assert_null(t.blob);
    assert_int_equal(data[3], 4);
    tile_tensor_free(NULL);
}

static void string_bytes(void **state)
{
    static const char text[] = "\xe6\x97\xa5\xe6\x9c\xac and ascii";
    struct tile_str views[5] = {{text, 0}, {text, 3}, {text, sizeof(text) - 1}, {text + 3, 6}, {text, 1}};
    struct tile_tensor t = {.dtype = TILE_STRING, .rank = 2, .shape = {5, 1}, .data = views, .nelem = 5};
    struct tile_tensor big = {.dtype = TILE_STRING, .rank = 1, .shape = {3}, .data = views, .nelem = 3};
    (void)state;
    views[4].len = UINT64_C(1) << 40; /* lengths are summed, never read */
    assert_int_equal(tile_tensor_string_bytes(&t), 3 + (sizeof(text) - 1) + 6 + (UINT64_C(1) << 40));
    assert_int_equal(tile_tensor_string_bytes(&big), 3 + (sizeof(text) - 1));
    t.dtype = TILE_UINT8; /* not strings: 0 */
    assert_int_equal(tile_tensor_string_bytes(&t), 0);
    t.dtype = TILE_STRING;
    t.data = NULL;
    assert_int_equal(tile_tensor_string_bytes(&t), 0);
    t.data = views;
    t.nelem = 0;
    assert_int_equal(tile_tensor_string_bytes(&t), 0);
}

/* tile_tensor_init_in: elements that fit the caller's buffer are put in
 * it, zeroed and borrowed (free leaves it alone); more are allocated as by
 * tile_tensor_init; the checks are the same either way. */
static void init_in_buffer(void **state)
{
    (void)state;
    int64_t small[8];
    memset(small, 0xab, sizeof(small));
    struct tile_tensor t;
    struct tile_error e = {0};
    int64_t shape2[1] = {2}, shape9[1] = {9}, neg[1] = {-1};
    assert_int_equal(tile_tensor_init_in(&t, TILE_INT64, 1, shape2, 0, small, sizeof(small), &e), 0);
    assert_ptr_equal(t.data, small);
    assert_false(t.owns_data);
    assert_int_equal(small[0], 0);
    assert_int_equal(small[1], 0);
    assert_int_equal(small[2], (int64_t)0xabababababababab); /* only the elements are cleared */
    tile_tensor_free(&t);
    assert_int_equal(small[0], 0); /* still the caller's */
    assert_int_equal(tile_tensor_init_in(&t, TILE_INT64, 1, shape9, 0, small, sizeof(small), &e), 0);
    assert_ptr_not_equal(t.data, small);
    assert_true(t.owns_data);
    assert_int_equal(t.nelem, 9);
    tile_tensor_free(&t);
    assert_int_equal(tile_tensor_init_in(&t, TILE_INT64, 1, neg, 0, small, sizeof(small), &e), -1);
    assert_null(t.data);
    assert_int_equal(tile_tensor_init_in(&t, TILE_INT64, 1, shape2, 8, small, sizeof(small), &e), -1); /* max_bytes */
    assert_null(t.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shape_elems),       cmocka_unit_test(tensor_init_errors),
        cmocka_unit_test(tensor_init_sizes), cmocka_unit_test(buffers),
        cmocka_unit_test(free_ownership),    cmocka_unit_test(string_bytes),
        cmocka_unit_test(init_in_buffer),
    };
    return cmocka_run_group_tests_name("tensor", tests, NULL, NULL);
}
