/* shm.h - registered system shared-memory regions (Triton's
 * system_shared_memory extension), with no transport in sight.
 *
 * A client creates a POSIX shared-memory object, registers (name, key,
 * offset, byte_size) and then names the region in infer requests: inputs are
 * read in place, outputs are tiled straight into it. The registry is safe
 * against the client it serves:
 *   - keys follow an allow-list: leading slashes, then 1..255 characters of
 *     [A-Za-z0-9._-] with no "..", optionally starting with a configured
 *     prefix; names use the same characters (they come from a URL segment);
 *   - the object must be a regular file and offset + byte_size (overflow-
 *     checked) must lie inside its size (fstat) at register time, and again
 *     (the fd is kept) every time a request takes a range of it;
 *   - a per-registry cap on regions and on mapped bytes;
 *   - regions are reference-counted: one unregistered or replaced while a
 *     request uses it stays mapped until that request lets it go;
 *   - a client that shrinks its object while a request touches it would
 *     make the kernel raise SIGBUS on whichever thread (a transport's or a worker)
 *     touches a page past the new end. A SIGBUS handler that finds the
 *     faulting address inside a mapped region maps anonymous memory over the
 *     rest of that region and marks it truncated, so the interrupted load or
 *     store completes harmlessly; the request then fails when it lets the
 *     region go, and the region is refused until registered again. Faults
 *     anywhere else get the previous disposition (the default: a crash).
 *
 * Thread-safe: a mutex guards the table; views are plain pointers.
 */
#ifndef TILED_SHM_H
#define TILED_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define TILED_SHM_NAME_MAX 255
/* Regions mapped at once in the whole process (the SIGBUS handler's table). */
#define TILED_SHM_SLOTS 1024

struct tiled_shm;
struct tiled_shm_region;

struct tiled_shm_limits {
    uint64_t max_regions;   /* at most TILED_SHM_SLOTS */
    uint64_t max_bytes;     /* bytes mapped at once */
    const char *key_prefix; /* "" or NULL: any valid key */
};

/* A byte range of a region held by a request. */
struct tiled_shm_view {
    struct tiled_shm_region *region; /* NULL: empty view */
    unsigned char *data;
    uint64_t len;
};

/* Creates a registry and installs the SIGBUS handler (once per process).
 * NULL with `e` on failure. */
struct tiled_shm *tiled_shm_new(const struct tiled_shm_limits *lim, struct tile_error *e);
/* Unregisters everything; regions still held are unmapped on release. */
void tiled_shm_free(struct tiled_shm *shm);

/* Opens `key` read-write, checks the range and maps it as `name`.
 * Errors: TILE_EINVAL (bad name/key, duplicate name, no such object, range
 * outside the object), TILE_ETOOBIG (a cap), TILE_EIO (mmap failed). */
int tiled_shm_register(struct tiled_shm *shm, const char *name, const char *key, uint64_t offset,
                       uint64_t byte_size, struct tile_error *e);
/* Unregisters `name` (NULL: every region). An unknown name is not an error,
 * as in Triton. Returns how many regions were removed. */
int tiled_shm_unregister(struct tiled_shm *shm, const char *name);

/* What status reports of a region. */
struct tiled_shm_info {
    const char *name, *key;
    uint64_t offset, byte_size;
};
typedef void (*tiled_shm_each_fn)(void *ctx, const struct tiled_shm_info *region);
/* Calls fn for every region (`name` NULL) or the one named, under the
 * registry's lock (fn must not call into the registry). -1 with
 * TILE_EINVAL when `name` is not registered (fn is not called then). */
int tiled_shm_status(struct tiled_shm *shm, const char *name, tiled_shm_each_fn fn, void *ctx, struct tile_error *e);

/* Takes bytes [offset, offset + byte_size) of region `name` (offset
 * relative to the registered range). `what` names the tensor in messages.
 * On success `v` holds a reference until tiled_shm_release. */
int tiled_shm_acquire(struct tiled_shm *shm, const char *name, uint64_t offset, uint64_t byte_size,
                      const char *what, struct tiled_shm_view *v, struct tile_error *e);
/* Lets a view go. Returns -1 with `e` when the region was truncated while
 * the view was held (whatever was read or written through it is garbage). */
int tiled_shm_release(struct tiled_shm_view *v, struct tile_error *e);

/* Gauges for /metrics. */
void tiled_shm_stats(struct tiled_shm *shm, uint64_t *regions, uint64_t *mapped_bytes);
/* A metrics provider (metrics.h) of the gauges above and the limits;
 * REGISTRY is the struct tiled_shm. */
struct tiled_metrics_out;
void tiled_shm_metrics(struct tiled_metrics_out *o, void *registry);

/* Whether `key` passes the allow-list (exposed for tests and messages). */
bool tiled_shm_key_valid(const char *key, const char *prefix);
bool tiled_shm_name_valid(const char *name);

#endif
