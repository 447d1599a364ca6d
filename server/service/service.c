/* service.c - a request's life in the daemon, whatever carries it (see
 * service.h).
 *
 * DESIGN. Small requests are finished by the handler on the transport's
 * thread (work.c decides); the rest go to the worker pool, and the request
 * is parked: the request lock orders the transport's "suspend" strictly
 * before the worker's "resume", and the worker resumes outside the lock,
 * because once resumed the transport may finish and free the request.
 */
#include "service.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth.h"
#include "clock.h"
#include "cors_reply.h"
#include "cors.h"
#include "exchange.h"
#include "grow.h"
#include "memory.h"
#include "metrics.h"
#include "route.h"
#include "spare.h"
#include "stream.h"
#include "text.h"
#include "trace.h"
#include "work.h"

/* ---- request state ------------------------------------------------------ */

/* "<start time, 16 hex digits>-<sequence in hex>": unique per process start,
 * formatted by hand because snprintf showed in per-request profiles. */
static void new_request_id(char dst[static 40], uint64_t start, uint64_t seq)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++)
        dst[i] = hex[(start >> (60 - 4 * i)) & 15];
    dst[16] = '-';
    int n = 1;
    while (n < 16 && seq >> (4 * n))
        n++;
    for (int i = 0; i < n; i++)
        dst[17 + i] = hex[(seq >> (4 * (n - 1 - i))) & 15];
    dst[17 + n] = '\0';
}

static bool valid_request_id(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] <= 0x20 || s[i] >= 0x7f || s[i] == '"' || s[i] == '\\')
            return false;
    }
    return true;
}

/* One list for both tables below. */
#define TILED_FIELDS(X)                                                   \
    X(TILED_F_ACCEPT, "accept")                                           \
    X(TILED_F_ACCEPT_ENCODING, "accept-encoding")                         \
    X(TILED_F_ACR_METHOD, "access-control-request-method")                \
    X(TILED_F_AUTHORIZATION, "authorization")                             \
    X(TILED_F_CONTENT_ENCODING, "content-encoding")                       \
    X(TILED_F_CONTENT_LENGTH, "content-length")                           \
    X(TILED_F_CONTENT_TYPE, "content-type")                               \
    X(TILED_F_EXPECT, "expect")                                           \
    X(TILED_F_HOST, "host")                                               \
    X(TILED_F_IF_MATCH, "if-match")                                       \
    X(TILED_F_IF_NONE_MATCH, "if-none-match")                             \
    X(TILED_F_INFER_HEADER_LEN, "inference-header-content-length")        \
    X(TILED_F_ORIGIN, "origin")                                           \
    X(TILED_F_TE, "te")                                                   \
    X(TILED_F_TRACEPARENT, "traceparent")                                 \
    X(TILED_F_TRACESTATE, "tracestate")                                   \
    X(TILED_F_REQUEST_ID, "x-request-id")
#define FIELD_NAME(e, text) [e] = text,
#define FIELD_LEN(e, text) [e] = sizeof(text) - 1,
const char *const tiled_field_names[TILED_F_COUNT] = {TILED_FIELDS(FIELD_NAME)};
const unsigned char tiled_field_lens[TILED_F_COUNT] = {TILED_FIELDS(FIELD_LEN)};
#undef FIELD_NAME
#undef FIELD_LEN

static const char *header_or_empty(const struct tiled_head *h, void *conn, enum tiled_field f)
{
    const char *v = h->header(conn, f);
    return v ? v : "";
}

/* The last freed request, for the next (spare.h), as the work records
 * (work.h) and encoders are kept: a request allocates nothing of its own
 * on a thread that ends one before it begins the next. */
static struct tile_spare spare_req;

