/* v1_json.c - the /v1/tile JSON request body (tile_v1_json_decode, request.h).
 *
 *   {"input": {"dtype": "float32", "shape": [2,2], "data": [1,2,3,4]},
 *    "repeats": [1,2], "semantics": "onnx"}
 *
 * DESIGN. A single pass over the lexer with one small handler per key,
 * chosen from a table per object, so unknown and duplicate keys are caught
 * in one place and each field's rules sit in one function. Keys may come in
 * any order, but the elements of "data" can only be converted once the dtype
 * is known: when "data" comes first, a copy of the lexer (a plain value)
 * marks where it starts, the value is skipped, and it is read from the copy
 * when the input object closes. "shape" is optional: when it arrives before
 * the data the elements go straight into a tensor of that shape; otherwise
 * the shape is inferred from the nesting and checked against "shape" at the
 * end, with the same rules (jsondata.c). Whether the fields fit the chosen
 * semantics (repeats vs tiles/axis) is tile_request_spec()'s business.
 */
#include <stdio.h>
#include <string.h>

#include "jsondata.h"
#include "jsonlex.h"
#include "request.h"

struct v1_ctx {
    struct tile_json_lexer lx;
    struct tile_limits lim;
    struct tile_request *r;
    struct tile_error *e;
    /* the input object */
    bool has_input, has_dtype, has_shape, has_data, data_read, data_shaped;
    enum tile_dtype dtype;
    int rank;
    int64_t shape[TILE_MAX_RANK];
    struct tile_json_lexer data_at; /* before the "data" value, when it came before "dtype" */
};

typedef int (*key_handler)(struct v1_ctx *c);

struct key_rule {
    const char *name;
    key_handler fn;
};

#define TILE_KEY_SHOWN 40

static int max_rank_of(const struct v1_ctx *c)
{
    return c->lim.max_rank > 0 && c->lim.max_rank < TILE_MAX_RANK ? c->lim.max_rank : TILE_MAX_RANK;
}

static int next_token(struct v1_ctx *c, struct tile_json_token *t)
{
    return tile_json_next(&c->lx, t, c->e);
}

/* ---- field readers -------------------------------------------------------- */

/* "repeats[1]" or "tiles" for messages. */
static const char *label(char *buf, size_t cap, const char *what, int idx)
{
    if (idx < 0)
        snprintf(buf, cap, "%s", what);
    else
        snprintf(buf, cap, "%s[%d]", what, idx);
    return buf;
}

/* A JSON integer (no fraction, no exponent) into an int64. */
static int read_int(struct v1_ctx *c, const struct tile_json_token *t, const char *what, int idx, int64_t *out)
{
    char name[48];
    if (t->type != TILE_JSON_NUMBER)
        return tile_error_set(c->e, TILE_EINVAL, "%s must be an integer, not %s", label(name, sizeof(name), what, idx),
                              tile_json_type_name(t->type));
    int rc = tile_json_number_int64(t->ptr, t->len, 0, out);
    int shown = (int)(t->len > TILE_KEY_SHOWN ? TILE_KEY_SHOWN : t->len);
    if (rc == TILE_JSON_NUM_NOT_INTEGER)
        return tile_error_set(c->e, TILE_EINVAL, "%s must be an integer, got %.*s", label(name, sizeof(name), what, idx),
                              shown, t->ptr);
    if (rc != TILE_JSON_NUM_OK)
        return tile_error_set(c->e, TILE_EINVAL, "%s is %.*s, outside the 64-bit integer range",
                              label(name, sizeof(name), what, idx), shown, t->ptr);
    return 0;
}

