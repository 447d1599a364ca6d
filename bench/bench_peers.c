/* bench_peers.c - tiled's kernel on arbitrary cases, for the peer comparison.
 *
 *   bench_peers CASEFILE [reps [profile_seconds]]
 *
 * CASEFILE has one case per line, `name|dtype|shape|repeats` (shape and
 * repeats comma separated; `#` starts a comment). For each case it prints
 * one JSON line with the median seconds per call and GB/s of output written
 * (and the fastest sample's) for: tile_execute with 1 worker and with all workers into a reused,
 * pre-faulted buffer (as bench_kernel does), tile_execute with all workers
 * into a freshly allocated buffer (the first-touch cost numpy.tile and
 * torch.tile pay on every call), memcpy and memset of the output size
 * (the ceilings; glibc picks its own store kind for each size), and memset
 * split across the pool as the kernel splits (what a second CPU adds to
 * pure stores while the case runs). It also
 * prints a CRC-32 of the output so the peers' outputs can be checked
 * against it byte for byte.
 *
 * Inputs are the same bytes bench/peers/peers.py builds: element byte i is
 * (uint8_t)(i * 2654435761 >> 13); string element i is "str<i>", and the
 * string CRC runs over every output string followed by one NUL byte.
 *
 * Small outputs are timed in batches of calls (each batch >= ~2 ms) and the
 * median per-call time of the batches is reported. memcpy, memset, one
 * worker, all workers and the split memset take their batches in turn, so
 * that a change in the machine's speed during a case moves all five alike.
 *
 * With profile_seconds > 0 it only runs tile_execute (all workers, reused
 * buffer) on each case for that long, for a profiler attached to it
 * (perf record -p, valgrind --tool=callgrind): it prints a "ready" line
 * once the buffers are set up and warm, then loops, then prints the count.
 *
 * First of all it prints one {"kind":"host"} line: what decides how fast a
 * copy runs on this host, so that a figure that moves between machines can
 * be explained from the report alone. glibc picks its memcpy and memset from
 * the CPU flags it is shown (avx2, avx512f, erms, fsrm: a hypervisor may
 * hide some) and from GLIBC_TUNABLES; tiled's copies of bytes still in L1
 * use AVX2 when the CPU has it (core/hotcopy.h); and an output buffer in
 * 2 MiB pages needs 512 times fewer TLB entries than one in 4 KiB pages,
 * which depends on the transparent huge page mode. Each case's line then
 * says how much of its output buffer the kernel backed with huge pages.
 *
 *   bench_peers --stores [reps]   plain against non-temporal stores, by size
 *   bench_peers --ceiling [KiB]   one thread's ceilings for an output of that
 *                                 size (default 3,790, the rank-6 case's):
 *                                 memset, and copies of an 8 KiB piece that
 *                                 stays in L1 by the kernel's tile_copy_hot
 *                                 and by memcpy (see ceiling())
 *   bench_peers --ramp [rounds]   plain stores' speed, call by call, after
 *                                 streamed calls (see ramp())
 */
#include <gnu/libc-version.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "autosplit.h"
#include "hotcopy.h"
#include "stores.h"
#include "tile.h"

#define MAX_REPS 64
#define BATCH_SEC 2e-3
/* The pool's warm-up calls per case: at least the first bound, then up to
 * the second while they take less than WARM_SEC. */
#define WARM_CALLS_MIN 16
#define WARM_CALLS_MAX 64
#define WARM_SEC 0.25

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

static void clobber(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

/* The first line of a small file, without its newline; "?" when unreadable. */
static void read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, (int)cap, f))
        snprintf(buf, cap, "?");
    else
        buf[strcspn(buf, "\n")] = 0;
    if (f)
        fclose(f);
}

