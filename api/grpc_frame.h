/* grpc_frame.h - gRPC's framing over HTTP/2, the parts that are plain
 * codecs: Length-Prefixed-Messages (1-byte compressed flag, 4-byte
 * big-endian length, the message) reassembled from DATA payloads whose
 * boundaries have nothing to do with message boundaries; the grpc-timeout
 * header; and the percent-encoding of grpc-message.
 */
#ifndef TILE_GRPC_FRAME_H
#define TILE_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TILE_GRPC_PREFIX 5

/* Reassembles one message at a time. `max` bounds a message's length
 * (0: the protocol's own bound, UINT32_MAX). */
struct tile_grpc_deframer {
    uint64_t max;
    bool compressed_ok; /* the call named a grpc-encoding: flag 1 is allowed (set after init) */
    uint8_t prefix[TILE_GRPC_PREFIX];
    size_t prefix_have;
    uint8_t *msg; /* tile_grpc_deframe only: malloc'd, msg_len bytes */
    size_t msg_len, msg_have;
    bool has_msg; /* the prefix is complete: inside a message */
};

/* What one tile_grpc_deframe_step found in the bytes it took: a message's
 * prefix completed (`start`, its length in msg_len), message bytes (`n` at
 * `bytes`, pointing into the caller's data), the message's last byte
 * (`end`). Any combination; a message of length 0 is start and end. */
struct tile_grpc_piece {
    bool start, end;
    bool compressed; /* with start: the message is compressed (flag 1) */
    size_t msg_len;
    const uint8_t *bytes;
    size_t n;
};

void tile_grpc_deframer_init(struct tile_grpc_deframer *d, uint64_t max);
void tile_grpc_deframer_free(struct tile_grpc_deframer *d);

/* Takes up to `len` bytes and returns how many it used; stops after the
 * bytes that complete a message, which *done then gets (malloc'd, the
 * caller frees it; *done_len bytes). Returns -1 for a message above `max`
 * (TILE_ETOOBIG, naming both sizes), a compressed one when the call named
 * no grpc-encoding (TILE_EUNSUPPORTED: compressed_ok unset) or no memory. */
long long tile_grpc_deframe(struct tile_grpc_deframer *d, const void *data, size_t len, uint8_t **done,
                            size_t *done_len, struct tile_error *e);
/* The same without a copy: the caller takes the message bytes where they
 * are (a transport appending them to its own buffer). Checks the prefix
 * like tile_grpc_deframe (limit, compressed flag) before any message byte
 * is passed on. Returns the bytes used (> 0 when len > 0), or -1. */
long long tile_grpc_deframe_step(struct tile_grpc_deframer *d, const void *data, size_t len,
                                 struct tile_grpc_piece *out, struct tile_error *e);
/* True between messages (no partial prefix or message pending). */
bool tile_grpc_deframer_idle(const struct tile_grpc_deframer *d);

/* Writes the prefix of an uncompressed message of `len` bytes. */
void tile_grpc_put_prefix(uint8_t out[TILE_GRPC_PREFIX], uint32_t len);

/* Parses a grpc-timeout value (1 to 8 digits and a unit: H, M, S, m, u,
 * n) into nanoseconds. Returns 0, or -1 when it is not one. */
int tile_grpc_timeout_parse(const char *s, uint64_t *ns);

/* Percent-encodes `msg` for grpc-message: bytes outside printable ASCII
 * and '%' become %XX. Writes at most cap-1 characters and a NUL, never
 * splitting an escape; returns the length written. */
size_t tile_grpc_message_encode(const char *msg, char *out, size_t cap);

#endif
