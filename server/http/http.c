/* http.c - the libmicrohttpd transport: connections in, replies out.
 *
 * DESIGN. This folder (server/http/) is the only code that knows
 * libmicrohttpd. MHD calls the access handler several times per request:
 * first with only headers (the head is described to the service, which
 * routes it), then per body piece (handed to the service, which bounds it
 * by --max-body), then once more with nothing (dispatch). The service
 * either has the reply at once or parks the request for a worker through
 * the connection hooks below (suspend and resume); MHD then calls us again
 * to queue the reply. HTTP's own rules stay here: the Host header, message
 * framing, Connection: close while draining, trailers.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http.h"

#include "clock.h"
#include "cors.h"
#include "headwatch.h"
#include "list.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "recv_deadline.h"
#include "server.h"
#include "service.h"
#include "stream.h"
#include "tls.h"
#include "wirehook.h"

/* A connection's own state, its socket_context: headwatch's slot first
 * (headwatch.h), then whether a request of it has reached the service
 * yet. A connection without one is "fresh", and on the transport's list
 * of them: taken from the listener's queue, its request may still be in
 * the socket, or read but not yet handed over, after the drain would
 * otherwise have ended (nothing in flight). */
struct http_conn {
    void *watch;                     /* headwatch's (first: headwatch.h) */
    struct http_conn *prev, *next;   /* on mhd_transport.fresh while fresh */
    uint64_t opened_us;
    bool fresh;
};

/* The transport's state (srv->transport). */
struct mhd_transport {
    struct MHD_Daemon *daemon;
    struct tiled_headwatch *headwatch; /* NULL when --header-timeout is 0 */
    char hsts[48];                     /* Strict-Transport-Security value; "" = none */
    atomic_uint open;                  /* connections libmicrohttpd has (notify_connection) */
    pthread_mutex_t fresh_lock;
    struct http_conn *fresh;           /* connections none of whose requests has reached the service */
    /* Drain (listener.h), on the thread that drains: the listener held
     * (new SYNs dropped) from held_at_us until it is quiesced; its queue's
     * length last seen, and since when. */
    int held_fd;
    uint64_t held_at_us;
    unsigned held_queue;
    uint64_t held_queue_since_us;
};

/* A held listener whose queue has not moved this long while libmicrohttpd
 * is at --max-connections is shut all the same: it is not accepting (its
 * connections kept alive and idle), and the drain would wait it out. Below
 * the limit the library takes the queue, however slowly a loaded machine
 * gets to it, so the drain waits for that (within --drain-timeout). */
#define HELD_QUEUE_STUCK_US (200u * 1000u)

static struct mhd_transport *transport_of(const struct tiled_server *srv)
{
    return srv->transport;
}

/* ---- the service's view of a connection ----------------------------------- */

static void conn_suspend(void *conn)
{
    MHD_suspend_connection(conn);
}

static void conn_resume(void *conn)
{
    MHD_resume_connection(conn);
}

static const struct tiled_conn_ops mhd_conn_ops = {.suspend = conn_suspend, .resume = conn_resume};

/* The request head's fields, listed once when the access handler first
 * sees it: the dozen lookups a request makes (tiled_req_new, the CORS and
 * route checks) then compare lengths in this array instead of each walking
 * libmicrohttpd's list from the start. Its own thread only, and only while
 * first_call runs; a head of more fields than fit is looked up in the
 * library as before. */
#define HEAD_SNAP_MAX 24
struct head_snap {
    const struct MHD_Connection *conn; /* whose head; NULL: not listed */
    int n;
    bool overflow;
    struct {
        const char *key, *value;
        size_t key_len;
    } f[HEAD_SNAP_MAX];
};
static _Thread_local struct head_snap *head_snap;

static enum MHD_Result snap_field(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                  const char *value, size_t value_size)
{
    (void)kind;
    (void)value_size;
    struct head_snap *s = cls;
    if (s->n == HEAD_SNAP_MAX) {
        s->overflow = true;
        return MHD_NO;
    }
    s->f[s->n].key = key;
    s->f[s->n].key_len = key_size;
    s->f[s->n].value = value;
    s->n++;
    return MHD_YES;
}

/* A field's value, NULL when absent; the first of its name, like
 * MHD_lookup_connection_value. */
