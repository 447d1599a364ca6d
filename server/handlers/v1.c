/* v1.c - POST /v1/tile: decode, tile, encode.
 *
 * DESIGN. The handler runs on the HTTP thread and only does what is cheap:
 * pick the input and output formats from Content-Type and Accept and check
 * the query. Then work.c decides where the rest runs; v1_prepare() is the
 * /v1-specific part of it (decode, plan, choose the body's encoder).
 * The head check makes the request's struct v1_work once those pass: the
 * work record (work.h) and what /v1 keeps beside it.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accept.h"
#include "clock.h"
#include "handlers.h"
#include "numfmt.h"
#include "server.h"
#include "text.h"
#include "work.h"

/* A /v1 request's state, one block with its work record (work.h). */
struct v1_work {
    struct tiled_work work;      /* first: req->work points here */
    struct tile_query_tensor qt; /* the query's dtype and shape (the head check) */
    enum tile_format in_fmt, out_fmt;
};
_Static_assert(offsetof(struct v1_work, work) == 0, "req->work is the block's start");

/* Freed blocks of sizeof(struct v1_work), for the next (spare.h). */
static struct tile_spare spare_v1;

/* The state of a request the head check passed (tiled_work_new made it). */
static struct v1_work *v1_of(struct tiled_req *req)
{
    return (struct v1_work *)req->work;
}

/* RFC 9110 12.5.1: a format's weight is that of the most specific range
 * that matches it (its own media type, then "application" with any
 * subtype, then any type; the first of equally specific ones), so JSON at
 * q=0 before any type at q=1 refuses JSON even for a JSON request. The
 * heaviest format above q 0 wins; of equally heavy ones, the one whose
 * range comes first in the list, and of the formats one wildcard matches,
 * the request's own (`dflt`). */
int tiled_negotiate_format(const char *accept, enum tile_format dflt, enum tile_format *out)
{
    if (!accept[0]) {
        *out = dflt;
        return 0;
    }
    int q[TILE_FMT_COUNT] = {0}, spec[TILE_FMT_COUNT], pos[TILE_FMT_COUNT] = {0};
    for (int f = 0; f < TILE_FMT_COUNT; f++)
        spec[f] = -1;
    struct tiled_accept_elem el;
    int i = 0;
    for (const char *p = accept; tiled_accept_next(&p, &el); i++) {
        enum tile_format one;
        int s;
        if (tile_format_from_media_type(el.name, el.name_len, &one) == 0)
            s = 2;
        else if (el.name_len == 13 && strncasecmp(el.name, "application/*", 13) == 0)
            s = 1; /* every format is an application/ type */
        else if (el.name_len == 3 && memcmp(el.name, "*/*", 3) == 0)
            s = 0;
        else
            continue;
        for (int f = 0; f < TILE_FMT_COUNT; f++) {
            if ((s < 2 || f == (int)one) && s > spec[f]) {
                spec[f] = s;
                q[f] = el.q;
                pos[f] = i;
            }
        }
    }
    int best = -1;
    for (int f = 0; f < TILE_FMT_COUNT; f++) {
        if (q[f] <= 0)
            continue;
        if (best < 0 || q[f] > q[best] || (q[f] == q[best] && (pos[f] < pos[best] ||
                                                               (pos[f] == pos[best] && f == (int)dflt))))
            best = f;
    }
    if (best < 0)
        return -1;
    *out = (enum tile_format)best;
    return 0;
}

/* Reads the query into the work record's request (and the tensor's dtype
 * and shape into its qt, except for .npy bodies, which describe their own
 * tensor). */
static int read_query(struct tiled_req *req, struct v1_work *s, struct tile_error *e)
{
    struct tile_limits lim = req->srv->lim;
    bool tensor_in_query = s->in_fmt != TILE_FMT_NPY;
    for (int i = 0; i < req->nquery; i++) {
        if (tile_request_query_param(&s->work.treq, &s->qt, tensor_in_query, req->query[i].key, req->query[i].value,
                                     &lim, e) < 0)
            return -1;
    }
    return 0;
}

/* A JSON body is decoded on its own; the query's fields (read into the
 * work record's request by the head check) then join it, and a field
 * given in both places must agree (tile_request_merge_query). */
static int decode_json(struct tiled_req *req, struct v1_work *s, const struct tile_limits *lim, struct tile_error *e)
{
    struct tile_request body;
    tile_request_init(&body);
    int rc = tile_v1_json_decode(req->body ? req->body : "", req->body_len, lim, &body, e);
    if (rc == 0)
        rc = tile_request_merge_query(&body, &s->work.treq, &s->qt, e);
    tile_request_free(&s->work.treq); /* the query's fields: no input to free */
    tile_request_move(&s->work.treq, &body);
    tile_request_free(&body);
    return rc;
}

