/* inflate.h - a request body sent with a Content-Encoding, inflated once,
 * before whichever handler reads it (the work path, shared-memory register). */
#ifndef TILED_INFLATE_H
#define TILED_INFLATE_H

#include "error.h"

struct tiled_req;

/* Inflates a body sent with a Content-Encoding, bounded by --max-body:
 * 0 when the body is plain now, -1 with `e` set (data that does not
 * inflate, or too large), -2 when the reply is already an error (an
 * unsupported coding: 415 naming the codings we take, as Triton answers).
 * Every handler that reads a body calls it first (the work path does). */
int tiled_inflate_body(struct tiled_req *req, struct tile_error *e);

#endif
