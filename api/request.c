/* request.c - building and checking a tile_request (see request.h).
 *
 * DESIGN. Every input format ends in the same struct, so the rules that do
 * not depend on the format live here once: which fields each semantics
 * needs (tile_request_spec), how query and option values are parsed (one
 * strict integer parser whose messages name the parameter, the item and the
 * bad text), and the raw and .npy body decoders. A body's length is checked
 * against the dtype and shape it claims before anything is allocated, so a
 * small body cannot make the server reserve a huge tensor.
 */
#include "request.h"

#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "numfmt.h" /* tile_format_shape */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "tiled assumes a little-endian host: raw bodies are copied as is"
#endif

/* Bad text is quoted in messages up to this many bytes. */
#define QUOTE_MAX 40
#define QUOTE(len) (int)((len) > QUOTE_MAX ? QUOTE_MAX : (len))

/* Both name every field but the arrays, which hold what their counts say
 * (input.rank dims, nrepeats repeats): a request is 1 KiB of which a
 * small one uses a few dozen bytes. */
void tile_request_init(struct tile_request *r)
{
    tile_tensor_reset(&r->input);
    r->semantics = TILE_SEM_ONNX;
    r->has_semantics = false;
    r->nrepeats = 0;
    r->has_repeats = false;
    r->tiles = r->axis = 0;
    r->has_tiles = r->has_axis = false;
    r->npy_strkind = TILE_NPY_STR_UNICODE;
    r->npy_strwidth = 0;
}

void tile_request_move(struct tile_request *dst, struct tile_request *src)
{
    tile_tensor_assign(&dst->input, &src->input);
    dst->semantics = src->semantics;
    dst->has_semantics = src->has_semantics;
    memcpy(dst->repeats, src->repeats, sizeof(src->repeats[0]) * (size_t)src->nrepeats);
    dst->nrepeats = src->nrepeats;
    dst->has_repeats = src->has_repeats;
    dst->tiles = src->tiles;
    dst->axis = src->axis;
    dst->has_tiles = src->has_tiles;
    dst->has_axis = src->has_axis;
    dst->npy_strkind = src->npy_strkind;
    dst->npy_strwidth = src->npy_strwidth;
    src->input.data = NULL;
    src->input.owns_data = false;
    src->input.blob = NULL;
    src->input.blob_len = 0;
}

void tile_request_free(struct tile_request *r)
{
    if (!r)
        return;
    tile_tensor_free(&r->input);
    tile_request_init(r);
}

/* ---- the spec ------------------------------------------------------------ */

/* What each semantics takes, for messages. */
static const char *const tile_sem_takes[TILE_SEM_COUNT] = {
    [TILE_SEM_ONNX] = "one repeat per axis",
    [TILE_SEM_ONNX1] = "tiles and axis",
    [TILE_SEM_NUMPY] = "a list of repeats",
    [TILE_SEM_OPENVINO] = "a list of repeats",
    [TILE_SEM_DIRECTML] = "one repeat per axis",
};

int tile_request_spec(const struct tile_request *r, const struct tile_limits *lim, struct tile_spec *spec,
                      struct tile_error *e)
{
    memset(spec, 0, sizeof(*spec));
    if ((unsigned)r->semantics >= TILE_SEM_COUNT)
        return tile_error_set(e, TILE_EINVAL, "invalid semantics");
    const char *sem = tile_semantics_name(r->semantics), *takes = tile_sem_takes[r->semantics];
    bool onnx1 = r->semantics == TILE_SEM_ONNX1;
    const char *missing = onnx1 ? (!r->has_tiles ? "tiles" : !r->has_axis ? "axis" : NULL)
                                : (!r->has_repeats ? "repeats" : NULL);
    if (missing)
        return tile_error_set(e, TILE_EINVAL, "missing '%s' (semantics %s needs %s)", missing, sem, takes);
    const char *extra = onnx1 ? (r->has_repeats ? "repeats" : NULL)
                              : (r->has_tiles ? "tiles" : r->has_axis ? "axis" : NULL);
    if (extra)
        return tile_error_set(e, TILE_EINVAL, "'%s' is not used by semantics %s (it takes %s)", extra, sem, takes);
    spec->semantics = r->semantics;
    spec->repeats = r->repeats;
    spec->nrepeats = onnx1 ? 0 : r->nrepeats;
    spec->tiles = r->tiles;
    spec->axis = r->axis;
    spec->max_output_bytes = lim ? lim->max_output : 0;
    spec->max_rank = lim ? lim->max_rank : 0;
    return 0;
}

