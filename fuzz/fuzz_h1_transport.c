/* fuzz_h1_transport.c - the HTTP/1.1 transport (server/http/) under hostile
 * clients: the input is what one client sends on one connection, and it
 * goes through the daemon's own path: the connection (h1conn.c) reads it
 * through the framer (h1wire.c), splits each head (h1head.c), hands the
 * requests to the service (routing, the handlers, the decoders, the tile
 * model as worker jobs, streamed replies) and writes the replies
 * (h1reply.c), read back by this harness as a client would
 * (h1_replies.h: every reply must be well-formed HTTP/1.1 and answer its
 * request).
 *
 * In process, on one thread, nothing left to timing:
 *   - the socket is memory: the transport's struct tiled_socket_io (listener.h) is
 *     this file's, whose recv takes the client's bytes and whose sendmsg
 *     puts the server's in a SOCK_ROOM-byte buffer the client empties when
 *     it reads (a reply of a few KiB fills it, so the server meets a full
 *     socket: EAGAIN, EPOLLOUT, a streamed reply's pieces held back). The
 *     connection's fd is an eventfd no byte goes through, there for
 *     epoll_ctl and close.
 *   - the loop is driven by hand, one turn at a time, with h1loop.c's own
 *     turn work (http_loop_adopt as accept_all takes a connection,
 *     http_conn_io with the events epoll would report, http_loop_take_ready,
 *     http_loop_turn_end: deadlines, drain, stop, freeing), so a crash
 *     stack is the transport's.
 *   - the worker pool has no threads (step_pool.h, linked in place of
 *     core/pool.c): a request parked for a worker, and a stream's next
 *     chunk, wait until the harness runs them.
 *   - the clock is the harness's (step_clock.h, in place of clock.c): each
 *     input starts at the same time and each turn takes TURN_US, so the
 *     deadlines fire where the input says, and alike on every run.
 *
 * Input layout: the client's bytes as sent, in pieces. Byte 0xFF is the
 * escape: 0xFF 0xFF is one 0xFF byte of the stream, 0xFF followed by any
 * other byte C ends a piece, and C steers the harness. Each piece arrives
 * whole (the connection reads it in the next turn, or when it reads
 * again), then the harness acts on C, in this order:
 *   - 0x02: the workers finish what they hold (their resumes wait for the
 *     loop's next turn, after it reads the next piece);
 *   - 0x08: the server starts to drain (as on SIGTERM: srv->draining,
 *     http_transport_quiesce);
 *   - 0x30: time passes (C >> 4 & 3): 1, 300 ms (a tick of the loop); 2,
 *     3 s (past --header-timeout: late heads, late bodies); 3, 60 s (past
 *     --idle-timeout and the lingering close);
 *   - 0x04: the client reads nothing until a piece whose C is without it
 *     (replies pile up in the server's output, then leave a socketful at a
 *     time), when it reads at once;
 *   - 0x40: the drain's timeout passes: the server stops (the drain
 *     begun if it was not, streams cut, every connection closed); nothing
 *     more is sent;
 *   - 0x80: the client shuts its sending side (the server reads the end of
 *     the stream); nothing more is sent;
 *   - 0x01: no settling; otherwise the harness settles: it runs the
 *     workers' jobs and turns the loop until nothing moves (no job waiting,
 *     no resume, no byte either way).
 * The bytes after the last escape are a piece with C = 0. At the end, the
 * client reads what is left and shuts its sending side, and the server
 * must then close the connection; after a drain began, the server stops;
 * after a piece not settled (0x01), the client goes at once (requests
 * workers hold are cut short: 499). Then the client closes its end.
 *
 * Checked: every reply keeps to HTTP/1.1 and answers its request in order
 * (h1_replies.h); whenever the harness settled and the client reads, the
 * server has answered every request the client sent whole (as the framer
 * reads the client's stream: the requests up to the first it refuses, whose
 * reply announces the close) or has announced the close, with no request
 * stuck (dispatched with no worker, a reply waiting on nothing); while it
 * owes the client something, something moves, and the server gets there
 * within TURNS_MAX turns; it closes the connection only when it owes
 * nothing or said so, never in the middle of a reply, and never writes
 * after shutting its side; and every input leaves nothing behind (no
 * connection, request in flight, job waiting; LeakSanitizer for the rest).
 * What a stop or a deadline cut short (the server's stop, time passing
 * while a reply waits behind a socket the client does not empty, the
 * client going) is only read, not counted.
 * FUZZ_VERBOSE=1 build-fuzz/fuzz_h1_transport INPUT prints the exchange.
 */
