/* base.h - clocks and a bounded string copy, used by every server module. */
#ifndef TILED_BASE_H
#define TILED_BASE_H

#include <stddef.h>
#include <stdint.h>

/* Microseconds on the monotonic clock; milliseconds since the epoch. */
uint64_t tiled_now_us(void);
uint64_t tiled_wall_ms(void);

/* Copies the string `src` into dst[cap] (cap > 0), truncating; returns dst. */
char *tiled_copy_str(char *dst, size_t cap, const char *src);

#endif
