/* bench_kernel.c - throughput of the tiling kernel against memset/memcpy.
 *
 * DESIGN. Absolute GB/s mean little on a shared, noisy machine, so every
 * case is reported as a ratio to memset (the DRAM write ceiling: a tile
 * writes each output byte once while reading a cache-hot input) and memcpy
 * of the same number of bytes, measured in the same run, as medians of
 * several repetitions. Output buffers are reused and pre-faulted; large
 * cases get a second row with a freshly allocated output per repetition to
 * show the first-touch cost a server pays if it allocates per request.
 * The 'other' column is one thread with the store kind the policy did not
 * pick (core/stores.h): where it is faster, the policy chose wrong.
 *
 * Reproduce: make bench   (or build/bench/bench_kernel [reps])
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tile.h"
#include "autosplit.h"
#include "hotcopy.h"
#include "stores.h"

#define MAX_REPS 64
/* Warm-up calls before a case's alternating runs: the pool's and the
 * store kind's first trials (core/autosplit.h, core/stores.h). */
#define WARM_CALLS 32
/* Calls of each way in a row in the alternating runs, the last timed. */
#define RUN_CALLS 3

struct bench_case {
    const char *name;
    enum tile_dtype dtype;
    int rank;
    int64_t shape[6];
    int64_t repeats[6];
};

static const struct bench_case cases[] = {
    {"float32 [1024,1024]x[4,4]", TILE_FLOAT32, 2, {1024, 1024}, {4, 4}},
    {"float32 [1,1,256,256]x[1,1,8,8]", TILE_FLOAT32, 4, {1, 1, 256, 256}, {1, 1, 8, 8}},
    {"uint8 [3,224,224]x[1,4,4]", TILE_UINT8, 3, {3, 224, 224}, {1, 4, 4}},
    {"float32 [64]x[1048576]", TILE_FLOAT32, 1, {64}, {1048576}},
    {"float32 [4096,1]x[1,4096]", TILE_FLOAT32, 2, {4096, 1}, {1, 4096}},
    {"int64 [2,3,4,5,6]x[2,1,3,1,2]", TILE_INT64, 5, {2, 3, 4, 5, 6}, {2, 1, 3, 1, 2}},
    {"float32 [8192,8192]x[1,1] (identity)", TILE_FLOAT32, 2, {8192, 8192}, {1, 1}},
};

static double now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(v[0]), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A compiler barrier so memset/memcpy into an unread buffer are not elided. */
static void clobber(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

enum op { OP_MEMSET, OP_MEMCPY, OP_TILE, OP_TILE_FRESH };

struct run {
    const struct tile_plan *plan;
    const void *in;
    void *out, *src;
    struct tile_pool *pool;
};

static double time_once(enum op op, const struct run *r)
{
    uint64_t n = r->plan->out_bytes;
    double t0 = now_sec(), t1;
    switch (op) {
    case OP_MEMSET:
        memset(r->out, 1, n);
        break;
    case OP_MEMCPY:
        memcpy(r->out, r->src, n);
        break;
    case OP_TILE:
        tile_execute(r->plan, r->in, r->out, r->pool);
        break;
    case OP_TILE_FRESH: {
        void *fresh = tile_alloc_buffer(n);
        t0 = now_sec();
        tile_execute(r->plan, r->in, fresh, r->pool);
        t1 = now_sec();
        clobber(fresh);
        tile_free_buffer(fresh, n);
        return t1 - t0;
    }
    }
    t1 = now_sec();
    clobber(r->out);
    return t1 - t0;
}

/* Median GB/s of `reps` runs. */
static double gbps(enum op op, const struct run *r, int reps)
{
    double v[MAX_REPS];
    time_once(op, r); /* warm-up */
    for (int i = 0; i < reps; i++)
        v[i] = time_once(op, r);
    return (double)r->plan->out_bytes / median(v, reps) / 1e9;
}

/* Median GB/s of `op` single-threaded (*one) and with the pool (*all), the
 * runs alternating so that a noisy neighbour slows both columns alike: on
 * a shared machine, timing one after the other compares two moments. Each
 * way runs RUN_CALLS times in a row and its last call is timed: a split
 * call right after one-thread calls finds the pool's helper asleep and the
 * output in one core's cache (core/pool.c, core/autosplit.h), which a
 * caller running the same size again and again does not. */
static void gbps_pair(enum op op, const struct run *r1, const struct run *rn, int reps, double *one, double *all)
{
    double v1[MAX_REPS], vn[MAX_REPS];
    /* Let the pool learn whether splitting pays for this size and which
     * store kind, as a running server does over its first requests
     * (core/autosplit.h, core/stores.h). */
    for (int i = 0; i < WARM_CALLS; i++)
        time_once(op, r1);
    for (int i = 0; i < WARM_CALLS; i++)
        time_once(op, rn);
    for (int i = 0; i < reps; i++) {
        for (int k = 0; k < RUN_CALLS; k++)
            v1[i] = time_once(op, r1);
        for (int k = 0; k < RUN_CALLS; k++)
            vn[i] = time_once(op, rn);
    }
    *one = (double)r1->plan->out_bytes / median(v1, reps) / 1e9;
    *all = (double)rn->plan->out_bytes / median(vn, reps) / 1e9;
}

static void fill_input(void *in, uint64_t n)
{
    uint8_t *p = in;
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 2654435761u >> 13);
}

