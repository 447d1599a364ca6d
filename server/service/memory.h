/* memory.h - the request memory all requests share (--max-memory).
 *
 * Each request takes from one process-wide budget what it holds in memory:
 * its body as it arrives (gRPC: the request message), once, and a
 * compressed body's inflated copy (inflate.c), a request that tiles its
 * work record (work.h) and its decoded input once decoded, when it has
 * buffers of its own (not read in place from a shared-memory region: its
 * elements, and a string tensor's bytes; work.c), an in-memory reply's
 * bytes, a streamed reply's two chunks; a gRPC call also its own state
 * (grpc/conn.c) and a streaming call its backlog (grpc/call.c).
 * A body counts as it arrives, not by its declared length: a client that
 * declared a large body and sent it slowly would otherwise hold the budget
 * with bytes it never sent. What a request took is given back at its end
 * (tiled_service_end). A take
 * that would raise the total above the budget is refused (503 with
 * Retry-After, gRPC UNAVAILABLE: retryable, nothing of another request is
 * touched), unless no other request holds anything: one request alone is
 * always let in, up to the size flags (--max-body, --stream-threshold), so
 * a budget below one big request slows it to one at a time but never shuts
 * it out. Not counted (fixed or bounded elsewhere): the body cache
 * (--body-cache), a connection's own buffers, shared-memory regions (the
 * client's), the moment a body is being inflated or a reply compressed
 * (a worker holds both copies; bounded by --max-body and --stream-threshold
 * per worker). docs/operations.md, Memory, gives the whole sum.
 */
#ifndef TILED_MEMORY_H
#define TILED_MEMORY_H

#include <stdatomic.h>
#include <stdint.h>

#include "error.h"

struct tiled_metrics_out;

struct tiled_memory {
    uint64_t budget;               /* --max-memory; 0: no bound (still counted) */
    atomic_uint_fast64_t held;     /* bytes all requests hold now */
    atomic_uint_fast64_t peak;     /* the most held at once since the start */
    atomic_uint_fast64_t refused;  /* takes refused */
};

/* Adds N bytes to what a request holds, *OWN (req->mem_held): 0, or -1
 * with E set (TILE_ENOMEM, the figures and the flag named) when M has no
 * room for them. KIN is what the same request holds on another account
 * (a gRPC call's own state beside its request's): with *OWN, not the
 * others' when it comes to being alone. */
int tiled_memory_take(struct tiled_memory *m, uint64_t *own, uint64_t kin, uint64_t n, struct tile_error *e);
/* Gives back all a request holds (at its end); *OWN becomes 0. */
void tiled_memory_release(struct tiled_memory *m, uint64_t *own);
/* The budget's families on /metrics (a metricsink.h provider; CTX is the
 * struct tiled_memory). */
void tiled_memory_metrics(struct tiled_metrics_out *o, void *ctx);

#endif
