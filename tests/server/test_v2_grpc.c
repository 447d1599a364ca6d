/* test_v2_grpc.c - the gRPC RPC handlers (server/handlers/v2_grpc*.c) without a
 * socket: requests arrive through the fake transport as a gRPC transport
 * hands them over (transport gRPC, the :path, the message without its
 * 5-byte prefix), and replies are decoded with the protobuf wire reader.
 * Every RPC's answer and error, with the gRPC status the transport would
 * send, and the same answers HTTP v2 gives where both have them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_transport.h"
#include "grpc_msgs.h"
#include "log.h"
#include "metrics.h"
#include "pbwire.h"
#include "service.h"
#include "stream.h"
#include "v2_state.h"

#define srv fake_srv

#define RPC "/inference.GRPCInferenceService/"

/* ---- messages ------------------------------------------------------------ */

struct msg {
    uint8_t buf[8192];
    size_t len;
};

static void put_raw(struct msg *m, uint32_t number, const void *data, size_t len)
{
    assert_true(m->len + tile_pb_bytes_size(number, len) <= sizeof(m->buf));
    m->len = (size_t)(tile_pb_put_bytes(m->buf + m->len, number, data, len) - m->buf);
}

static void put_str(struct msg *m, uint32_t number, const char *s)
{
    put_raw(m, number, s, strlen(s));
}

static void put_varint(struct msg *m, uint32_t number, uint64_t v)
{
    uint8_t *p = tile_pb_put_tag(m->buf + m->len, number, TILE_PB_VARINT);
    m->len = (size_t)(tile_pb_put_varint(p, v) - m->buf);
}

static void put_sub(struct msg *m, uint32_t number, const struct msg *sub)
{
    put_raw(m, number, sub->buf, sub->len);
}

static void append(struct msg *m, const struct msg *fields)
{
    assert_true(m->len + fields->len <= sizeof(m->buf));
    memcpy(m->buf + m->len, fields->buf, fields->len);
    m->len += fields->len;
}

/* One map<string, InferParameter> entry: a string_param (s) or, with s
 * NULL, an int64_param (v). */
static void put_param(struct msg *m, uint32_t number, const char *key, const char *s, int64_t v)
{
    struct msg value = {.len = 0}, entry = {.len = 0};
    if (s)
        put_str(&value, 3, s);
    else
        put_varint(&value, 2, (uint64_t)v);
    put_str(&entry, 1, key);
    put_sub(&entry, 2, &value);
    put_sub(m, number, &entry);
}

/* {name = 1, version = 2}: the model RPCs' request. */
static struct msg model_ref(const char *name, const char *version)
{
    struct msg m = {.len = 0};
    if (name)
        put_str(&m, 1, name);
    if (version)
        put_str(&m, 2, version);
    return m;
}

/* The `index`-th field `number` of a message: 1 with *f set, 0 when absent. */
static int field(const void *msg, size_t len, uint32_t number, int index, struct tile_pb_field *f)
{
    struct tile_pb_reader rd;
    struct tile_error e = {0};
    int rc;
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, f, "reply", &e)) > 0) {
        if (f->number == number && index-- == 0)
            return 1;
    }
    assert_int_equal(rc, 0); /* the reply is a well-formed message */
    return 0;
}

static int field_of(const struct tile_pb_field *outer, uint32_t number, int index, struct tile_pb_field *f)
{
    return field(outer->data, outer->len, number, index, f);
}

static bool field_is(const struct tile_pb_field *f, const char *s)
{
    return f->wire == TILE_PB_LEN && f->len == strlen(s) && memcmp(f->data, s, f->len) == 0;
}

static void expect_str(const void *msg, size_t len, uint32_t number, int index, const char *want)
{
    struct tile_pb_field f;
    if (!field(msg, len, number, index, &f))
        fail_msg("field %u[%d] is absent, expected '%s'", number, index, want);
    if (!field_is(&f, want))
        fail_msg("field %u[%d] is '%.*s', expected '%s'", number, index, (int)f.len, f.data, want);
}

/* A varint field's value, 0 when absent (proto3's default). */
static uint64_t varint_of(const void *msg, size_t len, uint32_t number)
{
    struct tile_pb_field f;
    if (!field(msg, len, number, 0, &f))
        return 0;
    assert_int_equal(f.wire, TILE_PB_VARINT);
    return f.value;
}

/* ---- calls --------------------------------------------------------------- */

static struct tiled_req *call(const char *path, const struct msg *m)
{
    struct fake_conn *c = malloc(sizeof(*c));
    assert_non_null(c);
    fake_conn_init(c);
    fake_conn_header(c, "Content-Type", "application/grpc");
    fake_conn_header(c, "TE", "trailers");
    return fake_exchange(&srv, c, TILED_TRANSPORT_GRPC, "POST", path, m->buf, m->len);
}

static void end(struct tiled_req *req)
{
    struct fake_conn *c = req->conn;
    tiled_service_end(req, req->reply.status);
    free(c);
}

/* A successful reply: its message. */
static const uint8_t *ok_reply(struct tiled_req *req, size_t *len)
{
    if (req->reply.status != TILED_OK)
        fail_msg("status %d: %s", req->reply.status, req->reply.message ? req->reply.message : "");
    assert_int_equal(tiled_reply_grpc_status(&req->reply), TILED_GRPC_OK);
    assert_null(req->reply.stream);
    *len = (size_t)req->reply.body_len;
    return (const uint8_t *)req->reply.body;
}

static void expect_grpc_error(struct tiled_req *req, int code, const char *contains)
{
    assert_int_not_equal(req->reply.status, TILED_OK);
    assert_int_equal(tiled_reply_grpc_status(&req->reply), code);
    assert_non_null(req->reply.message);
    if (!strstr(req->reply.message, contains))
        fail_msg("error '%s' does not mention '%s'", req->reply.message, contains);
}

/* Calls `path` with `m` and checks the error; ends the call. */
static void call_fails(const char *path, const struct msg *m, int code, const char *contains)
{
    struct tiled_req *req = call(path, m);
    expect_grpc_error(req, code, contains);
    end(req);
}

/* Calls `path` with `m`; the reply is the one bool of field 1. */
static bool call_bool(const char *path, const struct msg *m)
{
    struct tiled_req *req = call(path, m);
    size_t len;
    const uint8_t *p = ok_reply(req, &len);
    bool v = varint_of(p, len, 1) != 0;
    end(req);
    return v;
}

/* An HTTP v2 request's JSON reply. */
static json_t *http_json(const char *path)
{
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "GET", path, NULL, 0);
    assert_int_equal(req->reply.status, TILED_OK);
    json_t *doc = json_loadb(req->reply.body, (size_t)req->reply.body_len, 0, NULL);
    assert_non_null(doc);
    tiled_service_end(req, req->reply.status);
    return doc;
}

/* ---- health ---------------------------------------------------------------- */

static void server_health(void **state)
{
    (void)state;
    struct msg empty = {.len = 0};
    struct msg tile = model_ref("tile", NULL), v6 = model_ref("tile", "6");
    assert_true(call_bool(RPC "ServerLive", &empty));
    assert_true(call_bool(RPC "ServerReady", &empty));
    assert_true(call_bool(RPC "ModelReady", &tile));
    assert_true(call_bool(RPC "ModelReady", &v6));
    atomic_store(&srv.draining, true);
    assert_true(call_bool(RPC "ServerLive", &empty));
    assert_false(call_bool(RPC "ServerReady", &empty)); /* the answer, not an error: OIP puts it in the message */
    assert_false(call_bool(RPC "ModelReady", &tile));
    atomic_store(&srv.draining, false);
}

