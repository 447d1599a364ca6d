/* conn.c - one HTTP/2 connection of the gRPC transport: bytes from the
 * socket (or TLS) into its nghttp2 session, and the session's output back.
 *
 * DESIGN. nghttp2 is used without its I/O callbacks: received bytes go in
 * with nghttp2_session_mem_recv, and the output waits in one queue per
 * connection, written with one sendmsg per loop turn (loop.c) or whenever
 * OUT_BATCH bytes wait, so many small replies cost one syscall and a long
 * one a syscall per OUT_BATCH. The queue holds pieces: frames and frame
 * headers copied into the connection's own buffer, and reply payloads
 * lent by their calls (DATA frames are NGHTTP2_DATA_FLAG_NO_COPY and
 * call.c hands over where the bytes are: the reply body, or a stream's
 * chunk), so the only copy of a reply's bytes is the kernel's. A lent
 * piece goes back to its call once the socket took it, which is when a
 * stream's chunk returns to its producer; a call that ends first (reset,
 * deadline) has its waiting pieces copied (grpc_conn_keep_lent), since
 * they are part of frames already committed to the connection. Over TLS
 * pieces are copied at once (a record is encrypted from one buffer). A
 * large frame from nghttp2 is written straight from its buffer when
 * nothing waits before it. When the socket is full, no more frames are
 * produced (nghttp2 keeps them queued), so the queue stays near OUT_BATCH.
 *
 * Reading never pauses, whatever waits to be written: a client that does
 * not read is bounded by what its calls may hold, not by its socket. Its
 * unsent replies count against --max-grpc-conn-memory with its request
 * messages, and a call or a reply that finds no room is refused (call.c,
 * admit_message, admit_reply). Pausing instead would deadlock: paused
 * while replies wait for the client's window, the WINDOW_UPDATE that opens
 * it would never be read; paused while the socket is full, a client that
 * writes its requests before it reads (a single-threaded one) and the
 * server would each wait for the other to read. What reading still adds
 * while the socket is full is bounded too: a refused call's Trailers-Only
 * HEADERS waits in nghttp2 with its stream, and streams are at most
 * MAX_STREAMS; the DATA of a refused call is dropped as it comes; nghttp2
 * closes a session whose unsent PING and SETTINGS acknowledgements pile up.
 *
 * Windows: the client may send up to STREAM_WINDOW per stream and
 * CONN_WINDOW in all before a WINDOW_UPDATE (nghttp2 sends them as bytes
 * are consumed: at once for a unary call, whose body is copied out as it
 * comes; as it reads them for a streaming call, call.c), so a multi-MB tensor
 * does not wait a round trip per 64 KiB as with the protocol's default.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "h2.h"

#include "clock.h"
#include "grow.h"
#include "list.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "server.h"
#include "session.h"

#define STREAM_WINDOW (8 << 20)
#define CONN_WINDOW (64 << 20)
/* Streams open at once on one connection: more than perf_analyzer's or
 * tritonclient's share of a channel; each may hold up to --max-body. */
#define MAX_STREAMS 256
#define MAX_FRAME (1 << 20)
/* Output gathered before a write: a long reply leaves in writes of two
 * stream chunks (both of a stream's chunks lent at once), which a
 * loopback reader takes in about half the CPU time 256 KiB writes cost
 * it (bench/bench_grpc.py; docs/performance.md, "gRPC against HTTP"). */
#define OUT_BATCH (2u << 20)
#define DATA_FRAME (256 * 1024) /* largest DATA payload sent */
/* The PING that follows the shutdown notice: its ack ends the round trip. */
static const uint8_t GOAWAY_PING[8] = {'t', 'i', 'l', 'e', 'd', 'b', 'y', 'e'};
/* A client answers a PING within a round trip; one that has not after
 * this long is sent the final GOAWAY anyway (a gRPC client retries the
 * streams it opened after it, which are not served). */
#define GOAWAY_PING_WAIT_US (5u * 1000000u)
/* After the final GOAWAY is answered: how long the client has to close
 * its side before the socket is closed (see linger()). */
#define LINGER_US (2u * 1000000u)

/* ---- nghttp2 callbacks ------------------------------------------------------ */

static void goaway_last(struct grpc_conn *c);

