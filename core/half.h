/* half.h - float16 (IEEE binary16) and bfloat16 conversions.
 *
 * Widening (16 bits to float) is exact and keeps every bit of a NaN's
 * payload. Narrowing rounds to nearest, ties to even, straight from the
 * source value (a double is never rounded to float first), handles
 * subnormals, overflows to infinity, and turns a NaN into a quiet NaN of
 * the same sign (payload bits kept where they fit).
 */
#ifndef TILE_HALF_H
#define TILE_HALF_H

#include <stdbool.h>
#include <stdint.h>

/* Exact value of a float16 / bfloat16 bit pattern. */
float tile_f16_to_f32(uint16_t h);
float tile_bf16_to_f32(uint16_t h);

/* Nearest float16 / bfloat16 bit pattern (ties to even). */
uint16_t tile_f64_to_f16(double d);
uint16_t tile_f64_to_bf16(double d);
uint16_t tile_f32_to_f16(float f);
uint16_t tile_f32_to_bf16(float f);

/* True when `d` lies exactly halfway between two adjacent float16 (bfloat16)
 * values, counting the overflow threshold (65520 for float16). Rounding such
 * a double is exactly where a decimal -> double -> float16 conversion can
 * go wrong, so decimal readers re-check these against the digits. */
bool tile_f16_is_tie(double d);
bool tile_bf16_is_tie(double d);

#endif
