/* recv_deadline.h - how long a client has to send its request, the one rule of
 * both transports: --header-timeout, plus a second per TILED_RECV_MIN_RATE
 * bytes it has sent so far (Apache mod_reqtimeout's body=20,MinRate=500).
 * A client that sends steadily at or above the rate is never late, however
 * large its request; one that trickles or stalls is. The idle timeout
 * cannot tell them apart, since every byte restarts it.
 *
 * HTTP applies it to a request body, from the end of its head to its last
 * byte (server/http/h1conn.c); gRPC to a unary call's whole request,
 * from its stream's start, and to each message of a streaming call, from
 * its prefix (server/grpc/call.c). A timeout of 0 turns it off.
 */
#ifndef TILED_RECV_DEADLINE_H
#define TILED_RECV_DEADLINE_H

#include <stdint.h>

#define TILED_RECV_MIN_RATE 500 /* bytes a second */
/* The rate as a string literal, for help texts. */
#define TILED_RECV_MIN_RATE_TEXT TILED_RECV_STR_(TILED_RECV_MIN_RATE)
#define TILED_RECV_STR_(x) TILED_RECV_STR__(x)
#define TILED_RECV_STR__(x) #x

/* When a request that began receiving at start_us, and has received
 * `received` bytes, must have sent the rest: start_us + timeout_s seconds
 * + a second per TILED_RECV_MIN_RATE bytes, saturating at UINT64_MAX. */
uint64_t tiled_recv_deadline_us(uint64_t start_us, uint64_t timeout_s, uint64_t received);

#endif
