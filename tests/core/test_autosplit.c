/* test_autosplit.c - the measured choice between one thread and the pool:
 * both ways are tried, one run after the other, until each has samples;
 * only a call after the way's settling calls is a sample; the faster
 * median wins; the other way is tried again in runs that end with a sample, first
 * TILE_AUTOSPLIT_EXPLORE calls after the choice and then at doubling gaps
 * up to TILE_AUTOSPLIT_EXPLORE_MAX (and at once again when a trial comes
 * back clearly faster), only at the longest gap while the pool is far
 * ahead; a near
 * tie stays on one thread; outliers cannot
 * flip the choice; a change of speed is followed; size classes and kinds
 * of work are independent; absurd timings cannot wrap the comparison.
 * Timings are fed in by hand, so every outcome is deterministic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "autosplit.h"

#define MIB (UINT64_C(1) << 20)
#define W TILE_WORK_REPEAT /* the kind of work in most cases below */
/* The warm-up: each way's run is its settling calls and its samples. */
#define WARM_ONE (TILE_AUTOSPLIT_SETTLE_ONE + TILE_AUTOSPLIT_WARMUP)
#define WARM_CALLS (WARM_ONE + TILE_AUTOSPLIT_SETTLE_POOL + TILE_AUTOSPLIT_WARMUP)
/* A trial of each way: its settling calls and one sample. */
#define TRIAL_ONE (TILE_AUTOSPLIT_SETTLE_ONE + 1)
#define TRIAL_POOL (TILE_AUTOSPLIT_SETTLE_POOL + 1)
#define MAX_CALLS 4096

static struct tile_autosplit stats;

static int reset(void **state)
{
    (void)state;
    memset(&stats, 0, sizeof(stats));
    return 0;
}

/* Runs `calls` decisions for `bytes` of `work`, recording `ns_one` /
 * `ns_pool` for whichever way was chosen; returns how often the pool was
 * chosen, and the ways in `ways` ('o' one thread, 'p' the pool) if given. */
static int drive_work(enum tile_split_work work, uint64_t bytes, int calls, uint64_t ns_one, uint64_t ns_pool,
                      char *ways)
{
    int pooled = 0;
    for (int i = 0; i < calls; i++) {
        enum tile_split_way w = tile_autosplit_choose(&stats, work, bytes);
        pooled += w == TILE_SPLIT_POOL;
        if (ways)
            ways[i] = w == TILE_SPLIT_POOL ? 'p' : 'o';
        tile_autosplit_record(&stats, work, bytes, w, w == TILE_SPLIT_POOL ? ns_pool : ns_one);
    }
    if (ways)
        ways[calls] = 0;
    return pooled;
}

static int drive(uint64_t bytes, int calls, uint64_t ns_one, uint64_t ns_pool)
{
    return drive_work(W, bytes, calls, ns_one, ns_pool, NULL);
}

/* The warm-up is one run of each way, one thread first, each its settling
 * calls and then its samples, however slow the other way is. */
static void warmup_runs_each_way(void **state)
{
    (void)state;
    char ways[WARM_CALLS + 1], want[WARM_CALLS + 1];
    for (int i = 0; i < WARM_CALLS; i++)
        want[i] = i < WARM_ONE ? 'o' : 'p';
    want[WARM_CALLS] = 0;
    drive_work(W, 8 * MIB, 1, 1000, 1000000, ways);
    assert_int_equal(tile_autosplit_estimate(&stats, W, 8 * MIB, TILE_SPLIT_ONE), 0); /* it only settled */
    drive_work(W, 8 * MIB, WARM_CALLS - 1, 1000, 1000000, ways + 1);
    assert_string_equal(ways, want);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, 8 * MIB, TILE_SPLIT_ONE), 0);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, 8 * MIB, TILE_SPLIT_POOL), 0);
}

/* A call that follows one of the other way is not a sample (nor, for the
 * pool, the one after it), nor is one reported as run but not timed
 * (tile_autosplit_ran); it still counts towards the way's settling. */