static void model_errors(void **state)
{
    (void)state;
    struct msg other = model_ref("other", NULL), v7 = model_ref("tile", "7"), word = model_ref("tile", "latest");
    struct msg zero = model_ref("tile", "0"), huge = model_ref("tile", "99999999999");
    struct msg other_word = model_ref("other", "x"), other_zero = model_ref("other", "0");
    struct msg plus = model_ref("tile", "+6"), none = model_ref(NULL, NULL);
    struct msg bad = {.buf = {0x0a, 0x02, 0xff, 0xfe}, .len = 4}; /* name not UTF-8 */
    static const char *const rpcs[] = {RPC "ModelMetadata", RPC "ModelConfig", RPC "ModelStatistics"};
    for (size_t i = 0; i < sizeof(rpcs) / sizeof(rpcs[0]); i++) {
        /* Triton: an unknown model or version is NOT_FOUND; HTTP's messages */
        call_fails(rpcs[i], &other, TILED_GRPC_NOT_FOUND, "unknown model 'other' (this server serves the model 'tile')");
        call_fails(rpcs[i], &v7, TILED_GRPC_NOT_FOUND, "unknown version 7 of model 'tile' (versions: 13, 6, 1)");
        /* a number no version has is an unknown version too */
        call_fails(rpcs[i], &zero, TILED_GRPC_NOT_FOUND, "unknown version 0 of model 'tile' (versions: 13, 6, 1)");
        call_fails(rpcs[i], &huge, TILED_GRPC_NOT_FOUND, "unknown version 99999999999 of model 'tile'");
        call_fails(rpcs[i], &other_zero, TILED_GRPC_NOT_FOUND, "unknown model 'other'");
        /* not a version number at all: malformed, found out first, as Triton parses it first */
        call_fails(rpcs[i], &word, TILED_GRPC_INVALID_ARGUMENT, "model version 'latest' is not a version number");
        call_fails(rpcs[i], &other_word, TILED_GRPC_INVALID_ARGUMENT, "model version 'x' is not a version number");
        call_fails(rpcs[i], &bad, TILED_GRPC_INVALID_ARGUMENT, "Request.name is not valid UTF-8");
    }
    /* ModelReady answers OK, ready: false, for a model or version it does
     * not serve (Triton's answer; tritonclient's is_model_ready() is False) */
    const char *ready = RPC "ModelReady";
    assert_false(call_bool(ready, &other));
    assert_false(call_bool(ready, &v7));
    assert_false(call_bool(ready, &zero));
    assert_false(call_bool(ready, &none));
    assert_false(call_bool(ready, &other_zero));
    assert_true(call_bool(ready, &plus)); /* "+6" is version 6, as over HTTP */
    call_fails(ready, &word, TILED_GRPC_INVALID_ARGUMENT, "model version 'latest' is not a version number");
    call_fails(ready, &bad, TILED_GRPC_INVALID_ARGUMENT, "ModelReadyRequest.name is not valid UTF-8");
}

static void grpc_health_service(void **state)
{
    (void)state;
    struct msg any = {.len = 0}, named = {.len = 0}, other = {.len = 0};
    put_str(&named, 1, "inference.GRPCInferenceService");
    put_str(&other, 1, "some.Other");
    struct tiled_req *req = call("/grpc.health.v1.Health/Check", &any);
    size_t len;
    const uint8_t *p = ok_reply(req, &len);
    assert_int_equal(varint_of(p, len, 1), 1); /* SERVING */
    end(req);
    req = call("/grpc.health.v1.Health/Check", &named);
    p = ok_reply(req, &len);
    assert_int_equal(varint_of(p, len, 1), 1);
    end(req);
    atomic_store(&srv.draining, true);
    req = call("/grpc.health.v1.Health/Check", &any);
    p = ok_reply(req, &len);
    assert_int_equal(varint_of(p, len, 1), 2); /* NOT_SERVING */
    end(req);
    atomic_store(&srv.draining, false);
    call_fails("/grpc.health.v1.Health/Check", &other, TILED_GRPC_NOT_FOUND, "unknown service 'some.Other'");
    call_fails("/grpc.health.v1.Health/Watch", &any, TILED_GRPC_UNIMPLEMENTED, "unknown method /grpc.health.v1.Health/Watch");
}

static void unknown_methods(void **state)
{
    (void)state;
    struct msg empty = {.len = 0};
    call_fails(RPC "RepositoryIndex", &empty, TILED_GRPC_UNIMPLEMENTED, "unknown method " RPC "RepositoryIndex");
    call_fails("/other.Service/Call", &empty, TILED_GRPC_UNIMPLEMENTED, "unknown method /other.Service/Call");
    /* HTTP paths are not reachable over gRPC */
    call_fails("/v2/health/live", &empty, TILED_GRPC_UNIMPLEMENTED, "unknown method /v2/health/live");
}

/* ---- metadata ---------------------------------------------------------------- */

static void expect_extensions(const uint8_t *p, size_t len, json_t *http)
{
    json_t *ext = json_object_get(http, "extensions");
    assert_true(json_array_size(ext) >= 4);
    for (size_t i = 0; i < json_array_size(ext); i++)
        expect_str(p, len, 3, (int)i, json_string_value(json_array_get(ext, i)));
    struct tile_pb_field f;
    assert_int_equal(field(p, len, 3, (int)json_array_size(ext), &f), 0);
}

static void server_metadata(void **state)
{
    (void)state;
    struct msg empty = {.len = 0};
    struct tiled_req *req = call(RPC "ServerMetadata", &empty);
    size_t len;
    const uint8_t *p = ok_reply(req, &len);
    expect_str(p, len, 1, 0, "tiled");
    expect_str(p, len, 2, 0, TILED_VERSION);
    expect_str(p, len, 3, 2, "statistics"); /* perf_analyzer collects statistics only when it is listed */
    expect_str(p, len, 3, 1, "model_configuration");
    json_t *http = http_json("/v2");
    expect_extensions(p, len, http); /* the same list as HTTP, in the same order */
    json_decref(http);
    end(req);
    /* with shared memory on, both list system_shared_memory */
    struct tile_error e = {0};
    struct tiled_shm_limits lim = {.max_regions = 4, .max_bytes = 1 << 20};
    srv.shm = tiled_shm_new(&lim, &e);
    assert_non_null(srv.shm);
    req = call(RPC "ServerMetadata", &empty);
    p = ok_reply(req, &len);
    http = http_json("/v2");
    expect_extensions(p, len, http);
    expect_str(p, len, 3, 4, "system_shared_memory");
    json_decref(http);
    end(req);
    tiled_shm_free(srv.shm);
    srv.shm = NULL;
}

struct dims {
    int64_t v[8];
    size_t n;
};

static int collect_dim(void *p, uint64_t v, struct tile_error *e)
{
    (void)e;
    struct dims *d = p;
    assert_true(d->n < 8);
    d->v[d->n++] = (int64_t)v;
    return 0;
}

