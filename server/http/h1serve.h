/* h1serve.h - the HTTP/1.1 transport's own parts, shared by h1loop.c (the
 * event-loop threads), h1conn.c (a connection: bytes in, requests to the
 * service) and h1reply.c (replies out). Not for use outside server/http/.
 *
 * Ownership: a loop owns the connections it accepted, and only its thread
 * touches them; a connection owns its buffers and the request in
 * progress, which it ends (tiled_service_end) once the reply's last byte
 * is handed to the socket, or the client is gone. Workers and stream
 * producers reach a connection only through http_conn_resume (h1loop.c),
 * which queues it on its loop's ready list.
 */
#ifndef TILED_HTTP_H1SERVE_H
#define TILED_HTTP_H1SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "error.h"
#include "h1head.h"
#include "h1wire.h"
#include "listener.h" /* struct tiled_socket_io */
#include "server.h" /* struct tiled_kv */
#include "service.h" /* enum tiled_field */
#include "wakeup.h"

struct tiled_server;
struct tiled_req;
struct http_loop;
struct tiled_tls_conn;

/* Bytes read and not yet consumed: the framer's longest unit (a head of
 * TILED_H1_HEAD_MAX) fits whole, and a read that finds it unfinished at
 * that length gets the bytes that make it too long (431). */
#define HTTP_IN_CAP (TILED_H1_HEAD_MAX + 256)
/* An output buffer or a head buffer grown beyond these (many fields, a
 * large head) is let go when its request ends, so an idle kept-alive
 * connection holds under 16 KiB (docs/operations.md, Memory). */
#define HTTP_OUT_KEEP (4u * 1024u)
#define HTTP_HEAD_KEEP (1u * 1024u)

/* Where a connection's request stands. */
enum http_phase {
    HTTP_IDLE,    /* no request: waiting for (more of) a head */
    HTTP_BODY,    /* a request's head is in; its body is being read */
    HTTP_WORK,    /* the body is in; a worker has the request (resumed when done) */
    HTTP_SEND,    /* the reply is going out */
};

struct http_conn {
    struct http_loop *loop;
    struct http_conn *prev, *next; /* on loop->conns, then loop->closed */
    struct http_conn *fresh_prev, *fresh_next; /* on the transport's fresh list while fresh */
    int fd;
    uint32_t events;        /* what epoll watches it for */
    struct tiled_tls_conn *tls; /* owned; NULL: plain TCP (tls/session.h) */
    bool handshaking;       /* its TLS handshake is not done yet */
    bool tls_again;         /* GnuTLS wants the last send repeated */
    char remote[64];        /* the peer's address, for the access log */
    uint64_t opened_us;
    uint64_t last_active_us; /* a byte read or written */
    bool fresh;             /* no request of it has reached the service yet */
    bool dead;              /* closed: freed once nothing refers to it */
    /* Input. */
    struct tiled_h1 h1;
    unsigned char in[HTTP_IN_CAP];
    uint64_t in_base;       /* stream offset of in[0] */
    size_t in_len;
    bool rd_eof;            /* the client shut its sending side */
    bool input_done;        /* no more requests are read: the connection closes after the reply */
    size_t dropped;         /* bytes read and dropped after input_done */
    /* The request in progress. */
    enum http_phase phase;
    struct tiled_req *req;
    bool msg_end;           /* the framer saw the message's end */
    bool cut_now;           /* close now, nothing more written (over TLS a refusal while the body arrives; out of memory) */
    int cut_status;         /* the status it ends with when the connection is cut (0: 499, the client gone) */
    bool http10, keep_alive, is_head, expect_continue;
    const char *req_origin;  /* its Origin field (CORS answer headers), NULL when absent */
    char *head;             /* owned: the request's head, split in place (grown to the largest seen) */
    size_t head_cap;
    char *path;             /* the decoded path (in head) */
    struct http_head hd;    /* head, split */
    const char *fields[TILED_F_COUNT]; /* the fields the service reads, found in hd (http_head_index) */
    struct tiled_kv query[TILED_QUERY_MAX]; /* its query's parameters (in head), lent to the request */
    int nquery;
    bool query_overflow;
    /* Deadlines (µs, coarse clock; 0: none). */
    uint64_t head_deadline_us;
    uint64_t body_start_us, body_bytes, body_last_us;
    /* Output: out[out_off..out_len) first, then body[body_off..body_len). */
    char *out;
    size_t out_off, out_len, out_cap;
    const char *body;       /* the reply's body, owned by req */
    size_t body_off, body_len;
    struct tiled_stream *stream; /* a streamed reply being pulled (owned) */
    uint64_t stream_pos;    /* the stream's bytes given back (written) so far */
    size_t piece_len;       /* the piece being written (c->body points into the stream), 0: none */
    bool stream_chunked;
    bool reply_queued;      /* the whole reply is in out/body */
    bool close_after;       /* the connection closes once the reply is written */
    bool lingering;         /* written and shut for writing: reading to EOF before close */
    uint64_t linger_until_us;
    /* On its loop's ready list when a worker or a stream's producer hands
     * it back (wakeup.h); gone once closed and off the loop: freed when
     * the list lets go of it. */
    struct tiled_ready ready;
    bool waiting;           /* a worker or a stream producer will resume it */
};


