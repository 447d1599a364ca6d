/* grow.c - the one growable-buffer step (see grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

void *tile_grow(void *buf, size_t *cap, size_t len, size_t need, size_t unit, size_t first, size_t max)
{
    size_t want;
    if (__builtin_add_overflow(len, need, &want) || want > max)
        return NULL;
    if (want <= *cap)
        return buf;
    size_t ncap = *cap ? *cap : (first ? first : 1);
    while (ncap < want)
        ncap = ncap > SIZE_MAX / 2 ? want : ncap * 2;
    if (ncap > max)
        ncap = max;
    size_t bytes;
    if (unit == 0 || __builtin_mul_overflow(ncap, unit, &bytes))
        return NULL;
    void *nb = realloc(buf, bytes);
    if (!nb)
        return NULL;
    *cap = ncap;
    return nb;
}