/* A TensorMetadata or a config's ModelInput/ModelOutput against the HTTP
 * document's tensor. */
static void expect_tensor(const struct tile_pb_field *t, json_t *want, bool config, uint32_t dims_field)
{
    struct tile_pb_field f;
    assert_int_equal(field_of(t, 1, 0, &f), 1);
    assert_true(field_is(&f, json_string_value(json_object_get(want, "name"))));
    json_t *shape = json_object_get(want, config ? "dims" : "shape");
    assert_int_equal(field_of(t, dims_field, 0, &f), 1);
    struct dims d = {.n = 0};
    struct tile_error e = {0};
    assert_int_equal(tile_pb_scalars(&f, TILE_PB_VARINT, collect_dim, &d, "dims", &e), 0);
    assert_int_equal(d.n, json_array_size(shape));
    for (size_t i = 0; i < d.n; i++)
        assert_int_equal(d.v[i], json_integer_value(json_array_get(shape, i)));
    if (!config) {
        assert_int_equal(field_of(t, 2, 0, &f), 1);
        assert_true(field_is(&f, json_string_value(json_object_get(want, "datatype"))));
        return;
    }
    assert_int_equal(field_of(t, 2, 0, &f), 1); /* Triton's DataType enum */
    const char *type = json_string_value(json_object_get(want, "data_type"));
    assert_int_equal(f.value, strcmp(type, "TYPE_FP32") == 0 ? 11 : strcmp(type, "TYPE_INT64") == 0 ? 9 : 0);
}

/* Calls `rpc` for every version ("" too) and hands its reply and the HTTP
 * document at /v2/models/tile[/versions/N]`suffix` to `check`. */
static void against_http(const char *rpc, const char *suffix, void (*check)(const uint8_t *p, size_t len, json_t *http))
{
    static const char *const versions[] = {"", "13", "6", "1"};
    for (size_t v = 0; v < 4; v++) {
        struct msg m = model_ref("tile", versions[v]);
        struct tiled_req *req = call(rpc, &m);
        size_t len;
        const uint8_t *p = ok_reply(req, &len);
        char path[64];
        snprintf(path, sizeof(path), "/v2/models/tile%s%s%s", v ? "/versions/" : "", versions[v], suffix);
        json_t *http = http_json(path);
        check(p, len, http);
        json_decref(http);
        end(req);
    }
}

static void check_metadata(const uint8_t *p, size_t len, json_t *http)
{
    expect_str(p, len, 1, 0, "tile");
    for (int i = 0; i < 3; i++)
        expect_str(p, len, 2, i, json_string_value(json_array_get(json_object_get(http, "versions"), (size_t)i)));
    expect_str(p, len, 3, 0, "onnxruntime_onnx");
    json_t *inputs = json_object_get(http, "inputs");
    struct tile_pb_field t;
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        assert_int_equal(field(p, len, 4, (int)i, &t), 1);
        expect_tensor(&t, json_array_get(inputs, i), false, 3);
    }
    assert_int_equal(field(p, len, 4, (int)json_array_size(inputs), &t), 0);
    assert_int_equal(field(p, len, 5, 0, &t), 1);
    expect_tensor(&t, json_array_get(json_object_get(http, "outputs"), 0), false, 3);
}

static void model_metadata(void **state)
{
    (void)state;
    against_http(RPC "ModelMetadata", "", check_metadata);
}

static void check_config(const uint8_t *p, size_t len, json_t *http)
{
    struct tile_pb_field config, t;
    assert_int_equal(field(p, len, 1, 0, &config), 1);
    expect_str(config.data, config.len, 1, 0, "tile");
    expect_str(config.data, config.len, 2, 0, "onnxruntime_onnx");
    expect_str(config.data, config.len, 17, 0, "tiled");
    assert_int_equal(varint_of(config.data, config.len, 4), 0); /* max_batch_size 0: no batching dimension */
    json_t *inputs = json_object_get(http, "input");
    for (size_t i = 0; i < json_array_size(inputs); i++) {
        assert_int_equal(field_of(&config, 5, (int)i, &t), 1);
        expect_tensor(&t, json_array_get(inputs, i), true, 4); /* ModelInput.dims is field 4 */
    }
    assert_int_equal(field_of(&config, 5, (int)json_array_size(inputs), &t), 0);
    assert_int_equal(field_of(&config, 6, 0, &t), 1);
    expect_tensor(&t, json_array_get(json_object_get(http, "output"), 0), true, 3); /* ModelOutput.dims: 3 */
}

static void model_config(void **state)
{
    (void)state;
    against_http(RPC "ModelConfig", "/config", check_config);
}

/* ModelStatistics' model_stats entries, with their version strings. */
static int stats_versions(const uint8_t *p, size_t len, const char *versions[4])
{
    struct tile_pb_field s, f;
    int n = 0;
    while (n < 4 && field(p, len, 1, n, &s)) {
        assert_int_equal(field_of(&s, 1, 0, &f), 1);
        assert_true(field_is(&f, "tile"));
        assert_int_equal(field_of(&s, 2, 0, &f), 1);
        versions[n] = f.len == 2 && !memcmp(f.data, "13", 2) ? "13" : f.len == 1 && f.data[0] == '6' ? "6" : "1";
        assert_int_equal(field_of(&s, 6, 0, &f), 1); /* inference_stats, always present */
        n++;
    }
    return n;
}

static void model_statistics(void **state)
{
    (void)state;
    /* one version's counters, as HTTP reports them */
    atomic_store(&srv.v2_stats[1].success_count, 5);
    atomic_store(&srv.v2_stats[1].success_ns, 5000);
    atomic_store(&srv.v2_stats[1].fail_count, 2);
    atomic_store(&srv.v2_stats[1].last_ms, 1234567);
    struct msg all = model_ref(NULL, NULL), tile = model_ref("tile", NULL), v6 = model_ref("tile", "6");
    const char *versions[4];
    size_t len;
    struct tiled_req *req = call(RPC "ModelStatistics", &all);
    const uint8_t *p = ok_reply(req, &len);
    assert_int_equal(stats_versions(p, len, versions), 3);
    assert_string_equal(versions[0], "13");
    assert_string_equal(versions[2], "1");
    end(req);
    req = call(RPC "ModelStatistics", &tile);
    p = ok_reply(req, &len);
    assert_int_equal(stats_versions(p, len, versions), 3);
    end(req);
    req = call(RPC "ModelStatistics", &v6);
    p = ok_reply(req, &len);
    assert_int_equal(stats_versions(p, len, versions), 1);
    assert_string_equal(versions[0], "6");
    struct tile_pb_field s, inf, success, fail;
    assert_int_equal(field(p, len, 1, 0, &s), 1);
    assert_int_equal(varint_of(s.data, s.len, 3), 1234567); /* last_inference */
    assert_int_equal(varint_of(s.data, s.len, 4), 5);       /* inference_count */
    assert_int_equal(field_of(&s, 6, 0, &inf), 1);
    assert_int_equal(field_of(&inf, 1, 0, &success), 1);
    assert_int_equal(varint_of(success.data, success.len, 1), 5);
    assert_int_equal(varint_of(success.data, success.len, 2), 5000);
    assert_int_equal(field_of(&inf, 2, 0, &fail), 1);
    assert_int_equal(varint_of(fail.data, fail.len, 1), 2);
    json_t *http = http_json("/v2/models/tile/versions/6/stats");
    json_t *hs = json_object_get(json_array_get(json_object_get(http, "model_stats"), 0), "inference_stats");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(hs, "success"), "count")), 5);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(hs, "fail"), "count")), 2);
    json_decref(http);
    end(req);
    memset(&srv.v2_stats[1], 0, sizeof(srv.v2_stats[1]));
}


