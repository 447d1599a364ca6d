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
#include "v2.h"

#define TILED_VERSION "0.1.0"

struct MHD_Daemon;

enum tiled_coding { TILED_CODING_IDENTITY, TILED_CODING_GZIP, TILED_CODING_DEFLATE };
struct MHD_Connection;

/* Triton-style cumulative statistics of one model version. */
struct tiled_v2_stats {
    atomic_uint_fast64_t success_count, success_ns, fail_count, fail_ns;
    atomic_uint_fast64_t queue_ns, input_ns, infer_ns, output_ns, last_ms;
};

struct tiled_server {
    struct tiled_v2_stats v2_stats[3]; /* versions 13, 6, 1 */
    struct tiled_config cfg;
    struct tile_limits lim;
    struct tile_pool *pool;
    struct MHD_Daemon *daemon;
    struct tiled_headwatch *headwatch; /* NULL when --header-timeout is 0 */
    uint16_t port;
    atomic_bool draining;
    atomic_bool stopping;     /* drain is over: streams still open are cut */
    pthread_mutex_t submit_lock; /* orders job submission before stopping */
    atomic_int inflight;
    atomic_uint_fast64_t next_id;
    uint64_t start_us;
    uint64_t start_wall_ms;
    char *tls_cert_pem, *tls_key_pem; /* kept for the daemon's lifetime */
};

/* A reply: either a finished body in memory or a streamed encoder. */
struct tiled_reply {
    int status;
    char content_type[64];
    char *headers[6][2];      /* extra headers (name, value), owned */
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
    const char *path;         /* borrowed from libmicrohttpd, like the headers */
    char request_id[80];
    /* Request headers, borrowed from libmicrohttpd (valid until the request
     * completes, on any thread); "" when absent. */
    const char *content_type;
    const char *accept;
    const char *accept_encoding;
    const char *content_encoding;
    enum tiled_coding request_coding;
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
    /* Decoded request (live while a stream reads it); plan and enc below. */
    struct tile_request treq;
    bool has_enc;             /* enc is initialised */
    /* Protocol-specific decode + plan + encoder choice (v1.c, v2.c). */
    int (*prepare)(struct tiled_req *req, struct tile_error *e);
    int v2_version;           /* model version of a v2 infer request, else 0 */
    struct tile_v2_request v2;
    const char *infer_header_len; /* NULL when the header is absent */
    enum tile_format in_fmt, out_fmt;
    /* Query parameters, collected once. */
    struct tiled_kv {
        char key[32];
        char *value;
    } query[16];
    int nquery;
    bool query_overflow;
    /* Large members last: req_init zeroes only what precedes them; these
     * are written by tile_plan_init / tile_encoder_init before any read. */
    struct tile_plan plan;
    struct tile_encoder enc;
};

typedef void (*tiled_handler_fn)(struct tiled_req *req);

struct tiled_route {
    const char *method;
    const char *path;
    tiled_handler_fn handler;
    bool needs_body;
    bool prefix;    /* path is a prefix; the handler routes the rest */
    bool open;      /* served without an API key (health checks) */
    bool offload;   /* may run on the worker pool */
};

/* Microseconds on the monotonic clock; milliseconds since the epoch. */
uint64_t tiled_now_us(void);
uint64_t tiled_wall_ms(void);

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
void tiled_handle_server_metadata(struct tiled_req *req);
void tiled_handle_metrics(struct tiled_req *req);
void tiled_handle_openapi(struct tiled_req *req);
void tiled_handle_models(struct tiled_req *req);
/* Adds a finished v2 infer request to its version's statistics. */
void tiled_v2_record(struct tiled_server *srv, const struct tiled_req *req, bool ok);

/* work.c: running a prepared request, inline or on a worker. */
/* Plans req->treq into req->plan with the server's limits. */
int tiled_work_plan(struct tiled_req *req, struct tile_error *e);
/* Finishes small requests on the spot, leaves the rest for a worker. */
void tiled_work_start(struct tiled_req *req);
/* The worker side: prepare (if not yet) and produce the reply. */
void tiled_work_run(struct tiled_req *req);
/* Replaces the reply with an error reply for `e`. */
void tiled_work_fail(struct tiled_req *req, const struct tile_error *e);

/* Server-Timing value for the request's timings. */
void tiled_server_timing(const struct tile_timings *tm, char *buf, size_t cap);

/* stream.c: streamed bodies. */
struct tiled_stream;
struct tiled_stream *tiled_stream_init(struct tiled_req *req, struct tile_encoder *enc, uint64_t chunk);
/* Body length, or UINT64_MAX when it is sent chunked (trailers or
 * compression); the Content-Encoding applied, or NULL. */
uint64_t tiled_stream_size(const struct tiled_stream *s);
const char *tiled_stream_coding(const struct tiled_stream *s);
struct MHD_Response;
void tiled_stream_set_response(struct tiled_stream *s, struct MHD_Response *resp);
/* MHD content-reader callback and free callback. */
long tiled_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void tiled_stream_free(void *cls);
/* At shutdown (with srv->stopping set): wakes every suspended stream so it
 * ends with an error instead of waiting for data that will not come. */
void tiled_streams_abort(void);

/* auth.c: API keys. Loading an empty path disables authentication. */
int tiled_auth_load(const char *path, struct tile_error *e);
void tiled_auth_free(void);
bool tiled_auth_enabled(void);
/* True when `authorization` is "Bearer KEY" with a configured key. */
bool tiled_auth_check(const char *authorization);

/* compress.c */
/* Parses a Content-Encoding value; -1 when unsupported. */
int tiled_coding_parse(const char *s, enum tiled_coding *out);
enum tiled_coding tiled_coding_negotiate(const char *accept_encoding);
/* Inflates req->body in place of itself (bounded by max-body). */
int tiled_body_decompress(struct tiled_req *req, struct tile_error *e);
/* Compresses an in-memory reply body when Accept-Encoding asks for it. */
int tiled_reply_compress(struct tiled_req *req, struct tile_error *e);

/* Logging (log.c). */
void tiled_log_init(const struct tiled_config *cfg);
void tiled_log_event(enum tiled_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool tiled_log_enabled(enum tiled_log_level level);
/* The access line of a finished request (level info); req->remote must be set. */
void tiled_log_access(const struct tiled_req *req, int status);
/* An error event with its message escaped for JSON. */
void tiled_log_error(const char *event, const char *message);

/* Copies the string `src` into dst[cap] (cap > 0), truncating; returns dst. */
char *tiled_copy_str(char *dst, size_t cap, const char *src);

/* http.c: the daemon's lifecycle. */
int tiled_http_start(struct tiled_server *srv, struct tile_error *e);
void tiled_http_quiesce(struct tiled_server *srv);
unsigned tiled_http_connections(struct tiled_server *srv);
void tiled_http_stop(struct tiled_server *srv);

/* serve.c */
int tiled_serve_main(int argc, char **argv);

#endif
