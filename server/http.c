/* http.c - the libmicrohttpd adapter: connections in, replies out.
 *
 * DESIGN. MHD calls the access handler several times per request: first
 * with only headers (we allocate the request state and route it), then per
 * body piece (copied into a buffer bounded by --max-body, sized from
 * Content-Length when given), then once more with nothing (dispatch). A
 * handler either finishes the reply on the spot or hands the request to the
 * worker pool; then the connection is suspended and the worker resumes it
 * when the reply is ready, and MHD calls us again to queue it. The request
 * lock orders "suspend" strictly before "resume". Nothing here knows about
 * tensors.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"

#include "auth.h"
#include "base.h"
#include "handlers.h"
#include "headwatch.h"
#include "log.h"
#include "metrics.h"
#include "route.h"
#include "server.h"
#include "stream.h"
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

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct tiled_req *req = cls;
    if (req->nquery >= (int)(sizeof(req->query) / sizeof(req->query[0])) || strlen(key) >= sizeof(req->query[0].key)) {
        req->query_overflow = true;
        return MHD_YES;
    }
    struct tiled_kv *kv = &req->query[req->nquery++];
    tiled_copy_str(kv->key, sizeof(kv->key), key);
    kv->value = strdup(value ? value : "");
    return MHD_YES;
}

static const char *header_or_empty(struct MHD_Connection *c, const char *name)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
    return v ? v : "";
}

static void copy_header(struct MHD_Connection *c, const char *name, char *dst, size_t cap)
{
    const char *v = MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
    tiled_copy_str(dst, cap, v ? v : "");
}

static void remote_address(struct MHD_Connection *c, char *dst, size_t cap)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    dst[0] = '\0';
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ci->client_addr;
        const unsigned char *b = (const unsigned char *)&in->sin_addr;
        snprintf(dst, cap, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    }
}

static struct tiled_req *req_init(struct tiled_server *srv, struct MHD_Connection *c, const char *url,
                                  const char *method)
{
    struct tiled_req *req = malloc(sizeof(*req));
    if (!req)
        return NULL;
    memset(req, 0, offsetof(struct tiled_req, plan));
    req->srv = srv;
    req->conn = c;
    req->t_start = tiled_now_us();
    pthread_mutex_init(&req->lock, NULL);
    tile_request_init(&req->treq);
    tiled_copy_str(req->method, sizeof(req->method), method);
    req->path = url;
    copy_header(c, "X-Request-Id", req->request_id, sizeof(req->request_id));
    if (!valid_request_id(req->request_id))
        new_request_id(req->request_id, srv->start_us, atomic_fetch_add(&srv->next_id, 1));
    req->content_type = header_or_empty(c, MHD_HTTP_HEADER_CONTENT_TYPE);
    req->accept = header_or_empty(c, MHD_HTTP_HEADER_ACCEPT);
    req->accept_encoding = header_or_empty(c, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    req->content_encoding = header_or_empty(c, MHD_HTTP_HEADER_CONTENT_ENCODING);
    req->infer_header_len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length");
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "TE");
    req->want_trailers = te && strcasestr(te, "trailers");
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_query, req);
    atomic_fetch_add(&srv->inflight, 1);
    return req;
}

static void req_free(struct tiled_req *req)
{
    tiled_reply_free(&req->reply);
    tile_v2_request_free(&req->v2);
    tile_encoder_free(req->enc);
    tile_request_free(&req->treq);
    for (int i = 0; i < req->nquery; i++)
        free(req->query[i].value);
    free(req->body);
    pthread_mutex_destroy(&req->lock);
    atomic_fetch_sub(&req->srv->inflight, 1);
    free(req);
}

/* ---- body --------------------------------------------------------------- */

static void set_early_error(struct tiled_req *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_early_error(struct tiled_req *req, int status, const char *fmt, ...)
{
    if (req->early_status)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->early_error, sizeof(req->early_error), fmt, ap);
    va_end(ap);
    req->early_status = status;
    free(req->body);
    req->body = NULL;
    req->body_cap = req->body_len = 0;
}

