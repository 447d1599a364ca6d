/* v2.c - Open Inference Protocol infer requests for the `tile` model.
 *
 * DESIGN. The JSON header is read in one pass with the pull lexer. A
 * tensor's "data" may come before its "datatype" and "shape", so its lexer
 * position is remembered and read once the object is complete (as /v1
 * does); data that come after both, as clients send them, are read where
 * they stand when that succeeds (in_data), and only otherwise skipped and
 * read again later, so errors are reported the same either way. Binary inputs are sliced from the bytes after the
 * header in the order their inputs appear, as Triton's extension specifies, and every byte must be accounted for.
 * Decoded tensors are then mapped onto a plain struct tile_request, so planning and encoding are the same as for /v1.
 *
 * LENIENCY. Keys this model does not use are skipped at every level (the
 * request, each input and output, every "parameters"), as Triton's and
 * KServe's own servers skip them: clients add their own (KServe always sends
 * "model_name"). What a known key says is checked strictly: "model_name" and
 * "model_version" must name the model and version the URL addresses, and a
 * tensor carries exactly one of non-null "data" and "binary_data_size"
 * (KServe writes "data": null beside the binary case) or
 * "shared_memory_region".
 *
 * SHARED MEMORY. The per-tensor parameters of Triton's system shared-memory
 * extension are read here; the bytes of an input in a region come from the
 * caller's resolver (struct tile_v2_shm_source), so this file knows nothing
 * of regions and mappings. Offsets and byte sizes are unsigned and checked
 * against the region by the resolver, and against the tensor here.
 */
#include "v2.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "jsondata.h"
#include "jsonquick.h"
#include "jsonread.h"
#include "numfmt.h"

#define V2_MAX_INPUTS 4

struct v2_input {
    char name[32];
    size_t name_len;
    bool has_name, has_shape, has_dtype, has_data, has_binary;
    bool data_read; /* t holds the data, read where they stood (in_data) */
    enum tile_dtype dtype;
    int rank;
    uint64_t binary_size;
    struct tile_v2_shm_ref shm;
    struct tile_tensor *t_owned; /* &t once t is initialised (NULL: nothing to free) */
    /* Written before they are read, so not cleared per input: */
    int64_t small[8]; /* the elements of a small input other than "input" (quick_input) */
    int64_t shape[TILE_MAX_RANK];
    struct tile_json_lexer data_at;
    struct tile_tensor t;
};

struct v2_ctx {
    struct tile_jr jr;
    struct tile_limits lim;
    struct tile_v2_request *r;
    int nin;
    struct v2_input *cur;
    const struct tile_v2_shm_source *shm;
    struct tile_v2_shm_ref *ref; /* the tensor whose parameters are being read */
    bool has_shm_offset;
    bool has_semantics, binary_all, binary_output_set, binary_output;
    struct v2_input in[V2_MAX_INPUTS]; /* only in[0..nin) are initialised */
};

static int max_rank_of(const struct v2_ctx *c)
{
    return c->lim.max_rank > 0 && c->lim.max_rank < TILE_MAX_RANK ? c->lim.max_rank : TILE_MAX_RANK;
}

/* ---- one input object ------------------------------------------------- */

static int in_name(void *p)
{
    struct v2_ctx *c = p;
    c->cur->has_name = true;
    return tile_jr_string(&c->jr, "input name", c->cur->name, sizeof(c->cur->name), &c->cur->name_len);
}

static int in_shape(void *p)
{
    struct v2_ctx *c = p;
    c->cur->has_shape = true;
    if (tile_jr_int_list(&c->jr, "shape", c->cur->shape, max_rank_of(c), &c->cur->rank) < 0)
        return -1;
    for (int i = 0; i < c->cur->rank; i++) {
        if (c->cur->shape[i] < 0)
            return tile_error_set(c->jr.e, TILE_EINVAL, "shape[%d] is %lld; dimensions must be >= 0", i,
                                  (long long)c->cur->shape[i]);
    }
    return 0;
}

static int in_datatype(void *p)
{
    struct v2_ctx *c = p;
    char name[32];
    size_t len;
    if (tile_jr_string(&c->jr, "datatype", name, sizeof(name), &len) < 0)
        return -1;
    c->cur->dtype = tile_dtype_parse_kserve(name, len);
    if (c->cur->dtype == TILE_DTYPE_INVALID)
        return tile_error_set(c->jr.e, TILE_EINVAL,
                              "unknown datatype '%.*s' (expected BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, "
                              "FP64, BYTES, COMPLEX64 or COMPLEX128)",
                              (int)len, name);
    c->cur->has_dtype = true;
    return 0;
}

