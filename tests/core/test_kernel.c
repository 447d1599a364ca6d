/* test_kernel.c - tile_execute, tile_read and tile_run against the oracle.
 *
 * Every case is planned under every semantics: where the oracle says the
 * specification rejects it, tile_plan_init must fail with TILE_EINVAL
 * naming that semantics; otherwise the plan's shapes must match the oracle
 * and every way of producing the output (single-threaded, split across
 * pools of 2 and 3 threads in page-sized tasks, plain and non-temporal
 * stores, plain ones in pieces of several sizes, tile_run, tile_read of
 * arbitrary ranges, a plan re-sized to index elements) must reproduce the
 * oracle's bytes. Cases come from a fixed seed
 * (override with TILED_TEST_SEED); a failure prints the seed and the case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autosplit.h"
#include "hotcopy.h"
#include "ref.h"
#include "stores.h"

#define KERNEL_SEED UINT64_C(0x5EED7113)
#define CASES_PER_DTYPE 200
#define SMALL_OUT_ELEMS 4096u
#define MEDIUM_OUT_ELEMS 65536u
#define READ_PLANS 400
#define RESIZE_PLANS 300
#define GUARD 64u
#define GUARD_BYTE 0xA5
#define LONG_STRING_BYTES 1500u

static uint64_t kernel_seed;
static struct tile_pool *kernel_pools[2]; /* 2 and 3 threads */

/* ---- failure reporting ---- */

struct case_ctx {
    const struct ref_case *c;
    uint64_t index; /* case number within the run */
};

static void case_fail(const struct case_ctx *x, int line, const char *what)
{
    char desc[1024];
    print_error("%s:%d: %s\n  seed 0x%llx case %llu: %s\n", __FILE__, line, what, (unsigned long long)kernel_seed,
                (unsigned long long)x->index, ref_describe(x->c, desc, sizeof(desc)));
    fail();
}

#define CASE_CHECK(x, cond)                             \
    do {                                                \
        if (!(cond))                                    \
            case_fail((x), __LINE__, "failed: " #cond); \
    } while (0)

static void check_bytes(const struct case_ctx *x, int line, const char *what, const void *got, const void *want,
                        uint64_t n)
{
    const uint8_t *g = got, *w = want;
    if (n == 0 || memcmp(got, want, n) == 0)
        return;
    for (uint64_t i = 0; i < n; i++) {
        if (g[i] != w[i]) {
            char msg[200];
            snprintf(msg, sizeof(msg), "%s: byte %llu of %llu is 0x%02x, oracle has 0x%02x", what,
                     (unsigned long long)i, (unsigned long long)n, g[i], w[i]);
            case_fail(x, line, msg);
        }
    }
}

/* ---- inputs ---- */

struct sample {
    const char *s;
    size_t len;
};
#define SAMPLE(lit) {lit, sizeof(lit) - 1}

static char long_string[LONG_STRING_BYTES];
static const struct sample samples[] = {
    SAMPLE(""),
    SAMPLE("a"),
    SAMPLE("tile"),
    SAMPLE("h\xc3\xa9llo w\xc3\xb6rld"), /* héllo wörld */
    SAMPLE("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e"), /* 日本語 */
    SAMPLE("\xf0\x9f\x99\x82 \xf0\x9f\x99\x83"), /* two emoji */
    SAMPLE("embedded\0nul"),
    SAMPLE("  spaces and \"quotes\" and \\backslashes\\  "),
    {long_string, sizeof(long_string)},
};
#define NSAMPLES (sizeof(samples) / sizeof(samples[0]))

/* The input of a case. String elements are views into `blob`, one copy of
 * a sample per element (separated by a byte, so even empty strings have
 * distinct addresses); `which` records the sample each element shows. */
struct input {
    void *data;
    char *blob;
    uint8_t *which;
};

static void make_strings(struct ref_rng *r, uint64_t n, struct input *in)
{
    struct tile_str *v = in->data;
    size_t total = 0;
    in->which = malloc(n ? n : 1);
    for (uint64_t i = 0; i < n; i++) {
        in->which[i] = (uint8_t)(ref_rng_one_in(r, 20) ? NSAMPLES - 1 : ref_rng_below(r, NSAMPLES - 1));
        total += samples[in->which[i]].len + 1;
    }
    in->blob = malloc(total ? total : 1);
    char *p = in->blob;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(p, samples[in->which[i]].s, samples[in->which[i]].len);
        v[i] = (struct tile_str){p, samples[in->which[i]].len};
        p += samples[in->which[i]].len;
        *p++ = '|';
    }
}