/* The query was read in the head check (tiled_check_tile_head); the body
 * is decoded here, on the work path. */
static int decode(struct tiled_req *req, struct v1_work *s, struct tile_error *e)
{
    struct tile_limits lim = req->srv->lim;
    if (s->in_fmt == TILE_FMT_JSON)
        return decode_json(req, s, &lim, e);
    switch (s->in_fmt) {
    case TILE_FMT_RAW:
        return tile_raw_decode(req->body, req->body_len, &s->qt, &lim, &s->work.treq, e);
    case TILE_FMT_NPY:
        return tile_v1_npy_decode(req->body ? req->body : "", req->body_len, &lim, &s->work.treq, e);
    default:
        return tile_error_set(e, TILE_EINVAL, "unsupported format");
    }
}

static void set_tensor_headers(struct tiled_req *req, const struct tile_plan *plan)
{
    char shape[TILE_MAX_RANK * 24];
    tile_format_shape(plan->out_shape, plan->out_rank, true, shape, sizeof(shape));
    tiled_reply_header(&req->reply, "X-Tensor-Dtype", tile_dtype_name(plan->dtype));
    tiled_reply_header(&req->reply, "X-Tensor-Shape", shape);
}

/* Decodes and plans a /v1 request; afterwards its encoder knows the size. */
static int v1_prepare(struct tiled_req *req, struct tile_error *e)
{
    struct v1_work *s = v1_of(req);
    tiled_req_mark(req);
    if (decode(req, s, e) < 0)
        return -1;
    req->tm.decode_us = tiled_req_lap(req);
    if (tiled_work_plan(req, e) < 0)
        return -1;
    s->work.enc = tile_encoder_new(s->out_fmt, &s->work.plan, &s->work.treq, NULL, 0, e); /* sized in produce */
    if (!s->work.enc)
        return -1;
    req->reply.content_type = tile_format_media_type(s->out_fmt);
    if (s->out_fmt == TILE_FMT_RAW)
        set_tensor_headers(req, &s->work.plan);
    return 0;
}

void tiled_check_tile_head(struct tiled_req *req)
{
    /* The answer's type is chosen by Accept: caches must key on it, for the
     * 406 that refuses it too (work.c adds Accept-Encoding to a result). */
    tiled_reply_vary(&req->reply, TILED_VARY_ACCEPT);
    enum tile_format in_fmt, out_fmt;
    if (!req->content_type[0]) {
        tiled_reply_error(&req->reply, TILED_UNSUPPORTED_MEDIA_TYPE,
                          "missing Content-Type (use application/json, application/octet-stream or application/x-npy)");
        return;
    }
    if (tile_format_from_media_type(req->content_type, strlen(req->content_type), &in_fmt) < 0) {
        tiled_reply_error(&req->reply, TILED_UNSUPPORTED_MEDIA_TYPE,
                          "unsupported Content-Type '%s' (use application/json, application/octet-stream or "
                          "application/x-npy)",
                          req->content_type);
        return;
    }
    if (tiled_negotiate_format(req->accept, in_fmt, &out_fmt) < 0) {
        tiled_reply_error(&req->reply, TILED_NOT_ACCEPTABLE,
                          "cannot produce any type in Accept '%s' (available: application/json, "
                          "application/octet-stream, application/x-npy)",
                          req->accept);
        return;
    }
    if (req->query_overflow) {
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, "too many query parameters (at most %d)", TILED_QUERY_MAX);
        return;
    }
    /* The request will tile: its state, then the query, read once into
     * the request the body will join (decode). */
    struct v1_work *s = tiled_work_new(req, &spare_v1, sizeof(*s), NULL);
    if (!s)
        return;
    s->in_fmt = in_fmt;
    s->out_fmt = out_fmt;
    struct tile_error e = {0};
    if (read_query(req, s, &e) < 0)
        tiled_reply_tile_error(&req->reply, &e);
}

/* The head check (tiled_check_tile_head) has passed, so the request has
 * its struct v1_work: every transport runs a route's check_head before its
 * handler (service.h). */
void tiled_handle_tile(struct tiled_req *req)
{
    req->body_format = (int)v1_of(req)->in_fmt;
    req->prepare = v1_prepare;
    tiled_work_start(req);
}
