/* work.h - running a prepared request, inline or on a worker.
 *
 * The prepare contract: a handler that leaves work to this path sets
 * req->prepare, which runs once the body is inflated (inline for a small
 * plain body, else on a worker) and returns 0 with req->enc set (the
 * reply's body is then produced here, or by req->produce), -1 with `e`
 * set (the reply becomes that error), or -2 when it has decided the reply
 * itself. */
#ifndef TILED_WORK_H
#define TILED_WORK_H

#include <stdint.h>

#include "error.h"

struct tiled_req;

/* Plans req->treq into req->plan with the server's limits (an output
 * tensor too large for them is refused here, before any work). */
int tiled_work_plan(struct tiled_req *req, struct tile_error *e);
/* The one check of an output's size against the flags that bound it:
 * every output against --max-output, one that will be streamed (above
 * --stream-threshold) against --max-stream too; the error names the flag.
 * SIZE is the reply's bytes, or a lower bound of them. */
int tiled_work_check_size(const struct tiled_req *req, uint64_t size, struct tile_error *e);
/* Finishes small requests on the spot, leaves the rest for a worker. */
void tiled_work_start(struct tiled_req *req);
/* The worker side: prepare (if not yet) and produce the reply. */
void tiled_work_run(struct tiled_req *req);
/* Replaces the reply with an error reply for `e`. */
void tiled_work_fail(struct tiled_req *req, const struct tile_error *e);

#endif
