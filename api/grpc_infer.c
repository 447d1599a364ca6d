/* grpc_infer.c - ModelInferRequest / ModelInferResponse (see grpc_infer.h).
 *
 * DESIGN. The request is walked in place with the wire reader: strings and
 * raw contents stay views into the message. Each input's data is brought
 * to the raw layout (raw contents as they are, typed contents converted in
 * two passes: count, then fill) and handed to tile_v2_raw_tensor() (the
 * same tile_raw_decode() HTTP binary data goes through), so size checks
 * and messages are those of HTTP binary data.
 *
 * Which typed field carries a datatype depends only on its class and
 * element width (INT8..INT32 share int_contents, narrowed to their low
 * bytes), so the table below is keyed like the codecs, not per dtype.
 */
#include "grpc_infer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbwire.h"

/* Field numbers of grpc_service.proto. */
enum {
    REQ_MODEL_NAME = 1,
    REQ_MODEL_VERSION = 2,
    REQ_ID = 3,
    REQ_PARAMETERS = 4,
    REQ_INPUTS = 5,
    REQ_OUTPUTS = 6,
    REQ_RAW_INPUT = 7,
    IN_NAME = 1,
    IN_DATATYPE = 2,
    IN_SHAPE = 3,
    IN_CONTENTS = 5,
    OUT_NAME = 1,
    MAP_KEY = 1,
    MAP_VALUE = 2,
    PARAM_BOOL = 1,
    PARAM_INT64 = 2,
    PARAM_STRING = 3,
    PARAM_UINT64 = 5,
    IN_PARAMETERS = 4,
    OUT_PARAMETERS = 2,
    RESP_MODEL_NAME = 1,
    RESP_MODEL_VERSION = 2,
    RESP_ID = 3,
    RESP_OUTPUTS = 5,
    RESP_RAW_OUTPUT = 6,
    CONTENTS_FIELDS = 8,
};

/* InferTensorContents: field number -> the wire type of its scalars and the
 * datatype name Triton reports for it. */
static const struct contents_field {
    enum tile_pb_wire wire;
    const char *kserve;
} contents_fields[CONTENTS_FIELDS + 1] = {
    [1] = {TILE_PB_VARINT, "BOOL"},  [2] = {TILE_PB_VARINT, "INT32"}, [3] = {TILE_PB_VARINT, "INT64"},
    [4] = {TILE_PB_VARINT, "UINT32"}, [5] = {TILE_PB_VARINT, "UINT64"}, [6] = {TILE_PB_I32, "FP32"},
    [7] = {TILE_PB_I64, "FP64"},     [8] = {TILE_PB_LEN, "BYTES"},
};

/* The contents field for a datatype, or 0 when it travels raw only. */
static uint32_t contents_field_of(enum tile_dtype dtype)
{
    const struct tile_dtype_traits *t = tile_dtype_traits(dtype);
    switch (t->cls) {
    case TILE_CLASS_BOOL:
        return 1;
    case TILE_CLASS_INT:
        return t->size == 8 ? 3 : 2;
    case TILE_CLASS_UINT:
        return t->size == 8 ? 5 : 4;
    case TILE_CLASS_FLOAT:
        return t->size == 4 ? 6 : t->size == 8 ? 7 : 0;
    case TILE_CLASS_STRING:
        return 8;
    default:
        return 0;
    }
}

/* What decoding one input needs beyond the request. */
struct input_view {
    struct tile_grpc_str name, datatype;
    int rank;
    int64_t shape[TILE_MAX_RANK];
    const uint8_t *msg; /* the InferInputTensor message */
    size_t msg_len;
    /* `contents` (InferTensorContents): the first one, and how many the
     * message has. Given more than once, they are one message merged (their
     * repeated fields concatenated), read from `msg` field by field. */
    const uint8_t *contents;
    size_t contents_len, ncontents;
    struct tile_v2_shm_ref shm;
    bool has_shm_offset;
    bool too_many_dims;
};

