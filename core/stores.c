/* stores.c - the store policy from the machine's cache sizes (see stores.h). */
#include "stores.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autosplit.h"

#define SYSFS_CACHE "/sys/devices/system/cpu/cpu0/cache/index%d/%s"
#define SYSFS_MAX_INDEX 16

static struct tile_cache_sizes sizes;
static uint64_t stream_min;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static atomic_int forced = TILE_STORES_AUTO;

/* The measured choice (stores.h), per size class from
 * TILE_STORES_MEASURED_MIN (powers of two) and lane. Kinds index the
 * arrays: 0 plain, 1 streaming. Zeroed: ready. */
#define CLASS_MIN_LOG2 22
#define CLASSES 24
#define PS_MAX (UINT64_MAX / 200) /* medians are compared scaled by up to 150 */

struct lane_state {
    atomic_uint_fast64_t calls;
    atomic_uint_fast64_t samples[2];                  /* ever recorded */
    atomic_uint_fast64_t ps_per_kib[2][TILE_STORES_WINDOW]; /* the last ones, a ring */
    atomic_uint_fast64_t next_trial; /* the call that tries the kind not chosen */
    atomic_uint_fast64_t gap;        /* calls from one trial to the next */
    atomic_int chosen;               /* 1 + the kind chosen at the last call, 0: none yet */
    atomic_int hold;                 /* calls left in a run of `held` */
    atomic_int held;
};

struct class_state {
    /* Plain calls since the last streamed one, on either lane: both write
     * the same output. */
    atomic_uint_fast64_t streak;
    struct lane_state lane[2];
};

static struct class_state measured[CLASSES];

