/* router.h - the route table: which route a request reaches. It names
 * every handler (handlers.h, v2_grpc.c's), so it is above all of them;
 * the service asks it through the function the daemon gives it (route.h's
 * tiled_route_find_fn, struct tiled_server's find_route). */
#ifndef TILED_ROUTER_H
#define TILED_ROUTER_H

#include <stddef.h>

#include "route.h"

/* The route for a request (route.h, tiled_route_find_fn). */
tiled_route_find_fn tiled_route_find;

#endif
