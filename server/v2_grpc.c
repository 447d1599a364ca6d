/* v2_grpc.c - the Open Inference Protocol's RPCs over gRPC: each handler
 * decodes the request message in req->body and answers with the response
 * message as the reply's body (the transport frames it) or an error reply,
 * whose gRPC status tiled_reply_grpc_status() derives.
 */
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "grpc_msgs.h"
#include "handlers.h"
#include "server.h"

static const char *method_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static void reply_message(struct tiled_req *req, struct tile_grpc_buf *b)
{
    if (b->oom) {
        free(b->p);
        tiled_reply_error(&req->reply, TILED_UNAVAILABLE, "cannot allocate the response message");
        return;
    }
    req->reply.status = TILED_OK;
    tiled_copy_str(req->reply.content_type, sizeof(req->reply.content_type), "application/grpc");
    tiled_reply_set_body(&req->reply, (char *)b->p, b->len, NULL);
}

static void live(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)req;
    tile_grpc_bool_reply(b, true);
}

static void ready(struct tiled_req *req, struct tile_grpc_buf *b)
{
    tile_grpc_bool_reply(b, !atomic_load(&req->srv->draining));
}

static const struct {
    const char *name;
    void (*fn)(struct tiled_req *req, struct tile_grpc_buf *b);
} rpcs[] = {
    {"ServerLive", live},
    {"ServerReady", ready},
};

void tiled_handle_grpc(struct tiled_req *req)
{
    const char *method = method_of(req->path);
    for (size_t i = 0; i < sizeof(rpcs) / sizeof(rpcs[0]); i++) {
        if (strcmp(rpcs[i].name, method) == 0) {
            struct tile_grpc_buf b = {0};
            rpcs[i].fn(req, &b);
            if (!req->reply.status)
                reply_message(req, &b);
            return;
        }
    }
    tiled_reply_error(&req->reply, TILED_NOT_IMPLEMENTED, "unknown method %s", req->path);
}
