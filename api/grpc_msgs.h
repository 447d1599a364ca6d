/* grpc_msgs.h - the small messages of the gRPC inference service besides
 * ModelInfer: the {name, version} requests of ModelReady, ModelMetadata,
 * ModelConfig and ModelStatistics, and the responses of ServerLive,
 * ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelConfig (the
 * subset of Triton's model_config.proto that clients read) and
 * ModelStatistics; grpc.health.v1's Check; the shared-memory RPCs'
 * register request and status response. Fields are written in
 * field-number order, as the protobuf libraries write them, so replies
 * compare byte for byte.
 */
#ifndef TILE_GRPC_MSGS_H
#define TILE_GRPC_MSGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_infer.h" /* struct tile_grpc_str */

/* A growable output buffer; `oom` is set (and writes stop) when it
 * cannot grow. Free `p` with free(). */
struct tile_grpc_buf {
    uint8_t *p;
    size_t len, cap;
    bool oom;
};

/* Field writers for messages built in other files (grpc_reflect.c): a
 * length-delimited field, a string (none when empty, as proto3 writes
 * it), a varint (none when 0), and `child` as a sub-message (freed). */
void tile_grpc_buf_bytes(struct tile_grpc_buf *b, uint32_t field, const void *data, size_t len);
void tile_grpc_buf_str(struct tile_grpc_buf *b, uint32_t field, const char *s);
void tile_grpc_buf_varint(struct tile_grpc_buf *b, uint32_t field, uint64_t v);
void tile_grpc_buf_sub(struct tile_grpc_buf *b, uint32_t field, struct tile_grpc_buf *child);

/* A request message of which tiled reads only string fields, numbered 1
 * to n; every other field, of any wire type, is skipped, as is one of
 * these numbers with another wire type (protobuf's unknown fields). Each
 * RPC reads its request with its own layout, e.g. ModelReadyRequest
 * {name 1, version 2}, grpc.health.v1.HealthCheckRequest {service 1},
 * SystemSharedMemoryStatusRequest {name 1}, ServerLiveRequest {} (n 0:
 * only checked to be a message). */
struct tile_grpc_layout {
    const char *message;  /* the message's full name, for errors */
    const char *field[2]; /* the names of fields 1..n */
    size_t n;
};

/* Decodes `msg` with layout `l` into out[0, l->n): a field given twice is
 * the last one, an absent one "". Errors (TILE_EINVAL): not a message, a
 * string that is not UTF-8 (named as Message.field). */
int tile_grpc_strings_decode(const void *msg, size_t len, const struct tile_grpc_layout *l, struct tile_grpc_str *out,
                             struct tile_error *e);

/* ServerLiveResponse{live}, ServerReadyResponse{ready},
 * ModelReadyResponse{ready}: one bool in field 1. */
void tile_grpc_bool_reply(struct tile_grpc_buf *b, bool value);

void tile_grpc_server_metadata(struct tile_grpc_buf *b, const char *name, const char *version,
                               const char *const *extensions, size_t nextensions);

/* A tensor of a model's signature: -1 in the shape is any length. */
struct tile_grpc_tensor_meta {
    const char *name;
    enum tile_dtype dtype;
    int rank;
    int64_t shape[TILE_MAX_RANK];
};

struct tile_grpc_model_meta {
    const char *name, *platform, *backend;
    const char *const *versions;
    size_t nversions;
    const struct tile_grpc_tensor_meta *inputs, *outputs;
    size_t ninputs, noutputs;
    int64_t version; /* the config's: version_policy {specific {versions: [version]}} */
};

void tile_grpc_model_metadata(struct tile_grpc_buf *b, const struct tile_grpc_model_meta *m);
/* ModelConfigResponse{config}: name, platform, version_policy,
 * max_batch_size 0, input and output (data_type as Triton's TYPE_ enum),
 * backend: the fields of HTTP's config document (api/v2.c). */
void tile_grpc_model_config(struct tile_grpc_buf *b, const struct tile_grpc_model_meta *m);

/* One version's counters for ModelStatisticsResponse. */
struct tile_grpc_model_stats {
    const char *name, *version;
    uint64_t last_inference_ms, inference_count, execution_count;
    uint64_t success_count, success_ns, fail_count, fail_ns, queue_count, queue_ns;
    uint64_t compute_input_count, compute_input_ns, compute_infer_count, compute_infer_ns;
    uint64_t compute_output_count, compute_output_ns;
    uint64_t cache_hit_count, cache_hit_ns, cache_miss_count, cache_miss_ns;
};
void tile_grpc_model_statistics(struct tile_grpc_buf *b, const struct tile_grpc_model_stats *s, size_t n);

/* grpc.health.v1 HealthCheckResponse{status = 1}. */
enum tile_grpc_serving { TILE_GRPC_SERVING = 1, TILE_GRPC_NOT_SERVING = 2 };
void tile_grpc_health_reply(struct tile_grpc_buf *b, enum tile_grpc_serving status);

/* SystemSharedMemoryRegisterRequest{name 1, key 2, offset 3, byte_size 4}
 * (proto3: an absent field reads as "" or 0; the rules of
 * tile_grpc_strings_decode() otherwise). */
struct tile_grpc_shm_register {
    struct tile_grpc_str name, key;
    uint64_t offset, byte_size;
};
int tile_grpc_shm_register_decode(const void *msg, size_t len, struct tile_grpc_shm_register *r, struct tile_error *e);

/* One entry of SystemSharedMemoryStatusResponse's map<string, RegionStatus>
 * regions = 1 (RegionStatus{name 1, key 2, offset 3, byte_size 4}), keyed
 * by the region's name. An empty message has no regions. */
void tile_grpc_shm_status_region(struct tile_grpc_buf *b, const char *name, const char *key, uint64_t offset,
                                 uint64_t byte_size);

#endif