#include <errno.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "h1serve.h"

#include "bodycache.h"
#include "fuzz_common.h"
#include "h1_replies.h"
#include "log.h"
#include "serve.h"
#include "server.h"
#include "step_clock.h"
#include "step_pool.h"
#include "stream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ESC 0xFF
#define C_NOWAIT 0x01
#define C_WORKERS 0x02
#define C_PAUSE 0x04
#define C_DRAIN 0x08
#define C_STOP 0x40
#define C_SHUT 0x80
/* The clock at each input's start, and the time a loop turn takes. */
#define START_US (1000u * 1000000u)
#define TURN_US 100u
/* What C >> 4 & 3 lets pass: nothing, a tick, past --header-timeout (2 s),
 * past --idle-timeout (5 s) and the lingering close (2 s). */
static const uint64_t time_steps_us[4] = {0, 300000u, 3000000u, 60000000u};
/* What the client's socket holds of the server's bytes before it reads. */
#define SOCK_ROOM 4096
/* The most the client sends on a connection (longer inputs are cut). */
#define SENT_MAX (1u << 16)
/* Turns a settling may take: far more than the replies of an input (a
 * socketful a turn) need; past it the server is going round in circles. */
#define TURNS_MAX 100000u

static struct tiled_server srv = {.submit_lock = PTHREAD_MUTEX_INITIALIZER};
static struct http_transport transport;
static struct http_loop loop;
static bool paused;      /* the client does not read */
static bool lenient;     /* a stop or a deadline may have cut replies short */
/* Something happened (a job ran, a resume was taken, bytes went either
 * way, the connection closed): counted to tell a server that owes the
 * client something but can never give it. */
static uint64_t moved;

/* FUZZ_VERBOSE: the pieces and the replies are printed. */
static bool verbose;

/* ---- the connection's socket, in memory ------------------------------------ */

static struct mem_sock {
    uint8_t in[SENT_MAX]; /* what the client sent */
    size_t in_len, in_off; /* ... and how far the server read it */
    uint8_t out[SOCK_ROOM]; /* the server's bytes the client has not read */
    size_t out_len;
    bool client_shut;   /* the client shut its sending side */
    bool client_closed; /* the client is gone */
    bool server_shut;   /* the server shut its sending side */
    bool server_closed; /* the server closed the connection */
} sock;

static ssize_t mem_recv(int fd, void *buf, size_t len, int flags)
{
    (void)fd;
    (void)flags;
    size_t n = sock.in_len - sock.in_off;
    n = n < len ? n : len;
    if (n == 0 && !sock.client_shut && !sock.client_closed) {
        errno = EAGAIN;
        return -1;
    }
    if (n > 0)
        memcpy(buf, sock.in + sock.in_off, n);
    sock.in_off += n;
    moved++;
    return (ssize_t)n; /* 0: the client shut its end */
}

static ssize_t mem_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    (void)fd;
    (void)flags;
    FUZZ_CHECK(!sock.server_shut, "the server wrote after it shut its sending side");
    if (sock.client_closed) {
        errno = EPIPE;
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < msg->msg_iovlen && sock.out_len < SOCK_ROOM; i++) {
        size_t k = msg->msg_iov[i].iov_len, room = SOCK_ROOM - sock.out_len;
        k = k < room ? k : room;
        memcpy(sock.out + sock.out_len, msg->msg_iov[i].iov_base, k);
        sock.out_len += k;
        n += k;
    }
    if (n == 0) {
        errno = EAGAIN;
        return -1;
    }
    moved++;
    return (ssize_t)n;
}

