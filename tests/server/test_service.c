/* test_service.c - the service and its handlers without a socket.
 *
 * A fake transport (fake_transport.h) drives requests through
 * service.h exactly as server/http/ does: routing, the API-key-free path,
 * body sizing, the /v1 and /v2 handlers' answers and errors, hand-off to
 * the worker pool, and the metrics the finished requests leave behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compress.h"
#include "fake_transport.h"
#include "handlers.h"
#include "log.h"
#include "metrics.h"
#include "route.h"
#include "router.h"
#include "server.h"
#include "service.h"
#include "v2_state.h"

#define srv fake_srv

static struct tiled_req *exchange(struct fake_conn *c, const char *method, const char *path, const char *body)
{
    return fake_exchange(&srv, c, TILED_TRANSPORT_HTTP, method, path, body, body ? strlen(body) : 0);
}

/* The reply body as JSON (asserting that it is JSON). */
static json_t *reply_json(const struct tiled_req *req)
{
    json_error_t err;
    json_t *doc = json_loadb(req->reply.body, (size_t)req->reply.body_len, 0, &err);
    if (!doc)
        fail_msg("reply is not JSON (%s): %.*s", err.text, (int)req->reply.body_len, req->reply.body);
    return doc;
}

/* The error message of an error reply with `status`. */
static void expect_error(struct tiled_req *req, int status, const char *contains)
{
    assert_int_equal(req->reply.status, status);
    json_t *doc = reply_json(req);
    const char *msg = json_string_value(json_object_get(doc, "error"));
    assert_non_null(msg);
    if (!strstr(msg, contains))
        fail_msg("error '%s' does not mention '%s'", msg, contains);
    json_decref(doc);
}

/* ---- routing and parsing ---------------------------------------------------- */

/* Every field the service reads has its name (lower case, as
 * http_head_index and gRPC metadata compare) and that name's length. */
static void field_names(void **state)
{
    (void)state;
    for (int f = 0; f < TILED_F_COUNT; f++) {
        assert_non_null(tiled_field_names[f]);
        assert_int_equal(strlen(tiled_field_names[f]), tiled_field_lens[f]);
        for (const char *p = tiled_field_names[f]; *p; p++)
            assert_true((*p >= 'a' && *p <= 'z') || *p == '-');
    }
}

static void routes(void **state)
{
    (void)state;
    char allow[64];
    const struct tiled_route *r = tiled_route_find(TILED_TRANSPORT_HTTP, "POST", "/v1/tile", allow, sizeof(allow));
    assert_non_null(r);
    assert_ptr_equal(r->handler, tiled_handle_tile);
    assert_int_equal(r->label, TILED_RL_V1_TILE);
    assert_true(r->needs_body);
    assert_null(tiled_route_find(TILED_TRANSPORT_HTTP, "GET", "/v1/tile", allow, sizeof(allow)));
    assert_string_equal(allow, "POST");
    assert_null(tiled_route_find(TILED_TRANSPORT_HTTP, "GET", "/nowhere", allow, sizeof(allow)));
    assert_string_equal(allow, "");
    r = tiled_route_find(TILED_TRANSPORT_HTTP, "HEAD", "/metrics", allow, sizeof(allow)); /* HEAD serves GET */
    assert_non_null(r);
    assert_ptr_equal(r->handler, tiled_handle_metrics);
    r = tiled_route_find(TILED_TRANSPORT_HTTP, "GET", "/v2/health/ready", allow, sizeof(allow));
    assert_true(r && r->open);
    r = tiled_route_find(TILED_TRANSPORT_HTTP, "DELETE", "/v2/models/tile/versions/6/infer", allow, sizeof(allow));
    assert_true(r && r->prefix && r->handler == tiled_handle_models); /* the handler checks the method */
    assert_false(tiled_method_serves("HEAD", "POST"));
    assert_string_equal(tiled_route_label_name(TILED_RL_HEALTH), "/v2/health");
}

