/* numfmt.h - tensor elements as JSON text, and back.
 *
 * Output (tile_json_format_element), per dtype class:
 *   bool      true / false (any non-zero byte is true)
 *   integers  exact decimal
 *   floats    the shortest decimal that reads back to the same value of
 *             the element's own width (float32 0.1 is "0.1", float16 0x2E66
 *             is "0.1"), laid out like Python's repr: integral values keep
 *             ".0" ("1.0", "-0.0"), exponent form below 1e-4 and from 1e16
 *             on ("1e-05", "1e+20", "1.5e+300"); NaN and the infinities are
 *             the JSON strings "NaN", "Infinity" and "-Infinity" (the sign
 *             and payload of a NaN are not kept)
 *   complex   [re,im], each part formatted as a float of half the width
 * Input (tile_json_parse_element) accepts what output produces and more;
 * see its contract below.
 *
 * Why not jansson (which builds the small control-plane documents): tensor
 * data needs what it does not give. Integers must be exact over the whole
 * uint64 range (jansson's json_int_t is a signed 64-bit integer); floats
 * must be read and written correctly rounded at the element's own width,
 * float16 and bfloat16 included (jansson goes through double); and a huge
 * array must cost memory bounded by the tensor, not a json_t per element.
 */
#ifndef TILE_NUMFMT_H
#define TILE_NUMFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"
#include "error.h"
#include "jsonlex.h"

/* Longest text tile_json_format_element() writes (a complex128 needs 51). */
#define TILE_NUMFMT_MAX 80

/* Writes the JSON text of one element of `dtype` (read from `elem`, host
 * order) to buf, which holds TILE_NUMFMT_MAX bytes; no NUL is written.
 * Returns the length; 0 for strings and invalid dtypes. Thread-safe. */
size_t tile_json_format_element(enum tile_dtype dtype, const void *elem, char *buf);

/* Writes v in decimal at `out` (at most 20 bytes, no NUL); returns the
 * count. The one unsigned formatter: elements, the access line, the
 * reply's metrics. */
size_t tile_format_u64(char *out, uint64_t v);

/* Writes `s` as a quoted JSON string: '"' and '\\' escaped, control
 * characters as \n \t \r \b \f or \u00XX (upper-case hex, as jansson
 * writes), everything else (UTF-8 included) as is. Returns the full length
 * of the quoted text even when `cap` is smaller; writes only the first
 * min(cap, length) bytes (no NUL), so a NULL/0 call measures. Returns -1
 * when `s` is not valid UTF-8. The one JSON string escaper: the access log
 * uses it through tile_json_escape_text. */
long tile_json_escape_string(const char *s, size_t len, char *buf, size_t cap);

/* As tile_json_escape_string, but a byte that is not part of valid UTF-8
 * is written as U+FFFD instead of failing: for text a client sent (a path,
 * a header) that a log line must still show. At most 6 * len + 2 bytes. */
long tile_json_escape_text(const char *s, size_t len, char *buf, size_t cap);

/* The end of the run of plain bytes from s[i] (at most len): printable
 * ASCII and DEL, 0x20-0x7F, other than '"' and '\\' - the bytes a JSON
 * string holds as they are, and that need no escape when written. */
size_t tile_json_plain_end(const char *s, size_t i, size_t len);

/* Where an element sits, for messages: name[i][j]..., formatted only when
 * an error is reported. */
struct tile_json_path {
    const char *name;      /* "data" */
    const uint64_t *index; /* subscripts, outermost first */
    int depth;
};

/* Writes "data[1][2]" into buf (NUL-terminated, truncated to cap). */
size_t tile_json_path_format(const struct tile_json_path *where, char *buf, size_t cap);

/* Converts one scalar token to an element of `dtype` at `elem`:
 *   bool      true and false only (numbers are refused, so 0/1 never mean
 *             a boolean by accident)
 *   integers  numbers with an exactly integral value ("3", "-0", "3.0",
 *             "3e2"); a fraction is "value 1.5 is not an integer ...", a
 *             value outside the type "value 300 is out of range for uint8
 *             at data[5]"
 *   floats    numbers, correctly rounded to the element's width (float16
 *             and bfloat16 from the decimal digits, see numfmt.c); a finite
 *             number beyond the largest finite value is out of range; the
 *             strings "NaN", "Infinity", "-Infinity", "inf", "-inf", "nan"
 *             in any case
 *   complex   one part: `elem` receives a float32 (complex64) or float64
 *             (complex128); the caller reads re and im separately
 *   string    only checks that the token is a string; the caller copies the
 *             bytes (tile_json_unescape) and `elem` is not touched
 * Any other token is "data[3] is a string, but dtype int32 needs numbers".
 * Returns 0 or -1 with `e` filled (TILE_EINVAL). */
int tile_json_parse_element(enum tile_dtype dtype, const struct tile_json_token *tok, void *elem,
                            const struct tile_json_path *where, struct tile_error *e);

/* tile_json_parse_element's common case without its general path: a
 * number token written as a plain integer of at most 15 digits ("7",
 * "-20") for an integer, float32, float64 or complex element (`tr` is the
 * dtype's traits; complex: one part, as tile_json_parse_element). True when
 * the element was stored, exactly as tile_json_parse_element stores it;
 * false, with nothing stored, when the general path must decide (any other
 * token or dtype, and every error). */
bool tile_json_parse_plain_int(const struct tile_dtype_traits *tr, const struct tile_json_token *tok, void *elem);
/* Its store: the integer -m (neg) or m, m below 10^15, into the element as
 * tile_json_parse_plain_int stores it; false when it must not (out of the
 * dtype's range, or a dtype it leaves to the general path). For a reader
 * that has scanned the digits itself (jsonquick.c). */
bool tile_json_store_plain_int(const struct tile_dtype_traits *tr, bool neg, uint64_t m, void *elem);

/* Text built into a caller's fixed buffer, NUL-terminated as it grows:
 * what does not fit sets `over` (the caller's error to report) and leaves
 * the text as it was, never cut mid-piece. For the few heads formatted
 * for every request (a .npy header, a v2 response's start), where
 * snprintf cost a tenth of the request. */
struct tile_text {
    char *buf;
    size_t cap, len;
    bool over;
};
/* Inline, so that a literal's length and copy are the compiler's. */
static inline void tile_text_put(struct tile_text *t, const char *s, size_t n)
{
    if (t->over || t->cap - t->len <= n) {
        t->over = true;
        return;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
}

static inline void tile_text_str(struct tile_text *t, const char *s)
{
    tile_text_put(t, s, strlen(s));
}
void tile_text_i64(struct tile_text *t, int64_t v);
void tile_text_u64(struct tile_text *t, uint64_t v);

/* Writes "[2,3,4]" (or "2,3,4" without brackets) into buf. */
size_t tile_format_shape(const int64_t *shape, int rank, bool brackets, char *buf, size_t cap);

#endif