/* ---- ModelInfer ------------------------------------------------------------------ */

/* An input of a ModelInferRequest: raw bytes, typed contents or (params)
 * shared-memory parameters. */
struct tensor_in {
    const char *name, *datatype;
    int rank;
    int64_t shape[8];
    const void *raw;
    size_t raw_len;
    const struct msg *contents, *params;
};

struct infer_req {
    const char *model, *version, *id, *semantics;
    const struct tensor_in *in;
    int nin;
    const char *output;         /* requested output name, NULL: none */
    const struct msg *out_params;
};

static struct msg *infer_msg(const struct infer_req *q)
{
    struct msg *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    put_str(m, 1, q->model ? q->model : "tile");
    if (q->version)
        put_str(m, 2, q->version);
    if (q->id)
        put_str(m, 3, q->id);
    if (q->semantics)
        put_param(m, 4, "semantics", q->semantics, 0);
    for (int i = 0; i < q->nin; i++) {
        const struct tensor_in *t = &q->in[i];
        struct msg in = {.len = 0}, shape = {.len = 0};
        put_str(&in, 1, t->name);
        put_str(&in, 2, t->datatype);
        for (int d = 0; d < t->rank; d++)
            shape.len = (size_t)(tile_pb_put_varint(shape.buf + shape.len, (uint64_t)t->shape[d]) - shape.buf);
        if (t->rank)
            put_sub(&in, 3, &shape);
        if (t->params) /* map entries: fields 4 of the tensor */
            append(&in, t->params);
        if (t->contents)
            put_sub(&in, 5, t->contents);
        put_sub(m, 5, &in);
    }
    if (q->output) {
        struct msg out = {.len = 0};
        put_str(&out, 1, q->output);
        if (q->out_params) /* map entries: fields 2 */
            append(&out, q->out_params);
        put_sub(m, 6, &out);
    }
    for (int i = 0; i < q->nin; i++) {
        if (q->in[i].raw)
            put_raw(m, 7, q->in[i].raw, q->in[i].raw_len);
    }
    return m;
}

static struct tiled_req *infer(const struct infer_req *q)
{
    struct msg *m = infer_msg(q);
    struct tiled_req *req = call(RPC "ModelInfer", m);
    free(m);
    return req;
}

static void infer_fails(const struct infer_req *q, int code, const char *contains)
{
    struct tiled_req *req = infer(q);
    expect_grpc_error(req, code, contains);
    end(req);
}

/* The whole reply message, read from the stream when it is one (waiting
 * for the producer as a transport does); malloc'd. */
static uint8_t *whole_reply(struct tiled_req *req, size_t *len)
{
    assert_int_equal(req->reply.status, TILED_OK);
    assert_string_equal(req->reply.content_type, "application/grpc");
    for (int i = 0; i < req->reply.nheaders; i++)
        assert_string_not_equal(req->reply.headers[i][0], "Vary"); /* gRPC replies are never compressed */
    if (!req->reply.stream) {
        *len = (size_t)req->reply.body_len;
        uint8_t *p = malloc(*len ? *len : 1);
        memcpy(p, req->reply.body, *len);
        return p;
    }
    uint64_t size = tiled_stream_size(req->reply.stream);
    assert_true(size != UINT64_MAX); /* a gRPC message's length is known up front */
    uint8_t *p = malloc(size ? size : 1);
    struct fake_conn *c = req->conn;
    uint64_t pos = 0;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        int resumes = c->resumes;
        pthread_mutex_unlock(&c->lock);
        long n = tiled_stream_read(req->reply.stream, pos, (char *)p + pos, (size_t)(size - pos));
        assert_true(n != TILED_STREAM_ERROR);
        if (n == TILED_STREAM_END)
            break;
        if (n == 0) { /* not ready: the producer resumes the connection */
            pthread_mutex_lock(&c->lock);
            while (c->resumes == resumes)
                pthread_cond_wait(&c->woken, &c->lock);
            pthread_mutex_unlock(&c->lock);
        }
        pos += (uint64_t)n;
    }
    assert_int_equal(pos, size);
    *len = (size_t)size;
    return p;
}

/* The reply's one output: datatype, shape and its raw_output_contents. */
struct infer_out {
    char datatype[16];
    int rank;
    int64_t shape[8];
    const uint8_t *raw;
    size_t raw_len;
};

static void read_output(const uint8_t *p, size_t len, const char *version, const char *id, struct infer_out *o)
{
    expect_str(p, len, 1, 0, "tile");
    expect_str(p, len, 2, 0, version);
    struct tile_pb_field f, t;
    if (id)
        expect_str(p, len, 3, 0, id);
    else
        assert_int_equal(field(p, len, 3, 0, &f), 0);
    assert_int_equal(field(p, len, 5, 0, &t), 1);
    assert_int_equal(field(p, len, 5, 1, &f), 0); /* one output */
    assert_int_equal(field_of(&t, 1, 0, &f), 1);
    assert_true(field_is(&f, "output"));
    assert_int_equal(field_of(&t, 2, 0, &f), 1);
    assert_true(f.len < sizeof(o->datatype));
    memcpy(o->datatype, f.data, f.len);
    o->datatype[f.len] = '\0';
    struct dims d = {.n = 0};
    struct tile_error e = {0};
    if (field_of(&t, 3, 0, &f))
        assert_int_equal(tile_pb_scalars(&f, TILE_PB_VARINT, collect_dim, &d, "shape", &e), 0);
    o->rank = (int)d.n;
    memcpy(o->shape, d.v, sizeof(d.v));
    assert_int_equal(field(p, len, 6, 0, &f), 1); /* raw_output_contents, always (Triton's and tritonclient's way) */
    assert_int_equal(field(p, len, 6, 1, &t), 0);
    o->raw = f.data;
    o->raw_len = f.len;
}

/* Runs `q`; the reply names `version` and `id`, and *o points into the
 * returned copy of its message (free it). */
static uint8_t *infer_ok(const struct infer_req *q, const char *version, const char *id, struct infer_out *o)
{
    struct tiled_req *req = infer(q);
    size_t len;
    uint8_t *p = whole_reply(req, &len);
    read_output(p, len, version, id, o);
    end(req);
    return p;
}

static const float in22[4] = {1, 2, 3, 4};
static const int64_t rep23[2] = {2, 3};

#define FP32_22 {.name = "input", .datatype = "FP32", .rank = 2, .shape = {2, 2}, .raw = in22, .raw_len = 16}
#define REPEATS(r, n) {.name = "repeats", .datatype = "INT64", .rank = 1, .shape = {n}, .raw = r, .raw_len = 8 * (n)}

