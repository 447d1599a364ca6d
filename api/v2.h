/* v2.h - the Open Inference Protocol (KServe v2) infer request and response
 * for the `tile` model, with Triton's binary tensor data extension.
 *
 * Model versions are the ONNX opsets: 13 (default) and 6 take inputs
 * `input` (any datatype) and `repeats` (any integer datatype, shape [rank]);
 * 6 refuses BF16 as opset 6 did; 1 takes `input` (FP16/FP32/FP64), `tiles`
 * and `axis`. The output is `output`. COMPLEX64/COMPLEX128 are an
 * extension: in JSON, two interleaved numbers (re, im) per element.
 */
#ifndef TILE_V2_H
#define TILE_V2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "request.h"

#define TILE_V2_ID_MAX 256
#define TILE_V2_REGION_MAX 256

/* A tensor in a shared-memory region (Triton's system_shared_memory
 * extension): the per-tensor parameters shared_memory_region,
 * shared_memory_offset and shared_memory_byte_size. */
struct tile_v2_shm_ref {
    bool used;
    char region[TILE_V2_REGION_MAX];
    uint64_t offset, byte_size;
    bool has_byte_size;
};

/* Where the decoder gets the bytes of an input held in shared memory: the
 * server's region registry. `resolve` returns `ref->byte_size` readable
 * bytes that stay valid until the request ends, or -1 with `e`. With
 * `borrow`, fixed-width inputs of a request whose output also goes to
 * shared memory are read in place (the tensor borrows the bytes: nothing
 * reads them after the request's own work); otherwise they are copied. */
struct tile_v2_shm_source {
    int (*resolve)(void *ctx, const char *tensor, const struct tile_v2_shm_ref *ref, const void **data,
                   struct tile_error *e);
    void *ctx;
    bool borrow;
};

struct tile_v2_request {
    int version;               /* 13, 6 or 1 */
    struct tile_request treq;  /* input tensor, repeats or tiles/axis, semantics */
    char id[TILE_V2_ID_MAX];   /* the request's id, unescaped */
    size_t id_len;
    bool has_id;
    bool binary_output;        /* send `output` as binary tensor data */
    struct tile_v2_shm_ref out_shm; /* `output` requested into shared memory */
};

/* Decodes an infer request body. `header_len` is the value of the
 * Inference-Header-Content-Length header, or -1 when absent (the whole body
 * is JSON). Leaves `r` freeable on error. */
int tile_v2_decode(const char *body, size_t len, int64_t header_len, int version, const struct tile_limits *lim,
                   struct tile_v2_request *r, struct tile_error *e);
/* The same, with inputs that may name shared-memory regions (`shm` NULL:
 * such inputs are refused, as the extension is off). Whether the output
 * asks for shared memory is in r->out_shm either way. */
int tile_v2_decode_shm(const char *body, size_t len, int64_t header_len, int version, const struct tile_limits *lim,
                       const struct tile_v2_shm_source *shm, struct tile_v2_request *r, struct tile_error *e);
void tile_v2_request_free(struct tile_v2_request *r);

/* The JSON around the output data for the planned output: for a binary
 * output the whole JSON header (tail empty; `binary_size` is the data's
 * length), for JSON data the text up to `"data":[` and the closing tail.
 * Returns 0, or -1 when it does not fit `cap`. */
int tile_v2_response_frame(const struct tile_v2_request *r, const struct tile_plan *plan, uint64_t binary_size,
                           char *head, size_t cap, size_t *head_len, const char **tail, size_t *tail_len,
                           struct tile_error *e);

/* The whole response for an output written into shared memory: the
 * output's name, datatype and shape, and no data (as Triton answers).
 * Returns 0, or -1 when it does not fit `cap`. */
int tile_v2_response_shm(const struct tile_v2_request *r, const struct tile_plan *plan, char *head, size_t cap,
                         size_t *len, struct tile_error *e);

/* The versions of the model `tile` that are served, newest first; the
 * first is the one a path without a version addresses. */
