/* numfmt.c - JSON text of elements, and elements from JSON tokens (see numfmt.h).
 *
 * DESIGN. Everything is driven by the dtype's class and width from the
 * trait table. The four float widths (float16, bfloat16, float32, float64;
 * complex parts are one of the last two) differ only in a handful of facts,
 * collected in one `struct real_kind` row each: how to widen the bits to a
 * double, how to round a decimal to the bits, and how many digits can be
 * needed. Formatting and parsing are then written once.
 *
 * Shortest output: a value that is an integer of at most 2^precision (all
 * integers there are representable, so its digits are the shortest) is
 * printed directly, which covers most data. Otherwise the value is rounded
 * to P significant digits for increasing P and the first text that parses
 * back to the same bits wins. The rounding is exact and cheap: the value
 * m * 2^e times 10^k is computed in a small fixed-size big integer and
 * rounded half to even from its exact remainder (a printf per attempt costs
 * ten times more). The search starts at the format's DIG (15, 6, 3, 2): for
 * normal numbers any decimal of at most DIG digits survives a round trip
 * unchanged, so if a shorter text existed the DIG-digit rounding would be it
 * padded with zeros, and stripping those zeros finds it. Subnormals have
 * fewer digits of precision, so their search starts at 1. Each check uses
 * this file's own parser, so whatever is printed reads back exactly.
 *
 * float16 and bfloat16 input is parsed to a double and rounded again. That
 * second rounding can only go wrong when the double lands exactly on a
 * halfway point between two 16-bit values while the decimal itself was a
 * little above or below it; that case is detected (tile_f16_is_tie) and
 * settled by comparing the decimal digits with the halfway point exactly.
 */
#include "numfmt.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "half.h"
#include "swar.h"
#include "utf8.h"

/* ---- float widths ---------------------------------------------------- */

struct real_kind {
    size_t size;
    int min_digits, max_digits;    /* DIG, and digits that always round-trip */
    double exact_int;              /* 2^precision: integers up to it are exact */
    double min_normal;
    double (*to_double)(uint64_t bits);
    uint64_t (*from_double)(double v); /* exact for NaN, infinities, zero */
    uint64_t (*from_text)(const char *s, size_t len); /* correctly rounded */
};

static double f16_to_double(uint64_t b)
{
    return tile_f16_to_f32((uint16_t)b);
}

static double bf16_to_double(uint64_t b)
{
    return tile_bf16_to_f32((uint16_t)b);
}

static double f32_to_double(uint64_t b)
{
    uint32_t u = (uint32_t)b;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static double f64_to_double(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof(d));
    return d;
}

static uint64_t f16_from_double(double v)
{
    return tile_f64_to_f16(v);
}

static uint64_t bf16_from_double(double v)
{
    return tile_f64_to_bf16(v);
}