static struct input make_input(struct ref_rng *r, enum tile_dtype dtype, uint64_t nelem)
{
    struct input in = {0};
    size_t bytes = (size_t)nelem * tile_dtype_size(dtype);
    in.data = malloc(bytes ? bytes : 1);
    if (tile_dtype_is_string(dtype))
        make_strings(r, nelem, &in);
    else
        ref_rng_fill(r, in.data, bytes);
    return in;
}

static void free_input(struct input *in)
{
    free(in->data);
    free(in->blob);
    free(in->which);
}

/* ---- checks ---- */

static void check_plan(const struct case_ctx *x, const struct tile_plan *pl, const struct ref_problem *p)
{
    uint64_t es = tile_dtype_size(x->c->dtype), rp = 1;
    CASE_CHECK(x, pl->dtype == x->c->dtype && pl->elem_size == es);
    CASE_CHECK(x, pl->out_rank == p->rank);
    for (int i = 0; i < p->rank; i++) {
        CASE_CHECK(x, pl->in_shape[i] == p->in_shape[i]);
        CASE_CHECK(x, pl->repeats[i] == p->repeats[i]);
        CASE_CHECK(x, pl->out_shape[i] == p->out_shape[i]);
        rp *= (uint64_t)p->repeats[i];
    }
    CASE_CHECK(x, pl->in_elems == p->in_elems && pl->in_bytes == p->in_elems * es);
    CASE_CHECK(x, pl->out_elems == p->out_elems && pl->out_bytes == p->out_elems * es);
    CASE_CHECK(x, pl->repeat_product == rp);
    if (p->out_elems == 0) {
        CASE_CHECK(x, pl->nlev == 0);
        return;
    }
    /* Level 0 is the whole output, built from the whole input. */
    CASE_CHECK(x, pl->nlev >= 1 && pl->nlev <= p->rank + 1);
    CASE_CHECK(x, pl->lev_tile[0] * pl->lev_rep[0] == pl->out_bytes);
    CASE_CHECK(x, pl->lev_in[0] * pl->lev_in_stride[0] == pl->in_bytes);
}

/* Every string of the expected output (which each producer must match
 * byte for byte) is the sample its source element shows, at the source's
 * own address: the views are borrowed, never copied. */
static void check_strings(const struct case_ctx *x, const struct ref_problem *p, const struct input *in,
                          const void *out)
{
    const struct tile_str *o = out, *src = in->data;
    for (uint64_t k = 0; k < p->out_elems; k++) {
        uint64_t s = ref_source_index(p, k);
        const struct sample *want = &samples[in->which[s]];
        CASE_CHECK(x, o[k].ptr == src[s].ptr && o[k].len == want->len);
        CASE_CHECK(x, memcmp(o[k].ptr, want->s, want->len) == 0);
    }
}

static uint8_t *guarded_alloc(uint64_t n)
{
    uint8_t *b = malloc(n + 2 * GUARD);
    memset(b, GUARD_BYTE, GUARD);
    memset(b + GUARD + n, GUARD_BYTE, GUARD);
    return b + GUARD;
}

static void check_guards(const struct case_ctx *x, const uint8_t *b, uint64_t n)
{
    for (unsigned i = 0; i < GUARD; i++) {
        CASE_CHECK(x, b[-1 - (int)i] == GUARD_BYTE);
        CASE_CHECK(x, b[n + i] == GUARD_BYTE);
    }
}

static void guarded_free(uint8_t *b)
{
    free(b - GUARD);
}

