/* work.h - running a prepared request, inline or on a worker. */
#ifndef TILED_WORK_H
#define TILED_WORK_H

#include "error.h"

struct tiled_req;

/* Inflates a body sent with a Content-Encoding, bounded by --max-body:
 * 0 when the body is plain now, -1 with `e` set (data that does not
 * inflate, or too large), -2 when the reply is already an error (an
 * unsupported coding: 415 naming the codings we take, as Triton answers).
 * Every handler that reads a body calls it first (the work path does). */
int tiled_work_inflate(struct tiled_req *req, struct tile_error *e);
/* Plans req->treq into req->plan with the server's limits. */
int tiled_work_plan(struct tiled_req *req, struct tile_error *e);
/* Finishes small requests on the spot, leaves the rest for a worker. */
void tiled_work_start(struct tiled_req *req);
/* The worker side: prepare (if not yet) and produce the reply. */
void tiled_work_run(struct tiled_req *req);
/* Replaces the reply with an error reply for `e`. */
void tiled_work_fail(struct tiled_req *req, const struct tile_error *e);

#endif