static const char *lookup_header(void *conn, const char *name)
{
    const struct head_snap *s = head_snap;
    if (!s || s->conn != conn || s->overflow)
        return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
    size_t len = strlen(name);
    for (int i = 0; i < s->n; i++)
        if (s->f[i].key_len == len && strncasecmp(s->f[i].key, name, len) == 0)
            return s->f[i].value;
    return NULL;
}

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    tiled_req_add_query(cls, key, value);
    return MHD_YES;
}

static void remote_address(struct MHD_Connection *c, char *dst, size_t cap)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    dst[0] = '\0';
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)ci->client_addr;
        inet_ntop(AF_INET6, &in6->sin6_addr, dst, (socklen_t)cap);
        return;
    }
    if (ci && ci->client_addr && ci->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)ci->client_addr;
        const unsigned char *b = (const unsigned char *)&in->sin_addr;
        if (cap < 16)
            return;
        /* By hand: snprintf was 2% of a small request (callgrind). */
        char *o = dst;
        for (int i = 0; i < 4; i++) {
            if (b[i] >= 100)
                *o++ = (char)('0' + b[i] / 100);
            if (b[i] >= 10)
                *o++ = (char)('0' + b[i] / 10 % 10);
            *o++ = (char)('0' + b[i] % 10);
            *o++ = i < 3 ? '.' : '\0';
        }
    }
}

/* ---- replies ---------------------------------------------------------------- */

/* MHD's content reader over a stream: its end codes, and the trailer. */
static ssize_t read_stream(void *cls, uint64_t pos, char *buf, size_t max)
{
    long n = tiled_stream_read(cls, pos, buf, max);
    if (n == TILED_STREAM_ERROR)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (n != TILED_STREAM_END)
        return n;
    char timing[64];
    if (tiled_stream_trailer(cls, timing, sizeof(timing)))
        MHD_add_response_footer(tiled_stream_response(cls), "Server-Timing", timing);
    return MHD_CONTENT_READER_END_OF_STREAM;
}

/* The reader of a 304's body, which libmicrohttpd never sends (it sends a
 * 304's head alone); it is there for the length the response announces. */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls;
    (void)pos;
    (void)buf;
    (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

static struct MHD_Response *body_response(struct tiled_req *req)
{
    struct tiled_reply *r = &req->reply;
    struct MHD_Response *resp;
    /* libmicrohttpd 0.9.75 gives a 304 the Content-Length of its response:
     * that of the body it stands for (RFC 9110 8.6), not 0. */
    if (r->status == TILED_NOT_MODIFIED)
        return MHD_create_response_from_callback(r->validated_len, 4096, no_body, NULL, NULL);
    if (r->stream) {
        resp = MHD_create_response_from_callback(tiled_stream_size(r->stream), (size_t)req->srv->cfg.stream_chunk,
                                                 read_stream, r->stream, tiled_stream_free);
        if (!resp)
            return NULL;
        const char *coding = tiled_stream_coding(r->stream);
        if (coding)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, coding);
        tiled_stream_set_response(r->stream, resp);
        r->stream = NULL; /* MHD owns it now */
        if (req->want_trailers)
            MHD_add_response_header(resp, "Trailer", "Server-Timing");
        return resp;
    }
    resp = r->release_body ? MHD_create_response_from_buffer_with_free_callback((size_t)r->body_len, r->body,
                                                                                r->release_body)
                           : MHD_create_response_from_buffer((size_t)r->body_len, r->body, MHD_RESPMEM_MUST_FREE);
    if (resp) {
        r->body = NULL;
        r->release_body = NULL;
    }
    return resp;
}

/* CORS headers while CORS is on (cors.h). */
static void add_cors_headers(struct MHD_Response *resp, const struct tiled_server *srv, struct MHD_Connection *c)
{
    const char *const *h =
        tiled_cors_answer_headers(srv->cfg.cors_origins, lookup_header(c, "Origin"));
    for (; h && h[0]; h += 2)
        MHD_add_response_header(resp, h[0], h[1]);
}

