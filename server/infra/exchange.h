/* exchange.h - one finished request as its observers see it, and the
 * registration that hands it to them.
 *
 * DESIGN. The access log, the metrics, the trace exporter and the v2
 * statistics each want a few figures of every request when it ends. They
 * sit in different layers (the first three here in infra/, the statistics
 * with the v2 handlers), and the service that ends a request sits between
 * them: rather than call each of them by name, the service fills one
 * struct tiled_exchange and hands it to whoever registered
 * (tiled_exchange_observe), in the order they registered. The daemon wires
 * the observers once, in serve.c. An observer reads the record during the
 * call only: every pointer in it is borrowed from the request, which is
 * freed right after.
 *
 * The labels an exchange carries (its transport, its route's metrics
 * label, its body's format) are defined here too: they are what the
 * observers count and print, whatever layer names them.
 */
#ifndef TILED_EXCHANGE_H
#define TILED_EXCHANGE_H

#include <stdint.h>

#include "encode.h" /* enum tile_format, struct tile_timings */

struct tiled_trace; /* trace.h */

/* What carried a request in: it picks the routes the request can reach
 * and labels its metrics and access log. */
enum tiled_transport { TILED_TRANSPORT_HTTP, TILED_TRANSPORT_GRPC, TILED_TRANSPORT_COUNT };
/* Its label in metrics and logs: "http", "grpc". */
const char *tiled_transport_name(enum tiled_transport transport);

/* The route label of a request's metrics (a route's, route.h). */
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
/* The metrics label text ("/v1/tile", "other", ...). */
const char *tiled_route_label_name(enum tiled_route_label label);

/* The format of a request's body, for the metrics: a tile_format, or one
 * of these two. */
#define TILED_FORMAT_NONE TILE_FMT_COUNT             /* the request had no tensor body */
#define TILED_FORMAT_PROTOBUF (TILE_FMT_COUNT + 1)   /* a gRPC message */
#define TILED_FORMAT_COUNT (TILE_FMT_COUNT + 2)

/* One finished request. Strings are never NULL except route_path. */
struct tiled_exchange {
    const char *request_id;
    const char *method;
    const char *path;
    const char *remote;           /* the client's address */
    enum tiled_transport transport;
    enum tiled_route_label label;
    int format;                   /* a TILED_FORMAT_* or tile_format slot */
    const char *route_path;       /* the path of the route it reached; NULL when none */
    const struct tiled_trace *trace;
    int status;                   /* as sent (499: the client went away) */
    int model_version;            /* the model version an inference named (v2), else 0 */
    uint64_t bytes_in, bytes_out;
    uint64_t duration_us;         /* from its head read to its last byte handed to the socket */
    /* Monotonic µs (clock.h): its head read, queued for a worker, taken by
     * one, sending begun; 0 for a step it did not take. */
    uint64_t t_start, t_queued, t_work, t_sent;
    const struct tile_timings *tm; /* the phases, as Server-Timing gave them */
};

/* An observer of finished requests: called on the thread that ends one,
 * so it must be quick and thread-safe. */
typedef void tiled_exchange_observer_fn(const struct tiled_exchange *x, void *ctx);

/* Adds FN, called with CTX for every finished request, after those added
 * before it. Not thread-safe: call before serving. Returns 0, or -1 when
 * the table (8 observers) is full. */
int tiled_exchange_observe(tiled_exchange_observer_fn *fn, void *ctx);
/* Forgets every observer (the daemon stops: their contexts go). */
void tiled_exchange_observe_none(void);
/* A request ended: hands X to every observer, in the order registered. */
void tiled_exchange_ended(const struct tiled_exchange *x);

#endif
