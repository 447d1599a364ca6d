/* hotcopy.c - copying bytes that are still in L1 (see hotcopy.h). */
#include "hotcopy.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TILE_HOTCOPY_AVX2 1
#include <immintrin.h>
#endif

static atomic_bool forced_memcpy;

#ifdef TILE_HOTCOPY_AVX2
/* n >= 32. Four loads before four stores keep both load ports busy; the
 * last partial vector is copied as the final 32 bytes, overlapping bytes
 * already copied, which is harmless as source and destination are apart. */
__attribute__((target("avx2"))) static void copy_avx2(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    uint64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + i + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(src + i + 64));
        __m256i d = _mm256_loadu_si256((const __m256i *)(src + i + 96));
        _mm256_storeu_si256((__m256i *)(dst + i), a);
        _mm256_storeu_si256((__m256i *)(dst + i + 32), b);
        _mm256_storeu_si256((__m256i *)(dst + i + 64), c);
        _mm256_storeu_si256((__m256i *)(dst + i + 96), d);
    }
    for (; i + 32 <= n; i += 32)
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_loadu_si256((const __m256i *)(src + i)));
    if (i < n)
        _mm256_storeu_si256((__m256i *)(dst + n - 32), _mm256_loadu_si256((const __m256i *)(src + n - 32)));
}

/* See tile_copy_repeat. Rows of 32 bytes and more are stored a vector
 * column at a time, the last one overlapping the one before; shorter ones
 * as two overlapping halves (16, 8 or 4 bytes each). */
__attribute__((target("avx2"))) static void repeat_avx2(uint8_t *dst, const uint8_t *src, uint64_t n, uint64_t rep)
{
    if (n >= 32) {
        for (uint64_t i = 0;; i += 32) {
            if (i + 32 > n)
                i = n - 32;
            __m256i v = _mm256_loadu_si256((const __m256i *)(src + i));
            for (uint64_t k = 0; k < rep; k++)
                _mm256_storeu_si256((__m256i *)(dst + k * n + i), v);
            if (i + 32 == n)
                return;
        }
    }
    if (n >= 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + n - 16));
        for (uint64_t k = 0; k < rep; k++, dst += n) {
            _mm_storeu_si128((__m128i *)dst, a);
            _mm_storeu_si128((__m128i *)(dst + n - 16), b);
        }
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        for (uint64_t k = 0; k < rep; k++, dst += n) {
            memcpy(dst, &a, 8);
            memcpy(dst + n - 8, &b, 8);
        }
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        for (uint64_t k = 0; k < rep; k++, dst += n) {
            memcpy(dst, &a, 4);
            memcpy(dst + n - 4, &b, 4);
        }
    } else {
        for (uint64_t k = 0; k < rep; k++, dst += n)
            for (uint64_t i = 0; i < n; i++)
                dst[i] = src[i];
    }
}

static bool cpu_has_avx2(void)
{
    return __builtin_cpu_supports("avx2");
}
#else
static bool cpu_has_avx2(void)
{
    return false;
}
#endif

bool tile_copy_hot_vector(void)
{
    return cpu_has_avx2() && !atomic_load_explicit(&forced_memcpy, memory_order_relaxed);
}

void tile_copy_hot(uint8_t *dst, const uint8_t *src, uint64_t n)
{
#ifdef TILE_HOTCOPY_AVX2
    if (n >= 32 && tile_copy_hot_vector()) {
        copy_avx2(dst, src, n);
        return;
    }
#endif
    memcpy(dst, src, n);
}

void tile_copy_periodic(uint8_t *dst, uint64_t period, uint64_t n)
{
    if (n <= period)
        return;
#ifdef TILE_HOTCOPY_AVX2
    /* copy_avx2 loads 128 bytes before it stores them, and its last vector
     * reads 32 bytes ending `period` before the end: with a period of at
     * least 128 every byte it loads was stored by an earlier block. */
    if (period >= TILE_HOTCOPY_PERIODIC_MIN && tile_copy_hot_vector()) {
        copy_avx2(dst + period, dst, n - period);
        return;
    }
#endif
    for (uint64_t done = period; done < n; done *= 2)
        tile_copy_hot(dst + done, dst, n - done < done ? n - done : done);
}

void tile_copy_repeat(uint8_t *dst, const uint8_t *src, uint64_t n, uint64_t rep)
{
#ifdef TILE_HOTCOPY_AVX2
    if (tile_copy_hot_vector()) {
        repeat_avx2(dst, src, n, rep);
        return;
    }
#endif
    for (uint64_t k = 0; k < rep; k++)
        memcpy(dst + k * n, src, n);
}

void tile_copy_hot_force_memcpy(bool off)
{
    atomic_store(&forced_memcpy, off);
}
