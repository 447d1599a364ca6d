/* fuzz_grpc_transport.c - the gRPC transport (server/grpc/) under hostile
 * HTTP/2: the input is what one client sends on one connection, and it
 * goes through the daemon's own path: the connection (conn.c) reads it into
 * its nghttp2 session, the calls (call.c) take the streams through the
 * service (routing, the message decoders, the tile model as worker jobs,
 * streamed replies), and the replies are written back, read by this
 * harness as a client would (h2_replies.c: every reply must keep to gRPC
 * over HTTP/2).
 *
 * In process, on one thread, nothing left to timing:
 *   - the socket is memory: the connection's struct tiled_socket_io (listener.h) is this
 *     file's, whose recv takes the client's bytes and whose sendmsg puts the
 *     server's in a SOCK_ROOM-byte buffer the client empties when it reads
 *     (a reply of a few KiB fills it, so the server meets a full socket:
 *     EAGAIN, EPOLLOUT, frames held back). The connection's fd is a
 *     descriptor no byte goes through, there for epoll_ctl and close.
 *   - the loop is driven by hand, one turn at a time, with loop.c's own turn
 *     work (grpc_conn_io with the events epoll would report,
 *     grpc_loop_take_ready, grpc_loop_turn_end: resumed calls, deadlines,
 *     drain, output), so a crash stack is the transport's.
 *   - the worker pool has no threads (step_pool.h, linked in place of
 *     core/pool.c): a job a call is handed to, and a stream's next chunk,
 *     wait until the harness runs them.
 *   - the clock is the harness's (step_clock.h, in place of clock.c): each
 *     input starts at the same time and each turn takes TURN_US, so
 *     deadlines fire, and replies carry durations, alike on every run.
 *
 * Input layout: the client's bytes as sent (the 24-byte preface, then
 * HTTP/2 frames). They arrive in pieces: the first 24 bytes, then one frame
 * at a time as each frame header declares its length (the rest of the
 * input when it declares more). After each piece the connection reads it,
 * then the harness settles: it runs the workers' jobs and turns the loop
 * until the server owes nothing (no job waiting, no call with a worker,
 * stream bytes produced, replies written). Bits HTTP/2 tells a receiver to
 * ignore steer the harness:
 *   - the reserved bit of the stream id: no settling after this frame (the
 *     next one arrives while workers still hold their calls: cancel,
 *     deadline and, after the last frame, the client's close against a
 *     worker's resume);
 *   - frame flag 0x02: the workers finish what they hold before this frame
 *     arrives, and the loop reads the frame before it takes their resumes;
 *   - frame flag 0x40: the server starts to drain (as on SIGTERM) before
 *     this frame;
 *   - frame flag 0x80: this frame comes in two reads, split in the middle,
 *     so DATA arrives in partial chunks;
 *   - frame flag 0x10: the client reads nothing until a frame without it
 *     (replies pile up in the server's output queue, then leave a socketful
 *     at a time).
 * (No HTTP/2 frame type defines flags 0x02, 0x10, 0x40 or 0x80.) At the end
 * the client closes its end (after a drain began: the server stops, as when
 * the drain timeout passed).
 *
 * Checked: every reply keeps to gRPC over HTTP/2 (h2_replies.h); while the
 * server owes the client something, every turn moves something (a job, a
 * resume, bytes either way) and the server gets there within TURNS_MAX
 * turns; whenever it owes nothing, no call is stuck and the connection's
 * counts agree with its calls; every input leaves nothing behind (no
 * connection, request in flight, call a worker holds or job waiting;
 * LeakSanitizer for the rest).
 * FUZZ_VERBOSE=1 build-fuzz/fuzz_grpc_transport INPUT prints the exchange.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "h2.h"

#include "bodycache.h"
#include "fuzz_common.h"
#include "h2_replies.h"
#include "log.h"
#include "serve.h"
#include "server.h"
#include "step_clock.h"
#include "step_pool.h"
#include "stream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFACE_LEN 24
#define FRAME_HEAD 9
#define NO_WAIT_BIT 0x80  /* in the first byte of the stream id */
#define WORKERS_FLAG 0x02
#define DRAIN_FLAG 0x40
#define SPLIT_FLAG 0x80
#define PAUSE_FLAG 0x10
/* The clock at each input's start, and the time a loop turn takes: a
 * grpc-timeout of 50u expires at the next turn, one of 1m ten turns on. */