/* Checks an FP32 output against index-by-index tiling of in22 ([2,2]). */
static void expect_tiled_22(const struct infer_out *o, int64_t rows, int64_t cols)
{
    assert_string_equal(o->datatype, "FP32");
    assert_int_equal(o->rank, 2);
    assert_int_equal(o->shape[0], rows);
    assert_int_equal(o->shape[1], cols);
    assert_int_equal(o->raw_len, (size_t)(rows * cols * 4));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            float v;
            memcpy(&v, o->raw + 4 * (i * cols + j), 4);
            assert_true(v == in22[(i % 2) * 2 + j % 2]);
        }
}

static void infer_raw(void **state)
{
    (void)state;
    const struct tensor_in in[] = {FP32_22, REPEATS(rep23, 2)};
    static const char *const versions[] = {"", "13", "6"};
    for (int v = 0; v < 3; v++) {
        struct infer_req q = {.version = versions[v], .id = "r1", .in = in, .nin = 2, .output = "output"};
        struct tiled_req *req = infer(&q);
        struct fake_conn *c = req->conn;
        assert_int_equal(c->suspends, 0); /* small: answered on the transport's thread */
        size_t len;
        uint8_t *p = whole_reply(req, &len);
        struct infer_out o;
        read_output(p, len, v == 2 ? "6" : "13", "r1", &o);
        expect_tiled_22(&o, 4, 6);
        free(p);
        end(req);
    }
    struct infer_req q = {.in = in, .nin = 2}; /* no outputs named: all of them; no id: none echoed */
    struct infer_out o;
    uint8_t *p = infer_ok(&q, "13", NULL, &o);
    expect_tiled_22(&o, 4, 6);
    free(p);
}

/* Typed contents: INT32 in int_contents, repeats in int64_contents, on
 * version 6; and version 1's tiles and axis. */
static void infer_typed_and_version1(void **state)
{
    (void)state;
    struct msg ints = {.len = 0}, reps = {.len = 0};
    for (int i = 1; i <= 3; i++)
        put_varint(&ints, 2, (uint64_t)(int64_t)-i);
    put_varint(&reps, 3, 2);
    const struct tensor_in in[] = {
        {.name = "input", .datatype = "INT32", .rank = 1, .shape = {3}, .contents = &ints},
        {.name = "repeats", .datatype = "INT64", .rank = 1, .shape = {1}, .contents = &reps},
    };
    struct infer_req q = {.version = "6", .in = in, .nin = 2};
    struct infer_out o;
    uint8_t *p = infer_ok(&q, "6", NULL, &o);
    assert_string_equal(o.datatype, "INT32");
    assert_int_equal(o.shape[0], 6);
    for (int i = 0; i < 6; i++) {
        int32_t v;
        memcpy(&v, o.raw + 4 * i, 4);
        assert_int_equal(v, -(i % 3 + 1));
    }
    free(p);

    static const int64_t tiles = 3, axis = 1;
    const struct tensor_in v1[] = {
        FP32_22,
        {.name = "tiles", .datatype = "INT64", .rank = 1, .shape = {1}, .raw = &tiles, .raw_len = 8},
        {.name = "axis", .datatype = "INT64", .rank = 1, .shape = {1}, .raw = &axis, .raw_len = 8},
    };
    q = (struct infer_req){.version = "1", .in = v1, .nin = 3};
    p = infer_ok(&q, "1", NULL, &o);
    expect_tiled_22(&o, 2, 6);
    free(p);
}

/* BYTES in and out: 4-byte little-endian lengths before each element. */
static void infer_bytes(void **state)
{
    (void)state;
    static const uint8_t strings[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
    static const int64_t two = 2;
    const struct tensor_in in[] = {
        {.name = "input", .datatype = "BYTES", .rank = 1, .shape = {2}, .raw = strings, .raw_len = sizeof(strings)},
        REPEATS(&two, 1),
    };
    struct infer_req q = {.in = in, .nin = 2, .output = "output"};
    struct infer_out o;
    uint8_t *p = infer_ok(&q, "13", NULL, &o);
    assert_string_equal(o.datatype, "BYTES");
    assert_int_equal(o.shape[0], 4);
    assert_int_equal(o.raw_len, 2 * sizeof(strings));
    assert_memory_equal(o.raw, strings, sizeof(strings));
    assert_memory_equal(o.raw + sizeof(strings), strings, sizeof(strings));
    free(p);
}

/* What a call's request holds in the budget once answered (memory.h): its
 * work record, its message once (the transport counts it as it arrives),
 * its decoded input (a string element a 16-byte reference, and the string
 * bytes) and its reply message. The call's own state is the transport's
 * account beside it (none here). All of it is given back at the end. */
static void infer_holds_its_message_input_and_reply_once(void **state)
{
    (void)state;
    static const uint8_t strings[] = {2, 0, 0, 0, 'a', 'b', 3, 0, 0, 0, 'c', 'd', 'e'};
    static const int64_t two = 2;
    const struct tensor_in fp32[] = {FP32_22, REPEATS(rep23, 2)};
    const struct tensor_in bytes[] = {
        {.name = "input", .datatype = "BYTES", .rank = 1, .shape = {2}, .raw = strings, .raw_len = sizeof(strings)},
        REPEATS(&two, 1),
    };
    const struct infer_req q[] = {{.in = fp32, .nin = 2}, {.in = bytes, .nin = 2}};
    const uint64_t input[] = {sizeof(in22), 2 * sizeof(struct tile_str) + 5};
    for (int i = 0; i < 2; i++) {
        struct msg *m = infer_msg(&q[i]);
        uint64_t before = atomic_load(&srv.memory.held);
        struct tiled_req *req = call(RPC "ModelInfer", m);
        size_t len;
        ok_reply(req, &len);
        assert_int_equal(req->mem_held, sizeof(struct tiled_v2_infer) + m->len + input[i] + len);
        assert_int_equal(atomic_load(&srv.memory.held), before + req->mem_held);
        end(req);
        assert_int_equal(atomic_load(&srv.memory.held), before);
        free(m);
    }
}

static void infer_semantics(void **state)
{
    (void)state;
    static const int64_t two = 2;
    const struct tensor_in in[] = {FP32_22, REPEATS(&two, 1)};
    struct infer_req q = {.in = in, .nin = 2};
    struct tiled_req *req = infer(&q); /* onnx: one repeat per axis */
    expect_grpc_error(req, TILED_GRPC_INVALID_ARGUMENT, "repeats");
    end(req);
    q.semantics = "numpy"; /* numpy.tile promotes the repeats */
    struct infer_out o;
    uint8_t *p = infer_ok(&q, "13", NULL, &o);
    expect_tiled_22(&o, 2, 4);
    free(p);
    q.semantics = "onnx1";
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "semantics onnx1 is served by model version 1");
    q.semantics = "nope";
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "nope");
}

