/* http.h - the HTTP transport's lifecycle (http.c). */
#ifndef TILED_HTTP_H
#define TILED_HTTP_H

#include <stdbool.h>

#include "error.h"

struct tiled_server;

/* Listens on cfg.host:cfg.port (TLS when configured). */
int tiled_http_start(struct tiled_server *srv, struct tile_error *e);
/* Starts the drain: new connections are held off (listener.h); requests in
 * flight, and the connections already waiting to be accepted, go on. */
void tiled_http_quiesce(struct tiled_server *srv);
/* Whether the drain is done with the connections: the listener is shut
 * (once its queue is empty) and no connection taken from it still waits
 * for its request to be read. Polled by the thread that called
 * tiled_http_quiesce; requests in flight are the service's to count. */
bool tiled_http_drained(struct tiled_server *srv);
void tiled_http_stop(struct tiled_server *srv);

#endif