#define START_US (1000u * 1000000u)
#define TURN_US 100u
/* What the client's socket holds of the server's bytes before it reads. */
#define SOCK_ROOM 4096
/* Turns a settling may take: far more than the replies of an input (a
 * socketful a turn) need; past it the server is going round in circles. */
#define TURNS_MAX 100000u

static struct tiled_server srv = {.submit_lock = PTHREAD_MUTEX_INITIALIZER};
static struct grpc_transport transport;
static struct grpc_loop loop;
static int idle_fd = -1; /* what each connection's fd is a copy of (see below) */
static bool paused;      /* the client does not read */
/* Something happened (a job ran, a resume was taken, bytes went either
 * way, the connection closed): counted to tell a server that owes the
 * client something but can never give it. */
static uint64_t moved;

/* FUZZ_VERBOSE: the client's frames and the server's are printed. */
static bool verbose;

/* ---- the connection's socket, in memory ------------------------------------ */

static struct {
    const uint8_t *in; /* the client's piece being read */
    size_t in_len, in_off;
    uint8_t out[SOCK_ROOM]; /* the server's bytes the client has not read */
    size_t out_len;
    bool client_closed, server_shut;
} sock;

static ssize_t mem_recv(int fd, void *buf, size_t len, int flags)
{
    (void)fd;
    (void)flags;
    size_t n = sock.in_len - sock.in_off;
    n = n < len ? n : len;
    if (n == 0 && !sock.client_closed) {
        errno = EAGAIN;
        return -1;
    }
    if (n > 0)
        memcpy(buf, sock.in + sock.in_off, n);
    sock.in_off += n;
    moved++;
    return (ssize_t)n; /* 0: the client closed its end */
}

static ssize_t mem_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    (void)fd;
    (void)flags;
    if (sock.client_closed || sock.server_shut) {
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
    return 0;
}

static const struct tiled_socket_io mem_io = {.recv = mem_recv, .sendmsg = mem_sendmsg, .shutdown = mem_shutdown};

/* The client reads what the server wrote (h2_replies.h checks it). */
static void client_read(void)
{
    if (paused || sock.client_closed || sock.out_len == 0)
        return;
    h2_replies_read(sock.out, sock.out_len);
    sock.out_len = 0;
    moved++;
}

/* The client closes its end: what it had not read is dropped, and the
 * server reads the end of the stream. */
static void client_close(void)
{
    sock.client_closed = true;
    sock.out_len = 0;
}

/* ---- the server ------------------------------------------------------------ */

/* Small limits, so that every size check is reachable from a small input
 * and no input makes the process allocate much: bodies above 64 KiB and
 * messages above 128 KiB refused (each limit reachable before the other),
 * more than 32 KiB of request messages and unsent replies held by one
 * connection's calls, outputs above 4 KiB streamed in 16 KiB chunks (a
 * stream has two: a reply up to the message limit needs each given back by
 * the socket and made again), requests above 256 bytes left to the
 * workers (below, served on the loop as inline). No body cache:
 * a reply body is freed when its reply lets go of it, so a connection that
 * still sends from it is a use after free AddressSanitizer reports (a cached
 * body would be reused instead), and an input's mallocs and frees balance
 * (libFuzzer runs an input again, to look for a leak, when they do not). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {"serve",          "--workers",     "2",    "--log-level",        "error", "--grpc-port",
                    "0",              "--max-body",    "64K",  "--max-grpc-message", "128K",  "--max-output",
                    "1M",             "--max-stream",  "256K", "--stream-threshold", "4K",    "--stream-chunk",
                    "16K",            "--inline-max",  "256",  "--body-cache",       "0",     "--max-grpc-conn-memory",
                    "32K",            NULL};
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
    transport.callbacks = grpc_conn_callbacks_new();
    srv.grpc = &transport;
    loop.t = &transport;
    loop.epfd = epoll_create1(EPOLL_CLOEXEC);
    int wake_ok = tiled_wakeup_init(&loop.wake);
    /* A connection's fd is a copy of a pipe's read end whose write end
     * stays open: epoll accepts it, and it never becomes ready. */
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) == 0)
        idle_fd = pipefd[0];
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (!srv.pool || !srv.bodies || !transport.callbacks || loop.epfd < 0 || wake_ok < 0 || idle_fd < 0)
        fuzz_fail("cannot set up the server: %s", e.text[0] ? e.text : strerror(errno));
    return 0;
}

