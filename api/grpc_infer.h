/* grpc_infer.h - the Open Inference Protocol's gRPC ModelInfer messages
 * (package `inference`, Triton's grpc_service.proto, wire-compatible with
 * KServe's): decoding a ModelInferRequest into decoded input tensors, and
 * writing the head of a ModelInferResponse whose raw output bytes follow.
 *
 * Tensor data rules follow Triton's server: an input carries its data
 * either in `contents` (the typed field for its datatype) or in the next
 * entry of `raw_input_contents`, and when raw contents are used no input
 * may use `contents`. FP16, BF16 and the complex types have no typed field
 * and travel raw only. Raw layout is that of the binary HTTP extension
 * (little-endian elements; BYTES as 4-byte little-endian length + bytes),
 * so each input is decoded by the same raw decoder as HTTP binary data.
 *
 * Strings in the request (names, id, parameters) are views into the
 * message, which must outlive the request; tensors are owned.
 */
#ifndef TILE_GRPC_INFER_H
#define TILE_GRPC_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "request.h"
#include "tile.h"
#include "v2.h" /* shared-memory references */

#define TILE_GRPC_MAX_INPUTS 4
#define TILE_GRPC_MAX_OUTPUTS 4

/* A borrowed view of bytes in the message (not NUL-terminated). */
struct tile_grpc_str {
    const char *ptr;
    size_t len;
};

struct tile_grpc_input {
    struct tile_grpc_str name;
    bool typed;             /* data came from `contents`, not raw */
    bool in_shm;            /* data came from a shared-memory region */
    struct tile_tensor t;   /* owned: dtype, shape and elements */
};

struct tile_grpc_infer_request {
    struct tile_grpc_str model_name, model_version, id;
    struct tile_grpc_str semantics; /* the `semantics` string parameter */
    bool has_semantics;
    int ninputs, noutputs;
    struct tile_grpc_input inputs[TILE_GRPC_MAX_INPUTS];
    struct tile_grpc_str outputs[TILE_GRPC_MAX_OUTPUTS]; /* requested output names */
    struct tile_v2_shm_ref output_shm[TILE_GRPC_MAX_OUTPUTS]; /* and where they go, when in shared memory */
};

/* Decodes one ModelInferRequest message. Errors are TILE_EINVAL with
 * Triton's messages where Triton has one (the model named as
 * `model_name` says); `lim` bounds rank and decoded sizes. Leaves `r`
 * freeable on error. */
int tile_grpc_infer_decode(const void *msg, size_t len, const struct tile_limits *lim,
                           struct tile_grpc_infer_request *r, struct tile_error *e);
/* The same, with inputs that may name shared-memory regions through
 * Triton's tensor parameters shared_memory_region, shared_memory_offset
 * and shared_memory_byte_size, read through `shm` (NULL: such inputs are
 * refused, as the extension is off). Requested outputs' references are
 * in r->output_shm either way. */
int tile_grpc_infer_decode_shm(const void *msg, size_t len, const struct tile_limits *lim,
                               const struct tile_v2_shm_source *shm, struct tile_grpc_infer_request *r,
                               struct tile_error *e);
void tile_grpc_infer_request_free(struct tile_grpc_infer_request *r);

/* The reply: one output, always as raw_output_contents (what Triton sends
 * and what tritonclient decodes). */
struct tile_grpc_infer_reply {
    struct tile_grpc_str model_name, model_version, id;
    struct tile_grpc_str output_name;
    enum tile_dtype dtype;
    int rank;
    const int64_t *shape;
    uint64_t raw_len; /* bytes of raw output data that follow the head */
};

/* Size of the ModelInferResponse bytes before the raw output data; the
 * whole message is this plus raw_len. */
size_t tile_grpc_infer_reply_head_size(const struct tile_grpc_infer_reply *r);
/* Writes the head (tile_grpc_infer_reply_head_size() bytes) into `buf`;
 * the raw_output_contents field is last, so the output's bytes can be
 * sent straight after it without being copied into the message. */
void tile_grpc_infer_reply_head(const struct tile_grpc_infer_reply *r, uint8_t *buf);

#endif
