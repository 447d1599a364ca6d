/* test_stores.c - the store policy: cache sizes from the machine, the size
 * rule, the override the kernel tests use, and the measured choice between
 * plain and non-temporal stores (stores.h): streamed samples first, plain
 * ones only once settled, streaming never retried while plain stores are
 * far ahead, trials at doubling gaps (plain ones in settling runs), a
 * change followed, and a streamed call unsettling both lanes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "stores.h"

static void sizes_are_detected(void **state)
{
    (void)state;
    const struct tile_cache_sizes *c = tile_cache_sizes();
    assert_non_null(c->source);
    assert_true(strcmp(c->source, "sysfs") == 0 || strcmp(c->source, "sysconf") == 0 ||
                strcmp(c->source, "default") == 0);
    assert_true(c->llc_bytes >= (64u << 10)); /* no machine has a smaller last level */
    if (c->l2_bytes)
        assert_true(c->l2_bytes <= c->llc_bytes);
    /* plain stores up to the share of the LLC, exactly (no rounding loss) */
    uint64_t share = c->llc_bytes / 100 * TILE_STORES_CACHED_PCT + c->llc_bytes % 100 * TILE_STORES_CACHED_PCT / 100;
    assert_int_equal(tile_stores_stream_min(), share + 1);
    if (TILE_STORES_CACHED_PCT == 100)
        assert_int_equal(tile_stores_stream_min(), c->llc_bytes + 1);
}

static void size_rule_splits_at_the_share(void **state)
{
    (void)state;
    uint64_t min = tile_stores_stream_min();
    tile_stores_force(TILE_STORES_AUTO);
    assert_false(tile_stores_stream(0));
    assert_false(tile_stores_stream(min - 1));
    assert_true(tile_stores_stream(min));
    assert_true(tile_stores_stream(UINT64_MAX));
}

static void override_wins_and_restores(void **state)
{
    (void)state;
    uint64_t min = tile_stores_stream_min();
    tile_stores_force(TILE_STORES_STREAM);
    assert_true(tile_stores_stream(1));
    tile_stores_force(TILE_STORES_CACHED);
    assert_false(tile_stores_stream(min * 4));
    tile_stores_force(TILE_STORES_AUTO);
    assert_false(tile_stores_stream(1));
    assert_true(tile_stores_stream(min * 4));
}

/* ---- the measured choice: timings fed in by hand, outcomes exact ---- */

#define MAX_CALLS 8192
/* The warm-up: streamed samples, then plain calls settling and sampled. */
#define WARM_CALLS (2 * TILE_STORES_WARMUP + TILE_STORES_SETTLE)

/* A size the stores are measured for, or 0 if this machine's last-level
 * cache is too small to have one (the size rule then decides alone). */
static uint64_t measured_size(void)
{
    uint64_t b = TILE_STORES_MEASURED_MIN;
    return b < tile_stores_stream_min() ? b : 0;
}

static int forget(void **state)
{
    (void)state;
    tile_stores_force(TILE_STORES_AUTO);
    tile_stores_forget();
    return 0;
}

/* Runs `calls` picks on `lane`, reporting `ns_plain` / `ns_stream` for the
 * kind picked; the kinds in `kinds` ('p' plain, 's' streamed) and whether
 * each call was typical in `typical` ('t' or '-'), if given. Returns how
 * many were streamed. */
static int drive(uint64_t b, int lane, int calls, uint64_t ns_plain, uint64_t ns_stream, char *kinds, char *typical)
{
    int streamed = 0;
    for (int i = 0; i < calls; i++) {
        bool s = tile_stores_pick(b, lane);
        bool t = tile_stores_learned(b, lane, s, s ? ns_stream : ns_plain);
        streamed += s;
        if (kinds)
            kinds[i] = s ? 's' : 'p';
        if (typical)
            typical[i] = t ? 't' : '-';
    }
    if (kinds)
        kinds[calls] = 0;
    if (typical)
        typical[calls] = 0;
    return streamed;
}

/* Outside the measured sizes, and whenever a kind is forced, the size rule
 * or the override decides, every call is typical and nothing is learnt. */
