/* test_recv_deadline.c - the receive deadline both transports share: the
 * timeout, a second per TILED_RECV_MIN_RATE bytes, and saturation instead
 * of wrap-around for huge timeouts, byte counts and start times. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "recv_deadline.h"

static void the_timeout_then_a_second_per_rate_bytes(void **state)
{
    (void)state;
    assert_int_equal(tiled_recv_deadline_us(1000, 0, 0), 1000);
    assert_int_equal(tiled_recv_deadline_us(1000, 30, 0), 1000 + 30000000ull);
    assert_int_equal(tiled_recv_deadline_us(0, 1, TILED_RECV_MIN_RATE), 2000000ull);
    assert_int_equal(tiled_recv_deadline_us(0, 1, 1), 1000000ull + 1000000ull / TILED_RECV_MIN_RATE);
    /* 1 GiB at exactly the rate: never late. */
    uint64_t gib = 1ull << 30;
    assert_int_equal(tiled_recv_deadline_us(5, 2, gib), 5 + 2000000ull + gib * 1000000ull / TILED_RECV_MIN_RATE);
}

static void huge_values_saturate(void **state)
{
    (void)state;
    assert_true(tiled_recv_deadline_us(0, UINT64_MAX, 0) == UINT64_MAX);
    assert_true(tiled_recv_deadline_us(0, 0, UINT64_MAX) == UINT64_MAX);
    assert_true(tiled_recv_deadline_us(UINT64_MAX - 10, 1, 0) == UINT64_MAX);
    assert_true(tiled_recv_deadline_us(1, UINT64_MAX / 1000000, UINT64_MAX / 2000) == UINT64_MAX);
    /* Just below the limit: exact. */
    assert_true(tiled_recv_deadline_us(UINT64_MAX - 3000000, 1, 1000) == UINT64_MAX - 3000000 + 3000000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_timeout_then_a_second_per_rate_bytes),
        cmocka_unit_test(huge_values_saturate),
    };
    return cmocka_run_group_tests_name("recv_deadline", tests, NULL, NULL);
}