/* Which of the CPU flags glibc's copy selection reads this CPU shows. */
static void copy_flags(char *buf, size_t cap)
{
    static const char *const names[] = {"sse2", "avx", "avx2", "avx512f", "avx512vl", "erms", "fsrm"};
    char line[8192];
    buf[0] = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "flags", 5) != 0)
            continue;
        line[strcspn(line, "\n")] = 0;
        strcat(line, " ");
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            char word[32];
            snprintf(word, sizeof(word), " %s ", names[i]);
            if (strstr(line, word) && strlen(buf) + strlen(names[i]) + 2 < cap)
                strcat(strcat(buf, buf[0] ? " " : ""), names[i]);
        }
        break;
    }
    fclose(f);
}

/* The mappings that hold [p, p+n) (/proc/self/smaps): their size and how
 * much of it is in transparent huge pages, in KiB (-1 when unknown). The
 * kernel may merge neighbouring buffers into one mapping, so the figures
 * can cover more than the buffer. */
static void huge_kib(const void *p, uint64_t n, long *size, long *huge)
{
    *size = *huge = -1;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return;
    uintptr_t lo = (uintptr_t)p, hi = lo + n;
    char line[512];
    bool inside = false;
    long kib = 0, hkib = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        long v;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = a < hi && b > lo;
            if (inside)
                kib += (long)((b - a) >> 10);
        } else if (inside && sscanf(line, "AnonHugePages: %ld kB", &v) == 1) {
            hkib += v;
        }
    }
    fclose(f);
    *size = kib;
    *huge = hkib;
}

static void print_host(void)
{
    char flags[128], thp[128], tunables[256];
    copy_flags(flags, sizeof(flags));
    read_line("/sys/kernel/mm/transparent_hugepage/enabled", thp, sizeof(thp));
    const char *t = getenv("GLIBC_TUNABLES");
    snprintf(tunables, sizeof(tunables), "%s", t ? t : "");
    for (char *c = tunables; *c; c++) /* kept JSON-safe */
        if (*c == '"' || *c == '\\')
            *c = '?';
    const struct tile_cache_sizes *cs = tile_cache_sizes();
    printf("{\"kind\":\"host\",\"glibc\":\"%s\",\"copy_flags\":\"%s\",\"glibc_tunables\":\"%s\","
           "\"hotcopy\":\"%s\",\"page_size\":%ld,\"thp\":\"%s\",\"l2_bytes\":%llu,\"llc_bytes\":%llu,"
           "\"cache_source\":\"%s\",\"cpus\":%ld}\n",
           gnu_get_libc_version(), flags, tunables, tile_copy_hot_vector() ? "avx2" : "memcpy",
           sysconf(_SC_PAGESIZE), thp, (unsigned long long)cs->l2_bytes, (unsigned long long)cs->llc_bytes,
           cs->source, sysconf(_SC_NPROCESSORS_ONLN));
    fflush(stdout);
}

enum op { OP_MEMCPY, OP_MEMSET, OP_MEMSET_POOL, OP_TILE, OP_TILE_FRESH };

/* memset split across the pool as the kernel splits an output (8 tasks a
 * thread, page-aligned, claimed in turn): what a second CPU adds to pure
 * stores at this size at this moment. On these virtual machines it moves
 * from nothing to twice one thread within seconds (the host decides how
 * much of a second core the guest gets), and tiled's split follows it. */
#define POOL_TASKS_PER_THREAD 8u
#define POOL_TASK_ALIGN 4096u

struct memset_split {
    uint8_t *out;
    uint64_t n, chunk;
    int value;
};

static void memset_task(void *arg, uint64_t task)
{
    const struct memset_split *m = arg;
    uint64_t lo = task * m->chunk, hi = lo + m->chunk < m->n ? lo + m->chunk : m->n;
    memset(m->out + lo, m->value, hi - lo);
}

struct run {
    const struct tile_plan *plan;
    const void *in;
    void *out, *src;
    struct tile_pool *pool;
};

