/* v1.c - POST /v1/tile: decode, tile, encode.
 *
 * DESIGN. The handler runs on the HTTP thread and only does what is cheap:
 * pick the input and output formats from Content-Type and Accept and check
 * the query. Small requests (body and output under --inline-max) are then
 * finished on the spot, because a thread hand-off would cost more than the
 * work; everything else goes to the worker pool (tiled_tile_work), which
 * decodes, plans and either builds the body in memory or, above
 * --stream-threshold, sets up a stream that produces it chunk by chunk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

/* Picks the response format from Accept: the first listed supported type
 * with the highest q; wildcards and an absent header mean the request's. */
static int negotiate(const char *accept, enum tile_format dflt, enum tile_format *out)
{
    if (!accept[0]) {
        *out = dflt;
        return 0;
    }
    double best_q = 0;
    int found = -1;
    const char *p = accept;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *semi = memchr(p, ';', len);
        size_t tlen = semi ? (size_t)(semi - p) : len;
        while (tlen && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
            tlen--;
        }
        double q = 1;
        const char *qs = semi ? strstr(semi, "q=") : NULL;
        if (qs && qs < p + len)
            q = strtod(qs + 2, NULL);
        enum tile_format f;
        int ok = tile_format_from_media_type(p, tlen, &f) == 0;
        if (!ok && tlen >= 3 && (strncmp(p, "*/*", 3) == 0 || strncasecmp(p, "application/*", 13) == 0)) {
            f = dflt;
            ok = 1;
        }
        if (ok && q > best_q) {
            best_q = q;
            found = (int)f;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    if (found < 0)
        return -1;
    *out = (enum tile_format)found;
    return 0;
}

static struct tile_limits limits_of(const struct tiled_server *srv)
{
    return srv->lim;
}

static int decode(struct tiled_req *req, struct tile_error *e)
{
    struct tile_limits lim = limits_of(req->srv);
    bool tensor_in_query = req->in_fmt == TILE_FMT_RAW;
    struct tile_query_tensor qt = {0};
    if (req->in_fmt != TILE_FMT_JSON) {
        for (int i = 0; i < req->nquery; i++) {
            if (tile_request_query_param(&req->treq, &qt, tensor_in_query, req->query[i].key, req->query[i].value,
                                         &lim, e) < 0)
                return -1;
        }
    }
    switch (req->in_fmt) {
    case TILE_FMT_JSON:
        return tile_v1_json_decode(req->body ? req->body : "", req->body_len, &lim, &req->treq, e);
    case TILE_FMT_RAW:
        return tile_v1_raw_decode(req->body, req->body_len, &qt, &lim, &req->treq, e);
    case TILE_FMT_NPY:
        return tile_v1_npy_decode(req->body ? req->body : "", req->body_len, &lim, &req->treq, e);
    default:
        return tile_error_set(e, TILE_EINVAL, "unsupported format");
    }
}

static void set_tensor_headers(struct tiled_req *req)
{
    char shape[TILE_MAX_RANK * 24];
    tile_format_shape(req->plan.out_shape, req->plan.out_rank, true, shape, sizeof(shape));
    tiled_reply_header(&req->reply, "X-Tensor-Dtype", tile_dtype_name(req->plan.dtype));
    tiled_reply_header(&req->reply, "X-Tensor-Shape", shape);
}

/* Builds the whole body in memory. Fixed-width raw output is tiled straight
 * into the body with the pool's help; other bodies come from the encoder. */
static int build_body(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_reply *r = &req->reply;
    uint64_t size = tile_encoder_size(&req->enc);
    r->body = malloc(size ? size : 1);
    if (!r->body)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate a %llu byte response", (unsigned long long)size);
    uint64_t t0 = tiled_now_us();
    if (req->out_fmt == TILE_FMT_RAW && req->plan.dtype != TILE_STRING) {
        tile_execute(&req->plan, req->treq.input.data, r->body, req->srv->pool);
        req->tm.tile_us += tiled_now_us() - t0;
    } else {
        /* The body's metrics and the Server-Timing header show the same
         * figures: both are final once the body is built. */
        tile_encoder_read(&req->enc, r->body, size);
        uint64_t t1 = tiled_now_us();
        req->tm.encode_us = t1 - t0;
        req->tm.total_us = t1 - req->t_start;
        req->timings_final = true;
        size = tile_encoder_rewrite_metrics(&req->enc, r->body);
    }
    r->body_len = size;
    return 0;
}

/* Decodes and plans; afterwards req->enc knows the response size. */
static int prepare(struct tiled_req *req, struct tile_error *e)
{
    struct tile_limits lim = limits_of(req->srv);
    uint64_t t0 = tiled_now_us();
    if (decode(req, e) < 0)
        return -1;
    uint64_t t1 = tiled_now_us();
    req->tm.decode_us = t1 - t0;
    struct tile_spec spec;
    if (tile_request_spec(&req->treq, &lim, &spec, e) < 0)
        return -1;
    spec.max_output_bytes = lim.max_stream;
    if (tile_plan_init(&req->plan, req->treq.input.dtype, req->treq.input.rank, req->treq.input.shape, &spec, e) < 0)
        return -1;
    if (tile_encoder_init(&req->enc, req->out_fmt, &req->plan, &req->treq.input, &req->treq, &req->tm,
                          lim.max_stream, e) < 0)
        return -1;
    req->has_enc = true;
    req->tm.tile_us = tiled_now_us() - t1; /* planning (and string/JSON pieces) */
    return 0;
}

/* Produces the reply from a prepared request: in memory or as a stream. */
static int produce(struct tiled_req *req, struct tile_error *e)
{
    struct tiled_server *srv = req->srv;
    struct tiled_reply *r = &req->reply;
    uint64_t size = tile_encoder_size(&req->enc);
    snprintf(r->content_type, sizeof(r->content_type), "%s", tile_format_media_type(req->out_fmt));
    if (req->out_fmt == TILE_FMT_RAW)
        set_tensor_headers(req);
    if (size > (uint64_t)srv->cfg.stream_threshold) {
        r->stream = tiled_stream_init(req, &req->enc, (uint64_t)srv->cfg.stream_chunk);
        if (!r->stream)
            return tile_error_set(e, TILE_ENOMEM, "cannot set up the response stream");
        req->has_enc = false; /* the stream owns the encoder now */
    } else if (size > srv->lim.max_output) {
        return tile_error_set(e, TILE_ETOOBIG, "output of %llu bytes exceeds the max-output limit of %llu bytes",
                              (unsigned long long)size, (unsigned long long)srv->lim.max_output);
    } else if (build_body(req, e) < 0) {
        return -1;
    }
    r->status = 200;
    return 0;
}

static void fail(struct tiled_req *req, const struct tile_error *e)
{
    tiled_reply_free(&req->reply);
    memset(&req->reply, 0, sizeof(req->reply));
    tiled_reply_tile_error(&req->reply, e);
}

void tiled_tile_work(struct tiled_req *req)
{
    struct tile_error e = {0};
    if ((!req->has_enc && prepare(req, &e) < 0) || produce(req, &e) < 0)
        fail(req, &e);
}

void tiled_handle_tile(struct tiled_req *req)
{
    if (!req->content_type[0]) {
        tiled_reply_error(&req->reply, 415,
                          "missing Content-Type (use application/json, application/octet-stream or application/x-npy)");
        return;
    }
    if (tile_format_from_media_type(req->content_type, strlen(req->content_type), &req->in_fmt) < 0) {
        tiled_reply_error(&req->reply, 415,
                          "unsupported Content-Type '%s' (use application/json, application/octet-stream or "
                          "application/x-npy)",
                          req->content_type);
        return;
    }
    if (negotiate(req->accept, req->in_fmt, &req->out_fmt) < 0) {
        tiled_reply_error(&req->reply, 406,
                          "cannot produce any type in Accept '%s' (available: application/json, "
                          "application/octet-stream, application/x-npy)",
                          req->accept);
        return;
    }
    if (req->query_overflow) {
        tiled_reply_error(&req->reply, 400, "too many or too long query parameters");
        return;
    }
    if (req->in_fmt == TILE_FMT_JSON && req->nquery) {
        tiled_reply_error(&req->reply, 400,
                          "unknown query parameter '%s' (JSON requests carry every field in the body)",
                          req->query[0].key);
        return;
    }
    /* Small work is cheaper here than a thread hand-off; the rest is left
     * for a worker (reply.status stays 0). */
    uint64_t inline_max = (uint64_t)req->srv->cfg.inline_max;
    if (req->body_len > inline_max)
        return;
    struct tile_error e = {0};
    if (prepare(req, &e) < 0) {
        fail(req, &e);
        return;
    }
    if (tile_encoder_size(&req->enc) <= inline_max && produce(req, &e) < 0)
        fail(req, &e);
}

void tiled_handle_live(struct tiled_req *req)
{
    tiled_reply_json(&req->reply, 200, "{\"live\":true}");
}

void tiled_handle_ready(struct tiled_req *req)
{
    if (atomic_load(&req->srv->draining))
        tiled_reply_json(&req->reply, 503, "{\"ready\":false,\"error\":\"draining\"}");
    else
        tiled_reply_json(&req->reply, 200, "{\"ready\":true}");
}
