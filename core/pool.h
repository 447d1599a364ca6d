/* pool.h - a persistent pthreads worker pool with a bounded job queue.
 *
 * Two uses share the same threads:
 *   - tile_pool_submit(): hand a whole job (a server request) to a worker.
 *     The queue is bounded and submit never blocks: a full queue is
 *     reported at once so the caller can answer "overloaded".
 *   - tile_pool_parallel(): split one piece of work into tasks. The caller
 *     runs tasks itself and idle workers help, so it is safe to call from a
 *     job already running on a worker (no deadlock when every worker is busy:
 *     the caller then simply does all the tasks).
 * Thread-safety: every function but init/free may be called from any thread.
 */
#ifndef TILE_POOL_H
#define TILE_POOL_H

#include <stdint.h>

#include "error.h"

struct tile_pool;

typedef void (*tile_job_fn)(void *arg);
typedef void (*tile_task_fn)(void *arg, uint64_t task);

/* Starts `nthreads` workers (<= 0: one per online CPU) with room for
 * `queue_cap` queued jobs (<= 0: 1024). NULL and `e` filled on failure. */
struct tile_pool *tile_pool_init(int nthreads, int queue_cap, struct tile_error *e);

/* Runs every queued job, then stops and joins the workers. NULL is fine. */
void tile_pool_free(struct tile_pool *pool);

/* Queues fn(arg). 0 on success; -1 when the queue is full or the pool is
 * stopping (fn is then not called and arg stays the caller's). */
int tile_pool_submit(struct tile_pool *pool, tile_job_fn fn, void *arg);

/* A continuation of work already admitted (e.g. the next chunk of a
 * streamed response). It is embedded in the caller's state, so queueing it
 * needs no memory and cannot fail; workers run continuations before new
 * jobs. The caller must not queue a task that is still queued. */
struct tile_pool_task {
    tile_job_fn fn;
    void *arg;
    struct tile_pool_task *next; /* owned by the pool while queued */
};
void tile_pool_continue(struct tile_pool *pool, struct tile_pool_task *task);

/* Runs fn(arg, 0..ntasks-1) across the caller and idle workers; returns when
 * all are done. With pool NULL or ntasks <= 1 it runs on the caller only. */
void tile_pool_parallel(struct tile_pool *pool, uint64_t ntasks, tile_task_fn fn, void *arg);

int tile_pool_size(const struct tile_pool *pool);

/* What this pool has measured about splitting work (see autosplit.h);
 * NULL for a NULL pool. */
struct tile_autosplit *tile_pool_autosplit(struct tile_pool *pool);
int tile_pool_queue_depth(struct tile_pool *pool); /* jobs waiting */
int tile_pool_busy(const struct tile_pool *pool);  /* workers running something */

#endif
