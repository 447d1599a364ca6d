/* router.c - the route table (see router.h). */
#include "router.h"

#include <stdio.h>
#include <string.h>

#include "handlers.h"

static const struct tiled_route tiled_routes[] = {
    {.method = "POST", .path = "/v1/tile", .handler = tiled_handle_tile, .label = TILED_RL_V1_TILE,
     .needs_body = true, .check_head = tiled_check_tile_head},
    {.method = "GET", .path = "/v2", .handler = tiled_handle_server_metadata, .label = TILED_RL_V2},
    {.method = "GET", .path = "/v2/", .handler = tiled_handle_server_metadata, .label = TILED_RL_V2},
    {.method = "GET", .path = "/v2/health/live", .handler = tiled_handle_live, .label = TILED_RL_HEALTH,
     .open = true},
    {.method = "GET", .path = "/v2/health/ready", .handler = tiled_handle_ready, .label = TILED_RL_HEALTH,
     .open = true},
    {.method = "*", .path = "/v2/models/", .handler = tiled_handle_models, .label = TILED_RL_V2,
     .needs_body = true, .prefix = true, .check_head = tiled_check_models_head},
    {.method = "*", .path = "/v2/systemsharedmemory/", .handler = tiled_handle_system_shm, .label = TILED_RL_V2,
     .needs_body = true, .prefix = true},
    {.method = "*", .path = "/v2/cudasharedmemory/", .handler = tiled_handle_cuda_shm, .label = TILED_RL_V2,
     .needs_body = true, .prefix = true},
    {.method = "GET", .path = "/metrics", .handler = tiled_handle_metrics, .label = TILED_RL_METRICS},
    {.method = "GET", .path = "/openapi.json", .handler = tiled_handle_openapi, .label = TILED_RL_OTHER},
    /* The asterisk-form target: the server itself, not a resource. */
    {.method = "OPTIONS", .path = "*", .handler = tiled_handle_server_options, .label = TILED_RL_OTHER},
    /* gRPC: the HTTP/2 :path is /<package>.<service>/<method>; health is
     * open like its HTTP twins. */
    {.method = "POST", .path = "/inference.GRPCInferenceService/ServerLive", .handler = tiled_handle_grpc,
     .label = TILED_RL_GRPC, .needs_body = true, .open = true, .grpc = true},
    {.method = "POST", .path = "/inference.GRPCInferenceService/ServerReady", .handler = tiled_handle_grpc,
     .label = TILED_RL_GRPC, .needs_body = true, .open = true, .grpc = true},
    {.method = "POST", .path = "/grpc.health.v1.Health/", .handler = tiled_handle_grpc, .label = TILED_RL_GRPC,
     .needs_body = true, .prefix = true, .open = true, .grpc = true, .check_head = tiled_check_grpc_head},
    {.method = "POST", .path = "/inference.GRPCInferenceService/ModelStreamInfer", .handler = tiled_handle_grpc,
     .label = TILED_RL_GRPC, .needs_body = true, .grpc = true, .streams = true},
    {.method = "POST", .path = "/inference.GRPCInferenceService/", .handler = tiled_handle_grpc,
     .label = TILED_RL_GRPC, .needs_body = true, .prefix = true, .grpc = true, .check_head = tiled_check_grpc_head},
    {.method = "POST", .path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
     .handler = tiled_handle_grpc, .label = TILED_RL_GRPC, .needs_body = true, .grpc = true,
     .streams = true, .stream_raw = true},
    {.method = "POST", .path = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
     .handler = tiled_handle_grpc, .label = TILED_RL_GRPC, .needs_body = true, .grpc = true,
     .streams = true, .stream_raw = true},
};

#define NROUTES (sizeof(tiled_routes) / sizeof(tiled_routes[0]))

const struct tiled_route *tiled_route_find(enum tiled_transport transport, const char *method, const char *path, char *allow,
                                           size_t cap)
{
    allow[0] = '\0';
    for (size_t i = 0; i < NROUTES; i++) {
        const struct tiled_route *r = &tiled_routes[i];
        if (r->grpc != (transport == TILED_TRANSPORT_GRPC))
            continue;
        if (r->prefix && strncmp(r->path, path, strlen(r->path)) == 0)
            return r;
        if (strcmp(r->path, path) != 0)
            continue;
        if (tiled_method_serves(method, r->method))
            return r;
        size_t used = strlen(allow);
        snprintf(allow + used, cap - used, "%s%s", used ? ", " : "", tiled_allow_value(r->method));
    }
    return NULL;
}
