/* test_stores.c - the store policy: cache sizes from the machine, the size
 * rule, and the override the kernel tests use. */
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

/* Above TILE_STORES_MEASURED_MIN the kind that was faster wins, per lane;
 * below it, and when forced, the size rule and the override hold, and
 * what is reported there is not learnt. */
static void measured_kind_wins_per_lane(void **state)
{
    (void)state;
    tile_stores_force(TILE_STORES_AUTO);
    uint64_t big = (uint64_t)TILE_STORES_MEASURED_MIN * 4, small = TILE_STORES_MEASURED_MIN - 1;
    bool prior = tile_stores_stream(big);
    assert_int_equal(tile_stores_best(big, 0), prior); /* nothing learnt yet */
    /* Streaming three times as fast on lane 0, plain stores on lane 1. */
    for (int i = 0; i < 8; i++) {
        tile_stores_learned(big, 0, true, 1000000);
        tile_stores_learned(big, 0, false, 3000000);
        tile_stores_learned(big, 1, true, 3000000);
        tile_stores_learned(big, 1, false, 1000000);
    }
    assert_true(tile_stores_best(big, 0));
    assert_false(tile_stores_best(big, 1));
    int streamed = 0;
    for (int i = 0; i < 32; i++)
        streamed += tile_stores_pick(big, 0);
    assert_true(streamed >= 28); /* the other kind only as the occasional trial */
    /* The size rule below the measured sizes, learnt from or not. */
    for (int i = 0; i < 8; i++)
        tile_stores_learned(small, 0, true, 1);
    assert_int_equal(tile_stores_pick(small, 0), tile_stores_stream(small));
    assert_int_equal(tile_stores_best(small, 0), tile_stores_stream(small));
    /* An override wins over what was learnt. */
    tile_stores_force(TILE_STORES_CACHED);
    assert_false(tile_stores_pick(big, 0));
    tile_stores_force(TILE_STORES_AUTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes_are_detected),
        cmocka_unit_test(size_rule_splits_at_the_share),
        cmocka_unit_test(override_wins_and_restores),
        cmocka_unit_test(measured_kind_wins_per_lane),
    };
    return cmocka_run_group_tests_name("stores", tests, NULL, NULL);
}
