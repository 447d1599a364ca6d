/* test_autosplit.c - the measured choice between one thread and the pool:
 * both ways are tried until each has samples, the faster median wins, the
 * other way is retried on schedule (and at once again when a retry comes
 * back clearly faster), a near tie stays on one thread,
 * outliers cannot flip the choice, a change of speed is followed, size
 * classes and kinds of work are independent, and absurd timings cannot wrap
 * the comparison. Timings
 * are fed in by hand, so every outcome is deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "autosplit.h"

#define MIB (UINT64_C(1) << 20)
#define W TILE_WORK_REPEAT /* the kind of work in most cases below */

static struct tile_autosplit stats;

static int reset(void **state)
{
    (void)state;
    memset(&stats, 0, sizeof(stats));
    return 0;
}

/* Runs `calls` decisions for `bytes` of `work`, recording `ns_one` /
 * `ns_pool` for whichever way was chosen; returns how often the pool was
 * chosen. */
static int drive_work(enum tile_split_work work, uint64_t bytes, int calls, uint64_t ns_one, uint64_t ns_pool)
{
    int pooled = 0;
    for (int i = 0; i < calls; i++) {
        enum tile_split_way w = tile_autosplit_choose(&stats, work, bytes);
        pooled += w == TILE_SPLIT_POOL;
        tile_autosplit_record(&stats, work, bytes, w, w == TILE_SPLIT_POOL ? ns_pool : ns_one);
    }
    return pooled;
}

static int drive(uint64_t bytes, int calls, uint64_t ns_one, uint64_t ns_pool)
{
    return drive_work(W, bytes, calls, ns_one, ns_pool);
}

static void warmup_tries_both(void **state)
{
    (void)state;
    /* Even when one way is far slower, each gets its warm-up samples. */
    assert_int_equal(drive(8 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 1000, 1000000), TILE_AUTOSPLIT_WARMUP);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, 8 * MIB, TILE_SPLIT_ONE), 0);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, 8 * MIB, TILE_SPLIT_POOL), 0);
}

/* In any TILE_AUTOSPLIT_EXPLORE consecutive calls, exactly one is a retry
 * of the slower way. */
static void faster_way_wins_and_other_is_retried(void **state)
{
    (void)state;
    drive(16 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 2000, 1000);
    int calls = 10 * TILE_AUTOSPLIT_EXPLORE;
    int pooled = drive(16 * MIB, calls, 2000, 1000);
    assert_int_equal(pooled, calls - calls / TILE_AUTOSPLIT_EXPLORE); /* one retry per EXPLORE calls */

    memset(&stats, 0, sizeof(stats));
    drive(16 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 1000, 2000);
    assert_int_equal(drive(16 * MIB, calls, 1000, 2000), calls / TILE_AUTOSPLIT_EXPLORE);
}

/* A pool only 5% faster is a tie, and a tie stays on one thread. */
static void near_tie_stays_on_one_thread(void **state)
{
    (void)state;
    drive(16 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 1000, 950);
    assert_int_equal(drive(16 * MIB, TILE_AUTOSPLIT_EXPLORE, 1000, 950), 1);
    memset(&stats, 0, sizeof(stats));
    drive(16 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 1000, 850);
    assert_int_equal(drive(16 * MIB, TILE_AUTOSPLIT_EXPLORE, 1000, 850), TILE_AUTOSPLIT_EXPLORE - 1);
}

static void outliers_do_not_flip(void **state)
{
    (void)state;
    uint64_t b = 64 * MIB;
    for (int i = 0; i < TILE_AUTOSPLIT_WINDOW; i++) {
        tile_autosplit_record(&stats, W, b, TILE_SPLIT_ONE, 3000);
        /* the pool is faster, but three of its eight runs were preempted */
        tile_autosplit_record(&stats, W, b, TILE_SPLIT_POOL, i % 3 == 0 ? 90000000 : 2000);
    }
    assert_true(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_POOL) <
                tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_ONE));
    assert_int_equal(drive(b, TILE_AUTOSPLIT_EXPLORE, 3000, 2000), TILE_AUTOSPLIT_EXPLORE - 1);
}

static void follows_a_change(void **state)
{
    (void)state;
    uint64_t b = 32 * MIB;
    drive(b, 2 * TILE_AUTOSPLIT_WARMUP, 2000, 1000);
    assert_int_equal(tile_autosplit_choose(&stats, W, b), TILE_SPLIT_POOL);
    /* The machine gets busy: splitting now costs more. The retries of the
     * one-thread way bring fresh samples, and the choice follows. */
    drive(b, 40 * TILE_AUTOSPLIT_EXPLORE, 2000, 5000);
    assert_int_equal(drive(b, TILE_AUTOSPLIT_EXPLORE, 2000, 5000), 1); /* the scheduled retry only */
}

