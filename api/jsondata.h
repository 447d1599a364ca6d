/* jsondata.h - a tensor's "data" value read from JSON.
 *
 * Shared by the /v1 JSON decoder and the Open Inference Protocol decoder.
 * The data may be flat ([1,2,3,4]) or nested like the shape
 * ([[1,2],[3,4]]), row-major; a scalar is a rank-0 tensor. With a known
 * shape the element count must match ("data has 5 elements but shape [2,3]
 * needs 6") and nested data must nest like the shape. Without one the shape
 * is inferred from the nesting as numpy.array does, and ragged data is
 * refused ("ragged nested data at data[1]: 2 elements where 3 were
 * expected").
 *
 * Complex elements come in one of two forms:
 *   TILE_JSON_COMPLEX_PAIRS        each element is [re, im] (/v1): an array
 *                                  holding numbers is an element, not an axis
 *   TILE_JSON_COMPLEX_INTERLEAVED  re and im are consecutive numbers (Open
 *                                  Inference Protocol): 2 numbers per element
 * String elements become views into an owned blob of unescaped UTF-8.
 */
#ifndef TILE_JSONDATA_H
#define TILE_JSONDATA_H

#include <stdint.h>

#include "jsonlex.h"
#include "tile.h"

enum tile_json_complex { TILE_JSON_COMPLEX_PAIRS, TILE_JSON_COMPLEX_INTERLEAVED };

struct tile_json_data_opts {
    enum tile_dtype dtype;
    int rank;              /* -1: infer the shape from the nesting */
    const int64_t *shape;  /* `rank` dimensions when rank >= 0 */
    enum tile_json_complex complex_form;
    int max_rank;          /* deepest nesting accepted; 0 = TILE_MAX_RANK */
    uint64_t max_bytes;    /* bound on the element bytes and on the string
                              bytes (each); 0 = none */
    const char *name;      /* names the value in messages; NULL = "data" */
};

/* Reads the next value from `lx` (the lexer is left just after it) into a
 * new tensor `out`, which the caller frees with tile_tensor_free(). On error
 * `out` is left empty and `e` says why (TILE_EINVAL, or TILE_ETOOBIG when
 * max_bytes is exceeded). No per-element allocation: buffers grow
 * geometrically, or are exact when the shape is known. */
int tile_json_read_data(struct tile_json_lexer *lx, const struct tile_json_data_opts *o, struct tile_tensor *out,
                        struct tile_error *e);

/* Gives a tensor read without a shape (rank -1) the shape the request
 * declared, with the same checks as a known shape: equal element counts,
 * and nesting equal to the shape unless the data was flat (rank <= 1).
 * `name` as in the options. */
int tile_json_data_apply_shape(struct tile_tensor *t, int rank, const int64_t *shape, const char *name,
                               struct tile_error *e);

#endif