static void negotiate(void **state)
{
    (void)state;
    enum tile_format f;
    assert_int_equal(tiled_negotiate_format("", TILE_FMT_NPY, &f), 0);
    assert_int_equal(f, TILE_FMT_NPY);
    assert_int_equal(tiled_negotiate_format("application/x-npy", TILE_FMT_JSON, &f), 0);
    assert_int_equal(f, TILE_FMT_NPY);
    assert_int_equal(tiled_negotiate_format("application/json;q=0.5, application/octet-stream", TILE_FMT_JSON, &f), 0);
    assert_int_equal(f, TILE_FMT_RAW);
    assert_int_equal(tiled_negotiate_format("text/html, */*;q=0.1", TILE_FMT_RAW, &f), 0);
    assert_int_equal(f, TILE_FMT_RAW);
    assert_int_equal(tiled_negotiate_format("text/html", TILE_FMT_JSON, &f), -1);
    /* The most specific range decides a format's weight (RFC 9110 12.5.1). */
    assert_int_equal(tiled_negotiate_format("application/json;q=0, */*", TILE_FMT_JSON, &f), 0);
    assert_int_equal(f, TILE_FMT_RAW);
    assert_int_equal(tiled_negotiate_format("*/*;q=0.9, application/json;q=0.5", TILE_FMT_JSON, &f), 0);
    assert_int_equal(f, TILE_FMT_RAW);
    assert_int_equal(tiled_negotiate_format("*/*, application/*;q=0.2, application/x-npy;q=0.1", TILE_FMT_NPY, &f), 0);
    assert_int_equal(f, TILE_FMT_JSON);
    assert_int_equal(tiled_negotiate_format("application/*;q=0.4, */*", TILE_FMT_RAW, &f), 0);
    assert_int_equal(f, TILE_FMT_RAW);
    assert_int_equal(tiled_negotiate_format("*/*;q=0.3, application/*;q=0", TILE_FMT_JSON, &f), -1);
    assert_int_equal(tiled_negotiate_format("Application/JSON;q=0.5;level=1, application/x-npy;q=0.5", TILE_FMT_RAW, &f), 0);
    assert_int_equal(f, TILE_FMT_JSON);
}

static void model_paths(void **state)
{
    (void)state;
    char model[16];
    const char *version, *action;
    size_t vlen;
    assert_true(tiled_split_model_path("tile", model, sizeof(model), &version, &vlen, &action));
    assert_string_equal(model, "tile");
    assert_int_equal(vlen, 0);
    assert_string_equal(action, "");
    assert_true(tiled_split_model_path("tile/versions/6/infer", model, sizeof(model), &version, &vlen, &action));
    assert_true(vlen == 1 && version[0] == '6');
    assert_string_equal(action, "infer");
    /* the version as gRPC's model_version reads it (tile_v2_version_parse) */
    assert_true(tiled_split_model_path("tile/versions/+13/ready", model, sizeof(model), &version, &vlen, &action));
    assert_true(vlen == 3 && !memcmp(version, "+13", 3));
    assert_string_equal(action, "ready");
    assert_true(tiled_split_model_path("other/ready", model, sizeof(model), &version, &vlen, &action));
    assert_string_equal(model, "other");
    assert_string_equal(action, "ready");
    assert_false(tiled_split_model_path("", model, sizeof(model), &version, &vlen, &action));
    assert_false(tiled_split_model_path("tile/versions/x/infer", model, sizeof(model), &version, &vlen, &action));
    assert_false(tiled_split_model_path("tile/versions//infer", model, sizeof(model), &version, &vlen, &action));
    assert_false(tiled_split_model_path("tile/versions/-6", model, sizeof(model), &version, &vlen, &action));
    assert_false(tiled_split_model_path("a-model-name-too-long-for-the-buffer", model, sizeof(model), &version, &vlen,
                                        &action));
}

static void lengths(void **state)
{
    (void)state;
    uint64_t n;
    assert_int_equal(tiled_parse_length("123", &n), 0);
    assert_int_equal(n, 123);
    assert_int_equal(tiled_parse_length("18446744073709551615", &n), 0);
    assert_true(n == UINT64_MAX);
    assert_int_equal(tiled_parse_length("18446744073709551616", &n), -1);
    assert_int_equal(tiled_parse_length("", &n), -1);
    assert_int_equal(tiled_parse_length("-1", &n), -1);
    assert_int_equal(tiled_parse_length("12 ", &n), -1);
    assert_int_equal(tiled_parse_length("0x10", &n), -1);
}

