/* ops.c - operator endpoints: health, Prometheus metrics and the API description. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"
#include "handlers.h"
#include "metrics.h"
#include "server.h"
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
    char *text = tiled_metrics_render(req->srv, om, &len);
    if (!text) {
        tiled_reply_error(&req->reply, TILED_UNAVAILABLE, "cannot render metrics: out of memory");
        return;
    }
    struct tiled_reply *r = &req->reply;
    r->status = TILED_OK;
    r->body = text;
    r->body_len = len;
    snprintf(r->content_type, sizeof(r->content_type), "%s",
             om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
                : "text/plain; version=0.0.4; charset=utf-8");
    /* Prometheus sends Accept-Encoding: gzip on every scrape; the text
     * shrinks about tenfold. Out of memory it goes uncompressed. */
    struct tile_error e;
    if (tiled_reply_compress(r, tiled_coding_negotiate(req->accept_encoding), &e) < 0)
        tile_error_clear(&e);
    tiled_reply_header(r, "Vary", "Accept, Accept-Encoding");
}

void tiled_handle_openapi(struct tiled_req *req)
{
    struct tiled_reply *r = &req->reply;
    r->body = malloc(tiled_openapi_json_len + 1);
    if (!r->body) {
        tiled_reply_error(r, TILED_UNAVAILABLE, "out of memory");
        return;
    }
    memcpy(r->body, tiled_openapi_json, tiled_openapi_json_len);
    r->body_len = tiled_openapi_json_len;
    r->status = TILED_OK;
    snprintf(r->content_type, sizeof(r->content_type), "application/json");
    /* 143 KB that browsers and API tools fetch with gzip offered: 21 KB
     * on the wire. Out of memory it goes uncompressed. */
    struct tile_error e;
    if (tiled_reply_compress(r, tiled_coding_negotiate(req->accept_encoding), &e) < 0)
        tile_error_clear(&e);
    tiled_reply_header(r, "Vary", "Accept-Encoding");
}

void tiled_handle_live(struct tiled_req *req)
{
    tiled_reply_doc(&req->reply, TILED_OK, json_pack("{s:b}", "live", 1));
}

void tiled_handle_ready(struct tiled_req *req)
{
    if (atomic_load(&req->srv->draining))
        tiled_reply_doc(&req->reply, TILED_UNAVAILABLE, json_pack("{s:b, s:s}", "ready", 0, "error", "draining"));
    else
        tiled_reply_doc(&req->reply, TILED_OK, json_pack("{s:b}", "ready", 1));
}