static int mem_shutdown(int fd, int how)
{
    (void)fd;
    FUZZ_CHECK(how == SHUT_WR, "the connection shut its socket with %d", how);
    sock.server_shut = true;
    moved++;
    return 0;
}

static const struct tiled_socket_io mem_io = {.recv = mem_recv, .sendmsg = mem_sendmsg, .shutdown = mem_shutdown};

/* The client reads what the server wrote (h1_replies.h checks it), and
 * the end of the stream once the server shut its side or closed. */
static void client_read(void)
{
    if (paused || sock.client_closed)
        return;
    if (sock.out_len > 0) {
        h1_replies_read(sock.out, sock.out_len);
        sock.out_len = 0;
        moved++;
    }
    if (sock.server_shut || sock.server_closed)
        h1_replies_eof();
}

/* The client sends `n` bytes. Once the server shut its side or closed,
 * they go nowhere (no request in them is owed a reply), but they are sent:
 * a lingering connection reads and drops them. */
static void client_send(const uint8_t *p, size_t n)
{
    size_t room = SENT_MAX - sock.in_len;
    n = n < room ? n : room;
    memcpy(sock.in + sock.in_len, p, n);
    sock.in_len += n;
    if (!sock.server_shut && !sock.server_closed)
        h1_replies_sent(sock.in, sock.in_len);
    if (verbose)
        fprintf(stderr, "client: %zu bytes\n", n);
}

/* ---- the server ------------------------------------------------------------ */

/* Small limits, so that every size check is reachable from a small input
 * and no input makes the process allocate much: bodies above 4 KiB
 * refused, outputs above 128 KiB refused and above 4 KiB streamed in 4 KiB
 * chunks, requests above 256 bytes left to the workers (below, served on
 * the loop as inline); deadlines of seconds (2 s for a head, 5 s idle),
 * which the input's pauses pass; one origin besides its own may call it
 * (CORS answers). No body cache: a reply body is freed when its request
 * ends, so a connection that still sends from it is a use after free
 * AddressSanitizer reports (a cached body would be reused instead), and an
 * input's mallocs and frees balance (libFuzzer runs an input again, to
 * look for a leak, when they do not). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {"serve",          "--workers",      "2",     "--log-level",      "error", "--max-body",
                    "4K",             "--max-output",   "128K",  "--max-stream",     "128K",  "--stream-threshold",
                    "4K",             "--stream-chunk", "4K",    "--inline-max",     "256",   "--body-cache",
                    "0",              "--header-timeout", "2",   "--idle-timeout",   "5",     "--cors-origins",
                    "https://app.example", "--queue",   "4",     NULL};
    struct tile_error e = {0};
    if (tiled_config_load(&srv.cfg, (int)(sizeof(args) / sizeof(args[0])) - 1, args, stdout, &e) != 0)
        fuzz_fail("config: %s", e.text);
    srv.lim = (struct tile_limits){.max_body = (uint64_t)srv.cfg.max_body,
                                   .max_output = (uint64_t)srv.cfg.max_output,
                                   .max_stream = (uint64_t)srv.cfg.max_stream,
                                   .max_rank = (int)srv.cfg.max_rank,
                                   .max_depth = (int)srv.cfg.max_json_depth};
    tiled_log_init(&srv.cfg);
    srv.pool = tile_pool_init((int)srv.cfg.workers, (int)srv.cfg.queue, &e);
    srv.bodies = tiled_bodycache_new((uint64_t)srv.cfg.body_cache);
    if (tiled_serve_wire(&srv, &e) < 0)
        fuzz_fail("wire: %s", e.text);
    transport.srv = &srv;
    transport.io = &mem_io;
    transport.lfd = -1; /* no listener: the harness makes the one connection */
    transport.nloops = 1;
    transport.loops = &loop;
    pthread_mutex_init(&transport.fresh_lock, NULL);
    srv.transport = &transport;
    loop.t = &transport;
    loop.epfd = epoll_create1(EPOLL_CLOEXEC);
    int wake_ok = tiled_wakeup_init(&loop.wake);
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (!srv.pool || !srv.bodies || loop.epfd < 0 || wake_ok < 0)
        fuzz_fail("cannot set up the server: %s", e.text[0] ? e.text : strerror(errno));
    return 0;
}

