/* h2_replies.h - the client's reading of what the gRPC transport sends, for
 * fuzz_grpc_transport.c: the server's bytes cut into HTTP/2 frames, header
 * blocks decoded (HPACK), and each stream's reply checked against gRPC over
 * HTTP/2 (PROTOCOL-HTTP2.md): response headers with :status first; DATA
 * only between them and the trailers, carrying one length-prefixed message,
 * uncompressed, exactly as long as its prefix says; trailers (or a
 * Trailers-Only response) with a grpc-status and END_STREAM; nothing on a
 * stream after it ended or was reset. A break of any rule calls
 * fuzz_fail(): output the sanitizers cannot see as wrong (bytes of a reply
 * lost, doubled or out of order) still fails the input. A frame cut off
 * when the connection closes is not read.
 */
#ifndef TILED_FUZZ_H2_REPLIES_H
#define TILED_FUZZ_H2_REPLIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A new connection; with `verbose`, every frame is printed to stderr with
 * its header fields (FUZZ_VERBOSE: what an input does). */
void h2_replies_begin(bool verbose);
/* Bytes the server wrote, in order. */
void h2_replies_read(const uint8_t *p, size_t n);
/* The connection is over: what was kept of it is freed (an input's
 * allocations end with it, as libFuzzer's leak check expects). */
void h2_replies_end(void);

#endif
