/* plan.c - spec rules, output shape and level collapsing (see plan.h).
 *
 * DESIGN. Each specification differs only in how it turns (shape, repeats)
 * or (shape, tiles, axis) into one repeat per output axis and which inputs it
 * refuses; after that every spec is the same problem. So the rules live in
 * one small function per spec, all producing the promoted shape and repeats,
 * and one shared path computes sizes and collapses levels for the kernel.
 */
#include "plan.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

static const char *const tile_semantics_names[TILE_SEM_COUNT] = {
    [TILE_SEM_ONNX] = "onnx",
    [TILE_SEM_ONNX1] = "onnx1",
    [TILE_SEM_NUMPY] = "numpy",
    [TILE_SEM_OPENVINO] = "openvino",
    [TILE_SEM_DIRECTML] = "directml",
};

/* DirectML's documented dimension counts (DML_FEATURE_LEVEL_4_1). */
#define TILE_DML_MAX_RANK 8

const char *tile_semantics_name(enum tile_semantics s)
{
    if ((unsigned)s >= TILE_SEM_COUNT)
        return "invalid";
    return tile_semantics_names[s];
}

int tile_semantics_parse(const char *name, size_t len, enum tile_semantics *out, struct tile_error *e)
{
    for (int s = 0; s < TILE_SEM_COUNT; s++) {
        if (strlen(tile_semantics_names[s]) == len && strncasecmp(tile_semantics_names[s], name, len) == 0) {
            *out = (enum tile_semantics)s;
            return 0;
        }
    }
    return tile_error_set(e, TILE_EINVAL,
                          "unknown semantics '%.*s' (expected onnx, onnx1, numpy, openvino or directml)",
                          (int)(len > 40 ? 40 : len), name);
}

static int check_repeats_min(const int64_t *rep, int n, int64_t min, const char *sem, struct tile_error *e)
{
    for (int i = 0; i < n; i++) {
        if (rep[i] < min)
            return tile_error_set(e, TILE_EINVAL, "repeats[%d] is %lld (semantics %s requires every repeat >= %lld)",
                                  i, (long long)rep[i], sem, (long long)min);
    }
    return 0;
}

static int check_dtype_allowed(enum tile_dtype dtype, bool allowed, const char *sem, const char *which,
                               struct tile_error *e)
{
    if (allowed)
        return 0;
    return tile_error_set(e, TILE_EINVAL, "dtype %s is not allowed by semantics %s (it accepts %s)",
                          tile_dtype_name(dtype), sem, which);
}

/* Each rule function fills plan->out_rank, in_shape[] and repeats[]. */
static int rules_onnx(struct tile_plan *p, int rank, const int64_t *shape, const struct tile_spec *s,
                      struct tile_error *e)
{
    if (s->nrepeats != rank)
        return tile_error_set(e, TILE_EINVAL,
                              "repeats has %d values but input has rank %d (semantics onnx requires one per axis)",
                              s->nrepeats, rank);
    if (check_repeats_min(s->repeats, rank, 0, "onnx", e) < 0)
        return -1;
    p->out_rank = rank;
    for (int i = 0; i < rank; i++) {
        p->in_shape[i] = shape[i];
        p->repeats[i] = s->repeats[i];
    }
    return 0;
}

static int rules_onnx1(struct tile_plan *p, int rank, const int64_t *shape, const struct tile_spec *s,
                       struct tile_error *e)
{
    if (check_dtype_allowed(p->dtype, tile_dtype_traits(p->dtype)->in_opset1, "onnx1",
                            "float16, float32 and float64", e) < 0)
        return -1;
    if (rank < 1)
        return tile_error_set(e, TILE_EINVAL, "input has rank 0 (semantics onnx1 needs an axis to tile along)");
    if (s->axis < -rank || s->axis >= rank)
        return tile_error_set(e, TILE_EINVAL, "axis %lld is out of range for rank %d (semantics onnx1 allows %d..%d)",
                              (long long)s->axis, rank, -rank, rank - 1);
    if (s->tiles < 0)
        return tile_error_set(e, TILE_EINVAL, "tiles is %lld (semantics onnx1 requires tiles >= 0)",
                              (long long)s->tiles);
    int axis = (int)(s->axis < 0 ? s->axis + rank : s->axis);
    p->out_rank = rank;
    for (int i = 0; i < rank; i++) {
        p->in_shape[i] = shape[i];
        p->repeats[i] = i == axis ? s->tiles : 1;
    }
    return 0;
}