struct http_transport {
    struct tiled_server *srv;
    const struct tiled_socket_io *io; /* listener.h: the system's, or a driver's */
    int lfd;
    int nloops;
    struct http_loop *loops;
    atomic_uint nconns;
    atomic_bool quiescing, stopping, listener_closed;
    uint64_t quiesce_at_us;
    char hsts[48];          /* Strict-Transport-Security value; "" = none */
    /* Connections none of whose requests has reached the service (the drain waits for recent ones). */
    pthread_mutex_t fresh_lock;
    struct http_conn *fresh;
};

struct http_loop {
    struct http_transport *t;
    pthread_t thread;
    int epfd;
    struct tiled_wakeup wake; /* connections handed back by workers and producers */
    struct http_conn *conns;
    struct http_conn *closed; /* released this turn: freed at its end (nothing on the stack refers to them then) */
    uint64_t next_tick_us;
    uint64_t turn_end_us; /* the clock at the last turn's end, which the next wait is timed from */
    bool quiesced, unlistened;
};

/* h1loop.c */
/* The listener and the loop threads; NULL with `e` set on failure. */
struct http_transport *http_transport_start(struct tiled_server *srv, struct tile_error *e);
uint16_t http_transport_port(const struct http_transport *t);
/* The drain, as tiled_http_quiesce and tiled_http_drained (http.h). */
void http_transport_quiesce(struct http_transport *t);
bool http_transport_drained(struct http_transport *t);
/* Closes every connection and joins the loops. */
void http_transport_stop(struct http_transport *t);
void http_conn_resume(void *conn);
void http_conn_suspend(void *conn);
/* A loop's turn, as loop_main takes it: after the events epoll reported
 * (the listener's, http_conn_io for each connection's), the connections
 * workers and stream producers resumed (when its eventfd was written),
 * then the turn's end (deadlines, drain, stop, freeing the closed). A
 * driver that turns a loop by hand calls these in that order. */
void http_loop_take_ready(struct http_loop *l);
void http_loop_turn_end(struct http_loop *l);
/* An accepted socket becomes a connection of the loop (in its epoll set,
 * counted, fresh); false when it cannot (--max-connections, out of
 * memory): the caller closes fd. */
bool http_loop_adopt(struct http_loop *l, int fd);
void http_loop_set_events(struct http_conn *c, uint32_t events);
/* Its first request reached the service: the drain counts it there. */
void http_conn_unfresh(struct http_conn *c);
/* Takes a closed connection off its loop; it is freed at the end of the
 * loop's turn (once no resume queued for it is pending), so the caller
 * may still read it until it returns to the loop. */
void http_loop_release(struct http_conn *c);

/* h1conn.c */
struct http_conn *http_conn_new(struct http_loop *l, int fd);
/* Reads, serves and writes as far as the connection can go now. */
void http_conn_io(struct http_conn *c, uint32_t events);
/* A worker or a stream producer resumed it. */
void http_conn_resumed(struct http_conn *c);
/* Once in a while: its deadlines. */
void http_conn_tick(struct http_conn *c, uint64_t now);
/* Closes it now (a request in progress ends as the client gone), unless a
 * worker holds its request: then it closes when resumed. */
void http_conn_abort(struct http_conn *c);
void http_conn_free(struct http_conn *c);
/* Frees a connection never served (its TLS session too); the caller closes fd. */
void http_conn_discard(struct http_conn *c);

/* h1reply.c */
/* Queues the request's reply (head, then body or stream) on the
 * connection; the request goes on until its last byte is written. */
void http_reply_queue(struct http_conn *c);
/* Pulls a streamed reply's next bytes while the output has room; false
 * when the stream ended in error (the connection must close). */
bool http_reply_pump(struct http_conn *c);
void http_out_put(struct http_conn *c, const void *p, size_t n);
/* Writes what the socket takes; -1 when the client is gone. */
int http_out_write(struct http_conn *c);
bool http_out_pending(const struct http_conn *c);

#endif
