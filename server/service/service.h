/* service.h - a request's life in the daemon, whatever carries it.
 *
 * DESIGN. A transport (server/http/, the project's own HTTP/1.1;
 * server/grpc/, nghttp2) describes a request head (struct tiled_head), feeds the body,
 * and sends the struct tiled_reply it gets back. Between those the service
 * answers the browser rules (Origin, CORS preflight), routes, checks the API key and the
 * body's size, runs the handler, and admits the heavy part to the worker
 * pool, parking the request through the transport's connection hooks
 * (struct tiled_conn_ops) until a worker has the reply. Nothing here knows
 * about sockets or HTTP framing; the handlers (handlers.h) only see the
 * request and fill its reply, errors included (reply.h: one error route).
 *
 *     req = tiled_req_new(srv, &head, conn, &ops)
 *     tiled_service_browser(req, origin, ...)     -> decided? send reply (HTTP)
 *     tiled_service_route(req, authorization)     -> decided? send reply
 *     tiled_service_expect_body(req, length)      -> decided? send reply
 *     tiled_service_check_head(req)               -> decided? send reply
 *     tiled_service_body(req, bytes, n) ...
 *     tiled_service_dispatch(req)                 -> ready? send reply;
 *                                                    else wait for ops->resume, then send
 *     tiled_service_end(req, status)              (observers: log, metrics...; frees)
 *
 * (gRPC runs the head check with the call's head and expect_body once a
 * message's length is known, from its 5-byte prefix.)
 */
#ifndef TILED_SERVICE_H
#define TILED_SERVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

/* The request header fields the service and the transports read, by
 * number: the HTTP transport finds all of them in one pass over a head
 * (http_head_index), where looking each up by name scanned the fields
 * seventeen times a request; gRPC looks them up by name when asked. */
enum tiled_field {
    TILED_F_ACCEPT,
    TILED_F_ACCEPT_ENCODING,
    TILED_F_ACR_METHOD, /* Access-Control-Request-Method */
    TILED_F_AUTHORIZATION,
    TILED_F_CONTENT_ENCODING,
    TILED_F_CONTENT_LENGTH,
    TILED_F_CONTENT_TYPE,
    TILED_F_EXPECT,
    TILED_F_HOST,
    TILED_F_IF_MATCH,
    TILED_F_IF_NONE_MATCH,
    TILED_F_INFER_HEADER_LEN, /* Inference-Header-Content-Length */
    TILED_F_ORIGIN,
    TILED_F_TE,
    TILED_F_TRACEPARENT,
    TILED_F_TRACESTATE,
    TILED_F_REQUEST_ID, /* X-Request-Id */
    TILED_F_COUNT
};

/* Each field's name, lower case, and its length. */
extern const char *const tiled_field_names[TILED_F_COUNT];
extern const unsigned char tiled_field_lens[TILED_F_COUNT];

/* A request head, as the transport read it. Strings (and the query's
 * array) are borrowed and must stay valid until tiled_service_end(). */
struct tiled_head {
    enum tiled_transport transport;
    const char *method;
    const char *path;
    const char *remote; /* the client's address, for the access log (NULL: unknown) */
    /* The query's parameters, split and decoded (HTTP): the first nquery
     * of at most TILED_QUERY_MAX; query_overflow when it had more. */
    const struct tiled_kv *query;
    int nquery;
    bool query_overflow;
    /* The value of one of the fields the service reads, NULL when absent. */
    const char *(*header)(void *conn, enum tiled_field field);
};

/* A new request on `conn` (NULL when out of memory). */
struct tiled_req *tiled_req_new(struct tiled_server *srv, const struct tiled_head *head, void *conn,
                                const struct tiled_conn_ops *ops);

/* The browser rules (cors.h), from the head alone and before the route:
 * a page on another origin that may not call tiled gets a 403 (`origin`:
 * the Origin header, `host`: Host), and with --cors-origins a preflight
 * (`request_method`: Access-Control-Request-Method) its 204, before the
 * key check since browsers send no key with it. True when the reply is
 * decided. HTTP's first step; gRPC has no browsers to answer. */
bool tiled_service_browser(struct tiled_req *req, const char *origin, const char *host, const char *request_method);
/* Finds the route and checks the API key. True when the reply is decided
 * already (401, 404, 405; 501 for a method HTTP does not define, or an
 * unknown gRPC method): send it without reading the body. */
bool tiled_service_route(struct tiled_req *req, const char *authorization);
/* Sizes the body buffer from the declared length (NULL: unknown). True
 * when the reply is decided (400 for a length that is not a number, 413
 * above --max-body, 503 out of memory). */
bool tiled_service_expect_body(struct tiled_req *req, const char *content_length);
/* Runs the route's head check (route.h). True when the head alone decides
 * the reply (415, 406, a malformed query, an unknown model...): it can go
 * out before the body is read, and before "100 Continue". */
bool tiled_service_check_head(struct tiled_req *req);
/* Parses a Content-Length value: decimal digits only; -1 otherwise. */
int tiled_parse_length(const char *s, uint64_t *out);
/* Appends body bytes (a size error becomes the reply, sent at dispatch). */
void tiled_service_body(struct tiled_req *req, const char *data, size_t n);
/* The body is complete. True when the reply is ready to send; false when
 * the request waits for a worker: the transport was asked to suspend the
 * connection, and ops->resume() comes once req->done is set. */
bool tiled_service_dispatch(struct tiled_req *req);
/* Whether the worker a request was handed to (dispatch returned false)
 * is done with it: its resume is the only one that may be taken as "the
 * reply is ready". Thread-safe. */
bool tiled_service_worked(struct tiled_req *req);
/* Call just before sending: finishes the timings and counts the bytes;
 * writes the Server-Timing value into timing[cap]. */
void tiled_service_sending(struct tiled_req *req, char *timing, size_t cap);
/* The exchange is over: `status` was sent (499: the client went away).
 * Hands its record to the observers of finished requests (exchange.h:
 * the access log, metrics, trace, v2 statistics) and frees the request. */
void tiled_service_end(struct tiled_req *req, int status);

struct tiled_metrics_gauges;
/* The daemon's figures a metrics scrape shows (metrics.h), read now. */
void tiled_service_gauges(const struct tiled_server *srv, struct tiled_metrics_gauges *g);

#endif