/* How tile_execute may write: non-temporal stores, or plain stores with
 * whole tiles written in pieces (kernel.c) of the default size, of fewer
 * bytes than a vector, of an odd size, and copied with memcpy instead of
 * the vector loop (hotcopy.h). Small pieces make these small outputs take
 * every path big ones take. */
struct write_mode {
    enum tile_stores stores;
    uint64_t chunk; /* 0: the default */
    bool memcpy_only;
};

static const struct write_mode write_modes[] = {
    {TILE_STORES_STREAM, 0, false}, {TILE_STORES_CACHED, 0, false},  {TILE_STORES_CACHED, 7, false},
    {TILE_STORES_CACHED, 100, false}, {TILE_STORES_CACHED, 256, true},
};

static void force_write_mode(const struct write_mode *m)
{
    tile_stores_force(m->stores);
    tile_kernel_force_chunk(m->chunk);
    tile_copy_hot_force_memcpy(m->memcpy_only);
}

static const struct write_mode default_mode = {TILE_STORES_AUTO, 0, false};

/* tile_execute without a pool and split across each pool in page-sized
 * tasks, into a guarded buffer, in every write mode: the size rule would
 * give these small outputs plain stores and default pieces only, and the
 * pools would keep them on one thread. */
static void check_execute(const struct case_ctx *x, const struct tile_plan *pl, const struct input *in,
                          const void *want)
{
    uint8_t *got = guarded_alloc(pl->out_bytes);
    for (size_t m = 0; m < sizeof(write_modes) / sizeof(write_modes[0]); m++) {
        const struct write_mode *w = &write_modes[m];
        force_write_mode(w);
        for (int i = -1; i < 2; i++) {
            struct tile_pool *pool = i < 0 ? NULL : kernel_pools[i];
            char what[120];
            snprintf(what, sizeof(what), "tile_execute with %d pool threads, %s stores, pieces of %llu bytes%s",
                     tile_pool_size(pool), w->stores == TILE_STORES_STREAM ? "non-temporal" : "plain",
                     (unsigned long long)w->chunk, w->memcpy_only ? " copied by memcpy" : "");
            memset(got, 0, pl->out_bytes);
            tile_kernel_force_split(pool != NULL);
            tile_execute(pl, in->data, got, pool);
            tile_kernel_force_split(false);
            check_bytes(x, __LINE__, what, got, want, pl->out_bytes);
            check_guards(x, got, pl->out_bytes);
        }
    }
    force_write_mode(&default_mode);
    guarded_free(got);
}

static void check_run(const struct case_ctx *x, const struct ref_problem *p, const struct input *in,
                      const void *want)
{
    struct tile_tensor t = {.dtype = x->c->dtype, .rank = x->c->rank, .data = in->data};
    struct tile_tensor out;
    struct tile_error e = {0};
    struct tile_spec spec = ref_spec(x->c);
    memcpy(t.shape, x->c->shape, sizeof(t.shape));
    t.nelem = p->in_elems;
    CASE_CHECK(x, tile_run(&t, &spec, &out, kernel_pools[x->index % 2], &e) == 0);
    CASE_CHECK(x, out.dtype == x->c->dtype && out.rank == p->rank && out.nelem == p->out_elems);
    CASE_CHECK(x, memcmp(out.shape, p->out_shape, sizeof(out.shape[0]) * (size_t)p->rank) == 0);
    check_bytes(x, __LINE__, "tile_run", out.data, want, tile_tensor_nbytes(&out));
    tile_tensor_free(&out);
}

static void check_rejected(const struct case_ctx *x, const struct tile_spec *spec)
{
    struct tile_plan pl;
    struct tile_tensor t = {.dtype = x->c->dtype, .rank = x->c->rank}, out;
    struct tile_error e = {0}, e2 = {0};
    char needle[40];
    memcpy(t.shape, x->c->shape, sizeof(t.shape));
    snprintf(needle, sizeof(needle), "semantics %s ", tile_semantics_name(x->c->sem));
    CASE_CHECK(x, tile_plan_init(&pl, x->c->dtype, x->c->rank, x->c->shape, spec, &e) == -1);
    CASE_CHECK(x, e.code == TILE_EINVAL && strstr(e.text, needle) != NULL);
    CASE_CHECK(x, tile_run(&t, spec, &out, NULL, &e2) == -1);
    CASE_CHECK(x, e2.code == TILE_EINVAL && out.data == NULL && out.dtype == TILE_DTYPE_INVALID);
}

