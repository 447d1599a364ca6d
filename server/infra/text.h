/* text.h - JSON strings from bytes a client sent.
 *
 * Every JSON document the daemon writes about a request (error bodies, log
 * lines) is built with jansson, or, for the access line, written with
 * tiled_json_quote(), which escapes as jansson does. jansson accepts only valid
 * UTF-8, and request text (a path, a header, a message quoting either) may
 * be cut mid-character or not be UTF-8 at all: such bytes become U+FFFD
 * here, so the document is always valid JSON and still says what it can.
 */
#ifndef TILED_TEXT_H
#define TILED_TEXT_H

#include <jansson.h>
#include <stddef.h>

/* A new JSON string of `s` with invalid UTF-8 replaced (NULL: out of memory). */
json_t *tiled_json_text(const char *s);

/* Serialises `doc` compactly and releases it; NULL when doc is NULL or
 * memory runs out. */
char *tiled_json_dump(json_t *doc);

/* Writes `s` at `out` as a quoted JSON string, escaped as jansson escapes
 * (quote, backslash, control characters; UTF-8 kept as it is) and with
 * invalid UTF-8 replaced as tiled_json_text() replaces it; returns the
 * bytes written. `out` must have room for TILED_JSON_QUOTED_MAX(strlen(s)).
 * For the access log, written once per request without building a
 * document (log.c); the escaping is api/'s tile_json_escape_text. */
#define TILED_JSON_QUOTED_MAX(len) (6 * (len) + 2)
size_t tiled_json_quote(char *out, const char *s);
/* The same of s[0, len), its length known (room for TILED_JSON_QUOTED_MAX(len)). */
size_t tiled_json_quote_n(char *out, const char *s, size_t len);

/* Copies the string `src` into dst[cap] (cap > 0), truncating; returns dst. */
char *tiled_copy_str(char *dst, size_t cap, const char *src);

#endif
