/* exchange.c - the labels of a finished request and its observers (see
 * exchange.h). */
#include "exchange.h"

#include <stddef.h>

const char *tiled_transport_name(enum tiled_transport transport)
{
    static const char *const names[] = {[TILED_TRANSPORT_HTTP] = "http", [TILED_TRANSPORT_GRPC] = "grpc"};
    _Static_assert(sizeof(names) / sizeof(names[0]) == TILED_TRANSPORT_COUNT, "a name per transport");
    return (unsigned)transport < TILED_TRANSPORT_COUNT ? names[transport] : "other";
}

static const char *const label_names[] = {
    [TILED_RL_V1_TILE] = "/v1/tile", [TILED_RL_V2_INFER] = "/v2/models/infer", [TILED_RL_V2] = "/v2",
    [TILED_RL_HEALTH] = "/v2/health", [TILED_RL_METRICS] = "/metrics",         [TILED_RL_GRPC] = "grpc",
    [TILED_RL_OTHER] = "other",
};
_Static_assert(sizeof(label_names) / sizeof(label_names[0]) == TILED_RL_COUNT, "a name per route label");

const char *tiled_route_label_name(enum tiled_route_label label)
{
    return (unsigned)label < TILED_RL_COUNT ? label_names[label] : label_names[TILED_RL_OTHER];
}

/* The registered observers: written before serving, read by every
 * request's end. */
#define MAX_OBSERVERS 8
static struct {
    tiled_exchange_observer_fn *fn;
    void *ctx;
} observers[MAX_OBSERVERS];
static int nobservers;

int tiled_exchange_observe(tiled_exchange_observer_fn *fn, void *ctx)
{
    if (nobservers == MAX_OBSERVERS)
        return -1;
    observers[nobservers].fn = fn;
    observers[nobservers].ctx = ctx;
    nobservers++;
    return 0;
}

void tiled_exchange_observe_none(void)
{
    nobservers = 0;
}

void tiled_exchange_ended(const struct tiled_exchange *x)
{
    for (int i = 0; i < nobservers; i++)
        observers[i].fn(x, observers[i].ctx);
}
