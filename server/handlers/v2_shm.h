/* v2_shm.h - Triton's system shared-memory extension on the v2 API: the
 * region endpoints, and infer requests whose tensors live in regions. */
#ifndef TILED_V2_SHM_H
#define TILED_V2_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "shm.h"
#include "v2.h"

struct tiled_req;

/* The decoder's view of the registry for this request (NULL when shared
 * memory is off): inputs it resolves are held in the infer's shm_in
 * (v2_state.h). */
const struct tile_v2_shm_source *tiled_v2_shm_source(struct tiled_req *req, struct tile_v2_shm_source *src);

/* After planning a request whose output names a region: checks the
 * region can hold `data_bytes`, takes it, sets up the encoder that tiles
 * into it and keeps `reply` (the answer's body, in the protocol's form;
 * the caller sets the content type) for when it is done. */
int tiled_v2_shm_output(struct tiled_req *req, uint64_t data_bytes, const void *reply, size_t reply_len,
                        struct tile_error *e);

/* Tiles the output into its region, lets every view go and sets the reply;
 * -1 with `e` when a region was truncated meanwhile. */
int tiled_v2_shm_produce(struct tiled_req *req, struct tile_error *e);

/* Lets every view go; -1 with `e` when a region was truncated while held. */
int tiled_v2_shm_release(struct tiled_req *req, struct tile_error *e);

/* ---- the region calls, whatever carries them (HTTP here, gRPC in
 * v2_grpc_shm.c); `name` is "" when the call names no region. ---- */

enum tiled_shm_call { TILED_SHM_STATUS, TILED_SHM_REGISTER, TILED_SHM_UNREGISTER };

/* The checks a call passes first: false with the error reply set (a CUDA
 * region's status, CUDA register, shared memory off, register without a
 * name). */
bool tiled_v2_shm_allowed(struct tiled_req *req, bool cuda, enum tiled_shm_call call, const char *name);
/* Status: calls fn for every region listed (none for CUDA, or with shared
 * memory off); false with a 404 for an unknown region. */
bool tiled_v2_shm_list(struct tiled_req *req, bool cuda, const char *name, tiled_shm_each_fn fn, void *ctx);
/* Register: false with the error reply set. */
bool tiled_v2_shm_register(struct tiled_req *req, const char *name, const char *key, uint64_t offset,
                           uint64_t byte_size);
/* Unregister one region, or every one when `name` is "" (an unknown name
 * is no error, as in Triton; CUDA: nothing to do). */
void tiled_v2_shm_unregister(struct tiled_req *req, bool cuda, const char *name);

#endif