static uint64_t f32_from_double(double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static uint64_t f64_from_double(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    return u;
}

/* Decimal -> double -> 16 bits, with the halfway case settled exactly. */
static uint64_t half_from_text(const char *s, size_t len, uint16_t (*round)(double), bool (*is_tie)(double))
{
    double d;
    tile_json_number_double(s, len, &d);
    if (is_tie(d)) {
        int cmp = tile_json_number_compare(s, len, d);
        if (cmp != 0) /* the decimal is off the halfway point: step off it the same way */
            d = nextafter(d, (cmp > 0) ? INFINITY : -INFINITY);
    }
    return round(d);
}

static uint64_t f16_from_text(const char *s, size_t len)
{
    return half_from_text(s, len, tile_f64_to_f16, tile_f16_is_tie);
}

static uint64_t bf16_from_text(const char *s, size_t len)
{
    return half_from_text(s, len, tile_f64_to_bf16, tile_bf16_is_tie);
}

static uint64_t f32_from_text(const char *s, size_t len)
{
    float f;
    tile_json_number_float(s, len, &f);
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static uint64_t f64_from_text(const char *s, size_t len)
{
    double d;
    tile_json_number_double(s, len, &d);
    return f64_from_double(d);
}

static const struct real_kind kind_f16 = {2, 3, 5, 2048.0, 0x1p-14, f16_to_double, f16_from_double, f16_from_text};
static const struct real_kind kind_bf16 = {2, 2, 4, 256.0, 0x1p-126, bf16_to_double, bf16_from_double,
                                           bf16_from_text};
static const struct real_kind kind_f32 = {4, 6, 9, 0x1p24, FLT_MIN, f32_to_double, f32_from_double, f32_from_text};
static const struct real_kind kind_f64 = {8, 15, 17, 0x1p53, DBL_MIN, f64_to_double, f64_from_double, f64_from_text};

/* The float width of a float, bfloat or complex dtype (complex: one part). */
static const struct real_kind *real_kind_of(const struct tile_dtype_traits *tr)
{
    if (tr->cls == TILE_CLASS_BFLOAT)
        return &kind_bf16;
    if (tr->cls != TILE_CLASS_FLOAT && tr->cls != TILE_CLASS_COMPLEX)
        return NULL;
    size_t w = tr->size / tr->parts;
    return w == 2 ? &kind_f16 : w == 4 ? &kind_f32 : w == 8 ? &kind_f64 : NULL;
}

/* Little-endian host: the low `size` bytes of a uint64_t are the element. */
static uint64_t load_bits(const void *p, size_t size)
{
    uint64_t u = 0;
    memcpy(&u, p, size);
    return u;
}

/* ---- output ------------------------------------------------------------ */

static size_t put_str(char *out, const char *s)
{
    size_t n = strlen(s);
    memcpy(out, s, n);
    return n;
}

size_t tile_format_u64(char *out, uint64_t v)
{
    static const char pairs[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    if (v < 10) { /* most of an access line's figures */
        out[0] = (char)('0' + v);
        return 1;
    }
    if (v < 100) {
        memcpy(out, pairs + v * 2, 2);
        return 2;
    }
    if (v < 1000) { /* a status, a small body's length */
        out[0] = (char)('0' + v / 100);
        memcpy(out + 1, pairs + v % 100 * 2, 2);
        return 3;
    }
    size_t n = 1;
    for (uint64_t x = v; x >= 10; x /= 10)
        n++;
    char *p = out + n;
    while (v >= 100) { /* two digits a division */
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--p = pairs[d + 1];
        *--p = pairs[d];
    }
    if (v >= 10) {
        *--p = pairs[v * 2 + 1];
        *--p = pairs[v * 2];
    } else {
        *--p = (char)('0' + v);
    }
    return n;
}

static size_t put_int(char *out, bool neg, uint64_t mag)
{
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    return o + tile_format_u64(out + o, mag);
}

void tile_text_u64(struct tile_text *t, uint64_t v)
{
    char digits[24];
    tile_text_put(t, digits, tile_format_u64(digits, v));
}

void tile_text_i64(struct tile_text *t, int64_t v)
{
    char digits[24];
    bool neg = v < 0;
    uint64_t mag = neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    tile_text_put(t, digits, put_int(digits, neg, mag));
}

/* ---- exact decimal rounding ---------------------------------------------- */

/* A non-negative integer of up to TILE_BIG_LIMBS 64-bit limbs, least
 * significant first: enough for any double times the power of ten that
 * brings it to 17 digits (2^53 * 10^340 < 2^1280). */
#define TILE_BIG_LIMBS 20

__extension__ typedef unsigned __int128 tile_u128;

struct big {
    uint64_t w[TILE_BIG_LIMBS];
    int n; /* limbs in use; no leading zero limbs */
};

/* Where a dropped fraction f lies: 0, (0, 1/2), 1/2, (1/2, 1). */
enum frac { FRAC_ZERO, FRAC_LOW, FRAC_HALF, FRAC_HIGH };

static const uint64_t pow10_u64[20] = {
    1u, 10u, 100u, 1000u, 10000u, 100000u, 1000000u, 10000000u, 100000000u, 1000000000u, 10000000000u,
    100000000000u, 1000000000000u, 10000000000000u, 100000000000000u, 1000000000000000u,
    10000000000000000u, 100000000000000000u, 1000000000000000000u, 10000000000000000000u};

static void big_mul(struct big *b, uint64_t m)
{
    uint64_t carry = 0;
    for (int i = 0; i < b->n; i++) {
        tile_u128 p = (tile_u128)b->w[i] * m + carry;
        b->w[i] = (uint64_t)p;
        carry = (uint64_t)(p >> 64);
    }
    if (carry)
        b->w[b->n++] = carry;
}

static uint64_t big_div(struct big *b, uint64_t d)
{
    tile_u128 r = 0;
    for (int i = b->n - 1; i >= 0; i--) {
        tile_u128 cur = (r << 64) | b->w[i];
        b->w[i] = (uint64_t)(cur / d);
        r = cur % d;
    }
    while (b->n > 0 && b->w[b->n - 1] == 0)
        b->n--;
    return (uint64_t)r;
}

static void big_shl(struct big *b, int s)
{
    int limbs = s / 64, bits = s % 64;
    for (int i = b->n - 1 + limbs + 1; i >= 0; i--) {
        int src = i - limbs;
        uint64_t hi = src >= 0 && src < b->n ? b->w[src] : 0;
        uint64_t lo = src - 1 >= 0 && src - 1 < b->n ? b->w[src - 1] : 0;
        b->w[i] = bits ? (hi << bits) | (lo >> (64 - bits)) : hi;
    }
    b->n += limbs + 1;
    while (b->n > 0 && b->w[b->n - 1] == 0)
        b->n--;
}

static bool big_bit(const struct big *b, int i)
{
    return i / 64 < b->n && (b->w[i / 64] >> (i % 64)) & 1;
}

/* Any of bits [0, end) set? */
static bool big_any_below(const struct big *b, int end)
{
    for (int i = 0; i < b->n && i * 64 < end; i++) {
        uint64_t w = b->w[i];
        if (end - i * 64 < 64)
            w &= (UINT64_C(1) << (end - i * 64)) - 1;
        if (w)
            return true;
    }
    return false;
}

/* b >>= s; the dropped bits, followed by an earlier fraction f, classified. */
static enum frac big_shr(struct big *b, int s, enum frac f)
{
    if (s == 0)
        return f;
    bool half = big_bit(b, s - 1), rest = f != FRAC_ZERO || big_any_below(b, s - 1);
    int limbs = s / 64, bits = s % 64;
    for (int i = 0; i < b->n; i++) {
        int src = i + limbs;
        uint64_t lo = src < b->n ? b->w[src] : 0, hi = src + 1 < b->n ? b->w[src + 1] : 0;
        b->w[i] = bits ? (lo >> bits) | (hi << (64 - bits)) : lo;
    }
    b->n = b->n > limbs ? b->n - limbs : 0;
    while (b->n > 0 && b->w[b->n - 1] == 0)
        b->n--;
    return !half ? (rest ? FRAC_LOW : FRAC_ZERO) : rest ? FRAC_HIGH : FRAC_HALF;
}

/* b /= 10^j; the fraction classified. The last division's remainder is the
 * most significant part of the fraction. */
static enum frac big_div_pow10(struct big *b, int j)
{
    bool sticky = false;
    uint64_t r = 0, d = 1;
    while (j > 0) {
        int step = j > 19 ? 19 : j;
        sticky = sticky || r;
        d = pow10_u64[step];
        r = big_div(b, d);
        j -= step;
    }
    if (d == 1)
        return FRAC_ZERO;
    if (r != d / 2)
        return r < d / 2 ? (r || sticky ? FRAC_LOW : FRAC_ZERO) : FRAC_HIGH;
    return sticky ? FRAC_HIGH : FRAC_HALF;
}

/* |v| * 10^k rounded half to even; *floor_out gets the floor, or
 * UINT64_MAX when it does not fit 64 bits. */
static uint64_t scaled_round(double v, int k, uint64_t *floor_out)
{
    int e2;
    double f = frexp(fabs(v), &e2);
    struct big b = {{(uint64_t)ldexp(f, 53)}, 1};
    e2 -= 53; /* |v| = w[0] * 2^e2 */
    if (e2 > 0)
        big_shl(&b, e2);
    for (int j = k; j > 0; j -= 19)
        big_mul(&b, pow10_u64[j > 19 ? 19 : j]);
    enum frac fr = big_div_pow10(&b, k < 0 ? -k : 0);
    fr = big_shr(&b, e2 < 0 ? -e2 : 0, fr);
    uint64_t q = b.n ? b.w[0] : 0;
    *floor_out = b.n > 1 ? UINT64_MAX : q;
    if (fr == FRAC_HIGH || (fr == FRAC_HALF && (q & 1)))
        q++;
    return q;
}

/* |v| (finite, non-zero) rounded to p significant digits, exactly, trailing
 * zeros dropped; |v| = d0.d1d2... * 10^x. */
static int round_digits(double v, int p, char *dg, int *x)
{
    int ex = (int)floor(log10(fabs(v)));
    uint64_t q;
    for (;;) { /* the estimate of the exponent can be one off */
        uint64_t fl;
        q = scaled_round(v, p - 1 - ex, &fl);
        if (fl >= pow10_u64[p])
            ex++;
        else if (fl < pow10_u64[p - 1])
            ex--;
        else
            break;
    }
    if (q == pow10_u64[p]) { /* rounded up to the next power of ten */
        q /= 10;
        ex++;
    }
    for (int i = p - 1; i >= 0; i--) {
        dg[i] = (char)('0' + q % 10);
        q /= 10;
    }
    *x = ex;
    int nd = p;
    while (nd > 1 && dg[nd - 1] == '0')
        nd--;
    return nd;
}

/* Python repr layout of digits d0.d1... * 10^x. */
static size_t layout(bool neg, const char *dg, int nd, int x, char *out)
{
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    if (x < -4 || x >= 16) {
        out[o++] = dg[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, dg + 1, (size_t)nd - 1);
            o += (size_t)nd - 1;
        }
        out[o++] = 'e';
        out[o++] = x < 0 ? '-' : '+';
        int ax = x < 0 ? -x : x;
        if (ax < 10)
            out[o++] = '0';
        return o + tile_format_u64(out + o, (uint64_t)ax);
    }
    if (x < 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -x - 1; i++)
            out[o++] = '0';
        memcpy(out + o, dg, (size_t)nd);
        return o + (size_t)nd;
    }
    for (int i = 0; i <= x; i++)
        out[o++] = i < nd ? dg[i] : '0';
    out[o++] = '.';
    if (nd <= x + 1) {
        out[o++] = '0';
        return o;
    }
    memcpy(out + o, dg + x + 1, (size_t)(nd - x - 1));
    return o + (size_t)(nd - x - 1);
}

static size_t format_real(const struct real_kind *k, uint64_t bits, char *out)
{
    double v = k->to_double(bits);
    if (isnan(v))
        return put_str(out, "\"NaN\"");
    if (isinf(v))
        return put_str(out, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    double a = fabs(v);
    if (a <= k->exact_int && a == floor(a)) {
        size_t o = put_int(out, signbit(v), (uint64_t)a);
        return o + put_str(out + o, ".0");
    }
    char dg[24];
    int x = 0;
    size_t n = 0;
    for (int p = a < k->min_normal ? 1 : k->min_digits; p <= k->max_digits; p++) {
        int nd = round_digits(v, p, dg, &x);
        n = layout(signbit(v), dg, nd, x, out);
        if (k->from_text(out, n) == bits)
            break;
    }
    return n; /* max_digits always round-trips */
}

size_t tile_json_format_element(enum tile_dtype dtype, const void *elem, char *buf)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(dtype);
    if (!tr)
        return 0;
    uint64_t u;
    switch (tr->cls) {
    case TILE_CLASS_BOOL:
        return put_str(buf, *(const uint8_t *)elem ? "true" : "false");
    case TILE_CLASS_INT: {
        u = load_bits(elem, tr->size);
        unsigned sh = (unsigned)(64 - 8 * tr->size);
        int64_t v = (int64_t)(u << sh) >> sh; /* sign-extend */
        return put_int(buf, v < 0, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    }
    case TILE_CLASS_UINT:
        return tile_format_u64(buf, load_bits(elem, tr->size));
    case TILE_CLASS_FLOAT:
    case TILE_CLASS_BFLOAT:
        return format_real(real_kind_of(tr), load_bits(elem, tr->size), buf);
    case TILE_CLASS_COMPLEX: {
        const struct real_kind *k = real_kind_of(tr);
        size_t o = put_str(buf, "[");
        o += format_real(k, load_bits(elem, k->size), buf + o);
        o += put_str(buf + o, ",");
        o += format_real(k, load_bits((const char *)elem + k->size, k->size), buf + o);
        return o + put_str(buf + o, "]");
    }
    default:
        return 0;
    }
}

/* Copies what fits of src[0, n) to buf at *o (cap bytes); counts all of it. */
static void emit(char *buf, size_t cap, size_t *o, const char *src, size_t n)
{
    if (*o < cap)
        memcpy(buf + *o, src, n < cap - *o ? n : cap - *o);
    *o += n;
}

/* The escape for byte c, or 0 when c needs none. Upper-case hex, as
 * jansson writes it, so every document tiled writes escapes alike. */
static size_t escape_byte(unsigned char c, char *esc)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *simple = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\t' ? "\\t"
                       : c == '\r' ? "\\r" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
    if (simple) {
        memcpy(esc, simple, 2);
        return 2;
    }
    if (c >= 0x20)
        return 0;
    memcpy(esc, "\\u00", 4);
    esc[4] = hex[c >> 4];
    esc[5] = hex[c & 15];
    return 6;
}

/* The bytes of w that end a plain run, each as its top bit (swar.h): 0x80
 * and above, below 0x20, '"' or '\\'. The lowest mark is exact, so it is
 * the first byte that ends the run. */
static inline uint64_t run_end_mask(uint64_t w)
{
    return tile_swar_high(w) | tile_swar_below(w, 0x20) | tile_swar_eq(w, '"') | tile_swar_eq(w, '\\');
}

/* Eight bytes a step (a request id, a path and an address in every access
 * line, a request's keys and names), the first byte that ends the run
 * found in its word by the mask's lowest bit; the last bytes of the text
 * as a word too, filled out with plain bytes. */
size_t tile_json_plain_end(const char *s, size_t i, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, u + i, 8);
        uint64_t m = run_end_mask(w);
        if (m)
            return i + (size_t)__builtin_ctzll(m) / 8;
    }
    if (i < len && len >= 8) {
        /* The text's last word, shifted down to start at i and filled out
         * above with plain bytes (a mark is exact only up to the lowest
         * one, so the bytes before i must not be in it): a fixed-size load,
         * where a copy of the len - i bytes left was a call to memcpy. */
        unsigned k = (unsigned)(i - (len - 8)); /* 1..7: the loop stopped short of a word */
        uint64_t w;
        memcpy(&w, u + len - 8, 8);
        w = w >> (8 * k) | ('a' * TILE_SWAR_ONES) << (64 - 8 * k);
        uint64_t m = run_end_mask(w);
        return m ? i + (size_t)__builtin_ctzll(m) / 8 : len;
    }
    while (i < len && u[i] >= 0x20 && u[i] < 0x80 && u[i] != '"' && u[i] != '\\')
        i++; /* a text shorter than a word: "GET", an input's name */
    return i;
