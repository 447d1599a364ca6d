/* fuzz_grpc.c - the gRPC ModelInferRequest decoder (tile_grpc_infer_decode),
 * then what the server would do with each accepted input: plan and encode
 * it in every format (fuzz_common.h), and write a ModelInferResponse head
 * for it that must read back as what was put in. The message first goes
 * through gRPC framing, fed to the deframer in pieces of varying size, and
 * must come out whole; it is also read as the model RPCs' request and as a
 * server reflection request.
 *
 * Input layout: the protobuf message itself. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "grpc_frame.h"
#include "grpc_infer.h"
#include "grpc_msgs.h"
#include "grpc_reflect.h"
#include "pbwire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_inside(struct tile_grpc_str s, const uint8_t *msg, size_t size, const char *what)
{
    FUZZ_CHECK(s.len == 0 || ((const uint8_t *)s.ptr >= msg && s.len <= size &&
                              (const uint8_t *)s.ptr - msg <= (ptrdiff_t)(size - s.len)),
               "%s points outside the message", what);
}

static bool same(const struct tile_pb_field *f, struct tile_grpc_str s)
{
    return f->len == s.len && (s.len == 0 || memcmp(f->data, s.ptr, s.len) == 0);
}

/* The same bytes as a server reflection request: a message that decodes
 * is answered with a well-formed response whose original_request (field
 * 2) is the message itself. */
static void check_reflection(const uint8_t *msg, size_t size)
{
    struct tile_grpc_buf b = {0};
    struct tile_error e = {0};
    if (tile_grpc_reflect(msg, size, &b, &e) == 0 && !b.oom) {
        struct tile_pb_reader rd;
        struct tile_pb_field f;
        int rc, echoed = 0;
        tile_pb_reader_init(&rd, b.p, b.len);
        while ((rc = tile_pb_next(&rd, &f, "the reflection response", &e)) > 0)
            echoed += f.number == 2 && f.len == size && (size == 0 || memcmp(f.data, msg, size) == 0);
        FUZZ_CHECK(rc == 0 && echoed == 1, "the reflection response does not read back: %s", e.text);
    }
    free(b.p);
    tile_error_clear(&e);
}

/* The reply head for `in`, read back field by field. */
static void check_reply(const struct tile_grpc_infer_request *r, const struct tile_tensor *t)
{
    struct tile_grpc_infer_reply rep = {
        .model_name = r->model_name,
        .model_version = r->model_version,
        .id = r->id,
        .output_name = {"output", 6},
        .dtype = t->dtype,
        .rank = t->rank,
        .shape = t->shape,
        .raw_len = 3,
    };
    size_t head = tile_grpc_infer_reply_head_size(&rep);
    uint8_t *buf = malloc(head + 3);
    if (!buf)
        return;
    tile_grpc_infer_reply_head(&rep, buf);
    memcpy(buf + head, "xyz", 3);
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    struct tile_error e = {0};
    int rc, n = 0;
    tile_pb_reader_init(&rd, buf, head + 3);
    while ((rc = tile_pb_next(&rd, &f, "the reply", &e)) > 0) {
        n++;
        if (f.number == 1)
            FUZZ_CHECK(same(&f, rep.model_name), "model_name");
        if (f.number == 3)
            FUZZ_CHECK(same(&f, rep.id), "id");
        if (f.number == 2)
            FUZZ_CHECK(same(&f, rep.model_version), "model_version");
        if (f.number == 6)
            FUZZ_CHECK(same(&f, (struct tile_grpc_str){"xyz", 3}), "raw_output_contents");
    }
    FUZZ_CHECK(rc == 0, "the reply does not read back: %s", e.text);
    FUZZ_CHECK(n == 4 + (rep.id.len > 0), "the reply has %d fields", n);
    free(buf);
}

/* Frames data[0, size) as one gRPC message and reassembles it from pieces
 * of 1..13 bytes; returns the message (malloc'd, exactly `size` bytes so
 * reads past it are caught) or NULL without memory. */
