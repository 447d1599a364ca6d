/* test_encode.c - the response encoder's pieces (api/encode.c): a tensor
 * of up to TILE_ENCODE_SMALL elements is encoded in the encoder's own
 * buffers, a bigger one in the heap's, and pieces that outgrow the
 * encoder's buffer move to the heap part-way. Each case's body, read in
 * small steps and filled whole, is checked against the text built here
 * element by element: JSON strings and the 4-byte-length string wire form
 * of /v1 raw bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "encode.h"
#include "plan.h"
#include "request.h"

/* Element i of a case: `len` bytes of a letter that changes with i. */
static void element(char *buf, uint64_t i, size_t len)
{
    memset(buf, 'a' + (int)(i % 26), len);
}

static char *expected_data(enum tile_format fmt, uint64_t n, uint64_t reps, size_t len, size_t *out_len)
{
    char *t = malloc((n * reps) * (len + 8) + 1), *o = t;
    for (uint64_t r = 0; r < reps; r++) {
        for (uint64_t i = 0; i < n; i++) {
            if (fmt == TILE_FMT_JSON) {
                if (r || i)
                    *o++ = ',';
                *o++ = '"';
                element(o, i, len);
                o += len;
                *o++ = '"';
            } else {
                uint32_t l32 = (uint32_t)len;
                memcpy(o, &l32, 4);
                element(o + 4, i, len);
                o += 4 + len;
            }
        }
    }
    *out_len = (size_t)(o - t);
    return t;
}

static void check_case(enum tile_format fmt, uint64_t n, size_t len)
{
    const uint64_t reps = 3;
    struct tile_str *s = calloc(n ? n : 1, sizeof(*s));
    char *bytes = malloc(n * len + 1);
    for (uint64_t i = 0; i < n; i++) {
        element(bytes + i * len, i, len);
        s[i] = (struct tile_str){.ptr = bytes + i * len, .len = len};
    }
    struct tile_request req;
    tile_request_init(&req);
    req.input.dtype = TILE_STRING;
    req.input.rank = 1;
    req.input.shape[0] = (int64_t)n;
    req.input.nelem = n;
    req.input.data = s; /* not owned: the test frees it */
    int64_t repeats[1] = {(int64_t)reps};
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = repeats, .nrepeats = 1};
    struct tile_plan plan;
    struct tile_error e = {0};
    assert_int_equal(tile_plan_init(&plan, TILE_STRING, 1, req.input.shape, &spec, &e), 0);
    struct tile_encoder *enc = tile_encoder_new(fmt, &plan, &req, NULL, 0, &e);
    if (!enc)
        fail_msg("%llu elements of %zu bytes: %s", (unsigned long long)n, len, e.text);
    uint64_t size = tile_encoder_size(enc), head, data;
    tile_encoder_sections(enc, &head, &data);
    size_t want_len;
    char *want = expected_data(fmt, n, reps, len, &want_len);
    assert_int_equal(data, want_len);
    char *body = malloc(size + 1), *whole = malloc(size + 1);
    for (uint64_t got = 0; got < size;) /* in steps that end inside pieces */
        got += tile_encoder_read(enc, body + got, 7);
    assert_int_equal(tile_encoder_read(enc, body, 7), 0);
    assert_memory_equal(body + head, want, want_len);
    tile_encoder_fill(enc, whole, NULL);
    assert_memory_equal(whole, body, size);
    tile_encoder_free(enc);
    tile_request_free(&req);
    free(body);
    free(whole);
    free(want);
    free(bytes);
    free(s);
}

/* 1 and 32 elements fit the encoder's buffers, 33 do not; 32 pieces of
 * 100 bytes outgrow its pieces' buffer while they are added. */
static void string_pieces(void **state)
{
    (void)state;
    static const uint64_t counts[] = {1, 2, 31, 32, 33, 100};
    static const size_t lens[] = {0, 3, 31, 100, 5000};
    for (int f = 0; f < 2; f++)
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
            for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
                check_case(f ? TILE_FMT_RAW : TILE_FMT_JSON, counts[c], lens[l]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(string_pieces),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
