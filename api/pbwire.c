/* pbwire.c - Protocol Buffers wire format (see pbwire.h).
 *
 * Every length is checked against the bytes that remain before it is used,
 * so a reader never looks past `end` whatever a peer sends: a varint may
 * not run past the buffer or beyond ten bytes, a length may not exceed what
 * follows it.
 */
#include "pbwire.h"

#include <string.h>

#include "utf8.h"

void tile_pb_reader_init(struct tile_pb_reader *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = r->p + len;
}

/* Returns 0, or -1 when the varint is truncated or longer than ten bytes.
 * Bits past the 64th (a tenth byte above 1) are dropped, as upb and C++
 * protobuf drop them; writers pad varints to ten bytes, never more. */
static int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    const uint8_t *p = *pp;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (p == end)
            return -1;
        uint8_t b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift; /* at shift 63 only bit 0 stays */
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

static uint64_t read_le(const uint8_t *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* Reads one scalar of wire type `wire` (not TILE_PB_LEN). */
static int read_scalar(const uint8_t **pp, const uint8_t *end, enum tile_pb_wire wire, uint64_t *out)
{
    if (wire == TILE_PB_VARINT)
        return read_varint(pp, end, out);
    size_t n = wire == TILE_PB_I64 ? 8 : 4;
    if ((size_t)(end - *pp) < n)
        return -1;
    *out = read_le(*pp, n);
    *pp += n;
    return 0;
}

/* Reads a field key: at most five bytes and 32 bits, a field number
 * above 0, as upb reads tags. */
static int read_key(struct tile_pb_reader *r, uint64_t *key, const char *what, struct tile_error *e)
{
    const uint8_t *start = r->p;
    if (read_varint(&r->p, r->end, key) < 0 || r->p - start > 5 || *key > UINT32_MAX)
        return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (truncated or overlong field key)",
                              what);
    if (*key >> 3 == 0)
        return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (field number 0)", what);
    return 0;
}

/* Reads the body of one field of wire type `wire` (not a group) into f. */
static int read_body(struct tile_pb_reader *r, struct tile_pb_field *f, const char *what, struct tile_error *e)
{
    if (f->wire == TILE_PB_LEN) {
        uint64_t len;
        if (read_varint(&r->p, r->end, &len) < 0 || len > (uint64_t)(r->end - r->p))
            return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (field %u runs past its end)",
                                  what, f->number);
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 0;
    }
    if (f->wire != TILE_PB_VARINT && f->wire != TILE_PB_I64 && f->wire != TILE_PB_I32)
        return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (field %u has wire type %d)", what,
                              f->number, (int)f->wire);
    if (read_scalar(&r->p, r->end, f->wire, &f->value) < 0)
        return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (field %u is truncated)", what,
                              f->number);
    return 0;
}

/* Skips a group whose start-group key (field `number`) was just read:
 * every field up to the end-group key of the same number, groups nested
 * in it included (a stack of their numbers, at most TILE_PB_MAX_DEPTH). */
static int skip_group(struct tile_pb_reader *r, uint32_t number, const char *what, struct tile_error *e)
{
    uint32_t open[TILE_PB_MAX_DEPTH];
    int depth = 0;
    open[depth++] = number;
    while (depth > 0) {
        uint64_t key;
        if (r->p == r->end)
            return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (group %u has no end)", what,
                                  open[depth - 1]);
        if (read_key(r, &key, what, e) < 0)
            return -1;
        struct tile_pb_field f = {.number = (uint32_t)(key >> 3), .wire = (enum tile_pb_wire)(key & 7)};
        if (f.wire == TILE_PB_EGROUP) {
            if (f.number != open[depth - 1])
                return tile_error_set(e, TILE_EINVAL,
                                      "%s is not a valid protobuf message (group %u ended as group %u)", what,
                                      open[depth - 1], f.number);
            depth--;
        } else if (f.wire == TILE_PB_SGROUP) {
            if (depth == TILE_PB_MAX_DEPTH)
                return tile_error_set(e, TILE_EINVAL, "%s nests groups more than %d deep", what, TILE_PB_MAX_DEPTH);
            open[depth++] = f.number;
        } else if (read_body(r, &f, what, e) < 0) {
            return -1;
        }
    }
    return 0;
}