static int read_json_tensor(struct v2_ctx *c, struct v2_input *in, struct tile_json_lexer *lx, struct tile_error *e);

static int in_data(void *p)
{
    struct v2_ctx *c = p;
    struct v2_input *in = c->cur;
    struct tile_json_token t;
    in->data_at = c->jr.lx; /* read from here once datatype and shape are known (if has_data) */
    if (tile_jr_next(&c->jr, &t) < 0)
        return -1;
    if (t.type == TILE_JSON_NULL)
        return 0; /* "data": null is no data (the binary case, as KServe sends it) */
    in->has_data = true;
    /* Clients send datatype and shape first: then the data are read where
     * they stand, from a copy of the position, instead of being skipped and
     * read again. Only a success counts; otherwise the data are skipped and
     * read_tensors reads them again, so every error (and which error comes
     * first) is what it is without this shortcut; hence the error of the
     * attempt goes to a scratch error, as the first error set is kept. */
    if (in->has_dtype && in->has_shape && !in->has_binary && !in->shm.used) {
        struct tile_json_lexer lx = in->data_at;
        struct tile_error scratch;
        tile_error_clear(&scratch);
        if (read_json_tensor(c, in, &lx, &scratch) == 0) {
            in->data_read = true;
            in->t_owned = &in->t;
            c->jr.lx = lx; /* just after the value, as after the skip */
            return 0;
        }
    }
    return tile_json_skip_value(&c->jr.lx, &t, c->jr.e);
}

static int in_binary_size(void *p)
{
    struct v2_ctx *c = p;
    int64_t n;
    if (tile_jr_int(&c->jr, "binary_data_size", &n) < 0)
        return -1;
    if (n < 0)
        return tile_error_set(c->jr.e, TILE_EINVAL, "binary_data_size is %lld; it must be >= 0", (long long)n);
    c->cur->has_binary = true;
    c->cur->binary_size = (uint64_t)n;
    return 0;
}

/* ---- shared-memory parameters (inputs and outputs) ---------------------- */

static int shm_region(void *p)
{
    struct v2_ctx *c = p;
    char name[TILE_V2_REGION_MAX + 1];
    size_t len;
    if (tile_jr_string(&c->jr, "shared_memory_region", name, sizeof(name), &len) < 0)
        return -1;
    return tile_v2_shm_region_set(c->ref, name, len, c->jr.e);
}

static int shm_uint(struct v2_ctx *c, const char *what, uint64_t *out)
{
    int64_t n;
    if (tile_jr_int(&c->jr, what, &n) < 0)
        return -1;
    return tile_v2_shm_uint(what, n, out, c->jr.e);
}

static int shm_offset(void *p)
{
    struct v2_ctx *c = p;
    c->has_shm_offset = true;
    return shm_uint(c, "shared_memory_offset", &c->ref->offset);
}

static int shm_byte_size(void *p)
{
    struct v2_ctx *c = p;
    c->ref->has_byte_size = true;
    return shm_uint(c, "shared_memory_byte_size", &c->ref->byte_size);
}

/* The parameter object of a tensor, with the shared-memory keys besides
 * `first` (binary_data_size for inputs, binary_data for outputs). */
static int tensor_parameters(struct v2_ctx *c, struct tile_v2_shm_ref *ref, const struct tile_jr_key *first,
                             const char *where, const char *what)
{
    const struct tile_jr_key keys[] = {*first, TILE_JR_KEY("shared_memory_region", shm_region),
                                       TILE_JR_KEY("shared_memory_offset", shm_offset),
                                       TILE_JR_KEY("shared_memory_byte_size", shm_byte_size)};
    c->ref = ref;
    c->has_shm_offset = false;
    if (tile_jr_object(&c->jr, c, keys, 4, where, "binary_data_size or shared_memory_*", true) < 0)
        return -1;
    return tile_v2_shm_ref_check(ref, c->has_shm_offset, what, c->jr.e);
}

static int in_parameters(void *p)
{
    static const struct tile_jr_key binary = TILE_JR_KEY("binary_data_size", in_binary_size);
    struct v2_ctx *c = p;
    char what[48];
    snprintf(what, sizeof(what), "input '%.*s'", (int)c->cur->name_len, c->cur->name);
    return tensor_parameters(c, &c->cur->shm, &binary, "input parameters", c->cur->has_name ? what : "an input");
}

