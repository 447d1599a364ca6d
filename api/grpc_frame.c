/* grpc_frame.c - gRPC Length-Prefixed-Messages, grpc-timeout and
 * grpc-message (see grpc_frame.h; the rules are gRPC's PROTOCOL-HTTP2.md).
 *
 * The message buffer is allocated once its length is known and checked
 * against the limit, so a peer cannot make the deframer hold more than
 * `max` bytes, however it splits its DATA frames.
 */
#include "grpc_frame.h"

#include <stdlib.h>
#include <string.h>

void tile_grpc_deframer_init(struct tile_grpc_deframer *d, uint64_t max)
{
    memset(d, 0, sizeof(*d));
    d->max = max ? max : UINT32_MAX;
}

void tile_grpc_deframer_free(struct tile_grpc_deframer *d)
{
    bool compressed_ok = d->compressed_ok;
    free(d->msg);
    tile_grpc_deframer_init(d, d->max);
    d->compressed_ok = compressed_ok;
}

bool tile_grpc_deframer_idle(const struct tile_grpc_deframer *d)
{
    return d->prefix_have == 0 && !d->has_msg;
}

/* The prefix is complete: check it before any message byte is taken. */
static int start_message(struct tile_grpc_deframer *d, struct tile_error *e)
{
    uint32_t len = (uint32_t)d->prefix[1] << 24 | (uint32_t)d->prefix[2] << 16 | (uint32_t)d->prefix[3] << 8 |
                   d->prefix[4];
    if (d->prefix[0] > 1 || (d->prefix[0] == 1 && !d->compressed_ok))
        return tile_error_set(e, TILE_EUNSUPPORTED, "the message is compressed (flag %u) but the call names no grpc-encoding",
                              d->prefix[0]);
    if (len > d->max)
        return tile_error_set(e, TILE_ETOOBIG, "gRPC message of %lu bytes is larger than the limit of %llu bytes",
                              (unsigned long)len, (unsigned long long)d->max);
    d->msg_len = len;
    d->msg_have = 0;
    d->has_msg = true;
    return 0;
}

long long tile_grpc_deframe_step(struct tile_grpc_deframer *d, const void *data, size_t len,
                                 struct tile_grpc_piece *out, struct tile_error *e)
{
    const uint8_t *p = data;
    size_t used = 0;
    *out = (struct tile_grpc_piece){0};
    if (!d->has_msg) {
        size_t n = TILE_GRPC_PREFIX - d->prefix_have;
        n = n < len ? n : len;
        memcpy(d->prefix + d->prefix_have, p, n);
        d->prefix_have += n;
        used += n;
        if (d->prefix_have < TILE_GRPC_PREFIX)
            return (long long)used;
        if (start_message(d, e) < 0)
            return -1;
        out->start = true;
        out->compressed = d->prefix[0] == 1;
        out->msg_len = d->msg_len;
    }
    size_t n = d->msg_len - d->msg_have;
    n = n < len - used ? n : len - used;
    out->bytes = p + used;
    out->n = n;
    d->msg_have += n;
    used += n;
    if (d->msg_have == d->msg_len) {
        out->end = true;
        d->has_msg = false;
        d->prefix_have = 0;
    }
    return (long long)used;
}

long long tile_grpc_deframe(struct tile_grpc_deframer *d, const void *data, size_t len, uint8_t **done,
                            size_t *done_len, struct tile_error *e)
{
    struct tile_grpc_piece pc;
    *done = NULL;
    *done_len = 0;
    size_t have = d->msg_have;
    long long used = tile_grpc_deframe_step(d, data, len, &pc, e);
    if (used < 0)
        return -1;
    if (pc.start) {
        have = 0;
        d->msg = malloc(pc.msg_len ? pc.msg_len : 1);
        if (!d->msg) {
            d->has_msg = false; /* nothing to fill: the next call starts over */
            return tile_error_set(e, TILE_ENOMEM, "cannot allocate a gRPC message of %lu bytes",
                                  (unsigned long)pc.msg_len);
        }
    }
    if (pc.n)
        memcpy(d->msg + have, pc.bytes, pc.n);
    if (pc.end) {
        *done = d->msg;
        *done_len = d->msg_len;
        d->msg = NULL;
    }
    return used;
}

void tile_grpc_put_prefix(uint8_t out[TILE_GRPC_PREFIX], uint32_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

int tile_grpc_timeout_parse(const char *s, uint64_t *ns)
{
    static const struct {
        char unit;
        uint64_t ns;
    } units[] = {{'H', UINT64_C(3600000000000)}, {'M', UINT64_C(60000000000)}, {'S', 1000000000},
                 {'m', 1000000},                 {'u', 1000},                  {'n', 1}};
    uint64_t v = 0;
    size_t digits = 0;
    while (s[digits] >= '0' && s[digits] <= '9' && digits < 9)
        v = v * 10 + (uint64_t)(s[digits++] - '0');
    if (digits == 0 || digits > 8 || s[digits] == '\0' || s[digits + 1] != '\0')
        return -1;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (units[i].unit == s[digits]) {
            /* 99999999H is beyond 64 bits of nanoseconds: saturate (no deadline is that far) */
            *ns = v && units[i].ns > UINT64_MAX / v ? UINT64_MAX : v * units[i].ns;
            return 0;
        }
    }
    return -1;
}

size_t tile_grpc_message_encode(const char *msg, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    if (cap == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        bool plain = *p >= 0x20 && *p <= 0x7e && *p != '%';
        size_t need = plain ? 1 : 3;
        if (n + need > cap - 1)
            break;
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
    return n;
}
