/* test_grpc_infer.c - the Protocol Buffers wire reader and writer
 * (api/pbwire.c) against the encoding guide's examples, and ModelInfer
 * request decoding and reply heads (api/grpc_infer.c): raw and typed
 * contents for every datatype, packed and unpacked, and Triton's rules
 * and messages for mixed or missing data, and the bytes tritonclient and
 * the protobuf library actually write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "grpc_infer.h"
#include "pbwire.h"

static void assert_error_has(const struct tile_error *e, enum tile_errcode code, const char *substr)
{
    if (!strstr(e->text, substr))
        fail_msg("error \"%s\" does not contain \"%s\"", e->text, substr);
    assert_int_equal(e->code, code);
}

/* ---- a message builder for the tests ------------------------------------ */

struct msg {
    uint8_t buf[8192];
    size_t len;
};

static void put_varint_field(struct msg *m, uint32_t number, uint64_t v)
{
    uint8_t *p = tile_pb_put_tag(m->buf + m->len, number, TILE_PB_VARINT);
    m->len = (size_t)(tile_pb_put_varint(p, v) - m->buf);
}

static void put_raw(struct msg *m, uint32_t number, const void *data, size_t len)
{
    m->len = (size_t)(tile_pb_put_bytes(m->buf + m->len, number, data, len) - m->buf);
}

static void put_str(struct msg *m, uint32_t number, const char *s)
{
    put_raw(m, number, s, strlen(s));
}

static void put_sub(struct msg *m, uint32_t number, const struct msg *sub)
{
    put_raw(m, number, sub->buf, sub->len);
}

static void put_subs(struct msg *m, uint32_t number, const struct msg *sub, int times)
{
    for (int i = 0; i < times; i++)
        put_sub(m, number, sub);
}

static void put_packed_varints(struct msg *m, uint32_t number, const int64_t *v, int n)
{
    struct msg packed = {.len = 0};
    for (int i = 0; i < n; i++)
        packed.len = (size_t)(tile_pb_put_varint(packed.buf + packed.len, (uint64_t)v[i]) - packed.buf);
    put_sub(m, number, &packed);
}

/* InferInputTensor with name, datatype, shape and optional contents. */
static void put_input(struct msg *req, const char *name, const char *datatype, const int64_t *shape, int rank,
                      const struct msg *contents)
{
    struct msg in = {.len = 0};
    put_str(&in, 1, name);
    put_str(&in, 2, datatype);
    if (rank)
        put_packed_varints(&in, 3, shape, rank);
    if (contents)
        put_sub(&in, 5, contents);
    put_sub(req, 5, &in);
}

static const struct tile_limits limits = {.max_rank = 8};

static int decode(const struct msg *m, struct tile_grpc_infer_request *r, struct tile_error *e)
{
    return tile_grpc_infer_decode(m->buf, m->len, &limits, r, e);
}

static void decode_bad(const struct msg *m, const char *substr)
{
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    assert_int_equal(decode(m, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, substr);
    tile_grpc_infer_request_free(&r);
}

/* ---- wire format --------------------------------------------------------- */

static void test_varints(void **state)
{
    (void)state;
    static const struct {
        uint64_t v;
        uint8_t bytes[10];
        size_t n;
    } cases[] = {
        {1, {0x01}, 1},
        {150, {0x96, 0x01}, 2},
        {300, {0xac, 0x02}, 2},
        {UINT64_MAX, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t buf[16];
        assert_int_equal(tile_pb_varint_size(cases[i].v), cases[i].n);
        assert_int_equal(tile_pb_put_varint(buf, cases[i].v) - buf, cases[i].n);
        assert_memory_equal(buf, cases[i].bytes, cases[i].n);
        /* read back as field 1 */
        uint8_t field[16] = {0x08};
        memcpy(field + 1, buf, cases[i].n);
        struct tile_pb_reader rd;
        struct tile_pb_field f;
        struct tile_error e = {0};
        tile_pb_reader_init(&rd, field, cases[i].n + 1);
        assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
        assert_int_equal(f.number, 1);
        assert_int_equal(f.wire, TILE_PB_VARINT);
        assert_true(f.value == cases[i].v);
        assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 0);
    }
}

static void next_bad(const uint8_t *bytes, size_t n, const char *substr)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    struct tile_error e = {0};
    tile_pb_reader_init(&rd, bytes, n);
    int rc;
    while ((rc = tile_pb_next(&rd, &f, "the message", &e)) > 0)
        ;
    assert_int_equal(rc, -1);
    assert_error_has(&e, TILE_EINVAL, substr);
}

static void test_fields(void **state)
{
    (void)state;
    /* The encoding guide's examples: field 2 "testing", field 1 = 150. */
    static const uint8_t msg[] = {0x12, 0x07, 't', 'e', 's', 't', 'i', 'n', 'g', 0x08, 0x96, 0x01,
                                  0x1d, 0x01, 0x02, 0x03, 0x04, 0x21, 1, 2, 3, 4, 5, 6, 7, 8};
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    struct tile_error e = {0};
    tile_pb_reader_init(&rd, msg, sizeof(msg));
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_int_equal(f.number, 2);
    assert_int_equal(f.wire, TILE_PB_LEN);
    assert_int_equal(f.len, 7);
    assert_memory_equal(f.data, "testing", 7);
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_true(f.number == 1 && f.value == 150);
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_true(f.number == 3 && f.wire == TILE_PB_I32 && f.value == 0x04030201u);
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_true(f.number == 4 && f.wire == TILE_PB_I64 && f.value == UINT64_C(0x0807060504030201));
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 0);

    next_bad((const uint8_t[]){0x12, 0x08, 't'}, 3, "runs past its end");
    next_bad((const uint8_t[]){0x08, 0x96}, 2, "field 1 is truncated");
    next_bad((const uint8_t[]){0x1d, 1, 2, 3}, 4, "field 3 is truncated");
    next_bad((const uint8_t[]){0x0b}, 1, "group 1 has no end");
    next_bad((const uint8_t[]){0x0b, 0x14}, 2, "group 1 ended as group 2");
    next_bad((const uint8_t[]){0x0c}, 1, "end of group 1 outside one");
    next_bad((const uint8_t[]){0x0e, 0x01}, 2, "wire type 6");
    next_bad((const uint8_t[]){0x00, 0x01}, 2, "field number 0");
    /* an 11-byte varint */
    next_bad((const uint8_t[]){0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 12, "truncated");
    next_bad((const uint8_t[]){0x88}, 1, "truncated or overlong field key");
    /* a key of six bytes (upb and C++ read at most five) */
    next_bad((const uint8_t[]){0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01}, 7, "overlong field key");

    /* Groups are unknown fields: skipped whole, nested ones and all the
     * wire types inside them; the next field is read. */
    static const uint8_t grouped[] = {0x0b, 0x10, 0x01, 0x1b, 0x22, 0x01, 'x', 0x2d, 1, 2, 3, 4, 0x1c, 0x31, 1, 2, 3,
                                      4, 5, 6, 7, 8, 0x0c, 0x08, 0x2a};
    tile_pb_reader_init(&rd, grouped, sizeof(grouped));
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_true(f.number == 1 && f.wire == TILE_PB_VARINT && f.value == 42);
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 0);

    /* Over-long varints of up to ten bytes read as protobuf reads them:
     * 1 padded to ten bytes; a tenth byte above 1 loses its high bits. */
    static const uint8_t padded[] = {0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
                                     0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    tile_pb_reader_init(&rd, padded, sizeof(padded));
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_true(f.value == 1);
    assert_int_equal(tile_pb_next(&rd, &f, "m", &e), 1);
    assert_true(f.value == UINT64_MAX);
}