/* Sizes the body buffer from Content-Length; refuses oversize bodies. */
static void body_prepare(struct tiled_req *req)
{
    const char *cl = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t max = req->srv->lim.max_body;
    if (!cl)
        return;
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (n > max) {
        set_early_error(req, 413, "request body of %llu bytes exceeds the max-body limit of %llu bytes", n,
                        (unsigned long long)max);
        return;
    }
    req->body = malloc(n ? n : 1);
    if (!req->body)
        set_early_error(req, 503, "cannot allocate %llu bytes for the request body", n);
    else
        req->body_cap = n ? n : 1;
}

static void body_append(struct tiled_req *req, const char *data, size_t n)
{
    if (req->early_status)
        return;
    uint64_t max = req->srv->lim.max_body;
    if (req->body_len + n > max) {
        set_early_error(req, 413, "request body exceeds the max-body limit of %llu bytes", (unsigned long long)max);
        return;
    }
    if (req->body_len + n > req->body_cap) {
        uint64_t cap = req->body_cap ? req->body_cap * 2 : 65536;
        while (cap < req->body_len + n)
            cap *= 2;
        if (cap > max)
            cap = max;
        char *nb = realloc(req->body, cap);
        if (!nb) {
            set_early_error(req, 503, "cannot allocate the request body");
            return;
        }
        req->body = nb;
        req->body_cap = cap;
    }
    memcpy(req->body + req->body_len, data, n);
    req->body_len += n;
}

/* ---- responses ---------------------------------------------------------- */

static void finish_timings(struct tiled_req *req)
{
    if (!req->timings_final)
        req->tm.total_us = tiled_now_us() - req->t_start;
}

static struct MHD_Response *make_response(struct tiled_req *req)
{
    struct tiled_reply *r = &req->reply;
    struct MHD_Response *resp;
    if (r->stream) {
        uint64_t size = tiled_stream_size(r->stream);
        const char *coding = tiled_stream_coding(r->stream);
        resp = MHD_create_response_from_callback(size, (size_t)req->srv->cfg.stream_chunk,
                                                 (MHD_ContentReaderCallback)tiled_stream_read, r->stream,
                                                 tiled_stream_free);
        if (resp) {
            if (coding)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, coding);
            tiled_stream_set_response(r->stream, resp);
            r->stream = NULL; /* MHD owns it now */
            if (req->want_trailers)
                MHD_add_response_header(resp, "Trailer", "Server-Timing");
        }
    } else {
        resp = r->release_body ? MHD_create_response_from_buffer_with_free_callback((size_t)r->body_len, r->body,
                                                                                    r->release_body)
                               : MHD_create_response_from_buffer((size_t)r->body_len, r->body, MHD_RESPMEM_MUST_FREE);
        if (resp) {
            r->body = NULL;
            r->release_body = NULL;
        }
    }
    if (!resp)
        return NULL;
    char timing[256];
    finish_timings(req);
    tiled_server_timing(&req->tm, timing, sizeof(timing));
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type[0] ? r->content_type : "application/json");
    MHD_add_response_header(resp, "X-Request-Id", req->request_id);
    MHD_add_response_header(resp, "Server-Timing", timing);
    for (int i = 0; i < r->nheaders; i++) {
        if (r->headers[i][0] && r->headers[i][1])
            MHD_add_response_header(resp, r->headers[i][0], r->headers[i][1]);
    }
    if (atomic_load(&req->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    return resp;
}

static enum MHD_Result queue_reply(struct tiled_req *req)
{
    if (req->reply.stream) /* a chunked (compressed) stream's length is not known here */
        req->bytes_out = tiled_stream_size(req->reply.stream) == UINT64_MAX ? 0 : tiled_stream_size(req->reply.stream);
    else
        req->bytes_out = req->reply.body_len;
    struct MHD_Response *resp = make_response(req);
    if (!resp)
        return MHD_NO;
    enum MHD_Result ret = MHD_queue_response(req->conn, (unsigned)req->reply.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- dispatch ----------------------------------------------------------- */

static void worker_job(void *arg)
{
    struct tiled_req *req = arg;
    req->t_work = tiled_now_us();
    req->tm.queue_us = req->t_work - req->t_queued;
    tiled_work_run(req);
    /* Resume outside the lock: once resumed, the HTTP thread may finish and
     * free the request (and its lock) at once. While suspended it cannot,
     * so `conn` read under the lock is still valid. */
    pthread_mutex_lock(&req->lock);
    struct MHD_Connection *conn = req->suspended ? req->conn : NULL;
    req->done = true;
    req->suspended = false;
    pthread_mutex_unlock(&req->lock);
    if (conn)
        MHD_resume_connection(conn);
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
        MHD_suspend_connection(req->conn);
    }
    pthread_mutex_unlock(&req->lock);
    return ok;
}

static enum MHD_Result dispatch(struct tiled_req *req)
{
    if (req->early_status) {
        tiled_reply_error(&req->reply, req->early_status, "%s", req->early_error);
        return queue_reply(req);
    }
    req->route->handler(req);
    if (req->reply.status)
        return queue_reply(req); /* finished inline */
    if (offload(req))
        return MHD_YES;
    tiled_reply_error(&req->reply, 503, "server overloaded: %lld requests are already queued; retry later",
                      (long long)req->srv->cfg.queue);
    tiled_reply_header(&req->reply, "Retry-After", "1");
    return queue_reply(req);
}

static enum MHD_Result count_content_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        (*(int *)cls)++;
    return MHD_YES;
}

/* Refuses message framing that could be read two ways (RFC 9112 6.3):
 * repeated Content-Length, or a Transfer-Encoding other than chunked. The
 * reply closes the connection, so nothing after it is taken as a request. */
static bool framing_error(struct tiled_req *req)
{
    int lengths = 0;
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, count_content_length, &lengths);
    const char *te = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (lengths > 1)
        tiled_reply_error(&req->reply, 400, "the request has %d Content-Length headers; send one", lengths);
    else if (te && strcasecmp(te, "chunked") != 0)
        tiled_reply_error(&req->reply, 501, "unsupported Transfer-Encoding '%.60s' (only chunked is supported)", te);
    else
        return false;
    tiled_reply_header(&req->reply, MHD_HTTP_HEADER_CONNECTION, "close");
    return true;
}

