/* error.h - the error struct every fallible tiled function fills.
 *
 * Modelled on jansson's json_error_t: the callee fills it, the caller
 * decides what to do (print it, map it to an HTTP status, ...). Rules:
 *   - every function that takes a `struct tile_error *` accepts NULL;
 *   - the first error wins: a later tile_error_set() on a set error is a no-op,
 *     so the innermost (most specific) message survives;
 *   - messages are bounded and always NUL-terminated (truncated if needed).
 * Mapping codes to HTTP statuses and gRPC codes happens once, in the
 * daemon's fault table (server/service/reply.c).
 */
#ifndef TILE_ERROR_H
#define TILE_ERROR_H

#include <stdarg.h>

enum tile_errcode {
    TILE_OK = 0,
    TILE_EINVAL,       /* malformed or rule-breaking input */
    TILE_ETOOBIG,      /* a configured size limit was exceeded */
    TILE_ENOMEM,       /* allocation failed */
    TILE_EIO,          /* reading or writing a file failed */
    TILE_EUNSUPPORTED, /* well-formed but not supported (e.g. pickled .npy) */
    TILE_ENOTACCEPT,   /* the requested output form cannot carry this tensor */
    TILE_ERRCODE_COUNT
};

struct tile_error {
    enum tile_errcode code;
    char text[240];
};

/* Clears `e` (no-op when NULL). */
void tile_error_clear(struct tile_error *e);

/* Sets code and printf-style message unless `e` is NULL or already set.
 * Always returns -1 so callers can `return tile_error_set(...)`. */
int tile_error_set(struct tile_error *e, enum tile_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int tile_error_vset(struct tile_error *e, enum tile_errcode code, const char *fmt, va_list ap);

/* Short stable name of a code ("invalid", "too_big", ...). */
const char *tile_errcode_name(enum tile_errcode code);

#endif
