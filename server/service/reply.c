/* reply.c - building replies (see reply.h): the fault table, the one map
 * from error kinds to HTTP status and gRPC code; the gRPC code of a bare
 * HTTP status (Triton's mapping); and the Server-Timing value. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "numfmt.h"
#include "text.h"

void tiled_reply_header(struct tiled_reply *r, const char *name, const char *value)
{
    int i = 0;
    while (i < r->nheaders && !(r->headers[i][0] && strcasecmp(r->headers[i][0], name) == 0))
        i++;
    if (i == TILED_REPLY_HEADERS) { /* more names than the code sets (reply.h): a bug, said aloud */
        fprintf(stderr, "tiled: reply header %s dropped: a reply holds %d\n", name, TILED_REPLY_HEADERS);
        return;
    }
    if (i == r->nheaders) {
        r->headers[i][0] = strdup(name);
        r->headers[i][1] = NULL;
        r->nheaders++;
    }
    free(r->headers[i][1]);
    r->headers[i][1] = strdup(value);
}

void tiled_reply_vary(struct tiled_reply *r, enum tiled_vary field)
{
    r->vary |= (unsigned)field;
}

size_t tiled_vary_text(unsigned vary, char buf[TILED_VARY_TEXT_MAX])
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{TILED_VARY_ACCEPT, "Accept"}, {TILED_VARY_ACCEPT_ENCODING, "Accept-Encoding"},
                 {TILED_VARY_ORIGIN, "Origin"}};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(vary & names[i].bit))
            continue;
        size_t len = strlen(names[i].name);
        if (n) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        memcpy(buf + n, names[i].name, len);
        n += len;
    }
    buf[n] = '\0';
    return n;
}
_Static_assert(sizeof("Accept, Accept-Encoding, Origin") <= TILED_VARY_TEXT_MAX, "every field fits");

void tiled_reply_set_body(struct tiled_reply *r, char *body, uint64_t len, void (*release)(void *body))
{
    if (r->release_body)
        r->release_body(r->body);
    else
        free(r->body);
    r->body = body;
    r->body_len = body ? len : 0;
    r->release_body = release;
}

void tiled_reply_json(struct tiled_reply *r, int status, const char *json)
{
    r->status = status;
    r->content_type = "application/json";
    size_t len = strlen(json);
    char *body = malloc(len + 1);
    if (body)
        memcpy(body, json, len + 1);
    tiled_reply_set_body(r, body, len, NULL);
}

void tiled_reply_doc(struct tiled_reply *r, int status, json_t *doc)
{
    char *text = tiled_json_dump(doc);
    free(r->message); /* a document replaces an earlier error */
    r->message = NULL;
    r->status = text ? status : TILED_UNAVAILABLE;
    r->content_type = "application/json";
    /* An earlier body goes back the way it came (a pooled output body is
     * not malloc's); the document is. */
    tiled_reply_set_body(r, text, text ? strlen(text) : 0, NULL);
}

void tiled_reply_error(struct tiled_reply *r, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    tiled_reply_doc(r, status, json_pack("{s:o}", "error", tiled_json_text(msg)));
    free(r->message);
    r->message = strdup(msg);
}

int tiled_reply_grpc_status(const struct tiled_reply *r)
{
    static const struct {
        int http, grpc;
    } map[] = {
        {TILED_OK, TILED_GRPC_OK},
        {TILED_NO_CONTENT, TILED_GRPC_OK},
        {TILED_BAD_REQUEST, TILED_GRPC_INVALID_ARGUMENT},
        {TILED_UNAUTHORIZED, TILED_GRPC_UNAUTHENTICATED},
        {TILED_FORBIDDEN, TILED_GRPC_PERMISSION_DENIED},
        {TILED_NOT_FOUND, TILED_GRPC_NOT_FOUND},
        {TILED_METHOD_NOT_ALLOWED, TILED_GRPC_UNIMPLEMENTED},
        {TILED_NOT_ACCEPTABLE, TILED_GRPC_INVALID_ARGUMENT},
        {TILED_TOO_LARGE, TILED_GRPC_RESOURCE_EXHAUSTED},
        {TILED_UNSUPPORTED_MEDIA_TYPE, TILED_GRPC_INVALID_ARGUMENT},
        {TILED_CLIENT_GONE, TILED_GRPC_CANCELLED},
        {TILED_INTERNAL_ERROR, TILED_GRPC_INTERNAL},
        {TILED_NOT_IMPLEMENTED, TILED_GRPC_UNIMPLEMENTED},
        {TILED_UNAVAILABLE, TILED_GRPC_UNAVAILABLE},
    };
    if (r->has_grpc_status)
        return r->grpc_status;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (map[i].http == r->status)
            return map[i].grpc;
    }
    return r->status >= 500 ? TILED_GRPC_INTERNAL : TILED_GRPC_UNKNOWN;
}

void tiled_reply_set_grpc_status(struct tiled_reply *r, int code)
{
    r->grpc_status = code;
    r->has_grpc_status = true;
}

