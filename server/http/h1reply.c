/* h1reply.c - an HTTP/1.1 reply on the wire: its head, then its body.
 *
 * DESIGN. The head is written into the connection's output buffer: the
 * status line, Date, the framing (Content-Length; for a streamed body of
 * unknown length "Transfer-Encoding: chunked", or the close that ends it
 * for an HTTP/1.0 client), Connection when the connection closes after
 * it (or is kept alive for HTTP/1.0), then the reply's own fields. A body
 * held in memory is not copied: it is written from the reply itself
 * (writev with the head), which the request owns until it ends, after its
 * last byte is handed to the socket. A streamed body is not copied
 * either: each piece is written from where the stream holds it
 * (http_reply_pump), framed as a chunk when chunked, the last one followed
 * by the Server-Timing trailer when the client asked for trailers.
 *
 * Connection: close goes out, and the connection closes after the reply,
 * when the request asked for it (or is HTTP/1.0 without keep-alive), the
 * request was refused before its body was read (h1conn.c), or the daemon
 * is draining.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "h1serve.h"

#include "clock.h"
#include "grow.h"
#include "numfmt.h"
#include "cors.h"
#include "server.h"
#include "service.h"
#include "stream.h"
#include "session.h"

/* A streamed body's piece, at most: written from where the stream holds
 * it, so a larger piece costs no copy, only fewer system calls. */
#define PIECE_MAX (256u * 1024u)
/* A streamed body's bytes written in one loop turn, at most. */
#define PUMP_TURN_MAX (4u * PIECE_MAX)

/* Room for n more bytes at the output's end: NULL when out of memory
 * (the connection is then cut, never sent a reply with a hole in it). */
static char *out_room(struct http_conn *c, size_t n)
{
    if (c->out_cap - c->out_len < n) {
        size_t cap = c->out_cap;
        char *o = tile_grow(c->out, &cap, c->out_len, n, 1, 4096, SIZE_MAX);
        if (!o) {
            c->cut_now = true;
            return NULL;
        }
        c->out = o;
        c->out_cap = cap;
    }
    return c->out + c->out_len;
}

void http_out_put(struct http_conn *c, const void *p, size_t n)
{
    char *o = n ? out_room(c, n) : NULL;
    if (!o)
        return;
    memcpy(o, p, n);
    c->out_len += n;
}

static void out_str(struct http_conn *c, const char *s)
{
    http_out_put(c, s, strlen(s));
}

static void out_field_n(struct http_conn *c, const char *name, size_t nl, const char *value)
{
    size_t vl = strlen(value);
    char *o = out_room(c, nl + 2 + vl + 2);
    if (!o)
        return;
    memcpy(o, name, nl);
    memcpy(o + nl, ": ", 2);
    memcpy(o + nl + 2, value, vl);
    memcpy(o + nl + 2 + vl, "\r\n", 2);
    c->out_len += nl + 2 + vl + 2;
}

static void out_field(struct http_conn *c, const char *name, const char *value)
{
    out_field_n(c, name, strlen(name), value);
}

/* A field of a literal name, its length counted by the compiler. */
#define OUT_FIELD_LIT(c, name, value) out_field_n(c, name, sizeof(name) - 1, value)
#define OUT_LIT(c, s) http_out_put(c, s, sizeof(s) - 1)

bool http_out_pending(const struct http_conn *c)
{
    return c->out_off < c->out_len || c->body_off < c->body_len;
}

/* Through the TLS session: a record per call, at most TLS_RECORD bytes. */
#define TLS_RECORD 16384u

static int out_write_tls(struct http_conn *c)
{
    while (http_out_pending(c)) {
        bool head = c->out_off < c->out_len;
        const char *p = head ? c->out + c->out_off : c->body + c->body_off;
        size_t n = head ? c->out_len - c->out_off : c->body_len - c->body_off;
        long w = tiled_tls_conn_send(c->tls, (const uint8_t *)p, n < TLS_RECORD ? n : TLS_RECORD, c->tls_again);
        c->tls_again = w == -1;
        if (w == -1)
            return 0;
        if (w < 0)
            return -1;
        c->last_active_us = tiled_coarse_us();
        if (head && (c->out_off += (size_t)w) == c->out_len)
            c->out_off = c->out_len = 0;
        else if (!head)
            c->body_off += (size_t)w;
    }
    return 0;
}

