/* grpc.h - the gRPC transport's lifecycle (server/grpc/): the Open
 * Inference Protocol's RPCs over HTTP/2 (libnghttp2), with TLS (GnuTLS,
 * ALPN "h2") when --tls-cert is given, on --grpc-port. */
#ifndef TILED_GRPC_H
#define TILED_GRPC_H

#include <stdbool.h>

#include "error.h"

struct tiled_server;

/* Listens on cfg.host:cfg.grpc_port (nothing when it is -1) and sets
 * srv->grpc_port to the port bound. After tiled_http_start (TLS's PEM). */
int tiled_grpc_start(struct tiled_server *srv, struct tile_error *e);
/* Drain: lets no new connection in (the ones the kernel already
 * completed are still accepted: they may hold a call) and sends every
 * connection the two GOAWAYs of RFC 9113 section 6.8 (the notice, a PING
 * round trip, the last stream id); every stream the final one covers is
 * served, and each connection closes once they are answered. */
void tiled_grpc_quiesce(struct tiled_server *srv);
/* True once the drain shut the listener (the loops do, once no connection
 * waits in its accept queue: loop.c, "Going away") and the transport has
 * no connection left (or none ran). */
bool tiled_grpc_drained(struct tiled_server *srv);
/* A metrics provider (metrics.h), SERVER the struct tiled_server: the reply
 * bytes held for clients that have not read them, now and at most on one
 * connection (what --max-grpc-conn-memory bounds). Nothing without gRPC. */
struct tiled_metrics_out;
void tiled_grpc_metrics(struct tiled_metrics_out *o, void *server);
/* The HTTP/2 library's name and version as linked. */
const char *tiled_grpc_library(void);
/* Closes every connection (calls still open end as 499) and stops. */
void tiled_grpc_stop(struct tiled_server *srv);

#endif