/* Seconds for `k` back-to-back calls. */
static double time_batch(enum op op, const struct run *r, long k)
{
    uint64_t n = r->plan->out_bytes;
    double t = 0;
    if (op == OP_TILE_FRESH) { /* allocation and release stay outside the clock */
        for (long i = 0; i < k; i++) {
            void *fresh = tile_alloc_buffer(n);
            double t0 = now_sec();
            tile_execute(r->plan, r->in, fresh, r->pool);
            t += now_sec() - t0;
            clobber(fresh);
            tile_free_buffer(fresh, n);
        }
        return t;
    }
    double t0 = now_sec();
    for (long i = 0; i < k; i++) {
        if (op == OP_MEMCPY)
            memcpy(r->out, r->src, n);
        else if (op == OP_MEMSET) /* never zero: zeros over zeros run at 3x memory speed on some hosts */
            memset(r->out, (int)(1 + i % 255), n);
        else if (op == OP_MEMSET_POOL) {
            uint64_t tasks = (uint64_t)tile_pool_size(r->pool) * POOL_TASKS_PER_THREAD;
            uint64_t chunk = (n + tasks - 1) / tasks;
            chunk = (chunk + POOL_TASK_ALIGN - 1) / POOL_TASK_ALIGN * POOL_TASK_ALIGN;
            struct memset_split m = {r->out, n, chunk ? chunk : POOL_TASK_ALIGN, (int)(1 + i % 255)};
            tile_pool_parallel(r->pool, (n + m.chunk - 1) / m.chunk, memset_task, &m);
        }
        else
            tile_execute(r->plan, r->in, r->out, r->pool);
        clobber(r->out);
    }
    return now_sec() - t0;
}

/* Calls per batch for `op`: enough for a batch of about BATCH_SEC, after
 * one warm-up call and one warm-up batch. */
static long batch_calls(enum op op, const struct run *r)
{
    double warm = time_batch(op, r, 1);
    long k = 1;
    if (warm < BATCH_SEC / 2) {
        k = (long)(BATCH_SEC / (warm > 1e-8 ? warm : 1e-8));
        k = k < 1 ? 1 : k > 100000 ? 100000 : k;
        time_batch(op, r, k);
    }
    return k;
}

/* One measurement: an operation, what it runs on, and its results. */
struct timed {
    enum op op;
    const struct run *r;
    long k;
    double v[MAX_REPS];
    double median, best; /* seconds per call */
};

/* Median (and fastest) seconds per call of each of `n` measurements over
 * `reps` batches each, the batches taken in turn (one of each, then the
 * next round): a machine whose speed drifts during the case (another
 * guest's load, a clock that changes) moves every measurement alike, so
 * the ratios between them hold, where measuring one after the other would
 * compare one period's speed with another's. */
static void time_interleaved(struct timed *t, int n, int reps)
{
    for (int j = 0; j < n; j++)
        t[j].k = batch_calls(t[j].op, t[j].r);
    for (int i = 0; i < reps; i++) {
        for (int j = 0; j < n; j++)
            t[j].v[i] = time_batch(t[j].op, t[j].r, t[j].k) / (double)t[j].k;
    }
    for (int j = 0; j < n; j++) {
        t[j].median = median(t[j].v, reps); /* sorts v */
        t[j].best = t[j].v[0];
    }
}

static void fill_input(void *in, uint64_t n)
{
    uint8_t *p = in;
    for (uint64_t i = 0; i < n; i++)
        p[i] = (uint8_t)(i * 2654435761u >> 13);
}

static int parse_list(const char *s, int64_t *out, int max)
{
    int n = 0;
    while (*s && *s != '\n') {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || n == max)
            return -1;
        out[n++] = v;
        s = end;
        if (*s == ',')
            s++;
    }
    return n;
}

struct strings {
    struct tile_str *views;
    char *bytes;
};

