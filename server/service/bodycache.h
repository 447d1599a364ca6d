/* bodycache.h - response bodies reused across requests, like an arena.
 *
 * A materialised output is written into freshly allocated memory on every
 * request unless something keeps that memory: the kernel then runs at the
 * speed of first-touch page faults (~2 GB/s with 4 KiB pages) instead of
 * the memory's (20-50 GB/s). This cache keeps the buffers of answered
 * bodies, up to a total of `cap` bytes, and hands them to later requests,
 * so a daemon under a steady load writes into memory that is already
 * mapped and, for outputs that fit the LLC, already cached.
 *
 * Bounded: buffers larger than `cap` are never kept, and when keeping one
 * would exceed `cap` the least recently returned ones are released first.
 * Bodies under TILED_BODYCACHE_MIN bytes are plain malloc (glibc reuses
 * those itself) and are never kept.
 *
 * Thread-safe (one mutex; get and put are O(kept buffers), a handful).
 * tiled_bodycache_put takes only the body, so it can be given to the HTTP
 * library as the function that frees a response buffer.
 */
#ifndef TILED_BODYCACHE_H
#define TILED_BODYCACHE_H

#include <stdint.h>

#define TILED_BODYCACHE_MIN (64u << 10)

struct tiled_bodycache;

/* A cache keeping at most `cap` bytes of free buffers (0: keep none, every
 * body is allocated and released). NULL when out of memory. */
struct tiled_bodycache *tiled_bodycache_new(uint64_t cap);

/* Releases the kept buffers and the cache. Every body taken from it must
 * have been put back first. NULL is fine. */
void tiled_bodycache_free(struct tiled_bodycache *c);

/* A buffer of at least `n` bytes (contents undefined), or NULL. */
void *tiled_bodycache_get(struct tiled_bodycache *c, uint64_t n);

/* Gives back a body from tiled_bodycache_get (NULL is fine). */
void tiled_bodycache_put(void *body);

struct tiled_bodycache_stats {
    uint64_t hits, misses; /* gets served from kept buffers / newly allocated */
    uint64_t kept_bytes;   /* bytes of free buffers held now */
};
void tiled_bodycache_stats(struct tiled_bodycache *c, struct tiled_bodycache_stats *out);

/* A metrics provider (metrics.h) of these figures; CACHE is the body cache. */
struct tiled_metrics_out;
void tiled_bodycache_metrics(struct tiled_metrics_out *o, void *cache);

#endif
