/* stream.h - response bodies produced on workers while they are sent. */
#ifndef TILED_STREAM_H
#define TILED_STREAM_H

#include <stdint.h>

struct tiled_req;
struct tiled_stream;
struct MHD_Response;

/* Takes over the request's encoder (req->enc becomes NULL). */
struct tiled_stream *tiled_stream_init(struct tiled_req *req, uint64_t chunk);
/* Body length, or UINT64_MAX when it is sent chunked (trailers or
 * compression); the Content-Encoding applied, or NULL. */
uint64_t tiled_stream_size(const struct tiled_stream *s);
const char *tiled_stream_coding(const struct tiled_stream *s);
void tiled_stream_set_response(struct tiled_stream *s, struct MHD_Response *resp);
/* MHD content-reader callback and free callback. */
long tiled_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void tiled_stream_free(void *cls);
/* At shutdown (with srv->stopping set): wakes every suspended stream so it
 * ends with an error instead of waiting for data that will not come. */
void tiled_streams_abort(void);

#endif