const struct tiled_fault_status tiled_fault_status[TILED_FAULT_COUNT] = {
    [TILED_FAULT_UNSET] = {TILED_INTERNAL_ERROR, TILED_GRPC_INTERNAL},
    [TILED_FAULT_INVALID] = {TILED_BAD_REQUEST, TILED_GRPC_INVALID_ARGUMENT},
    [TILED_FAULT_TOO_BIG] = {TILED_TOO_LARGE, TILED_GRPC_RESOURCE_EXHAUSTED},
    [TILED_FAULT_UNAVAILABLE] = {TILED_UNAVAILABLE, TILED_GRPC_UNAVAILABLE},
    [TILED_FAULT_IO] = {TILED_INTERNAL_ERROR, TILED_GRPC_INTERNAL},
    [TILED_FAULT_UNSUPPORTED] = {TILED_BAD_REQUEST, TILED_GRPC_INVALID_ARGUMENT},
    [TILED_FAULT_NOT_ACCEPTABLE] = {TILED_NOT_ACCEPTABLE, TILED_GRPC_INVALID_ARGUMENT},
    [TILED_FAULT_GRPC_WIRE] = {TILED_BAD_REQUEST, TILED_GRPC_INTERNAL},
    [TILED_FAULT_CODING] = {TILED_UNSUPPORTED_MEDIA_TYPE, TILED_GRPC_UNIMPLEMENTED},
    [TILED_FAULT_TIMEOUT] = {TILED_REQUEST_TIMEOUT, TILED_GRPC_DEADLINE_EXCEEDED},
};

enum tiled_fault tiled_fault_of(const struct tile_error *e)
{
    return (unsigned)e->code < TILE_ERRCODE_COUNT ? (enum tiled_fault)e->code : TILED_FAULT_UNSET;
}

enum tiled_fault tiled_fault_of_message(const struct tile_error *e)
{
    return e->code == TILE_ETOOBIG || e->code == TILE_ENOMEM ? tiled_fault_of(e) : TILED_FAULT_GRPC_WIRE;
}

/* The gRPC code is set on the reply only where the HTTP status alone
 * would give another one (tiled_reply_grpc_status), so a reply whose
 * status changes later (an empty 503 when its body cannot be built)
 * is sent with the code of the status it has. */
static void set_fault(struct tiled_reply *r, enum tiled_fault f, const char *msg)
{
    const struct tiled_fault_status *s = &tiled_fault_status[(unsigned)f < TILED_FAULT_COUNT ? f : TILED_FAULT_UNSET];
    tiled_reply_error(r, s->http, "%s", msg);
    r->has_grpc_status = false;
    if (tiled_reply_grpc_status(r) != s->grpc)
        tiled_reply_set_grpc_status(r, s->grpc);
}

void tiled_reply_fault(struct tiled_reply *r, enum tiled_fault f, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    set_fault(r, f, msg);
}

void tiled_reply_tile_error(struct tiled_reply *r, const struct tile_error *e)
{
    set_fault(r, tiled_fault_of(e), e->text[0] ? e->text : "internal error");
}

void tiled_reply_free(struct tiled_reply *r)
{
    for (int i = 0; i < r->nheaders; i++) {
        free(r->headers[i][0]);
        free(r->headers[i][1]);
    }
    r->nheaders = 0;
    r->vary = 0;
    free(r->message);
    r->message = NULL;
    tiled_reply_set_body(r, NULL, 0, NULL);
    if (r->stream)
        r->release_stream(r->stream);
    r->stream = NULL;
}

/* "name;dur=1.234": the microseconds as milliseconds with three decimals.
 * Inlined, so that each name's length is a constant and its copy a few
 * moves rather than a call. */
static inline __attribute__((always_inline)) char *put_duration(char *p, const char *name, size_t n, uint64_t us)
{
    memcpy(p, name, n);
    p += n;
    unsigned frac = (unsigned)(us % 1000);
    p += tile_format_u64(p, us / 1000);
    p[0] = '.';
    p[1] = (char)('0' + frac / 100);
    p[2] = (char)('0' + frac / 10 % 10);
    p[3] = (char)('0' + frac % 10);
    return p + 4;
}
#define PUT_DURATION(p, lit, ...) put_duration(p, lit, sizeof(lit) - 1, __VA_ARGS__)

void tiled_server_timing(const struct tile_timings *tm, char *buf, size_t cap)
{
    if (cap < TILED_SERVER_TIMING_MAX) {
        buf[0] = '\0';
        return;
    }
    char *p = buf;
    p = PUT_DURATION(p, "queue;dur=", tm->queue_us);
    p = PUT_DURATION(p, ", decode;dur=", tm->decode_us);
    p = PUT_DURATION(p, ", tile;dur=", tm->tile_us);
    p = PUT_DURATION(p, ", encode;dur=", tm->encode_us);
    p = PUT_DURATION(p, ", total;dur=", tm->total_us);
    *p = '\0';
}

