/* metrics.h - Prometheus metrics of the daemon.
 *
 * Counters and histograms are plain atomics updated where a request
 * completes; tiled_metrics_render() formats them (plus gauges read at that
 * moment and the process metrics) in the text exposition format 0.0.4. The
 * renderer is a plain function of a buffer, so the same text can go to a log.
 */
#ifndef TILED_METRICS_H
#define TILED_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct tiled_server;
struct tiled_req;

/* Records one finished request. Thread-safe, lock-free. */
void tiled_metrics_record(const struct tiled_req *req, int status);

/* Renders every metric into a malloc'd NUL-terminated string (NULL when out
 * of memory); *len gets its length. */
char *tiled_metrics_render(struct tiled_server *srv, size_t *len);

#endif