static int collect(void *p, uint64_t v, struct tile_error *e)
{
    (void)e;
    uint64_t *out = p;
    out[++out[0]] = v;
    return 0;
}

static void test_packed_and_unpacked(void **state)
{
    (void)state;
    /* The guide's packed example: field 4 = [3, 270, 86942]; then unpacked. */
    static const uint8_t packed[] = {0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05};
    static const uint8_t unpacked[] = {0x20, 0x03, 0x20, 0x8e, 0x02, 0x20, 0x9e, 0xa7, 0x05};
    const uint8_t *forms[] = {packed, unpacked};
    size_t lens[] = {sizeof(packed), sizeof(unpacked)};
    for (int k = 0; k < 2; k++) {
        uint64_t got[8] = {0};
        struct tile_pb_reader rd;
        struct tile_pb_field f;
        struct tile_error e = {0};
        tile_pb_reader_init(&rd, forms[k], lens[k]);
        while (tile_pb_next(&rd, &f, "m", &e) > 0)
            assert_int_equal(tile_pb_scalars(&f, TILE_PB_VARINT, collect, got, "m", &e), 0);
        assert_int_equal(got[0], 3);
        assert_true(got[1] == 3 && got[2] == 270 && got[3] == 86942);
    }
    struct tile_pb_field f = {.number = 4, .wire = TILE_PB_LEN, .data = (const uint8_t[]){1, 2, 3}, .len = 3};
    uint64_t got[8] = {0};
    struct tile_error e = {0};
    assert_int_equal(tile_pb_scalars(&f, TILE_PB_I32, collect, got, "m", &e), -1);
    assert_error_has(&e, TILE_EINVAL, "packed field 4 is truncated");
    f.wire = TILE_PB_I64; /* another wire type: an unknown field, no values */
    tile_error_clear(&e);
    got[0] = 0;
    assert_int_equal(tile_pb_scalars(&f, TILE_PB_VARINT, collect, got, "m", &e), 0);
    assert_int_equal(got[0], 0);
    /* runs in any mix: packed [1, 2], unpacked 3, packed [4] */
    static const uint8_t mixed[] = {0x22, 0x02, 0x01, 0x02, 0x20, 0x03, 0x22, 0x01, 0x04};
    struct tile_pb_reader rd;
    tile_pb_reader_init(&rd, mixed, sizeof(mixed));
    while (tile_pb_next(&rd, &f, "m", &e) > 0)
        assert_int_equal(tile_pb_scalars(&f, TILE_PB_VARINT, collect, got, "m", &e), 0);
    assert_true(got[0] == 4 && got[1] == 1 && got[2] == 2 && got[3] == 3 && got[4] == 4);
}

/* ---- ModelInferRequest --------------------------------------------------- */

static void test_raw_request(void **state)
{
    (void)state;
    struct msg req = {.len = 0};
    float data[4] = {1, 2, 3, 4};
    int64_t repeats[2] = {2, 3};
    int64_t shape[2] = {2, 2};
    put_str(&req, 1, "tile");
    put_str(&req, 2, "13");
    put_str(&req, 3, "req-7");
    put_varint_field(&req, 99, 5); /* a field of a later protocol version */
    put_input(&req, "input", "FP32", shape, 2, NULL);
    put_input(&req, "repeats", "INT64", (int64_t[]){2}, 1, NULL);
    struct msg out = {.len = 0};
    put_str(&out, 1, "output");
    put_sub(&req, 6, &out);
    put_raw(&req, 7, data, sizeof(data));
    put_raw(&req, 7, repeats, sizeof(repeats));

    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    if (decode(&req, &r, &e) < 0)
        fail_msg("%s", e.text);
    assert_int_equal(r.model_name.len, 4);
    assert_memory_equal(r.model_name.ptr, "tile", 4);
    assert_memory_equal(r.model_version.ptr, "13", 2);
    assert_memory_equal(r.id.ptr, "req-7", 5);
    assert_false(r.has_semantics);
    assert_int_equal(r.ninputs, 2);
    assert_int_equal(r.noutputs, 1);
    assert_memory_equal(r.outputs[0].ptr, "output", 6);
    assert_false(r.inputs[0].typed);
    assert_int_equal(r.inputs[0].t.dtype, TILE_FLOAT32);
    assert_int_equal(r.inputs[0].t.rank, 2);
    assert_int_equal(r.inputs[0].t.nelem, 4);
    assert_memory_equal(r.inputs[0].t.data, data, sizeof(data));
    assert_memory_equal(r.inputs[1].name.ptr, "repeats", 7);
    assert_int_equal(r.inputs[1].t.dtype, TILE_INT64);
    assert_memory_equal(r.inputs[1].t.data, repeats, sizeof(repeats));
    tile_grpc_infer_request_free(&r);
}

/* One typed case: a datatype, its contents field, the values as varints or
 * fixed bits, and the element bytes they must become. */
struct typed_case {
    const char *datatype;
    uint32_t field;
    enum tile_pb_wire wire;
    int n;
    uint64_t values[3];
    uint8_t want[24];
    size_t want_len;
};

static void put_contents(struct msg *c, const struct typed_case *tc, bool packed)
{
    if (packed && tc->wire != TILE_PB_LEN) {
        struct msg p = {.len = 0};
        for (int i = 0; i < tc->n; i++) {
            uint8_t *at = p.buf + p.len;
            if (tc->wire == TILE_PB_VARINT)
                p.len = (size_t)(tile_pb_put_varint(at, tc->values[i]) - p.buf);
            else
                for (size_t b = 0; b < (tc->wire == TILE_PB_I32 ? 4u : 8u); b++)
                    p.buf[p.len++] = (uint8_t)(tc->values[i] >> (8 * b));
        }
        put_sub(c, tc->field, &p);
        return;
    }
    for (int i = 0; i < tc->n; i++) {
        uint8_t *at = tile_pb_put_tag(c->buf + c->len, tc->field, tc->wire);
        if (tc->wire == TILE_PB_VARINT) {
            c->len = (size_t)(tile_pb_put_varint(at, tc->values[i]) - c->buf);
        } else if (tc->wire == TILE_PB_LEN) {
            const char *s = (const char *)(uintptr_t)tc->values[i];
            c->len = (size_t)(tile_pb_put_bytes(c->buf + c->len, tc->field, s, strlen(s)) - c->buf);
        } else {
            c->len = (size_t)(at - c->buf);
            for (size_t b = 0; b < (tc->wire == TILE_PB_I32 ? 4u : 8u); b++)
                c->buf[c->len++] = (uint8_t)(tc->values[i] >> (8 * b));
        }
    }
}

