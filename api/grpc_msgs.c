/* grpc_msgs.c - the small gRPC service messages (see grpc_msgs.h).
 *
 * Nested messages are written into their own buffer first and then added
 * as a length-delimited field: these replies are a few hundred bytes, so
 * the copy costs less than sizing every level in advance. Scalars that
 * hold proto3's default (0, "", false) are left out, as the protobuf
 * libraries leave them out.
 */
#include "grpc_msgs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pbwire.h"
#include "utf8.h"

/* Returns room for n more bytes, or NULL (and b->oom) when it cannot grow. */
static uint8_t *reserve(struct tile_grpc_buf *b, size_t n)
{
    if (b->oom)
        return NULL;
    uint8_t *p = tile_grow(b->p, &b->cap, b->len, n, 1, 128, SIZE_MAX);
    if (!p) {
        b->oom = true;
        return NULL;
    }
    b->p = p;
    return b->p + b->len;
}

static void put_bytes(struct tile_grpc_buf *b, uint32_t field, const void *data, size_t len)
{
    uint8_t *p = reserve(b, tile_pb_bytes_size(field, len));
    if (p)
        b->len = (size_t)(tile_pb_put_bytes(p, field, data, len) - b->p);
}

static void put_str(struct tile_grpc_buf *b, uint32_t field, const char *s)
{
    if (s && *s)
        put_bytes(b, field, s, strlen(s));
}

static void put_varint(struct tile_grpc_buf *b, uint32_t field, uint64_t v)
{
    uint8_t *p = v ? reserve(b, 2 * 10) : NULL;
    if (p)
        b->len = (size_t)(tile_pb_put_varint(tile_pb_put_tag(p, field, TILE_PB_VARINT), v) - b->p);
}

/* Adds `child` as field `field` of `b` and frees it. */
static void put_sub(struct tile_grpc_buf *b, uint32_t field, struct tile_grpc_buf *child)
{
    if (child->oom)
        b->oom = true;
    else
        put_bytes(b, field, child->p, child->len);
    free(child->p);
}

static void put_packed(struct tile_grpc_buf *b, uint32_t field, const int64_t *v, size_t n)
{
    struct tile_grpc_buf packed = {0};
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = reserve(&packed, 10);
        if (p)
            packed.len = (size_t)(tile_pb_put_varint(p, (uint64_t)v[i]) - packed.p);
    }
    if (n)
        put_sub(b, field, &packed);
}

void tile_grpc_buf_bytes(struct tile_grpc_buf *b, uint32_t field, const void *data, size_t len)
{
    put_bytes(b, field, data, len);
}

void tile_grpc_buf_str(struct tile_grpc_buf *b, uint32_t field, const char *s)
{
    put_str(b, field, s);
}

void tile_grpc_buf_varint(struct tile_grpc_buf *b, uint32_t field, uint64_t v)
{
    put_varint(b, field, v);
}

void tile_grpc_buf_sub(struct tile_grpc_buf *b, uint32_t field, struct tile_grpc_buf *child)
{
    put_sub(b, field, child);
}

/* A string field: 0 and its view when it is UTF-8, else -1 naming it. */
static int string_field(const struct tile_pb_field *f, const char *message, const char *field,
                        struct tile_grpc_str *out, struct tile_error *e)
{
    if (!tile_pb_ascii(f) && !tile_utf8_valid((const char *)f->data, f->len, NULL)) {
        char what[128];
        snprintf(what, sizeof(what), "%s.%s", message, field);
        return tile_pb_utf8(f, what, e);
    }
    *out = (struct tile_grpc_str){(const char *)f->data, f->len};
    return 0;
}

int tile_grpc_strings_decode(const void *msg, size_t len, const struct tile_grpc_layout *l, struct tile_grpc_str *out,
                             struct tile_error *e)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    int rc;
    for (size_t i = 0; i < l->n; i++)
        out[i] = (struct tile_grpc_str){"", 0};
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, &f, l->message, e)) > 0) {
        if (f.number <= l->n && f.wire == TILE_PB_LEN &&
            string_field(&f, l->message, l->field[f.number - 1], &out[f.number - 1], e) < 0)
            return -1;
    }
    return rc;
}

void tile_grpc_bool_reply(struct tile_grpc_buf *b, bool value)
{
    put_varint(b, 1, value);
}

void tile_grpc_server_metadata(struct tile_grpc_buf *b, const char *name, const char *version,
                               const char *const *extensions, size_t nextensions)
{
    put_str(b, 1, name);
    put_str(b, 2, version);
    for (size_t i = 0; i < nextensions; i++)
        put_bytes(b, 3, extensions[i], strlen(extensions[i]));
}

/* TensorMetadata{name 1, datatype 2, shape 3}. */
static void put_tensor_meta(struct tile_grpc_buf *b, uint32_t field, const struct tile_grpc_tensor_meta *t)
{
    struct tile_grpc_buf m = {0};
    put_str(&m, 1, t->name);
    put_str(&m, 2, tile_dtype_traits(t->dtype)->kserve);
    put_packed(&m, 3, t->shape, (size_t)t->rank);
    put_sub(b, field, &m);
}

