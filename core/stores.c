/* stores.c - the store policy from the machine's cache sizes (see stores.h). */
#include "stores.h"

#include "autosplit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SYSFS_CACHE "/sys/devices/system/cpu/cpu0/cache/index%d/%s"
#define SYSFS_MAX_INDEX 16

static struct tile_cache_sizes sizes;
static uint64_t stream_min;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;
static atomic_int forced = TILE_STORES_AUTO;
/* Store kinds by measurement, with autosplit.h's machinery: its two "ways"
 * are the kinds (TILE_SPLIT_ONE: plain stores, TILE_SPLIT_POOL: streaming)
 * and its two "works" the lanes (0: one thread, 1: split). Zeroed: ready. */
static struct tile_autosplit measured;

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

static enum tile_split_work lane_of(int lane)
{
    return lane ? TILE_WORK_COPY : TILE_WORK_REPEAT;
}

bool tile_stores_pick(uint64_t out_bytes, int lane)
{
    if (atomic_load_explicit(&forced, memory_order_relaxed) != TILE_STORES_AUTO || out_bytes < TILE_STORES_MEASURED_MIN)
        return tile_stores_stream(out_bytes);
    return tile_autosplit_choose(&measured, lane_of(lane), out_bytes) == TILE_SPLIT_POOL;
}

void tile_stores_learned(uint64_t out_bytes, int lane, bool stream, uint64_t ns)
{
    if (atomic_load_explicit(&forced, memory_order_relaxed) != TILE_STORES_AUTO || out_bytes < TILE_STORES_MEASURED_MIN)
        return;
    tile_autosplit_record(&measured, lane_of(lane), out_bytes, stream ? TILE_SPLIT_POOL : TILE_SPLIT_ONE, ns);
}

bool tile_stores_best(uint64_t out_bytes, int lane)
{
    if (atomic_load_explicit(&forced, memory_order_relaxed) != TILE_STORES_AUTO || out_bytes < TILE_STORES_MEASURED_MIN)
        return tile_stores_stream(out_bytes);
    uint64_t plain = tile_autosplit_estimate(&measured, lane_of(lane), out_bytes, TILE_SPLIT_ONE);
    uint64_t stream = tile_autosplit_estimate(&measured, lane_of(lane), out_bytes, TILE_SPLIT_POOL);
    if (!plain || !stream)
        return tile_stores_stream(out_bytes);
    return stream * 100 < plain * (100 - TILE_AUTOSPLIT_MARGIN_PCT);
}
