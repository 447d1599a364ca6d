/* h1conn.c - one HTTP/1.1 connection: bytes in, requests to the service.
 *
 * DESIGN. A connection's bytes are read into its input buffer and go
 * through the strict framer (h1wire.h) before anything else reads them:
 * its observer says where a head ends (the head is then copied and parsed
 * here, its fields split in place) and which bytes are body data (handed
 * to the service as they come), and where the message ends (dispatch).
 * Nothing the framer has not accepted reaches a parser, so there is one
 * reading of every message, the framer's.
 *
 * The framer is fed a step at a time: one line, or the body bytes it still
 * expects, so that it never runs past the end of the message in progress.
 * Pipelined requests are served one at a time: the next head is not read
 * until the reply before it has left (its last byte handed to the
 * socket), and the bytes behind it wait in the input buffer, which then
 * is not refilled (the client's sending side is pushed back by TCP).
 *
 * The first bytes the framer refuses end the connection's input: the
 * request they belong to (a refused head becomes a request of its own,
 * with what the framer read of its request line) is answered with the
 * framer's status and message as a JSON error with Connection: close, and
 * whatever the client still sends is read and dropped (up to DRAIN_MAX)
 * so that the close does not reset the answer in flight.
 *
 * A request the service parks for a worker (dispatch returns false) or a
 * streamed reply whose next piece is not produced yet leaves the
 * connection waiting: the resume comes through the loop's ready list
 * (h1loop.c). A connection whose client goes while a worker holds its
 * request stays allocated, its socket closed, until the worker resumes
 * it; the request then ends as 499.
 *
 * Deadlines: a head must arrive within --header-timeout of the connection
 * opening or of its previous request ending (then plus --idle-timeout,
 * the keep-alive gap a client may rightly leave); a body within
 * --header-timeout of its head's end plus a second per
 * TILED_RECV_MIN_RATE bytes sent (recv_deadline.h): a piece that comes
 * later is answered 408 and the connection closes, a body that stops
 * coming is cut once late and silent for BODY_STALL_US. The loop checks
 * them a few times a second (http_conn_tick).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h1serve.h"

#include "clock.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "recv_deadline.h"
#include "server.h"
#include "service.h"
#include "stream.h"
#include "session.h"

/* After a refusal, what the client still sends is read and dropped up to
 * this much; past it the connection just closes. */
#define DRAIN_MAX (1u << 20)
/* A late body is cut once no piece has come for this long: a client still
 * sending is answered 408 on its next piece instead. */
#define BODY_STALL_US 1000000u
/* How long a closing connection, its reply written and its sending side
 * shut, still reads (and drops) what the client sends before it closes. */
#define LINGER_US 2000000u


static const struct tiled_conn_ops http_conn_ops = {.suspend = http_conn_suspend, .resume = http_conn_resume};

static void on_framer(void *arg, const struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from, uint64_t to);


static uint64_t header_timeout_us(const struct http_conn *c)
{
    return (uint64_t)c->loop->t->srv->cfg.header_timeout * 1000000u;
}

struct http_conn *http_conn_new(struct http_loop *l, int fd)
{
    struct http_conn *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    /* Everything but the input buffer, which is written before it is read. */
    memset(c, 0, offsetof(struct http_conn, in));
    memset(&c->in_base, 0, sizeof(*c) - offsetof(struct http_conn, in_base));
    c->loop = l;
    c->fd = fd;
    tiled_h1_init(&c->h1);
    c->h1.observer = on_framer;
    c->h1.observer_arg = c;
    c->opened_us = c->last_active_us = tiled_coarse_us();
    uint64_t ht = header_timeout_us(c);
    c->head_deadline_us = ht ? c->opened_us + ht : 0;
    c->fresh = true;
    tiled_listener_peer(fd, c->remote, sizeof(c->remote));
    struct tiled_tls *tls = l->t->srv->tls;
    if (tls) {
        if (!(c->tls = tiled_tls_conn_new(tls, fd, false))) {
            free(c);
            return NULL;
        }
        c->handshaking = true;
    }
    return c;
}