static void size_rule_outside_the_measured_sizes(void **state)
{
    (void)state;
    uint64_t small = TILE_STORES_MEASURED_MIN - 1, big = tile_stores_stream_min();
    for (int i = 0; i < 3 * WARM_CALLS; i++) {
        assert_false(tile_stores_pick(small, 0));
        assert_true(tile_stores_learned(small, 0, true, 1));
        assert_true(tile_stores_pick(big, 1));
        assert_true(tile_stores_learned(big, 1, false, 1));
    }
    assert_false(tile_stores_best(small, 0));
    assert_true(tile_stores_best(big, 1));
    uint64_t b = measured_size();
    if (!b)
        return;
    tile_stores_force(TILE_STORES_CACHED);
    assert_false(tile_stores_pick(b, 0));
    assert_true(tile_stores_learned(b, 0, false, 1));
    tile_stores_force(TILE_STORES_AUTO);
    assert_false(tile_stores_best(b, 0)); /* nothing learnt: the size rule */
}

/* Streamed samples first, then plain calls: the first TILE_STORES_SETTLE
 * after a streamed one are not samples (the output is coming back into the
 * cache), and no warm-up call is typical. */
static void warmup_streams_then_settles(void **state)
{
    (void)state;
    uint64_t b = measured_size();
    if (!b)
        skip();
    char kinds[WARM_CALLS + 2], typical[WARM_CALLS + 2], want[WARM_CALLS + 2];
    drive(b, 0, WARM_CALLS + 1, 1000, 3000, kinds, typical);
    for (int i = 0; i <= WARM_CALLS; i++)
        want[i] = i < TILE_STORES_WARMUP ? 's' : 'p';
    want[WARM_CALLS + 1] = 0;
    assert_string_equal(kinds, want);
    for (int i = 0; i < WARM_CALLS; i++)
        assert_int_equal(typical[i], '-');
    assert_int_equal(typical[WARM_CALLS], 't');
    assert_false(tile_stores_best(b, 0));
}

/* Plain stores at least TILE_STORES_CLEAR_PCT percent as fast as streaming:
 * streaming is never tried again. */
static void plain_far_ahead_is_not_retried(void **state)
{
    (void)state;
    uint64_t b = measured_size();
    if (!b)
        skip();
    drive(b, 0, WARM_CALLS, 1000, 3000, NULL, NULL);
    assert_int_equal(drive(b, 0, 4 * TILE_STORES_GAP_MAX, 1000, 3000, NULL, NULL), 0);
}

/* Where the trials of `kind` in `kinds` start, each a run of `len` calls. */
static int trial_starts(const char *kinds, char kind, int len, int *starts, int cap)
{
    int n = 0;
    for (int i = 0; kinds[i];) {
        int j = i;
        while (kinds[j] == kinds[i])
            j++;
        if (kinds[i] == kind) {
            assert_true(j - i == len || !kinds[j]); /* one cut off at the end is shorter */
            assert_true(n < cap);
            starts[n++] = i;
        }
        i = j;
    }
    return n;
}

static void check_gaps(const int *starts, int n)
{
    assert_true(n >= 5);
    assert_int_equal(starts[0], TILE_STORES_GAP_MIN);
    int gap = TILE_STORES_GAP_MIN;
    for (int i = 1; i < n; i++) {
        assert_int_equal(starts[i] - starts[i - 1], gap);
        gap = gap * 2 < TILE_STORES_GAP_MAX ? gap * 2 : TILE_STORES_GAP_MAX;
    }
}

/* Plain stores ahead, but not far: one streamed call now and then, first
 * TILE_STORES_GAP_MIN calls after the choice and then at doubling gaps;
 * the plain calls after each are not typical until they have settled. */
static void plain_ahead_streaming_tried_at_doubling_gaps(void **state)
{
    (void)state;
    uint64_t b = measured_size();
    if (!b)
        skip();
    static char kinds[MAX_CALLS + 1], typical[MAX_CALLS + 1];
    int starts[64];
    drive(b, 0, WARM_CALLS, 1000, 1200, NULL, NULL);
    drive(b, 0, 3 * TILE_STORES_GAP_MAX, 1000, 1200, kinds, typical);
    int n = trial_starts(kinds, 's', 1, starts, 64);
    check_gaps(starts, n);
    for (int i = starts[1]; i < starts[2]; i++)
        assert_int_equal(typical[i], i <= starts[1] + TILE_STORES_SETTLE ? '-' : 't');
}

/* Streaming faster: plain stores are tried in runs of TILE_STORES_SETTLE + 1
 * calls (only the last is a sample), at the same doubling gaps. */