static enum MHD_Result queue_reply(struct tiled_req *req, struct MHD_Connection *c)
{
    char timing[256];
    tiled_service_sending(req, timing, sizeof(timing));
    struct MHD_Response *resp = body_response(req);
    if (!resp)
        return MHD_NO;
    const struct tiled_reply *r = &req->reply;
    /* A 204 has no body, so no body type; a 304 stands for the body the
     * client holds, and sends only what updates its cached copy (caching.h). */
    if (r->status != TILED_NO_CONTENT && r->status != TILED_NOT_MODIFIED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                r->content_type[0] ? r->content_type : "application/json");
    MHD_add_response_header(resp, "X-Request-Id", req->request_id);
    MHD_add_response_header(resp, "Server-Timing", timing);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff"); /* bodies are data, never to be sniffed */
    for (int i = 0; i < r->nheaders; i++) {
        if (r->headers[i][0] && r->headers[i][1])
            MHD_add_response_header(resp, r->headers[i][0], r->headers[i][1]);
    }
    add_cors_headers(resp, req->srv, c);
    if (transport_of(req->srv)->hsts[0])
        MHD_add_response_header(resp, "Strict-Transport-Security", transport_of(req->srv)->hsts);
    if (atomic_load(&req->srv->draining))
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---- requests ------------------------------------------------------------- */

/* The connection's descriptor: the receive hook's key (wirehook.h). */
static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* A request the receive hook refused (wirehook.h): its JSON error, and the
 * connection closes, so nothing after it is read as a request. */
static enum MHD_Result answer_refused(struct tiled_req *req, struct MHD_Connection *c,
                                      const struct tiled_wire_verdict *v)
{
    tiled_reply_error(&req->reply, v->status, "%s", v->message);
    tiled_reply_header(&req->reply, MHD_HTTP_HEADER_CONNECTION, "close");
    return queue_reply(req, c);
}

/* The path of an absolute-form target ("http://host:port/path", RFC 9112
 * 3.2.2, as proxies send): its authority is not needed to route. */
static const char *origin_path(const char *url)
{
    if (strncasecmp(url, "http://", 7) == 0)
        url += 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        url += 8;
    else
        return url;
    const char *slash = strchr(url, '/');
    return slash ? slash : "/";
}

/* Content-Length above 0, or a chunked body. */
static bool announces_body(struct MHD_Connection *c)
{
    const char *cl = lookup_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return lookup_header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
           (cl && strspn(cl, "0") != strlen(cl));
}

/* The one rule for Connection: close. A request refused from its head
 * alone is answered at once, body unread, when it announced a body: the
 * connection then closes (MHD cannot find where the next request would
 * start), and with Expect: 100-continue the client gets the refusal
 * instead of "100 Continue" and never sends the body. A request without a
 * body is answered at MHD's last call for it, like every other (dispatch
 * sends a reply already decided), and its connection stays open, as it
 * does after every error found in a body. */
static enum MHD_Result answer_from_head(struct tiled_req *req, struct MHD_Connection *c)
{
    if (!announces_body(c))
        return MHD_YES;
    tiled_reply_header(&req->reply, MHD_HTTP_HEADER_CONNECTION, "close");
    return queue_reply(req, c);
}

/* The reply, written to the socket now, and the connection closed: for a
 * request whose body is still arriving. libmicrohttpd 0.9.75 takes no
 * response while a body is being read (MHD_queue_response accepts one only
 * right after the head or once the request is complete), and the request's
 * end is what such a client withholds. So the reply is written here, where
 * libmicrohttpd has nothing of its own to send (the head is read, no reply
 * begun, a "100 Continue" long gone), and MHD_NO then makes it close the
 * connection. Over TLS the bytes would have to go through the TLS session,
 * which libmicrohttpd does not lend: there the connection just closes. The
 * access log has the reply's status either way (request_completed). */
static enum MHD_Result reply_now_and_close(struct tiled_req *req, struct MHD_Connection *c)
{
    const struct tiled_reply *r = &req->reply;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (req->srv->tls || !ci || !r->body)
        return MHD_NO;
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %llu\r\n"
                     "X-Request-Id: %s\r\nConnection: close\r\n\r\n",
                     r->status, MHD_get_reason_phrase_for((unsigned)r->status), (unsigned long long)r->body_len,
                     req->request_id);
    struct iovec iov[2] = {{head, (size_t)n}, {r->body, (size_t)r->body_len}};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
    /* Best effort: a few hundred bytes into an idle socket's send buffer. */
    (void)sendmsg(ci->connect_fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    return MHD_NO;
}

/* A body piece came after the body's deadline (headwatch.h): 408, and the
 * connection closes. */
static enum MHD_Result refuse_late_body(struct tiled_req *req, struct MHD_Connection *c)
{
    tiled_reply_error(&req->reply, TILED_REQUEST_TIMEOUT,
                      "request body not received in time: %llu bytes of it came in %.1f s; a request has the "
                      "header-timeout of %lld s from the end of its head, plus a second per %d bytes of body it "
                      "sends, to send its whole body",
                      (unsigned long long)req->body_len, (double)(tiled_now_us() - req->t_start) / 1e6,
                      (long long)req->srv->cfg.header_timeout, TILED_RECV_MIN_RATE);
    return reply_now_and_close(req, c);
}

/* A body refused while it arrives (over --max-body, say) is still read and
 * dropped, so a client that reads nothing until it has sent all gets the
 * reply at the body's end; but only up to --max-body more bytes. Past that
 * the body may never end (chunked, of no stated length): the reply goes
 * now and the connection closes. */
static bool dropped_enough(const struct tiled_req *req)
{
    return req->reply.status && req->body_dropped > req->srv->lim.max_body;
}

/* *req_cls from the request line until the access handler's first call
 * (MHD_OPTION_URI_LOG_CALLBACK): with it set, libmicrohttpd reports the end
 * of a request it refused by itself (request_completed), which it does not
 * for a request nobody was told about. */
static char uri_seen;

static void *uri_logged(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    (void)uri;
    (void)c;
    return &uri_seen;
}

/* Connection c's first request is in flight (counted by the service from
 * here on, so the drain waits for it there): c is no longer fresh. */
static void conn_used(struct mhd_transport *t, struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct http_conn *hc = ci ? ci->socket_context : NULL;
    if (hc && hc->fresh) {
        pthread_mutex_lock(&t->fresh_lock);
        TILE_LIST_UNLINK(t->fresh, hc);
        hc->fresh = false;
        pthread_mutex_unlock(&t->fresh_lock);
    }
}

static enum MHD_Result first_call_of(struct tiled_server *srv, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *version, void **req_cls);

static enum MHD_Result first_call(struct tiled_server *srv, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, void **req_cls)
{
    struct head_snap snap = {.conn = c};
    MHD_get_connection_values_n(c, MHD_HEADER_KIND, snap_field, &snap);
    head_snap = &snap;
    enum MHD_Result rc = first_call_of(srv, c, url, method, version, req_cls);
    head_snap = NULL;
    return rc;
}

static enum MHD_Result first_call_of(struct tiled_server *srv, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *version, void **req_cls)
{
    (void)version; /* its rules are the receive hook's (h1wire.h) */
    if (!tiled_headwatch_head_done(transport_of(srv)->headwatch, c))
        return MHD_NO; /* cut at its deadline while the head completed */
    if (!tiled_wire_watched(conn_fd(c)))
        return MHD_NO; /* its bytes were never judged (wirehook.h): fail closed */
    /* A refused head reaches here as the hook's stand-in: answered with
     * what the hook read of the real one. */
    const struct tiled_wire_verdict *refused = tiled_wire_head(conn_fd(c));
    const struct tiled_head head = {.method = refused ? refused->method : method,
                                    .path = refused ? refused->target : origin_path(url),
                                    .header = lookup_header};
    struct tiled_req *req = tiled_req_new(srv, &head, c, &mhd_conn_ops);
    if (!req)
        return MHD_NO;
    *req_cls = req;
    conn_used(transport_of(srv), c);
    if (refused)
        return answer_refused(req, c, refused);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_query, req);
    /* An answer decided by the head alone goes out before any upload; a
     * page on another origin that may not call tiled gets its 403 before
     * the route, the key check and the body, so it makes tiled do no work. */
    if (tiled_service_browser(req, lookup_header(c, "Origin"), lookup_header(c, MHD_HTTP_HEADER_HOST),
                              lookup_header(c, "Access-Control-Request-Method")) ||
        tiled_service_route(req, lookup_header(c, MHD_HTTP_HEADER_AUTHORIZATION)) ||
        tiled_service_expect_body(req, lookup_header(c, MHD_HTTP_HEADER_CONTENT_LENGTH)) ||
        tiled_service_check_head(req))
        return answer_from_head(req, c);
    /* The body's own deadline starts (headwatch.h). Without a body the
     * request's last call comes at once and ends it: cheaper than looking
     * for Content-Length and Transfer-Encoding again. */
    tiled_headwatch_body_start(transport_of(srv)->headwatch, c);
    return MHD_YES;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                      const char *version, const char *upload_data, size_t *upload_size,
                                      void **req_cls)
{
    struct tiled_req *req = *req_cls;
    if (!req || req == (void *)&uri_seen)
        return first_call(cls, c, url, method, version, req_cls);
    struct tiled_headwatch *hw = transport_of(req->srv)->headwatch;
    if (*upload_size) {
        if (!tiled_headwatch_body_piece(hw, c, *upload_size))
            return refuse_late_body(req, c);
        tiled_service_body(req, upload_data, *upload_size);
        *upload_size = 0;
        return dropped_enough(req) ? reply_now_and_close(req, c) : MHD_YES;
    }
    if (!req->done) {
        tiled_headwatch_body_done(hw, c); /* the work and the reply are not bounded */
        const struct tiled_wire_verdict *refused = tiled_wire_body(conn_fd(c));
        if (refused) /* the body's end was the hook's stand-in */
            return answer_refused(req, c, refused);
    }
    if (req->done || tiled_service_dispatch(req)) /* resumed by a worker, or ready at once */
        return queue_reply(req, c);
    return MHD_YES;
}

