/* jsondata.c - tensor data from JSON arrays (see jsondata.h).
 *
 * DESIGN. One pass over the lexer's tokens does everything: it infers the
 * shape the way numpy.array does (the first path of first elements fixes
 * the rank, the first array closed at each level fixes that level's length,
 * every later array must agree), converts each scalar straight into its
 * slot, and copies string bytes once into a blob. A known shape is checked
 * against the inferred one at the end, so flat and nested input, with or
 * without a declared shape, share one walk and one set of messages.
 *
 * Where the elements go: with a known shape the tensor is allocated up
 * front and filled in place (surplus elements are still parsed, into a
 * scratch slot, so the error can say how many there were); without one they
 * go to a buffer that doubles as needed, bounded by max_bytes, and are
 * copied into the tensor once the shape is known. String elements are
 * stored as (offset, length) pairs while the blob may still move, and
 * turned into views at the end.
 *
 * Complex numbers are handled as "parts": every scalar fills one float of
 * half the element's width, and an element is two consecutive parts, so the
 * interleaved form needs nothing special but halving the innermost length,
 * and the pair form reads its two parts when an array turns out to start
 * with a number.
 */
#include "jsondata.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "encode.h"
#include "grow.h"
#include "numfmt.h"

/* A string element while the blob can still move. */
struct str_ref {
    uint64_t off, len;
};
_Static_assert(sizeof(struct str_ref) == sizeof(struct tile_str), "string refs become views in place");

#define TILE_SHAPE_TEXT (TILE_MAX_RANK * 21 + 3)

struct reader {
    struct tile_json_lexer *lx;
    const struct tile_json_data_opts *o;
    const struct tile_dtype_traits *tr;
    struct tile_error *e;
    const char *name;
    bool pairs;         /* complex elements as [re, im] */
    bool is_string;
    size_t part_size;   /* bytes one scalar fills */
    int max_rank;

    /* parts */
    char *items;        /* the tensor's buffer (fixed) or a growing one */
    uint64_t nparts, cap_parts;
    bool fixed;
    unsigned char scratch[16];

    /* string bytes */
    char *blob;
    uint64_t blob_len, blob_cap;

    /* shape inference; the arrays last, as reader_init leaves them to be
     * written level by level (a small document uses one or two levels) */
    int level;                       /* open arrays */
    int rank;                        /* -1 until the first element or empty array */
    int levels_seen;                 /* dims[0, levels_seen) are set */
    int64_t dims[TILE_MAX_RANK];     /* -1 until the first array at the level closed */
    uint64_t pos[TILE_MAX_RANK + 1]; /* index of the latest child per open array (+1 for a part);
                                        pos[k] is written when level k opens */
};

#define TILE_PATH_TEXT 160

/* "data[1][2]": the first `depth` indices of the current position. */
static const char *path_text(const struct reader *r, int depth, char *buf)
{
    struct tile_json_path where = {r->name, r->pos, depth};
    tile_json_path_format(&where, buf, TILE_PATH_TEXT);
    return buf;
}

/* ---- storage ------------------------------------------------------------ */

static int grow(char **buf, uint64_t *cap, uint64_t used, uint64_t need, uint64_t unit, uint64_t max_bytes,
                const char *what, struct tile_error *e)
{
    uint64_t want, bytes;
    if (__builtin_add_overflow(used, need, &want) || __builtin_mul_overflow(want, unit, &bytes))
        return tile_error_set(e, TILE_ETOOBIG, "%s is too large", what);
    if (max_bytes && bytes > max_bytes)
        return tile_error_set(e, TILE_ETOOBIG, "%s needs more than %llu bytes, the limit", what,
                              (unsigned long long)max_bytes);
    if (want > SIZE_MAX || bytes > SIZE_MAX)
        return tile_error_set(e, TILE_ENOMEM, "%s does not fit in memory", what);
    size_t ncap = *cap > SIZE_MAX ? SIZE_MAX : (size_t)*cap;
    char *nb = tile_grow(*buf, &ncap, (size_t)used, (size_t)need, (size_t)unit, 64,
                         max_bytes ? (size_t)(max_bytes / unit) : SIZE_MAX);
    if (!nb)
        return tile_error_set(e, TILE_ENOMEM, "cannot allocate %llu bytes for %s", (unsigned long long)bytes, what);
    *buf = nb;
    *cap = ncap;
    return 0;
}

