/* pool.c - worker pool (see pool.h).
 *
 * DESIGN. One mutex guards two rings and a list: `help` holds tasks
 * posted by tile_pool_parallel(), `jobs` holds submitted jobs, and the
 * continuations of admitted work (tile_pool_continue) wait in a FIFO
 * between them. Workers take help first, then continuations, then jobs,
 * so a running request that splits its work, or streams its next chunk,
 * gets idle threads before queued requests start (finishing work beats
 * starting work). A
 * parallel section lives on the heap with a reference count: a helper that
 * is dequeued after the section finished finds no task left and just drops
 * its reference, so the caller never waits for helpers that are still
 * queued behind long jobs.
 */
#include "pool.h"

#include "autosplit.h"
#include "stores.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* Polls of a finished parallel section before the caller sleeps: at
 * ~10-40 ns each (a pause instruction), some 100-400 microseconds. */
#define TILE_FINISH_SPINS 10000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

struct tile_job {
    tile_job_fn fn;
    void *arg;
};

struct tile_ring {
    struct tile_job *slots;
    int cap, head, len;
};

struct tile_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct tile_ring jobs, help;
    struct tile_pool_task *cont_head, *cont_tail; /* continuations, FIFO */
    bool stopping;
    int nthreads;
    atomic_int busy;
    pthread_t *threads;
    struct tile_autosplit split; /* lock-free; see autosplit.h */
};

struct tile_parallel {
    atomic_uint_fast64_t next, done;
    atomic_int refs;
    uint64_t ntasks;
    tile_task_fn fn;
    void *arg;
    pthread_mutex_t lock;
    pthread_cond_t finished;
};

static int ring_init(struct tile_ring *r, int cap)
{
    r->slots = calloc((size_t)cap, sizeof(r->slots[0]));
    r->cap = cap;
    r->head = r->len = 0;
    return r->slots ? 0 : -1;
}

static bool ring_push(struct tile_ring *r, tile_job_fn fn, void *arg)
{
    if (r->len == r->cap)
        return false;
    r->slots[(r->head + r->len) % r->cap] = (struct tile_job){fn, arg};
    r->len++;
    return true;
}

static bool ring_pop(struct tile_ring *r, struct tile_job *out)
{
    if (r->len == 0)
        return false;
    *out = r->slots[r->head];
    r->head = (r->head + 1) % r->cap;
    r->len--;
    return true;
}

static bool cont_pop(struct tile_pool *pool, struct tile_job *out)
{
    struct tile_pool_task *t = pool->cont_head;
    if (!t)
        return false;
    pool->cont_head = t->next;
    if (!pool->cont_head)
        pool->cont_tail = NULL;
    *out = (struct tile_job){t->fn, t->arg};
    return true;
}

static void *worker_main(void *arg)
{
    struct tile_pool *pool = arg;
    struct tile_job job;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        if (ring_pop(&pool->help, &job) || cont_pop(pool, &job) || ring_pop(&pool->jobs, &job)) {
            atomic_fetch_add(&pool->busy, 1);
            pthread_mutex_unlock(&pool->lock);
            job.fn(job.arg);
            atomic_fetch_sub(&pool->busy, 1);
            pthread_mutex_lock(&pool->lock);
        } else if (pool->stopping) {
            break;
        } else {
            pthread_cond_wait(&pool->wake, &pool->lock);
        }
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

struct tile_pool *tile_pool_init(int nthreads, int queue_cap, struct tile_error *e)
{
    struct tile_pool *pool = calloc(1, sizeof(*pool));
    if (!pool) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the worker pool");
        return NULL;
    }
    tile_stores_init(); /* the kernel's store policy, read here rather than on a first request */
    pool->nthreads = nthreads > 0 ? nthreads : online_cpus();
    if (queue_cap <= 0)
        queue_cap = 1024;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pool->threads = calloc((size_t)pool->nthreads, sizeof(pthread_t));
    if (!pool->threads || ring_init(&pool->jobs, queue_cap) < 0 || ring_init(&pool->help, 4 * pool->nthreads) < 0) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the worker pool");
        pool->nthreads = 0;
        tile_pool_free(pool);
        return NULL;
    }
    for (int i = 0; i < pool->nthreads; i++) {
        if (pthread_create(&pool->threads[i], NULL, worker_main, pool) != 0) {
            tile_error_set(e, TILE_ENOMEM, "cannot start worker thread %d", i);
            pool->nthreads = i;
            tile_pool_free(pool);
            return NULL;
        }
    }
    return pool;
}

