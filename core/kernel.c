/* kernel.c - the tiling kernel: any byte range of the output, at memory speed.
 *
 * DESIGN. After plan.c collapses the problem, level l of the output is
 * lev_rep[l] copies of a "tile", and a tile is lev_in[l] sub-blocks, each
 * the output of level l+1 for one input slice (the innermost level's
 * sub-blocks are single bytes, so its tile is one contiguous input row).
 * fill_level() writes any byte range of a level's block:
 *   - a partial tile at either end is generated from the input;
 *   - whole tiles, with plain stores, are written by fill_tiles(): every
 *     piece of the output (a chunk of a few KiB) is generated once and at
 *     once copied to every other place it appears, at this level and at
 *     the levels above, while it is still in L1. A 4-byte row repeated 4096
 *     times is doubled to a chunk and that chunk copied; a 200 KiB tile
 *     repeated 4 times is written chunk by chunk, each chunk copied 3 times.
 *     Copying a whole written tile instead reads it back from L2 or beyond,
 *     which ran at memcpy's speed, where copies from L1 come close to the
 *     write speed of memset (hotcopy.h). Tiles of long rows, cheap to
 *     generate, are written one after the other (TILE_SEQUENTIAL_SUB);
 *   - with non-temporal stores nothing written can be read back cheaply,
 *     so every tile is generated from the input, which stays in cache.
 * Because any range can be produced on its own, parallelism is just a split
 * of [0, out_bytes) and streaming is the same call per chunk.
 */
#include "tile.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autosplit.h"
#include "hotcopy.h"
#include "stores.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The pieces fill_tiles() generates and copies: small enough that the
 * piece stays in L1 (32 KiB here) while its copies are written. On the
 * uint8 [3,224,224]x[1,4,4] case 8 KiB was as fast as 4 and faster than
 * 16 or 32 KiB. */
#define TILE_CHUNK_BYTES (8u << 10)
/* Tiles made of input rows repeated into sub-blocks of at least this many
 * bytes are written one after the other rather than piece by piece to
 * every copy at once: such a sub-block takes a handful of calls to
 * generate, and one stream of stores beat seven interleaved ones (float32
 * [1,1,256,256]x[1,1,8,8], 8 KiB sub-blocks: 1.4-1.6x as fast). So are
 * long input rows repeated (a 160 KB row 100 times: 1.14x as fast as in
 * pieces to 99 places). Deeper sub-blocks cost more to generate than to
 * copy and are still copied. */
#define TILE_SEQUENTIAL_SUB 4096u
/* Per-thread chunks of a parallel run are aligned to whole pages (or to
 * sub-blocks, see execute_split). */
#define TILE_SPLIT_ALIGN 4096u
/* A parallel run is cut into about this many tasks per thread, each at
 * least TILE_TASK_MIN_BYTES (a task pays for one partial tile per seam;
 * a 2.3 MB output is cut into 16 rather than 3). */
#define TILE_TASKS_PER_THREAD 8u
#define TILE_TASK_MIN_BYTES (128u << 10)
/* Single copies at least this big (an identity tile, say) go to memcpy,
 * which itself streams past the cache at these sizes. */
#define TILE_LIBC_COPY_MIN_BYTES (32u << 20)
/* Innermost input rows shorter than this are folded (see worth_folding)
 * when the scratch input is at most TILE_FOLD_SCRATCH_MAX bytes and the
 * output at least TILE_FOLD_OUT_RATIO times bigger. */
#define TILE_FOLD_ROW_MAX 256u
#define TILE_FOLD_SCRATCH_MAX (256u << 10)
#define TILE_FOLD_OUT_RATIO 4u
/* See repeat_in_place. */
#define TILE_REPEAT_ROW 24u
#define TILE_REPEAT_FEW 8u
/* Rows shorter than a quarter of this are expanded into a pattern of about
 * this size before streaming: each stream_copy call has a fixed cost (the
 * alignment head, the tail) close to that of copying 1 KiB, so 1 KiB
 * patterns lost ~20% of the write bandwidth to it. */
