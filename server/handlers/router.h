/* router.h - the route table: which route a request reaches. It names
 * every handler (handlers.h, v2_grpc.c's), so it is above all of them;
 * the service (service.c) asks it. */
#ifndef TILED_ROUTER_H
#define TILED_ROUTER_H

#include <stddef.h>

#include "route.h"

/* The route for a request that came by `transport`; NULL when there is
 * none. Then `allow` gets the methods the path does take ("" when the path
 * is unknown: 404, not 405). */
const struct tiled_route *tiled_route_find(enum tiled_transport transport, const char *method, const char *path, char *allow,
                                           size_t cap);

#endif
