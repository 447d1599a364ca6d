/* request.h - a decoded tile request, whatever format it arrived in.
 *
 * The three /v1 decoders (JSON body, raw body + query, .npy body + query)
 * produce a struct tile_request, and the Open Inference Protocol decoders
 * (v2.h, grpc_infer.h) map their inputs onto one; the server then plans
 * and runs it without knowing where it came from.
 * Ownership: the request owns `input` (and its string bytes); free it with
 * tile_request_free(). Decoders leave the request freeable on error.
 */
#ifndef TILE_REQUEST_H
#define TILE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "npy.h" /* enum tile_npy_strkind */
#include "tile.h"

/* Size limits a decoder enforces (0 = none). */
struct tile_limits {
    uint64_t max_body;        /* bytes of a request body (after inflation) */
    uint64_t max_output;      /* bytes of an output, however it is sent */
    uint64_t max_stream;      /* bytes of a streamed output */
    int max_rank;             /* input and output rank */
    int max_depth;            /* JSON nesting depth */
};

/* tile_request_init and tile_request_move name each field: a new one is
 * added to both. */
struct tile_request {
    struct tile_tensor input;      /* owned */
    enum tile_semantics semantics; /* default onnx */
    bool has_semantics;            /* given explicitly (duplicates are refused) */
    int64_t repeats[TILE_MAX_RANK];
    int nrepeats;
    bool has_repeats;
    int64_t tiles, axis;           /* onnx1 */
    bool has_tiles, has_axis;
    enum tile_npy_strkind npy_strkind; /* for string inputs read from .npy */
    uint64_t npy_strwidth;         /* its element width in chars/bytes (0 = unknown) */
};

/* Zeroes a request (semantics onnx, no input). */
void tile_request_init(struct tile_request *r);
void tile_request_free(struct tile_request *r);
/* Moves *src into *dst: src keeps its other fields but no longer holds the
 * input's buffers (freeing it frees nothing of them). Cheaper than a copy
 * and a re-initialisation, on the path of every request. */
void tile_request_move(struct tile_request *dst, struct tile_request *src);

/* Builds the spec for tile_plan_init(): checks that the fields the
 * semantics needs are present (repeats, or tiles and axis for onnx1) and
 * absent where they make no sense. The spec borrows r->repeats. */
int tile_request_spec(const struct tile_request *r, const struct tile_limits *lim, struct tile_spec *spec,
                      struct tile_error *e);

/* Applies one query parameter (`repeats`, `semantics`, `tiles`, `axis`,
 * and with `allow_tensor` also `dtype` and `shape`). Values are as in a URL
 * after percent-decoding: comma-separated integers for lists. Unknown keys
 * are an error naming the key. `qt` receives dtype and shape. */
struct tile_query_tensor {
    bool has_dtype, has_shape;
    enum tile_dtype dtype;
    int rank;
    int64_t shape[TILE_MAX_RANK];
};
int tile_request_query_param(struct tile_request *r, struct tile_query_tensor *qt, bool allow_tensor,
                             const char *key, const char *value, const struct tile_limits *lim,
                             struct tile_error *e);

/* Brings the query's fields into a request decoded from a JSON body, where
 * the body is the primary source: a field only the query gives is taken, a
 * field both give must agree (an error naming it otherwise), so a client that
 * puts `semantics` in the URL of a JSON request is neither ignored nor
 * refused. `dtype` and `shape` in the query must describe the body's tensor.
 * `q` is the request the query was read into; its input is not used. */
int tile_request_merge_query(struct tile_request *r, const struct tile_request *q, const struct tile_query_tensor *qt,
                             struct tile_error *e);

/* Parses "2,3,4" (empty string = zero values) into at most `max` int64s.
 * Rejects signs on nothing, non-digits, overflow, empty items. */
int tile_parse_int_list(const char *s, int64_t *out, int max, int *count, const char *what, struct tile_error *e);

/* Parses one decimal int64 (whole string). */
int tile_parse_int64(const char *s, size_t len, int64_t *out, const char *what, struct tile_error *e);

/* Decoders. `body` is borrowed; on success `r->input` owns a copy of the
 * elements in host byte order. */
int tile_v1_json_decode(const char *body, size_t len, const struct tile_limits *lim, struct tile_request *r,
                        struct tile_error *e);
/* Raw element bytes; dtype and shape come from `qt` (both required). Strings
 * use the 4-byte little-endian length prefix layout. /v1 raw bodies, v2
 * binary data and gRPC raw contents all go through it (tile_v2_raw_tensor). */
int tile_raw_decode(const void *body, size_t len, const struct tile_query_tensor *qt, const struct tile_limits *lim,
                    struct tile_request *r, struct tile_error *e);
int tile_v1_npy_decode(const void *body, size_t len, const struct tile_limits *lim, struct tile_request *r,
                       struct tile_error *e);

/* Decodes BYTES wire layout (u32 LE length + bytes, `n` elements, exactly
 * filling `len`) into t (dtype string, shape preset) as views into an owned
 * blob. `t` comes from tile_tensor_init(TILE_STRING, ...): its t->nelem
 * views are filled and t->blob (which must be NULL) receives the bytes; on
 * error the views are zeroed and no blob is kept. Shared by raw /v1 bodies
 * and v2 binary inputs. */
int tile_strings_from_wire(const void *buf, size_t len, struct tile_tensor *t, struct tile_error *e);

#endif
