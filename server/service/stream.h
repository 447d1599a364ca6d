/* stream.h - response bodies produced on workers while the transport sends
 * them. */
#ifndef TILED_STREAM_H
#define TILED_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tile_encoder;
struct tiled_req;
struct tiled_stream;

/* What tiled_stream_read() returns besides a byte count. */
#define TILED_STREAM_END (-1L)   /* the body is complete */
#define TILED_STREAM_ERROR (-2L) /* cut short (the daemon is stopping) */

/* A stream of the body *enc produces, for `req`: takes the encoder over
 * (*enc becomes NULL) unless it returns NULL (out of memory). */
struct tiled_stream *tiled_stream_init(struct tiled_req *req, struct tile_encoder **enc, uint64_t chunk);
/* Body length, or UINT64_MAX when it is sent chunked (trailers or
 * compression); the Content-Encoding applied, or NULL. */
uint64_t tiled_stream_size(const struct tiled_stream *s);
const char *tiled_stream_coding(const struct tiled_stream *s);
/* The transport's handle of the body being sent, kept for it. */
void tiled_stream_set_response(struct tiled_stream *s, void *response);
void *tiled_stream_response(const struct tiled_stream *s);
/* Copies body bytes from `pos` (at most max) into buf: the count, 0 when
 * none is ready yet (the connection was suspended and is resumed when
 * there is), TILED_STREAM_END or TILED_STREAM_ERROR. */
long tiled_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
/* The same without the copy, for a transport that writes the bytes where
 * they are: *data points at the bytes ready from `pos` (the count is
 * returned as by tiled_stream_read), and stays valid until
 * tiled_stream_consume() says how many of them were sent. */
long tiled_stream_peek(void *cls, uint64_t pos, const char **data, size_t max);
void tiled_stream_consume(void *cls, uint64_t pos, size_t n);
/* At the end of a chunked body: the Server-Timing trailer's value; false
 * when the body is not chunked (no trailer). */
bool tiled_stream_trailer(const struct tiled_stream *s, char *timing, size_t cap);
/* The transport lets go of the body. */
void tiled_stream_free(void *cls);
/* At shutdown (with srv->stopping set): wakes every suspended stream so it
 * ends with an error instead of waiting for data that will not come. */
void tiled_streams_abort(void);

#endif