/* ---- integers ---------------------------------------------------------- */

int tile_parse_int64(const char *s, size_t len, int64_t *out, const char *what, struct tile_error *e)
{
    const char *name = what ? what : "value";
    size_t i = s && len && s[0] == '-';
    bool neg = i == 1;
    uint64_t mag = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (!s || i == len)
        return tile_error_set(e, TILE_EINVAL, "%s: '%.*s' is not an integer", name, QUOTE(len), s ? s : "");
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return tile_error_set(e, TILE_EINVAL, "%s: '%.*s' is not a decimal integer", name, QUOTE(len), s);
        if (__builtin_mul_overflow(mag, 10, &mag) || __builtin_add_overflow(mag, (uint64_t)(s[i] - '0'), &mag) ||
            mag > limit)
            return tile_error_set(e, TILE_EINVAL, "%s: '%.*s' is outside the 64-bit integer range", name, QUOTE(len), s);
    }
    *out = !neg ? (int64_t)mag : mag > (uint64_t)INT64_MAX ? INT64_MIN : -(int64_t)mag;
    return 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

int tile_parse_int_list(const char *s, int64_t *out, int max, int *count, const char *what, struct tile_error *e)
{
    const char *name = what ? what : "list";
    *count = 0;
    if (!s[0])
        return 0;
    for (int i = 0;; i++) {
        size_t n = strcspn(s, ",");
        const char *a = s, *b = s + n;
        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        if (a == b)
            return tile_error_set(e, TILE_EINVAL, "%s: item %d is empty (expected comma-separated integers, e.g. 2,3)",
                                  name, i);
        if (i >= max)
            return tile_error_set(e, TILE_EINVAL, "%s has more than %d items", name, max);
        if (tile_parse_int64(a, (size_t)(b - a), &out[i], name, NULL) < 0) { /* NULL: no message made */
            /* The item is named only once it is wrong: formatting its name
             * cost more than parsing it. The second parse says why. */
            char item[96];
            snprintf(item, sizeof(item), "%s item %d", name, i);
            return tile_parse_int64(a, (size_t)(b - a), &out[i], item, e);
        }
        *count = i + 1;
        if (!s[n])
            return 0;
        s += n + 1;
    }
}

/* ---- query parameters ------------------------------------------------------ */

struct query_ctx {
    struct tile_request *r;
    struct tile_query_tensor *qt;
    int max_rank;
    const char *key, *value;
    struct tile_error *e;
};

/* A parameter may be given once. */
static int query_once(struct query_ctx *c, bool seen)
{
    if (seen)
        return tile_error_set(c->e, TILE_EINVAL, "duplicate query parameter '%s'", c->key);
    return 0;
}

/* Records a parameter as given once its value is accepted. */
static int query_done(int rc, bool *seen)
{
    if (rc == 0)
        *seen = true;
    return rc;
}

static int query_repeats(struct query_ctx *c)
{
    struct tile_request *r = c->r;
    if (query_once(c, r->has_repeats) < 0)
        return -1;
    return query_done(tile_parse_int_list(c->value, r->repeats, c->max_rank, &r->nrepeats, "repeats", c->e),
                      &r->has_repeats);
}

static int query_semantics(struct query_ctx *c)
{
    struct tile_request *r = c->r;
    if (query_once(c, r->has_semantics) < 0)
        return -1;
    return query_done(tile_semantics_parse(c->value, strlen(c->value), &r->semantics, c->e), &r->has_semantics);
}