#define TILE_V2_NVERSIONS 3
extern const int tile_v2_versions[TILE_V2_NVERSIONS];
/* Index of `version` in tile_v2_versions[], or -1 when it is not served. */
int tile_v2_version_slot(int version);
/* A model version as a request writes it, read the same way for every
 * transport (HTTP's /versions/ path segment, gRPC's model_version): ""
 * is the newest (*version 0); otherwise decimal digits, '+' allowed
 * before them (as Triton's std::stol reads it), nothing else. *version is
 * the version, or -1 for a number the model does not have (0, or too large
 * for one). Returns -1 when `s` is not a version number. */
int tile_v2_version_parse(const char *s, size_t len, int *version);

/* A tensor of the model's signature: its one dimension is `dim` (-1: any
 * length). */
struct tile_v2_tensor_sig {
    const char *name;
    size_t name_len; /* strlen(name): matched against every request's inputs */
    enum tile_dtype dtype;
    int64_t dim;
};
/* The inputs `version` takes (*n gets their count), and the output. */
const struct tile_v2_tensor_sig *tile_v2_model_inputs(int version, size_t *n);
extern const struct tile_v2_tensor_sig tile_v2_model_output;
/* What Triton reports for an ONNX model, in metadata and config alike:
 * clients written against Triton recognise it. */
#define TILE_V2_PLATFORM "onnxruntime_onnx"

/* ---- the model behind every codec (v2_model.c) ---- */

/* A decoded input of an infer request, whatever carried it. */
struct tile_v2_named_tensor {
    const char *name;
    size_t name_len;
    struct tile_tensor *t; /* 'input' is moved out of it into the request */
};
/* Maps decoded inputs onto r->treq for version r->version (r->treq.semantics
 * already holds the request's `semantics`; has_semantics says whether it
 * was given): the version's input names, each once; 'input', and
 * 'repeats' or, for version 1, 'tiles' and 'axis'. */
int tile_v2_map_inputs(struct tile_v2_request *r, struct tile_v2_named_tensor *in, int n, bool has_semantics,
                       const struct tile_limits *lim, struct tile_error *e);
/* A requested output's name: the model has one, 'output'. */
int tile_v2_output_name(const char *name, size_t len, struct tile_error *e);

/* An input's description before its data is read. */
struct tile_v2_tensor_desc {
    const char *name;
    size_t name_len;
    enum tile_dtype dtype;
    int rank;
    const int64_t *shape;
    const struct tile_v2_shm_ref *shm; /* where its bytes are, for tile_v2_shm_input */
};
/* Raw tensor bytes (the binary extension's layout) into `t`. */
int tile_v2_raw_tensor(const void *bytes, uint64_t len, enum tile_dtype dtype, int rank, const int64_t *shape,
                       const struct tile_limits *lim, struct tile_tensor *t, struct tile_error *e);
/* The tensor of an input in shared memory, through `shm`'s resolver (NULL:
 * shared memory is off, an error naming the flag). Fixed-width inputs are
 * borrowed in place when the resolver allows it and the output goes to
 * shared memory too (`out_in_shm`); others are copied. */
int tile_v2_shm_input(const struct tile_v2_shm_source *shm, const struct tile_v2_tensor_desc *d, bool out_in_shm,
                      const struct tile_limits *lim, struct tile_tensor *out, struct tile_error *e);
/* A tensor's shared_memory_region parameter (`len` bytes). */
int tile_v2_shm_region_set(struct tile_v2_shm_ref *ref, const char *name, size_t len, struct tile_error *e);
/* Its shared_memory_offset or shared_memory_byte_size (`what`): >= 0. */
int tile_v2_shm_uint(const char *what, int64_t n, uint64_t *out, struct tile_error *e);
/* The parameters of a tensor's shared-memory reference agree: offset and
 * byte size only with a region, and a region with its byte size. `what`
 * names the tensor ("input 'x'"). */
int tile_v2_shm_ref_check(const struct tile_v2_shm_ref *ref, bool has_offset, const char *what, struct tile_error *e);

/* Model metadata / config JSON for one version, HTTP's documents (v2.c,
 * not v2_model.c; NUL-terminated, malloc'd; NULL when out of memory). */
char *tile_v2_model_metadata(int version);
char *tile_v2_model_config(int version);

#endif
