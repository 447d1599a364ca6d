/* handlers.h - the route handlers (v1.c, v2.c, ops.c): each turns a
 * request into a reply, or hands it to work.c to finish. */
#ifndef TILED_HANDLERS_H
#define TILED_HANDLERS_H

#include <stdbool.h>

struct tiled_req;
struct tiled_server;

void tiled_handle_tile(struct tiled_req *req);
void tiled_handle_live(struct tiled_req *req);
void tiled_handle_ready(struct tiled_req *req);
void tiled_handle_server_metadata(struct tiled_req *req);
void tiled_handle_metrics(struct tiled_req *req);
void tiled_handle_openapi(struct tiled_req *req);
void tiled_handle_models(struct tiled_req *req);
/* Adds a finished v2 infer request to its version's statistics. */
void tiled_v2_record(struct tiled_server *srv, const struct tiled_req *req, bool ok);

#endif