static struct grpc_call *call_of(nghttp2_session *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s, id);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    struct grpc_conn *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* A call's own state (the call and its request, 10 KiB; an infer's
     * work record is taken when it starts, work.h) is request memory too:
     * 256 open calls made a connection 4.6 MiB before it was counted.
     * Without room for it the stream is refused before anything of it is
     * read (REFUSED_STREAM, which a client may retry at once, RFC 9113
     * 8.7). */
    struct tiled_memory *m = &c->loop->t->srv->memory;
    struct tile_error e = {0};
    uint64_t held = 0;
    int32_t id = f->hd.stream_id;
    if (tiled_memory_take(m, &held, 0, sizeof(struct grpc_call) + sizeof(struct tiled_req), &e) < 0)
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM) == 0
                   ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
                   : NGHTTP2_ERR_CALLBACK_FAILURE;
    struct grpc_call *call = grpc_call_alloc(c, id);
    if (!call) {
        tiled_memory_release(m, &held);
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR) == 0
                   ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
                   : NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    call->mem_held = held;
    if (nghttp2_session_set_stream_user_data(s, f->hd.stream_id, call) != 0) {
        grpc_call_stream_closed(call); /* no stream to close it later */
        return 0;
    }
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    (void)flags;
    (void)user;
    struct grpc_call *call = call_of(s, f->hd.stream_id);
    if (call && f->hd.type == NGHTTP2_HEADERS)
        grpc_call_header(call, name, nlen, value, vlen);
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    struct grpc_conn *c = user;
    if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK) && c->goaway == GOAWAY_NOTICE &&
        memcmp(f->ping.opaque_data, GOAWAY_PING, sizeof(GOAWAY_PING)) == 0)
        goaway_last(c); /* every stream the client opened before it saw the notice is in */
    struct grpc_call *call = f->hd.stream_id ? call_of(s, f->hd.stream_id) : NULL;
    if (!call)
        return 0;
    bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;
    if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
        grpc_call_head_done(call, end);
    else if ((f->hd.type == NGHTTP2_DATA || f->hd.type == NGHTTP2_HEADERS) && end)
        grpc_call_request_end(call);
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user)
{
    (void)flags;
    (void)user;
    struct grpc_call *call = call_of(s, id);
    if (!call || !grpc_call_data(call, data, len))
        nghttp2_session_consume(s, id, len); /* read (copied out) or dropped: the window reopens */
    return 0;
}

static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
    struct grpc_conn *c = user;
    /* The round trip starts once the notice is out: nghttp2 sends a PING
     * ahead of a GOAWAY queued before it, and a client that read the PING
     * first could open streams after its ack and before it saw the notice. */
    if (f->hd.type == NGHTTP2_GOAWAY && c->goaway == GOAWAY_NOTICE && !c->goaway_pinged) {
        c->goaway_pinged = true;
        if (nghttp2_submit_ping(s, NGHTTP2_FLAG_NONE, GOAWAY_PING) != 0)
            goaway_last(c);
    }
    if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        struct grpc_call *call = call_of(s, f->hd.stream_id);
        if (call)
            call->sent_all = true;
        /* Answered before the request ended (an error, a deadline): the
         * client is told to stop sending, and the stream closes now. */
        if (nghttp2_session_get_stream_remote_close(s, f->hd.stream_id) == 0)
            nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *user)
{
    (void)error_code; /* sent_all tells a finished reply from a cut one */
    (void)user;
    struct grpc_call *call = call_of(s, id);
    if (call) {
        nghttp2_session_set_stream_user_data(s, id, NULL);
        grpc_call_stream_closed(call);
    }
    return 0;
}

/* DATA frames as large as the client takes, up to DATA_FRAME: gRPC's own
 * clients announce 4 MiB frames, and each frame costs both ends a
 * callback round. (nghttp2 keeps one frame buffer of that size per
 * connection; the payload itself is not copied into it, see NO_COPY.) */
static ssize_t data_length(nghttp2_session *s, uint8_t type, int32_t id, int32_t session_window,
                           int32_t stream_window, uint32_t max_frame, void *user)
{
    (void)s;
    (void)type;
    (void)id;
    (void)user;
    ssize_t n = DATA_FRAME;
    n = n < session_window ? n : session_window;
    n = n < stream_window ? n : stream_window;
    return n < (ssize_t)max_frame ? n : (ssize_t)max_frame;
}

nghttp2_session_callbacks *grpc_conn_callbacks_new(void)
{
    nghttp2_session_callbacks *cbs;
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_send_data_callback(cbs, grpc_call_send_data);
    nghttp2_session_callbacks_set_data_source_read_length_callback(cbs, data_length);
    return cbs;
}