static int make_strings(uint64_t n, struct strings *s)
{
    s->views = tile_alloc_buffer(n * sizeof(*s->views));
    s->bytes = malloc(n * 24 + 1);
    if (!s->views || !s->bytes)
        return -1;
    char *p = s->bytes;
    for (uint64_t i = 0; i < n; i++) {
        int len = sprintf(p, "str%llu", (unsigned long long)i);
        s->views[i].ptr = p;
        s->views[i].len = (uint64_t)len;
        p += len;
    }
    return 0;
}

static unsigned long output_crc(const struct tile_plan *plan, const void *out)
{
    unsigned long crc = crc32(0L, Z_NULL, 0);
    if (plan->dtype == TILE_STRING) {
        const struct tile_str *v = out;
        for (uint64_t i = 0; i < plan->out_elems; i++) {
            crc = crc32(crc, (const Bytef *)v[i].ptr, (uInt)v[i].len);
            crc = crc32(crc, (const Bytef *)"", 1);
        }
        return crc;
    }
    const uint8_t *p = out;
    for (uint64_t done = 0; done < plan->out_bytes;) {
        uint64_t n = plan->out_bytes - done > (1u << 30) ? (1u << 30) : plan->out_bytes - done;
        crc = crc32(crc, p + done, (uInt)n);
        done += n;
    }
    return crc;
}

static void json_shape(const char *key, const int64_t *v, int n)
{
    printf("\"%s\":[", key);
    for (int i = 0; i < n; i++)
        printf("%s%lld", i ? "," : "", (long long)v[i]);
    printf("]");
}