/* Where the next part goes (scratch once a fixed buffer is full). */
static void *next_part(struct reader *r)
{
    if (r->nparts >= r->cap_parts) {
        if (r->fixed) {
            r->nparts++;
            return r->scratch;
        }
        if (grow(&r->items, &r->cap_parts, r->nparts, 1, r->part_size, r->o->max_bytes, "the tensor data", r->e) < 0)
            return NULL;
    }
    return r->items + r->nparts++ * r->part_size;
}

static int store_string(struct reader *r, const struct tile_json_token *t, void *slot)
{
    if (slot == r->scratch)
        return 0;
    if (r->blob_cap - r->blob_len < t->len + 1 &&
        grow(&r->blob, &r->blob_cap, r->blob_len, t->len + 1, 1, r->o->max_bytes, "the string data", r->e) < 0)
        return -1;
    struct str_ref ref = {r->blob_len, tile_json_unescape(t, r->blob + r->blob_len)};
    r->blob_len += ref.len;
    memcpy(slot, &ref, sizeof(ref));
    return 0;
}

/* Converts one scalar token into the next part; `depth` is its path depth. */
static int store_scalar(struct reader *r, const struct tile_json_token *t, int depth)
{
    void *slot = next_part(r);
    if (!slot)
        return -1;
    if (tile_json_parse_plain_int(r->tr, t, slot))
        return 0;
    struct tile_json_path where = {r->name, r->pos, depth};
    if (tile_json_parse_element(r->o->dtype, t, slot, &where, r->e) < 0)
        return -1;
    return r->is_string ? store_string(r, t, slot) : 0;
}

/* ---- shape inference ---------------------------------------------------- */

/* Registers a new child of the innermost open array: an array or an element. */
static int add_child(struct reader *r, bool is_array)
{
    int k = r->level - 1;
    if (k >= 0)
        r->pos[k]++;
    char path[TILE_PATH_TEXT];
    if (r->rank >= 0 && (is_array ? r->level >= r->rank : r->level != r->rank))
        return tile_error_set(r->e, TILE_EINVAL, "ragged nested data at %s: %s", path_text(r, r->level, path),
                              is_array ? "an array where an element was expected"
                                       : "an element where an array was expected");
    if (k >= 0 && r->dims[k] >= 0 && r->pos[k] >= (uint64_t)r->dims[k])
        return tile_error_set(r->e, TILE_EINVAL,
                              "ragged nested data at %s: more than %lld elements where %lld were expected",
                              path_text(r, k, path), (long long)r->dims[k], (long long)r->dims[k]);
    if (!is_array && r->rank < 0)
        r->rank = r->level;
    return 0;
}

static int open_array(struct reader *r)
{
    if (add_child(r, true) < 0)
        return -1;
    char path[TILE_PATH_TEXT];
    if (r->level >= r->max_rank)
        return tile_error_set(r->e, TILE_EINVAL, "%s nests arrays deeper than the maximum rank %d",
                              path_text(r, r->level, path), r->max_rank);
    if (r->level == r->levels_seen) /* the first array at this level */
        r->dims[r->levels_seen++] = -1;
    r->pos[r->level++] = UINT64_MAX; /* no child yet */
    return 0;
}

static int close_array(struct reader *r)
{
    int k = --r->level;
    int64_t n = (int64_t)(r->pos[k] + 1);
    if (r->rank < 0) /* an empty array before any element: it is innermost */
        r->rank = k + 1;
    if (r->dims[k] < 0) {
        r->dims[k] = n;
        return 0;
    }
    if (n == r->dims[k])
        return 0;
    char path[TILE_PATH_TEXT];
    return tile_error_set(r->e, TILE_EINVAL, "ragged nested data at %s: %lld elements where %lld were expected",
                          path_text(r, k, path), (long long)n, (long long)r->dims[k]);
}