/* One line of a sysfs cache attribute into buf; false when it is missing. */
static bool read_attr(int index, const char *name, char *buf, size_t cap)
{
    char path[128];
    snprintf(path, sizeof(path), SYSFS_CACHE, index, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

/* "32768K", "1M" or plain bytes; 0 when unreadable. */
static uint64_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    uint64_t unit = *end == 'K' ? 1u << 10 : *end == 'M' ? 1u << 20 : *end == 'G' ? 1u << 30 : 1;
    return v > UINT64_MAX / unit ? 0 : (uint64_t)v * unit;
}

/* Data and unified caches of cpu0 as the kernel describes them. */
static bool from_sysfs(struct tile_cache_sizes *out)
{
    int best_level = 0;
    for (int i = 0; i < SYSFS_MAX_INDEX; i++) {
        char level[16], type[32], size[32];
        if (!read_attr(i, "level", level, sizeof(level)) || !read_attr(i, "type", type, sizeof(type)) ||
            !read_attr(i, "size", size, sizeof(size)))
            continue;
        if (strncmp(type, "Instruction", 11) == 0)
            continue;
        int lv = atoi(level);
        uint64_t bytes = parse_size(size);
        if (lv == 2)
            out->l2_bytes = bytes;
        if (lv >= best_level && bytes) {
            best_level = lv;
            out->llc_bytes = bytes;
        }
    }
    return out->llc_bytes != 0;
}

static bool from_sysconf(struct tile_cache_sizes *out)
{
#if defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE), l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    out->l2_bytes = l2 > 0 ? (uint64_t)l2 : 0;
    out->llc_bytes = l3 > 0 ? (uint64_t)l3 : out->l2_bytes;
#else
    (void)out;
#endif
    return out->llc_bytes != 0;
}

static void detect(void)
{
    struct tile_cache_sizes s = {0, 0, "sysfs"};
    if (!from_sysfs(&s)) {
        s = (struct tile_cache_sizes){0, 0, "sysconf"};
        if (!from_sysconf(&s))
            s = (struct tile_cache_sizes){0, TILE_STORES_DEFAULT_LLC, "default"};
    }
    sizes = s;
    uint64_t share = s.llc_bytes / 100 * TILE_STORES_CACHED_PCT + s.llc_bytes % 100 * TILE_STORES_CACHED_PCT / 100;
    stream_min = share + 1;
}

void tile_stores_init(void)
{
    pthread_once(&detect_once, detect);
}

const struct tile_cache_sizes *tile_cache_sizes(void)
{
    tile_stores_init();
    return &sizes;
}

uint64_t tile_stores_stream_min(void)
{
    tile_stores_init();
    return stream_min;
}

bool tile_stores_stream(uint64_t out_bytes)
{
    switch ((enum tile_stores)atomic_load_explicit(&forced, memory_order_relaxed)) {
    case TILE_STORES_CACHED:
        return false;
    case TILE_STORES_STREAM:
        return true;
    default:
        return out_bytes >= tile_stores_stream_min();
    }
}

void tile_stores_force(enum tile_stores mode)
{
    atomic_store(&forced, (int)mode);
}

/* The state for `out_bytes` on `lane`, or NULL when the size rule decides. */
static struct class_state *measured_class(uint64_t out_bytes)
{
    if (atomic_load_explicit(&forced, memory_order_relaxed) != TILE_STORES_AUTO ||
        out_bytes < TILE_STORES_MEASURED_MIN || tile_stores_stream(out_bytes))
        return NULL;
    int i = 63 - __builtin_clzll(out_bytes) - CLASS_MIN_LOG2;
    return &measured[i < CLASSES ? i : CLASSES - 1];
}

static uint64_t median(struct lane_state *l, int kind)
{
    return tile_ring_median(l->ps_per_kib[kind], &l->samples[kind], TILE_STORES_WINDOW, false);
}

/* Streaming wins only by the margin (times per byte: lower is faster). */
static int best_kind(uint64_t plain, uint64_t stream)
{
    return stream * 100 < plain * (100 - TILE_STORES_MARGIN_PCT);
}

static bool warm(struct lane_state *l)
{
    return atomic_load_explicit(&l->samples[0], memory_order_relaxed) >= TILE_STORES_WARMUP &&
           atomic_load_explicit(&l->samples[1], memory_order_relaxed) >= TILE_STORES_WARMUP;
}

/* Runs `kind` for this call and `more` calls after it. */
static int hold(struct lane_state *l, int kind, int more)
{
    atomic_store_explicit(&l->held, kind, memory_order_relaxed);
    atomic_store_explicit(&l->hold, more, memory_order_relaxed);
    return kind;
}

bool tile_stores_pick(uint64_t out_bytes, int lane)
{
    struct class_state *c = measured_class(out_bytes);
    if (!c)
        return tile_stores_stream(out_bytes);
    struct lane_state *l = &c->lane[lane != 0];
    uint64_t call = atomic_fetch_add_explicit(&l->calls, 1, memory_order_relaxed);
    int more = atomic_load_explicit(&l->hold, memory_order_relaxed);
    if (more > 0) {
        atomic_store_explicit(&l->hold, more - 1, memory_order_relaxed);
        return atomic_load_explicit(&l->held, memory_order_relaxed);
    }
    if (atomic_load_explicit(&l->samples[1], memory_order_relaxed) < TILE_STORES_WARMUP)
        return true; /* streamed samples first, then plain ones (they need settling) */
    if (atomic_load_explicit(&l->samples[0], memory_order_relaxed) < TILE_STORES_WARMUP)
        return false;
    uint64_t plain = median(l, 0), stream = median(l, 1);
    int best = best_kind(plain, stream);
    if (atomic_exchange_explicit(&l->chosen, 1 + best, memory_order_relaxed) != 1 + best) {
        atomic_store_explicit(&l->gap, TILE_STORES_GAP_MIN, memory_order_relaxed); /* the choice changed */
        atomic_store_explicit(&l->next_trial, call + TILE_STORES_GAP_MIN, memory_order_relaxed);
        return best;
    }
    if (call < atomic_load_explicit(&l->next_trial, memory_order_relaxed))
        return best;
    uint64_t gap = atomic_load_explicit(&l->gap, memory_order_relaxed);
    if (!best && plain * TILE_STORES_CLEAR_PCT <= stream * 100) { /* plain far ahead: no trial */
        atomic_store_explicit(&l->next_trial, call + TILE_STORES_GAP_MIN, memory_order_relaxed);
        return best;
    }
    atomic_store_explicit(&l->next_trial, call + gap, memory_order_relaxed);
    atomic_store_explicit(&l->gap, gap * 2 < TILE_STORES_GAP_MAX ? gap * 2 : TILE_STORES_GAP_MAX,
                          memory_order_relaxed);
    return hold(l, !best, best ? TILE_STORES_SETTLE : 0); /* plain stores need settling first */
}

bool tile_stores_learned(uint64_t out_bytes, int lane, bool stream, uint64_t ns)
{
    struct class_state *c = measured_class(out_bytes);
    if (!c)
        return true;
    struct lane_state *l = &c->lane[lane != 0];
    int kind = stream;
    if (stream)
        atomic_store_explicit(&c->streak, 0, memory_order_relaxed);
    else if (atomic_fetch_add_explicit(&c->streak, 1, memory_order_relaxed) < TILE_STORES_SETTLE)
        return false; /* the output is still coming back into the cache */
    uint64_t kib = out_bytes >> 10;
    uint64_t ps = ns > UINT64_MAX / 1000 ? PS_MAX : ns * 1000 / kib;
    ps = ps == 0 ? 1 : ps > PS_MAX ? PS_MAX : ps; /* 0 means "no sample" */
    uint64_t slot = atomic_fetch_add_explicit(&l->samples[kind], 1, memory_order_relaxed);
    atomic_store_explicit(&l->ps_per_kib[kind][slot % TILE_STORES_WINDOW], ps, memory_order_relaxed);
    if (!warm(l))
        return false;
    uint64_t med[2] = {median(l, 0), median(l, 1)};
    int best = best_kind(med[0], med[1]);
    if (kind == best)
        return atomic_load_explicit(&l->chosen, memory_order_relaxed) == 1 + best;
    /* A trial whose sample would change the choice goes on (stores.h). */
    med[kind] = ps;
    if (best_kind(med[0], med[1]) == kind && atomic_load_explicit(&l->hold, memory_order_relaxed) == 0)
        hold(l, kind, 1);
    return false;
}

void tile_stores_forget(void)
{
    memset(measured, 0, sizeof(measured));
}

bool tile_stores_best(uint64_t out_bytes, int lane)
{
    struct class_state *c = measured_class(out_bytes);
    if (!c)
        return tile_stores_stream(out_bytes);
    struct lane_state *l = &c->lane[lane != 0];
    if (!warm(l))
        return tile_stores_stream(out_bytes);
    return best_kind(median(l, 0), median(l, 1));
}
