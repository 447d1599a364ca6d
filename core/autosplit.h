/* autosplit.h - deciding, by measurement, whether splitting pays.
 *
 * Whether a large output is written faster by one thread or by the whole
 * pool depends on the machine, not on the problem: how much of the memory
 * bandwidth one core already takes, how long a sleeping worker takes to
 * wake (tens of microseconds on a virtual CPU, milliseconds when the host
 * is busy), what else runs. A fixed threshold is right on one machine and
 * wrong on the next, so tiled measures instead.
 *
 * Outputs are grouped by kind of work and size class (powers of two): a
 * plain copy reads as much as it writes, a repeated tile reads little, and
 * a second core helps the two differently. Per class and way of
 * running, the last TILE_AUTOSPLIT_WINDOW times per byte are kept. A call
 * splits when the pool's median is at least TILE_AUTOSPLIT_MARGIN_PCT
 * percent below the single thread's and stays on one thread otherwise,
 * except that both ways are tried, one after the other, until each has
 * TILE_AUTOSPLIT_WARMUP samples, and the other way is tried again now and
 * then so that a change (a busier machine, a quieter one) is noticed:
 * TILE_AUTOSPLIT_EXPLORE calls after the choice was made, then after twice
 * as many calls as the time before, up to TILE_AUTOSPLIT_EXPLORE_MAX, for
 * as long as the trials leave the choice as it is (a trial of the slower
 * way costs what that way loses, and a trial every 16 calls cost 5% on
 * uint8 [3,224,224]x[1,4,4]). While the pool is the choice and at least
 * TILE_AUTOSPLIT_CLEAR_PCT percent as fast as one thread, one thread is
 * tried only at the longest gap: the pool's own samples show it if the
 * machine gets busier, and a trial leaves the helpers asleep for the
 * pool's next calls (on the rank-6 case of bench/peers/cases.txt, split
 * calls ran 31-33 us in a row and 60-500 us for five calls after a trial
 * of one thread, against 50 us for one thread). A retry that comes back clearly faster
 * than the way chosen is repeated on the next call, so that a way whose warm-up
 * samples were slowed by a neighbour (or by a worker's cold start) wins
 * back within a few calls rather than after half a window of scheduled
 * retries (some 80 calls). Medians, not means (the lower one of an even
 * count): a run preempted by the host for 30 ms must not flip the choice.
 *
 * The first calls after a switch find the state the other way left
 * (after one-thread calls the helpers are asleep and pay a wake-up, and a
 * cached output is in one core's cache; after split calls half of it is in
 * the other core's) and measure the switch, not the way. So a call is a
 * sample only after TILE_AUTOSPLIT_SETTLE_ONE one-thread calls or
 * TILE_AUTOSPLIT_SETTLE_POOL split calls in a row, and a trial of a way
 * goes on until it has one sample. Without this, a pool that keeps its
 * helpers awake between sections (pool.c) was judged on trials that
 * always woke them: on uint8 [3,224,224]x[1,4,4] (2.3 MB) split calls
 * after one-thread ones ran at 38-65 GB/s, then 67-77, then about 100, and
 * one thread at 70.
 *
 * Thread-safe without locks: concurrent updates may lose a sample, which
 * only makes the estimate a little slower to move.
 */
#ifndef TILE_AUTOSPLIT_H
#define TILE_AUTOSPLIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define TILE_AUTOSPLIT_CLASSES 26 /* 2^20 (1 MiB) .. 2^45 bytes and above */
/* The median of a ring of timings (the first min(count, window) slots;
 * a slot still 0, counted but not yet stored by a concurrent record, is
 * skipped), 0 when there is none; `lower` takes the lower of the two middle
 * values. One for the split's and the store kind's windows (stores.c). */
#define TILE_RING_MAX 16
uint64_t tile_ring_median(const atomic_uint_fast64_t *ring, const atomic_uint_fast64_t *count, unsigned window,
                          bool lower);

#define TILE_AUTOSPLIT_WINDOW 8
#define TILE_AUTOSPLIT_WARMUP 4
#define TILE_AUTOSPLIT_EXPLORE 16
#define TILE_AUTOSPLIT_EXPLORE_MAX 256
#define TILE_AUTOSPLIT_MARGIN_PCT 10
#define TILE_AUTOSPLIT_CLEAR_PCT 125
#define TILE_AUTOSPLIT_SETTLE_ONE 1
#define TILE_AUTOSPLIT_SETTLE_POOL 2

enum tile_split_way { TILE_SPLIT_ONE = 0, TILE_SPLIT_POOL = 1 };

/* What the output is made of: copies of the input (each input byte written
 * once or less) or repeats of it (written many times). */
enum tile_split_work { TILE_WORK_REPEAT = 0, TILE_WORK_COPY = 1, TILE_WORK_KINDS };

struct tile_autosplit_class {
    atomic_uint_fast64_t calls;
    atomic_int retry; /* 1 + the way to run next, 0: none (see above) */
    atomic_int last;   /* 1 + the way the last call ran, 0: none yet */
    atomic_int streak; /* calls in a row that ran it */
    atomic_int chosen; /* 1 + the way chosen by the last decision, 0: none yet */
    atomic_uint_fast64_t next_trial, gap; /* the call that tries the other way; calls to the one after */
    atomic_uint_fast64_t samples[2];                           /* ever recorded */
    atomic_uint_fast64_t ps_per_kib[2][TILE_AUTOSPLIT_WINDOW]; /* the last ones, a ring */
};

struct tile_autosplit {
    struct tile_autosplit_class cls[TILE_WORK_KINDS][TILE_AUTOSPLIT_CLASSES];
};

/* A zeroed struct tile_autosplit is ready to use. */

/* The way to run an output of `bytes` (at least 1 MiB) made by `work` now. */
enum tile_split_way tile_autosplit_choose(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes);

/* Reports that running `bytes` of `work` the way `way` took `ns`
 * nanoseconds (a sample if the way has settled, see above). */
void tile_autosplit_record(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes,
                           enum tile_split_way way, uint64_t ns);
/* Reports that a call ran `way` but that its time is not to be learnt from
 * (the kernel was trying a store kind, stores.h): it only counts as the
 * class's last call. */
void tile_autosplit_ran(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes,
                        enum tile_split_way way);

/* The median of the window (picoseconds per KiB, 0 = no sample yet). */
uint64_t tile_autosplit_estimate(struct tile_autosplit *a, enum tile_split_work work, uint64_t bytes,
                                 enum tile_split_way way);

#endif