#define TILE_PATTERN_BYTES 4096u

struct fill_ctx {
    const struct tile_plan *plan;
    bool stream;    /* non-temporal stores; output is never read back */
    uint64_t chunk; /* TILE_CHUNK_BYTES unless a test forces another */
};

static void fill_level(const struct fill_ctx *c, int l, const uint8_t *src, uint64_t lo, uint64_t hi,
                       uint8_t *dst);

static atomic_uint_fast64_t forced_chunk; /* 0: TILE_CHUNK_BYTES */
static atomic_bool forced_split;

void tile_kernel_force_chunk(uint64_t bytes)
{
    atomic_store(&forced_chunk, bytes);
}

void tile_kernel_force_split(bool on)
{
    atomic_store(&forced_split, on);
}

/* Copies with non-temporal stores: an output far bigger than the cache is
 * written without first reading each line into it (the read-for-ownership
 * that makes plain stores cost ~1.5x a memset). Callers fence at the end. */
static void stream_copy(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    if (n >= TILE_LIBC_COPY_MIN_BYTES) { /* libc's own non-temporal copy prefetches better */
        memcpy(dst, src, n);
        return;
    }
#ifdef __SSE2__
    uint64_t head = (uint64_t)(-(uintptr_t)dst & 15);
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)src), b = _mm_loadu_si128((const __m128i *)(src + 16));
        __m128i x = _mm_loadu_si128((const __m128i *)(src + 32)), y = _mm_loadu_si128((const __m128i *)(src + 48));
        _mm_stream_si128((__m128i *)dst, a);
        _mm_stream_si128((__m128i *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(dst + 32), x);
        _mm_stream_si128((__m128i *)(dst + 48), y);
    }
    for (; n >= 16; n -= 16, dst += 16, src += 16)
        _mm_stream_si128((__m128i *)dst, _mm_loadu_si128((const __m128i *)src));
#endif
    memcpy(dst, src, n);
}

static void stream_fence(void)
{
#ifdef __SSE2__
    _mm_sfence();
#endif
}

/* Streams bytes [a, b) of the periodic sequence row[i mod period]. Short
 * rows are first expanded into a cache-resident pattern so each store
 * instruction moves a full 16 bytes. */
static void stream_periodic(uint8_t *dst, const uint8_t *row, uint64_t period, uint64_t a, uint64_t b)
{
    uint8_t pattern[TILE_PATTERN_BYTES + 64];
    const uint8_t *p = row;
    uint64_t plen = period;
    if (period < TILE_PATTERN_BYTES / 4) {
        plen = TILE_PATTERN_BYTES / period * period;
        memcpy(pattern, row, period);
        for (uint64_t done = period; done < plen; done *= 2)
            memcpy(pattern + done, pattern, done * 2 <= plen ? done : plen - done);
        p = pattern;
    }
    while (a < b) {
        uint64_t off = a % period, n = plen - off;
        if (n > b - a)
            n = b - a;
        stream_copy(dst, p + off, n);
        dst += n;
        a += n;
    }
}

static void replicate(uint8_t *dst, uint64_t tile, uint64_t total, uint64_t chunk);

/* Whether `rep` copies of an input row of `row` bytes are written by
 * tile_copy_repeat (each vector of the row loaded once, stored rep times)
 * rather than by a memcpy and replicate()'s doublings: rows shorter than
 * tile_copy_periodic's forward pass takes, repeated into no more than a
 * piece, with few copies or rows long enough that each store moves most
 * of a vector. Copying within L1 (GB/s, tile_copy_repeat against the
 * other way): 48-byte rows twice 24.6 against 12.8, 28-byte rows 4 times
 * 31.5 against 8.4 and 32 times 47.7 against 30.0, 120-byte rows 16 times
 * 58.0 against 46.5; but 16-byte rows 100 times 29.5 against 58.7, and
 * 224-byte rows 4 times 50.7 against 53.5 (the forward pass). */
