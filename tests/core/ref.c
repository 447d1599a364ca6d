/* ref.c - reference oracle and random cases for the core tests (see ref.h).
 *
 * DESIGN. The oracle is deliberately naive and shares no code with the
 * library: ref_expand() restates each specification's rules (which dtypes,
 * ranks and repeats it accepts, and how numpy/OpenVINO promote the shorter of
 * shape and repeats with leading 1s), and ref_tile() walks the output element
 * by element, splitting the flat index into a multi-index and taking each
 * coordinate modulo the input extent. It is slow and obviously right, which
 * is the point: the library's collapsed levels, replication and parallel
 * split are all checked against it. Random cases draw from a splitmix64
 * stream with a fixed seed, so every failure reproduces; each case gets its
 * own seed so a failing one can be rerun alone.
 */
#include "ref.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ref_rng_seed(struct ref_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t ref_rng_next(struct ref_rng *r)
{
    uint64_t z = (r->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

uint64_t ref_rng_below(struct ref_rng *r, uint64_t n)
{
    return n ? ref_rng_next(r) % n : 0;
}

int64_t ref_rng_range(struct ref_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)ref_rng_below(r, (uint64_t)(hi - lo) + 1);
}

int ref_rng_one_in(struct ref_rng *r, uint64_t n)
{
    return ref_rng_below(r, n) == 0;
}

void ref_rng_fill(struct ref_rng *r, void *buf, size_t n)
{
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = ref_rng_next(r);
        memcpy(p + i, &v, 8);
    }
    for (uint64_t v = ref_rng_next(r); i < n; i++, v >>= 8)
        p[i] = (uint8_t)v;
}

uint64_t ref_base_seed(uint64_t fallback)
{
    const char *s = getenv("TILED_TEST_SEED");
    return s && *s ? strtoull(s, NULL, 0) : fallback;
}

uint64_t ref_case_seed(uint64_t base, uint64_t index)
{
    struct ref_rng r;
    ref_rng_seed(&r, base ^ (index * UINT64_C(0xD1B54A32D192ED03)));
    return ref_rng_next(&r);
}

/* ---- the specifications' rules ---- */

static const enum tile_dtype ref_onnx1_types[] = {TILE_FLOAT16, TILE_FLOAT32, TILE_FLOAT64};
static const enum tile_dtype ref_directml_types[] = {
    TILE_INT8,  TILE_INT16,  TILE_INT32,  TILE_INT64,   TILE_UINT8,
    TILE_UINT16, TILE_UINT32, TILE_UINT64, TILE_FLOAT16, TILE_FLOAT32,
};

static int ref_one_of(enum tile_dtype d, const enum tile_dtype *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == d)
            return 1;
    return 0;
}

static int ref_all_at_least(const int64_t *v, int n, int64_t min)
{
    for (int i = 0; i < n; i++)
        if (v[i] < min)
            return 0;
    return 1;
}

/* Shape and repeats aligned at their last axis, the shorter padded with 1s
 * in front (numpy.tile, OpenVINO Tile; identity when the lengths agree). */
static void ref_promote(const struct ref_case *c, struct ref_problem *p)
{
    p->rank = c->rank > c->nrepeats ? c->rank : c->nrepeats;
    for (int i = 0; i < p->rank; i++) {
        int si = i - (p->rank - c->rank), ri = i - (p->rank - c->nrepeats);
        p->in_shape[i] = si >= 0 ? c->shape[si] : 1;
        p->repeats[i] = ri >= 0 ? c->repeats[ri] : 1;
    }
}

