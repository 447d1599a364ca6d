/* trace.h - W3C Trace Context for every request, and OTLP/HTTP span export
 * when --otlp-endpoint is set.
 *
 * Every request gets a trace id (the access log shows it): the incoming
 * traceparent's when valid, else a new random one. With an endpoint, each
 * sampled request becomes one SERVER span (its parent: the incoming
 * parent-id) with a child span per phase (queue, decode, tile, encode,
 * send), exported in batches by one background thread. The request path
 * only copies a finished record into a bounded ring: when the ring is full
 * the record is dropped and counted, so a slow or absent collector never
 * slows or fails a request.
 */
#ifndef TILED_TRACE_H
#define TILED_TRACE_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "error.h"

struct tiled_exchange; /* exchange.h */

/* A request's W3C trace context (tiled_trace_begin reads it, the exporter
 * sends it). */
struct tiled_trace {
    uint8_t trace_id[16];
    uint8_t span_id[8];   /* the request's own span */
    uint8_t parent_id[8]; /* the caller's span; all zero when none came */
    bool sampled;
    const char *trace_state; /* the tracestate header as received (borrowed), or NULL */
};

/* Longest tracestate kept (W3C: 32 members, 512 characters is what every
 * vendor must propagate); a longer or non-printable one is dropped. */
#define TILED_TRACESTATE_MAX 512

/* Starts the exporter when cfg->otlp_endpoint is set. -1 with `e` for an
 * endpoint it cannot use (not http://host[:port][/path]). */
int tiled_trace_init(const struct tiled_config *cfg, struct tile_error *e);
/* Flushes what the ring holds (bounded by the exporter's timeouts) and
 * stops the exporter. */
void tiled_trace_stop(void);
/* Reads traceparent/tracestate (either may be NULL) into `t`. */
void tiled_trace_begin(struct tiled_trace *t, const char *traceparent, const char *tracestate);
/* A request is over: queues its spans when exporting and sampled. An
 * observer of finished requests (exchange.h; CTX unused). */
void tiled_trace_end(const struct tiled_exchange *x, void *ctx);
/* Spans exported, failed (the collector refused or could not be reached)
 * and dropped (the ring was full). */
void tiled_trace_counts(uint64_t *exported, uint64_t *failed, uint64_t *dropped);
/* Finished requests waiting in the ring for export, and the ring's size:
 * what the exporter holds, whatever the collector does. */
void tiled_trace_queued(uint64_t *queued, uint64_t *capacity);
bool tiled_trace_exporting(void);

#endif
