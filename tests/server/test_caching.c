/* test_caching.c - entity tags, conditional requests and Cache-Control
 * (server/service/caching.c), alone and through the handlers with the
 * fake transport (fake_transport.h); and the methods the service answers
 * 501 and OPTIONS * for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "caching.h"
#include "fake_transport.h"
#include "service.h"

#define srv fake_srv

/* A header of the reply by name; NULL when absent. */
/* A reply header as the transports send it (Vary from the reply's set). */
static const char *reply_header(const struct tiled_reply *r, const char *name)
{
    static char vary[TILED_VARY_TEXT_MAX];
    if (strcasecmp(name, "Vary") == 0)
        return tiled_vary_text(r->vary, vary) ? vary : NULL;
    for (int i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->headers[i][0], name) == 0)
            return r->headers[i][1];
    }
    return NULL;
}

/* The connection of get()'s requests: a request keeps pointing to its
 * connection until it ends. */
static struct fake_conn get_conn;

static struct tiled_req *get(const char *path, const char *name, const char *value)
{
    fake_conn_init(&get_conn);
    if (name)
        fake_conn_header(&get_conn, name, value);
    return fake_exchange(&srv, &get_conn, TILED_TRANSPORT_HTTP, "GET", path, NULL, 0);
}

static void tags_and_their_format(void **state)
{
    (void)state;
    char tag[TILED_ETAG_MAX];
    tiled_etag_format(0x0123456789abcdefu, TILED_CODING_IDENTITY, tag);
    assert_string_equal(tag, "\"0123456789abcdef\"");
    tiled_etag_format(0x0123456789abcdefu, TILED_CODING_GZIP, tag);
    assert_string_equal(tag, "\"0123456789abcdef-gzip\"");
    tiled_etag_format(UINT64_MAX, TILED_CODING_DEFLATE, tag);
    assert_string_equal(tag, "\"ffffffffffffffff-deflate\"");
    /* FNV-1a's published values: the empty string and "a". */
    assert_true(tiled_etag_hash("", 0) == 0xcbf29ce484222325u);
    assert_true(tiled_etag_hash("a", 1) == 0xaf63dc4c8601ec8cu);
}

static void lists_of_tags(void **state)
{
    (void)state;
    const char *t = "\"abc\"";
    assert_true(tiled_etag_listed("\"abc\"", t, false));
    assert_true(tiled_etag_listed("*", t, false));
    assert_true(tiled_etag_listed(" \"x\" ,\t\"abc\"", t, false));
    assert_true(tiled_etag_listed("\"x,y\", \"abc\"", t, false)); /* a ',' inside a tag does not split it */
    assert_false(tiled_etag_listed("\"abcd\", \"ab\"", t, false));
    assert_false(tiled_etag_listed("abc", t, false));             /* unquoted: not an entity tag */
    assert_false(tiled_etag_listed("junk, \"abc\"", t, false));   /* reading stops at the junk */
    assert_false(tiled_etag_listed("\"abc", t, false));
    assert_false(tiled_etag_listed("", t, false));
    /* A weak tag matches by the weak comparison only (If-None-Match's). */
    assert_false(tiled_etag_listed("W/\"abc\"", t, false));
    assert_true(tiled_etag_listed("W/\"abc\"", t, true));
    assert_true(tiled_etag_listed("\"abc\"", t, true));
}

