/* wakeup.h - how other threads hand work back to an event loop: a ready
 * list and the eventfd the loop's epoll watches. One for both transports:
 * an HTTP connection and a gRPC call each embed a struct tiled_ready, and
 * a worker (or a stream's producer) that finished with one pushes it; the
 * loop takes the list when the eventfd wakes it.
 *
 * Ownership: the nodes are their owners'; the list only links them. A loop
 * that lets go of an owner while a push may still come (a producer racing
 * the owner's end) marks the node gone (tiled_wakeup_forget) and frees the
 * owner only once the node is off the list: tiled_wakeup_next says gone
 * for it, or tiled_wakeup_queued says it is not queued. Every field is
 * under `lock`; the eventfd is written once per batch of pushes (`pending`),
 * and a full counter still wakes the loop.
 */
#ifndef TILED_WAKEUP_H
#define TILED_WAKEUP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct tiled_ready {
    struct tiled_ready *next;
    bool queued; /* on the list */
    bool gone;   /* let go by its loop: taken off the list, not handed back */
};

/* The struct a node is embedded in. */
#define TILED_READY_OWNER(node, type, member) ((type *)(void *)((char *)(node) - offsetof(type, member)))

struct tiled_wakeup {
    pthread_mutex_t lock;
    int evfd;
    bool pending; /* the eventfd was written since the last take */
    struct tiled_ready *head, *tail;
};

/* 0, or -1 with errno set (no eventfd). */
int tiled_wakeup_init(struct tiled_wakeup *w);
/* Closes the eventfd; the nodes still listed are their owners' to free. */
void tiled_wakeup_free(struct tiled_wakeup *w);
/* Any thread: queues `n` (once, however often pushed before the loop
 * takes it) and wakes the loop. */
void tiled_wakeup_push(struct tiled_wakeup *w, struct tiled_ready *n);
/* Any thread: wakes the loop with nothing queued (a drain, a stop). */
void tiled_wakeup_poke(struct tiled_wakeup *w);
/* The loop: empties the eventfd and detaches the list, to walk with
 * tiled_wakeup_next. */
struct tiled_ready *tiled_wakeup_take(struct tiled_wakeup *w);
/* The loop: the next node of a taken list (NULL at its end), off the list
 * now; *gone when its loop let go of it (then it is only to be freed). */
struct tiled_ready *tiled_wakeup_next(struct tiled_wakeup *w, struct tiled_ready **list, bool *gone);
/* The loop: marks `n` gone; true when it is still queued (its owner is
 * freed when the list lets go of it). */
bool tiled_wakeup_forget(struct tiled_wakeup *w, struct tiled_ready *n);
bool tiled_wakeup_queued(struct tiled_wakeup *w, const struct tiled_ready *n);
/* Whether a wake-up is waiting for the loop (pushed or poked, not taken). */
bool tiled_wakeup_pending(struct tiled_wakeup *w);

#endif
