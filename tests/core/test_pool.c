/* test_pool.c - the worker pool: jobs, the bounded queue, parallel
 * sections (also from inside a job while every other worker is blocked),
 * continuations and draining on free.
 *
 * Workers are held deterministically by "blocker" jobs that wait at a gate
 * the test opens; every wait has a timeout, so a deadlock fails the test
 * instead of hanging it. The file is race-free under TSan.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tile.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define WAIT_SECONDS 60
#define MAX_TASKS 10000

/* ---- synchronisation: a gate for blockers and a count of finished jobs ---- */

struct sync {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;     /* blockers may leave */
    int arrived;  /* blockers waiting (or gone) */
    int finished; /* counted jobs done */
};

static void sync_init(struct sync *s)
{
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->open = s->arrived = s->finished = 0;
}

static void sync_destroy(struct sync *s)
{
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

/* Waits until *field >= n; fails the test after WAIT_SECONDS. */
static void sync_await(struct sync *s, const int *field, int n)
{
    struct timespec deadline;
    int rc = 0;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += WAIT_SECONDS;
    pthread_mutex_lock(&s->lock);
    while (*field < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&s->cond, &s->lock, &deadline);
    int reached = *field >= n;
    pthread_mutex_unlock(&s->lock);
    if (!reached)
        fail_msg("waited %d s for %d events: deadlock?", WAIT_SECONDS, n);
}

static void sync_bump(struct sync *s, int *field)
{
    pthread_mutex_lock(&s->lock);
    (*field)++;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void sync_open(struct sync *s)
{
    pthread_mutex_lock(&s->lock);
    s->open = 1;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* A job that holds its worker until the gate opens. */
static void blocker(void *arg)
{
    struct sync *s = arg;
    pthread_mutex_lock(&s->lock);
    s->arrived++;
    pthread_cond_broadcast(&s->cond);
    while (!s->open)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* Occupies `n` workers with blockers and waits until all of them run. */
static void block_workers(struct tile_pool *pool, struct sync *s, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(tile_pool_submit(pool, blocker, s), 0);
    sync_await(s, &s->arrived, n);
}

/* ---- counted jobs ---- */

static atomic_int run_order;

struct slot {
    struct sync *s;
    atomic_int hits;
    int order; /* value of run_order when it ran */
};

static void count_job(void *arg)
{
    struct slot *sl = arg;
    sl->order = atomic_fetch_add(&run_order, 1);
    atomic_fetch_add(&sl->hits, 1);
    sync_bump(sl->s, &sl->s->finished);
}

static struct slot *new_slots(struct sync *s, int n)
{
    struct slot *sl = calloc((size_t)n, sizeof(*sl));
    assert_non_null(sl);
    for (int i = 0; i < n; i++) {
        sl[i].s = s;
        atomic_init(&sl[i].hits, 0);
    }
    return sl;
}

static void expect_hits(struct slot *sl, int from, int to, int hits)
{
    for (int i = from; i < to; i++)
        if (atomic_load(&sl[i].hits) != hits)
            fail_msg("job %d ran %d times, expected %d", i, atomic_load(&sl[i].hits), hits);
}

/* ---- tests ---- */

static void submit_runs_each_job_once(void **state)
{
    enum { N = 1000 };
    struct sync s;
    struct tile_error e = {0};
    (void)state;
    sync_init(&s);
    struct slot *sl = new_slots(&s, N);
    struct tile_pool *pool = tile_pool_init(4, 2 * N, &e);
    assert_non_null(pool);
    assert_int_equal(tile_pool_size(pool), 4);
    for (int i = 0; i < N; i++)
        assert_int_equal(tile_pool_submit(pool, count_job, &sl[i]), 0);
    sync_await(&s, &s.finished, N);
    tile_pool_free(pool);
    expect_hits(sl, 0, N, 1);
    assert_int_equal(s.finished, N);
    free(sl);
    sync_destroy(&s);
}

/* With every worker held, exactly `cap` jobs queue and the next submit
 * fails at once; the refused job never runs, the queued ones all do. */
static void full_queue_reported_at_once(void **state)
{
    static const struct {
        int threads, queue_cap, effective_cap;
    } cases[] = {{2, 4, 4}, {1, 1, 1}, {3, 0, 1024}, {1, -5, 1024}};
    (void)state;
    for (size_t c = 0; c < ARRAY_LEN(cases); c++) {
        int cap = cases[c].effective_cap;
        struct sync s;
        sync_init(&s);
        struct slot *sl = new_slots(&s, cap + 1);
        struct tile_pool *pool = tile_pool_init(cases[c].threads, cases[c].queue_cap, NULL);
        assert_non_null(pool);
        block_workers(pool, &s, cases[c].threads);
        for (int i = 0; i < cap; i++)
            assert_int_equal(tile_pool_submit(pool, count_job, &sl[i]), 0);
        assert_int_equal(tile_pool_queue_depth(pool), cap);
        assert_int_equal(tile_pool_busy(pool), cases[c].threads);
        /* The workers are held until sync_open() below, so a submit that
         * waited for room instead of refusing would never return. */
        assert_int_equal(tile_pool_submit(pool, count_job, &sl[cap]), -1);
        sync_open(&s);
        sync_await(&s, &s.finished, cap);
        tile_pool_free(pool);
        expect_hits(sl, 0, cap, 1);
        expect_hits(sl, cap, cap + 1, 0);
        free(sl);
        sync_destroy(&s);
    }
}

/* ---- parallel sections ---- */

struct tasks {
    uint64_t ntasks;
    atomic_int hits[MAX_TASKS];
    atomic_int out_of_range;
};

/* Short sections take a while per task, so a caller that returned before
 * its helpers finished would see tasks not yet run. */
static void count_task(void *arg, uint64_t task)
{
    struct tasks *t = arg;
    if (t->ntasks <= 8)
        usleep(200);
    if (task >= t->ntasks)
        atomic_fetch_add(&t->out_of_range, 1);
    else
        atomic_fetch_add(&t->hits[task], 1);
}

/* Runs a parallel section of `ntasks`; returns how many tasks did not run
 * exactly once (plus any run out of range). Safe to call on a worker. */
static int parallel_errors(struct tile_pool *pool, uint64_t ntasks)
{
    struct tasks *t = calloc(1, sizeof(*t));
    if (!t)
        return 1;
    t->ntasks = ntasks;
    tile_pool_parallel(pool, ntasks, count_task, t);
    int bad = atomic_load(&t->out_of_range);
    for (uint64_t i = 0; i < ntasks; i++)
        bad += atomic_load(&t->hits[i]) != 1;
    free(t);
    return bad;
}

static const uint64_t task_counts[] = {0, 1, 2, 3, 7, 100, MAX_TASKS};

static void parallel_runs_each_task_once(void **state)
{
    static const int threads[] = {0, 1, 2, 3, 4, 8}; /* 0: no pool */
    (void)state;
    for (size_t p = 0; p < ARRAY_LEN(threads); p++) {
        struct tile_pool *pool = threads[p] ? tile_pool_init(threads[p], 0, NULL) : NULL;
        assert_true(threads[p] == 0 || pool != NULL);
        for (int round = 0; round < 3; round++)
            for (size_t n = 0; n < ARRAY_LEN(task_counts); n++)
                if (parallel_errors(pool, task_counts[n]))
                    fail_msg("%llu tasks on %d threads: not each run once", (unsigned long long)task_counts[n],
                             threads[p]);
        tile_pool_free(pool);
    }
}

struct nested {
    struct tile_pool *pool;
    struct sync *s;
    int bad; /* read after s->finished says the job is done */
};

static void parallel_job(void *arg)
{
    struct nested *n = arg;
    for (size_t i = 0; i < ARRAY_LEN(task_counts); i++)
        n->bad += parallel_errors(n->pool, task_counts[i]);
    sync_bump(n->s, &n->s->finished);
}

/* A parallel section started while the other workers are all held must
 * finish on its own: from inside a job, and from outside the pool. */
static void parallel_while_workers_blocked(void **state)
{
    static const struct {
        int threads, blocked, from_job;
    } cases[] = {{1, 0, 1}, {2, 1, 1}, {3, 2, 1}, {4, 3, 1}, {1, 1, 0}, {3, 3, 0}};
    (void)state;
    for (size_t c = 0; c < ARRAY_LEN(cases); c++) {
        struct sync s;
        sync_init(&s);
        struct tile_pool *pool = tile_pool_init(cases[c].threads, 0, NULL);
        struct nested n = {pool, &s, 0};
        assert_non_null(pool);
        block_workers(pool, &s, cases[c].blocked);
        if (cases[c].from_job)
            assert_int_equal(tile_pool_submit(pool, parallel_job, &n), 0);
        else
            parallel_job(&n);
        sync_await(&s, &s.finished, 1);
        assert_int_equal(n.bad, 0);
        sync_open(&s);
        tile_pool_free(pool);
        sync_destroy(&s);
    }
}

/* ---- every idle worker joins a section ---- */

/* Tasks that each wait until all `n` of them run: a section of n such tasks
 * on a pool of n threads (the caller and n - 1 helpers) finishes only if
 * every helper it asked for came, whether it was polling after the
 * section before or asleep. */
struct meeting {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int n, arrived;
    int late; /* tasks that gave up waiting */
};

static void meeting_task(void *arg, uint64_t task)
{
    struct meeting *m = arg;
    struct timespec deadline;
    int rc = 0;
    (void)task;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += WAIT_SECONDS;
    pthread_mutex_lock(&m->lock);
    m->arrived++;
    pthread_cond_broadcast(&m->cond);
    while (m->arrived < m->n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&m->cond, &m->lock, &deadline);
    m->late += m->arrived < m->n;
    pthread_mutex_unlock(&m->lock);
}

static void meet(struct tile_pool *pool, int n)
{
    struct meeting m = {.n = n};
    pthread_mutex_init(&m.lock, NULL);
    pthread_cond_init(&m.cond, NULL);
    tile_pool_parallel(pool, (uint64_t)n, meeting_task, &m);
    if (m.late)
        fail_msg("a section of %d tasks on %d threads did not get all of them", n, n);
    pthread_cond_destroy(&m.cond);
    pthread_mutex_destroy(&m.lock);
}

/* Back to back (the helpers are polling), after a pause (they sleep), and
 * freed at once after a section (they are polling when told to stop). */
static void sections_get_every_helper(void **state)
{
    (void)state;
    for (int threads = 2; threads <= 4; threads++) {
        struct tile_pool *pool = tile_pool_init(threads, 0, NULL);
        assert_non_null(pool);
        for (int round = 0; round < 20; round++) {
            meet(pool, threads);
            meet(pool, threads);
            if (round % 4 == 3)
                usleep(5000);
        }
        tile_pool_free(pool);
    }
}

/* A job submitted while the helpers poll after a section runs. */
static void job_after_section_runs(void **state)
{
    enum { ROUNDS = 20 };
    (void)state;
    struct sync s;
    sync_init(&s);
    struct slot *sl = new_slots(&s, ROUNDS);
    struct tile_pool *pool = tile_pool_init(2, 0, NULL);
    assert_non_null(pool);
    for (int round = 0; round < ROUNDS; round++) {
        meet(pool, 2);
        assert_int_equal(tile_pool_submit(pool, count_job, &sl[round]), 0);
    }
    sync_await(&s, &s.finished, ROUNDS);
    expect_hits(sl, 0, ROUNDS, 1);
    tile_pool_free(pool);
    free(sl);
    sync_destroy(&s);
}

/* ---- continuations ---- */

static void continuation(void *arg)
{
    count_job(arg);
}

/* Continuations run once each, before queued jobs, even with the job
 * queue full. */
static void continuations_run_first(void **state)
{
    struct sync s;
    struct tile_pool_task tasks[3];
    (void)state;
    sync_init(&s);
    struct slot *sl = new_slots(&s, 5);
    struct tile_pool *pool = tile_pool_init(1, 1, NULL);
    assert_non_null(pool);
    block_workers(pool, &s, 1);
    assert_int_equal(tile_pool_submit(pool, count_job, &sl[0]), 0);
    assert_int_equal(tile_pool_submit(pool, count_job, &sl[4]), -1);
    for (int i = 0; i < 3; i++) {
        tasks[i] = (struct tile_pool_task){continuation, &sl[1 + i], NULL};
        tile_pool_continue(pool, &tasks[i]);
    }
    sync_open(&s);
    sync_await(&s, &s.finished, 4);
    tile_pool_free(pool);
    expect_hits(sl, 0, 4, 1);
    expect_hits(sl, 4, 5, 0);
    for (int i = 1; i < 3; i++) /* FIFO among continuations */
        assert_true(sl[i].order < sl[i + 1].order);
    assert_true(sl[3].order < sl[0].order);
    free(sl);
    sync_destroy(&s);
}

/* ---- draining on free ---- */

struct freer {
    struct tile_pool *pool;
};

static void *free_pool(void *arg)
{
    tile_pool_free(((struct freer *)arg)->pool);
    return NULL;
}

/* Jobs still queued when tile_pool_free() starts all run before it returns.
 * The worker is held until free has marked the pool stopping, which shows
 * as submit failing; only then does the gate open. */
static void free_drains_queued_jobs(void **state)
{
    enum { QUEUED = 50, MAX_POLLS = 900 };
    struct sync s;
    pthread_t th;
    int accepted = 0;
    (void)state;
    sync_init(&s);
    struct slot *sl = new_slots(&s, QUEUED + MAX_POLLS + 1);
    struct tile_pool *pool = tile_pool_init(1, QUEUED + MAX_POLLS + 1, NULL);
    struct freer f = {pool};
    assert_non_null(pool);
    block_workers(pool, &s, 1);
    for (int i = 0; i < QUEUED; i++)
        assert_int_equal(tile_pool_submit(pool, count_job, &sl[i]), 0);
    assert_int_equal(pthread_create(&th, NULL, free_pool, &f), 0);
    while (tile_pool_submit(pool, count_job, &sl[QUEUED + accepted]) == 0) {
        accepted++;
        assert_true(accepted < MAX_POLLS);
        usleep(1000);
    }
    sync_open(&s);
    pthread_join(th, NULL);
    expect_hits(sl, 0, QUEUED + accepted, 1);
    expect_hits(sl, QUEUED + accepted, QUEUED + accepted + 1, 0);
    assert_int_equal(s.finished, QUEUED + accepted);
    free(sl);
    sync_destroy(&s);
}

static void defaults_and_null(void **state)
{
    (void)state;
    struct tile_pool *pool = tile_pool_init(0, 0, NULL);
    assert_non_null(pool);
    assert_int_equal(tile_pool_size(pool), sysconf(_SC_NPROCESSORS_ONLN));
    assert_int_equal(tile_pool_queue_depth(pool), 0);
    tile_pool_free(pool);
    assert_int_equal(tile_pool_size(NULL), 0);
    tile_pool_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(submit_runs_each_job_once),
        cmocka_unit_test(full_queue_reported_at_once),
        cmocka_unit_test(parallel_runs_each_task_once),
        cmocka_unit_test(parallel_while_workers_blocked),
        cmocka_unit_test(sections_get_every_helper),
        cmocka_unit_test(job_after_section_runs),
        cmocka_unit_test(continuations_run_first),
        cmocka_unit_test(free_drains_queued_jobs),
        cmocka_unit_test(defaults_and_null),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
