/* v2_grpc.c - the Open Inference Protocol's RPCs over gRPC: each handler
 * decodes the request message in req->body and answers with the response
 * message as the reply's body (the transport frames it) or an error reply,
 * whose gRPC status tiled_reply_grpc_status() derives.
 *
 * DESIGN. The model-level rules (which model and version, extensions,
 * statistics) are v2_catalog.h's, the ones HTTP answers with, so both
 * transports answer alike; this file only decodes and encodes messages
 * (api/grpc_msgs.h). ModelInfer (v2_grpc_infer.c) and the shared-memory
 * RPCs (v2_grpc_shm.c) live apart. A handler leaves `b` empty for a reply
 * whose message is empty (register, unregister).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_msgs.h"
#include "grpc_reflect.h"
#include "handlers.h"
#include "inflate.h"
#include "server.h"
#include "text.h"
#include "v2_grpc.h"
#include "v2_catalog.h"
#include "work.h"

void tiled_grpc_reply(struct tiled_req *req, struct tile_grpc_buf *b)
{
    if (b->oom) {
        free(b->p);
        tiled_reply_error(&req->reply, TILED_UNAVAILABLE, "cannot allocate the response message");
        return;
    }
    req->reply.status = TILED_OK;
    req->reply.content_type = "application/grpc";
    tiled_reply_set_body(&req->reply, (char *)b->p, b->len, NULL);
}

bool tiled_grpc_decode(struct tiled_req *req, const struct tile_grpc_layout *l, struct tile_grpc_str *out)
{
    struct tile_error e = {0};
    if (tile_grpc_strings_decode(req->body, req->body_len, l, out, &e) == 0)
        return true;
    tiled_reply_tile_error(&req->reply, &e);
    return false;
}

int tiled_grpc_model(struct tiled_req *req, struct tile_grpc_str name, struct tile_grpc_str version)
{
    return tiled_v2_model_version(req, name.ptr, name.len, version.ptr, version.len);
}

/* Each RPC's request message: what it reads of it. */
static const struct tile_grpc_layout model_ready_request = {"inference.ModelReadyRequest", {"name", "version"}, 2},
                                     model_metadata_request = {"inference.ModelMetadataRequest", {"name", "version"}, 2},
                                     model_config_request = {"inference.ModelConfigRequest", {"name", "version"}, 2},
                                     model_statistics_request = {"inference.ModelStatisticsRequest",
                                                                 {"name", "version"}, 2},
                                     health_check_request = {"grpc.health.v1.HealthCheckRequest", {"service"}, 1},
                                     server_live_request = {"inference.ServerLiveRequest", {0}, 0},
                                     server_ready_request = {"inference.ServerReadyRequest", {0}, 0},
                                     server_metadata_request = {"inference.ServerMetadataRequest", {0}, 0};

/* Decodes a {name, version} request and checks the model; 0 when the
 * reply is already an error. */
static int model_request(struct tiled_req *req, const struct tile_grpc_layout *l)
{
    struct tile_grpc_str ref[2];
    return tiled_grpc_decode(req, l, ref) ? tiled_grpc_model(req, ref[0], ref[1]) : 0;
}

/* ---- health and metadata ------------------------------------------------- */

static void server_live(struct tiled_req *req, struct tile_grpc_buf *b)
{
    if (tiled_grpc_decode(req, &server_live_request, NULL))
        tile_grpc_bool_reply(b, true);
}

static void server_ready(struct tiled_req *req, struct tile_grpc_buf *b)
{
    if (tiled_grpc_decode(req, &server_ready_request, NULL))
        tile_grpc_bool_reply(b, !atomic_load(&req->srv->draining));
}

/* A model or version it does not serve is not ready, an answer (Triton's:
 * tritonclient's is_model_ready() returns False, as over HTTP); only a
 * version that is no number is an error. */
static void model_ready(struct tiled_req *req, struct tile_grpc_buf *b)
{
    struct tile_grpc_str ref[2];
    int v;
    if (!tiled_grpc_decode(req, &model_ready_request, ref))
        return;
    enum tiled_v2_found found = tiled_v2_model_find(ref[0].ptr, ref[0].len, ref[1].ptr, ref[1].len, &v);
    if (found == TILED_V2_BAD_VERSION)
        tiled_grpc_model(req, ref[0], ref[1]); /* the error reply */
    else
        tile_grpc_bool_reply(b, found == TILED_V2_FOUND && !atomic_load(&req->srv->draining));
}

/* grpc.health.v1.Health/Check: the whole server is one service, named ""
 * or by the inference service's full name. */