/* libmicrohttpd ended a request before the access handler saw it: it
 * answered by itself (a refusal the receive hook did not foresee) or the
 * client went. It is counted and logged all the same, under the route
 * label "other", with what is known of it: the status the library queued,
 * the request id, the address. */
static struct tiled_req *library_ended(struct tiled_server *srv, struct MHD_Connection *c,
                                       enum MHD_RequestTerminationCode toe)
{
    const struct tiled_head head = {.method = "", .path = "", .header = lookup_header};
    struct tiled_req *req = tiled_req_new(srv, &head, c, &mhd_conn_ops);
    if (!req)
        return NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
    (void)toe; /* a status queued was sent, or its sending failed: either way it is the answer */
    req->reply.status = ci && ci->http_status ? (int)ci->http_status : TILED_CLIENT_GONE;
    return req;
}

static void request_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                              enum MHD_RequestTerminationCode toe)
{
    struct tiled_server *srv = cls;
    struct tiled_req *req = *req_cls;
    if (req == (void *)&uri_seen) {
        *req_cls = NULL;
        if (!(req = library_ended(srv, c, toe)))
            return;
        remote_address(c, req->remote, sizeof(req->remote));
        tiled_service_end(req, req->reply.status);
        return;
    }
    if (!req)
        return;
    int status = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? req->reply.status : TILED_CLIENT_GONE;
    /* The next head's deadline starts now. A body cut or refused as late
     * ends the connection, not as the client going, but as a 408. */
    if (tiled_headwatch_request_done(transport_of(srv)->headwatch, c))
        tiled_reply_error(&req->reply, TILED_REQUEST_TIMEOUT, "request body stalled past its deadline");
    if (req->reply.status == TILED_REQUEST_TIMEOUT || dropped_enough(req)) /* answered before the body's end */
        status = req->reply.status;
    if (tiled_log_enabled(TILED_LOG_INFO)) /* the address is for the access log only */
        remote_address(c, req->remote, sizeof(req->remote));
    tiled_service_end(req, status);
    *req_cls = NULL;
}