/* ---- the loop, one turn at a time ---------------------------------------- */

static bool woken(void)
{
    bool w = tiled_wakeup_pending(&loop.wake);
    return w;
}

/* A turn of loop_main: the connection's socket events as level-triggered
 * epoll reports them (readable while the client's bytes wait or once it
 * closed, writable while the socket has room or once the client closed,
 * each if the connection watches it; a hang-up always), the calls the
 * eventfd announced, the turn's end; then the client reads. */
static void turn(void)
{
    step_clock_advance(TURN_US);
    struct grpc_conn *c = loop.conns;
    if (c) {
        uint32_t ev = 0;
        if (sock.in_off < sock.in_len || sock.client_closed)
            ev |= EPOLLIN;
        if (sock.out_len < SOCK_ROOM || sock.client_closed)
            ev |= EPOLLOUT;
        ev &= c->events;
        if (sock.client_closed)
            ev |= EPOLLHUP;
        if (ev)
            grpc_conn_io(c, ev);
    }
    if (woken()) {
        grpc_loop_take_ready(&loop);
        moved++;
    }
    grpc_loop_turn_end(&loop);
    if (loop.conns != c)
        moved++; /* the connection closed */
    client_read();
}

/* The workers finish every job and continuation waiting (the ones those
 * queue too): their calls are resumed, for the loop's next turn. */
static void run_workers(void)
{
    while (step_pool_run(srv.pool))
        moved++;
}

