/* test_grow.c - tile_grow(): doubling, the limit, overflow, failure keeps
 * the buffer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "grow.h"

static void test_doubles_from_first_and_keeps_the_bytes(void **state)
{
    (void)state;
    char *b = NULL;
    size_t cap = 0, len = 0;
    for (int i = 0; i < 1000; i++) {
        char *nb = tile_grow(b, &cap, len, 3, 1, 16, SIZE_MAX);
        assert_non_null(nb);
        b = nb;
        memcpy(b + len, "abc", 3);
        len += 3;
        assert_true(cap >= len);
        assert_true(cap == 16 || (cap & (cap - 1)) == 0); /* 16, 32, 64 ... */
    }
    for (size_t i = 0; i < len; i++)
        assert_int_equal(b[i], "abc"[i % 3]);
    size_t before = cap;
    assert_ptr_equal(tile_grow(b, &cap, len, cap - len, 1, 16, SIZE_MAX), b); /* fits: unchanged */
    assert_int_equal(cap, before);
    free(b);
}

static void test_the_limit(void **state)
{
    (void)state;
    size_t cap = 0;
    char *b = tile_grow(NULL, &cap, 0, 100, 1, 64, 150);
    assert_non_null(b);
    assert_int_equal(cap, 128);
    char *nb = tile_grow(b, &cap, 100, 50, 1, 64, 150); /* 256 would pass the limit: cut to it */
    assert_non_null(nb);
    assert_int_equal(cap, 150);
    b = nb;
    assert_null(tile_grow(b, &cap, 150, 1, 1, 64, 150)); /* above the limit: refused, kept */
    assert_int_equal(cap, 150);
    b[149] = 'x'; /* still ours */
    free(b);
}

static void test_overflow_is_refused(void **state)
{
    (void)state;
    size_t cap = 8;
    char *b = malloc(8);
    assert_null(tile_grow(b, &cap, 8, SIZE_MAX - 4, 1, 8, SIZE_MAX)); /* len + need wraps */
    assert_null(tile_grow(b, &cap, 8, SIZE_MAX / 4, 16, 8, SIZE_MAX)); /* elements x unit wraps */
    assert_int_equal(cap, 8);
    free(b);
}

static void test_units(void **state)
{
    (void)state;
    size_t cap = 0;
    uint64_t *v = tile_grow(NULL, &cap, 0, 5, sizeof(uint64_t), 4, SIZE_MAX);
    assert_non_null(v);
    assert_int_equal(cap, 8);
    for (int i = 0; i < 8; i++)
        v[i] = (uint64_t)i;
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doubles_from_first_and_keeps_the_bytes),
        cmocka_unit_test(test_the_limit),
        cmocka_unit_test(test_overflow_is_refused),
        cmocka_unit_test(test_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