/* The same rules and messages as HTTP v2, with Triton's gRPC codes. */
static void infer_errors(void **state)
{
    (void)state;
    const struct tensor_in ok[] = {FP32_22, REPEATS(rep23, 2)};
    struct infer_req q = {.model = "other", .in = ok, .nin = 2};
    infer_fails(&q, TILED_GRPC_NOT_FOUND, "unknown model 'other' (this server serves the model 'tile')");
    q = (struct infer_req){.version = "7", .in = ok, .nin = 2};
    infer_fails(&q, TILED_GRPC_NOT_FOUND, "unknown version 7 of model 'tile' (versions: 13, 6, 1)");
    q = (struct infer_req){.version = "0", .in = ok, .nin = 2};
    infer_fails(&q, TILED_GRPC_NOT_FOUND, "unknown version 0 of model 'tile' (versions: 13, 6, 1)");
    q = (struct infer_req){.in = ok, .nin = 2, .output = "out"};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "unknown output 'out' (the tile model has one output, 'output')");
    q = (struct infer_req){.in = ok, .nin = 1};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "missing input 'repeats'");
    const struct tensor_in extra[] = {FP32_22, REPEATS(rep23, 2), {.name = "tiles", .datatype = "INT64", .rank = 1,
                                                                    .shape = {1}, .raw = rep23, .raw_len = 8}};
    q = (struct infer_req){.in = extra, .nin = 3};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "unknown input 'tiles' for model version 13");
    const struct tensor_in twice[] = {FP32_22, FP32_22, REPEATS(rep23, 2)};
    q = (struct infer_req){.in = twice, .nin = 3};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "input 'input' is given twice");
    const struct tensor_in bf16[] = {{.name = "input", .datatype = "BF16", .rank = 1, .shape = {1}, .raw = in22,
                                      .raw_len = 2},
                                     REPEATS(rep23, 1)};
    q = (struct infer_req){.version = "6", .in = bf16, .nin = 2};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "datatype BF16 is not allowed by model version 6");
    const struct tensor_in short_raw[] = {{.name = "input", .datatype = "FP32", .rank = 2, .shape = {2, 2}, .raw = in22,
                                           .raw_len = 12},
                                          REPEATS(rep23, 2)};
    q = (struct infer_req){.in = short_raw, .nin = 2};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "input 'input': ");
    char long_id[300];
    memset(long_id, 'i', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    q = (struct infer_req){.id = long_id, .in = ok, .nin = 2};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "is too long (at most 255 bytes)");
    struct msg garbage = {.buf = {0x0a, 0x04, 't', 'i', 'l', 'e', 0x2a, 0x05, 0x0a}, .len = 9}; /* truncated input */
    call_fails(RPC "ModelInfer", &garbage, TILED_GRPC_INVALID_ARGUMENT, "not a valid protobuf message");
    static const int64_t big[2] = {1000000, 1000000};
    q = (struct infer_req){.in = (const struct tensor_in[]){FP32_22, REPEATS(big, 2)}, .nin = 2};
    infer_fails(&q, TILED_GRPC_RESOURCE_EXHAUSTED, "limit"); /* 16 TB of output: past --max-output */
    const struct tensor_in deep[] = {{.name = "input", .datatype = "FP32", .rank = 7, .shape = {1, 1, 1, 1, 1, 1, 1},
                                      .raw = in22, .raw_len = 4},
                                     REPEATS(rep23, 1)};
    int64_t max_rank = srv.lim.max_rank;
    srv.lim.max_rank = 6;
    q = (struct infer_req){.in = deep, .nin = 2};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "above the maximum rank of 6");
    srv.lim.max_rank = (int)max_rank;
}

/* Output size limits: --max-output for a materialised message, and
 * --max-grpc-message for any, naming the limit and the size. */
static void infer_limits(void **state)
{
    (void)state;
    const struct tensor_in in[] = {FP32_22, REPEATS(rep23, 2)}; /* 96 bytes of output */
    struct infer_req q = {.in = in, .nin = 2};
    int64_t max_message = srv.cfg.max_grpc_message;
    srv.cfg.max_grpc_message = 100;
    struct tiled_req *req = infer(&q);
    expect_grpc_error(req, TILED_GRPC_RESOURCE_EXHAUSTED, "exceeds the max-grpc-message limit of 100 bytes");
    assert_non_null(strstr(req->reply.message, "the response message of 1")); /* its size: head + 96 */
    end(req);
    srv.cfg.max_grpc_message = max_message;
    uint64_t max_output = srv.lim.max_output;
    srv.lim.max_output = 64;
    infer_fails(&q, TILED_GRPC_RESOURCE_EXHAUSTED, "exceeds the max-output limit of 64 bytes");
    srv.lim.max_output = max_output;
}

/* Above --stream-threshold the message is produced by a stream on the
 * workers, as an HTTP binary body is; above --inline-max the request runs
 * on a worker. */
static void infer_streamed(void **state)
{
    (void)state;
    static const int64_t reps[2] = {300, 200}; /* [600, 400] FP32: 960000 bytes */
    const struct tensor_in in[] = {FP32_22, REPEATS(reps, 2)};
    struct infer_req q = {.id = "big", .in = in, .nin = 2};
    int64_t threshold = srv.cfg.stream_threshold, chunk = srv.cfg.stream_chunk, inline_max = srv.cfg.inline_max;
    srv.cfg.stream_threshold = 4096;
    srv.cfg.stream_chunk = 65536;
    srv.cfg.inline_max = 0;
    struct tiled_req *req = infer(&q);
    struct fake_conn *c = req->conn;
    assert_int_equal(c->suspends >= 1, 1); /* handed to a worker */
    assert_non_null(req->reply.stream);
    size_t len;
    uint8_t *p = whole_reply(req, &len);
    struct infer_out o;
    read_output(p, len, "13", "big", &o);
    expect_tiled_22(&o, 600, 400);
    free(p);
    end(req);
    srv.cfg.stream_threshold = threshold;
    srv.cfg.stream_chunk = chunk;
    srv.cfg.inline_max = inline_max;
}

/* Statistics of the version the request addressed, as HTTP v2 keeps them. */
static void infer_statistics(void **state)
{
    (void)state;
    memset(&srv.v2_stats[1], 0, sizeof(srv.v2_stats[1]));
    const struct tensor_in in[] = {FP32_22, REPEATS(rep23, 2)};
    struct infer_req q = {.version = "6", .in = in, .nin = 2};
    end(infer(&q));
    end(infer(&q));
    q.output = "nope";
    end(infer(&q));
    assert_int_equal(atomic_load(&srv.v2_stats[1].success_count), 2);
    assert_int_equal(atomic_load(&srv.v2_stats[1].fail_count), 1);
    assert_true(atomic_load(&srv.v2_stats[1].last_ms) > 0);
    memset(&srv.v2_stats[1], 0, sizeof(srv.v2_stats[1]));
}

/* ---- shared memory ---------------------------------------------------------------- */

/* A POSIX shared-memory object of `size` bytes holding `data`, mapped. */
static void *make_object(const char *key, size_t size, const void *data, size_t len)
{
    int fd = shm_open(key, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)size), 0);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(p != MAP_FAILED);
    close(fd);
    memset(p, 0xEE, size);
    memcpy(p, data, len);
    return p;
}

static struct msg register_msg(const char *name, const char *key, uint64_t offset, uint64_t byte_size)
{
    struct msg m = {.len = 0};
    if (name)
        put_str(&m, 1, name);
    if (key)
        put_str(&m, 2, key);
    if (offset)
        put_varint(&m, 3, offset);
    if (byte_size)
        put_varint(&m, 4, byte_size);
    return m;
}

/* A successful call whose reply message is empty (register, unregister). */
static void call_empty(const char *path, const struct msg *m)
{
    struct tiled_req *req = call(path, m);
    size_t len;
    ok_reply(req, &len);
    assert_int_equal(len, 0);
    end(req);
}