/* The connection, set up as accept_all() sets up an accepted one. */
static void open_connection(void)
{
    int fd = dup(idle_fd);
    FUZZ_CHECK(fd >= 0, "dup: %s", strerror(errno));
    struct grpc_conn *c = grpc_conn_new(&loop, fd);
    FUZZ_CHECK(c != NULL, "grpc_conn_new failed");
    loop.conns = c;
    atomic_fetch_add(&transport.nconns, 1);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    c->events = EPOLLIN;
    if (epoll_ctl(loop.epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        c->dead = true;
    grpc_loop_mark_dirty(c); /* the server's SETTINGS */
}

/* True while the server has work of its own in hand: a worker holds a
 * call or a job waits for one, a reply waits for its stream's next bytes,
 * output waits for room in the socket, or a resumed call waits on the
 * ready list. (While the client does not read, the socket's room is the
 * client's to give, and so is a stream's next chunk, whose buffer waits
 * until the socket takes the chunk before.) */
static bool server_owes(void)
{
    if (loop.parked > 0 || step_pool_waiting(srv.pool) > 0)
        return true;
    for (const struct grpc_conn *c = loop.conns; c && !paused; c = c->next) {
        if (c->pending > 0)
            return true; /* the socket has not taken all yet */
        for (const struct grpc_call *call = c->calls; call; call = call->next) {
            if (call->deferred)
                return true;
        }
    }
    bool ready = tiled_wakeup_pending(&loop.wake);
    return ready;
}

/* Once the server owes nothing: what a connection counts of its calls
 * agrees with the calls, and no call is stuck, its request complete but
 * neither answered nor with a worker (the client would wait forever). */
static void check_connection(const struct grpc_conn *c)
{
    uint64_t held = 0, unsent = 0, admitted = 0;
    int n = 0, holding = 0, sending = 0;
    for (const struct grpc_call *call = c->calls; call; call = call->next, n++) {
        held += call->held;
        unsent += call->unsent;
        holding += call->held > 0;
        /* A streaming call's error_message (the reply's error text: a few
         * hundred bytes) is how a refusal is told, so it is sent whatever
         * the budget; the replies admitted by the budget are the others. */
        if (!call->errbuf) {
            admitted += call->unsent;
            sending += call->unsent > 0;
        }
        FUZZ_CHECK(call->unsent <= call->msg_len, "stream %d counts %llu bytes of its %llu-byte reply unsent",
                   (int)call->id, (unsigned long long)call->unsent, (unsigned long long)call->msg_len);
        bool request_ended = nghttp2_session_get_stream_remote_close(c->h2, call->id) == 1;
        /* (A streaming call in CALL_BODY may be framing an answer, or
         * have its trailers decided, that the client's window or socket
         * holds back; so may one whose stream was closed while a worker
         * held its message, once the worker is done: CALL_WORK, ending.) */
        bool closing = call->ending && !call->parked;
        FUZZ_CHECK(closing || (call->state != CALL_WORK &&
                               !(call->state == CALL_BODY && request_ended && !call->framing)),
                   "stream %d is stuck: its request %s, no reply was decided and no worker has it", (int)call->id,
                   call->state == CALL_WORK ? "was dispatched" : "ended");
    }
    FUZZ_CHECK(n == c->ncalls, "the connection counts %d calls, its list has %d", c->ncalls, n);
    FUZZ_CHECK(held == c->held, "the connection counts %llu bytes of request messages held, its calls %llu",
               (unsigned long long)c->held, (unsigned long long)held);
    FUZZ_CHECK(unsent == c->unsent, "the connection counts %llu bytes of replies unsent, its calls %llu",
               (unsigned long long)c->unsent, (unsigned long long)unsent);
    /* Request messages, and unsent replies, each within the budget, or
     * only one call's (a call alone is let in whatever its size). */
    uint64_t budget = (uint64_t)srv.cfg.max_grpc_conn_memory;
    FUZZ_CHECK(held <= budget || holding <= 1, "%d calls hold %llu bytes of request messages, above the %llu-byte budget",
               holding, (unsigned long long)held, (unsigned long long)budget);
    FUZZ_CHECK(admitted <= budget || sending <= 1, "%d calls hold %llu bytes of unsent replies, above the %llu-byte budget",
               sending, (unsigned long long)admitted, (unsigned long long)budget);
}

/* Settles: the workers run and the loop turns until the server owes
 * nothing (and, with `until_closed`, until the connection is gone). A
 * server that owes the client something while nothing can move any more,
 * or that never gets there, is a bug. */
static void settle(bool until_closed)
{
    for (unsigned turns = 0; server_owes() || (until_closed && loop.conns); turns++) {
        FUZZ_CHECK(turns < TURNS_MAX, "the server still owes the client after %u turns (%d calls with workers, connection %s)",
                   TURNS_MAX, loop.parked, loop.conns ? "open" : "closed");
        uint64_t before = moved;
        run_workers();
        turn();
        FUZZ_CHECK(moved != before,
                   "the server owes the client, and nothing it waits for can happen (%d calls with workers, %d jobs "
                   "waiting, %zu bytes unsent, connection %s)",
                   loop.parked, step_pool_waiting(srv.pool), loop.conns ? loop.conns->pending : 0,
                   loop.conns ? "open" : "closed");
    }
    turn();
    if (loop.conns)
        check_connection(loop.conns);
}

/* The client sends `n` bytes (after the connection closed, they go
 * nowhere); the connection reads them in its turn. */
static void send_bytes(const uint8_t *p, size_t n)
{
    sock.in = p;
    sock.in_len = n;
    sock.in_off = 0;
    while (sock.in_off < sock.in_len && loop.conns) {
        size_t before = sock.in_off;
        turn();
        FUZZ_CHECK(sock.in_off > before || !loop.conns, "the connection stopped reading");
    }
    sock.in = NULL;
    sock.in_len = sock.in_off = 0;
}

/* The length of the next piece at p[0, left): a frame as its header
 * declares it, or what is left. */
static size_t frame_len(const uint8_t *p, size_t left)
{
    if (left < FRAME_HEAD)
        return left;
    size_t len = FRAME_HEAD + ((size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2]);
    return len < left ? len : left;
}

/* Sends one frame (or the bytes left); true when the harness then settled. */
static bool send_frame(const uint8_t *p, size_t n)
{
    if (n < FRAME_HEAD) {
        send_bytes(p, n);
        return false;
    }
    uint8_t flags = p[4];
    paused = flags & PAUSE_FLAG;
    if (flags & DRAIN_FLAG) {
        atomic_store(&srv.draining, true); /* what serve.c's drain and tiled_grpc_quiesce set */
        atomic_store(&transport.quiescing, true);
    }
    if (flags & WORKERS_FLAG)
        run_workers();
    if (verbose)
        fprintf(stderr, "client: type %u stream %u flags 0x%02x, %zu bytes\n", p[3],
                ((uint32_t)p[5] << 24 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8]) & 0x7fffffffu, flags,
                n - FRAME_HEAD);
    size_t first = flags & SPLIT_FLAG ? FRAME_HEAD + (n - FRAME_HEAD) / 2 : n;
    send_bytes(p, first);
    send_bytes(p + first, n - first);
    if (p[5] & NO_WAIT_BIT)
        return false;
    settle(false);
    return true;
}

/* The end of a drain, as serve.c does it once --drain-timeout passed:
 * streams still waiting are cut, and the loop closes every connection
 * with a final GOAWAY. */
static void stop_server(void)
{
    atomic_store(&srv.stopping, true);
    tiled_streams_abort();
    atomic_store(&transport.stopping, true);
}

/* Back to the state before the input: nothing may be left of it. */
static void check_and_reset(void)
{
    FUZZ_CHECK(loop.parked == 0, "%d calls still with workers", loop.parked);
    FUZZ_CHECK(step_pool_waiting(srv.pool) == 0, "%d jobs still waiting for a worker", step_pool_waiting(srv.pool));
    FUZZ_CHECK(atomic_load(&transport.nconns) == 0, "%d connections counted", atomic_load(&transport.nconns));
    FUZZ_CHECK(atomic_load(&srv.inflight) == 0, "%d requests never ended", atomic_load(&srv.inflight));
    FUZZ_CHECK(!tiled_wakeup_pending(&loop.wake) && loop.dirty == NULL, "the loop still holds calls or connections");
    while (loop.free_calls) { /* each input starts without reused calls */
        struct grpc_call *call = loop.free_calls;
        loop.free_calls = call->next;
        free(call);
    }
    loop.nfree_calls = 0;
    loop.quiesced = false;
    loop.next_deadline_us = 0;
    loop.next_tick_us = 0;
    atomic_store(&srv.next_id, 0); /* request ids, as the replies carry them */
    atomic_store(&transport.quiescing, false);
    atomic_store(&transport.stopping, false);
    atomic_store(&srv.draining, false);
    atomic_store(&srv.stopping, false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(&sock, 0, sizeof(sock));
    paused = false;
    step_clock_set(START_US);
    h2_replies_begin(verbose);
    open_connection();
    turn();
    size_t off = size < PREFACE_LEN ? size : PREFACE_LEN;
    send_bytes(data, off);
    bool settled = true;
    while (off < size && loop.conns) {
        size_t n = frame_len(data + off, size - off);
        settled = send_frame(data + off, n);
        off += n;
    }
    /* The end: after a drain began, the server stops; else the client goes
     * away, at once after a frame not settled (calls with workers are cut
     * short). Calls still open end as 499 either way. */
    if (atomic_load(&srv.draining)) {
        stop_server();
        settle(true);
    } else if (settled) {
        paused = false; /* the client reads what is left, then goes */
        settle(false);
    }
    client_close();
    paused = false;
    settle(true);
    h2_replies_end();
    check_and_reset();
    return 0;
}