/* A fixed document is tagged and marked no-cache; a dynamic one no-store. */
static void cache_control_by_route(void **state)
{
    (void)state;
    static const char *const fixed[] = {"/v2", "/v2/models/tile", "/v2/models/tile/versions/6",
                                        "/v2/models/tile/config", "/v2/models/tile/versions/13/config",
                                        "/openapi.json"};
    static const char *const dynamic[] = {"/v2/health/live",  "/v2/health/ready",         "/v2/models/tile/ready",
                                          "/v2/models/stats", "/v2/models/tile/stats",    "/metrics",
                                          "/v2/systemsharedmemory/status"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        struct tiled_req *req = get(fixed[i], NULL, NULL);
        assert_int_equal(req->reply.status, TILED_OK);
        assert_string_equal(reply_header(&req->reply, "Cache-Control"), "no-cache");
        const char *etag = reply_header(&req->reply, "ETag");
        assert_non_null(etag);
        assert_int_equal(strlen(etag), 18); /* "16 hex digits" */
        tiled_service_end(req, req->reply.status);
    }
    for (size_t i = 0; i < sizeof(dynamic) / sizeof(dynamic[0]); i++) {
        struct tiled_req *req = get(dynamic[i], NULL, NULL);
        assert_int_equal(req->reply.status, TILED_OK);
        assert_string_equal(reply_header(&req->reply, "Cache-Control"), "no-store");
        assert_null(reply_header(&req->reply, "ETag"));
        tiled_service_end(req, req->reply.status);
    }
}

/* If-None-Match with the current tag: 304 without a body, the tag kept, its
 * length that of the 200's body; If-Match without it: 412. */
static void preconditions(void **state)
{
    (void)state;
    struct tiled_req *req = get("/v2/models/tile/config", NULL, NULL);
    char etag[TILED_ETAG_MAX];
    snprintf(etag, sizeof(etag), "%s", reply_header(&req->reply, "ETag"));
    uint64_t len = req->reply.body_len;
    tiled_service_end(req, req->reply.status);

    char list[64];
    snprintf(list, sizeof(list), "\"other\", %s", etag);
    const char *matching[] = {etag, list, "*"};
    for (size_t i = 0; i < 3; i++) {
        req = get("/v2/models/tile/config", "If-None-Match", matching[i]);
        assert_int_equal(req->reply.status, TILED_NOT_MODIFIED);
        assert_null(req->reply.body);
        assert_int_equal(req->reply.body_len, 0);
        assert_true(req->reply.validated_len == len);
        assert_string_equal(reply_header(&req->reply, "ETag"), etag);
        assert_string_equal(reply_header(&req->reply, "Cache-Control"), "no-cache");
        tiled_service_end(req, req->reply.status);
    }
    req = get("/v2/models/tile/config", "If-None-Match", "\"other\"");
    assert_int_equal(req->reply.status, TILED_OK);
    tiled_service_end(req, req->reply.status);

    req = get("/v2/models/tile/config", "If-Match", "\"other\"");
    assert_int_equal(req->reply.status, TILED_PRECONDITION_FAILED);
    assert_non_null(strstr(req->reply.body, "If-Match"));
    tiled_service_end(req, req->reply.status);
    const char *passing[] = {"*", etag};
    for (size_t i = 0; i < 2; i++) {
        req = get("/v2/models/tile/config", "If-Match", passing[i]);
        assert_int_equal(req->reply.status, TILED_OK);
        tiled_service_end(req, req->reply.status);
    }
    /* A dynamic answer has no tag to match: preconditions are not read. */
    req = get("/v2/health/live", "If-None-Match", "*");
    assert_int_equal(req->reply.status, TILED_OK);
    tiled_service_end(req, req->reply.status);
}