void tile_pool_free(struct tile_pool *pool)
{
    if (!pool)
        return;
    pthread_mutex_lock(&pool->lock);
    pool->stopping = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->nthreads; i++)
        pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    free(pool->jobs.slots);
    free(pool->help.slots);
    free(pool->threads);
    free(pool);
}

int tile_pool_submit(struct tile_pool *pool, tile_job_fn fn, void *arg)
{
    pthread_mutex_lock(&pool->lock);
    bool ok = !pool->stopping && ring_push(&pool->jobs, fn, arg);
    if (ok)
        pthread_cond_signal(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    return ok ? 0 : -1;
}

void tile_pool_continue(struct tile_pool *pool, struct tile_pool_task *task)
{
    task->next = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->cont_tail)
        pool->cont_tail->next = task;
    else
        pool->cont_head = task;
    pool->cont_tail = task;
    pthread_cond_signal(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
}

static void parallel_release(struct tile_parallel *par)
{
    if (atomic_fetch_sub(&par->refs, 1) == 1) {
        pthread_cond_destroy(&par->finished);
        pthread_mutex_destroy(&par->lock);
        free(par);
    }
}

/* Claims and runs tasks until none is left. */
static void parallel_work(struct tile_parallel *par)
{
    for (;;) {
        uint64_t t = atomic_fetch_add(&par->next, 1);
        if (t >= par->ntasks)
            break;
        par->fn(par->arg, t);
        if (atomic_fetch_add(&par->done, 1) + 1 == par->ntasks) {
            pthread_mutex_lock(&par->lock);
            pthread_cond_broadcast(&par->finished);
            pthread_mutex_unlock(&par->lock);
        }
    }
}

static void parallel_helper(void *arg)
{
    struct tile_parallel *par = arg;
    parallel_work(par);
    parallel_release(par);
}

void tile_pool_parallel(struct tile_pool *pool, uint64_t ntasks, tile_task_fn fn, void *arg)
{
    struct tile_parallel *par = NULL;
    if (pool && ntasks > 1 && pool->nthreads > 0)
        par = malloc(sizeof(*par));
    if (!par) {
        for (uint64_t t = 0; t < ntasks; t++)
            fn(arg, t);
        return;
    }
    atomic_init(&par->next, 0);
    atomic_init(&par->done, 0);
    atomic_init(&par->refs, 1);
    par->ntasks = ntasks;
    par->fn = fn;
    par->arg = arg;
    pthread_mutex_init(&par->lock, NULL);
    pthread_cond_init(&par->finished, NULL);

    /* The caller is one of the pool's nthreads: asking every worker too
     * would put nthreads + 1 threads on nthreads CPUs, and a memory-bound
     * task preempted halfway holds up the whole section. */
    uint64_t others = (uint64_t)pool->nthreads - 1;
    uint64_t helpers = ntasks - 1 < others ? ntasks - 1 : others;
    uint64_t queued = 0;
    pthread_mutex_lock(&pool->lock);
    for (; queued < helpers; queued++) {
        atomic_fetch_add(&par->refs, 1);
        if (!ring_push(&pool->help, parallel_helper, par)) {
            atomic_fetch_sub(&par->refs, 1);
            break;
        }
    }
    pthread_mutex_unlock(&pool->lock);
    /* Woken after the unlock: a helper scheduled onto this CPU would
     * otherwise preempt the caller while it still holds the lock. */
    for (uint64_t i = 0; i < queued; i++)
        pthread_cond_signal(&pool->wake);

    parallel_work(par);
    /* The helpers are at most one task from the end now. Waking a sleeping
     * thread costs tens of microseconds on a virtual CPU, as much as a task,
     * so the caller polls for a while before it sleeps. */
    for (int spin = 0; spin < TILE_FINISH_SPINS && atomic_load(&par->done) < ntasks; spin++)
        cpu_relax();
    pthread_mutex_lock(&par->lock);
    while (atomic_load(&par->done) < ntasks)
        pthread_cond_wait(&par->finished, &par->lock);
    pthread_mutex_unlock(&par->lock);
    parallel_release(par);
}

int tile_pool_size(const struct tile_pool *pool)
{
    return pool ? pool->nthreads : 0;
}

struct tile_autosplit *tile_pool_autosplit(struct tile_pool *pool)
{
    return pool ? &pool->split : NULL;
}

int tile_pool_queue_depth(struct tile_pool *pool)
{
    pthread_mutex_lock(&pool->lock);
    int n = pool->jobs.len;
    pthread_mutex_unlock(&pool->lock);
    return n;
}

int tile_pool_busy(const struct tile_pool *pool)
{
    return atomic_load(&((struct tile_pool *)pool)->busy);
}