static int read_input(void *p)
{
    struct v2_ctx *c = p;
    static const struct tile_jr_key keys[] = {TILE_JR_KEY("name", in_name), TILE_JR_KEY("shape", in_shape),
                                              TILE_JR_KEY("datatype", in_datatype),
                                              TILE_JR_KEY("parameters", in_parameters), TILE_JR_KEY("data", in_data)};
    if (c->nin == V2_MAX_INPUTS) {
        /* tile_jr_array leaves the element's first token to us: a syntax
         * error there comes first, as it does for every element. */
        struct tile_json_lexer lx = c->jr.lx;
        struct tile_json_token t;
        if (tile_json_next(&lx, &t, c->jr.e) < 0)
            return -1;
        return tile_error_set(c->jr.e, TILE_EINVAL, "too many inputs (the tile model takes at most 3)");
    }
    c->cur = &c->in[c->nin++];
    memset(c->cur, 0, offsetof(struct v2_input, shape)); /* small requests: clear only what is read */
    if (tile_jr_object(&c->jr, c, keys, 5, "an input", "name, shape, datatype, parameters or data", true) < 0)
        return -1;
    struct v2_input *in = c->cur;
    const char *missing = !in->has_name ? "name" : !in->has_shape ? "shape" : !in->has_dtype ? "datatype" : NULL;
    if (missing)
        return tile_error_set(c->jr.e, TILE_EINVAL, "input %d has no '%s'", c->nin - 1, missing);
    if ((int)in->has_data + (int)in->has_binary + (int)in->shm.used != 1)
        return tile_error_set(c->jr.e, TILE_EINVAL,
                              "input '%.*s' must set exactly one of 'data' and 'binary_data_size' in 'parameters' "
                              "(or, in shared memory, 'shared_memory_region' in 'parameters')",
                              (int)in->name_len, in->name);
    return 0;
}

static int key_inputs(void *p)
{
    struct v2_ctx *c = p;
    return tile_jr_array(&c->jr, c, read_input, "inputs");
}

/* ---- outputs and parameters -------------------------------------------- */

static int out_binary(void *p)
{
    struct v2_ctx *c = p;
    c->binary_output_set = true;
    return tile_jr_bool(&c->jr, "binary_data", &c->binary_output);
}

static int out_name(void *p)
{
    struct v2_ctx *c = p;
    char name[64];
    size_t len;
    if (tile_jr_string(&c->jr, "output name", name, sizeof(name), &len) < 0)
        return -1;
    return tile_v2_output_name(name, len, c->jr.e);
}

static int out_parameters(void *p)
{
    static const struct tile_jr_key binary = TILE_JR_KEY("binary_data", out_binary);
    struct v2_ctx *c = p;
    if (tensor_parameters(c, &c->r->out_shm, &binary, "output parameters", "output 'output'") < 0)
        return -1;
    if (c->r->out_shm.used && c->binary_output_set && c->binary_output)
        return tile_error_set(c->jr.e, TILE_EINVAL, "output 'output' can't set both 'shared_memory_region' and "
                                                    "'binary_data'");
    return 0;
}

static int read_output(void *p)
{
    static const struct tile_jr_key keys[] = {TILE_JR_KEY("name", out_name), TILE_JR_KEY("parameters", out_parameters)};
    struct v2_ctx *c = p;
    return tile_jr_object(&c->jr, c, keys, 2, "an output", "name or parameters", true);
}

static int key_outputs(void *p)
{
    struct v2_ctx *c = p;
    return tile_jr_array(&c->jr, c, read_output, "outputs");
}

static int par_semantics(void *p)
{
    struct v2_ctx *c = p;
    char name[32];
    size_t len;
    if (tile_jr_string(&c->jr, "parameters.semantics", name, sizeof(name), &len) < 0)
        return -1;
    c->has_semantics = true;
    return tile_semantics_parse(name, len, &c->r->treq.semantics, c->jr.e);
}

static int par_binary_output(void *p)
{
    struct v2_ctx *c = p;
    return tile_jr_bool(&c->jr, "parameters.binary_data_output", &c->binary_all);
}

static int key_parameters(void *p)
{
    static const struct tile_jr_key keys[] = {TILE_JR_KEY("semantics", par_semantics),
                                              TILE_JR_KEY("binary_data_output", par_binary_output)};
    struct v2_ctx *c = p;
    return tile_jr_object(&c->jr, c, keys, 2, "parameters", "semantics or binary_data_output", true);
}