static int ref_rules(const struct ref_case *c, struct ref_problem *p)
{
    switch (c->sem) {
    case TILE_SEM_ONNX:
        if (c->nrepeats != c->rank || !ref_all_at_least(c->repeats, c->nrepeats, 0))
            return -1;
        ref_promote(c, p);
        return 0;
    case TILE_SEM_NUMPY:
    case TILE_SEM_OPENVINO:
        if (c->nrepeats < 0 || !ref_all_at_least(c->repeats, c->nrepeats, 0))
            return -1;
        ref_promote(c, p);
        return 0;
    case TILE_SEM_DIRECTML:
        if (!ref_one_of(c->dtype, ref_directml_types, sizeof(ref_directml_types) / sizeof(ref_directml_types[0])) ||
            c->rank < 1 || c->rank > 8 || c->nrepeats != c->rank || !ref_all_at_least(c->repeats, c->nrepeats, 1))
            return -1;
        ref_promote(c, p);
        return 0;
    case TILE_SEM_ONNX1:
        if (!ref_one_of(c->dtype, ref_onnx1_types, sizeof(ref_onnx1_types) / sizeof(ref_onnx1_types[0])) ||
            c->rank < 1 || c->axis < -c->rank || c->axis >= c->rank || c->tiles < 0)
            return -1;
        p->rank = c->rank;
        for (int i = 0; i < c->rank; i++) {
            p->in_shape[i] = c->shape[i];
            p->repeats[i] = i == (c->axis + c->rank) % c->rank ? c->tiles : 1;
        }
        return 0;
    default:
        return -1;
    }
}

int ref_expand(const struct ref_case *c, struct ref_problem *p)
{
    memset(p, 0, sizeof(*p));
    if (c->rank < 0 || c->rank > TILE_MAX_RANK || c->nrepeats > TILE_MAX_RANK)
        return -1;
    for (int i = 0; i < c->rank; i++)
        if (c->shape[i] < 0)
            return -1;
    if (ref_rules(c, p) < 0)
        return -1;
    p->in_elems = p->out_elems = 1;
    for (int i = 0; i < p->rank; i++) {
        p->out_shape[i] = p->in_shape[i] * p->repeats[i];
        p->in_elems *= (uint64_t)p->in_shape[i];
        p->out_elems *= (uint64_t)p->out_shape[i];
    }
    return 0;
}

struct tile_spec ref_spec(const struct ref_case *c)
{
    struct tile_spec s = {
        .semantics = c->sem,
        .repeats = c->repeats,
        .nrepeats = c->nrepeats,
        .tiles = c->tiles,
        .axis = c->axis,
    };
    return s;
}

/* ---- the oracle ---- */

uint64_t ref_source_index(const struct ref_problem *p, uint64_t out_index)
{
    uint64_t src = 0, stride = 1;
    for (int i = p->rank - 1; i >= 0; i--) {
        uint64_t o = out_index % (uint64_t)p->out_shape[i];
        out_index /= (uint64_t)p->out_shape[i];
        src += o % (uint64_t)p->in_shape[i] * stride;
        stride *= (uint64_t)p->in_shape[i];
    }
    return src;
}

/* Copies one element; the fixed sizes compile to plain loads and stores,
 * which keeps the oracle quick under the sanitizers. */
static void ref_copy_elem(uint8_t *dst, const uint8_t *src, size_t size)
{
    switch (size) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, size); break;
    }
}

void ref_tile(const struct ref_problem *p, size_t elem_size, const void *in, void *out)
{
    const uint8_t *src = in;
    uint8_t *dst = out;
    for (uint64_t k = 0; k < p->out_elems; k++)
        ref_copy_elem(dst + k * elem_size, src + ref_source_index(p, k) * elem_size, elem_size);
}

/* snprintf at buf[*used], never past cap; *used stops growing at cap. */
static void ref_appendf(char *buf, size_t cap, size_t *used, const char *fmt, long long v)
{
    if (*used >= cap)
        return;
    int n = snprintf(buf + *used, cap - *used, fmt, v);
    *used = n < 0 || (size_t)n >= cap - *used ? cap : *used + (size_t)n;
}

static void ref_append_list(char *buf, size_t cap, size_t *used, const char *label, const int64_t *v, int n)
{
    ref_appendf(buf, cap, used, label, 0);
    for (int i = 0; i < n; i++)
        ref_appendf(buf, cap, used, i ? ",%lld" : "%lld", (long long)v[i]);
    ref_appendf(buf, cap, used, "]", 0);
}