static void a_switch_only_settles(void **state)
{
    (void)state;
    uint64_t b = 16 * MIB;
    for (int i = 0; i < 8; i++)
        tile_autosplit_record(&stats, W, b, (enum tile_split_way)(i % 2), 1000);
    assert_int_equal(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_ONE), 0);
    assert_int_equal(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_POOL), 0);
    tile_autosplit_ran(&stats, W, b, TILE_SPLIT_ONE);
    assert_int_equal(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_ONE), 0);
    tile_autosplit_record(&stats, W, b, TILE_SPLIT_ONE, 1000);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_ONE), 0);
    tile_autosplit_ran(&stats, W, b, TILE_SPLIT_POOL);
    tile_autosplit_record(&stats, W, b, TILE_SPLIT_POOL, 1000);
    assert_int_equal(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_POOL), 0);
    tile_autosplit_record(&stats, W, b, TILE_SPLIT_POOL, 1000);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_POOL), 0);
}

/* Where the trials of `way` in `ways` start; each must be a run of exactly
 * the way's settling calls and one more (one cut off at the end may be
 * shorter). Returns how many there are. */
static int trial_starts(const char *ways, char way, int *starts, int cap)
{
    int n = 0, len = way == 'p' ? TRIAL_POOL : TRIAL_ONE;
    for (int i = 0; ways[i];) {
        int j = i;
        while (ways[j] == ways[i])
            j++;
        if (ways[i] == way) {
            assert_true(j - i == len || (!ways[j] && j - i < len));
            assert_true(n < cap);
            starts[n++] = i;
        }
        i = j;
    }
    return n;
}

/* The slower way is tried in runs of its settling calls and a sample: the
 * first TILE_AUTOSPLIT_EXPLORE calls after the choice, then after gaps that double up to
 * TILE_AUTOSPLIT_EXPLORE_MAX, whichever way is the faster (the pool 1.2x
 * as fast as one thread, or one thread twice as fast as the pool). */
static void faster_way_wins_and_trials_back_off(void **state)
{
    (void)state;
    static char ways[MAX_CALLS + 1];
    int starts[64];
    for (int faster = 0; faster < 2; faster++) {
        uint64_t one = faster ? 1200 : 1000, pool = faster ? 1000 : 2000;
        memset(&stats, 0, sizeof(stats));
        drive(16 * MIB, WARM_CALLS, one, pool);
        int calls = 8 * TILE_AUTOSPLIT_EXPLORE_MAX;
        drive_work(W, 16 * MIB, calls, one, pool, ways);
        int n = trial_starts(ways, faster ? 'o' : 'p', starts, 64);
        assert_true(n >= 6);
        assert_int_equal(starts[0], TILE_AUTOSPLIT_EXPLORE);
        int gap = 2 * TILE_AUTOSPLIT_EXPLORE;
        for (int i = 1; i < n; i++) {
            assert_int_equal(starts[i] - starts[i - 1], gap);
            gap = gap * 2 < TILE_AUTOSPLIT_EXPLORE_MAX ? gap * 2 : TILE_AUTOSPLIT_EXPLORE_MAX;
        }
        assert_int_equal(gap, TILE_AUTOSPLIT_EXPLORE_MAX);
    }
}

/* While the pool is at least TILE_AUTOSPLIT_CLEAR_PCT percent as fast as
 * one thread, one thread is tried only every TILE_AUTOSPLIT_EXPLORE_MAX
 * calls; under that bound, from TILE_AUTOSPLIT_EXPLORE on. */