struct infer_ctx {
    struct tile_grpc_infer_request *r;
    const struct tile_limits *lim;
    const struct tile_v2_shm_source *shm;
    bool out_in_shm; /* an output goes to shared memory: inputs there may be read in place */
    struct tile_error *e;
    int nraw;
    struct tile_grpc_str raw[TILE_GRPC_MAX_INPUTS];
};

static int max_rank_of(const struct tile_limits *lim)
{
    return lim->max_rank > 0 && lim->max_rank < TILE_MAX_RANK ? lim->max_rank : TILE_MAX_RANK;
}

static struct tile_grpc_str str_of(const struct tile_pb_field *f)
{
    return (struct tile_grpc_str){(const char *)f->data, f->len};
}

/* A string field: its view, once its bytes are checked to be UTF-8. */
static int string_field(struct infer_ctx *c, const struct tile_pb_field *f, const char *what,
                        struct tile_grpc_str *out)
{
    if (tile_pb_utf8(f, what, c->e) < 0)
        return -1;
    *out = str_of(f);
    return 0;
}

static bool str_is(struct tile_grpc_str s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

/* ---- parameters ---------------------------------------------------------- */

/* One map<string, InferParameter> entry: its key and the member of the
 * value's oneof that was set last (number 0: none), as protobuf reads it:
 * a value given twice in one entry is merged (a later member replaces an
 * earlier one, an empty value changes nothing). `set`: the map has the key. */
struct parameter {
    struct tile_grpc_str key;
    struct tile_pb_field value;
    bool set;
};

/* The wire type of InferParameter's oneof members, by field number. */
static const enum tile_pb_wire param_wire[] = {
    [PARAM_BOOL] = TILE_PB_VARINT, [PARAM_INT64] = TILE_PB_VARINT, [PARAM_STRING] = TILE_PB_LEN,
    [4] = TILE_PB_I64 /* double_param */, [PARAM_UINT64] = TILE_PB_VARINT,
};

static int read_parameter(struct infer_ctx *c, const struct tile_pb_field *entry, struct parameter *p)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    int rc;
    memset(p, 0, sizeof(*p));
    p->key = (struct tile_grpc_str){"", 0};
    p->set = true;
    tile_pb_reader_init(&rd, entry->data, entry->len);
    while ((rc = tile_pb_next(&rd, &f, "a parameter", c->e)) > 0) {
        if (f.wire != TILE_PB_LEN)
            continue;
        if (f.number == MAP_KEY && string_field(c, &f, "a parameter's key", &p->key) < 0)
            return -1;
        if (f.number != MAP_VALUE)
            continue;
        struct tile_pb_reader vr;
        struct tile_pb_field v;
        tile_pb_reader_init(&vr, f.data, f.len);
        while ((rc = tile_pb_next(&vr, &v, "a parameter's value", c->e)) > 0) {
            if (v.number < PARAM_BOOL || v.number > PARAM_UINT64 || v.wire != param_wire[v.number])
                continue;
            if (v.number == PARAM_STRING && tile_pb_utf8(&v, "a parameter's string_param", c->e) < 0)
                return -1;
            p->value = v;
        }
        if (rc < 0)
            return -1;
    }
    return rc;
}

/* Reads a map entry and keeps it in the slot of its key among `keys`
 * (a later entry with the same key replaces it); other keys are skipped. */
static int collect_parameter(struct infer_ctx *c, const struct tile_pb_field *entry, const char *const *keys,
                             struct parameter *slots, size_t n)
{
    struct parameter p;
    if (read_parameter(c, entry, &p) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (str_is(p.key, keys[i]))
            slots[i] = p;
    }
    return 0;
}

/* The request's `semantics` (a string); other keys are skipped as HTTP
 * skips them. */
static const char *const request_keys[] = {"semantics"};

