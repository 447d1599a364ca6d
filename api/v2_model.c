/* v2_model.c - the model `tile` behind every Open Inference Protocol
 * codec (HTTP JSON and binary in v2.c, gRPC in grpc_infer.c): its
 * signature per version, how decoded input tensors map onto a tile
 * request, the one output's name, and tensors held in shared memory.
 * Both codecs decode into named tensors and hand them here, so their rules
 * and messages cannot drift apart.
 */
#include "v2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"

/* ---- signature ------------------------------------------------------------ */

/* ONNX Tile-1 takes tiles and axis, later versions a repeats list. Their
 * datatype names come from the dtype table. */
#define SIG_NAME(lit) .name = lit, .name_len = sizeof(lit) - 1
static const struct tile_v2_tensor_sig inputs_tile1[] = {
    {SIG_NAME("input"), .dtype = TILE_FLOAT32, .dim = -1},
    {SIG_NAME("tiles"), .dtype = TILE_INT64, .dim = 1},
    {SIG_NAME("axis"), .dtype = TILE_INT64, .dim = 1},
};
static const struct tile_v2_tensor_sig inputs_tile6[] = {
    {SIG_NAME("input"), .dtype = TILE_FLOAT32, .dim = -1},
    {SIG_NAME("repeats"), .dtype = TILE_INT64, .dim = -1},
};
const struct tile_v2_tensor_sig tile_v2_model_output = {SIG_NAME("output"), .dtype = TILE_FLOAT32, .dim = -1};

const struct tile_v2_tensor_sig *tile_v2_model_inputs(int version, size_t *n)
{
    *n = version == 1 ? sizeof(inputs_tile1) / sizeof(inputs_tile1[0]) : sizeof(inputs_tile6) / sizeof(inputs_tile6[0]);
    return version == 1 ? inputs_tile1 : inputs_tile6;
}

int tile_v2_output_name(const char *name, size_t len, struct tile_error *e)
{
    if (len != 6 || memcmp(name, "output", 6) != 0)
        return tile_error_set(e, TILE_EINVAL, "unknown output '%.*s' (the tile model has one output, 'output')",
                              (int)(len < 64 ? len : 64), name);
    return 0;
}

/* ---- tensors ---------------------------------------------------------------- */

int tile_v2_raw_tensor(const void *bytes, uint64_t len, enum tile_dtype dtype, int rank, const int64_t *shape,
                       const struct tile_limits *lim, struct tile_tensor *t, struct tile_error *e)
{
    struct tile_query_tensor qt = {.has_dtype = true, .has_shape = true, .dtype = dtype, .rank = rank};
    memcpy(qt.shape, shape, sizeof(shape[0]) * (size_t)rank);
    struct tile_request tmp;
    tile_request_init(&tmp);
    if (tile_raw_decode(bytes, (size_t)len, &qt, lim, &tmp, e) < 0) {
        tile_request_free(&tmp);
        return -1;
    }
    *t = tmp.input; /* take the tensor */
    return 0;
}

int tile_v2_shm_region_set(struct tile_v2_shm_ref *ref, const char *name, size_t len, struct tile_error *e)
{
    if (len >= TILE_V2_REGION_MAX)
        return tile_error_set(e, TILE_EINVAL, "shared_memory_region '%.32s...' is too long (at most %d bytes)", name,
                              TILE_V2_REGION_MAX - 1);
    if (len == 0 || memchr(name, '\0', len))
        return tile_error_set(e, TILE_EINVAL, "shared_memory_region must be a non-empty name");
    memcpy(ref->region, name, len);
    ref->region[len] = '\0';
    ref->used = true;
    return 0;
}

int tile_v2_shm_uint(const char *what, int64_t n, uint64_t *out, struct tile_error *e)
{
    if (n < 0)
        return tile_error_set(e, TILE_EINVAL, "%s is %lld; it must be >= 0", what, (long long)n);
    *out = (uint64_t)n;
    return 0;
}

int tile_v2_shm_ref_check(const struct tile_v2_shm_ref *ref, bool has_offset, const char *what, struct tile_error *e)
{
    if (!ref->used && (has_offset || ref->has_byte_size))
        return tile_error_set(e, TILE_EINVAL,
                              "'shared_memory_offset' and 'shared_memory_byte_size' need 'shared_memory_region' (%s)",
                              what);
    if (ref->used && !ref->has_byte_size)
        return tile_error_set(e, TILE_EINVAL, "%s names shared memory region '%s' without 'shared_memory_byte_size'",
                              what, ref->region);
    return 0;
}

/* A fixed-width input whose bytes lie in memory that outlives the request,
 * aligned for its elements: the tensor borrows them. */
