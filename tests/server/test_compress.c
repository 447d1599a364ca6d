/* test_compress.c - request bodies inflated and replies deflated (server/service/compress.c):
 * round trips of both codings, and each way an inflation ends named for what happened. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "compress.h"

static char *pattern(uint64_t n)
{
    char *p = malloc(n);
    assert_non_null(p);
    for (uint64_t i = 0; i < n; i++)
        p[i] = (char)("tile"[i % 4] + (i / 4096) % 7);
    return p;
}

/* `data` compressed with `c` by tiled_compress: a malloc'd body of *len bytes. */
static char *squeeze(enum tiled_coding c, const char *data, uint64_t n, uint64_t *len)
{
    char *out = NULL;
    struct tile_error e = {0};
    assert_int_equal(tiled_compress(c, data, n, &out, len, &e), 1);
    assert_non_null(out);
    return out;
}

static void test_round_trips(void **state)
{
    (void)state;
    enum tiled_coding codings[] = {TILED_CODING_GZIP, TILED_CODING_DEFLATE};
    uint64_t sizes[] = {1, 4096, 1 << 20, (3 << 20) + 17};
    for (size_t i = 0; i < 2; i++) {
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            char *data = pattern(sizes[k]);
            uint64_t len;
            char *body = squeeze(codings[i], data, sizes[k], &len);
            struct tile_error e = {0};
            assert_int_equal(tiled_body_decompress(codings[i], &body, &len, sizes[k], &e), 0);
            assert_int_equal(len, sizes[k]); /* exactly at --max-body is within it */
            assert_memory_equal(body, data, sizes[k]);
            free(body);
            free(data);
        }
    }
}

static void test_past_max_body_is_named(void **state)
{
    (void)state;
    uint64_t n = 1 << 20, len;
    char *data = pattern(n);
    char *body = squeeze(TILED_CODING_GZIP, data, n, &len);
    struct tile_error e = {0};
    assert_int_equal(tiled_body_decompress(TILED_CODING_GZIP, &body, &len, n - 1, &e), -1);
    assert_int_equal(e.code, TILE_ETOOBIG);
    assert_non_null(strstr(e.text, "exceeds the max-body limit of 1048575 bytes"));
    free(body); /* left to its owner on failure */
    free(data);
}

static void test_truncated_and_corrupt_are_bad_data(void **state)
{
    (void)state;
    uint64_t n = 100000, len;
    char *data = pattern(n);
    char *body = squeeze(TILED_CODING_GZIP, data, n, &len);
    struct tile_error e = {0};
    uint64_t cut = len / 2;
    assert_int_equal(tiled_body_decompress(TILED_CODING_GZIP, &body, &cut, n, &e), -1);
    assert_int_equal(e.code, TILE_EINVAL);
    assert_string_equal(e.text, "the request body is not valid gzip data");

    memset(body + 10, 0xff, len - 20); /* the header stays, the data does not */
    struct tile_error e2 = {0};
    assert_int_equal(tiled_body_decompress(TILED_CODING_GZIP, &body, &len, n, &e2), -1);
    assert_int_equal(e2.code, TILE_EINVAL);

    struct tile_error e3 = {0};
    uint64_t deflate_len = len;
    assert_int_equal(tiled_body_decompress(TILED_CODING_DEFLATE, &body, &deflate_len, n, &e3), -1);
    assert_string_equal(e3.text, "the request body is not valid deflate (zlib) data");
    free(body);
    free(data);
}

static void test_identity_is_left_alone(void **state)
{
    (void)state;
    char *body = strdup("as it is");
    char *before = body;
    uint64_t len = 8;
    struct tile_error e = {0};
    assert_int_equal(tiled_body_decompress(TILED_CODING_IDENTITY, &body, &len, 1, &e), 0);
    assert_ptr_equal(body, before);
    assert_int_equal(len, 8);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_past_max_body_is_named),
        cmocka_unit_test(test_truncated_and_corrupt_are_bad_data),
        cmocka_unit_test(test_identity_is_left_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
