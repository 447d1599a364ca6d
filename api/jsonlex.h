/* jsonlex.h - a strict RFC 8259 pull parser over a byte buffer.
 *
 * The lexer hands out one token at a time from a buffer that needs no NUL
 * terminator and must outlive the lexer and its tokens. It validates the
 * whole grammar as it goes: commas and colons, no trailing commas, keys are
 * strings, exactly one top-level value followed only by whitespace, a
 * nesting depth limit, UTF-8 and escapes inside strings (lone surrogates and
 * raw control characters refused). Errors name the byte offset (0-based):
 * "invalid JSON: expected ',' or ']' at byte 17".
 *
 * Tokens point into the buffer; strings are unescaped only when asked for
 * (tile_json_unescape), numbers keep their exact text and are converted by
 * the tile_json_number_*() functions. Nothing is allocated.
 *
 * Typical use:
 *     struct tile_json_lexer lx;
 *     struct tile_json_token t;
 *     tile_json_lexer_init(&lx, body, len, 64);
 *     while (tile_json_next(&lx, &t, &err) == 0 && t.type != TILE_JSON_END) ...
 *
 * A lexer is a plain value: copying it saves a position to come back to.
 *
 * Why not jansson (which builds the small control-plane documents): tensor
 * data needs what it does not give. Integers must be exact over the whole
 * uint64 range (jansson's json_int_t is a signed 64-bit integer); floats
 * must be read and written correctly rounded at the element's own width,
 * float16 and bfloat16 included (jansson goes through double); and a huge
 * array must cost memory bounded by the tensor, not a json_t per element.
 */
#ifndef TILE_JSONLEX_H
#define TILE_JSONLEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Structural nesting limit; a configured depth can only be lower. */
#define TILE_JSON_MAX_DEPTH 1024

enum tile_json_type {
    TILE_JSON_END,          /* the document is complete */
    TILE_JSON_OBJECT_BEGIN,
    TILE_JSON_OBJECT_END,
    TILE_JSON_ARRAY_BEGIN,
    TILE_JSON_ARRAY_END,
    TILE_JSON_KEY,          /* an object key (its ':' is consumed too) */
    TILE_JSON_STRING,
    TILE_JSON_NUMBER,
    TILE_JSON_TRUE,
    TILE_JSON_FALSE,
    TILE_JSON_NULL
};

/* Token flags. */
#define TILE_JSON_TOK_ESCAPED 1u /* string/key: contains backslash escapes */
#define TILE_JSON_TOK_FRAC 2u    /* number: has a fraction part */
#define TILE_JSON_TOK_EXP 4u     /* number: has an exponent part */

struct tile_json_token {
    enum tile_json_type type;
    const char *ptr; /* strings and keys: the bytes between the quotes, escapes
                        intact; numbers: the number's text; others: the token */
    size_t len;
    size_t pos;      /* byte offset of the token's first byte */
    unsigned flags;
};

struct tile_json_lexer {
    const char *buf;
    size_t len, pos;
    int depth, max_depth;
    int state;
    bool failed;
    uint8_t is_object[TILE_JSON_MAX_DEPTH / 8]; /* one bit per open container */
};

/* Starts lexing buf[0, len). Opening a container deeper than `max_depth`
 * fails with "JSON nesting deeper than N"; max_depth <= 0 or above
 * TILE_JSON_MAX_DEPTH means TILE_JSON_MAX_DEPTH. */
void tile_json_lexer_init(struct tile_json_lexer *lx, const char *buf, size_t len, int max_depth);

/* Reads the next token. Returns 0, or -1 with `e` filled (TILE_EINVAL);
 * after an error every later call fails again. At the end of a complete
 * document it returns tokens of type TILE_JSON_END. */
int tile_json_next(struct tile_json_lexer *lx, struct tile_json_token *tok, struct tile_error *e);

/* Consumes the rest of the value that starts with `first` (the token just
 * read): nothing for a scalar, up to the matching end for a container. */
int tile_json_skip_value(struct tile_json_lexer *lx, const struct tile_json_token *first, struct tile_error *e);

/* True when the next token is the ']' that closes the innermost open
 * array (only whitespace before it); reads nothing. When false, the next
 * token is anything else, an error included. */
bool tile_json_at_array_end(const struct tile_json_lexer *lx);

/* True for string, number, true, false and null tokens. */
bool tile_json_is_scalar(enum tile_json_type type);

/* Short name of a token type for messages: "a string", "an array", ... */
const char *tile_json_type_name(enum tile_json_type type);

/* Writes the unescaped bytes of a string or key token to `out`, which must
 * hold tok->len bytes (unescaping never grows a string). Returns the count.
 * Without TILE_JSON_TOK_ESCAPED this is a plain copy. */
size_t tile_json_unescape(const struct tile_json_token *tok, char *out);

/* True when a string or key token's unescaped bytes equal the C string `s`. */
bool tile_json_string_equals(const struct tile_json_token *tok, const char *s);

/* Number conversions. `s` must be a JSON number as the lexer produced it
 * (token ptr and len). Return values: */
enum tile_json_numerr {
    TILE_JSON_NUM_OK = 0,
    TILE_JSON_NUM_NOT_INTEGER, /* has a fraction or exponent (see flags) */
    TILE_JSON_NUM_RANGE        /* outside the type's range */
};

/* Integer flag: also accept numbers with a fraction or exponent whose value
 * is an exact integer ("1.0", "1e3", "2.50e1"). Without it they are
 * TILE_JSON_NUM_NOT_INTEGER. A non-integral value is always NOT_INTEGER. */
#define TILE_JSON_INT_INTEGRAL_FLOATS 1u

/* Exact integer value as sign and magnitude over the whole 64-bit range
 * (NUM_RANGE when the magnitude exceeds UINT64_MAX). "-0" is 0 with *neg set. */
int tile_json_number_integer(const char *s, size_t len, unsigned flags, bool *neg, uint64_t *mag);
int tile_json_number_int64(const char *s, size_t len, unsigned flags, int64_t *out);
int tile_json_number_uint64(const char *s, size_t len, unsigned flags, uint64_t *out);

/* Correctly rounded double / float (round to nearest even), independent of
 * the process locale. A finite number too big for the type yields +-inf and
 * TILE_JSON_NUM_RANGE; underflow silently gives a subnormal or zero. */
int tile_json_number_double(const char *s, size_t len, double *out);
int tile_json_number_float(const char *s, size_t len, float *out);

/* Compares the exact decimal value of a JSON number with a finite double:
 * -1, 0 or 1 as the number is below, equal to or above `v`. Exact, and slow
 * (it expands `v` in full): meant for the rare rounding ties. */
int tile_json_number_compare(const char *s, size_t len, double v);

#endif