static void pool_far_ahead_is_retried_rarely(void **state)
{
    (void)state;
    static char ways[MAX_CALLS + 1];
    int starts[64], calls = 4 * TILE_AUTOSPLIT_EXPLORE_MAX;
    /* At the bound and just under it, in times that are whole picoseconds per KiB. */
    uint64_t pool = 16384 * 1000, at = pool * TILE_AUTOSPLIT_CLEAR_PCT / 100, under = at - 16384;
    const uint64_t ones[] = {2 * pool, at};
    for (size_t i = 0; i < sizeof(ones) / sizeof(ones[0]); i++) {
        memset(&stats, 0, sizeof(stats));
        drive(16 * MIB, WARM_CALLS, ones[i], pool);
        drive_work(W, 16 * MIB, calls, ones[i], pool, ways);
        int n = trial_starts(ways, 'o', starts, 64);
        assert_true(n >= 2 && n <= calls / TILE_AUTOSPLIT_EXPLORE_MAX);
        assert_true(starts[0] >= TILE_AUTOSPLIT_EXPLORE_MAX);
        for (int k = 1; k < n; k++)
            assert_int_equal(starts[k] - starts[k - 1], TILE_AUTOSPLIT_EXPLORE_MAX);
    }
    memset(&stats, 0, sizeof(stats));
    drive(16 * MIB, WARM_CALLS, under, pool);
    drive_work(W, 16 * MIB, calls, under, pool, ways);
    assert_int_equal(trial_starts(ways, 'o', starts, 64) > 0 ? starts[0] : -1, TILE_AUTOSPLIT_EXPLORE);
}

/* A pool only 5% faster is a tie, and a tie stays on one thread; 15% is
 * not a tie. */
static void near_tie_stays_on_one_thread(void **state)
{
    (void)state;
    int calls = 2 * TILE_AUTOSPLIT_EXPLORE;
    drive(16 * MIB, WARM_CALLS, 1000, 950);
    assert_int_equal(drive(16 * MIB, calls, 1000, 950), TRIAL_POOL); /* one trial */
    memset(&stats, 0, sizeof(stats));
    drive(16 * MIB, WARM_CALLS, 1000, 850);
    assert_int_equal(drive(16 * MIB, calls, 1000, 850), calls - TRIAL_ONE);
}

static void outliers_do_not_flip(void **state)
{
    (void)state;
    uint64_t b = 64 * MIB;
    for (int i = 0; i <= TILE_AUTOSPLIT_WINDOW; i++)
        tile_autosplit_record(&stats, W, b, TILE_SPLIT_ONE, 3000);
    for (int i = 0; i <= TILE_AUTOSPLIT_WINDOW; i++) /* the pool is faster, but three runs were preempted */
        tile_autosplit_record(&stats, W, b, TILE_SPLIT_POOL, i % 3 == 1 ? 90000000 : 2000);
    assert_true(tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_POOL) <
                tile_autosplit_estimate(&stats, W, b, TILE_SPLIT_ONE));
    assert_int_equal(drive(b, TILE_AUTOSPLIT_EXPLORE, 3000, 2000), TILE_AUTOSPLIT_EXPLORE);
}

/* The first call of `ways` from which `way` is the choice for good: every
 * later run of the other way is a trial (its settling calls and a sample;
 * fewer, if cut off at the end); -1 if it never is. */
static int settled_on(const char *ways, char way)
{
    int from = -1, len = way == 'p' ? TRIAL_ONE : TRIAL_POOL;
    for (int i = 0; ways[i];) {
        int j = i;
        while (ways[j] == ways[i])
            j++;
        if (ways[i] == way && from < 0)
            from = i;
        else if (ways[i] != way && (j - i > len || (j - i < len && ways[j])))
            from = -1;
        i = j;
    }
    return from;
}

/* The machine gets busy: splitting now costs more. One thread becomes the
 * choice as soon as the pool's median follows (half a window), and the
 * pool is tried again TILE_AUTOSPLIT_EXPLORE calls later. Then the pool
 * gets faster than before: its next trial shows it, is repeated until its
 * median follows, and the choice changes within a trial period and a
 * window, not the ~5 periods that scheduled trials alone need to replace
 * half the window. */
