/* test_hotcopy.c - tile_copy_hot copies exactly n bytes, whatever the
 * length (every one up to a few vectors past the unrolled loop, and chunk
 * sizes) and the alignment of either end, with the vector loop and with
 * memcpy forced, and never writes outside [dst, dst + n); likewise
 * tile_copy_periodic's patterns and tile_copy_repeat's copies of a row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "hotcopy.h"

#define SPAN 9000u /* past the 8 KiB pieces the kernel copies */
#define GUARD 64u
#define GUARD_BYTE 0xA5

static uint8_t src_buf[SPAN + 64], dst_buf[SPAN + 64 + 2 * GUARD];

static void fill_source(void)
{
    for (size_t i = 0; i < sizeof(src_buf); i++)
        src_buf[i] = (uint8_t)(i * 131 + 7);
}

/* Copies n bytes from src_buf + so to a guarded dst_buf + do and checks
 * the copy and both guards. */
static void check_copy(uint64_t n, unsigned so, unsigned dof)
{
    memset(dst_buf, GUARD_BYTE, sizeof(dst_buf));
    uint8_t *dst = dst_buf + GUARD + dof;
    tile_copy_hot(dst, src_buf + so, n);
    if (n)
        assert_memory_equal(dst, src_buf + so, n);
    for (unsigned i = 0; i < GUARD; i++) {
        assert_int_equal(dst[-1 - (int)i], GUARD_BYTE);
        assert_int_equal(dst[n + i], GUARD_BYTE);
    }
}

static void lengths_and_alignments(bool force_memcpy)
{
    static const uint64_t long_lengths[] = {511, 512, 513, 1000, 4096, 4097, 8063, 8064, 8192, SPAN};
    tile_copy_hot_force_memcpy(force_memcpy);
    fill_source();
    for (uint64_t n = 0; n <= 300; n++)
        for (unsigned so = 0; so < 3; so++)
            for (unsigned dof = 0; dof < 3; dof++)
                check_copy(n, so * 31, dof * 17);
    for (size_t i = 0; i < sizeof(long_lengths) / sizeof(long_lengths[0]); i++)
        for (unsigned so = 0; so < 64; so += 13)
            for (unsigned dof = 0; dof < 64; dof += 11)
                check_copy(long_lengths[i], so, dof);
    tile_copy_hot_force_memcpy(false);
}

static void vector_loop_copies_exactly(void **state)
{
    (void)state;
    lengths_and_alignments(false);
}

static void memcpy_fallback_copies_exactly(void **state)
{
    (void)state;
    lengths_and_alignments(true);
    tile_copy_hot_force_memcpy(true);
    assert_false(tile_copy_hot_vector());
    tile_copy_hot_force_memcpy(false);
}

/* The vector loop is the default exactly where the CPU has AVX2. */
static void vector_loop_follows_the_cpu(void **state)
{
    (void)state;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    assert_int_equal(tile_copy_hot_vector(), __builtin_cpu_supports("avx2") != 0);
#else
    assert_false(tile_copy_hot_vector());
#endif
}

/* tile_copy_periodic extends a pattern exactly, across the periods either
 * side of TILE_HOTCOPY_PERIODIC_MIN (a forward pass above it, doubling
 * below), with the vector loop and without, and writes nothing past n. */
static void periodic_extends_exactly(void **state)
{
    (void)state;
    static uint8_t buf[6000];
    for (int force = 0; force < 2; force++) {
        tile_copy_hot_force_memcpy(force);
        for (uint64_t period = 1; period <= 300; period += period < 140 ? 1 : 37) {
            for (uint64_t n = period; n <= 5000; n += n < 600 ? 97 : 1013) {
                memset(buf, 0xEE, sizeof(buf));
                for (uint64_t i = 0; i < period; i++)
                    buf[i] = (uint8_t)(i * 31 + period);
                tile_copy_periodic(buf, period, n);
                for (uint64_t i = 0; i < n; i++)
                    assert_int_equal(buf[i], (uint8_t)(i % period * 31 + period));
                for (uint64_t i = n; i < n + 64 && i < sizeof(buf); i++)
                    assert_int_equal(buf[i], 0xEE);
            }
        }
    }
    tile_copy_hot_force_memcpy(false);
}

/* tile_copy_repeat writes exactly rep copies of the row, for every row
 * length up to a few vectors and counts of copies, with the vector loop
 * and without, and nothing outside them. */
static void repeat_writes_exact_copies(void **state)
{
    (void)state;
    static uint8_t buf[3000 + 2 * GUARD];
    fill_source();
    for (int force = 0; force < 2; force++) {
        tile_copy_hot_force_memcpy(force);
        for (uint64_t n = 0; n <= 140; n++) {
            for (uint64_t rep = 0; rep <= 20; rep += rep < 5 ? 1 : 5) {
                memset(buf, GUARD_BYTE, sizeof(buf));
                uint8_t *dst = buf + GUARD + n % 3;
                tile_copy_repeat(dst, src_buf + n % 5, n, rep);
                for (uint64_t k = 0; k < rep; k++)
                    if (n)
                        assert_memory_equal(dst + k * n, src_buf + n % 5, n);
                for (unsigned i = 0; i < GUARD; i++) {
                    assert_int_equal(dst[-1 - (int)i], GUARD_BYTE);
                    assert_int_equal(dst[n * rep + i], GUARD_BYTE);
                }
            }
        }
    }
    tile_copy_hot_force_memcpy(false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vector_loop_copies_exactly),
        cmocka_unit_test(memcpy_fallback_copies_exactly),
        cmocka_unit_test(vector_loop_follows_the_cpu),
        cmocka_unit_test(periodic_extends_exactly),
        cmocka_unit_test(repeat_writes_exact_copies),
    };
    return cmocka_run_group_tests_name("hotcopy", tests, NULL, NULL);
}
