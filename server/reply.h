/* reply.h - what a handler answers: status, headers, and a body held in
 * memory or produced while it is sent (a stream, see stream.h).
 *
 * The reply knows nothing of the transport that sends it; it owns every
 * string and buffer it points to and frees them in tiled_reply_free().
 */
#ifndef TILED_REPLY_H
#define TILED_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "encode.h" /* struct tile_timings */
#include "error.h"

struct tiled_stream;

/* The statuses a reply carries, by name: HTTP's codes, which other
 * transports map to their own. */
enum tiled_status {
    TILED_OK = 200,
    TILED_NO_CONTENT = 204,
    TILED_BAD_REQUEST = 400,
    TILED_UNAUTHORIZED = 401,
    TILED_FORBIDDEN = 403,
    TILED_NOT_FOUND = 404,
    TILED_METHOD_NOT_ALLOWED = 405,
    TILED_NOT_ACCEPTABLE = 406,
    TILED_TOO_LARGE = 413,
    TILED_UNSUPPORTED_MEDIA_TYPE = 415,
    TILED_CLIENT_GONE = 499, /* the client closed the connection first (nginx's code) */
    TILED_INTERNAL_ERROR = 500,
    TILED_NOT_IMPLEMENTED = 501,
    TILED_UNAVAILABLE = 503,
};

struct tiled_reply {
    int status;
    char content_type[64];
    char *headers[6][2];      /* extra headers (name, value), owned */
    int nheaders;
    char *body;               /* owned: malloc'd, or let go with release_body */
    uint64_t body_len;
    void (*release_body)(void *body); /* NULL: free() */
    /* Owned; a streamed body instead of `body`, let go with release_stream. */
    struct tiled_stream *stream;
    void (*release_stream)(void *stream);
};

/* Sets an error reply {"error": msg} with `status`. */
void tiled_reply_error(struct tiled_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sets an error reply from a tile_error, choosing the status from its code. */
void tiled_reply_tile_error(struct tiled_reply *r, const struct tile_error *e);
/* Sets a JSON body (copied). */
void tiled_reply_json(struct tiled_reply *r, int status, const char *json);
/* Sets the JSON body `doc` (released; NULL, from a failed json_pack, makes
 * the reply an empty 503). */
void tiled_reply_doc(struct tiled_reply *r, int status, json_t *doc);
void tiled_reply_header(struct tiled_reply *r, const char *name, const char *value);
/* Replaces the body (the old one is let go); `release` NULL means free(). */
void tiled_reply_set_body(struct tiled_reply *r, char *body, uint64_t len, void (*release)(void *body));
void tiled_reply_free(struct tiled_reply *r);

/* Server-Timing value for the request's timings. */
void tiled_server_timing(const struct tile_timings *tm, char *buf, size_t cap);

#endif