static bool repeat_in_place(uint64_t row, uint64_t rep, uint64_t chunk)
{
    return row < TILE_HOTCOPY_PERIODIC_MIN && row * rep <= chunk && (row >= TILE_REPEAT_ROW || rep <= TILE_REPEAT_FEW);
}

/* Writes bytes [a, b) of one tile of level l (input slice at src). */
static void write_tile(const struct fill_ctx *c, int l, const uint8_t *src, uint64_t a, uint64_t b, uint8_t *dst)
{
    const struct tile_plan *p = c->plan;
    if (l == p->nlev - 1) {
        memcpy(dst, src + a, b - a);
        return;
    }
    uint64_t sub = p->lev_sub[l], stride = p->lev_in_stride[l];
    /* Whole sub-blocks of the level above the innermost are an input row
     * and its copies: written here directly, as most outputs spend most
     * calls here and fill_level's divisions and calls cost about as much
     * as copying a short row (224-byte rows: 10-20% of the time). */
    bool rows = !c->stream && l == p->nlev - 2;
    uint64_t row = p->lev_tile[l + 1], rep = p->lev_rep[l + 1];
    bool in_place = rows && repeat_in_place(row, rep, c->chunk);
    for (uint64_t j = a / sub; j * sub < b; j++) {
        uint64_t s0 = j * sub > a ? 0 : a - j * sub;
        uint64_t s1 = (j + 1) * sub < b ? sub : b - j * sub;
        if (rows && s0 == 0 && s1 == sub) {
            if (in_place) {
                tile_copy_repeat(dst, src + j * stride, row, rep);
            } else {
                memcpy(dst, src + j * stride, row);
                replicate(dst, row, sub, c->chunk);
            }
        } else {
            fill_level(c, l + 1, src + j * stride, s0, s1, dst);
        }
        dst += s1 - s0;
    }
}

/* dst[0, tile) holds one tile; writes copies up to `total` bytes after it
 * (total is a multiple of tile): by doubling up to a chunk, then copies of
 * that chunk, so a 4-byte row repeated 4096 times costs a dozen copies. */
static void replicate(uint8_t *dst, uint64_t tile, uint64_t total, uint64_t chunk)
{
    uint64_t done = tile;
    if (tile >= TILE_HOTCOPY_PERIODIC_MIN && tile * 2 <= chunk) { /* one forward pass to a chunk */
        done = total <= chunk ? total : chunk / tile * tile;
        tile_copy_periodic(dst, tile, done);
    }
    while (done < total && done * 2 <= chunk) {
        uint64_t n = total - done < done ? total - done : done;
        tile_copy_hot(dst + done, dst, n);
        done += n;
    }
    uint64_t unit = done;
    for (; done < total; done += unit)
        tile_copy_hot(dst + done, dst, total - done < unit ? total - done : unit);
}

/* The other places a piece of the output being written appears at: the
 * offsets sum_i k_i * stride[i] (0 <= k_i < count[i]) from it, but 0. Each
 * level whose tile is repeated adds one (stride, count) pair. */
struct fanout {
    int n;
    uint64_t stride[TILE_MAX_RANK], count[TILE_MAX_RANK];
};

static void fanout_push(struct fanout *f, uint64_t stride, uint64_t count)
{
    f->stride[f->n] = stride;
    f->count[f->n++] = count;
}

/* Copies piece[0, len) to piece + shift + every offset of f. */
static void fan_out(uint8_t *piece, uint64_t len, const struct fanout *f, uint64_t shift)
{
    uint64_t k[TILE_MAX_RANK], off = shift;
    for (int i = 0; i < f->n; i++) /* not = {0}: that clears all 64 on every call */
        k[i] = 0;
    for (;;) {
        if (off)
            tile_copy_hot(piece + off, piece, len);
        int i = f->n - 1; /* the next offset, innermost pair first */
        for (; i >= 0 && k[i] + 1 == f->count[i]; i--) {
            off -= k[i] * f->stride[i];
            k[i] = 0;
        }
        if (i < 0)
            return;
        k[i]++;
        off += f->stride[i];
    }
}

