/* fuzz_grpc_transport.c - the gRPC transport (server/grpc/) under hostile
 * HTTP/2: the input is what one client sends on one connection, and it
 * goes through the daemon's own path, socket included: the connection
 * (conn.c) reads it from its end of a socketpair into its nghttp2 session,
 * the calls (call.c) take the streams through the service (routing, the
 * message decoders, the tile model on the worker pool, streamed replies),
 * and the replies are written back to the socket, whose other end this
 * harness reads as a client would (h2_replies.c: every reply must keep to
 * gRPC over HTTP/2).
 *
 * The loop is driven by hand, one turn at a time, with loop.c's own turn
 * work (grpc_loop_take_ready, grpc_loop_turn_end: resumed calls,
 * deadlines, drain, output): no loop thread, so a crash stack is the
 * transport's. Workers are the real pool's threads.
 *
 * Input layout: the client's bytes as sent (the 24-byte preface, then
 * HTTP/2 frames). They are written in pieces: the first 24 bytes, then one
 * frame at a time as each frame header declares its length (the rest of the
 * input when it declares more). After each piece the connection reads it,
 * and the harness waits until the server owes nothing (workers back, stream
 * bytes produced, replies written), so that an input replays the same way
 * every time. Bits HTTP/2 tells a receiver to ignore steer the harness:
 *   - the reserved bit of the stream id: do not wait after this frame (the
 *     next one arrives while workers may still hold their calls: cancel,
 *     deadline and, after the last frame, the client's close against a
 *     worker's resume);
 *   - frame flag 0x40: the server starts to drain (as on SIGTERM) before
 *     this frame;
 *   - frame flag 0x80: this frame comes in two reads, split in the middle,
 *     so DATA arrives in partial chunks;
 *   - frame flag 0x10: the client reads nothing until a frame without it
 *     (replies pile up in the server's output queue, then leave a socketful
 *     at a time).
 * (No HTTP/2 frame type defines flags 0x10, 0x40 or 0x80.) At the end the
 * client closes the socket (after a drain began: the server stops, as when
 * the drain timeout passed).
 *
 * Checked: every reply keeps to gRPC over HTTP/2 (h2_replies.h); whenever
 * the server owes nothing, no call is stuck and the connection's counts
 * agree with its calls; every input leaves nothing behind (no connection,
 * request in flight or call a worker holds; LeakSanitizer for the rest).
 * FUZZ_VERBOSE=1 build-fuzz/fuzz_grpc_transport INPUT prints the exchange.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2.h"

#include "clock.h"
#include "bodycache.h"
#include "fuzz_common.h"
#include "h2_replies.h"
#include "log.h"
#include "pool.h"
#include "server.h"
#include "stream.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFACE_LEN 24
#define FRAME_HEAD 9
#define NO_WAIT_BIT 0x80  /* in the first byte of the stream id */
#define DRAIN_FLAG 0x40
#define SPLIT_FLAG 0x80
#define PAUSE_FLAG 0x10
/* Longer than any reply of a small input takes, short of libFuzzer's -timeout. */
#define OWED_LIMIT_US 10000000u

static struct tiled_server srv = {.submit_lock = PTHREAD_MUTEX_INITIALIZER};
static struct grpc_transport transport;
static struct grpc_loop loop;
static char wake_tag;  /* epoll data of the loop's eventfd */
static int peer = -1;  /* the client's end of the socketpair */
static bool paused;    /* the client does not read */

/* FUZZ_VERBOSE: the client's frames and the server's are printed. */
static bool verbose;

/* ---- the server ------------------------------------------------------------ */

/* Small limits, so that every size check is reachable from a small input
 * and no input makes the process allocate much: bodies above 64 KiB and
 * messages above 128 KiB refused (each limit reachable before the other),
 * more than 32 KiB of request messages and unsent replies held by one
 * connection's calls,
 * outputs above 4 KiB streamed in 64 KiB chunks, requests above 256 bytes
 * sent to the workers (below, served on the loop as inline). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char *args[] = {"serve",          "--workers",     "2",    "--log-level",        "error", "--grpc-port",
                    "0",              "--max-body",    "64K",  "--max-grpc-message", "128K",  "--max-output",
                    "1M",             "--max-stream",  "256K", "--stream-threshold", "4K",    "--stream-chunk",
                    "64K",            "--inline-max",  "256",  "--body-cache",       "1M",    "--max-grpc-conn-memory",
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
    transport.srv = &srv;
    transport.lfd = -1; /* no listener: the harness makes the one connection */
    transport.nloops = 1;
    transport.loops = &loop;
    transport.callbacks = grpc_conn_callbacks_new();
    srv.grpc = &transport;
    loop.t = &transport;
    loop.epfd = epoll_create1(EPOLL_CLOEXEC);
    loop.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&loop.ready_lock, NULL);
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &wake_tag};
    verbose = getenv("FUZZ_VERBOSE") != NULL;
    if (!srv.pool || !srv.bodies || !transport.callbacks || loop.epfd < 0 || loop.evfd < 0 ||
        epoll_ctl(loop.epfd, EPOLL_CTL_ADD, loop.evfd, &wev) < 0)
        fuzz_fail("cannot set up the server: %s", e.text[0] ? e.text : strerror(errno));
    return 0;
}

