/* wakeup.c - a loop's ready list and eventfd (wakeup.h). */
#include "wakeup.h"

#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

int tiled_wakeup_init(struct tiled_wakeup *w)
{
    *w = (struct tiled_wakeup){.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
    pthread_mutex_init(&w->lock, NULL);
    return w->evfd < 0 ? -1 : 0;
}

void tiled_wakeup_free(struct tiled_wakeup *w)
{
    if (w->evfd >= 0)
        close(w->evfd);
    w->evfd = -1;
    pthread_mutex_destroy(&w->lock);
}

static void wake(struct tiled_wakeup *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->evfd, &one, sizeof(one));
    (void)n; /* a full counter still wakes the loop */
}

void tiled_wakeup_push(struct tiled_wakeup *w, struct tiled_ready *n)
{
    pthread_mutex_lock(&w->lock);
    if (!n->queued) {
        n->queued = true;
        n->next = NULL;
        if (w->tail)
            w->tail->next = n;
        else
            w->head = n;
        w->tail = n;
    }
    bool first = !w->pending;
    w->pending = true;
    pthread_mutex_unlock(&w->lock);
    if (first)
        wake(w);
}

void tiled_wakeup_poke(struct tiled_wakeup *w)
{
    wake(w);
}

struct tiled_ready *tiled_wakeup_take(struct tiled_wakeup *w)
{
    uint64_t v;
    ssize_t n = read(w->evfd, &v, sizeof(v));
    (void)n;
    pthread_mutex_lock(&w->lock);
    struct tiled_ready *list = w->head;
    w->head = w->tail = NULL;
    w->pending = false;
    pthread_mutex_unlock(&w->lock);
    return list;
}

struct tiled_ready *tiled_wakeup_next(struct tiled_wakeup *w, struct tiled_ready **list, bool *gone)
{
    struct tiled_ready *n = *list;
    if (!n)
        return NULL;
    pthread_mutex_lock(&w->lock);
    *list = n->next;
    n->queued = false; /* a push from now on queues it again */
    *gone = n->gone;
    pthread_mutex_unlock(&w->lock);
    return n;
}

bool tiled_wakeup_forget(struct tiled_wakeup *w, struct tiled_ready *n)
{
    pthread_mutex_lock(&w->lock);
    n->gone = true;
    bool queued = n->queued;
    pthread_mutex_unlock(&w->lock);
    return queued;
}

bool tiled_wakeup_queued(struct tiled_wakeup *w, const struct tiled_ready *n)
{
    pthread_mutex_lock(&w->lock);
    bool queued = n->queued;
    pthread_mutex_unlock(&w->lock);
    return queued;
}

bool tiled_wakeup_pending(struct tiled_wakeup *w)
{
    pthread_mutex_lock(&w->lock);
    bool p = w->pending || w->head;
    pthread_mutex_unlock(&w->lock);
    return p;
}
