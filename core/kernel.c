/* kernel.c - the tiling kernel: any byte range of the output, at memory speed.
 *
 * DESIGN. After plan.c collapses the problem, level l of the output is
 * lev_rep[l] copies of a "tile", and a tile is lev_in[l] sub-blocks, each
 * the output of level l+1 for one input slice (the innermost level's
 * sub-blocks are single bytes, so its tile is one contiguous input row).
 * fill_level() writes any byte range of a level's block:
 *   - the first (possibly partial) tile is generated from the input;
 *   - further whole tiles are replicated from the copy just written while
 *     that copy is small enough to sit in cache: first by doubling, then in
 *     cache-sized chunks, so a 4-byte row repeated 4096 times costs a dozen
 *     memcpy calls, not 4096;
 *   - tiles too big for the cache are generated again from the input, which
 *     reads less than copying the output back from DRAM would.
 * Because any range can be produced on its own, parallelism is just a split
 * of [0, out_bytes) and streaming is the same call per chunk.
 */
#include "tile.h"

#include <string.h>

/* A written tile at most this big is copied from instead of regenerated. */
#define TILE_REPLICATE_MAX (256u << 10)
/* Doubling stops at this size; beyond it the doubled block is copied as is. */
#define TILE_DOUBLING_CAP (32u << 10)
/* Per-thread chunks of a parallel run are aligned to whole pages. */
#define TILE_SPLIT_ALIGN 4096u

static void fill_level(const struct tile_plan *p, int l, const uint8_t *src, uint64_t lo, uint64_t hi,
                       uint8_t *dst);

/* Writes bytes [a, b) of one tile of level l (input slice at src). */
static void write_tile(const struct tile_plan *p, int l, const uint8_t *src, uint64_t a, uint64_t b, uint8_t *dst)
{
    if (l == p->nlev - 1) {
        memcpy(dst, src + a, b - a);
        return;
    }
    uint64_t sub = p->lev_sub[l], stride = p->lev_in_stride[l];
    for (uint64_t j = a / sub; j * sub < b; j++) {
        uint64_t s0 = j * sub > a ? 0 : a - j * sub;
        uint64_t s1 = (j + 1) * sub < b ? sub : b - j * sub;
        fill_level(p, l + 1, src + j * stride, s0, s1, dst);
        dst += s1 - s0;
    }
}

/* dst[0, tile) holds one tile; writes copies up to `total` bytes after it
 * (total is a multiple of tile). */
static void replicate(uint8_t *dst, uint64_t tile, uint64_t total)
{
    uint64_t done = tile;
    while (done < total && done < TILE_DOUBLING_CAP) {
        uint64_t n = total - done < done ? total - done : done;
        memcpy(dst + done, dst, n);
        done += n;
    }
    uint64_t chunk = done;
    while (done < total) {
        uint64_t n = total - done < chunk ? total - done : chunk;
        memcpy(dst + done, dst, n);
        done += n;
    }
}

/* Writes bytes [lo, hi) of level l's block (lev_rep copies of its tile). */
static void fill_level(const struct tile_plan *p, int l, const uint8_t *src, uint64_t lo, uint64_t hi,
                       uint8_t *dst)
{
    uint64_t tile = p->lev_tile[l];
    uint64_t a = lo % tile;
    if (a + (hi - lo) <= tile) { /* inside one tile */
        write_tile(p, l, src, a, a + (hi - lo), dst);
        return;
    }
    if (a) { /* partial head */
        write_tile(p, l, src, a, tile, dst);
        dst += tile - a;
        lo += tile - a;
    }
    uint64_t whole = (hi - lo) / tile * tile, tail = (hi - lo) - whole;
    if (whole == 0) {
        write_tile(p, l, src, 0, tail, dst);
        return;
    }
    write_tile(p, l, src, 0, tile, dst);
    if (tile <= TILE_REPLICATE_MAX) {
        replicate(dst, tile, whole);
        memcpy(dst + whole, dst, tail);
        return;
    }
    for (uint64_t off = tile; off < whole; off += tile)
        write_tile(p, l, src, 0, tile, dst + off);
    write_tile(p, l, src, 0, tail, dst + whole);
}

void tile_read(const struct tile_plan *p, const void *in, uint64_t offset, uint64_t len, void *dst)
{
    if (len == 0 || p->nlev == 0)
        return;
    fill_level(p, 0, in, offset, offset + len, dst);
}

struct tile_exec {
    const struct tile_plan *plan;
    const void *in;
    uint8_t *out;
    uint64_t chunk;
};

static void exec_task(void *arg, uint64_t task)
{
    const struct tile_exec *x = arg;
    uint64_t lo = task * x->chunk;
    uint64_t hi = lo + x->chunk < x->plan->out_bytes ? lo + x->chunk : x->plan->out_bytes;
    tile_read(x->plan, x->in, lo, hi - lo, x->out + lo);
}

void tile_execute(const struct tile_plan *p, const void *in, void *out, struct tile_pool *pool)
{
    int nth = tile_pool_size(pool);
    if (!pool || nth <= 1 || p->out_bytes < TILE_PARALLEL_MIN_BYTES) {
        tile_read(p, in, 0, p->out_bytes, out);
        return;
    }
    /* One task per thread: ranges are independent, so finer splitting would
     * only add partial tiles at the seams. */
    uint64_t chunk = (p->out_bytes + (uint64_t)nth - 1) / (uint64_t)nth;
    chunk = (chunk + TILE_SPLIT_ALIGN - 1) / TILE_SPLIT_ALIGN * TILE_SPLIT_ALIGN;
    struct tile_exec x = {p, in, out, chunk};
    tile_pool_parallel(pool, (p->out_bytes + chunk - 1) / chunk, exec_task, &x);
}

int tile_run(const struct tile_tensor *in, const struct tile_spec *spec, struct tile_tensor *out,
             struct tile_pool *pool, struct tile_error *e)
{
    struct tile_plan plan;
    memset(out, 0, sizeof(*out));
    out->dtype = TILE_DTYPE_INVALID;
    if (tile_plan_init(&plan, in->dtype, in->rank, in->shape, spec, e) < 0)
        return -1;
    if (tile_tensor_init(out, plan.dtype, plan.out_rank, plan.out_shape, spec->max_output_bytes, e) < 0)
        return -1;
    tile_execute(&plan, in->data, out->data, pool);
    return 0;
}
