/* v2_infer.c - one Open Inference Protocol infer, whatever the wire (see
 * v2_infer.h). */
#include "v2_infer.h"

#include <string.h>

#include "clock.h"
#include "server.h"
#include "v2_shm.h"
#include "work.h"

void tiled_v2_infer_start(struct tiled_req *req, int version, int (*prepare)(struct tiled_req *, struct tile_error *))
{
    req->v2_version = version;
    req->v2.version = version;
    req->prepare = prepare;
    tiled_work_start(req);
}

/* Step 3: inputs held in regions were copied unless the output goes to
 * one; the output is planned and its data bytes counted (strings: with
 * their length prefixes). */
static int plan(struct tiled_req *req, uint64_t *data_bytes, struct tile_error *e)
{
    if (!req->v2.out_shm.used && tiled_v2_shm_release(req, e) < 0)
        return -1;
    if (tiled_work_plan(req, e) < 0)
        return -1;
    *data_bytes = req->plan.out_bytes;
    if (req->plan.dtype == TILE_STRING &&
        (tile_plan_string_wire_bytes(&req->plan, tile_tensor_string_bytes(&req->treq.input), 0, data_bytes, e) < 0 ||
         tiled_work_check_size(req, *data_bytes, e) < 0))
        return -1;
    return 0;
}

/* Step 2: the wire's decode into a cleared req->v2; the tile request then
 * moves into req->treq, where the shared path reads it. */
static int decode(struct tiled_req *req, const struct tiled_v2_wire *wire, struct tile_error *e)
{
    struct tile_v2_shm_source src;
    uint64_t t0 = tiled_now_us();
    int version = req->v2.version;
    tile_v2_request_free(&req->v2);
    memset(&req->v2, 0, sizeof(req->v2));
    tile_request_init(&req->v2.treq);
    req->v2.version = version;
    int rc = wire->decode(req, tiled_v2_shm_source(req, &src), e);
    tile_request_free(&req->treq);
    req->treq = req->v2.treq;
    tile_request_init(&req->v2.treq);
    req->tm.decode_us = tiled_now_us() - t0;
    return rc;
}

int tiled_v2_infer_prepare(struct tiled_req *req, const struct tiled_v2_wire *wire, struct tile_error *e)
{
    uint64_t data_bytes;
    if (decode(req, wire, e) < 0 || plan(req, &data_bytes, e) < 0)
        return -1;
    /* Step 4: the reply around the output, or the whole reply when the
     * output goes to a region. */
    bool to_region = req->v2.out_shm.used;
    char head[TILE_ENCODE_HEAD_MAX];
    struct tile_encode_frame f = {.head = head, .tail = ""};
    enum tile_format fmt = TILE_FMT_RAW;
    if (wire->frame(req, to_region ? 0 : data_bytes, head, sizeof(head), &f, &fmt, e) < 0)
        return -1;
    if (to_region) {
        if (tiled_v2_shm_output(req, data_bytes, f.head, f.head_len, e) < 0)
            return -1;
    } else {
        req->enc = tile_encoder_new(fmt, &req->plan, &req->treq, &f, 0, e); /* sized in produce */
        if (!req->enc)
            return -1;
    }
    if (wire->framed)
        wire->framed(req, &f, fmt);
    return 0;
}
