/* loop.c - the gRPC transport's event-loop threads (see h2.h, grpc.h).
 *
 * DESIGN. --http-threads loops, each with its own epoll set, share one
 * listening socket (EPOLLEXCLUSIVE: one loop is woken per connection) and
 * own the connections they accept, so a session is only ever touched by
 * one thread, as nghttp2 requires, without a lock on the hot path. A
 * worker that finishes a call (or a stream producer with bytes ready)
 * cannot touch the session: grpc_call_resume() puts the call on its loop's
 * ready list under a small lock and writes the loop's eventfd once per
 * batch; the loop then sends. Output is produced per connection once per
 * loop turn (the "dirty" list), so the replies of every call decided in
 * one turn leave in one write, whatever the number of streams.
 *
 * Time: each turn waits at most until the nearest grpc-timeout deadline
 * or the next one-second tick (idle connections, connection age, drain
 * and stop).
 *
 * Going away (drain, --grpc-max-connection-age): a connection is sent
 * the two GOAWAYs of RFC 9113 section 6.8 (conn.c), and every stream the
 * final one covers is served; the connection closes once they are.
 *
 * The listener goes away without losing a connection either. The kernel
 * completes handshakes by itself, and a client (nginx) sends its request
 * as soon as connect() returns, before the server's SETTINGS: a
 * connection still in the accept queue may already hold a call. Shutting
 * the listener resets those connections, and nginx does not retry a gRPC
 * call it has sent (its request body is never buffered for a retry), so
 * each became a 502. So on drain the listener first drops new
 * connections' SYNs (a socket filter; the client's connect() waits for its
 * SYN's retransmission, which the closed listener refuses, and nginx tries
 * the next replica with its request unsent), the loops go on accepting
 * what the kernel completed and serve it like any draining connection,
 * and the listener is shut only once its queue is empty and the
 * handshakes under way when the filter came have had time to end
 * (listener_drain); the drain is not over before.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "grpc.h"
#include "h2.h"

#include "clock.h"
#include "list.h"
#include "listener.h"
#include "log.h"
#include "metricsink.h"
#include "recv_deadline.h"
#include "server.h"

/* Free calls kept per loop for reuse: enough for a busy connection's
 * streams without returning memory to malloc on every call. */
#define FREE_CALLS_MAX 256

static char listener_tag, wake_tag; /* epoll data of the two non-connection fds */

/* ---- calls: allocation and wake-ups ------------------------------------- */

struct grpc_call *grpc_call_alloc(struct grpc_conn *c, int32_t id)
{
    struct grpc_loop *l = c->loop;
    struct grpc_call *call = l->free_calls;
    if (call) {
        l->free_calls = call->next;
        l->nfree_calls--;
    } else if (!(call = malloc(sizeof(*call)))) {
        return NULL;
    }
    /* Everything before the metadata arena; the arena is filled as used. */
    memset(call, 0, offsetof(struct grpc_call, head));
    call->loop = l;
    call->conn = c;
    call->id = id;
    memcpy(call->remote, c->remote, sizeof(call->remote)); /* its connection may go first */
    /* The clock of the call's whole request (call.c, receive_progress) */
    uint64_t timeout_s = (uint64_t)l->t->srv->cfg.header_timeout;
    if (timeout_s) {
        call->recv_start_us = tiled_now_us();
        call->recv_deadline_us = tiled_recv_deadline_us(call->recv_start_us, timeout_s, 0);
        grpc_loop_deadline(l, call->recv_deadline_us);
    }
    TILE_LIST_PUSH(c->calls, call);
    c->ncalls++;
    return call;
}

static void call_free(struct grpc_call *call)
{
    struct grpc_loop *l = call->loop;
    if (l->nfree_calls >= FREE_CALLS_MAX) {
        free(call);
        return;
    }
    call->next = l->free_calls;
    l->free_calls = call;
    l->nfree_calls++;
}

