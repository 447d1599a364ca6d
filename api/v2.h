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

struct tile_v2_request {
    int version;               /* 13, 6 or 1 */
    struct tile_request treq;  /* input tensor, repeats or tiles/axis, semantics */
    char id[TILE_V2_ID_MAX];   /* the request's id, unescaped */
    size_t id_len;
    bool has_id;
    bool binary_output;        /* send `output` as binary tensor data */
};

/* Decodes an infer request body. `header_len` is the value of the
 * Inference-Header-Content-Length header, or -1 when absent (the whole body
 * is JSON). Leaves `r` freeable on error. */
int tile_v2_decode(const char *body, size_t len, int64_t header_len, int version, const struct tile_limits *lim,
                   struct tile_v2_request *r, struct tile_error *e);
void tile_v2_request_free(struct tile_v2_request *r);

/* The JSON around the output data for the planned output: for a binary
 * output the whole JSON header (tail empty; `binary_size` is the data's
 * length), for JSON data the text up to `"data":[` and the closing tail.
 * Returns 0, or -1 when it does not fit `cap`. */
int tile_v2_response_frame(const struct tile_v2_request *r, const struct tile_plan *plan, uint64_t binary_size,
                           char *head, size_t cap, size_t *head_len, const char **tail, size_t *tail_len,
                           struct tile_error *e);

/* The versions of the model `tile` that are served, newest first; the
 * first is the one a path without a version addresses. */
#define TILE_V2_NVERSIONS 3
extern const int tile_v2_versions[TILE_V2_NVERSIONS];
/* Index of `version` in tile_v2_versions[], or -1 when it is not served. */
int tile_v2_version_slot(int version);

/* Model metadata / config JSON for one version (NUL-terminated, malloc'd;
 * NULL when out of memory). */
char *tile_v2_model_metadata(int version);
char *tile_v2_model_config(int version);

#endif
