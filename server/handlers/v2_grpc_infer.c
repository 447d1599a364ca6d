/* v2_grpc_infer.c - ModelInfer over gRPC: the gRPC codec of the one
 * Open Inference Protocol infer (v2_infer.h).
 *
 * DESIGN. The handler, on the transport's thread, reads only the model
 * name and version (fields 1 and 2, skipping the tensors) and checks them
 * with the rules HTTP uses (v2_catalog.h); the rest is v2_infer.c's steps,
 * with this file's decode (ModelInferRequest mapped onto the infer's v2 by
 * api/v2_model.c's rules) and frame: ModelInferResponse's head
 * (api/grpc_infer.h) followed by the output's raw bytes, the encoder's
 * TILE_FMT_RAW data, so it is materialised or streamed above
 * --stream-threshold exactly like an HTTP binary body, and the transport
 * never looks inside. A message that would pass --max-grpc-message is
 * refused before anything is produced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_infer.h"
#include "numfmt.h"
#include "server.h"
#include "text.h"
#include "v2_grpc.h"
#include "v2_infer.h"
#include "v2_catalog.h"

/* The request id and the decoded inputs, mapped onto the infer's v2. */
static int map_request(struct tiled_req *req, struct tile_grpc_infer_request *g, struct tile_error *e)
{
    struct tile_v2_request *v = &tiled_v2_infer_of(req)->v2;
    if (g->id.len >= sizeof(v->id))
        return tile_error_set(e, TILE_EINVAL, "id '%.32s...' is too long (at most %zu bytes)", g->id.ptr,
                              sizeof(v->id) - 1);
    if (g->id.len)
        memcpy(v->id, g->id.ptr, g->id.len);
    v->id_len = g->id.len;
    v->has_id = g->id.len > 0;
    for (int i = 0; i < g->noutputs; i++) {
        if (tile_v2_output_name(g->outputs[i].ptr, g->outputs[i].len, e) < 0)
            return -1;
        if (g->output_shm[i].used)
            v->out_shm = g->output_shm[i];
    }
    if (g->has_semantics && tile_semantics_parse(g->semantics.ptr, g->semantics.len, &v->treq.semantics, e) < 0)
        return -1;
    struct tile_v2_named_tensor named[TILE_GRPC_MAX_INPUTS];
    for (int i = 0; i < g->ninputs; i++)
        named[i] = (struct tile_v2_named_tensor){.name = g->inputs[i].name.ptr, .name_len = g->inputs[i].name.len,
                                                 .t = &g->inputs[i].t};
    return tile_v2_map_inputs(v, named, g->ninputs, g->has_semantics, &req->srv->lim, e);
}

/* The gRPC wire of an infer (v2_infer.h's codec): ModelInferRequest, and
 * ModelInferResponse's head followed by the output's raw bytes. */
static int grpc_decode(struct tiled_req *req, const struct tile_v2_shm_source *shm, struct tile_error *e)
{
    struct tile_grpc_infer_request g;
    int rc = tile_grpc_infer_decode_shm(req->body ? req->body : "", req->body_len, &req->srv->lim, shm, &g, e);
    if (rc == 0)
        rc = map_request(req, &g, e);
    tile_grpc_infer_request_free(&g);
    return rc;
}

/* The response's head for the planned output with `raw_len` data bytes
 * (0 when the output goes to shared memory: its slot stays, empty). */
static int grpc_frame(struct tiled_req *req, uint64_t raw_len, char *head, size_t cap, struct tile_encode_frame *f,
                      enum tile_format *fmt, struct tile_error *e)
{
    const struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    char version[24];
    size_t version_len = tile_format_u64(version, (uint64_t)s->v2.version); /* 13, 6 or 1 */
    const struct tile_grpc_infer_reply r = {
        .model_name = {"tile", 4},
        .model_version = {version, version_len},
        .id = {s->v2.id, s->v2.id_len},
        .output_name = {"output", 6},
        .dtype = s->work.plan.dtype,
        .rank = s->work.plan.out_rank,
        .shape = s->work.plan.out_shape,
        .raw_len = raw_len,
    };
    size_t n = tile_grpc_infer_reply_head_size(&r);
    uint64_t max = (uint64_t)req->srv->cfg.max_grpc_message;
    if (raw_len > max || n > max - raw_len)
        return tile_error_set(e, TILE_ETOOBIG,
                              "the response message of %llu bytes exceeds the max-grpc-message limit of %llu bytes",
                              (unsigned long long)(n + raw_len), (unsigned long long)max);
    if (n > cap)
        return tile_error_set(e, TILE_EINVAL, "the response header does not fit");
    tile_grpc_infer_reply_head(&r, (uint8_t *)head);
    f->head_len = n;
    *fmt = TILE_FMT_RAW;
    return 0;
}

static void grpc_framed(struct tiled_req *req, const struct tile_encode_frame *f, enum tile_format fmt)
{
    (void)f;
    (void)fmt;
    req->reply.content_type = "application/grpc";
}

static const struct tiled_v2_wire grpc_wire = {grpc_decode, grpc_frame, grpc_framed};

static int grpc_prepare(struct tiled_req *req, struct tile_error *e)
{
    return tiled_v2_infer_prepare(req, &grpc_wire, e);
}

void tiled_grpc_model_infer(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)b; /* the message is produced by the work path */
    /* ModelInferRequest's model_name and model_version are fields 1 and 2:
     * read them without the tensors (the rest is skipped unread). */
    static const struct tile_grpc_layout head = {"inference.ModelInferRequest", {"model_name", "model_version"}, 2};
    struct tile_grpc_str ref[2];
    if (!tiled_grpc_decode(req, &head, ref))
        return;
    int v = tiled_grpc_model(req, ref[0], ref[1]);
    if (!v)
        return;
    tiled_v2_infer_start(req, v, grpc_prepare);
}