/* A complex [re, im] element whose '[' was read and `re` is its first token. */
static int read_pair(struct reader *r, const struct tile_json_token *re)
{
    struct tile_json_token im, end;
    char path[TILE_PATH_TEXT];
    if (add_child(r, false) < 0)
        return -1;
    r->pos[r->level] = 0;
    if (store_scalar(r, re, r->level + 1) < 0 || tile_json_next(r->lx, &im, r->e) < 0)
        return -1;
    r->pos[r->level] = 1;
    if (!tile_json_is_scalar(im.type) || store_scalar(r, &im, r->level + 1) < 0 ||
        tile_json_next(r->lx, &end, r->e) < 0)
        return tile_error_set(r->e, TILE_EINVAL, "complex element %s must be a [re, im] pair",
                              path_text(r, r->level, path));
    if (end.type != TILE_JSON_ARRAY_END)
        return tile_error_set(r->e, TILE_EINVAL,
                              "complex element %s must be a [re, im] pair (it has more than 2 values)",
                              path_text(r, r->level, path));
    return 0;
}

static int read_leaf(struct reader *r, const struct tile_json_token *t)
{
    char path[TILE_PATH_TEXT];
    if (add_child(r, false) < 0)
        return -1;
    if (!tile_json_is_scalar(t->type))
        return tile_error_set(r->e, TILE_EINVAL, "%s is %s; tensor data are arrays and scalars",
                              path_text(r, r->level, path), tile_json_type_name(t->type));
    if (r->pairs)
        return tile_error_set(r->e, TILE_EINVAL, "%s is %s, but %s elements are [re, im] pairs",
                              path_text(r, r->level, path), tile_json_type_name(t->type), r->tr->name);
    return store_scalar(r, t, r->level);
}

/* Walks one JSON value. */
static int walk(struct reader *r)
{
    struct tile_json_token t;
    bool have = false;
    do {
        if (!have && tile_json_next(r->lx, &t, r->e) < 0)
            return -1;
        have = false;
        if (t.type == TILE_JSON_ARRAY_BEGIN && r->pairs) {
            struct tile_json_token u;
            if (tile_json_next(r->lx, &u, r->e) < 0)
                return -1;
            if (tile_json_is_scalar(u.type)) {
                if (read_pair(r, &u) < 0)
                    return -1;
                continue;
            }
            t = u;
            have = true;
            if (open_array(r) < 0)
                return -1;
            continue;
        }
        int rc = t.type == TILE_JSON_ARRAY_BEGIN ? open_array(r)
               : t.type == TILE_JSON_ARRAY_END   ? close_array(r)
                                                 : read_leaf(r, &t);
        if (rc < 0)
            return -1;
    } while (r->level > 0);
    return 0;
}

/* ---- shapes ------------------------------------------------------------- */

/* Does data nested as idims[irank] with `have` elements fit shape[rank]? */
static int check_nesting(const char *name, int irank, const int64_t *idims, uint64_t have, int rank,
                         const int64_t *shape, uint64_t need, struct tile_error *e)
{
    char want[TILE_SHAPE_TEXT], got[TILE_SHAPE_TEXT];
    if (have != need) {
        tile_format_shape(shape, rank, true, want, sizeof(want));
        return tile_error_set(e, TILE_EINVAL, "%s has %llu elements but shape %s needs %llu", name,
                              (unsigned long long)have, want, (unsigned long long)need);
    }
    if (irank <= 1)
        return 0; /* flat */
    bool same = irank <= rank;
    for (int i = 0; same && i < irank; i++)
        same = idims[i] == shape[i];
    /* Nesting cannot show the axes after an empty one: [[],[]] fits [2,0,5]. */
    if (same && (irank == rank || idims[irank - 1] == 0))
        return 0;
    tile_format_shape(shape, rank, true, want, sizeof(want)); /* only for the message */
    tile_format_shape(idims, irank, true, got, sizeof(got));
    return tile_error_set(e, TILE_EINVAL, "%s is nested as %s, which does not match shape %s", name, got, want);
}

int tile_json_data_apply_shape(struct tile_tensor *t, int rank, const int64_t *shape, const char *name,
                               struct tile_error *e)
{
    uint64_t need;
    if (rank < 0 || rank > TILE_MAX_RANK)
        return tile_error_set(e, TILE_EINVAL, "rank %d is outside 0..%d", rank, TILE_MAX_RANK);
    if (tile_shape_elems(shape, rank, &need, e) < 0 ||
        check_nesting(name ? name : "data", t->rank, t->shape, t->nelem, rank, shape, need, e) < 0)
        return -1;
    t->rank = rank;
    if (rank)
        memcpy(t->shape, shape, sizeof(shape[0]) * (size_t)rank);
    return 0;
}

