/* dtype.h - the one table of data-type traits that drives all of tiled.
 *
 * Every place that needs to know something about a dtype (its names in the
 * NumPy, ONNX and Open Inference Protocol families, its element width, its
 * .npy kind, which spec versions allow it) reads tile_dtype_traits().
 * There is deliberately no `switch (dtype)` elsewhere: adding a type means
 * adding one row here (the static assert in dtype.c fails otherwise).
 */
#ifndef TILE_DTYPE_H
#define TILE_DTYPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tile_dtype {
    TILE_BOOL,
    TILE_INT8,
    TILE_INT16,
    TILE_INT32,
    TILE_INT64,
    TILE_UINT8,
    TILE_UINT16,
    TILE_UINT32,
    TILE_UINT64,
    TILE_FLOAT16,
    TILE_BFLOAT16,
    TILE_FLOAT32,
    TILE_FLOAT64,
    TILE_COMPLEX64,
    TILE_COMPLEX128,
    TILE_STRING,
    TILE_DTYPE_COUNT,
    TILE_DTYPE_INVALID = -1
};

/* How an element's bytes are interpreted; codecs dispatch on this plus
 * the element width, never on the individual dtype. */
enum tile_dtype_class {
    TILE_CLASS_BOOL,
    TILE_CLASS_INT,     /* signed two's complement */
    TILE_CLASS_UINT,
    TILE_CLASS_FLOAT,   /* IEEE binary16/32/64 */
    TILE_CLASS_BFLOAT,  /* bfloat16: the top half of a binary32 */
    TILE_CLASS_COMPLEX, /* two floats of half the width: re, im */
    TILE_CLASS_STRING   /* variable-length bytes, held as struct tile_str */
};

/* A string element: a borrowed view of bytes (not NUL-terminated). */
struct tile_str {
    const char *ptr;
    uint64_t len;
};

struct tile_dtype_traits {
    const char *name;    /* canonical, NumPy style: "float32" */
    const char *onnx;    /* ONNX TensorProto name: "FLOAT" */
    const char *kserve;  /* Open Inference Protocol datatype: "FP32" */
    const char *aliases; /* more accepted names, space separated */
    size_t size;         /* bytes per element in memory (strings: a tile_str) */
    size_t wire_size;    /* bytes per element on the wire; 0 = variable */
    enum tile_dtype_class cls;
    unsigned parts;      /* scalars per element: 2 for complex (re, im), else 1 */
    char npy_kind;       /* .npy descr kind: 'b','i','u','f','c'; 0 = none */
    bool in_opset1;      /* ONNX Tile-1 accepts it (float16/32/64 only) */
    bool in_opset6;      /* ONNX Tile-6 accepts it (all but bfloat16) */
    bool in_directml;    /* DML_TILE_OPERATOR_DESC accepts it (feature level 4.1) */
};

/* Traits of a valid dtype; NULL for anything else. */
const struct tile_dtype_traits *tile_dtype_traits(enum tile_dtype dtype);

/* Canonical name, or "invalid". */
const char *tile_dtype_name(enum tile_dtype dtype);

/* Parses a name from any family, case-insensitively; `len` bytes of `name`
 * (no NUL needed). Returns TILE_DTYPE_INVALID when unknown. */
enum tile_dtype tile_dtype_parse(const char *name, size_t len);

/* Parses an Open Inference Protocol datatype ("FP32", "BYTES", ...; also
 * "COMPLEX64"/"COMPLEX128"), case-sensitively as that protocol requires. */
enum tile_dtype tile_dtype_parse_kserve(const char *name, size_t len);

/* Element size in memory (0 for an invalid dtype). */
size_t tile_dtype_size(enum tile_dtype dtype);

static inline bool tile_dtype_is_string(enum tile_dtype dtype)
{
    return dtype == TILE_STRING;
}

/* Writes every accepted name of every dtype, comma separated, into buf (for
 * error messages and --help). Returns buf. */
const char *tile_dtype_list(char *buf, size_t cap);

#endif
