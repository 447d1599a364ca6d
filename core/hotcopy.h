/* hotcopy.h - copying bytes the core has just written (and so are in L1).
 *
 * The kernel replicates a freshly written piece of the output (a few KiB)
 * to every place it appears. Copying such an L1-resident source over an
 * output that fits the cache, on a 2-core EPYC (the "copies of an 8 KiB
 * piece" line of bench_kernel): glibc's memcpy (rep movsb from 2 KiB on)
 * ran at 0.74x the speed of memset of the same bytes, a loop of 32-byte
 * AVX2 loads and stores at 0.91-0.94x, 16-byte SSE2 ones at 0.5x. So the
 * copy takes the AVX2 loop where the CPU has it (checked at run time: the
 * build targets baseline x86-64) and memcpy everywhere else. Sources far
 * from L1 gain nothing from the loop (200 KiB from L2: both 52 GB/s), so
 * the kernel keeps memcpy for those.
 *
 * Thread-safe; the override is atomic.
 */
#ifndef TILE_HOTCOPY_H
#define TILE_HOTCOPY_H

#include <stdbool.h>
#include <stdint.h>

/* Copies n bytes; [dst, dst + n) and [src, src + n) must not overlap. */
void tile_copy_hot(uint8_t *dst, const uint8_t *src, uint64_t n);

/* dst[0, period) holds a pattern: extends it periodically to dst[0, n)
 * (n >= period). With the vector loop and a period of at least
 * TILE_HOTCOPY_PERIODIC_MIN bytes this is one forward pass, each block of
 * loads reading bytes the pass stored a period earlier; otherwise the
 * pattern is doubled (one copy per doubling). */
void tile_copy_periodic(uint8_t *dst, uint64_t period, uint64_t n);
#define TILE_HOTCOPY_PERIODIC_MIN 128u

/* Writes src[0, n) `rep` times back to back from dst (a short input row
 * and its copies, n * rep bytes that stay in L1). With the vector loop
 * each vector of the row is loaded once and stored rep times: a 28-byte
 * row repeated 4 times is two loads and eight stores, where a memcpy and
 * the doublings of tile_copy_periodic cost three calls and as many loads
 * as stores. [dst, dst + n * rep) and [src, src + n) must not overlap. */
void tile_copy_repeat(uint8_t *dst, const uint8_t *src, uint64_t n, uint64_t rep);

/* Whether tile_copy_hot uses the vector loop (the CPU has it and it is not
 * turned off). */
bool tile_copy_hot_vector(void);

/* Turns the vector loop off (true) or back to the CPU's default (false), for
 * every later call in the process: tests run the kernel both ways. */
void tile_copy_hot_force_memcpy(bool off);

#endif