struct tiled_req *tiled_req_new(struct tiled_server *srv, const struct tiled_head *h, void *conn,
                                const struct tiled_conn_ops *ops)
{
    struct tiled_req *req = tile_spare_take(&spare_req, sizeof(*req));
    if (!req)
        return NULL;
    memset(req, 0, sizeof(*req));
    req->srv = srv;
    req->conn = conn;
    req->ops = ops;
    req->t_start = tiled_now_us();
    req->transport = h->transport;
    /* A gRPC request's body is a protobuf message, whatever it asks; an
     * HTTP handler names its body's format when it reads one. */
    req->body_format = h->transport == TILED_TRANSPORT_GRPC ? TILED_FORMAT_PROTOBUF : TILED_FORMAT_NONE;
    pthread_mutex_init(&req->lock, NULL);
    tiled_copy_str(req->method, sizeof(req->method), h->method);
    req->path = h->path;
    req->remote = h->remote ? h->remote : "";
    req->query = h->query;
    req->nquery = h->nquery;
    req->query_overflow = h->query_overflow;
    tiled_copy_str(req->request_id, sizeof(req->request_id), header_or_empty(h, conn, TILED_F_REQUEST_ID));
    if (!valid_request_id(req->request_id))
        new_request_id(req->request_id, srv->start_s, atomic_fetch_add(&srv->next_id, 1));
    req->content_type = header_or_empty(h, conn, TILED_F_CONTENT_TYPE);
    req->accept = header_or_empty(h, conn, TILED_F_ACCEPT);
    req->accept_encoding = req->content_encoding = "";
    if (h->transport == TILED_TRANSPORT_HTTP) {
        /* gRPC has its own message encoding (the transport checks it), and
         * its "te: trailers" is mandatory, not a wish for a chunked body:
         * a gRPC reply is sent whole, its length known. */
        req->accept_encoding = header_or_empty(h, conn, TILED_F_ACCEPT_ENCODING);
        req->content_encoding = header_or_empty(h, conn, TILED_F_CONTENT_ENCODING);
        req->if_match = h->header(conn, TILED_F_IF_MATCH);
        req->if_none_match = h->header(conn, TILED_F_IF_NONE_MATCH);
        req->infer_header_len = h->header(conn, TILED_F_INFER_HEADER_LEN);
        const char *te = h->header(conn, TILED_F_TE);
        req->want_trailers = te && strcasestr(te, "trailers");
    }
    tiled_trace_begin(&req->trace, h->header(conn, TILED_F_TRACEPARENT), h->header(conn, TILED_F_TRACESTATE));
    atomic_fetch_add(&srv->inflight, 1);
    return req;
}

static void req_free(struct tiled_req *req)
{
    tiled_work_free(req);
    tiled_reply_free(&req->reply);
    free(req->body);
    tiled_memory_release(&req->srv->memory, &req->mem_held);
    pthread_mutex_destroy(&req->lock);
    atomic_fetch_sub(&req->srv->inflight, 1);
    tile_spare_give(&spare_req, req);
}

/* ---- head --------------------------------------------------------------- */

bool tiled_service_browser(struct tiled_req *req, const char *origin, const char *host, const char *request_method)
{
    const char *origins = req->srv->cfg.cors_origins;
    if (tiled_cors_refuse(&req->reply, origins, origin, host, req->srv->tls != NULL))
        return true;
    /* A preflight comes without a key: it is answered before the key check. */
    if (!origins[0] || !tiled_cors_is_preflight(req->method, request_method))
        return false;
    tiled_cors_preflight(&req->reply, tiled_auth_enabled());
    return true;
}

bool tiled_service_route(struct tiled_req *req, const char *authorization)
{
    char allow[64];
    req->route = req->srv->find_route(req->transport, req->method, req->path, allow, sizeof(allow));
    /* Without a key nothing but health is answered, not even "not found". */
    if ((!req->route || !req->route->open) && tiled_auth_enabled() && !tiled_auth_check(authorization)) {
        tiled_reply_error(&req->reply, TILED_UNAUTHORIZED, "missing or invalid API key (send Authorization: Bearer KEY)");
        tiled_reply_header(&req->reply, "WWW-Authenticate", "Bearer realm=\"tiled\"");
        return true;
    }
    if (!tiled_method_known(req->method)) { /* on any path: no route serves it, nor ever could */
        tiled_reply_error(&req->reply, TILED_NOT_IMPLEMENTED,
                          "method %s is unknown to this server (it answers %s)", req->method,
                          TILED_SERVER_METHODS);
        return true;
    }
    if (req->route)
        return false;
    if (allow[0]) {
        tiled_reply_error(&req->reply, TILED_METHOD_NOT_ALLOWED, "method %s is not allowed on %s (allowed: %s)",
                          req->method, req->path, allow);
        tiled_reply_header(&req->reply, "Allow", allow);
    } else if (req->transport == TILED_TRANSPORT_GRPC) {
        tiled_reply_error(&req->reply, TILED_NOT_IMPLEMENTED, "unknown method %s", req->path);
    } else {
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "no such endpoint: %s %s", req->method, req->path);
    }
    return true;
}

