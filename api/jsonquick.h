/* jsonquick.h - a compact JSON document of a known layout, read in one pass
 * or declined.
 *
 * A small request's body went through the general reader token by token
 * (jsonlex.c, the key tables of jsonread.c, the shape inference of
 * jsondata.c): for the Open Inference Protocol's usual two-input body that
 * was a third of the instructions the whole request took. The decoders
 * (v2.c, v1_json.c) first try the layout clients send with these pieces,
 * which read straight from the bytes; each piece either reads what it is
 * asked for and moves the cursor past it, or returns false with the cursor
 * anywhere. On false the decoder hands the whole document to the general
 * reader, which decides it: accepts it or names the error. So nothing here
 * reports an error, and what a piece accepts must be exactly what the
 * general reader accepts, decoded to the same bytes (tests/api/harness/
 * decode_dump.c compares both paths on every document of the differential
 * tests, and fuzz_v1_json and fuzz_v2 on every input).
 *
 * What is read: the four JSON whitespace bytes around every token; strings
 * of plain ASCII only (0x20-0x7F, no '"', no '\\': no escapes, no UTF-8 to
 * validate); integers as [-]digits with no leading zero; numbers with the
 * full JSON grammar; flat arrays of those. Anything else is declined.
 */
#ifndef TILE_JSONQUICK_H
#define TILE_JSONQUICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"
#include "tensor.h"

struct tile_jq {
    const char *p, *end;
};

static inline void tile_jq_init(struct tile_jq *q, const char *buf, size_t len)
{
    q->p = buf;
    q->end = buf + len;
}

/* Skips JSON whitespace. */
static inline void tile_jq_ws(struct tile_jq *q)
{
    while (q->p < q->end && (*q->p == ' ' || *q->p == '\n' || *q->p == '\r' || *q->p == '\t'))
        q->p++;
}

/* Whitespace, then the byte c (consumed). The byte straight away is tried
 * first: half the punctuation of a compact or a Python-dumped document has
 * no whitespace before it. */
static inline bool tile_jq_char(struct tile_jq *q, char c)
{
    if (q->p < q->end && *q->p == c) {
        q->p++;
        return true;
    }
    tile_jq_ws(q);
    if (q->p == q->end || *q->p != c)
        return false;
    q->p++;
    return true;
}

/* Whitespace, then whether the next byte is c (not consumed). */
static inline bool tile_jq_peek(struct tile_jq *q, char c)
{
    tile_jq_ws(q);
    return q->p < q->end && *q->p == c;
}

/* The n bytes of lit, exactly, at the cursor (no whitespace first). A key
 * is read as tile_jq_char(q, '"'), then the tile_jq_take of its bytes and
 * closing quote that matches (`name"`), then tile_jq_char(q, ':'): keys are
 * matched without being scanned first. */
static inline bool tile_jq_take(struct tile_jq *q, const char *lit, size_t n)
{
    if ((size_t)(q->end - q->p) < n || memcmp(q->p, lit, n) != 0)
        return false;
    q->p += n;
    return true;
}

/* Whitespace and a plain string value. */
bool tile_jq_string(struct tile_jq *q, const char **s, size_t *len);

/* ':' and a plain string value of at most `max` bytes: a member's value. */
bool tile_jq_member_string(struct tile_jq *q, const char **s, size_t *len, size_t max);

/* ':' and true or false: a member's value. */
bool tile_jq_member_bool(struct tile_jq *q, bool *out);

/* Whitespace and an array of at most `max` integers of at most 18 digits
 * each (the values tile_jr_int_list reads without its general path). */
bool tile_jq_ints(struct tile_jq *q, int64_t *out, int max, int *count);

/* ':' and a tensor's shape: tile_jq_ints of at most `max` dimensions, none
 * negative (the decoders refuse those, with a message, in their general
 * reader). */
bool tile_jq_shape(struct tile_jq *q, int64_t *shape, int max, int *rank);

/* ':' and a tensor's "data" as a flat array of numbers, into *t made for
 * dtype and shape (tile_tensor_init, at most max_bytes). *t is emptied
 * first: freeable (tile_tensor_free) after the call, whatever it returns. */
bool tile_jq_tensor(struct tile_jq *q, struct tile_tensor *t, enum tile_dtype dtype, int rank, const int64_t *shape,
                    uint64_t max_bytes);
/* The same into the caller's small buffer when the elements fit in it
 * (tile_tensor_init_in: *t then borrows it). */
bool tile_jq_tensor_in(struct tile_jq *q, struct tile_tensor *t, enum tile_dtype dtype, int rank,
                       const int64_t *shape, uint64_t max_bytes, void *buf, size_t buf_cap);

/* Whitespace and a flat array of exactly `n` JSON numbers, converted as
 * tile_json_parse_element converts them into consecutive elements of
 * `dtype` at out. Integer, float and bfloat dtypes only; a value the
 * conversion refuses (out of range, say) is declined. */
bool tile_jq_numbers(struct tile_jq *q, enum tile_dtype dtype, void *out, uint64_t n);

/* Whitespace to the end of the document, and nothing else. */
bool tile_jq_end(struct tile_jq *q);

/* Whether the decoders try this reader first (the default) or go straight
 * to the general one: tests decode every document both ways. Atomic. */
void tile_jq_set_enabled(bool on);
bool tile_jq_enabled(void);

/* How many documents the decoders have read by this reader on the calling
 * thread (tile_jq_note_taken counts one): the differential tests check
 * that their documents exercised both readers. */
void tile_jq_note_taken(void);
uint64_t tile_jq_taken(void);

#endif
