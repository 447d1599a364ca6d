/* v1_json.c - the /v1/tile JSON request body (tile_v1_json_decode, request.h).
 *
 *   {"input": {"dtype": "float32", "shape": [2,2], "data": [1,2,3,4]},
 *    "repeats": [1,2], "semantics": "onnx"}
 *
 * DESIGN. A single pass over the lexer with one small handler per key,
 * chosen from a table per object by jsonread.c (shared with the Open
 * Inference Protocol decoder), so unknown and duplicate keys and badly typed
 * values are caught and reported the same way everywhere, and each field's
 * rules sit in one function. Keys may come in any order, but the elements
 * of "data" can only be converted once the dtype is known: when "data" comes
 * first, a copy of the lexer (a plain value) marks where it starts, the value
 * is skipped, and it is read from the copy when the input object closes.
 * "shape" is optional: when it arrives before the data the elements go
 * straight into a tensor of that shape; otherwise the shape is inferred from
 * the nesting and checked against "shape" at the end, with the same rules
 * (jsondata.c). Whether the fields fit the chosen semantics (repeats vs
 * tiles/axis) is tile_request_spec()'s business.
 */
#include <stddef.h>
#include <string.h>

#include "jsondata.h"
#include "jsonquick.h"
#include "jsonread.h"
#include "request.h"

struct v1_ctx {
    struct tile_limits lim;
    struct tile_request *r;
    /* the input object */
    bool has_input, has_dtype, has_shape, has_data, data_read, data_shaped;
    enum tile_dtype dtype;
    int rank;
    /* Set before they are read, so not cleared (tile_v1_json_decode): */
    struct tile_jr jr; /* the lexer and the error */
    int64_t shape[TILE_MAX_RANK];
    struct tile_json_lexer data_at; /* before the "data" value, when it came before "dtype" */
};

static int max_rank_of(const struct v1_ctx *c)
{
    return c->lim.max_rank > 0 && c->lim.max_rank < TILE_MAX_RANK ? c->lim.max_rank : TILE_MAX_RANK;
}

/* ---- top-level keys ------------------------------------------------------- */

static int key_repeats(void *ctx)
{
    struct v1_ctx *c = ctx;
    c->r->has_repeats = true;
    return tile_jr_int_list(&c->jr, "repeats", c->r->repeats, TILE_MAX_RANK, &c->r->nrepeats);
}

static int key_tiles(void *ctx)
{
    struct v1_ctx *c = ctx;
    c->r->has_tiles = true;
    return tile_jr_int(&c->jr, "tiles", &c->r->tiles);
}

static int key_axis(void *ctx)
{
    struct v1_ctx *c = ctx;
    c->r->has_axis = true;
    return tile_jr_int(&c->jr, "axis", &c->r->axis);
}

static int key_semantics(void *ctx)
{
    struct v1_ctx *c = ctx;
    char name[64];
    size_t len;
    if (tile_jr_string(&c->jr, "semantics", name, sizeof(name), &len) < 0)
        return -1;
    c->r->has_semantics = true;
    return tile_semantics_parse(name, len, &c->r->semantics, c->jr.e);
}

/* ---- input keys ----------------------------------------------------------- */

static int key_dtype(void *ctx)
{
    struct v1_ctx *c = ctx;
    char name[64], known[400];
    size_t len;
    if (tile_jr_string(&c->jr, "dtype", name, sizeof(name), &len) < 0)
        return -1;
    c->dtype = tile_dtype_parse(name, len);
    if (c->dtype == TILE_DTYPE_INVALID)
        return tile_error_set(c->jr.e, TILE_EINVAL, "unknown dtype '%.*s' (known: %s)", (int)len, name,
                              tile_dtype_list(known, sizeof(known)));
    c->has_dtype = true;
    return 0;
}