/* An accepted case, planned, with its input and the oracle's output. */
struct prepared {
    struct ref_problem p;
    struct tile_plan pl;
    struct input in;
    uint8_t *want;
};

static void prepare(const struct case_ctx *x, struct ref_rng *r, struct prepared *k)
{
    struct tile_spec spec = ref_spec(x->c);
    struct tile_error e = {0};
    CASE_CHECK(x, ref_expand(x->c, &k->p) == 0);
    if (tile_plan_init(&k->pl, x->c->dtype, x->c->rank, x->c->shape, &spec, &e) < 0)
        case_fail(x, __LINE__, e.text);
    k->in = make_input(r, x->c->dtype, k->p.in_elems);
    k->want = malloc(k->pl.out_bytes ? k->pl.out_bytes : 1);
    ref_tile(&k->p, k->pl.elem_size, k->in.data, k->want);
}

static void release(struct prepared *k)
{
    free(k->want);
    free_input(&k->in);
}

/* The plan, tile_execute and tile_run of an accepted case. */
static void check_accepted(const struct case_ctx *x, const struct prepared *k)
{
    check_plan(x, &k->pl, &k->p);
    if (tile_dtype_is_string(x->c->dtype))
        check_strings(x, &k->p, &k->in, k->want);
    check_execute(x, &k->pl, &k->in, k->want);
    check_run(x, &k->p, &k->in, k->want);
}

/* The full check of one case under its semantics. */
static void check_case(const struct case_ctx *x, struct ref_rng *r)
{
    struct ref_problem p;
    struct prepared k;
    if (ref_expand(x->c, &p) < 0) {
        struct tile_spec spec = ref_spec(x->c);
        check_rejected(x, &spec);
        return;
    }
    prepare(x, r, &k);
    check_accepted(x, &k);
    release(&k);
}

/* ---- random byte ranges ---- */

struct range {
    uint64_t off, len;
};

/* The range [off, off + len) clipped to an output of `total` bytes. */
static struct range clip(uint64_t off, uint64_t len, uint64_t total)
{
    if (off > total)
        off = total;
    return (struct range){off, len < total - off ? len : total - off};
}

/* Ranges that stress the edges: empty ones, the first and final bytes, the
 * whole output, and short unaligned ranges straddling tile boundaries of
 * every level; then random ones of every length. */
static int pick_ranges(struct ref_rng *r, const struct tile_plan *pl, struct range *out, int cap)
{
    uint64_t total = pl->out_bytes;
    int n = 0;
    out[n++] = clip(0, 0, total);
    out[n++] = clip(total, 0, total);
    out[n++] = clip(total ? total - 1 : 0, 1, total);
    out[n++] = clip(0, total, total);
    out[n++] = clip(ref_rng_below(r, total + 1), 1, total);
    for (int l = 0; l < pl->nlev && n + 2 <= cap; l++) {
        uint64_t tile = pl->lev_tile[l], k = ref_rng_below(r, pl->lev_rep[l]) + 1;
        uint64_t back = ref_rng_range(r, 1, 9), len = back + ref_rng_below(r, 2 * tile + 1);
        out[n++] = clip(k * tile > back ? k * tile - back : 0, len, total);
        out[n++] = clip(k * tile, ref_rng_below(r, tile + 1), total);
    }
    while (n < cap) {
        uint64_t off = ref_rng_below(r, total + 1);
        uint64_t len = ref_rng_one_in(r, 2) ? ref_rng_below(r, 65) : ref_rng_below(r, total - off + 1);
        out[n++] = clip(off, len, total);
    }
    return n;
}

/* Reads of random ranges, each in a write mode with plain stores (tile_read
 * never streams) taken in turn. */