/* ---- the head ------------------------------------------------------------- */

static void unknown_endpoints(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = exchange(&c, "GET", "/nowhere", NULL);
    expect_error(req, TILED_NOT_FOUND, "no such endpoint: GET /nowhere");
    tiled_service_end(req, req->reply.status);
    req = exchange(&c, "PUT", "/v1/tile", NULL);
    expect_error(req, TILED_METHOD_NOT_ALLOWED, "allowed: POST");
    assert_string_equal(req->reply.headers[0][0], "Allow");
    assert_string_equal(req->reply.headers[0][1], "POST");
    tiled_service_end(req, req->reply.status);
}

/* The browser rules are the head's first step over HTTP: a page on another
 * origin gets its 403 before the route is looked up (not the 404 of an
 * unknown path), with Vary: Origin; its own origin goes on to the route. */
static void browser_rules(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Host", "127.0.0.1:8080");
    fake_conn_header(&c, "Origin", "https://elsewhere.example");
    struct tiled_req *req = exchange(&c, "GET", "/nowhere", NULL);
    expect_error(req, TILED_FORBIDDEN, "origin 'https://elsewhere.example'");
    assert_null(req->route);
    assert_int_equal(req->reply.vary, TILED_VARY_ORIGIN);
    tiled_service_end(req, req->reply.status);
    c.headers[1][1] = "http://127.0.0.1:8080";
    req = exchange(&c, "GET", "/nowhere", NULL);
    expect_error(req, TILED_NOT_FOUND, "no such endpoint");
    tiled_service_end(req, req->reply.status);
}

static void body_limits(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    const struct tiled_head head = {.method = "POST", .path = "/v1/tile", .header = fake_header};
    struct tiled_req *req = tiled_req_new(&srv, &head, &c, &fake_ops);
    assert_false(tiled_service_route(req, NULL));
    assert_true(tiled_service_expect_body(req, "999999999999")); /* above --max-body: refused before the upload */
    expect_error(req, TILED_TOO_LARGE, "exceeds the max-body limit");
    tiled_service_end(req, req->reply.status);
    req = tiled_req_new(&srv, &head, &c, &fake_ops);
    assert_false(tiled_service_route(req, NULL));
    assert_true(tiled_service_expect_body(req, "12abc"));
    expect_error(req, TILED_BAD_REQUEST, "Content-Length '12abc'");
    tiled_service_end(req, req->reply.status);
}

/* ---- /v1 ------------------------------------------------------------------ */

static const char v1_body[] = "{\"input\": {\"dtype\": \"int32\", \"shape\": [2], \"data\": [7, 8]}, \"repeats\": [3]}";

static void v1_tiles_json(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Content-Type", "application/json");
    struct tiled_req *req = exchange(&c, "POST", "/v1/tile", v1_body);
    assert_int_equal(req->reply.status, TILED_OK);
    assert_int_equal(c.suspends, 0); /* small: answered on the transport's thread */
    json_t *doc = reply_json(req);
    json_t *out = json_object_get(doc, "output");
    assert_string_equal(json_string_value(json_object_get(out, "dtype")), "int32");
    json_t *data = json_object_get(out, "data");
    assert_int_equal(json_array_size(data), 6);
    static const int want[] = {7, 8, 7, 8, 7, 8};
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(json_integer_value(json_array_get(data, i)), want[i]);
    assert_non_null(json_object_get(doc, "metrics"));
    json_decref(doc);
    tiled_service_end(req, req->reply.status);
}