/* ---- socket I/O --------------------------------------------------------------- */


static long sock_send(struct grpc_conn *c, const uint8_t *p, size_t n)
{
    if (c->tls) {
        long r = tiled_tls_conn_send(c->tls, p, n, c->tls_again);
        c->tls_again = r == -1;
        if (r > 0)
            c->last_active_us = tiled_now_us();
        return r;
    }
    struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t r = c->loop->t->io->sendmsg(c->fd, &msg, MSG_NOSIGNAL);
    if (r > 0)
        c->last_active_us = tiled_now_us(); /* a client reading a long reply is not idle */
    return tiled_socket_result(r);
}

static long sock_recv(struct grpc_conn *c, uint8_t *buf, size_t cap)
{
    if (c->tls)
        return tiled_tls_conn_recv(c->tls, buf, cap);
    ssize_t r = c->loop->t->io->recv(c->fd, buf, cap, 0);
    return tiled_socket_result(r);
}

static void watch(struct grpc_conn *c, uint32_t events)
{
    if (events == c->events || c->dead)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    if (epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
        c->dead = true;
    c->events = events;
}

/* ---- output: the connection's own bytes and bytes lent by calls ---------------- */

static bool write_pending(struct grpc_conn *c);

/* Pieces written per sendmsg: a 16 KiB-frame client's 1 MiB batch is 128. */
#define OUT_IOV 256

static struct grpc_out *out_push(struct grpc_conn *c)
{
    if (c->nout == c->out_segs_cap) {
        size_t cap = (size_t)c->out_segs_cap;
        struct grpc_out *ns = tile_grow(c->out_segs, &cap, (size_t)c->nout, 1, sizeof(*ns), 64, INT_MAX);
        if (!ns) {
            c->dead = true;
            return NULL;
        }
        c->out_segs = ns;
        c->out_segs_cap = (int)cap;
    }
    return &c->out_segs[c->nout++];
}

/* Copies n bytes into the connection's own buffer: their offset there,
 * or SIZE_MAX when out of memory (the connection is then dead). */
static size_t own_bytes(struct grpc_conn *c, const uint8_t *p, size_t n)
{
    uint8_t *nb = tile_grow(c->own, &c->own_cap, c->own_len, n, 1, 64 * 1024, SIZE_MAX);
    if (!nb) {
        c->dead = true;
        return SIZE_MAX;
    }
    c->own = nb;
    memcpy(c->own + c->own_len, p, n);
    c->own_len += n;
    return c->own_len - n;
}

/* Bytes copied into the queue (frame headers, nghttp2's frames): the last
 * piece grows when it is the connection's own and ends where these go. */
static void append(struct grpc_conn *c, const uint8_t *p, size_t n)
{
    size_t off = own_bytes(c, p, n);
    if (off == SIZE_MAX)
        return;
    struct grpc_out *last = c->nout > c->out_first ? &c->out_segs[c->nout - 1] : NULL;
    if (last && !last->lender && last->off + last->len == off) {
        last->len += n;
    } else if ((last = out_push(c))) {
        *last = (struct grpc_out){.off = off, .len = n};
    }
    c->pending += n;
}

void grpc_conn_put(struct grpc_conn *c, const uint8_t *p, size_t n)
{
    append(c, p, n);
}

void grpc_conn_lend(struct grpc_conn *c, const uint8_t *p, size_t n, struct grpc_call *call, uint64_t at)
{
    if (c->tls) { /* GnuTLS takes one buffer per record: copy, give back at once */
        append(c, p, n);
        grpc_call_given_back(call, at, n);
        return;
    }
    struct grpc_out *o = out_push(c);
    if (!o)
        return;
    *o = (struct grpc_out){.lent = p, .len = n, .lender = call, .at = at};
    c->pending += n;
}

/* Lent bytes a closing call may have copied rather than written first
 * (written at once, a few small replies would each cost a syscall). */
#define KEEP_COPY_MAX (64 * 1024)

void grpc_conn_keep_lent(struct grpc_conn *c, const struct grpc_call *call)
{
    size_t waiting = 0;
    for (int i = c->out_first; i < c->nout; i++)
        waiting += c->out_segs[i].lender == call ? c->out_segs[i].len : 0;
    if (waiting > KEEP_COPY_MAX) /* the end of a long reply: written, not copied, if the socket takes it */
        write_pending(c);
    for (int i = c->out_first; i < c->nout && !c->dead; i++) {
        struct grpc_out *o = &c->out_segs[i];
        if (o->lender != call)
            continue;
        size_t off = own_bytes(c, o->lent, o->len);
        *o = (struct grpc_out){.off = off, .len = o->len};
    }
}

static const uint8_t *out_bytes(const struct grpc_conn *c, const struct grpc_out *o)
{
    return o->lender ? o->lent : c->own + o->off;
}

/* Hands the socket what waits from the first piece on: bytes taken, or as
 * sock_send. Plain TCP takes many pieces per call, TLS one. */
static long send_pieces(struct grpc_conn *c)
{
    if (c->tls) {
        const struct grpc_out *o = &c->out_segs[c->out_first];
        return sock_send(c, out_bytes(c, o) + c->out_first_sent, o->len - c->out_first_sent);
    }
    struct iovec iov[OUT_IOV];
    int n = 0;
    for (int i = c->out_first; i < c->nout && n < OUT_IOV; i++, n++) {
        const struct grpc_out *o = &c->out_segs[i];
        size_t skip = i == c->out_first ? c->out_first_sent : 0;
        iov[n] = (struct iovec){.iov_base = (void *)(out_bytes(c, o) + skip), .iov_len = o->len - skip};
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r = c->loop->t->io->sendmsg(c->fd, &msg, MSG_NOSIGNAL);
    if (r > 0)
        c->last_active_us = tiled_now_us(); /* a client reading a long reply is not idle */
    return tiled_socket_result(r);
}

/* `n` bytes went: whole pieces leave the queue, lent ones go back to
 * their calls (a stream's chunk returns to its producer). */
static void out_taken(struct grpc_conn *c, size_t n)
{
    c->pending -= n;
    while (n > 0) {
        struct grpc_out *o = &c->out_segs[c->out_first];
        size_t left = o->len - c->out_first_sent;
        if (n < left) {
            c->out_first_sent += n;
            return;
        }
        n -= left;
        c->out_first_sent = 0;
        c->out_first++;
        if (o->lender)
            grpc_call_given_back(o->lender, o->at, o->len);
    }
}

/* Drops what was written from the front of the queue, so a queue that
 * never empties (a long reply to a slow reader) does not grow. */
static void out_compact(struct grpc_conn *c)
{
    size_t low = c->own_len;
    for (int i = c->out_first; i < c->nout; i++) {
        const struct grpc_out *o = &c->out_segs[i];
        if (!o->lender && o->off < low)
            low = o->off;
    }
    memmove(c->own, c->own + low, c->own_len - low);
    c->own_len -= low;
    for (int i = c->out_first; i < c->nout; i++) {
        if (!c->out_segs[i].lender)
            c->out_segs[i].off -= low;
    }
    memmove(c->out_segs, c->out_segs + c->out_first, (size_t)(c->nout - c->out_first) * sizeof(*c->out_segs));
    c->nout -= c->out_first;
    c->out_first = 0;
}

/* Writes the pending output: true when all of it went. */
static bool write_pending(struct grpc_conn *c)
{
    while (c->pending > 0 && !c->dead) {
        long n = send_pieces(c);
        if (n == -1) {
            if (c->out_first >= 64 && c->out_first >= c->nout / 2)
                out_compact(c);
            return false;
        }
        if (n < 0) {
            c->dead = true;
            return false;
        }
        out_taken(c, (size_t)n);
    }
    if (c->dead)
        return false;
    c->nout = c->out_first = 0;
    c->own_len = 0;
    return true;
}

bool grpc_conn_room(struct grpc_conn *c, size_t n)
{
    return c->pending + n <= OUT_BATCH || write_pending(c) || c->pending == 0;
}

/* Takes one frame from nghttp2 (valid until the next frame is asked
 * for): written at once when it is large and nothing waits before it,
 * else queued. False when the socket is full (the rest waits for
 * EPOLLOUT) or the connection failed. */
static bool take_frame(struct grpc_conn *c, const uint8_t *p, size_t n)
{
    if (c->pending + n > OUT_BATCH && !write_pending(c)) {
        append(c, p, n);
        return false;
    }
    if (c->pending == 0 && n >= OUT_BATCH / 4 && !c->tls) {
        long w = sock_send(c, p, n);
        if (w == -2) {
            c->dead = true;
            return false;
        }
        size_t done = w > 0 ? (size_t)w : 0;
        append(c, p + done, n - done);
        return !c->dead && done == n;
    }
    append(c, p, n);
    return !c->dead;
}

/* Frames from the session into the queue and the queue to the socket,
 * until either runs out. */
static void produce(struct grpc_conn *c)
{
    bool room = write_pending(c);
    while (room) {
        const uint8_t *p;
        c->frame_waits = false;
        ssize_t n = nghttp2_session_mem_send(c->h2, &p);
        if (n < 0) {
            c->dead = true;
            return;
        }
        if (n > 0) {
            room = take_frame(c, p, (size_t)n);
            continue;
        }
        /* Nothing more to send, or a DATA frame found no room: once what
         * waits is written it is produced again, else EPOLLOUT brings us
         * back (nothing else would: nghttp2 holds the frame). */
        if (!c->frame_waits)
            break;
        room = write_pending(c);
    }
    if (room)
        write_pending(c);
}

/* The session is over: the client's side is read (and dropped) until it
 * closes it, for LINGER_US at most. A socket closed with bytes unread
 * sends RST, and a client's kernel that gets RST drops what it had not
 * read yet: the last replies and the final GOAWAY would be lost. */
static void linger(struct grpc_conn *c)
{
    tiled_tls_conn_bye(c->tls);
    if (c->loop->t->io->shutdown(c->fd, SHUT_WR) < 0) {
        c->dead = true;
        return;
    }
    c->lingering = true;
    c->linger_until_us = tiled_now_us() + LINGER_US;
    watch(c, EPOLLIN);
}

static void linger_read(struct grpc_conn *c)
{
    for (;;) {
        ssize_t n = c->loop->t->io->recv(c->fd, c->loop->rbuf, sizeof(c->loop->rbuf), 0);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return;
        c->dead = true; /* the client closed its side (or failed) */
        return;
    }
}

void grpc_conn_flush(struct grpc_conn *c)
{
    if (c->handshaking || c->dead || c->lingering)
        return;
    produce(c);
    if (c->replies_waiting > 0 && !c->dead) {
        /* Replies that found no room before this write: decided now that
         * the socket took what it could. Each submit would mark the
         * connection dirty; it is being flushed, so it is not put on the
         * loop's list again (it may be closed once this returns). */
        bool dirty = c->dirty;
        c->dirty = true;
        grpc_call_decide_waiting(c);
        c->dirty = dirty;
        produce(c);
    }
    if (c->dead)
        return;
    bool pending = c->pending > 0;
    if (!pending && !nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2)) {
        if (c->goaway == GOAWAY_FINAL)
            linger(c); /* every stream it covers is answered */
        else
            c->dead = true; /* a fatal protocol error answered */
        return;
    }
    watch(c, (pending ? EPOLLOUT : 0) | EPOLLIN); /* see "Reading never pauses" above */
}

static void read_input(struct grpc_conn *c)
{
    uint8_t *buf = c->loop->rbuf;
    long n;
    do {
        n = sock_recv(c, buf, sizeof(c->loop->rbuf));
        if (n == -1)
            return;
        if (n <= 0) {
            c->dead = true; /* closed or failed: its calls end as cut short */
            return;
        }
        c->last_active_us = tiled_now_us();
        ssize_t used = nghttp2_session_mem_recv(c->h2, buf, (size_t)n);
        if (used < 0) {
            tiled_log_event(TILED_LOG_DEBUG, "grpc_protocol_error", "{s:s}", "error", nghttp2_strerror((int)used));
            c->dead = true;
            return;
        }
        grpc_loop_mark_dirty(c);
    } while (c->tls && tiled_tls_conn_pending(c->tls)); /* buffered records wake no epoll */
}

void grpc_conn_io(struct grpc_conn *c, uint32_t events)
{
    if (c->dead)
        return;
    if (c->lingering) {
        linger_read(c);
        if (c->dead)
            grpc_loop_mark_dirty(c);
        return;
    }
    if (c->handshaking) {
        bool want_write = false;
        int rc = tiled_tls_conn_handshake(c->tls, &want_write);
        if (rc < 0) {
            c->dead = true;
        } else if (rc == 0) {
            watch(c, want_write ? EPOLLOUT : EPOLLIN);
            return;
        } else {
            c->handshaking = false;
            watch(c, EPOLLIN);
            grpc_loop_mark_dirty(c); /* the SETTINGS waiting since accept */
        }
    }
    if (!c->dead && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
        read_input(c);
    if (!c->dead && (events & EPOLLOUT))
        grpc_loop_mark_dirty(c);
    if (c->dead)
        grpc_loop_mark_dirty(c); /* closed at the turn's end, after the others flushed */
}

/* ---- lifecycle ------------------------------------------------------------------- */

static int send_settings(nghttp2_session *h2)
{
    const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, MAX_FRAME},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_HEAD_BYTES},
    };
    if (nghttp2_submit_settings(h2, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
        return -1;
    return nghttp2_session_set_local_window_size(h2, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW);
}


struct grpc_conn *grpc_conn_new(struct grpc_loop *l, int fd)
{
    struct grpc_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->loop = l;
    c->fd = fd;
    c->last_active_us = tiled_now_us();
    if (tiled_log_enabled(TILED_LOG_INFO)) /* for the access log only */
        tiled_listener_peer(fd, c->remote, sizeof(c->remote));
    /* WINDOW_UPDATE only for bytes a call read (on_data_chunk): a
     * streaming call leaves the messages it is not ready for unconsumed. */
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0) {
        free(c);
        return NULL;
    }
    nghttp2_option_set_no_auto_window_update(opt, 1);
    int rc = nghttp2_session_server_new2(&c->h2, l->t->callbacks, c, opt);
    nghttp2_option_del(opt);
    if (rc != 0) {
        free(c);
        return NULL;
    }
    if (send_settings(c->h2) != 0 || (l->t->tls && !(c->tls = tiled_tls_conn_new(l->t->tls, fd, true)))) {
        nghttp2_session_del(c->h2);
        free(c);
        return NULL;
    }
    c->handshaking = c->tls != NULL;
    tiled_metrics_connection(TILED_TRANSPORT_GRPC, 1);
    return c;
}