static void check_typed(const struct typed_case *tc, bool packed)
{
    struct msg req = {.len = 0}, contents = {.len = 0};
    int64_t shape[1] = {tc->n};
    put_str(&req, 1, "tile");
    put_contents(&contents, tc, packed);
    put_input(&req, "input", tc->datatype, shape, 1, &contents);
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    if (decode(&req, &r, &e) < 0)
        fail_msg("%s (%s): %s", tc->datatype, packed ? "packed" : "unpacked", e.text);
    assert_int_equal(r.ninputs, 1);
    assert_true(r.inputs[0].typed);
    assert_int_equal(r.inputs[0].t.nelem, (uint64_t)tc->n);
    assert_string_equal(tile_dtype_traits(r.inputs[0].t.dtype)->kserve, tc->datatype);
    if (tc->wire == TILE_PB_LEN) {
        const struct tile_str *s = r.inputs[0].t.data;
        for (int i = 0; i < tc->n; i++) {
            const char *want = (const char *)(uintptr_t)tc->values[i];
            assert_int_equal(s[i].len, strlen(want));
            assert_memory_equal(s[i].ptr, want, s[i].len);
        }
    } else {
        assert_memory_equal(r.inputs[0].t.data, tc->want, tc->want_len);
    }
    tile_grpc_infer_request_free(&r);
}

