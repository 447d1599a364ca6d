/* headwatch.c - deadlines for receiving request heads and bodies (see
 * headwatch.h).
 *
 * libmicrohttpd's connection timeout is an idle timeout: every byte that
 * arrives restarts it, so a client that sends its request head one byte a
 * second holds a connection, and a slot under --max-connections, for as
 * long as it likes (the "slowloris" attack). This module gives each request
 * head a deadline instead, counted from the moment the connection is ready
 * for it: when the connection opens, and again when a request on it ends.
 * Between requests a kept-alive client may rightly stay silent for up to
 * the idle timeout before it starts its next head, so there the deadline is
 * the idle timeout plus the header timeout: a silent connection is closed
 * by libmicrohttpd's idle timeout first, and only a head that trickles is
 * cut (and counted) here.
 *
 * A body trickled the same way would hold the slot, and up to --max-body
 * of buffered memory, as long. So from the end of its head a request that
 * reads a body has the header timeout plus a second per 500 bytes received
 * so far (recv_deadline.h, the rule gRPC calls follow too): a steady sender of
 * any size is never late. Each piece is checked as it comes, in the access
 * handler (tiled_headwatch_body_piece): a late one is refused there, which
 * answers a client that keeps trickling with a 408. The sweeper cuts only a
 * body that has stopped coming: late, and nothing for BODY_STALL_US, so a
 * trickler's next piece gets the 408 rather than a bare cut. The pieces'
 * count and time are atomics the handler stores without the lock: one piece
 * usually carries a whole small body, and that path stays a clock read and
 * two stores. Every time here is the coarse clock's (clock.h): the
 * deadlines are seconds, and it is read several times per request. Once the body is complete the request is not watched
 * until it ends: a worker's long tile or a slowly read reply is not a slow client.
 *
 * Each connection is watched from libmicrohttpd's "connection started"
 * notification to its "closed" one. A sweeper thread wakes a few times a
 * second and shuts down the socket of any connection whose head or body is
 * late; libmicrohttpd then sees the connection end, as if the client had
 * gone, and cleans it up on its own thread. The sweeper only calls
 * shutdown(), never close(), and only under the same lock that the
 * "closed" notification takes before libmicrohttpd closes the descriptor,
 * so it can never touch a descriptor number that has been reused.
 */
#include "headwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "clock.h"
#include "list.h"
#include "recv_deadline.h"

/* How often the sweeper looks, in milliseconds: a late head is cut at most
 * this long after its deadline. */
#define SWEEP_MS 250
/* A late body is cut once no piece has come for this long: a client still
 * sending is answered 408 on its next piece instead (see above). */
#define BODY_STALL_US 1000000u

struct head_watch {
    MHD_socket fd;
    uint64_t armed_at_us; /* when the connection became ready for a head */
    bool armed;           /* waiting for a head */
    bool kept_alive;      /* a request on it has ended: the idle gap is allowed */
    bool cut;             /* already shut down */
    /* The body phase: set and cleared on the connection's thread, under the
     * lock; the piece counters are written there without it. */
    bool in_body;         /* the head is in and its body is being read */
    bool body_cut;        /* the sweeper cut this request's body as late */
    uint64_t body_since_us;           /* when the head was done */
    atomic_uint_fast64_t body_bytes;  /* bytes of body so far */
    atomic_uint_fast64_t body_last_us; /* when the last piece came */
    struct head_watch *prev, *next;
};

struct tiled_headwatch {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t sweeper;
    bool stopping;
    uint64_t timeout_s;
    uint64_t timeout_us;      /* for the first head */
    uint64_t next_timeout_us; /* for later heads: idle gap plus head */
    struct head_watch *head; /* every open connection */
    atomic_uint_fast64_t *head_cuts, *body_late; /* the owner's counters */
};

static void unlink_watch(struct tiled_headwatch *hw, struct head_watch *w)
{
    TILE_LIST_UNLINK(hw->head, w);
}

static uint64_t body_deadline_us(const struct tiled_headwatch *hw, struct head_watch *w)
{
    return tiled_recv_deadline_us(w->body_since_us, hw->timeout_s,
                                  atomic_load_explicit(&w->body_bytes, memory_order_relaxed));
}

static bool head_late(const struct tiled_headwatch *hw, const struct head_watch *w, uint64_t now)
{
    return w->armed && now - w->armed_at_us >= (w->kept_alive ? hw->next_timeout_us : hw->timeout_us);
}

/* Late, and stalled: no piece for BODY_STALL_US. */
static bool body_stalled(const struct tiled_headwatch *hw, struct head_watch *w, uint64_t now)
{
    return w->in_body && now >= body_deadline_us(hw, w) &&
           now - atomic_load_explicit(&w->body_last_us, memory_order_relaxed) >= BODY_STALL_US;
}

static void cut(struct head_watch *w, atomic_uint_fast64_t *counter)
{
    w->cut = true;
    shutdown(w->fd, SHUT_RDWR);
    atomic_fetch_add(counter, 1);
}

static void sweep(struct tiled_headwatch *hw)
{
    uint64_t now = tiled_coarse_us();
    for (struct head_watch *w = hw->head; w; w = w->next) {
        if (w->cut)
            continue;
        if (head_late(hw, w, now)) {
            cut(w, hw->head_cuts);
        } else if (body_stalled(hw, w, now)) {
            w->body_cut = true; /* in_body stays: only the connection's thread writes it */
            cut(w, hw->body_late);
        }
    }
}

static void *sweeper_main(void *arg)
{
    struct tiled_headwatch *hw = arg;
    pthread_mutex_lock(&hw->lock);
    while (!hw->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until); /* the cond's clock: immune to clock steps */
        until.tv_nsec += SWEEP_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&hw->wake, &hw->lock, &until) == ETIMEDOUT)
            sweep(hw);
    }
    pthread_mutex_unlock(&hw->lock);
    return NULL;
}

