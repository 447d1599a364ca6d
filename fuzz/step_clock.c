/* step_clock.c - see step_clock.h. */
#include "step_clock.h"

static uint64_t now_us;

void step_clock_set(uint64_t us)
{
    now_us = us;
}

void step_clock_advance(uint64_t us)
{
    now_us += us;
}

uint64_t tiled_now_us(void)
{
    return now_us;
}

uint64_t tiled_coarse_us(void)
{
    return now_us;
}

uint64_t tiled_wall_ms(void)
{
    return STEP_CLOCK_EPOCH_MS + now_us / 1000u;
}
