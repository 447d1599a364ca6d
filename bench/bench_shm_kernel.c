/* bench_shm_kernel.c - the kernel's own rate for bench/bench_shm.py: the
 * 1 GiB output the shared-memory benchmark requests (float32
 * [1024,1024]x[16,16]) tiled by the pool (one worker per CPU, as the
 * daemon's default) into a reused, pre-faulted buffer. It prints "ready",
 * then runs once per line read on stdin and prints the seconds it took, so
 * the caller alternates it with its own requests and a noisy neighbour
 * slows both alike; the caller takes the median.
 *
 * Reproduce: python3 bench/bench_shm.py build/tiled build/bench/bench_shm_kernel
 */
#include <stdio.h>
#include <time.h>

#include "tile.h"

#define IN_ELEMS (1024 * 1024)

static void run_timed(const struct tile_plan *plan, const float *in, void *out, struct tile_pool *pool)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    tile_execute(plan, in, out, pool);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.6f\n", (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
    fflush(stdout);
}

int main(void)
{
    int64_t shape[2] = {1024, 1024}, repeats[2] = {16, 16};
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = repeats, .nrepeats = 2};
    struct tile_plan plan;
    struct tile_error e = {0};
    struct tile_pool *pool = tile_pool_init(0, 0, &e);
    if (!pool || tile_plan_init(&plan, TILE_FLOAT32, 2, shape, &spec, &e) < 0) {
        fprintf(stderr, "bench_shm_kernel: %s\n", e.text);
        return 1;
    }
    float *in = tile_alloc_buffer(IN_ELEMS * sizeof(float));
    void *out = tile_alloc_buffer(plan.out_bytes);
    if (!in || !out)
        return 1;
    for (int i = 0; i < IN_ELEMS; i++)
        in[i] = (float)(i % 4093);
    tile_execute(&plan, in, out, pool); /* faults the buffer in */
    printf("ready\n");
    fflush(stdout);
    char line[16];
    while (fgets(line, sizeof(line), stdin))
        run_timed(&plan, in, out, pool);
    tile_free_buffer(out, plan.out_bytes);
    tile_free_buffer(in, IN_ELEMS * sizeof(float));
    tile_pool_free(pool);
    return 0;
}