/* numpy.tile and OpenVINO Tile-1: the shorter of shape and repeats is
 * promoted with leading 1s. */
static int rules_promote(struct tile_plan *p, int rank, const int64_t *shape, const struct tile_spec *s,
                         struct tile_error *e)
{
    const char *sem = tile_semantics_name(s->semantics);
    if (s->nrepeats < 0)
        return tile_error_set(e, TILE_EINVAL, "repeats has a negative length");
    if (check_repeats_min(s->repeats, s->nrepeats, 0, sem, e) < 0)
        return -1;
    int out_rank = rank > s->nrepeats ? rank : s->nrepeats;
    if (out_rank > TILE_MAX_RANK)
        return tile_error_set(e, TILE_EINVAL, "output rank %d exceeds the maximum of %d", out_rank, TILE_MAX_RANK);
    p->out_rank = out_rank;
    for (int i = 0; i < out_rank; i++) {
        int si = i - (out_rank - rank), ri = i - (out_rank - s->nrepeats);
        p->in_shape[i] = si >= 0 ? shape[si] : 1;
        p->repeats[i] = ri >= 0 ? s->repeats[ri] : 1;
    }
    return 0;
}

static int rules_directml(struct tile_plan *p, int rank, const int64_t *shape, const struct tile_spec *s,
                          struct tile_error *e)
{
    if (check_dtype_allowed(p->dtype, tile_dtype_traits(p->dtype)->in_directml, "directml",
                            "float16, float32 and the 8- to 64-bit integers", e) < 0)
        return -1;
    if (rank < 1 || rank > TILE_DML_MAX_RANK)
        return tile_error_set(e, TILE_EINVAL, "input has rank %d (semantics directml requires rank 1..%d)", rank,
                              TILE_DML_MAX_RANK);
    if (s->nrepeats != rank)
        return tile_error_set(e, TILE_EINVAL,
                              "repeats has %d values but input has rank %d (semantics directml requires one per axis)",
                              s->nrepeats, rank);
    if (check_repeats_min(s->repeats, rank, 1, "directml", e) < 0)
        return -1;
    return rules_onnx(p, rank, shape, s, e);
}

typedef int (*tile_rules_fn)(struct tile_plan *, int, const int64_t *, const struct tile_spec *,
                             struct tile_error *);

static const tile_rules_fn tile_rules[TILE_SEM_COUNT] = {
    [TILE_SEM_ONNX] = rules_onnx,
    [TILE_SEM_ONNX1] = rules_onnx1,
    [TILE_SEM_NUMPY] = rules_promote,
    [TILE_SEM_OPENVINO] = rules_promote,
    [TILE_SEM_DIRECTML] = rules_directml,
};