static void v1_raw_output_headers(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Content-Type", "application/json");
    fake_conn_header(&c, "Accept", "application/octet-stream");
    struct tiled_req *req = exchange(&c, "POST", "/v1/tile", v1_body);
    assert_int_equal(req->reply.status, TILED_OK);
    assert_string_equal(req->reply.content_type, "application/octet-stream");
    assert_int_equal(req->reply.body_len, 6 * 4);
    int32_t got[6];
    memcpy(got, req->reply.body, sizeof(got));
    assert_int_equal(got[0], 7);
    assert_int_equal(got[5], 8);
    bool shape = false;
    for (int i = 0; i < req->reply.nheaders; i++)
        shape |= strcmp(req->reply.headers[i][0], "X-Tensor-Shape") == 0 && strcmp(req->reply.headers[i][1], "[6]") == 0;
    assert_true(shape);
    tiled_service_end(req, req->reply.status);
}

/* A raw body's tensor is described by the query, which the transport
 * lends the request (split and decoded, as HTTP's is); more parameters
 * than a request holds are refused from the head. */
static void v1_reads_the_query_it_is_lent(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Content-Type", "application/octet-stream");
    fake_conn_query(&c, "dtype", "int32");
    fake_conn_query(&c, "shape", "2");
    fake_conn_query(&c, "repeats", "3");
    static const int32_t in[2] = {7, 8};
    struct tiled_req *req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "POST", "/v1/tile", in, sizeof(in));
    assert_int_equal(req->reply.status, TILED_OK);
    assert_int_equal(req->reply.body_len, 6 * 4);
    int32_t got[6];
    memcpy(got, req->reply.body, sizeof(got));
    for (int i = 0; i < 6; i++)
        assert_int_equal(got[i], in[i % 2]);
    tiled_service_end(req, req->reply.status);

    for (int i = c.nquery; i <= TILED_QUERY_MAX; i++)
        fake_conn_query(&c, "axis", "0");
    req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "POST", "/v1/tile", in, sizeof(in));
    expect_error(req, TILED_BAD_REQUEST, "too many query parameters");
    tiled_service_end(req, req->reply.status);
}

/* Only a request that tiles carries a work record (work.h): /v1 once its
 * head check passed, not one that check refused, nor a health check. */
static void only_a_request_that_tiles_has_a_work_record(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = exchange(&c, "GET", "/v2/health/live", NULL);
    assert_int_equal(req->reply.status, TILED_OK);
    assert_null(req->work);
    tiled_service_end(req, req->reply.status);
    req = exchange(&c, "POST", "/v1/tile", v1_body); /* no Content-Type: refused by the head check */
    assert_int_equal(req->reply.status, TILED_UNSUPPORTED_MEDIA_TYPE);
    assert_null(req->work);
    tiled_service_end(req, req->reply.status);
    fake_conn_header(&c, "Content-Type", "application/json");
    req = exchange(&c, "POST", "/v1/tile", v1_body);
    assert_int_equal(req->reply.status, TILED_OK);
    assert_non_null(req->work);
    tiled_service_end(req, req->reply.status); /* frees it (ASan: no leak) */
}

static void v1_errors(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = exchange(&c, "POST", "/v1/tile", v1_body);
    expect_error(req, TILED_UNSUPPORTED_MEDIA_TYPE, "missing Content-Type");
    tiled_service_end(req, req->reply.status);
    fake_conn_header(&c, "Content-Type", "application/json");
    req = exchange(&c, "POST", "/v1/tile", "{\"input\": ");
    expect_error(req, TILED_BAD_REQUEST, "invalid JSON");
    tiled_service_end(req, req->reply.status);
    req = exchange(&c, "POST", "/v1/tile", "{\"input\": {\"dtype\": \"int32\", \"shape\": [2], \"data\": [1, 2]}}");
    expect_error(req, TILED_BAD_REQUEST, "repeats");
    tiled_service_end(req, req->reply.status);
    fake_conn_header(&c, "Accept", "text/html");
    req = exchange(&c, "POST", "/v1/tile", v1_body);
    expect_error(req, TILED_NOT_ACCEPTABLE, "cannot produce any type in Accept 'text/html'");
    tiled_service_end(req, req->reply.status);
}

/* Work above --inline-max goes to the pool: the connection is suspended
 * before the worker resumes it, and the reply is there when it does. */
