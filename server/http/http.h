/* http.h - the libmicrohttpd daemon's lifecycle (http.c). */
#ifndef TILED_HTTP_H
#define TILED_HTTP_H

#include "error.h"

struct tiled_server;

/* Listens on cfg.host:cfg.port (TLS when configured). */
int tiled_http_start(struct tiled_server *srv, struct tile_error *e);
/* Stops accepting; requests in flight go on. */
void tiled_http_quiesce(struct tiled_server *srv);
void tiled_http_stop(struct tiled_server *srv);

#endif