static enum MHD_Result first_call(struct tiled_server *srv, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, void **req_cls)
{
    if (!tiled_headwatch_head_done(srv->headwatch, c))
        return MHD_NO; /* cut at its deadline while the head completed */
    struct tiled_req *req = req_init(srv, c, url, method);
    if (!req)
        return MHD_NO;
    *req_cls = req;
    char allow[64];
    if (strcmp(version, MHD_HTTP_VERSION_1_1) == 0 && !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host")) {
        tiled_reply_error(&req->reply, 400, "the Host header is missing (required since HTTP/1.1)");
        return queue_reply(req);
    }
    req->route = tiled_route_find(method, url, allow, sizeof(allow));
    /* Without a key nothing but health is answered, not even "not found". */
    if ((!req->route || !req->route->open) && tiled_auth_enabled() &&
        !tiled_auth_check(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))) {
        tiled_reply_error(&req->reply, 401, "missing or invalid API key (send Authorization: Bearer KEY)");
        tiled_reply_header(&req->reply, "WWW-Authenticate", "Bearer realm=\"tiled\"");
        return queue_reply(req);
    }
    if (!req->route) {
        if (allow[0]) {
            tiled_reply_error(&req->reply, 405, "method %s is not allowed on %s (allowed: %s)", method, url, allow);
            tiled_reply_header(&req->reply, "Allow", allow);
        } else {
            tiled_reply_error(&req->reply, 404, "no such endpoint: %s %s", method, url);
        }
        return queue_reply(req);
    }
    if (framing_error(req))
        return queue_reply(req);
    if (req->route->needs_body)
        body_prepare(req);
    if (req->early_status) { /* e.g. 413 from Content-Length: answer before the upload */
        tiled_reply_error(&req->reply, req->early_status, "%s", req->early_error);
        return queue_reply(req);
    }
    return MHD_YES;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                      const char *version, const char *upload_data, size_t *upload_size,
                                      void **req_cls)
{
    struct tiled_req *req = *req_cls;
    if (!req)
        return first_call(cls, c, url, method, version, req_cls);
    if (*upload_size) {
        body_append(req, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (req->done) /* resumed by a worker */
        return queue_reply(req);
    return dispatch(req);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                              enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    struct tiled_req *req = *req_cls;
    if (!req)
        return;
    int status = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? req->reply.status : 499;
    tiled_headwatch_request_done(req->srv->headwatch, c); /* the next head's deadline starts now */
    if (tiled_log_enabled(TILED_LOG_INFO)) { /* the address is for the access log only */
        remote_address(c, req->remote, sizeof(req->remote));
        tiled_log_access(req, status);
    }
    tiled_metrics_record(req, status);
    if (req->v2_version)
        tiled_v2_record(req->srv, req, status == 200);
    req_free(req);
    *req_cls = NULL;
}

/* Reads a whole (small) file into a NUL-terminated malloc'd string. */
static char *read_file(const char *path, struct tile_error *e)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    if (!f) {
        tile_error_set(e, TILE_EIO, "cannot read %s", path);
        return NULL;
    }
    do {
        if (cap - len < 4096) {
            char *nb = cap < (1u << 24) ? realloc(buf, cap + 65536) : NULL;
            if (!nb) {
                free(buf);
                fclose(f);
                tile_error_set(e, TILE_EIO, "%s is too large", path);
                return NULL;
            }
            buf = nb;
            cap += 65536;
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int load_tls(struct tiled_server *srv, struct tile_error *e)
{
    const struct tiled_config *c = &srv->cfg;
    if (!c->tls_cert[0] && !c->tls_key[0])
        return 0;
    if (!c->tls_cert[0] || !c->tls_key[0])
        return tile_error_set(e, TILE_EINVAL, "--tls-cert and --tls-key must be given together");
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return tile_error_set(e, TILE_EUNSUPPORTED, "this libmicrohttpd has no TLS support");
    srv->tls_cert_pem = read_file(c->tls_cert, e);
    srv->tls_key_pem = srv->tls_cert_pem ? read_file(c->tls_key, e) : NULL;
    return srv->tls_key_pem ? 0 : -1;
}

int tiled_http_start(struct tiled_server *srv, struct tile_error *e)
{
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)srv->cfg.port);
    if (inet_pton(AF_INET, srv->cfg.host, &addr.sin_addr) != 1)
        return tile_error_set(e, TILE_EINVAL, "host '%s' is not an IPv4 address", srv->cfg.host);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    if (load_tls(srv, e) < 0)
        return -1;
    /* The TLS options go first so that without TLS they are simply skipped
     * by starting the list after them. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    if (srv->tls_cert_pem)
        flags |= MHD_USE_TLS;
    srv->headwatch = tiled_headwatch_start((unsigned)srv->cfg.header_timeout, (unsigned)srv->cfg.idle_timeout, e);
    if (!srv->headwatch && srv->cfg.header_timeout > 0)
        return -1;
    srv->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, access_handler, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_NOTIFY_COMPLETED, request_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, tiled_headwatch_notify,
        srv->headwatch, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)srv->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg.idle_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024), MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(srv->cfg.http_threads > 1 ? srv->cfg.http_threads : 0), MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned)1024, MHD_OPTION_ARRAY, srv->tls_cert_pem ? tls : tls + 2, MHD_OPTION_END);
    if (!srv->daemon) {
        tiled_headwatch_stop(srv->headwatch);
        srv->headwatch = NULL;
        return tile_error_set(e, TILE_EIO, "cannot listen on %s:%lld", srv->cfg.host, (long long)srv->cfg.port);
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = di ? di->port : (uint16_t)srv->cfg.port;
    return 0;
}

void tiled_http_quiesce(struct tiled_server *srv)
{
    /* Stop accepting, and make new connections fail at once instead of
     * waiting in the kernel's backlog for an accept that never comes. The
     * descriptor itself is closed by MHD_stop_daemon. */
    MHD_socket fd = MHD_quiesce_daemon(srv->daemon);
    if (fd != MHD_INVALID_SOCKET)
        shutdown(fd, SHUT_RDWR);
}

void tiled_http_stop(struct tiled_server *srv)
{
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    tiled_headwatch_stop(srv->headwatch);
    srv->headwatch = NULL;
    free(srv->tls_cert_pem);
    free(srv->tls_key_pem);
    srv->tls_cert_pem = srv->tls_key_pem = NULL;
}
