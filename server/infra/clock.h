/* clock.h - the daemon's clocks, used by every server module (the bounded
 * string copy is text.h's). */
#ifndef TILED_CLOCK_H
#define TILED_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Microseconds on the monotonic clock; milliseconds since the epoch. */
uint64_t tiled_now_us(void);
uint64_t tiled_wall_ms(void);


#endif