void http_conn_free(struct http_conn *c)
{
    free(c->head);
    free(c->out);
    free(c);
}

/* Room for n bytes and a NUL in the head buffer. */
static bool head_room(struct http_conn *c, size_t n)
{
    if (n < c->head_cap)
        return true;
    size_t cap = (n + 1 + 511) & ~(size_t)511;
    char *h = realloc(c->head, cap);
    if (!h)
        return false;
    c->head = h;
    c->head_cap = cap;
    return true;
}

void http_conn_discard(struct http_conn *c)
{
    tiled_tls_conn_free(c->tls);
    http_conn_free(c);
}

/* Like recv: bytes, 0 at the end, -1 with nothing now, -2 on an error;
 * through the TLS session when there is one. */
static long conn_recv(struct http_conn *c, void *buf, size_t cap)
{
    if (c->tls)
        return tiled_tls_conn_recv(c->tls, buf, cap);
    ssize_t r = c->loop->t->io->recv(c->fd, buf, cap, 0);
    return tiled_socket_result(r);
}

/* ---- the head --------------------------------------------------------------- */

/* A field's value, NULL when absent: the first of its name. */
static const char *conn_header(void *conn, enum tiled_field f)
{
    return ((const struct http_conn *)conn)->fields[f];
}

/* Copies the accepted head [from, to) out of the input buffer (which the
 * next read may move) and splits it (h1head.h). */
static bool parse_head(struct http_conn *c, uint64_t from, uint64_t to)
{
    size_t n = (size_t)(to - from);
    if (from < c->in_base || n > TILED_H1_HEAD_MAX || !head_room(c, n))
        return false;
    memcpy(c->head, c->in + (from - c->in_base), n);
    c->head[n] = '\0';
    c->http10 = c->h1.http10;
    if (!http_head_split(c->head, &c->hd))
        return false;
    http_head_index(&c->hd, tiled_field_names, tiled_field_lens, TILED_F_COUNT, c->fields);
    return true;
}

/* ---- requests ------------------------------------------------------------------ */

/* One query parameter into the connection's list, which its request borrows. */
static void add_query(void *arg, const char *key, const char *value)
{
    struct http_conn *c = arg;
    if (c->nquery == TILED_QUERY_MAX) {
        c->query_overflow = true;
        return;
    }
    c->query[c->nquery++] = (struct tiled_kv){.key = key, .value = value ? value : ""};
}

/* Content-Length above 0, or a chunked body. */
static bool announces_body(const struct http_conn *c)
{
    return c->h1.te_lines || c->h1.content_length > 0;
}

/* The reply is complete: it goes out, and the request ends once it has. */
static void send_reply(struct http_conn *c)
{
    c->phase = HTTP_SEND;
    http_reply_queue(c);
}

/* A reply decided before the body is read (or while it is): with a body
 * still to come the connection cannot find where the next request would
 * start, so it closes after the reply, and with Expect: 100-continue the
 * client gets the refusal instead of "100 Continue" and never sends it. */
static void answer_now_and_close(struct http_conn *c)
{
    c->input_done = true;
    c->close_after = true;
    send_reply(c);
}