static int query_tiles(struct query_ctx *c)
{
    struct tile_request *r = c->r;
    if (query_once(c, r->has_tiles) < 0)
        return -1;
    return query_done(tile_parse_int64(c->value, strlen(c->value), &r->tiles, "tiles", c->e), &r->has_tiles);
}

static int query_axis(struct query_ctx *c)
{
    struct tile_request *r = c->r;
    if (query_once(c, r->has_axis) < 0)
        return -1;
    return query_done(tile_parse_int64(c->value, strlen(c->value), &r->axis, "axis", c->e), &r->has_axis);
}

static int query_dtype(struct query_ctx *c)
{
    struct tile_query_tensor *qt = c->qt;
    if (query_once(c, qt->has_dtype) < 0)
        return -1;
    qt->dtype = tile_dtype_parse(c->value, strlen(c->value));
    if (qt->dtype != TILE_DTYPE_INVALID)
        return query_done(0, &qt->has_dtype);
    char names[200];
    return tile_error_set(c->e, TILE_EINVAL, "unknown dtype '%.*s' (expected one of %s)", QUOTE(strlen(c->value)),
                          c->value, tile_dtype_list(names, sizeof(names)));
}

static int query_shape(struct query_ctx *c)
{
    struct tile_query_tensor *qt = c->qt;
    if (query_once(c, qt->has_shape) < 0 ||
        tile_parse_int_list(c->value, qt->shape, c->max_rank, &qt->rank, "shape", c->e) < 0)
        return -1;
    for (int i = 0; i < qt->rank; i++) {
        if (qt->shape[i] < 0)
            return tile_error_set(c->e, TILE_EINVAL, "shape item %d is %lld; dimensions must be >= 0", i,
                                  (long long)qt->shape[i]);
    }
    return query_done(0, &qt->has_shape);
}

static const struct {
    const char *key;
    bool tensor; /* only where the tensor itself comes from the query */
    int (*apply)(struct query_ctx *c);
} query_params[] = {
    {"repeats", false, query_repeats}, {"semantics", false, query_semantics}, {"tiles", false, query_tiles},
    {"axis", false, query_axis},       {"dtype", true, query_dtype},          {"shape", true, query_shape},
};

int tile_request_query_param(struct tile_request *r, struct tile_query_tensor *qt, bool allow_tensor,
                             const char *key, const char *value, const struct tile_limits *lim,
                             struct tile_error *e)
{
    int max_rank = lim && lim->max_rank > 0 && lim->max_rank < TILE_MAX_RANK ? lim->max_rank : TILE_MAX_RANK;
    struct query_ctx c = {r, qt, max_rank, key, value ? value : "", e};
    allow_tensor = allow_tensor && qt;
    for (size_t i = 0; i < sizeof(query_params) / sizeof(query_params[0]); i++) {
        if (strcmp(key, query_params[i].key) == 0 && (allow_tensor || !query_params[i].tensor))
            return query_params[i].apply(&c);
    }
    if (allow_tensor)
        return tile_error_set(e, TILE_EINVAL,
                              "unknown query parameter '%.*s' (expected dtype, shape, repeats, semantics, tiles or axis)",
                              QUOTE(strlen(key)), key);
    return tile_error_set(e, TILE_EINVAL,
                          "unknown query parameter '%.*s' (expected repeats, semantics, tiles or axis; "
                          "the body carries its own dtype and shape)",
                          QUOTE(strlen(key)), key);
}

/* ---- a query beside a JSON body ----------------------------------------- */

static int conflict(struct tile_error *e, const char *field)
{
    return tile_error_set(e, TILE_EINVAL,
                          "'%s' is given in the query and in the JSON body with different values (give it once, "
                          "or the same in both)",
                          field);
}

static bool same_ints(const int64_t *a, int na, const int64_t *b, int nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(*a)) == 0);
}

/* One scalar field: taken from the query when the body lacks it. */
static int merge_int64(int64_t *v, bool *has, int64_t qv, bool qhas, const char *field, struct tile_error *e)
{
    if (!qhas)
        return 0;
    if (*has && *v != qv)
        return conflict(e, field);
    *v = qv;
    *has = true;
    return 0;
}

