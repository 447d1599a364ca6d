/* serve.h - `tiled serve`: run the daemon (HTTP, and gRPC with --grpc-port)
 * until SIGTERM/SIGINT. */
#ifndef TILED_SERVE_H
#define TILED_SERVE_H

/* argv[0] is the subcommand name. Returns the process exit status. */
int tiled_serve_main(int argc, char **argv);

#endif
