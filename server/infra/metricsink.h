/* metricsink.h - what a module with figures of its own needs to show them
 * on /metrics, and nothing else: a provider registered by the daemon and
 * called at every scrape (implemented in metrics.c). Kept apart from
 * metrics.h so that a module above infra/ can provide figures without
 * depending on what the metrics module itself reads.
 */
#ifndef TILED_METRICSINK_H
#define TILED_METRICSINK_H

#include <stdint.h>

/* A module with figures of its own (the body cache, shared memory, the gRPC
 * transport) registers a provider, and every scrape calls it, in the order
 * registered, to write its families with tiled_metrics_family and
 * tiled_metrics_sample: the metrics module need not know the module, and
 * the module names and documents its own series. The daemon wires them in
 * serve.c. */
struct tiled_metrics_out;
typedef void tiled_metrics_provider_fn(struct tiled_metrics_out *o, void *ctx);

/* Adds FN, called with CTX at every render. Not thread-safe: call before
 * serving. Returns 0, or -1 when the table (8 providers) is full. */
int tiled_metrics_provide(tiled_metrics_provider_fn *fn, void *ctx);
/* Forgets every provider (the daemon stops: their contexts go). */
void tiled_metrics_provide_none(void);
/* A family's HELP and TYPE lines (TYPE "counter" or "gauge"; a counter's
 * NAME ends in "_total"); then a sample of it without labels. */
void tiled_metrics_family(struct tiled_metrics_out *o, const char *name, const char *type, const char *help);
void tiled_metrics_sample(struct tiled_metrics_out *o, const char *name, uint64_t value);

#endif