static int read_int_list(struct v1_ctx *c, const char *what, int64_t *out, int max, int *count)
{
    struct tile_json_token t;
    if (next_token(c, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_ARRAY_BEGIN)
        return tile_error_set(c->e, TILE_EINVAL, "%s must be an array of integers, not %s", what,
                              tile_json_type_name(t.type));
    int n = 0;
    for (;;) {
        if (next_token(c, &t) < 0)
            return -1;
        if (t.type == TILE_JSON_ARRAY_END)
            break;
        if (n == max)
            return tile_error_set(c->e, TILE_EINVAL, "%s has more than %d values", what, max);
        if (read_int(c, &t, what, n, &out[n]) < 0)
            return -1;
        n++;
    }
    *count = n;
    return 0;
}

/* Reads a string value, unescaped, into buf (cap bytes); an error when the
 * value is not a string or does not fit. */
static int read_string(struct v1_ctx *c, const char *what, char *buf, size_t cap, size_t *len)
{
    struct tile_json_token t;
    if (next_token(c, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_STRING)
        return tile_error_set(c->e, TILE_EINVAL, "%s must be a string, not %s", what, tile_json_type_name(t.type));
    if (t.len > cap)
        return tile_error_set(c->e, TILE_EINVAL, "%s '%.*s...' is too long", what, TILE_KEY_SHOWN, t.ptr);
    *len = tile_json_unescape(&t, buf);
    return 0;
}

/* ---- top-level keys ------------------------------------------------------- */

static int key_repeats(struct v1_ctx *c)
{
    c->r->has_repeats = true;
    return read_int_list(c, "repeats", c->r->repeats, TILE_MAX_RANK, &c->r->nrepeats);
}

static int key_tiles(struct v1_ctx *c)
{
    struct tile_json_token t;
    c->r->has_tiles = true;
    return next_token(c, &t) < 0 ? -1 : read_int(c, &t, "tiles", -1, &c->r->tiles);
}

static int key_axis(struct v1_ctx *c)
{
    struct tile_json_token t;
    c->r->has_axis = true;
    return next_token(c, &t) < 0 ? -1 : read_int(c, &t, "axis", -1, &c->r->axis);
}

static int key_semantics(struct v1_ctx *c)
{
    char name[64];
    size_t len;
    if (read_string(c, "semantics", name, sizeof(name), &len) < 0)
        return -1;
    return tile_semantics_parse(name, len, &c->r->semantics, c->e);
}

/* ---- input keys ----------------------------------------------------------- */

static int key_dtype(struct v1_ctx *c)
{
    char name[64], known[400];
    size_t len;
    if (read_string(c, "dtype", name, sizeof(name), &len) < 0)
        return -1;
    c->dtype = tile_dtype_parse(name, len);
    if (c->dtype == TILE_DTYPE_INVALID)
        return tile_error_set(c->e, TILE_EINVAL, "unknown dtype '%.*s' (known: %s)", (int)len, name,
                              tile_dtype_list(known, sizeof(known)));
    c->has_dtype = true;
    return 0;
}

static int key_shape(struct v1_ctx *c)
{
    int max = max_rank_of(c);
    if (read_int_list(c, "shape", c->shape, max, &c->rank) < 0)
        return -1;
    for (int i = 0; i < c->rank; i++) {
        if (c->shape[i] < 0)
            return tile_error_set(c->e, TILE_EINVAL, "shape[%d] is %lld; dimensions must be >= 0", i,
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
    if (tile_json_read_data(lx, &o, &c->r->input, c->e) < 0)
        return -1;
    c->data_read = true;
    c->data_shaped = c->has_shape;
    return 0;
}

static int key_data(struct v1_ctx *c)
{
    struct tile_json_token t;
    c->has_data = true;
    if (c->has_dtype)
        return read_data_from(c, &c->lx);
    c->data_at = c->lx; /* read from here once the dtype is known */
    if (next_token(c, &t) < 0)
        return -1;
    return tile_json_skip_value(&c->lx, &t, c->e);
}

/* ---- objects -------------------------------------------------------------- */

static int find_key(const struct key_rule *rules, int n, const struct tile_json_token *t)
{
    for (int k = 0; k < n; k++) {
        if (tile_json_string_equals(t, rules[k].name))
            return k;
    }
    return -1;
}

/* Reads an object's members (its '{' already read) through `rules`. */
static int read_object(struct v1_ctx *c, const struct key_rule *rules, int n, const char *where,
                       const char *expected)
{
    unsigned seen = 0;
    struct tile_json_token t;
    for (;;) {
        if (next_token(c, &t) < 0)
            return -1;
        if (t.type == TILE_JSON_OBJECT_END)
            return 0;
        int shown = (int)(t.len > TILE_KEY_SHOWN ? TILE_KEY_SHOWN : t.len);
        int k = find_key(rules, n, &t);
        if (k < 0)
            return tile_error_set(c->e, TILE_EINVAL, "unknown key '%.*s' in %s (expected %s)", shown, t.ptr, where,
                                  expected);
        if (seen & (1u << k))
            return tile_error_set(c->e, TILE_EINVAL, "duplicate key '%s' in %s", rules[k].name, where);
        seen |= 1u << k;
        if (rules[k].fn(c) < 0)
            return -1;
    }
}

static int finish_input(struct v1_ctx *c)
{
    if (!c->has_dtype)
        return tile_error_set(c->e, TILE_EINVAL, "input.dtype is missing");
    if (!c->has_data)
        return tile_error_set(c->e, TILE_EINVAL, "input.data is missing");
    if (!c->data_read) {
        struct tile_json_lexer lx = c->data_at;
        return read_data_from(c, &lx);
    }
    if (c->has_shape && !c->data_shaped)
        return tile_json_data_apply_shape(&c->r->input, c->rank, c->shape, "data", c->e);
    return 0;
}

static int key_input(struct v1_ctx *c)
{
    static const struct key_rule input_keys[] = {{"dtype", key_dtype}, {"shape", key_shape}, {"data", key_data}};
    struct tile_json_token t;
    if (next_token(c, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_OBJECT_BEGIN)
        return tile_error_set(c->e, TILE_EINVAL, "input must be an object, not %s", tile_json_type_name(t.type));
    c->has_input = true;
    if (read_object(c, input_keys, 3, "input", "dtype, shape or data") < 0)
        return -1;
    return finish_input(c);
}

int tile_v1_json_decode(const char *body, size_t len, const struct tile_limits *lim, struct tile_request *r,
                        struct tile_error *e)
{
    static const struct key_rule top_keys[] = {
        {"input", key_input}, {"repeats", key_repeats}, {"semantics", key_semantics},
        {"tiles", key_tiles}, {"axis", key_axis},
    };
    struct v1_ctx c;
    struct tile_json_token t;
    memset(&c, 0, sizeof(c));
    if (lim)
        c.lim = *lim;
    c.r = r;
    c.e = e;
    tile_json_lexer_init(&c.lx, body, len, c.lim.max_depth);
    if (next_token(&c, &t) < 0)
        return -1;
    if (t.type != TILE_JSON_OBJECT_BEGIN)
        return tile_error_set(e, TILE_EINVAL, "the request body must be a JSON object, not %s",
                              tile_json_type_name(t.type));
    if (read_object(&c, top_keys, 5, "the request body", "input, repeats, semantics, tiles or axis") < 0)
        return -1;
    if (next_token(&c, &t) < 0) /* only whitespace may follow */
        return -1;
    if (!c.has_input)
        return tile_error_set(e, TILE_EINVAL, "the request body has no \"input\"");
    return 0;
}