#else
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, u + i, 8);
        if (run_end_mask(w))
            break;
    }
    while (i < len && u[i] >= 0x20 && u[i] < 0x80 && u[i] != '"' && u[i] != '\\')
        i++;
    return i;
#endif
}

/* The quoted s[0, len) into buf (len + 2 bytes) when no byte of it needs
 * an escape; false (buf's bytes undefined) otherwise. Each word is copied
 * as it is checked, and the last as a word too, overlapping bytes already
 * checked plain (so a mark in it is in the bytes left). The short
 * strings of every access line and reply (an id, a path, an address, a
 * name) were scanned and then copied by a call to memcpy: this is 167
 * instructions fewer a small v2 request, 140 a /v1 one (callgrind,
 * docs/performance.md "A ninth round"). */
static bool quote_plain(const unsigned char *u, size_t len, char *buf)
{
    buf[0] = '"';
    buf[len + 1] = '"';
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (len >= 8) {
        uint64_t w;
        for (size_t i = 0; i + 8 <= len; i += 8) {
            memcpy(&w, u + i, 8);
            if (run_end_mask(w))
                return false;
            memcpy(buf + 1 + i, &w, 8);
        }
        memcpy(&w, u + len - 8, 8);
        if (run_end_mask(w))
            return false;
        memcpy(buf + 1 + len - 8, &w, 8);
        return true;
    }
#endif
    for (size_t i = 0; i < len; i++) {
        if (u[i] < 0x20 || u[i] >= 0x80 || u[i] == '"' || u[i] == '\\')
            return false;
        buf[1 + i] = (char)u[i];
    }
    return true;
}