static void check_reads(const struct case_ctx *x, struct ref_rng *r, const struct tile_plan *pl, const void *in,
                        const uint8_t *want, int nreads)
{
    struct range ranges[64];
    int n = pick_ranges(r, pl, ranges, nreads < 64 ? nreads : 64);
    for (int i = 0; i < n; i++) {
        force_write_mode(&write_modes[1 + (x->index + (uint64_t)i) % (sizeof(write_modes) / sizeof(write_modes[0]) - 1)]);
        uint8_t *got = guarded_alloc(ranges[i].len);
        char what[80];
        snprintf(what, sizeof(what), "tile_read(offset %llu, len %llu)", (unsigned long long)ranges[i].off,
                 (unsigned long long)ranges[i].len);
        tile_read(pl, in, ranges[i].off, ranges[i].len, got);
        check_bytes(x, __LINE__, what, got, want + ranges[i].off, ranges[i].len);
        check_guards(x, got, ranges[i].len);
        guarded_free(got);
    }
    force_write_mode(&default_mode);
}

/* ---- the plan re-sized to index elements ---- */

/* Tiles an array whose element i holds i (little-endian, in `size` bytes)
 * with `pl` re-sized to `size`: every output element must name its source. */
static void check_resized(const struct case_ctx *x, const struct tile_plan *pl, const struct ref_problem *p,
                          uint64_t size, struct tile_pool *pool)
{
    struct tile_plan rp;
    tile_plan_with_elem_size(pl, size, &rp);
    CASE_CHECK(x, rp.elem_size == size && rp.in_bytes == p->in_elems * size && rp.out_bytes == p->out_elems * size);
    CASE_CHECK(x, rp.out_rank == pl->out_rank && rp.out_elems == pl->out_elems);
    uint8_t *idx = calloc(p->in_elems ? p->in_elems : 1, size), *out = guarded_alloc(rp.out_bytes);
    for (uint64_t i = 0; i < p->in_elems; i++)
        for (uint64_t b = 0; b < size && b < 8; b++)
            idx[i * size + b] = (uint8_t)(i >> (8 * b));
    tile_execute(&rp, idx, out, pool);
    check_guards(x, out, rp.out_bytes);
    uint64_t mask = size < 8 ? (UINT64_C(1) << (8 * size)) - 1 : UINT64_MAX;
    for (uint64_t k = 0; k < p->out_elems; k++) {
        uint64_t got = 0;
        for (uint64_t b = 0; b < size && b < 8; b++)
            got |= (uint64_t)out[k * size + b] << (8 * b);
        CASE_CHECK(x, got == (ref_source_index(p, k) & mask));
    }
    guarded_free(out);
    free(idx);
}

/* ---- tests ---- */

static void random_cases_of_dtype(void **state)
{
    enum tile_dtype dtype = *(const enum tile_dtype *)*state;
    for (uint64_t i = 0; i < CASES_PER_DTYPE; i++) {
        struct ref_case c;
        struct ref_rng r;
        struct case_ctx x = {&c, (uint64_t)dtype * CASES_PER_DTYPE + i};
        ref_rng_seed(&r, ref_case_seed(kernel_seed, x.index));
        ref_random_case(&r, dtype, ref_rng_one_in(&r, 10) ? MEDIUM_OUT_ELEMS : SMALL_OUT_ELEMS, &c);
        for (int s = 0; s < TILE_SEM_COUNT; s++) {
            c.sem = (enum tile_semantics)s;
            check_case(&x, &r);
        }
    }
}

/* Draws random cases until one is accepted by its (random) semantics. */
static void accepted_case(struct ref_rng *r, struct ref_case *c)
{
    struct ref_problem p;
    do {
        ref_random_case(r, TILE_DTYPE_INVALID, ref_rng_one_in(r, 4) ? MEDIUM_OUT_ELEMS : SMALL_OUT_ELEMS, c);
        c->sem = (enum tile_semantics)ref_rng_below(r, TILE_SEM_COUNT);
    } while (ref_expand(c, &p) < 0);
}