/* ---- the loop, one turn at a time ---------------------------------------- */

static void drain_peer(void)
{
    uint8_t buf[64 * 1024];
    ssize_t n;
    while (peer >= 0 && !paused && (n = read(peer, buf, sizeof(buf))) > 0) {
        h2_replies_read(buf, (size_t)n);
    }
}

/* What loop_main does in a turn, but with the harness's timeout; then
 * the client reads what the server wrote (h2_replies.h checks it). */
static void turn(int timeout_ms)
{
    struct epoll_event evs[4];
    int n = epoll_wait(loop.epfd, evs, 4, timeout_ms);
    for (int i = 0; i < n; i++) {
        if (evs[i].data.ptr == &wake_tag)
            grpc_loop_take_ready(&loop);
        else
            grpc_conn_io(evs[i].data.ptr, evs[i].events);
    }
    grpc_loop_turn_end(&loop);
    drain_peer();
}

/* The connection, set up as accept_all() sets up an accepted one. */
static void open_connection(int fd)
{
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
 * call or runs a job, a reply waits for its stream's next bytes, output
 * waits for room in the socket, or a resumed call waits on the ready list. */
static bool server_owes(void)
{
    if (loop.parked > 0 || tile_pool_queue_depth(srv.pool) > 0 || tile_pool_busy(srv.pool) > 0)
        return true;
    for (const struct grpc_conn *c = loop.conns; c; c = c->next) {
        if (c->pending > 0 && !paused)
            return true; /* the socket has not taken all yet */
        for (const struct grpc_call *call = c->calls; call; call = call->next) {
            if (call->deferred)
                return true;
        }
    }
    pthread_mutex_lock(&loop.ready_lock);
    bool ready = loop.ready != NULL;
    pthread_mutex_unlock(&loop.ready_lock);
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
         * holds back.) */
        FUZZ_CHECK(call->state != CALL_WORK &&
                       !(call->state == CALL_BODY && request_ended && !call->framing && !call->ending),
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

/* Turns until the server owes nothing (and, with `until_closed`, until
 * the connection is gone); a server that never gets there is a bug. */
static void settle(bool until_closed)
{
    uint64_t start = tiled_now_us();
    while (server_owes() || (until_closed && loop.conns)) {
        FUZZ_CHECK(tiled_now_us() - start < OWED_LIMIT_US,
                   "the server still owes the client after %u s (%d calls with workers, connection %s)",
                   OWED_LIMIT_US / 1000000u, loop.parked, loop.conns ? "open" : "closed");
        turn(1);
    }
    turn(0);
    if (loop.conns)
        check_connection(loop.conns);
}

/* The client sends `n` bytes; the connection reads them in its turn. */
static void send_bytes(const uint8_t *p, size_t n)
{
    uint64_t start = tiled_now_us();
    while (n > 0 && loop.conns) {
        ssize_t w = send(peer, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else {
            FUZZ_CHECK(w < 0 && (errno == EAGAIN || errno == EPIPE || errno == ECONNRESET), "send: %s",
                       strerror(errno));
            FUZZ_CHECK(tiled_now_us() - start < OWED_LIMIT_US, "the connection stopped reading");
        }
        turn(w > 0 ? 0 : 1);
    }
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

/* Sends one frame (or the bytes left); true when the harness then waited
 * for the server. */
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
    FUZZ_CHECK(atomic_load(&transport.nconns) == 0, "%d connections counted", atomic_load(&transport.nconns));
    FUZZ_CHECK(atomic_load(&srv.inflight) == 0, "%d requests never ended", atomic_load(&srv.inflight));
    FUZZ_CHECK(loop.ready == NULL && loop.dirty == NULL, "the loop still holds calls or connections");
    while (loop.free_calls) { /* each input starts without reused calls */
        struct grpc_call *call = loop.free_calls;
        loop.free_calls = call->next;
        free(call);
    }
    loop.nfree_calls = 0;
    loop.quiesced = false;
    loop.next_deadline_us = 0;
    atomic_store(&transport.quiescing, false);
    atomic_store(&transport.stopping, false);
    atomic_store(&srv.draining, false);
    atomic_store(&srv.stopping, false);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        fuzz_fail("socketpair: %s", strerror(errno));
    peer = sv[1];
    /* A small socket buffer: a reply of a few KiB fills it, so the server
     * meets a full socket (EAGAIN, EPOLLOUT, frames held back) and the
     * harness's turns take the rest as a slow client would. */
    int sndbuf = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    h2_replies_begin(verbose);
    open_connection(sv[0]);
    turn(0);
    size_t off = size < PREFACE_LEN ? size : PREFACE_LEN;
    send_bytes(data, off);
    bool settled = true;
    while (off < size && loop.conns) {
        size_t n = frame_len(data + off, size - off);
        settled = send_frame(data + off, n);
        off += n;
    }
    /* The end: after a drain began, the server stops; else the client goes
     * away, at once after a frame not waited for (calls with workers are
     * cut short). Calls still open end as 499 either way. */
    if (atomic_load(&srv.draining)) {
        stop_server();
        settle(true);
    } else if (settled) {
        paused = false; /* the client reads what is left, then goes */
        settle(false);
    }
    close(peer);
    peer = -1;
    paused = false;
    settle(true);
    check_and_reset();
    return 0;
}