/* ---- the daemon ------------------------------------------------------------- */

/* Every connection's start and end: its bytes pass the receive hook
 * (wirehook.h; one it cannot watch is not served), its head deadlines
 * (headwatch.h) and, over TLS, its session's policy and certificate
 * (tls.h): the one loaded last, held until the connection ends, so a
 * reload never frees it under a handshake. libmicrohttpd's own credentials
 * (the files as first loaded) serve no session: one this fails for is
 * closed. The socket is still open at both calls, so its number names the
 * session. */
static void notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    struct tiled_server *srv = cls;
    struct mhd_transport *t = transport_of(srv);
    int fd = conn_fd(c);
    tiled_metrics_connection(TILED_TRANSPORT_HTTP, code == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
    struct http_conn *hc = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&t->open, 1);
        if ((hc = calloc(1, sizeof(*hc)))) {
            hc->opened_us = tiled_now_us();
            hc->fresh = true;
            pthread_mutex_lock(&t->fresh_lock);
            TILE_LIST_PUSH(t->fresh, hc);
            pthread_mutex_unlock(&t->fresh_lock);
            *socket_context = hc;
        }
        if ((!hc || !tiled_wire_open(fd, srv->tls != NULL, c, (unsigned)srv->cfg.idle_timeout)) && fd >= 0)
            shutdown(fd, SHUT_RDWR); /* not served without its state */
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        atomic_fetch_sub(&t->open, 1);
        tiled_wire_close(fd);
    }
    if (hc)
        tiled_headwatch_notify(t->headwatch, c, &hc->watch, code);
    if (code == MHD_CONNECTION_NOTIFY_CLOSED && hc) {
        if (hc->fresh) {
            pthread_mutex_lock(&t->fresh_lock);
            TILE_LIST_UNLINK(t->fresh, hc);
            pthread_mutex_unlock(&t->fresh_lock);
        }
        free(hc);
        *socket_context = NULL;
    }
    if (!srv->tls || fd < 0)
        return;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        tiled_tls_session_end(srv->tls, fd);
        return;
    }
    /* A session that cannot take the current certificate is not served
     * with libmicrohttpd's (the one loaded at start, perhaps rotated out
     * since because it was compromised): the connection goes. */
    const union MHD_ConnectionInfo *s = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (!s || tiled_tls_session_start(srv->tls, s->tls_session, fd, false) < 0) {
        tiled_log_event(TILED_LOG_WARN, "tls_session", "{s:s}", "error",
                        "cannot set up a TLS session with the current certificate; the connection is closed");
        shutdown(fd, SHUT_RDWR);
    }
}

