/* autosplit.c - deciding, by measurement, whether splitting pays (see autosplit.h). */
#include "autosplit.h"

#include <stdbool.h>

#define CLASS_MIN_LOG2 20
/* Samples are capped so that comparing medians scaled by up to
 * TILE_AUTOSPLIT_CLEAR_PCT cannot overflow (the cap is hours per KiB: no
 * real run comes near it). */
#define PS_MAX (UINT64_MAX / 200)

static struct tile_autosplit_class *class_of(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes)
{
    int log2 = bytes ? 63 - __builtin_clzll(bytes) : 0;
    int i = log2 - CLASS_MIN_LOG2;
    if (i < 0)
        i = 0;
    if (i >= TILE_AUTOSPLIT_CLASSES)
        i = TILE_AUTOSPLIT_CLASSES - 1;
    return &a->cls[work == TILE_WORK_COPY][i];
}

uint64_t tile_ring_median(const atomic_uint_fast64_t *ring, const atomic_uint_fast64_t *count, unsigned window,
                          bool lower)
{
    uint64_t n = atomic_load_explicit(count, memory_order_relaxed);
    if (n > window)
        n = window;
    if (n > TILE_RING_MAX)
        n = TILE_RING_MAX;
    uint64_t v[TILE_RING_MAX], m = 0;
    for (uint64_t i = 0; i < n; i++) { /* insertion sort: a handful of values */
        uint64_t x = atomic_load_explicit(&ring[i], memory_order_relaxed), j = m++;
        if (x == 0) { /* counted but not stored yet by a concurrent record */
            m--;
            continue;
        }
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    if (!m)
        return 0;
    return lower ? v[(m - 1) / 2] : v[m / 2];
}

static uint64_t window_median(struct tile_autosplit_class *c, enum tile_split_way way)
{
    /* The lower median: two slow runs of four do not make it. */
    return tile_ring_median(c->ps_per_kib[way], &c->samples[way], TILE_AUTOSPLIT_WINDOW, true);
}

/* Splitting must win clearly: it occupies cores that other requests could
 * use, and a near tie is more likely noise than a gain. */
static enum tile_split_way best_way(uint64_t one, uint64_t pool)
{
    return pool * 100 < one * (100 - TILE_AUTOSPLIT_MARGIN_PCT) ? TILE_SPLIT_POOL : TILE_SPLIT_ONE;
}

enum tile_split_way tile_autosplit_choose(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes)
{
    struct tile_autosplit_class *c = class_of(a, work, bytes);
    uint64_t call = atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    uint64_t n[2] = {atomic_load_explicit(&c->samples[TILE_SPLIT_ONE], memory_order_relaxed),
                     atomic_load_explicit(&c->samples[TILE_SPLIT_POOL], memory_order_relaxed)};
    if (n[TILE_SPLIT_ONE] < TILE_AUTOSPLIT_WARMUP || n[TILE_SPLIT_POOL] < TILE_AUTOSPLIT_WARMUP) {
        /* One way until it has its samples, then the other: runs, not
         * alternation, since only a repeated way is a sample. */
        int last = atomic_load_explicit(&c->last, memory_order_relaxed);
        enum tile_split_way w = last ? (enum tile_split_way)(last - 1) : TILE_SPLIT_ONE;
        return n[w] < TILE_AUTOSPLIT_WARMUP ? w : (enum tile_split_way)!w;
    }
    int retry = atomic_exchange_explicit(&c->retry, 0, memory_order_relaxed);
    if (retry)
        return (enum tile_split_way)(retry - 1);
    uint64_t one = window_median(c, TILE_SPLIT_ONE), pool = window_median(c, TILE_SPLIT_POOL);
    enum tile_split_way best = best_way(one, pool);
    if (atomic_exchange_explicit(&c->chosen, 1 + (int)best, memory_order_relaxed) != 1 + (int)best) {
        atomic_store_explicit(&c->gap, 2 * TILE_AUTOSPLIT_EXPLORE, memory_order_relaxed);
        atomic_store_explicit(&c->next_trial, call + TILE_AUTOSPLIT_EXPLORE, memory_order_relaxed);
        return best;
    }
    if (call < atomic_load_explicit(&c->next_trial, memory_order_relaxed))
        return best;
    uint64_t gap = atomic_load_explicit(&c->gap, memory_order_relaxed);
    if (best == TILE_SPLIT_POOL && pool * TILE_AUTOSPLIT_CLEAR_PCT <= one * 100 && gap < TILE_AUTOSPLIT_EXPLORE_MAX) {
        /* far ahead: the longest gap at once */
        atomic_store_explicit(&c->gap, TILE_AUTOSPLIT_EXPLORE_MAX, memory_order_relaxed);
        atomic_store_explicit(&c->next_trial, call + TILE_AUTOSPLIT_EXPLORE_MAX, memory_order_relaxed);
        return best;
    }
    atomic_store_explicit(&c->next_trial, call + gap, memory_order_relaxed);
    atomic_store_explicit(&c->gap, gap < TILE_AUTOSPLIT_EXPLORE_MAX / 2 ? 2 * gap : TILE_AUTOSPLIT_EXPLORE_MAX,
                          memory_order_relaxed);
    /* A trial: it goes on until the way has settled (settled()). */
    return (enum tile_split_way)!best;
}

/* Whether a call of `way` is a sample: enough calls before it in the class
 * ran the same way. A trial of the way not chosen that has not settled yet
 * goes on at the next call. */
static bool settled(struct tile_autosplit_class *c, enum tile_split_way way)
{
    int streak = 1;
    if (atomic_exchange_explicit(&c->last, 1 + (int)way, memory_order_relaxed) == 1 + (int)way)
        streak = atomic_fetch_add_explicit(&c->streak, 1, memory_order_relaxed) + 1;
    else
        atomic_store_explicit(&c->streak, 1, memory_order_relaxed);
    if (streak > (way == TILE_SPLIT_POOL ? TILE_AUTOSPLIT_SETTLE_POOL : TILE_AUTOSPLIT_SETTLE_ONE))
        return true;
    int chosen = atomic_load_explicit(&c->chosen, memory_order_relaxed);
    if (chosen && chosen != 1 + (int)way)
        atomic_store_explicit(&c->retry, 1 + (int)way, memory_order_relaxed);
    return false;
}

void tile_autosplit_ran(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes,
                        enum tile_split_way way)
{
    settled(class_of(a, work, bytes), way);
}

void tile_autosplit_record(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes,
                           enum tile_split_way way, uint64_t ns)
{
    struct tile_autosplit_class *c = class_of(a, work, bytes);
    if (!settled(c, way))
        return;
    uint64_t kib = bytes >> 10 ? bytes >> 10 : 1;
    uint64_t ps = ns > UINT64_MAX / 1000 ? UINT64_MAX / kib : ns * 1000 / kib;
    if (ps == 0)
        ps = 1; /* 0 means "no sample" */
    if (ps > PS_MAX)
        ps = PS_MAX;
    uint64_t slot = atomic_fetch_add_explicit(&c->samples[way], 1, memory_order_relaxed);
    atomic_store_explicit(&c->ps_per_kib[way][slot % TILE_AUTOSPLIT_WINDOW], ps, memory_order_relaxed);
    if (slot < TILE_AUTOSPLIT_WARMUP ||
        atomic_load_explicit(&c->samples[!way], memory_order_relaxed) < TILE_AUTOSPLIT_WARMUP)
        return;
    /* A way that is not the choice but whose new sample would be: run it
     * again next call (see autosplit.h). */
    uint64_t med[2] = {window_median(c, TILE_SPLIT_ONE), window_median(c, TILE_SPLIT_POOL)}, alt[2];
    alt[way] = ps;
    alt[!way] = med[!way];
    if (best_way(med[0], med[1]) != way && best_way(alt[0], alt[1]) == way)
        atomic_store_explicit(&c->retry, 1 + (int)way, memory_order_relaxed);
}

uint64_t tile_autosplit_estimate(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes,
                                 enum tile_split_way way)
{
    return window_median(class_of(a, work, bytes), way);
}