static void random_reads(void **state)
{
    (void)state;
    for (uint64_t i = 0; i < READ_PLANS; i++) {
        struct ref_case c;
        struct ref_rng r;
        struct prepared k;
        struct case_ctx x = {&c, 100000 + i};
        ref_rng_seed(&r, ref_case_seed(kernel_seed, x.index));
        accepted_case(&r, &c);
        prepare(&x, &r, &k);
        check_reads(&x, &r, &k.pl, k.in.data, k.want, 40);
        release(&k);
    }
}

static void resized_plans(void **state)
{
    static const uint64_t sizes[] = {4, 1, 2, 3, 8, 16};
    (void)state;
    for (uint64_t i = 0; i < RESIZE_PLANS; i++) {
        struct ref_case c;
        struct ref_rng r;
        struct prepared k;
        struct case_ctx x = {&c, 200000 + i};
        ref_rng_seed(&r, ref_case_seed(kernel_seed, x.index));
        accepted_case(&r, &c);
        prepare(&x, &r, &k);
        for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
            check_resized(&x, &k.pl, &k.p, sizes[j], NULL);
        release(&k);
    }
}

#define CASE2(sem_, dt, d0, d1, r0, r1) \
    {.sem = (sem_), .dtype = (dt), .rank = 2, .shape = {d0, d1}, .nrepeats = 2, .repeats = {r0, r1}}

/* Outputs of a few MiB: tiles of many chunks, written piece by piece to
 * every copy or (long rows) tile after tile, regenerated under
 * non-temporal stores; outputs of TILE_PARALLEL_MIN_BYTES and more are
 * split across the pool. check_execute runs every write mode. */
static const struct ref_case large_cases[] = {
    CASE2(TILE_SEM_ONNX, TILE_FLOAT32, 256, 256, 4, 4),
    CASE2(TILE_SEM_ONNX, TILE_FLOAT32, 4096, 1, 1, 64),
    CASE2(TILE_SEM_ONNX, TILE_FLOAT32, 16384, 1, 1, 64),
    {.sem = TILE_SEM_ONNX, .dtype = TILE_FLOAT32, .rank = 1, .shape = {64}, .nrepeats = 1, .repeats = {16384}},
    CASE2(TILE_SEM_ONNX, TILE_FLOAT32, 512, 512, 1, 1),
    {.sem = TILE_SEM_ONNX, .dtype = TILE_FLOAT32, .rank = 4, .shape = {32, 1, 1, 256}, .nrepeats = 4,
     .repeats = {2, 3, 2, 4}},
    CASE2(TILE_SEM_ONNX, TILE_FLOAT32, 2, 80000, 3, 2),
    CASE2(TILE_SEM_ONNX, TILE_FLOAT32, 1024, 1024, 2, 1),
    {.sem = TILE_SEM_ONNX, .dtype = TILE_UINT8, .rank = 1, .shape = {3}, .nrepeats = 1, .repeats = {3000000}},
    CASE2(TILE_SEM_NUMPY, TILE_STRING, 256, 16, 4, 64),
    CASE2(TILE_SEM_ONNX, TILE_COMPLEX128, 300, 3, 2, 300),
    {.sem = TILE_SEM_NUMPY, .dtype = TILE_BFLOAT16, .rank = 1, .shape = {1000}, .nrepeats = 2,
     .repeats = {3, 1000}},
    {.sem = TILE_SEM_ONNX1, .dtype = TILE_FLOAT64, .rank = 2, .shape = {100, 1000}, .tiles = 8, .axis = -2},
    {.sem = TILE_SEM_DIRECTML, .dtype = TILE_INT64, .rank = 3, .shape = {8, 1, 4096}, .nrepeats = 3,
     .repeats = {2, 3, 4}},
    {.sem = TILE_SEM_OPENVINO, .dtype = TILE_INT16, .rank = 3, .shape = {3, 1, 700}, .nrepeats = 5,
     .repeats = {2, 1, 5, 7, 1}},
    /* bench/peers/cases.txt's in-cache cases: folded short rows, a first
     * level without repeats, copies fanned out across five levels. */
    {.sem = TILE_SEM_ONNX, .dtype = TILE_UINT8, .rank = 3, .shape = {3, 224, 224}, .nrepeats = 3,
     .repeats = {1, 4, 4}},
    {.sem = TILE_SEM_ONNX, .dtype = TILE_INT64, .rank = 5, .shape = {2, 3, 4, 5, 6}, .nrepeats = 5,
     .repeats = {2, 1, 3, 1, 2}},
    {.sem = TILE_SEM_ONNX, .dtype = TILE_FLOAT32, .rank = 6, .shape = {2, 3, 4, 5, 6, 7}, .nrepeats = 6,
     .repeats = {3, 2, 2, 2, 2, 4}},
};