/* Writes `copies` whole tiles of level l at dst, plain stores, and the same
 * bytes at every offset of f (restored on return). Sub-blocks bigger than
 * a chunk are written by the level below, which copies its pieces to all
 * places at once; otherwise the tile (or a run of small tiles) is written
 * chunk by chunk, each chunk copied everywhere while it is in L1. With no
 * other place to copy to, tiles of big sub-blocks are written in order. */
static void fill_tiles(const struct fill_ctx *c, int l, const uint8_t *src, uint8_t *dst, uint64_t copies,
                       struct fanout *f)
{
    const struct tile_plan *p = c->plan;
    uint64_t tile = p->lev_tile[l], sub = p->lev_sub[l];
    int n0 = f->n;
    if (tile <= c->chunk) { /* a unit of m tiles, built by doubling */
        uint64_t m = c->chunk / tile < copies ? c->chunk / tile : copies, unit = m * tile;
        if (l == p->nlev - 1 && repeat_in_place(tile, m, c->chunk)) { /* an input row */
            tile_copy_repeat(dst, src, tile, m);
        } else {
            write_tile(c, l, src, 0, tile, dst);
            replicate(dst, tile, unit, c->chunk);
        }
        fanout_push(f, unit, copies / m);
        fan_out(dst, unit, f, 0);
        f->n = n0;
        if (copies % m)
            fan_out(dst, copies % m * tile, f, copies / m * unit);
        return;
    }
    /* A copy of an input row longer than a chunk, or of rows repeated into
     * long sub-blocks (see write_tile), is as cheap to make again as to
     * copy from the output, and writing the copies in order keeps to one
     * stream of stores. */
    bool cheap = l == p->nlev - 1 || (l == p->nlev - 2 && sub >= TILE_SEQUENTIAL_SUB);
    if (f->n == 0 && (copies == 1 || cheap)) { /* tile after tile */
        for (uint64_t k = 0; k < copies; k++)
            write_tile(c, l, src, 0, tile, dst + k * tile);
        return;
    }
    if (copies > 1)
        fanout_push(f, tile, copies);
    if (sub > c->chunk) {
        for (uint64_t j = 0; j < p->lev_in[l]; j++)
            fill_tiles(c, l + 1, src + j * p->lev_in_stride[l], dst + j * sub, p->lev_rep[l + 1], f);
    } else {
        uint64_t step = c->chunk / sub * sub; /* whole sub-blocks */
        for (uint64_t o = 0; o < tile; o += step) {
            uint64_t n = tile - o < step ? tile - o : step;
            write_tile(c, l, src, o, o + n, dst + o);
            fan_out(dst + o, n, f, 0);
        }
    }
    f->n = n0;
}

/* Writes bytes [lo, hi) of level l's block (lev_rep copies of its tile). */
static void fill_level(const struct fill_ctx *c, int l, const uint8_t *src, uint64_t lo, uint64_t hi,
                       uint8_t *dst)
{
    const struct tile_plan *p = c->plan;
    uint64_t tile = p->lev_tile[l];
    if (c->stream && l == p->nlev - 1) { /* the innermost block is periodic */
        stream_periodic(dst, src, tile, lo, hi);
        return;
    }
    uint64_t a = lo % tile;
    if (a + (hi - lo) <= tile) { /* inside one tile */
        write_tile(c, l, src, a, a + (hi - lo), dst);
        return;
    }
    if (a) { /* partial head */
        write_tile(c, l, src, a, tile, dst);
        dst += tile - a;
        lo += tile - a;
    }
    uint64_t whole = (hi - lo) / tile * tile, tail = (hi - lo) - whole;
    if (whole == 0) {
        write_tile(c, l, src, 0, tail, dst);
        return;
    }
    if (!c->stream) {
        struct fanout none;
        none.n = 0; /* the arrays are only read up to n; clearing them costs a 1 KiB memset a call */
        fill_tiles(c, l, src, dst, whole / tile, &none);
        memcpy(dst + whole, dst, tail);
        return;
    }
    write_tile(c, l, src, 0, tile, dst);
    for (uint64_t off = tile; off < whole; off += tile)
        write_tile(c, l, src, 0, tile, dst + off);
    write_tile(c, l, src, 0, tail, dst + whole);
}