static void test_typed_every_datatype(void **state)
{
    (void)state;
    static const char *strings[] = {"", "ab", "\0x\xff"};
    const struct typed_case cases[] = {
        {"BOOL", 1, TILE_PB_VARINT, 3, {1, 0, 1}, {1, 0, 1}, 3},
        {"INT8", 2, TILE_PB_VARINT, 2, {(uint64_t)-1, 0x17f}, {0xff, 0x7f}, 2}, /* narrowed to the low byte */
        {"INT16", 2, TILE_PB_VARINT, 2, {(uint64_t)-2, 0x1234}, {0xfe, 0xff, 0x34, 0x12}, 4},
        {"INT32", 2, TILE_PB_VARINT, 1, {(uint64_t)-3}, {0xfd, 0xff, 0xff, 0xff}, 4},
        {"INT64", 3, TILE_PB_VARINT, 1, {(uint64_t)-4}, {0xfc, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 8},
        {"UINT8", 4, TILE_PB_VARINT, 2, {200, 7}, {200, 7}, 2},
        {"UINT16", 4, TILE_PB_VARINT, 1, {0xbeef}, {0xef, 0xbe}, 2},
        {"UINT32", 4, TILE_PB_VARINT, 1, {0xdeadbeef}, {0xef, 0xbe, 0xad, 0xde}, 4},
        {"UINT64", 5, TILE_PB_VARINT, 1, {UINT64_MAX}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 8},
        {"FP32", 6, TILE_PB_I32, 2, {0x3f800000, 0xc0000000}, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, 8},
        {"FP64", 7, TILE_PB_I64, 1, {UINT64_C(0x3ff0000000000000)}, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 8},
        {"BYTES", 8, TILE_PB_LEN, 3, {(uintptr_t)strings[0], (uintptr_t)strings[1], (uintptr_t)"x"}, {0}, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        check_typed(&cases[i], false);
        check_typed(&cases[i], true);
    }
}

/* A refusal names the same fault whatever order the fields came in:
 * protobuf writers order fields by number, other encoders need not, and
 * both encodings mean one message. */
static void test_refusal_independent_of_field_order(void **state)
{
    (void)state;
    int64_t shape[1] = {1};
    struct msg out = {.len = 0};
    put_str(&out, 1, "output");
    struct msg raw = {.len = 4, .buf = {1, 2, 3, 4}};

    /* Five outputs and five raw_input_contents, interleaved: by number,
     * outputs (6) come first and are refused first. */
    struct msg req = {.len = 0}, canon = {.len = 0};
    put_str(&req, 1, "tile");
    put_input(&req, "input", "UINT8", shape, 1, NULL);
    put_subs(&req, 7, &raw, 5);
    put_subs(&req, 6, &out, 5);
    put_str(&canon, 1, "tile");
    put_input(&canon, "input", "UINT8", shape, 1, NULL);
    put_subs(&canon, 6, &out, 5);
    put_subs(&canon, 7, &raw, 5);
    decode_bad(&req, "the request asks for more than 4 outputs");
    decode_bad(&canon, "the request asks for more than 4 outputs");

    /* Five inputs after five raw_input_contents: inputs (5) first. */
    req.len = 0;
    put_subs(&req, 7, &raw, 5);
    for (int i = 0; i < 5; i++)
        put_input(&req, "input", "UINT8", shape, 1, NULL);
    decode_bad(&req, "the request has more than 4 inputs");

    /* 65 dimensions before the input's name: the refusal names the input. */
    struct msg deep_first = {.len = 0};
    int64_t dims[65];
    for (int i = 0; i < 65; i++)
        dims[i] = 1;
    put_packed_varints(&deep_first, 3, dims, 65);
    put_str(&deep_first, 2, "UINT8");
    put_str(&deep_first, 1, "input");
    req.len = 0;
    put_sub(&req, 5, &deep_first);
    decode_bad(&req, "input 'input' has more than 64 dimensions");

    /* Contents holding three datatypes' fields for an FP32 input: the
     * lowest-numbered stranger is named (bool_contents, 1), wherever it is. */
    struct msg mixed = {.len = 0};
    put_raw(&mixed, 6, (const uint8_t[]){0, 0, 0xc0, 0x3f}, 4);
    put_packed_varints(&mixed, 3, (const int64_t[]){2, 3}, 2);
    put_packed_varints(&mixed, 1, (const int64_t[]){1}, 1);
    req.len = 0;
    put_str(&req, 1, "tile");
    put_input(&req, "input", "FP32", shape, 1, &mixed);
    decode_bad(&req, "of type 'BOOL', expected datatype 'FP32'");

    /* The same spread over two `contents` fields (one message merged). */
    struct msg first = {.len = 0}, second = {.len = 0}, in = {.len = 0};
    put_packed_varints(&first, 3, (const int64_t[]){2}, 1);
    put_packed_varints(&second, 1, (const int64_t[]){1}, 1);
    put_str(&in, 1, "input");
    put_str(&in, 2, "FP32");
    put_packed_varints(&in, 3, shape, 1);
    put_sub(&in, 5, &first);
    put_sub(&in, 5, &second);
    req.len = 0;
    put_str(&req, 1, "tile");
    put_sub(&req, 5, &in);
    decode_bad(&req, "of type 'BOOL', expected datatype 'FP32'");
}

static void test_typed_rules(void **state)
{
    (void)state;
    int64_t shape[1] = {2};
    struct msg contents = {.len = 0};
    put_varint_field(&contents, 3, 1); /* int64_contents */
    struct msg req = {.len = 0};
    put_str(&req, 1, "tile");
    put_input(&req, "input", "FP32", shape, 1, &contents);
    decode_bad(&req, "unexpected explicit tensor data for input tensor 'input' for model 'tile' of type 'INT64', "
                     "expected datatype 'FP32'");

    /* FP16 has no typed field: any one is refused with Triton's message. */
    struct msg fp32 = {.len = 0};
    put_raw(&fp32, 6, (const uint8_t[]){0, 0, 0x80, 0x3f}, 4);
    req.len = 0;
    put_str(&req, 1, "tile");
    put_input(&req, "input", "FP16", shape, 1, &fp32);
    decode_bad(&req, "of type 'FP32', expected datatype 'FP16'");

    /* Empty contents for a raw-only type with elements. */
    struct msg empty = {.len = 0};
    req.len = 0;
    put_input(&req, "input", "BF16", shape, 1, &empty);
    decode_bad(&req, "has 0 values in contents but its shape needs 2 (its datatype travels in raw_input_contents only)");

    /* Too few values. */
    struct msg one = {.len = 0};
    put_varint_field(&one, 3, 1);
    req.len = 0;
    put_input(&req, "repeats", "INT64", shape, 1, &one);
    decode_bad(&req, "input 'repeats' has 1 values in contents but its shape needs 2");
}

static void test_styles(void **state)
{
    (void)state;
    int64_t shape[1] = {1};
    struct msg contents = {.len = 0};
    put_varint_field(&contents, 3, 5);
    int64_t one = 1;

    /* typed + raw in one request: refused for the typed input */
    struct msg req = {.len = 0};
    put_str(&req, 1, "tile");
    put_input(&req, "input", "INT64", shape, 1, NULL);
    put_input(&req, "repeats", "INT64", shape, 1, &contents);
    put_raw(&req, 7, &one, 8);
    decode_bad(&req, "contents field must not be specified when using raw_input_contents for 'repeats' for model "
                     "'tile'");

    /* no data at all */
    req.len = 0;
    put_str(&req, 1, "tile");
    put_input(&req, "input", "INT64", shape, 1, NULL);
    decode_bad(&req, "unable to find data for input tensor 'input' for model 'tile' in request.");

    /* more raw entries than raw inputs */
    req.len = 0;
    put_input(&req, "input", "INT64", shape, 1, NULL);
    put_raw(&req, 7, &one, 8);
    put_raw(&req, 7, &one, 8);
    decode_bad(&req, "the request has 2 raw_input_contents but 1 inputs use them");

    /* raw size that does not match the shape: named input */
    req.len = 0;
    put_input(&req, "input", "INT64", shape, 1, NULL);
    put_raw(&req, 7, &one, 4);
    decode_bad(&req, "input 'input': body has 4 bytes but dtype int64 and shape [1] need 8");

    /* all typed: fine, raw-only inputs are absent */
    req.len = 0;
    put_input(&req, "input", "INT64", shape, 1, &contents);
    put_input(&req, "repeats", "INT64", shape, 1, &contents);
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    assert_int_equal(decode(&req, &r, &e), 0);
    assert_int_equal(r.ninputs, 2);
    assert_int_equal(((int64_t *)r.inputs[1].t.data)[0], 5);
    tile_grpc_infer_request_free(&r);
}

static void put_parameter(struct msg *req, const char *key, uint32_t choice, const char *s, uint64_t v)
{
    struct msg value = {.len = 0}, entry = {.len = 0};
    if (s)
        put_str(&value, choice, s);
    else
        put_varint_field(&value, choice, v);
    put_str(&entry, 1, key);
    put_sub(&entry, 2, &value);
    put_sub(req, 4, &entry);
}

static void test_parameters_and_limits(void **state)
{
    (void)state;
    int64_t shape[1] = {1};
    struct msg contents = {.len = 0};
    put_varint_field(&contents, 3, 5);
    struct msg req = {.len = 0};
    put_parameter(&req, "priority", 5, NULL, 3); /* skipped, as over HTTP */
    put_parameter(&req, "semantics", 3, "numpy", 0);
    put_input(&req, "input", "INT64", shape, 1, &contents);
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    assert_int_equal(decode(&req, &r, &e), 0);
    assert_true(r.has_semantics);
    assert_int_equal(r.semantics.len, 5);
    assert_memory_equal(r.semantics.ptr, "numpy", 5);
    tile_grpc_infer_request_free(&r);

    req.len = 0;
    put_parameter(&req, "semantics", 2, NULL, 1);
    put_input(&req, "input", "INT64", shape, 1, &contents);
    decode_bad(&req, "parameter 'semantics' must be a string_param");

    req.len = 0;
    put_input(&req, "input", "FP8", shape, 1, &contents);
    decode_bad(&req, "unknown datatype 'FP8'");

    int64_t deep[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    req.len = 0;
    put_input(&req, "input", "INT64", deep, 9, &contents);
    decode_bad(&req, "input 'input' has rank 9, above the maximum rank of 8");

    int64_t neg[1] = {-1};
    req.len = 0;
    put_input(&req, "input", "INT64", neg, 1, &contents);
    decode_bad(&req, "shape[0] is -1; dimensions must be >= 0");

    req.len = 0;
    put_str(&req, 1, "tile");
    decode_bad(&req, "the request has no 'inputs'");

    req.len = 0;
    for (int i = 0; i < 5; i++)
        put_input(&req, "input", "INT64", shape, 1, &contents);
    decode_bad(&req, "more than 4 inputs");

    req.len = 0;
    put_varint_field(&req, 5, 1); /* inputs as a varint: an unknown field, so no inputs */
    decode_bad(&req, "the request has no 'inputs'");

    req.len = 0;
    put_input(&req, "input", "INT64", shape, 1, &contents);
    req.len -= 1; /* truncated */
    decode_bad(&req, "ModelInferRequest is not a valid protobuf message");
}

/* ---- bytes written by the real clients ------------------------------------ */

static size_t from_hex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1]; hex += 2) {
        unsigned v;
        sscanf(hex, "%2x", &v);
        out[n++] = (uint8_t)v;
    }
    return n;
}

/* tritonclient.grpc 2.73's _get_inference_request(): model "tile" version
 * "13", id "r1", parameter semantics=numpy, inputs FP32 [2,2] 1..4, INT64
 * [2] {2,3} and BYTES [2] {"ab", ""}, all raw, output "output". */
