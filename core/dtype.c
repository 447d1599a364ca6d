/* dtype.c - the dtype trait table (see dtype.h). */
#include "dtype.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FIXED(sz) .size = (sz), .wire_size = (sz)
/* One number per element, or a complex pair of them (re, im). */
#define NUMBER(sz, c, kind) FIXED(sz), .cls = (c), .npy_kind = (kind), .parts = 1
#define COMPLEX(sz) FIXED(sz), .cls = TILE_CLASS_COMPLEX, .npy_kind = 'c', .parts = 2
#define OPSETS(v1, v6, dml) .in_opset1 = (v1), .in_opset6 = (v6), .in_directml = (dml)

static const struct tile_dtype_traits tile_dtypes[TILE_DTYPE_COUNT] = {
    [TILE_BOOL] = {.name = "bool", .onnx = "BOOL", .kserve = "BOOL", .aliases = "bool_ b1 ?",
                   NUMBER(1, TILE_CLASS_BOOL, 'b'), OPSETS(false, true, false)},
    [TILE_INT8] = {.name = "int8", .onnx = "INT8", .kserve = "INT8", .aliases = "i1 byte",
                   NUMBER(1, TILE_CLASS_INT, 'i'), OPSETS(false, true, true)},
    [TILE_INT16] = {.name = "int16", .onnx = "INT16", .kserve = "INT16", .aliases = "i2 short",
                    NUMBER(2, TILE_CLASS_INT, 'i'), OPSETS(false, true, true)},
    [TILE_INT32] = {.name = "int32", .onnx = "INT32", .kserve = "INT32", .aliases = "i4 intc",
                    NUMBER(4, TILE_CLASS_INT, 'i'), OPSETS(false, true, true)},
    [TILE_INT64] = {.name = "int64", .onnx = "INT64", .kserve = "INT64", .aliases = "i8 long int_",
                    NUMBER(8, TILE_CLASS_INT, 'i'), OPSETS(false, true, true)},
    [TILE_UINT8] = {.name = "uint8", .onnx = "UINT8", .kserve = "UINT8", .aliases = "u1 ubyte",
                    NUMBER(1, TILE_CLASS_UINT, 'u'), OPSETS(false, true, true)},
    [TILE_UINT16] = {.name = "uint16", .onnx = "UINT16", .kserve = "UINT16", .aliases = "u2 ushort",
                     NUMBER(2, TILE_CLASS_UINT, 'u'), OPSETS(false, true, true)},
    [TILE_UINT32] = {.name = "uint32", .onnx = "UINT32", .kserve = "UINT32", .aliases = "u4 uintc",
                     NUMBER(4, TILE_CLASS_UINT, 'u'), OPSETS(false, true, true)},
    [TILE_UINT64] = {.name = "uint64", .onnx = "UINT64", .kserve = "UINT64", .aliases = "u8 ulong",
                     NUMBER(8, TILE_CLASS_UINT, 'u'), OPSETS(false, true, true)},
    [TILE_FLOAT16] = {.name = "float16", .onnx = "FLOAT16", .kserve = "FP16", .aliases = "f2 half",
                      NUMBER(2, TILE_CLASS_FLOAT, 'f'), OPSETS(true, true, true)},
    [TILE_BFLOAT16] = {.name = "bfloat16", .onnx = "BFLOAT16", .kserve = "BF16", .aliases = "",
                       NUMBER(2, TILE_CLASS_BFLOAT, 0), OPSETS(false, false, false)},
    [TILE_FLOAT32] = {.name = "float32", .onnx = "FLOAT", .kserve = "FP32", .aliases = "f4 single",
                      NUMBER(4, TILE_CLASS_FLOAT, 'f'), OPSETS(true, true, true)},
    [TILE_FLOAT64] = {.name = "float64", .onnx = "DOUBLE", .kserve = "FP64", .aliases = "f8",
                      NUMBER(8, TILE_CLASS_FLOAT, 'f'), OPSETS(true, true, false)},
    [TILE_COMPLEX64] = {.name = "complex64", .onnx = "COMPLEX64", .kserve = "COMPLEX64", .aliases = "c8",
                        COMPLEX(8), OPSETS(false, true, false)},
    [TILE_COMPLEX128] = {.name = "complex128", .onnx = "COMPLEX128", .kserve = "COMPLEX128", .aliases = "c16",
                         COMPLEX(16), OPSETS(false, true, false)},
    [TILE_STRING] = {.name = "str", .onnx = "STRING", .kserve = "BYTES", .aliases = "string bytes",
                     .size = sizeof(struct tile_str), .wire_size = 0, .cls = TILE_CLASS_STRING, .npy_kind = 0,
                     .parts = 1, OPSETS(false, true, false)},
};