static void health_check(struct tiled_req *req, struct tile_grpc_buf *b)
{
    struct tile_grpc_str service;
    if (!tiled_grpc_decode(req, &health_check_request, &service))
        return;
    static const char served[] = "inference.GRPCInferenceService";
    if (service.len && !(service.len == strlen(served) && memcmp(service.ptr, served, service.len) == 0)) {
        tiled_reply_error(&req->reply, TILED_NOT_FOUND, "unknown service '%.*s' (this server serves '%s')",
                          (int)(service.len < 128 ? service.len : 128), service.ptr, served);
        return;
    }
    tile_grpc_health_reply(b, atomic_load(&req->srv->draining) ? TILE_GRPC_NOT_SERVING : TILE_GRPC_SERVING);
}

static void server_metadata(struct tiled_req *req, struct tile_grpc_buf *b)
{
    if (!tiled_grpc_decode(req, &server_metadata_request, NULL))
        return;
    const char *ext[TILED_V2_MAX_EXTENSIONS];
    size_t n = tiled_v2_extensions(req->srv, ext);
    tile_grpc_server_metadata(b, "tiled", TILED_VERSION, ext, n);
}

/* The model's signature for `version`, as the metadata messages take it. */
static void model_meta(int version, struct tile_grpc_model_meta *m, struct tile_grpc_tensor_meta t[4],
                       const char *versions[TILE_V2_NVERSIONS], char text[TILE_V2_NVERSIONS][16])
{
    size_t n;
    const struct tile_v2_tensor_sig *in = tile_v2_model_inputs(version, &n);
    for (size_t i = 0; i <= n && i < 4; i++) {
        const struct tile_v2_tensor_sig *s = i < n ? &in[i] : &tile_v2_model_output;
        t[i] = (struct tile_grpc_tensor_meta){.name = s->name, .dtype = s->dtype, .rank = 1, .shape = {s->dim}};
    }
    for (int i = 0; i < TILE_V2_NVERSIONS; i++) { /* oldest first, as HTTP and Triton list them */
        snprintf(text[i], sizeof(text[i]), "%d", tile_v2_versions[TILE_V2_NVERSIONS - 1 - i]);
        versions[i] = text[i];
    }
    *m = (struct tile_grpc_model_meta){.name = "tile", .platform = TILE_V2_PLATFORM, .backend = "tiled",
                                       .versions = versions, .nversions = TILE_V2_NVERSIONS, .inputs = t,
                                       .ninputs = n, .outputs = &t[n], .noutputs = 1, .version = version};
}

static void model_metadata_or_config(struct tiled_req *req, struct tile_grpc_buf *b, bool config)
{
    int v = model_request(req, config ? &model_config_request : &model_metadata_request);
    if (!v)
        return;
    struct tile_grpc_model_meta m;
    struct tile_grpc_tensor_meta t[4];
    const char *versions[TILE_V2_NVERSIONS];
    char text[TILE_V2_NVERSIONS][16];
    model_meta(v, &m, t, versions, text);
    (config ? tile_grpc_model_config : tile_grpc_model_metadata)(b, &m);
}

static void model_metadata(struct tiled_req *req, struct tile_grpc_buf *b)
{
    model_metadata_or_config(req, b, false);
}

static void model_config(struct tiled_req *req, struct tile_grpc_buf *b)
{
    model_metadata_or_config(req, b, true);
}

/* Every model's statistics when the name is empty (Triton's "all models"),
 * every version's when the version is. */
static void model_statistics(struct tiled_req *req, struct tile_grpc_buf *b)
{
    struct tile_grpc_str ref[2];
    if (!tiled_grpc_decode(req, &model_statistics_request, ref))
        return;
    struct tile_grpc_str name = ref[0], version = ref[1];
    int v = name.len || version.len ? tiled_grpc_model(req, name.len ? name : (struct tile_grpc_str){"tile", 4}, version)
                                    : -1;
    if (!v)
        return;
    struct tile_grpc_model_stats s[TILE_V2_NVERSIONS];
    char text[TILE_V2_NVERSIONS][16];
    size_t n = 0;
    for (int i = 0; i < TILE_V2_NVERSIONS; i++) {
        if (!version.len || tile_v2_versions[i] == v)
            tiled_v2_stats_read(req->srv, i, &s[n++], text[i]);
    }
    tile_grpc_model_statistics(b, s, n);
}

static void unimplemented(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)b;
    tiled_reply_error(&req->reply, TILED_NOT_IMPLEMENTED, "unknown method %s", req->path);
}