void tile_grpc_model_metadata(struct tile_grpc_buf *b, const struct tile_grpc_model_meta *m)
{
    put_str(b, 1, m->name);
    for (size_t i = 0; i < m->nversions; i++)
        put_bytes(b, 2, m->versions[i], strlen(m->versions[i]));
    put_str(b, 3, m->platform);
    for (size_t i = 0; i < m->ninputs; i++)
        put_tensor_meta(b, 4, &m->inputs[i]);
    for (size_t i = 0; i < m->noutputs; i++)
        put_tensor_meta(b, 5, &m->outputs[i]);
}

/* Triton's DataType enum (model_config.proto): TYPE_<name> = number. BYTES
 * is TYPE_STRING; types Triton lacks (complex) are TYPE_INVALID, 0. */
static uint64_t triton_data_type(enum tile_dtype dtype)
{
    static const char *const names[] = {"", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16",
                                        "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"};
    const char *kserve = tile_dtype_traits(dtype)->kserve;
    for (uint64_t i = 1; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(names[i], kserve) == 0)
            return i;
    }
    return 0;
}

/* ModelInput{name 1, data_type 2, dims 4} or ModelOutput{name 1,
 * data_type 2, dims 3}. */
static void put_config_tensor(struct tile_grpc_buf *b, uint32_t field, uint32_t dims_field,
                              const struct tile_grpc_tensor_meta *t)
{
    struct tile_grpc_buf m = {0};
    put_str(&m, 1, t->name);
    put_varint(&m, 2, triton_data_type(t->dtype));
    put_packed(&m, dims_field, t->shape, (size_t)t->rank);
    put_sub(b, field, &m);
}

void tile_grpc_model_config(struct tile_grpc_buf *b, const struct tile_grpc_model_meta *m)
{
    struct tile_grpc_buf c = {0};
    put_str(&c, 1, m->name);
    put_str(&c, 2, m->platform);
    if (m->version) { /* ModelVersionPolicy{specific 3: Specific{versions 1}} */
        struct tile_grpc_buf policy = {0}, specific = {0};
        put_packed(&specific, 1, &m->version, 1);
        put_sub(&policy, 3, &specific);
        put_sub(&c, 3, &policy);
    }
    for (size_t i = 0; i < m->ninputs; i++)
        put_config_tensor(&c, 5, 4, &m->inputs[i]);
    for (size_t i = 0; i < m->noutputs; i++)
        put_config_tensor(&c, 6, 3, &m->outputs[i]);
    put_str(&c, 17, m->backend);
    put_sub(b, 1, &c);
}

/* StatisticDuration{count 1, ns 2}; always present, as Triton sends it. */
static void put_duration(struct tile_grpc_buf *b, uint32_t field, uint64_t count, uint64_t ns)
{
    struct tile_grpc_buf d = {0};
    put_varint(&d, 1, count);
    put_varint(&d, 2, ns);
    put_sub(b, field, &d);
}

void tile_grpc_model_statistics(struct tile_grpc_buf *b, const struct tile_grpc_model_stats *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct tile_grpc_buf m = {0}, inf = {0};
        put_str(&m, 1, s[i].name);
        put_str(&m, 2, s[i].version);
        put_varint(&m, 3, s[i].last_inference_ms);
        put_varint(&m, 4, s[i].inference_count);
        put_varint(&m, 5, s[i].execution_count);
        put_duration(&inf, 1, s[i].success_count, s[i].success_ns);
        put_duration(&inf, 2, s[i].fail_count, s[i].fail_ns);
        put_duration(&inf, 3, s[i].queue_count, s[i].queue_ns);
        put_duration(&inf, 4, s[i].compute_input_count, s[i].compute_input_ns);
        put_duration(&inf, 5, s[i].compute_infer_count, s[i].compute_infer_ns);
        put_duration(&inf, 6, s[i].compute_output_count, s[i].compute_output_ns);
        put_duration(&inf, 7, s[i].cache_hit_count, s[i].cache_hit_ns);
        put_duration(&inf, 8, s[i].cache_miss_count, s[i].cache_miss_ns);
        put_sub(&m, 6, &inf);
        put_sub(b, 1, &m);
    }
}

void tile_grpc_health_reply(struct tile_grpc_buf *b, enum tile_grpc_serving status)
{
    put_varint(b, 1, (uint64_t)status);
}

int tile_grpc_shm_register_decode(const void *msg, size_t len, struct tile_grpc_shm_register *r, struct tile_error *e)
{
    static const char message[] = "SystemSharedMemoryRegisterRequest";
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    int rc;
    memset(r, 0, sizeof(*r));
    r->name = r->key = (struct tile_grpc_str){"", 0};
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, &f, message, e)) > 0) {
        if (f.number > 4 || f.wire != (f.number <= 2 ? TILE_PB_LEN : TILE_PB_VARINT))
            continue; /* unknown to the message */
        if ((f.number == 1 && string_field(&f, message, "name", &r->name, e) < 0) ||
            (f.number == 2 && string_field(&f, message, "key", &r->key, e) < 0))
            return -1;
        if (f.number == 3)
            r->offset = f.value;
        else if (f.number == 4)
            r->byte_size = f.value;
    }
    return rc;
}

void tile_grpc_shm_status_region(struct tile_grpc_buf *b, const char *name, const char *key, uint64_t offset,
                                 uint64_t byte_size)
{
    struct tile_grpc_buf entry = {0}, status = {0};
    put_str(&status, 1, name);
    put_str(&status, 2, key);
    put_varint(&status, 3, offset);
    put_varint(&status, 4, byte_size);
    put_str(&entry, 1, name);
    put_sub(&entry, 2, &status);
    put_sub(b, 1, &entry);
}
