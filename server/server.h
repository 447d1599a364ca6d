/* server.h - shared state of the tiled daemon.
 *
 * DESIGN. http.c is the only file that talks to libmicrohttpd: it turns
 * callbacks into a struct tiled_req (method, path, headers, body) and a
 * route's handler fills a struct tiled_reply (status, headers, body bytes or
 * a streamed encoder). Handlers never see MHD, so the v1 and later protocol
 * handlers stay plain functions of request -> reply.
 */
#ifndef TILED_SERVER_H
#define TILED_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "encode.h"
#include "request.h"
#include "tile.h"

struct MHD_Daemon;
struct MHD_Connection;

struct tiled_server {
    struct tiled_config cfg;
    struct tile_limits lim;
    struct tile_pool *pool;
    struct MHD_Daemon *daemon;
    uint16_t port;
    atomic_bool draining;
    atomic_int inflight;
    atomic_uint_fast64_t next_id;
    uint64_t start_us;
};

/* A reply: either a finished body in memory or a streamed encoder. */
struct tiled_reply {
    int status;
    char content_type[64];
    char headers[6][2][160]; /* extra headers (name, value) */
    int nheaders;
    char *body;               /* owned, malloc'd */
    uint64_t body_len;
    struct tiled_stream *stream; /* owned; streamed body instead of `body` */
};

/* Per-request state, owned by http.c; freed when the request completes. */
struct tiled_req {
    struct tiled_server *srv;
    struct MHD_Connection *conn;
    const struct tiled_route *route;
    char method[16];
    char path[256];
    char request_id[80];
    char content_type[128];
    char accept[256];
    char remote[64];
    bool want_trailers;
    int early_status;         /* error found while receiving (0 = none) */
    char early_error[240];
    char *body;
    uint64_t body_len, body_cap;
    uint64_t bytes_out;
    /* Timestamps (µs, monotonic). */
    uint64_t t_start, t_queued, t_work, t_decoded, t_tiled, t_encoded;
    struct tile_timings tm;
    bool timings_final;       /* tm.total_us already set (it is in the body) */
    /* Work handed to the pool. */
    pthread_mutex_t lock;
    bool suspended;
    bool done;                /* reply is ready */
    struct tiled_reply reply;
    /* Decoded /v1 request and its plan (live while a stream reads them). */
    struct tile_request treq;
    struct tile_plan plan;
    struct tile_encoder enc;  /* valid when has_enc */
    bool has_enc;
    enum tile_format in_fmt, out_fmt;
    /* Query parameters, collected once. */
    struct tiled_kv {
        char key[32];
        char *value;
    } query[16];
    int nquery;
    bool query_overflow;
};

typedef void (*tiled_handler_fn)(struct tiled_req *req);

struct tiled_route {
    const char *method;
    const char *path;
    tiled_handler_fn handler;
    bool needs_body;
    bool offload;   /* may run on the worker pool */
};

/* Microseconds on the monotonic clock. */
uint64_t tiled_now_us(void);

/* Sets an error reply {"error": msg} with `status`. */
void tiled_reply_error(struct tiled_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets an error reply from a tile_error, choosing the status from its code. */
void tiled_reply_tile_error(struct tiled_reply *r, const struct tile_error *e);
/* Sets a JSON body (copied). */
void tiled_reply_json(struct tiled_reply *r, int status, const char *json);
void tiled_reply_header(struct tiled_reply *r, const char *name, const char *value);
void tiled_reply_free(struct tiled_reply *r);

/* Handlers (v1.c, health.c). */
void tiled_handle_tile(struct tiled_req *req);
void tiled_handle_live(struct tiled_req *req);
void tiled_handle_ready(struct tiled_req *req);

/* v1.c: the heavy part of a tile request, run inline or on a worker. */
void tiled_tile_work(struct tiled_req *req);

/* Server-Timing value for the request's timings. */
void tiled_server_timing(const struct tile_timings *tm, char *buf, size_t cap);

/* stream.c: streamed bodies. */
struct tiled_stream;
struct tiled_stream *tiled_stream_init(struct tiled_req *req, struct tile_encoder *enc, uint64_t chunk);
uint64_t tiled_stream_size(const struct tiled_stream *s);
struct MHD_Response;
void tiled_stream_set_response(struct tiled_stream *s, struct MHD_Response *resp);
/* MHD content-reader callback and free callback. */
long tiled_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void tiled_stream_free(void *cls);

/* Logging (log.c). */
void tiled_log_init(const struct tiled_config *cfg);
void tiled_log_event(enum tiled_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void tiled_log_access(const struct tiled_req *req, int status);

/* http.c: the daemon's lifecycle. */
int tiled_http_start(struct tiled_server *srv, struct tile_error *e);
void tiled_http_quiesce(struct tiled_server *srv);
unsigned tiled_http_connections(struct tiled_server *srv);
void tiled_http_stop(struct tiled_server *srv);

/* serve.c */
int tiled_serve_main(int argc, char **argv);

#endif
