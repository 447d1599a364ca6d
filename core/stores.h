/* stores.h - which kind of store the kernel writes an output with.
 *
 * Plain stores leave the output in the cache; non-temporal ("streaming")
 * stores send it to memory without first reading each line in (the
 * read-for-ownership that makes plain stores cost up to ~1.5x a memset
 * once the output spills out of the cache). Which is faster depends on
 * whether the output fits the cache it will be read from, so the choice
 * comes from the machine, not from a constant:
 *   - the cache sizes are read once (sysfs, which under a hypervisor shows
 *     the guest's share; else sysconf, which reads cpuid and may report the
 *     whole host socket's L3), at the first pool start or the first call;
 *   - an output of at most TILE_STORES_CACHED_PCT percent of the last-level
 *     cache is written with plain stores: it is still in the cache when the
 *     next step (a socket write, a compressor, the caller's next call into a
 *     reused buffer) reads it, and rewriting a cached buffer costs no memory
 *     traffic at all;
 *   - anything bigger is streamed: it would evict itself before being read.
 * The LLC is shared by the pool's workers on the machines this runs on
 * (one L3 per socket or per core complex), so the whole output, not one
 * worker's part of it, is what has to fit. Measured on a 2-core EPYC with a
 * 32 MiB L3, rewriting a reused buffer: plain stores 2-2.5x faster than
 * streaming up to 32 MiB, still ahead to ~56 MiB (the L2s and the L3's
 * victim policy hold more than the L3 alone), behind from 64 MiB on; the
 * share keeps to what the cache is documented to hold (bench/REPORT.md).
 *
 * Thread-safe: detection runs once (pthread_once); the override is atomic.
 */
#ifndef TILE_STORES_H
#define TILE_STORES_H

#include <stdbool.h>
#include <stdint.h>

/* Outputs up to this share of the LLC are written with plain stores. */
#define TILE_STORES_CACHED_PCT 100u
/* The LLC assumed when neither sysfs nor sysconf knows one. */
#define TILE_STORES_DEFAULT_LLC (16u << 20)

enum tile_stores {
    TILE_STORES_AUTO = 0, /* by size, as above */
    TILE_STORES_CACHED,   /* always plain stores */
    TILE_STORES_STREAM,   /* always non-temporal stores */
};

struct tile_cache_sizes {
    uint64_t l2_bytes;  /* per core; 0 when unknown */
    uint64_t llc_bytes; /* the last level's size */
    const char *source; /* "sysfs", "sysconf" or "default" */
};

/* Reads the cache sizes if not done yet (tile_pool_init calls it, so a
 * server pays for it at start rather than on its first request). */
void tile_stores_init(void);

const struct tile_cache_sizes *tile_cache_sizes(void);

/* Outputs of at least this many bytes are streamed (under AUTO). */
uint64_t tile_stores_stream_min(void);

/* Whether an output of `out_bytes` is written with non-temporal stores. */
bool tile_stores_stream(uint64_t out_bytes);

/* The size rule above is a prior: how much of the last-level cache an
 * output really gets depends on what else the host runs (a virtual
 * machine shares its L3 with other tenants: on one host a 16 MiB output
 * was rewritten with plain stores at 10 GB/s, every line read back from
 * memory first, and streamed at 25, with sysfs saying 32 MiB of L3). So
 * outputs from TILE_STORES_MEASURED_MIN bytes up to the size the rule
 * streams from are written with the kind that has been faster for their
 * size class in this process (medians of the last TILE_STORES_WINDOW
 * samples; streaming must win by TILE_STORES_MARGIN_PCT percent, since
 * plain stores also leave the output in the cache for whatever reads it
 * next). `lane` keeps the single-thread and the split runs apart (0 and
 * 1): their times per byte differ.
 *
 * Trying a kind is not free, and the two kinds are not alike:
 *   - a streamed call takes the output out of the cache, and plain stores
 *     then take several calls to bring it back (a 16 MiB output after
 *     streamed calls, one thread, GB/s per call: 17 13 19 29 35 39 45 48,
 *     then 55-69). So a plain call counts as a sample only after
 *     TILE_STORES_SETTLE plain calls in a row (on either lane), a trial of
 *     plain stores is that many calls long, and the first samples are
 *     streamed ones (the output's first calls are cold anyway);
 *   - streaming writes memory at the same speed whatever came before, so
 *     one call is a sample, and while plain stores are at least
 *     TILE_STORES_CLEAR_PCT percent as fast, streaming is not tried again
 *     at all: memory does not become that much faster.
 * Otherwise the kind not chosen is tried after TILE_STORES_GAP_MIN calls,
 * the gap doubling after each trial that leaves the choice as it was (up
 * to TILE_STORES_GAP_MAX) and starting again from the minimum when the
 * choice changes; a trial whose sample would change the choice is
 * continued until it does or a sample says otherwise.
 * Trying the two kinds alternately, one call each (autosplit.h's rule,
 * used before), judged plain stores on calls that followed a streamed one:
 * a 16 MiB output that runs at 60 GB/s with plain stores settled on
 * streaming at 27 in some processes, and in the others lost 5 calls of 16
 * to the trials.
 *
 * Thread-safe; concurrent calls may lose a sample or a step of the
 * schedule, which only makes the choice slower to move. */
#define TILE_STORES_MEASURED_MIN (4u << 20)
#define TILE_STORES_WINDOW 8
#define TILE_STORES_WARMUP 2
#define TILE_STORES_SETTLE 8
#define TILE_STORES_MARGIN_PCT 10
#define TILE_STORES_CLEAR_PCT 150
#define TILE_STORES_GAP_MIN 32
#define TILE_STORES_GAP_MAX 1024

/* Whether the next call writing `out_bytes` on `lane` streams: the forced
 * kind, else the size rule outside the measured sizes, else the measured
 * choice (which may be a trial of the other kind). */
bool tile_stores_pick(uint64_t out_bytes, int lane);
/* Reports how long writing `out_bytes` on `lane` with that kind took.
 * Returns whether the call was typical of the kind chosen now (settled,
 * not a trial), i.e. whether its time says how fast this lane writes such
 * outputs: always true outside the measured sizes. */
bool tile_stores_learned(uint64_t out_bytes, int lane, bool stream, uint64_t ns);
/* The kind the measurements favour now for `out_bytes` on `lane`, without
 * counting a call (reports; the size rule until both kinds have samples). */
bool tile_stores_best(uint64_t out_bytes, int lane);

/* Forgets every measured choice (tests start each from nothing). */
void tile_stores_forget(void);

/* Forces one kind of store for every later call in the process (tests and
 * benchmarks exercise both paths this way); TILE_STORES_AUTO restores the
 * size rule. */
void tile_stores_force(enum tile_stores mode);

#endif