static uint8_t *deframe_in_pieces(const uint8_t *data, size_t size)
{
    uint8_t *framed = malloc(TILE_GRPC_PREFIX + size);
    if (!framed)
        return NULL;
    tile_grpc_put_prefix(framed, (uint32_t)size);
    if (size)
        memcpy(framed + TILE_GRPC_PREFIX, data, size);
    struct tile_grpc_deframer d;
    struct tile_error e = {0};
    tile_grpc_deframer_init(&d, FUZZ_MAX_BYTES);
    uint8_t *msg = NULL;
    size_t off = 0, total = TILE_GRPC_PREFIX + size, msg_len = 0;
    for (size_t piece = 1 + size % 13; off < total; piece = piece % 13 + 1) {
        size_t n = total - off < piece ? total - off : piece;
        FUZZ_CHECK(msg == NULL, "the deframer finished before the end of the message");
        long long used = tile_grpc_deframe(&d, framed + off, n, &msg, &msg_len, &e);
        if (used < 0 && e.code == TILE_ENOMEM)
            break;
        FUZZ_CHECK(used > 0 && (size_t)used <= n, "the deframer used %lld of %zu bytes: %s", used, n, e.text);
        off += (size_t)used;
    }
    if (msg)
        FUZZ_CHECK(msg_len == size && (size == 0 || memcmp(msg, data, size) == 0), "the message came out changed");
    FUZZ_CHECK(msg || e.code == TILE_ENOMEM, "the deframer did not finish the message");
    tile_grpc_deframer_free(&d);
    free(framed);
    return msg;
}

/* One shared-memory region, "r", for inputs that name one: the decoder's
 * parameter reading and its in-place and copied reads are fuzzed too. */
static _Alignas(16) uint8_t region[4096];

static int resolve_region(void *ctx, const char *tensor, const struct tile_v2_shm_ref *ref, const void **data,
                          struct tile_error *e)
{
    (void)ctx;
    if (strcmp(ref->region, "r") != 0 || ref->offset > sizeof(region) || ref->byte_size > sizeof(region) - ref->offset)
        return tile_error_set(e, TILE_EINVAL, "no such range of a region for %s", tensor);
    *data = region + ref->offset;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *msg = deframe_in_pieces(data, size);
    if (!msg)
        return 0;
    /* The same bytes as the {name, version} request of the model RPCs. */
    static const struct tile_grpc_layout ref = {"inference.ModelReadyRequest", {"name", "version"}, 2};
    struct tile_grpc_str strs[2];
    struct tile_error e = {0};
    if (tile_grpc_strings_decode(msg, size, &ref, strs, &e) == 0) {
        check_inside(strs[0], msg, size, "a model name");
        check_inside(strs[1], msg, size, "a model version");
    }
    tile_error_clear(&e);
    struct tile_grpc_shm_register reg;
    if (tile_grpc_shm_register_decode(msg, size, &reg, &e) == 0) {
        check_inside(reg.name, msg, size, "a region name");
        check_inside(reg.key, msg, size, "a region key");
    }
    tile_error_clear(&e);
    check_reflection(msg, size);
    struct tile_grpc_infer_request r;
    const struct tile_v2_shm_source shm = {.resolve = resolve_region, .borrow = true};
    int rc = tile_grpc_infer_decode_shm(msg, size, &fuzz_limits, &shm, &r, &e);
    fuzz_check_result(rc, &e, "tile_grpc_infer_decode");
    if (rc == 0) {
        check_inside(r.model_name, msg, size, "model_name");
        check_inside(r.model_version, msg, size, "model_version");
        check_inside(r.id, msg, size, "id");
        check_inside(r.semantics, msg, size, "semantics");
        for (int i = 0; i < r.noutputs; i++)
            check_inside(r.outputs[i], msg, size, "an output name");
        FUZZ_CHECK(r.ninputs > 0 && r.ninputs <= TILE_GRPC_MAX_INPUTS, "%d inputs", r.ninputs);
        for (int i = 0; i < r.ninputs; i++) {
            const struct tile_tensor *t = &r.inputs[i].t;
            check_inside(r.inputs[i].name, msg, size, "an input name");
            fuzz_check_tensor(t, fuzz_limits.max_rank);
            check_reply(&r, t);
            /* Tile it once along every axis, as the server would. */
            struct tile_request tr;
            tile_request_init(&tr);
            tr.input = *t;
            tr.has_repeats = true;
            tr.nrepeats = t->rank;
            for (int k = 0; k < t->rank; k++)
                tr.repeats[k] = k == 0 ? 2 : 1;
            fuzz_encode_request(&tr); /* borrows the tensor; r frees it */
        }
    }
    tile_grpc_infer_request_free(&r);
    free(msg);
    return 0;
}