static int apply_request_parameters(struct infer_ctx *c, const struct parameter *semantics)
{
    if (!semantics->set)
        return 0;
    if (semantics->value.number != PARAM_STRING)
        return tile_error_set(c->e, TILE_EINVAL, "parameter 'semantics' must be a string_param");
    c->r->semantics = str_of(&semantics->value);
    c->r->has_semantics = true;
    return 0;
}

/* A tensor's shared-memory parameters (Triton's system_shared_memory
 * extension, as tritonclient sends them: the region a string_param, offset
 * and byte size int64_param); other keys are skipped. */
enum { SHM_REGION, SHM_OFFSET, SHM_SIZE, SHM_KEYS };
static const char *const tensor_keys[SHM_KEYS] = {"shared_memory_region", "shared_memory_offset",
                                                  "shared_memory_byte_size"};

static int apply_tensor_parameters(struct infer_ctx *c, const struct parameter *p, struct tile_v2_shm_ref *ref,
                                   bool *has_offset)
{
    if (p[SHM_REGION].set) {
        const struct tile_pb_field *v = &p[SHM_REGION].value;
        if (v->number != PARAM_STRING)
            return tile_error_set(c->e, TILE_EINVAL, "parameter 'shared_memory_region' must be a string_param");
        if (tile_v2_shm_region_set(ref, (const char *)v->data, v->len, c->e) < 0)
            return -1;
    }
    for (int k = SHM_OFFSET; k <= SHM_SIZE; k++) {
        const struct tile_pb_field *v = &p[k].value;
        bool offset = k == SHM_OFFSET;
        if (!p[k].set)
            continue;
        if (v->number != PARAM_INT64 && v->number != PARAM_UINT64)
            return tile_error_set(c->e, TILE_EINVAL, "parameter '%s' must be an int64_param or uint64_param",
                                  tensor_keys[k]);
        if (v->number == PARAM_UINT64 && v->value > INT64_MAX)
            return tile_error_set(c->e, TILE_EINVAL, "%s is %llu, above the int64 range", tensor_keys[k],
                                  (unsigned long long)v->value);
        *(offset ? has_offset : &ref->has_byte_size) = true;
        if (tile_v2_shm_uint(tensor_keys[k], (int64_t)v->value, offset ? &ref->offset : &ref->byte_size, c->e) < 0)
            return -1;
    }
    return 0;
}

/* ---- one input's description ------------------------------------------- */

/* Past TILE_MAX_RANK dimensions only the excess is noted: the refusal
 * names the input, whose name may come later in the message. */
static int shape_dim(void *p, uint64_t v, struct tile_error *e)
{
    (void)e;
    struct input_view *in = p;
    if (in->rank == TILE_MAX_RANK)
        in->too_many_dims = true;
    else
        in->shape[in->rank++] = (int64_t)v;
    return 0;
}

/* Reads an InferInputTensor whole (its parameters map is checked once it
 * is complete: a later entry of a key replaces an earlier one). */
static int read_input_view(struct infer_ctx *c, const struct tile_pb_field *msg, struct input_view *in)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    struct parameter params[SHM_KEYS] = {0};
    int rc;
    memset(in, 0, sizeof(*in));
    in->msg = msg->data;
    in->msg_len = msg->len;
    tile_pb_reader_init(&rd, msg->data, msg->len);
    while ((rc = tile_pb_next(&rd, &f, "an input tensor", c->e)) > 0) {
        if (f.number == IN_SHAPE) { /* int64, packed or not */
            if (tile_pb_scalars(&f, TILE_PB_VARINT, shape_dim, in, "input shape", c->e) < 0)
                return -1;
            continue;
        }
        if (f.wire != TILE_PB_LEN)
            continue;
        if ((f.number == IN_NAME && string_field(c, &f, "InferInputTensor.name", &in->name) < 0) ||
            (f.number == IN_DATATYPE && string_field(c, &f, "InferInputTensor.datatype", &in->datatype) < 0) ||
            (f.number == IN_PARAMETERS && collect_parameter(c, &f, tensor_keys, params, SHM_KEYS) < 0))
            return -1;
        if (f.number == IN_CONTENTS && in->ncontents++ == 0) {
            in->contents = f.data;
            in->contents_len = f.len;
        }
    }
    if (rc < 0)
        return -1;
    if (in->too_many_dims)
        return tile_error_set(c->e, TILE_EINVAL, "input '%.*s' has more than %d dimensions", (int)in->name.len,
                              in->name.ptr, TILE_MAX_RANK);
    if (apply_tensor_parameters(c, params, &in->shm, &in->has_shm_offset) < 0)
        return -1;
    if (!in->shm.used && !in->has_shm_offset && !in->shm.has_byte_size)
        return 0; /* no shared memory named: nothing to check (the name is formatted for errors only) */
    char what[48];
    snprintf(what, sizeof(what), "input '%.*s'", (int)(in->name.len < 32 ? in->name.len : 32), in->name.ptr);
    return tile_v2_shm_ref_check(&in->shm, in->has_shm_offset, what, c->e);
}

