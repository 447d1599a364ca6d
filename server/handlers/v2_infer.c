/* v2_infer.c - one Open Inference Protocol infer, whatever the wire (see
 * v2_infer.h). */
#include "v2_infer.h"

#include <string.h>

#include "clock.h"
#include "server.h"
#include "v2_shm.h"
#include "work.h"

/* Freed blocks of sizeof(struct tiled_v2_infer), for the next (spare.h). */
static struct tile_spare spare_infer;

static void infer_dispose(struct tiled_work *w)
{
    tile_v2_request_free(&((struct tiled_v2_infer *)w)->v2);
}

void tiled_v2_infer_start(struct tiled_req *req, int version, int (*prepare)(struct tiled_req *, struct tile_error *))
{
    req->v2_version = version;
    struct tiled_v2_infer *s = tiled_work_new(req, &spare_infer, sizeof(*s), infer_dispose);
    if (!s)
        return;
    s->v2.version = version;
    req->prepare = prepare;
    tiled_work_start(req);
}

/* Step 3: inputs held in regions were copied unless the output goes to
 * one; the output is planned and its data bytes counted (strings: with
 * their length prefixes). */
static int plan(struct tiled_req *req, struct tiled_v2_infer *s, uint64_t *data_bytes, struct tile_error *e)
{
    const struct tile_plan *p = &s->work.plan;
    if (!s->v2.out_shm.used && tiled_v2_shm_release(req, e) < 0)
        return -1;
    if (tiled_work_plan(req, e) < 0)
        return -1;
    *data_bytes = p->out_bytes;
    if (p->dtype == TILE_STRING &&
        (tile_plan_string_wire_bytes(p, tile_tensor_string_bytes(&s->work.treq.input), 0, data_bytes, e) < 0 ||
         tiled_work_check_size(req, *data_bytes, e) < 0))
        return -1;
    return 0;
}

/* Step 2: the wire's decode into the v2 request, which the work record
 * was made with cleared (tiled_work_new: only its version is set); the
 * tile request then moves into the work record's, empty until now, where
 * the shared path reads it. Prepared once per work record, so neither
 * needs clearing again here: freeing and clearing both, and copying one
 * into the other, were five passes over kilobytes per request. */
static int decode(struct tiled_req *req, struct tiled_v2_infer *s, const struct tiled_v2_wire *wire,
                  struct tile_error *e)
{
    struct tile_v2_shm_source src;
    tiled_req_mark(req);
    tile_request_init(&s->v2.treq);
    int rc = wire->decode(req, tiled_v2_shm_source(req, &src), e);
    tile_request_move(&s->work.treq, &s->v2.treq); /* s->v2.treq keeps no buffer of it */
    req->tm.decode_us = tiled_req_lap(req);
    return rc;
}

int tiled_v2_infer_prepare(struct tiled_req *req, const struct tiled_v2_wire *wire, struct tile_error *e)
{
    struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    uint64_t data_bytes;
    if (decode(req, s, wire, e) < 0 || plan(req, s, &data_bytes, e) < 0)
        return -1;
    /* Step 4: the reply around the output, or the whole reply when the
     * output goes to a region. */
    bool to_region = s->v2.out_shm.used;
    char head[TILE_ENCODE_HEAD_MAX];
    struct tile_encode_frame f = {.head = head, .tail = ""};
    enum tile_format fmt = TILE_FMT_RAW;
    if (wire->frame(req, to_region ? 0 : data_bytes, head, sizeof(head), &f, &fmt, e) < 0)
        return -1;
    if (to_region) {
        if (tiled_v2_shm_output(req, data_bytes, f.head, f.head_len, e) < 0)
            return -1;
    } else {
        s->work.enc = tile_encoder_new(fmt, &s->work.plan, &s->work.treq, &f, 0, e); /* sized in produce */
        if (!s->work.enc)
            return -1;
    }
    if (wire->framed)
        wire->framed(req, &f, fmt);
    return 0;
}
