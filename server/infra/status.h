/* status.h - the statuses tiled sends, by name and code: the replies'
 * (reply.h) and what the metrics count (metrics.c), from one list. Kept
 * apart from reply.h so that the metrics, below the service that writes
 * replies, can label every status without depending on the reply.
 */
#ifndef TILED_STATUS_H
#define TILED_STATUS_H

/* The statuses a reply carries, by name: HTTP's codes, which other
 * transports map to their own. Every status tiled sends is listed here
 * (the framer's refusals too): /metrics labels each by its exact code,
 * from this one list, so a status added here is counted under its own
 * code and one sent without being listed is not (metrics.c). */
#define TILED_STATUSES(X)                                                                                     \
    X(TILED_OK, 200)                                                                                          \
    X(TILED_NO_CONTENT, 204)                                                                                  \
    X(TILED_NOT_MODIFIED, 304) /* a conditional GET of a representation the client has (caching.h) */         \
    X(TILED_BAD_REQUEST, 400)                                                                                 \
    X(TILED_UNAUTHORIZED, 401)                                                                                \
    X(TILED_FORBIDDEN, 403)                                                                                   \
    X(TILED_NOT_FOUND, 404)                                                                                   \
    X(TILED_METHOD_NOT_ALLOWED, 405)                                                                          \
    X(TILED_NOT_ACCEPTABLE, 406)                                                                              \
    X(TILED_REQUEST_TIMEOUT, 408)                                                                             \
    X(TILED_PRECONDITION_FAILED, 412)                                                                         \
    X(TILED_TOO_LARGE, 413)                                                                                   \
    X(TILED_URI_TOO_LONG, 414)                                                                                \
    X(TILED_UNSUPPORTED_MEDIA_TYPE, 415)                                                                      \
    X(TILED_HEADERS_TOO_LARGE, 431)                                                                           \
    X(TILED_CLIENT_GONE, 499) /* the client closed the connection first (nginx's code) */                   \
    X(TILED_INTERNAL_ERROR, 500)                                                                              \
    X(TILED_NOT_IMPLEMENTED, 501)                                                                             \
    X(TILED_UNAVAILABLE, 503)                                                                                 \
    X(TILED_HTTP_VERSION_NOT_SUPPORTED, 505)

#define TILED_STATUS_ENUM_(name, code) name = code,
enum tiled_status { TILED_STATUSES(TILED_STATUS_ENUM_) };
#undef TILED_STATUS_ENUM_

#endif
