/* h2.h - the gRPC transport's own types, shared by the files of
 * server/grpc/ and seen nowhere else (serve.c sees grpc.h only).
 *
 *   loop.c  event-loop threads: listener, epoll, wake-ups from workers,
 *           deadlines and idle connections, drain and stop
 *   conn.c  one HTTP/2 connection: socket or TLS bytes <-> its nghttp2 session
 *   call.c  one gRPC call (an HTTP/2 stream) <-> one service request
 *   (TLS sessions: tls/session.h, with ALPN "h2")
 *
 * Threads: a connection, its session and its calls belong to the loop
 * thread that accepted it (nghttp2 is not thread-safe); other threads
 * reach a call only through grpc_call_resume() (the service's
 * ops->resume), which queues it on its loop's ready list under a lock.
 */
#ifndef TILED_GRPC_H2_H
#define TILED_GRPC_H2_H

#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "grpc_frame.h"
#include "listener.h" /* struct tiled_socket_io */
#include "wakeup.h"

struct tiled_server;
struct tiled_req;
struct tiled_tls;
struct tiled_tls_conn;

/* gRPC's suggested bound on request metadata (PROTOCOL-HTTP2.md: 8 KiB);
 * also what SETTINGS_MAX_HEADER_LIST_SIZE announces. */
#define GRPC_HEAD_BYTES 8192
#define GRPC_HEAD_FIELDS 64

struct grpc_loop;
struct grpc_conn;
struct grpc_call;

/* A piece of a connection's output: `len` bytes of its own buffer at
 * `off`, or lent by `lender` (its reply message's bytes at offset `at`),
 * valid until given back (grpc_call_given_back) or copied
 * (grpc_conn_keep_lent). */
struct grpc_out {
    const uint8_t *lent;
    size_t off, len;
    struct grpc_call *lender;
    uint64_t at;
};

/* Where a call is in its life (one way only). */
enum grpc_call_state {
    CALL_HEAD,  /* request metadata arriving */
    CALL_BODY,  /* request messages arriving, fed to the service */
    CALL_WORK,  /* dispatched: the reply is being made (maybe by a worker) */
    CALL_REPLY, /* a response is submitted: nothing more is decided */
};

struct grpc_call {
    struct grpc_loop *loop;
    struct grpc_conn *conn; /* NULL once its stream is closed */
    struct grpc_call *prev, *next; /* the connection's open calls */
    int32_t id;
    enum grpc_call_state state;
    struct tiled_req *req;
    struct tile_grpc_deframer deframer;
    int messages;            /* request messages begun */
    uint64_t deadline_us;    /* 0: no grpc-timeout */
    uint64_t recv_start_us;    /* the stream's start: its request's clock (recv_deadline.h) */
    uint64_t recv_deadline_us; /* the request must be in by then (moved on as bytes come); 0: no bound */
    uint64_t received;       /* request-message bytes received */
    uint64_t held;           /* its message's declared size, counted in conn->held */
    uint64_t unsent;         /* its in-memory reply's bytes the socket has not taken, counted in conn->unsent */
    const char *timeout;     /* the grpc-timeout value, for the message */
    char remote[64];         /* the client's address (the connection's), lent to its requests */
    bool parked;             /* a worker holds the request until it resumes the call */
    bool deferred;           /* the reply's stream has no bytes ready yet */
    bool closed;             /* the HTTP/2 stream is gone */
    bool sent_all;           /* END_STREAM went out */
    bool abandoned;          /* the reply no longer reaches the client: ends as 499 */
    bool http_only;          /* refused as HTTP, not gRPC (415, 405): no grpc-status */
    bool reply_waits;        /* its reply found no room: decided after the connection's next write */
    bool reply_waited;       /* ... and that write was done: now it is sent or refused */
    /* The reply message being sent: its head (the 5-byte prefix, and for a
     * streaming call ModelStreamInferResponse's tag and length), then the
     * body, the stream or errbuf. */
    uint8_t prefix[TILE_GRPC_PREFIX + 11];
    size_t prefix_len;
    uint64_t msg_len, sent;
    const uint8_t *run;      /* a stream's ready bytes at run_at, lent until all are sent */
    uint64_t run_at;
    size_t run_len;
    /* A streaming call (route->streams, call.c "streaming calls"): its
     * request messages are read one at a time, each a request of its own. */
    bool streaming;
    bool head_sent;          /* the response HEADERS are submitted */
    bool framing;            /* a reply message is being framed (prefix..sent) */
    bool client_done;        /* the client half-closed */
    bool msg_refused;        /* the message arriving is already answered (its bytes are skipped) */
    bool ending;             /* the trailers are decided: end_code, end_msg */
    int end_code;
    char end_msg[200];
    uint8_t *backlog;        /* received, not yet read: not consumed, so HTTP/2 flow control pushes back */
    size_t backlog_off, backlog_len, backlog_cap;
    uint64_t mem_held;        /* taken from the memory budget (memory.h): the call's state, its backlog */
    uint8_t *errbuf;         /* an error_message reply's message bytes */
    size_t errbuf_len;
    /* On its loop's ready list when a worker or a stream's producer hands
     * it back (wakeup.h); gone once released: freed when the list lets go. */
    struct tiled_ready ready;
    /* Request metadata: "name\0value\0" pairs, names lower-case (HTTP/2). */
    uint16_t nfields;
    uint16_t field[GRPC_HEAD_FIELDS];
    bool head_overflow;
    uint32_t head_used;
    char head[GRPC_HEAD_BYTES];
};

