/* jsonread.h - typed reads on top of the JSON pull lexer.
 *
 * Request decoders (/v1 JSON, the Open Inference Protocol header) read
 * integers, integer lists, strings, booleans and objects with named keys
 * the same way and report mistakes the same way ("repeats[1] must be an
 * integer, got 1.5"); this module is that one way.
 */
#ifndef TILE_JSONREAD_H
#define TILE_JSONREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonlex.h"

struct tile_jr {
    struct tile_json_lexer lx;
    struct tile_error *e;
};

/* Object keys and what to do with each; fn reads the value. Written with
 * TILE_JR_KEY, which records the name's length for the key match. */
struct tile_jr_key {
    const char *name;
    size_t len; /* strlen(name) */
    int (*fn)(void *ctx);
};
/* clang-format off */
#define TILE_JR_KEY(name, fn) {name, sizeof(name) - 1, fn}
/* clang-format on */

/* The next token (inline: it is called once per token). */
static inline int tile_jr_next(struct tile_jr *r, struct tile_json_token *t)
{
    return tile_json_next(&r->lx, t, r->e);
}
/* Converts a token already read to an int64 (integers only). `idx` >= 0
 * makes messages say what[idx]. */
int tile_jr_int_token(struct tile_jr *r, const struct tile_json_token *t, const char *what, int idx, int64_t *out);
int tile_jr_int(struct tile_jr *r, const char *what, int64_t *out);
/* An array of integers, at most `max`. */
int tile_jr_int_list(struct tile_jr *r, const char *what, int64_t *out, int max, int *count);
/* A string, unescaped into buf (cap bytes, not NUL-terminated; *len set):
 * cap bounds the unescaped bytes, however long the escapes written. */
int tile_jr_string(struct tile_jr *r, const char *what, char *buf, size_t cap, size_t *len);
int tile_jr_bool(struct tile_jr *r, const char *what, bool *out);
/* Reads an array ('[' not yet read), calling fn(ctx) once per element with
 * the lexer just before it, so fn reads the element itself. fn is called
 * whenever the next token is not the array's end, so its first read is
 * where a malformed element (or a trailing comma) is found: fn must read a
 * token before reporting anything of its own. */
int tile_jr_array(struct tile_jr *r, void *ctx, int (*fn)(void *ctx), const char *what);

/* Reads an object's members ('{' not yet read) through `keys`; duplicates
 * are an error; unknown keys are an error unless `skip_unknown`. */
int tile_jr_object(struct tile_jr *r, void *ctx, const struct tile_jr_key *keys, int n, const char *where,
                   const char *expected, bool skip_unknown);

#endif