static int key_id(void *p)
{
    struct v2_ctx *c = p;
    c->r->has_id = true;
    return tile_jr_string(&c->jr, "id", c->r->id, sizeof(c->r->id), &c->r->id_len);
}

/* The body may name the model and version (KServe's client always names the
 * model); they must be the ones the URL addresses, or the client is talking
 * to something other than it believes. */
static int key_model_name(void *p)
{
    struct v2_ctx *c = p;
    char name[64];
    size_t len;
    if (tile_jr_string(&c->jr, "model_name", name, sizeof(name), &len) < 0)
        return -1;
    if (len != 4 || memcmp(name, "tile", 4) != 0)
        return tile_error_set(c->jr.e, TILE_EINVAL,
                              "model_name '%.*s' in the request does not match the model 'tile' in the URL", (int)len,
                              name);
    return 0;
}

static int key_model_version(void *p)
{
    struct v2_ctx *c = p;
    char text[24];
    size_t len;
    if (tile_jr_string(&c->jr, "model_version", text, sizeof(text), &len) < 0)
        return -1;
    if (len == 0)
        return 0; /* "" names no version (the protocol's own default), as clients send it */
    char want[16];
    int n = snprintf(want, sizeof(want), "%d", c->r->version);
    if ((size_t)n != len || memcmp(text, want, len) != 0)
        return tile_error_set(c->jr.e, TILE_EINVAL,
                              "model_version '%.*s' in the request does not match version %s of the URL (a version "
                              "is chosen by the URL: /v2/models/tile/versions/N/infer)",
                              (int)len, text, want);
    return 0;
}

/* ---- tensors ----------------------------------------------------------- */

static int read_json_tensor(struct v2_ctx *c, struct v2_input *in, struct tile_json_lexer *lx, struct tile_error *e)
{
    struct tile_json_data_opts o = {
        .dtype = in->dtype,
        .rank = in->rank,
        .shape = in->shape,
        .complex_form = TILE_JSON_COMPLEX_INTERLEAVED,
        .max_rank = max_rank_of(c),
        .max_bytes = c->lim.max_body,
        .name = "data",
    };
    return tile_json_read_data(lx, &o, &in->t, e);
}

static int read_binary_tensor(struct v2_ctx *c, struct v2_input *in, const void *bytes, uint64_t len)
{
    return tile_v2_raw_tensor(bytes, len, in->dtype, in->rank, in->shape, &c->lim, &in->t, c->jr.e);
}

static int read_shm_tensor(struct v2_ctx *c, struct v2_input *in)
{
    const struct tile_v2_tensor_desc d = {.name = in->name, .name_len = in->name_len, .dtype = in->dtype,
                                          .rank = in->rank, .shape = in->shape, .shm = &in->shm};
    return tile_v2_shm_input(c->shm, &d, c->r->out_shm.used, &c->lim, &in->t, c->jr.e);
}

/* Maps the decoded inputs onto the tile request (v2_model.c). */
static int map_inputs(struct v2_ctx *c)
{
    struct tile_v2_named_tensor named[V2_MAX_INPUTS];
    for (int i = 0; i < c->nin; i++)
        named[i] = (struct tile_v2_named_tensor){.name = c->in[i].name, .name_len = c->in[i].name_len, .t = &c->in[i].t};
    return tile_v2_map_inputs(c->r, named, c->nin, c->has_semantics, &c->lim, c->jr.e);
}

static int read_tensors(struct v2_ctx *c, const char *blob, uint64_t blob_len)
{
    uint64_t off = 0;
    for (int i = 0; i < c->nin; i++) {
        struct v2_input *in = &c->in[i];
        if (in->has_data) { /* tile_json_read_data clears the tensor first, whatever happens */
            in->t_owned = &in->t;
            if (!in->data_read && read_json_tensor(c, in, &in->data_at, c->jr.e) < 0) /* the copy is used up */
                return -1;
            continue;
        }
        memset(&in->t, 0, sizeof(in->t));
        in->t_owned = &in->t; /* freeable from here on, whatever happens */
        if (in->shm.used) {
            if (read_shm_tensor(c, in) < 0)
                return -1;
            continue;
        }
        if (in->binary_size > blob_len - off)
            return tile_error_set(c->jr.e, TILE_EINVAL,
                                  "input '%.*s' has binary_data_size %llu but only %llu bytes of binary data remain",
                                  (int)in->name_len, in->name, (unsigned long long)in->binary_size,
                                  (unsigned long long)(blob_len - off));
        if (read_binary_tensor(c, in, blob + off, in->binary_size) < 0)
            return -1;
        off += in->binary_size;
    }
    if (off != blob_len)
        return tile_error_set(c->jr.e, TILE_EINVAL,
                              "%llu bytes of binary data follow the header but the inputs account for %llu",
                              (unsigned long long)blob_len, (unsigned long long)off);
    return 0;
}

