/* spare.h - keeps one freed block of a large per-request object for the
 * next request to take instead of calling malloc.
 *
 * WHY. A request that tiles makes a work record (its handler's state and
 * plan) and a response encoder, each several kilobytes: above the sizes
 * glibc keeps in its per-thread caches, so every such malloc went to the
 * main heap and first merged the fast bins the request's small frees had
 * filled (malloc_consolidate), about 1,000 instructions each; the matching
 * free was another few hundred. A request frees its objects before (or
 * about when) the next one on the thread asks, so one kept block answers
 * nearly every malloc. The request struct (under 1 KiB) is kept the same
 * way, so such a request allocates none of the three.
 *
 * HOW. One pointer swapped atomically: taking leaves the slot empty, giving
 * back keeps the block and frees the one it displaces, so at most one block
 * is kept per slot whatever the threads do. The block comes back as it was
 * left (not zeroed), like malloc's. Under AddressSanitizer the slot is not
 * used, so a use after free of these objects is still caught. A block left
 * in the slot at exit stays reachable through it (not a leak).
 */
#ifndef TILE_SPARE_H
#define TILE_SPARE_H

#include <stdatomic.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#define TILE_SPARE_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TILE_SPARE_OFF 1
#endif
#endif

/* One slot, for blocks of one size: a static `struct tile_spare s;` per
 * object type. */
struct tile_spare {
    _Atomic(void *) block;
};

/* A block of `size` bytes (the slot's size): the kept one, or malloc's. */
static inline void *tile_spare_take(struct tile_spare *s, size_t size)
{
#ifndef TILE_SPARE_OFF
    void *p = atomic_exchange_explicit(&s->block, NULL, memory_order_acquire);
    if (p)
        return p;
#else
    (void)s;
#endif
    return malloc(size);
}

/* Gives `p` (from tile_spare_take, or NULL) back: kept for the next take. */
static inline void tile_spare_give(struct tile_spare *s, void *p)
{
#ifndef TILE_SPARE_OFF
    p = atomic_exchange_explicit(&s->block, p, memory_order_acq_rel);
#else
    (void)s;
#endif
    free(p);
}

#endif