/* The framer accepted a head: a request for the service. */
static void begin_request(struct http_conn *c, uint64_t from, uint64_t to)
{
    struct tiled_server *srv = c->loop->t->srv;
    if (!parse_head(c, from, to)) { /* cannot happen with a head the framer accepted */
        c->input_done = c->close_after = true;
        return;
    }
    char *method = c->hd.method;
    http_unescape(c->hd.target, false);
    c->path = http_origin_path(c->hd.target);
    /* RFC 9112 9.3: "close" in any Connection line ends the connection
     * after the reply; an HTTP/1.0 one persists only with "keep-alive". */
    c->keep_alive = !http_head_lists(&c->hd, "Connection", "close") &&
                    (!c->http10 || http_head_lists(&c->hd, "Connection", "keep-alive"));
    c->is_head = strcmp(method, "HEAD") == 0;
    c->req_origin = c->fields[TILED_F_ORIGIN];
    const char *expect = c->fields[TILED_F_EXPECT];
    c->expect_continue = !c->http10 && expect && strcasecmp(expect, "100-continue") == 0;
    c->nquery = 0;
    c->query_overflow = false;
    http_query_each(c->hd.query, add_query, c);
    const struct tiled_head head = {.transport = TILED_TRANSPORT_HTTP,
                                    .method = method,
                                    .path = c->path,
                                    .remote = c->remote,
                                    .query = c->query,
                                    .nquery = c->nquery,
                                    .query_overflow = c->query_overflow,
                                    .header = conn_header};
    struct tiled_req *req = tiled_req_new(srv, &head, c, &http_conn_ops);
    if (!req) { /* out of memory: the connection goes */
        c->input_done = true;
        c->close_after = true;
        return;
    }
    c->req = req;
    c->phase = HTTP_BODY;
    http_conn_unfresh(c);
    c->head_deadline_us = 0;
    /* An answer decided by the head alone goes out before any upload; a
     * page on another origin that may not call tiled gets its 403 before
     * the route, the key check and the body, so it makes tiled do no work. */
    if (tiled_service_browser(req, c->req_origin, c->fields[TILED_F_HOST],
                              c->fields[TILED_F_ACR_METHOD]) ||
        tiled_service_route(req, c->fields[TILED_F_AUTHORIZATION]) ||
        tiled_service_expect_body(req, c->fields[TILED_F_CONTENT_LENGTH]) || tiled_service_check_head(req)) {
        if (announces_body(c))
            answer_now_and_close(c);
        return; /* without a body, its end comes at once, and dispatch sends the reply decided */
    }
    uint64_t ht = header_timeout_us(c);
    c->body_start_us = c->body_last_us = ht && announces_body(c) ? tiled_coarse_us() : 0;
    c->body_bytes = 0;
    /* "100 Continue" only while the client waits for it: not when the
     * body's bytes are here already. */
    if (c->expect_continue && announces_body(c) && to - c->in_base >= c->in_len) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        http_out_put(c, cont, sizeof(cont) - 1);
    }
}

/* A reply decided while the body arrives, before its end: it goes now,
 * and the connection closes. Over TLS the connection just closes, with
 * the reply's status in the access log: as it did when the TLS session
 * was libmicrohttpd's, which the reply could not be written beside
 * (tests/server/test_security.py holds the behaviour). */
static void answer_in_body(struct http_conn *c)
{
    if (!c->tls) {
        answer_now_and_close(c);
        return;
    }
    c->input_done = c->close_after = true;
    c->cut_status = c->req->reply.status;
    c->cut_now = true;
}

