/* tile.h - tiled's core: the public header of the tiling library.
 *
 * Typical use:
 *     struct tile_plan plan;
 *     struct tile_spec spec = { .semantics = TILE_SEM_ONNX, .repeats = r, .nrepeats = 2 };
 *     if (tile_plan_init(&plan, in.dtype, in.rank, in.shape, &spec, &err) < 0) ...
 *     tile_execute(&plan, in.data, out_buffer, pool);        // whole output
 *     tile_read(&plan, in.data, offset, len, chunk);          // or any byte range
 * or simply tile_run(&in, &spec, &out, pool, &err), which allocates `out`.
 */
#ifndef TILE_TILE_H
#define TILE_TILE_H

#include <stdbool.h>
#include <stdint.h>

#include "dtype.h"
#include "error.h"
#include "plan.h"
#include "pool.h"
#include "tensor.h"

/* Writes output bytes [offset, offset+len) of `plan` applied to the input
 * elements `in` into `dst`, without touching the rest of the output. For
 * strings the bytes are those of the struct tile_str views. The range must
 * lie inside [0, plan->out_bytes]. Single-threaded; thread-safe. */
void tile_read(const struct tile_plan *plan, const void *in, uint64_t offset, uint64_t len, void *dst);

/* Writes the whole output (plan->out_bytes bytes) into `out`. Small
 * outputs never leave the calling thread; large ones are split across
 * `pool` (NULL: the caller only) when the pool's own measurements show that
 * splitting is faster on this machine (see autosplit.h). The store kind
 * (plain, which leaves the output in the cache, or non-temporal) follows
 * the cache size, except that from 4 MiB up to the last-level cache it is
 * what has been faster for the size in this process (see stores.h);
 * tile_read always uses plain ones. */
void tile_execute(const struct tile_plan *plan, const void *in, void *out, struct tile_pool *pool);

/* Tests and benchmarks: the size of the pieces the kernel writes whole
 * tiles in with plain stores (kernel.c; about 8 KiB, what stays in L1),
 * for every later call in the process; 0 restores it. Pieces of a few
 * bytes make small outputs take every path big ones take. */
void tile_kernel_force_chunk(uint64_t bytes);

/* Tests: while on, every output given a pool of two or more threads is
 * split across it in tasks as small as a page, whatever its size and
 * whatever the pool measured, so that small outputs take the paths of
 * split big ones (a task starting or ending inside a tile). */
void tile_kernel_force_split(bool on);

/* Plans, allocates and fills `out` (which the caller frees with
 * tile_tensor_free). String outputs borrow the input's string bytes, so `in`
 * must outlive `out`. On error `out` is left empty and `e` says why. */
int tile_run(const struct tile_tensor *in, const struct tile_spec *spec, struct tile_tensor *out,
             struct tile_pool *pool, struct tile_error *e);

/* Outputs below this many bytes are tiled on the calling thread: a thread
 * hand-off costs more than writing them. From this size on the pool's
 * measurements decide (autosplit.h): with a helper awake, two threads
 * wrote uint8 [3,224,224]x[1,4,4] (2.3 MB) at 1.4x one thread's speed. */
#define TILE_PARALLEL_MIN_BYTES (1u << 20)

#endif
