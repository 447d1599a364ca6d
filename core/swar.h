/* swar.h - the eight bytes of a 64-bit word tested at once (SIMD within a
 * register), for the scans that run over every request's text: JSON
 * strings (api/numfmt.c), UTF-8 (api/utf8.c), HTTP field values
 * (server/http/h1wire.c).
 *
 * Each test marks the bytes it finds by their top bit. A mark is exact up
 * to and including the lowest byte found; above it a borrow may mark bytes
 * that were not found. So "is any byte found" is exact, and so is "which is
 * the first found" (the lowest mark), but not the count of marks. */
#ifndef TILE_SWAR_H
#define TILE_SWAR_H

#include <stdint.h>

#define TILE_SWAR_ONES UINT64_C(0x0101010101010101)
#define TILE_SWAR_HIGHS UINT64_C(0x8080808080808080)

/* Bytes 0x80 and above (exact for every byte). */
static inline uint64_t tile_swar_high(uint64_t w)
{
    return w & TILE_SWAR_HIGHS;
}

/* Bytes below n, for n at most 0x80: for a byte under 0x80, b - n borrows
 * into its top bit exactly when b < n; a byte with its top bit set is not
 * marked. */
static inline uint64_t tile_swar_below(uint64_t w, unsigned n)
{
    return (w - n * TILE_SWAR_ONES) & ~w & TILE_SWAR_HIGHS;
}

/* Bytes equal to c (Mycroft's zero-byte test on w ^ c). */
static inline uint64_t tile_swar_eq(uint64_t w, unsigned char c)
{
    uint64_t x = w ^ (c * TILE_SWAR_ONES);
    return (x - TILE_SWAR_ONES) & ~x & TILE_SWAR_HIGHS;
}

#endif
