/* bodycache.c - response bodies reused across requests (see bodycache.h).
 *
 * DESIGN. Every body carries a 64-byte header in front of it naming its
 * cache and its capacity, so put() needs nothing but the pointer. Free
 * buffers sit in a short most-recently-returned-first list; get() takes
 * the smallest one that fits and is not more than twice too big (a huge
 * buffer kept for a small body would leave the next big request without
 * one). Capacities are rounded up (to 2 MiB above 2 MiB, where the buffer
 * is a mapping with transparent huge pages, to 64 KiB below) so that
 * bodies of nearly the same size share buffers.
 */
#include "bodycache.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "metricsink.h"
#include "tensor.h"

#define HEADER 64u
#define ROUND_BIG (2u << 20)
#define ROUND_SMALL (64u << 10)

struct body_header {
    struct tiled_bodycache *cache; /* NULL: a small body, plain malloc */
    uint64_t capacity;             /* usable bytes after the header */
    struct body_header *next;      /* in the free list */
};
_Static_assert(sizeof(struct body_header) <= HEADER, "the header fits its slot");

struct tiled_bodycache {
    pthread_mutex_t lock;
    uint64_t cap, kept;
    struct body_header *free_list; /* most recently returned first */
    uint64_t hits, misses;
};

struct tiled_bodycache *tiled_bodycache_new(uint64_t cap)
{
    struct tiled_bodycache *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->lock, NULL);
    c->cap = cap;
    return c;
}

static void release(struct body_header *h)
{
    tile_free_buffer(h, HEADER + h->capacity);
}

void tiled_bodycache_free(struct tiled_bodycache *c)
{
    if (!c)
        return;
    while (c->free_list) {
        struct body_header *h = c->free_list;
        c->free_list = h->next;
        release(h);
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
}

static void *body_of(struct body_header *h)
{
    return (char *)h + HEADER;
}

/* The capacity a new buffer for `n` bytes gets; 0 when it would overflow. */
static uint64_t rounded_capacity(uint64_t n)
{
    uint64_t unit = n + HEADER >= ROUND_BIG ? ROUND_BIG : ROUND_SMALL;
    if (n > UINT64_MAX - HEADER - unit)
        return 0;
    return (n + HEADER + unit - 1) / unit * unit - HEADER;
}

/* Unlinks and returns the best kept buffer for `n` bytes, or NULL. */
static struct body_header *take_fitting(struct tiled_bodycache *c, uint64_t n)
{
    struct body_header **best = NULL;
    for (struct body_header **p = &c->free_list; *p; p = &(*p)->next) {
        uint64_t have = (*p)->capacity;
        if (have >= n && have / 2 <= n + ROUND_BIG && (!best || have < (*best)->capacity))
            best = p;
    }
    if (!best)
        return NULL;
    struct body_header *h = *best;
    *best = h->next;
    c->kept -= h->capacity;
    return h;
}

void *tiled_bodycache_get(struct tiled_bodycache *c, uint64_t n)
{
    if (n < TILED_BODYCACHE_MIN || !c) {
        struct body_header *h = n <= UINT64_MAX - HEADER ? tile_alloc_buffer(HEADER + n) : NULL;
        if (!h)
            return NULL;
        *h = (struct body_header){NULL, n, NULL};
        return body_of(h);
    }
    pthread_mutex_lock(&c->lock);
    struct body_header *h = take_fitting(c, n);
    if (h)
        c->hits++;
    else
        c->misses++;
    pthread_mutex_unlock(&c->lock);
    if (h)
        return body_of(h);
    uint64_t capacity = rounded_capacity(n);
    h = capacity ? tile_alloc_buffer(HEADER + capacity) : NULL;
    if (!h)
        return NULL;
    *h = (struct body_header){c, capacity, NULL};
    return body_of(h);
}

/* The least recently returned kept buffer, unlinked; NULL if none. */
static struct body_header *take_oldest(struct tiled_bodycache *c)
{
    struct body_header **p = &c->free_list;
    if (!*p)
        return NULL;
    while ((*p)->next)
        p = &(*p)->next;
    struct body_header *h = *p;
    *p = NULL;
    c->kept -= h->capacity;
    return h;
}

void tiled_bodycache_put(void *body)
{
    if (!body)
        return;
    struct body_header *h = (struct body_header *)((char *)body - HEADER);
    struct tiled_bodycache *c = h->cache;
    if (!c || h->capacity > c->cap) {
        release(h);
        return;
    }
    /* Buffers to release are collected under the lock, released after it:
     * unmapping takes microseconds that other requests should not wait. */
    struct body_header *evicted = NULL;
    pthread_mutex_lock(&c->lock);
    while (c->kept + h->capacity > c->cap) {
        struct body_header *old = take_oldest(c);
        old->next = evicted;
        evicted = old;
    }
    h->next = c->free_list;
    c->free_list = h;
    c->kept += h->capacity;
    pthread_mutex_unlock(&c->lock);
    while (evicted) {
        struct body_header *next = evicted->next;
        release(evicted);
        evicted = next;
    }
}

void tiled_bodycache_stats(struct tiled_bodycache *c, struct tiled_bodycache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    *out = (struct tiled_bodycache_stats){c->hits, c->misses, c->kept};
    pthread_mutex_unlock(&c->lock);
}

void tiled_bodycache_metrics(struct tiled_metrics_out *o, void *cache)
{
    struct tiled_bodycache_stats bc;
    tiled_bodycache_stats(cache, &bc);
    tiled_metrics_family(o, "tiled_body_cache_hits_total", "counter",
                         "In-memory response bodies written into a reused buffer.");
    tiled_metrics_sample(o, "tiled_body_cache_hits_total", bc.hits);
    tiled_metrics_family(o, "tiled_body_cache_misses_total", "counter",
                         "In-memory response bodies that needed a new buffer.");
    tiled_metrics_sample(o, "tiled_body_cache_misses_total", bc.misses);
    tiled_metrics_family(o, "tiled_body_cache_bytes", "gauge",
                         "Bytes of free response buffers kept for reuse (--body-cache).");
    tiled_metrics_sample(o, "tiled_body_cache_bytes", bc.kept_bytes);
}