static int borrow_tensor(const struct tile_v2_tensor_desc *d, const void *bytes, struct tile_tensor *out,
                         struct tile_error *e)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(d->dtype);
    uint64_t nelem, need;
    char shape[TILE_MAX_RANK * 24];
    if (tile_shape_elems(d->shape, d->rank, &nelem, e) < 0)
        return -1;
    if (!tile_shape_span_fits(d->shape, d->rank, t->size))
        return tile_error_set(e, TILE_ETOOBIG, "tensor byte size overflows 64 bits");
    if (__builtin_mul_overflow(nelem, t->size, &need) || need != d->shm->byte_size) {
        tile_format_shape(d->shape, d->rank, true, shape, sizeof(shape));
        return tile_error_set(e, TILE_EINVAL,
                              "input '%.*s' has shared_memory_byte_size %llu but datatype %s and shape %s need %llu",
                              (int)d->name_len, d->name, (unsigned long long)d->shm->byte_size, t->kserve, shape,
                              (unsigned long long)need);
    }
    out->dtype = d->dtype;
    out->rank = d->rank;
    memcpy(out->shape, d->shape, sizeof(d->shape[0]) * (size_t)d->rank);
    out->data = (void *)bytes;
    out->nelem = nelem;
    out->owns_data = false;
    return 0;
}

int tile_v2_shm_input(const struct tile_v2_shm_source *shm, const struct tile_v2_tensor_desc *d, bool out_in_shm,
                      const struct tile_limits *lim, struct tile_tensor *out, struct tile_error *e)
{
    char name[40];
    snprintf(name, sizeof(name), "%.*s", (int)(d->name_len < 39 ? d->name_len : 39), d->name);
    if (!shm)
        return tile_error_set(e, TILE_EINVAL,
                              "input '%s' names shared memory region '%s', but shared memory is not enabled on this "
                              "server (tiled serve --shared-memory system)",
                              name, d->shm->region);
    const void *bytes;
    if (shm->resolve(shm->ctx, name, d->shm, &bytes, e) < 0)
        return -1;
    const struct tile_dtype_traits *t = tile_dtype_traits(d->dtype);
    if (shm->borrow && out_in_shm && t->wire_size == t->size && t->size && (uintptr_t)bytes % t->size == 0)
        return borrow_tensor(d, bytes, out, e);
    return tile_v2_raw_tensor(bytes, d->shm->byte_size, d->dtype, d->rank, d->shape, lim, out, e);
}

/* ---- mapping inputs onto the tile request -------------------------------- */

struct map_ctx {
    struct tile_v2_request *r;
    struct tile_v2_named_tensor *in;
    int n, max_rank;
    struct tile_error *e;
};

static struct tile_v2_named_tensor *find_input_n(struct map_ctx *c, const char *name, size_t len)
{
    for (int i = 0; i < c->n; i++) {
        if (len == c->in[i].name_len && memcmp(c->in[i].name, name, len) == 0)
            return &c->in[i];
    }
    return NULL;
}
/* The input named by the literal `lit` (its length known here, not counted). */
#define find_input(c, lit) find_input_n(c, lit, sizeof(lit) - 1)

/* Element i of an integer tensor as int64 (any integer width). */
static int int_element(const struct tile_v2_named_tensor *in, uint64_t i, int64_t *out, struct tile_error *e)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(in->t->dtype);
    const unsigned char *p = (const unsigned char *)in->t->data + i * t->size;
    uint64_t raw = 0;
    memcpy(&raw, p, t->size); /* little-endian host */
    if (t->cls == TILE_CLASS_INT && t->size < 8 && (raw >> (t->size * 8 - 1)) & 1)
        raw |= ~UINT64_C(0) << (t->size * 8); /* sign-extend */
    if (t->cls == TILE_CLASS_UINT && raw > INT64_MAX)
        return tile_error_set(e, TILE_EINVAL, "%.*s[%llu] is %llu, above the int64 range", (int)in->name_len,
                              in->name, (unsigned long long)i, (unsigned long long)raw);
    *out = (int64_t)raw;
    return 0;
}

static int check_integer_input(const struct tile_v2_named_tensor *in, struct tile_error *e)
{
    enum tile_dtype_class cls = tile_dtype_traits(in->t->dtype)->cls;
    if (cls != TILE_CLASS_INT && cls != TILE_CLASS_UINT)
        return tile_error_set(e, TILE_EINVAL, "input '%.*s' must have an integer datatype (INT64 preferred), not %s",
                              (int)in->name_len, in->name, tile_dtype_traits(in->t->dtype)->kserve);
    return 0;
}