int tile_pb_next(struct tile_pb_reader *r, struct tile_pb_field *f, const char *what, struct tile_error *e)
{
    for (;;) {
        if (r->p == r->end)
            return 0;
        uint64_t key;
        /* The hot path, inline: a one-byte key (fields 1..15, every field
         * of the messages tiled reads) of a length-delimited field whose
         * length takes one byte. */
        if (r->p[0] >= 0x08 && r->p[0] < 0x80 && (r->p[0] & 7) == TILE_PB_LEN && r->end - r->p >= 2 &&
            r->p[1] < 0x80 && r->p[1] <= r->end - r->p - 2) {
            f->number = r->p[0] >> 3;
            f->wire = TILE_PB_LEN;
            f->value = 0;
            f->len = r->p[1];
            f->data = r->p + 2;
            r->p += 2 + f->len;
            return 1;
        }
        if (read_key(r, &key, what, e) < 0)
            return -1;
        f->number = (uint32_t)(key >> 3);
        f->wire = (enum tile_pb_wire)(key & 7);
        f->value = 0;
        f->data = NULL;
        f->len = 0;
        if (f->wire == TILE_PB_SGROUP) { /* no message tiled reads has a group: always unknown */
            if (skip_group(r, f->number, what, e) < 0)
                return -1;
            continue;
        }
        if (f->wire == TILE_PB_EGROUP)
            return tile_error_set(e, TILE_EINVAL, "%s is not a valid protobuf message (end of group %u outside one)",
                                  what, f->number);
        return read_body(r, f, what, e) < 0 ? -1 : 1;
    }
}

int tile_pb_scalars(const struct tile_pb_field *f, enum tile_pb_wire elem, tile_pb_scalar_fn fn, void *ctx,
                    const char *what, struct tile_error *e)
{
    if (f->wire == elem)
        return fn(ctx, f->value, e);
    if (f->wire != TILE_PB_LEN || elem == TILE_PB_LEN)
        return 0; /* another wire type: protobuf keeps it as an unknown field */
    const uint8_t *p = f->data, *end = f->data + f->len;
    while (p < end) {
        uint64_t v;
        if (read_scalar(&p, end, elem, &v) < 0)
            return tile_error_set(e, TILE_EINVAL, "%s: packed field %u is truncated", what, f->number);
        if (fn(ctx, v, e) < 0)
            return -1;
    }
    return 0;
}

bool tile_pb_packs(const struct tile_pb_field *f, enum tile_pb_wire elem)
{
    return f->wire == elem || (f->wire == TILE_PB_LEN && elem != TILE_PB_LEN);
}

int tile_pb_utf8_check(const struct tile_pb_field *f, const char *what, struct tile_error *e)
{
    size_t bad;
    if (tile_utf8_valid((const char *)f->data, f->len, &bad))
        return 0;
    return tile_error_set(e, TILE_EINVAL, "%s is not valid UTF-8 (byte %zu of %zu; protobuf string fields must be)",
                          what, bad, f->len);
}

/* ---- writer -------------------------------------------------------------- */

size_t tile_pb_varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

uint8_t *tile_pb_put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

uint8_t *tile_pb_put_tag(uint8_t *p, uint32_t number, enum tile_pb_wire wire)
{
    return tile_pb_put_varint(p, (uint64_t)number << 3 | (uint64_t)wire);
}

size_t tile_pb_len_head_size(uint32_t number, uint64_t len)
{
    return tile_pb_varint_size((uint64_t)number << 3) + tile_pb_varint_size(len);
}

uint8_t *tile_pb_put_len_head(uint8_t *p, uint32_t number, uint64_t len)
{
    return tile_pb_put_varint(tile_pb_put_tag(p, number, TILE_PB_LEN), len);
}

size_t tile_pb_bytes_size(uint32_t number, size_t len)
{
    return tile_pb_len_head_size(number, len) + len;
}

uint8_t *tile_pb_put_bytes(uint8_t *p, uint32_t number, const void *data, size_t len)
{
    p = tile_pb_put_len_head(p, number, len);
    if (len)
        memcpy(p, data, len);
    return p + len;
}