/* Each case, and its fresh-buffer row, gets a pool of its own: what a pool
 * learns about splitting (core/autosplit.h) is per size class, and a row's
 * figure should not depend on what an earlier row of the same size taught. */
static void bench_case(const struct bench_case *c, int reps)
{
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = c->repeats, .nrepeats = c->rank};
    struct tile_plan plan;
    struct tile_error err = {0};
    if (tile_plan_init(&plan, c->dtype, c->rank, c->shape, &spec, &err) < 0) {
        fprintf(stderr, "%s: %s\n", c->name, err.text);
        exit(1);
    }
    void *in = tile_alloc_buffer(plan.in_bytes), *out = tile_alloc_buffer(plan.out_bytes);
    void *src = tile_alloc_buffer(plan.out_bytes);
    fill_input(in, plan.in_bytes);
    memset(out, 0, plan.out_bytes);
    memset(src, 2, plan.out_bytes);
    struct tile_pool *pool = tile_pool_init(0, 0, NULL);
    struct run one = {&plan, in, out, src, NULL}, all = {&plan, in, out, src, pool};

    double ms = gbps(OP_MEMSET, &one, reps), mc = gbps(OP_MEMCPY, &one, reps);
    /* Below the parallel threshold tile_execute never uses the pool: both
     * columns are then the one same measurement. */
    bool pooled = plan.out_bytes >= TILE_PARALLEL_MIN_BYTES;
    double t1, tn;
    if (pooled)
        gbps_pair(OP_TILE, &one, &all, reps, &t1, &tn);
    else
        t1 = tn = gbps(OP_TILE, &one, reps);
    bool stream = tile_stores_stream(plan.out_bytes);
    tile_stores_force(stream ? TILE_STORES_CACHED : TILE_STORES_STREAM);
    double other = gbps(OP_TILE, &one, reps);
    tile_stores_force(TILE_STORES_AUTO);
    double mib = (double)plan.out_bytes / (1 << 20);
    printf("| %-36s | %9.1f | %6s | %6.1f | %6.1f | %6.1f | %6.1f | %6.1f | %5.2f | %5.2f |\n", c->name, mib,
           stream ? "stream" : "cached", t1, tn, other, ms, mc, t1 / ms, t1 / mc);
    if (plan.out_bytes >= (16u << 20)) {
        double f1, fn;
        tile_pool_free(pool);
        all.pool = pool = tile_pool_init(0, 0, NULL);
        if (pooled)
            gbps_pair(OP_TILE_FRESH, &one, &all, reps, &f1, &fn);
        else
            f1 = fn = gbps(OP_TILE_FRESH, &one, reps);
        printf("| %-36s | %9s | %6s | %6.1f | %6.1f | %6s | %6s | %6s | %5.2f | %5.2f |\n", "  (fresh output buffer)", "",
               "", f1, fn, "", "", "", f1 / ms, f1 / mc);
    }
    fflush(stdout);
    tile_pool_free(pool);
    tile_free_buffer(in, plan.in_bytes);
    tile_free_buffer(out, plan.out_bytes);
    tile_free_buffer(src, plan.out_bytes);
}