/* The names of the regions a SystemSharedMemoryStatus reply lists (each
 * map entry's key, checked against its RegionStatus' name). */
static int status_names(const char *name, const char *names[4], uint64_t sizes[4])
{
    struct msg m = model_ref(name, NULL);
    struct tiled_req *req = call(RPC "SystemSharedMemoryStatus", &m);
    size_t len;
    const uint8_t *p = ok_reply(req, &len);
    struct tile_pb_field entry, key, status, f;
    int n = 0;
    static char text[4][64];
    while (n < 4 && field(p, len, 1, n, &entry)) {
        assert_int_equal(field_of(&entry, 1, 0, &key), 1);
        assert_int_equal(field_of(&entry, 2, 0, &status), 1);
        assert_int_equal(field_of(&status, 1, 0, &f), 1);
        assert_true(f.len == key.len && memcmp(f.data, key.data, f.len) == 0);
        snprintf(text[n], sizeof(text[n]), "%.*s", (int)f.len, f.data);
        names[n] = text[n];
        sizes[n] = varint_of(status.data, status.len, 4);
        n++;
    }
    end(req);
    return n;
}

static void shm_off(void **state)
{
    (void)state;
    struct msg none = {.len = 0}, named = model_ref("r", NULL), reg = register_msg("r", "/k", 0, 16);
    call_empty(RPC "SystemSharedMemoryStatus", &none); /* nothing registered: no regions */
    call_fails(RPC "SystemSharedMemoryRegister", &reg, TILED_GRPC_UNIMPLEMENTED,
               "shared memory is disabled on this server (start it with --shared-memory system)");
    call_fails(RPC "SystemSharedMemoryUnregister", &none, TILED_GRPC_UNIMPLEMENTED, "shared memory is disabled");
    /* CUDA: what clients that call it blindly need (perf_analyzer unregisters all at start) */
    call_empty(RPC "CudaSharedMemoryStatus", &none);
    call_fails(RPC "CudaSharedMemoryStatus", &named, TILED_GRPC_NOT_FOUND,
               "Unable to find cuda shared memory region: 'r'");
    call_fails(RPC "CudaSharedMemoryRegister", &reg, TILED_GRPC_UNIMPLEMENTED,
               "CUDA shared memory is not supported by this server");
    call_empty(RPC "CudaSharedMemoryUnregister", &none);
    call_empty(RPC "CudaSharedMemoryUnregister", &named);
    /* an infer request naming a region, with shared memory off */
    struct msg params = {.len = 0};
    put_param(&params, 4, "shared_memory_region", "r", 0);
    put_param(&params, 4, "shared_memory_byte_size", NULL, 16);
    const struct tensor_in in[] = {{.name = "input", .datatype = "FP32", .rank = 2, .shape = {2, 2}, .params = &params},
                                   REPEATS(rep23, 2)};
    struct infer_req q = {.in = in, .nin = 2};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT,
                "input 'input' names shared memory region 'r', but shared memory is not enabled on this server");
}

static char key_in[64], key_out[64];

static void shm_registry(void **state)
{
    (void)state;
    struct tile_error e = {0};
    struct tiled_shm_limits lim = {.max_regions = 8, .max_bytes = 1 << 20};
    srv.shm = tiled_shm_new(&lim, &e);
    assert_non_null(srv.shm);
    snprintf(key_in, sizeof(key_in), "/tiled-grpc-in-%d", (int)getpid());
    snprintf(key_out, sizeof(key_out), "/tiled-grpc-out-%d", (int)getpid());
    void *in_map = make_object(key_in, 4096, in22, sizeof(in22));
    struct msg reg = register_msg("in", key_in, 0, 16), reg_out = register_msg("out", key_out, 0, 0);
    call_empty(RPC "SystemSharedMemoryRegister", &reg);
    call_fails(RPC "SystemSharedMemoryRegister", &reg, TILED_GRPC_INVALID_ARGUMENT, "'in'"); /* already registered */
    struct msg noname = register_msg(NULL, key_in, 0, 16), badkey = register_msg("x", "/../etc", 0, 16);
    struct msg toobig = register_msg("x", key_in, 0, 8192);
    call_fails(RPC "SystemSharedMemoryRegister", &noname, TILED_GRPC_INVALID_ARGUMENT,
               "'region name' is necessary to register system shared memory region");
    call_fails(RPC "SystemSharedMemoryRegister", &badkey, TILED_GRPC_INVALID_ARGUMENT, "key");
    call_fails(RPC "SystemSharedMemoryRegister", &toobig, TILED_GRPC_INVALID_ARGUMENT, "'x'");
    call_fails(RPC "SystemSharedMemoryRegister", &reg_out, TILED_GRPC_INVALID_ARGUMENT, "out"); /* no object yet */
    void *out_map = make_object(key_out, 4096, "", 0);
    reg_out = register_msg("out", key_out, 0, 4096);
    call_empty(RPC "SystemSharedMemoryRegister", &reg_out);
    const char *names[4];
    uint64_t sizes[4];
    assert_int_equal(status_names(NULL, names, sizes), 2);
    assert_int_equal(status_names("out", names, sizes), 1);
    assert_string_equal(names[0], "out");
    assert_int_equal(sizes[0], 4096);
    struct msg nope = model_ref("nope", NULL);
    call_fails(RPC "SystemSharedMemoryStatus", &nope, TILED_GRPC_NOT_FOUND,
               "Unable to find system shared memory region: 'nope'");
    /* HTTP sees the same registry */
    json_t *http = http_json("/v2/systemsharedmemory/region/in/status");
    assert_string_equal(json_string_value(json_object_get(json_array_get(http, 0), "key")), key_in);
    json_decref(http);

    /* infer: input read from "in", output tiled into "out" at offset 64 */
    struct msg in_params = {.len = 0}, out_params = {.len = 0};
    put_param(&in_params, 4, "shared_memory_region", "in", 0);
    put_param(&in_params, 4, "shared_memory_byte_size", NULL, 16);
    put_param(&out_params, 2, "shared_memory_region", "out", 0);
    put_param(&out_params, 2, "shared_memory_byte_size", NULL, 200);
    put_param(&out_params, 2, "shared_memory_offset", NULL, 64);
    const struct tensor_in in[] = {{.name = "input", .datatype = "FP32", .rank = 2, .shape = {2, 2}, .params = &in_params},
                                   REPEATS(rep23, 2)};
    struct infer_req q = {.id = "s", .in = in, .nin = 2, .output = "output", .out_params = &out_params};
    struct infer_out o;
    uint8_t *p = infer_ok(&q, "13", "s", &o);
    assert_string_equal(o.datatype, "FP32");
    assert_int_equal(o.shape[0], 4);
    assert_int_equal(o.shape[1], 6);
    assert_int_equal(o.raw_len, 0); /* the output is in the region; its raw_output_contents slot stays, empty */
    free(p);
    struct infer_out in_region = {.datatype = "FP32", .rank = 2, .shape = {4, 6}, .raw = (uint8_t *)out_map + 64,
                                  .raw_len = 96};
    expect_tiled_22(&in_region, 4, 6);
    assert_int_equal(((uint8_t *)out_map)[63], 0xEE); /* nothing written before the offset */
    assert_int_equal(((uint8_t *)out_map)[64 + 96], 0xEE); /* nor after the output */

    /* the input from shared memory, the output in the message */
    q.output = NULL;
    p = infer_ok(&q, "13", "s", &o);
    expect_tiled_22(&o, 4, 6);
    free(p);

    /* errors: a region too small for the output, an input of the wrong size */
    struct msg small = {.len = 0};
    put_param(&small, 2, "shared_memory_region", "out", 0);
    put_param(&small, 2, "shared_memory_byte_size", NULL, 95);
    q = (struct infer_req){.in = in, .nin = 2, .output = "output", .out_params = &small};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT,
                "shared memory size specified with the request for output 'output' (95 bytes) should be at least 96 "
                "bytes to hold the results");
    struct msg wrong = {.len = 0};
    put_param(&wrong, 4, "shared_memory_region", "in", 0);
    put_param(&wrong, 4, "shared_memory_byte_size", NULL, 12);
    const struct tensor_in short_in[] = {{.name = "input", .datatype = "FP32", .rank = 2, .shape = {2, 2},
                                          .params = &wrong},
                                         REPEATS(rep23, 2)};
    q = (struct infer_req){.in = short_in, .nin = 2, .output = "output", .out_params = &out_params};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "shared_memory_byte_size 12");
    struct msg unknown = {.len = 0};
    put_param(&unknown, 2, "shared_memory_region", "gone", 0);
    put_param(&unknown, 2, "shared_memory_byte_size", NULL, 96);
    q = (struct infer_req){.in = in, .nin = 2, .output = "output", .out_params = &unknown};
    infer_fails(&q, TILED_GRPC_INVALID_ARGUMENT, "gone");

    /* unregister one (an unknown one too), then all */
    struct msg in_name = model_ref("in", NULL), all = {.len = 0};
    call_empty(RPC "SystemSharedMemoryUnregister", &in_name);
    call_empty(RPC "SystemSharedMemoryUnregister", &in_name);
    assert_int_equal(status_names(NULL, names, sizes), 1);
    assert_string_equal(names[0], "out");
    call_empty(RPC "SystemSharedMemoryUnregister", &all);
    assert_int_equal(status_names(NULL, names, sizes), 0);

    munmap(in_map, 4096);
    munmap(out_map, 4096);
    shm_unlink(key_in);
    shm_unlink(key_out);
    tiled_shm_free(srv.shm);
    srv.shm = NULL;
}