static int merge_tensor(const struct tile_tensor *t, const struct tile_query_tensor *qt, struct tile_error *e)
{
    if (qt->has_dtype && qt->dtype != t->dtype)
        return tile_error_set(e, TILE_EINVAL, "query dtype '%s' does not match the JSON body's dtype '%s'",
                              tile_dtype_name(qt->dtype), tile_dtype_name(t->dtype));
    if (!qt->has_shape || same_ints(qt->shape, qt->rank, t->shape, t->rank))
        return 0;
    char want[TILE_MAX_RANK * 24], got[TILE_MAX_RANK * 24];
    tile_format_shape(qt->shape, qt->rank, true, want, sizeof(want));
    tile_format_shape(t->shape, t->rank, true, got, sizeof(got));
    return tile_error_set(e, TILE_EINVAL, "query shape %s does not match the JSON body's input shape %s", want, got);
}

int tile_request_merge_query(struct tile_request *r, const struct tile_request *q, const struct tile_query_tensor *qt,
                             struct tile_error *e)
{
    if (q->has_semantics) {
        if (r->has_semantics && r->semantics != q->semantics)
            return conflict(e, "semantics");
        r->semantics = q->semantics;
        r->has_semantics = true;
    }
    if (q->has_repeats) {
        if (r->has_repeats && !same_ints(r->repeats, r->nrepeats, q->repeats, q->nrepeats))
            return conflict(e, "repeats");
        memcpy(r->repeats, q->repeats, (size_t)q->nrepeats * sizeof(q->repeats[0]));
        r->nrepeats = q->nrepeats;
        r->has_repeats = true;
    }
    if (merge_int64(&r->tiles, &r->has_tiles, q->tiles, q->has_tiles, "tiles", e) < 0 ||
        merge_int64(&r->axis, &r->has_axis, q->axis, q->has_axis, "axis", e) < 0)
        return -1;
    return merge_tensor(&r->input, qt, e);
}

/* ---- bodies ------------------------------------------------------------ */

/* Walks `n` length-prefixed strings filling buf[0, len) exactly. With blob
 * NULL it only checks and sums the lengths; otherwise it copies the bytes to
 * blob and points views[] at them. */
static int wire_walk(const uint8_t *buf, size_t len, uint64_t n, char *blob, struct tile_str *views,
                     uint64_t *total, struct tile_error *e)
{
    size_t pos = 0;
    uint64_t used = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t slen;
        if (len - pos < 4)
            return tile_error_set(e, TILE_EINVAL,
                                  "string element %llu: its 4-byte length prefix at byte %zu runs past the end (%zu bytes)",
                                  (unsigned long long)i, pos, len);
        memcpy(&slen, buf + pos, 4);
        pos += 4;
        if (slen > len - pos)
            return tile_error_set(e, TILE_EINVAL, "string element %llu claims %u bytes but only %zu remain",
                                  (unsigned long long)i, slen, len - pos);
        if (blob) {
            memcpy(blob + used, buf + pos, slen);
            views[i].ptr = blob + used;
            views[i].len = slen;
        }
        pos += slen;
        used += slen;
    }
    if (pos != len)
        return tile_error_set(e, TILE_EINVAL, "%zu bytes follow the last of the %llu strings", len - pos,
                              (unsigned long long)n);
    *total = used;
    return 0;
}

int tile_strings_from_wire(const void *buf, size_t len, struct tile_tensor *t, struct tile_error *e)
{
    uint64_t total;
    if (wire_walk(buf, len, t->nelem, NULL, NULL, &total, e) < 0)
        return -1;
    char *blob = malloc(total ? (size_t)total : 1);
    if (!blob)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu bytes of strings", (unsigned long long)total);
    wire_walk(buf, len, t->nelem, blob, t->data, &total, NULL);
    t->blob = blob;
    t->blob_len = total;
    return 0;
}

