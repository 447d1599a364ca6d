/* v2_grpc.h - what the gRPC RPC handlers (v2_grpc*.c) share. */
#ifndef TILED_V2_GRPC_H
#define TILED_V2_GRPC_H

#include <stdbool.h>

#include "grpc_msgs.h"

struct tiled_req;

/* Makes `b` (taken over) the reply's message, or the reply a 503 when
 * building it ran out of memory. */
void tiled_grpc_reply(struct tiled_req *req, struct tile_grpc_buf *b);

/* Decodes the request message with layout `l` into out[0, l->n); false
 * (and the reply an error) when it does not decode. */
bool tiled_grpc_decode(struct tiled_req *req, const struct tile_grpc_layout *l, struct tile_grpc_str *out);

/* The model version a request naming model `name` at `version` ("": the
 * newest) addresses (v2_catalog.h's rules); 0 with the error reply set. */
int tiled_grpc_model(struct tiled_req *req, struct tile_grpc_str name, struct tile_grpc_str version);

/* ModelInfer (v2_grpc_infer.c): hands the request to the work path; the
 * reply is set when it is done (`b` is not used). */
void tiled_grpc_model_infer(struct tiled_req *req, struct tile_grpc_buf *b);

/* The shared-memory RPCs (v2_grpc_shm.c). */
void tiled_grpc_shm_status(struct tiled_req *req, struct tile_grpc_buf *b);
void tiled_grpc_shm_register(struct tiled_req *req, struct tile_grpc_buf *b);
void tiled_grpc_shm_unregister(struct tiled_req *req, struct tile_grpc_buf *b);
void tiled_grpc_cuda_shm_status(struct tiled_req *req, struct tile_grpc_buf *b);
void tiled_grpc_cuda_shm_register(struct tiled_req *req, struct tile_grpc_buf *b);
void tiled_grpc_cuda_shm_unregister(struct tiled_req *req, struct tile_grpc_buf *b);

#endif