/* ---- metrics and access log ---------------------------------------------------------- */

/* The value of a metric line that starts with `series` (0 when absent). */
static uint64_t metric(const char *series)
{
    size_t len;
    struct tiled_metrics_gauges g;
    tiled_service_gauges(&srv, &g);
    char *text = tiled_metrics_render(&g, false, &len);
    assert_non_null(text);
    const char *line = strstr(text, series);
    uint64_t v = line ? strtoull(line + strlen(series), NULL, 10) : 0;
    free(text);
    return v;
}

static void metrics_by_transport(void **state)
{
    (void)state;
    static const char infer_ok[] =
        "tiled_requests_total{transport=\"grpc\",route=\"/v2/models/infer\",format=\"protobuf\",code=\"200\"} ";
    static const char infer_bad[] =
        "tiled_requests_total{transport=\"grpc\",route=\"/v2/models/infer\",format=\"protobuf\",code=\"400\"} ";
    static const char live[] = "tiled_requests_total{transport=\"grpc\",route=\"grpc\",format=\"protobuf\",code=\"200\"} ";
    static const char http_live[] = "tiled_requests_total{transport=\"http\",route=\"/v2/health\",format=\"none\",code=\"200\"} ";
    uint64_t ok0 = metric(infer_ok), bad0 = metric(infer_bad), live0 = metric(live), http0 = metric(http_live);
    const struct tensor_in in[] = {FP32_22, REPEATS(rep23, 2)};
    struct infer_req q = {.in = in, .nin = 2};
    end(infer(&q));
    q.output = "nope";
    end(infer(&q));
    struct msg empty = {.len = 0};
    assert_true(call_bool(RPC "ServerLive", &empty));
    json_decref(http_json("/v2/health/live"));
    assert_int_equal(metric(infer_ok) - ok0, 1);
    assert_int_equal(metric(infer_bad) - bad0, 1);
    assert_int_equal(metric(live) - live0, 1);
    assert_int_equal(metric(http_live) - http0, 1); /* HTTP's series are apart */
    assert_true(metric("tiled_request_bytes_total{transport=\"grpc\"} ") > 0);
    assert_true(metric("tiled_request_duration_seconds_count{transport=\"grpc\",route=\"/v2/models/infer\"} ") >= 2);
    assert_true(metric("tiled_request_duration_seconds_count{transport=\"grpc\",route=\"grpc\"} ") >= 1);
}

/* The access line names the transport. */
static void access_log_transport(void **state)
{
    (void)state;
    FILE *log = tmpfile();
    assert_non_null(log);
    int saved = dup(STDERR_FILENO);
    assert_int_equal(dup2(fileno(log), STDERR_FILENO), STDERR_FILENO);
    struct tiled_config cfg = srv.cfg;
    cfg.log_level = TILED_LOG_INFO;
    cfg.log_format = TILED_LOG_JSON;
    tiled_log_init(&cfg);
    struct msg empty = {.len = 0};
    call_bool(RPC "ServerLive", &empty);
    json_decref(http_json("/v2/health/live"));
    tiled_log_init(&srv.cfg);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char text[4096] = "";
    rewind(log);
    size_t n = fread(text, 1, sizeof(text) - 1, log);
    text[n] = '\0';
    fclose(log);
    char *second = strchr(text, '\n');
    assert_non_null(second);
    *second++ = '\0';
    json_t *grpc_line = json_loads(text, 0, NULL), *http_line = json_loads(second, JSON_DISABLE_EOF_CHECK, NULL);
    assert_non_null(grpc_line);
    assert_non_null(http_line);
    assert_string_equal(json_string_value(json_object_get(grpc_line, "event")), "access");
    assert_string_equal(json_string_value(json_object_get(grpc_line, "transport")), "grpc");
    assert_string_equal(json_string_value(json_object_get(grpc_line, "path")), RPC "ServerLive");
    assert_string_equal(json_string_value(json_object_get(http_line, "transport")), "http");
    json_decref(grpc_line);
    json_decref(http_line);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(server_health),
        cmocka_unit_test(model_errors),
        cmocka_unit_test(grpc_health_service),
        cmocka_unit_test(unknown_methods),
        cmocka_unit_test(server_metadata),
        cmocka_unit_test(model_metadata),
        cmocka_unit_test(model_config),
        cmocka_unit_test(model_statistics),
        cmocka_unit_test(infer_raw),
        cmocka_unit_test(infer_typed_and_version1),
        cmocka_unit_test(infer_bytes),
        cmocka_unit_test(infer_holds_its_message_input_and_reply_once),
        cmocka_unit_test(infer_semantics),
        cmocka_unit_test(infer_errors),
        cmocka_unit_test(infer_limits),
        cmocka_unit_test(infer_streamed),
        cmocka_unit_test(infer_statistics),
        cmocka_unit_test(shm_off),
        cmocka_unit_test(shm_registry),
        cmocka_unit_test(metrics_by_transport),
        cmocka_unit_test(access_log_transport),
    };
    return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
