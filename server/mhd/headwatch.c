/* headwatch.c - a deadline for request heads (see headwatch.h).
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
 * Each connection is watched from libmicrohttpd's "connection started"
 * notification to its "closed" one. A sweeper thread wakes a few times a
 * second and shuts down the socket of any connection whose head is late;
 * libmicrohttpd then sees the connection end, as if the client had gone,
 * and cleans it up on its own thread. The sweeper only calls shutdown(),
 * never close(), and only under the same lock that the "closed"
 * notification takes before libmicrohttpd closes the descriptor, so it can
 * never touch a descriptor number that has been reused.
 */
#include "headwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "base.h"

/* How often the sweeper looks, in milliseconds: a late head is cut at most
 * this long after its deadline. */
#define SWEEP_MS 250

struct head_watch {
    MHD_socket fd;
    uint64_t armed_at_us; /* when the connection became ready for a head */
    bool armed;           /* waiting for a head */
    bool kept_alive;      /* a request on it has ended: the idle gap is allowed */
    bool cut;             /* already shut down */
    struct head_watch *prev, *next;
};

struct tiled_headwatch {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t sweeper;
    bool stopping;
    uint64_t timeout_us;      /* for the first head */
    uint64_t next_timeout_us; /* for later heads: idle gap plus head */
    struct head_watch *head; /* every open connection */
    atomic_uint_fast64_t *cut_total; /* the owner's counter */
};

static void unlink_watch(struct tiled_headwatch *hw, struct head_watch *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        hw->head = w->next;
    if (w->next)
        w->next->prev = w->prev;
}

static void sweep(struct tiled_headwatch *hw)
{
    uint64_t now = tiled_now_us();
    for (struct head_watch *w = hw->head; w; w = w->next) {
        if (!w->armed || w->cut || now - w->armed_at_us < (w->kept_alive ? hw->next_timeout_us : hw->timeout_us))
            continue;
        w->cut = true;
        shutdown(w->fd, SHUT_RDWR);
        atomic_fetch_add(hw->cut_total, 1);
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
                                              atomic_uint_fast64_t *cut_total, struct tile_error *e)
{
    if (timeout_s == 0)
        return NULL; /* off: every hook below accepts NULL */
    struct tiled_headwatch *hw = calloc(1, sizeof(*hw));
    if (!hw) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the header-timeout watcher");
        return NULL;
    }
    hw->cut_total = cut_total;
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

void tiled_headwatch_notify(void *cls, struct MHD_Connection *c, void **socket_context,
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
        w->armed_at_us = tiled_now_us();
        w->armed = true;
        pthread_mutex_lock(&hw->lock);
        w->next = hw->head;
        if (hw->head)
            hw->head->prev = w;
        hw->head = w;
        pthread_mutex_unlock(&hw->lock);
        *socket_context = w;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        struct head_watch *w = *socket_context;
        pthread_mutex_lock(&hw->lock);
        unlink_watch(hw, w);
        pthread_mutex_unlock(&hw->lock);
        free(w);
        *socket_context = NULL;
    }
}

/* Sets the armed state of connection c's watch, if it has one; returns
 * whether the connection has already been cut. */
static bool set_armed(struct tiled_headwatch *hw, struct MHD_Connection *c, bool armed)
{
    if (!hw)
        return false;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct head_watch *w = ci ? ci->socket_context : NULL;
    if (!w)
        return false;
    pthread_mutex_lock(&hw->lock);
    w->armed = armed;
    w->armed_at_us = tiled_now_us();
    w->kept_alive |= armed;
    bool cut = w->cut;
    pthread_mutex_unlock(&hw->lock);
    return cut;
}

bool tiled_headwatch_head_done(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    return !set_armed(hw, c, false);
}

void tiled_headwatch_request_done(struct tiled_headwatch *hw, struct MHD_Connection *c)
{
    set_armed(hw, c, true);
}
