/* v2_http.c - Open Inference Protocol (KServe v2) endpoints for the `tile` model.
 *
 * DESIGN. One prefix route takes every /v2/models/... path and splits it
 * into model, version and action, as Triton's model regex does. Metadata,
 * readiness and configuration are small fixed documents; which model and
 * version a path addresses, and the statistics, are the rules both
 * transports share (v2_catalog.c). An infer request is the one infer of
 * every wire (v2_infer.h); this file gives its HTTP codec: the protocol's
 * JSON header and binary blobs decoded, the output framed in the
 * protocol's response. Statistics are answered in the form of Triton's
 * statistics extension.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caching.h"
#include "handlers.h"
#include "server.h"
#include "text.h"
#include "v2.h"
#include "v2_infer.h"
#include "v2_catalog.h"

void tiled_handle_server_metadata(struct tiled_req *req)
{
    const char *ext[TILED_V2_MAX_EXTENSIONS];
    size_t n = tiled_v2_extensions(req->srv, ext);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++)
        json_array_append_new(list, json_string(ext[i]));
    tiled_reply_doc(&req->reply, TILED_OK,
                    json_pack("{s:s, s:s, s:o}", "name", "tiled", "version", TILED_VERSION, "extensions", list));
    tiled_cache_fixed(req);
}

/* ---- infer ---------------------------------------------------------------- */

/* The HTTP wire of an infer (v2_infer.h's codec): the JSON header and the
 * binary tensor data after it (Inference-Header-Content-Length), the
 * response as JSON or as a JSON header and binary data. */
static int http_decode(struct tiled_req *req, const struct tile_v2_shm_source *shm, struct tile_error *e)
{
    const char *hl = req->infer_header_len;
    int64_t header_len = -1; /* absent: the whole body is JSON */
    if (hl && (tile_parse_int64(hl, strlen(hl), &header_len, "Inference-Header-Content-Length", e) < 0 ||
               header_len < 0))
        return tile_error_set(e, TILE_EINVAL, "Inference-Header-Content-Length '%.30s' is not a byte count", hl);
    struct tile_v2_request *v = &tiled_v2_infer_of(req)->v2;
    return tile_v2_decode_shm(req->body ? req->body : "", req->body_len, header_len, v->version, &req->srv->lim, shm,
                              v, e);
}

static int http_frame(struct tiled_req *req, uint64_t data_bytes, char *head, size_t cap,
                      struct tile_encode_frame *f, enum tile_format *fmt, struct tile_error *e)
{
    const struct tiled_v2_infer *s = tiled_v2_infer_of(req);
    const struct tile_v2_request *v = &s->v2;
    if (v->out_shm.used)
        return tile_v2_response_shm(v, &s->work.plan, head, cap, &f->head_len, e);
    f->complex_flat = true;
    *fmt = v->binary_output ? TILE_FMT_RAW : TILE_FMT_JSON;
    return tile_v2_response_frame(v, &s->work.plan, data_bytes, head, cap, &f->head_len, &f->tail, &f->tail_len, e);
}

static void http_framed(struct tiled_req *req, const struct tile_encode_frame *f, enum tile_format fmt)
{
    bool binary = !tiled_v2_infer_of(req)->v2.out_shm.used && fmt == TILE_FMT_RAW;
    req->reply.content_type = binary ? "application/octet-stream" : "application/json";
    if (binary) {
        char n[24];
        snprintf(n, sizeof(n), "%zu", f->head_len);
        tiled_reply_header(&req->reply, "Inference-Header-Content-Length", n);
    }
}

static const struct tiled_v2_wire http_wire = {http_decode, http_frame, http_framed};

static int http_prepare(struct tiled_req *req, struct tile_error *e)
{
    return tiled_v2_infer_prepare(req, &http_wire, e);
}

/* ---- statistics ------------------------------------------------------------- */

/* {"count": N, "ns": N}, a Triton duration statistic. */
static json_t *duration(uint64_t count, uint64_t ns)
{
    return json_pack("{s:I, s:I}", "count", (json_int_t)count, "ns", (json_int_t)ns);
}

/* One version's statistics in the form of Triton's statistics extension. */
static json_t *stat_doc(const struct tiled_server *srv, int slot)
{
    struct tile_grpc_model_stats s;
    char v[16];
    tiled_v2_stats_read(srv, slot, &s, v);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}, s:[]}", "name", s.name,
                     "version", s.version, "last_inference", (json_int_t)s.last_inference_ms, "inference_count",
                     (json_int_t)s.inference_count, "execution_count", (json_int_t)s.execution_count,
                     "inference_stats", "success", duration(s.success_count, s.success_ns), "fail",
                     duration(s.fail_count, s.fail_ns), "queue", duration(s.queue_count, s.queue_ns),
                     "compute_input", duration(s.compute_input_count, s.compute_input_ns), "compute_infer",
                     duration(s.compute_infer_count, s.compute_infer_ns), "compute_output",
                     duration(s.compute_output_count, s.compute_output_ns), "cache_hit",
                     duration(s.cache_hit_count, s.cache_hit_ns), "cache_miss",
                     duration(s.cache_miss_count, s.cache_miss_ns), "batch_stats");
}