/* What the kernel's copies of pieces still in L1 cost (core/hotcopy.h): an
 * 8 KiB source copied over a 2.3 MiB output (the size of the uint8 case)
 * with tile_copy_hot and with memcpy, against memset of the same bytes;
 * each way's median GB/s, the ways interleaved per repetition. */
static void bench_hot_copy(int reps)
{
    enum { PIECE = 8 << 10, PIECES = 294, OUT = PIECE * PIECES, CALLS = 20 };
    uint8_t *out = tile_alloc_buffer(OUT), *src = tile_alloc_buffer(PIECE);
    memset(src, 3, PIECE);
    memset(out, 1, OUT);
    double v[3][MAX_REPS];
    for (int r = 0; r < reps; r++) {
        for (int way = 0; way < 3; way++) {
            double t0 = now_sec();
            for (int c = 0; c < CALLS; c++) {
                for (int i = 0; i < PIECES && way < 2; i++) {
                    if (way == 0)
                        tile_copy_hot(out + i * PIECE, src, PIECE);
                    else
                        memcpy(out + i * PIECE, src, PIECE);
                }
                if (way == 2)
                    memset(out, 1 + c, OUT);
                clobber(out);
            }
            v[way][r] = (double)OUT * CALLS / (now_sec() - t0) / 1e9;
        }
    }
    double hot = median(v[0], reps), mc = median(v[1], reps), ms = median(v[2], reps);
    printf("\ncopies of an 8 KiB piece in L1 over %.1f MiB: tile_copy_hot (%s) %.1f GB/s, memcpy %.1f GB/s, "
           "memset %.1f GB/s (hot/memset %.2f, memcpy/memset %.2f)\n",
           (double)OUT / (1 << 20), tile_copy_hot_vector() ? "AVX2 loop" : "memcpy", hot, mc, ms, hot / ms, mc / ms);
    tile_free_buffer(out, OUT);
    tile_free_buffer(src, PIECE);
}

/* The tiny case: plan + execute of 2x2 float32 by [2,2], ns per call. */
static void bench_tiny(int reps)
{
    const int64_t shape[2] = {2, 2}, rep[2] = {2, 2};
    const float in[4] = {1, 2, 3, 4};
    float out[16];
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = rep, .nrepeats = 2};
    enum { CALLS = 200000 };
    double v[MAX_REPS];
    for (int r = 0; r < reps; r++) {
        double t0 = now_sec();
        for (int i = 0; i < CALLS; i++) {
            struct tile_plan plan;
            tile_plan_init(&plan, TILE_FLOAT32, 2, shape, &spec, NULL);
            tile_execute(&plan, in, out, NULL);
            clobber(out);
        }
        v[r] = (now_sec() - t0) / CALLS * 1e9;
    }
    printf("\ntiny case float32 [2,2]x[2,2], plan + execute: %.0f ns per call (median of %d x %d calls)\n",
           median(v, reps), reps, CALLS);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 9;
    if (reps < 1 || reps > MAX_REPS)
        reps = 9;
    struct tile_pool *probe = tile_pool_init(0, 0, NULL);
    printf("tiled kernel benchmark: GB/s of output written, medians of %d runs; %d workers\n", reps,
           tile_pool_size(probe));
    tile_pool_free(probe);
    printf("reproduce: make bench   (or: build/bench/bench_kernel %d)\n", reps);
    printf("(outputs under %u MiB never use the pool: 'all' = '1 thr'; larger ones use it when the pool's\n"
           " own timings say it is faster, see core/autosplit.h: 'all' is what tile_execute delivers)\n\n",
           TILE_PARALLEL_MIN_BYTES >> 20);
    const struct tile_cache_sizes *cs = tile_cache_sizes();
    printf("store policy: last-level cache %llu KiB (%s); outputs from %llu KiB on are streamed\n\n",
           (unsigned long long)cs->llc_bytes >> 10, cs->source, (unsigned long long)tile_stores_stream_min() >> 10);
    printf("| %-36s | %9s | %6s | %6s | %6s | %6s | %6s | %6s | %5s | %5s |\n", "case", "out MiB", "stores", "1 thr",
           "all", "other", "memset", "memcpy", "1/set", "1/cpy");
    printf("|%s|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------------------------", "-----------",
           "--------", "--------", "--------", "--------", "--------", "--------", "-------", "-------");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        bench_case(&cases[i], reps);
    bench_hot_copy(reps);
    bench_tiny(reps);
    return 0;
}