static int check_input_view(struct infer_ctx *c, const struct input_view *in, enum tile_dtype *dtype)
{
    *dtype = tile_dtype_parse_kserve(in->datatype.ptr, in->datatype.len);
    if (*dtype == TILE_DTYPE_INVALID)
        return tile_error_set(c->e, TILE_EINVAL,
                              "unknown datatype '%.*s' (expected BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, "
                              "FP64, BYTES, COMPLEX64 or COMPLEX128)",
                              (int)in->datatype.len, in->datatype.ptr);
    if (in->rank > max_rank_of(c->lim))
        return tile_error_set(c->e, TILE_EINVAL, "input '%.*s' has rank %d, above the maximum rank of %d",
                              (int)in->name.len, in->name.ptr, in->rank, max_rank_of(c->lim));
    for (int i = 0; i < in->rank; i++) {
        if (in->shape[i] < 0)
            return tile_error_set(c->e, TILE_EINVAL, "shape[%d] is %lld; dimensions must be >= 0", i,
                                  (long long)in->shape[i]);
    }
    return 0;
}

/* ---- typed contents -> raw layout ---------------------------------------- */

struct typed_fill {
    uint8_t *out;   /* NULL while counting */
    uint64_t count; /* scalars seen */
    size_t size;    /* bytes per element */
    bool is_bool;   /* bool_contents: any non-zero varint is true */
};

static int typed_scalar(void *p, uint64_t v, struct tile_error *e)
{
    (void)e;
    struct typed_fill *t = p;
    if (t->is_bool)
        v = v != 0;
    if (t->out) {
        for (size_t i = 0; i < t->size; i++) /* little-endian low bytes: INT8/INT16 narrowed */
            t->out[t->count * t->size + i] = (uint8_t)(v >> (8 * i));
    }
    t->count++;
    return 0;
}

/* Walks one InferTensorContents message (see walk_contents). A field of
 * another wire type than its own (packed or not) is unknown to protobuf,
 * and an empty packed run sets no value: neither counts as data. A field
 * of another datatype is noted in *wrong (the lowest number seen), for
 * walk_contents to refuse whatever order the fields came in. */
static int walk_one_contents(struct infer_ctx *c, const struct input_view *in, const uint8_t *msg, size_t len,
                             uint32_t want, struct typed_fill *t, uint64_t *raw, uint32_t *wrong)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    int rc;
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, &f, "input contents", c->e)) > 0) {
        if (f.number < 1 || f.number > CONTENTS_FIELDS || !tile_pb_packs(&f, contents_fields[f.number].wire))
            continue;
        if (f.number != want) {
            if ((f.number == 8 || f.wire != TILE_PB_LEN || f.len != 0) && (!*wrong || f.number < *wrong))
                *wrong = f.number;
            continue;
        }
        if (want != 8) { /* 8: bytes_contents, one string per field */
            if (tile_pb_scalars(&f, contents_fields[want].wire, typed_scalar, t, "input contents", c->e) < 0)
                return -1;
            continue;
        }
        if (f.len > UINT32_MAX)
            return tile_error_set(c->e, TILE_ETOOBIG, "input '%.*s' has a string of %zu bytes, above 4 GiB",
                                  (int)in->name.len, in->name.ptr, f.len);
        if (t->out) {
            typed_scalar(&(struct typed_fill){t->out + *raw, 0, 4, false}, f.len, c->e);
            memcpy(t->out + *raw + 4, f.data, f.len);
        }
        *raw += 4 + (uint64_t)f.len;
        t->count++;
    }
    return rc;
}

