/* call.c - one gRPC call, an HTTP/2 stream, as one service request
 * (the interface is service.h; gRPC's rules are its PROTOCOL-HTTP2.md).
 *
 * DESIGN. The call describes its metadata to the service like server/http/
 * describes an HTTP head, feeds the request message to it as DATA arrives
 * (the 5-byte prefixes found by api/grpc_frame.c's deframer, whatever the
 * DATA frame boundaries), dispatches at END_STREAM, and sends the reply:
 * an error as Trailers-Only (one HEADERS frame with grpc-status and the
 * percent-encoded grpc-message), a message as HEADERS, DATA (prefix and
 * body, or the stream read as it is produced) and trailers with
 * grpc-status 0 and server-timing.
 *
 * What belongs to the transport is refused here before the service sees a
 * byte of the message: a content-type that is not gRPC (HTTP 415), a
 * grpc-encoding other than identity, gzip or deflate (UNIMPLEMENTED; a
 * compressed message is named to the service as the request's
 * content_encoding, and the work path inflates it on a worker,
 * inflate.c), a message above
 * --max-grpc-message (RESOURCE_EXHAUSTED, before it is allocated) and a
 * second message in a unary call. A call is not refused for the drain:
 * every stream the final GOAWAY covers is served (loop.c, conn.c).
 *
 * Lifetime: the request ends (logs, metrics, free) once its stream is
 * closed, whichever way, and no worker holds it: a call a worker holds
 * (parked) waits for the worker's resume even when the client cancelled,
 * the deadline passed or the connection died; its reply is then dropped
 * and the request ends as 499.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "h2.h"

#include "clock.h"
#include "grow.h"
#include "list.h"
#include "memory.h"
#include "numfmt.h"
#include "pbwire.h"
#include "recv_deadline.h"
#include "server.h"
#include "service.h"
#include "stream.h"
#include "text.h"

/* What a stream that is between messages when the drain begins ends with
 * (UNAVAILABLE: the client sends its next request elsewhere); Triton's text. */
static const char SHUTTING_DOWN[] = "GRPC server is shutting down and has stopped accepting new requests.";

/* Parking is known from tiled_service_dispatch's answer and a stream's
 * "not ready" from its read of 0 bytes, both on this thread: nothing to do
 * when the service says it suspends. */
static void conn_suspend(void *call)
{
    (void)call;
}

static const struct tiled_conn_ops grpc_conn_ops = {.suspend = conn_suspend, .resume = grpc_call_resume};

static void stream_trailers(struct grpc_call *call);
static void stream_message_done(struct grpc_call *call);
static void stream_answer(struct grpc_call *call);
static uint64_t reply_hold(const struct grpc_call *call);

/* ---- metadata ------------------------------------------------------------------ */

void grpc_call_header(struct grpc_call *call, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
    if (call->state != CALL_HEAD) /* trailers from the client: nothing gRPC defines */
        return;
    if (call->nfields >= GRPC_HEAD_FIELDS || nlen + vlen + 2 > GRPC_HEAD_BYTES - call->head_used) {
        call->head_overflow = true;
        return;
    }
    char *p = call->head + call->head_used;
    memcpy(p, name, nlen);
    p[nlen] = '\0';
    memcpy(p + nlen + 1, value, vlen);
    p[nlen + 1 + vlen] = '\0';
    call->field[call->nfields++] = (uint16_t)call->head_used;
    call->head_used += (uint32_t)(nlen + vlen + 2);
}

static const char *field(const struct grpc_call *call, const char *name)
{
    for (int i = 0; i < call->nfields; i++) {
        const char *f = call->head + call->field[i];
        /* The first letter, case-folded, rules out most fields cheaply:
         * the service asks for a dozen names per call. */
        if ((f[0] | 0x20) == (name[0] | 0x20) && strcasecmp(f, name) == 0)
            return f + strlen(f) + 1;
    }
    return NULL;
}

/* The service's view of the metadata. HTTP's transfer headers are hidden:
 * in gRPC, te: trailers and accept-encoding describe the HTTP/2 exchange
 * and message compression is grpc-encoding's, so the service must not
 * answer them with chunking or a compressed body. */
static const char *service_header(void *call, enum tiled_field f)
{
    if (f == TILED_F_TE || f == TILED_F_ACCEPT_ENCODING || f == TILED_F_CONTENT_ENCODING || f == TILED_F_CONTENT_LENGTH)
        return NULL;
    return field(call, tiled_field_names[f]);
}

/* ---- sending ---------------------------------------------------------------------- */

/* A HEADERS block being built: names are literals or lower-cased copies. */
struct nvs {
    nghttp2_nv nv[8 + TILED_REPLY_HEADERS];
    size_t n;
    char lower[TILED_REPLY_HEADERS][64];
    int nlower;
    char vary[TILED_VARY_TEXT_MAX];
};

static void add(struct nvs *h, const char *name, const char *value)
{
    if (h->n < sizeof(h->nv) / sizeof(h->nv[0]))
        h->nv[h->n++] = (nghttp2_nv){(uint8_t *)name, (uint8_t *)value, strlen(name), strlen(value),
                                     NGHTTP2_NV_FLAG_NONE};
}

/* The reply's own headers as metadata (lower-case, as HTTP/2 requires),
 * less those HTTP/2 forbids or that this transport sets itself. */
static void add_reply_headers(struct nvs *h, const struct tiled_reply *r)
{
    static const char *const skip[] = {"connection", "keep-alive", "transfer-encoding", "upgrade",
                                       "content-type", "content-length", "content-encoding"};
    for (int i = 0; i < r->nheaders && h->nlower < TILED_REPLY_HEADERS; i++) {
        const char *name = r->headers[i][0], *value = r->headers[i][1];
        if (!name || !value || strlen(name) >= sizeof(h->lower[0]))
            continue;
        char *low = h->lower[h->nlower];
        size_t k = 0;
        for (; name[k]; k++)
            low[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] + 32 : name[k]);
        low[k] = '\0';
        bool skipped = false;
        for (size_t j = 0; j < sizeof(skip) / sizeof(skip[0]); j++)
            skipped |= strcmp(low, skip[j]) == 0;
        if (!skipped) {
            h->nlower++;
            add(h, low, value);
        }
    }
    if (r->vary) {
        tiled_vary_text(r->vary, h->vary);
        add(h, "vary", h->vary);
    }
}

