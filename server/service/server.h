/* server.h - shared state of the tiled daemon: the server and a request.
 *
 * DESIGN. A transport (server/http/, the project's own HTTP/1.1;
 * server/grpc/, through nghttp2) turns what it receives into a struct tiled_req (method,
 * path, headers, body) and hands it to the service (service.h), whose route
 * handler (handlers.h) fills a struct tiled_reply (reply.h: status, headers,
 * body bytes or a streamed encoder) that the transport sends. No file
 * outside the transport folders (http/, grpc/, tls/) sees an nghttp2 or
 * GnuTLS type: the service reaches the connection only through
 * struct tiled_conn_ops. Each
 * module declares its functions in its own header; this one holds the
 * types (and tiled_method_is, a one-line inline).
 */
#ifndef TILED_SERVER_H
#define TILED_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "compress.h"
#include "config.h"
#include "encode.h"
#include "memory.h"
#include "reply.h"
#include "request.h"
#include "route.h"
#include "shm.h"
#include "tile.h"
#include "trace.h"
#include "v2.h"
#include "version.h"

struct tiled_shm;
struct tiled_tls;
struct tiled_work;

/* A query parameter, as the transport split and percent-decoded it. */
struct tiled_kv {
    const char *key;
    const char *value; /* "" when the parameter has no "=" */
};

/* The most query parameters a request holds (more: its query_overflow). */
#define TILED_QUERY_MAX 16

/* How the service parks a connection while a worker (or a stream's
 * producer) prepares what it will send, and wakes it again. */
struct tiled_conn_ops {
    void (*suspend)(void *conn);
    void (*resume)(void *conn);
};

/* Triton-style cumulative statistics of one model version. */
struct tiled_v2_stats {
    atomic_uint_fast64_t success_count, success_ns, fail_count, fail_ns;
    atomic_uint_fast64_t queue_ns, input_ns, infer_ns, output_ns, last_ms;
};

struct tiled_server {
    struct tiled_v2_stats v2_stats[TILE_V2_NVERSIONS]; /* as tile_v2_versions[] */
    struct tiled_config cfg;
    struct tile_limits lim;
    struct tile_pool *pool;
    struct tiled_bodycache *bodies; /* reused response bodies (bodycache.h) */
    struct tiled_memory memory;     /* the request memory budget, --max-memory (memory.h) */
    void *transport;          /* the transport's own state (server/http/) */
    void *grpc;               /* the gRPC transport's (server/grpc/); NULL when off */
    uint16_t grpc_port;
    atomic_uint_fast64_t header_timeouts; /* connections cut for a late request head */
    /* Requests refused or cut for a late body (a gRPC call: its request), per transport (recv_deadline.h) */
    atomic_uint_fast64_t body_timeouts[TILED_TRANSPORT_COUNT];
    uint16_t port;
    atomic_bool draining;
    atomic_bool stopping;     /* drain is over: streams still open are cut */
    pthread_mutex_t submit_lock; /* orders job submission before stopping */
    atomic_int inflight;
    atomic_uint_fast64_t next_id;
    uint64_t start_s;         /* process start, seconds since the epoch: the first half of generated request ids */
    uint64_t start_wall_ms;
    struct tiled_tls *tls;    /* TLS policy and certificate (tls/tls.h); NULL without --tls-cert */
    struct tiled_shm *shm;    /* NULL unless --shared-memory system */
    /* The route table's lookup (router.h), wired by the daemon (serve.c):
     * the table names every handler, so the service below them asks it
     * through this pointer rather than by name. */
    tiled_route_find_fn *find_route;
};

/* Per-request state, made by tiled_req_new() and freed by
 * tiled_service_end() (service.h): what every protocol shares (ids,
 * route, headers, body, timings, status and sizes, the reply). What a
 * handler keeps of its own, and the decode, plan and encode of a request
 * that tiles, are in its work record (work.h, `work`), made only for a
 * request that tiles; so the request stays small (under 1 KiB, checked
 * below) whatever it asks for. */
struct tiled_req {
    struct tiled_server *srv;
    void *conn;               /* the transport's connection */
    const struct tiled_conn_ops *ops;
    const struct tiled_route *route;
    enum tiled_transport transport;
    char method[16];
    const char *path;         /* borrowed from the transport, like the headers */
    const char *remote;       /* the client's address, borrowed from the transport; "" when unknown */
    char request_id[80];
    /* Request headers, borrowed from the transport (valid until the request
     * completes, on any thread); "" when absent. */
    const char *content_type;
    const char *accept;
    const char *accept_encoding;
    const char *content_encoding;
    /* A conditional GET's preconditions (caching.h), over HTTP only: the
     * first If-Match and If-None-Match field line; NULL when absent. */
    const char *if_match;
    const char *if_none_match;
    const char *infer_header_len; /* Inference-Header-Content-Length (HTTP); NULL when absent */
    /* Query parameters, borrowed from the transport like the headers: the
     * first nquery of query[] (NULL when none came). */
    const struct tiled_kv *query;
    int nquery;
    bool query_overflow;
    bool want_trailers;
    enum tiled_coding request_coding;
    char *body;
    uint64_t body_len, body_cap;
    uint64_t body_dropped;    /* body bytes read after the reply was decided (read and dropped) */
    uint64_t mem_held;        /* bytes taken from the memory budget (memory.h), given back at the end */
    uint64_t mem_kin;         /* what its transport holds for it on another account (memory.h) */
    uint64_t bytes_out;
    /* Timestamps (µs, monotonic): the head read, handed to the pool, taken
     * by a worker (the phases' own durations are in tm). */
    uint64_t t_start, t_queued, t_work;
    /* The request's duration, for the access log and the metrics alike:
     * from t_start (its head read) to tiled_service_end() (its last byte
     * handed to the socket, or the client gone). */
    uint64_t duration_us;
    uint64_t t_sent;          /* sending began (tiled_service_sending) */
    /* The last boundary between two timed stages (tiled_req_lap): each
     * stage's end is the next one's start, one clock read for both. */
    uint64_t t_mark;
    struct tiled_trace trace; /* trace context (trace.h) */
    struct tile_timings tm;
    bool timings_final;       /* tm.total_us already set (it is in the body) */
    /* Work handed to the pool. */
    bool suspended;
    bool done;                /* reply is ready */
    pthread_mutex_t lock;
    /* What the request is, for the observers (exchange.h): the model
     * version of a v2 infer (else 0), and its body's format (a tile_format
     * or TILED_FORMAT_*), set by the handler that reads the body. */
    int v2_version;
    int body_format;
    /* What the route's check_head found for its handler (0: nothing): for
     * a v2 infer, the model version its path names. */
    int head_found;
    /* The handler's step on the work path: decode + plan + encoder choice
     * for a request that tiles (v1.c, v2_infer.c), or what a handler left
     * to a worker (the contract is work.h's); NULL: none. */
    int (*prepare)(struct tiled_req *req, struct tile_error *e);
    struct tiled_work *work;  /* owned (work.h); NULL unless the request tiles */
    struct tiled_reply reply;
};

/* The request is what every request pays for, health checks and metrics
 * scrapes included: what only some need goes in their work record. */
_Static_assert(sizeof(struct tiled_req) < 1024, "struct tiled_req is over 1 KiB: keep a handler's state in its work record (work.h)");

/* True when the request's method is `want` (HEAD serves GET); otherwise
 * sets a 405 naming the allowed method (route.h). */
static inline bool tiled_method_is(struct tiled_req *req, const char *want)
{
    return tiled_method_check(req->method, req->path, want, &req->reply);
}

#endif