struct tiled_headwatch *tiled_headwatch_start(unsigned timeout_s, unsigned idle_timeout_s,
                                              atomic_uint_fast64_t *head_cuts, atomic_uint_fast64_t *body_late,
                                              struct tile_error *e)
{
    if (timeout_s == 0)
        return NULL; /* off: every hook below accepts NULL */
    struct tiled_headwatch *hw = calloc(1, sizeof(*hw));
    if (!hw) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the header-timeout watcher");
        return NULL;
    }
    hw->head_cuts = head_cuts;
    hw->body_late = body_late;
    hw->timeout_s = timeout_s;
    hw->timeout_us = (uint64_t)timeout_s * 1000000u;
    hw->next_timeout_us = hw->timeout_us + (uint64_t)idle_timeout_s * 1000000u;
    pthread_mutex_init(&hw->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&hw->wake, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&hw->sweeper, NULL, sweeper_main, hw) != 0) {
        tile_error_set(e, TILE_ENOMEM, "cannot start the header-timeout thread");
        pthread_cond_destroy(&hw->wake);
        pthread_mutex_destroy(&hw->lock);
        free(hw);
        return NULL;
    }
    return hw;
}

void tiled_headwatch_stop(struct tiled_headwatch *hw)
{
    if (!hw)
        return;
    pthread_mutex_lock(&hw->lock);
    hw->stopping = true;
    pthread_cond_signal(&hw->wake);
    pthread_mutex_unlock(&hw->lock);
    pthread_join(hw->sweeper, NULL);
    /* Connections still listed were closed without a notification (the
     * daemon is already stopped): their descriptors are gone, free the rest. */
    for (struct head_watch *w = hw->head, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    pthread_cond_destroy(&hw->wake);
    pthread_mutex_destroy(&hw->lock);
    free(hw);
}

void tiled_headwatch_notify(void *cls, struct MHD_Connection *c, void **slot,
                            enum MHD_ConnectionNotificationCode code)
{
    struct tiled_headwatch *hw = cls;
    if (!hw)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct head_watch *w = ci ? calloc(1, sizeof(*w)) : NULL;
        if (!w) /* unwatched: the idle timeout still applies */
            return;
        w->fd = ci->connect_fd;
        w->armed_at_us = tiled_coarse_us();
        w->armed = true;
        pthread_mutex_lock(&hw->lock);
        TILE_LIST_PUSH(hw->head, w);
        pthread_mutex_unlock(&hw->lock);
        *slot = w;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *slot) {
        struct head_watch *w = *slot;
        pthread_mutex_lock(&hw->lock);
        unlink_watch(hw, w);
        pthread_mutex_unlock(&hw->lock);
        free(w);
        *slot = NULL;
    }
}

static struct head_watch *watch_of(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    if (!hw)
        return NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    void **slot = ci ? ci->socket_context : NULL; /* the connection's state, the watch its first member */
    return slot ? *slot : NULL;
}

/* Sets the armed state of connection c's watch, if it has one, and ends
 * its body phase; returns whether the connection has already been cut (for
 * a late head when arming is false, for a late body when it is true). */
static bool set_armed(struct tiled_headwatch *hw, struct MHD_Connection *c, bool armed)
{
    struct head_watch *w = watch_of(hw, c);
    if (!w)
        return false;
    pthread_mutex_lock(&hw->lock);
    w->armed = armed;
    w->armed_at_us = tiled_coarse_us();
    w->kept_alive |= armed;
    w->in_body = false;
    bool cut = armed ? w->body_cut : w->cut;
    w->body_cut = false;
    pthread_mutex_unlock(&hw->lock);
    return cut;
}

bool tiled_headwatch_head_done(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    return !set_armed(hw, c, false);
}

void tiled_headwatch_body_start(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    struct head_watch *w = watch_of(hw, c);
    if (!w)
        return;
    uint64_t now = tiled_coarse_us();
    pthread_mutex_lock(&hw->lock);
    w->body_since_us = now;
    atomic_store_explicit(&w->body_bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&w->body_last_us, now, memory_order_relaxed);
    w->in_body = true;
    pthread_mutex_unlock(&hw->lock);
}

bool tiled_headwatch_body_piece(struct tiled_headwatch *hw, struct MHD_Connection *c, size_t n)
{
    struct head_watch *w = watch_of(hw, c);
    if (!w || !w->in_body) /* in_body is only written on this thread */
        return true;
    uint64_t now = tiled_coarse_us();
    if (now < body_deadline_us(hw, w)) {
        /* Only this thread writes them: a load and a store, not a locked add. */
        uint64_t bytes = atomic_load_explicit(&w->body_bytes, memory_order_relaxed);
        atomic_store_explicit(&w->body_bytes, bytes + n, memory_order_relaxed);
        atomic_store_explicit(&w->body_last_us, now, memory_order_relaxed);
        return true;
    }
    pthread_mutex_lock(&hw->lock);
    w->in_body = false;
    if (!w->cut) /* else the sweeper got there first, and counted it */
        atomic_fetch_add(hw->body_late, 1);
    pthread_mutex_unlock(&hw->lock);
    return false;
}

void tiled_headwatch_body_done(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    struct head_watch *w = watch_of(hw, c);
    if (!w || !w->in_body)
        return;
    pthread_mutex_lock(&hw->lock);
    w->in_body = false;
    pthread_mutex_unlock(&hw->lock);
}

bool tiled_headwatch_request_done(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    return set_armed(hw, c, true);
}