_Static_assert(TILE_DTYPE_COUNT == 16, "add the new dtype to tile_dtypes[] (and its KServe name to kserve_rows)");
_Static_assert(sizeof(tile_dtypes) / sizeof(tile_dtypes[0]) == TILE_DTYPE_COUNT, "one row per dtype");
_Static_assert(sizeof(struct tile_str) == 16, "string views share the 16-byte kernel path");

const struct tile_dtype_traits *tile_dtype_traits(enum tile_dtype dtype)
{
    if ((unsigned)dtype >= TILE_DTYPE_COUNT)
        return NULL;
    return &tile_dtypes[dtype];
}

const char *tile_dtype_name(enum tile_dtype dtype)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(dtype);
    return t ? t->name : "invalid";
}

size_t tile_dtype_size(enum tile_dtype dtype)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(dtype);
    return t ? t->size : 0;
}

/* ASCII case folding, as strncasecmp does in the C locale. */
static inline unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* True when `want` (NUL-terminated) equals name[0..len) ignoring ASCII case.
 * Compared byte by byte so that most rows are refused at their first byte
 * (this runs for every JSON request: no strlen of all 48 table names). */
static int name_equals(const char *want, const char *name, size_t len)
{
    size_t i = 0;
    for (; i < len; i++)
        if (want[i] == '\0' || fold((unsigned char)want[i]) != fold((unsigned char)name[i]))
            return 0;
    return want[i] == '\0';
}

/* True when `name` is one of the space-separated words of `list`. */
static int in_word_list(const char *list, const char *name, size_t len)
{
    const char *p = list;
    while (*p) {
        size_t i = 0;
        while (i < len && p[i] != '\0' && p[i] != ' ' && fold((unsigned char)p[i]) == fold((unsigned char)name[i]))
            i++;
        if (i == len && (p[i] == '\0' || p[i] == ' '))
            return 1;
        while (*p && *p != ' ')
            p++;
        while (*p == ' ')
            p++;
    }
    return 0;
}

enum tile_dtype tile_dtype_parse(const char *name, size_t len)
{
    if (!name || len == 0)
        return TILE_DTYPE_INVALID;
    /* The canonical names first: what clients send nearly always, and no
     * name is another row's ONNX, KServe or alias spelling (each name
     * parses to its own row: tests/core/test_dtype.c), so the answer is the
     * one the full search below would give. */
    unsigned char first = fold((unsigned char)name[0]);
    for (int d = 0; d < TILE_DTYPE_COUNT; d++)
        if (fold((unsigned char)tile_dtypes[d].name[0]) == first && name_equals(tile_dtypes[d].name, name, len))
            return (enum tile_dtype)d;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = &tile_dtypes[d];
        if (name_equals(t->name, name, len) || name_equals(t->onnx, name, len) ||
            name_equals(t->kserve, name, len) || in_word_list(t->aliases, name, len))
            return (enum tile_dtype)d;
    }
    return TILE_DTYPE_INVALID;
}

/* The rows whose KServe name begins with `c`, as a bit set: at most six
 * share a first byte, so two names are compared rather than sixteen rows
 * walked (two names in every v2 request). A name this does not list would
 * fail tests/core/test_dtype.c's kserve_names_exact. */
static uint32_t kserve_rows(char c)
{
#define R(d) (UINT32_C(1) << (d))
    switch (c) {
    case 'B':
        return R(TILE_BOOL) | R(TILE_BFLOAT16) | R(TILE_STRING);
    case 'C':
        return R(TILE_COMPLEX64) | R(TILE_COMPLEX128);
    case 'F':
        return R(TILE_FLOAT16) | R(TILE_FLOAT32) | R(TILE_FLOAT64);
    case 'I':
        return R(TILE_INT8) | R(TILE_INT16) | R(TILE_INT32) | R(TILE_INT64);
    case 'U':
        return R(TILE_UINT8) | R(TILE_UINT16) | R(TILE_UINT32) | R(TILE_UINT64);
    default:
        return 0;
    }
#undef R
}

enum tile_dtype tile_dtype_parse_kserve(const char *name, size_t len)
{
    if (len == 0)
        return TILE_DTYPE_INVALID;
    for (uint32_t rows = kserve_rows(name[0]); rows; rows &= rows - 1) {
        int d = __builtin_ctz(rows);
        const char *k = tile_dtypes[d].kserve;
        size_t i = 1;
        while (i < len && k[i] != '\0' && k[i] == name[i])
            i++;
        if (i == len && k[i] == '\0')
            return (enum tile_dtype)d;
    }
    return TILE_DTYPE_INVALID;
}

const char *tile_dtype_list(char *buf, size_t cap)
{
    size_t used = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    for (int d = 0; d < TILE_DTYPE_COUNT && used < cap; d++) {
        int n = snprintf(buf + used, cap - used, "%s%s", d ? ", " : "", tile_dtypes[d].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}