/* grpc.reflection's ServerReflectionInfo: one answer per request message
 * (a streaming route: each message is a request of its own). */
static void reflection_info(struct tiled_req *req, struct tile_grpc_buf *b)
{
    struct tile_error e = {0};
    if (tile_grpc_reflect(req->body, req->body_len, b, &e) < 0)
        tiled_reply_tile_error(&req->reply, &e);
}

/* ---- dispatch ------------------------------------------------------------- */

#define INFERENCE "/inference.GRPCInferenceService/"
#define HEALTH "/grpc.health.v1.Health/"
#define REFLECTION_V1 "/grpc.reflection.v1.ServerReflection/"
#define REFLECTION_V1ALPHA "/grpc.reflection.v1alpha.ServerReflection/"

static const struct {
    const char *path;
    void (*fn)(struct tiled_req *req, struct tile_grpc_buf *b);
} rpcs[] = {
    {INFERENCE "ServerLive", server_live},
    {INFERENCE "ServerReady", server_ready},
    {INFERENCE "ModelReady", model_ready},
    {INFERENCE "ServerMetadata", server_metadata},
    {INFERENCE "ModelMetadata", model_metadata},
    {INFERENCE "ModelConfig", model_config},
    {INFERENCE "ModelStatistics", model_statistics},
    {INFERENCE "ModelInfer", tiled_grpc_model_infer},
    {INFERENCE "ModelStreamInfer", tiled_grpc_model_infer}, /* each message of the stream (route.h, streams) */
    {INFERENCE "SystemSharedMemoryStatus", tiled_grpc_shm_status},
    {INFERENCE "SystemSharedMemoryRegister", tiled_grpc_shm_register},
    {INFERENCE "SystemSharedMemoryUnregister", tiled_grpc_shm_unregister},
    {INFERENCE "CudaSharedMemoryStatus", tiled_grpc_cuda_shm_status},
    {INFERENCE "CudaSharedMemoryRegister", tiled_grpc_cuda_shm_register},
    {INFERENCE "CudaSharedMemoryUnregister", tiled_grpc_cuda_shm_unregister},
    {HEALTH "Check", health_check},
    {REFLECTION_V1 "ServerReflectionInfo", reflection_info},
    {REFLECTION_V1ALPHA "ServerReflectionInfo", reflection_info},
};

static int rpc_index(const char *path)
{
    for (size_t i = 0; i < sizeof(rpcs) / sizeof(rpcs[0]); i++) {
        if (strcmp(rpcs[i].path, path) == 0)
            return (int)i;
    }
    return -1;
}

/* Unknown methods are refused from the head, streaming ones included
 * (Health/Watch: UNIMPLEMENTED tells clients not to
 * retry): a streaming client keeps its side open while it waits for
 * answers, so a refusal held until its END_STREAM would come only at its
 * deadline. */
void tiled_check_grpc_head(struct tiled_req *req)
{
    if (rpc_index(req->path) < 0)
        unimplemented(req, NULL);
}

/* Runs RPC `i` on the message in req->body: its reply, or req->prepare
 * set for the work path (ModelInfer). */
static void run_rpc(struct tiled_req *req, int i)
{
    struct tile_grpc_buf b = {0};
    rpcs[i].fn(req, &b);
    if (req->reply.status || req->prepare) /* decided, or left to the work path */
        free(b.p);
    else
        tiled_grpc_reply(req, &b);
}

/* A worker's step for a message left to it (work.h's prepare contract;
 * the work path has inflated the message first): run the RPC, then its
 * own preparation if it left one (ModelInfer decodes and plans); -2 once
 * the reply is decided. */
static int prepare_offloaded(struct tiled_req *req, struct tile_error *e)
{
    req->prepare = NULL;
    run_rpc(req, rpc_index(req->path));
    if (req->reply.status || !req->prepare)
        return -2;
    return tiled_work_prepared(req) ? 0 : req->prepare(req, e);
}

/* A request message is read on the loop thread only when it is known to
 * be small: plain (the transport names a message's grpc-encoding as the
 * request's content_encoding) and within --inline-max. Any other is
 * inflated and read on a worker: a small compressed message may inflate
 * to many MiB, and a large one takes long to read, time the loop must not
 * take from every other call it serves. */
void tiled_handle_grpc(struct tiled_req *req)
{
    int i = rpc_index(req->path);
    if (i < 0)
        unimplemented(req, NULL);
    else if (tiled_inflate_needed(req) || req->body_len > (uint64_t)req->srv->cfg.inline_max)
        req->prepare = prepare_offloaded; /* left to a worker */
    else
        run_rpc(req, i);
}
