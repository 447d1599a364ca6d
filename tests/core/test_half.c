/* test_half.c - float16 / bfloat16 conversions, exhaustively where it is cheap. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "half.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static float f32_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Independent reference: the value of a float16 pattern by its definition. */
static double f16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static double bf16_value(uint16_t h)
{
    int s = h >> 15, e = (h >> 7) & 0xFF, m = h & 0x7F;
    double v = e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return s ? -v : v;
}

static bool f16_is_nan(uint16_t h)
{
    return (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
}

static bool bf16_is_nan(uint16_t h)
{
    return (h & 0x7F80) == 0x7F80 && (h & 0x7F);
}

static void test_f16_widen_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tile_f16_to_f32((uint16_t)h);
        if (f16_is_nan((uint16_t)h)) {
            assert_true(isnan(f));
            /* payload and sign kept bit for bit */
            assert_int_equal(f32_bits(f), ((h & 0x8000u) << 16) | 0x7F800000u | ((h & 0x3FFu) << 13));
        } else if ((h & 0x7FFF) == 0x7C00) {
            assert_true(isinf(f));
            assert_int_equal(signbit(f) != 0, (h >> 15) != 0);
        } else {
            assert_true((double)f == f16_value((uint16_t)h));
            assert_int_equal(signbit(f) != 0, (h >> 15) != 0);
        }
    }
}

static void test_bf16_widen_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tile_bf16_to_f32((uint16_t)h);
        assert_int_equal(f32_bits(f), h << 16);
        if (!bf16_is_nan((uint16_t)h) && (h & 0x7F80) != 0x7F80)
            assert_true((double)f == bf16_value((uint16_t)h));
    }
}

/* Every pattern survives 16 -> double -> 16; NaNs come back quiet. */
static void test_round_trip_all(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = tile_f64_to_f16((double)tile_f16_to_f32((uint16_t)h));
        assert_int_equal(back, f16_is_nan((uint16_t)h) ? (h | 0x200u) : h);
        back = tile_f32_to_f16(tile_f16_to_f32((uint16_t)h));
        assert_int_equal(back, f16_is_nan((uint16_t)h) ? (h | 0x200u) : h);
        uint16_t bback = tile_f64_to_bf16((double)tile_bf16_to_f32((uint16_t)h));
        assert_int_equal(bback, bf16_is_nan((uint16_t)h) ? (h | 0x40u) : h);
        bback = tile_f32_to_bf16(tile_bf16_to_f32((uint16_t)h));
        assert_int_equal(bback, bf16_is_nan((uint16_t)h) ? (h | 0x40u) : h);
    }
}

/* Between every two adjacent positive values: the midpoint goes to the even
 * one, anything just off it to the nearer one, and the tie is reported. */
static void check_midpoints(uint16_t last, double (*value)(uint16_t), uint16_t (*round)(double),
                            bool (*is_tie)(double))
{
    for (uint32_t a = 0; a < last; a++) {
        double lo = value((uint16_t)a), hi = value((uint16_t)(a + 1));
        double mid = (lo + hi) / 2; /* exact: few significant bits */
        uint16_t even = (a & 1) ? (uint16_t)(a + 1) : (uint16_t)a;
        assert_int_equal(round(mid), even);
        assert_int_equal(round(-mid), even | 0x8000u);
        assert_int_equal(round(nextafter(mid, INFINITY)), a + 1);
        assert_int_equal(round(nextafter(mid, 0)), a);
        assert_int_equal(round(lo), a);
        assert_true(is_tie(mid));
        assert_true(is_tie(-mid));
        assert_false(is_tie(lo));
        assert_false(is_tie(nextafter(mid, 0)));
    }
}

static void test_f16_midpoints(void **state)
{
    (void)state;
    check_midpoints(0x7BFF, f16_value, tile_f64_to_f16, tile_f16_is_tie);
}

static void test_bf16_midpoints(void **state)
{
    (void)state;
    check_midpoints(0x7F7F, bf16_value, tile_f64_to_bf16, tile_bf16_is_tie);
}