/* Statistics of one version, or of every version when `version` is 0. */
static void handle_stats(struct tiled_req *req, int version)
{
    json_t *list = json_array();
    for (int i = 0; list && i < TILE_V2_NVERSIONS; i++) {
        if (version && tile_v2_versions[i] != version)
            continue;
        if (json_array_append_new(list, stat_doc(req->srv, i)) < 0) {
            json_decref(list);
            list = NULL;
        }
    }
    tiled_cache_no_store(&req->reply);
    tiled_reply_doc(&req->reply, TILED_OK, json_pack("{s:o}", "model_stats", list));
}

/* ---- paths ---------------------------------------------------------------------- */

bool tiled_split_model_path(const char *p, char *model, size_t cap, const char **version, size_t *vlen,
                            const char **action)
{
    size_t n = strcspn(p, "/");
    int v;
    if (n == 0 || n >= cap)
        return false;
    memcpy(model, p, n);
    model[n] = '\0';
    p += n;
    *version = "";
    *vlen = 0;
    if (strncmp(p, "/versions/", 10) == 0) {
        p += 10;
        *version = p;
        *vlen = strcspn(p, "/");
        if (!*vlen || tile_v2_version_parse(*version, *vlen, &v) < 0)
            return false; /* not a path this route has */
        p += *vlen;
    }
    *action = *p == '/' ? p + 1 : p;
    return true;
}

/* An infer request whose path, method and Inference-Header-Content-Length
 * are right needs its body; anything else on this route is answered from
 * the path alone, so it is answered now. */
void tiled_check_models_head(struct tiled_req *req)
{
    char model[128];
    const char *version, *action;
    size_t vlen;
    int v;
    const char *hl = req->infer_header_len;
    const char *rest = req->path + strlen("/v2/models/");
    bool infer = tiled_split_model_path(rest, model, sizeof(model), &version, &vlen, &action) &&
                 tiled_v2_model_find(model, strlen(model), version, vlen, &v) == TILED_V2_FOUND &&
                 strcmp(action, "infer") == 0 && strcmp(req->method, "POST") == 0;
    if (!infer) {
        tiled_handle_models(req);
        return;
    }
    if (hl && hl[0] && strspn(hl, "0123456789") != strlen(hl))
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, "Inference-Header-Content-Length '%.30s' is not a byte count", hl);
    else
        req->head_found = v; /* tiled_handle_models starts the infer without reading the path again */
}

void tiled_handle_models(struct tiled_req *req)
{
    char model[128];
    const char *version, *action;
    size_t vlen;
    if (req->head_found) { /* an infer, its path read by tiled_check_models_head */
        req->body_format = req->infer_header_len ? TILE_FMT_RAW : TILE_FMT_JSON;
        tiled_v2_infer_start(req, req->head_found, http_prepare);
        return;
    }
    const char *rest = req->path + strlen("/v2/models/");
    if (strcmp(rest, "stats") == 0) {
        if (tiled_method_is(req, "GET"))
            handle_stats(req, 0);
        return;
    }
    if (!tiled_split_model_path(rest, model, sizeof(model), &version, &vlen, &action)) {
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "no such endpoint: %s %s", req->method, req->path);
        return;
    }
    int v = tiled_v2_model_version(req, model, strlen(model), version, vlen);
    if (!v)
        return;
    char *doc = NULL;
    if (strcmp(action, "infer") == 0) {
        if (tiled_method_is(req, "POST")) {
            req->body_format = req->infer_header_len ? TILE_FMT_RAW : TILE_FMT_JSON;
            tiled_v2_infer_start(req, v, http_prepare);
        }
        return;
    }
    if (!tiled_method_is(req, "GET"))
        return;
    /* Metadata and configuration are fixed documents (caching.h); readiness
     * is about now. */
    bool fixed = strcmp(action, "") == 0 || strcmp(action, "config") == 0;
    if (strcmp(action, "") == 0)
        doc = tile_v2_model_metadata(v);
    else if (strcmp(action, "config") == 0)
        doc = tile_v2_model_config(v);
    else if (strcmp(action, "ready") == 0)
        doc = atomic_load(&req->srv->draining) ? strdup("")
                                               : tiled_json_dump(json_pack("{s:s, s:b}", "name", "tile", "ready", 1));
    else if (strcmp(action, "stats") == 0) {
        handle_stats(req, vlen ? v : 0); /* no version: all of them */
        return;
    } else {
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "no such endpoint: %s %s", req->method, req->path);
        return;
    }
    if (!fixed)
        tiled_cache_no_store(&req->reply);
    if (!doc || !doc[0]) {
        tiled_reply_error(&req->reply, doc ? TILED_UNAVAILABLE : TILED_INTERNAL_ERROR, doc ? "model 'tile' is not ready: the server is draining"
                                                              : "out of memory");
        free(doc);
        return;
    }
    tiled_reply_json(&req->reply, TILED_OK, doc);
    free(doc);
    if (fixed)
        tiled_cache_fixed(req);
}