int tiled_http_start(struct tiled_server *srv, struct tile_error *e)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    if (tiled_wire_start(e) < 0)
        return -1;
    /* The TLS options go first so that without TLS they are simply skipped
     * by starting the list after them. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls ? (void *)tiled_tls_cert_pem(srv->tls) : NULL},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls ? (void *)tiled_tls_key_pem(srv->tls) : NULL},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, srv->tls ? (void *)tiled_tls_priorities(srv->tls) : NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    if (srv->tls) {
        if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
            return tile_error_set(e, TILE_EUNSUPPORTED, "this libmicrohttpd has no TLS support");
        /* Without "turbo" libmicrohttpd ends a TLS connection with
         * close_notify (gnutls_bye) rather than just closing it. */
        flags = (flags & ~(unsigned)MHD_USE_TURBO) | MHD_USE_TLS;
    }
    struct mhd_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the HTTP transport");
    t->held_fd = -1;
    pthread_mutex_init(&t->fresh_lock, NULL);
    if (srv->tls && srv->cfg.hsts_max_age > 0)
        snprintf(t->hsts, sizeof(t->hsts), "max-age=%lld", (long long)srv->cfg.hsts_max_age);
    t->headwatch = tiled_headwatch_start((unsigned)srv->cfg.header_timeout, (unsigned)srv->cfg.idle_timeout,
                                         &srv->header_timeouts, &srv->body_timeouts[TILED_TRANSPORT_HTTP], e);
    if (!t->headwatch && srv->cfg.header_timeout > 0) {
        free(t);
        return -1;
    }
    /* The listener is tiled's (listener.h: names, IPv6, errors that say
     * why), handed to the library, which accepts on it and closes it. */
    int lfd = tiled_listener_open(srv->cfg.host, (long long)srv->cfg.port, "--port", 1024, e);
    if (lfd < 0) {
        tiled_headwatch_stop(t->headwatch);
        pthread_mutex_destroy(&t->fresh_lock);
        free(t);
        return -1;
    }
    srv->transport = t;
    /* The connection's pool: libmicrohttpd zeroes all of it after every
     * request on a kept-alive connection, so its size is a cost per
     * request (about 1.5 instructions a byte). 16 KiB holds every head,
     * trailer section and reply head the framer lets through (h1wire.h). */
    t->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, access_handler, srv, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)lfd,
        MHD_OPTION_NOTIFY_COMPLETED, request_completed, srv, MHD_OPTION_NOTIFY_CONNECTION, notify_connection, srv,
        MHD_OPTION_URI_LOG_CALLBACK, uri_logged, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)srv->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg.idle_timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024), MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)(srv->cfg.http_threads > 1 ? srv->cfg.http_threads : 0), MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned)1024, MHD_OPTION_ARRAY, srv->tls ? tls : tls + 3, MHD_OPTION_END);
    if (!t->daemon) {
        tiled_headwatch_stop(t->headwatch);
        pthread_mutex_destroy(&t->fresh_lock);
        free(t);
        srv->transport = NULL;
        close(lfd);
        return tile_error_set(e, TILE_EIO, "cannot start the HTTP transport on %s:%lld (libmicrohttpd refused its "
                              "options)", srv->cfg.host, (long long)srv->cfg.port);
    }
    srv->port = (uint16_t)tiled_listener_port(lfd);
    return 0;
}