static int bench_case(char *line, struct tile_pool *pool, int reps, double profile_sec)
{
    char *f[4];
    int nf = 0;
    for (char *tok = strtok(line, "|"); tok && nf < 4; tok = strtok(NULL, "|"))
        f[nf++] = tok;
    if (nf != 4) {
        fprintf(stderr, "bad case line (want name|dtype|shape|repeats)\n");
        return -1;
    }
    enum tile_dtype dtype = tile_dtype_parse(f[1], strlen(f[1]));
    int64_t shape[TILE_MAX_RANK], repeats[TILE_MAX_RANK];
    int rank = parse_list(f[2], shape, TILE_MAX_RANK), nrep = parse_list(f[3], repeats, TILE_MAX_RANK);
    if (dtype == TILE_DTYPE_INVALID || rank < 0 || nrep < 0) {
        fprintf(stderr, "%s: bad dtype, shape or repeats\n", f[0]);
        return -1;
    }
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = repeats, .nrepeats = nrep};
    struct tile_plan plan;
    struct tile_error err = {0};
    if (tile_plan_init(&plan, dtype, rank, shape, &spec, &err) < 0) {
        fprintf(stderr, "%s: %s\n", f[0], err.text);
        return -1;
    }
    struct strings strs = {0};
    void *in;
    if (dtype == TILE_STRING) {
        if (make_strings(plan.in_elems, &strs) < 0)
            return -1;
        in = strs.views;
    } else {
        in = tile_alloc_buffer(plan.in_bytes);
        if (!in)
            return -1;
        fill_input(in, plan.in_bytes);
    }
    void *out = tile_alloc_buffer(plan.out_bytes), *src = tile_alloc_buffer(plan.out_bytes);
    if (!out || !src) {
        fprintf(stderr, "%s: out of memory\n", f[0]);
        return -1;
    }
    memset(out, 0, plan.out_bytes);
    memset(src, 2, plan.out_bytes);
    struct run one = {&plan, in, out, src, NULL}, all = {&plan, in, out, src, pool};

    if (profile_sec > 0) {
        long calls = 0;
        time_batch(OP_TILE, &all, 1);
        printf("{\"kind\":\"ready\",\"case\":\"%s\"}\n", f[0]);
        fflush(stdout);
        double t0 = now_sec();
        do {
            time_batch(OP_TILE, &all, 1);
            calls++;
        } while (now_sec() - t0 < profile_sec);
        printf("{\"kind\":\"looped\",\"case\":\"%s\",\"profile_calls\":%ld,\"profile_s\":%.3f}\n", f[0], calls,
               now_sec() - t0);
        fflush(stdout);
        goto done;
    }
    /* The pool learns first whether splitting pays for this size and
     * which store kind, as a running server does over its first requests
     * (core/autosplit.h, core/stores.h); otherwise its first trials of both
     * ways would be most of the samples. Then the ceilings, one worker and
     * all workers are timed in turn. */
    double w0 = now_sec();
    for (int i = 0; i < WARM_CALLS_MAX && (i < WARM_CALLS_MIN || now_sec() - w0 < WARM_SEC); i++)
        time_batch(OP_TILE, &all, 1);
    struct timed t[5] = {{OP_MEMCPY, &one}, {OP_MEMSET, &one}, {OP_TILE, &one}, {OP_TILE, &all}, {OP_MEMSET_POOL, &all}};
    time_interleaved(t, 5, reps);
    double mc = t[0].median, ms = t[1].median, t1 = t[2].median, tn = t[3].median, msp = t[4].median;
    double mcb = t[0].best, msb = t[1].best, t1b = t[2].best, tnb = t[3].best;
    /* What the pool measured, before the fresh buffers' page faults join it. */
    enum tile_split_work work = plan.out_bytes <= plan.in_bytes ? TILE_WORK_COPY : TILE_WORK_REPEAT;
    uint64_t est1 = tile_autosplit_estimate(tile_pool_autosplit(pool), work, plan.out_bytes, TILE_SPLIT_ONE);
    uint64_t par = tile_autosplit_estimate(tile_pool_autosplit(pool), work, plan.out_bytes, TILE_SPLIT_POOL);
    int split = plan.out_bytes >= TILE_PARALLEL_MIN_BYTES && est1 && par && par * 100 < est1 * (100 - TILE_AUTOSPLIT_MARGIN_PCT);
    bool stores_all = tile_stores_best(plan.out_bytes, split), stores_1 = tile_stores_best(plan.out_bytes, 0);
    struct timed fresh = {OP_TILE_FRESH, &all};
    time_interleaved(&fresh, 1, reps);
    double tf = fresh.median, tfb = fresh.best;
    tile_execute(&plan, in, out, pool);
    unsigned long crc = output_crc(&plan, out);
    double gb = (double)plan.out_bytes / 1e9;

    printf("{\"case\":\"%s\",\"dtype\":\"%s\",", f[0], tile_dtype_name(dtype));
    json_shape("shape", shape, rank);
    printf(",");
    json_shape("repeats", repeats, nrep);
    printf(",");
    json_shape("out_shape", plan.out_shape, plan.out_rank);
    const struct tile_cache_sizes *cs = tile_cache_sizes();
    long map_kib, map_huge_kib;
    huge_kib(out, plan.out_bytes, &map_kib, &map_huge_kib);
    /* The store kinds the measurements favour (stores.h): "stores" for the
     * way all workers ran, as the pool's own measurements favour it, and
     * the pool's medians of one thread and of a split (GB/s; 0 below
     * TILE_PARALLEL_MIN_BYTES, where it never splits). */
    printf(",\"out_elems\":%llu,\"out_bytes\":%llu,\"in_bytes\":%llu,\"workers\":%d,\"reps\":%d,\"crc32\":%lu,"
           "\"llc_bytes\":%llu,\"stream_min\":%llu,\"stores\":\"%s\",\"stores_1\":\"%s\",\"out_map_kib\":%ld,\"out_map_huge_kib\":%ld,"
           "\"split_one_gbps\":%.4f,\"split_pool_gbps\":%.4f,",
           (unsigned long long)plan.out_elems, (unsigned long long)plan.out_bytes, (unsigned long long)plan.in_bytes,
           tile_pool_size(pool), reps, crc, (unsigned long long)cs->llc_bytes,
           (unsigned long long)tile_stores_stream_min(), stores_all ? "stream" : "cached", stores_1 ? "stream" : "cached",
           map_kib, map_huge_kib,
           est1 ? 1.024e3 / (double)est1 * 1e3 : 0.0, par ? 1.024e3 / (double)par * 1e3 : 0.0);
    printf("\"tiled_1_s\":%.9g,\"tiled_all_s\":%.9g,\"tiled_fresh_s\":%.9g,\"memcpy_s\":%.9g,\"memset_s\":%.9g,"
           "\"tiled_1_gbps\":%.4f,\"tiled_all_gbps\":%.4f,\"tiled_fresh_gbps\":%.4f,\"memcpy_gbps\":%.4f,"
           "\"memset_gbps\":%.4f,\"tiled_1_min_s\":%.9g,\"tiled_all_min_s\":%.9g,\"tiled_fresh_min_s\":%.9g,"
           "\"memcpy_min_s\":%.9g,\"memset_min_s\":%.9g,\"memset_pool_s\":%.9g,\"memset_pool_gbps\":%.4f}\n",
           t1, tn, tf, mc, ms, gb / t1, gb / tn, gb / tf, gb / mc, gb / ms, t1b, tnb, tfb, mcb, msb, msp, gb / msp);
    fflush(stdout);