/* The inferred element shape (interleaved complex: innermost length / 2). */
static int inferred_shape(struct reader *r, int64_t *dims)
{
    for (int i = 0; i < r->rank; i++)
        dims[i] = r->dims[i];
    if (r->tr->cls != TILE_CLASS_COMPLEX || r->pairs)
        return 0;
    if (r->rank == 0)
        return tile_error_set(r->e, TILE_EINVAL,
                              "%s is a single number, but %s elements are re, im numbers interleaved", r->name,
                              r->tr->name);
    if (dims[r->rank - 1] % 2)
        return tile_error_set(r->e, TILE_EINVAL,
                              "%s has rows of %lld numbers, but %s elements are re, im numbers interleaved "
                              "(an even count)",
                              r->name, (long long)dims[r->rank - 1], r->tr->name);
    dims[r->rank - 1] /= 2;
    return 0;
}

/* Turns (offset, length) refs into views of the final blob. */
static void refs_to_views(struct tile_tensor *t, char *blob)
{
    for (uint64_t i = 0; i < t->nelem; i++) {
        struct str_ref ref;
        memcpy(&ref, (struct tile_str *)t->data + i, sizeof(ref));
        struct tile_str s = {blob + ref.off, ref.len};
        memcpy((struct tile_str *)t->data + i, &s, sizeof(s));
    }
}

static int finish(struct reader *r, struct tile_tensor *out)
{
    int64_t dims[TILE_MAX_RANK];
    uint64_t parts_per = r->tr->parts;
    if (inferred_shape(r, dims) < 0)
        return -1;
    if (r->fixed) {
        if (check_nesting(r->name, r->rank, dims, r->nparts / parts_per, r->o->rank, r->o->shape, out->nelem, r->e) < 0)
            return -1;
    } else {
        if (tile_tensor_init(out, r->o->dtype, r->rank, dims, r->o->max_bytes, r->e) < 0)
            return -1;
        if (r->nparts)
            memcpy(out->data, r->items, r->nparts * r->part_size);
    }
    if (r->is_string) {
        refs_to_views(out, r->blob);
        out->blob = r->blob;
        out->blob_len = r->blob_len;
        r->blob = NULL;
    }
    return 0;
}

static int reader_init(struct reader *r, struct tile_json_lexer *lx, const struct tile_json_data_opts *o,
                       struct tile_tensor *out, struct tile_error *e)
{
    memset(r, 0, offsetof(struct reader, dims)); /* dims and pos: see open_array */
    r->lx = lx;
    r->o = o;
    r->e = e;
    r->name = o->name ? o->name : "data";
    r->tr = tile_dtype_traits(o->dtype);
    if (!r->tr)
        return tile_error_set(e, TILE_EINVAL, "invalid dtype");
    r->is_string = r->tr->cls == TILE_CLASS_STRING;
    r->pairs = r->tr->cls == TILE_CLASS_COMPLEX && o->complex_form == TILE_JSON_COMPLEX_PAIRS;
    r->part_size = r->tr->size / r->tr->parts;
    r->max_rank = o->max_rank > 0 && o->max_rank < TILE_MAX_RANK ? o->max_rank : TILE_MAX_RANK;
    r->rank = -1;
    if (r->is_string && grow(&r->blob, &r->blob_cap, 0, 1, 1, 0, "the string data", e) < 0)
        return -1;
    if (o->rank < 0)
        return 0;
    if (tile_tensor_init(out, o->dtype, o->rank, o->shape, o->max_bytes, e) < 0)
        return -1;
    r->fixed = true;
    r->items = out->data;
    r->cap_parts = out->nelem * r->tr->parts;
    return 0;
}

int tile_json_read_data(struct tile_json_lexer *lx, const struct tile_json_data_opts *o, struct tile_tensor *out,
                        struct tile_error *e)
{
    struct reader r;
    tile_tensor_reset(out); /* what tile_tensor_free reads, whatever happens */
    int rc = reader_init(&r, lx, o, out, e);
    if (rc == 0)
        rc = walk(&r);
    if (rc == 0)
        rc = finish(&r, out);
    if (!r.fixed)
        free(r.items);
    free(r.blob);
    if (rc < 0)
        tile_tensor_free(out);
    return rc;
}