/* /openapi.json: one tag per coding, each answered 304 with its own length. */
static void openapi_per_coding(void **state)
{
    (void)state;
    struct tiled_req *req = get("/openapi.json", NULL, NULL);
    char plain[TILED_ETAG_MAX];
    snprintf(plain, sizeof(plain), "%s", reply_header(&req->reply, "ETag"));
    uint64_t plain_len = req->reply.body_len;
    tiled_service_end(req, req->reply.status);

    struct fake_conn c;
    fake_conn_init(&c);
    fake_conn_header(&c, "Accept-Encoding", "x-gzip");
    req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "GET", "/openapi.json", NULL, 0);
    assert_string_equal(reply_header(&req->reply, "Content-Encoding"), "gzip");
    char gz[TILED_ETAG_MAX];
    snprintf(gz, sizeof(gz), "%s", reply_header(&req->reply, "ETag"));
    uint64_t gz_len = req->reply.body_len;
    tiled_service_end(req, req->reply.status);
    assert_string_not_equal(plain, gz);
    assert_int_equal(strncmp(plain, gz, 17), 0); /* the same hash */
    assert_string_equal(gz + 17, "-gzip\"");
    assert_true(gz_len < plain_len);

    fake_conn_header(&c, "If-None-Match", gz);
    req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "GET", "/openapi.json", NULL, 0);
    assert_int_equal(req->reply.status, TILED_NOT_MODIFIED);
    assert_true(req->reply.validated_len == gz_len);
    assert_string_equal(reply_header(&req->reply, "Vary"), "Accept-Encoding");
    tiled_service_end(req, req->reply.status);
    /* The identity tag does not validate the gzip form. */
    fake_conn_init(&c);
    fake_conn_header(&c, "Accept-Encoding", "gzip");
    fake_conn_header(&c, "If-None-Match", plain);
    req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "GET", "/openapi.json", NULL, 0);
    assert_int_equal(req->reply.status, TILED_OK);
    tiled_service_end(req, req->reply.status);
}

/* A method HTTP does not define: 501 wherever it is sent; a method it
 * defines that the route does not serve: 405. OPTIONS *: the server's. */
static void methods(void **state)
{
    (void)state;
    struct fake_conn c;
    fake_conn_init(&c);
    const char *paths[] = {"/v2", "/v2/models/tile", "/nowhere", "*"};
    for (size_t i = 0; i < 4; i++) {
        struct tiled_req *req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "FOO", paths[i], NULL, 0);
        assert_int_equal(req->reply.status, TILED_NOT_IMPLEMENTED);
        tiled_service_end(req, req->reply.status);
    }
    struct tiled_req *req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "get", "/v2", NULL, 0);
    assert_int_equal(req->reply.status, TILED_NOT_IMPLEMENTED); /* methods are case-sensitive */
    tiled_service_end(req, req->reply.status);
    req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "DELETE", "/v2", NULL, 0);
    assert_int_equal(req->reply.status, TILED_METHOD_NOT_ALLOWED);
    assert_string_equal(reply_header(&req->reply, "Allow"), "GET, HEAD");
    tiled_service_end(req, req->reply.status);
    req = fake_exchange(&srv, &c, TILED_TRANSPORT_HTTP, "OPTIONS", "*", NULL, 0);
    assert_int_equal(req->reply.status, TILED_NO_CONTENT);
    assert_string_equal(reply_header(&req->reply, "Allow"), TILED_SERVER_METHODS);
    assert_null(req->reply.body);
    tiled_service_end(req, req->reply.status);
}

/* Vary lists each field once, in one header, in one order whatever the
 * order of the calls; a freed reply varies on nothing. */
static void one_vary(void **state)
{
    (void)state;
    struct tiled_reply r = {0};
    char text[TILED_VARY_TEXT_MAX];
    assert_int_equal(tiled_vary_text(r.vary, text), 0);
    assert_string_equal(text, "");
    tiled_reply_vary(&r, TILED_VARY_ACCEPT_ENCODING);
    tiled_reply_vary(&r, TILED_VARY_ACCEPT);
    tiled_reply_vary(&r, TILED_VARY_ACCEPT_ENCODING);
    assert_int_equal(r.nheaders, 0);
    assert_string_equal(reply_header(&r, "Vary"), "Accept, Accept-Encoding");
    tiled_reply_vary(&r, TILED_VARY_ORIGIN);
    assert_int_equal(tiled_vary_text(r.vary, text), strlen("Accept, Accept-Encoding, Origin"));
    assert_string_equal(text, "Accept, Accept-Encoding, Origin");
    tiled_reply_free(&r);
    assert_null(reply_header(&r, "Vary"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tags_and_their_format), cmocka_unit_test(lists_of_tags),
        cmocka_unit_test(cache_control_by_route), cmocka_unit_test(preconditions),
        cmocka_unit_test(openapi_per_coding),     cmocka_unit_test(methods),
        cmocka_unit_test(one_vary),
    };
    return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