static void follows_a_change(void **state)
{
    (void)state;
    static char ways[MAX_CALLS + 1];
    uint64_t b = 32 * MIB;
    drive(b, WARM_CALLS, 2000, 1000);
    drive(b, 4 * TILE_AUTOSPLIT_EXPLORE_MAX, 2000, 1000); /* the trials are as rare as they get */
    drive_work(W, b, 3 * TILE_AUTOSPLIT_EXPLORE_MAX, 2000, 5000, ways);
    int from = settled_on(ways, 'o');
    assert_true(from >= 0 && from <= TILE_AUTOSPLIT_WINDOW);
    assert_int_equal(ways[from + TILE_AUTOSPLIT_EXPLORE - 1], 'o');
    for (int k = 0; k < TRIAL_POOL; k++)
        assert_int_equal(ways[from + TILE_AUTOSPLIT_EXPLORE + k], 'p');
    assert_int_equal(ways[from + TILE_AUTOSPLIT_EXPLORE + TRIAL_POOL], 'o');
    drive_work(W, b, 3 * TILE_AUTOSPLIT_EXPLORE_MAX, 2000, 500, ways);
    from = settled_on(ways, 'p');
    assert_true(from >= 0 && from <= TILE_AUTOSPLIT_EXPLORE_MAX + TILE_AUTOSPLIT_WINDOW);
}

static void size_classes_are_independent(void **state)
{
    (void)state;
    int calls = TILE_AUTOSPLIT_EXPLORE; /* before the first trial */
    drive(1 * MIB, WARM_CALLS, 1000, 2000);   /* small: one thread */
    drive(256 * MIB, WARM_CALLS, 2000, 1000); /* large: the pool */
    assert_int_equal(drive(1 * MIB + 5, calls, 1000, 2000), 0);
    assert_int_equal(drive(300 * MIB, calls, 2000, 1000), calls);
    assert_int_equal(tile_autosplit_estimate(&stats, W, 64 * MIB, TILE_SPLIT_ONE), 0); /* untouched class */
    /* Sizes beyond the last class share it rather than overflow the table. */
    tile_autosplit_record(&stats, W, UINT64_MAX, TILE_SPLIT_ONE, UINT64_MAX);
    tile_autosplit_record(&stats, W, UINT64_MAX, TILE_SPLIT_ONE, UINT64_MAX);
    assert_int_not_equal(tile_autosplit_estimate(&stats, W, UINT64_MAX / 2, TILE_SPLIT_ONE), 0);
}

/* A copy and a repeated tile of the same size use the memory differently:
 * what one learns must not decide for the other. */
static void work_kinds_are_independent(void **state)
{
    (void)state;
    int calls = TILE_AUTOSPLIT_EXPLORE;
    drive_work(TILE_WORK_COPY, 64 * MIB, WARM_CALLS, 2000, 1000, NULL);   /* copies: the pool */
    drive_work(TILE_WORK_REPEAT, 64 * MIB, WARM_CALLS, 1000, 2000, NULL); /* repeats: one thread */
    assert_int_equal(drive_work(TILE_WORK_COPY, 64 * MIB, calls, 2000, 1000, NULL), calls);
    assert_int_equal(drive_work(TILE_WORK_REPEAT, 64 * MIB, calls, 1000, 2000, NULL), 0);
}

/* A sample so slow that scaling it for the comparison would wrap around
 * (about 51 days for 1 KiB) still counts as slow, not as fast. */
static void absurd_timings_do_not_wrap(void **state)
{
    (void)state;
    uint64_t wraps = UINT64_MAX / 100 / 1000 + 1; /* ns whose ps/KiB * 100 passes 2^64 */
    drive(1024, WARM_CALLS, 1000, wraps);
    assert_int_equal(drive(1024, 2 * TILE_AUTOSPLIT_EXPLORE, 1000, wraps), TRIAL_POOL); /* the scheduled trial only */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(warmup_runs_each_way, reset),
        cmocka_unit_test_setup(a_switch_only_settles, reset),
        cmocka_unit_test_setup(faster_way_wins_and_trials_back_off, reset),
        cmocka_unit_test_setup(pool_far_ahead_is_retried_rarely, reset),
        cmocka_unit_test_setup(near_tie_stays_on_one_thread, reset),
        cmocka_unit_test_setup(outliers_do_not_flip, reset),
        cmocka_unit_test_setup(follows_a_change, reset),
        cmocka_unit_test_setup(size_classes_are_independent, reset),
        cmocka_unit_test_setup(work_kinds_are_independent, reset),
        cmocka_unit_test_setup(absurd_timings_do_not_wrap, reset),
    };
    return cmocka_run_group_tests_name("autosplit", tests, NULL, NULL);
}
