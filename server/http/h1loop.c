/* h1loop.c - the HTTP/1.1 transport's event-loop threads (see h1serve.h,
 * http.h).
 *
 * DESIGN. The transport is the project's own: --http-threads loops, each
 * with its own epoll set, share one listening socket (EPOLLEXCLUSIVE: one
 * loop is woken per connection) and own the connections they accept, so
 * a connection is only ever touched by one thread, without a lock on the
 * hot path. h1conn.c reads each connection's bytes through the strict
 * framer (h1wire.h), parses the heads it accepts and hands the requests
 * to the service; h1reply.c writes the replies. Nothing reads a byte the
 * framer has not judged, and there is no library between the socket and
 * the framer to read a message another way (docs/architecture.md, "The
 * HTTP library, and why the framer stands in front of it").
 *
 * A worker that finishes a request, or a stream producer with bytes
 * ready, cannot touch the connection: http_conn_resume() puts it on its
 * loop's ready list under a small lock and writes the loop's eventfd once
 * per batch; the loop then goes on with it.
 *
 * Time: each loop wakes at least every TICK_US to check its connections'
 * deadlines (heads, bodies, idle connections, lingering closes) and the
 * drain. Before it waits for events a loop writes the access lines
 * gathered (log.c) once there are 16 KiB of them, about fifty requests'
 * in one write(2); fewer are written by the log's flusher at most
 * --log-flush-ms after the first.
 *
 * The drain (listener.h): new connections' SYNs are dropped, the loops go
 * on accepting what the kernel completed and serve it with Connection:
 * close, and the listener is shut once its queue is empty and the
 * handshakes under way have had time to end. Until then, and while a
 * connection accepted just before the drain has not had its first request
 * read, the drain is not over (tiled_http_drained).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h1serve.h"

#include "clock.h"
#include "list.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "server.h"

/* How often a loop checks deadlines: a late head is cut at most this long
 * after its deadline. */
#define TICK_US (250u * 1000u)
/* A connection opened this long before the drain began without a request
 * is idle: the drain does not wait for it (one opened since, or just
 * before, came from the listener's queue, its request sent). */
#define FRESH_IDLE_US (1000u * 1000u)

/* See listener_drain. */
#define HELD_QUEUE_STUCK_US (200u * 1000u)

static char listener_tag, wake_tag; /* epoll data of the two non-connection fds */

/* ---- wake-ups ------------------------------------------------------------------ */

void http_conn_suspend(void *conn)
{
    struct http_conn *c = conn;
    c->waiting = true; /* on the loop's thread, inside dispatch or a stream's read */
}

void http_conn_resume(void *conn)
{
    struct http_conn *c = conn;
    tiled_wakeup_push(&c->loop->wake, &c->ready);
}

void http_loop_take_ready(struct http_loop *l)
{
    struct tiled_ready *list = tiled_wakeup_take(&l->wake), *n;
    bool gone;
    while ((n = tiled_wakeup_next(&l->wake, &list, &gone))) {
        if (!gone) /* a released one is freed at the turn's end */
            http_conn_resumed(TILED_READY_OWNER(n, struct http_conn, ready));
    }
}

void http_loop_release(struct http_conn *c)
{
    struct http_loop *l = c->loop;
    TILE_LIST_UNLINK(l->conns, c);
    tiled_wakeup_forget(&l->wake, &c->ready); /* a resume still queued for it is dropped */
    TILE_LIST_PUSH(l->closed, c);
}

/* Frees the connections released this turn, but one a resume is still
 * queued for (a stream's producer that woke it just before its end): the
 * ready list lets go of it first. `all` at the loop's end, when no thread
 * is left to resume anything. */
static void free_closed(struct http_loop *l, bool all)
{
    for (struct http_conn *c = l->closed, *next; c; c = next) {
        next = c->next;
        if (!all && tiled_wakeup_queued(&l->wake, &c->ready))
            continue;
        TILE_LIST_UNLINK(l->closed, c);
        http_conn_free(c);
    }
}