/* Walks the contents: checks that only the field for `dtype` is used and,
 * with t->out set, writes its values in the raw layout. For BYTES,
 * t->count counts strings and *bytes_len receives the raw length. Several
 * `contents` fields are one message merged: their values in order. */
static int walk_contents(struct infer_ctx *c, const struct input_view *in, enum tile_dtype dtype, uint32_t want,
                         struct typed_fill *t, uint64_t *bytes_len)
{
    uint32_t wrong = 0;
    int rc = 0;
    *bytes_len = 0;
    if (in->ncontents == 1) {
        rc = walk_one_contents(c, in, in->contents, in->contents_len, want, t, bytes_len, &wrong);
    } else {
        struct tile_pb_reader rd;
        struct tile_pb_field f;
        tile_pb_reader_init(&rd, in->msg, in->msg_len);
        while ((rc = tile_pb_next(&rd, &f, "an input tensor", c->e)) > 0) {
            if (f.number == IN_CONTENTS && f.wire == TILE_PB_LEN &&
                walk_one_contents(c, in, f.data, f.len, want, t, bytes_len, &wrong) < 0)
                return -1;
        }
    }
    if (rc < 0)
        return -1;
    if (wrong)
        return tile_error_set(c->e, TILE_EINVAL,
                              "unexpected explicit tensor data for input tensor '%.*s' for model '%.*s' of type "
                              "'%s', expected datatype '%s'",
                              (int)in->name.len, in->name.ptr, (int)c->r->model_name.len, c->r->model_name.ptr,
                              contents_fields[wrong].kserve, tile_dtype_traits(dtype)->kserve);
    return 0;
}

/* Converts typed contents to a malloc'd raw buffer (*raw, *raw_len). */
static int typed_to_raw(struct infer_ctx *c, const struct input_view *in, enum tile_dtype dtype, uint8_t **raw,
                        uint64_t *raw_len)
{
    const struct tile_dtype_traits *tr = tile_dtype_traits(dtype);
    uint32_t want = contents_field_of(dtype); /* 0: raw only, so any typed field is refused */
    struct typed_fill t = {.size = tr->wire_size, .is_bool = want == 1};
    uint64_t bytes_len, nelem;
    if (walk_contents(c, in, dtype, want, &t, &bytes_len) < 0 || tile_shape_elems(in->shape, in->rank, &nelem, c->e) < 0)
        return -1;
    if (t.count != nelem)
        return tile_error_set(c->e, TILE_EINVAL, "input '%.*s' has %llu values in contents but its shape needs %llu%s",
                              (int)in->name.len, in->name.ptr, (unsigned long long)t.count,
                              (unsigned long long)nelem, want ? "" : " (its datatype travels in raw_input_contents only)");
    /* count scalars each took at least one byte of the message: no overflow */
    *raw_len = want == 8 ? bytes_len : t.count * t.size;
    *raw = malloc(*raw_len ? *raw_len : 1);
    if (!*raw)
        return tile_error_set(c->e, TILE_ENOMEM, "cannot allocate %llu bytes for input '%.*s'",
                              (unsigned long long)*raw_len, (int)in->name.len, in->name.ptr);
    t.out = *raw;
    t.count = 0;
    if (walk_contents(c, in, dtype, want, &t, &bytes_len) < 0) {
        free(*raw);
        return -1;
    }
    return 0;
}

/* ---- inputs -------------------------------------------------------------- */

