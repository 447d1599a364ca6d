/* serve.h - `tiled serve`: run the daemon (HTTP, and gRPC with --grpc-port)
 * until SIGTERM/SIGINT. */
#ifndef TILED_SERVE_H
#define TILED_SERVE_H

#include <stddef.h>

struct tiled_server;
struct tile_error;

/* argv[0] is the subcommand name. Returns the process exit status. */
int tiled_serve_main(int argc, char **argv);
/* The libraries the daemon runs on, as linked, into DST ("nghttp2
 * 1.52.0, GnuTLS 3.7.9, ..."): `tiled --version` and the start event
 * (HTTP/1.1 is the project's own code: no library to name). */
void tiled_serve_libraries(char *dst, size_t cap);

/* Wires what the service reaches through registration rather than by
 * name, being below it: the route table (router.h) and the observers of
 * finished requests (exchange.h: the access log, the metrics, the trace
 * exporter and the v2 statistics, in that order). The daemon calls it
 * before serving; the unit tests' and the fuzzer's daemons call it too,
 * so they run what the daemon runs. Forgets earlier observers first.
 * Returns 0, or -1 with E when the observer table is full. */
int tiled_serve_wire(struct tiled_server *srv, struct tile_error *e);

#endif