void http_loop_set_events(struct http_conn *c, uint32_t events)
{
    if (c->events == events || c->fd < 0)
        return;
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(c->loop->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
}

/* ---- fresh connections (the drain waits for recent ones) ------------------------------- */

void http_conn_unfresh(struct http_conn *c)
{
    if (!c->fresh)
        return;
    struct http_transport *t = c->loop->t;
    pthread_mutex_lock(&t->fresh_lock);
    if (c->fresh_prev)
        c->fresh_prev->fresh_next = c->fresh_next;
    else
        t->fresh = c->fresh_next;
    if (c->fresh_next)
        c->fresh_next->fresh_prev = c->fresh_prev;
    c->fresh = false;
    pthread_mutex_unlock(&t->fresh_lock);
}

static void fresh_add(struct http_transport *t, struct http_conn *c)
{
    pthread_mutex_lock(&t->fresh_lock);
    c->fresh_prev = NULL;
    c->fresh_next = t->fresh;
    if (t->fresh)
        t->fresh->fresh_prev = c;
    t->fresh = c;
    pthread_mutex_unlock(&t->fresh_lock);
}

/* Whether a connection opened from FRESH_IDLE_US before the drain on has
 * no request in the service yet. */
static bool fresh_waiting(struct http_transport *t)
{
    bool waiting = false;
    pthread_mutex_lock(&t->fresh_lock);
    for (struct http_conn *c = t->fresh; c && !waiting; c = c->fresh_next)
        waiting = c->opened_us + FRESH_IDLE_US > t->quiesce_at_us;
    pthread_mutex_unlock(&t->fresh_lock);
    return waiting;
}

/* ---- accepting ------------------------------------------------------------------------- */

bool http_loop_adopt(struct http_loop *l, int fd)
{
    struct http_transport *t = l->t;
    /* Draining or not, a connection the kernel completed is served
     * (with Connection: close): its request may be on its way. */
    if (atomic_fetch_add(&t->nconns, 1) >= (unsigned)t->srv->cfg.max_connections) {
        atomic_fetch_sub(&t->nconns, 1);
        return false; /* --max-connections: refused at once */
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* replies are small and latency-bound */
    struct http_conn *c = http_conn_new(l, fd);
    /* A TLS connection's handshake waits for the client's hello too. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (!c || epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        atomic_fetch_sub(&t->nconns, 1);
        if (c)
            http_conn_discard(c);
        return false;
    }
    c->events = EPOLLIN;
    TILE_LIST_PUSH(l->conns, c);
    fresh_add(t, c);
    tiled_metrics_connection(TILED_TRANSPORT_HTTP, 1);
    return true;
}

static void accept_all(struct http_loop *l)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(l->t->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, another loop took it, or the listener is shut (drain) */
        if (!http_loop_adopt(l, fd))
            close(fd);
    }
}

/* ---- the listener's drain ---------------------------------------------------------------- */

static void wake_all(struct http_transport *t)
{
    for (int i = 0; i < t->nloops; i++)
        tiled_wakeup_poke(&t->loops[i].wake);
}

/* New SYNs are refused (RST) from now on: the client fails over at once. */
static void close_listener(struct http_transport *t)
{
    if (atomic_exchange(&t->listener_closed, true))
        return; /* another loop did */
    shutdown(t->lfd, SHUT_RDWR);
    wake_all(t); /* each loop takes it out of its epoll set */
}

/* Draining: the listener is shut once TILED_LISTEN_SETTLE_US passed and no
 * connection waits in its queue. A queue that cannot move, because every
 * connection slot is still held (kept alive and idle) HELD_QUEUE_STUCK_US
 * into the drain, is shut all the same: the drain would wait it out. */
static void listener_drain(struct http_loop *l, uint64_t now)
{
    struct http_transport *t = l->t;
    if (atomic_load(&t->listener_closed))
        return;
    uint64_t settled = t->quiesce_at_us + TILED_LISTEN_SETTLE_US;
    bool stuck = atomic_load(&t->nconns) >= (unsigned)t->srv->cfg.max_connections &&
                 now >= t->quiesce_at_us + HELD_QUEUE_STUCK_US;
    if (now >= settled && (stuck || tiled_listener_queued(t->lfd) == 0))
        close_listener(t);
}

/* ---- time ------------------------------------------------------------------------------------ */

static void tick(struct http_loop *l, uint64_t now)
{
    struct http_transport *t = l->t;
    bool stopping = atomic_load(&t->stopping);
    uint64_t coarse = tiled_coarse_us();
    for (struct http_conn *c = l->conns, *next; c; c = next) {
        next = c->next; /* the check may close it */
        if (stopping)
            http_conn_abort(c);
        else
            http_conn_tick(c, coarse);
    }
    l->next_tick_us = now + TICK_US;
}

void http_loop_turn_end(struct http_loop *l)
{
    struct http_transport *t = l->t;
    uint64_t now = l->turn_end_us = tiled_now_us();
    bool news = (atomic_load(&t->quiescing) && !l->quiesced) || atomic_load(&t->stopping);
    if (atomic_load(&t->quiescing))
        l->quiesced = true;
    if (news || now >= l->next_tick_us)
        tick(l, now);
    if (l->quiesced)
        listener_drain(l, now);
    if (atomic_load(&t->listener_closed) && !l->unlistened) {
        l->unlistened = true; /* a shut listener would report EPOLLHUP at every wait */
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, t->lfd, NULL);
    }
    free_closed(l, false);
}