static const char tritonclient_request[] =
    "0a0474696c65120231331a02723122140a0973656d616e7469637312071a056e756d70792a110a05696e7075741204465033321a02"
    "02022a130a07726570656174731205494e5436341a01022a0d0a0173120542595445531a010232080a066f75747075743a100000803f"
    "0000004000004040000080403a10020000000000000003000000000000003a0a02000000616200000000";

/* The protobuf library's serialisation of typed contents: INT16 [3]
 * {-1, 2, 40000} in int_contents, UINT64 [1] {2^64-1}, BYTES [2] {"x",
 * "yz"} and an FP64 scalar -0.5. */
static const char protobuf_typed_request[] =
    "0a0474696c652a230a05696e7075741205494e5431361a01032a10120effffffffffffffffff0102c0b8022a220a07726570656174"
    "73120655494e5436341a01012a0c2a0affffffffffffffffff012a160a0162120542595445531a01022a074201784202797a2a150a"
    "01641204465036342a0a3a08000000000000e0bf";

static void test_real_client_bytes(void **state)
{
    (void)state;
    struct msg m;
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    m.len = from_hex(tritonclient_request, m.buf);
    if (decode(&m, &r, &e) < 0)
        fail_msg("%s", e.text);
    assert_true(r.has_semantics && r.semantics.len == 5 && !memcmp(r.semantics.ptr, "numpy", 5));
    assert_true(r.id.len == 2 && !memcmp(r.id.ptr, "r1", 2));
    assert_int_equal(r.ninputs, 3);
    assert_memory_equal(r.inputs[0].t.data, ((float[]){1, 2, 3, 4}), 16);
    assert_memory_equal(r.inputs[1].t.data, ((int64_t[]){2, 3}), 16);
    const struct tile_str *s = r.inputs[2].t.data;
    assert_true(s[0].len == 2 && !memcmp(s[0].ptr, "ab", 2) && s[1].len == 0);
    tile_grpc_infer_request_free(&r);

    m.len = from_hex(protobuf_typed_request, m.buf);
    if (decode(&m, &r, &e) < 0)
        fail_msg("%s", e.text);
    assert_int_equal(r.ninputs, 4);
    assert_memory_equal(r.inputs[0].t.data, ((int16_t[]){-1, 2, (int16_t)40000}), 6); /* narrowed */
    assert_true(((uint64_t *)r.inputs[1].t.data)[0] == UINT64_MAX);
    s = r.inputs[2].t.data;
    assert_true(s[0].len == 1 && s[1].len == 2 && !memcmp(s[1].ptr, "yz", 2));
    assert_int_equal(r.inputs[3].t.rank, 0);
    assert_true(((double *)r.inputs[3].t.data)[0] == -0.5);
    tile_grpc_infer_request_free(&r);
}

/* ---- ModelInferResponse head --------------------------------------------- */

static void test_reply_head(void **state)
{
    (void)state;
    int64_t shape[3] = {2, 0, 300};
    struct tile_grpc_infer_reply rep = {
        .model_name = {"tile", 4},
        .model_version = {"13", 2},
        .id = {"abc", 3},
        .output_name = {"output", 6},
        .dtype = TILE_BFLOAT16,
        .rank = 3,
        .shape = shape,
        .raw_len = 5,
    };
    size_t head = tile_grpc_infer_reply_head_size(&rep);
    uint8_t buf[256];
    memset(buf, 0xaa, sizeof(buf));
    tile_grpc_infer_reply_head(&rep, buf);
    assert_int_equal(buf[head], 0xaa); /* wrote exactly the size it announced */
    memcpy(buf + head, "\1\2\3\4\5", 5);

    struct tile_pb_reader rd, sub;
    struct tile_pb_field f, g;
    struct tile_error e = {0};
    int seen = 0;
    tile_pb_reader_init(&rd, buf, head + 5);
    while (tile_pb_next(&rd, &f, "reply", &e) > 0) {
        assert_int_equal(f.wire, TILE_PB_LEN);
        seen |= 1 << f.number;
        if (f.number == 1)
            assert_memory_equal(f.data, "tile", 4);
        if (f.number == 2)
            assert_memory_equal(f.data, "13", 2);
        if (f.number == 3)
            assert_memory_equal(f.data, "abc", 3);
        if (f.number == 6) {
            assert_int_equal(f.len, 5);
            assert_memory_equal(f.data, "\1\2\3\4\5", 5);
        }
        if (f.number != 5)
            continue;
        uint64_t dims[8] = {0};
        tile_pb_reader_init(&sub, f.data, f.len);
        while (tile_pb_next(&sub, &g, "output", &e) > 0) {
            if (g.number == 1)
                assert_memory_equal(g.data, "output", 6);
            if (g.number == 2)
                assert_memory_equal(g.data, "BF16", 4);
            if (g.number == 3)
                assert_int_equal(tile_pb_scalars(&g, TILE_PB_VARINT, collect, dims, "shape", &e), 0);
        }
        assert_true(dims[0] == 3 && dims[1] == 2 && dims[2] == 0 && dims[3] == 300);
    }
    assert_int_equal(seen, (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 6));

    /* no id, a scalar */
    rep.id.len = 0;
    rep.rank = 0;
    head = tile_grpc_infer_reply_head_size(&rep);
    memset(buf, 0xaa, sizeof(buf));
    tile_grpc_infer_reply_head(&rep, buf);
    assert_int_equal(buf[head], 0xaa);
    assert_int_equal(buf[head - 2], 0x32); /* raw_output_contents tag, then length 5 */
    assert_int_equal(buf[head - 1], 5);
}


/* ---- shared memory --------------------------------------------------------- */

/* A registry of one region "r" over `region`, for the decoder. */
static int64_t region[4] = {7, 8, 9, 10};

static int resolve(void *ctx, const char *tensor, const struct tile_v2_shm_ref *ref, const void **data,
                   struct tile_error *e)
{
    int *calls = ctx;
    (*calls)++;
    if (strcmp(ref->region, "r") != 0)
        return tile_error_set(e, TILE_EINVAL, "no region '%s' for %s", ref->region, tensor);
    if (ref->offset > sizeof(region) || ref->byte_size > sizeof(region) - ref->offset)
        return tile_error_set(e, TILE_EINVAL, "out of range");
    *data = (const char *)region + ref->offset;
    return 0;
}

static void append(struct msg *m, const struct msg *fields)
{
    memcpy(m->buf + m->len, fields->buf, fields->len);
    m->len += fields->len;
}

/* An input or output `parameters` entry. */
static void put_tensor_parameter(struct msg *m, uint32_t number, const char *key, const char *s, int64_t v,
                                 uint32_t choice)
{
    struct msg value = {.len = 0}, entry = {.len = 0};
    if (s)
        put_str(&value, 3, s);
    else
        put_varint_field(&value, choice, (uint64_t)v);
    put_str(&entry, 1, key);
    put_sub(&entry, 2, &value);
    put_sub(m, number, &entry);
}