void grpc_conn_goaway_begin(struct grpc_conn *c, uint64_t now)
{
    if (c->dead || c->goaway != GOAWAY_NONE)
        return;
    if (c->handshaking) { /* no stream yet, and none is owed */
        c->dead = true;
        grpc_loop_mark_dirty(c);
        return;
    }
    c->goaway = GOAWAY_NOTICE;
    c->goaway_at_us = now;
    if (nghttp2_submit_shutdown_notice(c->h2) != 0) /* its PING follows it (on_frame_send) */
        goaway_last(c);
    grpc_loop_mark_dirty(c);
}

/* The final GOAWAY: streams up to the last one nghttp2 took are served,
 * later ones are ignored (the client learns from the GOAWAY that they were
 * not processed, and may send them elsewhere). */
static void goaway_last(struct grpc_conn *c)
{
    c->goaway = GOAWAY_FINAL;
    if (nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                              NGHTTP2_NO_ERROR, NULL, 0) != 0)
        c->dead = true;
    grpc_loop_mark_dirty(c);
}

void grpc_conn_goaway_tick(struct grpc_conn *c, uint64_t now)
{
    if (c->dead)
        return;
    if (c->goaway == GOAWAY_NOTICE && now - c->goaway_at_us >= GOAWAY_PING_WAIT_US)
        goaway_last(c);
    if (c->lingering && now >= c->linger_until_us) {
        c->dead = true;
        grpc_loop_mark_dirty(c);
    }
}

void grpc_conn_goaway_final(struct grpc_conn *c)
{
    if (!c->dead && !c->handshaking && !c->lingering) {
        nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->h2),
                              NGHTTP2_NO_ERROR, NULL, 0);
        grpc_conn_flush(c); /* best effort: the socket is closed next */
    }
    c->dead = true;
    grpc_loop_mark_dirty(c);
}

void grpc_conn_close(struct grpc_conn *c)
{
    struct grpc_loop *l = c->loop;
    /* Nothing more is written: lent bytes are not kept for it. */
    c->nout = c->out_first = 0;
    c->pending = 0;
    /* nghttp2_session_del does not report its streams closed: end the
     * calls here (a call a worker holds waits for its resume, detached). */
    while (c->calls)
        grpc_call_stream_closed(c->calls);
    nghttp2_session_del(c->h2);
    tiled_tls_conn_bye(c->tls);
    tiled_tls_conn_free(c->tls);
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    TILE_LIST_UNLINK(l->conns, c);
    atomic_fetch_sub(&l->t->nconns, 1);
    tiled_metrics_connection(TILED_TRANSPORT_GRPC, -1);
    free(c->own);
    free(c->out_segs);
    free(c);
}