done:
    tile_free_buffer(in, dtype == TILE_STRING ? plan.in_elems * sizeof(struct tile_str) : plan.in_bytes);
    free(strs.bytes);
    tile_free_buffer(out, plan.out_bytes);
    tile_free_buffer(src, plan.out_bytes);
    return 0;
}

/* Median GB/s of one thread writing `plan` into a reused buffer with the
 * store kind `mode` forced (after warm-up calls that settle the cache). */
static double store_gbps(const struct tile_plan *plan, const void *in, void *out, enum tile_stores mode, int reps)
{
    double v[MAX_REPS];
    tile_stores_force(mode);
    for (int i = 0; i < 3; i++)
        tile_execute(plan, in, out, NULL);
    for (int i = 0; i < reps; i++) {
        double t0 = now_sec();
        tile_execute(plan, in, out, NULL);
        v[i] = now_sec() - t0;
        clobber(out);
    }
    tile_stores_force(TILE_STORES_AUTO);
    return (double)plan->out_bytes / median(v, reps) / 1e9;
}

static int stores_sweep(int reps)
{
    static const int mib[] = {2, 8, 16, 24, 32, 48, 64, 128, 256};
    for (size_t i = 0; i < sizeof(mib) / sizeof(mib[0]); i++) {
        int64_t shape[2] = {(int64_t)mib[i] << 20 >> 13, 256}, rep[2] = {1, 8}; /* 8 KiB of output per row */
        struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = rep, .nrepeats = 2};
        struct tile_plan plan;
        if (tile_plan_init(&plan, TILE_FLOAT32, 2, shape, &spec, NULL) < 0)
            return 1;
        void *in = tile_alloc_buffer(plan.in_bytes), *out = tile_alloc_buffer(plan.out_bytes);
        if (!in || !out)
            return 1;
        fill_input(in, plan.in_bytes);
        memset(out, 1, plan.out_bytes);
        double cached = store_gbps(&plan, in, out, TILE_STORES_CACHED, reps);
        double stream = store_gbps(&plan, in, out, TILE_STORES_STREAM, reps);
        printf("{\"kind\":\"stores\",\"out_bytes\":%llu,\"cached_gbps\":%.4f,\"stream_gbps\":%.4f,"
               "\"policy\":\"%s\",\"llc_bytes\":%llu}\n",
               (unsigned long long)plan.out_bytes, cached, stream,
               tile_stores_stream(plan.out_bytes) ? "stream" : "cached",
               (unsigned long long)tile_cache_sizes()->llc_bytes);
        fflush(stdout);
        tile_free_buffer(in, plan.in_bytes);
        tile_free_buffer(out, plan.out_bytes);
    }
    return 0;
}