/* The quoted string of s[0, len); bytes that are not valid UTF-8 become
 * U+FFFD when `replace`, else make it return -1. One loop for both
 * (tile_json_escape_string and tile_json_escape_text). */
static long escape(const char *s, size_t len, char *buf, size_t cap, bool replace)
{
    if (len > (size_t)(LONG_MAX - 2) / 6)
        return -1;
    const unsigned char *u = (const unsigned char *)s;
    if (len + 2 <= cap && quote_plain(u, len, buf))
        return (long)len + 2; /* nothing to escape: most text tiled quotes */
    size_t o = 0, run = 0, plain = tile_json_plain_end(s, 0, len);
    emit(buf, cap, &o, "\"", 1);
    for (size_t i = plain; i < len;) {
        /* Printable ASCII other than the quote and the backslash (nearly
         * every byte of what tiled quotes) is copied as it is: skip it
         * before the byte-by-byte checks below. */
        i = tile_json_plain_end(s, i, len);
        if (i == len)
            break;
        char esc[6];
        size_t n = 0, in = 1;
        if (u[i] >= 0x80) {
            in = tile_utf8_seq(u + i, len - i);
            if (in) {
                i += in;
                continue;
            }
            if (!replace)
                return -1;
            memcpy(esc, "\xef\xbf\xbd", 3);
            n = 3, in = 1;
        } else {
            n = escape_byte(u[i], esc);
        }
        if (n) {
            emit(buf, cap, &o, s + run, i - run);
            emit(buf, cap, &o, esc, n);
            run = i + in;
        }
        i += in;
    }
    emit(buf, cap, &o, s + run, len - run);
    emit(buf, cap, &o, "\"", 1);
    return (long)o;
}

