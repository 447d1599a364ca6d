/* recv_deadline.c - the deadline for receiving a request (see recv_deadline.h). */
#include "recv_deadline.h"

uint64_t tiled_recv_deadline_us(uint64_t start_us, uint64_t timeout_s, uint64_t received)
{
    const uint64_t per_byte_us = 1000000 / TILED_RECV_MIN_RATE;
    if (timeout_s > UINT64_MAX / 1000000 || received > UINT64_MAX / per_byte_us)
        return UINT64_MAX;
    uint64_t allowed = timeout_s * 1000000 + received * per_byte_us; /* each term < 2^64; check the sum */
    if (allowed < received * per_byte_us || allowed > UINT64_MAX - start_us)
        return UINT64_MAX;
    return start_us + allowed;
}
