/* inflate.h - a request body sent with a Content-Encoding, inflated once,
 * on a worker, before whichever handler reads it (the work path,
 * shared-memory register). */
#ifndef TILED_INFLATE_H
#define TILED_INFLATE_H

#include <stdbool.h>

#include "error.h"

struct tiled_req;

/* True when the body has a Content-Encoding to undo (or an unknown one,
 * which tiled_inflate_body refuses): its decoded size is not known yet, so
 * it is read on a worker, never on a transport thread. */
bool tiled_inflate_needed(const struct tiled_req *req);

/* Inflates a body sent with a Content-Encoding (a gRPC message with its
 * grpc-encoding, which the transport puts there), bounded by --max-body
 * (and --max-grpc-message for gRPC): 0 when the body is plain now, -1
 * with `e` set (data that does not inflate, or too large), -2 when the
 * reply is already an error (an unsupported coding: 415 naming the
 * codings we take, as Triton answers; gRPC: a message that does not
 * inflate is INTERNAL). The work path calls it before req->prepare; a
 * handler reads a body itself only when tiled_inflate_needed() is false,
 * and otherwise leaves it to the work path (v2_grpc.c, v2_shm.c). */
int tiled_inflate_body(struct tiled_req *req, struct tile_error *e);

#endif