static void v1_on_a_worker(void **state)
{
    (void)state;
    int64_t inline_max = srv.cfg.inline_max;
    srv.cfg.inline_max = 0;
    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Content-Type", "application/json");
    struct tiled_req *req = exchange(&c, "POST", "/v1/tile", v1_body);
    srv.cfg.inline_max = inline_max;
    assert_int_equal(c.suspends, 1);
    assert_int_equal(c.resumes, 1);
    assert_int_equal(req->reply.status, TILED_OK);
    json_t *doc = reply_json(req);
    assert_int_equal(json_array_size(json_object_get(json_object_get(doc, "output"), "data")), 6);
    json_decref(doc);
    tiled_service_end(req, req->reply.status);
}

/* ---- /v2 ------------------------------------------------------------------ */

static void v2_metadata(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = exchange(&c, "GET", "/v2/models/tile", NULL);
    assert_int_equal(req->reply.status, TILED_OK);
    json_t *doc = reply_json(req);
    json_t *versions = json_object_get(doc, "versions");
    assert_int_equal(json_array_size(versions), TILE_V2_NVERSIONS);
    assert_string_equal(json_string_value(json_array_get(versions, 0)), "1");
    json_t *in = json_array_get(json_object_get(doc, "inputs"), 1);
    assert_string_equal(json_string_value(json_object_get(in, "name")), "repeats");
    assert_string_equal(json_string_value(json_object_get(in, "datatype")), "INT64");
    json_decref(doc);
    tiled_service_end(req, req->reply.status);

    req = exchange(&c, "GET", "/v2/models/tile/versions/1/config", NULL);
    assert_int_equal(req->reply.status, TILED_OK);
    doc = reply_json(req);
    in = json_array_get(json_object_get(doc, "input"), 1);
    assert_string_equal(json_string_value(json_object_get(in, "name")), "tiles");
    assert_string_equal(json_string_value(json_object_get(in, "data_type")), "TYPE_INT64");
    json_decref(doc);
    tiled_service_end(req, req->reply.status);
}

static void v2_infer(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = exchange(&c, "POST", "/v2/models/tile/versions/6/infer",
                                     "{\"id\": \"r1\", \"inputs\": ["
                                     "{\"name\": \"input\", \"shape\": [2], \"datatype\": \"INT32\", \"data\": [7, 8]},"
                                     "{\"name\": \"repeats\", \"shape\": [1], \"datatype\": \"INT64\", \"data\": [2]}]}");
    assert_int_equal(req->reply.status, TILED_OK);
    json_t *doc = reply_json(req);
    assert_string_equal(json_string_value(json_object_get(doc, "id")), "r1");
    assert_string_equal(json_string_value(json_object_get(doc, "model_version")), "6");
    json_t *out = json_array_get(json_object_get(doc, "outputs"), 0);
    assert_string_equal(json_string_value(json_object_get(out, "datatype")), "INT32");
    json_t *data = json_object_get(out, "data");
    assert_int_equal(json_array_size(data), 4);
    assert_int_equal(json_integer_value(json_array_get(data, 3)), 8);
    json_decref(doc);
    tiled_service_end(req, req->reply.status);
}

static void v2_errors(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    struct tiled_req *req = exchange(&c, "GET", "/v2/models/tile/versions/7", NULL);
    expect_error(req, TILED_NOT_FOUND, "unknown version 7 of model 'tile' (versions: 13, 6, 1)");
    tiled_service_end(req, req->reply.status);
    req = exchange(&c, "GET", "/v2/models/other", NULL);
    expect_error(req, TILED_NOT_FOUND, "unknown model 'other'");
    tiled_service_end(req, req->reply.status);
    req = exchange(&c, "POST", "/v2/models/tile/ready", "{}");
    expect_error(req, TILED_METHOD_NOT_ALLOWED, "allowed: GET");
    tiled_service_end(req, req->reply.status);
    req = exchange(&c, "POST", "/v2/models/tile/infer", "{\"inputs\": []}");
    expect_error(req, TILED_BAD_REQUEST, "input");
    tiled_service_end(req, req->reply.status);
}

/* ---- what a request holds (memory.h) ------------------------------------------- */

/* What a v2 infer answered with `status` holds in the budget beside its
 * reply's bytes (the server's total is its own, and all of it is given
 * back at its end). */
