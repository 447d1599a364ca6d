/* serve.h - `tiled serve`: run the daemon (HTTP, and gRPC with --grpc-port)
 * until SIGTERM/SIGINT. */
#ifndef TILED_SERVE_H
#define TILED_SERVE_H

#include <stddef.h>

/* argv[0] is the subcommand name. Returns the process exit status. */
int tiled_serve_main(int argc, char **argv);
/* The libraries the daemon runs on, as linked, into DST ("nghttp2
 * 1.52.0, GnuTLS 3.7.9, ..."): `tiled --version` and the start event
 * (HTTP/1.1 is the project's own code: no library to name). */
void tiled_serve_libraries(char *dst, size_t cap);

#endif