static int wait_ms(const struct http_loop *l)
{
    uint64_t now = l->turn_end_us; /* read just before: only the access lines' write came since */
    if (l->quiesced && !atomic_load(&l->t->listener_closed))
        return 1; /* the listener's drain is watched closely */
    return l->next_tick_us <= now ? 0 : (int)((l->next_tick_us - now + 999) / 1000);
}

static void *loop_main(void *arg)
{
    struct http_loop *l = arg;
    struct epoll_event evs[64];
    for (;;) {
        if (atomic_load(&l->t->stopping) && !l->conns)
            break;
        tiled_log_flush(); /* the access lines gathered, before sleeping, when there are enough */
        int n = epoll_wait(l->epfd, evs, 64, wait_ms(l));
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &listener_tag)
                accept_all(l);
            else if (tag == &wake_tag)
                http_loop_take_ready(l);
            else
                http_conn_io(tag, evs[i].events);
        }
        http_loop_turn_end(l);
    }
    tiled_log_flush_now();
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

static int loop_init(struct http_loop *l, struct http_transport *t, struct tile_error *e)
{
    l->t = t;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    l->turn_end_us = tiled_now_us();
    l->next_tick_us = l->turn_end_us + TICK_US;
    struct epoll_event lev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = &listener_tag};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &wake_tag};
    if (tiled_wakeup_init(&l->wake) < 0 || l->epfd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, t->lfd, &lev) < 0 ||
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->wake.evfd, &wev) < 0)
        return tile_error_set(e, TILE_EIO, "cannot set up the HTTP event loop: %s", strerror(errno));
    return 0;
}

static void loop_free(struct http_loop *l)
{
    free_closed(l, true);
    if (l->epfd >= 0)
        close(l->epfd);
    tiled_wakeup_free(&l->wake);
}

static void transport_free(struct http_transport *t, int started)
{
    for (int i = 0; i < t->nloops; i++) {
        if (i < started)
            pthread_join(t->loops[i].thread, NULL);
        loop_free(&t->loops[i]);
    }
    free(t->loops);
    if (t->lfd >= 0)
        close(t->lfd);
    pthread_mutex_destroy(&t->fresh_lock);
    free(t);
}

struct http_transport *http_transport_start(struct tiled_server *srv, struct tile_error *e)
{
    struct http_transport *t = calloc(1, sizeof(*t));
    if (!t) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the HTTP transport");
        return NULL;
    }
    t->srv = srv;
    t->io = &tiled_socket_system_io;
    t->lfd = -1;
    if (srv->tls && srv->cfg.hsts_max_age > 0)
        snprintf(t->hsts, sizeof(t->hsts), "max-age=%lld", (long long)srv->cfg.hsts_max_age);
    pthread_mutex_init(&t->fresh_lock, NULL);
    t->nloops = (int)(srv->cfg.http_threads > 0 ? srv->cfg.http_threads : 1);
    t->loops = calloc((size_t)t->nloops, sizeof(*t->loops));
    if (!t->loops) {
        transport_free(t, 0);
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the HTTP event loops");
        return NULL;
    }
    for (int i = 0; i < t->nloops; i++)
        t->loops[i].epfd = t->loops[i].wake.evfd = -1;
    /* The listener is tiled's (listener.h: names, IPv6, errors that say why). */
    t->lfd = tiled_listener_open(srv->cfg.host, (long long)srv->cfg.port, "--port", 1024, e);
    if (t->lfd < 0) {
        transport_free(t, 0);
        return NULL;
    }
    int started = 0;
    for (; started < t->nloops; started++) {
        if (loop_init(&t->loops[started], t, e) < 0 ||
            pthread_create(&t->loops[started].thread, NULL, loop_main, &t->loops[started]) != 0)
            break;
    }
    if (started < t->nloops) {
        if (!e->text[0])
            tile_error_set(e, TILE_EIO, "cannot start the HTTP event-loop threads");
        atomic_store(&t->stopping, true);
        wake_all(t);
        transport_free(t, started);
        return NULL;
    }
    return t;
}

void http_transport_quiesce(struct http_transport *t)
{
    t->quiesce_at_us = tiled_now_us();
    atomic_store(&t->quiescing, true);
    if (tiled_listener_hold(t->lfd) < 0)
        close_listener(t); /* no filter: new connections must not come in the whole drain */
    wake_all(t);
}

bool http_transport_drained(struct http_transport *t)
{
    return atomic_load(&t->listener_closed) && !fresh_waiting(t);
}

void http_transport_stop(struct http_transport *t)
{
    atomic_store(&t->quiescing, true);
    atomic_store(&t->stopping, true);
    wake_all(t);
    transport_free(t, t->nloops);
}

uint16_t http_transport_port(const struct http_transport *t)
{
    return (uint16_t)tiled_listener_port(t->lfd);
}
