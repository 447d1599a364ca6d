/* route.h - what a route is: path, method, handler, whether a body is
 * read, whether it is open without an API key, and the label its requests
 * carry in the metrics; and what every handler shares of routing (method
 * checks, labels). The table of routes is router.h's: it names every
 * handler, so it sits above them, and no handler depends on it.
 */
#ifndef TILED_ROUTE_H
#define TILED_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

struct tiled_req;

/* What carried a request in: it picks the routes the request can reach
 * and labels its metrics and access log. */
enum tiled_transport { TILED_TRANSPORT_HTTP, TILED_TRANSPORT_GRPC, TILED_TRANSPORT_COUNT };
/* Its label in metrics and logs: "http", "grpc". */
const char *tiled_transport_name(enum tiled_transport transport);

enum tiled_route_label {
    TILED_RL_V1_TILE,
    TILED_RL_V2_INFER, /* given by the models route to an infer request */
    TILED_RL_V2,
    TILED_RL_HEALTH,
    TILED_RL_METRICS,
    TILED_RL_GRPC,  /* the Open Inference Protocol over gRPC */
    TILED_RL_OTHER, /* no route, and operator documents */
    TILED_RL_COUNT
};

typedef void (*tiled_handler_fn)(struct tiled_req *req);

struct tiled_route {
    const char *method; /* "*": the handler checks the method */
    const char *path;
    tiled_handler_fn handler;
    enum tiled_route_label label;
    bool needs_body;
    bool prefix; /* path is a prefix; the handler routes the rest */
    bool open;   /* served without an API key (health checks) */
    bool grpc;   /* reached over gRPC only (and gRPC reaches nothing else) */
    /* A gRPC method whose client streams requests and gets a reply to each
     * (ModelStreamInfer, server reflection): every request message is a
     * request of its own (server/grpc/call.c, "streaming calls"). */
    bool streams;
    /* With streams: each reply is the method's own response message, and
     * an error ends the stream with its status (server reflection, as
     * grpc's own reflection service does), rather than being wrapped in a
     * ModelStreamInferResponse. */
    bool stream_raw;
    /* What the request head alone already refuses: sets an error reply, so
     * it is sent before the body is read (and before 100 Continue). */
    tiled_handler_fn check_head;
};

/* The Allow header's value for a route of method `method`: a GET route
 * serves HEAD too, so it lists both. */
const char *tiled_allow_value(const char *method);

/* True when a request's method serves a route of method `want`: HEAD is
 * GET without the body (RFC 9110 9.3.2). */
bool tiled_method_serves(const char *method, const char *want);

/* The methods some route serves, for the Allow of OPTIONS * (RFC 9110
 * 9.3.7: what the server as a whole can do). */
#define TILED_SERVER_METHODS "GET, HEAD, POST, OPTIONS"

/* True for a method HTTP defines (RFC 9110 9.3, and PATCH, RFC 5789):
 * one that a route does not serve is refused with 405 and Allow. Any other
 * method is not one tiled recognises: 501 wherever it is sent (RFC 9110
 * 9.1). Methods are case-sensitive: "get" is not GET. */
bool tiled_method_known(const char *method);

struct tiled_reply;

/* True when a request's method serves a route of method `want` (HEAD
 * serves GET); otherwise sets a 405 on `reply` naming the allowed method
 * (server.h's tiled_method_is() says it of a request). */
bool tiled_method_check(const char *method, const char *path, const char *want, struct tiled_reply *reply);

/* The metrics label text ("/v1/tile", "other", ...). */
const char *tiled_route_label_name(enum tiled_route_label label);

#endif