void grpc_call_release(struct grpc_call *call)
{
    if (!tiled_wakeup_forget(&call->loop->wake, &call->ready)) /* else the ready list lets go of it */
        call_free(call);
}

void grpc_call_resume(void *p)
{
    struct grpc_call *call = p;
    tiled_wakeup_push(&call->loop->wake, &call->ready);
}

void grpc_loop_take_ready(struct grpc_loop *l)
{
    struct tiled_ready *list = tiled_wakeup_take(&l->wake), *n;
    bool gone;
    while ((n = tiled_wakeup_next(&l->wake, &list, &gone))) {
        struct grpc_call *call = TILED_READY_OWNER(n, struct grpc_call, ready);
        if (gone)
            call_free(call);
        else
            grpc_call_resumed(call);
    }
}

/* ---- output batching ------------------------------------------------------ */

void grpc_loop_mark_dirty(struct grpc_conn *c)
{
    if (c->dirty)
        return;
    c->dirty = true;
    c->dirty_next = c->loop->dirty;
    c->loop->dirty = c;
}

static void flush_dirty(struct grpc_loop *l)
{
    while (l->dirty) {
        struct grpc_conn *c = l->dirty;
        l->dirty = c->dirty_next;
        c->dirty = false;
        if (!c->dead)
            grpc_conn_flush(c);
        if (c->dead)
            grpc_conn_close(c);
    }
}

void grpc_loop_deadline(struct grpc_loop *l, uint64_t deadline_us)
{
    if (!l->next_deadline_us || deadline_us < l->next_deadline_us)
        l->next_deadline_us = deadline_us;
}

/* ---- accepting ---------------------------------------------------------- */

/* When a connection accepted at `now` reaches --grpc-max-connection-age:
 * the age within +-10% (gRFC A9, as grpc-go), so connections accepted
 * together, as after a rollout, do not all go away at once. */
static uint64_t conn_age(struct grpc_loop *l, uint64_t now)
{
    uint64_t age_us = (uint64_t)l->t->srv->cfg.grpc_max_conn_age * 1000000u;
    if (!age_us)
        return 0;
    l->rng ^= l->rng << 13; /* xorshift64: spread, not secrecy */
    l->rng ^= l->rng >> 7;
    l->rng ^= l->rng << 17;
    uint64_t span = age_us / 5; /* 20%: -10% .. +10% */
    return now + age_us - age_us / 10 + (span ? l->rng % (span + 1) : 0);
}

