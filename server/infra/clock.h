/* clock.h - the daemon's clocks, used by every server module (the bounded
 * string copy is text.h's). */
#ifndef TILED_CLOCK_H
#define TILED_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Microseconds on the monotonic clock; milliseconds since the epoch to the
 * kernel's tick (a model's last inference is stamped with it on every
 * request, where the exact clock cost five times as much: 24 against 5 ns
 * here). */
uint64_t tiled_now_us(void);
uint64_t tiled_wall_ms(void);
/* The monotonic clock to the kernel's tick (a few milliseconds): for
 * deadlines counted in seconds, read several times per request, where it
 * costs a fraction of tiled_now_us(). Not to be compared with the latter. */
uint64_t tiled_coarse_us(void);

#endif
