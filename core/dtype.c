/* dtype.c - the dtype trait table (see dtype.h). */
#include "dtype.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define FIXED(sz) .size = (sz), .wire_size = (sz)

static const struct tile_dtype_traits tile_dtypes[TILE_DTYPE_COUNT] = {
    [TILE_BOOL] = {"bool", "BOOL", "BOOL", "bool_ b1 ?", FIXED(1), TILE_CLASS_BOOL, 'b', false, true, false},
    [TILE_INT8] = {"int8", "INT8", "INT8", "i1 byte", FIXED(1), TILE_CLASS_INT, 'i', false, true, true},
    [TILE_INT16] = {"int16", "INT16", "INT16", "i2 short", FIXED(2), TILE_CLASS_INT, 'i', false, true, true},
    [TILE_INT32] = {"int32", "INT32", "INT32", "i4 intc", FIXED(4), TILE_CLASS_INT, 'i', false, true, true},
    [TILE_INT64] = {"int64", "INT64", "INT64", "i8 long int_", FIXED(8), TILE_CLASS_INT, 'i', false, true, true},
    [TILE_UINT8] = {"uint8", "UINT8", "UINT8", "u1 ubyte", FIXED(1), TILE_CLASS_UINT, 'u', false, true, true},
    [TILE_UINT16] = {"uint16", "UINT16", "UINT16", "u2 ushort", FIXED(2), TILE_CLASS_UINT, 'u', false, true, true},
    [TILE_UINT32] = {"uint32", "UINT32", "UINT32", "u4 uintc", FIXED(4), TILE_CLASS_UINT, 'u', false, true, true},
    [TILE_UINT64] = {"uint64", "UINT64", "UINT64", "u8 ulong", FIXED(8), TILE_CLASS_UINT, 'u', false, true, true},
    [TILE_FLOAT16] = {"float16", "FLOAT16", "FP16", "f2 half", FIXED(2), TILE_CLASS_FLOAT, 'f', true, true, true},
    [TILE_BFLOAT16] = {"bfloat16", "BFLOAT16", "BF16", "", FIXED(2), TILE_CLASS_BFLOAT, 0, false, false, false},
    [TILE_FLOAT32] = {"float32", "FLOAT", "FP32", "f4 single", FIXED(4), TILE_CLASS_FLOAT, 'f', true, true, true},
    [TILE_FLOAT64] = {"float64", "DOUBLE", "FP64", "f8", FIXED(8), TILE_CLASS_FLOAT, 'f', true, true, false},
    [TILE_COMPLEX64] = {"complex64", "COMPLEX64", "COMPLEX64", "c8", FIXED(8), TILE_CLASS_COMPLEX, 'c', false, true, false},
    [TILE_COMPLEX128] = {"complex128", "COMPLEX128", "COMPLEX128", "c16", FIXED(16), TILE_CLASS_COMPLEX, 'c', false, true, false},
    [TILE_STRING] = {"str", "STRING", "BYTES", "string bytes", .size = sizeof(struct tile_str), .wire_size = 0,
                     TILE_CLASS_STRING, 0, false, true, false},
};

_Static_assert(TILE_DTYPE_COUNT == 16, "add the new dtype to tile_dtypes[]");
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

static int name_equals(const char *want, const char *name, size_t len)
{
    return strlen(want) == len && strncasecmp(want, name, len) == 0;
}

/* True when `name` is one of the space-separated words of `list`. */
static int in_word_list(const char *list, const char *name, size_t len)
{
    const char *p = list;
    while (*p) {
        size_t w = strcspn(p, " ");
        if (w == len && strncasecmp(p, name, len) == 0)
            return 1;
        p += w;
        p += strspn(p, " ");
    }
    return 0;
}

enum tile_dtype tile_dtype_parse(const char *name, size_t len)
{
    if (!name || len == 0)
        return TILE_DTYPE_INVALID;
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        const struct tile_dtype_traits *t = &tile_dtypes[d];
        if (name_equals(t->name, name, len) || name_equals(t->onnx, name, len) ||
            name_equals(t->kserve, name, len) || in_word_list(t->aliases, name, len))
            return (enum tile_dtype)d;
    }
    return TILE_DTYPE_INVALID;
}

enum tile_dtype tile_dtype_parse_kserve(const char *name, size_t len)
{
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        if (strlen(tile_dtypes[d].kserve) == len && memcmp(tile_dtypes[d].kserve, name, len) == 0)
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
