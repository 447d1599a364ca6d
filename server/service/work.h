/* work.h - running a prepared request, inline or on a worker.
 *
 * The prepare contract: a handler that leaves work to this path sets
 * req->prepare, which runs once the body is inflated (inline for a small
 * plain body, else on a worker) and returns 0 with req->work's encoder set
 * (the reply's body is then produced here, or by the work's produce hook),
 * -1 with `e` set (the reply becomes that error), or -2 when it has decided
 * the reply itself.
 *
 * The work record. A request that tiles carries what decode, plan and
 * encode share in a struct tiled_work (req->work), whatever the protocol;
 * the others (health, metrics, metadata, the region calls) carry none of
 * it. The handler that tiles makes it once its route is known
 * (tiled_work_new: /v1 in its head check, a v2 infer when it starts), as
 * the first member of its own state, so record and handler state are one
 * block (h2o's handlers embed their base the same way): v1.c's struct
 * v1_work, v2_infer.h's struct tiled_v2_infer. The request owns the block
 * from then on and frees it at its end (tiled_work_free, from
 * tiled_service_end); the handler reaches its state from req->work.
 */
#ifndef TILED_WORK_H
#define TILED_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "encode.h"
#include "error.h"
#include "plan.h"
#include "request.h"
#include "spare.h"

struct tiled_req;

struct tiled_work {
    struct tile_encoder *enc; /* owned; NULL until prepared, or once a stream has it */
    /* A handler's hooks into the work path (NULL: none), so an extension
     * plugs in without work.c or service.c knowing it: `produce` makes the
     * answer instead of a body (the shared-memory output tiles into the
     * client's region), `release` lets go of what the request holds beyond
     * itself (region views) when it fails or is freed. */
    int (*produce)(struct tiled_req *req, struct tile_error *e);
    void (*release)(struct tiled_req *req);
    /* Frees what the handler's state around the record owns (NULL:
     * nothing), just before the block goes back to `spare`. */
    void (*dispose)(struct tiled_work *w);
    struct tile_spare *spare;
    /* Large members last: tiled_work_new zeroes only what precedes them;
     * treq is set by tile_request_init, plan by tiled_work_plan before any
     * read. */
    /* Decoded request, until the encoder takes it over. */
    struct tile_request treq;
    struct tile_plan plan;
};

/* Makes req->work: a block of `size` bytes, a handler's state whose first
 * member is the struct tiled_work, from `spare` (the handler's slot: a
 * block this size is past malloc's per-thread caches, spare.h) and counted
 * in the request memory budget (memory.h). The record is set up (`dispose`
 * as above) and the handler's part after it zeroed. NULL, with the reply
 * a 503 and Retry-After, when memory or the budget has no room. */
void *tiled_work_new(struct tiled_req *req, struct tile_spare *spare, size_t size, void (*dispose)(struct tiled_work *w));
/* Frees req->work, if any: its release hook first, then its encoder and
 * decoded request, then the handler's part (dispose); req->work becomes
 * NULL. */
void tiled_work_free(struct tiled_req *req);

/* Plans req->work->treq into its plan with the server's limits (an output
 * tensor too large for them is refused here, before any work), then takes
 * the decoded input's bytes from the request memory budget (memory.h; a
 * 503 naming --max-memory when they do not fit): the handler calls it once
 * decoded, before the encoder takes the input over. */
int tiled_work_plan(struct tiled_req *req, struct tile_error *e);
/* The one check of an output's size against the flags that bound it:
 * every output against --max-output, one that will be streamed (above
 * --stream-threshold) against --max-stream too; the error names the flag.
 * SIZE is the reply's bytes, or a lower bound of them. */
int tiled_work_check_size(const struct tiled_req *req, uint64_t size, struct tile_error *e);
/* True once the request's encoder is made (prepared, not yet produced). */
bool tiled_work_prepared(const struct tiled_req *req);
/* Finishes small requests on the spot, leaves the rest for a worker. */
void tiled_work_start(struct tiled_req *req);
/* The worker side: prepare (if not yet) and produce the reply. */
void tiled_work_run(struct tiled_req *req);
/* Replaces the reply with an error reply for `e`. */
void tiled_work_fail(struct tiled_req *req, const struct tile_error *e);

/* The timed stages of a request's work (decode, plan, tile, encode) follow
 * one another: tiled_req_mark() reads the clock where the first begins
 * (a worker taking the request marks it too), and tiled_req_lap() where
 * each one ends, returning its µs since the mark before, which it moves.
 * A clock read costs about as much as a small request's plan: two per
 * stage were most of the clock reads a request made. */
uint64_t tiled_req_mark(struct tiled_req *req);
uint64_t tiled_req_lap(struct tiled_req *req);

#endif