/* ---- the loop, one turn at a time ---------------------------------------- */

static bool woken(void)
{
    bool w = tiled_wakeup_pending(&loop.wake);
    return w;
}

/* The connection while its socket is open (a closed one may wait, off the
 * socket, for a worker's resume). */
static struct http_conn *open_conn(void)
{
    struct http_conn *c = loop.conns;
    return c && !c->dead ? c : NULL;
}

/* The server closed the connection: what the client had not read of it is
 * still read, and the stream ends. A close with the client's bytes unread
 * resets the connection, and a reset destroys what the client had not read
 * yet: the server must have lingered (or been cut short). */
static void server_closed(void)
{
    FUZZ_CHECK(lenient || sock.in_off == sock.in_len || sock.out_len == 0 || sock.client_shut,
               "the server closed the connection with %zu bytes of the client's unread: the reset destroys %zu "
               "bytes of replies the client had not read",
               sock.in_len - sock.in_off, sock.out_len);
    sock.server_closed = true;
    moved++;
}

/* A turn of loop_main: the connection's socket events as level-triggered
 * epoll reports them (readable while the client's bytes wait or once it
 * shut its side, writable while the socket has room or once the client is
 * gone, each if the connection watches it; a hang-up once both sides are
 * shut, or the client is gone), the connections the eventfd announced,
 * the turn's end; then the client reads. */
static void turn(void)
{
    step_clock_advance(TURN_US);
    struct http_conn *c = open_conn();
    if (c) {
        uint32_t ev = 0;
        if (sock.in_off < sock.in_len || sock.client_shut || sock.client_closed)
            ev |= EPOLLIN;
        if (sock.out_len < SOCK_ROOM || sock.client_closed)
            ev |= EPOLLOUT;
        ev &= c->events;
        if (sock.client_closed || (sock.client_shut && sock.server_shut))
            ev |= EPOLLHUP;
        if (ev)
            http_conn_io(c, ev);
    }
    if (woken()) {
        http_loop_take_ready(&loop);
        moved++;
    }
    http_loop_turn_end(&loop);
    if (c && !open_conn())
        server_closed();
    client_read();
}

/* The workers finish every job and continuation waiting (the ones those
 * queue too): their requests are resumed, for the loop's next turn. */
static void run_workers(void)
{
    while (step_pool_run(srv.pool))
        moved++;
}

/* The connection, as accept_all() takes an accepted one. Its fd is an
 * eventfd no byte goes through: a file of its own, which epoll accepts
 * and which leaves the epoll set when the connection closes it, as a
 * socket does (nothing waits on the set: the harness says what is ready). */
static void open_connection(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    FUZZ_CHECK(fd >= 0, "eventfd: %s", strerror(errno));
    FUZZ_CHECK(http_loop_adopt(&loop, fd), "http_loop_adopt failed");
}

/* True while the server has work of its own in hand: a job waits for a
 * worker, a resume waits on the ready list, or output waits for room in
 * the socket the reading client gives. */
static bool server_owes(void)
{
    if (step_pool_waiting(srv.pool) > 0 || woken())
        return true;
    const struct http_conn *c = open_conn();
    return c && !paused && !sock.client_closed && http_out_pending(c);
}

