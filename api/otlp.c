/* otlp.c - W3C traceparent reading and the OTLP span encoder (see otlp.h).
 *
 * DESIGN. The encoder sizes each nested message before writing it, so every
 * length is a minimal varint (what protobuf's own serializers write) and the
 * whole request is one allocation. Field numbers are those of
 * opentelemetry-proto v1 (trace/v1/trace.proto, common/v1/common.proto,
 * resource/v1/resource.proto, collector/trace/v1/trace_service.proto).
 */
#include "otlp.h"

#include <stdlib.h>
#include <string.h>

#include "pbwire.h"

/* ---- traceparent ----------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* upper case is invalid too (HEXDIGLC) */
}

/* Reads 2n hex digits into dst[n]; -1 on a non-hex digit. */
static int unhex(uint8_t *dst, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hi < 0 ? -1 : hexval(s[2 * i + 1]);
        if (lo < 0)
            return -1;
        dst[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

int tile_traceparent_parse(const char *s, struct tile_traceparent *out)
{
    uint8_t version;
    if (!s || strnlen(s, TILE_TRACEPARENT_MAX + 1) > TILE_TRACEPARENT_MAX)
        return -1;
    /* Spaces and tabs around the value are not part of it (RFC 9110 OWS;
     * HTTP parsers strip them, gRPC metadata keeps them). */
    while (*s == ' ' || *s == '\t')
        s++;
    size_t len = strlen(s);
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    /* version "-" trace-id "-" parent-id "-" flags: 2+1+32+1+16+1+2 = 55 */
    if (len < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-')
        return -1;
    if (unhex(&version, s, 1) < 0 || version == 0xff)
        return -1;
    if (version == 0 && len != 55)
        return -1;
    if (len > 55 && s[55] != '-') /* a later version appends "-..." only */
        return -1;
    if (unhex(out->trace_id, s + 3, 16) < 0 || unhex(out->parent_id, s + 36, 8) < 0 ||
        unhex(&out->flags, s + 53, 1) < 0)
        return -1;
    if (all_zero(out->trace_id, 16) || all_zero(out->parent_id, 8))
        return -1;
    return 0;
}

void tile_hex(char *dst, const uint8_t *src, size_t n)
{
    /* Each byte's two digits, one lookup a byte (a trace id in every
     * access line). */
    static const char pairs[] =
        "000102030405060708090a0b0c0d0e0f"
        "101112131415161718191a1b1c1d1e1f"
        "202122232425262728292a2b2c2d2e2f"
        "303132333435363738393a3b3c3d3e3f"
        "404142434445464748494a4b4c4d4e4f"
        "505152535455565758595a5b5c5d5e5f"
        "606162636465666768696a6b6c6d6e6f"
        "707172737475767778797a7b7c7d7e7f"
        "808182838485868788898a8b8c8d8e8f"
        "909192939495969798999a9b9c9d9e9f"
        "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
        "b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
        "c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
        "d0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
        "e0e1e2e3e4e5e6e7e8e9eaebecedeeef"
        "f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
    for (size_t i = 0; i < n; i++)
        memcpy(dst + 2 * i, pairs + 2 * src[i], 2);
    dst[2 * n] = '\0';
}

/* ---- OTLP ------------------------------------------------------------------------ */

enum {
    F_REQ_RESOURCE_SPANS = 1, /* ExportTraceServiceRequest */
    F_RS_RESOURCE = 1,        /* ResourceSpans */
    F_RS_SCOPE_SPANS = 2,
    F_RES_ATTRIBUTES = 1, /* Resource */
    F_SS_SCOPE = 1,       /* ScopeSpans */
    F_SS_SPANS = 2,
    F_SCOPE_NAME = 1, /* InstrumentationScope */
    F_SCOPE_VERSION = 2,
    F_KV_KEY = 1, /* KeyValue */
    F_KV_VALUE = 2,
    F_AV_STRING = 1, /* AnyValue */
    F_AV_INT = 3,
    F_SPAN_TRACE_ID = 1, /* Span */
    F_SPAN_SPAN_ID = 2,
    F_SPAN_TRACE_STATE = 3,
    F_SPAN_PARENT = 4,
    F_SPAN_NAME = 5,
    F_SPAN_KIND = 6,
    F_SPAN_START = 7,
    F_SPAN_END = 8,
    F_SPAN_ATTRIBUTES = 9,
    F_SPAN_STATUS = 15,
    F_STATUS_CODE = 3, /* Status */
};

static size_t any_size(const struct tile_otlp_attr *a)
{
    return a->s ? tile_pb_bytes_size(F_AV_STRING, strlen(a->s)) : 1 + tile_pb_varint_size((uint64_t)a->i);
}

static size_t kv_size(const struct tile_otlp_attr *a)
{
    size_t av = any_size(a);
    return tile_pb_bytes_size(F_KV_KEY, strlen(a->key)) + tile_pb_len_head_size(F_KV_VALUE, av) + av;
}

static size_t attrs_size(uint32_t number, const struct tile_otlp_attr *a, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t kv = kv_size(&a[i]);
        total += tile_pb_len_head_size(number, kv) + kv;
    }
    return total;
}

static uint8_t *put_attrs(uint8_t *p, uint32_t number, const struct tile_otlp_attr *a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p = tile_pb_put_len_head(p, number, kv_size(&a[i]));
        p = tile_pb_put_bytes(p, F_KV_KEY, a[i].key, strlen(a[i].key));
        p = tile_pb_put_len_head(p, F_KV_VALUE, any_size(&a[i]));
        if (a[i].s) {
            p = tile_pb_put_bytes(p, F_AV_STRING, a[i].s, strlen(a[i].s));
        } else {
            p = tile_pb_put_tag(p, F_AV_INT, TILE_PB_VARINT);
            p = tile_pb_put_varint(p, (uint64_t)a[i].i);
        }
    }
    return p;
}

static uint8_t *put_fixed64(uint8_t *p, uint32_t number, uint64_t v)
{
    p = tile_pb_put_tag(p, number, TILE_PB_I64);
    for (int i = 0; i < 8; i++)
        *p++ = (uint8_t)(v >> (8 * i));
    return p;
}

static bool has_state(const struct tile_otlp_span *s)
{
    return s->trace_state && s->trace_state[0];
}

static size_t status_size(const struct tile_otlp_span *s)
{
    return 1 + tile_pb_varint_size((uint64_t)s->status);
}

static size_t span_size(const struct tile_otlp_span *s)
{
    size_t n = tile_pb_bytes_size(F_SPAN_TRACE_ID, 16) + tile_pb_bytes_size(F_SPAN_SPAN_ID, 8);
    if (has_state(s))
        n += tile_pb_bytes_size(F_SPAN_TRACE_STATE, strlen(s->trace_state));
    if (!all_zero(s->parent_id, 8))
        n += tile_pb_bytes_size(F_SPAN_PARENT, 8);
    n += tile_pb_bytes_size(F_SPAN_NAME, strlen(s->name));
    n += 1 + tile_pb_varint_size((uint64_t)s->kind);
    n += 2 * (1 + 8);
    n += attrs_size(F_SPAN_ATTRIBUTES, s->attrs, s->nattrs);
    if (s->status != TILE_OTLP_UNSET)
        n += tile_pb_len_head_size(F_SPAN_STATUS, status_size(s)) + status_size(s);
    return n;
}

static uint8_t *put_span(uint8_t *p, const struct tile_otlp_span *s)
{
    p = tile_pb_put_len_head(p, F_SS_SPANS, span_size(s));
    p = tile_pb_put_bytes(p, F_SPAN_TRACE_ID, s->trace_id, 16);
    p = tile_pb_put_bytes(p, F_SPAN_SPAN_ID, s->span_id, 8);
    if (has_state(s))
        p = tile_pb_put_bytes(p, F_SPAN_TRACE_STATE, s->trace_state, strlen(s->trace_state));
    if (!all_zero(s->parent_id, 8))
        p = tile_pb_put_bytes(p, F_SPAN_PARENT, s->parent_id, 8);
    p = tile_pb_put_bytes(p, F_SPAN_NAME, s->name, strlen(s->name));
    p = tile_pb_put_tag(p, F_SPAN_KIND, TILE_PB_VARINT);
    p = tile_pb_put_varint(p, (uint64_t)s->kind);
    p = put_fixed64(p, F_SPAN_START, s->start_ns);
    p = put_fixed64(p, F_SPAN_END, s->end_ns);
    p = put_attrs(p, F_SPAN_ATTRIBUTES, s->attrs, s->nattrs);
    if (s->status != TILE_OTLP_UNSET) {
        p = tile_pb_put_len_head(p, F_SPAN_STATUS, status_size(s));
        p = tile_pb_put_tag(p, F_STATUS_CODE, TILE_PB_VARINT);
        p = tile_pb_put_varint(p, (uint64_t)s->status);
    }
    return p;
}

uint8_t *tile_otlp_encode(const struct tile_otlp_attr *resource, size_t nresource, const char *scope_name,
                          const char *scope_version, const struct tile_otlp_span *spans, size_t n, size_t *len)
{
    size_t res = attrs_size(F_RES_ATTRIBUTES, resource, nresource);
    size_t scope = tile_pb_bytes_size(F_SCOPE_NAME, strlen(scope_name)) +
                   tile_pb_bytes_size(F_SCOPE_VERSION, strlen(scope_version));
    size_t ss = tile_pb_len_head_size(F_SS_SCOPE, scope) + scope;
    for (size_t i = 0; i < n; i++) {
        size_t sp = span_size(&spans[i]);
        ss += tile_pb_len_head_size(F_SS_SPANS, sp) + sp;
    }
    size_t rs = tile_pb_len_head_size(F_RS_RESOURCE, res) + res + tile_pb_len_head_size(F_RS_SCOPE_SPANS, ss) + ss;
    size_t total = tile_pb_len_head_size(F_REQ_RESOURCE_SPANS, rs) + rs;
    uint8_t *buf = malloc(total ? total : 1), *p = buf;
    if (!buf)
        return NULL;
    p = tile_pb_put_len_head(p, F_REQ_RESOURCE_SPANS, rs);
    p = tile_pb_put_len_head(p, F_RS_RESOURCE, res);
    p = put_attrs(p, F_RES_ATTRIBUTES, resource, nresource);
    p = tile_pb_put_len_head(p, F_RS_SCOPE_SPANS, ss);
    p = tile_pb_put_len_head(p, F_SS_SCOPE, scope);
    p = tile_pb_put_bytes(p, F_SCOPE_NAME, scope_name, strlen(scope_name));
    p = tile_pb_put_bytes(p, F_SCOPE_VERSION, scope_version, strlen(scope_version));
    for (size_t i = 0; i < n; i++)
        p = put_span(p, &spans[i]);
    *len = (size_t)(p - buf);
    return buf;
}