static void stream_ahead_plain_tried_in_runs(void **state)
{
    (void)state;
    uint64_t b = measured_size();
    if (!b)
        skip();
    static char kinds[MAX_CALLS + 1], typical[MAX_CALLS + 1];
    int starts[64];
    drive(b, 1, WARM_CALLS, 3000, 1000, NULL, NULL);
    drive(b, 1, 3 * TILE_STORES_GAP_MAX, 3000, 1000, kinds, typical);
    int n = trial_starts(kinds, 'p', TILE_STORES_SETTLE + 1, starts, 64);
    check_gaps(starts, n);
    for (int i = starts[1] - 1; i < starts[2]; i++)
        assert_int_equal(typical[i], kinds[i] == 's' ? 't' : '-');
    assert_true(tile_stores_best(b, 1));
    assert_false(tile_stores_best(b, 0)); /* the other lane learnt nothing */
}

/* The first call of `kinds` from which `kind` is the choice for good
 * (later runs of the other kind no longer than `trial`), or -1. */
static int settled_on(const char *kinds, char kind, int trial)
{
    int from = -1;
    for (int i = 0; kinds[i];) {
        int j = i;
        while (kinds[j] == kinds[i])
            j++;
        if (kinds[i] == kind && from < 0)
            from = i;
        else if (kinds[i] != kind && j - i > trial)
            from = -1;
        i = j;
    }
    return from;
}

/* The cache gets busy: plain stores slow down, streaming is tried (plain
 * is no longer far ahead) and wins. Then it gets quiet: the next plain
 * trial shows it and goes on until plain stores are the choice again,
 * within a gap and a window. */
static void follows_a_change(void **state)
{
    (void)state;
    uint64_t b = measured_size();
    if (!b)
        skip();
    static char kinds[MAX_CALLS + 1];
    drive(b, 0, WARM_CALLS, 1000, 3000, NULL, NULL);
    drive(b, 0, 2 * TILE_STORES_GAP_MAX, 1000, 3000, NULL, NULL);
    drive(b, 0, 3 * TILE_STORES_GAP_MAX, 5000, 3000, kinds, NULL);
    int from = settled_on(kinds, 's', TILE_STORES_SETTLE + 1);
    assert_true(from >= 0 && from <= TILE_STORES_GAP_MIN + 2 * TILE_STORES_WINDOW);
    drive(b, 0, 3 * TILE_STORES_GAP_MAX, 1000, 3000, kinds, NULL);
    from = settled_on(kinds, 'p', 1);
    assert_true(from >= 0 && from <= TILE_STORES_GAP_MAX + TILE_STORES_SETTLE + 2 * TILE_STORES_WINDOW);
}

/* A streamed call on either lane takes the output out of the cache for
 * both: the other lane's next plain calls are not samples until settled. */
static void a_streamed_call_unsettles_both_lanes(void **state)
{
    (void)state;
    uint64_t b = measured_size();
    if (!b)
        skip();
    char typical[TILE_STORES_SETTLE + 2];
    drive(b, 0, WARM_CALLS + 4, 1000, 3000, NULL, NULL);
    assert_false(tile_stores_learned(b, 1, true, 3000));
    drive(b, 0, TILE_STORES_SETTLE + 1, 1000, 3000, NULL, typical);
    for (int i = 0; i <= TILE_STORES_SETTLE; i++)
        assert_int_equal(typical[i], i < TILE_STORES_SETTLE ? '-' : 't');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes_are_detected),
        cmocka_unit_test(size_rule_splits_at_the_share),
        cmocka_unit_test(override_wins_and_restores),
        cmocka_unit_test_setup(size_rule_outside_the_measured_sizes, forget),
        cmocka_unit_test_setup(warmup_streams_then_settles, forget),
        cmocka_unit_test_setup(plain_far_ahead_is_not_retried, forget),
        cmocka_unit_test_setup(plain_ahead_streaming_tried_at_doubling_gaps, forget),
        cmocka_unit_test_setup(stream_ahead_plain_tried_in_runs, forget),
        cmocka_unit_test_setup(follows_a_change, forget),
        cmocka_unit_test_setup(a_streamed_call_unsettles_both_lanes, forget),
    };
    return cmocka_run_group_tests_name("stores", tests, NULL, NULL);
}