/* Once nothing moves: no request is stuck (dispatched with no job for a
 * worker, or waiting for a resume that will not come) and, while the
 * client reads, no reply is half out. */
static void check_connection(const struct http_conn *c)
{
    FUZZ_CHECK(c->phase != HTTP_WORK, "a request was dispatched, no worker has it and no resume is coming");
    FUZZ_CHECK(!c->waiting, "the connection waits for a resume that is not coming (phase %d)", (int)c->phase);
    if (paused || sock.client_closed)
        return;
    FUZZ_CHECK(!http_out_pending(c), "the client reads, the socket has room, and %zu bytes of output stay unsent",
               c->out_len - c->out_off + c->body_len - c->body_off);
    FUZZ_CHECK(c->phase != HTTP_SEND, "a reply is being sent, and nothing moves");
}

/* Whether the server has answered what the client sent: every request it
 * sent whole, or up to a reply that announced the close. */
static void check_replies(void)
{
    struct h1_account a;
    h1_replies_account(&a);
    if (lenient || paused)
        return; /* cut short; or the client holds the replies back, and the end of the stream behind them */
    bool ended = a.eof;
    FUZZ_CHECK(!(ended && a.partial), "the server ended the connection in the middle of reply %zu", a.replies);
    if (a.closing)
        return; /* it owes nothing more */
    if (ended && atomic_load(&srv.draining))
        return; /* a drain closes a connection after any reply */
    FUZZ_CHECK(!a.refused, "the framer refused the client's stream and no reply said so: %zu replies to %zu requests",
               a.replies, a.requests);
    FUZZ_CHECK(a.replies == a.requests, "%zu replies to %zu requests, and the server %s", a.replies, a.requests,
               ended ? "ended the connection without a word" : "owes nothing more");
}

/* Settles: the workers run and the loop turns until nothing moves (and,
 * with `until_closed`, until the connection is gone). A server that owes
 * the client something while nothing can move any more, or that keeps
 * moving for ever, is a bug. */
static void settle(bool until_closed)
{
    for (unsigned turns = 0;; turns++) {
        FUZZ_CHECK(turns < TURNS_MAX, "the server still moves after %u turns (connection %s)", TURNS_MAX,
                   loop.conns ? "open" : "closed");
        uint64_t before = moved;
        run_workers();
        turn();
        if (moved != before)
            continue;
        FUZZ_CHECK(!server_owes(), "the server owes the client, and nothing it waits for can happen (%d jobs "
                   "waiting, connection %s)", step_pool_waiting(srv.pool), open_conn() ? "open" : "closed");
        FUZZ_CHECK(!until_closed || !loop.conns, "the connection stays open after the client %s, and nothing moves",
                   sock.client_closed ? "went" : "shut its side");
        break;
    }
    if (open_conn())
        check_connection(open_conn());
    if (!until_closed)
        check_replies();
}

/* The drain, as serve.c begins it. */
static void start_drain(void)
{
    if (atomic_load(&srv.draining))
        return;
    atomic_store(&srv.draining, true);
    http_transport_quiesce(&transport);
}

/* The end of a drain, as serve.c does it once --drain-timeout passed:
 * streams still waiting are cut, and the loop closes every connection. */
static void stop_server(void)
{
    start_drain();
    atomic_store(&srv.stopping, true);
    tiled_streams_abort();
    atomic_store(&transport.stopping, true);
    lenient = true;
}

