/* route.c - what every route shares: transports, labels, methods (see
 * route.h; the table itself is router.c's). */
#include "route.h"

#include <string.h>

#include "reply.h"

static const char *const label_names[] = {
    [TILED_RL_V1_TILE] = "/v1/tile", [TILED_RL_V2_INFER] = "/v2/models/infer", [TILED_RL_V2] = "/v2",
    [TILED_RL_HEALTH] = "/v2/health", [TILED_RL_METRICS] = "/metrics",         [TILED_RL_GRPC] = "grpc",
    [TILED_RL_OTHER] = "other",
};
_Static_assert(sizeof(label_names) / sizeof(label_names[0]) == TILED_RL_COUNT, "a name per route label");

const char *tiled_transport_name(enum tiled_transport transport)
{
    static const char *const names[] = {[TILED_TRANSPORT_HTTP] = "http", [TILED_TRANSPORT_GRPC] = "grpc"};
    _Static_assert(sizeof(names) / sizeof(names[0]) == TILED_TRANSPORT_COUNT, "a name per transport");
    return (unsigned)transport < TILED_TRANSPORT_COUNT ? names[transport] : "other";
}

const char *tiled_route_label_name(enum tiled_route_label label)
{
    return (unsigned)label < TILED_RL_COUNT ? label_names[label] : label_names[TILED_RL_OTHER];
}

const char *tiled_allow_value(const char *method)
{
    return strcmp(method, "GET") == 0 ? "GET, HEAD" : method;
}

bool tiled_method_known(const char *method)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(method, known[i]) == 0)
            return true;
    }
    return false;
}

bool tiled_method_serves(const char *method, const char *want)
{
    return strcmp(method, want) == 0 || (strcmp(want, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

bool tiled_method_check(const char *method, const char *path, const char *want, struct tiled_reply *reply)
{
    if (tiled_method_serves(method, want))
        return true;
    tiled_reply_error(reply, TILED_METHOD_NOT_ALLOWED, "method %s is not allowed on %s (allowed: %s)", method, path,
                      tiled_allow_value(want));
    tiled_reply_header(reply, "Allow", tiled_allow_value(want));
    return false;
}
