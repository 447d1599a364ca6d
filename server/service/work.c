/* work.c - where a request's heavy part runs, and how its body is built.
 *
 * DESIGN. Protocol handlers (v1.c, v2_infer.c for both v2 wires, and
 * v2_grpc.c and v2_shm.c for messages they leave to a worker) check what
 * is cheap on the transport's thread, make the request's work record and
 * set req->prepare (decode, plan, choose the encoder: the contract and the
 * record are work.h's). Small
 * requests, whose body and output both fit under --inline-max, are then
 * finished on the spot, because a thread hand-off costs more than the
 * work; everything else, compressed bodies included (their decoded size
 * is unknown until inflated), is left for a worker (reply.status stays 0
 * and tiled_service_dispatch queues it). Bodies up to --stream-threshold
 * are built in memory; above it a stream produces them chunk by chunk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "work.h"

#include "bodycache.h"
#include "clock.h"
#include "compress.h"
#include "inflate.h"
#include "memory.h"
#include "server.h"
#include "stream.h"

int tiled_work_check_size(const struct tiled_req *req, uint64_t size, struct tile_error *e)
{
    const struct tiled_server *srv = req->srv;
    if (size > srv->lim.max_output)
        return tile_error_set(e, TILE_ETOOBIG,
                              "output of %llu bytes exceeds the max-output limit of %llu bytes (--max-output)",
                              (unsigned long long)size, (unsigned long long)srv->lim.max_output);
    if (size > (uint64_t)srv->cfg.stream_threshold && size > srv->lim.max_stream)
        return tile_error_set(e, TILE_ETOOBIG,
                              "output of %llu bytes, streamed (above --stream-threshold), exceeds the max-stream "
                              "limit of %llu bytes (--max-stream)",
                              (unsigned long long)size, (unsigned long long)srv->lim.max_stream);
    return 0;
}

void *tiled_work_new(struct tiled_req *req, struct tile_spare *spare, size_t size, void (*dispose)(struct tiled_work *w))
{
    struct tile_error e;
    tile_error_clear(&e); /* its code and an empty text, not 240 bytes of zeros a request */
    struct tiled_work *w = NULL;
    if (tiled_memory_take(&req->srv->memory, &req->mem_held, req->mem_kin, size, &e) < 0 ||
        !(w = tile_spare_take(spare, size))) {
        if (!e.code)
            tile_error_set(&e, TILE_ENOMEM, "cannot allocate the request's work state");
        tiled_work_fail(req, &e);
        return NULL;
    }
    memset(w, 0, offsetof(struct tiled_work, treq));
    tile_request_init(&w->treq);
    memset((char *)w + sizeof(*w), 0, size - sizeof(*w));
    w->dispose = dispose;
    w->spare = spare;
    req->work = w;
    return w;
}

void tiled_work_free(struct tiled_req *req)
{
    struct tiled_work *w = req->work;
    if (!w)
        return;
    if (w->release)
        w->release(req); /* a request cut short may still hold what its handler took */
    tile_encoder_free(w->enc);
    tile_request_free(&w->treq);
    if (w->dispose)
        w->dispose(w);
    req->work = NULL;
    tile_spare_give(w->spare, w);
}

bool tiled_work_prepared(const struct tiled_req *req)
{
    return req->work && req->work->enc;
}

/* The decoded input's bytes, when they are its own (an input read in
 * place from a shared-memory region is the client's): its elements (a
 * string tensor's are 16-byte references) and a string tensor's bytes.
 * Taken where decode left them, before the encoder takes them over
 * (tile_encoder_new): it keeps them until the request ends (a stream,
 * which takes the encoder, until its last byte), when all the request
 * took is given back (memory.h). After the plan's checks, so that a
 * request refused for what it asks gets that answer, not a retry later. */
static int take_input(struct tiled_req *req, struct tile_error *e)
{
    const struct tile_tensor *in = &req->work->treq.input;
    if (!in->owns_data)
        return 0;
    return tiled_memory_take(&req->srv->memory, &req->mem_held, req->mem_kin, tile_tensor_nbytes(in) + in->blob_len, e);
}

uint64_t tiled_req_mark(struct tiled_req *req)
{
    return req->t_mark = tiled_now_us();
}

uint64_t tiled_req_lap(struct tiled_req *req)
{
    uint64_t then = req->t_mark;
    return tiled_req_mark(req) - then;
}

int tiled_work_plan(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_work *w = req->work;
    struct tile_spec spec;
    if (tile_request_spec(&w->treq, &req->srv->lim, &spec, e) < 0)
        return -1;
    spec.max_output_bytes = 0; /* tiled_work_check_size, which names the flag */
    if (tile_plan_init(&w->plan, w->treq.input.dtype, w->treq.input.rank, w->treq.input.shape, &spec, e) < 0)
        return -1;
    /* A tensor's bytes are a lower bound of every encoding's but a string
     * tensor's (its elements are references): checked once its wire size is
     * known (v2_infer.c), and by every reply in produce. */
    if (w->plan.dtype != TILE_STRING && tiled_work_check_size(req, w->plan.out_bytes, e) < 0)
        return -1;
    req->tm.tile_us = tiled_req_lap(req); /* from the decode's end */
    return take_input(req, e);
}