static int map_scalar(struct map_ctx *c, const char *name, int64_t *out, bool *has)
{
    struct tile_v2_named_tensor *in = find_input_n(c, name, strlen(name));
    if (!in)
        return tile_error_set(c->e, TILE_EINVAL, "missing input '%s' (model version 1 takes input, tiles and axis)",
                              name);
    if (check_integer_input(in, c->e) < 0)
        return -1;
    if (in->t->nelem != 1)
        return tile_error_set(c->e, TILE_EINVAL, "input '%s' must hold one value, not %llu", name,
                              (unsigned long long)in->t->nelem);
    *has = true;
    return int_element(in, 0, out, c->e);
}

static int map_repeats(struct map_ctx *c)
{
    struct tile_v2_named_tensor *in = find_input(c, "repeats");
    if (!in)
        return tile_error_set(c->e, TILE_EINVAL, "missing input 'repeats' (INT64, one value per input axis)");
    if (check_integer_input(in, c->e) < 0)
        return -1;
    if (in->t->rank != 1)
        return tile_error_set(c->e, TILE_EINVAL, "input 'repeats' must have rank 1, not %d", in->t->rank);
    if (in->t->nelem > (uint64_t)c->max_rank)
        return tile_error_set(c->e, TILE_EINVAL, "input 'repeats' has %llu values, above the maximum rank of %d",
                              (unsigned long long)in->t->nelem, c->max_rank);
    c->r->treq.has_repeats = true;
    c->r->treq.nrepeats = (int)in->t->nelem;
    for (uint64_t i = 0; i < in->t->nelem; i++) {
        if (int_element(in, i, &c->r->treq.repeats[i], c->e) < 0)
            return -1;
    }
    return 0;
}

static int check_input_names(struct map_ctx *c)
{
    size_t n;
    const struct tile_v2_tensor_sig *want = tile_v2_model_inputs(c->r->version, &n);
    for (int i = 0; i < c->n; i++) {
        bool known = false;
        for (size_t k = 0; k < n; k++)
            known |= want[k].name_len == c->in[i].name_len &&
                     memcmp(want[k].name, c->in[i].name, c->in[i].name_len) == 0;
        if (!known)
            return tile_error_set(c->e, TILE_EINVAL, "unknown input '%.*s' for model version %d", (int)c->in[i].name_len,
                                  c->in[i].name, c->r->version);
        for (int j = 0; j < i; j++) {
            if (c->in[j].name_len == c->in[i].name_len && memcmp(c->in[j].name, c->in[i].name, c->in[i].name_len) == 0)
                return tile_error_set(c->e, TILE_EINVAL, "input '%.*s' is given twice", (int)c->in[i].name_len,
                                      c->in[i].name);
        }
    }
    return 0;
}

int tile_v2_map_inputs(struct tile_v2_request *r, struct tile_v2_named_tensor *inputs, int n, bool has_semantics,
                       const struct tile_limits *lim, struct tile_error *e)
{
    struct map_ctx ctx = {.r = r, .in = inputs, .n = n, .e = e,
                          .max_rank = lim->max_rank > 0 && lim->max_rank < TILE_MAX_RANK ? lim->max_rank : TILE_MAX_RANK};
    struct map_ctx *c = &ctx;
    if (check_input_names(c) < 0)
        return -1;
    struct tile_v2_named_tensor *in = find_input(c, "input");
    if (!in)
        return tile_error_set(e, TILE_EINVAL, "missing input 'input' (the tensor to tile)");
    if (r->version == 1) {
        if (has_semantics && r->treq.semantics != TILE_SEM_ONNX1)
            return tile_error_set(e, TILE_EINVAL, "model version 1 follows ONNX Tile-1 (semantics onnx1) only");
        r->treq.semantics = TILE_SEM_ONNX1;
        if (map_scalar(c, "tiles", &r->treq.tiles, &r->treq.has_tiles) < 0 ||
            map_scalar(c, "axis", &r->treq.axis, &r->treq.has_axis) < 0)
            return -1;
    } else {
        if (r->treq.semantics == TILE_SEM_ONNX1)
            return tile_error_set(e, TILE_EINVAL, "semantics onnx1 is served by model version 1");
        if (r->version == 6 && !tile_dtype_traits(in->t->dtype)->in_opset6)
            return tile_error_set(e, TILE_EINVAL, "datatype %s is not allowed by model version 6 (ONNX Tile-6)",
                                  tile_dtype_traits(in->t->dtype)->kserve);
        if (map_repeats(c) < 0)
            return -1;
    }
    tile_tensor_assign(&r->treq.input, in->t);
    tile_tensor_reset(in->t); /* moved */
    return 0;
}