struct grpc_conn {
    struct grpc_loop *loop;
    struct grpc_conn *prev, *next; /* the loop's connections */
    struct grpc_conn *dirty_next;  /* on loop->dirty: has output to produce */
    bool dirty, dead;
    int fd;
    nghttp2_session *h2;
    struct tiled_tls_conn *tls; /* NULL: plain TCP (tls/session.h) */
    bool handshaking;
    struct grpc_call *calls;
    int ncalls;
    uint64_t held;        /* request-message bytes its calls hold (call.c, admit_message) */
    uint64_t unsent;      /* in-memory reply bytes of its calls the socket has not taken (call.c) */
    int replies_waiting;  /* calls whose reply_waits */
    /* Output not yet taken by the socket, in order: out_segs[out_first,
     * nout), the first with out_first_sent of its bytes gone; `pending`
     * bytes in all. Frames and headers are copied into `own`; reply
     * payloads are lent by their calls. */
    struct grpc_out *out_segs;
    int nout, out_first, out_segs_cap;
    size_t out_first_sent, pending;
    uint8_t *own;
    size_t own_len, own_cap;
    bool tls_again;       /* GnuTLS wants the last send repeated */
    bool frame_waits;     /* a DATA frame was refused for want of room */
    uint32_t events;      /* what epoll watches now */
    uint64_t last_active_us;
    /* Going away gracefully (RFC 9113 section 6.8): the notice (GOAWAY
     * 2^31-1) and a PING; the PING's ack, which the client sends after
     * every stream it opened before it saw the notice, brings the final
     * GOAWAY with the last stream id, and each stream up to it is served.
     * The session ends once they are answered; the socket then lingers
     * (written side shut) until the client closes or linger_until_us. */
    enum { GOAWAY_NONE, GOAWAY_NOTICE, GOAWAY_FINAL } goaway;
    uint64_t goaway_at_us;     /* when the notice was submitted */
    bool goaway_pinged;        /* the notice went, and its PING after it */
    uint64_t age_us;           /* --grpc-max-connection-age reached then (jittered); 0: never */
    uint64_t grace_until_us;   /* past the age: closed then, calls or not; 0: no bound */
    bool lingering;
    uint64_t linger_until_us;
    char remote[64];
};


struct grpc_transport {
    struct tiled_server *srv;
    const struct tiled_socket_io *io; /* listener.h: the system's, or a driver's */
    int lfd;
    uint16_t port;
    struct tiled_tls *tls; /* the daemon's (borrowed); NULL without --tls-cert */
    nghttp2_session_callbacks *callbacks;
    atomic_int nconns;
    atomic_bool quiescing, stopping;
    /* Drain (loop.c, "Going away"): the listener drops new connections'
     * SYNs from quiesce_at_us on, and is shut once its accept queue is
     * empty and TILED_LISTEN_SETTLE_US (listener.h) passed. */
    uint64_t quiesce_at_us;
    atomic_bool listener_closed;
    int nloops;
    struct grpc_loop *loops;
};

struct grpc_loop {
    struct grpc_transport *t;
    pthread_t thread;
    int epfd;
    struct tiled_wakeup wake;     /* calls handed back by workers and producers */
    struct grpc_conn *conns;
    struct grpc_conn *dirty;
    struct grpc_call *free_calls; /* reused: metadata arena and all */
    int nfree_calls;
    int parked;                   /* calls a worker still holds */
    bool quiesced;
    bool unlistened;              /* the closed listener is out of this loop's epoll set */
    uint64_t rng;                 /* connection-age jitter (xorshift64) */
    uint64_t next_tick_us, next_deadline_us;
    uint8_t rbuf[256 * 1024];
};

/* ---- loop.c ------------------------------------------------------------ */
/* The connection has output to produce: flushed once this loop turn ends,
 * so every reply decided in one turn leaves in one write. */
