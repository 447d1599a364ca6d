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
 *
 * A worker that has just helped a parallel section polls for new work for
 * a while before it sleeps: a section that follows soon (the next call
 * of a loop, the next request of a client) then finds it awake instead of
 * paying for a wake-up, which on a virtual CPU takes tens of microseconds,
 * as long as writing a whole 2 MiB output. How long it polls is what a
 * wake-up has been measured to cost in this process (the time from
 * posting a section to a sleeping helper starting on it), so that polling
 * never costs more CPU than the wake-up it may save (the rent-or-buy
 * bound), within TILE_SPIN_MIN_NS..TILE_SPIN_MAX_NS.
 */
#include "pool.h"

#include "autosplit.h"
#include "stores.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Polls of a finished parallel section before the caller sleeps: at
 * ~10-40 ns each (a pause instruction), some 100-400 microseconds. */
#define TILE_FINISH_SPINS 10000
/* A helper's polling after a section (see DESIGN): the measured wake-up
 * time, within these bounds; the estimate starts at TILE_SPIN_START_NS. */
#define TILE_SPIN_MIN_NS 10000u
#define TILE_SPIN_MAX_NS 200000u
#define TILE_SPIN_START_NS 30000u

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
    /* Bumped under the lock whenever work is queued, so that a polling
     * worker sees new work without taking the lock. */
    atomic_uint_fast64_t posted;
    int polling; /* workers polling (under the lock): each takes a section's help unwoken */
    atomic_uint_fast64_t help_posted_ns; /* when the last section asked for help */
    atomic_uint_fast64_t wake_ns;        /* what a wake-up costs: a moving average */
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

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

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

/* A sleeping helper has started `ns` after its section was posted: the
 * moving average of wake-up costs moves an eighth of the way to it. */
static void wake_measured(struct tile_pool *pool, uint64_t ns)
{
    if (ns > 100 * (uint64_t)TILE_SPIN_MAX_NS) /* a descheduled thread, not a wake-up */
        ns = 100 * (uint64_t)TILE_SPIN_MAX_NS;
    uint64_t avg = atomic_load_explicit(&pool->wake_ns, memory_order_relaxed);
    atomic_store_explicit(&pool->wake_ns, avg - avg / 8 + ns / 8, memory_order_relaxed);
}

/* How long a helper polls after a section: what a wake-up costs. */
static uint64_t spin_budget_ns(struct tile_pool *pool)
{
    uint64_t ns = atomic_load_explicit(&pool->wake_ns, memory_order_relaxed);
    return ns < TILE_SPIN_MIN_NS ? TILE_SPIN_MIN_NS : ns > TILE_SPIN_MAX_NS ? TILE_SPIN_MAX_NS : ns;
}

/* Called with the lock held, which it drops while it polls: returns once
 * work has been queued since `seen`, or the budget is spent. The caller
 * looks at the queues again (under the lock) after it returns, so work
 * queued meanwhile is not missed: a section does not wake a sleeping
 * worker for help that a polling one will take (the woken one would find
 * nothing, after taking a CPU from the two that run the section). */
static void poll_for_work(struct tile_pool *pool, uint64_t seen)
{
    pool->polling++;
    pthread_mutex_unlock(&pool->lock);
    uint64_t end = now_ns() + spin_budget_ns(pool);
    for (unsigned i = 1; atomic_load_explicit(&pool->posted, memory_order_acquire) == seen; i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() > end) /* the clock is read every few hundred nanoseconds */
            break;
    }
    pthread_mutex_lock(&pool->lock);
    pool->polling--;
}

static void *worker_main(void *arg)
{
    struct tile_pool *pool = arg;
    struct tile_job job;
    bool poll = false, slept = false;
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        bool help = ring_pop(&pool->help, &job);
        if (help || cont_pop(pool, &job) || ring_pop(&pool->jobs, &job)) {
            if (help && slept)
                wake_measured(pool, now_ns() - atomic_load_explicit(&pool->help_posted_ns, memory_order_relaxed));
            atomic_fetch_add(&pool->busy, 1);
            pthread_mutex_unlock(&pool->lock);
            job.fn(job.arg);
            atomic_fetch_sub(&pool->busy, 1);
            poll = help; /* only after a section: see DESIGN */
            slept = false;
            pthread_mutex_lock(&pool->lock);
        } else if (pool->stopping) {
            break;
        } else if (poll) {
            poll = false;
            poll_for_work(pool, atomic_load_explicit(&pool->posted, memory_order_relaxed));
        } else {
            pthread_cond_wait(&pool->wake, &pool->lock);
            slept = true;
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
    atomic_init(&pool->wake_ns, TILE_SPIN_START_NS);
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
    atomic_fetch_add_explicit(&pool->posted, 1, memory_order_release);
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
    if (ok) {
        atomic_fetch_add_explicit(&pool->posted, 1, memory_order_release);
        pthread_cond_signal(&pool->wake);
    }
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
    atomic_fetch_add_explicit(&pool->posted, 1, memory_order_release);
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
    uint64_t wake = queued > (uint64_t)pool->polling ? queued - (uint64_t)pool->polling : 0;
    if (queued) {
        atomic_store_explicit(&pool->help_posted_ns, now_ns(), memory_order_relaxed);
        atomic_fetch_add_explicit(&pool->posted, 1, memory_order_release);
    }
    pthread_mutex_unlock(&pool->lock);
    /* Woken after the unlock: a helper scheduled onto this CPU would
     * otherwise preempt the caller while it still holds the lock. */
    for (uint64_t i = 0; i < wake; i++)
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