static uint64_t held_beside_reply(struct fake_conn *c, const char *body, size_t len, int status)
{
    uint64_t before = atomic_load(&srv.memory.held);
    struct tiled_req *req = fake_exchange(&srv, c, TILED_TRANSPORT_HTTP, "POST", "/v2/models/tile/infer", body, len);
    if (req->reply.status != status)
        fail_msg("status %d: %.*s", req->reply.status, (int)req->reply.body_len, req->reply.body);
    uint64_t held = req->mem_held;
    assert_int_equal(atomic_load(&srv.memory.held), before + held);
    uint64_t reply = req->reply.body_len;
    tiled_service_end(req, req->reply.status);
    assert_int_equal(atomic_load(&srv.memory.held), before);
    return held - (status == TILED_OK ? reply : 0);
}

/* A v2 infer holds its work record, its body as it arrived and a
 * compressed body's inflated copy, its decoded input (a string element a
 * 16-byte reference, and the string bytes) and its reply: each once. */
static void a_request_holds_its_body_input_and_reply_once(void **state)
{
    (void)state;
    static const char fp64[] = "{\"inputs\": [{\"name\": \"input\", \"shape\": [4], \"datatype\": \"FP64\", "
                               "\"data\": [1, 2, 3, 4]}, {\"name\": \"repeats\", \"shape\": [1], \"datatype\": "
                               "\"INT64\", \"data\": [3]}]}";
    static const char strings[] = "{\"inputs\": [{\"name\": \"input\", \"shape\": [2], \"datatype\": \"BYTES\", "
                                  "\"data\": [\"ab\", \"cde\"]}, {\"name\": \"repeats\", \"shape\": [1], "
                                  "\"datatype\": \"INT64\", \"data\": [2]}]}";
    const uint64_t record = sizeof(struct tiled_v2_infer);
    struct fake_conn c;
    fake_conn_init(&c);
    /* Refused at decode: the record and the body, nothing decoded. */
    assert_int_equal(held_beside_reply(&c, "{}", 2, TILED_BAD_REQUEST), record + 2);
    assert_int_equal(held_beside_reply(&c, fp64, strlen(fp64), TILED_OK), record + strlen(fp64) + 4 * sizeof(double));
    assert_int_equal(held_beside_reply(&c, strings, strlen(strings), TILED_OK),
                     record + strlen(strings) + 2 * sizeof(struct tile_str) + 5);
    /* Compressed: the body as it came and its inflated copy (on a worker). */
    char *gz;
    uint64_t gz_len;
    struct tile_error e = {0};
    assert_int_equal(tiled_compress(TILED_CODING_GZIP, fp64, strlen(fp64), &gz, &gz_len, &e), 1);
    fake_conn_header(&c, "Content-Encoding", "gzip");
    assert_int_equal(held_beside_reply(&c, gz, (size_t)gz_len, TILED_OK),
                     record + gz_len + strlen(fp64) + 4 * sizeof(double));
    free(gz);
}

/* ---- what finished requests leave behind ------------------------------------ */

static void metrics_count_requests(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Content-Type", "application/json");
    for (int i = 0; i < 3; i++) {
        struct tiled_req *req = exchange(&c, "POST", "/v1/tile", v1_body);
        tiled_service_end(req, req->reply.status);
    }
    struct tiled_req *req = exchange(&c, "GET", "/metrics", NULL);
    assert_int_equal(req->reply.status, TILED_OK);
    assert_string_equal(req->reply.content_type, "text/plain; version=0.0.4; charset=utf-8");
    char *text = strndup(req->reply.body, (size_t)req->reply.body_len);
    /* Earlier tests finished more /v1 requests: at least these three. */
    const char *line = strstr(text, "tiled_requests_total{transport=\"http\",route=\"/v1/tile\",format=\"json\",code=\"200\"} ");
    assert_non_null(line);
    assert_true(strtoull(line + strlen("tiled_requests_total{transport=\"http\",route=\"/v1/tile\",format=\"json\",code=\"200\"} "),
                         NULL, 10) >= 3);
    assert_non_null(strstr(text, "tiled_requests_total{transport=\"http\",route=\"other\",format=\"none\",code=\"404\"} "));
    assert_non_null(strstr(text, "# TYPE tiled_request_duration_seconds histogram"));
    assert_non_null(strstr(text, "tiled_inflight_requests 1\n")); /* the scrape itself */
    free(text);
    tiled_service_end(req, req->reply.status);
}