int http_out_write(struct http_conn *c)
{
    if (c->tls)
        return out_write_tls(c);
    while (http_out_pending(c)) {
        struct iovec iov[2];
        int n = 0;
        if (c->out_off < c->out_len)
            iov[n++] = (struct iovec){c->out + c->out_off, c->out_len - c->out_off};
        if (c->body_off < c->body_len)
            iov[n++] = (struct iovec){(char *)c->body + c->body_off, c->body_len - c->body_off};
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = c->loop->t->io->sendmsg(c->fd, &msg, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        c->last_active_us = tiled_coarse_us();
        size_t k = (size_t)w, head = c->out_len - c->out_off;
        if (k >= head) {
            c->out_off = c->out_len = 0;
            c->body_off += k - head;
        } else {
            c->out_off += k;
        }
    }
    return 0;
}

/* ---- the head ---------------------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

/* "HTTP/1.1 200 OK\r\n" */
static void out_status_line(struct http_conn *c, int status)
{
    char line[24] = "HTTP/1.1 ";
    size_t k = 9 + tile_format_u64(line + 9, (uint64_t)(status > 0 && status < 1000 ? status : 500));
    line[k++] = ' ';
    http_out_put(c, line, k);
    out_str(c, reason(status));
    http_out_put(c, "\r\n", 2);
}

/* "Date: Sat, 28 Nov 2026 09:27:49 GMT\r\n", formatted again when the
 * second changes; per loop thread. */
static void out_date(struct http_conn *c)
{
    static _Thread_local char line[48];
    static _Thread_local time_t at = -1;
    time_t now = time(NULL);
    if (now != at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(line, sizeof(line), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        at = now;
    }
    out_str(c, line);
}

/* Whether the reply's own fields ask for the connection to close. */
static bool reply_closes(const struct tiled_reply *r)
{
    for (int i = 0; i < r->nheaders; i++)
        if (r->headers[i][0] && r->headers[i][1] && strcasecmp(r->headers[i][0], "Connection") == 0 &&
            strcasecmp(r->headers[i][1], "close") == 0)
            return true;
    return false;
}

/* "Content-Length: N\r\n", without printf's machinery (a request's most
 * formatted number). */
static void out_length(struct http_conn *c, uint64_t n)
{
    char line[48] = "Content-Length: ";
    size_t k = 16 + tile_format_u64(line + 16, n);
    line[k++] = '\r';
    line[k++] = '\n';
    http_out_put(c, line, k);
}

/* The framing of the body, and where its bytes come from. */
static void out_framing(struct http_conn *c, struct tiled_req *req)
{
    struct tiled_reply *r = &req->reply;
    if (r->status == TILED_NO_CONTENT)
        return;
    if (r->status == TILED_NOT_MODIFIED) {
        /* The length of the body it stands for (RFC 9110 8.6), as before. */
        out_length(c, r->validated_len);
        return;
    }
    if (r->stream) {
        c->stream = r->stream;
        r->stream = NULL; /* the connection's now: freed when the request ends */
        c->stream_pos = 0;
        c->piece_len = 0;
        uint64_t size = tiled_stream_size(c->stream);
        const char *coding = tiled_stream_coding(c->stream);
        if (coding)
            out_field(c, "Content-Encoding", coding);
        if (size != UINT64_MAX) {
            out_length(c, size);
        } else if (c->http10) {
            c->close_after = true; /* the body ends with the connection */
        } else {
            c->stream_chunked = true;
            out_str(c, "Transfer-Encoding: chunked\r\n");
            if (req->want_trailers)
                out_str(c, "Trailer: Server-Timing\r\n");
        }
        return;
    }
    out_length(c, r->body_len);
    if (!c->is_head) {
        c->body = r->body;
        c->body_off = 0;
        c->body_len = (size_t)r->body_len;
    }
}

void http_reply_queue(struct http_conn *c)
{
    struct tiled_req *req = c->req;
    const struct http_transport *t = c->loop->t;
    char timing[256];
    tiled_service_sending(req, timing, sizeof(timing));
    struct tiled_reply *r = &req->reply;
    out_status_line(c, r->status);
    out_date(c);
    c->stream_chunked = false;
    out_framing(c, req);
    if (c->close_after || !c->keep_alive || atomic_load(&t->srv->draining) || reply_closes(r)) {
        c->close_after = true;
        OUT_LIT(c, "Connection: close\r\n");
    } else if (c->http10) {
        OUT_LIT(c, "Connection: Keep-Alive\r\n");
    }
    /* A 204 has no body, so no body type; a 304 stands for the body the
     * client holds, and sends only what updates its cached copy (caching.h). */
    if (r->status != TILED_NO_CONTENT && r->status != TILED_NOT_MODIFIED)
        OUT_FIELD_LIT(c, "Content-Type", r->content_type ? r->content_type : "application/json");
    OUT_FIELD_LIT(c, "X-Request-Id", req->request_id);
    OUT_FIELD_LIT(c, "Server-Timing", timing);
    OUT_LIT(c, "X-Content-Type-Options: nosniff\r\n"); /* bodies are data, never to be sniffed */
    for (int i = 0; i < r->nheaders; i++)
        if (r->headers[i][0] && r->headers[i][1] && strcasecmp(r->headers[i][0], "Connection") != 0)
            out_field(c, r->headers[i][0], r->headers[i][1]);
    if (r->vary) {
        char vary[TILED_VARY_TEXT_MAX];
        tiled_vary_text(r->vary, vary);
        OUT_FIELD_LIT(c, "Vary", vary);
    }
    const char *const *h = tiled_cors_answer_headers(t->srv->cfg.cors_origins, c->req_origin);
    for (; h && h[0]; h += 2)
        out_field(c, h[0], h[1]);
    if (t->hsts[0])
        out_field(c, "Strict-Transport-Security", t->hsts);
    http_out_put(c, "\r\n", 2);
    /* A HEAD's streamed body is never pulled: the request's end lets it go. */
    c->reply_queued = !c->stream || c->is_head;
}

/* ---- a streamed body -------------------------------------------------------------------- */

static void stream_end(struct http_conn *c)
{
    if (c->stream_chunked) {
        char timing[128];
        http_out_put(c, c->stream_pos ? "\r\n0\r\n" : "0\r\n", c->stream_pos ? 5 : 3);
        if (tiled_stream_trailer(c->stream, timing, sizeof(timing)))
            out_field(c, "Server-Timing", timing);
        http_out_put(c, "\r\n", 2);
    }
    tiled_stream_free(c->stream);
    c->stream = NULL;
    c->reply_queued = true;
}

/* A streamed body goes out a piece at a time, each written from where the
 * stream holds it (tiled_stream_peek): only the chunk framing passes
 * through the output buffer, and a piece is given back to the stream
 * (tiled_stream_consume, which frees a chunk once its last byte is back)
 * when the socket has taken all of it. A streaming connection so holds no
 * copy of the body; what the stream holds is counted where the request's
 * memory is (--max-memory). Writes until the socket is full, the producer
 * has nothing ready (it resumes the connection), the body ended, or
 * PUMP_TURN_MAX bytes went out: then the piece set up waits for the next
 * loop turn (EPOLLOUT), so a client reading as fast as the daemon writes
 * does not keep the loop from its other connections. */
bool http_reply_pump(struct http_conn *c)
{
    uint64_t from = c->stream_pos;
    while (!c->reply_queued) {
        if (http_out_pending(c)) {
            if (c->stream_pos - from >= PUMP_TURN_MAX)
                return true;
            if (http_out_write(c) < 0)
                return false;
            if (http_out_pending(c))
                return true; /* the socket is full: EPOLLOUT brings us back */
        }
        if (c->piece_len) { /* all of it written */
            tiled_stream_consume(c->stream, c->stream_pos, c->piece_len);
            c->stream_pos += c->piece_len;
            c->piece_len = 0;
            c->body = NULL;
            c->body_off = c->body_len = 0;
        }
        const char *data;
        long n = tiled_stream_peek(c->stream, c->stream_pos, &data, PIECE_MAX);
        if (n == TILED_STREAM_ERROR)
            return false;
        if (n == TILED_STREAM_END) {
            stream_end(c);
            return true;
        }
        if (n == 0)
            return true; /* the connection was suspended: the producer resumes it */
        if (c->stream_chunked) { /* the previous piece's CRLF, then this one's size line */
            char size[24] = "\r\n";
            size_t k = c->stream_pos ? 2 : 0;
            static const char hex[] = "0123456789abcdef";
            int digits = 1;
            while (digits < 16 && (uint64_t)n >> (4 * digits))
                digits++;
            for (int d = digits - 1; d >= 0; d--)
                size[k++] = hex[((uint64_t)n >> (4 * d)) & 15];
            size[k++] = '\r';
            size[k++] = '\n';
            http_out_put(c, size, k);
        }
        c->body = data;
        c->body_off = 0;
        c->body_len = (size_t)n;
        c->piece_len = (size_t)n;
    }
    return true;
}