static int key_shape(void *ctx)
{
    struct v1_ctx *c = ctx;
    if (tile_jr_int_list(&c->jr, "shape", c->shape, max_rank_of(c), &c->rank) < 0)
        return -1;
    for (int i = 0; i < c->rank; i++) {
        if (c->shape[i] < 0)
            return tile_error_set(c->jr.e, TILE_EINVAL, "shape[%d] is %lld; dimensions must be >= 0", i,
                                  (long long)c->shape[i]);
    }
    c->has_shape = true;
    return 0;
}

static int read_data_from(struct v1_ctx *c, struct tile_json_lexer *lx)
{
    struct tile_json_data_opts o = {
        .dtype = c->dtype,
        .rank = c->has_shape ? c->rank : -1,
        .shape = c->shape,
        .complex_form = TILE_JSON_COMPLEX_PAIRS,
        .max_rank = max_rank_of(c),
        .max_bytes = c->lim.max_body,
        .name = "data",
    };
    if (tile_json_read_data(lx, &o, &c->r->input, c->jr.e) < 0)
        return -1;
    c->data_read = true;
    c->data_shaped = c->has_shape;
    return 0;
}

static int key_data(void *ctx)
{
    struct v1_ctx *c = ctx;
    struct tile_json_token t;
    c->has_data = true;
    if (c->has_dtype)
        return read_data_from(c, &c->jr.lx);
    c->data_at = c->jr.lx; /* read from here once the dtype is known */
    if (tile_jr_next(&c->jr, &t) < 0)
        return -1;
    return tile_json_skip_value(&c->jr.lx, &t, c->jr.e);
}

static int finish_input(struct v1_ctx *c)
{
    if (!c->has_dtype)
        return tile_error_set(c->jr.e, TILE_EINVAL, "input.dtype is missing");
    if (!c->has_data)
        return tile_error_set(c->jr.e, TILE_EINVAL, "input.data is missing");
    if (!c->data_read) {
        struct tile_json_lexer lx = c->data_at;
        return read_data_from(c, &lx);
    }
    if (c->has_shape && !c->data_shaped)
        return tile_json_data_apply_shape(&c->r->input, c->rank, c->shape, "data", c->jr.e);
    return 0;
}

static int key_input(void *ctx)
{
    static const struct tile_jr_key input_keys[] = {TILE_JR_KEY("dtype", key_dtype), TILE_JR_KEY("shape", key_shape),
                                                    TILE_JR_KEY("data", key_data)};
    struct v1_ctx *c = ctx;
    c->has_input = true;
    if (tile_jr_object(&c->jr, c, input_keys, 3, "input", "dtype, shape or data", false) < 0)
        return -1;
    return finish_input(c);
}

/* ---- the usual body, in one pass (jsonquick.h) ------------------------------ */

/* "input" as clients write it: "dtype", "shape" and "data" (a flat array of
 * numbers), the data last, nothing else. The data go into r->input. */
static bool quick_input(struct v1_ctx *c, struct tile_jq *q)
{
    if (!tile_jq_char(q, '{'))
        return false;
    do {
        const char *s;
        size_t len;
        if (!tile_jq_char(q, '"'))
            return false;
        if (tile_jq_take(q, "dtype\"", 6)) {
            if (c->has_dtype)
                return false; /* a duplicate */
            if (!tile_jq_member_string(q, &s, &len, 64))
                return false;
            c->dtype = tile_dtype_parse(s, len);
            if (c->dtype == TILE_DTYPE_INVALID)
                return false;
            c->has_dtype = true;
        } else if (tile_jq_take(q, "shape\"", 6)) {
            if (c->has_shape)
                return false; /* a duplicate */
            if (!tile_jq_shape(q, c->shape, max_rank_of(c), &c->rank))
                return false;
            c->has_shape = true;
        } else if (tile_jq_take(q, "data\"", 5)) {
            if (c->has_data || !c->has_dtype || !c->has_shape)
                return false; /* a duplicate, or data before what reads them */
            if (!tile_jq_tensor(q, &c->r->input, c->dtype, c->rank, c->shape, c->lim.max_body))
                return false;
            c->has_data = true;
        } else {
            return false;
        }
    } while (tile_jq_char(q, ','));
    return tile_jq_char(q, '}') && c->has_data;
}

