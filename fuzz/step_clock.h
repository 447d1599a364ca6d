/* step_clock.h - server/infra/clock.h on a clock the driver moves, for
 * fuzz_grpc_transport.c (linked in place of clock.c): time passes only
 * when step_clock_advance() says, so deadlines, ticks and the durations
 * replies carry (server-timing) are the same every time an input runs. The
 * three clocks read the same count: the monotonic ones in microseconds,
 * the wall clock in milliseconds from STEP_CLOCK_EPOCH_MS. */
#ifndef TILED_FUZZ_STEP_CLOCK_H
#define TILED_FUZZ_STEP_CLOCK_H

#include <stdint.h>

#include "clock.h"

#define STEP_CLOCK_EPOCH_MS 1700000000000u

void step_clock_set(uint64_t us);
void step_clock_advance(uint64_t us);

#endif