static int decode_raw(struct infer_ctx *c, const struct input_view *in, enum tile_dtype dtype, const void *raw,
                      uint64_t len, struct tile_tensor *out)
{
    if (tile_v2_raw_tensor(raw, len, dtype, in->rank, in->shape, c->lim, out, c->e) == 0)
        return 0;
    if (!c->e)
        return -1;
    struct tile_error why = *c->e; /* the raw decoder speaks of a body: say which input */
    tile_error_clear(c->e);
    return tile_error_set(c->e, why.code, "input '%.*s': %s", (int)in->name.len, in->name.ptr, why.text);
}

/* An input held in a shared-memory region: it has no contents and takes
 * no entry of raw_input_contents. */
static int shm_input(struct infer_ctx *c, const struct input_view *in, enum tile_dtype dtype, struct tile_grpc_input *gi)
{
    if (in->ncontents)
        return tile_error_set(c->e, TILE_EINVAL,
                              "input '%.*s' must set exactly one of 'contents', an entry of 'raw_input_contents' and "
                              "'shared_memory_region' in 'parameters'",
                              (int)in->name.len, in->name.ptr);
    const struct tile_v2_tensor_desc d = {.name = in->name.ptr, .name_len = in->name.len, .dtype = dtype,
                                          .rank = in->rank, .shape = in->shape, .shm = &in->shm};
    if (tile_v2_shm_input(c->shm, &d, c->out_in_shm, c->lim, &gi->t, c->e) < 0)
        return -1;
    gi->in_shm = true;
    c->r->ninputs++;
    return 0;
}

static int read_input(struct infer_ctx *c, const struct tile_pb_field *msg, int *raw_next)
{
    struct input_view in;
    enum tile_dtype dtype;
    if (read_input_view(c, msg, &in) < 0 || check_input_view(c, &in, &dtype) < 0)
        return -1;
    struct tile_grpc_input *gi = &c->r->inputs[c->r->ninputs];
    gi->name = in.name;
    struct tile_grpc_str mn = c->r->model_name;
    if (in.shm.used)
        return shm_input(c, &in, dtype, gi);
    if (in.ncontents && c->nraw > 0)
        return tile_error_set(c->e, TILE_EINVAL,
                              "contents field must not be specified when using raw_input_contents for '%.*s' for "
                              "model '%.*s'",
                              (int)in.name.len, in.name.ptr, (int)mn.len, mn.ptr);
    if (!in.ncontents && *raw_next >= c->nraw)
        return tile_error_set(c->e, TILE_EINVAL, "unable to find data for input tensor '%.*s' for model '%.*s' in request.",
                              (int)in.name.len, in.name.ptr, (int)mn.len, mn.ptr);
    int rc;
    if (in.ncontents) {
        uint8_t *raw = NULL;
        uint64_t len = 0;
        if (typed_to_raw(c, &in, dtype, &raw, &len) < 0)
            return -1;
        rc = decode_raw(c, &in, dtype, raw, len, &gi->t);
        free(raw);
        gi->typed = true;
    } else {
        struct tile_grpc_str raw = c->raw[(*raw_next)++];
        rc = decode_raw(c, &in, dtype, raw.ptr, raw.len, &gi->t);
    }
    if (rc == 0)
        c->r->ninputs++;
    return rc;
}