static void test_f16_limits(void **state)
{
    (void)state;
    assert_int_equal(tile_f64_to_f16(65504.0), 0x7BFF);
    assert_int_equal(tile_f64_to_f16(65519.99), 0x7BFF);
    assert_int_equal(tile_f64_to_f16(nextafter(65520.0, 0)), 0x7BFF);
    assert_int_equal(tile_f64_to_f16(65520.0), 0x7C00); /* the tie goes to "even" infinity */
    assert_true(tile_f16_is_tie(65520.0));
    assert_int_equal(tile_f64_to_f16(-65520.0), 0xFC00);
    assert_int_equal(tile_f64_to_f16(1e300), 0x7C00);
    assert_int_equal(tile_f64_to_f16(INFINITY), 0x7C00);
    assert_int_equal(tile_f64_to_f16(-INFINITY), 0xFC00);
    assert_int_equal(tile_f32_to_f16(65520.0f), 0x7C00);
    assert_int_equal(tile_f32_to_f16(65504.0f), 0x7BFF);
    /* subnormals */
    assert_int_equal(tile_f64_to_f16(0x1p-24), 0x0001);
    assert_int_equal(tile_f64_to_f16(0x1p-25), 0x0000);             /* tie to even zero */
    assert_int_equal(tile_f64_to_f16(-0x1p-25), 0x8000);
    assert_int_equal(tile_f64_to_f16(nextafter(0x1p-25, 1)), 0x0001);
    assert_int_equal(tile_f64_to_f16(0x1.8p-24), 0x0002);           /* 1.5 ulp: tie to even 2 */
    assert_int_equal(tile_f64_to_f16(0x1p-26), 0x0000);
    assert_int_equal(tile_f64_to_f16(1e-300), 0x0000);
    assert_int_equal(tile_f64_to_f16(5e-324), 0x0000);
    assert_int_equal(tile_f64_to_f16(-5e-324), 0x8000);
    assert_int_equal(tile_f64_to_f16(1023 * 0x1p-24), 0x03FF);     /* largest subnormal */
    assert_int_equal(tile_f64_to_f16(1023.5 * 0x1p-24), 0x0400);   /* rounds up to the smallest normal */
    assert_int_equal(tile_f64_to_f16(0x1p-14), 0x0400);
    assert_int_equal(tile_f64_to_f16(0.0), 0x0000);
    assert_int_equal(tile_f64_to_f16(-0.0), 0x8000);
    /* binade carry and ties to even */
    assert_int_equal(tile_f64_to_f16(2047.0 / 1024 + 1.0 / 2048), 0x4000); /* 1.9995 + half ulp -> 2.0 */
    assert_int_equal(tile_f64_to_f16(1.0 + 1.0 / 2048), 0x3C00);           /* tie, 1.0 is even */
    assert_int_equal(tile_f64_to_f16(1.0 + 3.0 / 2048), 0x3C02);           /* tie, goes up to even */
    assert_int_equal(tile_f64_to_f16(0.1), 0x2E66);
    assert_int_equal(tile_f64_to_f16(1.0 / 3), 0x3555);
}

static void test_bf16_limits(void **state)
{
    (void)state;
    assert_int_equal(tile_f64_to_bf16(1.0), 0x3F80);
    assert_int_equal(tile_f64_to_bf16(0.1), 0x3DCD);
    assert_int_equal(tile_f64_to_bf16(3.3895313892515355e38), 0x7F7F); /* largest finite */
    double max = bf16_value(0x7F7F), over = max + ldexp(1, 127 - 8);    /* half an ulp above */
    assert_int_equal(tile_f64_to_bf16(over), 0x7F80);
    assert_int_equal(tile_f64_to_bf16(nextafter(over, 0)), 0x7F7F);
    assert_true(tile_bf16_is_tie(over));
    assert_int_equal(tile_f64_to_bf16(1e39), 0x7F80);
    assert_int_equal(tile_f64_to_bf16(-1e39), 0xFF80);
    assert_int_equal(tile_f64_to_bf16(0x1p-133), 0x0001);
    assert_int_equal(tile_f64_to_bf16(0x1p-134), 0x0000);
    assert_int_equal(tile_f64_to_bf16(nextafter(0x1p-134, 1)), 0x0001);
    assert_int_equal(tile_f64_to_bf16(0x1p-126), 0x0080);
    /* double rounding through float would get this wrong: the double is just
     * above a bfloat16 tie but rounds to the tie as a float */
    double d = 1.0 + 0x1p-8 + 0x1p-40;
    assert_int_equal(tile_f32_to_bf16((float)d), 0x3F80);
    assert_int_equal(tile_f64_to_bf16(d), 0x3F81);
}