const char *ref_describe(const struct ref_case *c, char *buf, size_t cap)
{
    if (cap == 0)
        return buf;
    int n = snprintf(buf, cap, "semantics=%s dtype=%s", tile_semantics_name(c->sem), tile_dtype_name(c->dtype));
    size_t used = n < 0 || (size_t)n >= cap ? cap : (size_t)n;
    ref_append_list(buf, cap, &used, " shape=[", c->shape, c->rank);
    ref_append_list(buf, cap, &used, " repeats=[", c->repeats, c->nrepeats);
    ref_appendf(buf, cap, &used, " tiles=%lld", (long long)c->tiles);
    ref_appendf(buf, cap, &used, " axis=%lld", (long long)c->axis);
    return buf;
}

/* ---- random cases ---- */

static int ref_random_rank(struct ref_rng *r)
{
    static const int big[] = {12, 20, 32, TILE_MAX_RANK};
    if (ref_rng_one_in(r, 25))
        return big[ref_rng_below(r, sizeof(big) / sizeof(big[0]))];
    return (int)ref_rng_range(r, 0, 10);
}

static int64_t ref_random_dim(struct ref_rng *r)
{
    if (ref_rng_one_in(r, 40))
        return 0;
    if (ref_rng_one_in(r, 12))
        return ref_rng_range(r, 5, 40);
    return ref_rng_range(r, 1, 4);
}

static int64_t ref_random_repeat(struct ref_rng *r)
{
    if (ref_rng_one_in(r, 100))
        return ref_rng_range(r, -3, -1);
    if (ref_rng_one_in(r, 30))
        return 0;
    if (ref_rng_one_in(r, 15))
        return ref_rng_range(r, 5, 20);
    return ref_rng_range(r, 1, 4);
}

static int64_t ref_max1(int64_t v)
{
    return v > 1 ? v : 1;
}

/* Fills shape and repeats aligned at their last axis, visiting axes in a
 * random order and clamping each so the output stays within `budget`. */
static void ref_random_dims(struct ref_rng *r, struct ref_case *c, uint64_t budget)
{
    int out_rank = c->rank > c->nrepeats ? c->rank : c->nrepeats;
    int order[TILE_MAX_RANK];
    for (int i = 0; i < out_rank; i++) {
        int j = (int)ref_rng_below(r, (uint64_t)i + 1);
        order[i] = order[j];
        order[j] = i;
    }
    for (int k = 0; k < out_rank; k++) {
        int pos = order[k], si = pos - (out_rank - c->rank), ri = pos - (out_rank - c->nrepeats);
        int64_t d = si >= 0 ? ref_random_dim(r) : 1, rep = ri >= 0 ? ref_random_repeat(r) : 1;
        if ((uint64_t)d > budget)
            d = (int64_t)budget;
        if (rep > 0 && (uint64_t)rep > budget / (uint64_t)ref_max1(d))
            rep = (int64_t)(budget / (uint64_t)ref_max1(d));
        budget /= (uint64_t)(ref_max1(d) * ref_max1(rep));
        if (si >= 0)
            c->shape[si] = d;
        if (ri >= 0)
            c->repeats[ri] = rep;
    }
}

void ref_random_case(struct ref_rng *r, enum tile_dtype dtype, uint64_t max_out_elems, struct ref_case *c)
{
    memset(c, 0, sizeof(*c));
    c->sem = TILE_SEM_ONNX;
    c->dtype = tile_dtype_traits(dtype) ? dtype : (enum tile_dtype)ref_rng_below(r, TILE_DTYPE_COUNT);
    c->rank = ref_random_rank(r);
    c->nrepeats = ref_rng_one_in(r, 5) ? ref_random_rank(r) : c->rank;
    ref_random_dims(r, c, max_out_elems ? max_out_elems : 1);
    c->tiles = ref_rng_one_in(r, 40) ? -1 : ref_rng_range(r, 0, 4);
    if (ref_rng_one_in(r, 10))
        c->axis = ref_rng_one_in(r, 2) ? c->rank + (int64_t)ref_rng_below(r, 3) : -c->rank - 1;
    else
        c->axis = c->rank ? ref_rng_range(r, -c->rank, c->rank - 1) : 0;
}