static void large_outputs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(large_cases) / sizeof(large_cases[0]); i++) {
        struct ref_rng r;
        struct prepared k;
        struct case_ctx x = {&large_cases[i], 300000 + i};
        ref_rng_seed(&r, ref_case_seed(kernel_seed, x.index));
        prepare(&x, &r, &k);
        check_accepted(&x, &k);
        check_reads(&x, &r, &k.pl, k.in.data, k.want, 24);
        check_resized(&x, &k.pl, &k.p, 4, kernel_pools[1]);
        release(&k);
    }
}

/* ---- main ---- */

static int setup_group(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(long_string); i++) /* long, multi-byte: "ß" and a varying digit */
        long_string[i] = i % 3 == 0 ? (char)('0' + i % 10) : i % 3 == 1 ? '\xc3' : '\x9f';
    for (int i = 0; i < 2; i++)
        kernel_pools[i] = tile_pool_init(2 + i, 0, NULL);
    if (!kernel_pools[0] || !kernel_pools[1])
        return -1;
    /* Whether a large output is split is decided by timing (autosplit.h);
     * teach the pools opposite verdicts so that both ways are tested where
     * tile_run and the re-sized plans leave it to the pool: the 2-thread
     * pool keeps to one thread, the 3-thread pool splits. Each way's run
     * is one call longer than the window: its first call only settles. */
    for (int c = 0; c < TILE_AUTOSPLIT_CLASSES; c++) {
        uint64_t bytes = (uint64_t)TILE_PARALLEL_MIN_BYTES << c;
        for (int i = 0; i < 2; i++) {
            struct tile_autosplit *a = tile_pool_autosplit(kernel_pools[i]);
            for (int w = 0; w < TILE_WORK_KINDS; w++) {
                for (int k = 0; k <= TILE_AUTOSPLIT_WINDOW; k++)
                    tile_autosplit_record(a, w, bytes, TILE_SPLIT_ONE, i == 0 ? 1 : 1000000000);
                for (int k = 0; k <= TILE_AUTOSPLIT_WINDOW; k++)
                    tile_autosplit_record(a, w, bytes, TILE_SPLIT_POOL, i == 0 ? 1000000000 : 1);
            }
        }
    }
    return 0;
}

static int teardown_group(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++)
        tile_pool_free(kernel_pools[i]);
    return 0;
}

int main(void)
{
    static char names[TILE_DTYPE_COUNT][48];
    static enum tile_dtype dtypes[TILE_DTYPE_COUNT];
    struct CMUnitTest tests[TILE_DTYPE_COUNT + 3];
    kernel_seed = ref_base_seed(KERNEL_SEED);
    for (int d = 0; d < TILE_DTYPE_COUNT; d++) {
        snprintf(names[d], sizeof(names[d]), "random_cases_%s", tile_dtype_name((enum tile_dtype)d));
        dtypes[d] = (enum tile_dtype)d;
        tests[d] = (struct CMUnitTest){names[d], random_cases_of_dtype, NULL, NULL, &dtypes[d]};
    }
    tests[TILE_DTYPE_COUNT] = (struct CMUnitTest)cmocka_unit_test(random_reads);
    tests[TILE_DTYPE_COUNT + 1] = (struct CMUnitTest)cmocka_unit_test(resized_plans);
    tests[TILE_DTYPE_COUNT + 2] = (struct CMUnitTest)cmocka_unit_test(large_outputs);
    return cmocka_run_group_tests_name("kernel", tests, setup_group, teardown_group);
}