/* The pool's warm-up runs were slowed (a neighbour, the workers' cold
 * start) and one thread won; then the pool is twice as fast. Its first
 * scheduled retry shows it, is repeated until its median follows, and the
 * pool is the choice within two retry periods, not the ~5 periods that
 * scheduled retries alone need to replace half the window. */
static void fast_retry_is_repeated(void **state)
{
    (void)state;
    uint64_t b = 16 * MIB;
    drive(b, 2 * TILE_AUTOSPLIT_WARMUP, 2000, 5000);
    assert_int_equal(drive(b, TILE_AUTOSPLIT_EXPLORE, 2000, 5000), 1); /* one thread, one slow retry */
    drive(b, 2 * TILE_AUTOSPLIT_EXPLORE, 2000, 1000);
    assert_int_equal(drive(b, TILE_AUTOSPLIT_EXPLORE, 2000, 1000), TILE_AUTOSPLIT_EXPLORE - 1);
    /* and back: once one thread is the faster, its retries bring it back as fast */
    drive(b, 2 * TILE_AUTOSPLIT_EXPLORE, 500, 1000);
    assert_int_equal(drive(b, TILE_AUTOSPLIT_EXPLORE, 500, 1000), 1);
}

static void size_classes_are_independent(void **state)
{
    (void)state;
    drive(4 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 1000, 2000);   /* small: one thread */
    drive(256 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 2000, 1000); /* large: the pool */
    assert_int_equal(drive(5 * MIB, TILE_AUTOSPLIT_EXPLORE, 1000, 2000), 1);
    assert_int_equal(drive(300 * MIB, TILE_AUTOSPLIT_EXPLORE, 2000, 1000), TILE_AUTOSPLIT_EXPLORE - 1);
    assert_int_equal(tile_autosplit_estimate(&stats, W, 64 * MIB, TILE_SPLIT_ONE), 0); /* untouched class */
    /* Sizes beyond the last class share it rather than overflow the table. */
    tile_autosplit_record(&stats, W, UINT64_MAX, TILE_SPLIT_ONE, UINT64_MAX);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, UINT64_MAX / 2, TILE_SPLIT_ONE), 0);
}

/* A copy and a repeated tile of the same size use the memory differently:
 * what one learns must not decide for the other. */
static void work_kinds_are_independent(void **state)
{
    (void)state;
    drive_work(TILE_WORK_COPY, 64 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 2000, 1000);   /* copies: the pool */
    drive_work(TILE_WORK_REPEAT, 64 * MIB, 2 * TILE_AUTOSPLIT_WARMUP, 1000, 2000); /* repeats: one thread */
    assert_int_equal(drive_work(TILE_WORK_COPY, 64 * MIB, TILE_AUTOSPLIT_EXPLORE, 2000, 1000),
                     TILE_AUTOSPLIT_EXPLORE - 1);
    assert_int_equal(drive_work(TILE_WORK_REPEAT, 64 * MIB, TILE_AUTOSPLIT_EXPLORE, 1000, 2000), 1);
}

/* A sample so slow that scaling it for the comparison would wrap around
 * (about 51 days for 1 KiB) still counts as slow, not as fast. */
static void absurd_timings_do_not_wrap(void **state)
{
    (void)state;
    uint64_t wraps = UINT64_MAX / 100 / 1000 + 1; /* ns whose ps/KiB * 100 passes 2^64 */
    drive(1024, 2 * TILE_AUTOSPLIT_WARMUP, 1000, wraps);
    assert_int_equal(drive(1024, TILE_AUTOSPLIT_EXPLORE, 1000, wraps), 1); /* the scheduled retry only */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(warmup_tries_both, reset),
        cmocka_unit_test_setup(faster_way_wins_and_other_is_retried, reset),
        cmocka_unit_test_setup(near_tie_stays_on_one_thread, reset),
        cmocka_unit_test_setup(outliers_do_not_flip, reset),
        cmocka_unit_test_setup(follows_a_change, reset),
        cmocka_unit_test_setup(fast_retry_is_repeated, reset),
        cmocka_unit_test_setup(size_classes_are_independent, reset),
        cmocka_unit_test_setup(work_kinds_are_independent, reset),
        cmocka_unit_test_setup(absurd_timings_do_not_wrap, reset),
    };
    return cmocka_run_group_tests_name("autosplit", tests, NULL, NULL);
}