/* libmicrohttpd stops accepting, and the listener is shut: a connection
 * still trying gets a reset at once instead of waiting in the kernel's
 * backlog for an accept that never comes. MHD_stop_daemon closes it. */
static void close_listener(struct mhd_transport *t)
{
    MHD_socket fd = MHD_quiesce_daemon(t->daemon);
    if (fd != MHD_INVALID_SOCKET)
        shutdown(fd, SHUT_RDWR);
    t->held_fd = -1;
}

void tiled_http_quiesce(struct tiled_server *srv)
{
    struct mhd_transport *t = transport_of(srv);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(t->daemon, MHD_DAEMON_INFO_LISTEN_FD);
    t->held_fd = di ? di->listen_fd : -1;
    t->held_at_us = t->held_queue_since_us = tiled_now_us();
    t->held_queue = 0;
    if (t->held_fd < 0 || tiled_listener_hold(t->held_fd) < 0)
        close_listener(t); /* no filter: new connections must not come in the whole drain */
}

/* A connection opened this long before the drain began without a request
 * is idle: the drain does not wait for it (one opened since, or just
 * before, came from the listener's queue, its request sent). */
#define FRESH_IDLE_US (1000u * 1000u)

/* Whether a connection opened from FRESH_IDLE_US before the drain on has
 * no request in the service yet: the library has still to read it from the
 * socket, or to hand it over (under load, after the listener's queue is
 * empty and the requests in flight have ended). */
static bool fresh_waiting(struct mhd_transport *t)
{
    bool waiting = false;
    pthread_mutex_lock(&t->fresh_lock);
    for (struct http_conn *hc = t->fresh; hc && !waiting; hc = hc->next)
        waiting = hc->opened_us + FRESH_IDLE_US > t->held_at_us;
    pthread_mutex_unlock(&t->fresh_lock);
    return waiting;
}

bool tiled_http_drained(struct tiled_server *srv)
{
    struct mhd_transport *t = transport_of(srv);
    if (t->held_fd < 0)
        return !fresh_waiting(t);
    uint64_t now = tiled_now_us();
    unsigned queued = tiled_listener_queued(t->held_fd);
    if (queued != t->held_queue) {
        t->held_queue = queued;
        t->held_queue_since_us = now;
    }
    bool stuck = atomic_load(&t->open) >= (unsigned)srv->cfg.max_connections &&
                 now - t->held_queue_since_us >= HELD_QUEUE_STUCK_US;
    if ((now - t->held_at_us < TILED_LISTEN_SETTLE_US || queued > 0) && !stuck)
        return false; /* libmicrohttpd still accepts them: each is served, with Connection: close */
    close_listener(t);
    return !fresh_waiting(t);
}

void tiled_http_stop(struct tiled_server *srv)
{
    struct mhd_transport *t = transport_of(srv);
    MHD_stop_daemon(t->daemon);
    tiled_headwatch_stop(t->headwatch);
    pthread_mutex_destroy(&t->fresh_lock);
    free(t);
    srv->transport = NULL;
}

const char *tiled_http_library(void)
{
    static char text[48];
    snprintf(text, sizeof(text), "libmicrohttpd %s", MHD_get_version());
    return text;
}