/* Bound on a decoded tensor's element buffer. A fixed-width tensor is never
 * bigger than its body. A string tensor's views take 16 bytes an element
 * while an element may take as little as no body byte at all (a .npy
 * '|S0' element; '|S1' is one byte, a binary string four): their buffer
 * is bounded at TILE_STRING_VIEWS_PER_BODY_BYTE times the largest body,
 * so that views and string bytes together stay within the 6 bytes per
 * body byte docs/operations.md (Memory) counts a decoded input at (a bound
 * scaled by the 16-byte view instead lets a 200-byte body of '|S0'
 * elements decode into 16 times --max-body). */
#define TILE_STRING_VIEWS_PER_BODY_BYTE 5

static uint64_t decoded_bound(const struct tile_limits *lim, enum tile_dtype dtype)
{
    uint64_t body = lim ? lim->max_body : 0, bound;
    if (!tile_dtype_is_string(dtype))
        return body;
    return __builtin_mul_overflow(body, TILE_STRING_VIEWS_PER_BODY_BYTE, &bound) ? 0 : bound;
}

/* Checks that a raw body of `len` bytes can hold the claimed tensor. */
static int raw_check_len(size_t len, const struct tile_query_tensor *qt, struct tile_error *e)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(qt->dtype);
    uint64_t nelem, need;
    char shape[TILE_MAX_RANK * 24];
    if (tile_shape_elems(qt->shape, qt->rank, &nelem, e) < 0)
        return -1;
    if (__builtin_mul_overflow(nelem, t->wire_size ? t->wire_size : 4, &need))
        return tile_error_set(e, TILE_ETOOBIG, "dtype %s and that shape need more than 2^64 bytes", t->name);
    if (t->wire_size ? need == len : need <= len)
        return 0;
    tile_format_shape(qt->shape, qt->rank, true, shape, sizeof(shape));
    if (t->wire_size)
        return tile_error_set(e, TILE_EINVAL, "body has %zu bytes but dtype %s and shape %s need %llu", len, t->name,
                              shape, (unsigned long long)need);
    return tile_error_set(e, TILE_EINVAL,
                          "body has %zu bytes but shape %s holds %llu strings, which need at least %llu for their "
                          "length prefixes",
                          len, shape, (unsigned long long)nelem, (unsigned long long)need);
}

int tile_raw_decode(const void *body, size_t len, const struct tile_query_tensor *qt, const struct tile_limits *lim,
                    struct tile_request *r, struct tile_error *e)
{
    tile_tensor_free(&r->input);
    if (!qt || !qt->has_dtype)
        return tile_error_set(e, TILE_EINVAL,
                              "missing query parameter 'dtype' (a raw body carries only the element bytes)");
    if (!qt->has_shape)
        return tile_error_set(e, TILE_EINVAL,
                              "missing query parameter 'shape' (comma-separated dims; empty for a scalar)");
    if (raw_check_len(len, qt, e) < 0)
        return -1;
    if (tile_tensor_init(&r->input, qt->dtype, qt->rank, qt->shape, decoded_bound(lim, qt->dtype), e) < 0)
        return -1;
    if (tile_dtype_is_string(qt->dtype)) {
        if (tile_strings_from_wire(body, len, &r->input, e) < 0) {
            tile_tensor_free(&r->input);
            return -1;
        }
        return 0;
    }
    if (len)
        memcpy(r->input.data, body, len);
    return 0;
}

int tile_v1_npy_decode(const void *body, size_t len, const struct tile_limits *lim, struct tile_request *r,
                       struct tile_error *e)
{
    struct tile_npy_header h;
    int max_rank = lim ? lim->max_rank : 0;
    tile_tensor_free(&r->input);
    if (tile_npy_parse_header(body, len, max_rank, &h, e) < 0 ||
        tile_npy_decode(body, len, max_rank, decoded_bound(lim, h.dtype), &r->input, &h, e) < 0)
        return -1;
    if (tile_dtype_is_string(h.dtype)) {
        r->npy_strkind = h.strkind;
        r->npy_strwidth = h.strwidth;
    }
    return 0;
}
