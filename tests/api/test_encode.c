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
#include "tensor.h"

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

/* The input index output element k copies: k's coordinates over the
 * output shape, each modulo the input's, row-major over the input. */
static uint64_t source_of(const struct tile_plan *p, uint64_t k)
{
    uint64_t src = 0, stride = 1;
    for (int d = p->out_rank - 1; d >= 0; d--) {
        uint64_t o = k % (uint64_t)p->out_shape[d];
        k /= (uint64_t)p->out_shape[d];
        src += (o % (uint64_t)p->in_shape[d]) * stride;
        stride *= (uint64_t)p->in_shape[d];
    }
    return src;
}

/* An int32 input of `shape` whose elements are their own indices. */
static void index_request(struct tile_request *req, int rank, const int64_t *shape)
{
    struct tile_error e = {0};
    tile_request_init(req);
    assert_int_equal(tile_tensor_init(&req->input, TILE_INT32, rank, shape, 0, &e), 0);
    for (uint64_t i = 0; i < req->input.nelem; i++)
        ((int32_t *)req->input.data)[i] = (int32_t)i;
}

/* A JSON body of an int32 tensor whose elements are their own indices,
 * tiled over ranks 0 to 4 (numpy's rules, so repeats longer than the
 * shape promote it): its data are the input index of every output
 * element, against source_of, read whole (one batch of indices for a
 * small output, batches for a large one) and in steps of 5 bytes that end
 * inside numbers. */
static void index_order(void **state)
{
    (void)state;
    static const struct {
        int rank, nrep;
        int64_t shape[4], reps[4];
    } cases[] = {
        {0, 1, {0}, {3}},
        {1, 1, {1}, {1}},
        {1, 1, {3}, {4}},
        {2, 2, {2, 2}, {2, 2}},
        {2, 2, {3, 1}, {1, 5}},
        {2, 3, {2, 3}, {2, 1, 2}},
        {3, 3, {2, 3, 4}, {3, 2, 1}},
        {4, 4, {2, 1, 3, 2}, {1, 3, 2, 2}},
        {2, 2, {7, 13}, {9, 7}},   /* 6,377 elements: more than one batch */
        {1, 1, {4096}, {1}},       /* exactly one batch */
        {1, 1, {4097}, {1}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct tile_request req, req2;
        struct tile_error e = {0};
        index_request(&req, cases[c].rank, cases[c].shape);
        index_request(&req2, cases[c].rank, cases[c].shape);
        struct tile_spec spec = {.semantics = TILE_SEM_NUMPY, .repeats = cases[c].reps, .nrepeats = cases[c].nrep};
        struct tile_plan plan;
        assert_int_equal(tile_plan_init(&plan, TILE_INT32, cases[c].rank, cases[c].shape, &spec, &e), 0);
        struct tile_encoder *enc = tile_encoder_new(TILE_FMT_JSON, &plan, &req, NULL, 0, &e);
        assert_non_null(enc);
        uint64_t size = tile_encoder_size(enc), head, data;
        tile_encoder_sections(enc, &head, &data);
        char *want = malloc(plan.out_elems * 12 + 1), *o = want;
        for (uint64_t k = 0; k < plan.out_elems; k++)
            o += sprintf(o, "%s%llu", k ? "," : "", (unsigned long long)source_of(&plan, k));
        assert_int_equal(data, (uint64_t)(o - want));
        char *whole = malloc(size + 1), *steps = malloc(size + 1);
        tile_encoder_fill(enc, whole, NULL);
        assert_memory_equal(whole + head, want, data);
        struct tile_encoder *again = tile_encoder_new(TILE_FMT_JSON, &plan, &req2, NULL, 0, &e);
        assert_non_null(again);
        for (uint64_t got = 0; got < size;)
            got += tile_encoder_read(again, steps + got, 5);
        assert_memory_equal(steps + head, want, data);
        tile_encoder_free(again);
        tile_encoder_free(enc);
        tile_request_free(&req);
        tile_request_free(&req2);
        free(want);
        free(whole);
        free(steps);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(string_pieces),
        cmocka_unit_test(index_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