static int read_output(struct infer_ctx *c, const struct tile_pb_field *msg)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    struct parameter params[SHM_KEYS] = {0};
    int rc;
    if (c->r->noutputs == TILE_GRPC_MAX_OUTPUTS)
        return tile_error_set(c->e, TILE_EINVAL, "the request asks for more than %d outputs", TILE_GRPC_MAX_OUTPUTS);
    int i = c->r->noutputs++;
    struct tile_grpc_str *name = &c->r->outputs[i];
    struct tile_v2_shm_ref *shm = &c->r->output_shm[i];
    bool has_offset = false;
    *name = (struct tile_grpc_str){"", 0};
    tile_pb_reader_init(&rd, msg->data, msg->len);
    while ((rc = tile_pb_next(&rd, &f, "a requested output", c->e)) > 0) {
        if (f.wire != TILE_PB_LEN)
            continue;
        if ((f.number == OUT_NAME && string_field(c, &f, "InferRequestedOutputTensor.name", name) < 0) ||
            (f.number == OUT_PARAMETERS && collect_parameter(c, &f, tensor_keys, params, SHM_KEYS) < 0))
            return -1;
    }
    if (rc < 0 || apply_tensor_parameters(c, params, shm, &has_offset) < 0)
        return -1;
    c->out_in_shm |= shm->used;
    if (!shm->used && !has_offset && !shm->has_byte_size)
        return 0; /* as for an input */
    char what[48];
    snprintf(what, sizeof(what), "output '%.*s'", (int)(name->len < 32 ? name->len : 32), name->ptr);
    return tile_v2_shm_ref_check(shm, has_offset, what, c->e);
}

/* ---- the request --------------------------------------------------------- */

/* First pass: scalars, parameters, outputs and the raw contents (inputs
 * need to know whether raw contents are used before they are read). Every
 * field the request reads is length-delimited: one of another wire type
 * is unknown to protobuf, skipped.
 *
 * A refusal must not depend on the order of the fields (protobuf writers
 * order them by number, hand-made messages need not): the only errors
 * raised inside the loop are a field's own (an output's, in their order,
 * which every encoding keeps) and the wire's; the counts and the request
 * parameters are checked once the message is read, in one fixed order. */
static int read_top(struct infer_ctx *c, const void *msg, size_t len)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    struct parameter semantics = {0};
    int rc, ninputs = 0; /* counted up to one past the limit */
    bool more_raw = false;
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, &f, "ModelInferRequest", c->e)) > 0) {
        if (f.number > REQ_RAW_INPUT || f.wire != TILE_PB_LEN)
            continue; /* fields of later protocol versions, or unknown */
        if (f.number == REQ_MODEL_NAME && string_field(c, &f, "ModelInferRequest.model_name", &c->r->model_name) < 0)
            return -1;
        if (f.number == REQ_MODEL_VERSION &&
            string_field(c, &f, "ModelInferRequest.model_version", &c->r->model_version) < 0)
            return -1;
        if (f.number == REQ_ID && string_field(c, &f, "ModelInferRequest.id", &c->r->id) < 0)
            return -1;
        if (f.number == REQ_PARAMETERS && collect_parameter(c, &f, request_keys, &semantics, 1) < 0)
            return -1;
        if (f.number == REQ_INPUTS && ninputs <= TILE_GRPC_MAX_INPUTS)
            ninputs++;
        if (f.number == REQ_OUTPUTS && read_output(c, &f) < 0)
            return -1;
        if (f.number == REQ_RAW_INPUT && c->nraw == TILE_GRPC_MAX_INPUTS)
            more_raw = true;
        else if (f.number == REQ_RAW_INPUT)
            c->raw[c->nraw++] = str_of(&f);
    }
    if (rc < 0 || apply_request_parameters(c, &semantics) < 0)
        return -1;
    if (ninputs > TILE_GRPC_MAX_INPUTS)
        return tile_error_set(c->e, TILE_EINVAL, "the request has more than %d inputs", TILE_GRPC_MAX_INPUTS);
    if (more_raw)
        return tile_error_set(c->e, TILE_EINVAL, "the request has more than %d raw_input_contents",
                              TILE_GRPC_MAX_INPUTS);
    return 0;
}

static int read_inputs(struct infer_ctx *c, const void *msg, size_t len)
{
    struct tile_pb_reader rd;
    struct tile_pb_field f;
    int rc, raw_next = 0;
    tile_pb_reader_init(&rd, msg, len);
    while ((rc = tile_pb_next(&rd, &f, "ModelInferRequest", c->e)) > 0) {
        if (f.number == REQ_INPUTS && f.wire == TILE_PB_LEN && read_input(c, &f, &raw_next) < 0)
            return -1;
    }
    if (rc == 0 && raw_next != c->nraw)
        return tile_error_set(c->e, TILE_EINVAL, "the request has %d raw_input_contents but %d inputs use them",
                              c->nraw, raw_next);
    return rc;
}

