/* route.h - what a route is: path, method, handler, whether a body is
 * read, whether it is open without an API key, and the label its requests
 * carry in the metrics; and what every handler shares of routing (method
 * checks). The table of routes is router.h's: it names every handler,
 * so it sits above them, and no handler depends on it; the labels are
 * exchange.h's, the figures every observer of a request reads.
 */
#ifndef TILED_ROUTE_H
#define TILED_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "exchange.h" /* enum tiled_transport, enum tiled_route_label */

struct tiled_req;

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

/* The route table's lookup (router.h's tiled_route_find): the route for
 * a request that came by `transport`, NULL when there is none; then
 * `allow` gets the methods the path does take ("" when the path is
 * unknown: 404, not 405). The table names every handler, so it sits above
 * them and above the service that asks it: the daemon hands it to the
 * service (struct tiled_server's find_route, serve.c). */
typedef const struct tiled_route *tiled_route_find_fn(enum tiled_transport transport, const char *method,
                                                      const char *path, char *allow, size_t cap);

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

#endif