static void print_gbps(const char *key, const double *v, int n, const char *end)
{
    printf("\"%s\":[", key);
    for (int i = 0; i < n; i++)
        printf("%s%.1f", i ? "," : "", v[i]);
    printf("]%s", end);
}

/* What a streamed call leaves behind for plain stores (core/stores.h): one
 * thread rewriting the 16 MiB output of float32 [1,1,256,256]x[1,1,8,8],
 * per round RAMP_STREAMED calls with non-temporal stores forced, then
 * RAMP_PLAIN with plain stores forced, then RAMP_MEMSET memsets of the same
 * buffer; GB/s of each call. */
#define RAMP_STREAMED 4
#define RAMP_PLAIN 12
#define RAMP_MEMSET 4

static int ramp(int rounds)
{
    int64_t shape[4] = {1, 1, 256, 256}, rep[4] = {1, 1, 8, 8};
    struct tile_spec spec = {.semantics = TILE_SEM_ONNX, .repeats = rep, .nrepeats = 4};
    struct tile_plan plan;
    if (tile_plan_init(&plan, TILE_FLOAT32, 4, shape, &spec, NULL) < 0)
        return 1;
    void *in = tile_alloc_buffer(plan.in_bytes), *out = tile_alloc_buffer(plan.out_bytes);
    if (!in || !out)
        return 1;
    fill_input(in, plan.in_bytes);
    memset(out, 1, plan.out_bytes);
    double gb = (double)plan.out_bytes / 1e9;
    for (int r = 0; r < rounds; r++) {
        double s[RAMP_STREAMED], p[RAMP_PLAIN], m[RAMP_MEMSET];
        tile_stores_force(TILE_STORES_STREAM);
        for (int i = 0; i < RAMP_STREAMED; i++) {
            double t0 = now_sec();
            tile_execute(&plan, in, out, NULL);
            s[i] = gb / (now_sec() - t0);
        }
        tile_stores_force(TILE_STORES_CACHED);
        for (int i = 0; i < RAMP_PLAIN; i++) {
            double t0 = now_sec();
            tile_execute(&plan, in, out, NULL);
            p[i] = gb / (now_sec() - t0);
        }
        tile_stores_force(TILE_STORES_AUTO);
        for (int i = 0; i < RAMP_MEMSET; i++) {
            double t0 = now_sec();
            memset(out, 1 + i, plan.out_bytes);
            clobber(out);
            m[i] = gb / (now_sec() - t0);
        }
        printf("{\"kind\":\"ramp\",\"out_bytes\":%llu,", (unsigned long long)plan.out_bytes);
        print_gbps("streamed_gbps", s, RAMP_STREAMED, ",");
        print_gbps("plain_gbps", p, RAMP_PLAIN, ",");
        print_gbps("memset_gbps", m, RAMP_MEMSET, "}\n");
        fflush(stdout);
    }
    tile_free_buffer(in, plan.in_bytes);
    tile_free_buffer(out, plan.out_bytes);
    return 0;
}

