/* step_pool.h - core/pool.h without threads, for fuzz_grpc_transport.c
 * (linked in place of core/pool.c): a job or a continuation waits in the
 * pool until the driver runs it with step_pool_run(), on the driver's
 * thread, so what a worker does happens at a point the input chooses and
 * an input replays the same way every time. Workers' order is kept:
 * continuations before new jobs, each FIFO. tile_pool_parallel() runs
 * every task on its caller and tile_pool_size() is 1 (one thread does the
 * work); the queue is bounded as the real one is, so a full queue is still
 * refused ("overloaded"). Single-threaded: no locks. */
#ifndef TILED_FUZZ_STEP_POOL_H
#define TILED_FUZZ_STEP_POOL_H

#include <stdbool.h>

#include "pool.h"

/* Runs the next waiting job or continuation as a worker would; false when
 * none waits. */
bool step_pool_run(struct tile_pool *pool);
/* Jobs and continuations waiting. */
int step_pool_waiting(const struct tile_pool *pool);

#endif