long tile_json_escape_string(const char *s, size_t len, char *buf, size_t cap)
{
    return escape(s, len, buf, cap, false);
}

long tile_json_escape_text(const char *s, size_t len, char *buf, size_t cap)
{
    return escape(s, len, buf, cap, true);
}

/* ---- input ------------------------------------------------------------- */

size_t tile_json_path_format(const struct tile_json_path *where, char *buf, size_t cap)
{
    if (!cap)
        return 0;
    int n = snprintf(buf, cap, "%s", where && where->name ? where->name : "value");
    size_t o = n < 0 ? 0 : (size_t)n;
    for (int i = 0; where && i < where->depth && o < cap; i++) {
        n = snprintf(buf + o, cap - o, "[%llu]", (unsigned long long)where->index[i]);
        o += n < 0 ? 0 : (size_t)n;
    }
    return o < cap ? o : cap - 1;
}

#define TILE_PATH_MAX 160
#define TILE_SHOWN_MAX 40

/* The token's text for a message, cut at TILE_SHOWN_MAX bytes. */
static int shown_len(const struct tile_json_token *tok)
{
    return (int)(tok->len > TILE_SHOWN_MAX ? TILE_SHOWN_MAX : tok->len);
}

static const char *shown_more(const struct tile_json_token *tok)
{
    return tok->len > TILE_SHOWN_MAX ? "..." : "";
}

