/* ops.c - operator endpoints: health, Prometheus metrics, the API
 * description, and OPTIONS * (what the server implements). */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caching.h"
#include "compress.h"
#include "handlers.h"
#include "metrics.h"
#include "server.h"
#include "service.h"
#include "text.h"

/* The OpenAPI document (api/openapi.json), embedded at build time. */
extern const unsigned char tiled_openapi_json[];
extern const size_t tiled_openapi_json_len;

/* OpenMetrics when the scraper lists it at all (Prometheus puts it first,
 * and no scraper lists it only to refuse it): q-values are not weighed. */
static bool wants_openmetrics(const char *accept)
{
    return strcasestr(accept, "application/openmetrics-text") != NULL;
}

void tiled_handle_metrics(struct tiled_req *req)
{
    size_t len;
    bool om = wants_openmetrics(req->accept);
    struct tiled_metrics_gauges g;
    tiled_service_gauges(req->srv, &g);
    char *text = tiled_metrics_render(&g, om, &len);
    if (!text) {
        tiled_reply_error(&req->reply, TILED_UNAVAILABLE, "cannot render metrics: out of memory");
        return;
    }
    struct tiled_reply *r = &req->reply;
    r->status = TILED_OK;
    r->body = text;
    r->body_len = len;
    r->content_type = om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                         : "text/plain; version=0.0.4; charset=utf-8";
    tiled_cache_no_store(r); /* counters: stale as soon as they are sent */
    /* Prometheus sends Accept-Encoding: gzip on every scrape; the text
     * shrinks about tenfold. Out of memory it goes uncompressed. */
    struct tile_error e;
    if (tiled_reply_compress(r, tiled_coding_negotiate(req->accept_encoding), &e) < 0)
        tile_error_clear(&e);
    tiled_reply_vary(r, TILED_VARY_ACCEPT); /* OpenMetrics or Prometheus' text */
    tiled_reply_vary(r, TILED_VARY_ACCEPT_ENCODING);
}

/* The document as sent with one coding: its bytes, held for the life of
 * the process. */
struct openapi_form {
    const char *body;
    uint64_t len;
};

/* The document compressed with `c`, made on first use and kept: it is
 * fixed at build time, so no request compresses it again, and a 304 knows
 * the length its 200 would have. Two threads that both find it missing
 * make it both; the first to store it wins. NULL when it cannot be made
 * (out of memory, or deflate failed). */
static const struct openapi_form *openapi_compressed(enum tiled_coding c)
{
    static _Atomic(struct openapi_form *) forms[TILED_CODING_DEFLATE + 1];
    struct openapi_form *f = atomic_load(&forms[c]);
    if (f)
        return f;
    char *out = NULL;
    uint64_t n;
    struct tile_error e;
    int rc = tiled_compress(c, tiled_openapi_json, tiled_openapi_json_len, &out, &n, &e);
    if (rc < 0)
        tile_error_clear(&e);
    if (rc <= 0 || !(f = malloc(sizeof(*f)))) {
        free(out);
        return NULL;
    }
    *f = (struct openapi_form){out, n};
    struct openapi_form *first = NULL;
    if (atomic_compare_exchange_strong(&forms[c], &first, f))
        return f;
    free(out);
    free(f);
    return first;
}

/* The document's hash, taken once (caching.h): threads that both find it
 * untaken compute the same value. */
static uint64_t openapi_hash(void)
{
    static _Atomic uint64_t hash;
    uint64_t h = atomic_load_explicit(&hash, memory_order_relaxed);
    if (!h) {
        h = tiled_etag_hash(tiled_openapi_json, tiled_openapi_json_len);
        atomic_store_explicit(&hash, h, memory_order_relaxed);
    }
    return h;
}

/* A kept form is the reply's body without being the reply's to free. */
static void keep_form(void *body)
{
    (void)body;
}

void tiled_handle_openapi(struct tiled_req *req)
{
    struct tiled_reply *r = &req->reply;
    /* 143 KB that browsers and API tools fetch with gzip offered: 21 KB
     * on the wire. Out of memory it goes uncompressed, tagged as such. */
    enum tiled_coding coding = tiled_coding_sent(tiled_coding_negotiate(req->accept_encoding), tiled_openapi_json_len);
    const struct openapi_form plain = {(const char *)tiled_openapi_json, tiled_openapi_json_len};
    const struct openapi_form *form = coding == TILED_CODING_IDENTITY ? &plain : openapi_compressed(coding);
    if (!form) {
        coding = TILED_CODING_IDENTITY;
        form = &plain;
    }
    tiled_reply_vary(r, TILED_VARY_ACCEPT_ENCODING); /* on a 304 too: it keys the cache's copy */
    if (tiled_cache_preconditions(req, openapi_hash(), coding, form->len))
        return;
    r->status = TILED_OK;
    r->content_type = "application/json";
    tiled_reply_set_body(r, (char *)form->body, form->len, keep_form);
    if (coding != TILED_CODING_IDENTITY)
        tiled_reply_header(r, "Content-Encoding", tiled_coding_name(coding));
    tiled_cache_tag(r, openapi_hash(), coding);
}

void tiled_handle_server_options(struct tiled_req *req)
{
    req->reply.status = TILED_NO_CONTENT;
    tiled_reply_header(&req->reply, "Allow", TILED_SERVER_METHODS);
}

void tiled_handle_live(struct tiled_req *req)
{
    tiled_cache_no_store(&req->reply); /* a probe's answer is about now */
    tiled_reply_doc(&req->reply, TILED_OK, json_pack("{s:b}", "live", 1));
}

void tiled_handle_ready(struct tiled_req *req)
{
    tiled_cache_no_store(&req->reply);
    if (atomic_load(&req->srv->draining))
        tiled_reply_doc(&req->reply, TILED_UNAVAILABLE, json_pack("{s:b, s:s}", "ready", 0, "error", "draining"));
    else
        tiled_reply_doc(&req->reply, TILED_OK, json_pack("{s:b}", "ready", 1));
}