static void accept_all(struct grpc_loop *l)
{
    struct grpc_transport *t = l->t;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, another loop took it, or the listener is shut (drain) */
        /* Draining or not, a connection the kernel completed is served: its
         * request may already be on its way (see "Going away" above). */
        if (atomic_fetch_add(&t->nconns, 1) >= t->srv->cfg.max_connections) {
            atomic_fetch_sub(&t->nconns, 1);
            close(fd); /* --max-connections, like the HTTP listener: refused at once */
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* replies are small and latency-bound */
        struct grpc_conn *c = grpc_conn_new(l, fd);
        if (!c) {
            atomic_fetch_sub(&t->nconns, 1);
            close(fd);
            continue;
        }
        TILE_LIST_PUSH(l->conns, c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        c->events = EPOLLIN;
        if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
            c->dead = true;
        grpc_loop_mark_dirty(c); /* the server's SETTINGS */
        c->age_us = conn_age(l, c->last_active_us);
        if (l->quiesced) /* accepted during the drain: it goes away at once (else tick() sees to it) */
            grpc_conn_goaway_begin(c, c->last_active_us);
    }
}

/* ---- the listener's drain (see "Going away" above) ------------------------- */

static void wake_all(struct grpc_transport *t)
{
    for (int i = 0; i < t->nloops; i++)
        tiled_wakeup_poke(&t->loops[i].wake);
}

/* New SYNs are refused (RST) from now on: the client fails over at once. */
static void close_listener(struct grpc_transport *t)
{
    if (atomic_exchange(&t->listener_closed, true))
        return; /* another loop did */
    shutdown(t->lfd, SHUT_RDWR);
    wake_all(t); /* each loop takes it out of its epoll set */
}

/* Draining: the listener is shut once TILED_LISTEN_SETTLE_US passed and no
 * connection waits in its queue (none can enter it but a handshake still
 * under way), so no connection is reset; until then the loop wakes for it
 * (a connection waiting wakes a loop anyway: the listener is readable). */
static void listener_drain(struct grpc_loop *l, uint64_t now)
{
    struct grpc_transport *t = l->t;
    if (t->lfd < 0 || atomic_load(&t->listener_closed)) /* no listener: the fuzz driver */
        return;
    uint64_t settled = t->quiesce_at_us + TILED_LISTEN_SETTLE_US;
    if (now < settled)
        grpc_loop_deadline(l, settled);
    else if (tiled_listener_queued(t->lfd) == 0)
        close_listener(t);
}

/* ---- time ----------------------------------------------------------------- */

static void check_deadlines(struct grpc_loop *l, uint64_t now)
{
    l->next_deadline_us = 0;
    for (struct grpc_conn *c = l->conns; c; c = c->next) {
        for (struct grpc_call *call = c->calls, *next; call; call = next) {
            next = call->next; /* the check may end the call */
            grpc_call_check_deadline(call, now);
        }
    }
}

/* True while the server itself owes the connection bytes: a worker holds
 * one of its calls, or a reply waits for its stream's next chunk. */
static bool server_busy(const struct grpc_conn *c)
{
    for (const struct grpc_call *call = c->calls; call; call = call->next) {
        if (call->parked || call->deferred)
            return true;
    }
    return false;
}

/* Once a second: idle connections, drain and stop. */
static void tick(struct grpc_loop *l, uint64_t now)
{
    struct grpc_transport *t = l->t;
    uint64_t idle_us = (uint64_t)t->srv->cfg.idle_timeout * 1000000u;
    bool stopping = atomic_load(&t->stopping);
    uint64_t grace_us = (uint64_t)t->srv->cfg.grpc_max_conn_age_grace * 1000000u;
    if (atomic_load(&t->quiescing) && !l->quiesced) {
        l->quiesced = true; /* the listener stays: see "Going away" */
        for (struct grpc_conn *c = l->conns; c; c = c->next) {
            grpc_conn_goaway_begin(c, now);
            for (struct grpc_call *call = c->calls, *next; call; call = next) {
                next = call->next; /* a stream may end now */
                grpc_call_quiesce(call);
            }
        }
    }
    for (struct grpc_conn *c = l->conns; c; c = c->next) {
        /* --grpc-max-connection-age: the client goes away gracefully and
         * reconnects (through the balancer, maybe to another replica);
         * its calls have the grace, if one is set, to finish. */
        if (c->age_us && now >= c->age_us && c->goaway == GOAWAY_NONE) {
            grpc_conn_goaway_begin(c, now);
            c->grace_until_us = grace_us ? now + grace_us : 0;
        }
        if (c->grace_until_us && now >= c->grace_until_us)
            grpc_conn_goaway_final(c);
        grpc_conn_goaway_tick(c, now);
        /* No byte either way for --idle-timeout, and nothing owed by the
         * server: closed like an idle HTTP/1.1 keep-alive (clients reconnect
         * on their next call), and so is a client that stalls in the middle
         * of its request or stops reading a reply (its calls end as 499). */
        if (stopping || (now - c->last_active_us > idle_us && !server_busy(c)))
            grpc_conn_goaway_final(c);
    }
    l->next_tick_us = now + 1000000u;
}

static int wait_ms(const struct grpc_loop *l, uint64_t now)
{
    uint64_t until = l->next_tick_us;
    if (l->next_deadline_us && l->next_deadline_us < until)
        until = l->next_deadline_us;
    return until <= now ? 0 : (int)((until - now + 999) / 1000);
}

void grpc_loop_turn_end(struct grpc_loop *l)
{
    uint64_t now = tiled_now_us();
    if (l->next_deadline_us && now >= l->next_deadline_us)
        check_deadlines(l, now);
    /* Drain and stop are announced by a wake-up: act on them at once. */
    bool news = (atomic_load(&l->t->quiescing) && !l->quiesced) || atomic_load(&l->t->stopping);
    if (news || now >= l->next_tick_us)
        tick(l, now);
    if (l->quiesced)
        listener_drain(l, now);
    if (atomic_load(&l->t->listener_closed) && !l->unlistened) {
        l->unlistened = true; /* a shut listener would report EPOLLHUP at every wait */
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, l->t->lfd, NULL);
    }
    flush_dirty(l);
}