/* InferInputTensor INT64 [n] whose parameters are `params`. */
static void put_shm_input(struct msg *req, const char *name, int64_t n, const struct msg *params)
{
    struct msg in = {.len = 0};
    put_str(&in, 1, name);
    put_str(&in, 2, "INT64");
    put_packed_varints(&in, 3, &n, 1);
    append(&in, params); /* its map entries, fields 4 */
    put_sub(req, 5, &in);
}

static void shm_decode_bad(const struct msg *m, const struct tile_v2_shm_source *src, const char *substr)
{
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    assert_int_equal(tile_grpc_infer_decode_shm(m->buf, m->len, &limits, src, &r, &e), -1);
    assert_error_has(&e, TILE_EINVAL, substr);
    tile_grpc_infer_request_free(&r);
}

static void test_shared_memory(void **state)
{
    (void)state;
    int calls = 0;
    struct tile_v2_shm_source src = {.resolve = resolve, .ctx = &calls, .borrow = true};
    struct msg params = {.len = 0}, req = {.len = 0};
    put_tensor_parameter(&params, 4, "shared_memory_region", "r", 0, 0);
    put_tensor_parameter(&params, 4, "shared_memory_byte_size", NULL, 16, 2);
    put_tensor_parameter(&params, 4, "shared_memory_offset", NULL, 8, 5); /* uint64_param is taken too */
    put_shm_input(&req, "input", 2, &params);
    int64_t two = 2;
    struct msg contents = {.len = 0};
    put_varint_field(&contents, 3, 3);
    int64_t one = 1;
    put_input(&req, "repeats", "INT64", &one, 1, &contents);
    struct msg out = {.len = 0}, out_params = {.len = 0};
    put_str(&out, 1, "output");
    put_tensor_parameter(&out_params, 2, "shared_memory_region", "o", 0, 0);
    put_tensor_parameter(&out_params, 2, "shared_memory_byte_size", NULL, 64, 2);
    append(&out, &out_params); /* map entries, fields 2 */
    put_sub(&req, 6, &out);
    struct tile_grpc_infer_request r;
    struct tile_error e = {0};
    if (tile_grpc_infer_decode_shm(req.buf, req.len, &limits, &src, &r, &e) != 0)
        fail_msg("%s", e.text);
    assert_int_equal(calls, 1);
    assert_int_equal(r.ninputs, 2);
    assert_true(r.inputs[0].in_shm);
    assert_int_equal(((int64_t *)r.inputs[0].t.data)[0], 8); /* offset 8: elements 1 and 2 of the region */
    assert_int_equal(((int64_t *)r.inputs[0].t.data)[1], 9);
    assert_ptr_equal(r.inputs[0].t.data, &region[1]); /* read in place: the output goes to shared memory too */
    assert_true(r.output_shm[0].used);
    assert_string_equal(r.output_shm[0].region, "o");
    assert_int_equal(r.output_shm[0].byte_size, 64);
    assert_int_equal(r.output_shm[0].offset, 0);
    tile_grpc_infer_request_free(&r);

    /* without an output in shared memory, the input is copied */
    req.len = 0;
    put_shm_input(&req, "input", 2, &params);
    assert_int_equal(tile_grpc_infer_decode_shm(req.buf, req.len, &limits, &src, &r, &e), 0);
    assert_ptr_not_equal(r.inputs[0].t.data, &region[1]);
    assert_int_equal(((int64_t *)r.inputs[0].t.data)[1], 9);
    tile_grpc_infer_request_free(&r);

    shm_decode_bad(&req, NULL, "input 'input' names shared memory region 'r', but shared memory is not enabled");
    req.len = 0;
    struct msg in = {.len = 0};
    put_str(&in, 1, "input");
    put_str(&in, 2, "INT64");
    put_packed_varints(&in, 3, &two, 1);
    append(&in, &params);
    put_sub(&in, 5, &contents);
    put_sub(&req, 5, &in);
    shm_decode_bad(&req, &src, "must set exactly one of 'contents', an entry of 'raw_input_contents' and "
                               "'shared_memory_region'");

    /* one input's parameters (up to two) and what the decoder says of them */
    static const struct {
        struct param {
            const char *key, *s;
            int64_t v;
        } p[2];
        const char *error;
    } bad_cases[] = {
        {{{"shared_memory_offset", NULL, 8}},
         "'shared_memory_offset' and 'shared_memory_byte_size' need 'shared_memory_region' (input 'input')"},
        {{{"shared_memory_region", "r", 0}},
         "input 'input' names shared memory region 'r' without 'shared_memory_byte_size'"},
        {{{"shared_memory_region", NULL, 1}}, "parameter 'shared_memory_region' must be a string_param"},
        {{{"shared_memory_region", "r", 0}, {"shared_memory_byte_size", NULL, -1}},
         "shared_memory_byte_size is -1; it must be >= 0"},
        {{{"shared_memory_region", "r", 0}, {"shared_memory_byte_size", "16", 0}},
         "parameter 'shared_memory_byte_size' must be an int64_param or uint64_param"},
        {{{"shared_memory_region", "", 0}}, "shared_memory_region must be a non-empty name"},
        {{{"shared_memory_region", "nowhere", 0}, {"shared_memory_byte_size", NULL, 16}},
         "no region 'nowhere' for input"}, /* the registry's own answer */
    };
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        struct msg bad = {.len = 0};
        for (int k = 0; k < 2 && bad_cases[i].p[k].key; k++)
            put_tensor_parameter(&bad, 4, bad_cases[i].p[k].key, bad_cases[i].p[k].s, bad_cases[i].p[k].v, 2);
        req.len = 0;
        put_shm_input(&req, "input", 2, &bad);
        shm_decode_bad(&req, &src, bad_cases[i].error);
    }
    req.len = 0;
    out.len = 0;
    put_str(&out, 1, "output");
    put_tensor_parameter(&out, 2, "shared_memory_byte_size", NULL, 64, 2);
    put_input(&req, "input", "INT64", &one, 1, &contents);
    put_sub(&req, 6, &out);
    shm_decode_bad(&req, &src, "need 'shared_memory_region' (output 'output')");
}

/* ---- encodings other writers produce (protobuf's encoding rules) ---------- */

/* One input decoded from `req`; fails the test on an error. */
static void decode_one(const struct msg *req, struct tile_grpc_infer_request *r)
{
    struct tile_error e = {0};
    if (decode(req, r, &e) < 0)
        fail_msg("decode: %s", e.text);
    assert_int_equal(r->ninputs, 1);
}

