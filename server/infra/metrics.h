/* metrics.h - Prometheus metrics of the daemon.
 *
 * Counters and histograms are plain atomics updated where a request
 * completes (an observer of finished requests, exchange.h: the duration is
 * the one the access log shows); tiled_metrics_render() formats them (plus gauges read at that
 * moment and the process metrics) in the text exposition format 0.0.4. The
 * renderer is a plain function of a buffer, so the same text can go to a log.
 */
#ifndef TILED_METRICS_H
#define TILED_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exchange.h"
#include "metricsink.h"

/* Records one finished request: an observer of finished requests
 * (exchange.h; CTX unused). Thread-safe, lock-free. */
void tiled_metrics_record(const struct tiled_exchange *x, void *ctx);

/* A transport's connection opened (+1) or closed (-1): the open
 * connections gauge. Thread-safe, lock-free. */
void tiled_metrics_connection(enum tiled_transport transport, int delta);

/* The daemon's own figures a scrape shows, read by the caller at that
 * moment (service.h, tiled_service_gauges): the metrics module does not
 * know the daemon's state, only these numbers. */
struct tiled_metrics_gauges {
    int inflight;                  /* requests being received, processed or sent */
    bool grpc;                     /* the gRPC transport is configured: its series are shown */
    long long max_connections;     /* --max-connections */
    bool draining;
    int queue_depth, workers, busy_workers; /* the worker pool's */
    uint64_t header_timeouts;      /* connections cut for a late request head */
    uint64_t body_timeouts[TILED_TRANSPORT_COUNT];
    uint64_t start_wall_ms;        /* process start, ms since the epoch */
};

/* Renders every metric into a malloc'd NUL-terminated string (NULL when out
 * of memory), in OpenMetrics 1.0 when `openmetrics`, else in the text
 * format 0.0.4; *len gets its length. */
char *tiled_metrics_render(const struct tiled_metrics_gauges *g, bool openmetrics, size_t *len);

#endif