/* In-memory reply bytes the sockets have not taken (call.c, unsent_add):
 * now, over every connection, and the most one connection held at once.
 * Process-wide atomics, readable from any thread at any time (a scrape may
 * come before the transport starts or after it stops). */
void grpc_unsent_figures(uint64_t *now, uint64_t *peak);
void grpc_loop_mark_dirty(struct grpc_conn *c);
/* A call for `c` (from the loop's free list); NULL when out of memory. */
struct grpc_call *grpc_call_alloc(struct grpc_conn *c, int32_t id);
/* Gives a finished call back (later, if it is still on the ready list). */
void grpc_call_release(struct grpc_call *call);
/* The service's ops->resume (any thread). */
void grpc_call_resume(void *call);
/* Keeps the loop's next wake-up no later than `deadline_us`. */
void grpc_loop_deadline(struct grpc_loop *l, uint64_t deadline_us);
/* One loop turn's work besides socket events, for loop_main and for a
 * driver that runs a loop by hand (fuzz/fuzz_grpc_transport.c): the calls
 * the eventfd announced (after it woke), then the end of the turn
 * (deadlines, the tick, drain, output of every dirty connection). */
void grpc_loop_take_ready(struct grpc_loop *l);
void grpc_loop_turn_end(struct grpc_loop *l);

/* ---- conn.c ------------------------------------------------------------ */
/* The session callbacks every connection's session is made with. */
nghttp2_session_callbacks *grpc_conn_callbacks_new(void);
struct grpc_conn *grpc_conn_new(struct grpc_loop *l, int fd);
/* Socket readable / writable (epoll events). */
void grpc_conn_io(struct grpc_conn *c, uint32_t events);
/* Produces and writes what the session has to send; marks the connection
 * dead when it is over. */
void grpc_conn_flush(struct grpc_conn *c);
/* Output for the socket: room for n more bytes now (writing what waits
 * if it must; false when the socket is full), and bytes put after the
 * frames already produced. */
bool grpc_conn_room(struct grpc_conn *c, size_t n);
void grpc_conn_put(struct grpc_conn *c, const uint8_t *p, size_t n);
/* Reply bytes written where they are: `call` lends n bytes at p (its
 * message's bytes at `at`) and gets them back through
 * grpc_call_given_back() once the socket took them. */
void grpc_conn_lend(struct grpc_conn *c, const uint8_t *p, size_t n, struct grpc_call *call, uint64_t at);
/* `call` ends: the bytes it lent that still wait are copied. */
void grpc_conn_keep_lent(struct grpc_conn *c, const struct grpc_call *call);
/* Ends every call (as cut short) and frees the connection. */
void grpc_conn_close(struct grpc_conn *c);
/* Drain or the connection's age: the graceful GOAWAY begins (the notice
 * and its PING; see struct grpc_conn). Every stream the client opens until
 * the final GOAWAY is served. */
void grpc_conn_goaway_begin(struct grpc_conn *c, uint64_t now);
/* Once a second while going away: the final GOAWAY when the client has
 * not answered the PING in time, the end of a linger. */
void grpc_conn_goaway_tick(struct grpc_conn *c, uint64_t now);
/* Stop, idle, or the end of an age's grace: the final GOAWAY, written if
 * the socket takes it, and the connection is closed (calls cut short). */
void grpc_conn_goaway_final(struct grpc_conn *c);

/* ---- call.c ------------------------------------------------------------ */
void grpc_call_header(struct grpc_call *call, const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen);
void grpc_call_head_done(struct grpc_call *call, bool end_stream);
/* Request DATA; false when the bytes are done with (the connection
 * consumes them for flow control), true when the call keeps them and
 * consumes them itself as it reads them (a streaming call). */
bool grpc_call_data(struct grpc_call *call, const uint8_t *data, size_t len);
void grpc_call_request_end(struct grpc_call *call);
void grpc_call_stream_closed(struct grpc_call *call);
/* nghttp2's send_data_callback: a DATA frame of the reply message. */
int grpc_call_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t length,
                        nghttp2_data_source *src, void *user);
/* The socket took n bytes the call lent (its message's bytes at `at`). */
void grpc_call_given_back(struct grpc_call *call, uint64_t at, size_t n);
/* After a write of the connection's output: the replies that found no
 * room before it are sent if they fit now, else refused. */
void grpc_call_decide_waiting(struct grpc_conn *c);
/* Taken from the ready list: a worker finished, or stream bytes are ready. */
void grpc_call_resumed(struct grpc_call *call);
/* The drain began: a streaming call between messages ends (UNAVAILABLE). */
void grpc_call_quiesce(struct grpc_call *call);
/* Checks the call's deadline at `now`. */
void grpc_call_check_deadline(struct grpc_call *call, uint64_t now);

#endif
