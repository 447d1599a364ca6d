/* otlp.h - W3C Trace Context and OpenTelemetry's OTLP span encoding: the
 * codec half of tracing (no sockets, no clocks; server/infra/trace.c exports).
 *
 * traceparent (w3.org/TR/trace-context, "traceparent Header"):
 *
 *     00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>
 *
 * Lower-case hex only; an all-zero trace-id or parent-id is invalid, and so
 * is version ff. A version above 00 is read by its first four fields (a
 * later version may only append "-..." after them); version 00 is exactly
 * 55 characters. Spaces and tabs around the value are ignored, and a value
 * longer than TILE_TRACEPARENT_MAX is refused (as OpenTelemetry's own
 * propagators do).
 *
 * OTLP (opentelemetry.io/docs/specs/otlp, opentelemetry-proto's
 * collector/trace/v1/trace_service.proto): tile_otlp_encode() writes one
 * ExportTraceServiceRequest, the body of POST /v1/traces with Content-Type
 * application/x-protobuf: a ResourceSpans with the resource's attributes
 * and one ScopeSpans holding every span.
 */
#ifndef TILE_OTLP_H
#define TILE_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tile_traceparent {
    uint8_t trace_id[16];
    uint8_t parent_id[8];
    uint8_t flags; /* bit 0: sampled */
};

#define TILE_TRACEPARENT_MAX 512

/* 0 and `out` filled when `s` is a valid traceparent value; -1 otherwise. */
int tile_traceparent_parse(const char *s, struct tile_traceparent *out);
/* Lower-case hex of `n` bytes into dst[2n + 1]. */
void tile_hex(char *dst, const uint8_t *src, size_t n);

enum tile_otlp_kind { TILE_OTLP_INTERNAL = 1, TILE_OTLP_SERVER = 2 };
enum tile_otlp_status { TILE_OTLP_UNSET = 0, TILE_OTLP_OK = 1, TILE_OTLP_ERROR = 2 };

/* An attribute: a string (s non-NULL) or an integer. */
struct tile_otlp_attr {
    const char *key;
    const char *s;
    int64_t i;
};

/* One span; every pointer is borrowed for the call. */
struct tile_otlp_span {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_id[8];   /* all zero: a root span (no parent_span_id field) */
    const char *trace_state; /* NULL or "": none */
    const char *name;
    enum tile_otlp_kind kind;
    uint64_t start_ns, end_ns; /* since the Unix epoch */
    const struct tile_otlp_attr *attrs;
    size_t nattrs;
    enum tile_otlp_status status;
};

/* The ExportTraceServiceRequest of `n` spans from one resource (its
 * attributes) and one instrumentation scope: a malloc'd buffer of *len
 * bytes the caller frees, or NULL when out of memory. */
uint8_t *tile_otlp_encode(const struct tile_otlp_attr *resource, size_t nresource, const char *scope_name,
                          const char *scope_version, const struct tile_otlp_span *spans, size_t n, size_t *len);

#endif
