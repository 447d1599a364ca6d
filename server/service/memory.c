/* memory.c - the request memory budget (see memory.h). */
#include "memory.h"

#include "metricsink.h"

int tiled_memory_take(struct tiled_memory *m, uint64_t *own_held, uint64_t kin, uint64_t n, struct tile_error *e)
{
    uint64_t own = *own_held + kin;
    uint_fast64_t cur = atomic_load(&m->held);
    do {
        /* Others hold cur - own; alone, a request always gets its bytes. */
        if (m->budget && cur > own && (cur + n > m->budget || cur + n < cur)) {
            atomic_fetch_add(&m->refused, 1);
            return tile_error_set(e, TILE_ENOMEM,
                                  "server memory budget: %llu more bytes do not fit, other requests hold %llu of "
                                  "the max-memory limit of %llu bytes (--max-memory); retry later",
                                  (unsigned long long)n, (unsigned long long)(cur - own),
                                  (unsigned long long)m->budget);
        }
    } while (!atomic_compare_exchange_weak(&m->held, &cur, cur + n));
    *own_held += n;
    /* The peak may lag a concurrent take by one store: a gauge, not a bound. */
    uint_fast64_t peak = atomic_load(&m->peak);
    while (cur + n > peak && !atomic_compare_exchange_weak(&m->peak, &peak, cur + n))
        ;
    return 0;
}

void tiled_memory_release(struct tiled_memory *m, uint64_t *own)
{
    if (*own)
        atomic_fetch_sub(&m->held, *own);
    *own = 0;
}

void tiled_memory_metrics(struct tiled_metrics_out *o, void *ctx)
{
    struct tiled_memory *m = ctx;
    tiled_metrics_family(o, "tiled_request_memory_bytes", "gauge",
                         "Bytes of request memory (bodies, decoded inputs, replies, requests' and gRPC calls' state) all requests hold now");
    tiled_metrics_sample(o, "tiled_request_memory_bytes", atomic_load(&m->held));
    tiled_metrics_family(o, "tiled_request_memory_peak_bytes", "gauge",
                         "The most bytes of request memory held at once since the start");
    tiled_metrics_sample(o, "tiled_request_memory_peak_bytes", atomic_load(&m->peak));
    tiled_metrics_family(o, "tiled_request_memory_budget_bytes", "gauge",
                         "The --max-memory budget in bytes (0: no bound)");
    tiled_metrics_sample(o, "tiled_request_memory_budget_bytes", m->budget);
    tiled_metrics_family(o, "tiled_request_memory_refused_total", "counter",
                         "Requests refused (503, UNAVAILABLE) because the --max-memory budget had no room");
    tiled_metrics_sample(o, "tiled_request_memory_refused_total", atomic_load(&m->refused));
}