static void submit(struct grpc_call *call, const struct nvs *h, const nghttp2_data_provider *body)
{
    call->state = CALL_REPLY;
    if (nghttp2_submit_response(call->conn->h2, call->id, h->nv, h->n, body) != 0)
        nghttp2_submit_rst_stream(call->conn->h2, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_INTERNAL_ERROR);
    grpc_loop_mark_dirty(call->conn);
}

/* An error as Trailers-Only: one HEADERS frame that ends the stream.
 * `r` adds its headers (grpc-accept-encoding, retry-after...); may be NULL. */
static void send_status(struct grpc_call *call, int code, const char *message, const struct tiled_reply *r,
                        const char *timing)
{
    char status[12], encoded[1024];
    struct nvs h = {.n = 0};
    snprintf(status, sizeof(status), "%d", code);
    add(&h, ":status", "200");
    add(&h, "content-type", "application/grpc");
    add(&h, "grpc-status", status);
    if (message && message[0]) {
        tile_grpc_message_encode(message, encoded, sizeof(encoded));
        add(&h, "grpc-message", encoded);
    }
    if (timing)
        add(&h, "server-timing", timing);
    if (call->req)
        add(&h, "x-request-id", call->req->request_id);
    if (r)
        add_reply_headers(&h, r);
    submit(call, &h, NULL);
}

/* A refusal in HTTP's own terms (415, 405): the client is not speaking gRPC. */
static void send_http(struct grpc_call *call, const char *timing)
{
    const struct tiled_reply *r = &call->req->reply;
    char status[12];
    struct nvs h = {.n = 0};
    snprintf(status, sizeof(status), "%d", r->status);
    add(&h, ":status", status);
    add(&h, "server-timing", timing);
    add(&h, "x-request-id", call->req->request_id);
    add_reply_headers(&h, r);
    submit(call, &h, NULL);
}

static void send_trailers(struct grpc_call *call)
{
    char timing[256];
    struct nvs h = {.n = 0};
    tiled_server_timing(&call->req->tm, timing, sizeof(timing)); /* a stream's figures are final only now */
    add(&h, "grpc-status", "0");
    add(&h, "server-timing", timing);
    nghttp2_submit_trailer(call->conn->h2, call->id, h.nv, h.n);
}

/* The reply message's bytes at offset `at` (prefix included), in place:
 * how many are ready there (at most max), 0 when a stream has none yet,
 * negative when it was cut short. A stream's ready run is asked for once
 * and kept (call->run) until all of it is framed, rather than peeked for
 * every DATA frame (twice: counted, then written). */
static long message_piece(struct grpc_call *call, uint64_t at, size_t max, const uint8_t **p)
{
    const struct tiled_reply *r = &call->req->reply;
    if (at < call->prefix_len) {
        *p = call->prefix + at;
        return (long)(call->prefix_len - at < max ? call->prefix_len - at : max);
    }
    if (call->errbuf) {
        *p = call->errbuf + (at - call->prefix_len);
        return (long)max;
    }
    if (!r->stream) {
        *p = (const uint8_t *)r->body + (at - call->prefix_len);
        return (long)max;
    }
    if (!call->run || at < call->run_at || at >= call->run_at + call->run_len) {
        const char *data;
        long n = tiled_stream_peek(r->stream, at - call->prefix_len, &data, SIZE_MAX);
        if (n <= 0)
            return n;
        call->run = (const uint8_t *)data;
        call->run_at = at;
        call->run_len = (size_t)n;
    }
    size_t left = call->run_len - (size_t)(at - call->run_at);
    *p = call->run + (at - call->run_at);
    return (long)(left < max ? left : max);
}

/* `n` bytes at call->sent are framed (lent to the connection): the run
 * cached is left behind once passed; its chunk is still the connection's
 * until given back. */
static void message_sent(struct grpc_call *call, size_t n)
{
    call->sent += n;
    if (call->run && call->sent == call->run_at + call->run_len)
        call->run = NULL;
}

/* A connection's unsent reply bytes (c->unsent, what --max-grpc-conn-memory
 * bounds) change only here, so the figures follow them: the sum over
 * connections, and the most any one connection held at once, which
 * tiled_grpc_metrics exports (the budget's own account, not the allocator's). */
static atomic_uint_fast64_t unsent_now, unsent_peak;

void grpc_unsent_figures(uint64_t *now, uint64_t *peak)
{
    *now = atomic_load_explicit(&unsent_now, memory_order_relaxed);
    *peak = atomic_load_explicit(&unsent_peak, memory_order_relaxed);
}

static void unsent_add(struct grpc_conn *c, uint64_t n)
{
    c->unsent += n;
    atomic_fetch_add_explicit(&unsent_now, n, memory_order_relaxed);
    uint64_t peak = atomic_load_explicit(&unsent_peak, memory_order_relaxed);
    while (c->unsent > peak && !atomic_compare_exchange_weak_explicit(&unsent_peak, &peak, c->unsent,
                                                                       memory_order_relaxed, memory_order_relaxed))
        ;
}

static void unsent_sub(struct grpc_conn *c, uint64_t n)
{
    c->unsent -= n;
    atomic_fetch_sub_explicit(&unsent_now, n, memory_order_relaxed);
}

void grpc_call_given_back(struct grpc_call *call, uint64_t at, size_t n)
{
    const struct tiled_reply *r = &call->req->reply;
    if (at < call->prefix_len) /* the prefix, the call's own bytes (a piece never goes past it) */
        return;
    /* The stream frees a chunk when its last byte comes back; the pieces
     * come back in order, so that is when all of it was written. */
    if (r->stream && !call->errbuf) {
        tiled_stream_consume(r->stream, at - call->prefix_len, n);
        if (at + n == call->prefix_len + call->msg_len) { /* the last byte: the stream holds nothing more */
            unsent_sub(call->conn, call->unsent);
            call->unsent = 0;
        }
    } else {
        call->unsent -= n;
        unsent_sub(call->conn, n);
    }
}

/* nghttp2's DATA source: counts what the next frame carries (the 5-byte
 * prefix, then the message from the reply's body or stream) without
 * copying it (NGHTTP2_DATA_FLAG_NO_COPY: grpc_call_send_data writes it);
 * the trailers follow the last byte. */