static int build_body(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_reply *r = &req->reply;
    struct tile_encoder *enc = req->work->enc;
    uint64_t size = tile_encoder_size(enc);
    tiled_reply_set_body(r, tiled_bodycache_get(req->srv->bodies, size ? size : 1), size, tiled_bodycache_put);
    if (!r->body)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate a %llu byte response", (unsigned long long)size);
    /* The lap from the plan's end (or the worker's start): the encoder's
     * sizing and the body's making are the one stage. */
    if (tile_encoder_fill(enc, r->body, req->srv->pool)) {
        req->tm.tile_us += tiled_req_lap(req);
    } else {
        /* The body's metrics and the Server-Timing header show the same
         * figures: both are final once the body is built. */
        req->tm.encode_us = tiled_req_lap(req);
        req->tm.total_us = req->t_mark - req->t_start;
        req->timings_final = true;
        tile_encoder_set_timings(enc, &req->tm);
        size = tile_encoder_rewrite_metrics(enc, r->body);
    }
    r->body_len = size;
    return 0;
}

static int produce(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_server *srv = req->srv;
    struct tiled_reply *r = &req->reply;
    uint64_t size = tile_encoder_size(req->work->enc);
    /* Every output, however it leaves: held in memory, streamed, or written
     * into a shared-memory region. */
    if (tiled_work_check_size(req, size, e) < 0)
        return -1;
    if (req->work->produce)
        return req->work->produce(req, e); /* a handler's own answer (the shared-memory output) */
    if (size > (uint64_t)srv->cfg.stream_threshold) {
        uint64_t chunks = 2 * (uint64_t)srv->cfg.stream_chunk;
        if (tiled_memory_take(&srv->memory, &req->mem_held, req->mem_kin, chunks, e) < 0)
            return -1;
        r->stream = tiled_stream_init(req, &req->work->enc, (uint64_t)srv->cfg.stream_chunk);
        if (!r->stream)
            return tile_error_set(e, TILE_ENOMEM, "cannot set up the response stream");
        r->release_stream = tiled_stream_free;
    } else if (tiled_memory_take(&srv->memory, &req->mem_held, req->mem_kin, size, e) < 0 || build_body(req, e) < 0 ||
               tiled_reply_compress(r, tiled_coding_negotiate(req->accept_encoding), e) < 0) {
        return -1;
    }
    /* The body depends on Accept-Encoding, compressed or not: caches must
     * key on it (an HTTP matter: the gRPC transport hides accept-encoding
     * from the service, so its replies are never compressed here). */
    if (req->transport == TILED_TRANSPORT_HTTP)
        tiled_reply_vary(r, TILED_VARY_ACCEPT_ENCODING);
    r->status = TILED_OK;
    return 0;
}

void tiled_work_fail(struct tiled_req *req, const struct tile_error *e)
{
    if (req->work && req->work->release)
        req->work->release(req);
    tiled_reply_free(&req->reply);
    memset(&req->reply, 0, sizeof(req->reply));
    tiled_reply_tile_error(&req->reply, e);
    if (e->code == TILE_ENOMEM) /* memory, the budget's or the system's: may be there in a moment */
        tiled_reply_header(&req->reply, "Retry-After", "1");
}

/* Decodes the body: 0 when prepared, -1 with `e` set, -2 when the reply
 * is already decided (an error, or a handler's whole answer). */
static int prepare(struct tiled_req *req, struct tile_error *e)
{
    if (tiled_work_prepared(req))
        return 0;
    int rc = tiled_inflate_body(req, e);
    return rc == 0 ? req->prepare(req, e) : rc;
}

void tiled_work_run(struct tiled_req *req)
{
    struct tile_error e = {0};
    int rc = prepare(req, &e);
    if (rc == -1 || (rc == 0 && produce(req, &e) < 0))
        tiled_work_fail(req, &e);
}

void tiled_work_start(struct tiled_req *req)
{
    uint64_t inline_max = (uint64_t)req->srv->cfg.inline_max;
    struct tile_error e = {0};
    /* Inline only what is known to be small: a compressed body may inflate
     * to --max-body, and that work belongs on a worker, not on the thread
     * that serves other connections. */
    if (req->body_len > inline_max || tiled_inflate_needed(req))
        return;
    int rc = prepare(req, &e);
    if (rc < 0) {
        if (rc == -1)
            tiled_work_fail(req, &e);
        return;
    }
    if (tile_encoder_size(req->work->enc) <= inline_max && produce(req, &e) < 0)
        tiled_work_fail(req, &e);
}
