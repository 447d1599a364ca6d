/* v2_grpc_shm.c - Triton's shared-memory RPCs over gRPC:
 * {System,Cuda}SharedMemory{Status,Register,Unregister}, with the rules,
 * registry and messages of the HTTP endpoints (v2_shm.h); only the
 * messages differ. A request names its region in field 1 ("": none, or
 * every region for unregister and status).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_msgs.h"
#include "server.h"
#include "v2_grpc.h"
#include "v2_shm.h"

/* The region named by a request message into name[cap]; false (and an
 * error reply) when the message does not decode or the name cannot be a
 * region's. */
static bool region_name(struct tiled_req *req, const struct tile_grpc_str *s, char *name, size_t cap)
{
    if (s->len >= cap || memchr(s->ptr, '\0', s->len)) {
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST, "shared memory region name '%.32s' is too long or holds a NUL byte (at most %zu bytes)",
                          s->ptr, cap - 1);
        return false;
    }
    memcpy(name, s->ptr, s->len);
    name[s->len] = '\0';
    return true;
}

/* Decodes a request of layout `l`, whose field 1 names a region, into
 * name[cap]. */
static bool name_request(struct tiled_req *req, const struct tile_grpc_layout *l, char *name, size_t cap)
{
    struct tile_grpc_str s;
    return tiled_grpc_decode(req, l, &s) && region_name(req, &s, name, cap);
}

/* Each RPC's request message ({Cuda,System}SharedMemoryRegisterRequest
 * has more fields, of which only the name is read here). */
static const struct tile_grpc_layout status_request[2] = {
    {"inference.SystemSharedMemoryStatusRequest", {"name"}, 1},
    {"inference.CudaSharedMemoryStatusRequest", {"name"}, 1}};
static const struct tile_grpc_layout unregister_request[2] = {
    {"inference.SystemSharedMemoryUnregisterRequest", {"name"}, 1},
    {"inference.CudaSharedMemoryUnregisterRequest", {"name"}, 1}};
static const struct tile_grpc_layout cuda_register_request = {"inference.CudaSharedMemoryRegisterRequest", {"name"}, 1};

static void status_region(void *ctx, const struct tiled_shm_info *r)
{
    tile_grpc_shm_status_region(ctx, r->name, r->key, r->offset, r->byte_size);
}

static void status(struct tiled_req *req, struct tile_grpc_buf *b, bool cuda)
{
    char name[TILED_SHM_NAME_MAX + 1];
    if (name_request(req, &status_request[cuda], name, sizeof(name)) &&
        tiled_v2_shm_allowed(req, cuda, TILED_SHM_STATUS, name))
        tiled_v2_shm_list(req, cuda, name, status_region, b);
}

static void unregister(struct tiled_req *req, bool cuda)
{
    char name[TILED_SHM_NAME_MAX + 1];
    if (name_request(req, &unregister_request[cuda], name, sizeof(name)) &&
        tiled_v2_shm_allowed(req, cuda, TILED_SHM_UNREGISTER, name))
        tiled_v2_shm_unregister(req, cuda, name); /* the response message is empty */
}

void tiled_grpc_shm_status(struct tiled_req *req, struct tile_grpc_buf *b)
{
    status(req, b, false);
}

void tiled_grpc_cuda_shm_status(struct tiled_req *req, struct tile_grpc_buf *b)
{
    status(req, b, true);
}

void tiled_grpc_shm_unregister(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)b;
    unregister(req, false);
}

void tiled_grpc_cuda_shm_unregister(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)b;
    unregister(req, true);
}

void tiled_grpc_shm_register(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)b;
    struct tile_grpc_shm_register r;
    struct tile_error e = {0};
    char name[TILED_SHM_NAME_MAX + 1], key[TILED_SHM_NAME_MAX + 2];
    if (tile_grpc_shm_register_decode(req->body, req->body_len, &r, &e) < 0) {
        tiled_reply_tile_error(&req->reply, &e);
        return;
    }
    if (!region_name(req, &r.name, name, sizeof(name)) ||
        !tiled_v2_shm_allowed(req, false, TILED_SHM_REGISTER, name))
        return;
    if (r.key.len >= sizeof(key) || memchr(r.key.ptr, '\0', r.key.len)) {
        tiled_reply_error(&req->reply, TILED_BAD_REQUEST,
                          "cannot register shared memory region '%s': the key is not a valid shared memory key", name);
        return;
    }
    memcpy(key, r.key.ptr, r.key.len);
    key[r.key.len] = '\0';
    tiled_v2_shm_register(req, name, key, r.offset, r.byte_size);
}

/* Only the name is read: CUDA registration is refused whatever it holds. */
void tiled_grpc_cuda_shm_register(struct tiled_req *req, struct tile_grpc_buf *b)
{
    (void)b;
    char name[TILED_SHM_NAME_MAX + 1];
    if (name_request(req, &cuda_register_request, name, sizeof(name)))
        tiled_v2_shm_allowed(req, true, TILED_SHM_REGISTER, name);
}