/* Class 2: bool_contents is a varint where any non-zero value is true. */
static void test_bool_nonzero_is_true(void **state)
{
    (void)state;
    static const uint64_t values[] = {256, 512, 0, 3};
    for (int packed = 0; packed < 2; packed++) {
        struct msg req = {.len = 0}, contents = {.len = 0}, run = {.len = 0};
        for (int i = 0; i < 4; i++) {
            if (packed)
                run.len = (size_t)(tile_pb_put_varint(run.buf + run.len, values[i]) - run.buf);
            else
                put_varint_field(&contents, 1, values[i]);
        }
        if (packed)
            put_sub(&contents, 1, &run);
        put_input(&req, "input", "BOOL", (int64_t[]){4}, 1, &contents);
        struct tile_grpc_infer_request r;
        decode_one(&req, &r);
        assert_memory_equal(r.inputs[0].t.data, ((const uint8_t[]){1, 1, 0, 1}), 4);
        tile_grpc_infer_request_free(&r);
    }
}

/* Integer truncation as a C++ cast: int32 from a 10-byte negative varint,
 * uint32 from a wider one; over-long (padded) varints in a packed run. */
static void test_integer_truncation(void **state)
{
    (void)state;
    struct msg req = {.len = 0}, contents = {.len = 0};
    put_varint_field(&contents, 2, (uint64_t)(int64_t)-2); /* int_contents: ten bytes */
    put_varint_field(&contents, 2, UINT64_C(0x100000007));  /* truncated to 7 */
    put_input(&req, "input", "INT32", (int64_t[]){2}, 1, &contents);
    struct tile_grpc_infer_request r;
    decode_one(&req, &r);
    assert_int_equal(((int32_t *)r.inputs[0].t.data)[0], -2);
    assert_int_equal(((int32_t *)r.inputs[0].t.data)[1], 7);
    tile_grpc_infer_request_free(&r);

    req.len = contents.len = 0;
    put_varint_field(&contents, 4, UINT64_C(0xffffffff00000005)); /* uint_contents */
    /* packed: 9 padded to ten bytes */
    put_raw(&contents, 4, (const uint8_t[]){0x89, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 10);
    put_input(&req, "input", "UINT32", (int64_t[]){2}, 1, &contents);
    decode_one(&req, &r);
    assert_int_equal(((uint32_t *)r.inputs[0].t.data)[0], 5);
    assert_int_equal(((uint32_t *)r.inputs[0].t.data)[1], 9);
    tile_grpc_infer_request_free(&r);
}

/* Every *_contents type and the shape in a mix of packed and unpacked
 * runs, and contents given as two InferTensorContents fields (class 3:
 * an embedded message given twice is the merge of both). */
static void test_runs_and_merged_contents(void **state)
{
    (void)state;
    static const char *const strings[] = {"ab", "", "xyz", "q"};
    static const struct typed_case cases[] = {
        {"BOOL", 1, TILE_PB_VARINT, 2, {1, 0}, {1, 0}, 2},
        {"INT32", 2, TILE_PB_VARINT, 2, {5, (uint64_t)(int64_t)-1}, {5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, 8},
        {"INT64", 3, TILE_PB_VARINT, 2, {1, 2}, {1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, 16},
        {"UINT32", 4, TILE_PB_VARINT, 2, {3, 4}, {3, 0, 0, 0, 4, 0, 0, 0}, 8},
        {"UINT64", 5, TILE_PB_VARINT, 2, {6, 7}, {6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0}, 16},
        {"FP32", 6, TILE_PB_I32, 2, {0x3f800000, 0xc0000000}, {0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}, 8},
        {"FP64", 7, TILE_PB_I64, 2, {UINT64_C(0x3ff0000000000000), 0}, {0, 0, 0, 0, 0, 0, 0xf0, 0x3f}, 16},
        {"BYTES", 8, TILE_PB_LEN, 2, {(uintptr_t)strings[0], (uintptr_t)strings[2]}, {0}, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        /* the values twice over: run 1 packed, run 2 unpacked in one
         * contents; then the same again in a second contents field */
        struct msg first = {.len = 0}, second = {.len = 0};
        put_contents(&first, &cases[i], true);
        put_contents(&first, &cases[i], false);
        put_contents(&second, &cases[i], false);
        put_contents(&second, &cases[i], true);
        /* shape [2, 4]: 2 packed, then 4 unpacked */
        struct msg in = {.len = 0}, req = {.len = 0};
        put_str(&in, 1, "input");
        put_packed_varints(&in, 3, (int64_t[]){2}, 1);
        put_sub(&in, 5, &first);
        put_str(&in, 2, cases[i].datatype);
        put_varint_field(&in, 3, 4);
        put_sub(&in, 5, &second);
        put_sub(&req, 5, &in);
        struct tile_grpc_infer_request r;
        decode_one(&req, &r);
        const struct tile_tensor *t = &r.inputs[0].t;
        assert_int_equal(t->rank, 2);
        assert_true(t->shape[0] == 2 && t->shape[1] == 4);
        assert_int_equal(t->nelem, 8);
        if (cases[i].wire == TILE_PB_LEN) {
            const struct tile_str *sv = t->data;
            for (int k = 0; k < 8; k++) {
                const char *want = strings[(k % 2) * 2];
                assert_int_equal(sv[k].len, strlen(want));
                assert_memory_equal(sv[k].ptr, want, strlen(want));
            }
        } else {
            for (int k = 0; k < 4; k++)
                assert_memory_equal((const uint8_t *)t->data + k * cases[i].want_len, cases[i].want,
                                    cases[i].want_len);
        }
        tile_grpc_infer_request_free(&r);
    }

    /* The example: INT64 [4] as two contents fields of two values. */
    struct msg a = {.len = 0}, b = {.len = 0}, in = {.len = 0}, req = {.len = 0};
    put_packed_varints(&a, 3, (int64_t[]){1, 2}, 2);
    put_packed_varints(&b, 3, (int64_t[]){3, 4}, 2);
    put_str(&in, 1, "input");
    put_str(&in, 2, "INT64");
    put_packed_varints(&in, 3, (int64_t[]){4}, 1);
    put_sub(&in, 5, &a);
    put_sub(&in, 5, &b);
    put_sub(&req, 5, &in);
    struct tile_grpc_infer_request r;
    decode_one(&req, &r);
    assert_memory_equal(r.inputs[0].t.data, ((const int64_t[]){1, 2, 3, 4}), 32);
    tile_grpc_infer_request_free(&r);

    /* A field of another wire type, and an empty packed run of another
     * type, are no data (unknown, resp. no values): not "unexpected". */
    a.len = in.len = req.len = 0;
    put_varint_field(&a, 6, 1);     /* fp32_contents as a varint: unknown */
    put_raw(&a, 7, "", 0);          /* fp64_contents, packed, empty */
    put_varint_field(&a, 3, 9);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &a);
    decode_one(&req, &r);
    assert_int_equal(((int64_t *)r.inputs[0].t.data)[0], 9);
    tile_grpc_infer_request_free(&r);
}

/* Class 1 in ModelInferRequest: groups skipped at every level. */
static void test_groups_everywhere(void **state)
{
    (void)state;
    static const uint8_t group[] = {0x4b, 0x08, 0x01, 0x53, 0x0a, 0x00, 0x54, 0x4c}; /* 9 { 1: 1, 10 { 1: "" } } */
    struct msg contents = {.len = 0}, in = {.len = 0}, req = {.len = 0}, value = {.len = 0}, entry = {.len = 0};
    memcpy(contents.buf, group, sizeof(group));
    contents.len = sizeof(group);
    put_varint_field(&contents, 3, 7);
    memcpy(in.buf, group, sizeof(group));
    in.len = sizeof(group);
    put_str(&in, 1, "input");
    put_str(&in, 2, "INT64");
    put_packed_varints(&in, 3, (int64_t[]){1}, 1);
    put_sub(&in, 5, &contents);
    memcpy(value.buf, group, sizeof(group));
    value.len = sizeof(group);
    put_str(&value, 3, "numpy");
    memcpy(entry.buf, group, sizeof(group));
    entry.len = sizeof(group);
    put_str(&entry, 1, "semantics");
    put_sub(&entry, 2, &value);
    memcpy(req.buf, group, sizeof(group));
    req.len = sizeof(group);
    put_str(&req, 1, "tile");
    put_sub(&req, 4, &entry);
    put_sub(&req, 5, &in);
    memcpy(req.buf + req.len, group, sizeof(group));
    req.len += sizeof(group);
    struct tile_grpc_infer_request r;
    decode_one(&req, &r);
    assert_int_equal(((int64_t *)r.inputs[0].t.data)[0], 7);
    assert_true(r.has_semantics && r.semantics.len == 5);
    tile_grpc_infer_request_free(&r);
    req.buf[req.len - 1] = 0x54; /* the last group ends as group 10 */
    decode_bad(&req, "group 9 ended as group 10");
}

/* Class 4: maps are read whole, then validated: a repeated key replaces
 * the earlier entry, a value given twice in one entry merges. */
static void test_maps_read_whole(void **state)
{
    (void)state;
    struct msg contents = {.len = 0}, req = {.len = 0};
    put_varint_field(&contents, 3, 5);
    /* an invalid semantics replaced by a valid one */
    put_parameter(&req, "semantics", 2, NULL, 1);
    put_parameter(&req, "semantics", 3, "numpy", 0);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
    struct tile_grpc_infer_request r;
    decode_one(&req, &r);
    assert_true(r.has_semantics && r.semantics.len == 5 && !memcmp(r.semantics.ptr, "numpy", 5));
    tile_grpc_infer_request_free(&r);

    /* one entry, value given twice: {string_param "numpy"} then {} (merge: kept) */
    struct msg v1 = {.len = 0}, v2 = {.len = 0}, entry = {.len = 0};
    put_str(&v1, 3, "numpy");
    put_str(&entry, 1, "semantics");
    put_sub(&entry, 2, &v1);
    put_sub(&entry, 2, &v2);
    req.len = 0;
    put_sub(&req, 4, &entry);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
    decode_one(&req, &r);
    assert_true(r.has_semantics && r.semantics.len == 5);
    tile_grpc_infer_request_free(&r);

    /* value given twice: bool_param then string_param: the oneof's last */
    v1.len = v2.len = entry.len = req.len = 0;
    put_varint_field(&v1, 1, 1);
    put_str(&v2, 3, "onnx");
    put_str(&entry, 1, "semantics");
    put_sub(&entry, 2, &v1);
    put_sub(&entry, 2, &v2);
    put_sub(&req, 4, &entry);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
    decode_one(&req, &r);
    assert_true(r.has_semantics && r.semantics.len == 4);
    tile_grpc_infer_request_free(&r);

    /* a valid semantics replaced by one without a value: the default, no member */
    entry.len = req.len = 0;
    put_parameter(&req, "semantics", 3, "numpy", 0);
    put_str(&entry, 1, "semantics");
    put_sub(&req, 4, &entry);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
    decode_bad(&req, "parameter 'semantics' must be a string_param");
}

/* Class 5: string fields must be UTF-8, named in the error. */
static void test_strings_utf8(void **state)
{
    (void)state;
    struct msg contents = {.len = 0};
    put_varint_field(&contents, 3, 5);
    static const struct {
        uint32_t field;
        const char *what;
    } top[] = {{1, "ModelInferRequest.model_name"}, {2, "ModelInferRequest.model_version"}, {3, "ModelInferRequest.id"}};
    for (size_t i = 0; i < 3; i++) {
        struct msg req = {.len = 0};
        put_raw(&req, top[i].field, "\xff\xfe", 2);
        put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
        decode_bad(&req, top[i].what);
        decode_bad(&req, "is not valid UTF-8");
    }
    struct msg req = {.len = 0};
    put_input(&req, "in\xc3", "INT64", (int64_t[]){1}, 1, &contents);
    decode_bad(&req, "InferInputTensor.name is not valid UTF-8");
    struct msg out = {.len = 0};
    put_str(&out, 1, "out\xed\xa0\x80"); /* a surrogate */
    req.len = 0;
    put_sub(&req, 6, &out);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
    decode_bad(&req, "InferRequestedOutputTensor.name is not valid UTF-8");
    req.len = 0;
    put_parameter(&req, "x", 3, "\x80", 0);
    put_input(&req, "input", "INT64", (int64_t[]){1}, 1, &contents);
    decode_bad(&req, "string_param is not valid UTF-8");
    /* bytes_contents is `bytes`: any bytes */
    struct msg bytes = {.len = 0};
    put_raw(&bytes, 8, "\xff\xfe", 2);
    req.len = 0;
    put_input(&req, "input", "BYTES", (int64_t[]){1}, 1, &bytes);
    struct tile_grpc_infer_request r;
    decode_one(&req, &r);
    tile_grpc_infer_request_free(&r);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varints),
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_packed_and_unpacked),
        cmocka_unit_test(test_bool_nonzero_is_true),
        cmocka_unit_test(test_integer_truncation),
        cmocka_unit_test(test_runs_and_merged_contents),
        cmocka_unit_test(test_groups_everywhere),
        cmocka_unit_test(test_maps_read_whole),
        cmocka_unit_test(test_strings_utf8),
        cmocka_unit_test(test_raw_request),
        cmocka_unit_test(test_typed_every_datatype),
        cmocka_unit_test(test_typed_rules),
        cmocka_unit_test(test_refusal_independent_of_field_order),
        cmocka_unit_test(test_styles),
        cmocka_unit_test(test_parameters_and_limits),
        cmocka_unit_test(test_real_client_bytes),
        cmocka_unit_test(test_reply_head),
        cmocka_unit_test(test_shared_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