static void fill_range(const struct tile_plan *p, bool stream, const void *in, uint64_t offset, uint64_t len,
                       void *dst)
{
    if (len == 0 || p->nlev == 0)
        return;
    struct fill_ctx c = {p, stream, atomic_load_explicit(&forced_chunk, memory_order_relaxed)};
    if (!c.chunk)
        c.chunk = TILE_CHUNK_BYTES;
    fill_level(&c, 0, in, offset, offset + len, dst);
    if (stream)
        stream_fence();
}

void tile_read(const struct tile_plan *p, const void *in, uint64_t offset, uint64_t len, void *dst)
{
    fill_range(p, false, in, offset, len, dst);
}

/* What a run reads: the caller's input, or the scratch input that folding
 * it `nfold` times gives (tile_execute: fold k turns plan k into plan k+1,
 * plan 0 the caller's `base`, plan k > 0 folded[k - 1]). Every thread that takes part
 * in a run makes that scratch input itself, into buffers of its own
 * (run_input_here). Made once by the calling thread and read by the
 * helpers, it was written by one core and read by the other: the next
 * run's expansion then took each line back from the other core first (on
 * the rank-6 case of bench/peers/cases.txt, 7.5-9 µs for its 80 KB where a
 * run on one thread takes 2.6 µs, a sixth of the split run). Made by each
 * thread, the lines stay in that core's cache and the two expansions
 * overlap. */
#define TILE_MAX_FOLDS 8 /* a fold at least doubles rows shorter than TILE_FOLD_ROW_MAX */

struct run_input {
    const void *in;
    const struct tile_plan *base;
    int nfold;
    const struct tile_plan *folded; /* nfold of them */
    uint64_t run;                   /* this run's number (see fold_scratch) */
};

static const struct tile_plan *run_plan(const struct run_input *ri, int k)
{
    return k == 0 ? ri->base : &ri->folded[k - 1];
}

/* A thread's scratch inputs (ping-pong: fold k reads the one fold k-1
 * wrote), kept from run to run: the run they hold now is `run`. At most
 * two blocks of up to TILE_FOLD_SCRATCH_MAX bytes a thread, freed when it
 * ends. */
