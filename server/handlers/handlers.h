/* handlers.h - the route handlers the route table names (v1.c, v2_http.c,
 * v2_shm.c, v2_grpc.c, ops.c): each turns a request into a reply, or hands
 * it to work.c to finish. */
#ifndef TILED_HANDLERS_H
#define TILED_HANDLERS_H

#include <stdbool.h>
#include <stddef.h>

#include "encode.h" /* enum tile_format */

struct tiled_req;
struct tiled_server;

void tiled_handle_tile(struct tiled_req *req);
void tiled_handle_live(struct tiled_req *req);
void tiled_handle_ready(struct tiled_req *req);
void tiled_handle_server_metadata(struct tiled_req *req);
void tiled_handle_metrics(struct tiled_req *req);
void tiled_handle_openapi(struct tiled_req *req);
void tiled_handle_server_options(struct tiled_req *req);
void tiled_handle_models(struct tiled_req *req);
/* The response format for an Accept value (v1.c): the first listed
 * supported type with the highest q; wildcards and an empty value mean
 * `dflt`. -1 when nothing listed can be produced. */
int tiled_negotiate_format(const char *accept, enum tile_format dflt, enum tile_format *out);
/* Splits "tile[/versions/N][/action]" (v2_http.c): the model name into
 * model[cap], the version as written (vlen 0 when absent), the action (""
 * when absent). False when the path is malformed, its version included
 * (tile_v2_version_parse()). */
bool tiled_split_model_path(const char *p, char *model, size_t cap, const char **version, size_t *vlen,
                            const char **action);
/* Head checks (route.h): v1's media types and query; v2's path and method. */
void tiled_check_tile_head(struct tiled_req *req);
void tiled_check_models_head(struct tiled_req *req);
void tiled_handle_system_shm(struct tiled_req *req);
void tiled_handle_cuda_shm(struct tiled_req *req);
/* The gRPC routes (v2_grpc.c): the method is the :path's last part. */
void tiled_handle_grpc(struct tiled_req *req);
void tiled_check_grpc_head(struct tiled_req *req);

#endif