/* ---- the usual request, in one pass (jsonquick.h) ---------------------------- */

/* One input of the usual layout: "name", "shape", "datatype" and "data" (a
 * flat array of numbers) in any order but with "data" after "shape" and
 * "datatype", as clients write them, and no other key. Fills *in as
 * read_input and in_data leave it when the data were read where they stood. */
static bool quick_input(struct v2_ctx *c, struct tile_jq *q, struct v2_input *in)
{
    memset(in, 0, offsetof(struct v2_input, shape));
    if (!tile_jq_char(q, '{'))
        return false;
    do {
        const char *s;
        size_t len;
        if (!tile_jq_char(q, '"'))
            return false;
        if (tile_jq_take(q, "name\"", 5)) {
            if (in->has_name)
                return false; /* a duplicate */
            if (!tile_jq_member_string(q, &s, &len, sizeof(in->name)))
                return false;
            memcpy(in->name, s, len);
            in->name_len = len;
            in->has_name = true;
        } else if (tile_jq_take(q, "shape\"", 6)) {
            if (in->has_shape)
                return false; /* a duplicate */
            if (!tile_jq_shape(q, in->shape, max_rank_of(c), &in->rank))
                return false;
            in->has_shape = true;
        } else if (tile_jq_take(q, "datatype\"", 9)) {
            if (in->has_dtype)
                return false; /* a duplicate */
            if (!tile_jq_member_string(q, &s, &len, 32))
                return false;
            in->dtype = tile_dtype_parse_kserve(s, len);
            if (in->dtype == TILE_DTYPE_INVALID)
                return false;
            in->has_dtype = true;
        } else if (tile_jq_take(q, "data\"", 5)) {
            if (in->has_data || !in->has_shape || !in->has_dtype)
                return false; /* a duplicate, or data before what reads them */
            in->t_owned = &in->t; /* freeable whatever tile_jq_tensor returns */
            /* Every input but "input", whose tensor the request takes, is
             * read and dropped by tile_v2_map_inputs while this context
             * lives: a small one is read into it. */
            bool kept = !in->has_name || (in->name_len == 5 && memcmp(in->name, "input", 5) == 0);
            if (!tile_jq_tensor_in(q, &in->t, in->dtype, in->rank, in->shape, c->lim.max_body, kept ? NULL : in->small,
                                   kept ? 0 : sizeof(in->small)))
                return false;
            in->has_data = in->data_read = true;
        } else {
            return false;
        }
    } while (tile_jq_char(q, ','));
    return tile_jq_char(q, '}') && in->has_name && in->has_data;
}

/* "outputs" as clients name the one output: objects of "name" ("output")
 * and "parameters" {"binary_data": bool}, each at most once, in any order.
 * Fills the context as read_output does. */
static bool quick_outputs(struct v2_ctx *c, struct tile_jq *q)
{
    if (!tile_jq_char(q, ':') || !tile_jq_char(q, '['))
        return false;
    do {
        bool has_name = false, has_parameters = false;
        if (!tile_jq_char(q, '{'))
            return false;
        do {
            const char *s;
            size_t len;
            struct tile_error scratch = {0};
            if (!tile_jq_char(q, '"'))
                return false;
            if (tile_jq_take(q, "name\"", 5)) {
                if (has_name || !tile_jq_member_string(q, &s, &len, 64) ||
                    tile_v2_output_name(s, len, &scratch) < 0)
                    return false;
                has_name = true;
            } else if (tile_jq_take(q, "parameters\"", 11)) {
                if (has_parameters || !tile_jq_char(q, ':') || !tile_jq_char(q, '{') || !tile_jq_char(q, '"') ||
                    !tile_jq_take(q, "binary_data\"", 12) || !tile_jq_member_bool(q, &c->binary_output) ||
                    !tile_jq_char(q, '}'))
                    return false;
                c->binary_output_set = has_parameters = true;
            } else {
                return false;
            }
        } while (tile_jq_char(q, ','));
        if (!tile_jq_char(q, '}'))
            return false;
    } while (tile_jq_char(q, ','));
    return tile_jq_char(q, ']');
}

