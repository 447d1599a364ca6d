/* v2_state.h - an Open Inference Protocol infer's state: what its
 * preparation (v2_infer.c), its wires (v2_http.c, v2_grpc_infer.c) and the
 * shared-memory extension (v2_shm.c) keep of one request, beside the work
 * record every request that tiles has (work.h). A header of its own, so
 * the extension reads the state without depending on the preparation
 * that calls it.
 */
#ifndef TILED_V2_STATE_H
#define TILED_V2_STATE_H

#include <stddef.h>

#include "server.h"
#include "shm.h"
#include "v2.h"
#include "work.h"

/* An infer's state, one block with its work record (work.h), made when it
 * starts and freed with the request. */
struct tiled_v2_infer {
    struct tiled_work work; /* first: req->work points here */
    /* The request as the wire decoded it; its tile request moves into
     * work.treq, where the shared path reads it. */
    struct tile_v2_request v2;
    /* Shared-memory views it holds (v2_shm.c): inputs read in place, and
     * the output tiled into its region (shm_out.region NULL: the output
     * goes in the body). shm_reply is the answer's body then. */
    struct tiled_shm_view shm_in[4];
    int nshm_in;
    struct tiled_shm_view shm_out;
    char *shm_reply;
    size_t shm_reply_len;
};
_Static_assert(offsetof(struct tiled_v2_infer, work) == 0, "req->work is the block's start");

/* The state of a request tiled_v2_infer_start (v2_infer.h) started. */
static inline struct tiled_v2_infer *tiled_v2_infer_of(struct tiled_req *req)
{
    return (struct tiled_v2_infer *)req->work;
}

#endif