static int compute_sizes(struct tile_plan *p, const struct tile_spec *s, struct tile_error *e)
{
    if (tile_shape_elems(p->in_shape, p->out_rank, &p->in_elems, e) < 0)
        return -1;
    if (__builtin_mul_overflow(p->in_elems, p->elem_size, &p->in_bytes) ||
        !tile_shape_span_fits(p->in_shape, p->out_rank, p->elem_size))
        return tile_error_set(e, TILE_ETOOBIG, "input byte size overflows 64 bits");
    uint64_t prod = 1;
    bool zero = false;
    for (int i = 0; i < p->out_rank; i++) {
        if (p->repeats[i] == 0)
            zero = true;
        else if (!zero && __builtin_mul_overflow(prod, (uint64_t)p->repeats[i], &prod))
            return tile_error_set(e, TILE_ETOOBIG, "the product of repeats overflows 64 bits");
        if (__builtin_mul_overflow(p->in_shape[i], p->repeats[i], &p->out_shape[i]))
            return tile_error_set(e, TILE_ETOOBIG, "output dimension %d (%lld x %lld) overflows 64 bits", i,
                                  (long long)p->in_shape[i], (long long)p->repeats[i]);
    }
    p->repeat_product = zero ? 0 : prod;
    if (tile_shape_elems(p->out_shape, p->out_rank, &p->out_elems, e) < 0)
        return -1;
    if (__builtin_mul_overflow(p->out_elems, p->elem_size, &p->out_bytes) ||
        !tile_shape_span_fits(p->out_shape, p->out_rank, p->elem_size))
        return tile_error_set(e, TILE_ETOOBIG, "output byte size overflows 64 bits");
    if (s->max_output_bytes && p->out_bytes > s->max_output_bytes)
        return tile_error_set(e, TILE_ETOOBIG, "output would be %llu bytes, above the limit of %llu bytes",
                              (unsigned long long)p->out_bytes, (unsigned long long)s->max_output_bytes);
    return 0;
}

static void level_sizes(struct tile_plan *p);

/* Merges axes into levels: an axis with repeat 1 joins its outer level
 * (its input rows are contiguous), an outer level with input extent 1 is
 * absorbed by its inner one (its repeats multiply). */
static void collapse_levels(struct tile_plan *p)
{
    int n = 0;
    p->nlev = 0;
    if (p->out_elems == 0)
        return;
    for (int i = 0; i < p->out_rank; i++) {
        uint64_t d = (uint64_t)p->in_shape[i], r = (uint64_t)p->repeats[i];
        if (d == 1 && r == 1)
            continue;
        if (n > 0 && r == 1) {
            p->lev_in[n - 1] *= d;
        } else if (n > 0 && p->lev_in[n - 1] == 1) {
            p->lev_in[n - 1] = d;
            p->lev_rep[n - 1] *= r;
        } else {
            p->lev_in[n] = d;
            p->lev_rep[n] = r;
            n++;
        }
    }
    if (n == 0) {
        p->lev_in[0] = 1;
        p->lev_rep[0] = 1;
        n = 1;
    }
    p->nlev = n;
    p->lev_in[n - 1] *= p->elem_size; /* the innermost level counts bytes */
    level_sizes(p);
}

/* Derives each level's sub-block, stride and tile sizes from lev_in and
 * lev_rep (the innermost level counting bytes). */
static void level_sizes(struct tile_plan *p)
{
    int n = p->nlev;
    p->lev_sub[n - 1] = 1;
    p->lev_in_stride[n - 1] = 1;
    for (int l = n - 1; l >= 0; l--) {
        if (l < n - 1) {
            p->lev_sub[l] = p->lev_tile[l + 1] * p->lev_rep[l + 1];
            p->lev_in_stride[l] = p->lev_in[l + 1] * p->lev_in_stride[l + 1];
        }
        p->lev_tile[l] = p->lev_in[l] * p->lev_sub[l];
    }
}

/* The plan's fields outside its arrays, cleared. Each array is written up
 * to where it is read (out_rank or nlev entries) by the rules and
 * collapse_levels; the rest of a 4 KiB plan is left alone, as clearing and
 * copying it was most of a small request's planning. */
static void clear_scalars(struct tile_plan *p)
{
    memset(p, 0, offsetof(struct tile_plan, in_shape));
    memset(&p->in_elems, 0, offsetof(struct tile_plan, lev_in) - offsetof(struct tile_plan, in_elems));
}