bool tiled_service_check_head(struct tiled_req *req)
{
    if (req->route->check_head)
        req->route->check_head(req);
    return req->reply.status != 0;
}

/* ---- body --------------------------------------------------------------- */

/* Makes the reply an error about the body and drops what was read. */
static void body_fail(struct tiled_req *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void body_fail(struct tiled_req *req, int status, const char *fmt, ...)
{
    if (req->reply.status)
        return;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tiled_reply_error(&req->reply, status, "%s", msg);
    free(req->body);
    req->body = NULL;
    req->body_cap = req->body_len = 0;
}

int tiled_parse_length(const char *s, uint64_t *out)
{
    uint64_t n = 0;
    if (!s[0])
        return -1;
    for (const char *p = s; *p; p++) {
        uint64_t digit = (uint64_t)(*p - '0');
        if (*p < '0' || *p > '9' || n > (UINT64_MAX - digit) / 10)
            return -1;
        n = n * 10 + digit;
    }
    *out = n;
    return 0;
}

bool tiled_service_expect_body(struct tiled_req *req, const char *content_length)
{
    uint64_t max = req->srv->lim.max_body, n;
    if (!req->route->needs_body || !content_length)
        return false;
    if (tiled_parse_length(content_length, &n) < 0)
        body_fail(req, TILED_BAD_REQUEST, "Content-Length '%.40s' is not a byte count", content_length);
    else if (n > max)
        body_fail(req, TILED_TOO_LARGE, "request body of %llu bytes exceeds the max-body limit of %llu bytes",
                  (unsigned long long)n, (unsigned long long)max);
    else if (!(req->body = malloc(n ? n : 1)))
        body_fail(req, TILED_UNAVAILABLE, "cannot allocate %llu bytes for the request body", (unsigned long long)n);
    else
        req->body_cap = n ? n : 1;
    return req->reply.status != 0;
}

void tiled_service_body(struct tiled_req *req, const char *data, size_t n)
{
    if (req->reply.status) {
        req->body_dropped += n;
        return;
    }
    uint64_t max = req->srv->lim.max_body;
    struct tile_error e = {0};
    if (req->body_len + n > max) {
        body_fail(req, TILED_TOO_LARGE, "request body exceeds the max-body limit of %llu bytes",
                  (unsigned long long)max);
        req->body_dropped = n;
        return;
    }
    /* Counted as it arrives, not as declared (memory.h). */
    if (tiled_memory_take(&req->srv->memory, &req->mem_held, req->mem_kin, n, &e) < 0) {
        body_fail(req, TILED_UNAVAILABLE, "%s", e.text);
        tiled_reply_header(&req->reply, "Retry-After", "1");
        req->body_dropped = n;
        return;
    }
    size_t cap = req->body_cap;
    char *nb = tile_grow(req->body, &cap, req->body_len, n, 1, 65536, max > SIZE_MAX ? SIZE_MAX : (size_t)max);
    if (!nb) {
        body_fail(req, TILED_UNAVAILABLE, "cannot allocate the request body");
        return;
    }
    req->body = nb;
    req->body_cap = cap;
    memcpy(req->body + req->body_len, data, n);
    req->body_len += n;
}

/* ---- admission ---------------------------------------------------------- */

static void worker_job(void *arg)
{
    struct tiled_req *req = arg;
    req->t_work = req->t_mark = tiled_now_us(); /* the next stage's lap starts here, not in the queue */
    req->tm.queue_us = req->t_work - req->t_queued;
    tiled_work_run(req);
    /* Resume outside the lock: once resumed, the transport may finish and
     * free the request (and its lock) at once. While suspended it cannot,
     * so `conn` read under the lock is still valid. */
    pthread_mutex_lock(&req->lock);
    void *conn = req->suspended ? req->conn : NULL;
    const struct tiled_conn_ops *ops = req->ops;
    req->done = true;
    req->suspended = false;
    pthread_mutex_unlock(&req->lock);
    if (conn)
        ops->resume(conn);
}

/* Hands the request to the pool; false when the queue is full. */
static bool offload(struct tiled_req *req)
{
    bool ok;
    struct tiled_server *srv = req->srv;
    pthread_mutex_lock(&req->lock);
    req->t_queued = tiled_now_us();
    pthread_mutex_lock(&srv->submit_lock);
    ok = !atomic_load(&srv->stopping) && tile_pool_submit(srv->pool, worker_job, req) == 0;
    pthread_mutex_unlock(&srv->submit_lock);
    if (ok) {
        req->suspended = true;
        req->ops->suspend(req->conn);
    }
    pthread_mutex_unlock(&req->lock);
    return ok;
}

bool tiled_service_dispatch(struct tiled_req *req)
{
    if (req->reply.status) /* the body was refused while it arrived */
        return true;
    req->route->handler(req);
    if (req->reply.status) /* finished on this thread */
        return true;
    if (offload(req)) /* from here on the worker owns the reply: do not read it */
        return false;
    tiled_reply_error(&req->reply, TILED_UNAVAILABLE,
                      "server overloaded: %lld requests are already queued; retry later", (long long)req->srv->cfg.queue);
    tiled_reply_header(&req->reply, "Retry-After", "1");
    return true;
}

bool tiled_service_worked(struct tiled_req *req)
{
    pthread_mutex_lock(&req->lock);
    bool done = req->done;
    pthread_mutex_unlock(&req->lock);
    return done;
}

/* ---- reply and end ------------------------------------------------------ */

void tiled_service_sending(struct tiled_req *req, char *timing, size_t cap)
{
    const struct tiled_reply *r = &req->reply;
    if (r->stream) /* a chunked (compressed) stream's length is not known here */
        req->bytes_out = tiled_stream_size(r->stream) == UINT64_MAX ? 0 : tiled_stream_size(r->stream);
    else
        req->bytes_out = r->body_len;
    /* Built on this thread just now, the body's end is when sending began. */
    req->t_sent = req->timings_final && !req->t_queued ? req->t_mark : tiled_now_us();
    if (!req->timings_final)
        req->tm.total_us = req->t_sent - req->t_start;
    tiled_server_timing(&req->tm, timing, cap);
}

/* The metrics' route label of a request: an inference named by the v2
 * models route is counted apart from the route's other requests. */
static enum tiled_route_label route_label(const struct tiled_req *req)
{
    if (req->v2_version)
        return TILED_RL_V2_INFER;
    return req->route ? req->route->label : TILED_RL_OTHER;
}

void tiled_service_end(struct tiled_req *req, int status)
{
    req->duration_us = tiled_now_us() - req->t_start; /* one value for the log and the histogram */
    const struct tiled_exchange x = {
        .request_id = req->request_id,
        .method = req->method,
        .path = req->path ? req->path : "",
        .remote = req->remote,
        .transport = req->transport,
        .label = route_label(req),
        .format = req->body_format,
        .route_path = req->route ? req->route->path : NULL,
        .trace = &req->trace,
        .status = status,
        .model_version = req->v2_version,
        .bytes_in = req->body_len,
        .bytes_out = req->bytes_out,
        .duration_us = req->duration_us,
        .t_start = req->t_start,
        .t_queued = req->t_queued,
        .t_work = req->t_work,
        .t_sent = req->t_sent,
        .tm = &req->tm,
    };
    tiled_exchange_ended(&x); /* the access log, metrics, trace and v2 statistics (serve.c wires them) */
    req_free(req);
}

void tiled_service_gauges(const struct tiled_server *srv, struct tiled_metrics_gauges *g)
{
    *g = (struct tiled_metrics_gauges){
        .inflight = atomic_load(&srv->inflight),
        .grpc = srv->cfg.grpc_port >= 0, /* cfg, not srv->grpc: set before any thread */
        .max_connections = (long long)srv->cfg.max_connections,
        .draining = atomic_load(&srv->draining),
        .queue_depth = tile_pool_queue_depth(srv->pool),
        .workers = tile_pool_size(srv->pool),
        .busy_workers = tile_pool_busy(srv->pool),
        .header_timeouts = atomic_load(&srv->header_timeouts),
        .start_wall_ms = srv->start_wall_ms,
    };
    for (int t = 0; t < TILED_TRANSPORT_COUNT; t++)
        g->body_timeouts[t] = atomic_load(&srv->body_timeouts[t]);
}
