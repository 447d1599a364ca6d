/* pbwire.h - the Protocol Buffers wire format, as much as the Open Inference
 * Protocol's gRPC messages need: a reader that walks the fields of one
 * message in place (length-delimited fields point into the buffer, nothing
 * is copied) and a writer of tags, varints and length-delimited fields.
 *
 * The reader reads what protobuf's parsers read (protobuf.dev, "Encoding";
 * upb is the reference): varints of up to ten bytes (bits past 64
 * dropped), keys of up to five; groups (wire types 3 and 4), which no
 * message tiled reads has, are skipped whole with everything nested in
 * them, and a group that does not end with its own number is an error.
 *
 * What a message makes of its fields is the caller's, with protobuf's
 * rules: a field of a known number but another wire type is an unknown
 * field (skipped); a scalar or string given twice is the last one; an
 * embedded message given twice is the merge of both; repeated scalars
 * arrive packed (one length-delimited field) or unpacked (one field per
 * value) in any mix of runs, so tile_pb_scalars() walks either form.
 *
 * WHY HAND-WRITTEN, with its measurement (make bench-pbcodec,
 * bench/bench_pbcodec.c; protobuf-c 1.4.1's generated reader of the same
 * api/proto/ files, gcc -O2, Debian 12):
 *
 *                                  protobuf-c unpack  protobuf-c + tensors  tiled
 *   small ModelInferRequest (82 B,       6,811            11,264           8,614
 *   two raw inputs), instructions/call
 *   64 MiB raw_input_contents: heap     64.0 MiB         128.0 MiB        64.0 MiB
 *   (peak), copies of the tensor data       1                 2                1
 *
 * (tiled's figure includes the UTF-8 checks of its strings, which protobuf-c
 * does not make.) protobuf-c reads the wire alone in 21% fewer instructions,
 * but it builds a second copy of the request (every string and bytes field
 * malloc'd and copied, tensor payloads included) that the daemon would then
 * turn into tensors: 31% more instructions per small call and twice the peak memory
 * and copies for a large one than reading in place straight into the
 * tensors. The hand-kept part is this reader and writer (377 lines) and 36
 * field-number constants in grpc_infer.c, grpc_msgs.c and grpc_reflect.c
 * beside the semantic rules they would need either way; protobuf-c would
 * replace the 377 with 9,404 generated lines, protoc-c at build time and
 * libprotobuf-c at run time. For a small fast C server that is the wrong
 * trade, so the codec stays hand-written, and its correctness is checked
 * against protobuf-c and the protobuf package instead: fuzz/fuzz_pbdiff.c
 * (every hand-decoded request, any valid encoding, protobuf-c's reading)
 * and tests/server/test_pb_differential.py (the same over a real channel
 * against the protobuf package's parser).
 */
#ifndef TILE_PBWIRE_H
#define TILE_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum tile_pb_wire {
    TILE_PB_VARINT = 0,
    TILE_PB_I64 = 1,
    TILE_PB_LEN = 2,
    TILE_PB_SGROUP = 3, /* never returned: skipped by tile_pb_next() */
    TILE_PB_EGROUP = 4,
    TILE_PB_I32 = 5,
};

/* Groups nested deeper than this are refused (upb's default depth limit). */
#define TILE_PB_MAX_DEPTH 100

/* One field: its number and wire type, and either the scalar `value`
 * (varint, or the little-endian fixed32/fixed64 bits) or, for TILE_PB_LEN,
 * the bytes data[0, len) inside the message. */
struct tile_pb_field {
    uint32_t number;
    enum tile_pb_wire wire;
    uint64_t value;
    const uint8_t *data;
    size_t len;
};

struct tile_pb_reader {
    const uint8_t *p, *end;
};

void tile_pb_reader_init(struct tile_pb_reader *r, const void *buf, size_t len);

/* Reads the next field, skipping groups. Returns 1 with `f` filled, 0 at
 * the end of the message, -1 when the bytes are not a well-formed message
 * (`e` names `what`, the message being read): truncated, field number 0,
 * wire type 6 or 7, an end-group key outside its group. */
int tile_pb_next(struct tile_pb_reader *r, struct tile_pb_field *f, const char *what, struct tile_error *e);

/* Calls fn(ctx, value) for each scalar of a repeated field in either form:
 * one unpacked field of wire type `elem`, or a packed TILE_PB_LEN field of
 * such scalars. A field of another wire type is an unknown field: no call,
 * 0. Returns -1 when a packed run is malformed or fn returns -1. */
typedef int (*tile_pb_scalar_fn)(void *ctx, uint64_t value, struct tile_error *e);
int tile_pb_scalars(const struct tile_pb_field *f, enum tile_pb_wire elem, tile_pb_scalar_fn fn, void *ctx,
                    const char *what, struct tile_error *e);
/* True when `f` is a run of a repeated scalar field of wire type `elem`
 * (unpacked or packed), i.e. tile_pb_scalars() reads it as that field. */
bool tile_pb_packs(const struct tile_pb_field *f, enum tile_pb_wire elem);

/* 0 when the TILE_PB_LEN field `f` is valid UTF-8, as proto3 requires of
 * a string field; else -1, TILE_EINVAL naming `what` (the field). Inline
 * for the short ASCII strings of names and ids, which are most of them. */
int tile_pb_utf8_check(const struct tile_pb_field *f, const char *what, struct tile_error *e);
static inline bool tile_pb_ascii(const struct tile_pb_field *f)
{
    uint8_t high = 0;
    for (size_t i = 0; i < f->len; i++)
        high |= f->data[i];
    return high < 0x80;
}
static inline int tile_pb_utf8(const struct tile_pb_field *f, const char *what, struct tile_error *e)
{
    return f->len <= 64 && tile_pb_ascii(f) ? 0 : tile_pb_utf8_check(f, what, e);
}

/* Writer. Each put writes at `p` and returns the position after what it
 * wrote; the caller sizes the buffer with the matching *_size(). */
size_t tile_pb_varint_size(uint64_t v);
uint8_t *tile_pb_put_varint(uint8_t *p, uint64_t v);
uint8_t *tile_pb_put_tag(uint8_t *p, uint32_t number, enum tile_pb_wire wire);
/* Tag and length of a length-delimited field whose `len` bytes follow. */
size_t tile_pb_len_head_size(uint32_t number, uint64_t len);
uint8_t *tile_pb_put_len_head(uint8_t *p, uint32_t number, uint64_t len);
/* A whole length-delimited field (tag, length, bytes). */
size_t tile_pb_bytes_size(uint32_t number, size_t len);
uint8_t *tile_pb_put_bytes(uint8_t *p, uint32_t number, const void *data, size_t len);

#endif