/* The whole JSON header of the usual request - {"inputs": [...]} and maybe
 * an "id", "model_name" and "model_version" naming this model (KServe's
 * client), the "outputs" above and "parameters" {"binary_data_output":
 * bool} (tritonclient) - filling the context as parse_header
 * would. False: the general reader decides (the caller frees what this
 * made). */
static bool quick_header(struct v2_ctx *c, const char *json, size_t len)
{
    struct tile_jq q;
    bool has_inputs = false, has_outputs = false, has_parameters = false, has_model_name = false,
         has_model_version = false;
    if (c->jr.lx.max_depth < 4) /* the request object, "inputs", an input, its data */
        return false;
    tile_jq_init(&q, json, len);
    if (!tile_jq_char(&q, '{'))
        return false;
    do {
        if (!tile_jq_char(&q, '"'))
            return false;
        if (tile_jq_take(&q, "inputs\"", 7)) {
            if (has_inputs)
                return false; /* a duplicate */
            if (!tile_jq_char(&q, ':') || !tile_jq_char(&q, '['))
                return false;
            do {
                if (c->nin == V2_MAX_INPUTS || !quick_input(c, &q, &c->in[c->nin++]))
                    return false;
            } while (tile_jq_char(&q, ','));
            if (!tile_jq_char(&q, ']'))
                return false;
            has_inputs = true;
        } else if (tile_jq_take(&q, "id\"", 3)) {
            if (c->r->has_id)
                return false; /* a duplicate */
            const char *s;
            size_t slen;
            if (!tile_jq_member_string(&q, &s, &slen, sizeof(c->r->id)))
                return false;
            memcpy(c->r->id, s, slen);
            c->r->id_len = slen;
            c->r->has_id = true;
        } else if (tile_jq_take(&q, "model_name\"", 11)) { /* KServe's client always names it */
            const char *s;
            size_t slen;
            if (has_model_name || !tile_jq_member_string(&q, &s, &slen, 64) || slen != 4 || memcmp(s, "tile", 4) != 0)
                return false;
            has_model_name = true;
        } else if (tile_jq_take(&q, "model_version\"", 14)) {
            const char *s;
            size_t slen;
            char want[16];
            int n = snprintf(want, sizeof(want), "%d", c->r->version);
            if (has_model_version || !tile_jq_member_string(&q, &s, &slen, 24) ||
                (slen && ((size_t)n != slen || memcmp(s, want, slen) != 0)))
                return false;
            has_model_version = true;
        } else if (tile_jq_take(&q, "outputs\"", 8)) {
            if (has_outputs || !quick_outputs(c, &q))
                return false;
            has_outputs = true;
        } else if (tile_jq_take(&q, "parameters\"", 11)) {
            if (has_parameters || !tile_jq_char(&q, ':') || !tile_jq_char(&q, '{') || !tile_jq_char(&q, '"') ||
                !tile_jq_take(&q, "binary_data_output\"", 19) || !tile_jq_member_bool(&q, &c->binary_all) ||
                !tile_jq_char(&q, '}'))
                return false;
            has_parameters = true;
        } else {
            return false;
        }
    } while (tile_jq_char(&q, ','));
    return tile_jq_char(&q, '}') && has_inputs && tile_jq_end(&q);
}

/* Undoes a declined quick_header: the general reader starts afresh. */
static void quick_undo(struct v2_ctx *c)
{
    for (int i = 0; i < c->nin; i++)
        tile_tensor_free(c->in[i].t_owned);
    c->nin = 0;
    c->r->id_len = 0;
    c->r->has_id = false;
    c->binary_all = c->binary_output_set = c->binary_output = false;
}

/* ---- entry points ---------------------------------------------------------- */

static int parse_header(struct v2_ctx *c)
{
    static const struct tile_jr_key keys[] = {TILE_JR_KEY("id", key_id),
                                              TILE_JR_KEY("parameters", key_parameters),
                                              TILE_JR_KEY("inputs", key_inputs),
                                              TILE_JR_KEY("outputs", key_outputs),
                                              TILE_JR_KEY("model_name", key_model_name),
                                              TILE_JR_KEY("model_version", key_model_version)};
    if (tile_jr_object(&c->jr, c, keys, 6, "the request", "id, parameters, inputs or outputs", true) < 0)
        return -1;
    struct tile_json_token t;
    if (tile_jr_next(&c->jr, &t) < 0)
        return -1;
    if (c->nin == 0)
        return tile_error_set(c->jr.e, TILE_EINVAL, "the request has no 'inputs'");
    return 0;
}