static void *loop_main(void *arg)
{
    struct grpc_loop *l = arg;
    struct epoll_event evs[64];
    for (;;) {
        uint64_t now = tiled_now_us();
        if (atomic_load(&l->t->stopping) && !l->conns && l->parked == 0)
            break;
        tiled_log_flush(); /* the access lines gathered, before sleeping, when there are enough */
        int n = epoll_wait(l->epfd, evs, 64, wait_ms(l, now));
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &listener_tag)
                accept_all(l);
            else if (tag == &wake_tag)
                grpc_loop_take_ready(l);
            else
                grpc_conn_io(tag, evs[i].events);
        }
        grpc_loop_turn_end(l);
    }
    tiled_log_flush_now(); /* as the HTTP loops end: this loop's last calls' lines, not left to the flusher */
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

static int listen_socket(struct grpc_transport *t, const struct tiled_config *cfg, struct tile_error *e)
{
    t->lfd = tiled_listener_open(cfg->host, (long long)cfg->grpc_port, "--grpc-port", 1024, e);
    if (t->lfd < 0)
        return -1;
    t->port = (uint16_t)tiled_listener_port(t->lfd);
    return 0;
}

static int loop_init(struct grpc_loop *l, struct grpc_transport *t, struct tile_error *e)
{
    l->t = t;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->next_tick_us = tiled_now_us() + 1000000u;
    l->rng = l->next_tick_us ^ ((uint64_t)(uintptr_t)l << 16) ^ 0x9e3779b97f4a7c15u;
    struct epoll_event lev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listener_tag};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &wake_tag};
    if (tiled_wakeup_init(&l->wake) < 0 || l->epfd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, t->lfd, &lev) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake.evfd, &wev) < 0)
        return tile_error_set(e, TILE_EIO, "cannot set up the gRPC event loop: %s", strerror(errno));
    return 0;
}

static void loop_free(struct grpc_loop *l)
{
    /* Calls a stream's last wake-up queued after their end (dead ones:
     * the loop had no connection left to take them for). */
    for (struct tiled_ready *list = l->wake.head, *n; (n = list);) {
        list = n->next;
        free(TILED_READY_OWNER(n, struct grpc_call, ready));
    }
    while (l->free_calls) {
        struct grpc_call *call = l->free_calls;
        l->free_calls = call->next;
        free(call);
    }
    if (l->epfd >= 0)
        close(l->epfd);
    tiled_wakeup_free(&l->wake);
}

static void transport_free(struct grpc_transport *t, int started)
{
    for (int i = 0; i < t->nloops; i++) {
        if (i < started)
            pthread_join(t->loops[i].thread, NULL);
        loop_free(&t->loops[i]);
    }
    free(t->loops);
    if (t->lfd >= 0)
        close(t->lfd);
    nghttp2_session_callbacks_del(t->callbacks);
    free(t);
}