struct fold_scratch {
    uint64_t run;
    const void *in;
    const struct tile_plan *plan;
    void *buf[2];
    uint64_t cap[2];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t next_run = 1;

static void scratch_free(void *arg)
{
    struct fold_scratch *fs = arg;
    free(fs->buf[0]);
    free(fs->buf[1]);
    free(fs);
}

static void scratch_key_init(void)
{
    if (pthread_key_create(&scratch_key, scratch_free) != 0)
        abort(); /* only when the process is out of keys at its first folded run */
}

static void expand_rows(const struct tile_plan *p, const uint8_t *in, uint8_t *dst);

/* The plan and input this thread runs `ri` with: its own scratch input,
 * made at its first task of the run; without memory for it, the unfolded
 * plan over the caller's input, which writes the same bytes. */
static void run_input_here(const struct run_input *ri, const struct tile_plan **plan, const void **in)
{
    *plan = ri->base;
    *in = ri->in;
    if (ri->nfold == 0)
        return;
    pthread_once(&scratch_once, scratch_key_init);
    struct fold_scratch *fs = pthread_getspecific(scratch_key);
    if (!fs) {
        fs = calloc(1, sizeof(*fs));
        if (!fs || pthread_setspecific(scratch_key, fs) != 0) {
            free(fs);
            return;
        }
    }
    if (fs->run != ri->run) {
        fs->run = 0;
        const void *src = ri->in;
        for (int k = 0; k < ri->nfold; k++) {
            uint64_t need = tile_plan_folded_in_bytes(run_plan(ri, k));
            int b = k & 1;
            if (fs->cap[b] < need) {
                free(fs->buf[b]);
                fs->buf[b] = malloc(need);
                fs->cap[b] = fs->buf[b] ? need : 0;
                if (!fs->buf[b])
                    return;
            }
            expand_rows(run_plan(ri, k), src, fs->buf[b]);
            src = fs->buf[b];
        }
        fs->in = src;
        fs->run = ri->run;
    }
    *plan = run_plan(ri, ri->nfold);
    *in = fs->in;
}

struct tile_exec {
    const struct tile_plan *plan; /* the folded plan: sizes and seams */
    const struct run_input *src;
    uint8_t *out;
    uint64_t chunk;
    bool stream; /* decided once for the whole output */
};

static void exec_task(void *arg, uint64_t task)
{
    const struct tile_exec *x = arg;
    uint64_t lo = task * x->chunk;
    uint64_t hi = lo + x->chunk < x->plan->out_bytes ? lo + x->chunk : x->plan->out_bytes;
    const struct tile_plan *p;
    const void *in;
    run_input_here(x->src, &p, &in);
    fill_range(p, x->stream, in, lo, hi - lo, x->out + lo);
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Splits the run across `pool` in tasks of at least `min_task` bytes. */
static void execute_split(const struct tile_plan *p, const struct run_input *src, void *out, bool stream,
                          struct tile_pool *pool, uint64_t min_task)
{
    /* Tasks are claimed one at a time, so chunks smaller than an equal
     * share let the caller, which starts at once, take over the share of a
     * worker that wakes late or whose core is busy: with one task per
     * thread the caller would finish and then wait for it. */
    uint64_t nth = (uint64_t)tile_pool_size(pool);
    uint64_t chunk = (p->out_bytes + nth * TILE_TASKS_PER_THREAD - 1) / (nth * TILE_TASKS_PER_THREAD);
    if (chunk < min_task)
        chunk = min_task;
    /* With plain stores, tasks are whole sub-blocks of the outermost level
     * whose sub-blocks fit in one: a task that starts or ends inside a
     * sub-block generates that part from the input and copies the rest of
     * the tile from L2, instead of copying pieces from L1 (the rank-6 case
     * of bench/peers/cases.txt split in 242 KB tasks took 745,000
     * instructions a call where one thread takes 469,000; in 215 KB tasks
     * of two whole level-1 sub-blocks, 575,000). Short sub-blocks leave
     * the tasks page-aligned. */
    int l = 0;
    while (l < p->nlev - 1 && p->lev_sub[l] > chunk)
        l++;
    uint64_t unit = !stream && p->lev_sub[l] >= TILE_SPLIT_ALIGN ? p->lev_sub[l] : TILE_SPLIT_ALIGN;
    chunk = (chunk + unit / 2) / unit * unit;
    if (chunk == 0)
        chunk = unit;
    struct tile_exec x = {p, src, out, chunk, stream};
    tile_pool_parallel(pool, (p->out_bytes + chunk - 1) / chunk, exec_task, &x);
}

/* The whole output on the calling thread. */
static void fill_here(const struct run_input *src, bool stream, void *out)
{
    const struct tile_plan *p;
    const void *in;
    run_input_here(src, &p, &in);
    fill_range(p, stream, in, 0, p->out_bytes, out);
}

/* Writes the output of `p` (src's folded plan); returns whether the run
 * was split. */
static bool execute_plan(const struct tile_plan *p, const struct run_input *src, void *out, struct tile_pool *pool)
{
    if (pool && tile_pool_size(pool) > 1 && atomic_load_explicit(&forced_split, memory_order_relaxed)) {
        if (p->out_bytes) /* in tasks as small as the alignment: seams in small outputs too */
            execute_split(p, src, out, tile_stores_pick(p->out_bytes, 1), pool, TILE_SPLIT_ALIGN);
        return true;
    }
    if (!pool || tile_pool_size(pool) <= 1 || p->out_bytes < TILE_PARALLEL_MIN_BYTES) {
        bool streamed = tile_stores_pick(p->out_bytes, 0);
        bool timed = p->out_bytes >= TILE_STORES_MEASURED_MIN; /* the store kind may be learnt (stores.h) */
        uint64_t t0 = timed ? now_ns() : 0;
        fill_here(src, streamed, out);
        if (timed)
            tile_stores_learned(p->out_bytes, 0, streamed, now_ns() - t0);
        return false;
    }
    /* Whether a second thread adds memory bandwidth or only contention is
     * the machine's business: measure both ways and keep the faster. A
     * call that tried a store kind says nothing about the way it ran. */
    struct tile_autosplit *stats = tile_pool_autosplit(pool);
    enum tile_split_work work = p->out_bytes <= p->in_bytes ? TILE_WORK_COPY : TILE_WORK_REPEAT;
    enum tile_split_way way = tile_autosplit_choose(stats, work, p->out_bytes);
    bool streamed = tile_stores_pick(p->out_bytes, way == TILE_SPLIT_POOL);
    uint64_t t0 = now_ns();
    if (way == TILE_SPLIT_POOL)
        execute_split(p, src, out, streamed, pool, TILE_TASK_MIN_BYTES);
    else
        fill_here(src, streamed, out);
    uint64_t ns = now_ns() - t0;
    if (tile_stores_learned(p->out_bytes, way == TILE_SPLIT_POOL, streamed, ns))
        tile_autosplit_record(stats, work, p->out_bytes, way, ns);
    else
        tile_autosplit_ran(stats, work, p->out_bytes, way);
    return way == TILE_SPLIT_POOL;
}

/* Whether to fold the innermost level of `p` (see tile_plan_fold_inner):
 * its rows are short enough that copying them one by one costs more than
 * the copy itself, and the scratch input stays small, in cache and cheap
 * next to the output. */
static bool worth_folding(const struct tile_plan *p)
{
    if (!tile_plan_can_fold_inner(p) || p->lev_tile[p->nlev - 1] >= TILE_FOLD_ROW_MAX)
        return false;
    uint64_t scratch = tile_plan_folded_in_bytes(p);
    return scratch <= TILE_FOLD_SCRATCH_MAX && scratch * TILE_FOLD_OUT_RATIO <= p->out_bytes;
}

/* Writes the scratch input of the folded plan: each innermost input row
 * of `p`, repeated as its level repeats it. */
static void expand_rows(const struct tile_plan *p, const uint8_t *in, uint8_t *dst)
{
    int n = p->nlev - 1;
    uint64_t row = p->lev_tile[n], block = row * p->lev_rep[n], rows = p->in_bytes / row;
    bool in_place = repeat_in_place(row, p->lev_rep[n], TILE_CHUNK_BYTES);
    for (uint64_t r = 0; r < rows; r++, in += row, dst += block) {
        if (in_place) {
            tile_copy_repeat(dst, in, row, p->lev_rep[n]);
            continue;
        }
        memcpy(dst, in, row);
        replicate(dst, row, block, TILE_CHUNK_BYTES);
    }
}

void tile_execute(const struct tile_plan *p, const void *in, void *out, struct tile_pool *pool)
{
    /* Fold as often as it pays; the scratch inputs are made by the threads
     * that run the plan (run_input_here). */
    struct tile_plan folded[TILE_MAX_FOLDS];
    struct run_input src = {in, p, 0, folded, 0};
    while (src.nfold < TILE_MAX_FOLDS && worth_folding(run_plan(&src, src.nfold))) {
        tile_plan_fold_inner(run_plan(&src, src.nfold), &folded[src.nfold]);
        src.nfold++;
    }
    if (src.nfold)
        src.run = atomic_fetch_add_explicit(&next_run, 1, memory_order_relaxed);
    execute_plan(run_plan(&src, src.nfold), &src, out, pool);
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