static int released;

static void count_release(void *body)
{
    released++;
    free(body);
}

/* An error replacing a body that has its own release (a pooled output
 * body) gives it back through that release, and the error's document is
 * then freed as the plain allocation it is. */
static void error_replaces_a_body_through_its_release(void **state)
{
    (void)state;
    struct tiled_reply r = {0};
    char *body = strdup("{\"output\":1}");
    tiled_reply_set_body(&r, body, strlen(body), count_release);
    released = 0;
    tiled_reply_error(&r, TILED_BAD_REQUEST, "late: %d", 7);
    assert_int_equal(released, 1);
    assert_int_equal(r.status, TILED_BAD_REQUEST);
    assert_non_null(strstr(r.body, "late: 7"));
    assert_int_equal(r.body_len, strlen(r.body));
    tiled_reply_free(&r);
    assert_int_equal(released, 1);
}

/* Server-Timing: each phase's microseconds as milliseconds with three
 * decimals, whatever their size; too small a buffer gets nothing. */
static void server_timing_text(void **state)
{
    (void)state;
    struct tile_timings tm = {.queue_us = 0, .decode_us = 44, .tile_us = 1234567, .encode_us = 999, .total_us = 1000};
    char buf[256];
    tiled_server_timing(&tm, buf, sizeof(buf));
    assert_string_equal(buf, "queue;dur=0.000, decode;dur=0.044, tile;dur=1234.567, encode;dur=0.999, total;dur=1.000");
    tm = (struct tile_timings){.queue_us = UINT64_MAX, .decode_us = 10, .tile_us = 100, .encode_us = 100000,
                               .total_us = 18446744073709551};
    tiled_server_timing(&tm, buf, sizeof(buf));
    assert_string_equal(buf, "queue;dur=18446744073709551.615, decode;dur=0.010, tile;dur=0.100, encode;dur=100.000, "
                             "total;dur=18446744073709.551");
    tm.tile_us = tm.encode_us = tm.total_us = tm.decode_us = UINT64_MAX; /* the longest text: it fits the bound */
    memset(buf, '#', sizeof(buf));
    tiled_server_timing(&tm, buf, TILED_SERVER_TIMING_MAX);
    assert_true(strlen(buf) < TILED_SERVER_TIMING_MAX);
    assert_int_equal(strlen(buf), 10 + 13 + 11 + 13 + 12 + 5 * 21);
    for (size_t i = strlen(buf) + 1; i < sizeof(buf); i++)
        assert_int_equal(buf[i], '#');
    tiled_server_timing(&tm, buf, TILED_SERVER_TIMING_MAX - 1);
    assert_string_equal(buf, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(field_names),
        cmocka_unit_test(routes),
        cmocka_unit_test(negotiate),
        cmocka_unit_test(model_paths),
        cmocka_unit_test(lengths),
        cmocka_unit_test(unknown_endpoints),
        cmocka_unit_test(browser_rules),
        cmocka_unit_test(body_limits),
        cmocka_unit_test(v1_tiles_json),
        cmocka_unit_test(v1_raw_output_headers),
        cmocka_unit_test(v1_reads_the_query_it_is_lent),
        cmocka_unit_test(only_a_request_that_tiles_has_a_work_record),
        cmocka_unit_test(v1_errors),
        cmocka_unit_test(v1_on_a_worker),
        cmocka_unit_test(v2_metadata),
        cmocka_unit_test(v2_infer),
        cmocka_unit_test(v2_errors),
        cmocka_unit_test(a_request_holds_its_body_input_and_reply_once),
        cmocka_unit_test(metrics_count_requests),
        cmocka_unit_test(error_replaces_a_body_through_its_release),
        cmocka_unit_test(server_timing_text),
    };
    return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