static int wrong_token(const struct tile_dtype_traits *tr, const struct tile_json_token *tok,
                       const struct tile_json_path *where, struct tile_error *e)
{
    static const char *const needs[] = {
        [TILE_CLASS_BOOL] = "true or false",
        [TILE_CLASS_INT] = "numbers",
        [TILE_CLASS_UINT] = "numbers",
        [TILE_CLASS_FLOAT] = "numbers (or \"NaN\", \"Infinity\", \"-Infinity\")",
        [TILE_CLASS_BFLOAT] = "numbers (or \"NaN\", \"Infinity\", \"-Infinity\")",
        [TILE_CLASS_COMPLEX] = "numbers (or \"NaN\", \"Infinity\", \"-Infinity\")",
        [TILE_CLASS_STRING] = "strings",
    };
    char path[TILE_PATH_MAX];
    tile_json_path_format(where, path, sizeof(path));
    return tile_error_set(e, TILE_EINVAL, "%s is %s, but dtype %s needs %s", path, tile_json_type_name(tok->type),
                          tr->name, needs[tr->cls]);
}

/* "value 300 is out of range for uint8 at data[5]" or "value 1.5 at data[2]
 * is not an integer (dtype int32)". */
static int value_error(const struct tile_dtype_traits *tr, const struct tile_json_token *tok, bool range,
                       const struct tile_json_path *where, struct tile_error *e)
{
    char path[TILE_PATH_MAX];
    tile_json_path_format(where, path, sizeof(path));
    if (range)
        return tile_error_set(e, TILE_EINVAL, "value %.*s%s is out of range for %s at %s", shown_len(tok), tok->ptr,
                              shown_more(tok), tr->name, path);
    return tile_error_set(e, TILE_EINVAL, "value %.*s%s at %s is not an integer (dtype %s)", shown_len(tok),
                          tok->ptr, shown_more(tok), path, tr->name);
}