static ssize_t read_message(nghttp2_session *s, int32_t id, uint8_t *buf, size_t cap, uint32_t *flags,
                            nghttp2_data_source *src, void *user)
{
    (void)s;
    (void)id;
    (void)buf;
    (void)user;
    struct grpc_call *call = src->ptr;
    if (call->streaming && !call->framing) { /* between messages */
        if (!call->ending)
            return NGHTTP2_ERR_DEFERRED; /* resumed with the next reply (stream_answer) */
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        stream_trailers(call);
        return 0;
    }
    uint64_t total = call->prefix_len + call->msg_len, at = call->sent;
    while (at - call->sent < cap && at < total) {
        uint64_t room = cap - (at - call->sent), left = total - at;
        const uint8_t *p;
        long n = message_piece(call, at, (size_t)(left < room ? left : room), &p);
        if (n < 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* cut short: RST_STREAM */
        if (n == 0)
            break; /* not produced yet: the producer resumes the call */
        at += (uint64_t)n;
    }
    call->deferred = at == call->sent && at < total;
    if (call->deferred)
        return NGHTTP2_ERR_DEFERRED;
    if (at == total && !call->streaming) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        send_trailers(call);
    }
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    return (ssize_t)(at - call->sent);
}

int grpc_call_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t length,
                        nghttp2_data_source *src, void *user)
{
    (void)s;
    struct grpc_conn *c = user;
    struct grpc_call *call = src->ptr;
    if (f->data.padlen > 0) /* no padding is ever chosen */
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (!grpc_conn_room(c, 9 + length)) {
        c->frame_waits = true;
        return NGHTTP2_ERR_WOULDBLOCK; /* the same frame is asked for again */
    }
    grpc_conn_put(c, framehd, 9);
    while (length > 0) {
        const uint8_t *p;
        long n = message_piece(call, call->sent, length, &p);
        if (n <= 0) /* read_message counted these bytes: they are there */
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        grpc_conn_lend(c, p, (size_t)n, call, call->sent);
        message_sent(call, (size_t)n);
        length -= (size_t)n;
    }
    if (call->streaming && call->sent == call->prefix_len + call->msg_len)
        stream_message_done(call);
    return c->dead ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static void send_message(struct grpc_call *call)
{
    const struct tiled_reply *r = &call->req->reply;
    struct nvs h = {.n = 0};
    call->prefix_len = TILE_GRPC_PREFIX;
    tile_grpc_put_prefix(call->prefix, (uint32_t)call->msg_len);
    call->sent = 0;
    call->unsent = reply_hold(call); /* counted until the socket takes it (grpc_call_given_back) or the stream closes */
    unsent_add(call->conn, call->unsent);
    add(&h, ":status", "200");
    add(&h, "content-type", "application/grpc");
    add(&h, "x-request-id", call->req->request_id);
    add_reply_headers(&h, r);
    nghttp2_data_provider body = {.source.ptr = call, .read_callback = read_message};
    submit(call, &h, &body);
}

/* Replaces the reply with an error of kind `f` (the request is not with a
 * worker). */
/* Replaces the reply with an error: a fault of the table (fault >= 0), or
 * a plain HTTP status (fault < 0: `status`). */
static void replace_reply(struct grpc_call *call, int fault, int status, const char *fmt, va_list ap)
{
    struct tiled_reply *r = &call->req->reply;
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    tiled_reply_free(r);
    memset(r, 0, sizeof(*r));
    if (fault >= 0)
        tiled_reply_fault(r, (enum tiled_fault)fault, "%s", msg);
    else
        tiled_reply_error(r, status, "%s", msg);
}

static void set_error(struct grpc_call *call, enum tiled_fault f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_error(struct grpc_call *call, enum tiled_fault f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    replace_reply(call, (int)f, 0, fmt, ap);
    va_end(ap);
}

/* Replaces the reply with a plain HTTP refusal (the request is not a gRPC
 * call: it is answered without a grpc-status). */
static void set_http_error(struct grpc_call *call, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_http_error(struct grpc_call *call, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    replace_reply(call, -1, status, fmt, ap);
    va_end(ap);
}

static bool admit_reply(struct grpc_call *call);

/* What the reply holds until the socket took it: an in-memory body, all
 * of it; a stream, at most two of its chunks (the one being sent, the
 * next being made: stream.c hands a chunk back to its producer only once
 * its last byte was taken), so a streamed reply counts too, else 256
 * unread ones on a connection would hold 512 chunks unbounded. */
static uint64_t reply_hold(const struct grpc_call *call)
{
    const struct tiled_reply *r = &call->req->reply;
    uint64_t two = 2 * (uint64_t)call->loop->t->srv->cfg.stream_chunk;
    return r->stream && two < call->msg_len ? two : call->msg_len;
}

/* The reply's message length, refused when it cannot be framed or is
 * above --max-grpc-message (the handlers check first; this is the last
 * guard, as the client would refuse it anyway). */
static void check_message_size(struct grpc_call *call)
{
    const struct tiled_reply *r = &call->req->reply;
    uint64_t max = (uint64_t)call->loop->t->srv->cfg.max_grpc_message;
    if (r->stream && tiled_stream_size(r->stream) == UINT64_MAX) {
        set_error(call, TILED_FAULT_UNSET, "the reply has no length to frame as a gRPC message");
        return;
    }
    call->msg_len = r->stream ? tiled_stream_size(r->stream) : r->body_len;
    if (call->msg_len > max)
        set_error(call, TILED_FAULT_TOO_BIG,
                  "response message of %llu bytes is larger than the max-grpc-message limit of %llu bytes",
                  (unsigned long long)call->msg_len, (unsigned long long)max);
}

static void send_reply(struct grpc_call *call)
{
    struct tiled_reply *r = &call->req->reply;
    char timing[256];
    if (call->closed || call->state == CALL_REPLY)
        return;
    int code = call->http_only ? -1 : tiled_reply_grpc_status(r);
    if (code == 0) {
        check_message_size(call);
        if (!admit_reply(call))
            return; /* decided after the connection's next write */
        code = tiled_reply_grpc_status(r);
    }
    tiled_service_sending(call->req, timing, sizeof(timing));
    if (call->http_only)
        send_http(call, timing);
    else if (code != 0)
        send_status(call, code, r->message, r, timing);
    else
        send_message(call);
}

/* Refuses the call from what the transport sees: the reply becomes the
 * error and goes out at once. */
static void refuse(struct grpc_call *call, enum tiled_fault f, const char *what)
{
    set_error(call, f, "%s", what);
    send_reply(call);
}

/* ---- the request ---------------------------------------------------------------- */

static bool is_grpc_content_type(const char *ct)
{
    static const char grpc[] = "application/grpc";
    return ct && strncasecmp(ct, grpc, sizeof(grpc) - 1) == 0 &&
           (ct[sizeof(grpc) - 1] == '\0' || ct[sizeof(grpc) - 1] == '+' || ct[sizeof(grpc) - 1] == ';');
}

/* The message encodings a call may name (gRPC's compression.md names;
 * zlib inflates both). */
#define GRPC_ENCODINGS "identity, deflate, gzip"

static bool is_grpc_encoding(const char *enc)
{
    return strcmp(enc, "identity") == 0 || strcmp(enc, "deflate") == 0 || strcmp(enc, "gzip") == 0;
}

/* What the head alone refuses; the reply is set when it returns true. */
static bool head_refused(struct grpc_call *call, const char *method)
{
    struct tiled_reply *r = &call->req->reply;
    const char *ct = field(call, "content-type"), *enc = field(call, "grpc-encoding");
    const char *timeout = field(call, "grpc-timeout");
    uint64_t ns;
    if (call->head_overflow && call->nfields == GRPC_HEAD_FIELDS) { /* the count stopped it */
        set_error(call, TILED_FAULT_TOO_BIG, "the request metadata has more than %d fields", GRPC_HEAD_FIELDS);
    } else if (call->head_overflow) {
        set_error(call, TILED_FAULT_TOO_BIG, "the request metadata is larger than %d bytes", GRPC_HEAD_BYTES);
    } else if (strcmp(method, "POST") != 0) {
        call->http_only = true;
        set_http_error(call, TILED_METHOD_NOT_ALLOWED, "gRPC calls are POST requests, not %s", method);
        tiled_reply_header(r, "Allow", "POST");
    } else if (!is_grpc_content_type(ct)) {
        call->http_only = true;
        set_http_error(call, TILED_UNSUPPORTED_MEDIA_TYPE,
                  "content-type '%.60s' is not gRPC (application/grpc)", ct ? ct : "");
    } else if (enc && !is_grpc_encoding(enc)) {
        set_error(call, TILED_FAULT_CODING,
                  "grpc-encoding '%.40s' is not supported; this server accepts " GRPC_ENCODINGS, enc);
        tiled_reply_header(r, "grpc-accept-encoding", GRPC_ENCODINGS);
    } else if (timeout && tile_grpc_timeout_parse(timeout, &ns) < 0) {
        set_error(call, TILED_FAULT_GRPC_WIRE, "grpc-timeout '%.20s' is not a gRPC timeout",
                  timeout);
    } else {
        if (timeout) {
            uint64_t us = ns / 1000, now = tiled_now_us();
            call->deadline_us = us > UINT64_MAX - now ? UINT64_MAX : now + us;
            call->timeout = timeout;
            grpc_loop_deadline(call->loop, call->deadline_us);
        }
        return false;
    }
    return true;
}

/* A request with the call's metadata (a streaming call makes one per
 * message); NULL when out of memory. */
static struct tiled_req *new_req(struct grpc_call *call)
{
    const char *method = field(call, ":method"), *path = field(call, ":path");
    struct tiled_head head = {.transport = TILED_TRANSPORT_GRPC,
                              .method = method ? method : "",
                              .path = path ? path : "",
                              .remote = call->remote,
                              .header = service_header};
    struct tiled_req *req = tiled_req_new(call->loop->t->srv, &head, call, &grpc_conn_ops);
    if (req) {
        req->mem_kin = call->mem_held; /* the call's state and backlog (conn.c) are the request's own */
    }
    return req;
}

void grpc_call_head_done(struct grpc_call *call, bool end_stream)
{
    struct tiled_server *srv = call->loop->t->srv;
    const char *method = field(call, ":method");
    call->state = CALL_BODY;
    tile_grpc_deframer_init(&call->deframer, (uint64_t)srv->cfg.max_grpc_message);
    const char *enc = field(call, "grpc-encoding");
    call->deframer.compressed_ok = enc && strcmp(enc, "identity") != 0;
    call->req = new_req(call);
    if (!call->req) {
        call->state = CALL_REPLY;
        nghttp2_submit_rst_stream(call->conn->h2, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    if (head_refused(call, method ? method : "") || tiled_service_route(call->req, field(call, "authorization")) ||
        tiled_service_check_head(call->req)) {
        send_reply(call);
        return;
    }
    if (call->req->route->streams) {
        call->streaming = true;
        call->recv_deadline_us = 0; /* a message's own clock starts with its prefix (stream_message_start) */
    }
    if (end_stream)
        grpc_call_request_end(call);
}

/* ---- bounds on what a call holds while its request arrives ---------------------- */

/* What a connection's calls hold is bounded by one budget,
 * --max-grpc-conn-memory, over their request messages and their replies
 * not yet sent. A message's declared size counts from its prefix until
 * its stream closes, while the deframer fills it, while it waits for a
 * worker and while a worker holds it. A reply held in memory (up to
 * --stream-threshold) counts from when it is submitted until the socket
 * took its bytes (given back, conn.c) or its stream closes: a client that
 * sends calls and does not read (its window closed, or its socket) would
 * otherwise make the daemon keep every finished reply, MAX_STREAMS of them
 * per connection. A streamed reply counts the two chunks it holds at most
 * (reply_hold) until its last byte was taken. HTTP holds one body per connection; an HTTP/2
 * connection carries up to MAX_STREAMS calls (conn.c), so without a budget
 * one client could make the daemon hold MAX_STREAMS times --max-body plus
 * as many replies.
 *
 * Two checks. A request message is let in when it fits beside the request
 * messages and unsent replies the other calls hold (admit_message): a
 * client whose replies wait unread gets no new work. A reply is let out
 * when it fits beside the other calls' unsent replies (admit_reply): calls
 * admitted together before any was answered, each a small request with a
 * large reply, are bounded there, not by their requests. The requests of
 * calls still arriving do not count against a reply, so a call is never
 * refused for memory its own request, or one still coming, already had
 * leave to use; a connection therefore holds at most twice the budget
 * (requests, and replies not yet sent), plus what a call alone holds. A
 * reply that does not fit is refused only after the connection wrote what
 * the socket takes at the end of the loop turn: replies decided in one
 * turn for a client that reads leave then, and are not counted against
 * each other. A call alone on its connection is always let in (up to
 * --max-body, and its reply whatever its size), so every call a client
 * could make one at a time still passes, whatever the budget.
 *
 * A call over the budget is refused, not held back with flow control: the
 * bytes of a stream that is not read still count against the connection's
 * shared window, so a few held-back streams could stop the DATA of the
 * admitted ones, whose end is what frees the budget (a deadlock the client
 * cannot see); holding every call back before its first byte instead (a
 * zero stream window, opened per call) would cost each small call a round
 * trip. For the same reason the connection is not paused while its replies
 * wait (conn.c, "Reading never pauses"): the WINDOW_UPDATE that lets them
 * go comes on the socket that would no longer be read. A refused reply's
 * body is freed at once. The refusal touches no other call, and
 * RESOURCE_EXHAUSTED says what holds the budget, so the client can send
 * fewer calls at once or read its replies. */
static bool admit_message(struct grpc_call *call, uint64_t len)
{
    struct grpc_conn *c = call->conn;
    const struct tiled_config *cfg = &call->loop->t->srv->cfg;
    uint64_t budget = (uint64_t)cfg->max_grpc_conn_memory, others = c->held + c->unsent;
    if (len > (uint64_t)cfg->max_body) /* refused next with --max-body's own words; nothing is held */
        return true;
    if (others > 0 && others + len > budget) {
        set_error(call, TILED_FAULT_TOO_BIG,
                  "request message of %llu bytes exceeds the max-grpc-conn-memory limit of %llu bytes: other "
                  "calls on this connection hold %llu bytes of request messages and %llu bytes of replies not yet "
                  "sent",
                  (unsigned long long)len, (unsigned long long)budget, (unsigned long long)c->held,
                  (unsigned long long)c->unsent);
        if (!call->streaming) /* a streaming call answers at the message's end */
            send_reply(call);
        return false;
    }
    c->held += len;
    call->held = len;
    return true;
}

/* The in-memory reply's turn (see admit_message): it fits beside the
 * replies the connection's other calls have not sent, or none waits. One
 * that does not fit waits for the end of the loop turn, when the
 * connection writes what the socket takes (replies decided in the same
 * turn, read by the client, leave then), and is refused only if it still
 * does not fit: false while it waits. */
static bool admit_reply(struct grpc_call *call)
{
    const struct tiled_reply *r = &call->req->reply;
    struct grpc_conn *c = call->conn;
    uint64_t budget = (uint64_t)call->loop->t->srv->cfg.max_grpc_conn_memory;
    uint64_t hold = reply_hold(call);
    if (tiled_reply_grpc_status(r) != 0 || c->unsent == 0 || c->unsent + hold <= budget)
        return true;
    if (!call->reply_waited) {
        call->reply_waits = true;
        c->replies_waiting++;
        grpc_loop_mark_dirty(c); /* the write, then grpc_call_decide_waiting */
        return false;
    }
    set_error(call, TILED_FAULT_TOO_BIG,
              "response message of %llu bytes exceeds the max-grpc-conn-memory limit of %llu bytes: other calls on "
              "this connection hold %llu bytes of request messages and %llu bytes of replies not yet sent",
              (unsigned long long)hold, (unsigned long long)budget,
              (unsigned long long)(c->held - call->held), (unsigned long long)c->unsent);
    return true;
}

static void stop_waiting(struct grpc_call *call)
{
    if (call->reply_waits) {
        call->reply_waits = false;
        call->conn->replies_waiting--;
    }
}

void grpc_call_decide_waiting(struct grpc_conn *c)
{
    for (struct grpc_call *call = c->calls, *next; call && c->replies_waiting > 0; call = next) {
        next = call->next;
        if (call->reply_waits) {
            stop_waiting(call);
            call->reply_waited = true;
            if (call->streaming)
                stream_answer(call);
            else
                send_reply(call); /* nothing if a deadline answered it meanwhile */
        }
    }
}

/* A call has --header-timeout from its stream's start to send its whole
 * request, plus a second per TILED_RECV_MIN_RATE bytes of message it sends
 * (recv_deadline.h, the rule HTTP bodies follow too): a client that sends
 * steadily is never cut, however large its message; one that trickles is.
 * The connection's idle timeout (loop.c) cannot see it: any byte on the
 * connection, of this call or another, keeps that one away. */
static void receive_progress(struct grpc_call *call, size_t n)
{
    call->received += n;
    if (call->recv_deadline_us)
        call->recv_deadline_us = tiled_recv_deadline_us(
            call->recv_start_us, (uint64_t)call->loop->t->srv->cfg.header_timeout, call->received);
}

/* The request is late. DEADLINE_EXCEEDED, not CANCELLED: a time bound on
 * the call passed before it could complete, which is what the code means
 * whoever set the bound, while CANCELLED says the caller gave up (grpcio
 * reports it as the client's own cancel). Logged as 408, HTTP's Request
 * Timeout: the server gave up waiting, not the client. */
static void stream_close(struct grpc_call *call, int code, enum tiled_fault f, const char *msg);

/* The stream ends with an error of kind `f` (see stream_close). */
static void stream_end(struct grpc_call *call, enum tiled_fault f, const char *msg)
{
    stream_close(call, tiled_fault_status[f].grpc, f, msg);
}

static void receive_timed_out(struct grpc_call *call, uint64_t now)
{
    atomic_fetch_add(&call->loop->t->srv->body_timeouts[TILED_TRANSPORT_GRPC], 1);
    if (call->state == CALL_HEAD) {
        /* A header block still arriving (CONTINUATION frames): no other
         * frame may come on the connection until it ends, so the
         * connection goes (closed once this loop turn ends). */
        call->conn->dead = true;
        grpc_loop_mark_dirty(call->conn);
        return;
    }
    if (call->streaming) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "request message not received in time: %llu bytes of it came in %.1f s; a message has the "
                 "header-timeout of %lld s, plus a second per %d bytes, from its first byte",
                 (unsigned long long)call->received, (double)(now - call->recv_start_us) / 1e6,
                 (long long)call->loop->t->srv->cfg.header_timeout, TILED_RECV_MIN_RATE);
        stream_end(call, TILED_FAULT_TIMEOUT, msg); /* the message's request: 408 */
        return;
    }
    set_error(call, TILED_FAULT_TIMEOUT,
              "request not received in time: %llu bytes of its message came in %.1f s; a call has the "
              "header-timeout of %lld s, plus a second per %d bytes it sends, to send its whole request",
              (unsigned long long)call->received, (double)(now - call->req->t_start) / 1e6,
              (long long)call->loop->t->srv->cfg.header_timeout, TILED_RECV_MIN_RATE);
    send_reply(call);
}

/* The deframer's refusal: too large, or the compressed flag (allowed only
 * with a grpc-encoding, and every encoding but identity was refused). */
static void refuse_message(struct grpc_call *call, const struct tile_error *e)
{
    refuse(call, tiled_fault_of_message(e), e->text);
}

static bool stream_data(struct grpc_call *call, const uint8_t *data, size_t len);

bool grpc_call_data(struct grpc_call *call, const uint8_t *data, size_t len)
{
    if (call->streaming)
        return stream_data(call, data, len);
    if (call->state == CALL_BODY)
        receive_progress(call, len);
    while (len > 0 && call->state == CALL_BODY) {
        struct tile_grpc_piece pc;
        struct tile_error e = {0};
        long long used = tile_grpc_deframe_step(&call->deframer, data, len, &pc, &e);
        if (used < 0) {
            refuse_message(call, &e);
            return false;
        }
        if (pc.start && call->messages++ > 0) {
            refuse(call, TILED_FAULT_GRPC_WIRE,
                   "a unary call takes one request message; a second one began");
            return false;
        }
        if (pc.compressed) /* inflated by the service, which checks the encoding's name again */
            call->req->content_encoding = field(call, "grpc-encoding");
        if (pc.start) {
            char n[24];
            n[tile_format_u64(n, pc.msg_len)] = '\0';
            if (!admit_message(call, pc.msg_len))
                return false;
            if (tiled_service_expect_body(call->req, n)) {
                send_reply(call);
                return false;
            }
        }
        if (pc.n)
            tiled_service_body(call->req, (const char *)pc.bytes, pc.n);
        data += used;
        len -= (size_t)used;
    }
    return false;
}

static void stream_pump(struct grpc_call *call);

void grpc_call_request_end(struct grpc_call *call)
{
    if (call->streaming) {
        call->client_done = true;
        stream_pump(call);
        return;
    }
    if (call->state != CALL_BODY)
        return;
    if (!tile_grpc_deframer_idle(&call->deframer)) {
        refuse(call, TILED_FAULT_GRPC_WIRE, "the request ended inside a gRPC message");
    } else if (call->messages == 0) {
        refuse(call, TILED_FAULT_GRPC_WIRE, "a unary call takes one request message; none came");
    } else {
        call->state = CALL_WORK;
        if (tiled_service_dispatch(call->req)) {
            send_reply(call);
        } else {
            call->parked = true; /* a worker has the request: do not read it until it resumes us */
            call->loop->parked++;
        }
    }
}

/* ---- streaming calls ------------------------------------------------------------ */

/* DESIGN. A streaming call (route->streams: ModelStreamInfer, and server
 * reflection, whose replies are its own messages: route->stream_raw) carries
 * many request messages, each served as a request of its own (routed, API
 * key checked, admitted, logged and counted like a unary call's), and
 * answers each with a ModelStreamInferResponse message: the service's
 * ModelInferResponse as its infer_response (field 2: a tag and a length
 * put before the reply's bytes, which are sent in place as a unary
 * reply's are), or its error as error_message (field 1), the stream
 * going on. Messages are read one at a time: the next is read only once
 * the reply to the one before has been framed, so a stream holds at most
 * one request in the queue or with a worker, and answers in order. Bytes
 * that arrive meanwhile wait in the call's backlog unconsumed: the
 * stream's HTTP/2 window (STREAM_WINDOW, conn.c) bounds them and pushes
 * back on the client. What ends the stream as a whole: the client's
 * half-close once every message is answered (grpc-status 0), a message
 * that breaks the transport's rules (above --max-grpc-message, a bad
 * compressed flag, a half-close inside a message), the stream's
 * grpc-timeout, a reset, and the drain (UNAVAILABLE before a new message). */

/* ModelStreamInferResponse{error_message} for the request's error. */
static void stream_error_message(struct grpc_call *call, const char *msg)
{
    size_t n = strlen(msg);
    uint8_t *b = malloc(tile_pb_bytes_size(1, n));
    if (!b) {
        call->errbuf_len = 0;
        return;
    }
    uint8_t *end = tile_pb_put_bytes(b, 1, msg, n);
    /* A string field is UTF-8: bytes the message quotes from the request
     * are not known to be. */
    for (uint8_t *q = end - n; q < end; q++)
        *q = *q >= 0x80 ? '?' : *q;
    call->errbuf = b;
    call->errbuf_len = (size_t)(end - b);
}

/* Submits the response HEADERS once, with the DATA source that frames
 * every reply message, then the trailers. */
static void stream_open(struct grpc_call *call)
{
    if (call->head_sent)
        return;
    call->head_sent = true;
    struct nvs h = {.n = 0};
    add(&h, ":status", "200");
    add(&h, "content-type", "application/grpc");
    nghttp2_data_provider body = {.source.ptr = call, .read_callback = read_message};
    if (nghttp2_submit_response(call->conn->h2, call->id, h.nv, h.n, &body) != 0)
        nghttp2_submit_rst_stream(call->conn->h2, NGHTTP2_FLAG_NONE, call->id, NGHTTP2_INTERNAL_ERROR);
}

/* The request's reply is decided: framed as the stream's next message. */
static void stream_answer(struct grpc_call *call)
{
    struct tiled_reply *r = &call->req->reply;
    char timing[256];
    if (call->closed || call->ending || call->state != CALL_WORK)
        return; /* ended meanwhile (deadline, drain): the request ends with the stream */
    int code = tiled_reply_grpc_status(r);
    if (code == 0) {
        check_message_size(call);
        if (!admit_reply(call)) /* as a unary reply: the connection's budget (admit_message) */
            return;             /* decided after the connection's next write */
        code = tiled_reply_grpc_status(r);
    }
    tiled_service_sending(call->req, timing, sizeof(timing));
    call->sent = 0;
    call->run = NULL;
    call->state = CALL_BODY;
    if (code != 0 && call->req->route->stream_raw) { /* the request ends with the stream (finish) */
        stream_close(call, code, TILED_FAULT_UNSET, r->message ? r->message : ""); /* answered: the fault is not used */
        return;
    }
    if (code != 0) {
        stream_error_message(call, r->message && r->message[0] ? r->message : "request failed");
        call->msg_len = call->errbuf_len;
        call->prefix_len = TILE_GRPC_PREFIX;
        tile_grpc_put_prefix(call->prefix, (uint32_t)call->msg_len);
    } else if (call->req->route->stream_raw) {
        call->prefix_len = TILE_GRPC_PREFIX;
        tile_grpc_put_prefix(call->prefix, (uint32_t)call->msg_len);
    } else {
        size_t head = tile_pb_len_head_size(2, call->msg_len);
        call->prefix_len = TILE_GRPC_PREFIX + head;
        tile_grpc_put_prefix(call->prefix, (uint32_t)(head + call->msg_len));
        tile_pb_put_len_head(call->prefix + TILE_GRPC_PREFIX, 2, call->msg_len);
    }
    call->unsent = call->errbuf ? call->msg_len : reply_hold(call); /* counted like a unary reply's */
    unsent_add(call->conn, call->unsent);
    call->framing = true;
    stream_open(call);
    nghttp2_session_resume_data(call->conn->h2, call->id);
    grpc_loop_mark_dirty(call->conn);
}

/* The stream ends with grpc-status `code` once the message being framed,
 * if any, is out (Trailers-Only when nothing was sent). A request not yet
 * answered (a message cut short or too late, or the head's when no message
 * came) is logged with what ended it: OK, or the error of kind `f`; one a
 * worker holds is not touched (it ends as 499, abandoned). */
static void stream_close(struct grpc_call *call, int code, enum tiled_fault f, const char *msg)
{
    if (call->ending || call->state == CALL_REPLY)
        return;
    call->ending = true;
    call->end_code = code;
    tiled_copy_str(call->end_msg, sizeof(call->end_msg), msg ? msg : "");
    if (call->req && !call->req->reply.status && !call->parked) {
        if (code == TILED_GRPC_OK)
            call->req->reply.status = TILED_OK;
        else
            set_error(call, f, "%s", call->end_msg);
    }
    if (!call->head_sent) {
        send_status(call, code, call->end_msg, NULL, NULL);
        return;
    }
    nghttp2_session_resume_data(call->conn->h2, call->id);
    grpc_loop_mark_dirty(call->conn);
}

static void stream_trailers(struct grpc_call *call)
{
    char status[12], encoded[1024];
    struct nvs h = {.n = 0};
    snprintf(status, sizeof(status), "%d", call->end_code);
    add(&h, "grpc-status", status);
    if (call->end_msg[0]) {
        tile_grpc_message_encode(call->end_msg, encoded, sizeof(encoded));
        add(&h, "grpc-message", encoded);
    }
    call->state = CALL_REPLY;
    nghttp2_submit_trailer(call->conn->h2, call->id, h.nv, h.n);
}

/* The reply message is framed: its request ends (the bytes still waiting
 * for the socket are copied), and the next message may be read. */
static void stream_message_done(struct grpc_call *call)
{
    struct grpc_conn *c = call->conn;
    grpc_conn_keep_lent(c, call);
    unsent_sub(c, call->unsent);
    call->unsent = 0;
    c->held -= call->held;
    call->held = 0;
    free(call->errbuf);
    call->errbuf = NULL;
    call->reply_waited = false;
    call->framing = false;
    call->run = NULL;
    tiled_service_end(call->req, call->req->reply.status);
    call->req = NULL;
    grpc_call_resume(call); /* stream_pump, once nghttp2 is done with this frame */
}

/* Dispatches the message read into call->req. */
static void stream_dispatch(struct grpc_call *call)
{
    call->recv_deadline_us = 0;
    call->state = CALL_WORK;
    if (call->msg_refused || tiled_service_dispatch(call->req)) {
        stream_answer(call);
    } else {
        call->parked = true;
        call->loop->parked++;
    }
}

/* A message begins: its request, checked like a unary call's head. */
static void stream_message_start(struct grpc_call *call, const struct tile_grpc_piece *pc)
{
    char n[24];
    struct tiled_server *srv = call->loop->t->srv;
    if (srv->cfg.header_timeout) {
        call->recv_start_us = tiled_now_us();
        call->received = 0;
        call->recv_deadline_us = tiled_recv_deadline_us(call->recv_start_us, (uint64_t)srv->cfg.header_timeout, 0);
        grpc_loop_deadline(call->loop, call->recv_deadline_us);
    }
    call->msg_refused = false;
    if (!call->req && !(call->req = new_req(call))) {
        stream_end(call, TILED_FAULT_UNAVAILABLE, "cannot allocate the request");
        return;
    }
    if (pc->compressed)
        call->req->content_encoding = field(call, "grpc-encoding");
    n[tile_format_u64(n, pc->msg_len)] = '\0';
    call->msg_refused = tiled_service_route(call->req, field(call, "authorization")) ||
                        tiled_service_check_head(call->req) || !admit_message(call, pc->msg_len) ||
                        tiled_service_expect_body(call->req, n);
}

/* Reads the backlog while the stream may take a message: feeds it to the
 * deframer, consumes what was read (the window reopens), dispatches each
 * message complete, and ends the stream at the client's half-close. */
static void stream_pump(struct grpc_call *call)
{
    while (call->conn && !call->closed && !call->ending && call->state == CALL_BODY && !call->framing) {
        size_t len = call->backlog_len - call->backlog_off;
        /* Draining: the stream ends between messages, as a unary call
         * would not be begun (what was answered is the client's). */
        if (atomic_load(&call->loop->t->srv->draining) && tile_grpc_deframer_idle(&call->deframer) &&
            !(call->client_done && len == 0)) {
            stream_end(call, TILED_FAULT_UNAVAILABLE, SHUTTING_DOWN);
            return;
        }
        if (len == 0) {
            if (!call->client_done)
                return;
            if (!tile_grpc_deframer_idle(&call->deframer))
                stream_end(call, TILED_FAULT_GRPC_WIRE, "the request ended inside a gRPC message");
            else
                stream_close(call, TILED_GRPC_OK, TILED_FAULT_UNSET, NULL);
            return;
        }
        struct tile_grpc_piece pc;
        struct tile_error e = {0};
        long long used =
            tile_grpc_deframe_step(&call->deframer, call->backlog + call->backlog_off, len, &pc, &e);
        if (used < 0) {
            stream_end(call, tiled_fault_of_message(&e), e.text);
            return;
        }
        call->backlog_off += (size_t)used;
        nghttp2_session_consume(call->conn->h2, call->id, (size_t)used);
        grpc_loop_mark_dirty(call->conn); /* the WINDOW_UPDATE */
        receive_progress(call, (size_t)used);
        if (pc.start) {
            stream_message_start(call, &pc);
            if (call->ending)
                return;
        }
        if (pc.n && !call->msg_refused)
            tiled_service_body(call->req, (const char *)pc.bytes, pc.n);
        if (pc.end)
            stream_dispatch(call);
    }
    if (call->backlog_off == call->backlog_len)
        call->backlog_off = call->backlog_len = 0;
}

void grpc_call_quiesce(struct grpc_call *call)
{
    if (call->streaming && call->conn)
        stream_pump(call);
}

/* Request bytes of a streaming call: kept unconsumed in the backlog until
 * read (false, dropped and consumed by the connection, once the stream's
 * end is decided). */
static bool stream_data(struct grpc_call *call, const uint8_t *data, size_t len)
{
    if (call->ending || call->state == CALL_REPLY || call->state == CALL_HEAD)
        return false;
    if (call->backlog_off > 0 && call->backlog_len + len > call->backlog_cap) { /* reuse the read part */
        memmove(call->backlog, call->backlog + call->backlog_off, call->backlog_len - call->backlog_off);
        call->backlog_len -= call->backlog_off;
        call->backlog_off = 0;
    }
    size_t cap = call->backlog_cap;
    uint8_t *b = tile_grow(call->backlog, &cap, call->backlog_len, len, 1, 16384, SIZE_MAX);
    if (!b) {
        stream_end(call, TILED_FAULT_UNAVAILABLE, "cannot allocate the request");
        return false;
    }
    call->backlog = b;
    /* The backlog is request memory like a body (up to the stream's window
     * per call): what it grows by is taken from the budget, given back
     * with the call. Its message in the service counts as another's here
     * (a worker may be taking for it meanwhile: its count is not this
     * thread's to read). */
    struct tile_error e = {0};
    if (cap > call->backlog_cap && tiled_memory_take(&call->loop->t->srv->memory, &call->mem_held, 0,
                                                     cap - call->backlog_cap, &e) < 0) {
        stream_end(call, TILED_FAULT_UNAVAILABLE, e.text);
        return false;
    }
    call->backlog_cap = cap;
    memcpy(call->backlog + call->backlog_len, data, len);
    call->backlog_len += len;
    stream_pump(call);
    return true;
}

/* ---- the end -------------------------------------------------------------------- */

static void finish(struct grpc_call *call)
{
    if (call->parked || !call->closed)
        return;
    if (call->req) {
        int status = call->sent_all && !call->abandoned ? call->req->reply.status : TILED_CLIENT_GONE;
        tiled_service_end(call->req, status);
        call->req = NULL;
    }
    tile_grpc_deframer_free(&call->deframer);
    free(call->backlog);
    tiled_memory_release(&call->loop->t->srv->memory, &call->mem_held);
    free(call->errbuf);
    grpc_call_release(call);
}

void grpc_call_stream_closed(struct grpc_call *call)
{
    struct grpc_conn *c = call->conn;
    grpc_conn_keep_lent(c, call); /* the bytes are the connection's; the reply goes */
    stop_waiting(call);
    TILE_LIST_UNLINK(c->calls, call);
    c->ncalls--;
    c->held -= call->held; /* the request may live on with a worker: bounded by --queue, not this connection */
    call->held = 0;
    unsent_sub(c, call->unsent); /* its reply is freed now (or, lent bytes, copied by grpc_conn_keep_lent) */
    call->unsent = 0;
    if (call->backlog_len > call->backlog_off) /* a streaming call's unread bytes: the connection's window reopens */
        nghttp2_session_consume_connection(c->h2, call->backlog_len - call->backlog_off);
    call->backlog_off = call->backlog_len = 0;
    call->conn = NULL;
    call->closed = true;
    call->abandoned |= !call->sent_all; /* cancelled (RST_STREAM), or the connection died */
    call->state = CALL_REPLY;
    finish(call);
}

void grpc_call_resumed(struct grpc_call *call)
{
    if (call->parked) {
        /* A wake-up asked for before the call was parked is not the
         * worker's: a streaming call asks for one when a reply is framed
         * (stream_message_done, to read the next message), and bytes that
         * arrive before the loop takes it may start and park that next
         * message. Taken as the worker's, it would send a reply the worker
         * is still writing and free the request under it. The worker's
         * own resume comes once it is done. */
        if (!tiled_service_worked(call->req))
            return;
        call->parked = false;
        call->loop->parked--;
        if (call->closed) {
            finish(call);
            return;
        }
        /* A reply that comes after the deadline is not sent: the loop may
         * take the worker's resume before it saw the deadline pass. */
        grpc_call_check_deadline(call, tiled_now_us());
        if (call->streaming && !call->ending && call->state == CALL_WORK)
            stream_answer(call);
        else if (!call->streaming && call->state == CALL_WORK)
            send_reply(call);
        /* else the deadline was answered: the stream's close ends it */
        return;
    }
    if (!call->closed && call->conn) { /* stream bytes are ready */
        call->deferred = false;
        nghttp2_session_resume_data(call->conn->h2, call->id);
        grpc_loop_mark_dirty(call->conn);
        if (call->streaming) /* or a streaming call may read its next message */
            stream_pump(call);
    }
}

void grpc_call_check_deadline(struct grpc_call *call, uint64_t now)
{
    if (call->state == CALL_REPLY || call->closed)
        return;
    if (call->recv_deadline_us && (call->state == CALL_HEAD || call->state == CALL_BODY)) {
        if (now >= call->recv_deadline_us) {
            receive_timed_out(call, now);
            return;
        }
        grpc_loop_deadline(call->loop, call->recv_deadline_us);
    }
    if (!call->deadline_us)
        return;
    if (now < call->deadline_us) {
        grpc_loop_deadline(call->loop, call->deadline_us);
        return;
    }
    /* The client stops waiting now: the request ends as 499 once its
     * stream closes (and its worker, if any, is done). Its own reply and
     * timings may be in a worker's hands: this answer reads neither. */
    char msg[128], timing[48];
    snprintf(msg, sizeof(msg), "deadline exceeded: the grpc-timeout of %s passed before the reply was ready",
             call->timeout);
    call->abandoned = true;
    if (call->streaming) { /* the message being framed, if any, goes out first */
        stream_end(call, TILED_FAULT_TIMEOUT, msg);
        return;
    }
    snprintf(timing, sizeof(timing), "total;dur=%.3f", (double)(now - call->req->t_start) / 1e3);
    send_status(call, TILED_GRPC_DEADLINE_EXCEEDED, msg, NULL, timing);
}