/* The whole body of the usual request: "input", and "repeats" and
 * "semantics" if given. Fills r as the general reader would; false leaves
 * r as it was, but for an emptied input (the general reader decides). */
static bool quick_body(struct v1_ctx *c, const char *body, size_t len)
{
    struct tile_jq q;
    int64_t repeats[TILE_MAX_RANK];
    int nrepeats = 0;
    bool has_repeats = false, has_semantics = false;
    enum tile_semantics semantics = c->r->semantics;
    if (c->jr.lx.max_depth < 3) /* the body, "input", its data */
        return false;
    tile_jq_init(&q, body, len);
    if (!tile_jq_char(&q, '{'))
        return false;
    do {
        const char *s;
        size_t slen;
        if (!tile_jq_char(&q, '"'))
            return false;
        if (tile_jq_take(&q, "input\"", 6)) {
            if (c->has_input)
                return false; /* a duplicate */
            c->has_input = true;
            if (!tile_jq_char(&q, ':') || !quick_input(c, &q))
                return false;
        } else if (tile_jq_take(&q, "repeats\"", 8)) {
            if (has_repeats)
                return false; /* a duplicate */
            if (!tile_jq_char(&q, ':') || !tile_jq_ints(&q, repeats, TILE_MAX_RANK, &nrepeats))
                return false;
            has_repeats = true;
        } else if (tile_jq_take(&q, "semantics\"", 10)) {
            if (has_semantics)
                return false; /* a duplicate */
            struct tile_error scratch = {0};
            if (!tile_jq_member_string(&q, &s, &slen, 64) ||
                tile_semantics_parse(s, slen, &semantics, &scratch) < 0)
                return false;
            has_semantics = true;
        } else {
            return false;
        }
    } while (tile_jq_char(&q, ','));
    if (!tile_jq_char(&q, '}') || !c->has_input || !tile_jq_end(&q))
        return false;
    if (has_repeats) {
        memcpy(c->r->repeats, repeats, sizeof(repeats[0]) * (size_t)nrepeats);
        c->r->nrepeats = nrepeats;
        c->r->has_repeats = true;
    }
    if (has_semantics) {
        c->r->semantics = semantics;
        c->r->has_semantics = true;
    }
    return true;
}

int tile_v1_json_decode(const char *body, size_t len, const struct tile_limits *lim, struct tile_request *r,
                        struct tile_error *e)
{
    static const struct tile_jr_key top_keys[] = {
        TILE_JR_KEY("input", key_input), TILE_JR_KEY("repeats", key_repeats), TILE_JR_KEY("semantics", key_semantics),
        TILE_JR_KEY("tiles", key_tiles), TILE_JR_KEY("axis", key_axis),
    };
    struct v1_ctx c;
    struct tile_json_token t;
    memset(&c, 0, offsetof(struct v1_ctx, jr));
    if (lim)
        c.lim = *lim;
    c.r = r;
    c.jr.e = e;
    tile_json_lexer_init(&c.jr.lx, body, len, c.lim.max_depth);
    if (tile_jq_enabled()) {
        if (quick_body(&c, body, len)) {
            tile_jq_note_taken();
            return 0;
        }
        tile_tensor_free(&r->input); /* and the fields the one-pass reader sets: */
        c.has_input = c.has_dtype = c.has_shape = c.has_data = false;
    }
    if (tile_jr_object(&c.jr, &c, top_keys, 5, "the request body", "input, repeats, semantics, tiles or axis",
                       false) < 0)
        return -1;
    if (tile_jr_next(&c.jr, &t) < 0) /* only whitespace may follow */
        return -1;
    if (!c.has_input)
        return tile_error_set(e, TILE_EINVAL, "the request body has no \"input\"");
    return 0;
}