static int parse_bool(const struct tile_dtype_traits *tr, const struct tile_json_token *tok, void *elem,
                      const struct tile_json_path *where, struct tile_error *e)
{
    if (tok->type != TILE_JSON_TRUE && tok->type != TILE_JSON_FALSE)
        return wrong_token(tr, tok, where, e);
    *(uint8_t *)elem = tok->type == TILE_JSON_TRUE;
    return 0;
}

/* NaN / Infinity spellings in any case, with an optional sign: true and
 * the double they stand for in *out. */
static bool parse_special(const struct tile_json_token *tok, double *out)
{
    /* The longest spelling, "-Infinity", is 9 bytes, and 54 with each
     * written as \u00XX: a longer token is no spelling. */
    char buf[64];
    if (tok->len >= sizeof(buf))
        return false;
    size_t n = tile_json_unescape(tok, buf);
    const char *p = buf;
    bool neg = n && p[0] == '-';
    if (n && (p[0] == '-' || p[0] == '+')) {
        p++;
        n--;
    }
    bool nan = n == 3 && strncasecmp(p, "nan", 3) == 0;
    bool inf = (n == 3 && strncasecmp(p, "inf", 3) == 0) || (n == 8 && strncasecmp(p, "infinity", 8) == 0);
    if (!nan && !inf)
        return false;
    *out = copysign(nan ? NAN : INFINITY, neg ? -1.0 : 1.0);
    return true;
}

static int parse_int(const struct tile_dtype_traits *tr, const struct tile_json_token *tok, void *elem,
                     const struct tile_json_path *where, struct tile_error *e)
{
    double special;
    if (tok->type == TILE_JSON_STRING && parse_special(tok, &special)) {
        char path[TILE_PATH_MAX];
        tile_json_path_format(where, path, sizeof(path));
        return tile_error_set(e, TILE_EINVAL, "%s is \"%.*s\", but dtype %s has no NaN or Infinity", path,
                              shown_len(tok), tok->ptr, tr->name);
    }
    if (tok->type != TILE_JSON_NUMBER)
        return wrong_token(tr, tok, where, e);
    bool neg;
    uint64_t mag;
    int rc = tile_json_number_integer(tok->ptr, tok->len, TILE_JSON_INT_INTEGRAL_FLOATS, &neg, &mag);
    if (rc == TILE_JSON_NUM_NOT_INTEGER)
        return value_error(tr, tok, false, where, e);
    unsigned bits = (unsigned)(8 * tr->size);
    bool is_signed = tr->cls == TILE_CLASS_INT;
    uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    if (is_signed)
        max >>= 1;
    bool ok = rc == TILE_JSON_NUM_OK &&
              (neg ? (is_signed ? mag <= max + 1 : mag == 0) : mag <= max);
    if (!ok)
        return value_error(tr, tok, true, where, e);
    uint64_t u = neg ? 0 - mag : mag; /* two's complement; the low bytes are the element */
    memcpy(elem, &u, tr->size);
    return 0;
}