/* Back to the state before the input: nothing may be left of it. */
static void check_and_reset(void)
{
    FUZZ_CHECK(loop.conns == NULL && loop.closed == NULL, "the loop still holds a connection");
    FUZZ_CHECK(step_pool_waiting(srv.pool) == 0, "%d jobs still waiting for a worker", step_pool_waiting(srv.pool));
    FUZZ_CHECK(atomic_load(&transport.nconns) == 0, "%u connections counted", atomic_load(&transport.nconns));
    FUZZ_CHECK(atomic_load(&srv.inflight) == 0, "%d requests never ended", atomic_load(&srv.inflight));
    FUZZ_CHECK(!tiled_wakeup_pending(&loop.wake), "the loop still holds resumed connections");
    FUZZ_CHECK(transport.fresh == NULL, "a connection is still counted as fresh");
    uint64_t v;
    ssize_t n = read(loop.wake.evfd, &v, sizeof(v)); /* the drain's wake-ups */
    (void)n;
    loop.quiesced = loop.unlistened = false;
    loop.next_tick_us = 0;
    transport.quiesce_at_us = 0;
    atomic_store(&srv.next_id, 0); /* request ids, as the replies carry them */
    atomic_store(&transport.quiescing, false);
    atomic_store(&transport.stopping, false);
    atomic_store(&transport.listener_closed, false);
    atomic_store(&srv.draining, false);
    atomic_store(&srv.stopping, false);
}

/* Acts on a piece's control byte; false when the client sends nothing more. */
static bool control(uint8_t ctl, bool *settled)
{
    if (verbose)
        fprintf(stderr, "client: control 0x%02x\n", ctl);
    if (ctl & C_WORKERS)
        run_workers();
    if (ctl & C_DRAIN)
        start_drain();
    uint64_t pass = time_steps_us[ctl >> 4 & 3];
    if (pass) {
        /* The idle timeout may cut a reply stuck behind a full socket the
         * client does not read (with room, the loop writes before it
         * looks at the time). */
        const struct http_conn *c = open_conn();
        if (sock.out_len == SOCK_ROOM && c && http_out_pending(c))
            lenient = true;
        step_clock_advance(pass);
    }
    bool was_paused = paused;
    paused = ctl & C_PAUSE;
    if (was_paused && !paused)
        client_read(); /* a client that reads again does so at once */
    if (ctl & C_STOP) {
        stop_server();
        return false;
    }
    if (ctl & C_SHUT) {
        sock.client_shut = true;
        if (verbose)
            fprintf(stderr, "client: shuts its sending side\n");
    }
    *settled = !(ctl & C_NOWAIT);
    if (*settled)
        settle(false);
    return !(ctl & C_SHUT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t piece[SENT_MAX];
    /* All but in[], which is written before it is read. */
    memset(&sock.in_len, 0, sizeof(sock) - offsetof(struct mem_sock, in_len));
    paused = lenient = false;
    step_clock_set(START_US);
    h1_replies_begin(verbose);
    open_connection();
    bool settled = true, sending = true;
    for (size_t i = 0; i < size && sending;) {
        size_t n = 0;
        uint8_t ctl = 0;
        while (i < size) {
            uint8_t b = data[i++];
            if (b == ESC && i < size && data[i++] != ESC) {
                ctl = data[i - 1];
                break;
            }
            if (n < sizeof(piece))
                piece[n++] = b; /* a byte of the stream (0xFF 0xFF: one 0xFF) */
        }
        if (n > 0) {
            client_send(piece, n);
            turn(); /* the connection reads it */
        }
        sending = control(ctl, &settled);
    }
    /* The end: after a stop, the server closes what is left; after a
     * piece not settled the client goes at once; else it reads what is
     * left, shuts its side (unless it did), and the server must close. */
    if (atomic_load(&srv.stopping) || atomic_load(&srv.draining)) {
        paused = false;
        if (!atomic_load(&srv.stopping)) {
            settle(false);
            stop_server();
        }
        settle(true);
    } else if (settled) {
        paused = false;
        settle(false);
        sock.client_shut = true;
        settle(true);
        struct h1_account a;
        h1_replies_account(&a);
        FUZZ_CHECK(lenient || a.eof, "the server closed the connection and the client never read its end");
        check_replies();
    }
    sock.client_closed = true;
    paused = false;
    lenient = true;
    settle(true);
    h1_replies_end();
    check_and_reset();
    return 0;
}