int tile_v2_decode(const char *body, size_t len, int64_t header_len, int version, const struct tile_limits *lim,
                   struct tile_v2_request *r, struct tile_error *e)
{
    return tile_v2_decode_shm(body, len, header_len, version, lim, NULL, r, e);
}

int tile_v2_decode_shm(const char *body, size_t len, int64_t header_len, int version, const struct tile_limits *lim,
                       const struct tile_v2_shm_source *shm, struct tile_v2_request *r, struct tile_error *e)
{
    /* Every field but the id's bytes, which count only up to id_len: the
     * request is large and this is on the path of every call. */
    r->version = version;
    tile_request_init(&r->treq);
    r->id[0] = '\0';
    r->id_len = 0;
    r->has_id = false;
    r->binary_output = false;
    memset(&r->out_shm, 0, sizeof(r->out_shm));
    if (header_len > (int64_t)len || header_len == 0 || header_len < -1)
        return tile_error_set(e, TILE_EINVAL,
                              "Inference-Header-Content-Length is %lld but the body has %zu bytes (it must be in 1..%zu)",
                              (long long)header_len, len, len);
    size_t hlen = header_len < 0 ? len : (size_t)header_len;
    struct v2_ctx ctx; /* a few KB: on the stack, as a heap block this size costs more than the decode */
    struct v2_ctx *c = &ctx;
    memset(c, 0, offsetof(struct v2_ctx, in));
    c->jr.e = e;
    c->lim = *lim;
    c->r = r;
    c->shm = shm;
    tile_json_lexer_init(&c->jr.lx, body, hlen, lim->max_depth > 0 ? lim->max_depth : TILE_JSON_MAX_DEPTH);
    int rc = 0;
    if (tile_jq_enabled() && quick_header(c, body, hlen)) {
        tile_jq_note_taken();
    } else {
        quick_undo(c);
        rc = parse_header(c);
    }
    if (rc == 0)
        rc = read_tensors(c, body + hlen, len - hlen);
    if (rc == 0)
        rc = map_inputs(c);
    r->binary_output = !r->out_shm.used && (c->binary_output_set ? c->binary_output : c->binary_all);
    for (int i = 0; i < c->nin; i++)
        tile_tensor_free(c->in[i].t_owned);
    return rc;
}

void tile_v2_request_free(struct tile_v2_request *r)
{
    tile_request_free(&r->treq);
}

#define V2_ID_MEMBER_MAX (TILE_V2_ID_MAX * 6 + 16)

/* `"id":"...",` when the request has an id, else "": its length into *len. */
static int id_member(const struct tile_v2_request *r, char *id, size_t *len, struct tile_error *e)
{
    id[0] = '\0';
    *len = 0;
    if (!r->has_id)
        return 0;
    long n = tile_json_escape_string(r->id, r->id_len, NULL, 0);
    if (n < 0 || (size_t)n + 8 > V2_ID_MEMBER_MAX)
        return tile_error_set(e, TILE_EINVAL, "the request id is not valid UTF-8");
    memcpy(id, "\"id\":", 5);
    tile_json_escape_string(r->id, r->id_len, id + 5, (size_t)n);
    memcpy(id + 5 + n, ",", 2);
    *len = (size_t)n + 6;
    return 0;
}

/* The response up to and including the output's shape, then `rest`. */
static int response_head(const struct tile_v2_request *r, const struct tile_plan *plan, const char *rest,
                         size_t rest_len, char *head, size_t cap, size_t *len, struct tile_error *e)
{
    char id[V2_ID_MEMBER_MAX];
    size_t id_len;
    if (id_member(r, id, &id_len, e) < 0)
        return -1;
    struct tile_text t = {head, cap, 0, false};
    tile_text_str(&t, "{");
    tile_text_put(&t, id, id_len);
    tile_text_str(&t, "\"model_name\":\"tile\",\"model_version\":\"");
    tile_text_i64(&t, r->version);
    tile_text_str(&t, "\",\"outputs\":[{\"name\":\"output\",\"datatype\":\"");
    tile_text_str(&t, tile_dtype_traits(plan->dtype)->kserve);
    tile_text_str(&t, "\",\"shape\":[");
    for (int i = 0; i < plan->out_rank; i++) {
        if (i)
            tile_text_str(&t, ",");
        tile_text_i64(&t, plan->out_shape[i]);
    }
    tile_text_str(&t, "]");
    tile_text_put(&t, rest, rest_len);
    if (t.over)
        return tile_error_set(e, TILE_EINVAL, "the response header does not fit");
    *len = t.len;
    return 0;
}