void tile_plan_copy(const struct tile_plan *src, struct tile_plan *out)
{
    memcpy(out, src, offsetof(struct tile_plan, in_shape));
    memcpy(&out->in_elems, &src->in_elems, offsetof(struct tile_plan, lev_in) - offsetof(struct tile_plan, in_elems));
    size_t axes = sizeof(src->in_shape[0]) * (size_t)src->out_rank, levels = sizeof(src->lev_in[0]) * (size_t)src->nlev;
    memcpy(out->in_shape, src->in_shape, axes);
    memcpy(out->repeats, src->repeats, axes);
    memcpy(out->out_shape, src->out_shape, axes);
    memcpy(out->lev_in, src->lev_in, levels);
    memcpy(out->lev_rep, src->lev_rep, levels);
    memcpy(out->lev_sub, src->lev_sub, levels);
    memcpy(out->lev_in_stride, src->lev_in_stride, levels);
    memcpy(out->lev_tile, src->lev_tile, levels);
}

int tile_plan_init(struct tile_plan *p, enum tile_dtype dtype, int rank, const int64_t *shape,
                   const struct tile_spec *s, struct tile_error *e)
{
    clear_scalars(p);
    const struct tile_dtype_traits *t = tile_dtype_traits(dtype);
    if (!t)
        return tile_error_set(e, TILE_EINVAL, "invalid dtype");
    if ((unsigned)s->semantics >= TILE_SEM_COUNT)
        return tile_error_set(e, TILE_EINVAL, "invalid semantics");
    int max_rank = s->max_rank > 0 && s->max_rank < TILE_MAX_RANK ? s->max_rank : TILE_MAX_RANK;
    if (rank < 0 || rank > max_rank)
        return tile_error_set(e, TILE_EINVAL, "input rank %d is outside 0..%d", rank, max_rank);
    if (s->nrepeats > max_rank)
        return tile_error_set(e, TILE_EINVAL, "repeats has %d values, above the maximum rank of %d", s->nrepeats,
                              max_rank);
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0)
            return tile_error_set(e, TILE_EINVAL, "shape[%d] is %lld; dimensions must be >= 0", i,
                                  (long long)shape[i]);
    }
    p->dtype = dtype;
    p->elem_size = t->size;
    if (tile_rules[s->semantics](p, rank, shape, s, e) < 0)
        return -1;
    if (compute_sizes(p, s, e) < 0)
        return -1;
    collapse_levels(p);
    return 0;
}

void tile_plan_with_elem_size(const struct tile_plan *src, uint64_t elem_size, struct tile_plan *out)
{
    tile_plan_copy(src, out);
    out->elem_size = elem_size;
    out->in_bytes = src->in_elems * elem_size;
    out->out_bytes = src->out_elems * elem_size;
    collapse_levels(out);
}

bool tile_plan_can_fold_inner(const struct tile_plan *p)
{
    return p->nlev >= 2 && p->lev_rep[p->nlev - 1] > 1;
}

uint64_t tile_plan_folded_in_bytes(const struct tile_plan *p)
{
    int n = p->nlev - 1;
    return p->in_bytes / p->lev_tile[n] * p->lev_tile[n] * p->lev_rep[n];
}

void tile_plan_fold_inner(const struct tile_plan *src, struct tile_plan *out)
{
    int n = src->nlev - 1;
    tile_plan_copy(src, out);
    out->in_bytes = tile_plan_folded_in_bytes(src);
    out->nlev = n;
    /* The expanded rows lie end to end, so the level above reads them as
     * one contiguous row of bytes. */
    out->lev_in[n - 1] = src->lev_in[n - 1] * src->lev_sub[n - 1];
    level_sizes(out);
}

int tile_plan_string_wire_bytes(const struct tile_plan *p, uint64_t in_string_bytes, uint64_t limit,
                                uint64_t *out, struct tile_error *e)
{
    uint64_t payload, prefixes, total;
    if (__builtin_mul_overflow(in_string_bytes, p->repeat_product, &payload) ||
        __builtin_mul_overflow(p->out_elems, (uint64_t)4, &prefixes) ||
        __builtin_add_overflow(payload, prefixes, &total))
        return tile_error_set(e, TILE_ETOOBIG, "string output size overflows 64 bits");
    if (limit && total > limit)
        return tile_error_set(e, TILE_ETOOBIG, "string output would be %llu bytes, above the limit of %llu bytes",
                              (unsigned long long)total, (unsigned long long)limit);
    *out = total;
    return 0;
}
