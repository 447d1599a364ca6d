/* metrics.h - Prometheus metrics of the daemon.
 *
 * Counters and histograms are plain atomics updated where a request
 * completes (tiled_service_end: the duration is req->duration_us, the one
 * the access log shows); tiled_metrics_render() formats them (plus gauges read at that
 * moment and the process metrics) in the text exposition format 0.0.4. The
 * renderer is a plain function of a buffer, so the same text can go to a log.
 */
#ifndef TILED_METRICS_H
#define TILED_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metricsink.h"
#include "route.h"

struct tiled_server;
struct tiled_req;

/* Records one finished request. Thread-safe, lock-free. */
void tiled_metrics_record(const struct tiled_req *req, int status);

/* A transport's connection opened (+1) or closed (-1): the open
 * connections gauge. Thread-safe, lock-free. */
void tiled_metrics_connection(enum tiled_transport transport, int delta);

/* Renders every metric into a malloc'd NUL-terminated string (NULL when out
 * of memory), in OpenMetrics 1.0 when `openmetrics`, else in the text
 * format 0.0.4; *len gets its length. */
char *tiled_metrics_render(struct tiled_server *srv, bool openmetrics, size_t *len);

#endif