struct cases_job {
    FILE *cf;
    struct tile_pool *pool;
    int reps;
    double profile_sec;
    int rc;
    bool done;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

static void run_cases(void *arg)
{
    struct cases_job *job = arg;
    char line[1024];
    int rc = 0;
    while (fgets(line, sizeof(line), job->cf)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        if (bench_case(line, job->pool, job->reps, job->profile_sec) < 0)
            rc = 1;
    }
    pthread_mutex_lock(&job->lock);
    job->rc = rc;
    job->done = true;
    pthread_cond_signal(&job->cond);
    pthread_mutex_unlock(&job->lock);
}

/* What one thread can write into an output of `kib` KiB that stays in
 * the cache: memset of it, and the whole of it as copies of one 8 KiB
 * piece held in L1, by the kernel's copy (tile_copy_hot, hotcopy.h) and
 * by memcpy; the kernel writes an in-cache output as such copies
 * (kernel.c), so the second is its one-thread ceiling. Medians of 15
 * rounds of 20 fills, the three in turn in each round, GB/s. */
static int ceiling(uint64_t kib)
{
    enum { PIECE = 8192, ROUNDS = 15, FILLS = 20 };
    uint64_t n = kib * 1024 / PIECE * PIECE;
    uint8_t *out = tile_alloc_buffer(n), *piece = tile_alloc_buffer(PIECE);
    if (!n || !out || !piece)
        return 1;
    memset(out, 1, n);
    memset(piece, 2, PIECE);
    double v[3][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int m = 0; m < 3; m++) {
            double t0 = now_sec();
            for (int k = 0; k < FILLS; k++) {
                if (m == 0) {
                    memset(out, 1 + k, n);
                } else {
                    for (uint64_t o = 0; o < n; o += PIECE) {
                        if (m == 1)
                            tile_copy_hot(out + o, piece, PIECE);
                        else
                            memcpy(out + o, piece, PIECE);
                    }
                }
                clobber(out);
            }
            v[m][r] = (double)n * FILLS / (now_sec() - t0) / 1e9;
        }
    }
    printf("{\"kind\":\"ceiling\",\"out_bytes\":%llu,\"memset_gbps\":%.1f,\"hot_copy_gbps\":%.1f,"
           "\"memcpy_piece_gbps\":%.1f,\"hot_copy_vector\":%s}\n",
           (unsigned long long)n, median(v[0], ROUNDS), median(v[1], ROUNDS), median(v[2], ROUNDS),
           tile_copy_hot_vector() ? "true" : "false");
    tile_free_buffer(out, n);
    tile_free_buffer(piece, PIECE);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--stores") == 0) {
        int reps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 7;
        return stores_sweep(reps < 1 || reps > MAX_REPS ? 7 : reps);
    }
    if (argc >= 2 && strcmp(argv[1], "--ceiling") == 0) {
        long long kib = argc > 2 ? strtoll(argv[2], NULL, 10) : 3790;
        return ceiling(kib < 16 || kib > (1 << 22) ? 3790 : (uint64_t)kib);
    }
    if (argc >= 2 && strcmp(argv[1], "--ramp") == 0) {
        int rounds = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
        return ramp(rounds < 1 || rounds > MAX_REPS ? 5 : rounds);
    }
    if (argc < 2) {
        fprintf(stderr, "usage: bench_peers CASEFILE [reps [profile_seconds]] | --stores [reps] | --ceiling [KiB] | "
                        "--ramp [rounds]\n");
        return 2;
    }
    int reps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 7;
    if (reps < 1 || reps > MAX_REPS)
        reps = 7;
    double profile_sec = argc > 3 ? strtod(argv[3], NULL) : 0;
    FILE *cf = fopen(argv[1], "r");
    if (!cf) {
        perror(argv[1]);
        return 2;
    }
    struct tile_pool *pool = tile_pool_init(0, 0, NULL);
    if (!pool)
        return 2;
    if (profile_sec <= 0)
        print_host();
    /* The cases run on one of the pool's threads, as a request's work runs
     * in the daemon (a worker that splits its output asks the pool's other
     * threads for help): called from main, the runs had one thread more than
     * the CPUs, and a helper still polling after the section it helped
     * (pool.c) took a CPU from the two writing the output. */
    struct cases_job job = {cf, pool, reps, profile_sec, 0, false, PTHREAD_MUTEX_INITIALIZER,
                            PTHREAD_COND_INITIALIZER};
    if (tile_pool_submit(pool, run_cases, &job) < 0)
        return 2;
    pthread_mutex_lock(&job.lock);
    while (!job.done)
        pthread_cond_wait(&job.cond, &job.lock);
    pthread_mutex_unlock(&job.lock);
    fclose(cf);
    tile_pool_free(pool);
    return job.rc;
}