static void test_nan(void **state)
{
    (void)state;
    assert_int_equal(tile_f64_to_f16(NAN), 0x7E00);
    assert_int_equal(tile_f64_to_f16(-NAN), 0xFE00);
    assert_int_equal(tile_f64_to_bf16(NAN), 0x7FC0);
    assert_int_equal(tile_f64_to_bf16(-NAN), 0xFFC0);
    assert_int_equal(tile_f32_to_f16(f32_of(0xFFC00001u)), 0xFE00); /* payload below the kept bits */
    assert_int_equal(tile_f32_to_f16(f32_of(0x7FC02000u)), 0x7E01);
    assert_int_equal(tile_f32_to_bf16(f32_of(0x7F800001u)), 0x7FC0); /* signalling becomes quiet */
    assert_false(tile_f16_is_tie(NAN));
    assert_false(tile_f16_is_tie(INFINITY));
}

/* f32 -> bf16 against the well-known bit trick (valid for non-NaN). */
static void test_bf16_from_f32_random(void **state)
{
    (void)state;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)rng();
        if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu))
            continue;
        uint16_t want = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
        assert_int_equal(tile_f32_to_bf16(f32_of(u)), want);
    }
}

/* f64 -> both formats: the result brackets the input and is the nearer one. */
static void check_nearest(double d, uint16_t h, double (*value)(uint16_t), uint16_t inf)
{
    if ((h & 0x7FFF) == inf)
        return;
    double v = value(h);
    long double err = fabsl((long double)d - v);
    uint16_t mag = h & 0x7FFF;
    if (mag < inf - 1) {
        long double up = fabsl((long double)d - value((uint16_t)(h + 1)));
        assert_true(err <= up);
    }
    if (mag > 0) {
        long double down = fabsl((long double)d - value((uint16_t)(h - 1)));
        assert_true(err <= down);
    }
}

static void test_f64_random(void **state)
{
    (void)state;
    for (int i = 0; i < 1000000; i++) {
        /* doubles spread over the 16-bit formats' ranges */
        double d = ldexp((double)(rng() >> 11) / 9007199254740992.0, (int)(rng() % 60) - 30);
        if (rng() & 1)
            d = -d;
        check_nearest(d, tile_f64_to_f16(d), f16_value, 0x7C00);
        double b = ldexp(d, (int)(rng() % 240) - 120);
        check_nearest(b, tile_f64_to_bf16(b), bf16_value, 0x7F80);
#if defined(__FLT16_MAX__) && defined(__GNUC__) && !defined(__clang__)
        _Float16 ref = (_Float16)d;
        uint16_t rb;
        memcpy(&rb, &ref, sizeof(rb));
        assert_int_equal(tile_f64_to_f16(d), rb);
#endif
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_widen_all),   cmocka_unit_test(test_bf16_widen_all),
        cmocka_unit_test(test_round_trip_all),  cmocka_unit_test(test_f16_midpoints),
        cmocka_unit_test(test_bf16_midpoints),  cmocka_unit_test(test_f16_limits),
        cmocka_unit_test(test_bf16_limits),     cmocka_unit_test(test_nan),
        cmocka_unit_test(test_bf16_from_f32_random), cmocka_unit_test(test_f64_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
