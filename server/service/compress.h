/* compress.h - Content-Encoding gzip/deflate for request and response bodies. */
#ifndef TILED_COMPRESS_H
#define TILED_COMPRESS_H

#include <stdint.h>

#include "error.h"
#include "reply.h"

enum tiled_coding { TILED_CODING_IDENTITY, TILED_CODING_GZIP, TILED_CODING_DEFLATE };

/* Parses a Content-Encoding value; -1 when unsupported. "x-gzip" is gzip
 * (RFC 9110 8.4.1.3). */
int tiled_coding_parse(const char *s, enum tiled_coding *out);
/* The coding an Accept-Encoding value prefers (identity when none); an
 * "x-gzip" element weighs for gzip, as much as a "gzip" one does. */
enum tiled_coding tiled_coding_negotiate(const char *accept_encoding);
/* The coding an in-memory body of `len` bytes goes with when `c` is
 * negotiated: identity for a body too small to gain from compression. */
enum tiled_coding tiled_coding_sent(enum tiled_coding c, uint64_t len);
/* Its Content-Encoding name; NULL for identity. */
const char *tiled_coding_name(enum tiled_coding c);
/* zlib's windowBits for the coding (deflateInit2 / inflateInit2). */
int tiled_coding_window_bits(enum tiled_coding c);

/* Inflates *body (*len bytes, malloc'd) in place of itself, bounded by
 * `max` bytes after inflation. */
int tiled_body_decompress(enum tiled_coding c, char **body, uint64_t *len, uint64_t max, struct tile_error *e);
/* Compresses data[0, len) with `c` (gzip or deflate) into *out, malloc'd,
 * of *out_len bytes: 1 when done, 0 when deflate fails (the data is then
 * sent as it is), -1 with `e` set when out of memory. */
int tiled_compress(enum tiled_coding c, const void *data, uint64_t len, char **out, uint64_t *out_len,
                   struct tile_error *e);
/* Compresses an in-memory reply body with `c` (identity: no change): 1
 * when the body is now coded with `c`, 0 when it is left as it was (see
 * tiled_coding_sent; or deflate failed), -1 with `e` set. */
int tiled_reply_compress(struct tiled_reply *r, enum tiled_coding c, struct tile_error *e);

/* The compression library's name and version as linked. */
const char *tiled_compress_library(void);

#endif
