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
#include <limits.h>
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

/* zlib counts in uInt (32 bits): a longer buffer is handed over in pieces. */
static uInt zlib_piece(uint64_t left)
{
    return left > UINT_MAX ? UINT_MAX : (uInt)left;
}

/* The next piece of the input, when zlib has used the last one. */
static void feed_in(z_stream *z, const Bytef **in, uint64_t *left)
{
    if (z->avail_in == 0 && *left) {
        z->next_in = (Bytef *)*in;
        z->avail_in = zlib_piece(*left);
        *in += z->avail_in;
        *left -= z->avail_in;
    }
}

/* How an inflation ended, each answered in its own words. */
enum inflate_end { INFLATED, PAST_MAX, NO_MEMORY, BAD_DATA };

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
    const Bytef *in = (const Bytef *)*body;
    uint64_t in_left = *len, used = 0;
    enum inflate_end end;
    for (;;) {
        feed_in(&z, &in, &in_left);
        if (used == cap) {
            size_t ncap = (size_t)cap;
            char *nb = NULL;
            if (used >= max) {
                end = PAST_MAX;
                break;
            }
            if (!(nb = tile_grow(out, &ncap, (size_t)used, 1, 1, 0, max > SIZE_MAX ? SIZE_MAX : (size_t)max))) {
                end = NO_MEMORY;
                break;
            }
            out = nb;
            cap = ncap;
        }
        uInt room = zlib_piece(cap - used);
        z.next_out = (Bytef *)out + used;
        z.avail_out = room;
        int rc = inflate(&z, Z_NO_FLUSH);
        used += room - z.avail_out;
        if (rc == Z_STREAM_END) {
            end = INFLATED;
            break;
        }
        if (rc == Z_MEM_ERROR) {
            end = NO_MEMORY;
            break;
        }
        /* Z_BUF_ERROR is no progress, not an error: more room or input comes next turn. */
        if ((rc != Z_OK && rc != Z_BUF_ERROR) || (z.avail_in == 0 && in_left == 0 && z.avail_out != 0)) {
            end = BAD_DATA; /* corrupt, or the stream ends before its end */
            break;
        }
    }
    inflateEnd(&z);
    if (end != INFLATED) {
        free(out);
        if (end == PAST_MAX)
            return tile_error_set(e, TILE_ETOOBIG, "the decompressed request body exceeds the max-body limit of %llu bytes",
                                  (unsigned long long)max);
        if (end == NO_MEMORY)
            return tile_error_set(e, TILE_ENOMEM, "cannot allocate memory to decompress the request body (%llu bytes "
                                  "so far)", (unsigned long long)used);
        return tile_error_set(e, TILE_EINVAL, "the request body is not valid %s data",
                              c == TILED_CODING_GZIP ? "gzip" : "deflate (zlib)");
    }
    free(*body);
    *body = out;
    *len = used;
    return 0;
}

/* Weight of `coding` in an Accept-Encoding list, in thousandths (0 when absent). */
enum tiled_coding tiled_coding_negotiate(const char *accept_encoding)
{
    /* One pass over the list: each coding's q (0 when not listed; the
     * first listing of a name counts). */
    int gz = -1, xgz = -1, df = -1;
    struct tiled_accept_elem el;
    for (const char *p = accept_encoding; tiled_accept_next(&p, &el);) {
        int *q = NULL;
        if (el.name_len == 4 && strncasecmp(el.name, "gzip", 4) == 0)
            q = &gz;
        else if (el.name_len == 6 && strncasecmp(el.name, "x-gzip", 6) == 0)
            q = &xgz;
        else if (el.name_len == 7 && strncasecmp(el.name, "deflate", 7) == 0)
            q = &df;
        if (q && *q < 0)
            *q = el.q;
    }
    gz = gz < 0 ? 0 : gz;
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
    const Bytef *in = data;
    Bytef *o = (Bytef *)buf;
    uint64_t in_left = len, out_left = bound;
    int rc;
    for (;;) {
        feed_in(&z, &in, &in_left);
        if (z.avail_out == 0 && out_left) {
            z.next_out = o;
            z.avail_out = zlib_piece(out_left);
            o += z.avail_out;
            out_left -= z.avail_out;
        }
        rc = deflate(&z, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_END || (rc != Z_OK && rc != Z_BUF_ERROR) || (z.avail_out == 0 && out_left == 0))
            break; /* done, failed, or past deflateBound (which zlib promises never happens) */
    }
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
