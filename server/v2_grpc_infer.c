/* v2_grpc_infer.c - ModelInfer over gRPC.
 *
 * DESIGN. The same work path as HTTP v2 (v2.c, work.c): the handler, on
 * the transport's thread, reads only the model name and version (fields 1
 * and 2, skipping the tensors) and checks them with the rules HTTP uses;
 * decoding, mapping (v2_model.c) and planning run in `prepare`, inline for
 * small requests and on a worker otherwise. The response message is
 * ModelInferResponse's head (api/grpc_infer.h) followed by the output's
 * raw bytes: the encoder's frame head and TILE_FMT_RAW data, so it is
 * materialised or streamed above --stream-threshold exactly like an HTTP
 * binary body, and the transport never looks inside. A message that would
 * pass --max-grpc-message is refused before anything is produced.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "grpc_infer.h"
#include "server.h"
#include "v2_grpc.h"
#include "v2_model.h"
#include "v2_shm.h"
#include "work.h"

/* The request id and the decoded inputs, mapped onto req->v2 and req->treq. */
static int map_request(struct tiled_req *req, struct tile_grpc_infer_request *g, struct tile_error *e)
{
    struct tile_v2_request *v = &req->v2;
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

/* Decodes the message into req->treq (the shared path reads it there). */
static int decode(struct tiled_req *req, struct tile_error *e)
{
    struct tile_grpc_infer_request g;
    struct tile_v2_shm_source src;
    uint64_t t0 = tiled_now_us();
    int version = req->v2.version;
    tile_v2_request_free(&req->v2);
    memset(&req->v2, 0, sizeof(req->v2));
    tile_request_init(&req->v2.treq);
    req->v2.version = version;
    int rc = tile_grpc_infer_decode_shm(req->body ? req->body : "", req->body_len, &req->srv->lim,
                                        tiled_v2_shm_source(req, &src), &g, e);
    if (rc == 0)
        rc = map_request(req, &g, e);
    tile_grpc_infer_request_free(&g);
    tile_request_free(&req->treq);
    req->treq = req->v2.treq;
    tile_request_init(&req->v2.treq);
    req->tm.decode_us = tiled_now_us() - t0;
    return rc;
}

/* The response's head for the planned output with `raw_len` data bytes
 * (0 when the output went to shared memory: its slot stays, empty). */
static int reply_head(struct tiled_req *req, uint64_t raw_len, uint8_t *head, size_t cap, size_t *len,
                      struct tile_error *e)
{
    char version[16];
    snprintf(version, sizeof(version), "%d", req->v2.version);
    const struct tile_grpc_infer_reply r = {
        .model_name = {"tile", 4},
        .model_version = {version, strlen(version)},
        .id = {req->v2.id, req->v2.id_len},
        .output_name = {"output", 6},
        .dtype = req->plan.dtype,
        .rank = req->plan.out_rank,
        .shape = req->plan.out_shape,
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
    tile_grpc_infer_reply_head(&r, head);
    *len = n;
    return 0;
}

static int infer_prepare(struct tiled_req *req, struct tile_error *e)
{
    if (decode(req, e) < 0)
        return -1;
    uint64_t data_bytes;
    if (tiled_v2_plan(req, &data_bytes, e) < 0)
        return -1;
    uint8_t head[TILE_ENCODE_HEAD_MAX];
    size_t head_len;
    if (req->v2.out_shm.used)
        return reply_head(req, 0, head, sizeof(head), &head_len, e) < 0
                   ? -1
                   : tiled_v2_shm_output(req, data_bytes, head, head_len, e);
    if (reply_head(req, data_bytes, head, sizeof(head), &head_len, e) < 0)
        return -1;
    struct tile_encode_frame f = {.head = (const char *)head, .head_len = head_len};
    req->enc = tile_encoder_new(TILE_FMT_RAW, &req->plan, &req->treq, &f, req->srv->lim.max_stream, e);
    return req->enc ? 0 : -1;
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
    req->v2_version = v;
    req->v2.version = v;
    tiled_copy_str(req->reply.content_type, sizeof(req->reply.content_type), "application/grpc");
    req->prepare = infer_prepare;
    tiled_work_start(req);
}