/* A body piece came after the body's deadline: 408, and the connection closes. */
static void refuse_late_body(struct http_conn *c)
{
    struct tiled_req *req = c->req;
    tiled_reply_free(&req->reply);
    tiled_reply_error(&req->reply, TILED_REQUEST_TIMEOUT,
                      "request body not received in time: %llu bytes of it came in %.1f s; a request has the "
                      "header-timeout of %lld s from the end of its head, plus a second per %d bytes of body it "
                      "sends, to send its whole body",
                      (unsigned long long)req->body_len, (double)(tiled_now_us() - req->t_start) / 1e6,
                      (long long)req->srv->cfg.header_timeout, TILED_RECV_MIN_RATE);
    atomic_fetch_add(&req->srv->body_timeouts[TILED_TRANSPORT_HTTP], 1);
    answer_in_body(c);
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

static void body_piece(struct http_conn *c, const char *data, size_t n)
{
    struct tiled_req *req = c->req;
    if (!req || c->phase != HTTP_BODY || c->input_done)
        return;
    if (c->body_start_us) {
        uint64_t now = tiled_coarse_us();
        uint64_t ht = (uint64_t)req->srv->cfg.header_timeout;
        if (now >= tiled_recv_deadline_us(c->body_start_us, ht, c->body_bytes)) {
            refuse_late_body(c);
            return;
        }
        c->body_bytes += n;
        c->body_last_us = now;
    }
    tiled_service_body(req, data, n);
    if (dropped_enough(req))
        answer_in_body(c);
}

static void on_framer(void *arg, const struct tiled_h1 *p, enum tiled_h1_event ev, uint64_t from, uint64_t to)
{
    (void)p;
    struct http_conn *c = arg;
    if (c->input_done)
        return;
    if (ev == TILED_H1_EV_HEAD)
        begin_request(c, from, to);
    else if (ev == TILED_H1_EV_DATA)
        body_piece(c, (const char *)c->in + (from - c->in_base), (size_t)(to - from));
    else
        c->msg_end = true;
}

/* Copies the printable bytes of s[0..n) (others as '?'). */
static void copy_printable(char *dst, size_t cap, const unsigned char *s, size_t n)
{
    size_t k = n < cap - 1 ? n : cap - 1;
    for (size_t i = 0; i < k; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? (char)s[i] : '?';
    dst[k] = '\0';
}

/* The method and target of a refused head, for the log: as the framer
 * read them, or the first words of its request line when it was refused
 * inside it (414, say). `unit` is the refused head's bytes. */
static void refused_line(const struct tiled_h1 *p, const unsigned char *unit, size_t unit_len, char *method,
                         size_t mcap, char *target, size_t tcap)
{
    method[0] = target[0] = '\0';
    if (p->method_len && p->target_off >= p->method_len + 1 && (size_t)p->target_off + p->target_len <= unit_len) {
        copy_printable(method, mcap, unit + p->target_off - p->method_len - 1, p->method_len);
        copy_printable(target, tcap, unit + p->target_off, p->target_len);
        return;
    }
    size_t i = 0, m, t;
    while (i < unit_len && (unit[i] == '\r' || unit[i] == '\n'))
        i++;
    for (m = i; m < unit_len && unit[m] > 0x20 && unit[m] < 0x7f; m++)
        ;
    copy_printable(method, mcap, unit + i, m - i);
    if (m < unit_len && unit[m] == ' ') {
        for (t = ++m; t < unit_len && unit[t] > 0x20 && unit[t] != 0x7f; t++)
            ;
        copy_printable(target, tcap, unit + m, t - m);
    }
}

/* The framer refused the stream: the request it belongs to is answered
 * with its verdict, and nothing after it is read as a request. */
static void refuse_stream(struct http_conn *c)
{
    const struct tiled_h1 *p = &c->h1;
    struct tiled_server *srv = c->loop->t->srv;
    if (!c->req || c->phase != HTTP_BODY) {
        /* A refused head: a request of its own, named as far as it was read.
         * Its strings live in the head buffer, which is free (no request). */
        size_t off = p->unit_start >= c->in_base ? (size_t)(p->unit_start - c->in_base) : 0;
        size_t len = off < c->in_len ? c->in_len - off : 0;
        if (!head_room(c, 16 + 256)) {
            c->input_done = c->close_after = true;
            return;
        }
        char *method = c->head, *target = c->head + 16;
        refused_line(p, c->in + off, len, method, 16, target, 256);
        c->hd.nfields = 0;
        memset(c->fields, 0, sizeof(c->fields));
        c->http10 = false;
        c->keep_alive = false;
        c->req_origin = NULL;
        c->is_head = strcmp(method, "HEAD") == 0;
        const struct tiled_head head = {.transport = TILED_TRANSPORT_HTTP,
                                        .method = method,
                                        .path = target,
                                        .remote = c->remote,
                                        .header = conn_header};
        c->req = tiled_req_new(srv, &head, c, &http_conn_ops);
        if (!c->req) {
            c->input_done = c->close_after = true;
            return;
        }
        http_conn_unfresh(c);
        c->head_deadline_us = 0;
    }
    tiled_reply_free(&c->req->reply);
    tiled_reply_error(&c->req->reply, p->status, "%s", p->message);
    answer_now_and_close(c);
}

/* The message is complete: the service decides (or parks it for a worker). */
static void dispatch(struct http_conn *c)
{
    if (!c->req) /* refused and answered already */
        return;
    c->body_start_us = 0; /* the work and the reply are not bounded */
    if (tiled_service_dispatch(c->req))
        send_reply(c);
    else
        c->phase = HTTP_WORK;
}

/* One step of the framer over what is buffered: a line, or the body
 * bytes it still expects (never beyond the message's end). False when it
 * needs more input. */
static bool feed_step(struct http_conn *c)
{
    size_t at = (size_t)(c->h1.pos - c->in_base);
    size_t avail = c->in_len - at;
    if (!avail)
        return false;
    const unsigned char *d = c->in + at;
    size_t n = avail;
    if (c->h1.unit == TILED_H1_UNIT_NONE && c->h1.remaining) {
        if (n > c->h1.remaining)
            n = (size_t)c->h1.remaining;
    } else {
        const unsigned char *lf = memchr(d, '\n', avail);
        if (lf)
            n = (size_t)(lf - d) + 1;
    }
    size_t used = tiled_h1_feed(&c->h1, d, n);
    return used > 0 || c->h1.status;
}

/* ---- ending ------------------------------------------------------------------------ */

static void end_request(struct http_conn *c, int status)
{
    struct tiled_req *req = c->req;
    c->req = NULL;
    if (c->stream) {
        tiled_stream_free(c->stream);
        c->stream = NULL;
    }
    c->body = NULL;
    c->body_off = c->body_len = 0;
    c->reply_queued = false;
    c->waiting = false;
    c->phase = HTTP_IDLE;
    c->msg_end = false;
    if (c->out_cap > HTTP_OUT_KEEP && c->out_off == c->out_len) {
        free(c->out);
        c->out = NULL;
        c->out_cap = c->out_off = c->out_len = 0;
    }
    tiled_service_end(req, status);
    if (c->head_cap > HTTP_HEAD_KEEP) { /* after the end: the request borrowed its strings */
        free(c->head);
        c->head = NULL;
        c->head_cap = 0;
    }
    /* The next head's deadline: the keep-alive gap, then the head's own. */
    uint64_t ht = header_timeout_us(c);
    c->head_deadline_us =
        ht ? tiled_coarse_us() + ht + (uint64_t)c->loop->t->srv->cfg.idle_timeout * 1000000u : 0;
}

/* The socket goes; the request in progress ends as the client gone, or,
 * when a worker holds it, once the worker resumes the connection. */
static void conn_close(struct http_conn *c)
{
    struct http_loop *l = c->loop;
    if (c->fd >= 0) {
        if (c->tls) { /* the session ends before its socket (tls.h) */
            tiled_tls_conn_bye(c->tls);
            tiled_tls_conn_free(c->tls);
            c->tls = NULL;
        }
        close(c->fd); /* also takes it out of the epoll set */
        c->fd = -1;
        atomic_fetch_sub(&l->t->nconns, 1);
        tiled_metrics_connection(TILED_TRANSPORT_HTTP, -1);
        http_conn_unfresh(c);
    }
    c->dead = true;
    if (c->req && c->phase == HTTP_WORK)
        return; /* http_conn_resumed finishes it */
    if (c->req)
        end_request(c, c->cut_status ? c->cut_status : TILED_CLIENT_GONE);
    http_loop_release(c);
}

void http_conn_abort(struct http_conn *c)
{
    if (!c->dead)
        conn_close(c);
}

/* ---- input --------------------------------------------------------------------------- */

/* Moves the unconsumed input to the buffer's start: from the framer's
 * position, or from the start of a head in progress (its bytes are
 * copied out when it is accepted, or named when it is refused). */
static void compact(struct http_conn *c)
{
    uint64_t keep = c->h1.unit == TILED_H1_UNIT_HEAD && c->h1.unit_start < c->h1.pos ? c->h1.unit_start : c->h1.pos;
    size_t off = (size_t)(keep - c->in_base);
    if (!off)
        return;
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    c->in_base = keep;
}

/* Reads what the socket has, into the buffer or, once input is done, to
 * drop it. False when the client is gone (reset, or closed while nothing
 * it sent is still to answer). */
static bool conn_read(struct http_conn *c)
{
    for (;;) {
        long r;
        if (c->input_done || c->lingering) {
            char scratch[16384];
            r = conn_recv(c, scratch, sizeof(scratch));
            if (r > 0) {
                c->dropped += (size_t)r;
                if (c->dropped > DRAIN_MAX)
                    return false;
                continue;
            }
        } else {
            compact(c);
            if (c->in_len == sizeof(c->in))
                return true; /* a request waits to be served: the rest waits in the socket */
            r = conn_recv(c, c->in + c->in_len, sizeof(c->in) - c->in_len);
            if (r > 0) {
                c->in_len += (size_t)r;
                c->last_active_us = tiled_coarse_us();
                /* One read per readiness, not a second to learn EAGAIN
                 * (one system call per request, not two): the loop's
                 * epoll is level-triggered, so what the socket still
                 * holds, or its end, is reported at the next wait;
                 * GnuTLS's decrypted records, which epoll cannot see, are
                 * taken up by http_conn_io's pending check. */
                return true;
            }
        }
        if (r == 0) {
            c->rd_eof = true;
            return !c->lingering;
        }
        return r == -1;
    }
}

/* ---- the connection's work --------------------------------------------------------------- */

/* Serves what is buffered as far as it goes: requests one at a time, each
 * reply out before the next head is read. */
static void serve(struct http_conn *c)
{
    for (;;) {
        if (c->phase == HTTP_WORK || c->waiting)
            return;
        if (c->phase == HTTP_SEND) {
            if (c->stream && !http_reply_pump(c)) {
                conn_close(c);
                return;
            }
            if (c->waiting || !c->reply_queued || http_out_pending(c))
                return; /* the stream's producer, or the socket, next */
            int status = c->req->reply.status;
            end_request(c, status);
            if (!c->keep_alive || atomic_load(&c->loop->t->srv->draining))
                c->close_after = true;
            if (c->close_after) {
                /* The reply announced the close: a request pipelined
                 * behind it is not read (the next call would serve it). */
                c->input_done = true;
                return;
            }
            continue;
        }
        if (c->input_done)
            return;
        if (!feed_step(c))
            return; /* more input needed */
        if (c->h1.status)
            refuse_stream(c);
        else if (c->msg_end) {
            c->msg_end = false;
            dispatch(c);
        }
    }
}

/* What epoll should watch the connection for now. */
static void update_events(struct http_conn *c)
{
    uint32_t ev = 0;
    bool reading = c->phase == HTTP_IDLE || c->phase == HTTP_BODY || c->input_done || c->lingering;
    if (reading && !c->rd_eof)
        ev |= EPOLLIN;
    if (http_out_pending(c))
        ev |= EPOLLOUT;
    http_loop_set_events(c, ev);
}

/* After everything: a connection done with (closing, or the client gone
 * with nothing left to answer) is closed, gracefully when it had a reply. */
static void settle(struct http_conn *c)
{
    if (c->dead)
        return;
    bool idle = !c->req && !http_out_pending(c);
    if (c->close_after && idle && !c->lingering) {
        /* The reply is out: the sending side is shut, and what the client
         * still sends is read and dropped until it closes (LINGER_US), so
         * the close does not reset the reply before the client read it. */
        tiled_tls_conn_bye(c->tls);
        c->loop->t->io->shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->input_done = true;
        c->linger_until_us = tiled_coarse_us() + LINGER_US;
    }
    if (c->lingering && c->rd_eof) {
        conn_close(c);
        return;
    }
    /* The client closed its side, and nothing it sent is still to answer:
     * an unfinished head is no request. */
    if (c->rd_eof && idle && !c->lingering) {
        conn_close(c);
        return;
    }
    if (c->rd_eof && c->phase == HTTP_BODY) { /* the body will not come */
        conn_close(c);
        return;
    }
    update_events(c);
}

/* The TLS handshake's next step: false when the connection is done with
 * (failed, closed) or waits for the socket. */
static bool handshake(struct http_conn *c)
{
    bool want_write = false;
    int rc = tiled_tls_conn_handshake(c->tls, &want_write);
    if (rc < 0) {
        conn_close(c);
        return false;
    }
    if (rc == 0) {
        http_loop_set_events(c, want_write ? EPOLLOUT : EPOLLIN);
        return false;
    }
    c->handshaking = false;
    return true;
}

/* Closes a connection asked to be cut (nothing more of its reply may go
 * out); whether it is closed. */
static bool closed_or_cut(struct http_conn *c)
{
    if (c->cut_now && !c->dead)
        conn_close(c);
    return c->dead;
}

void http_conn_io(struct http_conn *c, uint32_t events)
{
    if (c->handshaking) {
        if (!handshake(c))
            return;
        events |= EPOLLIN; /* the client's first request may have come with its Finished */
    }
    /* Both directions shut (a reset, or the client's close after our own
     * shutdown) or an error: nothing more can be read or written, and
     * epoll would report it at every wait. */
    if (events & (EPOLLHUP | EPOLLERR)) {
        conn_close(c);
        return;
    }
    if (c->tls && tiled_tls_conn_pending(c->tls))
        events |= EPOLLIN; /* decrypted bytes buffered: epoll cannot see them */
    if (events & EPOLLOUT && http_out_write(c) < 0) {
        conn_close(c);
        return;
    }
    if (events & EPOLLIN && !conn_read(c)) {
        conn_close(c);
        return;
    }
    serve(c);
    if (closed_or_cut(c))
        return;
    if (http_out_pending(c) && http_out_write(c) < 0) {
        conn_close(c);
        return;
    }
    serve(c); /* a reply out frees the next pipelined request */
    if (closed_or_cut(c))
        return;
    settle(c);
    /* Records GnuTLS decrypted beyond what the input buffer took wake no
     * epoll: the loop comes back for them. */
    if (!c->dead && c->tls && c->events & EPOLLIN && tiled_tls_conn_pending(c->tls))
        http_conn_resume(c);
}

void http_conn_resumed(struct http_conn *c)
{
    if (c->phase == HTTP_WORK) {
        if (!c->req || !tiled_service_worked(c->req))
            return; /* not the worker's resume */
        if (c->dead) {
            end_request(c, TILED_CLIENT_GONE);
            http_loop_release(c);
            return;
        }
        send_reply(c);
    }
    if (c->dead)
        return;
    c->waiting = false;
    http_conn_io(c, 0);
}

void http_conn_tick(struct http_conn *c, uint64_t now)
{
    struct tiled_server *srv = c->loop->t->srv;
    if (c->dead || c->phase == HTTP_WORK)
        return;
    if (c->lingering && now >= c->linger_until_us) {
        conn_close(c);
        return;
    }
    if (c->head_deadline_us && !c->req && now >= c->head_deadline_us) {
        atomic_fetch_add(&srv->header_timeouts, 1);
        conn_close(c);
        return;
    }
    if (c->body_start_us && c->phase == HTTP_BODY && !c->input_done &&
        now >= tiled_recv_deadline_us(c->body_start_us, (uint64_t)srv->cfg.header_timeout, c->body_bytes) &&
        now - c->body_last_us >= BODY_STALL_US) {
        atomic_fetch_add(&srv->body_timeouts[TILED_TRANSPORT_HTTP], 1);
        tiled_reply_free(&c->req->reply);
        tiled_reply_error(&c->req->reply, TILED_REQUEST_TIMEOUT, "request body stalled past its deadline");
        c->cut_status = TILED_REQUEST_TIMEOUT;
        conn_close(c);
        return;
    }
    /* No byte either way for --idle-timeout while the server owes nothing:
     * closed, as a kept-alive connection left idle or a client that stopped
     * reading its reply. */
    uint64_t idle_us = (uint64_t)srv->cfg.idle_timeout * 1000000u;
    if (idle_us && now - c->last_active_us > idle_us && !c->waiting)
        conn_close(c);
}
