/* compress.h - Content-Encoding gzip/deflate for request and response bodies. */
#ifndef TILED_COMPRESS_H
#define TILED_COMPRESS_H

#include <stdint.h>

#include "error.h"
#include "reply.h"

enum tiled_coding { TILED_CODING_IDENTITY, TILED_CODING_GZIP, TILED_CODING_DEFLATE };

/* Parses a Content-Encoding value; -1 when unsupported. */
int tiled_coding_parse(const char *s, enum tiled_coding *out);
/* The coding an Accept-Encoding value prefers (identity when none). */
enum tiled_coding tiled_coding_negotiate(const char *accept_encoding);
/* Its Content-Encoding name; NULL for identity. */
const char *tiled_coding_name(enum tiled_coding c);
/* zlib's windowBits for the coding (deflateInit2 / inflateInit2). */
int tiled_coding_window_bits(enum tiled_coding c);

/* Inflates *body (*len bytes, malloc'd) in place of itself, bounded by
 * `max` bytes after inflation. */
int tiled_body_decompress(enum tiled_coding c, char **body, uint64_t *len, uint64_t max, struct tile_error *e);
/* Compresses an in-memory reply body with `c` (identity: no change). */
int tiled_reply_compress(struct tiled_reply *r, enum tiled_coding c, struct tile_error *e);

/* The compression library's name and version as linked. */
const char *tiled_compress_library(void);

#endif
