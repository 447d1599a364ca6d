/* step_pool.c - see step_pool.h. */
#include <stdlib.h>

#include "step_pool.h"

#include "autosplit.h"
#include "stores.h"

struct tile_job {
    tile_job_fn fn;
    void *arg;
};

struct tile_pool {
    struct tile_job *jobs; /* a ring of `cap` */
    int cap, head, len;
    struct tile_pool_task *cont_head, *cont_tail; /* continuations, FIFO */
    int busy;                                     /* 1 while step_pool_run runs one */
    struct tile_autosplit split;
};

struct tile_pool *tile_pool_init(int nthreads, int queue_cap, struct tile_error *e)
{
    (void)nthreads; /* the driver's thread is the only one */
    struct tile_pool *pool = calloc(1, sizeof(*pool));
    if (pool) {
        pool->cap = queue_cap > 0 ? queue_cap : 1024;
        pool->jobs = calloc((size_t)pool->cap, sizeof(*pool->jobs));
    }
    if (!pool || !pool->jobs) {
        free(pool);
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the worker pool");
        return NULL;
    }
    tile_stores_init(); /* as the real pool does */
    return pool;
}

void tile_pool_free(struct tile_pool *pool)
{
    if (!pool)
        return;
    while (step_pool_run(pool)) /* the real pool runs every queued job first */
        ;
    free(pool->jobs);
    free(pool);
}

int tile_pool_submit(struct tile_pool *pool, tile_job_fn fn, void *arg)
{
    if (pool->len == pool->cap)
        return -1;
    pool->jobs[(pool->head + pool->len++) % pool->cap] = (struct tile_job){fn, arg};
    return 0;
}

void tile_pool_continue(struct tile_pool *pool, struct tile_pool_task *task)
{
    task->next = NULL;
    if (pool->cont_tail)
        pool->cont_tail->next = task;
    else
        pool->cont_head = task;
    pool->cont_tail = task;
}

void tile_pool_parallel(struct tile_pool *pool, uint64_t ntasks, tile_task_fn fn, void *arg)
{
    (void)pool;
    for (uint64_t t = 0; t < ntasks; t++)
        fn(arg, t);
}

bool step_pool_run(struct tile_pool *pool)
{
    struct tile_job job;
    struct tile_pool_task *t = pool->cont_head;
    if (t) {
        pool->cont_head = t->next;
        if (!pool->cont_head)
            pool->cont_tail = NULL;
        job = (struct tile_job){t->fn, t->arg};
    } else if (pool->len > 0) {
        job = pool->jobs[pool->head];
        pool->head = (pool->head + 1) % pool->cap;
        pool->len--;
    } else {
        return false;
    }
    pool->busy = 1;
    job.fn(job.arg);
    pool->busy = 0;
    return true;
}

int step_pool_waiting(const struct tile_pool *pool)
{
    int n = pool->len;
    for (const struct tile_pool_task *t = pool->cont_head; t; t = t->next)
        n++;
    return n;
}

int tile_pool_size(const struct tile_pool *pool)
{
    return pool ? 1 : 0;
}

struct tile_autosplit *tile_pool_autosplit(struct tile_pool *pool)
{
    return pool ? &pool->split : NULL;
}

int tile_pool_queue_depth(struct tile_pool *pool)
{
    return pool->len;
}

int tile_pool_busy(const struct tile_pool *pool)
{
    return pool->busy;
}
