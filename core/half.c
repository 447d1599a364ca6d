/* half.c - float16 and bfloat16 conversions (see half.h).
 *
 * DESIGN. Both 16-bit formats are "sign, exponent, fraction" with different
 * field widths, so one integer routine rounds a double to either, driven by
 * a two-field descriptor; nothing goes through float arithmetic, which is
 * what keeps the rounding single (double -> float -> half would round twice)
 * and independent of the FPU's rounding mode. The routine keeps the encoded
 * exponent and the rounded significand in one integer, so a significand
 * that rounds up into the next binade, a subnormal that rounds up to the
 * smallest normal and a maximum that rounds up to infinity all come out of
 * the same carry.
 */
#include "half.h"

#include <string.h>

struct half_format {
    int frac_bits; /* stored fraction bits: 10 (float16) or 7 (bfloat16) */
    int bias;      /* exponent bias: 15 or 127 */
};

static const struct half_format tile_fmt_f16 = {10, 15};
static const struct half_format tile_fmt_bf16 = {7, 127};

#define F64_FRAC_BITS 52
#define F64_BIAS 1023

struct rounded {
    uint16_t bits;
    bool tie; /* the discarded part was exactly half an ulp */
};

static uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Quiet NaN of the target format: sign, all-ones exponent, quiet bit, and
 * the top payload bits of the double's fraction. */
static uint16_t nan_bits(const struct half_format *f, uint16_t sign, uint64_t frac)
{
    uint16_t exp_mask = (uint16_t)(((1u << (15 - f->frac_bits)) - 1) << f->frac_bits);
    uint16_t quiet = (uint16_t)(1u << (f->frac_bits - 1));
    uint16_t payload = (uint16_t)(frac >> (F64_FRAC_BITS - f->frac_bits));
    return (uint16_t)(sign | exp_mask | quiet | payload);
}

static struct rounded round_f64(double d, const struct half_format *f)
{
    uint64_t u = f64_bits(d);
    uint16_t sign = (uint16_t)((u >> 48) & 0x8000u);
    int exp = (int)((u >> F64_FRAC_BITS) & 0x7FF);
    uint64_t frac = u & ((UINT64_C(1) << F64_FRAC_BITS) - 1);
    uint32_t inf = ((1u << (15 - f->frac_bits)) - 1) << f->frac_bits;
    struct rounded r = {sign, false};

    if (exp == 0x7FF) {
        r.bits = frac ? nan_bits(f, sign, frac) : (uint16_t)(sign | inf);
        return r;
    }
    if (exp == 0) /* zero or a double subnormal: far below half the smallest target subnormal */
        return r;
    int e = exp - F64_BIAS;     /* unbiased exponent */
    int emin = 1 - f->bias;      /* smallest normal exponent of the target */
    uint64_t sig = frac | (UINT64_C(1) << F64_FRAC_BITS);
    int shift = F64_FRAC_BITS - f->frac_bits + (e < emin ? emin - e : 0);
    if (shift > 63)
        return r;
    uint64_t kept = sig >> shift;
    uint64_t rem = sig & ((UINT64_C(1) << shift) - 1);
    uint64_t half = UINT64_C(1) << (shift - 1);
    r.tie = rem == half;
    if (rem > half || (rem == half && (kept & 1)))
        kept++;
    /* Normal: the implicit bit in `kept` adds one to the (biased - 1)
     * exponent field; subnormal: the field is 0 and `kept` is the fraction.
     * Either way a carry out of the fraction lands in the exponent. */
    uint32_t field = e < emin ? 0 : (uint32_t)(e - emin) << f->frac_bits;
    uint32_t mag = field + (uint32_t)kept;
    if (mag >= inf)
        mag = inf;
    r.bits = (uint16_t)(sign | mag);
    return r;
}

float tile_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1F;
    uint32_t frac = h & 0x3FFu;
    if (exp == 0x1F) /* infinity or NaN, payload kept */
        return f32_from_bits(sign | 0x7F800000u | (frac << 13));
    if (exp == 0) { /* zero or subnormal: frac * 2^-24, exact in float */
        float v = (float)frac * 0x1p-24f;
        return sign ? -v : v;
    }
    return f32_from_bits(sign | ((exp + 112) << 23) | (frac << 13));
}

float tile_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t tile_f64_to_f16(double d)
{
    return round_f64(d, &tile_fmt_f16).bits;
}

uint16_t tile_f64_to_bf16(double d)
{
    return round_f64(d, &tile_fmt_bf16).bits;
}

uint16_t tile_f32_to_f16(float f)
{
    return tile_f64_to_f16((double)f); /* widening is exact: one rounding */
}

uint16_t tile_f32_to_bf16(float f)
{
    return tile_f64_to_bf16((double)f);
}

bool tile_f16_is_tie(double d)
{
    return round_f64(d, &tile_fmt_f16).tie;
}

bool tile_bf16_is_tie(double d)
{
    return round_f64(d, &tile_fmt_bf16).tie;
}
