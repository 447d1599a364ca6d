/* v2_infer.h - one Open Inference Protocol infer, whatever the wire.
 *
 * DESIGN. An infer over HTTP (v2_http.c) and one over gRPC (v2_grpc_infer.c)
 * are prepared by the same steps, here; a wire gives only its codec:
 *   1. the handler finds the model and version (tiled_v2_model_version,
 *      v2_catalog.h) on the transport's thread, from the path or from the
 *      message's first two fields, and starts the request on the work
 *      path (tiled_v2_infer_start: its struct tiled_v2_infer is made, then
 *      admission, inline or on a worker);
 *   2. in `prepare`, the wire's decode reads the body into the infer's v2: the
 *      inputs and their data (inline, binary or in shared-memory regions),
 *      the parameters, the outputs requested;
 *   3. the plan checks shapes and limits, and lets shared-memory inputs go
 *      unless the output goes to a region too;
 *   4. the wire's frame gives the reply around the output (the whole reply
 *      when the output goes to a region), then the output's region is taken
 *      (written when the request runs, v2_shm.h) or an encoder made for
 *      the reply, and the wire sets the reply's head (content type,
 *      headers) for what was decided.
 */
#ifndef TILED_V2_INFER_H
#define TILED_V2_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "encode.h"
#include "error.h"
#include "v2.h"
#include "v2_state.h" /* struct tiled_v2_infer */

/* What one wire reads and writes of an infer. */
struct tiled_v2_wire {
    /* Reads req->body into the infer's v2 (cleared, its version set; the
     * tile request into v2.treq, inputs in regions through `shm`). */
    int (*decode)(struct tiled_req *req, const struct tile_v2_shm_source *shm, struct tile_error *e);
    /* The reply around the planned output of `data_bytes` bytes: f->head
     * (written into head[cap]) and f->tail, and the output's *fmt. With
     * v2.out_shm used, the output goes to the region and `data_bytes`
     * is 0: the frame is the whole reply. Changes nothing in the reply. */
    int (*frame)(struct tiled_req *req, uint64_t data_bytes, char *head, size_t cap, struct tile_encode_frame *f,
                 enum tile_format *fmt, struct tile_error *e);
    /* The reply's head (content type, headers) once its frame is in use;
     * NULL: nothing to set. */
    void (*framed)(struct tiled_req *req, const struct tile_encode_frame *f, enum tile_format fmt);
};

/* Step 1's end: the request for `version` gets its struct tiled_v2_infer
 * (else its reply is a 503) and goes on the work path, to be prepared by
 * `prepare` (which calls tiled_v2_infer_prepare with its wire). */
void tiled_v2_infer_start(struct tiled_req *req, int version, int (*prepare)(struct tiled_req *, struct tile_error *));

/* Steps 2-4 (work.h's prepare contract): 0 with the encoder set, or the
 * output's region written and the reply held; -1 and `e`. */
int tiled_v2_infer_prepare(struct tiled_req *req, const struct tiled_v2_wire *wire, struct tile_error *e);

#endif