int tile_v2_response_shm(const struct tile_v2_request *r, const struct tile_plan *plan, char *head, size_t cap,
                         size_t *len, struct tile_error *e)
{
    return response_head(r, plan, "}]}", 3, head, cap, len, e);
}

int tile_v2_response_frame(const struct tile_v2_request *r, const struct tile_plan *plan, uint64_t binary_size,
                           char *head, size_t cap, size_t *head_len, const char **tail, size_t *tail_len,
                           struct tile_error *e)
{
    char rest[64] = ",\"data\":[";
    int rest_len = sizeof(",\"data\":[") - 1;
    if (r->binary_output)
        rest_len = snprintf(rest, sizeof(rest), ",\"parameters\":{\"binary_data_size\":%llu}}]}",
                            (unsigned long long)binary_size);
    *tail = r->binary_output ? "" : "]}]}";
    *tail_len = r->binary_output ? 0 : 4;
    return response_head(r, plan, rest, (size_t)rest_len, head, cap, head_len, e);
}

const int tile_v2_versions[TILE_V2_NVERSIONS] = {13, 6, 1};

int tile_v2_version_slot(int version)
{
    for (int i = 0; i < TILE_V2_NVERSIONS; i++) {
        if (tile_v2_versions[i] == version)
            return i;
    }
    return -1;
}

int tile_v2_version_parse(const char *s, size_t len, int *version)
{
    size_t i = len && s[0] == '+';
    long v = 0;
    *version = 0;
    if (!len)
        return 0;
    if (i == len)
        return -1;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v < 100000000 ? v * 10 + (s[i] - '0') : 100000000; /* no version is that large */
    }
    *version = v && v < 100000000 && tile_v2_version_slot((int)v) >= 0 ? (int)v : -1;
    return 0;
}

/* ---- model metadata and configuration ----------------------------------- */

/* {"name","datatype","shape"} for metadata; {"name","data_type","dims"}
 * for the configuration, whose type names are Triton's TYPE_<datatype>
 * (true of every datatype listed here; BYTES would be TYPE_STRING). */
static json_t *tensor_doc(const struct tile_v2_tensor_sig *t, bool config)
{
    const char *datatype = tile_dtype_traits(t->dtype)->kserve;
    if (!config)
        return json_pack("{s:s, s:s, s:[I]}", "name", t->name, "datatype", datatype, "shape", (json_int_t)t->dim);
    char type[32];
    snprintf(type, sizeof(type), "TYPE_%s", datatype);
    return json_pack("{s:s, s:s, s:[I]}", "name", t->name, "data_type", type, "dims", (json_int_t)t->dim);
}

static json_t *inputs_doc(int version, bool config)
{
    size_t n;
    const struct tile_v2_tensor_sig *in = tile_v2_model_inputs(version, &n);
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        if (json_array_append_new(list, tensor_doc(&in[i], config)) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

/* Serialises and releases `doc` (NULL stays NULL). */
static char *dump(json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}


char *tile_v2_model_metadata(int version)
{
    json_t *versions = json_array();
    for (int i = TILE_V2_NVERSIONS - 1; versions && i >= 0; i--) { /* oldest first, as Triton lists them */
        char v[16];
        snprintf(v, sizeof(v), "%d", tile_v2_versions[i]);
        json_array_append_new(versions, json_string(v));
    }
    return dump(json_pack("{s:s, s:o, s:s, s:o, s:[o]}", "name", "tile", "versions", versions, "platform",
                          TILE_V2_PLATFORM, "inputs", inputs_doc(version, false), "outputs", tensor_doc(&tile_v2_model_output, false)));
}

char *tile_v2_model_config(int version)
{
    return dump(json_pack("{s:s, s:s, s:s, s:{s:{s:[i]}}, s:i, s:o, s:[o]}", "name", "tile", "platform",
                          TILE_V2_PLATFORM, "backend", "tiled", "version_policy", "specific", "versions", version,
                          "max_batch_size", 0, "input", inputs_doc(version, true), "output",
                          tensor_doc(&tile_v2_model_output, true)));
}