bool tile_json_parse_plain_int(const struct tile_dtype_traits *tr, const struct tile_json_token *tok, void *elem)
{
    const char *s = tok->ptr;
    bool neg = tok->len && s[0] == '-';
    size_t i = neg;
    if (tok->type != TILE_JSON_NUMBER || i == tok->len || tok->len - i > 15)
        return false;
    uint64_t m = 0;
    for (; i < tok->len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        m = m * 10 + (uint64_t)(s[i] - '0');
    }
    return tile_json_store_plain_int(tr, neg, m, elem);
}

bool tile_json_store_plain_int(const struct tile_dtype_traits *tr, bool neg, uint64_t m, void *elem)
{
    switch (tr->cls) {
    case TILE_CLASS_INT:
    case TILE_CLASS_UINT: { /* as parse_int; out of range goes to it for the message */
        unsigned bits = (unsigned)(8 * tr->size);
        uint64_t max = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
        if (tr->cls == TILE_CLASS_INT)
            max >>= 1;
        if (neg ? (tr->cls == TILE_CLASS_INT ? m > max + 1 : m != 0) : m > max)
            return false;
        uint64_t u = neg ? 0 - m : m;
        memcpy(elem, &u, tr->size);
        return true;
    }
    case TILE_CLASS_FLOAT:
    case TILE_CLASS_COMPLEX: {
#if FLT_EVAL_METHOD == 0
        /* Below 10^15 < 2^53 the double is exact, so rounding it to float
         * is the one correct rounding; "-0" is -0.0 as the general path
         * reads it. */
        size_t width = tr->size / tr->parts;
        double v = neg ? -(double)m : (double)m;
        if (width == 4) {
            float f = (float)v;
            memcpy(elem, &f, sizeof(f));
            return true;
        }
        if (width == 8) {
            memcpy(elem, &v, sizeof(v));
            return true;
        }
#endif
        return false;
    }
    default:
        return false;
    }
}

static int parse_real(const struct tile_dtype_traits *tr, const struct tile_json_token *tok, void *elem,
                      const struct tile_json_path *where, struct tile_error *e)
{
    const struct real_kind *k = real_kind_of(tr);
    uint64_t bits;
    double special;
    if (tok->type == TILE_JSON_STRING && parse_special(tok, &special)) {
        bits = k->from_double(special);
    } else if (tok->type == TILE_JSON_NUMBER) {
        bits = k->from_text(tok->ptr, tok->len);
        if (isinf(k->to_double(bits)))
            return value_error(tr, tok, true, where, e);
    } else {
        return wrong_token(tr, tok, where, e);
    }
    memcpy(elem, &bits, k->size);
    return 0;
}

int tile_json_parse_element(enum tile_dtype dtype, const struct tile_json_token *tok, void *elem,
                            const struct tile_json_path *where, struct tile_error *e)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(dtype);
    if (!tr)
        return tile_error_set(e, TILE_EINVAL, "invalid dtype");
    if (tile_json_parse_plain_int(tr, tok, elem))
        return 0;
    switch (tr->cls) {
    case TILE_CLASS_BOOL:
        return parse_bool(tr, tok, elem, where, e);
    case TILE_CLASS_INT:
    case TILE_CLASS_UINT:
        return parse_int(tr, tok, elem, where, e);
    case TILE_CLASS_STRING:
        return tok->type == TILE_JSON_STRING ? 0 : wrong_token(tr, tok, where, e);
    default:
        return parse_real(tr, tok, elem, where, e);
    }
}

size_t tile_format_shape(const int64_t *shape, int rank, bool brackets, char *buf, size_t cap)
{
    /* Formatted by hand: every response header and JSON head has a shape,
     * and snprintf per dimension showed up in request profiles. A shape
     * that does not fit keeps the dimensions that do (and its bracket). */
    if (cap == 0)
        return 0;
    struct tile_text t = {buf, cap > 1 ? cap - 1 : 1, 0, false}; /* room kept for the ']' */
    buf[0] = '\0';
    if (brackets)
        tile_text_put(&t, "[", 1);
    for (int i = 0; i < rank && !t.over; i++) {
        size_t before = t.len;
        if (i)
            tile_text_put(&t, ",", 1);
        tile_text_i64(&t, shape[i]);
        if (t.over) {
            t.len = before;
            buf[before] = '\0';
        }
    }
    t.cap = cap;
    t.over = false;
    if (brackets)
        tile_text_put(&t, "]", 1);
    return t.len;
}