int tile_grpc_infer_decode(const void *msg, size_t len, const struct tile_limits *lim,
                           struct tile_grpc_infer_request *r, struct tile_error *e)
{
    return tile_grpc_infer_decode_shm(msg, len, lim, NULL, r, e);
}

int tile_grpc_infer_decode_shm(const void *msg, size_t len, const struct tile_limits *lim,
                               const struct tile_v2_shm_source *shm, struct tile_grpc_infer_request *r,
                               struct tile_error *e)
{
    memset(r, 0, sizeof(*r));
    struct infer_ctx c = {.r = r, .lim = lim, .shm = shm, .e = e};
    if (read_top(&c, msg, len) < 0 || read_inputs(&c, msg, len) < 0)
        return -1;
    if (r->ninputs == 0)
        return tile_error_set(e, TILE_EINVAL, "the request has no 'inputs'");
    return 0;
}

void tile_grpc_infer_request_free(struct tile_grpc_infer_request *r)
{
    for (int i = 0; i < r->ninputs; i++)
        tile_tensor_free(&r->inputs[i].t);
    r->ninputs = 0;
}

/* ---- the reply ------------------------------------------------------------ */

static size_t output_tensor_size(const struct tile_grpc_infer_reply *r, size_t *shape_len)
{
    *shape_len = 0;
    for (int i = 0; i < r->rank; i++)
        *shape_len += tile_pb_varint_size((uint64_t)r->shape[i]);
    const char *dt = tile_dtype_traits(r->dtype)->kserve;
    return tile_pb_bytes_size(1, r->output_name.len) + tile_pb_bytes_size(2, strlen(dt)) +
           (r->rank ? tile_pb_bytes_size(3, *shape_len) : 0);
}

size_t tile_grpc_infer_reply_head_size(const struct tile_grpc_infer_reply *r)
{
    size_t shape_len;
    size_t out = output_tensor_size(r, &shape_len);
    return tile_pb_bytes_size(RESP_MODEL_NAME, r->model_name.len) +
           tile_pb_bytes_size(RESP_MODEL_VERSION, r->model_version.len) +
           (r->id.len ? tile_pb_bytes_size(RESP_ID, r->id.len) : 0) + tile_pb_bytes_size(RESP_OUTPUTS, out) +
           tile_pb_len_head_size(RESP_RAW_OUTPUT, r->raw_len);
}

void tile_grpc_infer_reply_head(const struct tile_grpc_infer_reply *r, uint8_t *p)
{
    size_t shape_len;
    size_t out = output_tensor_size(r, &shape_len);
    const char *dt = tile_dtype_traits(r->dtype)->kserve;
    p = tile_pb_put_bytes(p, RESP_MODEL_NAME, r->model_name.ptr, r->model_name.len);
    p = tile_pb_put_bytes(p, RESP_MODEL_VERSION, r->model_version.ptr, r->model_version.len);
    if (r->id.len)
        p = tile_pb_put_bytes(p, RESP_ID, r->id.ptr, r->id.len);
    p = tile_pb_put_len_head(p, RESP_OUTPUTS, out);
    p = tile_pb_put_bytes(p, 1, r->output_name.ptr, r->output_name.len);
    p = tile_pb_put_bytes(p, 2, dt, strlen(dt));
    if (r->rank) {
        p = tile_pb_put_len_head(p, 3, shape_len);
        for (int i = 0; i < r->rank; i++)
            p = tile_pb_put_varint(p, (uint64_t)r->shape[i]);
    }
    tile_pb_put_len_head(p, RESP_RAW_OUTPUT, r->raw_len);
}