int tiled_grpc_start(struct tiled_server *srv, struct tile_error *e)
{
    if (srv->cfg.grpc_port < 0)
        return 0;
    struct grpc_transport *t = calloc(1, sizeof(*t));
    if (!t)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the gRPC transport");
    t->srv = srv;
    t->io = &tiled_socket_system_io;
    t->lfd = -1;
    t->nloops = (int)(srv->cfg.http_threads > 0 ? srv->cfg.http_threads : 1);
    t->loops = calloc((size_t)t->nloops, sizeof(*t->loops));
    for (int i = 0; t->loops && i < t->nloops; i++)
        t->loops[i].epfd = t->loops[i].wake.evfd = -1;
    t->callbacks = grpc_conn_callbacks_new();
    if (!t->loops || !t->callbacks) {
        transport_free(t, 0);
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the gRPC event loops");
    }
    t->tls = srv->tls;
    if (listen_socket(t, &srv->cfg, e) < 0) {
        transport_free(t, 0);
        return -1;
    }
    int started = 0;
    for (; started < t->nloops; started++) {
        if (loop_init(&t->loops[started], t, e) < 0 ||
            pthread_create(&t->loops[started].thread, NULL, loop_main, &t->loops[started]) != 0)
            break;
    }
    if (started < t->nloops) {
        if (!e->text[0])
            tile_error_set(e, TILE_EIO, "cannot start the gRPC event-loop threads");
        atomic_store(&t->stopping, true);
        wake_all(t);
        transport_free(t, started);
        return -1;
    }
    srv->grpc = t;
    srv->grpc_port = t->port;
    return 0;
}

void tiled_grpc_quiesce(struct tiled_server *srv)
{
    struct grpc_transport *t = srv->grpc;
    if (!t)
        return;
    /* No new connection gets in; those the kernel completed are still
     * accepted (see "Going away"), and the loops announce the shutdown on
     * every connection (GOAWAY) at their next turn. */
    t->quiesce_at_us = tiled_now_us();
    atomic_store(&t->quiescing, true);
    if (tiled_listener_hold(t->lfd) < 0)
        close_listener(t); /* no filter: new connections must not come in the whole drain */
    wake_all(t);
}

bool tiled_grpc_drained(struct tiled_server *srv)
{
    struct grpc_transport *t = srv->grpc;
    /* The listener first (the loops shut it, listener_drain): a connection
     * in its queue is one to serve. */
    return !t || (atomic_load(&t->listener_closed) && atomic_load(&t->nconns) == 0);
}

void tiled_grpc_stop(struct tiled_server *srv)
{
    struct grpc_transport *t = srv->grpc;
    if (!t)
        return;
    atomic_store(&t->quiescing, true);
    atomic_store(&t->stopping, true);
    wake_all(t);
    transport_free(t, t->nloops);
    srv->grpc = NULL;
}

void tiled_grpc_metrics(struct tiled_metrics_out *o, void *server)
{
    /* cfg, not srv->grpc: set before any thread, and the figures are the
     * process's, so a scrape while the transport starts or stops is safe. */
    if (((const struct tiled_server *)server)->cfg.grpc_port < 0)
        return;
    uint64_t now, peak;
    grpc_unsent_figures(&now, &peak);
    tiled_metrics_family(o, "tiled_grpc_unsent_reply_bytes", "gauge",
                         "Bytes of gRPC replies held in memory that the clients' sockets have not taken.");
    tiled_metrics_sample(o, "tiled_grpc_unsent_reply_bytes", now);
    tiled_metrics_family(o, "tiled_grpc_conn_unsent_reply_peak_bytes", "gauge",
                         "The most bytes of unsent gRPC replies one connection has held at once since the start "
                         "(bounded by --max-grpc-conn-memory, or one reply alone when it is larger).");
    tiled_metrics_sample(o, "tiled_grpc_conn_unsent_reply_peak_bytes", peak);
}

const char *tiled_grpc_library(void)
{
    static char text[48];
    snprintf(text, sizeof(text), "nghttp2 %s", nghttp2_version(0)->version_str);
    return text;
}
