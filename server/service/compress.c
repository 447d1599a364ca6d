/* compress.c - Content-Encoding gzip/deflate for request and response bodies.
 *
 * DESIGN. As Triton does: a request body with Content-Encoding gzip or
 * deflate (a zlib stream) is inflated before decoding, bounded by
 * --max-body *after* inflation so a small bomb cannot exhaust memory; a
 * response built in memory is compressed when Accept-Encoding prefers gzip
 * or deflate; a streamed response is deflated chunk by chunk as it is
 * produced (stream.c, with the same negotiation and window bits).
 * Inflation runs on a worker only (inflate.c, called from the work path);
 * compressing a small in-memory body (one within --inline-max, /metrics)
 * may run on the transport's thread, a cost bounded by that size.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "accept.h"
#include "compress.h"
#include "grow.h"

/* zlib windowBits: 15 = zlib stream, +16 = gzip wrapper. */
int tiled_coding_window_bits(enum tiled_coding c)
{
    return c == TILED_CODING_GZIP ? 15 + 16 : 15;
}

const char *tiled_coding_name(enum tiled_coding c)
{
    return c == TILED_CODING_GZIP ? "gzip" : c == TILED_CODING_DEFLATE ? "deflate" : NULL;
}

int tiled_coding_parse(const char *s, enum tiled_coding *out)
{
    if (!s[0] || strcasecmp(s, "identity") == 0)
        *out = TILED_CODING_IDENTITY;
    else if (strcasecmp(s, "gzip") == 0 || strcasecmp(s, "x-gzip") == 0)
        *out = TILED_CODING_GZIP;
    else if (strcasecmp(s, "deflate") == 0)
        *out = TILED_CODING_DEFLATE;
    else
        return -1;
    return 0;
}

int tiled_body_decompress(enum tiled_coding c, char **body, uint64_t *len, uint64_t max, struct tile_error *e)
{
    if (c == TILED_CODING_IDENTITY)
        return 0;
    uint64_t cap = *len * 4 + 4096;
    if (cap > max)
        cap = max;
    char *out = malloc(cap ? cap : 1);
    z_stream z = {0};
    if (!out || inflateInit2(&z, tiled_coding_window_bits(c)) != Z_OK) {
        free(out);
        return tile_error_set(e, TILE_ENOMEM, "cannot set up decompression");
    }
    z.next_in = (Bytef *)*body;
    z.avail_in = (uInt)*len;
    int rc = Z_OK;
    uint64_t used = 0;
    while (rc != Z_STREAM_END) {
        if (used == cap) {
            size_t ncap = (size_t)cap;
            char *nb = used < max ? tile_grow(out, &ncap, (size_t)used, 1, 1, 0, max > SIZE_MAX ? SIZE_MAX : (size_t)max)
                                  : NULL;
            if (!nb) {
                rc = used < max ? Z_BUF_ERROR : Z_MEM_ERROR; /* out of memory, or past max-body */
                break;
            }
            out = nb;
            cap = ncap;
        }
        uint64_t room = cap - used > UINT32_MAX ? UINT32_MAX : cap - used;
        z.next_out = (Bytef *)out + used;
        z.avail_out = (uInt)room;
        rc = inflate(&z, Z_NO_FLUSH);
        used += room - z.avail_out;
        if (rc != Z_OK && rc != Z_STREAM_END)
            break;
        if (rc == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
            rc = Z_DATA_ERROR; /* truncated stream */
            break;
        }
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(out);
        if (rc == Z_MEM_ERROR)
            return tile_error_set(e, TILE_ETOOBIG, "the decompressed request body exceeds the max-body limit of %llu bytes",
                                  (unsigned long long)max);
        return tile_error_set(e, TILE_EINVAL, "the request body is not valid %s data",
                              c == TILED_CODING_GZIP ? "gzip" : "deflate (zlib)");
    }
    free(*body);
    *body = out;
    *len = used;
    return 0;
}

/* Weight of `coding` in an Accept-Encoding list, in thousandths (0 when absent). */
static int accept_q(const char *list, const char *coding)
{
    size_t clen = strlen(coding);
    struct tiled_accept_elem el;
    for (const char *p = list; tiled_accept_next(&p, &el);) {
        if (el.name_len == clen && strncasecmp(el.name, coding, clen) == 0)
            return el.q;
    }
    return 0;
}

enum tiled_coding tiled_coding_negotiate(const char *accept_encoding)
{
    int gz = accept_q(accept_encoding, "gzip"), xgz = accept_q(accept_encoding, "x-gzip");
    int df = accept_q(accept_encoding, "deflate");
    if (xgz > gz) /* RFC 9110 8.4.1.3: a recipient SHOULD take x-gzip as gzip */
        gz = xgz;
    if (gz <= 0 && df <= 0)
        return TILED_CODING_IDENTITY;
    return gz >= df ? TILED_CODING_GZIP : TILED_CODING_DEFLATE;
}

/* Bodies below this many bytes are sent as they are: they fit one TCP
 * segment (~1460 bytes) either way, so compressing saves no round trip,
 * and gzip's 18-byte frame plus deflate's block overhead can make a small
 * body larger, for the CPU time of setting up a deflate stream. */
#define COMPRESS_MIN_BYTES 1024

enum tiled_coding tiled_coding_sent(enum tiled_coding c, uint64_t len)
{
    return len < COMPRESS_MIN_BYTES ? TILED_CODING_IDENTITY : c;
}

int tiled_compress(enum tiled_coding c, const void *data, uint64_t len, char **out, uint64_t *out_len,
                   struct tile_error *e)
{
    z_stream z = {0};
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, tiled_coding_window_bits(c), 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return tile_error_set(e, TILE_ENOMEM, "cannot set up compression");
    uLong bound = deflateBound(&z, (uLong)len);
    char *buf = malloc(bound);
    if (!buf) {
        deflateEnd(&z);
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate the compressed response");
    }
    z.next_in = (Bytef *)data;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)buf;
    z.avail_out = (uInt)bound;
    int rc = deflate(&z, Z_FINISH);
    *out_len = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return 0;
    }
    *out = buf;
    return 1;
}

int tiled_reply_compress(struct tiled_reply *r, enum tiled_coding c, struct tile_error *e)
{
    if (!r->body || tiled_coding_sent(c, r->body_len) == TILED_CODING_IDENTITY)
        return 0;
    char *out;
    uint64_t n;
    int rc = tiled_compress(c, r->body, r->body_len, &out, &n, e);
    if (rc <= 0)
        return rc; /* out of memory, or deflate failed: the body stays as it is */
    tiled_reply_set_body(r, out, n, NULL);
    tiled_reply_header(r, "Content-Encoding", tiled_coding_name(c));
    return 1;
}

const char *tiled_compress_library(void)
{
    static char text[48];
    snprintf(text, sizeof(text), "zlib %s", zlibVersion());
    return text;
}
